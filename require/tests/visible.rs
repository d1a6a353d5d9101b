//! Skips show in a plain `cargo test`: this binary runs itself in a subprocess, with libtest's
//! capture on, and the skip lines and the per-binary summary must reach its stderr while an
//! `eprintln!` of the same test stays captured. Under `W4A16_REQUIRE` the skip is a failure
//! and nothing is announced.

use std::process::{Command, Output};
use w4a16_require::{Requirement, Skip, skip_or_fail};

/// Set only in the subprocess: the `child_*` tests below do nothing in a normal run.
const CHILD: &str = "W4A16_REQUIRE_SELFTEST_CHILD";

fn gpu() -> Skip {
    Skip {
        requirement: Requirement::Gpu,
        reason: "no device here".into(),
    }
}

#[test]
fn child_skips_twice() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    eprintln!("captured-by-libtest");
    skip_or_fail(&gpu());
    skip_or_fail(&gpu());
}

#[test]
fn child_skips_once() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    skip_or_fail(&Skip {
        requirement: Requirement::Nvrtc,
        reason: "no CUDA headers".into(),
    });
}

/// This test binary, filtered to the `child_*` tests, with capture on (no `--nocapture`, and
/// `RUST_TEST_NOCAPTURE` removed) and `W4A16_REQUIRE` as given.
fn run_children(require: Option<&str>) -> (Output, String, String) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.arg("child_skips")
        .env(CHILD, "1")
        .env_remove("RUST_TEST_NOCAPTURE")
        .env_remove("W4A16_REQUIRE");
    if let Some(r) = require {
        cmd.env("W4A16_REQUIRE", r);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

#[test]
fn skip_lines_and_a_summary_pass_the_capture() {
    let (out, stdout, stderr) = run_children(None);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("test child_skips_twice ... ok"), "{stdout}");
    assert!(
        !stdout.contains("captured-by-libtest") && !stderr.contains("captured-by-libtest"),
        "capture was off, so this test proves nothing:\n{stdout}\n{stderr}"
    );
    assert_eq!(
        stderr
            .matches("W4A16-SKIP [gpu] no device here (in child_skips_twice)\n")
            .count(),
        2,
        "{stderr}"
    );
    assert_eq!(
        stderr
            .matches("W4A16-SKIP [nvrtc] no CUDA headers (in child_skips_once)\n")
            .count(),
        1,
        "{stderr}"
    );
    // One summary for the binary, across its tests, after libtest's own result line.
    let summary: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("W4A16-SKIP summary"))
        .collect();
    assert_eq!(summary.len(), 1, "{stderr}");
    assert!(
        summary[0].starts_with("W4A16-SKIP summary (visible): 3 parts skipped: "),
        "{}",
        summary[0]
    );
    assert!(
        summary[0].contains("gpu: no device here ×2"),
        "{}",
        summary[0]
    );
    assert!(
        summary[0].contains("nvrtc: no CUDA headers ×1"),
        "{}",
        summary[0]
    );
}

#[test]
fn a_required_skip_is_a_failure_and_announces_nothing() {
    for require in ["gpu", "all", " nvrtc , gpu"] {
        let (out, stdout, stderr) = run_children(Some(require));
        assert!(!out.status.success(), "W4A16_REQUIRE={require}: {stdout}");
        assert!(
            stdout.contains("W4A16_REQUIRE=gpu but skipped (needs gpu): no device here"),
            "{stdout}"
        );
        assert!(
            !stderr.contains("W4A16-SKIP [gpu]"),
            "W4A16_REQUIRE={require}: {stderr}"
        );
    }
    // Demanding something else leaves the gpu skip a skip.
    let (out, stdout, stderr) = run_children(Some("amd-toolchain"));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("W4A16-SKIP [gpu] no device here"),
        "{stderr}"
    );
}
