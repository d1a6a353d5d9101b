//! `w4a16 check-model DIR`: the command-line face of [`w4a16_harness::model_check`].

use super::args::{self, TargetArg};
use super::exit::{CliError, Status};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::time::Duration;
use w4a16_device::{Allocation, Device};
use w4a16_harness::model_check::isolated::{self, ModelWorkers};
use w4a16_harness::model_check::{
    self, CheckModelOptions, DEFAULT_BATCHES, LayerStatus, ModelCheckError, Progress,
    StartupMemoryInputs, report,
};
use w4a16_harness::report::ReportDir;
use w4a16_harness::runner::cli_run::require_gpu_checks;
use w4a16_harness::runner::execute::ReferenceChoice;
use w4a16_harness::runner::execute::RunContext;
use w4a16_harness::runner::isolate::WorkerSpec;
use w4a16_harness::runner::session::{self, Backend};
use w4a16_kernels::RunTarget;
use w4a16_kernels::source::KernelSources;
use w4a16_select::config::KernelConfig;

/// `w4a16 check-model`'s options.
#[derive(clap::Args)]
pub struct CheckModelArgs {
    /// The model directory: config.json with its quantization_config (compressed-tensors
    /// pack-quantized, GPTQ v1/v2, AWQ GEMM) and the safetensors shards (with their index).
    dir: PathBuf,
    /// Batch sizes every layer runs at, comma-separated.
    #[arg(long = "m", value_delimiter = ',', default_values_t = DEFAULT_BATCHES)]
    batches: Vec<usize>,
    /// `auto` (the GPU found here) or targets, comma-separated (an emulated gfx target, e.g.
    /// gfx1151-emu, runs on an NVIDIA GPU). With several, each gets its own run and reports
    /// under `<report-dir>/<target>/`.
    #[arg(long, default_value = "auto", value_delimiter = ',', value_parser = args::target_or_auto())]
    target: Vec<TargetArg>,
    /// Recorded activations (safetensors): a tensor `[R, K]` named after each module (or
    /// `<module>.input`); a batch of M takes its first M rows. Layers without one get seeded
    /// activations.
    #[arg(long, value_name = "FILE")]
    activations: Option<PathBuf>,
    /// Refuse layers with a checkpoint defect (the GPTQ v1 zero-point overflow) instead of
    /// reporting it beside their verdicts.
    #[arg(long)]
    strict: bool,
    /// Only modules matching this glob (`*` wildcards), e.g. `model.layers.0.*`.
    #[arg(long)]
    filter: Option<String>,
    /// Where model-report.json, model-junit.xml and model-summary.md go.
    #[arg(long, default_value = "target/w4a16-model")]
    report_dir: PathBuf,
    /// Compile the kernels from the HIP sources in DIR (see `run --kernel-sources`).
    #[arg(long, value_name = "DIR")]
    kernel_sources: Option<PathBuf>,
    /// Device memory for the startup memory check (made when the kernel config enables the
    /// prefill dequant cache).
    #[arg(long, value_name = "GIB")]
    device_memory_gib: Option<f64>,
    /// The engine's gpu_memory_utilization for the startup memory check.
    #[arg(long, default_value_t = 0.9)]
    gpu_memory_utilization: f64,
    /// Tokens of the longest request for the startup memory check (default: the model's
    /// max_position_embeddings).
    #[arg(long)]
    max_model_len: Option<u64>,
}

/// Why a model could not be checked (a layer's failure is a verdict, never this).
#[derive(Debug, thiserror::Error)]
pub enum CheckModelError {
    #[error("--m: batch sizes must be 1 or more, got {m}")]
    ZeroBatch { m: usize },
    #[error("--device-memory-gib: expected a positive size, got {gib}")]
    NotASize { gib: f64 },
    #[error("{}: {source}", dir.display())]
    Model {
        dir: PathBuf,
        source: Box<ModelCheckError>,
    },
}

pub fn check_model(
    args: CheckModelArgs,
    cases_dir: Option<PathBuf>,
    config: KernelConfig,
) -> Result<Status, CliError> {
    // Before anything can fail: no earlier run's report may stand in for this one's.
    let several = args.target.len() > 1;
    let report_dirs: Vec<PathBuf> = args
        .target
        .iter()
        .map(|t| {
            if several {
                args.report_dir.join(t.name())
            } else {
                args.report_dir.clone()
            }
        })
        .collect();
    for dir in &report_dirs {
        ReportDir::open(dir, &report::FILES)?;
    }
    if let Some(&m) = args.batches.iter().find(|&&m| m == 0) {
        return Err(CheckModelError::ZeroBatch { m }.into());
    }
    let startup_memory = match args.device_memory_gib {
        Some(gib) if !(gib.is_finite() && gib > 0.0) => {
            return Err(CheckModelError::NotASize { gib }.into());
        }
        Some(g) => Some(StartupMemoryInputs {
            device_memory_bytes: (g * (1u64 << 30) as f64) as u64,
            gpu_memory_utilization: args.gpu_memory_utilization,
            max_model_len: args.max_model_len,
        }),
        None => None,
    };
    let sources = args::kernel_sources("--kernel-sources", args.kernel_sources.as_deref())?;
    // The safety table: --cases (or W4A16_CASES, or the checkout's cases/), else the copy built
    // into the binary, so a model can be checked from anywhere.
    let cases_dir = match cases_dir {
        Some(dir) => Some(dir),
        None => w4a16_cases::locate(None).ok(),
    };
    let opts = CheckModelOptions {
        batches: args.batches,
        strict: args.strict,
        activations: args.activations,
        filter: args.filter,
        startup_memory,
        workers: None,
    };
    let mut failed = false;
    for (&target, report_dir) in args.target.iter().zip(&report_dirs) {
        failed |= one_target(
            target,
            &args.dir,
            report_dir,
            &sources,
            cases_dir.as_deref(),
            config,
            &opts,
        )?;
    }
    Ok(Status::passed_if(!failed))
}

