//! `w4a16 worker --spec JSON` (internal): the fault-isolated GPU worker of `run` and of
//! `check-model` (ARCHITECTURE.md rule 8). Everything it needs comes in one [`WorkerSpec`]; case ids come on
//! stdin and framed verdicts go to stdout ([`isolate`]).

use super::args;
use super::check_model::CheckModelError;
use super::exit::{CliError, Status};
use std::cell::Cell;
use std::time::Duration;
use w4a16_cases::CaseSet;
use w4a16_device::{Allocation, Device, Health};
use w4a16_harness::model_check::isolated::ModelLauncher;
use w4a16_harness::runner::cli_run::load_with_dir;
use w4a16_harness::runner::execute::ReferenceChoice;
use w4a16_harness::runner::execute::RunContext;
use w4a16_harness::runner::isolate::{self, ModelLaunches, WorkerSpec};
use w4a16_harness::runner::sanitize::emulated;
use w4a16_harness::runner::session::{self, Backend, SessionOptions};
use w4a16_harness::runner::{Cause, Check, Outcome, PhaseTimes, Verdict, WorkerFailure};
use w4a16_kernels::KernelId;

/// `w4a16 worker`'s one option.
#[derive(clap::Args)]
pub struct WorkerArgs {
    /// What to run, as `w4a16 run` wrote it ([`WorkerSpec`] as JSON).
    #[arg(long = "spec", value_name = "JSON", value_parser = WorkerSpec::from_json)]
    spec: WorkerSpec,
}

pub fn worker(args: WorkerArgs) -> Result<Status, CliError> {
    let spec = args.spec;
    let abort_on = spec.abort_on.clone();
    // The self-test's crash: the process dies as under a kernel that takes it down.
    let crash_if_asked = move |id: &str| {
        if abort_on.as_deref().is_some_and(|s| id.contains(s)) {
            std::process::abort();
        }
    };
    if spec.simulate {
        let lost = Cell::new(false);
        isolate::serve_until(
            |id| {
                crash_if_asked(id);
                simulated(id, spec.device_ordinal, &lost)
            },
            || lost.get().then(|| "simulated device lost".to_string()),
        )
        .map_err(CliError::WorkerIo)?;
        return Ok(Status::Passed);
    }
    if let Some(model) = spec.model.clone() {
        return model_worker(&spec, &model, &crash_if_asked);
    }
    let (dir, set) = load_with_dir(spec.cases_dir.clone())?;
    let sources = args::kernel_sources("--kernel-sources", spec.kernel_sources.as_deref())?;
    let allocation = if spec.exact_allocations {
        Allocation::Exact
    } else {
        Allocation::Guarded
    };
    let ordinal = spec.device_ordinal.unwrap_or(0);
    let emu_sanitizer = spec.emulator_sanitizer.and_then(emulated::emulator_tool);
    let (target, backend) =
        session::open_backend_watched(spec.target, ordinal, &sources, allocation, emu_sanitizer);
    // A device that sizes every buffer exactly anyway (the ISA emulator) serves both.
    if let Backend::Device(d) = &backend
        && allocation == Allocation::Exact
        && d.allocation() != Allocation::Exact
    {
        return Err(CliError::NotExact { device: d.name() });
    }
    let mut opts = SessionOptions::new(dir, target);
    opts.config = spec.kernel_config;
    opts.artifacts = spec.artifacts;
    opts.reference = match &backend {
        Backend::Device(d) => ReferenceChoice::resolve(Some(spec.reference), Some(d.as_ref()))?,
        Backend::None(_) => ReferenceChoice::Cpu,
    };
    // A lost device (sticky fault, hang) would fault every later case: retire instead, and the
    // parent starts a fresh worker for the rest.
    let retire = || lost_device(&backend);
    // Under the ISA emulator's sanitizer, each case's reports go out inside its window (after
    // its BEGIN, before its verdicts), as compute-sanitizer's would.
    let run = |id: &str| {
        crash_if_asked(id);
        let out = run_one(&set, id, &backend, &opts);
        if let Backend::Device(d) = &backend {
            let reports = d.take_sanitizer_reports();
            if let Err(e) = emulated::print_reports(&reports, &mut std::io::stdout()) {
                eprintln!("w4a16 worker: printing the sanitizer's reports: {e}");
            }
        }
        out
    };
    isolate::serve_until(run, retire).map_err(CliError::WorkerIo)?;
    Ok(Status::Passed)
}

