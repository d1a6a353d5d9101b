//! The steps of [`super::run_with`], in the order they run: the devices opened, the cases
//! picked (budget and share), the setup (sanitizer, workers, reference), the cases run, then
//! the reports, the snapshots and the summary.

use super::*;
use crate::require::Requirement;
use crate::runner::budget::Interpreter;
use crate::runner::cost;

/// The devices a run opened: the first (or why there is none), the ordinals its workers are
/// bound to, and the other devices of `--gpus`.
pub(super) struct Opened {
    pub(super) target: RunTarget,
    pub(super) backend: Backend,
    pub(super) ordinals: Vec<usize>,
    pub(super) more_devices: Vec<OpenDevice>,
    /// The ISA emulator in place of a missing GPU: the main job's share of the suites.
    pub(super) main_job_share: bool,
}

impl Opened {
    pub(super) fn no_gpu(&self) -> Option<Skip> {
        match &self.backend {
            Backend::None(skip) => Some(skip.clone()),
            Backend::Device(_) => None,
        }
    }
}

/// The cases this job runs, and what the unsharded run's reports need of the whole selection.
pub(super) struct Picked<'s> {
    /// This job's cases (its share under `--shard`), within the device's budget.
    pub(super) chosen: Vec<&'s Case>,
    /// The suites of every chosen case (the snapshot files), whichever share runs here.
    pub(super) all_suites: Vec<String>,
    /// Per suite, the cases above the device's budget.
    pub(super) left_out: BTreeMap<String, LeftOut>,
    /// The main job's cases outside its share on the ISA emulator: their CPU-side checks run,
    /// their GPU checks skip with the reason (they are not left out of the run).
    pub(super) cpu_only: Vec<&'s Case>,
    /// What the budget left out, said once.
    pub(super) budget_note: Option<String>,
    /// [`shard::selection_digest`] and size of the whole selection; the share's positions.
    pub(super) selection: String,
    pub(super) selected: usize,
    pub(super) positions: BTreeMap<String, usize>,
}

impl<'s> Picked<'s> {
    pub(super) fn of(
        set: &'s CaseSet,
        chosen: Vec<&'s Case>,
        opened: &Opened,
        shard: Option<ShardSpec>,
    ) -> Self {
        let target = opened.target;
        let budget = RunBudget::of(target, opened.backend.device_kind(), set);
        let budget = if opened.main_job_share {
            budget.main_job_share()
        } else {
            budget
        };
        let (chosen, over_budget): (Vec<&Case>, Vec<&Case>) =
            chosen.into_iter().partition(|c| budget.admits(c));
        if opened.main_job_share {
            return Self::main_job_share(chosen, over_budget, shard);
        }
        let left_out: BTreeMap<String, LeftOut> = set
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
        let mut positions = BTreeMap::new();
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
        Picked {
            chosen,
            all_suites,
            left_out,
            cpu_only: Vec::new(),
            budget_note,
            selection,
            selected,
            positions,
        }
    }

    /// The main job on the ISA emulator: `on_emulator` run there, `cpu_only` (outside the
    /// share) run their CPU-side checks. Nothing is left out, so no snapshot is involved (the
    /// share applies only where no `--snapshot` is asked for).
    fn main_job_share(
        on_emulator: Vec<&'s Case>,
        cpu_only: Vec<&'s Case>,
        shard: Option<ShardSpec>,
    ) -> Self {
        let budget_note = (!cpu_only.is_empty()).then(|| {
            format!(
                "{} cases run on the ISA emulator, {}; the other {} cases run their CPU-side checks and skip their GPU checks",
                on_emulator.len(),
                Interpreter::IsaEmulatorMainJob.budget(),
                cpu_only.len()
            )
        });
        if let Some(note) = &budget_note {
            eprintln!("w4a16: {note}");
        }
        let all: Vec<&Case> = on_emulator.iter().chain(&cpu_only).copied().collect();
        let all_suites = all.iter().map(|c| c.suite.clone()).collect();
        let selection = shard::selection_digest(all.iter().map(|c| c.id.as_str()));
        let mut positions = BTreeMap::new();
        let (chosen, cpu_only) = match shard {
            None => (on_emulator, cpu_only),
            Some(s) => {
                let mine = s.take(&all);
                positions = mine.iter().map(|(p, c)| (c.id.clone(), *p)).collect();
                let on: BTreeSet<&str> = on_emulator.iter().map(|c| c.id.as_str()).collect();
                mine.into_iter()
                    .map(|(_, c)| c)
                    .partition(|c| on.contains(c.id.as_str()))
            }
        };
        Picked {
            chosen,
            all_suites,
            left_out: BTreeMap::new(),
            cpu_only,
            budget_note,
            selection,
            selected: all.len(),
            positions,
        }
    }
}

