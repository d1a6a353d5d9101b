//! Verdict snapshots, one file per suite per target (`snapshots/verdicts-<suite>@<target>.snap`);
//! a sanitizer run's are keyed by its tool too (`verdicts-<suite>.sanitize-<tool>@<target>.snap`).
//!
//! The CLI renders, compares and writes them itself ([`compare_and_write`]) in insta's file
//! format, so `cargo insta review` still accepts its `.snap.new` files and an unchanged run
//! leaves the committed files byte-identical; a difference is a value ([`SnapshotDiff`]), never
//! a panic. Tests record them through insta ([`assert_verdicts_of`]). This module also reads
//! committed ones back so a machine without the target's GPU can check they are current.

use super::budget::{CaseBudget, Interpreter};
use super::sanitize::SanitizerTool;
use super::verdict::Verdict;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use w4a16_device::DeviceKind;

/// The repo-root `snapshots/` folder, relative to this file (insta resolves it from here;
/// `INSTA_WORKSPACE_ROOT` relocates it when binaries run on another machine). Tests only: the
/// CLI finds the folder from the case folder ([`snapshot_dir`]).
const SNAPSHOT_DIR_FROM_HERE: &str = "../../../snapshots";

/// The `source:` insta recorded in every verdict snapshot's header (where [`assert_verdicts_of`]
/// lives); fixed so that moving this module does not rewrite every committed header.
const SOURCE: &str = "harness/src/runner/snapshot.rs";

pub fn snapshot_name(suite: &str) -> String {
    format!("verdicts-{suite}")
}

/// The snapshot of `suite`, or of a `sanitize` run of it (its own file: exact-size allocations
/// and the sanitizer's own checks make different rows).
pub fn snapshot_name_of(suite: &str, sanitize: Option<SanitizerTool>) -> String {
    match sanitize {
        Some(tool) => format!("verdicts-{suite}.sanitize-{tool}"),
        None => snapshot_name(suite),
    }
}

/// What a verdict snapshot's file name says: the key of one snapshot, and what ran it (named
/// in the header only: the rows are compared, so a real gfx1151 checks the file the emulator
/// recorded, and a difference shows as row changes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotFile {
    pub suite: String,
    pub target: String,
    pub sanitize: Option<SanitizerTool>,
    pub recorded_by: Option<DeviceKind>,
    /// The suite's cases a budgeted run did not run (named in the header; their rows are kept).
    pub left_out: Option<LeftOut>,
}

/// The cases of a suite above a budgeted run's [`CaseBudget`] (the ISA emulator's, the CUDA
/// emulation's). The run cannot judge them, so its snapshot keeps whatever rows an earlier
/// recording (the target's GPU) holds for them, and says in its header how many it left out:
/// the emulator checks and records the rows it runs, a GPU every row.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeftOut {
    pub by: Interpreter,
    pub cases: BTreeSet<String>,
}

impl LeftOut {
    /// The cases of `suite` that `budget` leaves out; `None` when it runs them all.
    pub fn of<'c>(
        budget: CaseBudget<'_>,
        suite: &str,
        cases: impl IntoIterator<Item = &'c w4a16_cases::Case>,
    ) -> Option<LeftOut> {
        let by = budget.interpreter()?;
        let cases: BTreeSet<String> = cases
            .into_iter()
            .filter(|c| c.suite == suite && !budget.admits(c))
            .map(|c| c.id.clone())
            .collect();
        (!cases.is_empty()).then_some(LeftOut { by, cases })
    }

    /// The header's clause: `N cases above <budget> not run`.
    pub fn clause(&self) -> String {
        format!(
            "{} cases above {} not run",
            self.cases.len(),
            self.by.budget()
        )
    }
}

/// How many cases a snapshot's header says its recording left out (`None`: it ran them all).
pub fn left_out_in(text: &str) -> Option<usize> {
    let description = header_description(text)?;
    let (_, clause) = description.rsplit_once("; ")?;
    let (count, rest) = clause.split_once(" cases above ")?;
    rest.ends_with(" not run").then(|| count.parse().ok())?
}

