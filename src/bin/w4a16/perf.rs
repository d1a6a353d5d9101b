//! `w4a16 perf`: measure (candidate and control interleaved), judge against the goldens, the
//! peers beside them on request, the reports, and the goldens rewritten only on request.

use super::args::{self, TargetArg};
use super::exit::{CliError, Status};
use std::path::{Path, PathBuf};
use w4a16_cases::{Provider, Suite};
use w4a16_device::{Allocation, DeviceBench};
use w4a16_harness::perf::PerfError;
use w4a16_harness::perf::golden::{GoldenError, GoldenFile};
use w4a16_harness::perf::judge::{self, CaseOutcome, JudgePolicy, Judgement};
use w4a16_harness::perf::measure::{PerfCase, PerfPlan, measure_suite_until, perf_cases};
use w4a16_harness::perf::peers::{self, PeerCase, PeerError};
use w4a16_harness::perf::report::{self as perf_report, PerfRun, ReportError};
use w4a16_harness::perf::update;
use w4a16_harness::report::FileError;
use w4a16_harness::runner::cli_run::{check_suites, load_with_dir};
use w4a16_harness::runner::session::{self, Backend};
use w4a16_kernels::RunTarget;
use w4a16_kernels::source::KernelSources;
use w4a16_select::config::KernelConfig;

/// `w4a16 perf`'s options.
#[derive(clap::Args)]
pub struct PerfArgs {
    /// The suite whose dense cases are timed.
    #[arg(long, default_value = "field")]
    pub(super) suite: String,
    /// Only case ids matching this glob (`*` wildcards).
    #[arg(long, visible_alias = "only")]
    pub(super) filter: Option<String>,
    /// `auto` (the GPU found here) or a native target; emulated targets are refused.
    #[arg(long, default_value = "auto", value_parser = args::target_or_auto())]
    target: TargetArg,
    /// Folder of the golden files `<target>.json` (default: `perf/` beside the cases folder).
    #[arg(long, value_name = "DIR")]
    pub(super) goldens: Option<PathBuf>,
    /// Where summary.md, the JSON, the JUnit XML and the plot go (default: target/perf/<target>).
    #[arg(long, alias = "out", value_name = "DIR")]
    pub(super) report_dir: Option<PathBuf>,
    /// The candidate's kernels from the HIP sources in DIR (default: the embedded copies).
    #[arg(long, value_name = "DIR")]
    kernel_sources: Option<PathBuf>,
    /// A control build timed beside the candidate, case by case: a kernel-source folder, or a
    /// repository checkout (its kernels/hip).
    #[arg(long, value_name = "DIR")]
    control: Option<PathBuf>,
    /// Write the candidate's timings as the new goldens (and <target>.moved.md, what moved);
    /// nothing else writes goldens.
    #[arg(long)]
    pub(super) update_goldens: bool,
    /// Half-width of the band a ratio may move without failing (default: the golden file's, else
    /// 0.08).
    #[arg(long)]
    band: Option<f64>,
    /// IQR/median of the ratio samples above which a case is too noisy to judge (default: the
    /// golden file's, else 0.15).
    #[arg(long)]
    noise_limit: Option<f64>,
    /// Timed launches per side and case (9 to 30).
    #[arg(long, default_value_t = PerfPlan::default().reps)]
    reps: usize,
    /// Launches left queued ahead of the timed ones.
    #[arg(long, default_value_t = PerfPlan::default().warmup)]
    warmup: usize,
    /// Separately allocated copies of the inputs the launches rotate through (cold reads).
    #[arg(long, default_value_t = PerfPlan::default().copies)]
    copies: usize,
    /// Out-of-band improvements do not fail the run (they are still reported).
    #[arg(long)]
    allow_improvements: bool,
    /// On the ISA emulator (a gfx target without its GPU here): the largest case counted, in
    /// M·N·K multiply-adds; larger cases are listed as left out.
    #[arg(long, default_value_t = w4a16_harness::perf::counters::DEFAULT_MAX_MACS)]
    pub(super) max_macs: u64,
    /// Time every legal path of each case (skinny, each fused rung's tile, dequant+dense,
    /// fallback), not only the selected one, and report the selected path's time over the best
    /// (the regret) and the prefill dequant option's value: regret.md, regret.json, regret.svg
    /// (default folder target/perf-regret/<target>). Judges no goldens.
    #[arg(long)]
    pub(super) regret: bool,
    /// With --regret: the fallback (plain scalar sums, seconds per launch on large prefill
    /// layers) is timed only up to this M·N·K; above, it is listed as not timed.
    #[arg(long, default_value_t = w4a16_harness::perf::regret::DEFAULT_FALLBACK_MAX_MACS)]
    pub(super) regret_fallback_max_macs: u64,
    /// With --regret: continue the report in FILE (a regret.json of the same target, device,
    /// suite, option and plan: one a time limit stopped, or another --filter's batch); its rows
    /// are kept and their cases not timed again.
    #[arg(long, value_name = "FILE")]
    pub(super) regret_resume: Option<PathBuf>,
    /// Start no new case after this many seconds of timing. With --regret: the report is
    /// partial (continue it with --regret-resume) and --peers still runs for what was timed.
    /// With --update-goldens: the cases timed are recorded, every other entry kept (go on with
    /// --missing-goldens). A gate run refuses it: it judges every case it was asked to.
    #[arg(long, alias = "regret-stop-after", value_name = "SECONDS")]
    pub(super) stop_after: Option<u64>,
    /// With --update-goldens: time only the cases that have no golden yet, keeping every
    /// entry there is, so the same command continues a recording a time limit ended.
    #[arg(long)]
    pub(super) missing_goldens: bool,
    /// Also time torch's int4 kernel and dense fp16 on the same cases (scripts/perf-peers.py).
    #[arg(long)]
    pub(super) peers: bool,
}

