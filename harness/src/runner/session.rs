//! A run over many cases on one target: picks the device, spreads cases over fault-isolated
//! workers (GPU) or threads (CPU-only), and gathers verdicts. Shared by the CLI and the tests.

use super::cost::SuiteTimes;
use super::execute::{Mode, ReferenceChoice, RunContext, run_case_timed};
use super::gpus;
use super::isolate;
use super::timing::PhaseTimes;
use super::verdict::Check;
use super::verdict::{Outcome, Verdict};
use crate::require::Skip;
use rayon::prelude::*;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use w4a16_cases::{Case, CaseSet};
use w4a16_device::{Device, DeviceBench};
use w4a16_kernels::source::KernelSources;
use w4a16_kernels::{Execution, RunTarget, Target};
use w4a16_select::config::KernelConfig;

/// The suites whose cases run as the engine would (the selected path only); every other suite
/// runs differentially: each of [`w4a16_select::LINEAR_PATHS`] that takes the case. A test
/// checks each name is a suite of the case folder, so a renamed suite cannot quietly turn
/// differential.
pub const SELECTED_PATH_SUITES: [&str; 2] = ["field", "checkpoints"];

pub use super::dealing::{by_layer, case_cost, deal};

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

/// Why `cases/targets/safety.toml` gives no `c_target` for a target.
#[derive(Debug, thiserror::Error)]
pub enum SafetyTableError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Parse {
        path: PathBuf,
        source: toml::de::Error,
    },
    #[error("{}: no entry for target `{target}`", path.display())]
    NoEntry { path: PathBuf, target: String },
    #[error("{}: key \"{target}.c_target\": expected a finite factor ≥ 1, got {value}", path.display())]
    NotAFactor {
        path: PathBuf,
        target: String,
        value: f64,
    },
}

/// Why a session could not run its cases (a case's own failure is a verdict, never this).
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    SafetyTable(#[from] SafetyTableError),
    #[error("an in-process run on several devices was given no device")]
    NoDevice,
    #[error("a device thread panicked")]
    DeviceThreadPanicked,
}

/// `c_target` for `target` from `cases/targets/safety.toml` (docs/contract.md §6: data, not code).
pub fn c_target(cases_dir: &Path, target: Target) -> Result<f64, SafetyTableError> {
    let path = cases_dir.join("targets").join("safety.toml");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(source) => return Err(SafetyTableError::Read { path, source }),
    };
    c_target_of(&text, path, target)
}

/// The committed `cases/targets/safety.toml`, built into the binary for commands that run
/// outside the checkout (`check-model`).
pub const BUILT_IN_SAFETY_TABLE: &str = include_str!("../../../cases/targets/safety.toml");

/// `c_target` for `target` from the built-in copy of the safety table.
pub fn built_in_c_target(target: Target) -> Result<f64, SafetyTableError> {
    let origin = PathBuf::from("cases/targets/safety.toml (built into this binary)");
    c_target_of(BUILT_IN_SAFETY_TABLE, origin, target)
}

/// `c_target` for `target` from the text of a safety table read from `path`.
fn c_target_of(text: &str, path: PathBuf, target: Target) -> Result<f64, SafetyTableError> {
    let table: BTreeMap<String, SafetyEntry> = match toml::from_str(text) {
        Ok(table) => table,
        Err(source) => return Err(SafetyTableError::Parse { path, source }),
    };
    let target = target.name().to_string();
    match table.get(&target) {
        None => Err(SafetyTableError::NoEntry { path, target }),
        Some(e) if !(e.c_target.is_finite() && e.c_target >= 1.0) => {
            Err(SafetyTableError::NotAFactor {
                path,
                target,
                value: e.c_target,
            })
        }
        Some(e) => Ok(e.c_target),
    }
}

/// What a session runs on.
pub enum Backend {
    /// Timing-capable, so that bench and perf open it the same way as a run.
    Device(Box<dyn DeviceBench>),
    /// CPU-side checks only; GPU-bound checks are reported as skipped with this reason.
    None(Skip),
}

