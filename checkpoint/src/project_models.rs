//! Small complete model directories written by the project's own producers, for
//! `cases/checkpoints/project-*`: the layouts the producer libraries' fixtures do not cover (a
//! sharded model with its index, a MoE, the GPTQ v1 packer defect reproduced, every producer
//! and dtype). Labelled as the project's in their README; `scripts/checkpoint-fixtures.py`
//! writes the ones made by the libraries themselves.

use crate::error::CheckpointError;
use crate::writer::{
    ModelSpec, decoder_linears, producer_tensors, quantization_config, seeded_layer, serialize,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use w4a16_reference::ActDtype;
use w4a16_reference::formats::{Producer, Tensor, TensorData};

/// One model directory: file name → bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct ProjectModel {
    pub name: &'static str,
    pub description: &'static str,
    pub files: BTreeMap<String, Vec<u8>>,
}

struct Recipe {
    name: &'static str,
    description: &'static str,
    producer: Producer,
    dtype: ActDtype,
    group: usize,
    symmetric: bool,
    spec: ModelSpec,
    /// Decoder layers; with `shards` > 1 one shard per layer and an index.
    layers: usize,
    sharded: bool,
    /// q/k/v carry a bias (Qwen2 style).
    qkv_bias: bool,
    /// Rewrite the v1 qzeros as AutoGPTQ ≤ 0.7.1's packer leaves them.
    autogptq_v1_overflow: bool,
}

fn json_bytes(v: &Value) -> Vec<u8> {
    let mut s = serde_json::to_string_pretty(v).expect("a Value serializes");
    s.push('\n');
    s.into_bytes()
}

/// AutoGPTQ's v1 packer: `zeros -= 1` then `qzeros |= zeros.astype(uint32) << 4j`. Our packer
/// stores z = 0 as nibble 15 (`(z − 1) mod 16`); theirs ORs the sign-extended −1, which sets
/// every nibble from j up to 15. Applied to the words of an honest v1 qzeros tensor.
fn autogptq_overflow(words: &mut [i32]) {
    for w in words.iter_mut() {
        let mut word = *w as u32;
        let honest = word;
        for j in 0..8 {
            if (honest >> (4 * j)) & 0xF == 0xF {
                word |= u32::MAX << (4 * j);
                break;
            }
        }
        *w = word as i32;
    }
}

fn build(r: &Recipe) -> Result<ProjectModel, CheckpointError> {
    let mut spec = r.spec.clone();
    spec.num_hidden_layers = r.layers;
    let config = spec.config_json(Some(quantization_config(
        r.producer,
        Some(r.group),
        r.symmetric,
    )));
    let mut files = BTreeMap::new();
    files.insert("config.json".to_string(), json_bytes(&config));
    let mut shards: Vec<(String, Vec<Tensor>)> = Vec::new();
    let mut seed = 0x5eed_0000u64;
    for layer in 0..r.layers {
        let mut tensors = Vec::new();
        for (module, n, k) in decoder_linears(&spec, layer, false) {
            seed += 1;
            let bias = r.qkv_bias
                && ["q_proj", "k_proj", "v_proj"]
                    .iter()
                    .any(|p| module.ends_with(p));
            let l = seeded_layer(seed, n, k, r.group, r.dtype, r.symmetric, bias);
            let mut t = producer_tensors(r.producer, &l, &module).map_err(|e| {
                CheckpointError::Detection {
                    file: r.name.into(),
                    module: module.clone(),
                    rule: format!("the project's producer cannot write it: {e}"),
                }
            })?;
            if r.autogptq_v1_overflow {
                for x in t.iter_mut().filter(|x| x.name.ends_with(".qzeros")) {
                    if let TensorData::I32(words) = &mut x.data {
                        autogptq_overflow(words);
                    }
                }
            }
            tensors.extend(t);
        }
        // The unquantized rest of a decoder layer, tiny: a norm.
        tensors.push(Tensor::new(
            format!("model.layers.{layer}.input_layernorm.weight"),
            vec![spec.hidden_size],
            TensorData::act(r.dtype, vec![r.dtype.from_f32(1.0); spec.hidden_size]),
        ));
        let file = if r.sharded {
            format!("model-{:05}-of-{:05}.safetensors", layer + 1, r.layers)
        } else {
            "model.safetensors".to_string()
        };
        match shards.iter_mut().find(|(f, _)| *f == file) {
            Some((_, ts)) => ts.extend(tensors),
            None => shards.push((file, tensors)),
        }
    }
    let mut weight_map = BTreeMap::new();
    for (file, tensors) in &shards {
        files.insert(file.clone(), serialize(tensors)?);
        for t in tensors {
            weight_map.insert(t.name.clone(), file.clone());
        }
    }
    if r.sharded {
        files.insert(
            crate::shards::INDEX_JSON.to_string(),
            json_bytes(&serde_json::json!({"metadata": {}, "weight_map": weight_map})),
        );
    }
    Ok(ProjectModel {
        name: r.name,
        description: r.description,
        files,
    })
}