/// One target's run: returns whether it failed.
fn one_target(
    target: TargetArg,
    dir: &Path,
    report_dir: &Path,
    sources: &KernelSources,
    cases_dir: Option<&Path>,
    config: KernelConfig,
    opts: &CheckModelOptions,
) -> Result<bool, CliError> {
    let (target, backend) =
        session::open_backend_with(target.run_target(), sources, Allocation::Guarded);
    let c_target = match cases_dir {
        Some(dir) => session::c_target(dir, target.target)?,
        None => session::built_in_c_target(target.target)?,
    };
    let (device, no_device) = match &backend {
        Backend::Device(d) => (Some(d.as_ref() as &dyn Device), None),
        Backend::None(s) => {
            eprintln!(
                "w4a16: {target}: no device ({}): format, selection and contract checks run, GPU checks skip",
                s.reason
            );
            (None, Some(s.clone()))
        }
    };
    let mut opts = opts.clone();
    if let Backend::Device(d) = &backend
        && !d.host_only()
    {
        opts.workers = Some(workers(
            target, dir, report_dir, sources, cases_dir, config, &opts,
        )?);
    }
    let opts = &opts;
    let ctx = RunContext {
        target: target.target,
        execution: target.execution,
        device,
        no_device,
        config,
        c_target,
        known_bad: &[],
        today: w4a16_cases::Date::today_utc(),
        artifacts: Some(report_dir.join("artifacts")),
        full_reference_macs: 2.0e9,
        sample_flops: 2.0e9,
        reference: ReferenceChoice::Cpu,
    };
    // One step per decoder layer: they are alike in a dense model, so the ETA holds.
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:30} {pos}/{len} decoder layers, {elapsed} elapsed, ETA {eta} {wide_msg}",
        )
        .expect("a valid template"),
    );
    // Without a terminal the bar is hidden: its lines go to the log instead, one per decoder
    // layer, so a run stopped by a timeout still says how far it got.
    let say = |line: String| {
        if bar.is_hidden() {
            eprintln!("{line}");
        } else {
            bar.println(line);
        }
    };
    let progress = |p: Progress<'_>| match p {
        Progress::Planned { units, .. } => bar.set_length(units as u64),
        Progress::Started(unit) => bar.set_message(unit.to_string()),
        Progress::Finished(layer) => {
            if layer.status != LayerStatus::Pass {
                say(format!("{:?} {}", layer.status, layer.module));
            }
        }
        Progress::UnitDone(unit) => {
            bar.inc(1);
            if bar.is_hidden() {
                say(format!(
                    "{unit}: done ({}/{} decoder layers, {:.1} s, ETA {:.0} s)",
                    bar.position(),
                    bar.length().unwrap_or(0),
                    bar.elapsed().as_secs_f64(),
                    bar.eta().as_secs_f64()
                ));
            }
        }
    };
    let mut check = model_check::check_model(dir, opts, &ctx, &progress).map_err(|source| {
        CheckModelError::Model {
            dir: dir.to_path_buf(),
            source: Box::new(source),
        }
    })?;
    bar.finish_and_clear();
    require_gpu_checks(&mut check.verdicts);
    print!("{}", report::markdown(&check));
    let written = report::write_all(&check, report_dir)?;
    for p in written {
        println!("wrote {}", p.display());
    }
    Ok(check.failed())
}

/// How long one case may take in a worker, the first case of a decoder layer reading and
/// converting that layer too (a 70B layer's take seconds, not minutes).
const WORKER_CASE_TIMEOUT: Duration = Duration::from_secs(300);

/// A GPU's launches go to the runner's fault-isolated workers: a kernel that faults the device
/// or kills its process becomes one FAULT verdict and the check goes on (docs/check-model.md).
fn workers(
    target: RunTarget,
    dir: &Path,
    report_dir: &Path,
    sources: &KernelSources,
    cases_dir: Option<&Path>,
    config: KernelConfig,
    opts: &CheckModelOptions,
) -> Result<ModelWorkers, CliError> {
    Ok(ModelWorkers {
        exe: std::env::current_exe().map_err(CliError::CurrentExe)?,
        spec: WorkerSpec {
            cases_dir: cases_dir.map(Path::to_path_buf),
            target: Some(target),
            kernel_sources: sources.as_dir_arg().map(Path::to_path_buf),
            kernel_config: config,
            artifacts: Some(report_dir.join("artifacts")),
            reference: ReferenceChoice::Cpu,
            exact_allocations: false,
            emulator_sanitizer: None,
            device_ordinal: None,
            simulate: false,
            model: Some(isolated::launches(dir, opts)),
            abort_on: None,
        },
        per_case_timeout: WORKER_CASE_TIMEOUT,
    })
}
