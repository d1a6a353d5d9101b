//! check-model at model scale, on small shapes so it stays fast (docs/check-model.md, "At model
//! scale"):
//! - `w4a16 make-synthetic-model` writes a model in each producer's format that check-model
//!   reads with no failure, the same bytes for the same seed, and refuses bad options by name;
//! - a decoder layer's conversion checks run in parallel yet the report keeps one order, and a
//!   fused projection takes its parts as they were read for their own checks;
//! - launched in the runner's workers, a model gives the verdicts it gives in-process, and a
//!   worker that dies is one FAULT naming the layer while the check goes on;
//! - each layer is converted once, by the parent, whether it launches there or in a worker;
//!   the workers' decoder layers overlap the parent's next one, at most two in flight, and the
//!   report keeps the order of a run without overlap.

use std::path::{Path, PathBuf};
use std::time::Duration;
use w4a16_cases::Date;
use w4a16_checkpoint::synthetic::{SyntheticModel, SyntheticShape};
use w4a16_harness::model_check::isolated::{self, ModelWorkers};
use w4a16_harness::model_check::{
    CheckModelOptions, LayerKind, LayerStatus, ModelCheck, Progress, check_model,
};
use w4a16_harness::require::{Requirement, Skip};
use w4a16_harness::runner::execute::RunContext;
use w4a16_harness::runner::isolate::WorkerSpec;
use w4a16_harness::runner::session;
use w4a16_harness::runner::{Check, Outcome};
use w4a16_kernels::RunTarget;
use w4a16_kernels::{Execution, Target};
use w4a16_reference::ActDtype;
use w4a16_reference::formats::Producer;
use w4a16_select::config::KernelConfig;

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_w4a16"))
}

fn cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new(exe())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .env_remove("W4A16_REQUIRE")
        .env_remove("W4A16_CASES")
        .output()
        .expect("the w4a16 binary runs")
}

fn check(dir: &Path, opts: &CheckModelOptions, events: &mut Vec<String>) -> ModelCheck {
    check_on(Target::Gfx1151, dir, opts, events)
}

fn check_on(
    target: Target,
    dir: &Path,
    opts: &CheckModelOptions,
    events: &mut Vec<String>,
) -> ModelCheck {
    let cases = w4a16_cases::locate(None).expect("the cases folder");
    let ctx = RunContext {
        target,
        execution: Execution::Native,
        device: None,
        no_device: Some(Skip {
            requirement: Requirement::Gpu,
            reason: "no GPU in this test".into(),
        }),
        config: KernelConfig::default(),
        c_target: session::c_target(&cases, target).expect("safety.toml"),
        known_bad: &[],
        today: Date::today_utc(),
        artifacts: None,
        full_reference_macs: 2.0e9,
        sample_flops: 2.0e9,
        reference: w4a16_harness::runner::execute::ReferenceChoice::Cpu,
    };
    let log = std::sync::Mutex::new(Vec::new());
    let progress = |p: Progress<'_>| {
        let line = match p {
            Progress::Planned { units, layers } => format!("planned {units} {layers}"),
            Progress::Started(u) => format!("started {u}"),
            Progress::Finished(r) => format!("finished {}", r.module),
            Progress::UnitDone(u) => format!("done {u}"),
        };
        log.lock().unwrap().push(line);
    };
    let out = check_model(dir, opts, &ctx, &progress).unwrap_or_else(|e| panic!("{e}"));
    events.extend(log.into_inner().unwrap());
    out
}

fn tiny(producer: Producer, layers: usize, seed: u64) -> SyntheticModel {
    SyntheticModel {
        shape: SyntheticShape::Tiny,
        layers,
        producer,
        group: 128,
        symmetric: producer == Producer::GptqV1,
        dtype: ActDtype::F16,
        seed,
    }
}

fn write(model: &SyntheticModel, dir: &Path) -> PathBuf {
    model.write(dir, &mut |_| {}).expect("a tiny model writes");
    dir.to_path_buf()
}

fn outcomes(check: &ModelCheck) -> Vec<(String, String, Outcome)> {
    check
        .verdicts
        .iter()
        .map(|v| (v.case_id.clone(), v.check.to_string(), v.outcome))
        .collect()
}

