//! Model directories written by the project's producers read back as the layers written:
//! writer → ModelDir::open → load → the format's own semantics.

use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use w4a16_checkpoint::writer::{
    ModelSpec, decoder_linears, producer_tensors, quantization_config, seeded_layer, write_model,
    write_safetensors,
};
use w4a16_checkpoint::{
    ActivationsFile, CheckpointDefect, CheckpointError, LinearRole, ModelDir, Oracle, Proj,
};
use w4a16_reference::formats::{Producer, RowPadding, Tensor, TensorData};
use w4a16_reference::{ActDtype, QuantizedLayer};

const G: usize = 32;

/// Writes one decoder layer of `spec` from `producer`; returns module → layer written.
fn write_layers(
    dir: &Path,
    spec: &ModelSpec,
    producer: Producer,
    symmetric: bool,
    group: Option<usize>,
    mixtral: bool,
    shards: usize,
) -> BTreeMap<String, QuantizedLayer> {
    let mut layers = BTreeMap::new();
    let mut files: Vec<(String, Vec<Tensor>)> = (0..shards)
        .map(|i| {
            let name = if shards == 1 {
                "model.safetensors".to_string()
            } else {
                format!("model-{:05}-of-{shards:05}.safetensors", i + 1)
            };
            (name, Vec::new())
        })
        .collect();
    for (i, (module, n, k)) in decoder_linears(spec, 0, mixtral).into_iter().enumerate() {
        let layer = seeded_layer(
            100 + i as u64,
            n,
            k,
            group.unwrap_or(k),
            spec.dtype,
            symmetric,
            i % 3 == 0,
        );
        let tensors = producer_tensors(producer, &layer, &module).unwrap();
        files[i % shards].1.extend(tensors);
        layers.insert(module, layer);
    }
    // An unquantized lm_head and a norm, as real checkpoints have.
    let h = spec.hidden_size;
    files[0].1.push(Tensor::new(
        "lm_head.weight",
        vec![16, h],
        TensorData::act(spec.dtype, vec![0; 16 * h]),
    ));
    files[0].1.push(Tensor::new(
        "model.norm.weight",
        vec![h],
        TensorData::act(spec.dtype, vec![0; h]),
    ));
    let config = spec.config_json(Some(quantization_config(producer, group, symmetric)));
    write_model(dir, &config, &files, shards > 1).unwrap();
    layers
}

fn assert_reads_back(dir: &Path, layers: &BTreeMap<String, QuantizedLayer>, producer: Producer) {
    let model = ModelDir::open(dir).unwrap();
    assert!(model.refusals().is_empty(), "{:?}", model.refusals());
    let modules: Vec<&str> = model.linears().iter().map(|l| l.module.as_str()).collect();
    assert_eq!(
        modules,
        layers.keys().map(String::as_str).collect::<Vec<_>>()
    );
    assert_eq!(model.unquantized_linears(), ["lm_head"]);
    for entry in model.linears() {
        assert_eq!(entry.producer, producer);
        let loaded = model.load(entry).unwrap();
        let written = &layers[&entry.module];
        assert_eq!(
            (loaded.target.n, loaded.target.k, loaded.target.dtype),
            (written.shape.n, written.shape.k, written.dtype)
        );
        // A clean v1 word whose nibbles j..7 all hold z = 0 carries the overflow signature
        // too (the two cannot be told apart): any cell reported must then have z = 0.
        for CheckpointDefect::GptqV1ZeroOverflow(d) in &loaded.defects {
            assert!(
                d.cells.iter().all(|c| written.zero(c.row, c.group) == 0),
                "{}: {:?}",
                entry.module,
                loaded.defects
            );
        }
        let own = loaded.checkpoint.decode_own_semantics().unwrap();
        assert_eq!(&own, written, "{} ({producer})", entry.module);
        loaded
            .checkpoint
            .to_resident(&loaded.target, RowPadding::NONE)
            .unwrap_or_else(|e| panic!("{}: {e}", entry.module));
    }
}

#[test]
fn every_producer_reads_back_as_written() {
    for (producer, symmetric, dtype, group) in [
        (Producer::CompressedTensors, true, ActDtype::F16, Some(G)),
        (Producer::CompressedTensors, false, ActDtype::Bf16, Some(G)),
        (Producer::CompressedTensors, false, ActDtype::F16, None),
        (Producer::GptqV1, true, ActDtype::F16, Some(G)),
        (Producer::GptqV1, false, ActDtype::F16, Some(G)),
        (Producer::GptqV2, false, ActDtype::Bf16, Some(G)),
        (Producer::GptqV2, true, ActDtype::F16, None),
        (Producer::Awq, true, ActDtype::F16, Some(G)),
        (Producer::Awq, false, ActDtype::Bf16, Some(64)),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let spec = ModelSpec::tiny_llama(dtype);
        let layers = write_layers(tmp.path(), &spec, producer, symmetric, group, false, 1);
        assert_reads_back(tmp.path(), &layers, producer);
    }
}

