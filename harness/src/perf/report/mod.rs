//! The reports of a perf run, for people first: `summary.md` (the field's counts table, the
//! worst cases, every case collapsed), `perf.json`, `perf-junit.xml` and `plot.svg`, written
//! by the one report writer ([`crate::report`]).

mod format;
mod summary;

pub(crate) use format::{fmt_delta, fmt_p, fmt_sig3};

use super::judge::{CaseOutcome, JudgePolicy, Judgement};
use super::measure::PerfPlan;
use super::plot::render_svg;
use super::stats::median;
use crate::report::{self as writer, FileError, ReportDir, ReportFiles};
use format::opt;
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use summary::summary_markdown;

/// The files a perf report owns in its folder, in the order they are written.
pub const FILES: [&str; 4] = ["plot.svg", "summary.md", "perf.json", "perf-junit.xml"];

/// Rows shown in the worst-cases and not-judged lists; the rest is in the per-case table.
const LIST_ROWS: usize = 15;

/// Everything one `w4a16 perf` run produced, as the reports and `--update-goldens` read it.
#[derive(Clone, Debug, Serialize)]
pub struct PerfRun {
    pub target: String,
    pub device: String,
    pub suite: String,
    /// The policy in force, with the golden file's overrides applied.
    pub policy: JudgePolicy,
    pub plan: PerfPlan,
    /// "embedded kernels" or the kernel-source folder.
    pub candidate: String,
    pub control: Option<String>,
    pub outcomes: Vec<CaseOutcome>,
    /// (case id, why it is not timed here).
    pub not_timed: Vec<(String, String)>,
    pub peers_note: Option<String>,
}

/// Where [`write_reports`] put each report.
#[derive(Clone, Debug, PartialEq)]
pub struct PerfReportPaths {
    pub summary_md: PathBuf,
    pub json: PathBuf,
    pub junit: PathBuf,
    pub plot: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Write(#[from] FileError),
    #[error("plot: {0}")]
    Plot(String),
    #[error("JUnit report: {0}")]
    Junit(#[from] quick_junit::SerializeError),
}

/// The four files of `run`'s report.
pub fn files(run: &PerfRun) -> Result<ReportFiles, ReportError> {
    let [plot, summary, json_name, junit_name] = FILES;
    Ok(ReportFiles::new()
        .with(plot, render_svg(run)?)
        .with(summary, summary_markdown(run))
        .with(json_name, json(run))
        .with(junit_name, junit(run)?))
}

/// Writes `summary.md`, `perf.json`, `perf-junit.xml` and `plot.svg` into `dir` (created). An
/// earlier run's reports there are removed first, so a plot that cannot be drawn leaves none.
pub fn write_reports(run: &PerfRun, dir: &Path) -> Result<PerfReportPaths, ReportError> {
    let folder = ReportDir::open(dir, &FILES)?;
    folder.write(&files(run)?)?;
    Ok(PerfReportPaths {
        summary_md: dir.join("summary.md"),
        json: dir.join("perf.json"),
        junit: dir.join("perf-junit.xml"),
        plot: dir.join("plot.svg"),
    })
}

/// How many judgements of one comparison fell in each class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub within_band: usize,
    pub improvement: usize,
    pub regression: usize,
    pub too_noisy: usize,
    pub wrong_kernel: usize,
    pub no_golden: usize,
}

impl Counts {
    pub fn of<'a>(judgements: impl IntoIterator<Item = &'a Judgement>) -> Counts {
        let mut c = Counts::default();
        for j in judgements {
            *match j {
                Judgement::WithinBand { .. } => &mut c.within_band,
                Judgement::Improvement { .. } => &mut c.improvement,
                Judgement::Regression { .. } => &mut c.regression,
                Judgement::TooNoisy { .. } => &mut c.too_noisy,
                Judgement::WrongKernel { .. } => &mut c.wrong_kernel,
                Judgement::NoGolden => &mut c.no_golden,
            } += 1;
        }
        c
    }
}

/// The three comparisons of the counts table, the control ones absent without a control.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RunCounts {
    pub candidate_vs_goldens: Counts,
    pub control_vs_goldens: Option<Counts>,
    pub candidate_vs_control: Option<Counts>,
    pub stale_golden: usize,
    pub failing: usize,
}

impl RunCounts {
    pub fn of(run: &PerfRun) -> RunCounts {
        let with_control = run.control.is_some();
        RunCounts {
            candidate_vs_goldens: Counts::of(run.outcomes.iter().map(|o| &o.candidate_judgement)),
            control_vs_goldens: with_control.then(|| {
                Counts::of(
                    run.outcomes
                        .iter()
                        .filter_map(|o| o.control_judgement.as_ref()),
                )
            }),
            candidate_vs_control: with_control
                .then(|| Counts::of(run.outcomes.iter().filter_map(|o| o.vs_control.as_ref()))),
            stale_golden: run.outcomes.iter().filter(|o| o.stale_golden).count(),
            failing: run.outcomes.iter().filter(|o| o.fails(&run.policy)).count(),
        }
    }
}

#[derive(Serialize)]
struct JsonReport<'a> {
    counts: RunCounts,
    #[serde(flatten)]
    run: &'a PerfRun,
}

/// The whole run plus its counts; numbers that do not exist (an infinite spread) are `null`.
fn json(run: &PerfRun) -> String {
    writer::json::pretty(
        &JsonReport {
            counts: RunCounts::of(run),
            run,
        },
        "a perf run",
    )
}

/// One test case per key (classname provider/shape, name `M=…`); a failing case's message
/// names its judgements, a passing one's output says what was measured.
fn junit(run: &PerfRun) -> Result<String, ReportError> {
    let mut report = Report::new(format!("w4a16 perf@{}", run.target));
    let mut suite = TestSuite::new(format!("perf.{}", run.suite));
    for o in &run.outcomes {
        let mut story = format!(
            "kernel {}; median {} µs; against the golden: {}",
            o.candidate.kernel,
            opt(median(&o.candidate.times_us), fmt_sig3),
            o.candidate_judgement
        );
        if let Some(vs) = &o.vs_control {
            let _ = write!(story, "; against the control: {vs}");
        }
        if o.stale_golden {
            story.push_str("; goldens stale, run --update-goldens");
        }
        let status = if o.fails(&run.policy) {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            let mut reasons = Vec::new();
            if o.candidate_judgement.fails(&run.policy) {
                reasons.push(o.candidate_judgement.to_string());
            }
            if let Some(vs) = o.vs_control.as_ref().filter(|j| j.fails(&run.policy)) {
                reasons.push(format!("against the control: {vs}"));
            }
            s.set_message(reasons.join("; "));
            s.set_type(o.candidate_judgement.name());
            s
        } else {
            TestCaseStatus::success()
        };
        let mut tc = TestCase::new(format!("M={}", o.key.m), status);
        tc.set_classname(format!("{}/{}", o.key.provider, o.key.shape));
        tc.set_system_out(story);
        suite.add_test_case(tc);
    }
    report.add_test_suite(suite);
    Ok(writer::junit::render(&report)?)
}

#[cfg(test)]
mod tests;
