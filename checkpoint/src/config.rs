//! `config.json` (architecture and `quantization_config`) and AutoGPTQ's `quantize_config.json`.
//!
//! Only what the checks need is read. Anything the kernels cannot take (f32 models, bits ≠ 4, a
//! compressed-tensors format other than pack-quantized, AWQ GEMV, …) is a typed refusal naming
//! the file and the field, never a guess.

use crate::error::CheckpointError;
use serde_json::{Map, Value};
use std::path::Path;
use w4a16_reference::ActDtype;
use w4a16_reference::formats::{GptqVersion, Producer};

pub const CONFIG_JSON: &str = "config.json";
pub const QUANTIZE_CONFIG_JSON: &str = "quantize_config.json";

/// Where a multimodal config.json keeps its language model's sizes.
const TEXT_CONFIGS: [&str; 3] = ["text_config", "llm_config", "language_config"];

/// The architecture as config.json states it; every linear's shape is checked against it.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// `architectures[0]` (empty when absent).
    pub architecture: String,
    pub hidden_size: usize,
    pub intermediate_size: Option<usize>,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    /// Defaults to `num_attention_heads` (no GQA).
    pub num_key_value_heads: usize,
    /// Defaults to `hidden_size / num_attention_heads`.
    pub head_dim: usize,
    /// `torch_dtype` (or `dtype`): the activation dtype of every kernel call.
    pub dtype: ActDtype,
    pub max_position_embeddings: Option<usize>,
    /// `num_experts`, `num_local_experts` or `n_routed_experts`.
    pub num_experts: Option<usize>,
    pub num_experts_per_tok: Option<usize>,
    pub moe_intermediate_size: Option<usize>,
    pub shared_expert_intermediate_size: Option<usize>,
    /// Multi-head latent attention (DeepSeek `kv_lora_rank`): q/k/v shapes follow other rules,
    /// so the attention cross-checks are skipped.
    pub latent_attention: bool,
    pub quantization: QuantizationConfig,
}

/// Group size as configured; channelwise (`-1`, strategy "channel") becomes K per layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupSize {
    Size(usize),
    Channelwise,
}

