//! The `w4a16` command line: `run` (the main job), `select`, `cases`, `repro`, `bench`,
//! `perf` (speed against per-target goldens), `mutants` (the harness's own mutation score).

#[path = "w4a16/args.rs"]
mod args;
#[path = "w4a16/check_model.rs"]
mod check_model;

use args::TargetArg;
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use w4a16_cases::{Case, CaseSet};
use w4a16_device::{Allocation, Health};
use w4a16_harness::mutants;
use w4a16_harness::perf::PerfError;
use w4a16_harness::perf::golden::GoldenFile;
use w4a16_harness::perf::judge::{self, CaseOutcome, JudgePolicy, Judgement};
use w4a16_harness::perf::measure::{PerfPlan, measure_suite, perf_cases};
use w4a16_harness::perf::peers::{self, PeerCase};
use w4a16_harness::perf::report::{self as perf_report, PerfRun};
use w4a16_harness::perf::update;
use w4a16_harness::runner::budget::{CaseBudget, RunBudget};
use w4a16_harness::runner::cli_run::{
    self, RunOptions, check_suites, choose, load_with_dir, require_gpu_checks, snapshots,
};
use w4a16_harness::runner::execute::ReferenceChoice;
use w4a16_harness::runner::gpus::Gpus;
use w4a16_harness::runner::session::{self, Backend, SessionOptions};
use w4a16_harness::runner::shard::{self, ShardSpec};
use w4a16_harness::runner::snapshot::{LeftOut, SnapshotFile, SnapshotMode};
use w4a16_harness::runner::verdict::SanitizerTool;
use w4a16_harness::runner::{
    Cause, Check, Outcome, PhaseTimes, Summary, Verdict, WorkerFailure, cpu_side, isolate, snapshot,
};
use w4a16_kernels::mutants::{Catalogue, Mutant};
use w4a16_kernels::source::KernelSources;
use w4a16_kernels::target::Vendor;
use w4a16_kernels::{KernelId, RunTarget, Target};
use w4a16_reference::ActDtype;
use w4a16_reference::layer::{LayerShape, Symmetry};
use w4a16_select::LayerRequest;
use w4a16_select::config::{self, KernelConfig};

