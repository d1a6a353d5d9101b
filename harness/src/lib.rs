//! The harness: devices, validation at the launch boundary, selection, the case runner,
//! verdicts, snapshots and reports.

pub mod cases;
pub mod config;
pub mod require;
pub mod runner;
pub mod select;