/// Why perf could not time or judge.
#[derive(Debug, thiserror::Error)]
pub enum PerfCliError {
    #[error(transparent)]
    Perf(#[from] PerfError),
    #[error("{flag} {value}: expected a fraction between 0 and 1 (0.08 is ±8 %)")]
    NotAFraction { flag: &'static str, value: f64 },
    #[error("--filter {filter:?}: no case of {suite} matches")]
    NoCaseMatches { filter: String, suite: String },
    #[error("--control: the control device did not open: {reason}")]
    ControlDidNotOpen { reason: String },
    #[error(transparent)]
    Golden(#[from] GoldenError),
    #[error("--update-goldens: {0}")]
    Update(#[from] update::UpdateError),
    #[error(transparent)]
    Peers(#[from] PeerError),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error("--regret with {flag}: regret mode times one build and judges no goldens")]
    RegretWith { flag: &'static str },
    #[error("--regret-resume {path}: {source}")]
    ResumeIo {
        path: String,
        source: std::io::Error,
    },
    #[error("--regret-resume: {0}")]
    ResumeRead(#[from] w4a16_harness::perf::regret::report::ReadError),
    #[error("--regret-resume: {0}")]
    Resume(#[from] w4a16_harness::perf::regret::resume::ResumeError),
    #[error("the kernel sources timed: {0}")]
    Sources(#[from] w4a16_kernels::source::SourceError),
    #[error("{flag} without --regret: it steers a regret run only")]
    RegretOnly { flag: &'static str },
    #[error(
        "--stop-after without --regret or --update-goldens: a gate run judges every case it was \
         asked to (narrow it with --filter instead)"
    )]
    StopAfterInGate,
    #[error("--missing-goldens without --update-goldens: it chooses which goldens to record")]
    MissingWithoutUpdate,
    #[error(
        "{flag} on the ISA emulator: its counts are exact and quick; record the target's \
         counter goldens in one run"
    )]
    CountedWith { flag: &'static str },
}

/// What every perf mode works on: the options, the suite's cases (filtered), the providers, the
/// kernel config and the repository (goldens, scripts).
pub(super) struct PerfScope<'a> {
    pub(super) args: &'a PerfArgs,
    pub(super) suite: &'a Suite,
    pub(super) providers: &'a [Provider],
    pub(super) config: &'a KernelConfig,
    pub(super) repo: &'a Path,
}

/// The candidate and control builds and the devices they opened on.
pub(super) struct Devices {
    pub(super) target: RunTarget,
    pub(super) sources: KernelSources,
    pub(super) control_src: Option<KernelSources>,
    pub(super) candidate: Box<dyn DeviceBench>,
    pub(super) control: Option<Box<dyn DeviceBench>>,
}

pub fn perf(
    args: PerfArgs,
    cases_dir: Option<PathBuf>,
    config: KernelConfig,
) -> Result<Status, CliError> {
    let plan = PerfPlan {
        reps: args.reps,
        warmup: args.warmup,
        copies: args.copies,
    }
    .checked()
    .map_err(PerfCliError::from)?;
    let band = positive_fraction("--band", args.band)?;
    let noise_limit = positive_fraction("--noise-limit", args.noise_limit)?;
    let wanted = args.target.run_target();
    if let Some(t) = wanted.filter(RunTarget::is_emulated) {
        return Err(PerfCliError::from(PerfError::Emulated { target: t }).into());
    }
    let sources = args::kernel_sources("--kernel-sources", args.kernel_sources.as_deref())?;
    if args.regret {
        super::perf_regret::refuse_flags(&args, args.control.is_some())?;
    } else if args.regret_resume.is_some() {
        let flag = "--regret-resume";
        return Err(PerfCliError::RegretOnly { flag }.into());
    } else if args.stop_after.is_some() && !args.update_goldens {
        return Err(PerfCliError::StopAfterInGate.into());
    }
    if args.missing_goldens && !args.update_goldens {
        return Err(PerfCliError::MissingWithoutUpdate.into());
    }
    let control_src = match args.control.as_deref() {
        None => None,
        Some(dir) => Some(control_sources(dir)?),
    };
    let (dir, set) = load_with_dir(cases_dir)?;
    check_suites(&set, std::slice::from_ref(&args.suite))?;
    let repo = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let mut suite = set.suite(&args.suite).expect("checked above").clone();
    if let Some(f) = &args.filter {
        suite
            .cases
            .retain(|c| w4a16_cases::glob::glob_match(f, &c.id));
        if suite.cases.is_empty() {
            return Err(PerfCliError::NoCaseMatches {
                filter: f.clone(),
                suite: args.suite.clone(),
            }
            .into());
        }
    }
    let devices = match open_devices(wanted, sources, control_src)? {
        Ok(devices) => devices,
        Err(no_gpu) => return Ok(no_gpu),
    };
    let scope = PerfScope {
        args: &args,
        suite: &suite,
        providers: set.providers(),
        config: &config,
        repo: &repo,
    };
    if args.regret {
        return super::perf_regret::perf_regret(scope, plan, devices);
    }
    if devices.candidate.kind() == w4a16_device::DeviceKind::Emulator {
        let flag = match (args.stop_after, args.missing_goldens) {
            (Some(_), _) => Some("--stop-after"),
            (None, true) => Some("--missing-goldens"),
            (None, false) => None,
        };
        if let Some(flag) = flag {
            return Err(PerfCliError::CountedWith { flag }.into());
        }
        // No GPU of the target here: its perf cases counted on the ISA emulator, judged exactly.
        return super::perf_counters::perf_counted(scope, devices);
    }
    let timing = Timing {
        plan,
        band,
        noise_limit,
    };
    perf_gate(scope, timing, devices)
}

/// How the gate times and judges: the plan, and the band and noise limit asked for (else the
/// golden file's).
struct Timing {
    plan: PerfPlan,
    band: Option<f64>,
    noise_limit: Option<f64>,
}

/// The perf gate on the target's GPU: the selected path and its control timed case by case,
/// judged against the goldens, the peers beside them on request, the goldens rewritten on
/// request.
fn perf_gate(scope: PerfScope<'_>, timing: Timing, devices: Devices) -> Result<Status, CliError> {
    let PerfScope {
        args,
        suite,
        providers,
        config,
        repo,
    } = scope;
    let Timing {
        plan,
        band,
        noise_limit,
    } = timing;
    let target_name = devices.target.target.to_string();
    let device_name = devices.candidate.name();
    let (cases, not_timed) = perf_cases(suite, providers, devices.target.target, config);
    let goldens_dir = args.goldens.clone().unwrap_or_else(|| repo.join("perf"));
    let golden_path = GoldenFile::path_for(&goldens_dir, &target_name);
    let goldens = GoldenFile::load(&golden_path).map_err(PerfCliError::from)?;
    let cases = to_record(args, cases, goldens.as_ref(), &device_name)?;
    eprintln!(
        "w4a16 perf: {} cases of {} on {} ({target_name}), {} not timed; candidate: {}{}",
        cases.len(),
        args.suite,
        device_name,
        not_timed.len(),
        devices.sources,
        devices
            .control_src
            .as_ref()
            .map_or(String::new(), |c| format!("; control: {c}"))
    );
    let started = std::time::Instant::now();
    let limit = args.stop_after.map(std::time::Duration::from_secs);
    let measured = measure_suite_until(
        devices.candidate.as_ref(),
        devices.control.as_deref(),
        &cases,
        plan,
        &mut |s| eprintln!("perf: {s}"),
        &mut || limit.is_some_and(|l| started.elapsed() >= l),
    )
    .map_err(PerfCliError::from)?;
    let stopped = measured.len() < cases.len();
    if stopped {
        eprintln!(
            "perf: --stop-after reached: {} of {} cases timed; the rest keep their goldens (run \
             again with --missing-goldens to go on)",
            measured.len(),
            cases.len()
        );
    }
    let cases = &cases[..measured.len()];
    let Devices {
        sources,
        control_src,
        candidate,
        control,
        ..
    } = devices;
    // Kernels done: the peers (torch, in its own process) get the GPU to themselves.
    drop((candidate, control));

    let policy = JudgePolicy::resolve(
        band,
        noise_limit,
        !args.allow_improvements,
        goldens.as_ref(),
    );
    let mut outcomes: Vec<CaseOutcome> = measured
        .into_iter()
        .map(|(cand, ctrl)| judge::judge_case(cand, ctrl, goldens.as_ref(), &policy))
        .collect();
    let out_dir = args
        .report_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("target").join("perf").join(&target_name));
    let peers_note = match args.peers {
        true => Some(with_peers(repo, cases, plan, &out_dir, &mut outcomes)?),
        false => None,
    };
    let failing = outcomes.iter().filter(|o| o.fails(&policy)).count();
    let run = PerfRun {
        target: target_name.clone(),
        device: device_name,
        suite: args.suite.clone(),
        policy,
        plan,
        candidate: sources
            .as_dir_arg()
            .map_or("embedded kernels".into(), |d| d.display().to_string()),
        control: control_src
            .as_ref()
            .and_then(KernelSources::as_dir_arg)
            .map(|d| d.display().to_string()),
        outcomes,
        not_timed,
        peers_note,
    };
    write_reports(&run, &out_dir, failing)?;
    if goldens.is_none() {
        println!(
            "no goldens at {}: every case is `no golden` (record them with --update-goldens)",
            golden_path.display()
        );
    }
    if args.update_goldens {
        let scope = if args.filter.is_some() || args.missing_goldens || stopped {
            update::UpdateScope::Filtered
        } else {
            update::UpdateScope::WholeSuite
        };
        write_goldens(
            repo,
            &goldens_dir,
            &golden_path,
            goldens.as_ref(),
            &run,
            scope,
        )?;
        // The run was judged against the goldens it replaces: the update is what was asked.
        return Ok(Status::Passed);
    }
    Ok(Status::passed_if(failing == 0))
}

/// The cases this run times: with `--missing-goldens` only those without a golden. A recording
/// that keeps entries it does not time continues only the device that recorded them: refused
/// here, before any timing, rather than after it.
fn to_record(
    args: &PerfArgs,
    cases: Vec<PerfCase>,
    goldens: Option<&GoldenFile>,
    device: &str,
) -> Result<Vec<PerfCase>, PerfCliError> {
    if args.update_goldens {
        let keeps = args.filter.is_some() || args.missing_goldens || args.stop_after.is_some();
        let scope = match keeps {
            true => update::UpdateScope::Filtered,
            false => update::UpdateScope::WholeSuite,
        };
        update::may_update(goldens, device, scope)?;
    }
    if !args.missing_goldens {
        return Ok(cases);
    }
    let recorded: std::collections::BTreeSet<_> = goldens
        .map(|g| g.entries.iter().map(|e| e.key.clone()).collect())
        .unwrap_or_default();
    let total = cases.len();
    let left: Vec<PerfCase> = cases
        .into_iter()
        .filter(|c| !recorded.contains(&c.key))
        .collect();
    eprintln!(
        "perf: --missing-goldens: {} of {total} cases have a golden, {} left to record",
        total - left.len(),
        left.len()
    );
    Ok(left)
}

/// The candidate's device and, with `--control`, the control's own device object (its own
/// module cache, so the two builds never share a kernel). Without a GPU here: said loudly, and
/// how perf ends (as `bench`: a skip, a failure under `W4A16_REQUIRE=gpu`).
fn open_devices(
    wanted: Option<RunTarget>,
    sources: KernelSources,
    control_src: Option<KernelSources>,
) -> Result<Result<Devices, Status>, PerfCliError> {
    let (target, backend) = session::open_backend_with(wanted, &sources, Allocation::Guarded);
    let candidate = match backend {
        Backend::Device(d) => d,
        Backend::None(skip) if skip.requirement.is_required() => {
            eprintln!("W4A16_REQUIRE={} but {skip}", skip.requirement);
            return Ok(Err(Status::Failed));
        }
        Backend::None(skip) => {
            eprintln!(
                "W4A16-SKIP [{}] w4a16 perf: {}; nothing timed, no report written",
                skip.requirement, skip.reason
            );
            return Ok(Err(Status::Passed));
        }
    };
    let control = match &control_src {
        None => None,
        Some(src) => match session::open_backend_with(Some(target), src, Allocation::Guarded).1 {
            Backend::Device(d) => Some(d),
            Backend::None(skip) => {
                return Err(PerfCliError::ControlDidNotOpen {
                    reason: skip.reason,
                });
            }
        },
    };
    Ok(Ok(Devices {
        target,
        sources,
        control_src,
        candidate,
        control,
    }))
}

/// `--peers`: torch's int4 kernel and dense fp16 on the same cases, set beside each outcome;
/// the note the report carries (why they are missing, where torch is not there).
fn with_peers(
    repo: &Path,
    cases: &[PerfCase],
    plan: PerfPlan,
    out_dir: &Path,
    outcomes: &mut [CaseOutcome],
) -> Result<String, PerfCliError> {
    let peer_cases: Vec<PeerCase> = cases
        .iter()
        .map(|c| PeerCase::new(c.key.clone(), &c.shape, c.dtype, c.symmetry))
        .collect();
    let script = repo.join("scripts").join("perf-peers.py");
    match peers::run_peers(&script, &peer_cases, plan, &out_dir.join("peers")) {
        Ok(table) => {
            for o in outcomes.iter_mut() {
                o.peers = table.rows.get(&o.key).cloned();
            }
            Ok(table.note())
        }
        Err(e) if e.is_unavailable() => {
            eprintln!("W4A16-SKIP [peers] {e}");
            Ok(e.to_string())
        }
        Err(e) => Err(e.into()),
    }
}

/// The reports, the counts table and where they went.
fn write_reports(run: &PerfRun, out_dir: &Path, failing: usize) -> Result<(), PerfCliError> {
    let files = perf_report::write_reports(run, out_dir)?;
    print!("{}", perf_counts(&run.outcomes));
    println!(
        "{failing} of {} cases fail; reports: {}, {}, {}, {}",
        run.outcomes.len(),
        files.summary_md.display(),
        files.json.display(),
        files.junit.display(),
        files.plot.display()
    );
    Ok(())
}

/// `--update-goldens`: the candidate's timings as the new goldens, and what moved beside them.
fn write_goldens(
    repo: &Path,
    goldens_dir: &Path,
    golden_path: &Path,
    goldens: Option<&GoldenFile>,
    run: &PerfRun,
    scope: update::UpdateScope,
) -> Result<(), CliError> {
    let recorded = format!(
        "{} w4a16 {}",
        git_head(repo),
        std::env::args().skip(1).collect::<Vec<_>>().join(" ")
    );
    let (new, moved) =
        update::update_goldens(goldens, run, scope, recorded).map_err(PerfCliError::from)?;
    FileError::at(goldens_dir, std::fs::create_dir_all(goldens_dir))?;
    new.save(golden_path).map_err(PerfCliError::from)?;
    let moved_path = goldens_dir.join(format!("{}.moved.md", run.target));
    FileError::at(
        &moved_path,
        std::fs::write(&moved_path, moved.markdown(&run.target)),
    )?;
    println!(
        "goldens written: {} ({} entries); what moved: {}",
        golden_path.display(),
        new.entries.len(),
        moved_path.display()
    );
    Ok(())
}

/// `--control DIR`: a kernel-source folder, or a repository checkout whose `kernels/hip` is one.
fn control_sources(dir: &Path) -> Result<KernelSources, CliError> {
    let hip = dir.join("kernels").join("hip");
    let dir = if hip.is_dir() { hip.as_path() } else { dir };
    args::kernel_sources("--control", Some(dir))
}

/// The commit this checkout is at, for the goldens' `recorded` line.
pub(super) fn git_head(repo: &Path) -> String {
    std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "commit unknown".into())
}

/// A band or noise limit: a finite fraction above zero.
fn positive_fraction(flag: &'static str, value: Option<f64>) -> Result<Option<f64>, PerfCliError> {
    match value {
        Some(v) if !(v.is_finite() && v > 0.0 && v < 1.0) => {
            Err(PerfCliError::NotAFraction { flag, value: v })
        }
        v => Ok(v),
    }
}
/// The counts table of the field's PR description: per comparison, cases per judgement.
fn perf_counts(outcomes: &[CaseOutcome]) -> String {
    use std::fmt::Write as _;
    const COLUMNS: [&str; 7] = [
        "within band",
        "improvement",
        "regression",
        "too noisy",
        "wrong kernel",
        "no golden",
        "stale golden",
    ];
    let column = |j: &Judgement| match j {
        Judgement::WithinBand { .. } => 0,
        Judgement::Improvement { .. } => 1,
        Judgement::Regression { .. } => 2,
        Judgement::TooNoisy { .. } => 3,
        Judgement::WrongKernel { .. } => 4,
        Judgement::NoGolden => 5,
    };
    let count = |pick: &dyn Fn(&CaseOutcome) -> Option<&Judgement>| {
        let mut n = [0usize; 7];
        for j in outcomes.iter().filter_map(pick) {
            n[column(j)] += 1;
        }
        n
    };
    let mut cand = count(&|o| Some(&o.candidate_judgement));
    cand[6] = outcomes.iter().filter(|o| o.stale_golden).count();
    let mut rows = vec![("candidate vs goldens", cand)];
    if outcomes.iter().any(|o| o.control.is_some()) {
        rows.push((
            "control vs goldens",
            count(&|o| o.control_judgement.as_ref()),
        ));
        rows.push(("candidate vs control", count(&|o| o.vs_control.as_ref())));
    }
    let mut s = String::new();
    let _ = write!(s, "{:<22}", "");
    for c in COLUMNS {
        let _ = write!(s, " {c:>12}");
    }
    s.push('\n');
    for (name, n) in rows {
        let _ = write!(s, "{name:<22}");
        for (i, v) in n.iter().enumerate() {
            // Staleness is a property of a case, counted once, on the candidate's row.
            if i == 6 && name != "candidate vs goldens" {
                let _ = write!(s, " {:>12}", "-");
            } else {
                let _ = write!(s, " {v:>12}");
            }
        }
        s.push('\n');
    }
    s
}
