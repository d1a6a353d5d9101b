//! Machine-code block coverage (docs/block-coverage.md): the committed records
//! (`coverage/<gfx>.json`) against the reasons for what no CI suite executes
//! (`cases/exceptions/coverage.toml`), their reports against the records, and the CI share of
//! each target run against its record and its snapshot rows, so coverage cannot drop and a
//! block cannot go uncovered without a reason unnoticed.

mod common;

use common::emulated_targets;
use rstest_reuse::apply;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use w4a16_cases::coverage_exceptions::{self, Uncovered};
use w4a16_cases::{Case, Date};
use w4a16_device::{DeviceRequest, open};
use w4a16_harness::block_coverage::{
    self, Against, ISA_EMULATOR_SUITES, Reading, Record, Share, judge, judge_run, markdown,
    share_path,
};
use w4a16_harness::runner::budget::CaseBudget;
use w4a16_harness::runner::session::SessionOptions;
use w4a16_harness::runner::snapshot::{self, SnapshotDiff, parse_rows};
use w4a16_harness::runner::verdict::SnapshotRow;
use w4a16_kernels::{RunTarget, Target};

const TARGETS: [&str; 3] = ["gfx1100", "gfx1151", "gfx1201"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn cases_dir() -> PathBuf {
    w4a16_cases::locate(None).expect("the cases folder")
}

fn record(target: &str) -> Record {
    let path = block_coverage::record_path(root(), target);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; record it with `w4a16 coverage --target {target}`",
            path.display()
        )
    });
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn reasons() -> Vec<Uncovered> {
    coverage_exceptions::load(&coverage_exceptions::exceptions_path(&cases_dir())).unwrap()
}

#[test]
fn every_block_no_ci_suite_executes_has_a_reason() {
    let reasons = reasons();
    let mut problems = Vec::new();
    for t in TARGETS {
        let r = record(t);
        assert_eq!(r.target, t);
        for s in ISA_EMULATOR_SUITES {
            assert!(
                r.suites.iter().any(|x| x == s),
                "coverage/{t}.json does not run CI suite {s}"
            );
        }
        problems.extend(judge(&r, &reasons, Date::today_utc()));
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn each_report_is_its_record_rendered() {
    let reasons = reasons();
    for t in TARGETS {
        let md = root()
            .join(block_coverage::RECORD_DIR)
            .join(format!("{t}.md"));
        let committed = std::fs::read_to_string(&md).unwrap();
        assert!(
            committed == markdown::render(&record(t), &reasons),
            "{} is not coverage/{t}.json rendered: `w4a16 coverage --target {t} --render-only`",
            md.display()
        );
    }
}

/// The CI share on each target (`coverage/<gfx>.ci-share.toml`, docs/block-coverage.md): its
/// cases, run on the recording emulator, execute every block the record says the full CI
/// suites execute (coverage cannot drop unnoticed), pass, and each verdict equals its row in
/// the committed snapshot of its suite (the full suites run on a schedule: the ignored
/// `isa_emulator_*_suite` tests of tests/gpu_verdicts.rs).
#[apply(emulated_targets)]
fn the_ci_share_executes_every_recorded_block_and_matches_its_snapshot_rows(target: Target) {
    let gfx = target.name();
    let share = Share::read(&share_path(root(), gfx)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(share.target, gfx);
    let set = w4a16_cases::load_all(&cases_dir()).unwrap();
    let run_target = RunTarget {
        target,
        execution: w4a16_kernels::Execution::Native,
    };
    let device = match open(DeviceRequest::emulator(target).recording_blocks()) {
        Ok(d) => d,
        Err(skip) => {
            w4a16_harness::require::skip_or_fail(&skip);
            return;
        }
    };
    let stale = |what: String| -> ! {
        panic!("coverage/{gfx}.ci-share.toml: {what}; rerun `w4a16 coverage --target {gfx}`")
    };
    let mut chosen: Vec<&Case> = Vec::new();
    for c in &share.cases {
        let suite = set
            .suite(&c.suite)
            .unwrap_or_else(|| stale(format!("no suite {}", c.suite)));
        let budget = CaseBudget::of(run_target, Some(device.kind()), Some(suite));
        match suite.cases.iter().find(|k| k.id == c.id) {
            Some(k) if budget.admits(k) => chosen.push(k),
            Some(_) => stale(format!("{} is above {budget}", c.id)),
            None => stale(format!("no case {} in suite {}", c.id, c.suite)),
        }
    }
    let opts = SessionOptions::new(cases_dir(), run_target);
    let runs = block_coverage::run(
        &set,
        &[("the CI share".to_string(), chosen)],
        &opts,
        device,
        Reading::PerSuite,
        &|_| {},
    )
    .unwrap();
    let run = &runs[0];
    let mut problems: Vec<String> = judge_run(&record(gfx), Against::Share, &run.blocks)
        .iter()
        .map(|p| p.to_string())
        .collect();
    problems.extend(
        run.verdicts
            .iter()
            .filter(|v| v.outcome.is_failure())
            .map(|v| format!("{} [{}] {}: {}", v.case_id, v.check, v.outcome, v.detail)),
    );
    for suite in ISA_EMULATOR_SUITES {
        let ids: BTreeSet<&str> = share.ids_of(suite).collect();
        let path = snapshot::committed_path(root(), suite, gfx);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let committed: Vec<SnapshotRow> = parse_rows(&text)
            .into_iter()
            .filter(|r| ids.contains(r.case_id.as_str()))
            .collect();
        let ran: Vec<SnapshotRow> = run
            .verdicts
            .iter()
            .filter(|v| ids.contains(v.case_id.as_str()))
            .map(SnapshotRow::from)
            .collect();
        let diff = SnapshotDiff::between(&committed, &ran);
        if !diff.is_empty() {
            problems.push(format!(
                "{} ({suite}'s rows of the share):\n{diff}",
                path.display()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
