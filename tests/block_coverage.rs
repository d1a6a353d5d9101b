//! Machine-code block coverage (docs/block-coverage.md): the committed records
//! (`coverage/<gfx>.json`) against the reasons for what no CI suite executes
//! (`cases/exceptions/coverage.toml`), their reports against the records, and one cheap
//! recording run against its record, so coverage cannot drop and a block cannot go uncovered
//! without a reason unnoticed.

use std::path::{Path, PathBuf};
use w4a16_cases::coverage_exceptions::{self, Uncovered};
use w4a16_cases::{Case, Date};
use w4a16_device::{DeviceRequest, open};
use w4a16_harness::block_coverage::{
    self, ISA_EMULATOR_SUITES, Record, judge, judge_run, markdown,
};
use w4a16_harness::runner::budget::CaseBudget;
use w4a16_harness::runner::session::SessionOptions;
use w4a16_kernels::{RunTarget, Target};

const TARGETS: [&str; 3] = ["gfx1100", "gfx1151", "gfx1201"];

/// The suite and target of the cheap recording run (a few seconds of emulation).
const CHEAP: (&str, Target) = ("checkpoints", Target::Gfx1100);

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

/// One suite on one target, recording: the same machine code as the record, and at least the
/// blocks the record says that suite executes.
#[test]
fn a_cheap_recording_run_executes_what_the_record_says() {
    let (suite, target) = CHEAP;
    let device = match open(DeviceRequest::emulator(target).recording_blocks()) {
        Ok(d) => d,
        Err(skip) => {
            w4a16_harness::require::skip_or_fail(&skip);
            return;
        }
    };
    let set = w4a16_cases::load_all(&cases_dir()).unwrap();
    let run_target = RunTarget {
        target,
        execution: w4a16_kernels::Execution::Native,
    };
    let budget = CaseBudget::of(run_target, Some(device.kind()), set.suite(suite));
    let chosen: Vec<&Case> = set
        .suite(suite)
        .unwrap()
        .cases
        .iter()
        .filter(|c| budget.admits(c))
        .collect();
    let opts = SessionOptions::new(cases_dir(), run_target);
    let runs =
        block_coverage::run(&set, &[(suite.to_string(), chosen)], &opts, device, &|_| {}).unwrap();
    let problems = judge_run(&record(target.name()), suite, &runs[0].blocks);
    assert!(
        problems.is_empty(),
        "{}",
        problems
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}
