//! `w4a16 run --shard I/N` and `w4a16 merge` at the command line: a malformed share is a typed
//! usage error naming the flag and what was expected, before anything runs; `merge` of folders
//! that are not a run's shards is refused, naming the folder. (The shards themselves, merged
//! against an unsharded run, are tested on the simulated device in harness `runner::shard`.)

use std::path::Path;
use std::process::{Command, Output};

fn w4a16(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_w4a16"))
        .current_dir(cwd)
        .env_remove("W4A16_CASES")
        .args(args)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_malformed_shard_is_a_usage_error_naming_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    for (bad, why) in [
        ("3/2", "I = 3 is above N = 2"),
        ("0/2", "I is 0"),
        ("a/b", "I \"a\" is not a whole number"),
    ] {
        let out = w4a16(tmp.path(), &["run", "--shard", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("--shard {bad:?}: expected I/N")) && err.contains(why),
            "{bad}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(!tmp.path().join("target").exists(), "nothing ran for {bad}");
    }
}

#[test]
fn merge_refuses_a_folder_without_a_shard_report() {
    let tmp = tempfile::tempdir().unwrap();
    // `--out` is the old spelling of `--report-dir`, kept as a hidden alias.
    for flag in ["--report-dir", "--out"] {
        let out = w4a16(tmp.path(), &["merge", "nowhere", flag, "merged"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("nowhere/report.json: cannot read the shard's report"),
            "{}",
            stderr(&out)
        );
    }
    assert!(!tmp.path().join("merged").exists());
    let none = w4a16(tmp.path(), &["merge"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(stderr(&none).contains("<DIR>..."), "{}", stderr(&none));
}
