//! Which verdict snapshot a run compares: its key (suite, target, sanitizer tool), its file
//! name, its header's description (what recorded it, which cases a budgeted run left out) and the
//! folder it lives in.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use w4a16_device::DeviceKind;

use super::format::{parse_rows, render_rows};
use crate::runner::budget::{CaseBudget, Interpreter};
use crate::runner::verdict::{SanitizerTool, SnapshotRow, Verdict};

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
    // A native gfx target's sanitizer runs are the ISA emulator's own (docs/sanitize.md).
    let gfx = w4a16_kernels::RunTarget::parse(target).is_some_and(|t| {
        t.target.vendor() == w4a16_kernels::target::Vendor::Amd && !t.is_emulated()
    });
    match sanitize {
        Some(tool) if gfx => format!(
            "verdicts of suite `{suite}` on target `{target}` under the ISA emulator's {tool} (emu/src/sanitize), exact-size allocations"
        ),
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
