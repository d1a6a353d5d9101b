//! Writes a model directory of real size from the project's compressed-tensors producer, for
//! measuring `w4a16 check-model`'s time and memory per layer on a model too large to commit:
//!
//!   make-synthetic-model DIR [llama-70b | llama-8b] [LAYERS]
//!
//! `llama-70b`: hidden 8192, 64 heads of 128, 8 KV heads, intermediate 28672 (Llama 3 70B's
//! shapes), asymmetric, G 128, bf16; one shard per decoder layer with the index.

use std::collections::BTreeMap;
use std::path::PathBuf;
use w4a16_checkpoint::writer::{
    ModelSpec, decoder_linears, producer_tensors, quantization_config, seeded_layer, write_index,
    write_json, write_safetensors,
};
use w4a16_reference::ActDtype;
use w4a16_reference::formats::Producer;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(
        args.next()
            .ok_or("usage: make-synthetic-model DIR [llama-70b|llama-8b] [LAYERS]")?,
    );
    let preset = args.next().unwrap_or_else(|| "llama-70b".into());
    let layers: usize = args.next().map_or(Ok(1), |s| s.parse())?;
    let (hidden, heads, kv, head_dim, inter) = match preset.as_str() {
        "llama-70b" => (8192, 64, 8, 128, 28672),
        "llama-8b" => (4096, 32, 8, 128, 14336),
        other => return Err(format!("unknown preset {other:?}: llama-70b or llama-8b").into()),
    };
    let dtype = ActDtype::Bf16;
    let spec = ModelSpec {
        architecture: "LlamaForCausalLM".into(),
        hidden_size: hidden,
        intermediate_size: inter,
        num_hidden_layers: layers,
        num_attention_heads: heads,
        num_key_value_heads: kv,
        head_dim,
        dtype,
        moe: None,
    };
    std::fs::create_dir_all(&dir)?;
    let config = spec.config_json(Some(quantization_config(
        Producer::CompressedTensors,
        Some(128),
        false,
    )));
    write_json(&dir.join("config.json"), &config)?;
    let mut weight_map = BTreeMap::new();
    let mut bytes = 0usize;
    for layer in 0..layers {
        let file = format!("model-{:05}-of-{layers:05}.safetensors", layer + 1);
        let mut tensors = Vec::new();
        for (i, (module, n, k)) in decoder_linears(&spec, layer, false).into_iter().enumerate() {
            let l = seeded_layer(
                0x70b0 + (layer * 16 + i) as u64,
                n,
                k,
                128,
                dtype,
                false,
                false,
            );
            tensors.extend(producer_tensors(Producer::CompressedTensors, &l, &module)?);
        }
        for t in &tensors {
            weight_map.insert(t.name.clone(), file.clone());
            bytes += t.data.len() * t.dtype().size_bytes();
        }
        write_safetensors(&dir.join(&file), &tensors)?;
        eprintln!("layer {layer}: {file}");
    }
    write_index(&dir, &weight_map)?;
    println!(
        "{preset}: {layers} decoder layers, {:.1} MiB of tensors in {}",
        bytes as f64 / (1u64 << 20) as f64,
        dir.display()
    );
    Ok(())
}