#[test]
fn sharded_with_index_reads_back_and_index_is_checked_both_ways() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = ModelSpec::tiny_llama(ActDtype::F16);
    let layers = write_layers(
        tmp.path(),
        &spec,
        Producer::GptqV2,
        false,
        Some(G),
        false,
        3,
    );
    let model = ModelDir::open(tmp.path()).unwrap();
    assert!(model.shards().is_indexed());
    assert_eq!(model.shards().shards().len(), 3);
    assert_eq!(
        model
            .shards()
            .shard_name("model.layers.0.self_attn.k_proj.qweight"),
        "model-00002-of-00003.safetensors"
    );
    drop(model);
    assert_reads_back(tmp.path(), &layers, Producer::GptqV2);

    // A tensor of an indexed shard that the index does not list.
    let index_path = tmp.path().join("model.safetensors.index.json");
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&index_path).unwrap()).unwrap();
    let mut reduced = index.clone();
    reduced["weight_map"]
        .as_object_mut()
        .unwrap()
        .remove("model.norm.weight");
    std::fs::write(&index_path, reduced.to_string()).unwrap();
    let e = ModelDir::open(tmp.path()).unwrap_err();
    assert!(matches!(e, CheckpointError::TensorNotInIndex { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "model-00001-of-00003.safetensors: model.norm.weight: not listed in model.safetensors.index.json's weight_map (every tensor of an indexed shard must be)"
    );

    // A shard the index names that is not there.
    let mut missing = index.clone();
    missing["weight_map"]["model.norm.weight"] = json!("model-00009-of-00009.safetensors");
    std::fs::write(&index_path, missing.to_string()).unwrap();
    let e = ModelDir::open(tmp.path()).unwrap_err();
    assert!(
        e.to_string()
            .contains("names shard model-00009-of-00009.safetensors for model.norm.weight"),
        "{e}"
    );
}

/// AutoGPTQ 0.7.1's v1 packer: `z − 1` as a sign-extended i32 OR-ed in at bits 4j.
fn autogptq_v1_qzeros(zeros: &[u8], n: usize, groups: usize) -> Vec<u32> {
    let mut words = Vec::new();
    for g in 0..groups {
        for w in 0..n / 8 {
            let mut word = 0u32;
            for j in 0..8 {
                let stored = i32::from(zeros[(8 * w + j) * groups + g]) - 1;
                word |= (stored as u32) << (4 * j);
            }
            words.push(word);
        }
    }
    words
}

fn gptq_v1_model(dir: &Path, layer: &QuantizedLayer, overflow: bool) {
    let module = "model.layers.0.self_attn.q_proj";
    let mut tensors = producer_tensors(Producer::GptqV1, layer, module).unwrap();
    if overflow {
        let (n, groups) = (layer.shape.n, layer.shape.groups());
        let words = autogptq_v1_qzeros(layer.zeros.as_ref().unwrap(), n, groups);
        for t in &mut tensors {
            if t.name.ends_with(".qzeros") {
                *t = Tensor::i32_packed(t.name.clone(), vec![groups, n / 8], words.clone());
            }
        }
    }
    let config = ModelSpec::tiny_llama(ActDtype::F16).config_json(Some(quantization_config(
        Producer::GptqV1,
        Some(G),
        false,
    )));
    write_model(
        dir,
        &config,
        &[("model.safetensors".into(), tensors)],
        false,
    )
    .unwrap();
}

#[test]
fn gptq_v1_overflow_is_reported_with_its_rows_and_groups() {
    let mut layer = seeded_layer(7, 64, 64, G, ActDtype::F16, false, false);
    let groups = layer.shape.groups();
    let zeros = layer.zeros.as_mut().unwrap();
    // Every z ≥ 1, then z = 0 at row 8·1 + 2 of group 1 (rows 11..15 lost) and at row 8·5 + 6
    // of group 0 (row 47 lost); z = 0 at row 7 of group 0 is the word's top nibble: harmless.
    for z in zeros.iter_mut() {
        *z = (*z).max(1);
    }
    zeros[10 * groups + 1] = 0;
    zeros[46 * groups] = 0;
    zeros[7 * groups] = 0;
    let tmp = tempfile::tempdir().unwrap();
    gptq_v1_model(tmp.path(), &layer, true);
    let model = ModelDir::open(tmp.path()).unwrap();
    let loaded = model.load(&model.linears()[0]).unwrap();
    let [CheckpointDefect::GptqV1ZeroOverflow(d)] = &loaded.defects[..] else {
        panic!("expected one overflow defect, got {:?}", loaded.defects);
    };
    let mut expected: Vec<(usize, usize)> = (47..48).map(|r| (r, 0)).collect();
    expected.extend((11..16).map(|r| (r, 1)));
    let at: Vec<(usize, usize)> = d.cells.iter().map(|c| (c.row, c.group)).collect();
    assert_eq!(at, expected);
    assert_eq!((d.words, d.rows, d.groups), (2, 6, 2));
    assert!((d.fraction - 6.0 * 32.0 / (64.0 * 64.0)).abs() < 1e-12);
    let msg = loaded.defects[0].to_string();
    assert!(msg.starts_with("model.safetensors: model.layers.0.self_attn.q_proj.qzeros: GPTQ v1 zero-point overflow signature in 2 qzeros words"), "{msg}");
    assert!(
        msg.contains("re-export with checkpoint_format gptq_v2"),
        "{msg}"
    );
    // The reported cells are exactly where the file's own reading differs from what was
    // quantized: z reads as 0 there.
    let own = loaded.checkpoint.decode_own_semantics().unwrap();
    let read = own.zeros.as_ref().unwrap();
    let wrote = layer.zeros.as_ref().unwrap();
    let differ: Vec<(usize, usize)> = {
        let mut v: Vec<(usize, usize)> = (0..read.len())
            .filter(|&i| read[i] != wrote[i])
            .map(|i| (i / groups, i % groups))
            .collect();
        v.sort_by_key(|&(r, g)| (g, r));
        v
    };
    assert_eq!(differ, expected);

    // The project's (correct) v1 packer on the same zero points: no signature, exact read-back.
    let tmp = tempfile::tempdir().unwrap();
    gptq_v1_model(tmp.path(), &layer, false);
    let model = ModelDir::open(tmp.path()).unwrap();
    let loaded = model.load(&model.linears()[0]).unwrap();
    assert!(loaded.defects.is_empty(), "{:?}", loaded.defects);
    assert_eq!(loaded.checkpoint.decode_own_semantics().unwrap(), layer);
}

#[test]
fn fused_groups_of_a_llama_layer() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = ModelSpec::tiny_llama(ActDtype::F16);
    write_layers(tmp.path(), &spec, Producer::Awq, false, Some(G), false, 1);
    let model = ModelDir::open(tmp.path()).unwrap();
    let fused: Vec<(&str, Vec<&str>)> = model
        .fused_groups()
        .iter()
        .map(|f| {
            (
                f.name.as_str(),
                f.parts.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        fused,
        [
            (
                "model.layers.0.mlp.gate_up_proj",
                vec!["model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"]
            ),
            (
                "model.layers.0.self_attn.qkv_proj",
                vec![
                    "model.layers.0.self_attn.q_proj",
                    "model.layers.0.self_attn.k_proj",
                    "model.layers.0.self_attn.v_proj"
                ]
            ),
        ]
    );
    assert!(model.expert_groups().is_empty());
}

fn moe_spec(experts: usize) -> ModelSpec {
    ModelSpec {
        architecture: "MixtralForCausalLM".into(),
        moe: Some((experts, 2, 32)),
        ..ModelSpec::tiny_llama(ActDtype::Bf16)
    }
}

#[test]
fn expert_groups_of_a_mixtral_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let layers = write_layers(
        tmp.path(),
        &moe_spec(4),
        Producer::GptqV2,
        true,
        Some(G),
        true,
        1,
    );
    let model = ModelDir::open(tmp.path()).unwrap();
    let groups: Vec<(&str, Proj, usize)> = model
        .expert_groups()
        .iter()
        .map(|g| (g.prefix.as_str(), g.proj, g.experts.len()))
        .collect();
    let p = "model.layers.0.block_sparse_moe.experts";
    assert_eq!(
        groups,
        [(p, Proj::Gate, 4), (p, Proj::Up, 4), (p, Proj::Down, 4)]
    );
    assert_eq!(
        model.expert_groups()[2].experts[3],
        "model.layers.0.block_sparse_moe.experts.3.w2"
    );
    assert_eq!(
        model.linear(&format!("{p}.2.w3")).unwrap().role,
        LinearRole::Expert {
            expert: 2,
            proj: Proj::Up
        }
    );
    drop(model);
    assert_reads_back(tmp.path(), &layers, Producer::GptqV2);
}

#[test]
fn expert_groups_of_a_qwen_moe_layout_in_numeric_order_with_a_shared_expert() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = ModelSpec {
        architecture: "Qwen2MoeForCausalLM".into(),
        ..moe_spec(12)
    };
    let mut layers = write_layers(
        tmp.path(),
        &spec,
        Producer::CompressedTensors,
        false,
        Some(G),
        false,
        1,
    );
    // Add a shared expert (N = 64) to the shard and its size to config.json.
    let mut tensors = Vec::new();
    let shared = "model.layers.0.mlp.shared_expert";
    for (i, (proj, n, k)) in [
        ("gate_proj", 64, 64),
        ("up_proj", 64, 64),
        ("down_proj", 64, 64),
    ]
    .into_iter()
    .enumerate()
    {
        let layer = seeded_layer(900 + i as u64, n, k, G, ActDtype::Bf16, false, false);
        let module = format!("{shared}.{proj}");
        tensors.extend(producer_tensors(Producer::CompressedTensors, &layer, &module).unwrap());
        layers.insert(module, layer);
    }
    write_safetensors(&tmp.path().join("shared.safetensors"), &tensors).unwrap();
    let mut config = spec.config_json(Some(quantization_config(
        Producer::CompressedTensors,
        Some(G),
        false,
    )));
    config["shared_expert_intermediate_size"] = json!(64);
    std::fs::write(tmp.path().join("config.json"), config.to_string()).unwrap();

    let model = ModelDir::open(tmp.path()).unwrap();
    let gate = &model.expert_groups()[0];
    assert_eq!(
        (gate.prefix.as_str(), gate.proj),
        ("model.layers.0.mlp.experts", Proj::Gate)
    );
    let order: Vec<String> = (0..12)
        .map(|e| format!("model.layers.0.mlp.experts.{e}.gate_proj"))
        .collect();
    assert_eq!(gate.experts, order);
    assert!(
        model
            .fused_groups()
            .iter()
            .any(|f| f.name == format!("{shared}.gate_up_proj"))
    );
    drop(model);
    // lm_head is in shard 0 only: the reader is told apart from the extra shard by name.
    assert_reads_back(tmp.path(), &layers, Producer::CompressedTensors);

    // One expert fewer than config.json says: that projection's group is refused, loudly.
    let mut config2 = config.clone();
    config2["num_experts"] = json!(13);
    std::fs::write(tmp.path().join("config.json"), config2.to_string()).unwrap();
    let model = ModelDir::open(tmp.path()).unwrap();
    assert_eq!(model.refusals().len(), 3);
    let msg = model.refusals()[0].to_string();
    assert!(
        msg.contains("expected experts 0..12 (config.json num_experts = 13); missing [12]"),
        "{msg}"
    );
}

