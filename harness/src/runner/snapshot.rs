//! Verdict snapshots, one file per suite per target (`snapshots/verdicts-<suite>@<target>.snap`);
//! a sanitizer run's are keyed by its tool too (`verdicts-<suite>.sanitize-<tool>@<target>.snap`).
//!
//! The CLI renders, compares and writes them itself ([`compare_and_write`]) in insta's file
//! format, so `cargo insta review` still accepts its `.snap.new` files and an unchanged run
//! leaves the committed files byte-identical; a difference is a value ([`SnapshotDiff`]), never
//! a panic. Tests record them through insta ([`assert_verdicts_of`]). This module also reads
//! committed ones back so a machine without the target's GPU can check they are current.

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

use super::verdict::Verdict;
use std::path::{Path, PathBuf};

/// The repo-root `snapshots/` folder, relative to this file (insta resolves it from here;
/// `INSTA_WORKSPACE_ROOT` relocates it when binaries run on another machine). Tests only: the
/// CLI finds the folder from the case folder ([`snapshot_dir`]).
const SNAPSHOT_DIR_FROM_HERE: &str = "../../../snapshots";

/// The `source:` insta records in every verdict snapshot's header: the file of the
/// [`assert_verdicts_of`] call (this module root; its parts live in submodules so the committed
/// headers keep this value). The CLI writes the same, so its files and insta's agree.
const SOURCE: &str = "harness/src/runner/snapshot.rs";

/// Compare (or, under `INSTA_UPDATE`, record) the verdict snapshot `file` of a run's
/// `verdicts`, its header naming what ran it and what it left out. Test-time only: a difference
/// panics, as insta's assertions do.
pub fn assert_verdicts_of(file: SnapshotFile, verdicts: &[Verdict]) {
    let (suite, target, sanitize) = (&file.suite, &file.target, file.sanitize);
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(SNAPSHOT_DIR_FROM_HERE);
    settings.set_prepend_module_to_snapshot(false);
    settings.set_snapshot_suffix(target);
    settings.set_omit_expression(true);
    settings.set_description(file.description());
    let committed = std::fs::read_to_string(tests_snapshot_dir().join(file.file_name())).ok();
    let text = file.body_after(committed.as_deref(), verdicts);
    settings.bind(|| insta::assert_snapshot!(snapshot_name_of(suite, sanitize), text));
}

/// The folder insta reads [`assert_verdicts_of`]'s snapshots from: [`SNAPSHOT_DIR_FROM_HERE`]
/// beside this file in the workspace (`INSTA_WORKSPACE_ROOT` when set, as insta reads it).
fn tests_snapshot_dir() -> PathBuf {
    let root = std::env::var_os("INSTA_WORKSPACE_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    let here = Path::new(file!()).parent().unwrap_or(Path::new(""));
    root.join(here).join(SNAPSHOT_DIR_FROM_HERE)
}

#[cfg(test)]
mod insta_tests {
    use super::*;
    use crate::runner::Check;
    use crate::runner::verdict::Outcome;

    /// insta itself reads a file this module wrote as the same snapshot (its assertion passes
    /// against it without writing anything), so `cargo insta review` and the test-time path
    /// agree with the CLI's.
    #[test]
    fn insta_reads_what_the_cli_writes() {
        let dir = std::env::temp_dir().join(format!("w4a16-snapshot-insta-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = SnapshotFile::new("probe", "sm_90", None);
        let verdicts = vec![
            Verdict::new("probe/a", Check::Selection(None), Outcome::Pass),
            Verdict::new("probe/b", Check::Selection(None), Outcome::Fail).bucket(">1"),
        ];
        std::fs::write(
            dir.join(key.file_name()),
            render_file(&key, &render(&verdicts)),
        )
        .unwrap();
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(&dir);
        settings.set_prepend_module_to_snapshot(false);
        settings.set_snapshot_suffix("sm_90");
        settings.set_omit_expression(true);
        let text = render(&verdicts);
        settings.bind(|| insta::assert_snapshot!(snapshot_name("probe"), text));
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(left, vec![std::ffi::OsString::from(key.file_name())]);
    }
}