/// How the cases run: the sanitizer (or why it cannot watch), in workers or in this process,
/// how many workers, and the session's options (the resolved reference among them).
pub(super) struct Setup {
    pub(super) target: RunTarget,
    pub(super) device_kind: Option<DeviceKind>,
    pub(super) no_gpu: Option<Skip>,
    pub(super) sanitizer: Option<Result<sanitize::Sanitizer, Skip>>,
    pub(super) isolated: bool,
    pub(super) jobs: usize,
    pub(super) workers: usize,
    pub(super) session: SessionOptions,
}

impl Setup {
    pub(super) fn of(opts: &RunOptions, opened: &Opened, cases: usize) -> Result<Setup, RunError> {
        let Opened {
            target,
            backend,
            ordinals,
            ..
        } = opened;
        let target = *target;
        let required =
            crate::require::required_from(std::env::var("W4A16_REQUIRE").ok().as_deref());
        require_backend(&required, backend.device_kind(), opened.no_gpu().as_ref())?;
        if let (Backend::Device(d), Some(SnapshotMode::Update)) = (backend, opts.snapshot) {
            let device = d.name();
            if device.contains("on an emulated HIP runtime") {
                return Err(RunError::EmulatedRuntimeUpdate { device });
            }
        }
        // Sanitizer mode: workers under compute-sanitizer on a CUDA device, else a loud skip.
        let sanitizer = opts.sanitize.map(|tool| {
            let device = match backend {
                Backend::Device(d) => Ok(d.kind()),
                Backend::None(skip) => Err(skip),
            };
            sanitize::availability(tool, device, target, sanitize::locate)
        });
        if let (Some(Ok(_)), true) = (&sanitizer, opts.in_process) {
            return Err(RunError::SanitizeInProcess);
        }
        match &sanitizer {
            Some(Ok(s)) => eprintln!("w4a16: {}", s.describe()),
            Some(Err(skip)) => eprintln!("w4a16: SANITIZER SKIPPED: {}", skip.reason),
            None => {}
        }
        if opts.sources != KernelSources::Embedded {
            eprintln!("w4a16: {}", opts.sources);
        }
        let isolated = matches!(backend, Backend::Device(_)) && !opts.in_process;
        let gpus = &opts.gpus;
        // `--jobs` counts workers in all; every listed device gets at least one.
        let jobs = if isolated && opts.jobs < ordinals.len() {
            eprintln!(
                "w4a16: --jobs {} is fewer than the {} devices of --gpus {gpus}: running {} workers, one per device",
                opts.jobs,
                ordinals.len(),
                ordinals.len()
            );
            ordinals.len()
        } else if opened.main_job_share {
            // The emulator in a GPU's place: its workers share the host's cores.
            let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
            opts.jobs.max(cores)
        } else {
            opts.jobs
        };
        announce_devices(opened, gpus, cases, isolated, jobs);
        let reference = ReferenceChoice::resolve(
            ReferenceChoice::requested_under(opts.reference, opts.sanitize),
            match backend {
                Backend::Device(d) => Some(d.as_ref()),
                Backend::None(_) => None,
            },
        )?;
        eprintln!("w4a16: reference: {reference}");
        let mut session = SessionOptions::new(opts.cases_dir.clone(), target);
        session.config = opts.config;
        session.reference = reference;
        session.artifacts = Some(opts.report_dir.join("artifacts"));
        let workers = if isolated {
            jobs
        } else if ordinals.len() > 1 {
            ordinals.len()
        } else {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        };
        Ok(Setup {
            target,
            device_kind: backend.device_kind(),
            no_gpu: opened.no_gpu(),
            sanitizer,
            isolated,
            jobs,
            workers,
            session,
        })
    }

    /// The sanitizer watching the workers, with the target its repro lines name.
    pub(super) fn watching(&self, target: RunTarget) -> Option<(&sanitize::Sanitizer, RunTarget)> {
        match &self.sanitizer {
            Some(Ok(s)) => Some((s, target)),
            _ => None,
        }
    }
}

