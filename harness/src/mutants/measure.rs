//! The measurement: the unmutated baseline first, every mutant's tree written and compile-checked
//! up front (in parallel), then the suites run on each mutant in turn.

use super::{
    MutantResult, MutantStatus, MutantsReport, SanitizeShare, SuiteOutcome, SuiteRun, SuiteRunner,
    status_of,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;
use w4a16_kernels::mutants::{Catalogue, CatalogueError, Mutant};
use w4a16_kernels::nvrtc::{self, NvrtcError};
use w4a16_kernels::source::{KernelSources, SourceFile};

/// Everything `w4a16 mutants` needs besides the catalogue.
#[derive(Clone, Debug)]
pub struct Plan {
    pub runner: SuiteRunner,
    pub suites: Vec<String>,
    /// The unmutated sources the mutants are applied to.
    pub base: KernelSources,
    /// Where the mutated trees, the runs' reports and logs go.
    pub work: PathBuf,
    /// After the suites: the GPU job's sanitizer share (`--sanitize memcheck`), run on the
    /// mutants the suites let through; a kill there counts apart ("by memcheck").
    pub sanitize: Option<SanitizeShare>,
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
    // The unmutated sources must pass the sanitizer share too, or its kills mean nothing.
    let base_runs = run_all(plan, &base_dir, &base_dir, false);
    for r in &base_runs {
        if !matches!(r.outcome, SuiteOutcome::Passed { .. }) {
            return Err(MutantsError::Baseline {
                suite: r.label(),
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
                    let runs = run_all(plan, &work.join("src"), &work, plan.each_suite);
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
        plan.sanitize.as_ref(),
        plan.each_suite,
        catalogue,
        results,
    );
    report.baseline_wall_s = baseline_wall_s;
    report.wall_s = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The suites against `tree`, then (when every suite passed, or with `each_suite` when none
/// errored) the sanitizer share's suites under its tool.
fn run_all(plan: &Plan, tree: &Path, work: &Path, each_suite: bool) -> Vec<SuiteRun> {
    let mut runs = plan
        .runner
        .run_suites(&plan.suites, tree, work, each_suite, None);
    let go_on = runs.iter().all(|r| match r.outcome {
        SuiteOutcome::Passed { .. } => true,
        SuiteOutcome::Killed { .. } => each_suite,
        _ => false,
    });
    if let (Some(share), true) = (&plan.sanitize, go_on) {
        runs.extend(plan.runner.run_suites(
            &share.suites,
            tree,
            work,
            each_suite,
            Some(share.tool),
        ));
    }
    runs
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
