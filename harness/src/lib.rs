//! The harness: devices, validation at the launch boundary, selection, the case runner,
//! verdicts, snapshots and reports.

pub mod codeobject;
pub mod require;
