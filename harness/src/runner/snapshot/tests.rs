//! The snapshot module's tests: names, rendering, and the CLI's own path (comparing and writing
//! without insta) against the committed snapshots.

use super::compare::*;
use super::diff::*;
use super::file::*;
use super::format::*;
use crate::runner::budget::{CaseBudget, Interpreter};
use crate::runner::verdict::{Check, Outcome, SanitizerTool, Verdict};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use w4a16_device::DeviceKind;
use w4a16_kernels::KernelId;

#[test]
fn sanitize_runs_have_their_own_file_per_tool() {
    assert_eq!(snapshot_name_of("smoke", None), "verdicts-smoke");
    assert_eq!(
        snapshot_name_of("edges", Some(SanitizerTool::Memcheck)),
        "verdicts-edges.sanitize-memcheck"
    );
    assert_eq!(
        parse_file_name("verdicts-edges.sanitize-racecheck@sm_90.snap"),
        Some(SnapshotFile {
            suite: "edges".into(),
            target: "sm_90".into(),
            sanitize: Some(SanitizerTool::Racecheck),
            recorded_by: None,
            left_out: None,
        })
    );
    assert_eq!(
        parse_file_name("verdicts-smoke@sm_90.snap"),
        Some(SnapshotFile {
            suite: "smoke".into(),
            target: "sm_90".into(),
            sanitize: None,
            recorded_by: None,
            left_out: None,
        })
    );
    assert_eq!(
        parse_file_name("verdicts-smoke.sanitize-valgrind@sm_90.snap"),
        None
    );
    assert_eq!(parse_file_name("selection@sm_90.snap"), None);
}

#[test]
fn render_is_sorted_and_parse_inverts_it() {
    let v = vec![
        Verdict::new(
            "s/b/M=1/f16/sym/g32/exact",
            Check::kernel(KernelId::Skinny),
            Outcome::Pass,
        )
        .bucket("0"),
        Verdict::new(
            "s/a/M=1/f16/sym/g32/exact",
            Check::Selection(None),
            Outcome::Pass,
        ),
    ];
    let text = render(&v);
    assert!(text.starts_with("s/a/"));
    let header = "---\nsource: x\n---\n";
    let rows = parse_rows(&format!("{header}{text}"));
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].bucket.as_deref(), Some("0"));
    assert_eq!(rows[0].check, "selection");
}

/// Every check string of every committed verdict snapshot parses back into a [`Check`] that
/// displays as the same string: the enum names every check the runner has ever recorded.
#[test]
fn every_committed_snapshot_check_round_trips() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../snapshots");
    let mut files = 0;
    let mut distinct = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("snapshots/ is readable") {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if parse_file_name(&name).is_none() {
            continue;
        }
        files += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        let rows = parse_rows(&text);
        assert!(!rows.is_empty(), "{name}: no rows");
        for row in rows {
            let check: Check = row
                .check
                .parse()
                .unwrap_or_else(|e| panic!("{name}: {}: {e}", row.case_id));
            assert_eq!(check.to_string(), row.check, "{name}: {}", row.case_id);
            distinct.insert(check);
        }
    }
    assert!(
        files >= 9,
        "only {files} verdict snapshots in {}",
        dir.display()
    );
    // The committed suites exercise every kind of launched-path check at least.
    for kind in [
        "convert:",
        "determinism:",
        "padding:",
        "second-opinion:",
        "sanitize:",
    ] {
        assert!(
            distinct.iter().any(|c| c.to_string().starts_with(kind)),
            "no {kind} check in the committed snapshots"
        );
    }
}

/// A fresh folder under the system temp dir, removed on drop.
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temp dir")
}

fn committed_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../snapshots")
}

fn verdicts() -> Vec<Verdict> {
    let skinny = Check::kernel(KernelId::Skinny);
    let fused = Check::kernel(KernelId::Fused);
    vec![
        Verdict::new("s/a/M=1", skinny.clone(), Outcome::Pass).bucket("<1/4"),
        Verdict::new("s/a/M=1", fused.clone(), Outcome::Pass).bucket("<1/4"),
        Verdict::new("s/b/M=1", skinny.clone(), Outcome::Pass).bucket("<1/4"),
        Verdict::new("s/b/M=1", fused, Outcome::Pass).bucket("<1/2"),
        Verdict::new("s/c/M=1", skinny, Outcome::Pass).bucket("<1/4"),
        Verdict::new("s/c/M=1", Check::Selection(None), Outcome::Pass),
    ]
}

