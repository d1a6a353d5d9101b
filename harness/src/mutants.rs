//! `w4a16 mutants`: the harness measures its own detection power. Every mutant
//! of the catalogue (`w4a16_kernels::mutants`) is written out as a full source tree and the
//! chosen suites run against it through `w4a16 run --kernel-sources DIR --fail-fast`, one
//! subprocess per suite, in order; a mutant is *killed* by the first failing check, *survives*
//! when every suite passes, and is *stillborn* when it does not compile (counted apart, never as
//! a kill). The unmutated sources must pass first, or nothing is measured.
//!
//! This module holds the plan, the outcome types, the aggregation (kill rate per suite and per
//! class) and the Markdown table; the subprocess driver is [`run_suite`].

use crate::runner::{Outcome, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use w4a16_kernels::mutants::{BugClass, Catalogue, CatalogueError, Mutant};
use w4a16_kernels::nvrtc::{self, NvrtcError};
use w4a16_kernels::source::{KernelSources, SourceFile};

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

    /// The Markdown table for `bench/mutants-<target>.md`.
    pub fn markdown(&self) -> String {
        let pct = |r: Option<f64>| r.map_or("—".to_owned(), |r| format!("{:.0} %", 100.0 * r));
        let mut md = format!(
            "# Mutation score on {}\n\nSuites {} ({}). {} mutants: {} live, {} killed — kill rate **{}**.\n\n",
            self.target,
            self.suites.join(" + "),
            if self.each_suite {
                "every suite on every mutant"
            } else {
                "in order; a suite runs only on the mutants the earlier ones let through"
            },
            self.mutants.len(),
            self.live,
            self.killed,
            pct(self.kill_rate),
        );
        if !self.command.is_empty() {
            md.push_str(&format!("Command: `{}`\n\n", self.command));
        }
        md.push_str("## Per suite\n\n| suite | ran on | killed | cumulative killed | cumulative kill rate |\n|---|---:|---:|---:|---:|\n");
        for r in &self.per_suite {
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                r.suite,
                r.ran,
                r.killed,
                r.cumulative_killed,
                pct(Some(r.cumulative_rate))
            ));
        }
        md.push_str("\n## Per class\n\n| class | origin | mutants | equivalent | stillborn | errors | killed | survived | kill rate |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in &self.per_class {
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                r.class,
                r.origin,
                r.mutants,
                r.equivalent,
                r.stillborn,
                r.errors,
                r.killed,
                r.survived,
                pct(r.kill_rate)
            ));
        }
        let section = |md: &mut String, title: &str, rows: Vec<String>| {
            if !rows.is_empty() {
                md.push_str(&format!("\n## {title}\n\n"));
                for r in rows {
                    md.push_str(&r);
                    md.push('\n');
                }
            }
        };
        let one_line = |s: &str| {
            let l = s.lines().next().unwrap_or("").trim();
            if l.chars().count() > 160 {
                format!("{}…", l.chars().take(160).collect::<String>())
            } else {
                l.to_owned()
            }
        };
        section(
            &mut md,
            "Survivors (live mutants no suite killed)",
            self.mutants
                .iter()
                .filter(|m| m.live() && m.killed_by().is_none())
                .map(|m| {
                    let why = match &m.status {
                        MutantStatus::Survived { reason } => reason.as_str(),
                        _ => "",
                    };
                    format!(
                        "- `{}` ({}, {}): {} — {why}",
                        m.id, m.class, m.file, m.description
                    )
                })
                .collect(),
        );
        section(
            &mut md,
            "Killed",
            self.mutants
                .iter()
                .filter(|m| m.live())
                .filter_map(|m| match &m.status {
                    MutantStatus::Killed {
                        suite,
                        case_id,
                        check,
                        detail,
                    } => Some(format!(
                        "- `{}` ({}): {suite} `{case_id}` [{check}] {}",
                        m.id,
                        m.class,
                        one_line(detail)
                    )),
                    _ => None,
                })
                .collect(),
        );
        section(
            &mut md,
            "Equivalent (not in the kill rate)",
            self.mutants
                .iter()
                .filter_map(|m| {
                    let why = m.equivalent.as_ref()?;
                    let ran = match &m.status {
                        MutantStatus::NotRunEquivalent => "not run".to_owned(),
                        MutantStatus::Killed { suite, check, .. } => format!(
                            "**KILLED by {suite} [{check}]: a false alarm or a wrong equivalence claim**"
                        ),
                        MutantStatus::Survived { .. } => "survived, as claimed".to_owned(),
                        other => format!("{other:?}"),
                    };
                    Some(format!("- `{}` ({}): {why} — {ran}", m.id, m.class))
                })
                .collect(),
        );
        section(
            &mut md,
            "Stillborn (did not compile; not counted)",
            self.mutants
                .iter()
                .filter_map(|m| match &m.status {
                    MutantStatus::Stillborn { log } => {
                        Some(format!("- `{}` ({}): {}", m.id, m.class, one_line(log)))
                    }
                    _ => None,
                })
                .collect(),
        );
        section(
            &mut md,
            "Errors (not measured)",
            self.mutants
                .iter()
                .filter_map(|m| match &m.status {
                    MutantStatus::Error { reason } => {
                        Some(format!("- `{}`: {}", m.id, one_line(reason)))
                    }
                    _ => None,
                })
                .collect(),
        );
        section(
            &mut md,
            "Classes without a kernel-source form (catalogue records)",
            self.outside
                .iter()
                .map(|(c, why)| format!("- {c} ({}): {why}", c.origin()))
                .collect(),
        );
        md.push_str(&format!(
            "\n_{:.0} s wall ({:.0} s of it the unmutated baseline)._\n",
            self.wall_s, self.baseline_wall_s
        ));
        md
    }
}

