//! The command line as clap reads it: the subcommands (each one's options live in its own
//! module) and the typed values every closed choice (targets, dtypes, sanitizer tools) is parsed
//! into, read from the type that owns the names, so a wrong value is clap's own error listing
//! the choices, and `--help` shows them.

use super::exit::CliError;
use super::{
    bench, check_model, coverage, make_synthetic_model, merge, mutants, perf, repro, run, select,
    snapshots, worker,
};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use w4a16_harness::runner::snapshot::SnapshotMode;
use w4a16_kernels::RunTarget;
use w4a16_kernels::source::KernelSources;
use w4a16_reference::Named;

#[derive(Parser)]
#[command(name = "w4a16", about = "Correctness and differential testing for W4A16 GPU kernels", after_help = KERNEL_CONFIG_HELP)]
pub struct Cli {
    /// Folder of case files (default: `cases/` of the repository this runs in).
    #[arg(long, global = true)]
    pub cases: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

const KERNEL_CONFIG_HELP: &str = "Kernel configuration (run, select, repro): --kernel-config '{\"rdna_hybrid_w4a16_prefill_dequant\": \"enable\"}' or --kernel-config.rdna_hybrid_w4a16_prefill_dequant enable";

#[derive(Subcommand)]
pub enum Command {
    /// Run suites: every check this machine can run; GPU-bound ones skip loudly without a GPU.
    Run(run::RunArgs),
    /// Combine the report folders of `run --shard I/N` jobs into the report.json, JUnit,
    /// summary and verdict snapshots one unsharded run writes. Refuses overlapping or missing
    /// shards and shards of different suites, targets or commits. Exit 1 as `run` would.
    Merge(merge::MergeArgs),
    /// Measure the harness's detection power: run suites against every seeded bug of
    /// `kernels/mutants/*.toml` and report the kill rate per suite and per bug class.
    Mutants(mutants::MutantsArgs),
    /// Print the path the selection takes for one layer call, with every rejection's reason.
    Select(select::SelectArgs),
    /// List suites and their case counts.
    Cases,
    /// Rerun exactly one case (in this process), print its verdicts and seed, write artifacts.
    Repro(repro::ReproArgs),
    /// Speed on the first GPU that opens: `skinny` (M 1..5) against the device's copy
    /// bandwidth and `fused` (M 2048) against the vendor BLAS, K 4096, N 14336; the table
    /// goes to stdout.
    /// With `--cpu-side`: what the CPU side of a run (data, conversion, reference and
    /// verification) costs on this machine, with a stand-in device that computes nothing.
    Bench(bench::BenchArgs),
    /// Machine-code coverage: run suites (default: those the ISA emulator runs in CI) on the
    /// ISA emulator for --target, recording which basic blocks of its code objects execute;
    /// write coverage/<gfx>.json and coverage/<gfx>.md. Exit 1 when a block no suite executes
    /// has no reason in cases/exceptions/coverage.toml (or an entry there no longer holds).
    Coverage(coverage::CoverageArgs),
    /// Perf mode: time the selected path of every dense case of a suite with cold inputs and
    /// judge each against the target's goldens (`perf/<target>.json`) through its ratio to a
    /// control measured beside it (the copy ceiling for M <= 5, the vendor BLAS above), and
    /// against a control build case by case. Exit 1 when a case fails.
    Perf(perf::PerfArgs),
    /// Check a quantized Hugging Face model directory layer by layer: each quantized linear
    /// (and each fused q|k|v, gate|up projection) read from its shards, checked against its
    /// producer's own semantics, selected, validated and run through the selected kernels and
    /// the fallback at each batch size. Without a GPU the format, selection and contract
    /// checks still run.
    ///
    /// Exit codes — 0: every layer passed (checkpoint defects reported unless --strict). 1: a layer failed or was refused (a checkpoint defect under --strict, a failing check, the startup memory check). 2: a whole-model refusal (no config.json or quantization_config, unreadable shards, no quantized linear, a --filter matching nothing) or a usage error.
    CheckModel(check_model::CheckModelArgs),
    /// Write a synthetic quantized model directory of a real model's shapes (config.json, one
    /// safetensors shard per decoder layer, the index) in a producer's format, deterministic by
    /// seed and streamed layer by layer: for measuring check-model at model scale.
    MakeSyntheticModel(make_synthetic_model::MakeSyntheticModelArgs),
    /// Compare (or record) the verdict snapshots of a finished run from its report.json, e.g.
    /// one a GPU machine sent back. Exit 1 when a snapshot differs under `check`.
    Snapshots(snapshots::SnapshotsArgs),
    /// Internal: the fault-isolated GPU worker (its spec as one JSON argument, case ids on
    /// stdin, framed verdicts on stdout).
    #[command(hide = true)]
    Worker(worker::WorkerArgs),
}

/// `--snapshot`: no snapshots, or as [`SnapshotMode`].
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SnapshotArg {
    Off,
    Check,
    Update,
}

impl SnapshotArg {
    pub fn mode(self) -> Option<SnapshotMode> {
        match self {
            SnapshotArg::Off => None,
            SnapshotArg::Check => Some(SnapshotMode::Check),
            SnapshotArg::Update => Some(SnapshotMode::Update),
        }
    }
}

/// `--jobs`' default: half the cores, 1 to 8.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).clamp(1, 8))
}

