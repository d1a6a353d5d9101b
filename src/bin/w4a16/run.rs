//! `w4a16 run`: its options, handed to [`cli_run::run`] as they are.

use super::args::{self, SnapshotArg, TargetArg};
use super::exit::{CliError, Status};
use std::path::PathBuf;
use std::time::Duration;
use w4a16_harness::runner::cli_run::{self, RunOptions};
use w4a16_harness::runner::execute::ReferenceChoice;
use w4a16_harness::runner::gpus::Gpus;
use w4a16_harness::runner::shard::ShardSpec;
use w4a16_harness::runner::verdict::SanitizerTool;
use w4a16_select::config::KernelConfig;

/// `w4a16 run`'s options.
#[derive(clap::Args)]
pub struct RunArgs {
    /// Suites to run (repeatable; default: all).
    #[arg(long = "suite")]
    suites: Vec<String>,
    /// Only case ids matching this glob (`*` wildcards).
    #[arg(long)]
    filter: Option<String>,
    /// `auto` (the GPU found here) or a target; `gfxNNNN-emu` runs that AMD target's
    /// configuration emulated on an NVIDIA GPU.
    #[arg(long, default_value = "auto", value_parser = args::target_or_auto())]
    target: TargetArg,
    /// Worker processes in all (each isolates faults; the CPU verification overlaps), dealt
    /// round-robin over the devices of --gpus; at least one per device.
    #[arg(long, default_value_t = args::default_jobs())]
    jobs: usize,
    /// The GPUs to run on: `all` (every device the backend sees) or ordinals like `0,1`
    /// (default: device 0). Whole layers are dealt to workers; verdicts, reports and
    /// snapshots are the same for any number of GPUs. Only CUDA and ROCm devices are bound:
    /// on the ISA emulator `all` is ignored loudly and a list of ordinals refused.
    #[arg(long, value_name = "all|0,1,…")]
    gpus: Option<Gpus>,
    /// Where the JSON, JUnit XML and Markdown reports and failure artifacts go.
    #[arg(long, default_value = args::REPORT_DIR)]
    report_dir: PathBuf,
    /// Record (`update`) or compare (`check`) the verdict snapshots per suite for the target:
    /// a difference prints a compact diff, writes `<name>.snap.new` and fails the run.
    #[arg(long, value_enum, default_value_t = SnapshotArg::Off)]
    snapshot: SnapshotArg,
    /// Folder of the verdict snapshots (default: `snapshots/` beside the cases folder).
    #[arg(long, value_name = "DIR")]
    snapshots: Option<PathBuf>,
    /// Run GPU cases in this process (no fault isolation; for debugging).
    #[arg(long)]
    in_process: bool,
    /// Per-case watchdog for isolated workers, seconds.
    #[arg(long, default_value_t = 120)]
    case_timeout: u64,
    /// Run the GPU workers under NVIDIA's compute-sanitizer with this tool and exact-size
    /// allocations; its first report against a kernel fails the case. Elsewhere a loud skip.
    #[arg(long, value_parser = args::named::<SanitizerTool>())]
    sanitize: Option<SanitizerTool>,
    /// Compile the kernels from the HIP sources in DIR (compat.h, skinny.hip, fused.hip,
    /// dequant.hip, fallback.hip) instead of the copies built into this binary.
    #[arg(long, value_name = "DIR")]
    kernel_sources: Option<PathBuf>,
    /// Stop at the first failing check: cases not yet started are not run.
    #[arg(long)]
    fail_fast: bool,
    /// Where the reference's products are formed: `gpu` (the device's f64 GEMM; every
    /// element of every shape judged) or `cpu` (the f64 CPU reference, Freivalds plus sampled
    /// lines for large layers). Default: `gpu` where a CUDA device is open, else `cpu`.
    #[arg(long, value_parser = args::named::<ReferenceChoice>())]
    reference: Option<ReferenceChoice>,
    /// Run share I of N (1-based) of the chosen cases, whole layers, the same split on every
    /// machine; combine the shards' report folders with `w4a16 merge`.
    #[arg(long, value_name = "I/N")]
    shard: Option<ShardSpec>,
}

pub fn run(
    args: RunArgs,
    cases: Option<PathBuf>,
    config: KernelConfig,
) -> Result<Status, CliError> {
    let sources = args::kernel_sources("--kernel-sources", args.kernel_sources.as_deref())?;
    let end = cli_run::run(RunOptions {
        cases_dir: w4a16_cases::locate(cases)?,
        suites: args.suites,
        filter: args.filter,
        target: args.target.run_target(),
        jobs: args.jobs,
        gpus: args.gpus.unwrap_or_default(),
        report_dir: args.report_dir,
        snapshot: args.snapshot.mode(),
        snapshots: args.snapshots,
        in_process: args.in_process,
        case_timeout: Duration::from_secs(args.case_timeout),
        sanitize: args.sanitize,
        sources,
        fail_fast: args.fail_fast,
        config,
        worker_exe: None,
        reference: args.reference,
        shard: args.shard,
    })?;
    Ok(Status::passed_if(end.passed()))
}