/// How to run one suite in a subprocess.
#[derive(Clone, Debug)]
pub struct SuiteRunner {
    /// The `w4a16` executable.
    pub exe: PathBuf,
    /// `--cases` for the subprocess, when not found from its working directory.
    pub cases_dir: Option<PathBuf>,
    pub target: String,
    pub jobs: usize,
    pub case_timeout: Duration,
}

#[derive(Deserialize)]
struct ReportVerdicts {
    verdicts: Vec<Verdict>,
}

/// Reads what a `run --fail-fast` left in `report_dir` (and its exit status) as a suite outcome.
pub fn suite_outcome(report_dir: &Path, exit_ok: bool, log_tail: &str) -> SuiteOutcome {
    let path = report_dir.join("report.json");
    let report: ReportVerdicts = match std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => {
            return SuiteOutcome::Error {
                reason: format!("{}: {e}; log: {log_tail}", path.display()),
            };
        }
    };
    if let Some(v) = report.verdicts.iter().find(|v| v.outcome.is_failure()) {
        if v.detail.starts_with("compiling ") && v.detail.contains(" failed: ") {
            return SuiteOutcome::CompileError {
                detail: v.detail.clone(),
            };
        }
        return SuiteOutcome::Killed {
            case_id: v.case_id.clone(),
            check: v.check.to_string(),
            outcome: v.outcome,
            detail: v.detail.clone(),
        };
    }
    if !exit_ok {
        return SuiteOutcome::Error {
            reason: format!("the run failed without a failing verdict; log: {log_tail}"),
        };
    }
    let skipped = report
        .verdicts
        .iter()
        .filter(|v| v.outcome == Outcome::Skip)
        .count();
    SuiteOutcome::Passed {
        checks: report.verdicts.len(),
        skipped,
    }
}