#[test]
fn trivial_g_idx_is_accepted_with_a_note_and_missing_g_idx_under_desc_act_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let layer = seeded_layer(3, 64, 64, G, ActDtype::F16, true, false);
    let module = "model.layers.0.self_attn.q_proj";
    let mut tensors = producer_tensors(Producer::GptqV1, &layer, module).unwrap();
    let mut config = ModelSpec::tiny_llama(ActDtype::F16).config_json(Some(quantization_config(
        Producer::GptqV1,
        Some(G),
        true,
    )));
    config["quantization_config"]["desc_act"] = json!(true);
    write_model(
        tmp.path(),
        &config,
        &[("model.safetensors".into(), tensors.clone())],
        false,
    )
    .unwrap();
    let model = ModelDir::open(tmp.path()).unwrap();
    let e = model.load(&model.linears()[0]).unwrap_err();
    assert!(
        e.to_string().contains(
            "q_proj.g_idx: act-order checkpoints are not supported: config.json enables act-order"
        ),
        "{e}"
    );

    tensors.push(Tensor::new(
        format!("{module}.g_idx"),
        vec![64],
        TensorData::I32((0..64).map(|k| k / G as i32).collect()),
    ));
    write_model(
        tmp.path(),
        &config,
        &[("model.safetensors".into(), tensors)],
        false,
    )
    .unwrap();
    let model = ModelDir::open(tmp.path()).unwrap();
    let loaded = model.load(&model.linears()[0]).unwrap();
    assert_eq!(loaded.notes.len(), 1);
    assert!(
        loaded.notes[0].contains("trivial g_idx"),
        "{:?}",
        loaded.notes
    );
    assert_eq!(loaded.checkpoint.decode_own_semantics().unwrap(), layer);
}

