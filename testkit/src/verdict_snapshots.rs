//! The test-time path of verdict snapshots: insta asserts a run's verdicts against the
//! committed `snapshots/verdicts-<suite>@<target>.snap` (ARCHITECTURE.md rule 6). The CLI
//! compares and writes the same files without insta (`w4a16_harness::runner::snapshot`).
//!
//! insta records this file's path as the `source:` of every verdict snapshot it writes; the CLI
//! writes the same value ([`SOURCE`](w4a16_harness::runner::snapshot::SOURCE)), so moving this
//! file means changing that constant and the committed headers together.

use std::path::{Path, PathBuf};
use w4a16_harness::runner::snapshot::{SnapshotFile, snapshot_name_of};
use w4a16_harness::runner::verdict::Verdict;

/// The repo-root `snapshots/` folder, relative to this file (insta resolves it from here;
/// `INSTA_WORKSPACE_ROOT` relocates it when binaries run on another machine).
const SNAPSHOT_DIR_FROM_HERE: &str = "../../snapshots";

/// Compare (or, under `INSTA_UPDATE`, record) the verdict snapshot `file` of a run's
/// `verdicts`, its header naming what ran it and what it left out. A difference panics, as
/// insta's assertions do.
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
    use w4a16_harness::runner::Check;
    use w4a16_harness::runner::snapshot::{SOURCE, render, render_file, snapshot_name};
    use w4a16_harness::runner::verdict::Outcome;

    /// The CLI's `source:` is the file insta records for [`assert_verdicts_of`]: this one.
    #[test]
    fn the_cli_names_this_file_as_the_source() {
        assert_eq!(SOURCE, file!());
    }

    /// [`tests_snapshot_dir`] is the repo-root `snapshots/` folder.
    #[test]
    fn snapshots_are_read_from_the_repo_root() {
        let dir = tests_snapshot_dir();
        assert!(
            dir.join("verdicts-smoke@sm_90.snap").is_file(),
            "{}",
            dir.display()
        );
    }

    /// insta itself reads a file the CLI wrote as the same snapshot (its assertion passes
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
