//! Machine-code coverage (`w4a16 coverage`): which basic blocks of a target's code objects the
//! CI suites execute on the ISA emulator, recorded per target as `coverage/<gfx>.json` (the
//! record) and `coverage/<gfx>.md` (its report), and judged against the reasons given for the
//! blocks no suite reaches (`cases/exceptions/coverage.toml`). Not the emulator's
//! instruction-set table (`emu/coverage/`). See docs/block-coverage.md.

pub mod judge;
pub mod markdown;
pub mod record;

use crate::runner::session::{Backend, RunOutput, SessionError, SessionOptions, run_in_process};
use std::path::{Path, PathBuf};
use std::time::Instant;
use w4a16_cases::{Case, CaseSet};
use w4a16_device::{BlockCoverage, DeviceBench, DeviceFault};

pub use judge::{Problem, judge, judge_run};
pub use record::{EntryRecord, Record};

/// The suites the ISA emulator runs in CI on every native gfx target (each has committed
/// verdict snapshots there, `tests/gpu_verdicts.rs`): `w4a16 coverage`'s default.
pub const ISA_EMULATOR_SUITES: [&str; 5] =
    ["smoke", "checkpoints", "kernels", "edges", "selection"];

/// The folder of the records, under the checkout (named apart from `emu/coverage/`, the
/// emulator's instruction-set table).
pub const RECORD_DIR: &str = "coverage";

/// The record of `target` in the checkout at `root`: `coverage/<gfx>.json`.
pub fn record_path(root: &Path, target: &str) -> PathBuf {
    root.join(RECORD_DIR).join(format!("{target}.json"))
}

/// Why block coverage could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum BlockCoverageError {
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The device records no blocks (not the ISA emulator opened with `recording_blocks`).
    #[error("{device} records no blocks: block coverage runs on the ISA emulator")]
    NotRecording { device: String },
    #[error("reading the blocks: {0}")]
    Device(#[from] DeviceFault),
}

/// One suite's recording run.
#[derive(Clone, Debug)]
pub struct SuiteCoverage {
    pub suite: String,
    pub cases: usize,
    pub checks: usize,
    pub failing: usize,
    pub wall_s: f64,
    pub blocks: BlockCoverage,
}

/// Runs each suite's `cases` in this process on `device` (the ISA emulator, recording), and
/// reads back after each which blocks it executed.
pub fn run(
    set: &CaseSet,
    suites: &[(String, Vec<&Case>)],
    opts: &SessionOptions,
    device: Box<dyn DeviceBench>,
    on_suite: &dyn Fn(&SuiteCoverage),
) -> Result<Vec<SuiteCoverage>, BlockCoverageError> {
    let name = device.name();
    let backend = Backend::Device(device);
    let Backend::Device(dev) = &backend else {
        unreachable!("built as a device above")
    };
    let read = || {
        dev.block_coverage()
            .ok_or_else(|| BlockCoverageError::NotRecording {
                device: name.clone(),
            })?
            .map_err(BlockCoverageError::from)
    };
    // Nothing ran yet: this also loads (builds) every code object before the clock starts.
    read()?;
    let mut out = Vec::with_capacity(suites.len());
    for (suite, cases) in suites {
        let start = Instant::now();
        let RunOutput { verdicts, .. } = run_in_process(set, cases, &backend, opts, &|_| {})?;
        let s = SuiteCoverage {
            suite: suite.clone(),
            cases: cases.len(),
            checks: verdicts.len(),
            failing: verdicts.iter().filter(|v| v.outcome.is_failure()).count(),
            wall_s: start.elapsed().as_secs_f64(),
            blocks: read()?,
        };
        on_suite(&s);
        out.push(s);
    }
    Ok(out)
}