/// Where the cases run, said once before they do.
pub(super) fn announce_devices(
    opened: &Opened,
    gpus: &Gpus,
    cases: usize,
    isolated: bool,
    jobs: usize,
) {
    let (target, ordinals) = (opened.target, &opened.ordinals);
    match &opened.backend {
        Backend::Device(d) if ordinals.len() > 1 => eprintln!(
            "w4a16: {cases} cases on {} devices (--gpus {gpus}: {}; {target}; the first is {}), {}",
            ordinals.len(),
            join(ordinals),
            d.name(),
            if isolated {
                format!("{jobs} workers")
            } else {
                "a thread per device, in this process".to_string()
            }
        ),
        Backend::Device(d) => {
            // The emulator's name already says its target.
            let name = d.name();
            let on = if name.contains(&target.to_string()) {
                name
            } else {
                format!("{name} ({target})")
            };
            eprintln!("w4a16: {cases} cases on {on}, {jobs} workers")
        }
        Backend::None(skip) => eprintln!(
            "w4a16: {cases} cases, CPU-side checks for {target}; GPU checks skip: {}",
            skip.reason
        ),
    }
}

/// The progress bar and what each verdict does to it (and to `--fail-fast`'s stop).
pub(super) struct Progress {
    pub(super) bar: indicatif::ProgressBar,
    pub(super) fail_fast: bool,
    pub(super) stop: session::StopFlag,
    pub(super) failures: Mutex<usize>,
    pub(super) seen: Mutex<BTreeSet<String>>,
}

impl Progress {
    pub(super) fn new(cases: usize, fail_fast: bool, stop: &session::StopFlag) -> Progress {
        let bar = indicatif::ProgressBar::new(cases as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:40}] {pos}/{len} cases, ETA {eta} {msg}",
            )
            .expect("template")
            .progress_chars("=> "),
        );
        Progress {
            bar,
            fail_fast,
            stop: stop.clone(),
            failures: Mutex::new(0),
            seen: Mutex::new(BTreeSet::new()),
        }
    }

    pub(super) fn on_verdict(&self, v: &Verdict) {
        if self.seen.lock().expect("lock").insert(v.case_id.clone()) {
            self.bar.inc(1);
        }
        if v.outcome.is_failure() {
            if self.fail_fast {
                self.stop.stop();
            }
            let mut f = self.failures.lock().expect("lock");
            *f += 1;
            self.bar.set_message(format!("{} failing", *f));
            self.bar.println(format!(
                "{} {} [{}]: {}",
                v.outcome, v.case_id, v.check, v.detail
            ));
        }
    }
}

/// What the cases gave: every verdict in report order, where the time went, and how the
/// verdicts divide into sections (a shard's report records them).
pub(super) struct Ran {
    pub(super) verdicts: Vec<Verdict>,
    pub(super) out: RunOutput,
    pub(super) global_checks: usize,
    pub(super) case_checks: usize,
    pub(super) wall_s: f64,
}

/// The case-independent checks (once per run: in shard 1 only of a sharded one), the cases in
/// workers or in this process, and the sanitizer's skips.
pub(super) fn run_cases(
    opts: &RunOptions,
    set: &CaseSet,
    picked: &Picked<'_>,
    opened: Opened,
    setup: &Setup,
    progress: &Progress,
) -> Result<Ran, RunError> {
    let on_verdict = |v: &Verdict| progress.on_verdict(v);
    let mut verdicts = Vec::new();
    if opts.shard.is_none_or(|s| s.runs_global_checks()) {
        verdicts.extend(global::dequant_trick_checks());
        verdicts.extend(session::invalid_case_file_checks(&opts.cases_dir));
    }
    let global_checks = verdicts.len();
    let chosen = &picked.chosen;
    let mut out = if setup.isolated {
        let ordinals = opened.ordinals.clone();
        drop(opened);
        run_in_workers(opts, set, chosen, &ordinals, setup, &on_verdict)?
    } else if let (Backend::Device(_), [first, _, ..]) =
        (&opened.backend, opened.ordinals.as_slice())
    {
        let first = *first;
        let mut backends = vec![(first, opened.backend)];
        backends.extend(opened.more_devices);
        session::run_in_process_on(set, chosen, &backends, &setup.session, &on_verdict)?
    } else {
        session::run_in_process(set, chosen, &opened.backend, &setup.session, &on_verdict)?
    };
    if !picked.cpu_only.is_empty() {
        let skip = Skip {
            requirement: Requirement::Gpu,
            reason: format!(
                "outside {} on the ISA emulator: a GPU runs it, or `w4a16 run --target {}` on the emulator",
                Interpreter::IsaEmulatorMainJob.budget(),
                setup.target
            ),
        };
        let cpu = session::run_in_process(
            set,
            &picked.cpu_only,
            &Backend::None(skip),
            &setup.session,
            &on_verdict,
        )?;
        out.verdicts.extend(cpu.verdicts);
        out.times.merge(&cpu.times);
        out.suites.merge(&cpu.suites);
    }
    let case_checks = out.verdicts.len();
    verdicts.append(&mut out.verdicts);
    if let (Some(Err(skip)), Some(tool)) = (&setup.sanitizer, opts.sanitize) {
        let ids = chosen.iter().map(|c| c.id.as_str());
        let skipped = sanitize::skip_verdicts(ids, tool, skip);
        skipped.iter().for_each(on_verdict);
        verdicts.extend(skipped);
    }
    Ok(Ran {
        verdicts,
        out,
        global_checks,
        case_checks,
        wall_s: 0.0,
    })
}