/// A budgeted run (the ISA emulator) judges only the cases it runs: the rows a GPU
/// recorded for the cases above its budget are compared as they stand and written back
/// unchanged, a changed verdict of a case it ran still differs, and its header says how many
/// cases it left out.
#[test]
fn a_budgeted_run_keeps_the_rows_of_the_cases_it_left_out() {
    let dir = scratch();
    let all = verdicts();
    let gpu = SnapshotFile::new("s", "gfx1151", None).recorded_by(Some(DeviceKind::Rocm));
    let path = dir.path().join(gpu.file_name());
    std::fs::write(&path, render_file(&gpu, &render(&all))).unwrap();
    let left_out = LeftOut {
        by: Interpreter::IsaEmulator,
        cases: BTreeSet::from(["s/c/M=1".to_string()]),
    };
    let emu = SnapshotFile::new("s", "gfx1151", None)
        .recorded_by(Some(DeviceKind::Emulator))
        .left_out(Some(left_out));
    let ran: Vec<Verdict> = all
        .iter()
        .filter(|v| v.case_id != "s/c/M=1")
        .cloned()
        .collect();
    let same = compare_and_write(dir.path(), emu.clone(), &ran, SnapshotMode::Check).unwrap();
    assert!(!same.differs(), "{same}");
    let mut changed = ran.clone();
    changed[0].outcome = Outcome::Fail;
    let diff = compare_and_write(dir.path(), emu.clone(), &changed, SnapshotMode::Check).unwrap();
    let SnapshotStatus::Changed(d) = &diff.status else {
        panic!("expected a change, got {diff}");
    };
    assert_eq!(d.verdict_changes.len(), 1);
    assert!(d.removed.is_empty() && d.added.is_empty(), "{diff}");
    // Recorded by the emulator over the GPU's file: the left-out case's rows stay.
    compare_and_write(dir.path(), emu.clone(), &changed, SnapshotMode::Update).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        parse_rows(&text)
            .iter()
            .filter(|r| r.case_id == "s/c/M=1")
            .count(),
        2
    );
    assert_eq!(left_out_in(&text), Some(1));
    assert_eq!(recorded_by_in(&text), Some(DeviceKind::Emulator));
    // Recorded into an empty folder: only the rows it ran.
    let empty = scratch();
    compare_and_write(empty.path(), emu.clone(), &ran, SnapshotMode::Update).unwrap();
    let text = std::fs::read_to_string(empty.path().join(emu.file_name())).unwrap();
    assert!(!text.contains("s/c/M=1"), "{text}");
    assert!(
        text.contains("; 1 cases above the ISA emulator's budget (isa_emulator_max_macs"),
        "{text}"
    );
    assert_eq!(left_out_in(&render_file(&gpu, "")), None);
}

