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
                d.contains("qzeros")
                    && (d.contains("certainly wrong") || d.contains("may be wrong")),
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

// ---- The CLI: exit codes, reports, the built-in safety table, the header ----

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_w4a16"))
}

/// `w4a16 check-model ARGS` in `cwd`, without W4A16_REQUIRE or W4A16_CASES.
fn cli_in(cwd: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(exe())
        .current_dir(cwd)
        .arg("check-model")
        .args(args)
        .env_remove("W4A16_REQUIRE")
        .env_remove("W4A16_CASES")
        .output()
        .expect("the CLI runs")
}

fn cli(args: &[&str]) -> std::process::Output {
    cli_in(Path::new(env!("CARGO_MANIFEST_DIR")), args)
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn has_gpu() -> bool {
    Path::new("/dev/nvidiactl").exists() || Path::new("/dev/kfd").exists()
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// A model directory with a quantization config over unquantized weights: the config of a
/// library-written GPTQ fixture, and one shard holding a plain f16 `q_proj.weight`.
fn unquantized_model(root: &Path) -> PathBuf {
    let dir = root.join("unquantized-under-gptq-config");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        fixture("gptq-v1-sym-g128-f16").join("config.json"),
        dir.join("config.json"),
    )
    .unwrap();
    let bytes = 128 * 128 * 2;
    let header = format!(
        r#"{{"model.layers.0.self_attn.q_proj.weight":{{"dtype":"F16","shape":[128,128],"data_offsets":[0,{bytes}]}}}}"#
    );
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend(std::iter::repeat_n(0u8, bytes));
    std::fs::write(dir.join("model.safetensors"), file).unwrap();
    dir
}

#[test]
fn exit_0_for_a_passing_model_1_for_a_refused_layer_2_for_a_whole_model_refusal() {
    let tmp = tempfile::tempdir().unwrap();
    let reports = tmp.path().join("reports");
    let r = path_str(&reports);
    if !has_gpu() {
        let o = cli(&[path_str(&fixture("ct-sym-g128-f16")), "--report-dir", r]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    // A layer refusal: the v1 overflow under --strict.
    let overflow = fixture("gptq-v1-asym-g32-f16-zero-overflow");
    let o = cli(&[path_str(&overflow), "--strict", "--report-dir", r]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // Whole-model refusals: no config.json; a filter that matches nothing.
    let o = cli(&[path_str(tmp.path()), "--report-dir", r]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("config.json"), "{}", text(&o));
    let o = cli(&[
        path_str(&overflow),
        "--filter",
        "model.layers.9.*",
        "--report-dir",
        r,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("--filter") && t.contains("model.layers.9.*") && t.contains("matches none"),
        "{t}"
    );
    assert!(t.contains("gptq-v1-asym-g32-f16-zero-overflow"), "{t}");
}

#[test]
fn a_quantization_config_over_unquantized_weights_is_a_whole_model_refusal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = unquantized_model(tmp.path());
    let reports = tmp.path().join("reports");
    let o = cli(&[path_str(&dir), "--report-dir", path_str(&reports)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("unquantized-under-gptq-config") && t.contains("no quantized linear"),
        "{t}"
    );
    assert!(
        t.contains("q_proj.weight") || t.contains("1 unquantized"),
        "{t}"
    );
}

#[test]
fn help_names_every_exit_code() {
    let o = cli(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let t = text(&o);
    for want in [
        "0: every layer passed",
        "1: a layer failed",
        "2: a whole-model refusal",
    ] {
        assert!(t.contains(want), "no {want:?} in:\n{t}");
    }
    assert!(!t.contains("Exit 1 on any refusal"), "{t}");
}

#[test]
fn a_run_that_fails_early_leaves_no_earlier_passing_report() {
    let tmp = tempfile::tempdir().unwrap();
    let reports = tmp.path().join("reports");
    let r = path_str(&reports);
    // A passing run (GPU checks skip here; with a GPU it runs them, and may pass too).
    let o = cli(&[path_str(&fixture("ct-sym-g128-f16")), "--report-dir", r]);
    assert!(reports.join("model-report.json").exists(), "{}", text(&o));
    // The same folder, a model that cannot be opened.
    let missing = tmp.path().join("no-such-model");
    let o = cli(&[path_str(&missing), "--report-dir", r]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    for f in ["model-report.json", "model-junit.xml", "model-summary.md"] {
        assert!(
            !reports.join(f).exists(),
            "{f} of the earlier run left behind"
        );
    }
}

#[test]
fn outside_the_checkout_the_built_in_safety_table_serves() {
    if has_gpu() {
        return; // the CPU-side run is what this checks
    }
    let tmp = tempfile::tempdir().unwrap();
    let reports = tmp.path().join("reports");
    let o = cli_in(
        tmp.path(),
        &[
            path_str(&fixture("ct-sym-g128-f16")),
            "--report-dir",
            path_str(&reports),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn without_a_gpu_the_header_says_cpu_side_checks_only() {
    let check = run(&fixture("ct-sym-g128-f16"), &CheckModelOptions::default()).unwrap();
    let md = report(&check);
    let first = md.lines().next().unwrap();
    assert!(first.contains("no GPU: CPU-side checks only"), "{first}");
    assert!(!first.contains("on gfx1151"), "{first}");
    if !has_gpu() {
        let tmp = tempfile::tempdir().unwrap();
        let reports = tmp.path().join("reports");
        let o = cli(&[
            path_str(&fixture("ct-sym-g128-f16")),
            "--report-dir",
            path_str(&reports),
        ]);
        let t = text(&o);
        assert!(t.contains("no GPU: CPU-side checks only"), "{t}");
        assert!(!t.contains("` on gfx1151"), "{t}");
    }
}

// ---- The GPTQ v1 overflow: exactly the cells whose decoded zero point is wrong ----

/// The truth of the library-written overflow fixture, from its oracle file alone: per module the
/// (row, group) cells where the library's own reading differs from what was quantized
/// (`intended_dequantized` vs `dequantized`), and the number of weights that differ.
fn overflow_truth(
    dir: &Path,
    module: &str,
    (n, k, g): (usize, usize, usize),
) -> (std::collections::BTreeSet<(usize, usize)>, usize) {
    let oracle = w4a16_checkpoint::Oracle::open(dir)
        .unwrap()
        .expect("oracle");
    let e = oracle
        .module(module, n, k, w4a16_reference::ActDtype::F16)
        .unwrap();
    let (intended, library) = (e.intended.unwrap(), e.dequantized.unwrap());
    let mut cells = std::collections::BTreeSet::new();
    let mut differ = 0;
    for i in 0..n * k {
        if intended[i] != library[i] {
            differ += 1;
            cells.insert((i / k, (i % k) / g));
        }
    }
    (cells, differ)
}

/// The structured defect cells of `module` in model-report.json: (row, group) → certain.
fn json_cells(check: &ModelCheck, module: &str) -> Vec<((usize, usize), bool)> {
    let json: serde_json::Value =
        serde_json::from_str(&w4a16_harness::model_check::report::json(check)).unwrap();
    let layer = json["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["module"] == module)
        .unwrap_or_else(|| panic!("no {module}"));
    let cells = layer["defect_cells"]
        .as_array()
        .unwrap_or_else(|| panic!("no defect_cells in {layer}"));
    cells
        .iter()
        .map(|c| {
            assert!(c["tensor"].as_str().unwrap().ends_with(".qzeros"), "{c}");
            assert_eq!(c["stored_nibble"], 15, "{c}");
            assert_eq!(c["decoded_z"], 0, "{c}");
            let cell = (
                c["row"].as_u64().unwrap() as usize,
                c["group"].as_u64().unwrap() as usize,
            );
            (cell, c["certain"].as_bool().unwrap())
        })
        .collect()
}

#[test]
fn the_v1_overflow_counts_exactly_the_wrong_zero_points_and_a_bound_without_the_truth() {
    let dir = fixture("gptq-v1-asym-g32-f16-zero-overflow");
    let check = run(&dir, &CheckModelOptions::default()).unwrap();
    // Without the oracle file only the bound is known.
    let tmp = tempfile::tempdir().unwrap();
    let bare = tmp.path().join("gptq-v1-asym-g32-f16-zero-overflow");
    std::fs::create_dir(&bare).unwrap();
    for f in [
        "config.json",
        "quantize_config.json",
        "gptq_model-4bit-32g.safetensors",
    ] {
        std::fs::copy(dir.join(f), bare.join(f)).unwrap();
    }
    let bare_check = run(&bare, &CheckModelOptions::default()).unwrap();
    let (mut total, mut total_differ) = (0, 0);
    let linears = check
        .layers
        .iter()
        .filter(|l| matches!(l.kind, LayerKind::Linear | LayerKind::FusedPart));
    for l in linears {
        let s = l.shape.unwrap();
        let (truth, differ) = overflow_truth(&dir, &l.module, (s.n, s.k, s.group));
        total += s.n * s.k;
        total_differ += differ;
        assert_eq!(differ, truth.len() * s.group, "{}: whole groups", l.module);
        let d = l.defects.join("; ");
        if truth.is_empty() {
            assert!(d.is_empty(), "{}: {d}", l.module);
            continue;
        }
        // With the producer's intended weights: exact, every cell certain.
        let cells = json_cells(&check, &l.module);
        let got: std::collections::BTreeSet<_> = cells.iter().map(|c| c.0).collect();
        assert_eq!(got, truth, "{}", l.module);
        assert!(cells.iter().all(|c| c.1), "{}", l.module);
        let share = format!("{:.2}%", 100.0 * differ as f64 / (s.n * s.k) as f64);
        assert!(
            d.contains(&format!("{} zero points", truth.len()))
                && d.contains("certainly wrong")
                && d.contains(&share),
            "{}: truth {} cells, {share}: {d}",
            l.module,
            truth.len()
        );
        assert!(!d.contains("cannot be recovered"), "{d}");
        // From the file alone: a bound, every cell possible, none certain, the truth inside.
        let bare_layer = bare_check
            .layers
            .iter()
            .find(|b| b.module == l.module)
            .unwrap();
        let bd = bare_layer.defects.join("; ");
        assert!(bd.contains("at most") && !bd.contains("certainly"), "{bd}");
        let possible = json_cells(&bare_check, &l.module);
        assert!(possible.iter().all(|c| !c.1), "{}", l.module);
        let possible: std::collections::BTreeSet<_> = possible.iter().map(|c| c.0).collect();
        assert!(possible.is_superset(&truth), "{}", l.module);
    }
    // The figure docs/check-model.md states is the measured one.
    let figure = format!("{:.2} %", 100.0 * total_differ as f64 / total as f64);
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/check-model.md"))
            .unwrap();
    assert!(doc.contains(&figure), "docs/check-model.md lacks {figure}");
}

// ---- A producer whose own GEMM accumulates in fp16 (AutoAWQ's Triton GEMM) ----

/// A safetensors file as (metadata, [(name, dtype, shape, bytes)]), read and written by hand so
/// that the test owes nothing to the readers it checks.
type Tensors = Vec<(String, String, Vec<usize>, Vec<u8>)>;

fn read_safetensors(path: &Path) -> Tensors {
    let bytes = std::fs::read(path).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    let data = &bytes[8 + len..];
    let mut out: Tensors = header
        .iter()
        .filter(|(name, _)| *name != "__metadata__")
        .map(|(name, t)| {
            let off: Vec<usize> = t["data_offsets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as usize)
                .collect();
            let shape = t["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as usize)
                .collect();
            (
                name.clone(),
                t["dtype"].as_str().unwrap().to_string(),
                shape,
                data[off[0]..off[1]].to_vec(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn write_safetensors(path: &Path, metadata: &[(&str, &str)], tensors: &Tensors) {
    let mut header = serde_json::Map::new();
    let meta: serde_json::Map<String, serde_json::Value> = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
        .collect();
    header.insert("__metadata__".into(), meta.into());
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [data.len(), data.len() + bytes.len()]}),
        );
        data.extend_from_slice(bytes);
    }
    let mut h = serde_json::to_vec(&header).unwrap();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut file = (h.len() as u64).to_le_bytes().to_vec();
    file.extend(h);
    file.extend(data);
    std::fs::write(path, file).unwrap();
}

fn halves(bytes: &[u8]) -> Vec<half::f16> {
    bytes
        .chunks_exact(2)
        .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])))
        .collect()
}

/// `y = x · wᵀ` as an fp16-accumulating GEMM computes it: per BLOCK_K tile a partial sum (exact
/// here: f16 products summed in f64, then rounded once to fp16), then a running fp16
/// accumulator over the tiles, each addition rounded to fp16.
fn fp16_accumulated(x: &[half::f16], w: &[half::f16], k: usize, block_k: usize) -> Vec<half::f16> {
    let (m, n) = (x.len() / k, w.len() / k);
    let mut y = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let mut acc: Option<half::f16> = None;
            for t in (0..k).step_by(block_k) {
                let p: f64 = (t..t + block_k)
                    .map(|c| x[i * k + c].to_f64() * w[j * k + c].to_f64())
                    .sum();
                let p = half::f16::from_f64(p);
                acc = Some(match acc {
                    None => p,
                    Some(a) => half::f16::from_f64(a.to_f64() + p.to_f64()),
                });
            }
            y.push(acc.unwrap());
        }
    }
    y
}

/// The awq fixture with its oracle's `y` replaced by an fp16-accumulating GEMM's (BLOCK_K 32),
/// `metadata` added, and `plant` applied to the first module's y.
fn awq_with_fp16_y(root: &Path, metadata: &[(&str, &str)], plant: bool) -> PathBuf {
    let src = fixture("awq-gemm-g128-f16");
    let dir = root.join(format!("awq-fp16-y-{}-{plant}", metadata.len()));
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let mut tensors = read_safetensors(&src.join("w4a16-oracle.safetensors"));
    let find = |ts: &Tensors, name: &str| ts.iter().find(|t| t.0 == name).cloned().unwrap();
    let modules: Vec<String> = tensors
        .iter()
        .filter_map(|t| t.0.strip_suffix(".y").map(str::to_string))
        .collect();
    assert!(!modules.is_empty());
    for (i, module) in modules.iter().enumerate() {
        let x = find(&tensors, &format!("{module}.x"));
        let w = find(&tensors, &format!("{module}.dequantized"));
        let k = x.2[1];
        let (xs, ws) = (halves(&x.3), halves(&w.3));
        let mut y = fp16_accumulated(&xs, &ws, k, 32);
        if plant && i == 0 {
            // Far outside any bound: |Σ x·w| summed in magnitudes, times 2^-4, added to y[0].
            let a: f64 = (0..k)
                .map(|c| (xs[c].to_f64() * ws[c].to_f64()).abs())
                .sum();
            y[0] = half::f16::from_f64(y[0].to_f64() + a / 16.0 + 1e-3);
        }
        let bytes: Vec<u8> = y.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect();
        let slot = tensors
            .iter_mut()
            .find(|t| t.0 == format!("{module}.y"))
            .unwrap();
        slot.3 = bytes;
    }
    write_safetensors(&dir.join("w4a16-oracle.safetensors"), metadata, &tensors);
    dir
}

fn oracle_outcomes(check: &ModelCheck) -> Vec<(String, Outcome, String)> {
    check
        .verdicts
        .iter()
        .filter(|v| v.check == Check::Oracle)
        .map(|v| (v.case_id.clone(), v.outcome, v.detail.clone()))
        .collect()
}

#[test]
fn an_fp16_accumulating_producer_is_judged_by_its_own_recipe_and_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let fp16 = [("y_recipe", "fp16-accumulate"), ("y_block_k", "32")];
    // Declared: within the derived fp16-accumulation bound.
    let check = run(
        &awq_with_fp16_y(tmp.path(), &fp16, false),
        &CheckModelOptions::default(),
    )
    .unwrap();
    let oracles = oracle_outcomes(&check);
    assert!(oracles.len() >= 7, "{oracles:#?}");
    for (id, outcome, detail) in &oracles {
        assert_eq!(*outcome, Outcome::Pass, "{id}: {detail}");
        assert!(detail.contains("fp16-accumulate"), "{id}: {detail}");
    }
    // Undeclared (the fp32 recipe by default): the same output is outside its bound.
    let check = run(
        &awq_with_fp16_y(tmp.path(), &[], false),
        &CheckModelOptions::default(),
    )
    .unwrap();
    assert!(
        oracle_outcomes(&check)
            .iter()
            .any(|(_, o, _)| *o == Outcome::Fail),
        "{:#?}",
        oracle_outcomes(&check)
    );
    // Declared, with an error planted beyond the fp16 bound: still refused.
    let check = run(
        &awq_with_fp16_y(tmp.path(), &fp16, true),
        &CheckModelOptions::default(),
    )
    .unwrap();
    let failed: Vec<_> = oracle_outcomes(&check)
        .into_iter()
        .filter(|(_, o, _)| *o == Outcome::Fail)
        .collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert!(failed[0].2.contains("outside"), "{failed:#?}");
    // An unknown recipe in the file is refused by name.
    let check = run(
        &awq_with_fp16_y(tmp.path(), &[("y_recipe", "tf32")], false),
        &CheckModelOptions::default(),
    );
    let refused = match check {
        Err(e) => e,
        Ok(c) => format!("{:?}", oracle_outcomes(&c)),
    };
    assert!(
        refused.contains("y_recipe") && refused.contains("tf32"),
        "{refused}"
    );
}

/// AutoAWQ's own Triton GEMM (`awq_gemm_triton`, fp16 accumulation per 32-wide K tile and fp16
/// atomic adds of its K splits), run by `scripts/awq-triton-y.py` on the awq fixture's packed
/// tensors: its y, under the fp16-accumulating recipe the oracle declares, is within the derived
/// bound for every module, while the weights stay bit-exact.
#[test]
fn autoawqs_triton_gemm_output_passes_under_its_declared_fp16_recipe() {
    let dir = fixture("awq-gemm-g128-f16-triton-y");
    let check = run(&dir, &CheckModelOptions::default()).unwrap();
    let oracles = oracle_outcomes(&check);
    assert_eq!(oracles.len(), 7, "{oracles:#?}");
    for (id, outcome, detail) in &oracles {
        assert_eq!(*outcome, Outcome::Pass, "{id}: {detail}");
        assert!(detail.contains("fp16-accumulate"), "{id}: {detail}");
    }
    // The same y under the default fp32-accumulation recipe (the recipe's keys dropped).
    let tmp = tempfile::tempdir().unwrap();
    let undeclared = tmp.path().join("undeclared");
    std::fs::create_dir_all(&undeclared).unwrap();
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(dir.join(f), undeclared.join(f)).unwrap();
    }
    let oracle = dir.join("w4a16-oracle.safetensors");
    let bytes = std::fs::read(&oracle).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    let meta: Vec<(String, String)> = header["__metadata__"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| !k.starts_with("y_recipe") && !k.starts_with("y_block_k"))
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    let meta: Vec<(&str, &str)> = meta.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    write_safetensors(
        &undeclared.join("w4a16-oracle.safetensors"),
        &meta,
        &read_safetensors(&oracle),
    );
    let check = run(&undeclared, &CheckModelOptions::default()).unwrap();
    // Measured: every module outside the fp32 bound (worst ratios 4.8 to 12.7), so the recipe
    // declaration is what lets a bit-exact producer pass, not a loose bound.
    let outcomes = oracle_outcomes(&check);
    assert_eq!(outcomes.len(), 7);
    for (id, outcome, detail) in &outcomes {
        assert_eq!(*outcome, Outcome::Fail, "{id}: {detail}");
        assert!(
            detail.contains("bit-exact") && detail.contains("(fp32-accumulate) is outside"),
            "{id}: {detail}"
        );
    }
}