#[test]
fn a_synthetic_model_in_each_format_checks_with_no_failure() {
    let root = tempfile::tempdir().unwrap();
    for producer in [
        Producer::CompressedTensors,
        Producer::GptqV1,
        Producer::GptqV2,
        Producer::Awq,
    ] {
        let dir = write(
            &tiny(producer, 1, 3),
            &root.path().join(producer.to_string()),
        );
        let mut events = Vec::new();
        let check = check(&dir, &CheckModelOptions::default(), &mut events);
        assert!(!check.failed(), "{producer}: {:#?}", check.verdicts);
        // q, k, v, o, gate, up, down, and q|k|v and gate|up fused.
        assert_eq!(check.layers.len(), 9, "{producer}");
        assert!(
            check.layers.iter().all(|l| l.status == LayerStatus::Pass),
            "{producer}: {:?}",
            check
                .layers
                .iter()
                .map(|l| (&l.module, l.status))
                .collect::<Vec<_>>()
        );
        assert!(
            check
                .verdicts
                .iter()
                .any(|v| v.check == Check::Convert(producer) && v.outcome == Outcome::Pass),
            "{producer}: its own format's conversion"
        );
    }
}

#[test]
fn the_same_seed_writes_the_same_bytes_and_another_seed_other_bytes() {
    let root = tempfile::tempdir().unwrap();
    let shard = "model-00001-of-00001.safetensors";
    let read = |dir: PathBuf| std::fs::read(dir.join(shard)).expect("the shard");
    let a = read(write(&tiny(Producer::Awq, 1, 7), &root.path().join("a")));
    let b = read(write(&tiny(Producer::Awq, 1, 7), &root.path().join("b")));
    let c = read(write(&tiny(Producer::Awq, 1, 8), &root.path().join("c")));
    assert!(a == b, "seed 7 twice: different bytes");
    assert_eq!(a.len(), c.len());
    assert!(a != c, "seeds 7 and 8 wrote the same bytes");
}

#[test]
fn the_report_keeps_one_order_and_a_fused_projection_reads_no_tensor_again() {
    let root = tempfile::tempdir().unwrap();
    let dir = write(&tiny(Producer::CompressedTensors, 2, 1), root.path());
    let mut events = Vec::new();
    let first = check(&dir, &CheckModelOptions::default(), &mut events);
    let again = check(&dir, &CheckModelOptions::default(), &mut Vec::new());
    assert_eq!(
        outcomes(&first),
        outcomes(&again),
        "parallel checks reordered the report"
    );
    let kinds: Vec<LayerKind> = first.layers.iter().map(|l| l.kind).collect();
    let fused_at = kinds
        .iter()
        .position(|k| *k == LayerKind::FusedProjection)
        .expect("fused projections");
    assert_eq!(
        fused_at, 14,
        "every linear first, then the fused projections: {kinds:?}"
    );
    // Each layer's verdicts follow the layers' order.
    let mut last = 0;
    for v in &first.verdicts {
        let at = first
            .layers
            .iter()
            .position(|l| v.case_id == l.id || v.case_id.starts_with(&format!("{}/", l.id)))
            .expect("every verdict belongs to a layer");
        assert!(at >= last, "{} after layer {last}", v.case_id);
        last = at;
    }
    for l in first
        .layers
        .iter()
        .filter(|l| l.kind == LayerKind::FusedProjection)
    {
        assert_eq!(l.read_s, 0.0, "{}: its parts were read again", l.module);
    }
    // One step per decoder layer, in order, each announced before its layers finish.
    assert_eq!(events[0], "planned 2 18");
    assert_eq!(events[1], "started model.layers.0");
    assert_eq!(events[11], "done model.layers.0");
    assert_eq!(events[12], "started model.layers.1");
    assert_eq!(events.last().unwrap(), "done model.layers.1");
}

#[test]
fn a_filter_on_one_part_still_checks_its_fused_projection_whole() {
    let root = tempfile::tempdir().unwrap();
    let dir = write(&tiny(Producer::GptqV2, 1, 2), root.path());
    let opts = CheckModelOptions {
        filter: Some("model.layers.0.self_attn.q_proj".into()),
        ..CheckModelOptions::default()
    };
    let check = check(&dir, &opts, &mut Vec::new());
    assert!(!check.failed(), "{:#?}", check.verdicts);
    let modules: Vec<(&str, LayerKind)> = check
        .layers
        .iter()
        .map(|l| (l.module.as_str(), l.kind))
        .collect();
    assert_eq!(
        modules,
        [
            ("model.layers.0.self_attn.q_proj", LayerKind::FusedPart),
            (
                "model.layers.0.self_attn.qkv_proj",
                LayerKind::FusedProjection
            ),
        ]
    );
    let fused = &check.layers[1];
    assert_eq!(
        fused.shape.map(|s| s.n),
        Some(512 + 2 * 128),
        "q|k|v stacked"
    );
    assert!(
        fused.read_s > 0.0,
        "k and v are read for the projection alone"
    );
}

