//! `w4a16 check-model` on the committed checkpoints, CPU side (GPU checks skip loudly here; the
//! GPU run is `scripts/check-models.sh` through `scripts/gpu-job.sh`):
//! - every fixture of `cases/checkpoints/` (written by compressed-tensors, AutoGPTQ 0.7.1 and
//!   AutoAWQ themselves, and the project's `project-*` ones) passes: every linear detected,
//!   converted and read back as its producer's own reading, the producer library's own
//!   dequantized weights and output agree with ours (the oracle), fused projections and MoE
//!   experts built as the engine builds them, a selection on every layer;
//! - the GPTQ v1 packer overflow is reported as a defect naming layer, rows and groups, and
//!   refused under `--strict`;
//! - every broken checkpoint of `cases/invalid-checkpoints/` fails the run with its message.

use std::path::{Path, PathBuf};
use w4a16_cases::Date;
use w4a16_harness::model_check::{
    CheckModelOptions, LayerKind, LayerStatus, ModelCheck, check_model,
};
use w4a16_harness::require::{Requirement, Skip};
use w4a16_harness::runner::execute::RunContext;
use w4a16_harness::runner::session;
use w4a16_harness::runner::{Check, Outcome};
use w4a16_kernels::{Execution, Target};
use w4a16_select::config::KernelConfig;

fn cases_dir() -> PathBuf {
    w4a16_cases::locate(None).expect("the cases folder")
}

