//! Verdict snapshots, one file per suite per target (`snapshots/verdicts-<suite>@<target>.snap`);
//! a sanitizer run's are keyed by its tool too (`verdicts-<suite>.sanitize-<tool>@<target>.snap`).
//!
//! The CLI renders, compares and writes them itself ([`compare_and_write`]) in insta's file
//! format, so `cargo insta review` still accepts its `.snap.new` files and an unchanged run
//! leaves the committed files byte-identical; a difference is a value ([`SnapshotDiff`]), never
//! a panic. Tests record them through insta (`w4a16_testkit::verdict_snapshots`). This module
//! also reads committed ones back so a machine without the target's GPU can check they are
//! current.

mod compare;
mod diff;
mod file;
mod format;
#[cfg(test)]
mod tests;

pub use compare::{SnapshotError, SnapshotMode, SnapshotReport, SnapshotStatus, compare_and_write};
pub use diff::{SnapshotDiff, VerdictChange};
pub use file::{
    LeftOut, SnapshotFile, committed_path, left_out_in, parse_file_name, recorded_by_in,
    snapshot_dir, snapshot_name, snapshot_name_of,
};
pub use format::{body_of, parse_rows, render, render_file, render_rows};

/// The `source:` of every verdict snapshot's header: the file of the insta assertion that
/// records them in tests (`w4a16_testkit::verdict_snapshots`, whose test checks this value).
/// The CLI writes the same, so its files and insta's agree.
pub const SOURCE: &str = "testkit/src/verdict_snapshots.rs";