impl SuiteRunner {
    /// `w4a16 run --suite <suite> --kernel-sources <tree> --fail-fast` into `work/<suite>/`.
    pub fn run_suite(&self, suite: &str, tree: &Path, work: &Path) -> SuiteRun {
        let start = Instant::now();
        let report_dir = work.join(suite);
        let _ = std::fs::remove_dir_all(&report_dir);
        let _ = std::fs::create_dir_all(&report_dir);
        let log_path = report_dir.join("run.log");
        let mut cmd = Command::new(&self.exe);
        if let Some(c) = &self.cases_dir {
            cmd.arg("--cases").arg(c);
        }
        cmd.args([
            "run",
            "--suite",
            suite,
            "--target",
            &self.target,
            "--fail-fast",
        ])
        .arg("--jobs")
        .arg(self.jobs.to_string())
        .arg("--case-timeout")
        .arg(self.case_timeout.as_secs().max(1).to_string())
        .arg("--kernel-sources")
        .arg(tree)
        .arg("--report-dir")
        .arg(&report_dir);
        let outcome = match std::fs::File::create(&log_path).and_then(|log| {
            let err = log.try_clone()?;
            cmd.stdout(log).stderr(err).status()
        }) {
            Ok(status) => {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(3).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                suite_outcome(&report_dir, status.success(), &tail.join(" | "))
            }
            Err(e) => SuiteOutcome::Error {
                reason: format!("starting {}: {e}", self.exe.display()),
            },
        };
        SuiteRun {
            suite: suite.to_owned(),
            outcome,
            wall_s: start.elapsed().as_secs_f64(),
        }
    }

    /// The suites in order against `tree`; stops after the first one that does not pass unless
    /// `each_suite`.
    pub fn run_suites(
        &self,
        suites: &[String],
        tree: &Path,
        work: &Path,
        each_suite: bool,
    ) -> Vec<SuiteRun> {
        let mut runs = Vec::new();
        for s in suites {
            let r = self.run_suite(s, tree, work);
            let passed = matches!(r.outcome, SuiteOutcome::Passed { .. });
            let killed = matches!(r.outcome, SuiteOutcome::Killed { .. });
            runs.push(r);
            // Go on after a pass, or after a kill when every suite is wanted.
            let go_on = passed || (each_suite && killed);
            if !go_on {
                break;
            }
        }
        runs
    }
}

/// Everything `w4a16 mutants` needs besides the catalogue.
#[derive(Clone, Debug)]
pub struct Plan {
    pub runner: SuiteRunner,
    pub suites: Vec<String>,
    /// The unmutated sources the mutants are applied to.
    pub base: KernelSources,
    /// Where the mutated trees, the runs' reports and logs go.
    pub work: PathBuf,
    /// Run every suite on every mutant (else stop at the first suite that kills it).
    pub each_suite: bool,
    /// Also run the mutants marked equivalent.
    pub run_equivalent: bool,
    /// NVRTC architecture for the compile check before any run (`sm_90`); `None` on AMD, where
    /// a compile error shows up as the runs' verdicts instead.
    pub nvrtc_arch: Option<String>,
    /// Extra NVRTC options of that check: an emulated AMD target's macros (`gfx1100-emu`), so
    /// that the check compiles what the suites will run.
    pub nvrtc_extra: Vec<String>,
}

/// Why nothing (more) can be measured.
#[derive(Debug, thiserror::Error)]
pub enum MutantsError {
    #[error(transparent)]
    Catalogue(#[from] CatalogueError),
    #[error(
        "the unmutated sources do not pass `{suite}`: {what}; mutants measure nothing until they do"
    )]
    Baseline { suite: String, what: String },
}

fn first_line(s: &str) -> String {
    s.lines()
        .find(|l| l.contains("error"))
        .or_else(|| s.lines().next())
        .unwrap_or("")
        .trim()
        .to_owned()
}

/// The compile check: `Ok` when every kernel `file` reaches compiles, `Err(log)` on a compile
/// error, and an error status when NVRTC cannot run.
fn compile_check(
    tree: &KernelSources,
    file: SourceFile,
    arch: &str,
    extra: &[String],
) -> Result<(), MutantStatus> {
    for (kernel, r) in nvrtc::compile_all(tree, &file.kernels(), arch, extra) {
        match r {
            Ok(()) => {}
            Err(NvrtcError::Compile { log, .. }) => {
                return Err(MutantStatus::Stillborn {
                    log: format!("{kernel}: {}", first_line(&log)),
                });
            }
            Err(e) => {
                return Err(MutantStatus::Error {
                    reason: format!("compile check of {kernel}: {e}"),
                });
            }
        }
    }
    Ok(())
}