/// The `description:` of a snapshot's header, unquoted as written.
fn header_description(text: &str) -> Option<&str> {
    text.split_once("\n---\n")?
        .0
        .lines()
        .find_map(|l| l.strip_prefix("description: "))
        .map(|d| d.trim_matches('"'))
}

impl SnapshotFile {
    pub fn new(suite: &str, target: &str, sanitize: Option<SanitizerTool>) -> Self {
        SnapshotFile {
            suite: suite.to_string(),
            target: target.to_string(),
            sanitize,
            recorded_by: None,
            left_out: None,
        }
    }

    /// The same key, its header naming the cases a budgeted run left out.
    pub fn left_out(self, left_out: Option<LeftOut>) -> Self {
        SnapshotFile { left_out, ..self }
    }

    /// The same key, its header naming what ran it.
    pub fn recorded_by(self, device: Option<DeviceKind>) -> Self {
        SnapshotFile {
            recorded_by: device,
            ..self
        }
    }

    /// `verdicts-<suite>[.sanitize-<tool>]@<target>`, as insta names it (no extension).
    pub fn name(&self) -> String {
        format!(
            "{}@{}",
            snapshot_name_of(&self.suite, self.sanitize),
            self.target
        )
    }

    /// `<name>.snap`.
    pub fn file_name(&self) -> String {
        format!("{}.snap", self.name())
    }

    /// The header's `description:`.
    pub fn description(&self) -> String {
        let mut text = description(&self.suite, &self.target, self.sanitize);
        if let Some(device) = self.recorded_by {
            text.push_str(&format!("; recorded by {}", device.recorded_by()));
        }
        if let Some(left_out) = &self.left_out {
            text.push_str(&format!("; {}", left_out.clause()));
        }
        text
    }

    /// The body this file holds after a run of `verdicts`: their rows, plus the rows `committed`
    /// (the file's text before the run) holds for the cases this run left out.
    pub fn body_after(&self, committed: Option<&str>, verdicts: &[Verdict]) -> String {
        let kept = match (&self.left_out, committed) {
            (Some(left_out), Some(text)) => parse_rows(text)
                .into_iter()
                .filter(|r| left_out.cases.contains(&r.case_id))
                .collect(),
            _ => Vec::new(),
        };
        render_rows(verdicts.iter().map(SnapshotRow::from).chain(kept))
    }
}

fn description(suite: &str, target: &str, sanitize: Option<SanitizerTool>) -> String {
    match sanitize {
        Some(tool) => format!(
            "verdicts of suite `{suite}` on target `{target}` under compute-sanitizer {tool}, exact-size allocations"
        ),
        None => format!("verdicts of suite `{suite}` on target `{target}`"),
    }
}

/// What ran a snapshot, as its header names it (`None` for headers that name nothing).
pub fn recorded_by_in(text: &str) -> Option<DeviceKind> {
    let description = header_description(text)?;
    DeviceKind::ALL
        .into_iter()
        .find(|k| description.contains(&format!("; recorded by {}", k.recorded_by())))
}

/// Reads `verdicts-<suite>[.sanitize-<tool>]@<target>.snap`; `None` for any other name.
pub fn parse_file_name(name: &str) -> Option<SnapshotFile> {
    let (key, target) = name
        .strip_prefix("verdicts-")?
        .strip_suffix(".snap")?
        .split_once('@')?;
    let (suite, sanitize) = match key.split_once(".sanitize-") {
        Some((suite, tool)) => (suite, Some(SanitizerTool::parse(tool)?)),
        None => (key, None),
    };
    Some(SnapshotFile::new(suite, target, sanitize))
}

/// Stable text: one row per check, sorted by case id then check.
pub fn render(verdicts: &[Verdict]) -> String {
    render_rows(verdicts.iter().map(SnapshotRow::from))
}