#[derive(Parser)]
#[command(name = "w4a16", about = "Correctness and differential testing for W4A16 GPU kernels", after_help = KERNEL_CONFIG_HELP)]
struct Cli {
    /// Folder of case files (default: `cases/` of the repository this runs in).
    #[arg(long, global = true)]
    cases: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

const KERNEL_CONFIG_HELP: &str = "Kernel configuration (run, select, repro): --kernel-config '{\"rdna_hybrid_w4a16_prefill_dequant\": \"enable\"}' or --kernel-config.rdna_hybrid_w4a16_prefill_dequant enable";

#[derive(Subcommand)]
enum Command {
    /// Run suites: every check this machine can run; GPU-bound ones skip loudly without a GPU.
    Run {
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
        #[arg(long, default_value_t = default_jobs())]
        jobs: usize,
        /// The GPUs to run on: `all` (every device the backend sees) or ordinals like `0,1`
        /// (default: device 0). Whole layers are dealt to workers; verdicts, reports and
        /// snapshots are the same for any number of GPUs. Only CUDA and ROCm devices are bound:
        /// on the ISA emulator `all` is ignored loudly and a list of ordinals refused.
        #[arg(long, value_name = "all|0,1,…")]
        gpus: Option<Gpus>,
        /// Where the JSON, JUnit XML and Markdown reports and failure artifacts go.
        #[arg(long, default_value = "target/w4a16-report")]
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
    },
    /// Combine the report folders of `run --shard I/N` jobs into the report.json, JUnit,
    /// summary and verdict snapshots one unsharded run writes. Refuses overlapping or missing
    /// shards and shards of different suites, targets or commits. Exit 1 as `run` would.
    Merge {
        /// The shards' report folders, one per shard, in any order.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        /// Where the merged reports go (`snapshots/` inside it gets the merged snapshot files).
        #[arg(long, default_value = "target/w4a16-report")]
        out: PathBuf,
        /// Compare (`check`) or record (`update`) the merged verdict snapshots, as `run` does.
        #[arg(long, value_enum, default_value_t = SnapshotArg::Off)]
        snapshot: SnapshotArg,
        /// Folder of the verdict snapshots (default: `snapshots/` beside the cases folder).
        #[arg(long, value_name = "DIR")]
        snapshots: Option<PathBuf>,
    },
    /// Measure the harness's detection power: run suites against every seeded bug of
    /// `kernels/mutants/*.toml` and report the kill rate per suite and per bug class.
    Mutants {
        /// Suites, in the order they run (repeatable; default: smoke, kernels, edges).
        #[arg(long = "suite")]
        suites: Vec<String>,
        /// Only mutant ids matching one of these globs (`*` wildcards; repeatable).
        #[arg(long)]
        only: Vec<String>,
        /// The unmutated sources (default: the copies built into this binary).
        #[arg(long, value_name = "DIR")]
        kernel_sources_base: Option<PathBuf>,
        /// The Markdown table (default: bench/mutants-<target>.md); the JSON goes next to it.
        #[arg(long)]
        out: Option<PathBuf>,
        /// The catalogue folder (default: kernels/mutants next to the cases folder).
        #[arg(long)]
        catalogue: Option<PathBuf>,
        /// `auto` (the GPU found here) or a target.
        #[arg(long, default_value = "auto", value_parser = args::target_or_auto())]
        target: TargetArg,
        /// Worker processes of each suite run.
        #[arg(long, default_value_t = default_jobs())]
        jobs: usize,
        /// Run every suite on every mutant (default: stop at the first suite that kills it).
        #[arg(long)]
        each_suite: bool,
        /// Also run the mutants the catalogue marks equivalent (a kill is then flagged).
        #[arg(long)]
        run_equivalent: bool,
        /// Mutated source trees, run reports and logs.
        #[arg(long, default_value = "target/w4a16-mutants")]
        work_dir: PathBuf,
        /// Per-case watchdog of the suite runs, seconds (a mutant may hang a kernel).
        #[arg(long, default_value_t = 60)]
        case_timeout: u64,
    },
    /// Print the path the selection takes for one layer call, with every rejection's reason.
    Select {
        /// The target whose selection rules apply (an emulated target's are its AMD target's).
        #[arg(long, default_value = "gfx1151", value_parser = args::run_target())]
        target: RunTarget,
        #[arg(long)]
        m: usize,
        #[arg(long)]
        k: usize,
        #[arg(long)]
        n: usize,
        #[arg(long, default_value_t = 128)]
        group: usize,
        #[arg(long, default_value = "f16", value_parser = args::named::<ActDtype>())]
        dtype: ActDtype,
        #[arg(long)]
        asym: bool,
        #[arg(long)]
        bias: bool,
    },
    /// List suites and their case counts.
    Cases,
    /// Rerun exactly one case (in this process), print its verdicts and seed, write artifacts.
    Repro {
        case: String,
        /// `auto` (the GPU found here) or a target.
        #[arg(long, default_value = "auto", value_parser = args::target_or_auto())]
        target: TargetArg,
        #[arg(long, default_value = "target/w4a16-report/artifacts")]
        artifacts: PathBuf,
        /// Compile the kernels from the HIP sources in DIR (see `run --kernel-sources`).
        #[arg(long, value_name = "DIR")]
        kernel_sources: Option<PathBuf>,
    },
    /// Speed on the first GPU that opens: `skinny` (M 1..5) against the device's copy
    /// bandwidth and `fused` (M 2048) against the vendor BLAS, K 4096, N 14336; the table
    /// goes to stdout.
    /// With `--cpu-side`: what the CPU side of a run (data, conversion, reference and
    /// verification) costs on this machine, with a stand-in device that computes nothing.
    Bench {
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
        /// (gfx1100, gfx1151 or gfx1201) in this process, as emulated wave-instructions per
        /// second and wall time (no GPU needed).
        #[arg(long, conflicts_with_all = ["cpu_side", "moe"])]
        emulated: bool,
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
    },
    /// Perf mode: time the selected path of every dense case of a suite with cold inputs and
    /// judge each against the target's goldens (`perf/<target>.json`) through its ratio to a
    /// control measured beside it (the copy ceiling for M <= 5, the vendor BLAS above), and
    /// against a control build case by case. Exit 1 when a case fails.
    Perf(PerfArgs),
    /// Check a quantized Hugging Face model directory layer by layer: each quantized linear
    /// (and each fused q|k|v, gate|up projection) read from its shards, checked against its
    /// producer's own semantics, selected, validated and run through the selected kernels and
    /// the fallback at each batch size. Without a GPU the format, selection and contract
    /// checks still run. Exit 1 on any refusal or failure.
    CheckModel(check_model::CheckModelArgs),
    /// Compare (or record) the verdict snapshots of a finished run from its report.json, e.g.
    /// one a GPU machine sent back. Exit 1 when a snapshot differs under `check`.
    Snapshots {
        /// The run's report (its target and verdicts).
        #[arg(long, default_value = "target/w4a16-report/report.json")]
        report: PathBuf,
        /// Record the snapshots that differ instead of comparing (writes `.snap` files).
        #[arg(long)]
        update: bool,
        /// Folder of the verdict snapshots (default: `snapshots/` beside the cases folder).
        #[arg(long, value_name = "DIR")]
        snapshots: Option<PathBuf>,
        /// The run was under compute-sanitizer with this tool (its snapshots are its own).
        #[arg(long, value_parser = args::named::<SanitizerTool>())]
        sanitize: Option<SanitizerTool>,
    },
    /// Internal: the fault-isolated GPU worker (case ids on stdin, framed verdicts on stdout).
    #[command(hide = true)]
    Worker {
        #[arg(long, value_parser = args::target_or_auto())]
        target: Option<TargetArg>,
        #[arg(long)]
        kernel_config_json: Option<String>,
        #[arg(long)]
        artifacts: Option<PathBuf>,
        /// Self-test mode: ids containing `crash` abort, `hang` never finish, others pass.
        #[arg(long)]
        simulate: bool,
        /// Allocate every tensor at exactly its view's size, no guard bands (sanitizer runs).
        #[arg(long)]
        exact_allocations: bool,
        #[arg(long)]
        kernel_sources: Option<PathBuf>,
        /// As the parent resolved it (`cpu` when absent).
        #[arg(long, value_parser = args::named::<ReferenceChoice>())]
        reference: Option<ReferenceChoice>,
        /// The device this worker is bound to (`run --gpus`); default device 0.
        #[arg(long)]
        device_ordinal: Option<usize>,
    },
}

/// `w4a16 perf`'s options.
#[derive(clap::Args)]
struct PerfArgs {
    /// The suite whose dense cases are timed.
    #[arg(long, default_value = "field")]
    suite: String,
    /// Only case ids matching this glob (`*` wildcards).
    #[arg(long, visible_alias = "only")]
    filter: Option<String>,
    /// `auto` (the GPU found here) or a native target; emulated targets are refused.
    #[arg(long, default_value = "auto", value_parser = args::target_or_auto())]
    target: TargetArg,
    /// Folder of the golden files `<target>.json` (default: `perf/` beside the cases folder).
    #[arg(long, value_name = "DIR")]
    goldens: Option<PathBuf>,
    /// Where summary.md, the JSON, the JUnit XML and the plot go (default: target/perf/<target>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
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
    update_goldens: bool,
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
    /// Also time torch's int4 kernel and dense fp16 on the same cases (scripts/perf-peers.py).
    #[arg(long)]
    peers: bool,
}

/// `run --snapshot`: no snapshots, or as [`SnapshotMode`].
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SnapshotArg {
    Off,
    Check,
    Update,
}

impl SnapshotArg {
    fn mode(self) -> Option<SnapshotMode> {
        match self {
            SnapshotArg::Off => None,
            SnapshotArg::Check => Some(SnapshotMode::Check),
            SnapshotArg::Update => Some(SnapshotMode::Update),
        }
    }
}

fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).clamp(1, 8))
}

