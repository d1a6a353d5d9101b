//! The case runner: case → seeded producer tensors → conversion → selection → validation →
//! launch → reference and bound → verdict → snapshot/report. Each arrow is a module boundary.

pub mod artifact;
pub mod budget;
pub mod cli_run;
pub mod cost;
pub mod cpu_side;
pub mod dealing;
pub mod emulator_speed;
pub mod execute;
pub mod global;
pub mod gpus;
pub mod isolate;
pub mod moe;
pub mod report;
pub mod sanitize;
pub mod session;
pub mod shard;
pub mod snapshot;
pub mod timing;
pub mod verdict;

pub use timing::PhaseTimes;
pub use verdict::{
    Cause, Check, CheckpointRefusal, KernelPath, Mismatch, Outcome, ReferenceStage, SourceError,
    Summary, Verdict, WorkerFailure,
};