impl GroupSize {
    pub fn resolve(self, k: usize) -> usize {
        match self {
            GroupSize::Size(g) => g,
            GroupSize::Channelwise => k,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantMethod {
    CompressedTensors,
    Gptq(GptqVersion),
    Awq,
}

impl QuantMethod {
    pub fn producer(self) -> Producer {
        match self {
            QuantMethod::CompressedTensors => Producer::CompressedTensors,
            QuantMethod::Gptq(GptqVersion::V1) => Producer::GptqV1,
            QuantMethod::Gptq(GptqVersion::V2) => Producer::GptqV2,
            QuantMethod::Awq => Producer::Awq,
        }
    }
}

/// One weight scheme: which modules it covers and how they are quantized. GPTQ and AWQ have one
/// (targets `Linear`); compressed-tensors has one per config group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantScheme {
    /// Config group name (compressed-tensors) or the method name.
    pub name: String,
    /// `Linear`, module names (matched as a suffix at a `.`), or `re:` regexes.
    pub targets: Vec<String>,
    pub group_size: GroupSize,
    pub symmetric: bool,
    /// GPTQ `desc_act`, compressed-tensors `actorder: "group"`: a g_idx is expected, and accepted
    /// only when it is trivial.
    pub act_order: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantizationConfig {
    pub method: QuantMethod,
    /// The file the settings came from (`config.json` or `quantize_config.json`).
    pub file: String,
    pub schemes: Vec<QuantScheme>,
    /// Modules left unquantized (names or `re:` regexes).
    pub ignore: Vec<String>,
}

impl QuantizationConfig {
    /// The first scheme's group size (the only one outside compressed-tensors).
    pub fn group_size(&self) -> GroupSize {
        self.schemes[0].group_size
    }

    pub fn symmetric(&self) -> bool {
        self.schemes[0].symmetric
    }

    pub fn act_order(&self) -> bool {
        self.schemes.iter().any(|s| s.act_order)
    }

    /// The scheme covering `module`, if any (first match, as compressed-tensors applies them).
    pub fn scheme_for(&self, module: &str) -> Option<&QuantScheme> {
        self.schemes
            .iter()
            .find(|s| s.targets.iter().any(|t| target_matches(t, module, true)))
    }

    pub fn is_ignored(&self, module: &str) -> bool {
        self.ignore.iter().any(|t| target_matches(t, module, false))
    }
}

/// compressed-tensors target matching: `re:` regex (full match), `Linear` (any linear when
/// `linear_class` is set), else the module's name or a suffix of it at a `.` boundary.
pub fn target_matches(target: &str, module: &str, linear_class: bool) -> bool {
    if let Some(re) = target.strip_prefix("re:") {
        return regex_lite::Regex::new(&format!("^(?:{re})$")).is_ok_and(|r| r.is_match(module));
    }
    if linear_class && target == "Linear" {
        return true;
    }
    module == target || module.ends_with(&format!(".{target}"))
}

fn read_json(path: &Path, file: &str) -> Result<Value, CheckpointError> {
    let text = std::fs::read_to_string(path).map_err(|e| CheckpointError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| CheckpointError::ConfigJson {
        file: file.to_string(),
        detail: e.to_string(),
    })
}

#[derive(Clone, Copy)]
struct Fields<'a> {
    file: &'a str,
    obj: &'a Map<String, Value>,
    /// Prefix printed before field names (`quantization_config.`).
    prefix: &'a str,
}

impl<'a> Fields<'a> {
    fn err(&self, field: &str, expected: &str, got: &Value) -> CheckpointError {
        CheckpointError::ConfigField {
            file: self.file.to_string(),
            field: format!("{}{field}", self.prefix),
            expected: expected.to_string(),
            got: got.to_string(),
        }
    }

    fn unknown(&self, field: &str, expected: &str, got: &Value) -> CheckpointError {
        CheckpointError::UnknownQuantization {
            file: self.file.to_string(),
            field: format!("{}{field}", self.prefix),
            got: got.to_string(),
            expected: expected.to_string(),
        }
    }

    fn get(&self, field: &str) -> Option<&'a Value> {
        self.obj.get(field).filter(|v| !v.is_null())
    }

    fn usize_opt(&self, field: &str) -> Result<Option<usize>, CheckpointError> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(|x| Some(x as usize))
                .ok_or_else(|| self.err(field, "a non-negative integer", v)),
        }
    }

    fn usize_req(&self, field: &str) -> Result<usize, CheckpointError> {
        self.usize_opt(field)?
            .ok_or_else(|| self.err(field, "a non-negative integer", &Value::Null))
    }

    fn positive(&self, field: &str) -> Result<usize, CheckpointError> {
        match self.usize_req(field)? {
            0 => Err(self.err(field, "a positive integer", &Value::from(0))),
            v => Ok(v),
        }
    }

    fn bool_or(&self, field: &str, default: bool) -> Result<bool, CheckpointError> {
        match self.get(field) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| self.err(field, "true or false", v)),
        }
    }

    fn str_opt(&self, field: &str) -> Result<Option<&'a str>, CheckpointError> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| self.err(field, "a string", v)),
        }
    }

    fn strings(&self, field: &str) -> Result<Vec<String>, CheckpointError> {
        match self.get(field) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| self.err(field, "a list of strings", v))
                })
                .collect(),
            Some(v) => Err(self.err(field, "a list of strings", v)),
        }
    }
}

impl ModelConfig {
    /// Reads `dir/config.json`, and `dir/quantize_config.json` when config.json has no
    /// `quantization_config`.
    pub fn load(dir: &Path) -> Result<ModelConfig, CheckpointError> {
        let value = read_json(&dir.join(CONFIG_JSON), CONFIG_JSON)?;
        let quant = match value.get("quantization_config").filter(|v| !v.is_null()) {
            Some(q) => QuantizationConfig::parse(q, CONFIG_JSON, "quantization_config.", None)?,
            None => {
                let path = dir.join(QUANTIZE_CONFIG_JSON);
                if !path.exists() {
                    return Err(CheckpointError::MissingQuantizationConfig {
                        file: CONFIG_JSON.to_string(),
                    });
                }
                let q = read_json(&path, QUANTIZE_CONFIG_JSON)?;
                // AutoGPTQ's own file often has no quant_method: it is GPTQ by construction.
                QuantizationConfig::parse(&q, QUANTIZE_CONFIG_JSON, "", Some("gptq"))?
            }
        };
        Self::parse(&value, quant)
    }

