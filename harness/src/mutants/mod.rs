//! `w4a16 mutants`: the harness measures its own detection power. Every mutant
//! of the catalogue (`w4a16_kernels::mutants`) is written out as a full source tree and the
//! chosen suites run against it through `w4a16 run --kernel-sources DIR --fail-fast`, one
//! subprocess per suite, in order; a mutant is *killed* by the first failing check, *survives*
//! when every suite passes, and is *stillborn* when it does not compile (counted apart, never as
//! a kill). The unmutated sources must pass first, or nothing is measured.
//!
//! This module holds the outcome types and the aggregation (kill rate per suite and per class);
//! the Markdown table is [`markdown`], the subprocess driver [`SuiteRunner::run_suite`], the
//! measurement [`measure()`].

mod markdown;
mod measure;
mod suite_run;

pub use measure::{MutantsError, Plan, measure};
pub use suite_run::{SuiteRunner, suite_outcome};

use crate::runner::Outcome;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use w4a16_kernels::mutants::{BugClass, Catalogue, Mutant};
use w4a16_kernels::source::SourceFile;

/// What one suite run against one source tree concluded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum SuiteOutcome {
    /// A check failed (or faulted): the first one, as the report lists it.
    Killed {
        case_id: String,
        check: String,
        outcome: Outcome,
        detail: String,
    },
    /// Every check passed (or was refused / skipped as intended).
    Passed { checks: usize, skipped: usize },
    /// The kernels did not compile (a verdict said so).
    CompileError { detail: String },
    /// The run itself went wrong (no report, bad exit); `reason` says how.
    Error { reason: String },
}

/// One suite's run for one mutant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SuiteRun {
    pub suite: String,
    #[serde(flatten)]
    pub outcome: SuiteOutcome,
    pub wall_s: f64,
}

/// The verdict on one mutant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum MutantStatus {
    Killed {
        suite: String,
        case_id: String,
        check: String,
        detail: String,
    },
    /// No suite failed; `reason` is for the reader (which suites ran, how many checks).
    Survived { reason: String },
    /// Did not compile; never run, never counted as killed.
    Stillborn { log: String },
    /// Marked equivalent in the catalogue and not run (`--run-equivalent` runs them).
    NotRunEquivalent,
    /// The measurement itself failed for this mutant.
    Error { reason: String },
}

/// One mutant's row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MutantResult {
    pub id: String,
    pub class: BugClass,
    pub file: SourceFile,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equivalent: Option<String>,
    pub status: MutantStatus,
    pub suites: Vec<SuiteRun>,
    pub wall_s: f64,
}

impl MutantResult {
    /// The result of `m` on the run target named `target` (equivalence can depend on it).
    pub fn new(
        m: &Mutant,
        target: &str,
        status: MutantStatus,
        suites: Vec<SuiteRun>,
        wall_s: f64,
    ) -> Self {
        MutantResult {
            id: m.id.clone(),
            class: m.class,
            file: m.file,
            description: m.description.clone(),
            equivalent: m.equivalent_on(target).map(str::to_owned),
            status,
            suites,
            wall_s,
        }
    }

    /// Counts in the kill rate: run, compiled, not marked equivalent, measured.
    pub fn live(&self) -> bool {
        self.equivalent.is_none()
            && matches!(
                self.status,
                MutantStatus::Killed { .. } | MutantStatus::Survived { .. }
            )
    }

    pub fn killed_by(&self) -> Option<&str> {
        match &self.status {
            MutantStatus::Killed { suite, .. } => Some(suite),
            _ => None,
        }
    }
}

/// The status of a mutant from its suite runs, in the order they ran.
pub fn status_of(runs: &[SuiteRun]) -> MutantStatus {
    for r in runs {
        match &r.outcome {
            SuiteOutcome::Killed {
                case_id,
                check,
                detail,
                ..
            } => {
                return MutantStatus::Killed {
                    suite: r.suite.clone(),
                    case_id: case_id.clone(),
                    check: check.clone(),
                    detail: detail.clone(),
                };
            }
            SuiteOutcome::CompileError { detail } => {
                return MutantStatus::Stillborn {
                    log: detail.clone(),
                };
            }
            SuiteOutcome::Error { reason } => {
                return MutantStatus::Error {
                    reason: format!("{}: {reason}", r.suite),
                };
            }
            SuiteOutcome::Passed { .. } => {}
        }
    }
    let (checks, skipped) = runs.iter().fold((0, 0), |(c, s), r| match r.outcome {
        SuiteOutcome::Passed { checks, skipped } => (c + checks, s + skipped),
        _ => (c, s),
    });
    let names: Vec<&str> = runs.iter().map(|r| r.suite.as_str()).collect();
    let skipped = if skipped > 0 {
        format!(" ({skipped} of them skipped)")
    } else {
        String::new()
    };
    MutantStatus::Survived {
        reason: format!(
            "no failing check: {checks} checks of {} passed{skipped}",
            names.join(" + ")
        ),
    }
}