/// The compile check of every mutant that has a tree, on all cores.
fn compile_checks<'m>(
    chosen: &[&'m Mutant],
    trees: &BTreeMap<&str, KernelSources>,
    arch: &str,
    extra: &[String],
) -> BTreeMap<&'m str, Result<(), MutantStatus>> {
    let todo: Vec<&Mutant> = chosen
        .iter()
        .copied()
        .filter(|m| trees.contains_key(m.id.as_str()))
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out = std::sync::Mutex::new(BTreeMap::new());
    std::thread::scope(|s| {
        for _ in 0..threads.min(todo.len()) {
            s.spawn(|| {
                while let Some(m) = todo.get(next.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
                {
                    let r = compile_check(&trees[m.id.as_str()], m.file, arch, extra);
                    out.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(m.id.as_str(), r);
                }
            });
        }
    });
    out.into_inner().unwrap_or_else(|p| p.into_inner())
}

/// Checks the baseline, then measures `chosen` one after the other; `progress` sees each row.
pub fn measure(
    plan: &Plan,
    catalogue: &Catalogue,
    chosen: &[&Mutant],
    progress: &mut dyn FnMut(&MutantResult),
) -> Result<MutantsReport, MutantsError> {
    let started = Instant::now();
    catalogue.check_against(&plan.base)?;
    // The baseline goes through the same path as the mutants: a tree on disk.
    let base_dir = plan.work.join("base");
    let base_tree = write_base(&plan.base, &base_dir)?;
    if let Some(arch) = &plan.nvrtc_arch {
        for (kernel, r) in nvrtc::compile_all(
            &base_tree,
            &w4a16_kernels::source::WITH_SOURCE,
            arch,
            &plan.nvrtc_extra,
        ) {
            if let Err(e) = r {
                return Err(MutantsError::Baseline {
                    suite: "(compile)".into(),
                    what: format!("{kernel}: {}", first_line(&e.to_string())),
                });
            }
        }
    }
    let base_runs = plan
        .runner
        .run_suites(&plan.suites, &base_dir, &base_dir, false);
    for r in &base_runs {
        if !matches!(r.outcome, SuiteOutcome::Passed { .. }) {
            return Err(MutantsError::Baseline {
                suite: r.suite.clone(),
                what: match &r.outcome {
                    SuiteOutcome::Killed {
                        case_id,
                        check,
                        detail,
                        ..
                    } => format!("{case_id} [{check}] {}", first_line(detail)),
                    SuiteOutcome::CompileError { detail } => first_line(detail),
                    SuiteOutcome::Error { reason } => reason.clone(),
                    SuiteOutcome::Passed { .. } => unreachable!(),
                },
            });
        }
    }
    let baseline_wall_s = started.elapsed().as_secs_f64();

    // Every tree is written and compiled up front, in parallel: that finds the stillborn ones
    // and fills the PTX cache, so that no suite run waits for NVRTC.
    let target = plan.runner.target.as_str();
    let run_it = |m: &Mutant| m.equivalent_on(target).is_none() || plan.run_equivalent;
    let mut trees: BTreeMap<&str, KernelSources> = BTreeMap::new();
    for m in chosen.iter().filter(|m| run_it(m)) {
        trees.insert(
            &m.id,
            m.write_tree(&plan.base, &plan.work.join(&m.id).join("src"))?,
        );
    }
    let checked: BTreeMap<&str, Result<(), MutantStatus>> = match &plan.nvrtc_arch {
        Some(arch) => compile_checks(chosen, &trees, arch, &plan.nvrtc_extra),
        None => BTreeMap::new(),
    };

    let mut results = Vec::new();
    for m in chosen {
        let t0 = Instant::now();
        let work = plan.work.join(&m.id);
        let row = if !run_it(m) {
            MutantResult::new(m, target, MutantStatus::NotRunEquivalent, vec![], 0.0)
        } else {
            match checked.get(m.id.as_str()).cloned().unwrap_or(Ok(())) {
                Err(status) => MutantResult::new(m, target, status, vec![], 0.0),
                Ok(()) => {
                    let runs = plan.runner.run_suites(
                        &plan.suites,
                        &work.join("src"),
                        &work,
                        plan.each_suite,
                    );
                    MutantResult::new(
                        m,
                        target,
                        status_of(&runs),
                        runs,
                        t0.elapsed().as_secs_f64(),
                    )
                }
            }
        };
        progress(&row);
        results.push(row);
    }
    let mut report = MutantsReport::aggregate(
        &plan.runner.target,
        &plan.suites,
        plan.each_suite,
        catalogue,
        results,
    );
    report.baseline_wall_s = baseline_wall_s;
    report.wall_s = started.elapsed().as_secs_f64();
    Ok(report)
}