#[test]
fn make_synthetic_model_writes_a_model_check_model_passes() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("m");
    let d = dir.to_str().unwrap();
    let out = cli(&[
        "make-synthetic-model",
        d,
        "--shape",
        "tiny",
        "--layers",
        "2",
        "--format",
        "awq",
        "--seed",
        "5",
    ]);
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{text}");
    assert!(text.contains("layer 2/2"), "{text}");
    if Path::new("/dev/nvidiactl").exists() || Path::new("/dev/kfd").exists() {
        return; // With a GPU the launches run for real: the GPU job checks models there.
    }
    let reports = root.path().join("report");
    let out = cli(&["check-model", d, "--report-dir", reports.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
}

#[test]
fn bad_options_are_refused_naming_the_option_and_what_was_expected() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("m");
    let d = dir.to_str().unwrap();
    let refused = |args: &[&str], wanted: &[&str]| {
        let out = cli(&[&["make-synthetic-model", d][..], args].concat());
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        for w in wanted {
            assert!(text.contains(w), "{args:?}: {w:?} not in {text}");
        }
    };
    refused(&["--layers", "0"], &["--layers", "expected 1 or more"]);
    refused(
        &["--group", "96"],
        &["--group", "dividing every K", "512", "96"],
    );
    refused(&["--shape", "llama-9b"], &["llama-9b", "llama-70b", "tiny"]);
    refused(&["--format", "legacy-unpacked-zp"], &["--format", "awq"]);
    assert!(!dir.exists(), "a refused option wrote nothing");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("other.safetensors"), b"x").unwrap();
    refused(&[], &[d, "not empty"]);
}

// ---- Launches in the runner's fault-isolated workers ----

fn has_gpu() -> bool {
    Path::new("/dev/nvidiactl").exists() || Path::new("/dev/kfd").exists()
}

/// Workers of this binary for a check of `dir` under `opts` on sm_90, which has no device here
/// (the launches skip, as in this process without one).
fn workers(dir: &Path, opts: &CheckModelOptions, abort_on: Option<&str>) -> ModelWorkers {
    let mut spec = WorkerSpec::simulated();
    spec.simulate = false;
    spec.cases_dir = Some(w4a16_cases::locate(None).expect("the cases folder"));
    spec.target = Some(RunTarget::native(Target::Sm90));
    spec.model = Some(isolated::launches(dir, opts));
    spec.abort_on = abort_on.map(str::to_string);
    ModelWorkers {
        exe: exe().to_path_buf(),
        spec,
        per_case_timeout: Duration::from_secs(60),
    }
}