/// The report folder of `run`, `merge` and `check-model` (`--report-dir`; `--out` is its old
/// spelling on `merge` and `perf`).
pub const REPORT_DIR: &str = "target/w4a16-report";

/// `--kernel-sources DIR` (and the flags that take a kernel-source folder, named by `flag`):
/// the folder, checked for every file now (a missing one is named).
pub fn kernel_sources(flag: &'static str, dir: Option<&Path>) -> Result<KernelSources, CliError> {
    match dir {
        None => Ok(KernelSources::Embedded),
        Some(d) => {
            KernelSources::directory(d).map_err(|source| CliError::KernelSources { flag, source })
        }
    }
}

/// `--target` where the GPU found here may choose: `auto` or a run target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetArg {
    Auto,
    Run(RunTarget),
}

impl TargetArg {
    /// The target asked for; `None` for `auto`.
    pub fn run_target(self) -> Option<RunTarget> {
        match self {
            TargetArg::Auto => None,
            TargetArg::Run(t) => Some(t),
        }
    }

    /// The spelling of the command line (`auto`, `sm_90`, `gfx1151-emu`).
    pub fn name(self) -> String {
        match self {
            TargetArg::Auto => "auto".to_string(),
            TargetArg::Run(t) => t.name(),
        }
    }
}

/// Every run target as a choice, natives with their aliases (`sm90`).
fn run_target_values() -> impl Iterator<Item = PossibleValue> {
    RunTarget::all()
        .into_iter()
        .map(|t| PossibleValue::new(t.name()).aliases(t.aliases().iter().copied()))
}

/// `--target` of the commands that run on a GPU: `auto` or any run target.
pub fn target_or_auto() -> impl TypedValueParser<Value = TargetArg> {
    let values = std::iter::once(PossibleValue::new("auto")).chain(run_target_values());
    PossibleValuesParser::new(values).try_map(|s: String| match s.as_str() {
        "auto" => Ok(TargetArg::Auto),
        _ => RunTarget::parse(&s)
            .map(TargetArg::Run)
            .ok_or_else(|| format!("not a target: {s:?}")),
    })
}

/// `--target` of the host-side commands (select, bench --cpu-side): a run target, no `auto`.
pub fn run_target() -> impl TypedValueParser<Value = RunTarget> {
    PossibleValuesParser::new(run_target_values())
        .try_map(|s: String| RunTarget::parse(&s).ok_or_else(|| format!("not a target: {s:?}")))
}

/// A value of a [`Named`] enum, by its name or one of its aliases.
pub fn named<T: Named + Send + Sync>() -> impl TypedValueParser<Value = T> {
    let values = T::ALL
        .iter()
        .map(|v| PossibleValue::new(v.name()).aliases(v.aliases().iter().copied()));
    PossibleValuesParser::new(values)
        .try_map(|s: String| T::parse(&s).ok_or_else(|| format!("not a {}: {s:?}", T::TYPE_NAME)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use w4a16_kernels::Target;
    use w4a16_reference::ActDtype;

    #[derive(Parser, Debug)]
    struct T {
        #[arg(long, value_parser = target_or_auto(), default_value = "auto")]
        target: TargetArg,
        #[arg(long, value_parser = run_target())]
        host: Option<RunTarget>,
        #[arg(long, value_parser = named::<ActDtype>())]
        dtype: Option<ActDtype>,
    }

    fn parse(args: &[&str]) -> Result<T, clap::Error> {
        T::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
    }

    #[test]
    fn every_target_name_and_alias_parses() {
        assert_eq!(parse(&[]).unwrap().target, TargetArg::Auto);
        for t in RunTarget::all() {
            assert_eq!(
                parse(&["--target", &t.name()]).unwrap().target,
                TargetArg::Run(t)
            );
            assert_eq!(parse(&["--host", &t.name()]).unwrap().host, Some(t));
        }
        assert_eq!(
            parse(&["--target", "sm90"]).unwrap().target,
            TargetArg::Run(RunTarget::native(Target::Sm90))
        );
        assert_eq!(
            parse(&["--dtype", "bfloat16"]).unwrap().dtype,
            Some(ActDtype::Bf16)
        );
    }

    /// A wrong value is clap's error, which lists the choices.
    #[test]
    fn a_wrong_value_lists_the_choices() {
        let e = parse(&["--target", "gfx1152"]).unwrap_err().to_string();
        assert!(e.contains("invalid value 'gfx1152'"), "{e}");
        for name in RunTarget::known_names() {
            assert!(e.contains(&name), "{name} missing from: {e}");
        }
        assert!(e.contains("auto"), "{e}");
        let e = parse(&["--host", "auto"]).unwrap_err().to_string();
        assert!(e.contains("invalid value 'auto'"), "{e}");
        let e = parse(&["--dtype", "f32"]).unwrap_err().to_string();
        assert!(e.contains("[possible values: f16, bf16]"), "{e}");
    }
}