fn write_base(base: &KernelSources, dir: &Path) -> Result<KernelSources, MutantsError> {
    std::fs::create_dir_all(dir).map_err(|e| CatalogueError::Read {
        path: dir.to_owned(),
        reason: format!("creating the folder: {e}"),
    })?;
    for f in SourceFile::ALL {
        let path = dir.join(f.name());
        std::fs::write(
            &path,
            base.read(f).map_err(CatalogueError::from)?.as_bytes(),
        )
        .map_err(|e| CatalogueError::Read {
            path,
            reason: format!("writing: {e}"),
        })?;
    }
    Ok(KernelSources::directory(dir).map_err(CatalogueError::from)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use w4a16_kernels::mutants::catalogue_dir;

    fn run(suite: &str, outcome: SuiteOutcome) -> SuiteRun {
        SuiteRun {
            suite: suite.into(),
            outcome,
            wall_s: 1.0,
        }
    }

    fn killed(case: &str) -> SuiteOutcome {
        SuiteOutcome::Killed {
            case_id: case.into(),
            check: "skinny".into(),
            outcome: Outcome::Fail,
            detail: "3 over bound".into(),
        }
    }

    fn passed() -> SuiteOutcome {
        SuiteOutcome::Passed {
            checks: 10,
            skipped: 0,
        }
    }

    fn result(cat: &Catalogue, id: &str, runs: Vec<SuiteRun>) -> MutantResult {
        let m = cat.mutant(id).unwrap();
        MutantResult::new(m, "sm_90", status_of(&runs), runs, 1.0)
    }

    #[test]
    fn kill_rates_per_suite_and_class_from_synthetic_outcomes() {
        let cat = Catalogue::load(&catalogue_dir()).unwrap();
        let suites: Vec<String> = ["smoke", "kernels", "edges"].map(String::from).to_vec();
        let mut results = vec![
            // killed by smoke
            result(
                &cat,
                "skinny-scale-per-span",
                vec![run("smoke", killed("smoke/a"))],
            ),
            // killed by kernels after smoke passed
            result(
                &cat,
                "skinny-flush-ignores-group-end",
                vec![run("smoke", passed()), run("kernels", killed("kernels/b"))],
            ),
            // killed by edges
            result(
                &cat,
                "skinny-y-mask-off-by-one",
                vec![
                    run("smoke", passed()),
                    run("kernels", passed()),
                    run("edges", killed("edges/c")),
                ],
            ),
            // survived everything
            result(
                &cat,
                "skinny-row-h-valid-off-by-one",
                vec![
                    run("smoke", passed()),
                    run("kernels", passed()),
                    run("edges", passed()),
                ],
            ),
            // stillborn: never counted
            result(
                &cat,
                "skinny-x-fragment-wrong-width",
                vec![run(
                    "smoke",
                    SuiteOutcome::CompileError {
                        detail: "compiling skinny.hip for sm_90 failed: no".into(),
                    },
                )],
            ),
        ];
        // equivalent, not run
        let eq = cat.mutant("skinny-group-engine-g128-only").unwrap();
        results.push(MutantResult::new(
            eq,
            "sm_90",
            MutantStatus::NotRunEquivalent,
            vec![],
            0.0,
        ));
        let r = MutantsReport::aggregate("sm_90", &suites, false, &cat, results);
        assert_eq!((r.live, r.killed), (4, 3));
        assert_eq!(r.kill_rate, Some(0.75));
        let rows: Vec<(usize, usize, usize)> = r
            .per_suite
            .iter()
            .map(|s| (s.ran, s.killed, s.cumulative_killed))
            .collect();
        assert_eq!(rows, vec![(4, 1, 1), (3, 1, 2), (2, 1, 3)]);
        assert_eq!(r.per_suite[2].cumulative_rate, 0.75);

        let class = |c: BugClass| r.per_class.iter().find(|x| x.class == c).unwrap().clone();
        let sa = class(BugClass::ScaleAliasing);
        assert_eq!((sa.killed, sa.survived, sa.kill_rate), (2, 0, Some(1.0)));
        let oob = class(BugClass::UnusedOobRead);
        assert_eq!((oob.killed, oob.survived, oob.kill_rate), (0, 1, Some(0.0)));
        let vx = class(BugClass::UnalignedVectorX);
        assert_eq!((vx.stillborn, vx.killed, vx.kill_rate), (1, 0, None));
        let gg = class(BugClass::GroupSizeGaps);
        assert_eq!((gg.equivalent, gg.kill_rate), (1, None));

        let md = r.markdown();
        assert!(md.contains("kill rate **75 %**"), "{md}");
        assert!(md.contains("| edges | 2 | 1 | 3 | 75 % |"), "{md}");
        assert!(
            md.contains("| scale-aliasing | docs/field.md §6.3 | 2 | 0 | 0 | 0 | 2 | 0 | 100 % |")
        );
        assert!(md.contains("`skinny-row-h-valid-off-by-one`"));
        assert!(md.contains("no failing check: 30 checks of smoke + kernels + edges passed"));
        assert!(md.contains("Stillborn"));
        assert!(md.contains("fused-silu-mul"));
        // JSON round trip.
        let json = serde_json::to_string(&r).unwrap();
        let back: MutantsReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn an_equivalent_mutant_that_is_killed_is_flagged_not_counted() {
        let cat = Catalogue::load(&catalogue_dir()).unwrap();
        let suites = vec!["smoke".to_string()];
        let eq = result(
            &cat,
            "fallback-mul-add-unfused",
            vec![run("smoke", killed("smoke/x"))],
        );
        let r = MutantsReport::aggregate("sm_90", &suites, false, &cat, vec![eq]);
        assert_eq!((r.live, r.killed, r.kill_rate), (0, 0, None));
        assert!(
            r.markdown()
                .contains("a false alarm or a wrong equivalence claim")
        );
    }

    #[test]
    fn a_report_folder_becomes_a_suite_outcome() {
        let dir = std::env::temp_dir().join(format!("w4a16-mutants-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |vs: &[Verdict]| {
            let json = crate::runner::report::json("sm_90", vs, None);
            std::fs::write(dir.join("report.json"), json).unwrap();
        };
        use crate::runner::Check;
        use w4a16_kernels::KernelId;
        let pass = Verdict::new("smoke/a", Check::kernel(KernelId::Skinny), Outcome::Pass);
        let fused = || Check::kernel(KernelId::Fused);
        let fail = Verdict::new("smoke/b", fused(), Outcome::Fail).detail("7 over bound");
        let compile = Verdict::new("smoke/c", fused(), Outcome::Fault)
            .detail("compiling fused.hip for sm_90 failed: error: x");
        write(std::slice::from_ref(&pass));
        assert_eq!(
            suite_outcome(&dir, true, ""),
            SuiteOutcome::Passed {
                checks: 1,
                skipped: 0
            }
        );
        assert!(matches!(
            suite_outcome(&dir, false, "tail"),
            SuiteOutcome::Error { .. }
        ));
        write(&[pass.clone(), fail, compile.clone()]);
        assert!(matches!(
            suite_outcome(&dir, false, ""),
            SuiteOutcome::Killed { case_id, .. } if case_id == "smoke/b"
        ));
        write(&[pass, compile]);
        assert!(matches!(
            suite_outcome(&dir, false, ""),
            SuiteOutcome::CompileError { .. }
        ));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(
            suite_outcome(&dir, true, ""),
            SuiteOutcome::Error { .. }
        ));
    }
}
