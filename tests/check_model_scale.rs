//! check-model at model scale, on small shapes so it stays fast (docs/check-model.md, "At model
//! scale"): `w4a16 make-synthetic-model` writes a model in each producer's format that check-model
//! reads with no failure, the same bytes for the same seed, and refuses bad options by name.

use std::path::{Path, PathBuf};
use w4a16_cases::Date;
use w4a16_checkpoint::synthetic::{SyntheticModel, SyntheticShape};
use w4a16_harness::model_check::{CheckModelOptions, LayerStatus, ModelCheck, check_model};
use w4a16_harness::require::{Requirement, Skip};
use w4a16_harness::runner::execute::RunContext;
use w4a16_harness::runner::session;
use w4a16_harness::runner::{Check, Outcome};
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

fn check(dir: &Path, opts: &CheckModelOptions) -> ModelCheck {
    let target = Target::Gfx1151;
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
    check_model(dir, opts, &ctx, &|_| {}).unwrap_or_else(|e| panic!("{e}"))
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
        let check = check(&dir, &CheckModelOptions::default());
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
