//! `w4a16 run` as a library call: the suites of a case folder on one target, the GPU cases in
//! fault-isolated workers (or in this process), the reports, the verdict snapshots and the
//! summary. The binary parses its arguments into [`RunOptions`] and maps the [`RunEnd`] to an
//! exit code; the orchestration lives here so it can be read and tested beside the runner.

use super::budget::RunBudget;
use super::execute::{ReferenceChoice, ReferenceError};
use super::gpus::{Gpus, GpusError};
use super::isolate::WorkerSpec;
use super::sanitize;
use super::session::{self, Backend, RunOutput, SessionOptions};
use super::shard::{self, ShardRecord, ShardSpec};
use super::snapshot::{self, LeftOut, SnapshotFile, SnapshotMode};
use super::verdict::SanitizerTool;
use super::{Summary, Verdict, global, isolate, report, verdict};
use crate::report::FileError;
use crate::require::Skip;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use w4a16_cases::{Case, CaseSet};
use w4a16_device::{Allocation, DeviceKind};
use w4a16_kernels::emulation::NotEmulable;
use w4a16_kernels::source::{self, KernelSources};
use w4a16_kernels::target::Vendor;
use w4a16_kernels::{RunTarget, Target, nvrtc};
use w4a16_select::config::KernelConfig;
use w4a16_select::reach::UnreachedRungs;

/// Everything `w4a16 run` was asked for, typed.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The case folder (already located: `--cases`, `W4A16_CASES` or the nearest `cases/`).
    pub cases_dir: PathBuf,
    /// Suites to run; empty runs all.
    pub suites: Vec<String>,
    /// Only case ids matching this glob.
    pub filter: Option<String>,
    /// `None` runs on the GPU found here.
    pub target: Option<RunTarget>,
    /// Worker processes in all, dealt round-robin over the devices of `gpus` (at least one
    /// per device).
    pub jobs: usize,
    /// The devices the GPU cases run on (`--gpus`); verdicts do not depend on it.
    pub gpus: Gpus,
    /// Where the JSON, JUnit XML and Markdown reports and failure artifacts go.
    pub report_dir: PathBuf,
    /// Record or compare the verdict snapshots; `None` leaves them alone.
    pub snapshot: Option<SnapshotMode>,
    /// The snapshot folder; `None` is `snapshots/` beside the case folder.
    pub snapshots: Option<PathBuf>,
    /// GPU cases in this process (no fault isolation).
    pub in_process: bool,
    /// Per-case watchdog of the isolated workers.
    pub case_timeout: Duration,
    /// Workers under compute-sanitizer with this tool (a loud skip where it cannot run).
    pub sanitize: Option<SanitizerTool>,
    pub sources: KernelSources,
    /// Stop at the first failing check.
    pub fail_fast: bool,
    pub config: KernelConfig,
    /// The executable whose `worker` subcommand serves isolated cases; `None` is this process's.
    pub worker_exe: Option<PathBuf>,
    /// `--reference`: `None` is `gpu` where a CUDA device is open, `cpu` otherwise.
    pub reference: Option<ReferenceChoice>,
    /// Run only this share of the chosen cases (`--shard I/N`, [`shard`]); its report records
    /// the share and its snapshot rows go beside the report for `w4a16 merge`.
    pub shard: Option<ShardSpec>,
}

/// How a run ended: its summary and the snapshots that differ (a difference fails the run).
#[derive(Clone, Debug)]
pub struct RunEnd {
    pub summary: Summary,
    pub differing_snapshots: Vec<String>,
}

impl RunEnd {
    /// Whether the run passed: no failing check and no differing snapshot.
    pub fn passed(&self) -> bool {
        self.summary.failures() == 0 && self.differing_snapshots.is_empty()
    }
}

/// Runs the suites as `w4a16 run` does, printing progress to stderr and the summary to stdout.
/// `Err` is a usage or setup error (an unknown suite, an unreadable case folder, a report that
/// cannot be written), said in one line.
pub fn run(opts: RunOptions) -> Result<RunEnd, RunError> {
    run_with(opts, &SystemDevices)
}

