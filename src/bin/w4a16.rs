//! The `w4a16` command line: `run` (the main job), `merge`, `select`, `cases`, `repro`,
//! `bench`, `coverage` (machine-code blocks the suites execute), `perf` (speed against per-target goldens), `mutants` (the harness's own mutation
//! score), `check-model`, `make-synthetic-model` and `snapshots`. This file only parses and dispatches: each
//! subcommand is a module of its own, and how each ends maps to the exit code in [`exit`].

#[path = "w4a16/args.rs"]
mod args;
#[path = "w4a16/bench.rs"]
mod bench;
#[path = "w4a16/cases.rs"]
mod cases;
#[path = "w4a16/check_model.rs"]
mod check_model;
#[path = "w4a16/coverage.rs"]
mod coverage;
#[path = "w4a16/exit.rs"]
mod exit;
#[path = "w4a16/make_synthetic_model.rs"]
mod make_synthetic_model;
#[path = "w4a16/merge.rs"]
mod merge;
#[path = "w4a16/mutants.rs"]
mod mutants;
#[path = "w4a16/perf.rs"]
mod perf;
#[path = "w4a16/perf_counters.rs"]
mod perf_counters;
#[path = "w4a16/perf_regret.rs"]
mod perf_regret;
#[path = "w4a16/repro.rs"]
mod repro;
#[path = "w4a16/run.rs"]
mod run;
#[path = "w4a16/select.rs"]
mod select;
#[path = "w4a16/snapshots.rs"]
mod snapshots;
#[path = "w4a16/worker.rs"]
mod worker;

use args::{Cli, Command};
use clap::Parser;
use exit::{CliError, Status};
use std::process::ExitCode;
use w4a16_select::config::{self, KernelConfig};

fn main() -> ExitCode {
    let raw: Vec<String> = std::env::args().collect();
    // The kernel-config flags have a dotted form clap cannot express: take them out first.
    let parsed = match config::parse_args(&raw[1..]) {
        Ok(p) => p,
        Err(e) => return exit::exit_code(Err(e.into())),
    };
    let cli = Cli::parse_from(std::iter::once(raw[0].clone()).chain(parsed.rest));
    exit::exit_code(dispatch(cli, parsed.config))
}

/// The subcommand asked for, with the global `--cases` and the parsed kernel configuration.
fn dispatch(cli: Cli, config: KernelConfig) -> Result<Status, CliError> {
    let cases = cli.cases;
    match cli.command {
        Command::Run(a) => run::run(a, cases, config),
        Command::Merge(a) => merge::merge(a, cases),
        Command::Mutants(a) => mutants::mutants(a, cases),
        Command::Select(a) => select::select(a, config),
        Command::Cases => cases::cases(cases),
        Command::Repro(a) => repro::repro(a, cases, config),
        Command::Bench(a) => bench::bench(a, cases, config),
        Command::Coverage(a) => coverage::coverage(a, cases, config),
        Command::Perf(a) => perf::perf(a, cases, config),
        Command::CheckModel(a) => check_model::check_model(a, cases, config),
        Command::MakeSyntheticModel(a) => make_synthetic_model::make_synthetic_model(a),
        Command::Snapshots(a) => snapshots::snapshots(a, cases),
        Command::Worker(a) => worker::worker(a),
    }
}
