//! Writes Hugging Face style model directories from reference [`Tensor`]s with the safetensors
//! crate's serializer: the project's producers' output as a model loader would find it. Used by
//! the invalid-checkpoint generator and the tests; the bytes are deterministic (the serializer
//! orders tensors by dtype, then name).

use crate::error::CheckpointError;
use crate::shards::INDEX_JSON;
use safetensors::tensor::{Dtype, View};
use serde_json::{Value, json};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;
use w4a16_reference::formats::{
    AwqLayer, CompressedTensorsLayer, GptqLayer, GptqVersion, LayerError, Producer, Tensor,
    TensorData,
};
use w4a16_reference::{ActDtype, QuantizedLayer};

struct Bytes {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for &Bytes {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

fn to_bytes(t: &Tensor) -> Bytes {
    let (dtype, data): (Dtype, Vec<u8>) = match &t.data {
        TensorData::I32(v) => (Dtype::I32, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        TensorData::I64(v) => (Dtype::I64, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        TensorData::U32(v) => (Dtype::U32, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        TensorData::F16(v) => (Dtype::F16, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        TensorData::Bf16(v) => (
            Dtype::BF16,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        TensorData::F32(v) => (Dtype::F32, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
    };
    Bytes {
        dtype,
        shape: t.shape.clone(),
        data,
    }
}

/// The safetensors bytes of `tensors` (named by their `name`).
pub fn serialize(tensors: &[Tensor]) -> Result<Vec<u8>, CheckpointError> {
    let bytes: Vec<(String, Bytes)> = tensors
        .iter()
        .map(|t| (t.name.clone(), to_bytes(t)))
        .collect();
    safetensors::tensor::serialize(bytes.iter().map(|(n, b)| (n.as_str(), b)), None).map_err(|e| {
        CheckpointError::Safetensors {
            shard: "(writing)".into(),
            detail: e.to_string(),
        }
    })
}

/// Writes `tensors` as one safetensors file, the same bytes as [`serialize`], streamed to the
/// file so a GB-sized shard is never also held as one buffer.
pub fn write_safetensors(path: &Path, tensors: &[Tensor]) -> Result<(), CheckpointError> {
    let bytes: Vec<(String, Bytes)> = tensors
        .iter()
        .map(|t| (t.name.clone(), to_bytes(t)))
        .collect();
    safetensors::tensor::serialize_to_file(bytes.iter().map(|(n, b)| (n.as_str(), b)), None, path)
        .map_err(|e| match e {
            safetensors::SafeTensorError::IoError(source) => CheckpointError::io(path, source),
            e => CheckpointError::Safetensors {
                shard: path.display().to_string(),
                detail: e.to_string(),
            },
        })
}

/// Pretty JSON with a trailing newline.
pub fn write_json(path: &Path, value: &Value) -> Result<(), CheckpointError> {
    let mut text = serde_json::to_string_pretty(value).expect("a Value serializes");
    text.push('\n');
    std::fs::write(path, text).map_err(|e| CheckpointError::io(path, e))
}

/// The tensors `producer` writes for `layer`, named `<module>.<tensor>`; compressed-tensors also
/// gets its int64 `weight_shape` `[N, K]`, as the library writes it.
pub fn producer_tensors(
    producer: Producer,
    layer: &QuantizedLayer,
    module: &str,
) -> Result<Vec<Tensor>, LayerError> {
    let mut out: Vec<Tensor> = match producer {
        Producer::CompressedTensors => {
            let c = CompressedTensorsLayer::from_logical(layer)?;
            let shape = Tensor::new(
                "weight_shape",
                vec![2],
                TensorData::I64(vec![layer.shape.n as i64, layer.shape.k as i64]),
            );
            [
                Some(c.weight_packed),
                Some(c.weight_scale),
                c.weight_zero_point,
                c.bias,
                Some(shape),
            ]
            .into_iter()
            .flatten()
            .collect()
        }
        Producer::GptqV1 | Producer::GptqV2 => {
            let v = if producer == Producer::GptqV1 {
                GptqVersion::V1
            } else {
                GptqVersion::V2
            };
            let c = GptqLayer::from_logical(layer, v)?;
            [Some(c.qweight), c.qzeros, Some(c.scales), c.bias]
                .into_iter()
                .flatten()
                .collect()
        }
        Producer::Awq => {
            let c = AwqLayer::from_logical(layer)?;
            [Some(c.qweight), c.qzeros, Some(c.scales), c.bias]
                .into_iter()
                .flatten()
                .collect()
        }
        Producer::LegacyUnpackedZp => {
            return Err(LayerError::NNotMultipleOf8 {
                packed: "legacy unpacked zero points (no Hugging Face format writes them)",
                n: layer.shape.n,
            });
        }
    };
    for t in &mut out {
        t.name = format!("{module}.{}", t.name);
    }
    Ok(out)
}

/// The `quantization_config` each producer's library writes for one scheme over every linear.
/// `group` None is channelwise.
pub fn quantization_config(producer: Producer, group: Option<usize>, symmetric: bool) -> Value {
    let g = group.map_or(-1, |g| g as i64);
    match producer {
        Producer::CompressedTensors => json!({
            "quant_method": "compressed-tensors",
            "format": "pack-quantized",
            "quantization_status": "compressed",
            "config_groups": {"group_0": {
                "targets": ["Linear"],
                "weights": {
                    "num_bits": 4, "type": "int",
                    "strategy": if group.is_some() { "group" } else { "channel" },
                    "group_size": group, "symmetric": symmetric,
                    "actorder": null, "dynamic": false
                },
                "input_activations": null, "output_activations": null
            }},
            "ignore": ["lm_head"]
        }),
        Producer::GptqV1 | Producer::GptqV2 => json!({
            "quant_method": "gptq", "bits": 4, "group_size": g, "desc_act": false, "sym": symmetric,
            "checkpoint_format": if producer == Producer::GptqV1 { "gptq" } else { "gptq_v2" }
        }),
        Producer::Awq | Producer::LegacyUnpackedZp => json!({
            "quant_method": "awq", "bits": 4, "group_size": g, "zero_point": !symmetric,
            "version": "gemm"
        }),
    }
}

/// The architecture fields of a config.json.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    pub architecture: String,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub dtype: ActDtype,
    /// (num_experts, num_experts_per_tok, moe_intermediate_size) for MoE models.
    pub moe: Option<(usize, usize, usize)>,
}

impl ModelSpec {
    /// A small llama: hidden 64, 4 heads of 16 (2 KV heads), intermediate 128.
    pub fn tiny_llama(dtype: ActDtype) -> Self {
        ModelSpec {
            architecture: "LlamaForCausalLM".into(),
            hidden_size: 64,
            intermediate_size: 128,
            num_hidden_layers: 1,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            head_dim: 16,
            dtype,
            moe: None,
        }
    }

    pub fn config_json(&self, quantization: Option<Value>) -> Value {
        let mut v = json!({
            "architectures": [self.architecture],
            "model_type": self.architecture.trim_end_matches("ForCausalLM").to_ascii_lowercase(),
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "max_position_embeddings": 2048,
            "torch_dtype": match self.dtype { ActDtype::F16 => "float16", ActDtype::Bf16 => "bfloat16" },
        });
        if let Some((experts, per_tok, inter)) = self.moe {
            v["num_experts"] = json!(experts);
            v["num_experts_per_tok"] = json!(per_tok);
            v["moe_intermediate_size"] = json!(inter);
        }
        if let Some(q) = quantization {
            v["quantization_config"] = q;
        }
        v
    }
}

/// Writes `config.json` and the shards (file name → tensors); with `index`, also
/// `model.safetensors.index.json` listing every tensor of every shard.
pub fn write_model(
    dir: &Path,
    config: &Value,
    shards: &[(String, Vec<Tensor>)],
    index: bool,
) -> Result<(), CheckpointError> {
    std::fs::create_dir_all(dir).map_err(|e| CheckpointError::io(dir, e))?;
    write_json(&dir.join(crate::config::CONFIG_JSON), config)?;
    let mut weight_map = BTreeMap::new();
    for (file, tensors) in shards {
        write_safetensors(&dir.join(file), tensors)?;
        for t in tensors {
            weight_map.insert(t.name.clone(), file.clone());
        }
    }
    if index {
        write_index(dir, &weight_map)?;
    }
    Ok(())
}

pub fn write_index(
    dir: &Path,
    weight_map: &BTreeMap<String, String>,
) -> Result<(), CheckpointError> {
    write_json(
        &dir.join(INDEX_JSON),
        &json!({"metadata": {}, "weight_map": weight_map}),
    )
}

/// A seeded realistic layer (q, z uniform 0..15, s = 0.05·U(0,1]) from the reference's data
/// generator: what the fixtures and tests quantize.
pub fn seeded_layer(
    seed: u64,
    n: usize,
    k: usize,
    group: usize,
    dtype: ActDtype,
    symmetric: bool,
    with_bias: bool,
) -> QuantizedLayer {
    use w4a16_reference::data::{DataClass, DataSpec, generate_layer};
    use w4a16_reference::layer::{LayerShape, Symmetry};
    let spec = DataSpec {
        class: DataClass::Realistic,
        m: 1,
        shape: LayerShape::new(n, k, group),
        dtype,
        symmetry: if symmetric {
            Symmetry::Sym
        } else {
            Symmetry::Asym
        },
        with_bias,
    };
    generate_layer(seed, &spec).expect("a positive group and the realistic class always generate")
}

/// The (module, N, K) of one decoder layer's attention and MLP linears in `spec`, with the
/// dense MLP when `spec.moe` is None and `experts` routed experts otherwise (Mixtral naming
/// `block_sparse_moe.experts.<e>.w1/w2/w3` when `mixtral`, else Qwen-MoE
/// `mlp.experts.<e>.gate_proj/up_proj/down_proj`).
pub fn decoder_linears(
    spec: &ModelSpec,
    layer: usize,
    mixtral: bool,
) -> Vec<(String, usize, usize)> {
    let p = format!("model.layers.{layer}");
    let h = spec.hidden_size;
    let q = spec.num_attention_heads * spec.head_dim;
    let kv = spec.num_key_value_heads * spec.head_dim;
    let mut out = vec![
        (format!("{p}.self_attn.q_proj"), q, h),
        (format!("{p}.self_attn.k_proj"), kv, h),
        (format!("{p}.self_attn.v_proj"), kv, h),
        (format!("{p}.self_attn.o_proj"), h, q),
    ];
    match spec.moe {
        None => {
            let i = spec.intermediate_size;
            out.push((format!("{p}.mlp.gate_proj"), i, h));
            out.push((format!("{p}.mlp.up_proj"), i, h));
            out.push((format!("{p}.mlp.down_proj"), h, i));
        }
        Some((experts, _, i)) => {
            for e in 0..experts {
                if mixtral {
                    let m = format!("{p}.block_sparse_moe.experts.{e}");
                    out.push((format!("{m}.w1"), i, h));
                    out.push((format!("{m}.w3"), i, h));
                    out.push((format!("{m}.w2"), h, i));
                } else {
                    let m = format!("{p}.mlp.experts.{e}");
                    out.push((format!("{m}.gate_proj"), i, h));
                    out.push((format!("{m}.up_proj"), i, h));
                    out.push((format!("{m}.down_proj"), h, i));
                }
            }
        }
    }
    out
}
