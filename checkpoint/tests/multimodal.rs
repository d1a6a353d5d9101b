//! Real configs beyond the plain decoder: a multimodal model keeps its language model's sizes in
//! `text_config` (and its vision tower's linears follow their own sizes), Llama 4 names its
//! dense MLP size `intermediate_size_mlp`, and a per-layer list of sizes fixes none.

use serde_json::{Value, json};
use w4a16_checkpoint::writer::{
    ModelSpec, producer_tensors, quantization_config, seeded_layer, write_model,
};
use w4a16_checkpoint::{CheckpointError, ModelConfig, ModelDir, QuantizationConfig};
use w4a16_reference::ActDtype;
use w4a16_reference::formats::Producer;

fn quant() -> QuantizationConfig {
    let q = quantization_config(Producer::GptqV2, Some(32), false);
    QuantizationConfig::parse(&q, "config.json", "quantization_config.", None).unwrap()
}

#[test]
fn a_multimodal_config_is_read_from_its_text_config() {
    let config = json!({
        "architectures": ["Gemma3ForConditionalGeneration"],
        "torch_dtype": "bfloat16",
        "text_config": {
            "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 16, "intermediate_size": 128, "num_hidden_layers": 2
        },
        "vision_config": {"hidden_size": 48}
    });
    let c = ModelConfig::parse(&config, quant()).unwrap();
    assert_eq!(
        (c.hidden_size, c.num_key_value_heads, c.head_dim),
        (64, 2, 16)
    );
    assert_eq!((c.intermediate_size, c.num_hidden_layers), (Some(128), 2));
    assert_eq!(c.dtype, ActDtype::Bf16);
    // A missing size in the text config is named with its path.
    let mut broken = config.clone();
    broken["text_config"]
        .as_object_mut()
        .unwrap()
        .remove("num_hidden_layers");
    let e = ModelConfig::parse(&broken, quant()).unwrap_err();
    assert!(
        e.to_string().contains("text_config.num_hidden_layers"),
        "{e}"
    );
}

#[test]
fn the_dense_mlp_size_of_llama4_and_a_per_layer_list() {
    let base = |extra: Value| {
        let mut v = json!({
            "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1,
            "torch_dtype": "float16", "intermediate_size": 512
        });
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        ModelConfig::parse(&v, quant()).unwrap()
    };
    assert_eq!(base(json!({})).intermediate_size, Some(512));
    assert_eq!(
        base(json!({"intermediate_size_mlp": 128})).intermediate_size,
        Some(128)
    );
    assert_eq!(
        base(json!({"intermediate_size": [128, 256]})).intermediate_size,
        None
    );
}

#[test]
fn a_vision_towers_linears_are_not_held_to_the_text_sizes_but_the_text_ones_are() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ModelSpec::tiny_llama(ActDtype::F16);
    let config = spec.config_json(Some(quantization_config(Producer::GptqV2, Some(32), false)));
    // A SigLIP-style tower: q_proj 96 × 96, nothing like the text model's 64 × 64.
    let vision = "model.vision_tower.encoder.layers.0.self_attn.q_proj";
    let text_k = "model.layers.0.self_attn.k_proj";
    let tensors = [
        producer_tensors(
            Producer::GptqV2,
            &seeded_layer(1, 96, 96, 32, ActDtype::F16, false, false),
            vision,
        )
        .unwrap(),
        // k_proj should be kv_heads × head_dim = 32 wide; written 64.
        producer_tensors(
            Producer::GptqV2,
            &seeded_layer(2, 64, 64, 32, ActDtype::F16, false, false),
            text_k,
        )
        .unwrap(),
    ]
    .concat();
    write_model(
        dir.path(),
        &config,
        &[("model.safetensors".into(), tensors)],
        false,
    )
    .unwrap();
    let model = ModelDir::open(dir.path()).unwrap();
    let load = |m: &str| model.load(model.linear(m).expect("detected"));
    load(vision).expect("a vision tower's q_proj follows its own sizes");
    match load(text_k) {
        Err(e @ CheckpointError::ShapeMismatch { .. }) => {
            assert!(
                e.to_string().contains("num_key_value_heads × head_dim"),
                "{e}"
            )
        }
        other => panic!("{other:?}"),
    }
}
