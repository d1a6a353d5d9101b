//! `w4a16 snapshots`: the CLI compares and writes verdict snapshots itself (no insta, no panic),
//! finds the folder from the case folder whatever the current folder, prints verdict changes
//! first and bucket moves counted, and exits 1 on a difference.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use w4a16_harness::runner::{Check, Outcome, Verdict, report, snapshot};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh folder under the system temp dir, removed on drop.
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temp dir")
}

const SUITE: &str = "regressions";
const TARGET: &str = "sm_90";

fn committed() -> PathBuf {
    repo()
        .join("snapshots")
        .join(format!("verdicts-{SUITE}@{TARGET}.snap"))
}

/// The committed snapshot's rows as the verdicts of a run.
fn committed_verdicts() -> Vec<Verdict> {
    let outcomes = [
        Outcome::Pass,
        Outcome::Refused,
        Outcome::ExpectedFail,
        Outcome::Fail,
        Outcome::Fault,
        Outcome::UnexpectedPass,
        Outcome::Expired,
        Outcome::Skip,
    ];
    let rows = snapshot::parse_rows(&std::fs::read_to_string(committed()).unwrap());
    assert!(rows.len() > 10);
    rows.into_iter()
        .map(|r| {
            let check: Check = r.check.parse().unwrap();
            let outcome = *outcomes.iter().find(|o| o.name() == r.outcome).unwrap();
            let v = Verdict::new(r.case_id, check, outcome);
            match r.bucket {
                Some(b) => v.bucket(b),
                None => v,
            }
        })
        .collect()
}

/// A report.json as `w4a16 run` writes it, in `dir`.
fn write_report(dir: &Path, verdicts: &[Verdict]) -> PathBuf {
    let path = dir.join("report.json");
    std::fs::write(&path, report::json(TARGET, verdicts, None)).unwrap();
    path
}

/// The binary, run from `cwd`, with no case folder from the environment.
fn w4a16(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_w4a16"))
        .current_dir(cwd)
        .env_remove("W4A16_CASES")
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Run from another folder, the binary finds `snapshots/` beside `--cases` (not through the
/// source tree): the committed snapshot compares as unchanged and nothing is written.
#[test]
fn a_binary_run_elsewhere_finds_the_snapshots_beside_the_cases_folder() {
    let scratch = scratch();
    write_report(scratch.path(), &committed_verdicts());
    let before = std::fs::read(committed()).unwrap();
    let cases = repo().join("cases");
    let out = w4a16(
        scratch.path(),
        &[
            "--cases",
            cases.to_str().unwrap(),
            "snapshots",
            "--report",
            "report.json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("verdict snapshots of sm_90: all unchanged"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("panicked"), "{}", text(&out));
    assert_eq!(std::fs::read(committed()).unwrap(), before);
    assert!(!committed().with_extension("snap.new").exists());
}

/// A changed verdict: exit 1, the diff lists it first, bucket moves come as counts per
/// old→new bucket, the `.snap.new` is written and the `.snap` left as it was.
#[test]
fn a_changed_verdict_fails_with_a_compact_diff() {
    let scratch = scratch();
    let snaps = scratch.path().join("snaps");
    std::fs::create_dir_all(&snaps).unwrap();
    let file = format!("verdicts-{SUITE}@{TARGET}.snap");
    std::fs::copy(committed(), snaps.join(&file)).unwrap();
    let mut verdicts = committed_verdicts();
    let (changed, _) = verdicts
        .iter()
        .enumerate()
        .find(|(_, v)| v.outcome == Outcome::Pass)
        .unwrap();
    verdicts[changed].outcome = Outcome::Fail;
    let changed = verdicts[changed].clone();
    let mut moved = 0;
    for v in verdicts
        .iter_mut()
        .filter(|v| v.bucket.as_deref() == Some("bit-exact"))
    {
        v.bucket = Some("<1/4".into());
        moved += 1;
    }
    assert!(moved > 0);
    write_report(scratch.path(), &verdicts);
    let out = w4a16(
        scratch.path(),
        &[
            "snapshots",
            "--report",
            "report.json",
            "--snapshots",
            "snaps",
        ],
    );
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(
        !shown.contains("panicked") && !shown.contains("cargo insta test"),
        "{shown}"
    );
    let lines: Vec<&str> = shown.lines().collect();
    assert!(
        lines[0].starts_with(&format!(
            "snapshot verdicts-{SUITE}@{TARGET}: 1 verdicts changed, {moved} bucket moves"
        )),
        "{shown}"
    );
    assert_eq!(
        lines[1],
        format!(
            "  verdict  {} | {}: pass -> FAIL",
            changed.case_id, changed.check
        )
    );
    assert!(
        shown.contains(&format!("  buckets  bit-exact -> <1/4: {moved} rows\n")),
        "{shown}"
    );
    assert!(shown.contains("SNAPSHOTS DIFFER on sm_90"), "{shown}");
    assert_eq!(
        std::fs::read(snaps.join(&file)).unwrap(),
        std::fs::read(committed()).unwrap()
    );
    let pending = std::fs::read_to_string(snaps.join(format!("{file}.new"))).unwrap();
    assert!(pending.contains(&format!("{} | {} | FAIL", changed.case_id, changed.check)));

    // `--update` records it; the pending file goes, and a second check is clean.
    let out = w4a16(
        scratch.path(),
        &[
            "snapshots",
            "--report",
            "report.json",
            "--snapshots",
            "snaps",
            "--update",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(snaps.join(&file)).unwrap(), pending);
    assert!(!snaps.join(format!("{file}.new")).exists());
    let out = w4a16(
        scratch.path(),
        &[
            "snapshots",
            "--report",
            "report.json",
            "--snapshots",
            "snaps",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

/// No snapshot yet: reported as new, its `.snap.new` written, exit 1.
#[test]
fn a_missing_snapshot_is_new() {
    let scratch = scratch();
    write_report(scratch.path(), &committed_verdicts());
    let out = w4a16(
        scratch.path(),
        &[
            "snapshots",
            "--report",
            "report.json",
            "--snapshots",
            "snaps",
        ],
    );
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    let rows = committed_verdicts().len();
    assert!(
        shown.starts_with(&format!(
            "snapshot verdicts-{SUITE}@{TARGET}: new, {rows} rows (wrote "
        )),
        "{shown}"
    );
    let pending = scratch
        .path()
        .join("snaps")
        .join(format!("verdicts-{SUITE}@{TARGET}.snap.new"));
    assert_eq!(
        std::fs::read_to_string(pending).unwrap(),
        std::fs::read_to_string(committed()).unwrap()
    );
}

/// A report from a run without the GPU holds skips; recording them is refused, by name.
#[test]
fn a_report_with_skipped_checks_is_refused() {
    let scratch = scratch();
    let mut verdicts = committed_verdicts();
    verdicts[0].outcome = Outcome::Skip;
    verdicts[0].detail = "no CUDA device".into();
    write_report(scratch.path(), &verdicts);
    let out = w4a16(
        scratch.path(),
        &[
            "snapshots",
            "--report",
            "report.json",
            "--snapshots",
            "snaps",
            "--update",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("1 skipped checks"), "{}", text(&out));
    assert!(!scratch.path().join("snaps").exists());
}