/// Where a run gets its devices: this build's backends ([`SystemDevices`]) or, in tests,
/// simulated ones. `--gpus` opens several by ordinal and asks how many a backend sees.
pub trait DeviceSource {
    /// Device `ordinal` for the asked target, as [`session::open_backend_at`] opens it.
    fn open(
        &self,
        target: Option<RunTarget>,
        ordinal: usize,
        sources: &KernelSources,
        allocation: Allocation,
    ) -> (RunTarget, Backend);
    /// How many devices `kind`'s runtime sees; `Err` where it has none to bind (the ISA
    /// emulator runs on the host's CPU).
    fn count(&self, kind: DeviceKind) -> Result<usize, Skip>;
}

/// The devices of this machine and build: [`session::open_backend_at`] and
/// [`w4a16_device::device_count`].
pub struct SystemDevices;

impl DeviceSource for SystemDevices {
    fn open(
        &self,
        target: Option<RunTarget>,
        ordinal: usize,
        sources: &KernelSources,
        allocation: Allocation,
    ) -> (RunTarget, Backend) {
        session::open_backend_at(target, ordinal, sources, allocation)
    }
    fn count(&self, kind: DeviceKind) -> Result<usize, Skip> {
        w4a16_device::device_count(kind)
    }
}

/// `count` simulated devices of one host (`None`: a backend with no GPUs to bind, as the ISA
/// emulator): the run arm's tests of `--gpus`, shards and the reference without a GPU.
#[cfg(test)]
pub(crate) struct SimulatedDevices {
    pub count: Option<usize>,
}

#[cfg(test)]
impl DeviceSource for SimulatedDevices {
    fn open(
        &self,
        target: Option<RunTarget>,
        ordinal: usize,
        _: &KernelSources,
        _: Allocation,
    ) -> (RunTarget, Backend) {
        let target = target.expect("the tests name the target");
        match self.count {
            Some(n) if ordinal >= n => (
                target,
                Backend::None(Skip {
                    requirement: crate::require::Requirement::Gpu,
                    reason: format!("no simulated device {ordinal} ({n} present)"),
                }),
            ),
            _ => (
                target,
                Backend::Device(w4a16_device::simulated::device_at(ordinal)),
            ),
        }
    }
    fn count(&self, kind: DeviceKind) -> Result<usize, Skip> {
        self.count.ok_or_else(|| Skip {
            requirement: crate::require::Requirement::Gpu,
            reason: format!("{} has no GPUs to bind", kind.name()),
        })
    }
}

/// As [`run`], on the devices `devices` gives (tests: simulated ones). The steps: the cases
/// chosen, the devices opened, the share and budget applied, the cases run, then the reports,
/// the snapshots and the summary.
pub fn run_with(opts: RunOptions, devices: &dyn DeviceSource) -> Result<RunEnd, RunError> {
    if let (Some(shard), Some(SnapshotMode::Update)) = (opts.shard, opts.snapshot) {
        return Err(RunError::ShardedUpdate { shard });
    }
    let set = w4a16_cases::load_all(&opts.cases_dir)?;
    check_suites(&set, &opts.suites)?;
    // No dead tile-table rung: every rung is chosen by the derived selection sweep.
    w4a16_select::reach::check_shipped()?;
    let chosen = choose(&set, &opts.suites, opts.filter.as_deref());
    let opened = devices.open(
        opts.target,
        opts.gpus.first(),
        &opts.sources,
        Allocation::Guarded,
    );
    let main_job::Chosen {
        target,
        backend,
        main_job_share,
    } = main_job::in_place_of_a_missing_gpu(&opts, opened, devices);
    // The other devices of `--gpus`, each checked to be the same target (a mixed host would
    // give verdicts that depend on the device a case was dealt to).
    let (ordinals, more_devices) =
        bind_devices(&opts.gpus, &backend, target, &opts.sources, devices)?;
    let opened = steps::Opened {
        target,
        backend,
        ordinals,
        more_devices,
        main_job_share,
    };
    let picked = steps::Picked::of(&set, chosen, &opened, opts.shard);
    let setup = steps::Setup::of(&opts, &opened, picked.chosen.len())?;
    let progress = steps::Progress::new(picked.chosen.len(), opts.fail_fast, &setup.session.stop);
    let started = Instant::now();
    let ran = steps::run_cases(&opts, &set, &picked, opened, &setup, &progress)?;
    progress.bar.finish_and_clear();
    let mut verdicts = ran.verdicts;
    require_gpu_checks(&mut verdicts);
    let ran = steps::Ran {
        verdicts,
        wall_s: started.elapsed().as_secs_f64(),
        ..ran
    };
    steps::finish(&opts, &picked, &setup, ran, progress.stop.is_stopped())
}