/// The body of a snapshot: the rows' lines, sorted and deduplicated, each ending in `\n`.
pub fn render_rows(rows: impl IntoIterator<Item = SnapshotRow>) -> String {
    let mut lines: Vec<String> = rows.into_iter().map(|r| r.line()).collect();
    lines.sort();
    lines.dedup();
    let mut out = String::with_capacity(lines.len() * 80);
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// The whole file as insta writes it: a YAML header (`source`, `description`), `---`, the body
/// without trailing blank lines, one final newline.
pub fn render_file(key: &SnapshotFile, body: &str) -> String {
    format!(
        "---\nsource: {}\ndescription: {}\n---\n{}\n",
        yaml_scalar(SOURCE),
        yaml_scalar(&key.description()),
        body.trim_end()
    )
}

/// A YAML scalar as insta's emitter writes it: plain unless it needs quotes, else double-quoted
/// with the emitter's escapes (the rules are those of insta's vendored yaml-rust emitter).
fn yaml_scalar(s: &str) -> String {
    let special_start = |c: char| {
        matches!(
            c,
            '&' | '*' | '?' | '|' | '-' | '<' | '>' | '=' | '!' | '%' | '@' | '.'
        )
    };
    let special = |c: char| {
        matches!(
            c,
            ':' | '{' | '}' | '[' | ']' | ',' | '#' | '`' | '"' | '\'' | '\\'
        ) || (c.is_ascii_control()
            && c != '\x07'
            && c != '\x08'
            && c != '\x0b'
            && c != '\x0c'
            && c != '\x1b'
            && c != '\x7f')
    };
    let reserved = [
        "yes", "Yes", "YES", "no", "No", "NO", "True", "TRUE", "true", "False", "FALSE", "false",
        "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL", "~",
    ];
    let quote = s.is_empty()
        || s.starts_with(' ')
        || s.ends_with(' ')
        || s.starts_with(special_start)
        || s.contains(special)
        || reserved.contains(&s)
        || s.starts_with("0x")
        || s.parse::<i64>().is_ok()
        || s.parse::<f64>().is_ok();
    if !quote {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x08' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\x0c' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if c.is_ascii_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

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

/// The committed snapshot file for a suite and target.
pub fn committed_path(repo_root: &Path, suite: &str, target: &str) -> PathBuf {
    repo_root
        .join("snapshots")
        .join(SnapshotFile::new(suite, target, None).file_name())
}

/// Where verdict snapshots live: `--snapshots DIR` when given, else `snapshots/` beside the case
/// folder (the repository root holds both), so a binary run from any folder finds the same files.
pub fn snapshot_dir(explicit: Option<&Path>, cases_dir: &Path) -> PathBuf {
    if let Some(dir) = explicit {
        return dir.to_path_buf();
    }
    let cases = std::fs::canonicalize(cases_dir).unwrap_or_else(|_| cases_dir.to_path_buf());
    match cases.parent() {
        Some(root) => root.join("snapshots"),
        None => cases.join("..").join("snapshots"),
    }
}

/// One parsed snapshot row.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SnapshotRow {
    pub case_id: String,
    pub check: String,
    pub outcome: String,
    pub bucket: Option<String>,
}

impl SnapshotRow {
    /// `<case> | <check> | <outcome>[ | <bucket>]`.
    pub fn line(&self) -> String {
        match &self.bucket {
            Some(b) => format!(
                "{} | {} | {} | {}",
                self.case_id, self.check, self.outcome, b
            ),
            None => format!("{} | {} | {}", self.case_id, self.check, self.outcome),
        }
    }

    /// Reads one body line; `None` when it has not 3 or 4 ` | `-separated fields.
    pub fn parse(line: &str) -> Option<SnapshotRow> {
        let parts: Vec<&str> = line.split(" | ").collect();
        let (id, check, outcome, bucket) = match parts.as_slice() {
            [id, check, outcome] => (id, check, outcome, None),
            [id, check, outcome, bucket] => (id, check, outcome, Some(bucket.to_string())),
            _ => return None,
        };
        Some(SnapshotRow {
            case_id: id.to_string(),
            check: check.to_string(),
            outcome: outcome.to_string(),
            bucket,
        })
    }
}

impl From<&Verdict> for SnapshotRow {
    fn from(v: &Verdict) -> Self {
        SnapshotRow {
            case_id: v.case_id.clone(),
            check: v.check.to_string(),
            outcome: v.outcome.to_string(),
            bucket: v.bucket.clone(),
        }
    }
}

/// The body of an insta snapshot file (what follows its `---` header); the whole text when it
/// has no header.
pub fn body_of(text: &str) -> &str {
    match text.strip_prefix("---") {
        Some(rest) => rest.split_once("\n---\n").map(|(_, b)| b).unwrap_or(""),
        None => text,
    }
}

/// Reads the rows of an insta snapshot file (skipping its `---` header).
pub fn parse_rows(text: &str) -> Vec<SnapshotRow> {
    body_of(text)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(SnapshotRow::parse)
        .collect()
}

/// Reads a snapshot file strictly: its header and every body line must parse; the error names
/// the first line that does not (1-based, counted in the whole file).
fn parse_file_strict(text: &str) -> Result<Vec<SnapshotRow>, (usize, String)> {
    let Some(rest) = text.strip_prefix("---\n") else {
        let first = text.lines().next().unwrap_or("");
        return Err((1, first.to_string()));
    };
    let Some((header, body)) = rest.split_once("\n---\n") else {
        return Err((1, "(no closing `---` of the header)".to_string()));
    };
    let first_body_line = header.lines().count() + 3;
    body.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| SnapshotRow::parse(l).ok_or((first_body_line + i, l.to_string())))
        .collect()
}

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

/// One row whose outcome changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerdictChange {
    pub case_id: String,
    pub check: String,
    pub old: String,
    pub new: String,
}

