//! `w4a16 bench`: the kernels' speed (or the MoE kernels'), the CPU side of a run
//! (`--cpu-side`), or the ISA emulator's speed (`--emulator`).

use super::args;
use super::exit::{CliError, Status};
use std::path::{Path, PathBuf};
use w4a16_cases::Case;
use w4a16_harness::report::FileError;
use w4a16_harness::runner::budget::RunBudget;
use w4a16_harness::runner::cli_run::{check_suites, choose, load_with_dir};
use w4a16_harness::runner::execute::ReferenceChoice;
use w4a16_harness::runner::session::SessionOptions;
use w4a16_harness::runner::{cpu_side, emulator_speed};
use w4a16_kernels::RunTarget;
use w4a16_kernels::target::Vendor;
use w4a16_select::config::KernelConfig;

/// `w4a16 bench`'s options.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Also write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Time the CPU side of the chosen suites instead of the kernels (no GPU needed).
    #[arg(long)]
    cpu_side: bool,
    /// The MoE benchmark instead: moe_align + moe against a loop of fused launches on the
    /// qwen3.5-35b-a3b experts at T 1, 16, 256, 2048.
    #[arg(long, conflicts_with = "cpu_side")]
    moe: bool,
    /// The ISA emulator's speed instead: the chosen suites (default: smoke) on `--target`
    /// (gfx1100, gfx1151 or gfx1201) in this process, as wave-instructions executed
    /// per second and wall time (no GPU needed). `--emulated` is its old spelling.
    #[arg(long, alias = "emulated", conflicts_with_all = ["cpu_side", "moe"])]
    emulator: bool,
    /// With `--emulator`: the emulator records which blocks of the machine code run, as
    /// `w4a16 coverage` has it do (what recording costs, docs/block-coverage.md).
    #[arg(long, requires = "emulator")]
    record_blocks: bool,
    /// With `--emulator`: count every launch's perf counters (docs/perf-counters.md), to measure
    /// what counting costs against a run without.
    #[arg(long, requires = "emulator")]
    count: bool,
    /// Suites for `--cpu-side` (repeatable; default: field).
    #[arg(long = "suite")]
    suites: Vec<String>,
    /// Only case ids matching this glob (`*` wildcards), for `--cpu-side`.
    #[arg(long)]
    filter: Option<String>,
    /// Time the cases of 1 layer in this many (picked by seed) and extrapolate; 1 times all.
    #[arg(long, default_value_t = 1)]
    every: usize,
    /// Threads for `--cpu-side` (default: every core here).
    #[arg(long)]
    threads: Option<usize>,
    /// Target whose selection and padding the stand-in follows.
    #[arg(long, default_value = "sm_90", value_parser = args::run_target())]
    target: RunTarget,
    /// For `--cpu-side`: the reference a CUDA runner uses, `gpu` (its products formed by the
    /// device, so not timed here: the f64 operands, the cross-check and the verification
    /// are) or `cpu` (the whole f64 reference on this machine).
    #[arg(long, default_value = "gpu", value_parser = args::named::<ReferenceChoice>())]
    reference: ReferenceChoice,
    /// Compile the kernels from the HIP sources in DIR (see `run --kernel-sources`).
    #[arg(long, value_name = "DIR", conflicts_with = "cpu_side")]
    kernel_sources: Option<PathBuf>,
}

pub fn bench(
    args: BenchArgs,
    cases: Option<PathBuf>,
    config: KernelConfig,
) -> Result<Status, CliError> {
    if args.emulator {
        return emulator(args, cases, config);
    }
    if args.cpu_side {
        return cpu_side(args, cases, config);
    }
    let sources = args::kernel_sources("--kernel-sources", args.kernel_sources.as_deref())?;
    let code = if args.moe {
        w4a16_harness::bench::moe::cli(args.json.as_deref(), &sources)
    } else {
        w4a16_harness::bench::cli(args.json.as_deref(), &sources)
    };
    Ok(Status::of_exit_code(code))
}

/// `--emulator`: the chosen suites on the ISA emulator, in this process.
fn emulator(
    args: BenchArgs,
    cases: Option<PathBuf>,
    config: KernelConfig,
) -> Result<Status, CliError> {
    let target = args.target;
    if target.target.vendor() != Vendor::Amd || target.is_emulated() {
        return Err(CliError::NotAnEmulatorTarget { target });
    }
    let (dir, set) = load_with_dir(cases)?;
    let suites = or_default(args.suites, "smoke");
    check_suites(&set, &suites)?;
    let budget = RunBudget::of(target, Some(w4a16_device::DeviceKind::Emulator), &set);
    let (chosen, left_out): (Vec<&Case>, Vec<&Case>) =
        choose(&set, &suites, args.filter.as_deref())
            .into_iter()
            .partition(|c| budget.admits(c));
    if !left_out.is_empty() {
        eprintln!(
            "w4a16: {} cases above the ISA emulator's budget left out, as a run leaves them",
            left_out.len()
        );
    }
    let sources = args::kernel_sources("--kernel-sources", args.kernel_sources.as_deref())?;
    let mut request = w4a16_device::DeviceRequest::emulator(target.target).with_sources(sources);
    if args.record_blocks {
        request = request.recording_blocks();
    }
    let device = match w4a16_device::open(request) {
        Ok(d) => d,
        Err(skip) => {
            w4a16_harness::require::announce_skip(skip.requirement.name(), &skip.reason);
            return Ok(Status::Passed);
        }
    };
    if args.count {
        device.count_launches(true);
        eprintln!("w4a16: counting every launch's perf counters (bench --count)");
    }
    let mut opts = SessionOptions::new(dir, target);
    opts.config = config;
    opts.artifacts = None;
    let speed = emulator_speed::measure(&set, &chosen, &opts, device)?;
    print!("{speed}");
    if let Some(path) = &args.json {
        write_json(path, &speed)?;
    }
    Ok(Status::passed_if(speed.failing == 0))
}

/// `--cpu-side`: the chosen suites' CPU side with a stand-in device.
fn cpu_side(
    args: BenchArgs,
    cases: Option<PathBuf>,
    config: KernelConfig,
) -> Result<Status, CliError> {
    let (dir, set) = load_with_dir(cases)?;
    let suites = or_default(args.suites, "field");
    check_suites(&set, &suites)?;
    if args.every == 0 {
        return Err(CliError::EveryZero);
    }
    let chosen = choose(&set, &suites, args.filter.as_deref());
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let mut opts = SessionOptions::new(dir, args.target);
    opts.config = config;
    opts.reference = args.reference;
    let report = cpu_side::measure(&set, &chosen, &opts, args.every, threads)?;
    print!("{report}");
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    Ok(Status::Passed)
}

/// `suites`, or the one named `default` when none was given.
fn or_default(suites: Vec<String>, default: &str) -> Vec<String> {
    if suites.is_empty() {
        vec![default.to_string()]
    } else {
        suites
    }
}

/// `--json FILE`: the report, pretty-printed, with a final newline.
fn write_json(path: &Path, report: &impl serde::Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(report)?;
    FileError::at(path, std::fs::write(path, text + "\n"))?;
    Ok(())
}