/// Every project model, in name order.
pub fn project_models() -> Result<Vec<ProjectModel>, CheckpointError> {
    use ActDtype::{Bf16, F16};
    let llama = ModelSpec::tiny_llama;
    let mut moe = llama(Bf16);
    moe.architecture = "Qwen2MoeForCausalLM".into();
    moe.moe = Some((4, 2, 64));
    let mut narrow_kv = llama(F16);
    // Eight heads of 12 and one KV head: k_proj and v_proj have N = 12, not a multiple of 8.
    narrow_kv.num_attention_heads = 8;
    narrow_kv.num_key_value_heads = 1;
    narrow_kv.head_dim = 12;
    let recipes = [
        Recipe {
            name: "project-ct-llama-f16-sym-g32-sharded",
            description: "compressed-tensors pack-quantized, symmetric, G 32, fp16; two decoder layers in two shards with their index",
            producer: Producer::CompressedTensors,
            dtype: F16,
            group: 32,
            symmetric: true,
            spec: llama(F16),
            layers: 2,
            sharded: true,
            qkv_bias: false,
            autogptq_v1_overflow: false,
        },
        Recipe {
            name: "project-ct-llama-f16-asym-g32-narrow-kv",
            description: "compressed-tensors pack-quantized, asymmetric, G 32, fp16, 8 heads of 12 and one KV head: k_proj and v_proj have N = 12 (zero points [ceil(N/8), K/G] = [2, 2]); q|k|v fused has N = 120",
            producer: Producer::CompressedTensors,
            dtype: F16,
            group: 32,
            symmetric: false,
            spec: narrow_kv,
            layers: 1,
            sharded: false,
            qkv_bias: false,
            autogptq_v1_overflow: false,
        },
        Recipe {
            name: "project-ct-qwen2moe-bf16-asym-g32",
            description: "compressed-tensors pack-quantized, asymmetric, G 32, bf16; a Qwen2-MoE layer with 4 experts (top 2) of intermediate 64",
            producer: Producer::CompressedTensors,
            dtype: Bf16,
            group: 32,
            symmetric: false,
            spec: moe,
            layers: 1,
            sharded: false,
            qkv_bias: false,
            autogptq_v1_overflow: false,
        },
        Recipe {
            name: "project-gptq-v2-llama-bf16-asym-g64-qkv-bias",
            description: "GPTQ checkpoint_format gptq_v2, asymmetric, G 64, bf16, q/k/v with a bias (Qwen2 style)",
            producer: Producer::GptqV2,
            dtype: Bf16,
            group: 64,
            symmetric: false,
            spec: llama(Bf16),
            layers: 1,
            sharded: false,
            qkv_bias: true,
            autogptq_v1_overflow: false,
        },
        Recipe {
            name: "project-gptq-v1-llama-f16-asym-g32-autogptq-overflow",
            description: "GPTQ v1 (checkpoint_format gptq), asymmetric, G 32, fp16, with AutoGPTQ 0.7.1's v1 packer defect reproduced (z = 0 stored as a sign-extended −1 ORed into its qzeros word): must be reported as a checkpoint defect, refused under --strict",
            producer: Producer::GptqV1,
            dtype: F16,
            group: 32,
            symmetric: false,
            spec: llama(F16),
            layers: 1,
            sharded: false,
            qkv_bias: false,
            autogptq_v1_overflow: true,
        },
        Recipe {
            name: "project-awq-llama-f16-asym-g32",
            description: "AWQ GEMM (zero_point true), G 32, fp16",
            producer: Producer::Awq,
            dtype: F16,
            group: 32,
            symmetric: false,
            spec: llama(F16),
            layers: 1,
            sharded: false,
            qkv_bias: false,
            autogptq_v1_overflow: false,
        },
    ];
    let mut out = recipes.iter().map(build).collect::<Result<Vec<_>, _>>()?;
    out.sort_by_key(|m| m.name);
    Ok(out)
}

/// Writes every project model under `root/<name>/` (replacing it).
pub fn write_project_models(root: &Path) -> Result<Vec<ProjectModel>, CheckpointError> {
    let models = project_models()?;
    for m in &models {
        let dir = root.join(m.name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| CheckpointError::io(&dir, e))?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| CheckpointError::io(&dir, e))?;
        for (file, bytes) in &m.files {
            let path = dir.join(file);
            std::fs::write(&path, bytes).map_err(|e| CheckpointError::io(&path, e))?;
        }
    }
    Ok(models)
}
