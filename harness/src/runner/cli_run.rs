//! `w4a16 run` as a library call: the suites of a case folder on one target, the GPU cases in
//! fault-isolated workers (or in this process), the reports, the verdict snapshots and the
//! summary. The binary parses its arguments into [`RunOptions`] and maps the [`RunEnd`] to an
//! exit code; the orchestration lives here so it can be read and tested beside the runner.

use super::budget::RunBudget;
use super::execute::ReferenceChoice;
use super::gpus::{Gpus, GpusError};
use super::sanitize;
use super::session::{self, Backend, SessionOptions};
use super::shard::{self, ShardRecord, ShardSpec};
use super::snapshot::{self, LeftOut, SnapshotFile, SnapshotMode};
use super::verdict::SanitizerTool;
use super::{PhaseTimes, Summary, Verdict, global, isolate, report, verdict};
use crate::require::Skip;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use w4a16_cases::{Case, CaseSet};
use w4a16_device::{Allocation, DeviceKind};
use w4a16_kernels::source::{self, KernelSources};
use w4a16_kernels::target::Vendor;
use w4a16_kernels::{RunTarget, Target, nvrtc};
use w4a16_select::config::KernelConfig;

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
pub fn run(opts: RunOptions) -> Result<RunEnd, String> {
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

/// As [`run`], on the devices `devices` gives (tests: simulated ones).
pub fn run_with(opts: RunOptions, devices: &dyn DeviceSource) -> Result<RunEnd, String> {
    let RunOptions {
        cases_dir: dir,
        suites,
        filter,
        target,
        jobs,
        gpus,
        report_dir,
        snapshot: snap,
        snapshots: snapshot_dir,
        in_process,
        case_timeout,
        sanitize: sanitize_tool,
        sources,
        fail_fast,
        config,
        worker_exe,
        reference: requested_reference,
        shard,
    } = opts;
    if let (Some(s), Some(SnapshotMode::Update)) = (shard, snap) {
        return Err(format!(
            "--shard {s} with --snapshot update: a shard holds only its share of each suite; record the snapshots from the merged shards (`w4a16 merge DIR… --snapshot update`)"
        ));
    }
    let set = w4a16_cases::load_all(&dir).map_err(|e| e.to_string())?;
    check_suites(&set, &suites)?;
    // No dead tile-table rung: every rung is chosen by the derived selection sweep.
    w4a16_select::reach::check_shipped().map_err(|e| e.to_string())?;
    let snapshot_dir = snapshot::snapshot_dir(snapshot_dir.as_deref(), &dir);
    let chosen = choose(&set, &suites, filter.as_deref());
    let (target, backend) = devices.open(target, gpus.first(), &sources, Allocation::Guarded);
    // The other devices of `--gpus`, each checked to be the same target (a mixed host would
    // give verdicts that depend on the device a case was dealt to).
    let (ordinals, mut more_devices) =
        bind_devices(&gpus, &backend, target, &sources, devices).map_err(|e| e.to_string())?;
    let device_kind = backend.device_kind();
    let budget = RunBudget::of(target, device_kind, &set);
    let (chosen, over_budget): (Vec<&Case>, Vec<&Case>) =
        chosen.into_iter().partition(|c| budget.admits(c));
    let left_out: std::collections::BTreeMap<String, LeftOut> = set
        .suite_names()
        .into_iter()
        .filter_map(|s| {
            let left = LeftOut::of(budget.of_suite(s), s, over_budget.iter().copied())?;
            Some((s.to_string(), left))
        })
        .collect();
    let budget_note = (!left_out.is_empty()).then(|| {
        let per_suite: Vec<String> = left_out
            .iter()
            .map(|(s, l)| format!("{s}: {} cases above {}", l.cases.len(), l.by.budget()))
            .collect();
        format!(
            "not run on {target} (its GPU runs them): {}; e.g. {}",
            per_suite.join("; "),
            over_budget[0].id
        )
    });
    if let Some(note) = &budget_note {
        eprintln!("w4a16: {note}");
    }
    // The snapshot files and the selection are the unsharded run's, whichever share runs here.
    let all_suites: Vec<String> = chosen.iter().map(|c| c.suite.clone()).collect();
    let selection = shard::selection_digest(chosen.iter().map(|c| c.id.as_str()));
    let selected = chosen.len();
    let mut positions = std::collections::BTreeMap::new();
    let chosen: Vec<&Case> = match shard {
        None => chosen,
        Some(s) => {
            let mine = s.take(&chosen);
            positions = mine.iter().map(|(p, c)| (c.id.clone(), *p)).collect();
            eprintln!(
                "w4a16: shard {s}: {} of the {selected} cases, whole layers",
                mine.len()
            );
            mine.into_iter().map(|(_, c)| c).collect()
        }
    };
    let no_gpu = match &backend {
        Backend::None(skip) => Some(skip.clone()),
        Backend::Device(_) => None,
    };
    let required = crate::require::required_from(std::env::var("W4A16_REQUIRE").ok().as_deref());
    require_backend(&required, device_kind, no_gpu.as_ref())?;
    // Sanitizer mode: workers under compute-sanitizer on a CUDA device, else a loud skip.
    let sanitizer = sanitize_tool.map(|tool| {
        let device = match &backend {
            Backend::Device(d) => Ok(d.kind()),
            Backend::None(skip) => Err(skip),
        };
        sanitize::availability(tool, device, target, sanitize::locate)
    });
    if let (Some(Ok(_)), true) = (&sanitizer, in_process) {
        return Err("--sanitize runs the GPU cases in worker processes under compute-sanitizer; drop --in-process".into());
    }
    match &sanitizer {
        Some(Ok(s)) => eprintln!(
            "w4a16: compute-sanitizer {} ({}) watches the workers; allocations are exact-size",
            s.tool,
            s.executable.display()
        ),
        Some(Err(skip)) => eprintln!("w4a16: SANITIZER SKIPPED: {}", skip.reason),
        None => {}
    }
    if sources != KernelSources::Embedded {
        eprintln!("w4a16: {sources}");
    }
    let isolated = matches!(backend, Backend::Device(_)) && !in_process;
    // `--jobs` counts workers in all; every listed device gets at least one.
    let jobs = if isolated && jobs < ordinals.len() {
        eprintln!(
            "w4a16: --jobs {jobs} is fewer than the {} devices of --gpus {gpus}: running {} workers, one per device",
            ordinals.len(),
            ordinals.len()
        );
        ordinals.len()
    } else {
        jobs
    };
    match &backend {
        Backend::Device(d) if ordinals.len() > 1 => eprintln!(
            "w4a16: {} cases on {} devices (--gpus {gpus}: {}; {target}; the first is {}), {}",
            chosen.len(),
            ordinals.len(),
            join(&ordinals),
            d.name(),
            if isolated {
                format!("{jobs} workers")
            } else {
                "a thread per device, in this process".to_string()
            }
        ),
        Backend::Device(d) => eprintln!(
            "w4a16: {} cases on {} ({target}), {jobs} workers",
            chosen.len(),
            d.name()
        ),
        Backend::None(skip) => eprintln!(
            "w4a16: {} cases, CPU-side checks for {target}; GPU checks skip: {}",
            chosen.len(),
            skip.reason
        ),
    }
    let reference = ReferenceChoice::resolve(
        requested_reference,
        match &backend {
            Backend::Device(d) => Some(d.as_ref()),
            Backend::None(_) => None,
        },
    )?;
    eprintln!("w4a16: reference: {reference}");
    let mut session_opts = SessionOptions::new(dir.clone(), target);
    session_opts.config = config;
    session_opts.reference = reference;
    session_opts.artifacts = Some(report_dir.join("artifacts"));
    let stop = session_opts.stop.clone();
    let bar = indicatif::ProgressBar::new(chosen.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} cases, ETA {eta} {msg}",
        )
        .expect("template")
        .progress_chars("=> "),
    );
    let failures = Mutex::new(0usize);
    let seen = Mutex::new(std::collections::BTreeSet::new());
    let on_verdict = |v: &Verdict| {
        if seen.lock().expect("lock").insert(v.case_id.clone()) {
            bar.inc(1);
        }
        if v.outcome.is_failure() {
            if fail_fast {
                stop.stop();
            }
            let mut f = failures.lock().expect("lock");
            *f += 1;
            bar.set_message(format!("{} failing", *f));
            bar.println(format!(
                "{} {} [{}]: {}",
                v.outcome, v.case_id, v.check, v.detail
            ));
        }
    };
    let started = Instant::now();
    // Case-independent checks: once per run, so in shard 1 only of a sharded one.
    let mut verdicts = Vec::new();
    if shard.is_none_or(|s| s.runs_global_checks()) {
        verdicts.extend(global::dequant_trick_checks());
        verdicts.extend(session::invalid_case_file_checks(&dir));
    }
    let global_checks = verdicts.len();
    let workers = if isolated {
        jobs
    } else if ordinals.len() > 1 {
        ordinals.len()
    } else {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    };
    let out = if isolated {
        drop(backend);
        more_devices.clear();
        // One compile of the kernel set here fills the PTX cache for every worker.
        if target.executing_vendor() == Vendor::Nvidia {
            let extra = target.nvrtc_options().map_err(|e| e.to_string())?;
            nvrtc::compile_all(&sources, &source::WITH_SOURCE, Target::Sm90.name(), &extra);
        }
        let exe = match worker_exe {
            Some(exe) => exe,
            None => std::env::current_exe().map_err(|e| e.to_string())?,
        };
        let mut args = vec![
            "--cases".into(),
            dir.display().to_string(),
            "worker".into(),
            "--target".into(),
            target.name(),
        ];
        if let Some(d) = sources.as_dir_arg() {
            args.extend(["--kernel-sources".into(), d.display().to_string()]);
        }
        args.extend([
            "--kernel-config-json".into(),
            config.to_string(),
            "--artifacts".into(),
            report_dir.join("artifacts").display().to_string(),
            "--reference".into(),
            reference.name().into(),
        ]);
        let watched = match &sanitizer {
            Some(Ok(s)) => {
                args.push("--exact-allocations".into());
                Some((s, target))
            }
            _ => None,
        };
        let ids: Vec<String> = chosen.iter().map(|c| c.id.clone()).collect();
        let cost = |id: &str| {
            set.case(id)
                .map_or(1.0, |c| session::case_cost(c, reference))
        };
        let worker = isolate::WorkerCommand {
            exe: &exe,
            args: &args,
            sanitizer: watched,
        };
        session::run_worker_jobs_on(
            &worker,
            &ids,
            cost,
            jobs,
            &ordinals,
            case_timeout,
            &stop,
            &on_verdict,
        )
        .map_err(|e| e.to_string())?
    } else if let (Backend::Device(_), [first, _, ..]) = (&backend, ordinals.as_slice()) {
        let mut backends = vec![(*first, backend)];
        backends.append(&mut more_devices);
        session::run_in_process_on(&set, &chosen, &backends, &session_opts, &on_verdict)?
    } else {
        session::run_in_process(&set, &chosen, &backend, &session_opts, &on_verdict)?
    };
    let case_checks = out.verdicts.len();
    verdicts.extend(out.verdicts);
    if let (Some(Err(skip)), Some(tool)) = (&sanitizer, sanitize_tool) {
        let ids = chosen.iter().map(|c| c.id.as_str());
        let skipped = sanitize::skip_verdicts(ids, tool, skip);
        skipped.iter().for_each(&on_verdict);
        verdicts.extend(skipped);
    }
    bar.finish_and_clear();
    require_gpu_checks(&mut verdicts);
    let wall_s = started.elapsed().as_secs_f64();
    let snapshot_files: Vec<SnapshotFile> = match (&no_gpu, snap) {
        (None, Some(_)) => {
            let mut suites = all_suites.clone();
            suites.sort();
            suites.dedup();
            let file = |s: &String| {
                SnapshotFile::new(s, &target.name(), sanitize_tool)
                    .recorded_by(device_kind)
                    .left_out(left_out.get(s).cloned())
            };
            suites.iter().map(file).collect()
        }
        _ => Vec::new(),
    };
    let record = shard.map(|s| ShardRecord {
        index: s.index,
        count: s.count,
        suites: suites.clone(),
        filter: filter.clone(),
        commit: shard::commit_of(&dir),
        artifacts: report_dir.join("artifacts").display().to_string(),
        selection: selection.clone(),
        selected,
        positions: std::mem::take(&mut positions),
        sections: shard::Sections {
            global: global_checks,
            cases: case_checks,
            sanitizer_skips: verdicts.len() - global_checks - case_checks,
        },
        snapshots: snapshot_files.iter().map(SnapshotFile::file_name).collect(),
        left_out: left_out.clone(),
    });
    write_reports_of(
        &report_dir,
        target,
        Some(reference),
        device_kind,
        &verdicts,
        (wall_s, workers, &out.times),
        record.as_ref(),
    )?;
    let differing = match (&no_gpu, snap) {
        (_, None) => Vec::new(),
        // Verdict snapshots record GPU runs; CPU-side rows and skips would only differ.
        (Some(skip), Some(mode)) => {
            eprintln!(
                "w4a16: SNAPSHOTS NOT {}: no GPU for {target} here ({})",
                match mode {
                    SnapshotMode::Update => "RECORDED",
                    SnapshotMode::Check => "COMPARED",
                },
                skip.reason
            );
            Vec::new()
        }
        (None, Some(mode)) => match &record {
            None => snapshots(&snapshot_dir, mode, snapshot_files, &verdicts)?,
            Some(record) => {
                shard::write_snapshot_parts(&report_dir, &snapshot_files, &verdicts)?;
                let mine = record.positions.keys().map(String::as_str).collect();
                let mut differing = Vec::new();
                for file in &snapshot_files {
                    if let Some(diff) = shard::compare_part(&snapshot_dir, file, &verdicts, &mine)?
                    {
                        println!(
                            "snapshot {} (this shard's cases): {}\n{diff}",
                            file.name(),
                            diff.counts()
                        );
                        if mode == SnapshotMode::Check {
                            differing.push(file.name());
                        }
                    }
                }
                differing
            }
        },
    };
    let summary = Summary::of(&verdicts);
    print!("{summary}");
    if let Some(note) = &budget_note {
        println!("{note}");
    }
    if !differing.is_empty() {
        println!(
            "SNAPSHOTS DIFFER on {target}: {} (review the .snap.new files with `cargo insta review`, or record with --snapshot update)",
            differing.join(", ")
        );
    }
    if stop.is_stopped() {
        let ran: std::collections::BTreeSet<&str> =
            verdicts.iter().map(|v| v.case_id.as_str()).collect();
        let ran = chosen
            .iter()
            .filter(|c| ran.contains(c.id.as_str()))
            .count();
        println!(
            "stopped at the first failure (--fail-fast): {ran} of {} cases ran",
            chosen.len()
        );
    }
    println!("wall time {wall_s:.1} s with {workers} workers");
    print!("{}", out.times);
    if out.devices.len() > 1 {
        for (ordinal, t) in &out.devices {
            println!(
                "  device {ordinal}: {} cases, device {:.1} s, CPU side {:.1} s",
                t.cases,
                t.device_s,
                t.cpu_side_s()
            );
        }
    }
    println!(
        "reports: {}/{{report.json,junit.xml,summary.md}}",
        report_dir.display()
    );
    Ok(RunEnd {
        summary,
        differing_snapshots: differing,
    })
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
pub fn load_with_dir(explicit: Option<PathBuf>) -> Result<(PathBuf, CaseSet), String> {
    let dir = w4a16_cases::locate(explicit).map_err(|e| e.to_string())?;
    let set = w4a16_cases::load_all(&dir).map_err(|e| e.to_string())?;
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
) -> Result<(), String> {
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
            return Err(why);
        }
    }
    Ok(())
}

