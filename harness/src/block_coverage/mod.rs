//! Machine-code coverage (`w4a16 coverage`): which basic blocks of a target's code objects the
//! CI suites execute on the ISA emulator, recorded per target as `coverage/<gfx>.json` (the
//! record) and `coverage/<gfx>.md` (its report), and judged against the reasons given for the
//! blocks no suite reaches (`cases/exceptions/coverage.toml`). Not the emulator's
//! instruction-set table (`emu/coverage/`). See docs/block-coverage.md.

pub mod judge;
pub mod markdown;
pub mod record;
pub mod share;

use crate::runner::Verdict;
use crate::runner::session::{Backend, RunOutput, SessionError, SessionOptions, run_in_process};
use std::path::{Path, PathBuf};
use std::time::Instant;
use w4a16_cases::{Case, CaseSet};
use w4a16_device::{BlockCoverage, DeviceBench, DeviceFault};

pub use judge::{Against, Problem, judge, judge_run};
pub use record::{EntryRecord, Record};
pub use share::{CaseCoverage, Share, share_path};

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
    /// Its verdicts, in case order.
    pub verdicts: Vec<Verdict>,
    pub wall_s: f64,
    pub blocks: BlockCoverage,
    /// Each case's own blocks and cost ([`Reading::PerCase`]; empty otherwise).
    pub per_case: Vec<CaseCoverage>,
}

/// How often a recording run reads the blocks back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// Once per suite, its cases run in parallel.
    PerSuite,
    /// After each case, the cases run one at a time: what the CI share is chosen from.
    PerCase,
}

/// Runs each suite's `cases` in this process on `device` (the ISA emulator, recording), and
/// reads back which blocks it executed, per suite or per case (`reading`).
pub fn run(
    set: &CaseSet,
    suites: &[(String, Vec<&Case>)],
    opts: &SessionOptions,
    device: Box<dyn DeviceBench>,
    reading: Reading,
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
    let instructions = || dev.emulator_work().map_or(0, |w| w.wave_instructions);
    // Nothing ran yet: this also loads (builds) every code object before the clock starts.
    read()?;
    let mut out = Vec::with_capacity(suites.len());
    for (suite, cases) in suites {
        let start = Instant::now();
        let mut verdicts = Vec::new();
        let mut per_case = Vec::new();
        let mut blocks: Option<BlockCoverage> = None;
        let groups: Vec<&[&Case]> = match reading {
            Reading::PerSuite => vec![cases.as_slice()],
            Reading::PerCase => cases.chunks(1).collect(),
        };
        for group in groups {
            let before = instructions();
            let RunOutput { verdicts: v, .. } =
                run_in_process(set, group, &backend, opts, &|_| {})?;
            verdicts.extend(v);
            let b = read()?;
            if let (Reading::PerCase, [case]) = (reading, group) {
                per_case.push(CaseCoverage {
                    suite: suite.clone(),
                    case_id: case.id.clone(),
                    wave_instructions: instructions() - before,
                    blocks: share::executed_blocks(&b),
                });
            }
            match &mut blocks {
                None => blocks = Some(b),
                Some(u) => u.union(&b),
            }
        }
        let s = SuiteCoverage {
            suite: suite.clone(),
            cases: cases.len(),
            verdicts,
            wall_s: start.elapsed().as_secs_f64(),
            blocks: match blocks {
                Some(b) => b,
                None => read()?,
            },
            per_case,
        };
        on_suite(&s);
        out.push(s);
    }
    Ok(out)
}

impl SuiteCoverage {
    /// Its failing verdicts.
    pub fn failing(&self) -> usize {
        self.verdicts
            .iter()
            .filter(|v| v.outcome.is_failure())
            .count()
    }
}