fn folders(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.expect("readable").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn no_gpu() -> Skip {
    Skip {
        requirement: Requirement::Gpu,
        reason: "no GPU in this test".into(),
    }
}

fn run(dir: &Path, opts: &CheckModelOptions) -> Result<ModelCheck, String> {
    run_with(dir, opts, KernelConfig::default())
}

fn run_with(
    dir: &Path,
    opts: &CheckModelOptions,
    config: KernelConfig,
) -> Result<ModelCheck, String> {
    let target = Target::Gfx1151;
    let ctx = RunContext {
        target,
        execution: Execution::Native,
        device: None,
        no_device: Some(no_gpu()),
        config,
        c_target: session::c_target(&cases_dir(), target).expect("safety.toml"),
        known_bad: &[],
        today: Date::today_utc(),
        artifacts: None,
        full_reference_macs: 2.0e9,
        sample_flops: 2.0e9,
        reference: w4a16_harness::runner::execute::ReferenceChoice::Cpu,
    };
    check_model(dir, opts, &ctx, &|_| {}).map_err(|e| e.to_string())
}

fn fixture(name: &str) -> PathBuf {
    cases_dir().join("checkpoints").join(name)
}

#[test]
fn every_committed_checkpoint_passes_on_the_cpu_with_gpu_checks_skipped_loudly() {
    let dirs = folders(&cases_dir().join("checkpoints"));
    assert!(dirs.len() >= 10, "only {} fixtures", dirs.len());
    let mut library_made = 0;
    for dir in dirs {
        let check = run(&dir, &CheckModelOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let name = &check.model;
        assert!(!check.failed(), "{name}:\n{}", report(&check));
        assert!(!check.layers.is_empty(), "{name}: no layer detected");
        for layer in &check.layers {
            let verdicts: Vec<_> = check
                .verdicts
                .iter()
                .filter(|v| {
                    v.case_id == layer.id || v.case_id.starts_with(&format!("{}/", layer.id))
                })
                .collect();
            // Read, and converted back to the producer's own reading.
            assert!(
                verdicts
                    .iter()
                    .any(|v| matches!(v.check, Check::Convert(_)) && v.outcome == Outcome::Pass),
                "{name} {}: no passing conversion: {verdicts:#?}",
                layer.module
            );
            if layer.kind != LayerKind::FusedPart {
                assert_eq!(
                    layer.selected.len(),
                    4,
                    "{name} {}: a selection per batch size",
                    layer.module
                );
                assert!(
                    layer.selected.iter().all(|s| s.path != "none"),
                    "{name} {}: {:?}",
                    layer.module,
                    layer.selected
                );
                // The launches are GPU checks: skipped, with the reason, never passed.
                let skipped = verdicts
                    .iter()
                    .filter(|v| v.outcome == Outcome::Skip)
                    .count();
                assert!(skipped >= 4, "{name} {}: {skipped} skips", layer.module);
                assert!(
                    verdicts
                        .iter()
                        .filter(|v| v.outcome == Outcome::Skip)
                        .all(|v| v.detail.contains("no GPU in this test"))
                );
            }
        }
        // The producer library's own reading, where it wrote one.
        if dir.join("w4a16-oracle.safetensors").exists() {
            library_made += 1;
            let oracles: Vec<_> = check
                .verdicts
                .iter()
                .filter(|v| v.check == Check::Oracle)
                .collect();
            let linears = check
                .layers
                .iter()
                .filter(|l| matches!(l.kind, LayerKind::Linear | LayerKind::FusedPart))
                .count();
            assert!(
                oracles.len() >= linears,
                "{name}: {} oracle verdicts for {linears} linears",
                oracles.len()
            );
            assert!(
                oracles.iter().all(|v| v.outcome == Outcome::Pass),
                "{oracles:#?}"
            );
            assert!(
                oracles
                    .iter()
                    .all(|v| v.detail.contains("bit-exact against the library's own"))
            );
        }
    }
    assert!(
        library_made >= 6,
        "only {library_made} fixtures from the producer libraries"
    );
}

fn report(check: &ModelCheck) -> String {
    w4a16_harness::model_check::report::markdown(check)
}

#[test]
fn fused_projections_and_experts_are_built_as_the_engine_builds_them() {
    let check = run(
        &fixture("ct-asym-g128-f16-sharded"),
        &CheckModelOptions::default(),
    )
    .unwrap();
    let shape = |module: &str| {
        check
            .layers
            .iter()
            .find(|l| l.module == module)
            .and_then(|l| l.shape)
            .unwrap_or_else(|| panic!("no {module}"))
    };
    for layer in 0..2 {
        let p = format!("model.layers.{layer}");
        let qkv = shape(&format!("{p}.self_attn.qkv_proj"));
        let parts: usize = ["q_proj", "k_proj", "v_proj"]
            .iter()
            .map(|s| shape(&format!("{p}.self_attn.{s}")).n)
            .sum();
        assert_eq!(qkv.n, parts);
        let gate_up = shape(&format!("{p}.mlp.gate_up_proj"));
        assert_eq!(gate_up.n, 2 * shape(&format!("{p}.mlp.gate_proj")).n);
    }

    for name in ["ct-moe-sym-g32-bf16", "project-ct-qwen2moe-bf16-asym-g32"] {
        let check = run(&fixture(name), &CheckModelOptions::default()).unwrap();
        let experts: Vec<_> = check
            .layers
            .iter()
            .filter(|l| l.kind == LayerKind::Experts)
            .collect();
        let names: Vec<&str> = experts.iter().map(|l| l.module.as_str()).collect();
        assert!(
            names.iter().any(|n| n.ends_with("experts.gate_up_proj"))
                && names.iter().any(|n| n.ends_with("experts.down_proj")),
            "{name}: {names:?}"
        );
        for l in experts {
            assert!(
                l.selected.iter().all(|s| s.path == "moe_align+moe"),
                "{name} {}: {:?}",
                l.module,
                l.selected
            );
        }
    }
}

#[test]
fn the_gptq_v1_packer_overflow_is_a_defect_and_a_refusal_under_strict() {
    for name in [
        "gptq-v1-asym-g32-f16-zero-overflow",
        "project-gptq-v1-llama-f16-asym-g32-autogptq-overflow",
    ] {
        let dir = fixture(name);
        let check = run(&dir, &CheckModelOptions::default()).unwrap();
        assert!(!check.failed(), "{name}: reported, not failed, by default");
        let defects: Vec<_> = check
            .layers
            .iter()
            .filter(|l| l.status == LayerStatus::Defect)
            .collect();
        assert!(!defects.is_empty(), "{name}: no defect reported");
        for l in &defects {
            let d = l.defects.join("; ");
            assert!(
                d.contains("qzeros") && d.contains("cannot be recovered"),
                "{d}"
            );
            assert!(d.contains("gptq_v2"), "{d}");
            assert!(d.contains("(n = "), "names rows and groups: {d}");
        }
        let strict = CheckModelOptions {
            strict: true,
            ..CheckModelOptions::default()
        };
        let check = run(&dir, &strict).unwrap();
        assert!(check.failed(), "{name}: --strict must refuse");
        for l in check.layers.iter().filter(|l| !l.defects.is_empty()) {
            assert_eq!(l.status, LayerStatus::Refused, "{name} {}", l.module);
            // Refused before any launch: no selection, no path.
            assert!(l.selected.is_empty(), "{name} {}", l.module);
        }
    }
    // The library's clean symmetric v1 file has no defect.
    let clean = run(
        &fixture("gptq-v1-sym-g128-f16"),
        &CheckModelOptions::default(),
    )
    .unwrap();
    assert!(clean.layers.iter().all(|l| l.defects.is_empty()));
}

#[test]
fn every_broken_checkpoint_fails_the_run_with_its_message() {
    let dirs = folders(&cases_dir().join("invalid-checkpoints"));
    assert!(dirs.len() >= 10);
    for dir in dirs {
        let expected = std::fs::read_to_string(dir.join("expected.txt")).unwrap();
        let expected = expected.trim();
        let text = match run(&dir, &CheckModelOptions::default()) {
            Err(e) => e,
            Ok(check) => {
                assert!(check.failed(), "{}: accepted", dir.display());
                // Refused before any launch: the refused layers selected nothing.
                for l in check
                    .layers
                    .iter()
                    .filter(|l| l.status == LayerStatus::Refused)
                {
                    assert!(l.selected.is_empty(), "{}: {}", dir.display(), l.module);
                }
                let mut all: Vec<String> = check.refusals.clone();
                all.extend(check.verdicts.iter().map(|v| v.detail.clone()));
                all.join("\n")
            }
        };
        assert!(
            text.contains(expected),
            "{}:\n  got: {text}\n  expected: {expected}",
            dir.display()
        );
    }
}

#[test]
fn a_filter_checks_only_the_matching_layers() {
    let opts = CheckModelOptions {
        filter: Some("model.layers.1.*".into()),
        ..CheckModelOptions::default()
    };
    let check = run(&fixture("ct-asym-g128-f16-sharded"), &opts).unwrap();
    assert!(!check.layers.is_empty());
    assert!(
        check
            .layers
            .iter()
            .all(|l| l.module.starts_with("model.layers.1.")),
        "{:?}",
        check.layers.iter().map(|l| &l.module).collect::<Vec<_>>()
    );
}

#[test]
fn recorded_activations_feed_every_layer_and_a_wrong_file_is_refused_naming_it() {
    // The oracle file's recorded inputs (`<module>.x`, [5, K]) serve as activations; the fused
    // projections take their first part's input.
    let dir = fixture("ct-sym-g128-f16");
    let opts = CheckModelOptions {
        activations: Some(dir.join("w4a16-oracle.safetensors")),
        ..CheckModelOptions::default()
    };
    let check = run(&dir, &opts).unwrap();
    assert!(!check.failed(), "{}", report(&check));
    for l in check
        .layers
        .iter()
        .filter(|l| l.kind != LayerKind::FusedPart)
    {
        assert!(
            l.notes.iter().any(|n| n == "recorded activations: 5 rows"),
            "{}: {:?}",
            l.module,
            l.notes
        );
    }
    // A bf16 model's inputs for an fp16 model: refused, naming the file and the tensor.
    let wrong = fixture("ct-asym-g32-bf16-oddn").join("w4a16-oracle.safetensors");
    let opts = CheckModelOptions {
        activations: Some(wrong),
        ..CheckModelOptions::default()
    };
    let check = run(&dir, &opts).unwrap();
    assert!(check.failed());
    let refused: Vec<_> = check
        .verdicts
        .iter()
        .filter(|v| v.check == Check::Data && v.outcome == Outcome::Fail)
        .collect();
    assert!(!refused.is_empty());
    for v in refused {
        assert!(
            v.detail.contains("w4a16-oracle.safetensors") && v.detail.contains(".x"),
            "{}",
            v.detail
        );
    }
}

#[test]
fn with_the_prefill_dequant_cache_enabled_prefill_takes_it_and_the_startup_memory_is_checked() {
    use w4a16_harness::model_check::{StartupMemoryInputs, StartupMemoryOutcome};
    use w4a16_select::config::PrefillDequant;
    let enable = KernelConfig::with_prefill_dequant(PrefillDequant::Enable);
    let dir = fixture("ct-asym-g128-f16-sharded");
    let device_gib = |gib: u64| CheckModelOptions {
        startup_memory: Some(StartupMemoryInputs {
            device_memory_bytes: gib << 30,
            gpu_memory_utilization: 0.9,
            max_model_len: None,
        }),
        ..CheckModelOptions::default()
    };
    let check = run_with(&dir, &device_gib(64), enable).unwrap();
    assert!(!check.failed(), "{}", report(&check));
    for l in check
        .layers
        .iter()
        .filter(|l| l.kind != LayerKind::FusedPart)
    {
        let at = |m: usize| {
            l.selected
                .iter()
                .find(|s| s.m == m)
                .map(|s| s.path.as_str())
        };
        assert_eq!(at(256), Some("dequant+dense"), "{}", l.module);
        assert_eq!(
            at(6),
            Some("fused"),
            "{}: batches 6..255 stay on fused",
            l.module
        );
    }
    match &check.startup_memory {
        Some(StartupMemoryOutcome::Fits(r)) => {
            // Every quantized linear of the model once, the KV cache of its 2 layers.
            assert!(
                r.resident_bytes > 0 && r.dense_cache_bytes > 0 && r.kv_bytes > 0,
                "{r:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    // 4 GiB of activation headroom alone does not fit a 4 GiB device: the run fails, naming
    // the option and what to change.
    let check = run_with(&dir, &device_gib(4), enable).unwrap();
    assert!(check.failed());
    match &check.startup_memory {
        Some(StartupMemoryOutcome::DoesNotFit { message }) => {
            assert!(
                message.contains("rdna_hybrid_w4a16_prefill_dequant"),
                "{message}"
            );
            assert!(message.contains("gpu_memory_utilization"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // Enabled without a device size: said, not guessed.
    let check = run_with(&dir, &CheckModelOptions::default(), enable).unwrap();
    assert!(
        matches!(
            check.startup_memory,
            Some(StartupMemoryOutcome::NotChecked { .. })
        ),
        "{:?}",
        check.startup_memory
    );
}
