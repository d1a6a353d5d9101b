//! Broken checkpoints for `cases/invalid-checkpoints/`: tiny model directories written by the
//! project's own producers (reference `from_logical` on seeded layers, through [`crate::writer`])
//! and then broken in one way each. Kept in the library so the test can regenerate them in
//! memory and compare with the committed bytes.

use crate::error::CheckpointError;
use crate::writer::{ModelSpec, producer_tensors, quantization_config, seeded_layer, serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use w4a16_reference::ActDtype;
use w4a16_reference::formats::{Producer, Tensor, TensorData};

/// One broken model directory.
#[derive(Clone, Debug, PartialEq)]
pub struct InvalidCheckpoint {
    pub name: &'static str,
    /// What is broken, for the README.
    pub description: &'static str,
    /// A substring of the refusal message.
    pub expected: &'static str,
    /// File name → bytes (config.json, shards, index, expected.txt).
    pub files: BTreeMap<String, Vec<u8>>,
}

const G: usize = 32;
const Q: &str = "model.layers.0.self_attn.q_proj";
const K_PROJ: &str = "model.layers.0.self_attn.k_proj";
const V: &str = "model.layers.0.self_attn.v_proj";
const SHARD: &str = "model.safetensors";

fn json_bytes(v: &Value) -> Vec<u8> {
    let mut s = serde_json::to_string_pretty(v).expect("a Value serializes");
    s.push('\n');
    s.into_bytes()
}

/// The tensors of a tiny llama's q_proj (N = K = 64) from `producer`.
fn q_proj(producer: Producer, seed: u64, symmetric: bool, dtype: ActDtype) -> Vec<Tensor> {
    let layer = seeded_layer(seed, 64, 64, G, dtype, symmetric, false);
    producer_tensors(producer, &layer, Q)
        .expect("64 × 64 with G = 32 is writable by every producer")
}

fn config(producer: Producer, symmetric: bool, dtype: ActDtype) -> Value {
    ModelSpec::tiny_llama(dtype).config_json(Some(quantization_config(
        producer,
        Some(G),
        symmetric,
    )))
}

struct Builder {
    files: BTreeMap<String, Vec<u8>>,
}

impl Builder {
    fn new(config: &Value) -> Self {
        let mut files = BTreeMap::new();
        files.insert("config.json".to_string(), json_bytes(config));
        Builder { files }
    }

    fn shard(mut self, name: &str, tensors: &[Tensor]) -> Result<Self, CheckpointError> {
        self.files.insert(name.to_string(), serialize(tensors)?);
        Ok(self)
    }

    fn file(mut self, name: &str, bytes: Vec<u8>) -> Self {
        self.files.insert(name.to_string(), bytes);
        self
    }

    fn done(
        mut self,
        name: &'static str,
        description: &'static str,
        expected: &'static str,
    ) -> InvalidCheckpoint {
        self.files
            .insert("expected.txt".into(), format!("{expected}\n").into_bytes());
        InvalidCheckpoint {
            name,
            description,
            expected,
            files: self.files,
        }
    }
}

fn without(mut tensors: Vec<Tensor>, suffix: &str) -> Vec<Tensor> {
    tensors.retain(|t| !t.name.ends_with(&format!(".{suffix}")));
    tensors
}

/// Every broken checkpoint, in name order.
pub fn invalid_checkpoints() -> Result<Vec<InvalidCheckpoint>, CheckpointError> {
    let mut out = broken_configs()?;
    out.extend(broken_tensors()?);
    out.extend(broken_files()?);
    out.sort_by_key(|c| c.name);
    Ok(out)
}

/// A checkpoint broken in config.json alone: a sound q_proj from `producer` (seeded by `seed`)
/// under its config, edited by `edit`.
struct ConfigBreak {
    name: &'static str,
    description: &'static str,
    expected: &'static str,
    producer: Producer,
    seed: u64,
    symmetric: bool,
    edit: fn(&mut Value),
}

/// The config.json family: quantization methods, formats and dtypes the kernels do not take.
const CONFIG_BREAKS: [ConfigBreak; 6] = [
    ConfigBreak {
        name: "unknown-quant-method-exl2",
        description: "quantization_config.quant_method \"exl2\"",
        expected: "quantization_config.quant_method: expected \"compressed-tensors\", \"gptq\" or \"awq\", got \"exl2\"",
        producer: Producer::GptqV1,
        seed: 5,
        symmetric: true,
        edit: |cfg| cfg["quantization_config"] = json!({"quant_method": "exl2", "bits": 4.0}),
    },
    ConfigBreak {
        name: "awq-version-gemv",
        description: "AWQ with version \"gemv\" (another packing)",
        expected: "quantization_config.version: expected \"gemm\"",
        producer: Producer::Awq,
        seed: 6,
        symmetric: false,
        edit: |cfg| cfg["quantization_config"]["version"] = json!("gemv"),
    },
    ConfigBreak {
        name: "ct-format-marlin-24",
        description: "compressed-tensors with format \"marlin-24\" (2:4 sparse Marlin packing)",
        expected: "quantization_config.format: expected \"pack-quantized\", got \"marlin-24\"",
        producer: Producer::CompressedTensors,
        seed: 11,
        symmetric: true,
        edit: |cfg| cfg["quantization_config"]["format"] = json!("marlin-24"),
    },
    ConfigBreak {
        name: "gptq-bits-8",
        description: "GPTQ with bits = 8",
        expected: "quantization_config.bits: expected 4 (W4A16), got 8",
        producer: Producer::GptqV1,
        seed: 12,
        symmetric: true,
        edit: |cfg| cfg["quantization_config"]["bits"] = json!(8),
    },
    ConfigBreak {
        name: "float32-model",
        description: "config.json torch_dtype = float32 (the kernels take f16/bf16 activations)",
        expected: "config.json: torch_dtype: expected \"float16\" or \"bfloat16\"",
        producer: Producer::CompressedTensors,
        seed: 14,
        symmetric: true,
        edit: |cfg| cfg["torch_dtype"] = json!("float32"),
    },
    ConfigBreak {
        name: "missing-quantization-config",
        description: "config.json without quantization_config and no quantize_config.json",
        expected: "config.json: no quantization_config",
        producer: Producer::CompressedTensors,
        seed: 15,
        symmetric: true,
        edit: |cfg| {
            cfg.as_object_mut()
                .expect("object")
                .remove("quantization_config");
        },
    },
];

fn broken_configs() -> Result<Vec<InvalidCheckpoint>, CheckpointError> {
    CONFIG_BREAKS
        .iter()
        .map(|b| {
            let mut cfg = config(b.producer, b.symmetric, ActDtype::F16);
            (b.edit)(&mut cfg);
            let t = q_proj(b.producer, b.seed, b.symmetric, ActDtype::F16);
            Ok(Builder::new(&cfg)
                .shard(SHARD, &t)?
                .done(b.name, b.description, b.expected))
        })
        .collect()
}

/// The tensor family: a tensor missing, extra, of the wrong dtype or shape, or a g_idx that
/// permutes the groups.
fn broken_tensors() -> Result<Vec<InvalidCheckpoint>, CheckpointError> {
    use ActDtype::{Bf16, F16};
    use Producer::{Awq, CompressedTensors as Ct, GptqV1, GptqV2};
    let mut out = Vec::new();

    // GPTQ desc_act with a permuted g_idx.
    let mut cfg = config(GptqV1, false, F16);
    cfg["quantization_config"]["desc_act"] = json!(true);
    let mut t = q_proj(GptqV1, 1, false, F16);
    t.push(Tensor::new(
        format!("{Q}.g_idx"),
        vec![64],
        TensorData::I32((0..64).map(|k| k % 2).collect()),
    ));
    out.push(Builder::new(&cfg).shard(SHARD, &t)?.done(
        "gptq-act-order",
        "GPTQ v1 with desc_act = true and a non-trivial g_idx (groups interleaved)",
        "q_proj.g_idx: act-order checkpoints are not supported: g_idx is not trivial",
    ));

    out.push(
        Builder::new(&config(GptqV2, true, F16))
            .shard(SHARD, &without(q_proj(GptqV2, 2, true, F16), "scales"))?
            .done(
                "gptq-missing-scales",
                "GPTQ v2 q_proj without its scales tensor",
                "missing tensor model.layers.0.self_attn.q_proj.scales",
            ),
    );

    let mut t = q_proj(Awq, 3, false, F16);
    t.push(Tensor::new(
        format!("{Q}.workspace"),
        vec![8],
        TensorData::I32(vec![0; 8]),
    ));
    out.push(
        Builder::new(&config(Awq, false, F16))
            .shard(SHARD, &t)?
            .done(
                "awq-extra-tensor",
                "AWQ q_proj with an extra tensor beside qweight/qzeros/scales",
                "model.layers.0.self_attn.q_proj.workspace: unexpected tensor",
            ),
    );

    // k_proj with N = 64 where config.json says 2 KV heads of 16.
    let layer = seeded_layer(4, 64, 64, G, F16, true, false);
    let t = producer_tensors(Ct, &layer, K_PROJ).expect("writable");
    out.push(Builder::new(&config(Ct, true, F16)).shard(SHARD, &t)?.done(
        "ct-kv-shape-mismatch",
        "compressed-tensors k_proj with N = 64 while config.json num_key_value_heads × head_dim = 2 × 16 = 32",
        "k_proj.weight_shape: N = 64 disagrees with config.json num_key_value_heads × head_dim = 2 × 16 = 32",
    ));

    // Scales written as bf16 in a float16 model.
    let t = q_proj(GptqV2, 7, false, Bf16);
    out.push(
        Builder::new(&config(GptqV2, false, F16))
            .shard(SHARD, &t)?
            .done(
                "gptq-bf16-scales-in-f16-model",
                "GPTQ v2 scales stored as bf16 while config.json torch_dtype = float16",
                "q_proj.scales: expected dtype f16",
            ),
    );

    out.push(unpacked_zero_points()?);
    Ok(out)
}

/// The old ABI: zero points unpacked [N, K/G] in the activation dtype.
fn unpacked_zero_points() -> Result<InvalidCheckpoint, CheckpointError> {
    use ActDtype::F16;
    use Producer::CompressedTensors as Ct;
    let layer = seeded_layer(13, 64, 64, G, F16, false, false);
    let mut t = producer_tensors(Ct, &layer, Q).expect("writable");
    for x in &mut t {
        if x.name.ends_with("weight_zero_point") {
            let z = layer
                .zeros
                .as_ref()
                .expect("asymmetric")
                .iter()
                .map(|&z| F16.from_f64(f64::from(z)))
                .collect();
            *x = Tensor::new(x.name.clone(), vec![64, 2], TensorData::F16(z));
        }
    }
    Ok(Builder::new(&config(Ct, false, F16)).shard(SHARD, &t)?.done(
        "ct-unpacked-zero-points",
        "compressed-tensors asymmetric layer with zero points unpacked as f16 [N, K/G] (the legacy ABI)",
        "q_proj.weight_zero_point: expected dtype i32 with shape [ceil(N/8), K/G] = [8, 2], got f16 [64, 2]",
    ))
}

/// The file family: a shard cut short, an index that points at the wrong shard.
fn broken_files() -> Result<Vec<InvalidCheckpoint>, CheckpointError> {
    use ActDtype::F16;
    use Producer::{CompressedTensors as Ct, GptqV2};
    let mut out = Vec::new();

    let mut bytes = serialize(&q_proj(Ct, 8, false, F16))?;
    bytes.truncate(bytes.len() - 100);
    out.push(
        Builder::new(&config(Ct, false, F16))
            .file(SHARD, bytes)
            .done(
                "ct-truncated-safetensors",
                "compressed-tensors shard cut 100 bytes short",
                "model.safetensors: truncated safetensors file: the header's tensors end at byte",
            ),
    );

    // Two shards; the index puts v_proj.qweight in shard 1, which lacks it.
    let s1 = "model-00001-of-00002.safetensors";
    let s2 = "model-00002-of-00002.safetensors";
    let layer = seeded_layer(9, 32, 64, G, F16, true, false);
    let v = producer_tensors(GptqV2, &layer, V).expect("writable");
    let q = q_proj(GptqV2, 10, true, F16);
    let mut map = BTreeMap::new();
    for t in &q {
        map.insert(t.name.clone(), s1.to_string());
    }
    for t in &v {
        map.insert(t.name.clone(), s2.to_string());
    }
    map.insert(format!("{V}.qweight"), s1.to_string());
    let v = without(v, "qweight");
    out.push(
        Builder::new(&config(GptqV2, true, F16))
            .shard(s1, &q)?
            .shard(s2, &v)?
            .file(
                crate::shards::INDEX_JSON,
                json_bytes(&json!({"metadata": {}, "weight_map": map})),
            )
            .done(
                "index-tensor-not-in-shard",
                "model.safetensors.index.json names v_proj.qweight in shard 1 of 2, which does not hold it",
                "weight_map puts model.layers.0.self_attn.v_proj.qweight in model-00001-of-00002.safetensors, but model-00001-of-00002.safetensors has no tensor of that name",
            ),
    );
    Ok(out)
}

/// Writes every broken checkpoint under `root/<name>/` (replacing what is there) and the
/// README listing them.
pub fn write_invalid_checkpoints(root: &Path) -> Result<Vec<InvalidCheckpoint>, CheckpointError> {
    let cases = invalid_checkpoints()?;
    std::fs::create_dir_all(root).map_err(|e| CheckpointError::io(root, e))?;
    for c in &cases {
        let dir = root.join(c.name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| CheckpointError::io(&dir, e))?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| CheckpointError::io(&dir, e))?;
        for (file, bytes) in &c.files {
            let path = dir.join(file);
            std::fs::write(&path, bytes).map_err(|e| CheckpointError::io(&path, e))?;
        }
    }
    let path = root.join("README.md");
    std::fs::write(&path, readme(&cases)).map_err(|e| CheckpointError::io(&path, e))?;
    Ok(cases)
}

pub fn readme(cases: &[InvalidCheckpoint]) -> String {
    let mut s = String::from(
        "# Broken checkpoints\n\n\
         Each folder is a tiny Hugging Face style model directory (config.json, safetensors \
         shards, an index where relevant) that `w4a16-checkpoint` must refuse before any launch; \
         `expected.txt` holds a substring of the refusal message.\n\n\
         **Written by the project's producers**, not by the producer libraries: seeded layers \
         quantized by the reference and packed by its own compressed-tensors, GPTQ and AWQ \
         writers (`w4a16_reference::formats::*::from_logical`), then broken in one way each. \
         Regenerate with\n\n\
         ```\ncargo run -p w4a16-checkpoint --example make-invalid-checkpoints\n```\n\n\
         (`checkpoint/tests/invalid_checkpoints.rs` checks the committed bytes are up to date \
         and that each folder is refused with its message.)\n\n\
         | folder | what is broken | expected message contains |\n|---|---|---|\n",
    );
    for c in cases {
        s.push_str(&format!(
            "| `{}` | {} | `{}` |\n",
            c.name,
            c.description,
            c.expected.replace('|', "\\|")
        ));
    }
    s
}