/// How a run's rows differ from a snapshot's: verdict changes, bucket moves (same outcome, other
/// bucket; counted per old→new pair, `-` for none), rows only in the run, rows only in the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotDiff {
    pub verdict_changes: Vec<VerdictChange>,
    pub bucket_moves: BTreeMap<(String, String), usize>,
    pub added: Vec<SnapshotRow>,
    pub removed: Vec<SnapshotRow>,
}

/// How many added or removed rows a diff prints before saying how many more there are.
const LISTED_ROWS: usize = 8;

impl SnapshotDiff {
    /// Rows are matched by (case id, check); a key held more than once on either side is
    /// compared as whole rows.
    pub fn between(old: &[SnapshotRow], new: &[SnapshotRow]) -> SnapshotDiff {
        fn group(rows: &[SnapshotRow]) -> BTreeMap<(&str, &str), Vec<&SnapshotRow>> {
            let mut m: BTreeMap<(&str, &str), Vec<&SnapshotRow>> = BTreeMap::new();
            for r in rows {
                m.entry((&r.case_id, &r.check)).or_default().push(r);
            }
            m
        }
        let (old_by, new_by) = (group(old), group(new));
        let mut diff = SnapshotDiff::default();
        let bucket = |b: &Option<String>| b.clone().unwrap_or_else(|| "-".to_string());
        for (key, olds) in &old_by {
            match (olds.as_slice(), new_by.get(key).map(Vec::as_slice)) {
                (_, None) => diff.removed.extend(olds.iter().map(|r| (*r).clone())),
                ([o], Some([n])) => {
                    if o.outcome != n.outcome {
                        diff.verdict_changes.push(VerdictChange {
                            case_id: o.case_id.clone(),
                            check: o.check.clone(),
                            old: o.outcome.clone(),
                            new: n.outcome.clone(),
                        });
                    } else if o.bucket != n.bucket {
                        *diff
                            .bucket_moves
                            .entry((bucket(&o.bucket), bucket(&n.bucket)))
                            .or_default() += 1;
                    }
                }
                (olds, Some(news)) => {
                    diff.removed.extend(
                        olds.iter()
                            .filter(|r| !news.contains(r))
                            .map(|r| (*r).clone()),
                    );
                    diff.added.extend(
                        news.iter()
                            .filter(|r| !olds.contains(r))
                            .map(|r| (*r).clone()),
                    );
                }
            }
        }
        for (key, news) in &new_by {
            if !old_by.contains_key(key) {
                diff.added.extend(news.iter().map(|r| (*r).clone()));
            }
        }
        diff
    }

    pub fn is_empty(&self) -> bool {
        self.verdict_changes.is_empty()
            && self.bucket_moves.is_empty()
            && self.added.is_empty()
            && self.removed.is_empty()
    }