impl Backend {
    /// What the opened device is; `None` when none opened.
    pub fn device_kind(&self) -> Option<w4a16_device::DeviceKind> {
        match self {
            Backend::Device(d) => Some(d.kind()),
            Backend::None(_) => None,
        }
    }
}

/// Set once to end a run early (`w4a16 run --fail-fast`): cases not yet started are not run,
/// and isolated workers are ended. Clones share the flag.
#[derive(Clone, Debug, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// What a run gathered: the verdicts, in case order, and where the time went.
#[derive(Clone, Debug, Default)]
pub struct RunOutput {
    pub verdicts: Vec<Verdict>,
    pub times: PhaseTimes,
    /// The times again, per suite (the run's cost table, [`super::cost`]).
    pub suites: SuiteTimes,
    /// The times again, per device ordinal the cases ran on (empty where the run bound no
    /// device): diagnostics only, never part of a verdict, a report's verdicts or a snapshot.
    pub devices: BTreeMap<usize, PhaseTimes>,
}

/// Puts `verdicts` in the order of `case_ids` (a case's own verdicts keep their order).
fn in_case_order<'a>(verdicts: &mut [Verdict], case_ids: impl IntoIterator<Item = &'a str>) {
    let order: BTreeMap<&str, usize> = case_ids
        .into_iter()
        .enumerate()
        .map(|(i, id)| (id, i))
        .collect();
    verdicts.sort_by_key(|v| order.get(v.case_id.as_str()).copied().unwrap_or(usize::MAX));
}

/// Runs `cases` in this process on several devices (`w4a16 run --in-process --gpus …`): whole
/// layers are dealt to the devices as to workers ([`deal`]), each device runs its share on a
/// thread of its own, and the verdicts come back in the callers' order, the same whatever the
/// number of devices. One backend is [`run_in_process`]; `backends` is `(ordinal, backend)`.
pub fn run_in_process_on(
    set: &CaseSet,
    cases: &[&Case],
    backends: &[(usize, Backend)],
    opts: &SessionOptions,
    on_verdict: &(dyn Fn(&Verdict) + Sync),
) -> Result<RunOutput, SessionError> {
    if let [(ordinal, backend)] = backends {
        let mut out = run_in_process(set, cases, backend, opts, on_verdict)?;
        out.devices.insert(*ordinal, out.times);
        return Ok(out);
    }
    if backends.is_empty() {
        return Err(SessionError::NoDevice);
    }
    let groups = by_layer(cases.iter().map(|c| c.layer_key()));
    let mut shards = deal(
        groups,
        |i| case_cost(cases[i], opts.reference),
        backends.len(),
    );
    shards.resize(backends.len(), Vec::new());
    let results: Vec<Result<RunOutput, SessionError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = shards
            .iter()
            .zip(backends)
            .map(|(shard, (_, backend))| {
                let mine: Vec<&Case> = shard.iter().map(|&i| cases[i]).collect();
                scope.spawn(move || run_in_process(set, &mine, backend, opts, on_verdict))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(SessionError::DeviceThreadPanicked)))
            .collect()
    });
    let mut out = RunOutput::default();
    for (r, (ordinal, _)) in results.into_iter().zip(backends) {
        let r = r?;
        out.verdicts.extend(r.verdicts);
        out.times.merge(&r.times);
        out.suites.merge(&r.suites);
        out.devices.entry(*ordinal).or_default().merge(&r.times);
    }
    in_case_order(&mut out.verdicts, cases.iter().map(|c| c.id.as_str()));
    Ok(out)
}

/// Options shared by every case of a session.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    pub cases_dir: PathBuf,
    /// The configuration the host side follows.
    pub target: Target,
    /// Native, or emulated on an NVIDIA GPU (`gfx1151-emu`).
    pub execution: Execution,
    pub config: KernelConfig,
    pub artifacts: Option<PathBuf>,
    pub full_reference_macs: f64,
    pub sample_flops: f64,
    /// Where the reference's products are formed (resolved: `ReferenceChoice::resolve`).
    pub reference: ReferenceChoice,
    /// Cases that have not started when this is set are not run.
    pub stop: StopFlag,
}

