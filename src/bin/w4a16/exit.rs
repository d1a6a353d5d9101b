//! How every subcommand ends, mapped to the process's exit code in one place: 0 passed, 1 a
//! check (or a snapshot, a perf judgement, a model layer) failed, 2 a usage or setup error,
//! said in one line as `error: …`.

use std::process::ExitCode;
use w4a16_harness::report::FileError;
use w4a16_harness::runner::cli_run::{CasesError, RunError, UnknownSuite};
use w4a16_harness::runner::cpu_side::CpuSideError;
use w4a16_harness::runner::emulator_speed::EmulatorSpeedError;
use w4a16_harness::runner::execute::ReferenceError;
use w4a16_harness::runner::isolate::WorkerSpecError;
use w4a16_harness::runner::session::{SafetyTableError, SessionError};
use w4a16_kernels::RunTarget;
use w4a16_kernels::emulation::NotEmulable;
use w4a16_kernels::source::SourceError;
use w4a16_select::config::ConfigError;

/// A subcommand that ran to its end: whether what it checked passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Passed,
    Failed,
}

impl Status {
    pub fn passed_if(passed: bool) -> Status {
        if passed {
            Status::Passed
        } else {
            Status::Failed
        }
    }

    /// The exit code of a harness entry point that chose its own (`bench`).
    pub fn of_exit_code(code: ExitCode) -> Status {
        Status::passed_if(code == ExitCode::SUCCESS)
    }
}

/// The one mapping from a subcommand's end to the exit code.
pub fn exit_code(end: Result<Status, CliError>) -> ExitCode {
    match end {
        Ok(Status::Passed) => ExitCode::SUCCESS,
        Ok(Status::Failed) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Why a subcommand could not run: each names what is wrong and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Cases(#[from] CasesError),
    #[error(transparent)]
    UnknownSuite(#[from] UnknownSuite),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    SafetyTable(#[from] SafetyTableError),
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    NotEmulable(#[from] NotEmulable),
    /// `--kernel-sources DIR` (or `--control DIR`) lacks a file or cannot be read.
    #[error("{flag}: {source}")]
    KernelSources {
        flag: &'static str,
        source: SourceError,
    },
    /// This executable's own path (the suite runs of `mutants` start it).
    #[error("{0}")]
    CurrentExe(std::io::Error),
    #[error(transparent)]
    WorkerSpec(#[from] WorkerSpecError),
    /// The worker's protocol on stdin and stdout broke.
    #[error("{0}")]
    WorkerIo(std::io::Error),
    #[error(
        "exact allocations (the worker spec's `exact_allocations`, for a sanitizer): {device} cannot size buffers exactly"
    )]
    NotExact { device: String },
    #[error(
        "--target: the ISA emulator runs gfx1100, gfx1151 or gfx1201 code objects, not {target}"
    )]
    NotAnEmulatorTarget { target: RunTarget },
    #[error("--every: expected 1 or more")]
    EveryZero,
    #[error(transparent)]
    CpuSide(#[from] CpuSideError),
    #[error(transparent)]
    EmulatorSpeed(#[from] EmulatorSpeedError),
    #[error("no case with id {id:?} (see `w4a16 cases`)")]
    UnknownCase { id: String },
    #[error(transparent)]
    Mutants(#[from] super::mutants::MutantsCliError),
    #[error(transparent)]
    Coverage(#[from] super::coverage::CoverageCliError),
    #[error(transparent)]
    Perf(#[from] super::perf::PerfCliError),
    #[error(transparent)]
    RunReport(#[from] super::snapshots::RunReportError),
    #[error(transparent)]
    CheckModel(#[from] super::check_model::CheckModelError),
    #[error(transparent)]
    Synthetic(Box<w4a16_checkpoint::synthetic::SyntheticError>),
}

impl From<w4a16_cases::LocateError> for CliError {
    fn from(e: w4a16_cases::LocateError) -> Self {
        CliError::Cases(CasesError::Locate(e))
    }
}