    /// One line: how many of each kind of difference.
    pub fn counts(&self) -> String {
        let moves: usize = self.bucket_moves.values().sum();
        let mut parts = Vec::new();
        for (n, what) in [
            (self.verdict_changes.len(), "verdicts changed"),
            (moves, "bucket moves"),
            (self.added.len(), "rows added"),
            (self.removed.len(), "rows removed"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        if parts.is_empty() {
            "rows equal, text differs (order or format)".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// Verdict changes first (every one), then bucket moves counted per old→new bucket, then a few
/// added and removed rows.
impl fmt::Display for SnapshotDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.verdict_changes {
            writeln!(
                f,
                "  verdict  {} | {}: {} -> {}",
                c.case_id, c.check, c.old, c.new
            )?;
        }
        for ((old, new), n) in &self.bucket_moves {
            writeln!(f, "  buckets  {old} -> {new}: {n} rows")?;
        }
        for (sign, rows) in [("added", &self.added), ("removed", &self.removed)] {
            for r in rows.iter().take(LISTED_ROWS) {
                writeln!(f, "  {sign:<7}  {}", r.line())?;
            }
            if rows.len() > LISTED_ROWS {
                writeln!(f, "  {sign:<7}  ... and {} more", rows.len() - LISTED_ROWS)?;
            }
        }
        Ok(())
    }
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
            let old =
                parse_file_strict(&text).map_err(|(line, text)| SnapshotError::Malformed {
                    path: path.clone(),
                    line,
                    text,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::Check;
    use crate::runner::verdict::Outcome;
    use w4a16_kernels::KernelId;

    #[test]
    fn sanitize_runs_have_their_own_file_per_tool() {
        assert_eq!(snapshot_name_of("smoke", None), "verdicts-smoke");
        assert_eq!(
            snapshot_name_of("edges", Some(SanitizerTool::Memcheck)),
            "verdicts-edges.sanitize-memcheck"
        );
        assert_eq!(
            parse_file_name("verdicts-edges.sanitize-racecheck@sm_90.snap"),
            Some(SnapshotFile {
                suite: "edges".into(),
                target: "sm_90".into(),
                sanitize: Some(SanitizerTool::Racecheck),
                recorded_by: None,
                left_out: None,
            })
        );
        assert_eq!(
            parse_file_name("verdicts-smoke@sm_90.snap"),
            Some(SnapshotFile {
                suite: "smoke".into(),
                target: "sm_90".into(),
                sanitize: None,
                recorded_by: None,
                left_out: None,
            })
        );
        assert_eq!(
            parse_file_name("verdicts-smoke.sanitize-valgrind@sm_90.snap"),
            None
        );
        assert_eq!(parse_file_name("selection@sm_90.snap"), None);
    }

    #[test]
    fn render_is_sorted_and_parse_inverts_it() {
        let v = vec![
            Verdict::new(
                "s/b/M=1/f16/sym/g32/exact",
                Check::kernel(KernelId::Skinny),
                Outcome::Pass,
            )
            .bucket("0"),
            Verdict::new(
                "s/a/M=1/f16/sym/g32/exact",
                Check::Selection(None),
                Outcome::Pass,
            ),
        ];
        let text = render(&v);
        assert!(text.starts_with("s/a/"));
        let header = "---\nsource: x\n---\n";
        let rows = parse_rows(&format!("{header}{text}"));
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].bucket.as_deref(), Some("0"));
        assert_eq!(rows[0].check, "selection");
    }
}

#[cfg(test)]
mod cli_tests {
    //! The CLI's own snapshot path: rendering, comparing and writing without insta.
    use super::*;
    use crate::runner::Check;
    use crate::runner::verdict::Outcome;
    use w4a16_kernels::KernelId;

    /// A fresh folder under the system temp dir, removed on drop.
    fn scratch() -> tempfile::TempDir {
        tempfile::tempdir().expect("a temp dir")
    }

    fn committed_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../snapshots")
    }

    fn verdicts() -> Vec<Verdict> {
        let skinny = Check::kernel(KernelId::Skinny);
        let fused = Check::kernel(KernelId::Fused);
        vec![
            Verdict::new("s/a/M=1", skinny.clone(), Outcome::Pass).bucket("<1/4"),
            Verdict::new("s/a/M=1", fused.clone(), Outcome::Pass).bucket("<1/4"),
            Verdict::new("s/b/M=1", skinny.clone(), Outcome::Pass).bucket("<1/4"),
            Verdict::new("s/b/M=1", fused, Outcome::Pass).bucket("<1/2"),
            Verdict::new("s/c/M=1", skinny, Outcome::Pass).bucket("<1/4"),
            Verdict::new("s/c/M=1", Check::Selection(None), Outcome::Pass),
        ]
    }

    /// A budgeted run (the ISA emulator) judges only the cases it runs: the rows a GPU
    /// recorded for the cases above its budget are compared as they stand and written back
    /// unchanged, a changed verdict of a case it ran still differs, and its header says how many
    /// cases it left out.
    #[test]
    fn a_budgeted_run_keeps_the_rows_of_the_cases_it_left_out() {
        let dir = scratch();
        let all = verdicts();
        let gpu = SnapshotFile::new("s", "gfx1151", None).recorded_by(Some(DeviceKind::Rocm));
        let path = dir.path().join(gpu.file_name());
        std::fs::write(&path, render_file(&gpu, &render(&all))).unwrap();
        let left_out = LeftOut {
            by: Interpreter::IsaEmulator,
            cases: BTreeSet::from(["s/c/M=1".to_string()]),
        };
        let emu = SnapshotFile::new("s", "gfx1151", None)
            .recorded_by(Some(DeviceKind::Emulator))
            .left_out(Some(left_out));
        let ran: Vec<Verdict> = all
            .iter()
            .filter(|v| v.case_id != "s/c/M=1")
            .cloned()
            .collect();
        let same = compare_and_write(dir.path(), emu.clone(), &ran, SnapshotMode::Check).unwrap();
        assert!(!same.differs(), "{same}");
        let mut changed = ran.clone();
        changed[0].outcome = Outcome::Fail;
        let diff =
            compare_and_write(dir.path(), emu.clone(), &changed, SnapshotMode::Check).unwrap();
        let SnapshotStatus::Changed(d) = &diff.status else {
            panic!("expected a change, got {diff}");
        };
        assert_eq!(d.verdict_changes.len(), 1);
        assert!(d.removed.is_empty() && d.added.is_empty(), "{diff}");
        // Recorded by the emulator over the GPU's file: the left-out case's rows stay.
        compare_and_write(dir.path(), emu.clone(), &changed, SnapshotMode::Update).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            parse_rows(&text)
                .iter()
                .filter(|r| r.case_id == "s/c/M=1")
                .count(),
            2
        );
        assert_eq!(left_out_in(&text), Some(1));
        assert_eq!(recorded_by_in(&text), Some(DeviceKind::Emulator));
        // Recorded into an empty folder: only the rows it ran.
        let empty = scratch();
        compare_and_write(empty.path(), emu.clone(), &ran, SnapshotMode::Update).unwrap();
        let text = std::fs::read_to_string(empty.path().join(emu.file_name())).unwrap();
        assert!(!text.contains("s/c/M=1"), "{text}");
        assert!(
            text.contains("; 1 cases above the ISA emulator's budget (isa_emulator_max_macs"),
            "{text}"
        );
        assert_eq!(left_out_in(&render_file(&gpu, "")), None);
    }

    /// Every committed verdict snapshot, parsed back into rows and rendered again, is the
    /// committed file byte for byte: an unchanged run leaves the files as they are.
    #[test]
    fn rendering_a_committed_snapshot_reproduces_it_byte_for_byte() {
        let set = w4a16_cases::load_all(&w4a16_cases::locate(None).unwrap()).unwrap();
        let mut files = 0;
        for entry in std::fs::read_dir(committed_dir()).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let Some(key) = parse_file_name(&name) else {
                continue;
            };
            let text = std::fs::read_to_string(&path).unwrap();
            let rows = parse_file_strict(&text).unwrap_or_else(|e| panic!("{name}: {e:?}"));
            let recorded_by = recorded_by_in(&text);
            let target = w4a16_kernels::RunTarget::parse(&key.target).unwrap();
            let budget = CaseBudget::of(target, recorded_by, set.suite(&key.suite));
            let left_out = LeftOut::of(budget, &key.suite, set.cases());
            let key = key.recorded_by(recorded_by).left_out(left_out);
            assert_eq!(render_file(&key, &render_rows(rows)), text, "{name}");
            files += 1;
        }
        assert!(files >= 30, "only {files} verdict snapshots");
    }