/// The cases of `suites` (all when empty) whose ids match `filter`.
pub fn choose<'s>(set: &'s CaseSet, suites: &[String], filter: Option<&str>) -> Vec<&'s Case> {
    set.cases()
        .filter(|c| suites.is_empty() || suites.contains(&c.suite))
        .filter(|c| filter.is_none_or(|f| w4a16_cases::glob::glob_match(f, &c.id)))
        .collect()
}

/// `--suite`: every name a suite of `set`, or an error listing the suites there are.
pub fn check_suites(set: &CaseSet, suites: &[String]) -> Result<(), String> {
    match suites.iter().find(|s| set.suite(s).is_none()) {
        Some(s) => Err(format!(
            "--suite: no suite {s:?}; suites are {}",
            set.suite_names().join(", ")
        )),
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
    timing: (f64, usize, &PhaseTimes),
) -> Result<(), String> {
    write_reports_of(dir, target, reference, device, verdicts, timing, None)
}

/// As [`write_reports`], for one shard of a run when `shard` is given (report.json records it).
pub fn write_reports_of(
    dir: &Path,
    target: RunTarget,
    reference: Option<ReferenceChoice>,
    device: Option<DeviceKind>,
    verdicts: &[Verdict],
    timing: (f64, usize, &PhaseTimes),
    shard: Option<&ShardRecord>,
) -> Result<(), String> {
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
    .map_err(|e| e.to_string())
}

/// Compares (or records) one verdict snapshot per file key, each holding the verdicts of its
/// suite, and prints each outcome with its compact diff. Returns the names of the snapshots
/// that differ under `check` (the run fails on them); `update` has recorded them.
pub fn snapshots(
    dir: &Path,
    mode: SnapshotMode,
    files: impl IntoIterator<Item = SnapshotFile>,
    verdicts: &[Verdict],
) -> Result<Vec<String>, String> {
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
        let report =
            snapshot::compare_and_write(dir, file, &rows, mode).map_err(|e| e.to_string())?;
        if report.differs() {
            print!("{report}");
            if mode == SnapshotMode::Check {
                differing.push(report.file.name());
            }
        }
    }
    Ok(differing)
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
        let e = require_backend(&cuda, Some(DeviceKind::Emulator), None).unwrap_err();
        assert!(
            e.contains("W4A16_REQUIRE=cuda") && e.contains("ISA emulator"),
            "{e}"
        );
        let none = Skip {
            requirement: Requirement::Gpu,
            reason: "no GPU backend available".into(),
        };
        let e = require_backend(&[Requirement::Rocm], None, Some(&none)).unwrap_err();
        assert!(
            e.contains("W4A16_REQUIRE=rocm") && e.contains("no GPU backend"),
            "{e}"
        );
        assert_eq!(
            require_backend(&[Requirement::Gpu], Some(DeviceKind::Emulator), None),
            Ok(())
        );
        let both = [Requirement::Cuda, Requirement::Rocm];
        let e = require_backend(&both, None, Some(&none)).unwrap_err();
        assert!(e.contains("cuda"), "{e}");
    }
}