/// The cases in fault-isolated workers (ARCHITECTURE.md rule 8), each told what to run by one
/// [`WorkerSpec`] built from the run's options as they are.
pub(super) fn run_in_workers(
    opts: &RunOptions,
    set: &CaseSet,
    chosen: &[&Case],
    ordinals: &[usize],
    setup: &Setup,
    on_verdict: &(dyn Fn(&Verdict) + Sync),
) -> Result<RunOutput, RunError> {
    let target = setup.target;
    // One compile of the kernel set here fills the PTX cache for every worker.
    if target.executing_vendor() == Vendor::Nvidia {
        let extra = target.nvrtc_options()?;
        nvrtc::compile_all(
            &opts.sources,
            &source::WITH_SOURCE,
            Target::Sm90.name(),
            &extra,
        );
    }
    let exe = match &opts.worker_exe {
        Some(exe) => exe.clone(),
        None => std::env::current_exe().map_err(RunError::WorkerExe)?,
    };
    let reference = setup.session.reference;
    let watched = setup.watching(target);
    let spec = WorkerSpec {
        cases_dir: Some(opts.cases_dir.clone()),
        target: Some(target),
        kernel_sources: opts.sources.as_dir_arg().map(Path::to_path_buf),
        kernel_config: opts.config,
        artifacts: setup.session.artifacts.clone(),
        reference,
        exact_allocations: watched.is_some(),
        emulator_sanitizer: watched.and_then(|(s, _)| s.emulator_tool()),
        device_ordinal: None,
        simulate: false,
        model: None,
        abort_on: None,
    };
    let ids: Vec<String> = chosen.iter().map(|c| c.id.clone()).collect();
    let cost = |id: &str| {
        set.case(id)
            .map_or(1.0, |c| session::case_cost(c, reference))
    };
    let layer = |id: &str| {
        set.case(id).map_or_else(
            || w4a16_reference::data::layer_key(id),
            w4a16_cases::Case::layer_key,
        )
    };
    let worker = isolate::WorkerCommand {
        exe: &exe,
        spec: &spec,
        sanitizer: watched,
    };
    session::run_worker_jobs_on(
        &worker,
        &ids,
        cost,
        layer,
        setup.jobs,
        ordinals,
        opts.case_timeout,
        &setup.session.stop,
        on_verdict,
    )
    .map_err(RunError::Workers)
}

/// After the cases: the reports (a shard's with its record), the snapshots and the summary.
pub(super) fn finish(
    opts: &RunOptions,
    picked: &Picked<'_>,
    setup: &Setup,
    ran: Ran,
    stopped: bool,
) -> Result<RunEnd, RunError> {
    let target = setup.target;
    let no_gpu = setup.no_gpu.clone();
    let device_kind = setup.device_kind;
    let snapshot_files: Vec<SnapshotFile> = match (&no_gpu, opts.snapshot) {
        (None, Some(_)) => {
            let mut suites = picked.all_suites.clone();
            suites.sort();
            suites.dedup();
            let file = |s: &String| {
                SnapshotFile::new(s, &target.name(), opts.sanitize)
                    .recorded_by(device_kind)
                    .left_out(picked.left_out.get(s).cloned())
            };
            suites.iter().map(file).collect()
        }
        _ => Vec::new(),
    };
    let record = opts
        .shard
        .map(|s| shard_record(s, opts, picked, &ran, &snapshot_files));
    let ran_cases = || picked.chosen.iter().chain(&picked.cpu_only).copied();
    let suites = cost::suite_costs(&ran.out.suites, ran_cases(), &ran.verdicts);
    let groups = cost::group_costs(&ran.out.suites, ran_cases(), &ran.verdicts);
    let timing = report::Timing {
        suites: &suites,
        groups: &groups,
        ..report::Timing::of(ran.wall_s, setup.workers, &ran.out.times)
    };
    write_reports_of(
        &opts.report_dir,
        target,
        Some(setup.session.reference),
        device_kind,
        &ran.verdicts,
        timing,
        record.as_ref(),
    )?;
    let differing = match (&no_gpu, opts.snapshot) {
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
        (None, Some(mode)) => {
            let snapshot_dir = snapshot::snapshot_dir(opts.snapshots.as_deref(), &opts.cases_dir);
            match &record {
                None => snapshots(&snapshot_dir, mode, snapshot_files, &ran.verdicts)?,
                Some(record) => compare_shard_snapshots(
                    opts,
                    &snapshot_dir,
                    mode,
                    &snapshot_files,
                    &ran.verdicts,
                    record,
                )?,
            }
        }
    };
    let summary = Summary::of(&ran.verdicts);
    let ended = RunEnding {
        summary: &summary,
        differing: &differing,
        stopped,
        suites: &suites,
    };
    print_summary(opts, picked, setup, &ran, &ended, target);
    Ok(RunEnd {
        summary,
        differing_snapshots: differing,
    })
}