    #[test]
    fn an_unchanged_run_writes_nothing_and_removes_a_stale_pending_file() {
        let dir = scratch();
        let key = SnapshotFile::new("s", "sm_90", None);
        let text = render_file(&key, &render(&verdicts()));
        std::fs::write(dir.path().join(key.file_name()), &text).unwrap();
        let pending = dir.path().join("verdicts-s@sm_90.snap.new");
        std::fs::write(&pending, "stale").unwrap();
        let report =
            compare_and_write(dir.path(), key.clone(), &verdicts(), SnapshotMode::Check).unwrap();
        assert_eq!(report.status, SnapshotStatus::Same);
        assert!(!report.differs() && report.written.is_none());
        assert!(!pending.exists());
        assert_eq!(
            std::fs::read_to_string(dir.path().join(key.file_name())).unwrap(),
            text
        );
    }

    /// A changed verdict is listed before everything else, bucket moves are counted per
    /// old→new pair, and `check` leaves the `.snap` alone and writes the `.snap.new`.
    #[test]
    fn a_changed_verdict_is_listed_first_and_bucket_moves_are_summarised() {
        let dir = scratch();
        let key = SnapshotFile::new("s", "sm_90", None);
        let old = render_file(&key, &render(&verdicts()));
        std::fs::write(dir.path().join(key.file_name()), &old).unwrap();
        let mut now = verdicts();
        now[0].bucket = Some("<1/2".into()); // a/skinny: <1/4 → <1/2
        now[2].bucket = Some("<1/2".into()); // b/skinny: <1/4 → <1/2
        now[3].bucket = Some("<1/4".into()); // b/fused:  <1/2 → <1/4
        now[4] =
            Verdict::new("s/c/M=1", Check::kernel(KernelId::Skinny), Outcome::Fail).bucket(">1");
        now.push(Verdict::new(
            "s/d/M=1",
            Check::kernel(KernelId::Skinny),
            Outcome::Pass,
        ));
        let report = compare_and_write(dir.path(), key.clone(), &now, SnapshotMode::Check).unwrap();
        let SnapshotStatus::Changed(diff) = &report.status else {
            panic!("expected a change, got {:?}", report.status);
        };
        assert_eq!(
            diff.verdict_changes,
            vec![VerdictChange {
                case_id: "s/c/M=1".into(),
                check: "skinny".into(),
                old: "pass".into(),
                new: "FAIL".into(),
            }]
        );
        let moves: Vec<_> = diff.bucket_moves.iter().collect();
        assert_eq!(
            moves,
            vec![
                (&("<1/2".to_string(), "<1/4".to_string()), &1),
                (&("<1/4".to_string(), "<1/2".to_string()), &2)
            ]
        );
        assert_eq!(diff.added.len(), 1);
        assert!(diff.removed.is_empty());
        let shown = report.to_string();
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(
            lines[0],
            "snapshot verdicts-s@sm_90: 1 verdicts changed, 3 bucket moves, 1 rows added (wrote "
                .to_string()
                + &dir
                    .path()
                    .join("verdicts-s@sm_90.snap.new")
                    .display()
                    .to_string()
                + ")"
        );
        assert_eq!(lines[1], "  verdict  s/c/M=1 | skinny: pass -> FAIL");
        assert_eq!(lines[2], "  buckets  <1/2 -> <1/4: 1 rows");
        assert_eq!(lines[3], "  buckets  <1/4 -> <1/2: 2 rows");
        assert_eq!(lines[4], "  added    s/d/M=1 | skinny | pass");
        assert!(report.differs());
        // The committed file is untouched; the pending one holds the run, in insta's format.
        assert_eq!(
            std::fs::read_to_string(dir.path().join(key.file_name())).unwrap(),
            old
        );
        let pending = std::fs::read_to_string(report.written.as_ref().unwrap()).unwrap();
        assert_eq!(pending, render_file(&key, &render(&now)));
        assert!(pending.starts_with(
            "---\nsource: harness/src/runner/snapshot.rs\ndescription: \"verdicts of suite `s` on target `sm_90`\"\n---\ns/a/M=1 | fused | pass | <1/4\n"
        ));
    }