/// Why `w4a16 run` (or `merge`, or a report writer) could not run: a usage or setup error, said
/// in one line. A failing check is a verdict, never this.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(
        "--shard {shard} with --snapshot update: a shard holds only its share of each suite; record the snapshots from the merged shards (`w4a16 merge DIR… --snapshot update`)"
    )]
    ShardedUpdate { shard: ShardSpec },
    /// The rocm backend on the emulated HIP runtime (`hip-emu/`, docs/hip-emu.md) records no
    /// snapshot: its header would name a ROCm GPU, and a real runner's rows must stay its own.
    #[error(
        "--snapshot update on {device}: the rocm backend on an emulated HIP runtime records no snapshot (its header would name a ROCm GPU); record `@gfx` snapshots with the ISA emulator device or on a real AMD GPU"
    )]
    EmulatedRuntimeUpdate { device: String },
    #[error(transparent)]
    Cases(#[from] CasesError),
    #[error(transparent)]
    UnknownSuite(#[from] UnknownSuite),
    #[error(transparent)]
    DeadRungs(#[from] UnreachedRungs),
    #[error(transparent)]
    Gpus(#[from] GpusError),
    #[error(transparent)]
    BackendRequired(#[from] BackendRequired),
    #[error(
        "--sanitize runs the GPU cases in worker processes (under compute-sanitizer, or the ISA emulator's own); drop --in-process"
    )]
    SanitizeInProcess,
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    #[error(transparent)]
    NotEmulable(#[from] NotEmulable),
    #[error("the worker executable: {0}")]
    WorkerExe(std::io::Error),
    #[error("the workers: {0}")]
    Workers(std::io::Error),
    #[error(transparent)]
    Session(#[from] session::SessionError),
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Snapshot(#[from] snapshot::SnapshotError),
    #[error(transparent)]
    Merge(#[from] shard::MergeError),
}

impl From<w4a16_cases::CaseFileError> for RunError {
    fn from(e: w4a16_cases::CaseFileError) -> Self {
        RunError::Cases(CasesError::Load(e))
    }
}

/// No case folder, or one whose files do not load.
#[derive(Debug, thiserror::Error)]
pub enum CasesError {
    #[error(transparent)]
    Locate(#[from] w4a16_cases::LocateError),
    #[error(transparent)]
    Load(#[from] w4a16_cases::CaseFileError),
}

/// `--suite` named a suite the case folder does not have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("--suite: no suite {suite:?}; suites are {}", known.join(", "))]
pub struct UnknownSuite {
    pub suite: String,
    pub known: Vec<String>,
}

/// `W4A16_REQUIRE` names a backend this run does not have (worded by `backend_skip_failure`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{why}")]
pub struct BackendRequired {
    pub why: String,
}

/// A device of `--gpus` beyond the first, with its ordinal.
type OpenDevice = (usize, Backend);

/// The ordinals `gpus` binds workers to on the backend that `first` is, and the devices after
/// the first, opened and checked to be `target` too. No `--gpus` binds nothing (the workers
/// open their default device, as before `--gpus`). A backend without GPUs to bind (no device
/// opened, the ISA emulator): `all` is ignored with a loud line, a list of ordinals refused.
fn bind_devices(
    gpus: &Gpus,
    first: &Backend,
    target: RunTarget,
    sources: &KernelSources,
    devices: &dyn DeviceSource,
) -> Result<(Vec<usize>, Vec<OpenDevice>), GpusError> {
    let value = gpus.to_string();
    let nothing_to_bind = |why: String| match gpus {
        Gpus::List(_) => Err(GpusError::NothingToBind {
            value: value.clone(),
            why,
        }),
        Gpus::All | Gpus::First => {
            eprintln!("w4a16: --gpus {gpus} ignored: {why}");
            Ok((Vec::new(), Vec::new()))
        }
    };
    let d = match (first, gpus) {
        (_, Gpus::First) => return Ok((Vec::new(), Vec::new())),
        (Backend::Device(d), _) => d,
        // Devices asked for by number must be there.
        (Backend::None(skip), Gpus::List(_)) => {
            return Err(GpusError::DoesNotOpen {
                value,
                ordinal: gpus.first(),
                reason: skip.reason.clone(),
            });
        }
        (Backend::None(skip), Gpus::All) => {
            return nothing_to_bind(format!("no device opened ({})", skip.reason));
        }
    };
    let kind = d.kind();
    let ordinals = match devices.count(kind) {
        Ok(count) => gpus.resolve(kind.name(), count)?,
        Err(skip) => {
            return nothing_to_bind(format!("{target} runs on {} ({})", d.name(), skip.reason));
        }
    };
    let mut more = Vec::new();
    for &o in &ordinals[1..] {
        match devices.open(Some(target), o, sources, Allocation::Guarded) {
            (_, Backend::Device(other)) if other.kind() == kind => {
                more.push((o, Backend::Device(other)))
            }
            (_, Backend::Device(other)) => {
                return Err(GpusError::Differs {
                    value,
                    ordinal: o,
                    target: target.name(),
                    first: d.name(),
                    reason: format!("it opens as {}", other.name()),
                });
            }
            (_, Backend::None(skip)) => {
                return Err(GpusError::Differs {
                    value,
                    ordinal: o,
                    target: target.name(),
                    first: d.name(),
                    reason: skip.reason,
                });
            }
        }
    }
    Ok((ordinals, more))
}

fn join(ordinals: &[usize]) -> String {
    let items: Vec<String> = ordinals.iter().map(usize::to_string).collect();
    items.join(",")
}

/// The case folder (`--cases`, `W4A16_CASES` or the nearest `cases/`) and everything in it.
pub fn load_with_dir(explicit: Option<PathBuf>) -> Result<(PathBuf, CaseSet), CasesError> {
    let dir = w4a16_cases::locate(explicit)?;
    let set = w4a16_cases::load_all(&dir)?;
    Ok((dir, set))
}

/// `W4A16_REQUIRE` over a run's verdicts: a skip of a check whose requirement it names fails
/// the run, counted as such in the summary, the reports and the exit code; said once, loudly.
pub fn require_gpu_checks(verdicts: &mut [Verdict]) {
    let value = std::env::var("W4A16_REQUIRE").ok();
    let required = crate::require::required_from(value.as_deref());
    let turned = verdict::apply_required(verdicts, &required);
    if turned > 0 {
        eprintln!(
            "w4a16: W4A16_REQUIRE={} turns {turned} skipped checks into failures",
            value.unwrap_or_default()
        );
    }
}

/// `W4A16_REQUIRE=cuda|rocm` demands that backend: a run on any other device (or none) fails
/// before its first case, worded by the tests' per-vendor rule (`backend_skip_failure`).
pub fn require_backend(
    required: &[crate::require::Requirement],
    opened: Option<DeviceKind>,
    no_gpu: Option<&Skip>,
) -> Result<(), BackendRequired> {
    use crate::require::Requirement;
    for (kind, demand) in [
        (DeviceKind::Cuda, Requirement::Cuda),
        (DeviceKind::Rocm, Requirement::Rocm),
    ] {
        if !required.contains(&demand) || opened == Some(kind) {
            continue;
        }
        let skip = match (no_gpu, opened) {
            (Some(skip), _) => skip.clone(),
            (None, opened) => Skip {
                requirement: Requirement::Gpu,
                reason: format!(
                    "this run's device is {}",
                    opened.map_or("none", DeviceKind::name)
                ),
            },
        };
        let gpu_opened = matches!(opened, Some(DeviceKind::Cuda | DeviceKind::Rocm));
        if let Some(why) =
            crate::require::backend_skip_failure(required, demand, &skip, || gpu_opened)
        {
            return Err(BackendRequired { why });
        }
    }
    Ok(())
}

/// The cases of `suites` whose ids match `filter`; no suites: every suite but those run only
/// on request (`on_request` in `[suite]`).
pub fn choose<'s>(set: &'s CaseSet, suites: &[String], filter: Option<&str>) -> Vec<&'s Case> {
    let on_request = |suite: &str| set.suite(suite).is_some_and(|s| s.on_request);
    set.cases()
        .filter(|c| match suites {
            [] => !on_request(&c.suite),
            named => named.contains(&c.suite),
        })
        .filter(|c| filter.is_none_or(|f| w4a16_cases::glob::glob_match(f, &c.id)))
        .collect()
}

/// `--suite`: every name a suite of `set`, or an error listing the suites there are.
pub fn check_suites(set: &CaseSet, suites: &[String]) -> Result<(), UnknownSuite> {
    match suites.iter().find(|s| set.suite(s).is_none()) {
        Some(s) => Err(UnknownSuite {
            suite: s.clone(),
            known: set.suite_names().into_iter().map(String::from).collect(),
        }),
        None => Ok(()),
    }
}

/// report.json, junit.xml and summary.md (with where the time went) in `dir`.
pub fn write_reports(
    dir: &Path,
    target: RunTarget,
    reference: Option<ReferenceChoice>,
    device: Option<DeviceKind>,
    verdicts: &[Verdict],
    timing: report::Timing<'_>,
) -> Result<(), FileError> {
    write_reports_of(dir, target, reference, device, verdicts, timing, None)
}

/// As [`write_reports`], for one shard of a run when `shard` is given (report.json records it).
pub fn write_reports_of(
    dir: &Path,
    target: RunTarget,
    reference: Option<ReferenceChoice>,
    device: Option<DeviceKind>,
    verdicts: &[Verdict],
    timing: report::Timing<'_>,
    shard: Option<&ShardRecord>,
) -> Result<(), FileError> {
    report::RunReport {
        target,
        reference,
        device,
        verdicts,
        timing,
        shard,
    }
    .write(dir)
    .map(drop)
}

/// Compares (or records) one verdict snapshot per file key, each holding the verdicts of its
/// suite, and prints each outcome with its compact diff. Returns the names of the snapshots
/// that differ under `check` (the run fails on them); `update` has recorded them.
pub fn snapshots(
    dir: &Path,
    mode: SnapshotMode,
    files: impl IntoIterator<Item = SnapshotFile>,
    verdicts: &[Verdict],
) -> Result<Vec<String>, snapshot::SnapshotError> {
    let mut files: Vec<SnapshotFile> = files.into_iter().collect();
    files.sort_by(|a, b| a.suite.cmp(&b.suite));
    files.dedup();
    let mut differing = Vec::new();
    for file in files {
        let prefix = format!("{}/", file.suite);
        let rows: Vec<Verdict> = verdicts
            .iter()
            .filter(|v| v.case_id.starts_with(&prefix))
            .cloned()
            .collect();
        let report = snapshot::compare_and_write(dir, file, &rows, mode)?;
        if report.differs() {
            print!("{report}");
            if mode == SnapshotMode::Check {
                differing.push(report.file.name());
            }
        }
    }
    Ok(differing)
}

mod main_job;
mod steps;

#[cfg(test)]
mod choose_tests {
    use super::*;

    /// A run of every suite leaves out the suites run on request; naming one runs it.
    #[test]
    fn suites_on_request_run_only_when_named() {
        let set = w4a16_cases::load_all(&w4a16_cases::locate(None).unwrap()).unwrap();
        let every = choose(&set, &[], None);
        assert!(every.iter().all(|c| c.suite != "other-shapes"));
        let on_request = set.suite("other-shapes").unwrap().cases.len();
        assert_eq!(every.len(), set.total_cases() - on_request);
        let named = choose(&set, &["other-shapes".to_string()], None);
        assert_eq!(named.len(), on_request);
    }
}

#[cfg(test)]
mod require_backend_tests {
    use super::*;
    use crate::require::Requirement;

    /// Naming a backend demands it; a run on another device, or on none, is refused naming
    /// what it ran on; `gpu` alone does not name a backend.
    #[test]
    fn a_named_backend_is_demanded_and_a_run_elsewhere_refused_naming_it() {
        let cuda = [Requirement::Cuda];
        assert_eq!(require_backend(&cuda, Some(DeviceKind::Cuda), None), Ok(()));
        let e = require_backend(&cuda, Some(DeviceKind::Emulator), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("W4A16_REQUIRE=cuda") && e.contains("ISA emulator"),
            "{e}"
        );
        let none = Skip {
            requirement: Requirement::Gpu,
            reason: "no GPU backend available".into(),
        };
        let e = require_backend(&[Requirement::Rocm], None, Some(&none))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("W4A16_REQUIRE=rocm") && e.contains("no GPU backend"),
            "{e}"
        );
        assert_eq!(
            require_backend(&[Requirement::Gpu], Some(DeviceKind::Emulator), None),
            Ok(())
        );
        let both = [Requirement::Cuda, Requirement::Rocm];
        let e = require_backend(&both, None, Some(&none))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cuda"), "{e}");
    }
}