/// The `shard` object of a shard's report.json.
pub(super) fn shard_record(
    s: ShardSpec,
    opts: &RunOptions,
    picked: &Picked<'_>,
    ran: &Ran,
    snapshot_files: &[SnapshotFile],
) -> ShardRecord {
    ShardRecord {
        index: s.index,
        count: s.count,
        suites: opts.suites.clone(),
        filter: opts.filter.clone(),
        commit: shard::commit_of(&opts.cases_dir),
        artifacts: opts.report_dir.join("artifacts").display().to_string(),
        selection: picked.selection.clone(),
        selected: picked.selected,
        positions: picked.positions.clone(),
        sections: shard::Sections {
            global: ran.global_checks,
            cases: ran.case_checks,
            sanitizer_skips: ran.verdicts.len() - ran.global_checks - ran.case_checks,
        },
        snapshots: snapshot_files.iter().map(SnapshotFile::file_name).collect(),
        left_out: picked.left_out.clone(),
    }
}

/// A shard's snapshot rows written beside its report, and compared with the committed rows of
/// its own cases; the names of those that differ under `check`.
pub(super) fn compare_shard_snapshots(
    opts: &RunOptions,
    snapshot_dir: &Path,
    mode: SnapshotMode,
    files: &[SnapshotFile],
    verdicts: &[Verdict],
    record: &ShardRecord,
) -> Result<Vec<String>, RunError> {
    shard::write_snapshot_parts(&opts.report_dir, files, verdicts)?;
    let mine = record.positions.keys().map(String::as_str).collect();
    let mut differing = Vec::new();
    for file in files {
        if let Some(diff) = shard::compare_part(snapshot_dir, file, verdicts, &mine)? {
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
    Ok(differing)
}

/// How a run ended, as its last lines say it.
pub(super) struct RunEnding<'a> {
    pub(super) summary: &'a Summary,
    /// The snapshots that differ.
    pub(super) differing: &'a [String],
    /// Stopped at the first failure (`--fail-fast`).
    pub(super) stopped: bool,
    pub(super) suites: &'a [cost::SuiteCost],
}

/// The run's last lines on stdout: the summary, what was left out or differs, the time (its
/// phases, and the cost per suite).
pub(super) fn print_summary(
    opts: &RunOptions,
    picked: &Picked<'_>,
    setup: &Setup,
    ran: &Ran,
    ended: &RunEnding<'_>,
    target: RunTarget,
) {
    let RunEnding {
        summary,
        differing,
        stopped,
        suites,
    } = *ended;
    print!("{summary}");
    if let Some(note) = &picked.budget_note {
        println!("{note}");
    }
    if !differing.is_empty() {
        println!(
            "SNAPSHOTS DIFFER on {target}: {} (review the .snap.new files with `cargo insta review`, or record with --snapshot update)",
            differing.join(", ")
        );
    }
    if stopped {
        let ran_ids: BTreeSet<&str> = ran.verdicts.iter().map(|v| v.case_id.as_str()).collect();
        let count = picked
            .chosen
            .iter()
            .filter(|c| ran_ids.contains(c.id.as_str()))
            .count();
        println!(
            "stopped at the first failure (--fail-fast): {count} of {} cases ran",
            picked.chosen.len()
        );
    }
    let (wall_s, workers) = (ran.wall_s, setup.workers);
    println!("wall time {wall_s:.1} s with {workers} workers");
    print!("{}", ran.out.times);
    if ran.out.devices.len() > 1 {
        for (ordinal, t) in &ran.out.devices {
            println!(
                "  device {ordinal}: {} cases, device {:.1} s, CPU side {:.1} s",
                t.cases,
                t.device_s,
                t.cpu_side_s()
            );
        }
    }
    print!("{}", cost::CostTable(suites));
    println!(
        "reports: {}/{{report.json,junit.xml,summary.md}}",
        opts.report_dir.display()
    );
}
