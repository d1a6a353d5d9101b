//! The one report writer: every command that leaves a report folder (`run`, `merge`, `perf`,
//! `check-model`) hands its content here as [`ReportFiles`] and this module writes it.
//!
//! Producers say *what* a report says (their JSON value, JUnit [`quick_junit::Report`],
//! Markdown built with [`markdown::Table`]); the writer owns *how* it lands on disk: the folder
//! is created, the files a report owns are removed before any is written (so a run that stops
//! half way never leaves an earlier run's passing report beside its own), and each file is
//! written to a temporary name and renamed into place, so a reader never sees half a file.

pub mod json;
pub mod junit;
pub mod markdown;

use std::path::{Path, PathBuf};

/// One file of a report folder: its name in the folder and its whole text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportFile {
    pub name: &'static str,
    pub text: String,
}

impl ReportFile {
    pub fn new(name: &'static str, text: impl Into<String>) -> Self {
        ReportFile {
            name,
            text: text.into(),
        }
    }
}

/// What one report folder holds, in the order the files are written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReportFiles {
    pub files: Vec<ReportFile>,
}

impl ReportFiles {
    pub fn new() -> Self {
        ReportFiles::default()
    }

    /// Adds `name` with `text` (builder style).
    pub fn with(mut self, name: &'static str, text: impl Into<String>) -> Self {
        self.files.push(ReportFile::new(name, text));
        self
    }

    /// The file names, which are the files the report owns in its folder.
    pub fn names(&self) -> Vec<&'static str> {
        self.files.iter().map(|f| f.name).collect()
    }

    /// The text of `name`, if the report has it.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.files
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.text.as_str())
    }
}

/// A file or folder that could not be read, written or created; `path` is the one it was.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct FileError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl FileError {
    /// `result`'s error named by `path`.
    pub fn at<T>(path: &Path, result: std::io::Result<T>) -> Result<T, FileError> {
        result.map_err(FileError::of(path))
    }

    /// The error of an I/O call on `path`, for `map_err`.
    fn of(path: &Path) -> impl FnOnce(std::io::Error) -> FileError + '_ {
        move |source| FileError {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// A report folder with the names of the files its report owns.
#[derive(Clone, Debug)]
pub struct ReportDir {
    dir: PathBuf,
    owned: Vec<&'static str>,
}

impl ReportDir {
    /// Creates `dir` and removes the `owned` files found there, so that nothing an earlier run
    /// wrote stands in for this run's report if this one stops before [`ReportDir::write`].
    pub fn open(dir: &Path, owned: &[&'static str]) -> Result<ReportDir, FileError> {
        std::fs::create_dir_all(dir).map_err(FileError::of(dir))?;
        let report = ReportDir {
            dir: dir.to_path_buf(),
            owned: owned.to_vec(),
        };
        report.clear()?;
        Ok(report)
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Removes the owned files that exist; a missing one is already cleared.
    pub fn clear(&self) -> Result<(), FileError> {
        for name in &self.owned {
            let path = self.dir.join(name);
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(FileError::of(&path)(e));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Writes every file of `files` atomically, in order; returns their paths.
    pub fn write(&self, files: &ReportFiles) -> Result<Vec<PathBuf>, FileError> {
        files
            .files
            .iter()
            .map(|f| {
                let path = self.dir.join(f.name);
                write_atomic(&path, f.text.as_bytes())?;
                Ok(path)
            })
            .collect()
    }
}

/// Writes the report `files` into `dir` (created): the files it owns are cleared first, then
/// each is written atomically. Returns the paths written, in order.
pub fn write(dir: &Path, files: &ReportFiles) -> Result<Vec<PathBuf>, FileError> {
    ReportDir::open(dir, &files.names())?.write(files)
}

/// `bytes` into `path` through a temporary file beside it and a rename: a reader sees the old
/// file or the new one, never a part.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    let name = path
        .file_name()
        .map_or_else(|| "report".into(), |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::write(&tmp, bytes)
        .map_err(FileError::of(path))
        .and_then(|()| std::fs::rename(&tmp, path).map_err(FileError::of(path)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writing_replaces_the_owned_files_and_leaves_no_temporaries() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("reports");
        let first = ReportFiles::new()
            .with("report.json", "{}")
            .with("summary.md", "old");
        write(&out, &first).unwrap();
        std::fs::write(out.join("other.txt"), "kept").unwrap();
        let second = ReportFiles::new()
            .with("report.json", "{\"a\": 1}")
            .with("summary.md", "new");
        let paths = write(&out, &second).unwrap();
        assert_eq!(paths, [out.join("report.json"), out.join("summary.md")]);
        assert_eq!(
            std::fs::read_to_string(out.join("summary.md")).unwrap(),
            "new"
        );
        let mut names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["other.txt", "report.json", "summary.md"]);
    }

    #[test]
    fn opening_clears_an_earlier_report_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("report.json"), "passing").unwrap();
        let report = ReportDir::open(dir.path(), &["report.json", "junit.xml"]).unwrap();
        assert!(!dir.path().join("report.json").exists());
        assert_eq!(report.path(), dir.path());
    }

    #[test]
    fn a_folder_that_cannot_be_made_names_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let e = write(&file.join("sub"), &ReportFiles::new().with("x", "")).unwrap_err();
        assert_eq!(e.path, file.join("sub"));
        assert!(
            e.to_string()
                .starts_with(&file.join("sub").display().to_string())
        );
    }
}