#[test]
fn launches_in_workers_give_the_verdicts_of_launches_in_this_process() {
    if has_gpu() {
        return; // The workers would launch for real, this process without a device would not.
    }
    let root = tempfile::tempdir().unwrap();
    let dir = write(&tiny(Producer::GptqV2, 2, 4), root.path());
    let here = check_on(
        Target::Sm90,
        &dir,
        &CheckModelOptions::default(),
        &mut Vec::new(),
    );
    let mut opts = CheckModelOptions::default();
    opts.workers = Some(workers(&dir, &opts, None));
    let isolated = check_on(Target::Sm90, &dir, &opts, &mut Vec::new());
    assert!(!isolated.failed(), "{:#?}", isolated.verdicts);
    assert_eq!(outcomes(&isolated), outcomes(&here));
    let selected = |c: &ModelCheck| {
        c.layers
            .iter()
            .map(|l| l.selected.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(selected(&isolated), selected(&here));
}

#[test]
fn a_worker_that_dies_is_one_fault_naming_the_layer_and_the_check_goes_on() {
    if has_gpu() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let dir = write(&tiny(Producer::Awq, 2, 6), root.path());
    let here = check_on(
        Target::Sm90,
        &dir,
        &CheckModelOptions::default(),
        &mut Vec::new(),
    );
    let crash = "/model.layers.0.mlp.down_proj/M=5/";
    let mut opts = CheckModelOptions::default();
    opts.workers = Some(workers(&dir, &opts, Some(crash)));
    let check = check_on(Target::Sm90, &dir, &opts, &mut Vec::new());
    assert!(check.failed(), "a fault fails the run");
    let faults: Vec<_> = check
        .verdicts
        .iter()
        .filter(|v| v.outcome == Outcome::Fault)
        .collect();
    assert_eq!(faults.len(), 1, "{faults:#?}");
    assert!(faults[0].case_id.contains(crash), "{}", faults[0].case_id);
    assert!(
        faults[0].detail.contains("worker exited"),
        "{}",
        faults[0].detail
    );
    let failed: Vec<&str> = check
        .layers
        .iter()
        .filter(|l| l.status != LayerStatus::Pass)
        .map(|l| l.module.as_str())
        .collect();
    assert_eq!(failed, ["model.layers.0.mlp.down_proj"]);
    // Every other case, the crashed layer's other batch sizes and the next decoder layer
    // included, ran in a fresh worker as it runs here.
    let others = |c: &ModelCheck| {
        let mut o = outcomes(c);
        o.retain(|(id, _, _)| !id.contains(crash));
        o
    };
    assert_eq!(others(&check), others(&here));
    assert!(
        check.verdicts.iter().any(|v| v
            .case_id
            .contains("/model.layers.1.mlp.gate_up_proj/M=256/")),
        "the check went on to the next decoder layer"
    );
}

#[test]
fn the_decoder_layers_go_in_their_numeric_order() {
    let root = tempfile::tempdir().unwrap();
    let dir = write(&tiny(Producer::CompressedTensors, 11, 9), root.path());
    let opts = CheckModelOptions {
        batches: vec![1],
        ..CheckModelOptions::default()
    };
    let mut events = Vec::new();
    let check = check(&dir, &opts, &mut events);
    assert!(!check.failed());
    let started: Vec<String> = events
        .iter()
        .filter_map(|e| e.strip_prefix("started model.layers."))
        .map(str::to_string)
        .collect();
    let want: Vec<String> = (0..11).map(|i| i.to_string()).collect();
    assert_eq!(started, want, "layers.2 before layers.10");
}

#[test]
fn a_moe_layers_experts_read_in_parallel_keep_the_expert_order() {
    let cases = w4a16_cases::locate(None).expect("the cases folder");
    let dir = cases
        .join("checkpoints")
        .join("project-ct-qwen2moe-bf16-asym-g32");
    let first = check(&dir, &CheckModelOptions::default(), &mut Vec::new());
    let again = check(&dir, &CheckModelOptions::default(), &mut Vec::new());
    assert!(!first.failed(), "{:#?}", first.verdicts);
    assert_eq!(
        outcomes(&first),
        outcomes(&again),
        "parallel experts reordered the report"
    );
    for layer in first.layers.iter().filter(|l| l.kind == LayerKind::Experts) {
        // Each expert's checkpoint verdict sits under the layer, in expert order.
        let experts: Vec<usize> = first
            .verdicts
            .iter()
            .filter(|v| v.check == Check::Checkpoint)
            .filter_map(|v| v.case_id.strip_prefix(&format!("{}/", layer.id)))
            .filter_map(|m| m.split(".experts.").nth(1)?.split('.').next()?.parse().ok())
            .collect();
        assert!(experts.len() >= 4, "{}: {experts:?}", layer.module);
        assert!(
            experts.windows(2).all(|w| w[0] <= w[1]),
            "{}: {experts:?}",
            layer.module
        );
    }
}

#[test]
fn a_moe_layers_launches_in_workers_give_the_verdicts_of_launches_in_this_process() {
    if has_gpu() {
        return;
    }
    let cases = w4a16_cases::locate(None).expect("the cases folder");
    let dir = cases
        .join("checkpoints")
        .join("project-ct-qwen2moe-bf16-asym-g32");
    let here = check_on(
        Target::Sm90,
        &dir,
        &CheckModelOptions::default(),
        &mut Vec::new(),
    );
    let crash = ".mlp.experts.down_proj/T=6/";
    let mut opts = CheckModelOptions::default();
    opts.workers = Some(workers(&dir, &opts, Some(crash)));
    let isolated = check_on(Target::Sm90, &dir, &opts, &mut Vec::new());
    let faults: Vec<&str> = isolated
        .verdicts
        .iter()
        .filter(|v| v.outcome == Outcome::Fault)
        .map(|v| v.case_id.as_str())
        .collect();
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(faults[0].contains(crash), "{faults:?}");
    let others = |c: &ModelCheck| {
        let mut o = outcomes(c);
        o.retain(|(id, _, _)| !id.contains(crash));
        o
    };
    assert_eq!(others(&isolated), others(&here));
    assert!(
        isolated
            .verdicts
            .iter()
            .any(|v| v.case_id.contains(".mlp.experts.gate_up_proj/T=256/")),
        "the experts' launches ran in the workers"
    );
}

#[test]
fn each_layer_is_converted_once_whether_it_launches_here_or_in_a_worker() {
    if has_gpu() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let dir = write(&tiny(Producer::CompressedTensors, 2, 5), root.path());
    let here = check_on(
        Target::Sm90,
        &dir,
        &CheckModelOptions::default(),
        &mut Vec::new(),
    );
    let mut opts = CheckModelOptions::default();
    opts.workers = Some(workers(&dir, &opts, None));
    let isolated = check_on(Target::Sm90, &dir, &opts, &mut Vec::new());
    assert!(!isolated.failed(), "{:#?}", isolated.verdicts);
    for check in [&here, &isolated] {
        for l in &check.layers {
            assert_eq!(
                l.times.conversions, 1,
                "{}: converted {} times",
                l.module, l.times.conversions
            );
        }
        // The total counts the workers' conversions too: they made none.
        assert_eq!(check.times.conversions, check.layers.len());
    }
    // The workers launched what the parent converted: its `convert` verdicts at every batch.
    let converts = |c: &ModelCheck| {
        c.verdicts
            .iter()
            .filter(|v| matches!(v.check, Check::Convert(_)))
            .map(|v| (v.case_id.clone(), v.outcome, v.detail.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(converts(&isolated), converts(&here));
    assert!(
        isolated.verdicts.iter().any(|v| v
            .case_id
            .contains("/model.layers.1.mlp.gate_up_proj/M=256/")
            && matches!(v.check, Check::Convert(_))),
        "the fused projections' launches carry their conversion"
    );
}

#[test]
fn decoder_layers_overlap_at_most_two_in_flight_and_the_report_keeps_its_order() {
    if has_gpu() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let dir = write(&tiny(Producer::Awq, 5, 3), root.path());
    let base = CheckModelOptions {
        batches: vec![1, 6],
        ..CheckModelOptions::default()
    };
    let here = check_on(Target::Sm90, &dir, &base, &mut Vec::new());
    let mut opts = base.clone();
    opts.workers = Some(workers(&dir, &opts, None));
    let mut events = Vec::new();
    let isolated = check_on(Target::Sm90, &dir, &opts, &mut events);
    assert!(!isolated.failed(), "{:#?}", isolated.verdicts);
    // Verdict for verdict, in the same order, as without workers and without overlap.
    let full = |c: &ModelCheck| {
        c.verdicts
            .iter()
            .map(|v| {
                (
                    v.case_id.clone(),
                    v.check.to_string(),
                    v.outcome,
                    v.bucket.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(full(&isolated), full(&here));
    let modules = |c: &ModelCheck| {
        c.layers
            .iter()
            .map(|l| l.module.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(modules(&isolated), modules(&here));
    // The next decoder layer starts before the last one is done, never two ahead; the layers
    // finish in order.
    let (mut started, mut done, mut overlapped) = (0usize, 0usize, false);
    for e in &events {
        if let Some(u) = e.strip_prefix("started ") {
            assert_eq!(u, format!("model.layers.{started}"), "{events:#?}");
            started += 1;
        } else if let Some(u) = e.strip_prefix("done ") {
            assert_eq!(u, format!("model.layers.{done}"), "{events:#?}");
            done += 1;
        }
        assert!(
            started - done <= 2,
            "three decoder layers in flight: {events:#?}"
        );
        overlapped |= started - done == 2;
    }
    assert_eq!((started, done), (5, 5));
    assert!(
        overlapped,
        "the decoder layers never overlapped: {events:#?}"
    );
}

/// Measures the worker path where no GPU is: `W4A16_SCALE_MODEL=/tmp/m70 W4A16_SPANS=1 cargo
/// test --test check_model_scale -- --ignored --nocapture measure` (docs/check-model.md, "At
/// model scale"): the launches skip in the workers, the parent's staging, the handoff and the
/// workers' reading of it are what is timed.
#[test]
#[ignore = "a measurement: needs W4A16_SCALE_MODEL, a model directory"]
fn measure_the_worker_path_on_a_model() {
    let Some(dir) = std::env::var_os("W4A16_SCALE_MODEL").map(PathBuf::from) else {
        panic!("set W4A16_SCALE_MODEL to a model directory (w4a16 make-synthetic-model)");
    };
    let mut opts = CheckModelOptions::default();
    opts.workers = Some(workers(&dir, &opts, None));
    let start = std::time::Instant::now();
    let check = check_on(Target::Sm90, &dir, &opts, &mut Vec::new());
    eprintln!(
        "{} decoder layers' layers: {}, wall {:.1} s, conversions {} (parent {}), peak RSS {} MiB",
        dir.display(),
        check.layers.len(),
        start.elapsed().as_secs_f64(),
        check.times.conversions,
        check
            .layers
            .iter()
            .map(|l| l.times.conversions)
            .sum::<usize>(),
        check.peak_rss_bytes.unwrap_or(0) >> 20
    );
    assert!(!check.failed(), "{:#?}", check.verdicts);
}
