//! A run over many cases on one target: picks the device, spreads cases over fault-isolated
//! workers (GPU) or threads (CPU-only), and gathers verdicts. Shared by the CLI and the tests.

use super::execute::{Mode, RunContext, run_case_timed};
use super::isolate;
use super::timing::PhaseTimes;
use super::verdict::{Outcome, Verdict};
use crate::cases::{self, Case, CaseSet};
use crate::config::KernelConfig;
use crate::device::{self, Device};
use crate::require::Skip;
use rayon::prelude::*;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use w4a16_kernels::Target;

/// The suites whose cases run as the engine would (the selected path only); every other suite
/// runs the whole kernel set differentially.
pub const SELECTED_PATH_SUITES: [&str; 2] = ["field", "checkpoints"];

pub fn mode_for_suite(suite: &str) -> Mode {
    if SELECTED_PATH_SUITES.contains(&suite) {
        Mode::Selected
    } else {
        Mode::Differential
    }
}

#[derive(Deserialize)]
struct SafetyEntry {
    c_target: f64,
    #[allow(dead_code)]
    reason: String,
}

/// `c_target` for `target` from `cases/targets/safety.toml` (SPEC §6: data, not code).
pub fn c_target(cases_dir: &Path, target: Target) -> Result<f64, String> {
    let path = cases_dir.join("targets").join("safety.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let table: BTreeMap<String, SafetyEntry> =
        toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let entry = table.get(target.name()).ok_or_else(|| {
        format!(
            "{}: no entry for target `{}`",
            path.display(),
            target.name()
        )
    })?;
    if !(entry.c_target.is_finite() && entry.c_target >= 1.0) {
        return Err(format!(
            "{}: key \"{}.c_target\": expected a finite factor ≥ 1, got {}",
            path.display(),
            target.name(),
            entry.c_target
        ));
    }
    Ok(entry.c_target)
}

/// What a session runs on.
pub enum Backend {
    Device(Box<dyn Device>),
    /// CPU-side checks only; GPU-bound checks are reported as skipped with this reason.
    None(Skip),
}

/// What a run gathered: the verdicts, in case order, and where the time went.
#[derive(Clone, Debug, Default)]
pub struct RunOutput {
    pub verdicts: Vec<Verdict>,
    pub times: PhaseTimes,
}

/// Options shared by every case of a session.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    pub cases_dir: PathBuf,
    pub target: Target,
    pub config: KernelConfig,
    pub artifacts: Option<PathBuf>,
    pub full_reference_macs: f64,
    pub sample_flops: f64,
}

impl SessionOptions {
    pub fn new(cases_dir: PathBuf, target: Target) -> Self {
        SessionOptions {
            cases_dir,
            target,
            config: KernelConfig::default(),
            artifacts: None,
            full_reference_macs: 2.0e9,
            sample_flops: 2.0e9,
        }
    }
}

/// Runs `cases` in this process (CPU threads, or one device shared by every thread).
pub fn run_in_process(
    set: &CaseSet,
    cases: &[&Case],
    backend: &Backend,
    opts: &SessionOptions,
    on_verdict: &(dyn Fn(&Verdict) + Sync),
) -> Result<RunOutput, String> {
    let c = c_target(&opts.cases_dir, opts.target)?;
    let (device, no_device) = match backend {
        Backend::Device(d) => (Some(d.as_ref()), None),
        Backend::None(s) => (None, Some(s.clone())),
    };
    let ctx = RunContext {
        target: opts.target,
        device,
        no_device,
        config: opts.config,
        c_target: c,
        known_bad: set.known_bad(),
        today: cases::Date::today_utc(),
        artifacts: opts.artifacts.clone(),
        full_reference_macs: opts.full_reference_macs,
        sample_flops: opts.sample_flops,
    };
    let run = |case: &&Case| {
        let (vs, t) = run_case_timed(case, mode_for_suite(&case.suite), &ctx);
        vs.iter().for_each(on_verdict);
        (vs, t)
    };
    // A real device: launches are serialised by its stream anyway, and parallelism comes from
    // worker processes (`run_isolated_jobs`). Host-only backends share across threads.
    let per_case: Vec<(Vec<Verdict>, PhaseTimes)> = match device {
        Some(d) if !d.host_only() => cases.iter().map(run).collect(),
        _ => cases.par_iter().map(run).collect(),
    };
    let mut out = RunOutput::default();
    for (vs, t) in per_case {
        out.verdicts.extend(vs);
        out.times.merge(&t);
    }
    Ok(out)
}