impl SessionOptions {
    pub fn new(cases_dir: PathBuf, target: impl Into<RunTarget>) -> Self {
        let RunTarget { target, execution } = target.into();
        SessionOptions {
            cases_dir,
            target,
            execution,
            config: KernelConfig::default(),
            artifacts: None,
            full_reference_macs: 2.0e9,
            sample_flops: 2.0e9,
            reference: ReferenceChoice::Cpu,
            stop: StopFlag::default(),
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
) -> Result<RunOutput, SessionError> {
    let c = c_target(&opts.cases_dir, opts.target)?;
    let (device, no_device) = match backend {
        Backend::Device(d) => (Some(d.as_ref() as &dyn Device), None),
        Backend::None(s) => (None, Some(s.clone())),
    };
    let ctx = RunContext {
        target: opts.target,
        execution: opts.execution,
        device,
        no_device,
        config: opts.config,
        c_target: c,
        known_bad: set.known_bad(),
        today: w4a16_cases::Date::today_utc(),
        artifacts: opts.artifacts.clone(),
        full_reference_macs: opts.full_reference_macs,
        sample_flops: opts.sample_flops,
        reference: opts.reference,
    };
    let run = |case: &&Case| {
        if opts.stop.is_stopped() {
            return (Vec::new(), PhaseTimes::default());
        }
        let (vs, t) = run_case_timed(case, mode_for_suite(&case.suite), &ctx);
        vs.iter().for_each(on_verdict);
        (vs, t)
    };
    // Cases of one layer run back to back, so each thread converts a layer once (rayon hands
    // out contiguous ranges); verdicts come back in the callers' order.
    let order: Vec<usize> = by_layer(cases.iter().map(|c| c.layer_key()))
        .into_iter()
        .flatten()
        .collect();
    let grouped: Vec<&Case> = order.iter().map(|&i| cases[i]).collect();
    // A real device: launches are serialised by its stream anyway, and parallelism comes from
    // worker processes (`run_worker_jobs_on`). Host-only backends share across threads.
    let per_case: Vec<(Vec<Verdict>, PhaseTimes)> = match device {
        Some(d) if !d.host_only() => grouped.iter().map(run).collect(),
        _ => grouped.par_iter().map(run).collect(),
    };
    let mut slots: Vec<Option<(Vec<Verdict>, PhaseTimes)>> = vec![None; cases.len()];
    for (i, r) in order.into_iter().zip(per_case) {
        slots[i] = Some(r);
    }
    let mut out = RunOutput::default();
    for ((vs, t), case) in slots
        .into_iter()
        .zip(cases)
        .filter_map(|(s, c)| Some((s?, c)))
    {
        out.verdicts.extend(vs);
        out.times.merge(&t);
        if t.cases > 0 {
            out.suites.add_case(&case.id, &t);
        }
    }
    Ok(out)
}

/// Runs `case_ids` in `jobs` worker processes (ARCHITECTURE.md rule 8), each bound to one of
/// `ordinals` (round-robin, [`gpus::bind`]) through its [`isolate::WorkerSpec`]; no ordinals:
/// the workers open their default device. `cost` estimates a case's time (any unit): it
/// balances the workers, each of which gets whole layers (`layer`: a case id's layer key,
/// [`Case::layer_key`]) so that it makes each layer's weights once.
/// Once `stop` is set every worker is ended and unfinished cases are left out. The verdicts are
/// in case order whatever the number of workers or devices.
#[allow(clippy::too_many_arguments)]
pub fn run_worker_jobs_on(
    worker: &isolate::WorkerCommand<'_>,
    case_ids: &[String],
    cost: impl Fn(&str) -> f64,
    layer: impl Fn(&str) -> String,
    jobs: usize,
    ordinals: &[usize],
    per_case: Duration,
    stop: &StopFlag,
    on_verdict: &(dyn Fn(&Verdict) + Sync),
) -> std::io::Result<RunOutput> {
    let groups = by_layer(case_ids.iter().map(|id| layer(id)));
    let shards: Vec<Vec<String>> = deal(groups, |i| cost(&case_ids[i]), jobs)
        .into_iter()
        .map(|s| s.into_iter().map(|i| case_ids[i].clone()).collect())
        .collect();
    let bound: Vec<Option<usize>> = match ordinals {
        [] => vec![None; shards.len()],
        _ => gpus::bind(shards.len(), ordinals)
            .into_iter()
            .map(Some)
            .collect(),
    };
    let results: Vec<(Option<usize>, std::io::Result<RunOutput>)> = shards
        .par_iter()
        .zip(bound)
        .map(|(ids, ordinal)| {
            let spec = worker.spec.on_device(ordinal);
            let bound_worker = isolate::WorkerCommand {
                spec: &spec,
                ..*worker
            };
            let r = isolate::run_worker(&bound_worker, ids, per_case, stop, on_verdict);
            (ordinal, r)
        })
        .collect();
    let mut out = RunOutput::default();
    for (ordinal, r) in results {
        let r = r?;
        out.verdicts.extend(r.verdicts);
        out.times.merge(&r.times);
        out.suites.merge(&r.suites);
        if let Some(o) = ordinal {
            out.devices.entry(o).or_default().merge(&r.times);
        }
    }
    in_case_order(&mut out.verdicts, case_ids.iter().map(String::as_str));
    Ok(out)
}

/// Opens the backend for `target`: the default device if one is there and matches, else a skip.
pub fn open_backend(target: Option<RunTarget>) -> (RunTarget, Backend) {
    open_backend_with(
        target,
        &KernelSources::Embedded,
        w4a16_device::Allocation::Guarded,
    )
}

/// As [`open_backend`], with the device's kernels built from `sources` and its buffers sized
/// by `allocation`. An emulated target (`gfx1151-emu`) opens the CUDA device in that target's
/// configuration; without an NVIDIA GPU it is a skip that says so.
pub fn open_backend_with(
    target: Option<RunTarget>,
    sources: &KernelSources,
    allocation: w4a16_device::Allocation,
) -> (RunTarget, Backend) {
    open_backend_at(target, 0, sources, allocation)
}

/// As [`open_backend_with`], on device `ordinal` (a worker of `w4a16 run --gpus`).
pub fn open_backend_at(
    target: Option<RunTarget>,
    ordinal: usize,
    sources: &KernelSources,
    allocation: w4a16_device::Allocation,
) -> (RunTarget, Backend) {
    open_backend_watched(target, ordinal, sources, allocation, None)
}

/// As [`open_backend_at`]; a gfx target opened on the ISA emulator runs every launch under
/// `emu_sanitizer` (a sanitized run's worker).
pub fn open_backend_watched(
    target: Option<RunTarget>,
    ordinal: usize,
    sources: &KernelSources,
    allocation: w4a16_device::Allocation,
    emu_sanitizer: Option<w4a16_device::EmuSanitizer>,
) -> (RunTarget, Backend) {
    if let Some(want) = target.filter(RunTarget::is_emulated) {
        let request = w4a16_device::DeviceRequest::emulated_on_cuda(want.target);
        let request = request.at(ordinal).with_sources(sources.clone());
        return match w4a16_device::open(request.with_allocation(allocation)) {
            Ok(d) => (want, Backend::Device(d)),
            Err(skip) => (want, Backend::None(skip)),
        };
    }
    let request = w4a16_device::DeviceRequest::first_gpu().at(ordinal);
    match w4a16_device::open(
        request
            .with_sources(sources.clone())
            .with_allocation(allocation),
    ) {
        Ok(d) => {
            let t = d.run_target();
            match target {
                Some(want) if want != t => emulated_or_skip(
                    want,
                    sources,
                    format!("the GPU here is {t}, not {want}"),
                    emu_sanitizer,
                ),
                _ => (t, Backend::Device(d)),
            }
        }
        Err(skip) => match target {
            Some(want) => emulated_or_skip(want, sources, skip.reason, emu_sanitizer),
            None => (RunTarget::native(Target::Gfx1151), Backend::None(skip)),
        },
    }
}

/// A native AMD target without its GPU here runs on the ISA emulator (its real code objects on
/// the host); any other target is a skip saying why there is no device for it.
fn emulated_or_skip(
    want: RunTarget,
    sources: &KernelSources,
    no_gpu: String,
    emu_sanitizer: Option<w4a16_device::EmuSanitizer>,
) -> (RunTarget, Backend) {
    let amd = want.target.vendor() == w4a16_kernels::target::Vendor::Amd;
    if amd && !want.is_emulated() {
        let request =
            w4a16_device::DeviceRequest::emulator(want.target).with_emu_sanitizer(emu_sanitizer);
        return match w4a16_device::open(request.with_sources(sources.clone())) {
            Ok(d) => (want, Backend::Device(d)),
            Err(skip) => (
                want,
                Backend::None(Skip {
                    requirement: skip.requirement,
                    reason: format!("{no_gpu}; the ISA emulator: {}", skip.reason),
                }),
            ),
        };
    }
    (
        want,
        Backend::None(Skip {
            requirement: crate::require::Requirement::Gpu,
            reason: no_gpu,
        }),
    )
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
            let valid = w4a16_cases::case_files(cases_dir).unwrap_or_default();
            if let Err(e) = w4a16_cases::load_files(&valid) {
                return Verdict::new(id, Check::Loader, Outcome::Fail)
                    .detail(format!("the valid case files do not load: {e}"));
            }
            let mut with_bad = valid;
            with_bad.push(f.clone());
            match w4a16_cases::load_files(&with_bad) {
                Ok(_) => Verdict::new(id, Check::Loader, Outcome::Fail)
                    .detail("a deliberately broken file was accepted"),
                Err(e) if e.file == *f && expected_key.as_deref() == Some(e.key.as_str()) => {
                    Verdict::new(id, Check::Loader, Outcome::Refused).detail(e.to_string())
                }
                Err(e) => Verdict::new(id, Check::Loader, Outcome::Fail).detail(format!(
                    "refused, but not naming {} and key {:?}: {e}",
                    f.display(),
                    expected_key
                )),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selected_path_suites_are_suites_of_the_case_folder() {
        let set = w4a16_cases::load_all(&w4a16_cases::locate(None).unwrap()).unwrap();
        for suite in SELECTED_PATH_SUITES {
            assert!(set.suite(suite).is_some(), "no suite {suite}");
            assert_eq!(mode_for_suite(suite), Mode::Selected);
        }
        assert_eq!(mode_for_suite("kernels"), Mode::Differential);
    }

    /// A run's files as `w4a16 run` writes them (reports and verdict snapshots), read back
    /// with the timings taken out: what must not depend on the number of devices.
    fn written(
        verdicts: &[Verdict],
        out: &RunOutput,
        workers: usize,
        reference: ReferenceChoice,
    ) -> BTreeMap<String, String> {
        use crate::runner::cli_run;
        use crate::runner::snapshot::{SnapshotFile, SnapshotMode};
        let dir = tempfile::tempdir().unwrap();
        let target = RunTarget::native(Target::Sm90);
        cli_run::write_reports(
            dir.path(),
            target,
            Some(reference),
            Some(w4a16_device::DeviceKind::Simulated),
            verdicts,
            crate::runner::report::Timing::of(1.0, workers, &out.times),
        )
        .unwrap();
        let snaps = dir.path().join("snapshots");
        let suites: std::collections::BTreeSet<&str> = verdicts
            .iter()
            .filter_map(|v| v.case_id.split('/').next())
            .collect();
        let files = suites.into_iter().map(|s| {
            SnapshotFile::new(s, "sm_90", None)
                .recorded_by(Some(w4a16_device::DeviceKind::Simulated))
        });
        cli_run::snapshots(&snaps, SnapshotMode::Update, files, verdicts).unwrap();
        let mut got = BTreeMap::new();
        for dir in [dir.path().to_path_buf(), snaps] {
            for e in std::fs::read_dir(&dir).unwrap() {
                let path = e.unwrap().path();
                if !path.is_file() {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                let text = match name.as_str() {
                    "report.json" => {
                        let mut j: serde_json::Value = serde_json::from_str(&text).unwrap();
                        let timing = j.as_object_mut().unwrap().remove("timing");
                        assert!(timing.is_some(), "a timed report has its timing");
                        serde_json::to_string_pretty(&j).unwrap()
                    }
                    // Its last line is the time split.
                    "summary.md" => text
                        .lines()
                        .filter(|l| !l.contains(" s wall on "))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    _ => text,
                };
                got.insert(name, text);
            }
        }
        got
    }

    #[test]
    fn verdicts_reports_and_snapshots_do_not_depend_on_the_number_of_devices() {
        let dir = w4a16_cases::locate(None).unwrap();
        let set = w4a16_cases::load_all(&dir).unwrap();
        // The three smallest layers of two suites (two snapshot files), at small batches:
        // the simulated device runs on this host's CPU.
        let mut cases: Vec<&Case> = Vec::new();
        for suite in ["smoke", "kernels"] {
            let of: Vec<&Case> = set
                .cases()
                .filter(|c| c.suite == suite && c.m <= 4 && c.moe.is_none())
                .collect();
            let mut layers = by_layer(of.iter().map(|c| c.layer_key()));
            layers.sort_by_key(|g| of[g[0]].shape.n * of[g[0]].shape.k);
            let keep: Vec<usize> = layers.into_iter().take(3).flatten().collect();
            cases.extend(keep.into_iter().map(|i| of[i]));
        }
        let layers = by_layer(cases.iter().map(|c| c.layer_key())).len();
        assert!(layers >= 4, "{} cases in {layers} layers", cases.len());
        // Either reference: the GPU one forms it on each case's own device.
        for reference in [ReferenceChoice::Cpu, ReferenceChoice::Gpu] {
            let mut opts = SessionOptions::new(dir.clone(), Target::Sm90);
            opts.reference = reference;
            let run = |n: usize| {
                let backends: Vec<(usize, Backend)> = w4a16_device::simulated::devices(n)
                    .into_iter()
                    .enumerate()
                    .map(|(o, d)| (o, Backend::Device(d)))
                    .collect();
                run_in_process_on(&set, &cases, &backends, &opts, &|_| {}).unwrap()
            };
            let one = run(1);
            assert_eq!(one.devices.keys().copied().collect::<Vec<_>>(), vec![0]);
            let files_one = written(&one.verdicts, &one, 1, reference);
            assert!(files_one.len() >= 5, "{:?}", files_one.keys());
            assert!(one.verdicts.len() > cases.len(), "every case has verdicts");
            for n in [2, 3] {
                let many = run(n);
                // Every device ran a share, and the shares add up.
                assert_eq!(many.devices.len(), n, "{:?}", many.devices);
                assert!(
                    many.devices.values().all(|t| t.cases > 0),
                    "{:?}",
                    many.devices
                );
                let per_device: usize = many.devices.values().map(|t| t.cases).sum();
                assert_eq!(per_device, one.times.cases);
                assert_eq!(many.times.cases, one.times.cases);
                assert_eq!(many.verdicts, one.verdicts, "on {n} devices, {reference}");
                let files = written(&many.verdicts, &many, n, reference);
                for (name, text) in &files_one {
                    assert_eq!(
                        files.get(name),
                        Some(text),
                        "{name} on {n} devices, {reference}"
                    );
                }
                assert_eq!(files.len(), files_one.len());
            }
        }
    }
}
