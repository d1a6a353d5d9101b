//! The CLI's snapshot step: compare a run's verdicts with the committed file, and write the
//! `.snap` (update) or the `.snap.new` (check) for `cargo insta review`.

use std::fmt;
use std::path::{Path, PathBuf};

use super::diff::SnapshotDiff;
use super::file::SnapshotFile;
use super::format::{MalformedLine, body_of, parse_file_strict, parse_rows, render_file};
use crate::runner::verdict::Verdict;

/// Record the snapshots (`update`) or compare against them (`check`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotMode {
    Check,
    Update,
}

/// Why a snapshot could not be compared or written.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{}: cannot read the verdict snapshot: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: cannot write the verdict snapshot: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{}:{line}: expected a verdict snapshot (a `---` header, `---`, then rows `<case> | <check> | <outcome>[ | <bucket>]`), got {text:?}; fix or delete the file",
        path.display()
    )]
    Malformed {
        path: PathBuf,
        line: usize,
        text: String,
    },
}

/// How a run's rows stand against the snapshot file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotStatus {
    /// The body is byte-identical: nothing written.
    Same,
    /// No snapshot file yet.
    New { rows: usize },
    /// The body differs.
    Changed(SnapshotDiff),
}

/// One snapshot's comparison and what was written for it.
#[derive(Clone, Debug)]
pub struct SnapshotReport {
    pub file: SnapshotFile,
    pub status: SnapshotStatus,
    /// The `.snap` (update) or `.snap.new` (check) written, when one was.
    pub written: Option<PathBuf>,
}

impl SnapshotReport {
    /// A difference (or a missing file) under `check`: the run fails on it.
    pub fn differs(&self) -> bool {
        self.status != SnapshotStatus::Same
    }
}

/// `snapshot <name>: <what>` and, for a change, the compact diff.
impl fmt::Display for SnapshotReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.file.name();
        let written = match &self.written {
            Some(p) => format!(" (wrote {})", p.display()),
            None => String::new(),
        };
        match &self.status {
            SnapshotStatus::Same => writeln!(f, "snapshot {name}: unchanged"),
            SnapshotStatus::New { rows } => {
                writeln!(f, "snapshot {name}: new, {rows} rows{written}")
            }
            SnapshotStatus::Changed(diff) => {
                writeln!(f, "snapshot {name}: {}{written}", diff.counts())?;
                write!(f, "{diff}")
            }
        }
    }
}

/// Compares `verdicts` with the snapshot `file` in `dir`. `Check` writes `<name>.snap.new` on a
/// difference (for `cargo insta review`); `Update` writes `<name>.snap`. A file whose body is
/// unchanged is left as it is, and a stale `.snap.new` beside it is removed.
pub fn compare_and_write(
    dir: &Path,
    file: SnapshotFile,
    verdicts: &[Verdict],
    mode: SnapshotMode,
) -> Result<SnapshotReport, SnapshotError> {
    let path = dir.join(file.file_name());
    let pending = dir.join(format!("{}.new", file.file_name()));
    let committed = match std::fs::read_to_string(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => return Err(SnapshotError::Read { path, source }),
        Ok(text) => Some(text),
    };
    let body = file.body_after(committed.as_deref(), verdicts);
    let status = match committed {
        None => SnapshotStatus::New {
            rows: body.lines().count(),
        },
        Some(text) => {
            let old = parse_file_strict(&text).map_err(|MalformedLine { line, text }| {
                SnapshotError::Malformed {
                    path: path.clone(),
                    line,
                    text,
                }
            })?;
            if body_of(&text).trim_end() == body.trim_end() {
                SnapshotStatus::Same
            } else {
                let new = parse_rows(&body);
                SnapshotStatus::Changed(SnapshotDiff::between(&old, &new))
            }
        }
    };
    let write = |to: &Path| {
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(to, render_file(&file, &body)))
            .map_err(|source| SnapshotError::Write {
                path: to.to_path_buf(),
                source,
            })
    };
    let written = match (&status, mode) {
        (SnapshotStatus::Same, _) => None,
        (_, SnapshotMode::Update) => {
            write(&path)?;
            Some(path)
        }
        (_, SnapshotMode::Check) => {
            write(&pending)?;
            Some(pending.clone())
        }
    };
    if written.as_deref() != Some(pending.as_path()) && pending.is_file() {
        std::fs::remove_file(&pending).map_err(|source| SnapshotError::Write {
            path: pending.clone(),
            source,
        })?;
    }
    Ok(SnapshotReport {
        file,
        status,
        written,
    })
}