/// Runs `case_ids` in `jobs` worker processes of `exe` (DESIGN rule 8), each given `worker_args`.
pub fn run_isolated_jobs(
    exe: &Path,
    worker_args: &[String],
    case_ids: &[String],
    jobs: usize,
    per_case: Duration,
    on_verdict: &(dyn Fn(&Verdict) + Sync),
) -> std::io::Result<RunOutput> {
    let jobs = jobs.max(1).min(case_ids.len().max(1));
    // Deal cases round-robin so long and short shapes spread evenly.
    let shards: Vec<Vec<String>> = (0..jobs)
        .map(|j| case_ids.iter().skip(j).step_by(jobs).cloned().collect())
        .collect();
    let results: Vec<std::io::Result<RunOutput>> = shards
        .par_iter()
        .map(|ids| isolate::run_isolated(exe, worker_args, ids, per_case, on_verdict))
        .collect();
    let mut all = Vec::new();
    let mut times = PhaseTimes::default();
    for r in results {
        let r = r?;
        all.extend(r.verdicts);
        times.merge(&r.times);
    }
    let order: BTreeMap<&str, usize> = case_ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    all.sort_by_key(|v| order.get(v.case_id.as_str()).copied().unwrap_or(usize::MAX));
    Ok(RunOutput {
        verdicts: all,
        times,
    })
}

/// Opens the backend for `target`: the default device if one is there and matches, else a skip.
pub fn open_backend(target: Option<Target>) -> (Target, Backend) {
    match device::open_default() {
        Ok(d) => {
            let t = d.target();
            match target {
                Some(want) if want != t => (
                    want,
                    Backend::None(Skip {
                        requirement: crate::require::Requirement::Gpu,
                        reason: format!("the GPU here is {t}, not {want}"),
                    }),
                ),
                _ => (t, Backend::Device(d)),
            }
        }
        Err(skip) => (target.unwrap_or(Target::Gfx1151), Backend::None(skip)),
    }
}

/// Checks that need no case: every invalid case file is refused naming its file and key.
pub fn invalid_case_file_checks(cases_dir: &Path) -> Vec<Verdict> {
    let dir = cases_dir.join("invalid");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .map(|f| {
            let id = format!(
                "case-files/invalid/{}",
                f.file_name().unwrap_or_default().to_string_lossy()
            );
            let expected_key = std::fs::read_to_string(f).ok().and_then(|t| {
                t.lines().find_map(|l| {
                    l.strip_prefix("# expect-key: ")
                        .map(|k| k.trim().to_string())
                })
            });
            let valid = cases::case_files(cases_dir).unwrap_or_default();
            if let Err(e) = cases::load_files(&valid) {
                return Verdict::new(id, "loader", Outcome::Fail)
                    .detail(format!("the valid case files do not load: {e}"));
            }
            let mut with_bad = valid;
            with_bad.push(f.clone());
            match cases::load_files(&with_bad) {
                Ok(_) => Verdict::new(id, "loader", Outcome::Fail)
                    .detail("a deliberately broken file was accepted"),
                Err(e) if e.file == *f && expected_key.as_deref() == Some(e.key.as_str()) => {
                    Verdict::new(id, "loader", Outcome::Refused).detail(e.to_string())
                }
                Err(e) => Verdict::new(id, "loader", Outcome::Fail).detail(format!(
                    "refused, but not naming {} and key {:?}: {e}",
                    f.display(),
                    expected_key
                )),
            }
        })
        .collect()
}