    /// The architecture fields of a parsed config.json, with its quantization already read.
    pub fn parse(value: &Value, quantization: QuantizationConfig) -> Result<Self, CheckpointError> {
        let empty = Map::new();
        let obj = value.as_object().unwrap_or(&empty);
        let top = Fields {
            file: CONFIG_JSON,
            obj,
            prefix: "",
        };
        if !value.is_object() {
            return Err(top.err("(top level)", "a JSON object", value));
        }
        // A multimodal model keeps its language model's sizes in a sub-config (Gemma 3,
        // Llama 4, Mistral 3: `text_config`; InternVL: `llm_config`); the quantized decoder
        // is that language model.
        let text = TEXT_CONFIGS.iter().find_map(|key| {
            match (obj.contains_key("hidden_size"), obj.get(*key)) {
                (false, Some(Value::Object(sub))) => Some((*key, sub)),
                _ => None,
            }
        });
        let prefix = text.map(|(key, _)| format!("{key}.")).unwrap_or_default();
        let f = match text {
            Some((_, sub)) => Fields {
                file: CONFIG_JSON,
                obj: sub,
                prefix: &prefix,
            },
            None => top,
        };
        let architecture = match f.get("architectures") {
            Some(Value::Array(a)) => a.first().and_then(Value::as_str).unwrap_or("").to_string(),
            _ => String::new(),
        };
        let hidden_size = f.positive("hidden_size")?;
        let num_attention_heads = f.positive("num_attention_heads")?;
        let num_key_value_heads = f
            .usize_opt("num_key_value_heads")?
            .unwrap_or(num_attention_heads);
        let head_dim = match f.usize_opt("head_dim")? {
            Some(h) => h,
            None => hidden_size / num_attention_heads,
        };
        // The dtype is the whole model's (top level), else the language model's.
        let holder = if top.get("torch_dtype").is_some() || top.get("dtype").is_some() {
            &top
        } else {
            &f
        };
        let dtype_field = if holder.get("torch_dtype").is_some() {
            "torch_dtype"
        } else {
            "dtype"
        };
        let dtype = match holder.str_opt(dtype_field)? {
            Some("float16") => ActDtype::F16,
            Some("bfloat16") => ActDtype::Bf16,
            _ => {
                return Err(holder.err(
                    dtype_field,
                    "\"float16\" or \"bfloat16\" (the kernels take f16/bf16 activations; f32 models are refused)",
                    holder.get(dtype_field).unwrap_or(&Value::Null),
                ));
            }
        };
        let num_experts = match f.usize_opt("num_experts")? {
            Some(e) => Some(e),
            None => match f.usize_opt("num_local_experts")? {
                Some(e) => Some(e),
                None => f.usize_opt("n_routed_experts")?,
            },
        }
        .filter(|&e| e > 0);
        Ok(ModelConfig {
            architecture,
            hidden_size,
            // Llama 4 names its dense MLP's size `intermediate_size_mlp` (its `intermediate_size`
            // is the experts'); a per-layer list (OpenELM) fixes no single size: not checked.
            intermediate_size: match f.usize_opt("intermediate_size_mlp")? {
                Some(i) => Some(i),
                None if matches!(f.get("intermediate_size"), Some(Value::Array(_))) => None,
                None => f.usize_opt("intermediate_size")?,
            },
            num_hidden_layers: f.usize_req("num_hidden_layers")?,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            dtype,
            max_position_embeddings: f.usize_opt("max_position_embeddings")?,
            num_experts,
            num_experts_per_tok: f.usize_opt("num_experts_per_tok")?,
            moe_intermediate_size: f.usize_opt("moe_intermediate_size")?,
            shared_expert_intermediate_size: f.usize_opt("shared_expert_intermediate_size")?,
            latent_attention: f.get("kv_lora_rank").is_some(),
            quantization,
        })
    }
}

impl QuantizationConfig {
    /// Parses a `quantization_config` object; `default_method` applies when it has no
    /// `quant_method` (AutoGPTQ's quantize_config.json).
    pub fn parse(
        value: &Value,
        file: &str,
        prefix: &str,
        default_method: Option<&str>,
    ) -> Result<Self, CheckpointError> {
        let empty = Map::new();
        let f = Fields {
            file,
            obj: value.as_object().unwrap_or(&empty),
            prefix,
        };
        if !value.is_object() {
            return Err(f.err("(top level)", "a JSON object", value));
        }
        let method = match f.str_opt("quant_method")?.or(default_method) {
            Some(m) => m.to_ascii_lowercase(),
            None => {
                return Err(f.unknown(
                    "quant_method",
                    "\"compressed-tensors\", \"gptq\" or \"awq\"",
                    &Value::Null,
                ));
            }
        };
        match method.as_str() {
            "compressed-tensors" => parse_compressed_tensors(&f),
            "gptq" => parse_gptq(&f),
            "awq" => parse_awq(&f),
            _ => Err(f.unknown(
                "quant_method",
                "\"compressed-tensors\", \"gptq\" or \"awq\"",
                f.get("quant_method").unwrap_or(&Value::Null),
            )),
        }
    }
}

