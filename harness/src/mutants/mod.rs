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
use crate::runner::verdict::SanitizerTool;
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
    /// The run was under compute-sanitizer with this tool (`run --sanitize`: exact-size
    /// allocations), as the GPU job's sanitizer share runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sanitize: Option<SanitizerTool>,
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
        /// Killed by a run under compute-sanitizer with this tool (none: by the suites).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sanitize: Option<SanitizerTool>,
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

    /// Killed by one of the suites run without a sanitizer.
    pub fn killed_by_suites(&self) -> bool {
        matches!(self.status, MutantStatus::Killed { sanitize: None, .. })
    }

    /// Killed only by a run under compute-sanitizer (every plain suite let it through).
    pub fn killed_by_sanitizer(&self) -> bool {
        matches!(
            self.status,
            MutantStatus::Killed {
                sanitize: Some(_),
                ..
            }
        )
    }
}

impl SuiteRun {
    /// The suite's name, with the sanitizer it ran under (`smoke`, `memcheck:smoke`).
    pub fn label(&self) -> String {
        suite_label(&self.suite, self.sanitize)
    }
}

/// `suite`, or `tool:suite` for a run under compute-sanitizer.
pub fn suite_label(suite: &str, sanitize: Option<SanitizerTool>) -> String {
    match sanitize {
        Some(tool) => format!("{tool}:{suite}"),
        None => suite.to_owned(),
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
                    sanitize: r.sanitize,
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
    let names: Vec<String> = runs.iter().map(SuiteRun::label).collect();
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
    /// Killed by the plain suites (or, without a sanitizer share, by anything).
    pub killed: usize,
    /// Let through by every plain suite, killed by a run under compute-sanitizer.
    #[serde(default)]
    pub killed_by_sanitizer: usize,
    pub survived: usize,
    /// (killed + killed_by_sanitizer) / live; `None` without any live mutant.
    pub kill_rate: Option<f64>,
    /// killed / live: the plain suites alone.
    #[serde(default)]
    pub suites_kill_rate: Option<f64>,
}

/// The whole measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MutantsReport {
    pub target: String,
    pub suites: Vec<String>,
    /// The sanitizer share run after the suites (`--sanitize`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sanitize: Option<SanitizeShare>,
    pub each_suite: bool,
    pub command: String,
    pub mutants: Vec<MutantResult>,
    pub per_suite: Vec<SuiteRow>,
    pub per_class: Vec<ClassRow>,
    pub live: usize,
    /// Killed by anything: the suites, then the sanitizer share.
    pub killed: usize,
    pub kill_rate: Option<f64>,
    /// Killed by the plain suites alone, and that kill rate.
    #[serde(default)]
    pub killed_by_suites: usize,
    #[serde(default)]
    pub suites_kill_rate: Option<f64>,
    /// Let through by the suites, killed by the sanitizer share.
    #[serde(default)]
    pub killed_by_sanitizer: usize,
    /// Classes recorded as having no kernel-source form, with the reason.
    pub outside: Vec<(BugClass, String)>,
    pub baseline_wall_s: f64,
    pub wall_s: f64,
}

/// The GPU job's sanitizer share as `w4a16 mutants --sanitize TOOL` runs it: `suites` under
/// compute-sanitizer's `tool` (exact-size allocations), on the mutants the plain suites let
/// through (on every mutant with `--each-suite`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SanitizeShare {
    pub tool: SanitizerTool,
    pub suites: Vec<String>,
}

impl SanitizeShare {
    /// Every run's label, in order (`memcheck:smoke`, …).
    pub fn labels(&self) -> Vec<String> {
        self.suites
            .iter()
            .map(|s| suite_label(s, Some(self.tool)))
            .collect()
    }
}

fn rate(k: usize, n: usize) -> Option<f64> {
    (n > 0).then(|| k as f64 / n as f64)
}

impl MutantResult {
    /// The label of the run that killed it (`kernels`, `memcheck:smoke`).
    pub fn killed_by_label(&self) -> Option<String> {
        match &self.status {
            MutantStatus::Killed {
                suite, sanitize, ..
            } => Some(suite_label(suite, *sanitize)),
            _ => None,
        }
    }
}

impl MutantsReport {
    /// Aggregates `mutants` (in catalogue order) into the per-suite and per-class rows; the
    /// sanitizer share's runs (if any) are rows after the suites'.
    pub fn aggregate(
        target: &str,
        suites: &[String],
        sanitize: Option<&SanitizeShare>,
        each_suite: bool,
        catalogue: &Catalogue,
        mutants: Vec<MutantResult>,
    ) -> MutantsReport {
        let live: Vec<&MutantResult> = mutants.iter().filter(|m| m.live()).collect();
        let mut per_suite = Vec::new();
        let mut cumulative = 0usize;
        let mut first_kill: BTreeMap<String, usize> = BTreeMap::new();
        for m in &live {
            if let Some(s) = m.killed_by_label() {
                *first_kill.entry(s).or_default() += 1;
            }
        }
        let mut labels = suites.to_vec();
        labels.extend(sanitize.map(SanitizeShare::labels).unwrap_or_default());
        for s in &labels {
            let runs_of = |m: &&&MutantResult| m.suites.iter().any(|r| &r.label() == s);
            let ran = live.iter().filter(runs_of).count();
            let killed = live
                .iter()
                .filter(|m| {
                    m.suites.iter().any(|r| {
                        &r.label() == s && matches!(r.outcome, SuiteOutcome::Killed { .. })
                    })
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
        let per_class = BugClass::ALL
            .into_iter()
            .map(|class| ClassRow::of(class, &mutants))
            .collect();
        let killed = live.iter().filter(|m| m.killed_by().is_some()).count();
        let by_suites = live.iter().filter(|m| m.killed_by_suites()).count();
        MutantsReport {
            target: target.to_owned(),
            suites: suites.to_vec(),
            sanitize: sanitize.cloned(),
            each_suite,
            command: String::new(),
            per_suite,
            per_class,
            live: live.len(),
            killed,
            kill_rate: rate(killed, live.len()),
            killed_by_suites: by_suites,
            suites_kill_rate: rate(by_suites, live.len()),
            killed_by_sanitizer: killed - by_suites,
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

impl ClassRow {
    /// The row of `class` over `mutants`.
    fn of(class: BugClass, mutants: &[MutantResult]) -> ClassRow {
        let of: Vec<&MutantResult> = mutants.iter().filter(|m| m.class == class).collect();
        let count = |f: &dyn Fn(&MutantResult) -> bool| of.iter().filter(|m| f(m)).count();
        let killed = count(&|m| m.live() && m.killed_by_suites());
        let killed_by_sanitizer = count(&|m| m.live() && m.killed_by_sanitizer());
        let survived = count(&|m| m.live() && m.killed_by().is_none());
        let live = killed + killed_by_sanitizer + survived;
        ClassRow {
            class,
            origin: class.origin().to_owned(),
            mutants: of.len(),
            equivalent: count(&|m| m.equivalent.is_some()),
            stillborn: count(&|m| matches!(m.status, MutantStatus::Stillborn { .. })),
            errors: count(&|m| matches!(m.status, MutantStatus::Error { .. })),
            killed,
            killed_by_sanitizer,
            survived,
            kill_rate: rate(killed + killed_by_sanitizer, live),
            suites_kill_rate: rate(killed, live),
        }
    }
}

#[cfg(test)]
mod tests;
