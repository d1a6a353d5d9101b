//! `w4a16 repro CASE`: exactly one case, in this process, its verdicts and seeds printed and
//! its artifacts written.

use super::args::{self, TargetArg};
use super::exit::{CliError, Status};
use std::path::PathBuf;
use w4a16_device::Allocation;
use w4a16_harness::runner::Summary;
use w4a16_harness::runner::budget::CaseBudget;
use w4a16_harness::runner::cli_run::{load_with_dir, require_gpu_checks};
use w4a16_harness::runner::session::{self, SessionOptions};
use w4a16_kernels::source::KernelSources;
use w4a16_reference::data::{case_seed, layer_key};
use w4a16_select::config::KernelConfig;

/// `w4a16 repro`'s options.
#[derive(clap::Args)]
pub struct ReproArgs {
    case: String,
    /// `auto` (the GPU found here) or a target.
    #[arg(long, default_value = "auto", value_parser = args::target_or_auto())]
    target: TargetArg,
    #[arg(long, default_value = "target/w4a16-report/artifacts")]
    artifacts: PathBuf,
    /// Compile the kernels from the HIP sources in DIR (see `run --kernel-sources`).
    #[arg(long, value_name = "DIR")]
    kernel_sources: Option<PathBuf>,
}

pub fn repro(
    args: ReproArgs,
    cases: Option<PathBuf>,
    config: KernelConfig,
) -> Result<Status, CliError> {
    let sources = args::kernel_sources("--kernel-sources", args.kernel_sources.as_deref())?;
    let (dir, set) = load_with_dir(cases)?;
    let c = set.case(&args.case).ok_or_else(|| CliError::UnknownCase {
        id: args.case.clone(),
    })?;
    let (target, backend) =
        session::open_backend_with(args.target.run_target(), &sources, Allocation::Guarded);
    if sources != KernelSources::Embedded {
        println!("{sources}");
    }
    println!(
        "case {}  seed {:#018x}  layer seed {:#018x}  target {target}",
        c.id,
        case_seed(&c.id),
        case_seed(&layer_key(&c.id))
    );
    let budget = CaseBudget::of(target, backend.device_kind(), set.suite(&c.suite));
    if !budget.admits(c) {
        eprintln!(
            "w4a16: {} is above {budget} on {target}; it runs here because it was asked for, and may outlive the hang watchdog",
            c.id
        );
    }
    let mut opts = SessionOptions::new(dir, target);
    opts.config = config;
    opts.artifacts = Some(args.artifacts);
    let mut verdicts = session::run_in_process(&set, &[c], &backend, &opts, &|_| {})?.verdicts;
    require_gpu_checks(&mut verdicts);
    for v in &verdicts {
        println!(
            "{:<8} {:<28} {} {}",
            v.outcome.name(),
            v.check,
            v.bucket.as_deref().unwrap_or(""),
            v.detail
        );
    }
    Ok(Status::passed_if(Summary::of(&verdicts).failures() == 0))
}
