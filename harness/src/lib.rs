//! The harness: devices, validation at the launch boundary, selection, the case runner,
//! verdicts, snapshots and reports.

pub mod bench;
pub mod cases;
pub mod codeobject;
pub mod config;
pub mod device;
pub mod launch;
pub mod model_check;
pub mod mutants;
pub mod perf;
pub mod require;
pub mod runner;
pub mod select;
pub mod tensor;
pub mod validate;
