//! The main job (`w4a16 run`, nothing asked of the device) on a machine without a GPU: the ISA
//! emulator runs the default target's code objects in the GPU's place over the main job's
//! share, the first line says so, the cases outside the share run their CPU-side checks and
//! skip their GPU checks naming the share; a run that names its target, or whose
//! `W4A16_REQUIRE` demands a GPU, is left as it was. (With a GPU here the main job runs on it,
//! and this file has nothing to check.)

use std::path::Path;
use std::process::{Command, Output};
use w4a16_device::{DeviceRequest, open};
use w4a16_harness::runner::session::{self, Backend};
use w4a16_kernels::Target;

fn w4a16(report_dir: &Path, args: &[&str], require: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_w4a16"));
    cmd.arg("--cases")
        .arg(w4a16_cases::locate(None).expect("the cases folder"))
        .arg("run")
        .args(args)
        .arg("--report-dir")
        .arg(report_dir)
        .env_remove("W4A16_REQUIRE");
    if let Some(r) = require {
        cmd.env("W4A16_REQUIRE", r);
    }
    cmd.output().unwrap()
}

fn verdicts(report_dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(report_dir.join("report.json")).unwrap();
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    report["verdicts"].as_array().unwrap().clone()
}

/// One layer of `checkpoints` at M = 1 (inside the share) and M = 6 (outside it).
const FILTER: &str = "checkpoints/ckpt.k256-n128/M=*/f16/sym/g32/exact";

const SHARE_SKIP: &str = "needs a GPU: outside the main job's share";

#[test]
fn without_a_gpu_the_main_job_runs_kernels_on_the_isa_emulator() {
    if let (_, Backend::Device(d)) = session::open_backend(None) {
        w4a16_harness::require::announce_skip(
            "no-gpu",
            &format!("{} is here: the main job runs on it", d.name()),
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let out = w4a16(dir, &["--suite", "checkpoints", "--filter", FILTER], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = stderr.lines().next().unwrap_or_default();
    if open(DeviceRequest::emulator(Target::Gfx1151)).is_err() {
        // No AMD toolchain: the GPU checks skip, the skip naming the install command.
        assert!(first.contains("scripts/amd-toolchain.sh"), "{stderr}");
        w4a16_harness::require::announce_skip(
            "amd-toolchain",
            "no ISA emulator here: only the no-emulator line of the main job was checked",
        );
        return;
    }
    assert!(out.status.success(), "{stderr}");
    assert!(
        first.starts_with("w4a16: no GPU here")
            && first.contains("the ISA emulator runs gfx1151's code objects in its place"),
        "the first line says what runs the kernels: {stderr}"
    );
    let vs = verdicts(dir);
    let kernel_checks = ["skinny", "fused", "fallback", "dequant", "dequant+dense"];
    let ran = vs
        .iter()
        .filter(|v| kernel_checks.contains(&v["check"].as_str().unwrap()))
        .filter(|v| v["outcome"] == "pass")
        .count();
    assert!(ran > 0, "kernels ran on the emulator: {stderr}");
    let skips: Vec<&str> = vs
        .iter()
        .filter(|v| v["outcome"] == "skip")
        .map(|v| v["detail"].as_str().unwrap())
        .collect();
    assert!(!skips.is_empty(), "M = 6 is above the share");
    assert!(
        skips.iter().all(|d| d.starts_with(SHARE_SKIP)),
        "every skip is the share's, none a plain 'needs a GPU': {skips:?}"
    );
    // The cases outside the share still ran their CPU-side checks.
    let skipped_cases: std::collections::BTreeSet<&str> = vs
        .iter()
        .filter(|v| v["outcome"] == "skip")
        .map(|v| v["case_id"].as_str().unwrap())
        .collect();
    assert!(vs.iter().any(|v| {
        skipped_cases.contains(v["case_id"].as_str().unwrap()) && v["outcome"] == "pass"
    }));

    // A GPU demanded, or a target named, leaves the run as it was.
    let required = w4a16(
        dir,
        &["--suite", "checkpoints", "--filter", FILTER],
        Some("gpu"),
    );
    let stderr = String::from_utf8_lossy(&required.stderr);
    assert!(!required.status.success(), "{stderr}");
    assert!(!stderr.contains("in its place"), "{stderr}");
    let named = w4a16(
        dir,
        &[
            "--suite",
            "checkpoints",
            "--filter",
            FILTER,
            "--target",
            "gfx1151",
        ],
        None,
    );
    let stderr = String::from_utf8_lossy(&named.stderr);
    assert!(named.status.success(), "{stderr}");
    assert!(!stderr.contains("main job's share"), "{stderr}");
    assert!(
        verdicts(dir)
            .iter()
            .all(|v| !v["detail"].as_str().unwrap().starts_with(SHARE_SKIP))
    );
}
