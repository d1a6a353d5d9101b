//! `w4a16 run --sanitize TOOL` where no NVIDIA GPU is: every case gets a loud `sanitize:<tool>`
//! skip with the reason (never a pass), and `W4A16_REQUIRE=gpu` makes it a failure of the run —
//! it and every other GPU check the run skipped, in the summary, the reports and the exit code.
//! (With a GPU this file has nothing to check: the sanitizer run itself is `scripts/gpu-job.sh
//! sanitize`.)

use std::path::Path;
use std::process::Command;
use w4a16_harness::runner::session::{self, Backend};

const FILTER: &str = "smoke/*/M=1/f16/**";

fn run(report_dir: &Path, require: Option<&str>) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_w4a16"));
    cmd.arg("--cases")
        .arg(w4a16_cases::locate(None).expect("the cases folder"))
        .args(["run", "--suite", "smoke", "--filter", FILTER])
        .args(["--sanitize", "memcheck", "--report-dir"])
        .arg(report_dir)
        .env_remove("W4A16_REQUIRE");
    if let Some(r) = require {
        cmd.env("W4A16_REQUIRE", r);
    }
    cmd.output().unwrap()
}

fn sanitize_rows(report_dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(report_dir.join("report.json")).unwrap();
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    report["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["check"] == "sanitize:memcheck")
        .cloned()
        .collect()
}

#[test]
fn without_a_gpu_the_sanitizer_is_a_loud_skip_and_a_failure_when_required() {
    if let (_, Backend::Device(d)) = session::open_backend(None) {
        w4a16_harness::require::announce_skip(
            "no-gpu",
            &format!(
                "{} is here: the no-GPU path of --sanitize is not what runs",
                d.name()
            ),
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("w4a16-sanitize-cli-{}", std::process::id()));

    let out = run(&dir, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "a skip fails nothing: {stderr}");
    assert!(stderr.contains("SANITIZER SKIPPED"), "{stderr}");
    let rows = sanitize_rows(&dir);
    // M=1 f16 of smoke: {sym, asym} × G {32, 64, 128} at N = 256, and the two bias cases.
    assert_eq!(rows.len(), 8, "one row per case");
    for r in &rows {
        assert_eq!(r["outcome"], "skip", "{r}");
        let detail = r["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("compute-sanitizer memcheck needs an NVIDIA GPU: "),
            "{detail}"
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("× compute-sanitizer memcheck needs an NVIDIA GPU"),
        "the skips are counted with their reason in the summary: {stdout}"
    );

    let out = run(&dir, Some("gpu"));
    assert!(
        !out.status.success(),
        "W4A16_REQUIRE=gpu turns the skip into a failure"
    );
    let rows = sanitize_rows(&dir);
    assert!(rows.iter().all(|r| r["outcome"] == "fail"), "{rows:?}");
    // So is every other GPU check the run skipped, in every report of the run.
    let text = std::fs::read_to_string(dir.join("report.json")).unwrap();
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    let verdicts = report["verdicts"].as_array().unwrap();
    let skinny: Vec<&serde_json::Value> =
        verdicts.iter().filter(|v| v["check"] == "skinny").collect();
    assert!(!skinny.is_empty());
    for v in &skinny {
        assert_eq!(v["outcome"], "fail", "{v}");
        let detail = v["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("W4A16_REQUIRE=gpu but the check was skipped: needs a GPU: "),
            "{detail}"
        );
        assert_eq!(v["cause"]["not-here"]["requirement"], "gpu", "{v}");
    }
    assert!(verdicts.iter().all(|v| v["outcome"] != "skip"));
    assert_eq!(report["summary"]["skipped"], 0);
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(junit.contains("<failure") && !junit.contains("<skipped"));
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("❌"), "{md}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("W4A16_REQUIRE=gpu turns"),
        "said loudly: {stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unknown_tool_is_refused_naming_the_tools() {
    let out = Command::new(env!("CARGO_BIN_EXE_w4a16"))
        .args(["run", "--sanitize", "valgrind"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for tool in ["memcheck", "racecheck", "synccheck", "initcheck"] {
        assert!(stderr.contains(tool), "{stderr}");
    }
}