    #[test]
    fn update_records_the_snapshot_and_clears_the_pending_one() {
        let dir = scratch();
        let key = SnapshotFile::new("s", "gfx1151-emu", Some(SanitizerTool::Memcheck));
        std::fs::write(dir.path().join(format!("{}.new", key.file_name())), "stale").unwrap();
        let report =
            compare_and_write(dir.path(), key.clone(), &verdicts(), SnapshotMode::Update).unwrap();
        assert_eq!(report.status, SnapshotStatus::New { rows: 6 });
        let path = dir
            .path()
            .join("verdicts-s.sanitize-memcheck@gfx1151-emu.snap");
        assert_eq!(report.written.as_deref(), Some(path.as_path()));
        assert!(std::fs::read_to_string(&path).unwrap().contains(
            "description: \"verdicts of suite `s` on target `gfx1151-emu` under compute-sanitizer memcheck, exact-size allocations\"\n"
        ));
        assert!(!dir.path().join(format!("{}.new", key.file_name())).exists());
    }

    #[test]
    fn a_missing_snapshot_is_new_and_its_pending_file_is_written() {
        let dir = scratch();
        let key = SnapshotFile::new("s", "sm_90", None);
        let report = compare_and_write(dir.path(), key, &verdicts(), SnapshotMode::Check).unwrap();
        assert_eq!(report.status, SnapshotStatus::New { rows: 6 });
        assert!(report.differs());
        let pending = dir.path().join("verdicts-s@sm_90.snap.new");
        assert_eq!(report.written.as_deref(), Some(pending.as_path()));
        assert!(!dir.path().join("verdicts-s@sm_90.snap").exists());
        assert!(
            report
                .to_string()
                .starts_with("snapshot verdicts-s@sm_90: new, 6 rows (wrote ")
        );
    }