fn main() -> ExitCode {
    let raw: Vec<String> = std::env::args().collect();
    // The kernel-config flags have a dotted form clap cannot express: take them out first.
    let parsed = match config::parse_args(&raw[1..]) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let cli = Cli::parse_from(std::iter::once(raw[0].clone()).chain(parsed.rest));
    match run(cli, parsed.config) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli, config: KernelConfig) -> Result<ExitCode, String> {
    match cli.command {
        Command::CheckModel(args) => check_model::check_model(args, cli.cases, config),
        Command::Merge {
            dirs,
            out,
            snapshot: mode,
            snapshots: explicit,
        } => {
            let snapshot = match mode.mode() {
                None => None,
                Some(mode) => Some((
                    mode,
                    match explicit {
                        Some(dir) => dir,
                        None => snapshot::snapshot_dir(
                            None,
                            &w4a16_cases::locate(cli.cases).map_err(|e| e.to_string())?,
                        ),
                    },
                )),
            };
            let end = shard::merge_command(
                &dirs,
                &out,
                snapshot.as_ref().map(|(m, d)| (*m, d.as_path())),
            )?;
            Ok(if end.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Snapshots {
            report,
            update,
            snapshots: explicit,
            sanitize,
        } => {
            let mode = match update {
                true => SnapshotMode::Update,
                false => SnapshotMode::Check,
            };
            snapshots_of_report(&report, mode, explicit, sanitize, cli.cases)
        }
        Command::Worker {
            target,
            kernel_config_json,
            artifacts,
            simulate,
            exact_allocations,
            kernel_sources,
            reference,
            device_ordinal,
        } => {
            if simulate {
                let lost = std::cell::Cell::new(false);
                isolate::serve_until(
                    |id| simulated(id, device_ordinal, &lost),
                    || lost.get().then(|| "simulated device lost".to_string()),
                )
                .map_err(|e| e.to_string())?;
                return Ok(ExitCode::SUCCESS);
            }
            let (dir, set) = load_with_dir(cli.cases)?;
            let config = match kernel_config_json {
                Some(j) => KernelConfig::from_json(&j).map_err(|e| e.to_string())?,
                None => config,
            };
            let sources = kernel_sources_arg(kernel_sources.as_deref())?;
            let allocation = if exact_allocations {
                Allocation::Exact
            } else {
                Allocation::Guarded
            };
            let (target, backend) = session::open_backend_at(
                target.and_then(TargetArg::run_target),
                device_ordinal.unwrap_or(0),
                &sources,
                allocation,
            );
            // A device that sizes every buffer exactly anyway (the ISA emulator) serves both.
            if let Backend::Device(d) = &backend
                && allocation == Allocation::Exact
                && d.allocation() != Allocation::Exact
            {
                return Err(format!(
                    "--exact-allocations: {} cannot size buffers exactly",
                    d.name()
                ));
            }
            let mut opts = SessionOptions::new(dir, target);
            opts.config = config;
            opts.artifacts = artifacts;
            opts.reference = match &backend {
                Backend::Device(d) => ReferenceChoice::resolve(
                    Some(reference.unwrap_or(ReferenceChoice::Cpu)),
                    Some(d.as_ref()),
                )?,
                Backend::None(_) => ReferenceChoice::Cpu,
            };
            // A lost device (sticky fault, hang) would fault every later case: retire instead,
            // and the parent starts a fresh worker for the rest.
            let retire = || match &backend {
                Backend::Device(d) => match d.health() {
                    Health::Lost { cause } => Some(cause),
                    Health::Ok => None,
                },
                Backend::None(_) => None,
            };
            isolate::serve_until(
                |id| {
                    let failed = |check: Check, cause: Cause| {
                        let v = Verdict::new(id, check, Outcome::Fail).because(cause);
                        (vec![v], PhaseTimes::default())
                    };
                    match set.case(id) {
                        Some(case) => {
                            match session::run_in_process(&set, &[case], &backend, &opts, &|_| {}) {
                                Ok(out) => (out.verdicts, out.times),
                                Err(error) => failed(
                                    Check::Session,
                                    Cause::Worker(WorkerFailure::Session { error }),
                                ),
                            }
                        }
                        None => failed(
                            Check::Case,
                            Cause::Worker(WorkerFailure::UnknownCase { id: id.to_string() }),
                        ),
                    }
                },
                retire,
            )
            .map_err(|e| e.to_string())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench {
            json,
            emulated: true,
            suites,
            filter,
            target,
            kernel_sources,
            ..
        } => {
            if target.target.vendor() != Vendor::Amd || target.is_emulated() {
                return Err(format!(
                    "--target: the ISA emulator runs gfx1100, gfx1151 or gfx1201 code objects, not {target}"
                ));
            }
            let (dir, set) = load_with_dir(cli.cases)?;
            let suites = if suites.is_empty() {
                vec!["smoke".to_string()]
            } else {
                suites
            };
            check_suites(&set, &suites)?;
            let budget = RunBudget::of(target, Some(w4a16_device::DeviceKind::Emulator), &set);
            let (chosen, left_out): (Vec<&Case>, Vec<&Case>) =
                choose(&set, &suites, filter.as_deref())
                    .into_iter()
                    .partition(|c| budget.admits(c));
            if !left_out.is_empty() {
                eprintln!(
                    "w4a16: {} cases above the ISA emulator's budget left out, as a run leaves them",
                    left_out.len()
                );
            }
            let sources = kernel_sources_arg(kernel_sources.as_deref())?;
            let request = w4a16_device::DeviceRequest::emulator(target.target);
            let device = match w4a16_device::open(request.with_sources(sources)) {
                Ok(d) => d,
                Err(skip) => {
                    w4a16_harness::require::announce_skip(skip.requirement.name(), &skip.reason);
                    return Ok(ExitCode::SUCCESS);
                }
            };
            let mut opts = SessionOptions::new(dir, target);
            opts.config = config;
            opts.artifacts = None;
            let speed =
                w4a16_harness::runner::emulator_speed::measure(&set, &chosen, &opts, device)?;
            print!("{speed}");
            if let Some(path) = json {
                let text = serde_json::to_string_pretty(&speed).map_err(|e| e.to_string())?;
                std::fs::write(&path, text + "\n")
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
            Ok(if speed.failing == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Bench {
            json,
            cpu_side: false,
            moe: true,
            kernel_sources,
            ..
        } => Ok(w4a16_harness::bench::moe::cli(
            json.as_deref(),
            &kernel_sources_arg(kernel_sources.as_deref())?,
        )),
        Command::Bench {
            json,
            cpu_side: false,
            kernel_sources,
            ..
        } => Ok(w4a16_harness::bench::cli(
            json.as_deref(),
            &kernel_sources_arg(kernel_sources.as_deref())?,
        )),
        Command::Bench {
            json,
            cpu_side: true,
            moe: _,
            emulated: _,
            suites,
            filter,
            every,
            threads,
            target,
            reference,
            kernel_sources: _,
        } => {
            let (dir, set) = load_with_dir(cli.cases)?;
            let suites = if suites.is_empty() {
                vec!["field".to_string()]
            } else {
                suites
            };
            check_suites(&set, &suites)?;
            if every == 0 {
                return Err("--every: expected 1 or more".into());
            }
            let chosen = choose(&set, &suites, filter.as_deref());
            let threads = threads.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
            });
            let mut opts = SessionOptions::new(dir, target);
            opts.config = config;
            opts.reference = reference;
            let report = cpu_side::measure(&set, &chosen, &opts, every, threads)?;
            print!("{report}");
            if let Some(path) = json {
                let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
                std::fs::write(&path, text + "\n")
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Mutants {
            suites,
            only,
            kernel_sources_base,
            out,
            catalogue,
            target,
            jobs,
            each_suite,
            run_equivalent,
            work_dir,
            case_timeout,
        } => {
            let (dir, set) = load_with_dir(cli.cases)?;
            let suites = if suites.is_empty() {
                ["smoke", "kernels", "edges"].map(String::from).to_vec()
            } else {
                suites
            };
            check_suites(&set, &suites)?;
            let base = kernel_sources_arg(kernel_sources_base.as_deref())?;
            let catalogue_dir = catalogue.unwrap_or_else(|| {
                let here = dir.parent().map(|r| r.join("kernels").join("mutants"));
                here.filter(|d| d.is_dir())
                    .unwrap_or_else(w4a16_kernels::mutants::catalogue_dir)
            });
            let cat = Catalogue::load(&catalogue_dir).map_err(|e| e.to_string())?;
            cat.check_coverage().map_err(|e| e.to_string())?;
            cat.check_against(&base).map_err(|e| e.to_string())?;
            let chosen: Vec<&Mutant> = cat
                .mutants
                .iter()
                .filter(|m| {
                    only.is_empty() || only.iter().any(|g| w4a16_cases::glob::glob_match(g, &m.id))
                })
                .collect();
            if chosen.is_empty() {
                return Err(format!(
                    "--only {only:?}: no mutant id matches (see {})",
                    catalogue_dir.display()
                ));
            }
            let (target, backend) = session::open_backend(target.run_target());
            if let Backend::None(skip) = &backend {
                // Without the GPU nothing is measured: a loud skip, and no table.
                eprintln!(
                    "W4A16-SKIP [{}] w4a16 mutants: {}; no table written ({} mutants not run)",
                    skip.requirement,
                    skip.reason,
                    chosen.len()
                );
                return Ok(if skip.requirement.is_required() {
                    ExitCode::FAILURE
                } else {
                    ExitCode::SUCCESS
                });
            }
            drop(backend);
            let out = out.unwrap_or_else(|| {
                PathBuf::from("bench").join(format!("mutants-{}.md", target.name()))
            });
            let plan = mutants::Plan {
                runner: mutants::SuiteRunner {
                    exe: std::env::current_exe().map_err(|e| e.to_string())?,
                    cases_dir: Some(dir.clone()),
                    target: target.name().to_string(),
                    jobs,
                    case_timeout: Duration::from_secs(case_timeout),
                },
                suites,
                base,
                work: work_dir,
                each_suite,
                run_equivalent,
                // The NVRTC compile check, with an emulated target's macros where it has them.
                nvrtc_arch: (target.executing_vendor() == Vendor::Nvidia)
                    .then(|| Target::Sm90.name().to_string()),
                nvrtc_extra: target.nvrtc_options().map_err(|e| e.to_string())?,
            };
            eprintln!(
                "w4a16 mutants: {} mutants × {} on {target}; baseline first",
                chosen.len(),
                plan.suites.join(" + ")
            );
            let n = chosen.len();
            let mut i = 0usize;
            let mut report = mutants::measure(&plan, &cat, &chosen, &mut |r| {
                i += 1;
                let what = match &r.status {
                    mutants::MutantStatus::Killed {
                        suite,
                        case_id,
                        check,
                        ..
                    } => format!("killed by {suite}: {case_id} [{check}]"),
                    mutants::MutantStatus::Survived { reason } => format!("SURVIVED ({reason})"),
                    mutants::MutantStatus::Stillborn { log } => format!("stillborn: {log}"),
                    mutants::MutantStatus::NotRunEquivalent => "equivalent, not run".into(),
                    mutants::MutantStatus::Error { reason } => format!("ERROR: {reason}"),
                };
                eprintln!("[{i}/{n}] {} ({:.1} s): {what}", r.id, r.wall_s);
            })
            .map_err(|e| e.to_string())?;
            report.command = format!(
                "w4a16 {}",
                std::env::args().skip(1).collect::<Vec<_>>().join(" ")
            );
            let md = report.markdown();
            if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            std::fs::write(&out, &md).map_err(|e| format!("{}: {e}", out.display()))?;
            let json_path = out.with_extension("json");
            let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
            std::fs::write(&json_path, json + "\n")
                .map_err(|e| format!("{}: {e}", json_path.display()))?;
            print!("{md}");
            println!("table: {}  json: {}", out.display(), json_path.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Perf(args) => perf_command(args, cli.cases, config),
        Command::Cases => {
            let set = load(cli.cases)?;
            print_counts(&set);
            Ok(ExitCode::SUCCESS)
        }
        Command::Select {
            target,
            m,
            k,
            n,
            group,
            dtype,
            asym,
            bias,
        } => {
            // Emulation only changes what runs on a GPU: the host side reads the AMD target.
            let target = target.target;
            let mut req = LayerRequest::new(
                LayerShape::new(n, k, group),
                m,
                dtype,
                if asym { Symmetry::Asym } else { Symmetry::Sym },
            );
            req.bias = bias;
            let sel = w4a16_select::select(target, &req, &config);
            println!("{}", w4a16_select::render(&sel));
            Ok(ExitCode::SUCCESS)
        }
        Command::Repro {
            case,
            target,
            artifacts,
            kernel_sources,
        } => {
            let sources = kernel_sources_arg(kernel_sources.as_deref())?;
            let (dir, set) = load_with_dir(cli.cases)?;
            let c = set
                .case(&case)
                .ok_or_else(|| format!("no case with id {case:?} (see `w4a16 cases`)"))?;
            let (target, backend) =
                session::open_backend_with(target.run_target(), &sources, Allocation::Guarded);
            if sources != KernelSources::Embedded {
                println!("{sources}");
            }
            println!(
                "case {}  seed {:#018x}  layer seed {:#018x}  target {target}",
                c.id,
                w4a16_reference::data::case_seed(&c.id),
                w4a16_reference::data::case_seed(&w4a16_reference::data::layer_key(&c.id))
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
            opts.artifacts = Some(artifacts);
            let mut verdicts =
                session::run_in_process(&set, &[c], &backend, &opts, &|_| {})?.verdicts;
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
            Ok(exit_for(&Summary::of(&verdicts)))
        }
        Command::Run {
            suites,
            filter,
            target,
            jobs,
            gpus,
            report_dir,
            snapshot,
            snapshots,
            in_process,
            case_timeout,
            sanitize,
            kernel_sources,
            fail_fast,
            reference,
            shard,
        } => {
            let sources = kernel_sources_arg(kernel_sources.as_deref())?;
            let end = cli_run::run(RunOptions {
                cases_dir: w4a16_cases::locate(cli.cases).map_err(|e| e.to_string())?,
                suites,
                filter,
                target: target.run_target(),
                jobs,
                gpus: gpus.unwrap_or_default(),
                report_dir,
                snapshot: snapshot.mode(),
                snapshots,
                in_process,
                case_timeout: Duration::from_secs(case_timeout),
                sanitize,
                sources,
                fail_fast,
                config,
                worker_exe: None,
                reference,
                shard,
            })?;
            Ok(if end.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

/// `--kernel-sources DIR`: the folder, checked for every file now (a missing one is named).
fn kernel_sources_arg(dir: Option<&Path>) -> Result<KernelSources, String> {
    match dir {
        None => Ok(KernelSources::Embedded),
        Some(d) => KernelSources::directory(d).map_err(|e| format!("--kernel-sources: {e}")),
    }
}

/// The `--simulate` worker: ids containing `crash` abort, `hang` never finish, `lose-device`
/// loses the (pretend) device after passing, `oob` prints a memcheck report against the
/// fallback kernel on stdout (as compute-sanitizer does); each passes a `fallback` check whose
/// detail is the worker's process id, and ` on device N` where the worker was bound to one.
fn simulated(
    id: &str,
    device_ordinal: Option<usize>,
    lost: &std::cell::Cell<bool>,
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

fn load(explicit: Option<PathBuf>) -> Result<CaseSet, String> {
    load_with_dir(explicit).map(|(_, set)| set)
}

fn print_counts(set: &CaseSet) {
    println!(
        "{:<14} {:>7} {:>7} {:>5} {:>10}  description",
        "suite", "cases", "shapes", "M", "providers"
    );
    for s in set.suites() {
        println!(
            "{:<14} {:>7} {:>7} {:>5} {:>10}  {}",
            s.name, s.cases, s.shapes, s.batch_sizes, s.providers, s.description
        );
    }
    println!("{:<14} {:>7}", "total", set.total_cases());
}

fn exit_for(s: &Summary) -> ExitCode {
    if s.failures() > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `w4a16 snapshots`: a finished run's report.json against the verdict snapshots. Its verdicts
/// must come from a GPU run: a skipped check would be recorded as one.
fn snapshots_of_report(
    report: &Path,
    mode: SnapshotMode,
    snapshots_dir: Option<PathBuf>,
    sanitize: Option<SanitizerTool>,
    cases: Option<PathBuf>,
) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(report).map_err(|e| format!("{}: {e}", report.display()))?;
    let expected = "a run's report.json (`target` and `verdicts`)";
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("{}: expected {expected}: {e}", report.display()))?;
    let target = json["target"]
        .as_str()
        .ok_or_else(|| format!("{}: expected {expected}: no `target`", report.display()))?;
    let Some(run_target) = RunTarget::parse(target) else {
        return Err(format!(
            "{}: target {target:?} is none of {}",
            report.display(),
            RunTarget::known_names().join(", ")
        ));
    };
    let verdicts: Vec<Verdict> = serde_json::from_value(json["verdicts"].clone())
        .map_err(|e| format!("{}: expected {expected}: `verdicts`: {e}", report.display()))?;
    if let Some(skip) = verdicts.iter().find(|v| v.outcome == Outcome::Skip) {
        return Err(format!(
            "{}: {} skipped checks (e.g. {} [{}]: {}): snapshots record runs on the target's GPU",
            report.display(),
            verdicts
                .iter()
                .filter(|v| v.outcome == Outcome::Skip)
                .count(),
            skip.case_id,
            skip.check,
            skip.detail
        ));
    }
    // One snapshot per suite of the run, as `run` writes them (run-wide checks have none).
    let suites = verdicts
        .iter()
        .filter(|v| !v.check.run_wide())
        .map(|v| v.case_id.split('/').next().unwrap_or_default());
    let device: Option<w4a16_device::DeviceKind> = match json.get("device") {
        None => None,
        Some(d) => Some(serde_json::from_value(d.clone()).map_err(|e| {
            format!(
                "{}: `device` {d}: expected cuda, rocm, emulator or simulated: {e}",
                report.display()
            )
        })?),
    };
    // The case files are read only where they are needed: for the snapshot folder beside them,
    // and for the cases a budgeted run (an emulator's) left out.
    let budgeted = CaseBudget::of(run_target, device, None)
        .interpreter()
        .is_some();
    let needed = |e: String| {
        format!("{e} (needed for the snapshot folder or for the cases a budgeted run left out)")
    };
    let (dir, set) = match snapshots_dir {
        Some(dir) if !budgeted => (dir, None),
        Some(dir) => (dir, Some(load(cases).map_err(needed)?)),
        None => {
            let (cases_dir, set) = load_with_dir(cases).map_err(needed)?;
            (snapshot::snapshot_dir(None, &cases_dir), Some(set))
        }
    };
    let files = suites.map(|s| {
        let left_out = set.as_ref().and_then(|set| {
            let budget = CaseBudget::of(run_target, device, set.suite(s));
            LeftOut::of(budget, s, set.cases())
        });
        SnapshotFile::new(s, target, sanitize)
            .recorded_by(device)
            .left_out(left_out)
    });
    let differing = snapshots(&dir, mode, files, &verdicts)?;
    if differing.is_empty() {
        println!(
            "verdict snapshots of {target}: {}",
            match mode {
                SnapshotMode::Check => "all unchanged",
                SnapshotMode::Update => "recorded",
            }
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "SNAPSHOTS DIFFER on {target}: {} (review the .snap.new files with `cargo insta review`, or record with --update)",
            differing.join(", ")
        );
        Ok(ExitCode::FAILURE)
    }
}

/// `--control DIR`: a kernel-source folder, or a repository checkout whose `kernels/hip` is one.
fn control_sources(dir: &Path) -> Result<KernelSources, String> {
    let hip = dir.join("kernels").join("hip");
    let dir = if hip.is_dir() { hip.as_path() } else { dir };
    KernelSources::directory(dir).map_err(|e| format!("--control: {e}"))
}

/// The commit this checkout is at, for the goldens' `recorded` line.
fn git_head(repo: &Path) -> String {
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
fn positive_fraction(flag: &str, value: Option<f64>) -> Result<Option<f64>, String> {
    match value {
        Some(v) if !(v.is_finite() && v > 0.0 && v < 1.0) => Err(format!(
            "{flag} {v}: expected a fraction between 0 and 1 (0.08 is ±8 %)"
        )),
        v => Ok(v),
    }
}

/// `w4a16 perf`: measure (candidate and control interleaved), judge against the goldens, the
/// peers beside them on request, the reports, and the goldens rewritten only on request.
fn perf_command(
    args: PerfArgs,
    cases_dir: Option<PathBuf>,
    config: KernelConfig,
) -> Result<ExitCode, String> {
    let plan = PerfPlan {
        reps: args.reps,
        warmup: args.warmup,
        copies: args.copies,
    }
    .checked()
    .map_err(|e| e.to_string())?;
    let band = positive_fraction("--band", args.band)?;
    let noise_limit = positive_fraction("--noise-limit", args.noise_limit)?;
    let wanted = args.target.run_target();
    if let Some(t) = wanted.filter(RunTarget::is_emulated) {
        return Err(PerfError::Emulated { target: t }.to_string());
    }
    let sources = kernel_sources_arg(args.kernel_sources.as_deref())?;
    let control_src = args.control.as_deref().map(control_sources).transpose()?;
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
            return Err(format!("--filter {f:?}: no case of {} matches", args.suite));
        }
    }

    let (target, backend) = session::open_backend_with(wanted, &sources, Allocation::Guarded);
    let candidate = match backend {
        Backend::Device(d) => d,
        // As `bench`: a loud skip, a failure under `W4A16_REQUIRE=gpu`.
        Backend::None(skip) if skip.requirement.is_required() => {
            eprintln!("W4A16_REQUIRE={} but {skip}", skip.requirement);
            return Ok(ExitCode::FAILURE);
        }
        Backend::None(skip) => {
            eprintln!(
                "W4A16-SKIP [{}] w4a16 perf: {}; nothing timed, no report written",
                skip.requirement, skip.reason
            );
            return Ok(ExitCode::SUCCESS);
        }
    };
    // Its own device object: its own module cache, so the two builds never share a kernel.
    let control = match &control_src {
        None => None,
        Some(src) => match session::open_backend_with(Some(target), src, Allocation::Guarded).1 {
            Backend::Device(d) => Some(d),
            Backend::None(skip) => {
                return Err(format!(
                    "--control: the control device did not open: {}",
                    skip.reason
                ));
            }
        },
    };
    let target_name = target.target.to_string();
    let device_name = candidate.name();
    let (cases, not_timed) = perf_cases(&suite, set.providers(), target.target, &config);
    eprintln!(
        "w4a16 perf: {} cases of {} on {} ({target_name}), {} not timed; candidate: {sources}{}",
        cases.len(),
        args.suite,
        candidate.name(),
        not_timed.len(),
        control_src
            .as_ref()
            .map_or(String::new(), |c| format!("; control: {c}"))
    );
    let measured = measure_suite(
        candidate.as_ref(),
        control.as_deref(),
        &cases,
        plan,
        &mut |s| eprintln!("perf: {s}"),
    )
    .map_err(|e| e.to_string())?;
    // Kernels done: the peers (torch, in its own process) get the GPU to themselves.
    drop((candidate, control));

    let goldens_dir = args.goldens.unwrap_or_else(|| repo.join("perf"));
    let golden_path = GoldenFile::path_for(&goldens_dir, &target_name);
    let goldens = GoldenFile::load(&golden_path).map_err(|e| e.to_string())?;
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
        .out
        .unwrap_or_else(|| PathBuf::from("target").join("perf").join(&target_name));
    let peers_note = if args.peers {
        let peer_cases: Vec<PeerCase> = cases
            .iter()
            .map(|c| PeerCase::new(c.key.clone(), &c.shape, c.dtype, c.symmetry))
            .collect();
        let script = repo.join("scripts").join("perf-peers.py");
        match peers::run_peers(&script, &peer_cases, plan, &out_dir.join("peers")) {
            Ok(table) => {
                for o in &mut outcomes {
                    o.peers = table.rows.get(&o.key).cloned();
                }
                Some(table.note())
            }
            Err(e) if e.is_unavailable() => {
                eprintln!("W4A16-SKIP [peers] {e}");
                Some(e.to_string())
            }
            Err(e) => return Err(e.to_string()),
        }
    } else {
        None
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
    let files = perf_report::write_reports(&run, &out_dir).map_err(|e| e.to_string())?;
    print!("{}", perf_counts(&run.outcomes));
    println!(
        "{failing} of {} cases fail; reports: {}, {}, {}, {}",
        run.outcomes.len(),
        files.summary_md.display(),
        files.json.display(),
        files.junit.display(),
        files.plot.display()
    );
    if goldens.is_none() {
        println!(
            "no goldens at {}: every case is `no golden` (record them with --update-goldens)",
            golden_path.display()
        );
    }
    if args.update_goldens {
        let recorded = format!(
            "{} w4a16 {}",
            git_head(&repo),
            std::env::args().skip(1).collect::<Vec<_>>().join(" ")
        );
        let scope = if args.filter.is_some() {
            update::UpdateScope::Filtered
        } else {
            update::UpdateScope::WholeSuite
        };
        let (new, moved) = update::update_goldens(goldens.as_ref(), &run, scope, recorded);
        std::fs::create_dir_all(&goldens_dir)
            .map_err(|e| format!("{}: {e}", goldens_dir.display()))?;
        new.save(&golden_path).map_err(|e| e.to_string())?;
        let moved_path = goldens_dir.join(format!("{target_name}.moved.md"));
        std::fs::write(&moved_path, moved.markdown(&target_name))
            .map_err(|e| format!("{}: {e}", moved_path.display()))?;
        println!(
            "goldens written: {} ({} entries); what moved: {}",
            golden_path.display(),
            new.entries.len(),
            moved_path.display()
        );
        // The run was judged against the goldens it replaces: the update is what was asked.
        return Ok(ExitCode::SUCCESS);
    }
    Ok(if failing == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
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