#[test]
fn autogptq_quantize_config_json_is_read_when_config_json_has_none() {
    let tmp = tempfile::tempdir().unwrap();
    let layer = seeded_layer(5, 64, 64, G, ActDtype::F16, false, false);
    let tensors =
        producer_tensors(Producer::GptqV2, &layer, "model.layers.0.self_attn.q_proj").unwrap();
    let config = ModelSpec::tiny_llama(ActDtype::F16).config_json(None);
    write_model(
        tmp.path(),
        &config,
        &[("model.safetensors".into(), tensors)],
        false,
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("quantize_config.json"),
        json!({"bits": 4, "group_size": 32, "desc_act": false, "sym": false, "checkpoint_format": "gptq_v2"}).to_string(),
    )
    .unwrap();
    let model = ModelDir::open(tmp.path()).unwrap();
    assert_eq!(model.config().quantization.file, "quantize_config.json");
    let loaded = model.load(&model.linears()[0]).unwrap();
    assert_eq!(loaded.checkpoint.decode_own_semantics().unwrap(), layer);
}

#[test]
fn activations_and_oracle_files() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = ModelSpec::tiny_llama(ActDtype::F16);
    let layers = write_layers(
        tmp.path(),
        &spec,
        Producer::CompressedTensors,
        true,
        Some(G),
        false,
        1,
    );
    let q = "model.layers.0.self_attn.q_proj";
    let x: Vec<u16> = (0..2 * 64)
        .map(|i| ActDtype::F16.from_f64(i as f64 / 64.0))
        .collect();
    // Outside the model dir: without an index every *.safetensors there is a shard.
    let act_dir = tempfile::tempdir().unwrap();
    let act_path = act_dir.path().join("acts.safetensors");
    write_safetensors(
        &act_path,
        &[
            Tensor::new(
                format!("{q}.input"),
                vec![2, 64],
                TensorData::F16(x.clone()),
            ),
            Tensor::new(
                "model.layers.0.mlp.down_proj",
                vec![128],
                TensorData::Bf16(vec![0; 128]),
            ),
        ],
    )
    .unwrap();
    let acts = ActivationsFile::open(&act_path).unwrap();
    let a = acts.for_module(q, 64, ActDtype::F16).unwrap().unwrap();
    assert_eq!((a.m, a.k, &a.data), (2, 64, &x));
    assert!(
        acts.for_module("model.layers.0.mlp.up_proj", 64, ActDtype::F16)
            .unwrap()
            .is_none()
    );
    let e = acts
        .for_module("model.layers.0.mlp.down_proj", 128, ActDtype::F16)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "acts.safetensors: model.layers.0.mlp.down_proj: expected dtype f16 (the model's), got bf16"
    );

    // The oracle file sits beside the shards without being read as one.
    let w: Vec<u16> = vec![ActDtype::F16.from_f64(0.5); 64 * 64];
    let y: Vec<u16> = vec![ActDtype::F16.from_f64(1.0); 2 * 64];
    write_safetensors(
        &tmp.path().join("w4a16-oracle.safetensors"),
        &[
            Tensor::new(
                format!("{q}.dequantized"),
                vec![64, 64],
                TensorData::F16(w.clone()),
            ),
            Tensor::new(format!("{q}.x"), vec![2, 64], TensorData::F16(x)),
            Tensor::new(format!("{q}.y"), vec![2, 64], TensorData::F16(y.clone())),
        ],
    )
    .unwrap();
    assert_reads_back(tmp.path(), &layers, Producer::CompressedTensors);
    let model = ModelDir::open(tmp.path()).unwrap();
    let oracle: Oracle = model.oracle().unwrap().unwrap();
    let entry = oracle.module(q, 64, 64, ActDtype::F16).unwrap();
    assert_eq!(entry.dequantized, Some(w));
    assert_eq!(entry.x.unwrap().m, 2);
    assert_eq!(entry.y, Some(y));
    let none = oracle
        .module("model.layers.0.mlp.up_proj", 128, 64, ActDtype::F16)
        .unwrap();
    assert_eq!((none.dequantized, none.x, none.y), (None, None, None));
}