/// A model check's worker ([`isolated::ModelLauncher`]): each case id names a layer of the
/// model and a batch size.
fn model_worker(
    spec: &WorkerSpec,
    model: &ModelLaunches,
    crash_if_asked: &dyn Fn(&str),
) -> Result<Status, CliError> {
    let sources = args::kernel_sources("--kernel-sources", spec.kernel_sources.as_deref())?;
    let ordinal = spec.device_ordinal.unwrap_or(0);
    let (target, backend) =
        session::open_backend_at(spec.target, ordinal, &sources, Allocation::Guarded);
    let c_target = match &spec.cases_dir {
        Some(dir) => session::c_target(dir, target.target)?,
        None => session::built_in_c_target(target.target)?,
    };
    let (device, no_device) = match &backend {
        Backend::Device(d) => (Some(d.as_ref() as &dyn Device), None),
        Backend::None(s) => (None, Some(s.clone())),
    };
    let ctx = RunContext {
        target: target.target,
        execution: target.execution,
        device,
        no_device,
        config: spec.kernel_config,
        c_target,
        known_bad: &[],
        today: w4a16_cases::Date::today_utc(),
        artifacts: spec.artifacts.clone(),
        full_reference_macs: 2.0e9,
        sample_flops: 2.0e9,
        reference: ReferenceChoice::Cpu,
    };
    let mut launcher = ModelLauncher::open(model).map_err(|source| CheckModelError::Model {
        dir: model.dir.clone(),
        source: Box::new(source),
    })?;
    let retire = || lost_device(&backend);
    let run = |id: &str| {
        crash_if_asked(id);
        launcher.launch(id, &ctx)
    };
    isolate::serve_until(run, retire).map_err(CliError::WorkerIo)?;
    Ok(Status::Passed)
}

/// One case's verdicts and times; an unknown id or a session error is the case's failure.
fn run_one(
    set: &CaseSet,
    id: &str,
    backend: &Backend,
    opts: &SessionOptions,
) -> (Vec<Verdict>, PhaseTimes) {
    let failed = |check: Check, cause: Cause| {
        let v = Verdict::new(id, check, Outcome::Fail).because(cause);
        (vec![v], PhaseTimes::default())
    };
    match set.case(id) {
        Some(case) => match session::run_in_process(set, &[case], backend, opts, &|_| {}) {
            Ok(out) => (out.verdicts, out.times),
            Err(error) => failed(
                Check::Session,
                Cause::Worker(WorkerFailure::Session {
                    error: error.to_string(),
                }),
            ),
        },
        None => failed(
            Check::Case,
            Cause::Worker(WorkerFailure::UnknownCase { id: id.to_string() }),
        ),
    }
}

/// The `simulate` worker: ids containing `crash` abort, `hang` never finish, `lose-device`
/// loses the (pretend) device after passing, `oob` prints a memcheck report against the
/// fallback kernel on stdout (as compute-sanitizer does); each passes a `fallback` check whose
/// detail is the worker's process id, and ` on device N` where the worker was bound to one.
fn simulated(
    id: &str,
    device_ordinal: Option<usize>,
    lost: &Cell<bool>,
) -> (Vec<Verdict>, PhaseTimes) {
    if id.contains("crash") {
        std::process::abort();
    }
    if id.contains("hang") {
        std::thread::sleep(Duration::from_secs(3600));
    }
    if id.contains("oob") {
        println!(
            "========= Invalid __global__ read of size 16 bytes\n=========     at w4a16_fallback_f16+0x1a70\n=========     by thread (3,0,0) in block (1,0,0)\n=========     Access to 0x7f3a4e2005f0 is out of bounds\n========= "
        );
    }
    lost.set(id.contains("lose-device"));
    let times = PhaseTimes {
        cases: 1,
        ..PhaseTimes::default()
    };
    let pid = std::process::id();
    let detail = match device_ordinal {
        Some(o) => format!("{pid} on device {o}"),
        None => pid.to_string(),
    };
    let v = Verdict::new(id, Check::kernel(KernelId::Fallback), Outcome::Pass).detail(detail);
    (vec![v], times)
}

/// Why the worker's device is lost (sticky fault, hang), if it is: every later case would
/// fault, so the worker retires and the parent starts a fresh one for the rest.
fn lost_device(backend: &Backend) -> Option<String> {
    match backend {
        Backend::Device(d) => match d.health() {
            Health::Lost { cause } => Some(cause),
            Health::Ok => None,
        },
        Backend::None(_) => None,
    }
}