/// One suite's row of the table. In the default mode a suite runs only on the mutants every
/// earlier suite let through, so `killed / ran` is what this suite adds and `cumulative` is the
/// kill rate of the suites so far; with `--each-suite` every suite runs on every mutant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SuiteRow {
    pub suite: String,
    pub ran: usize,
    pub killed: usize,
    pub cumulative_killed: usize,
    pub cumulative_rate: f64,
}

/// One class's row of the table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassRow {
    pub class: BugClass,
    pub origin: String,
    pub mutants: usize,
    pub equivalent: usize,
    pub stillborn: usize,
    pub errors: usize,
    pub killed: usize,
    pub survived: usize,
    /// killed / (killed + survived) of the live mutants; `None` without any.
    pub kill_rate: Option<f64>,
}

/// The whole measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MutantsReport {
    pub target: String,
    pub suites: Vec<String>,
    pub each_suite: bool,
    pub command: String,
    pub mutants: Vec<MutantResult>,
    pub per_suite: Vec<SuiteRow>,
    pub per_class: Vec<ClassRow>,
    pub live: usize,
    pub killed: usize,
    pub kill_rate: Option<f64>,
    /// Classes recorded as having no kernel-source form, with the reason.
    pub outside: Vec<(BugClass, String)>,
    pub baseline_wall_s: f64,
    pub wall_s: f64,
}

fn rate(k: usize, n: usize) -> Option<f64> {
    (n > 0).then(|| k as f64 / n as f64)
}

impl MutantsReport {
    /// Aggregates `mutants` (in catalogue order) into the per-suite and per-class rows.
    pub fn aggregate(
        target: &str,
        suites: &[String],
        each_suite: bool,
        catalogue: &Catalogue,
        mutants: Vec<MutantResult>,
    ) -> MutantsReport {
        let live: Vec<&MutantResult> = mutants.iter().filter(|m| m.live()).collect();
        let mut per_suite = Vec::new();
        let mut cumulative = 0usize;
        let mut first_kill: BTreeMap<&str, usize> = BTreeMap::new();
        for m in &live {
            if let Some(s) = m.killed_by() {
                *first_kill.entry(s).or_default() += 1;
            }
        }
        for s in suites {
            let ran = live
                .iter()
                .filter(|m| m.suites.iter().any(|r| &r.suite == s))
                .count();
            let killed = live
                .iter()
                .filter(|m| {
                    m.suites
                        .iter()
                        .any(|r| &r.suite == s && matches!(r.outcome, SuiteOutcome::Killed { .. }))
                })
                .count();
            cumulative += first_kill.get(s.as_str()).copied().unwrap_or(0);
            per_suite.push(SuiteRow {
                suite: s.clone(),
                ran,
                killed,
                cumulative_killed: cumulative,
                cumulative_rate: rate(cumulative, live.len()).unwrap_or(0.0),
            });
        }
        let mut per_class = Vec::new();
        for class in BugClass::ALL {
            let of: Vec<&MutantResult> = mutants.iter().filter(|m| m.class == class).collect();
            let count = |f: &dyn Fn(&MutantResult) -> bool| of.iter().filter(|m| f(m)).count();
            let killed = count(&|m| m.live() && m.killed_by().is_some());
            let survived = count(&|m| m.live() && m.killed_by().is_none());
            per_class.push(ClassRow {
                class,
                origin: class.origin().to_owned(),
                mutants: of.len(),
                equivalent: count(&|m| m.equivalent.is_some()),
                stillborn: count(&|m| matches!(m.status, MutantStatus::Stillborn { .. })),
                errors: count(&|m| matches!(m.status, MutantStatus::Error { .. })),
                killed,
                survived,
                kill_rate: rate(killed, killed + survived),
            });
        }
        let killed = live.iter().filter(|m| m.killed_by().is_some()).count();
        MutantsReport {
            target: target.to_owned(),
            suites: suites.to_vec(),
            each_suite,
            command: String::new(),
            per_suite,
            per_class,
            live: live.len(),
            killed,
            kill_rate: rate(killed, live.len()),
            outside: catalogue
                .outside
                .iter()
                .map(|o| (o.class, o.reason.clone()))
                .collect(),
            baseline_wall_s: 0.0,
            wall_s: 0.0,
            mutants,
        }
    }
}

#[cfg(test)]
mod tests;