fn expect_bits(f: &Fields<'_>, fields: &[&str]) -> Result<(), CheckpointError> {
    for field in fields {
        if let Some(v) = f.get(field) {
            if v.as_u64() != Some(4) {
                return Err(f.unknown(field, "4 (W4A16)", v));
            }
            return Ok(());
        }
    }
    Err(f.unknown(fields[0], "4 (W4A16)", &Value::Null))
}

/// `-1` is channelwise; any other value must be positive.
fn group_size(f: &Fields<'_>, fields: &[&str]) -> Result<GroupSize, CheckpointError> {
    for field in fields {
        if let Some(v) = f.get(field) {
            return match v.as_i64() {
                Some(-1) => Ok(GroupSize::Channelwise),
                Some(g) if g > 0 => Ok(GroupSize::Size(g as usize)),
                _ => Err(f.err(field, "a positive group size or -1 (channelwise)", v)),
            };
        }
    }
    Err(f.err(
        fields[0],
        "a positive group size or -1 (channelwise)",
        &Value::Null,
    ))
}

fn parse_gptq(f: &Fields<'_>) -> Result<QuantizationConfig, CheckpointError> {
    expect_bits(f, &["bits"])?;
    let version = match f.str_opt("checkpoint_format")? {
        None | Some("gptq") => GptqVersion::V1,
        Some("gptq_v2") => GptqVersion::V2,
        Some(_) => {
            return Err(f.unknown(
                "checkpoint_format",
                "\"gptq\" (v1) or \"gptq_v2\"",
                f.get("checkpoint_format").unwrap_or(&Value::Null),
            ));
        }
    };
    if f.bool_or("is_marlin_format", false)? {
        return Err(f.unknown("is_marlin_format", "false", &Value::Bool(true)));
    }
    Ok(QuantizationConfig {
        method: QuantMethod::Gptq(version),
        file: f.file.to_string(),
        schemes: vec![QuantScheme {
            name: "gptq".into(),
            targets: vec!["Linear".into()],
            group_size: group_size(f, &["group_size"])?,
            symmetric: f.bool_or("sym", true)?,
            act_order: f.bool_or("desc_act", false)?,
        }],
        ignore: f.strings("modules_to_not_convert")?,
    })
}

fn parse_awq(f: &Fields<'_>) -> Result<QuantizationConfig, CheckpointError> {
    expect_bits(f, &["bits", "w_bit"])?;
    if let Some(v) = f.get("version")
        && !v.as_str().is_some_and(|s| s.eq_ignore_ascii_case("gemm"))
    {
        return Err(f.unknown(
            "version",
            "\"gemm\" (GEMV, Marlin and ExLlama layouts are not read)",
            v,
        ));
    }
    Ok(QuantizationConfig {
        method: QuantMethod::Awq,
        file: f.file.to_string(),
        schemes: vec![QuantScheme {
            name: "awq".into(),
            targets: vec!["Linear".into()],
            group_size: group_size(f, &["group_size", "q_group_size"])?,
            symmetric: !f.bool_or("zero_point", true)?,
            act_order: false,
        }],
        ignore: f.strings("modules_to_not_convert")?,
    })
}

