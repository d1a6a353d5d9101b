//! The `w4a16` command line.

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use w4a16_harness::runner::{Outcome, Verdict, isolate};

#[derive(Parser)]
#[command(
    name = "w4a16",
    about = "Correctness and differential testing for W4A16 GPU kernels"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Internal: the fault-isolated GPU worker (case ids on stdin, framed verdicts on stdout).
    #[command(hide = true)]
    Worker {
        /// Self-test mode: ids containing `crash` abort, `hang` never finish, others pass.
        #[arg(long)]
        simulate: bool,
    },
    /// Issue 3's speed benchmark on the first GPU that opens; the table goes to stdout.
    Bench {
        /// Also write the report as JSON to this file.
        #[arg(long)]
        json: Option<std::path::PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench { json } => w4a16_harness::bench::cli(json.as_deref()),
        Command::Worker { simulate } => {
            let r = isolate::serve(|id| {
                if simulate {
                    if id.contains("crash") {
                        std::process::abort();
                    }
                    if id.contains("hang") {
                        std::thread::sleep(std::time::Duration::from_secs(3600));
                    }
                    return vec![Verdict::new(id, "simulated", Outcome::Pass)];
                }
                vec![Verdict::new(id, "worker", Outcome::Skip).detail("worker not wired yet")]
            });
            if r.is_err() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}