    #[test]
    fn a_malformed_snapshot_is_an_error_naming_its_line() {
        let dir = scratch();
        let key = SnapshotFile::new("s", "sm_90", None);
        std::fs::write(
            dir.path().join(key.file_name()),
            "---\nsource: x\ndescription: y\n---\ns/a | skinny | pass\n<<<<<<< HEAD\n",
        )
        .unwrap();
        let e = compare_and_write(dir.path(), key, &verdicts(), SnapshotMode::Check).unwrap_err();
        let SnapshotError::Malformed { line, text, .. } = &e else {
            panic!("expected a malformed-file error, got {e}");
        };
        assert_eq!((*line, text.as_str()), (6, "<<<<<<< HEAD"));
        assert!(
            e.to_string()
                .contains("verdicts-s@sm_90.snap:6: expected a verdict snapshot")
        );
    }

    /// The folder comes from the case folder (or `--snapshots`), whatever the current folder:
    /// the committed snapshots are found from the repository's `cases/`.
    #[test]
    fn the_snapshot_folder_is_found_beside_the_cases_folder() {
        let cases = w4a16_cases::locate(None).expect("the cases folder");
        let dir = snapshot_dir(None, &cases);
        assert_eq!(dir, std::fs::canonicalize(committed_dir()).unwrap());
        assert!(dir.join("verdicts-smoke@sm_90.snap").is_file());
        let elsewhere = Path::new("/elsewhere/snaps");
        assert_eq!(snapshot_dir(Some(elsewhere), &cases), elsewhere);
    }

    #[test]
    fn yaml_scalars_are_quoted_and_escaped_as_insta_does() {
        assert_eq!(yaml_scalar("harness/src/x.rs"), "harness/src/x.rs");
        assert_eq!(yaml_scalar("a `b`"), "\"a `b`\"");
        assert_eq!(yaml_scalar("say \"hi\"\\"), "\"say \\\"hi\\\"\\\\\"");
        assert_eq!(yaml_scalar("tab\there"), "\"tab\\there\"");
        assert_eq!(yaml_scalar("true"), "\"true\"");
        assert_eq!(yaml_scalar("12"), "\"12\"");
        assert_eq!(yaml_scalar("-x"), "\"-x\"");
    }
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