fn parse_compressed_tensors(f: &Fields<'_>) -> Result<QuantizationConfig, CheckpointError> {
    let top_format = f.str_opt("format")?;
    let groups = match f.get("config_groups") {
        Some(Value::Object(g)) if !g.is_empty() => g,
        other => {
            return Err(f.err(
                "config_groups",
                "an object with at least one config group",
                other.unwrap_or(&Value::Null),
            ));
        }
    };
    let mut schemes = Vec::new();
    for (name, group) in groups {
        let prefix = format!("{}config_groups.{name}.", f.prefix);
        let empty = Map::new();
        let g = Fields {
            file: f.file,
            obj: group.as_object().unwrap_or(&empty),
            prefix: &prefix,
        };
        let format = g.str_opt("format")?.or(top_format);
        if format != Some("pack-quantized") {
            let got = format.map_or(Value::Null, Value::from);
            let field = if g.get("format").is_some() {
                g.prefix.to_string() + "format"
            } else {
                f.prefix.to_string() + "format"
            };
            return Err(CheckpointError::UnknownQuantization {
                file: f.file.to_string(),
                field,
                got: got.to_string(),
                expected: "\"pack-quantized\"".into(),
            });
        }
        let wprefix = format!("{prefix}weights.");
        let w = match g.get("weights") {
            Some(Value::Object(w)) => Fields {
                file: f.file,
                obj: w,
                prefix: &wprefix,
            },
            other => {
                return Err(g.err(
                    "weights",
                    "an object (weight quantization args)",
                    other.unwrap_or(&Value::Null),
                ));
            }
        };
        expect_bits(&w, &["num_bits"])?;
        if let Some(t) = w.str_opt("type")?
            && t != "int"
        {
            return Err(w.unknown("type", "\"int\"", &Value::from(t)));
        }
        let group_size = match w.str_opt("strategy")? {
            Some("group") => group_size(&w, &["group_size"])?,
            Some("channel") => GroupSize::Channelwise,
            other => {
                return Err(w.unknown(
                    "strategy",
                    "\"group\" or \"channel\"",
                    &other.map_or(Value::Null, Value::from),
                ));
            }
        };
        if w.bool_or("dynamic", false)? {
            return Err(w.unknown("dynamic", "false", &Value::Bool(true)));
        }
        let act_order = match w.get("actorder") {
            None | Some(Value::Bool(false)) => false,
            Some(Value::String(s)) if s == "group" => true,
            // "weight"/"static" reorder during quantization but store contiguous groups.
            Some(Value::String(s)) if s == "weight" || s == "static" => false,
            Some(v) => {
                return Err(w.unknown("actorder", "null, \"group\", \"weight\" or \"static\"", v));
            }
        };
        if let Some(a) = g.get("input_activations") {
            return Err(g.unknown("input_activations", "null (weight-only W4A16)", a));
        }
        schemes.push(QuantScheme {
            name: name.clone(),
            targets: g.strings("targets")?,
            group_size,
            symmetric: w.bool_or("symmetric", true)?,
            act_order,
        });
    }
    Ok(QuantizationConfig {
        method: QuantMethod::CompressedTensors,
        file: f.file.to_string(),
        schemes,
        ignore: f.strings("ignore")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn quant(v: Value) -> Result<QuantizationConfig, CheckpointError> {
        QuantizationConfig::parse(&v, CONFIG_JSON, "quantization_config.", None)
    }

    #[test]
    fn gptq_defaults_to_v1_and_channelwise_is_minus_one() {
        let q = quant(json!({"quant_method": "gptq", "bits": 4, "group_size": -1, "desc_act": false, "sym": false}))
            .unwrap();
        assert_eq!(q.method, QuantMethod::Gptq(GptqVersion::V1));
        assert_eq!(q.group_size(), GroupSize::Channelwise);
        assert!(!q.symmetric());
        let q = quant(json!({"quant_method": "gptq", "bits": 4, "group_size": 128, "checkpoint_format": "gptq_v2"}))
            .unwrap();
        assert_eq!(q.method.producer(), Producer::GptqV2);
    }

    #[test]
    fn refusals_name_the_field() {
        let e = quant(json!({"quant_method": "gptq", "bits": 8, "group_size": 128})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "config.json: unsupported quantization: quantization_config.bits: expected 4 (W4A16), got 8"
        );
        let e =
            quant(json!({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "GEMV"}))
                .unwrap_err();
        assert!(e.to_string().contains("quantization_config.version"), "{e}");
        let e = quant(json!({"quant_method": "exl2"})).unwrap_err();
        assert!(e.to_string().contains("got \"exl2\""), "{e}");
    }

    #[test]
    fn compressed_tensors_targets_and_regex_ignore() {
        let q = quant(json!({
            "quant_method": "compressed-tensors", "format": "pack-quantized",
            "ignore": ["lm_head", "re:.*mlp\\.gate$"],
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": false, "actorder": null}}}
        }))
        .unwrap();
        assert_eq!(q.group_size(), GroupSize::Size(32));
        assert!(q.is_ignored("lm_head"));
        assert!(q.is_ignored("model.layers.3.mlp.gate"));
        assert!(!q.is_ignored("model.layers.3.mlp.gate_proj"));
        assert!(q.scheme_for("model.layers.0.self_attn.q_proj").is_some());
    }
}