/// Every committed verdict snapshot, parsed back into rows and rendered again, is the
/// committed file byte for byte: an unchanged run leaves the files as they are.
#[test]
fn rendering_a_committed_snapshot_reproduces_it_byte_for_byte() {
    let set = w4a16_cases::load_all(&w4a16_cases::locate(None).unwrap()).unwrap();
    let mut files = 0;
    for entry in std::fs::read_dir(committed_dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(key) = parse_file_name(&name) else {
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap();
        let rows = parse_file_strict(&text).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let recorded_by = recorded_by_in(&text);
        let target = w4a16_kernels::RunTarget::parse(&key.target).unwrap();
        let budget = CaseBudget::of(target, recorded_by, set.suite(&key.suite));
        let left_out = LeftOut::of(budget, &key.suite, set.cases());
        let key = key.recorded_by(recorded_by).left_out(left_out);
        assert_eq!(render_file(&key, &render_rows(rows)), text, "{name}");
        files += 1;
    }
    assert!(files >= 30, "only {files} verdict snapshots");
}

#[test]
fn an_unchanged_run_writes_nothing_and_removes_a_stale_pending_file() {
    let dir = scratch();
    let key = SnapshotFile::new("s", "sm_90", None);
    let text = render_file(&key, &render(&verdicts()));
    std::fs::write(dir.path().join(key.file_name()), &text).unwrap();
    let pending = dir.path().join("verdicts-s@sm_90.snap.new");
    std::fs::write(&pending, "stale").unwrap();
    let report =
        compare_and_write(dir.path(), key.clone(), &verdicts(), SnapshotMode::Check).unwrap();
    assert_eq!(report.status, SnapshotStatus::Same);
    assert!(!report.differs() && report.written.is_none());
    assert!(!pending.exists());
    assert_eq!(
        std::fs::read_to_string(dir.path().join(key.file_name())).unwrap(),
        text
    );
}

/// A changed verdict is listed before everything else, bucket moves are counted per
/// old→new pair, and `check` leaves the `.snap` alone and writes the `.snap.new`.
#[test]
fn a_changed_verdict_is_listed_first_and_bucket_moves_are_summarised() {
    let dir = scratch();
    let key = SnapshotFile::new("s", "sm_90", None);
    let old = render_file(&key, &render(&verdicts()));
    std::fs::write(dir.path().join(key.file_name()), &old).unwrap();
    let mut now = verdicts();
    now[0].bucket = Some("<1/2".into()); // a/skinny: <1/4 → <1/2
    now[2].bucket = Some("<1/2".into()); // b/skinny: <1/4 → <1/2
    now[3].bucket = Some("<1/4".into()); // b/fused:  <1/2 → <1/4
    now[4] = Verdict::new("s/c/M=1", Check::kernel(KernelId::Skinny), Outcome::Fail).bucket(">1");
    now.push(Verdict::new(
        "s/d/M=1",
        Check::kernel(KernelId::Skinny),
        Outcome::Pass,
    ));
    let report = compare_and_write(dir.path(), key.clone(), &now, SnapshotMode::Check).unwrap();
    let SnapshotStatus::Changed(diff) = &report.status else {
        panic!("expected a change, got {:?}", report.status);
    };
    assert_eq!(
        diff.verdict_changes,
        vec![VerdictChange {
            case_id: "s/c/M=1".into(),
            check: "skinny".into(),
            old: "pass".into(),
            new: "FAIL".into(),
        }]
    );
    let moves: Vec<_> = diff.bucket_moves.iter().collect();
    assert_eq!(
        moves,
        vec![
            (&("<1/2".to_string(), "<1/4".to_string()), &1),
            (&("<1/4".to_string(), "<1/2".to_string()), &2)
        ]
    );
    assert_eq!(diff.added.len(), 1);
    assert!(diff.removed.is_empty());
    let shown = report.to_string();
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(
        lines[0],
        "snapshot verdicts-s@sm_90: 1 verdicts changed, 3 bucket moves, 1 rows added (wrote "
            .to_string()
            + &dir
                .path()
                .join("verdicts-s@sm_90.snap.new")
                .display()
                .to_string()
            + ")"
    );
    assert_eq!(lines[1], "  verdict  s/c/M=1 | skinny: pass -> FAIL");
    assert_eq!(lines[2], "  buckets  <1/2 -> <1/4: 1 rows");
    assert_eq!(lines[3], "  buckets  <1/4 -> <1/2: 2 rows");
    assert_eq!(lines[4], "  added    s/d/M=1 | skinny | pass");
    assert!(report.differs());
    // The committed file is untouched; the pending one holds the run, in insta's format.
    assert_eq!(
        std::fs::read_to_string(dir.path().join(key.file_name())).unwrap(),
        old
    );
    let pending = std::fs::read_to_string(report.written.as_ref().unwrap()).unwrap();
    assert_eq!(pending, render_file(&key, &render(&now)));
    assert!(pending.starts_with(
        "---\nsource: testkit/src/verdict_snapshots.rs\ndescription: \"verdicts of suite `s` on target `sm_90`\"\n---\ns/a/M=1 | fused | pass | <1/4\n"
    ));
}

#[test]
fn update_records_the_snapshot_and_clears_the_pending_one() {
    let dir = scratch();
    let key = SnapshotFile::new("s", "gfx1151-emu", Some(SanitizerTool::Memcheck));
    std::fs::write(dir.path().join(format!("{}.new", key.file_name())), "stale").unwrap();
    let report =
        compare_and_write(dir.path(), key.clone(), &verdicts(), SnapshotMode::Update).unwrap();
    assert_eq!(report.status, SnapshotStatus::New { rows: 6 });
    let path = dir
        .path()
        .join("verdicts-s.sanitize-memcheck@gfx1151-emu.snap");
    assert_eq!(report.written.as_deref(), Some(path.as_path()));
    assert!(std::fs::read_to_string(&path).unwrap().contains(
        "description: \"verdicts of suite `s` on target `gfx1151-emu` under compute-sanitizer memcheck, exact-size allocations\"\n"
    ));
    assert!(!dir.path().join(format!("{}.new", key.file_name())).exists());
}

#[test]
fn a_missing_snapshot_is_new_and_its_pending_file_is_written() {
    let dir = scratch();
    let key = SnapshotFile::new("s", "sm_90", None);
    let report = compare_and_write(dir.path(), key, &verdicts(), SnapshotMode::Check).unwrap();
    assert_eq!(report.status, SnapshotStatus::New { rows: 6 });
    assert!(report.differs());
    let pending = dir.path().join("verdicts-s@sm_90.snap.new");
    assert_eq!(report.written.as_deref(), Some(pending.as_path()));
    assert!(!dir.path().join("verdicts-s@sm_90.snap").exists());
    assert!(
        report
            .to_string()
            .starts_with("snapshot verdicts-s@sm_90: new, 6 rows (wrote ")
    );
}

#[test]
fn a_malformed_snapshot_is_an_error_naming_its_line() {
    let dir = scratch();
    let key = SnapshotFile::new("s", "sm_90", None);
    std::fs::write(
        dir.path().join(key.file_name()),
        "---\nsource: x\ndescription: y\n---\ns/a | skinny | pass\n<<<<<<< HEAD\n",
    )
    .unwrap();
    let e = compare_and_write(dir.path(), key, &verdicts(), SnapshotMode::Check).unwrap_err();
    let SnapshotError::Malformed { line, text, .. } = &e else {
        panic!("expected a malformed-file error, got {e}");
    };
    assert_eq!((*line, text.as_str()), (6, "<<<<<<< HEAD"));
    assert!(
        e.to_string()
            .contains("verdicts-s@sm_90.snap:6: expected a verdict snapshot")
    );
}

/// The folder comes from the case folder (or `--snapshots`), whatever the current folder:
/// the committed snapshots are found from the repository's `cases/`.
#[test]
fn the_snapshot_folder_is_found_beside_the_cases_folder() {
    let cases = w4a16_cases::locate(None).expect("the cases folder");
    let dir = snapshot_dir(None, &cases);
    assert_eq!(dir, std::fs::canonicalize(committed_dir()).unwrap());
    assert!(dir.join("verdicts-smoke@sm_90.snap").is_file());
    let elsewhere = Path::new("/elsewhere/snaps");
    assert_eq!(snapshot_dir(Some(elsewhere), &cases), elsewhere);
}

#[test]
fn yaml_scalars_are_quoted_and_escaped_as_insta_does() {
    assert_eq!(yaml_scalar("harness/src/x.rs"), "harness/src/x.rs");
    assert_eq!(yaml_scalar("a `b`"), "\"a `b`\"");
    assert_eq!(yaml_scalar("say \"hi\"\\"), "\"say \\\"hi\\\"\\\\\"");
    assert_eq!(yaml_scalar("tab\there"), "\"tab\\there\"");
    assert_eq!(yaml_scalar("true"), "\"true\"");
    assert_eq!(yaml_scalar("12"), "\"12\"");
    assert_eq!(yaml_scalar("-x"), "\"-x\"");
}
