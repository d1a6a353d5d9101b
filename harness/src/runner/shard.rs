//! CI shards: `w4a16 run --shard I/N` runs a stable share of the chosen cases, and
//! `w4a16 merge DIR…` combines the shards' report.json, JUnit and verdict snapshots into the
//! files one unsharded run writes.
//!
//! **Which cases a shard takes.** The cases are grouped by layer ([`session::by_layer`], the
//! grouping the workers use, so each shard makes a layer's weights once) and the groups are
//! dealt by [`session::deal`] with one unit per case: largest layer first onto the shard with
//! the fewest cases, ties to the lower shard. The rule reads only the ordered list of chosen
//! cases, never the worker count or the machine, so every job of a CI matrix computes the same
//! split. It balances by case count (no shard holds more than the lightest plus one layer),
//! which a hash of the layer key would not: a suite has tens of layers, few enough for a hash to
//! leave one shard with twice another's cases. The price is that adding a layer may move other
//! layers between shards; the shards of one pipeline always run the same commit, and `merge`
//! refuses shards of different selections, so no case is lost or run twice.
//!
//! **What a shard records.** Its report.json has a `shard` object ([`ShardRecord`]): I and N,
//! the suites, filter and commit, a digest of the whole ordered selection, each of its cases'
//! position in that selection, and how its verdicts divide into the case-independent checks
//! (shard 1 runs them), the cases' checks and the sanitizer skips: enough for `merge` to put
//! every verdict where the unsharded run puts it without the case folder.

use super::cli_run::{self, RunEnd, RunError};
use super::cost::{SuiteCost, merge_suite_costs};
use super::execute::ReferenceChoice;
use super::report::Timing;
use super::session;
use super::snapshot::{self, LeftOut, SnapshotFile};
use super::verdict::SnapshotRow;
use super::{PhaseTimes, Verdict};
use crate::report::FileError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use w4a16_cases::Case;
use w4a16_device::DeviceKind;

/// `--shard I/N`: this job runs share I (1-based) of N.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardSpec {
    pub index: usize,
    pub count: usize,
}

/// Why a `--shard` value is not `I/N`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("--shard {input:?}: expected I/N with whole numbers 1 ≤ I ≤ N (e.g. 2/4), {why}")]
pub struct ShardParseError {
    pub input: String,
    pub why: String,
}

impl FromStr for ShardSpec {
    type Err = ShardParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |why: String| ShardParseError {
            input: s.to_string(),
            why,
        };
        let (i, n) = s.split_once('/').ok_or_else(|| err("got no `/`".into()))?;
        let num = |part: &str, what: &str| {
            part.trim()
                .parse::<usize>()
                .map_err(|_| err(format!("{what} {part:?} is not a whole number")))
        };
        let (index, count) = (num(i, "I")?, num(n, "N")?);
        if count == 0 {
            return Err(err("N is 0".into()));
        }
        if index == 0 {
            return Err(err("I is 0 (shards count from 1)".into()));
        }
        if index > count {
            return Err(err(format!("I = {index} is above N = {count}")));
        }
        Ok(ShardSpec { index, count })
    }
}

impl fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl ShardSpec {
    /// This shard's cases of `chosen` with their positions in it, in `chosen`'s order.
    pub fn take<'c>(&self, chosen: &[&'c Case]) -> Vec<(usize, &'c Case)> {
        let mut mine = self.positions(chosen.iter().map(|c| c.layer_key()));
        mine.sort_unstable();
        mine.into_iter().map(|i| (i, chosen[i])).collect()
    }

    /// Positions of this shard's cases among cases whose layer keys are `layer_keys` (see the
    /// module doc for the rule).
    pub fn positions(&self, layer_keys: impl IntoIterator<Item = String>) -> Vec<usize> {
        let groups = session::by_layer(layer_keys);
        // `deal` drops empty shards, and with one unit per case those are the last ones (each
        // of the first groups goes to a still-empty shard in turn): index I-1 is shard I.
        session::deal(groups, |_| 1.0, self.count)
            .into_iter()
            .nth(self.index - 1)
            .unwrap_or_default()
    }

    /// Whether this shard runs the case-independent checks (every unsharded run does).
    pub fn runs_global_checks(&self) -> bool {
        self.index == 1
    }
}

/// A stable digest of the ordered selection (FNV-1a over the ids, newline-separated): shards of
/// different suites, filters or case folders disagree on it.
pub fn selection_digest<'a>(ids: impl IntoIterator<Item = &'a str>) -> String {
    let joined: Vec<&str> = ids.into_iter().collect();
    format!(
        "{:016x}",
        w4a16_reference::data::case_seed(&joined.join("\n"))
    )
}

/// The commit of the repository holding `dir` (`git rev-parse HEAD`), `None` outside one or
/// without git.
pub fn commit_of(dir: &Path) -> Option<String> {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// How many of a report's verdicts are case-independent checks, cases' checks and sanitizer
/// skips, in that order (the order an unsharded run writes them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sections {
    pub global: usize,
    pub cases: usize,
    pub sanitizer_skips: usize,
}

/// The `shard` object of a shard's report.json.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRecord {
    pub index: usize,
    pub count: usize,
    /// `--suite` as given (empty: all).
    pub suites: Vec<String>,
    pub filter: Option<String>,
    /// The checkout's commit, where git knows it.
    pub commit: Option<String>,
    /// [`selection_digest`] of every chosen case of the unsharded run.
    pub selection: String,
    /// How many cases the unsharded run has.
    pub selected: usize,
    /// Each of this shard's cases and its position in the selection.
    pub positions: BTreeMap<String, usize>,
    pub sections: Sections,
    /// The failure-artifact folder as the shard's verdict details name it (`<report>/artifacts`
    /// on the shard's machine); `merge` points those details at the merged folder instead.
    pub artifacts: String,
    /// The verdict snapshot files this shard wrote its rows of (under `snapshots/` beside the
    /// report), the same list in every shard; empty when the run recorded none.
    pub snapshots: Vec<String>,
    /// Per suite, the chosen cases above the device's budget that no shard runs (the same in
    /// every shard): the merged snapshots keep their committed rows and say so.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub left_out: BTreeMap<String, LeftOut>,
}

/// Where a shard writes the rows of each snapshot file: `<report dir>/snapshots/`.
pub fn snapshot_part_dir(report_dir: &Path) -> PathBuf {
    report_dir.join("snapshots")
}

/// Writes this shard's rows of each snapshot `file` (the verdicts of its suite) in the
/// snapshot format, so the shard's files read like a run's and `merge` unions them.
pub fn write_snapshot_parts(
    report_dir: &Path,
    files: &[SnapshotFile],
    verdicts: &[Verdict],
) -> Result<(), FileError> {
    let dir = snapshot_part_dir(report_dir);
    FileError::at(&dir, std::fs::create_dir_all(&dir))?;
    for file in files {
        let prefix = format!("{}/", file.suite);
        let rows: Vec<Verdict> = verdicts
            .iter()
            .filter(|v| v.case_id.starts_with(&prefix))
            .cloned()
            .collect();
        let path = dir.join(file.file_name());
        let text = snapshot::render_file(file, &snapshot::render(&rows));
        FileError::at(&path, std::fs::write(&path, text))?;
    }
    Ok(())
}

/// A shard's rows against the committed snapshot's rows of the same cases (a shard holds only
/// its share, so the rest of the file is not its to compare). `None` when they agree.
pub fn compare_part(
    snapshot_dir: &Path,
    file: &SnapshotFile,
    verdicts: &[Verdict],
    cases: &BTreeSet<&str>,
) -> Result<Option<snapshot::SnapshotDiff>, FileError> {
    let path = snapshot_dir.join(file.file_name());
    let committed = match std::fs::read_to_string(&path) {
        Ok(text) => snapshot::parse_rows(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(source) => return Err(FileError { path, source }),
    };
    let prefix = format!("{}/", file.suite);
    let old: Vec<SnapshotRow> = committed
        .into_iter()
        .filter(|r| cases.contains(r.case_id.as_str()))
        .collect();
    let new: Vec<SnapshotRow> = verdicts
        .iter()
        .filter(|v| v.case_id.starts_with(&prefix))
        .map(SnapshotRow::from)
        .collect();
    let diff = snapshot::SnapshotDiff::between(&old, &new);
    Ok((!diff.is_empty()).then_some(diff))
}

/// Why shards cannot be merged: each names the folder and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("{}: cannot read the shard's report: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{}: expected a shard's report.json (`target`, `verdicts` and a `shard` object from `w4a16 run --shard I/N`): {why}",
        path.display()
    )]
    NotAShard { path: PathBuf, why: String },
    #[error(
        "{}: the shard's {field} is {found}, but {} has {expected}: shards of one run share it",
        dir.display(),
        first.display()
    )]
    Different {
        field: &'static str,
        dir: PathBuf,
        found: String,
        first: PathBuf,
        expected: String,
    },
    #[error("shard {index}/{count} is given twice: {} and {}", a.display(), b.display())]
    Overlap {
        index: usize,
        count: usize,
        a: PathBuf,
        b: PathBuf,
    },
    #[error(
        "case {case} is in two shards ({} and {}): each case belongs to exactly one",
        a.display(),
        b.display()
    )]
    OverlapCase {
        case: String,
        a: PathBuf,
        b: PathBuf,
    },
    #[error("{present} of {count} shards present: missing {}", missing.iter().map(|i| format!("{i}/{count}")).collect::<Vec<_>>().join(", "))]
    Missing {
        present: usize,
        count: usize,
        missing: Vec<usize>,
    },
    #[error(
        "the shards hold {held} of the {selected} selected cases: expected every case once (are they of one run?)"
    )]
    Incomplete { held: usize, selected: usize },
    #[error("{}: verdict of case {case} has no position in its shard's `positions`", dir.display())]
    Unplaced { dir: PathBuf, case: String },
    #[error("{}: {why}", path.display())]
    Snapshot { path: PathBuf, why: String },
    #[error("no shard folders given: expected `w4a16 merge DIR…` with one folder per shard")]
    NoShards,
    #[error("{}: `target` {target:?} is not a run target", path.display())]
    UnknownTarget { path: PathBuf, target: String },
    #[error("{} → {}: {source}", from.display(), to.display())]
    Copy {
        from: PathBuf,
        to: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] FileError),
}

#[derive(Deserialize)]
struct ShardReport {
    target: String,
    /// `gpu` or `cpu` (absent in reports that do not record it).
    #[serde(default)]
    reference: Option<String>,
    /// What ran the launches (absent in reports that do not record it).
    #[serde(default)]
    device: Option<DeviceKind>,
    #[serde(default)]
    timing: Option<TimingIn>,
    shard: Option<ShardRecord>,
    verdicts: Vec<Verdict>,
}

#[derive(Deserialize)]
struct TimingIn {
    wall_s: f64,
    workers: usize,
    phases: PhaseTimes,
    #[serde(default)]
    suites: Vec<SuiteCost>,
    #[serde(default)]
    groups: Vec<SuiteCost>,
}

/// The shards combined: what one unsharded run reports.
#[derive(Clone, Debug)]
pub struct Merged {
    pub target: String,
    /// The reference every shard was judged by (`gpu`/`cpu`), when recorded.
    pub reference: Option<ReferenceChoice>,
    /// What ran every shard's launches, when recorded.
    pub device: Option<DeviceKind>,
    /// In the unsharded run's order.
    pub verdicts: Vec<Verdict>,
    /// The longest shard's wall time (the critical path of the matrix), all shards' workers,
    /// their phase times summed.
    pub wall_s: f64,
    pub workers: usize,
    pub times: PhaseTimes,
    /// The shards' cost per suite, each suite's rows added up.
    pub suite_costs: Vec<SuiteCost>,
    /// The same per group within each suite.
    pub group_costs: Vec<SuiteCost>,
    /// Each snapshot file with the union of the shards' rows.
    pub snapshots: Vec<(SnapshotFile, Vec<SnapshotRow>)>,
    pub suites: Vec<String>,
}

impl Merged {
    /// The timing as a run reports it.
    pub fn timing(&self) -> Timing<'_> {
        Timing {
            wall_s: self.wall_s,
            workers: self.workers,
            phases: &self.times,
            suites: &self.suite_costs,
            groups: &self.group_costs,
        }
    }
}

/// How a failure's detail names its artifact (see `execute::judge`).
fn artifact_mention(dir: &str) -> String {
    format!("; artifact: {dir}")
}

/// One shard's folder as `merge` reads it: the folder, its report and its record.
type Shard = (PathBuf, ShardReport, ShardRecord);

/// Reads and checks the shards in `dirs` (each holding a shard's report.json and its
/// `snapshots/`) and puts their verdicts in the unsharded run's order; details that name a
/// shard's failure artifacts name them in `artifacts` (where `merge_command` copies them).
pub fn merge(dirs: &[PathBuf], artifacts: &Path) -> Result<Merged, MergeError> {
    let mut shards = dirs
        .iter()
        .map(|dir| read_shard(dir))
        .collect::<Result<Vec<Shard>, MergeError>>()?;
    // Shards in index order: within each section below a stable sort by case position then
    // restores the unsharded order (each shard's verdicts of a case are contiguous, in run order).
    shards.sort_by_key(|(_, _, r)| r.index);
    let Some((first_dir, first, first_rec)) = shards.first() else {
        return Err(MergeError::NoShards);
    };
    check_one_run(&shards)?;
    check_every_case_once(&shards)?;
    let placed = place_verdicts(&shards, artifacts)?;
    let snapshots = merged_snapshots(&shards)?;
    let reference = match first.reference.as_deref() {
        None => None,
        Some(name) => Some(
            ReferenceChoice::parse(name).ok_or_else(|| MergeError::NotAShard {
                path: first_dir.join("report.json"),
                why: format!("`reference` {name:?} is neither gpu nor cpu"),
            })?,
        ),
    };
    Ok(Merged {
        target: first.target.clone(),
        reference,
        device: first.device,
        verdicts: placed.verdicts,
        wall_s: placed.wall_s,
        workers: placed.workers,
        times: placed.times,
        suite_costs: placed.suite_costs,
        group_costs: placed.group_costs,
        snapshots,
        suites: first_rec.suites.clone(),
    })
}

/// A shard's report.json, refused unless it is a shard's whose sections add up.
fn read_shard(dir: &Path) -> Result<Shard, MergeError> {
    let path = dir.join("report.json");
    let text = std::fs::read_to_string(&path).map_err(|source| MergeError::Read {
        path: path.clone(),
        source,
    })?;
    let mut report: ShardReport =
        serde_json::from_str(&text).map_err(|e| MergeError::NotAShard {
            path: path.clone(),
            why: e.to_string(),
        })?;
    let record = report.shard.take().ok_or_else(|| MergeError::NotAShard {
        path: path.clone(),
        why: "it has no `shard` object (an unsharded run's report)".into(),
    })?;
    let s = record.sections;
    if s.global + s.cases + s.sanitizer_skips != report.verdicts.len() {
        return Err(MergeError::NotAShard {
            path,
            why: format!(
                "its sections count {} verdicts, it holds {}",
                s.global + s.cases + s.sanitizer_skips,
                report.verdicts.len()
            ),
        });
    }
    Ok((dir.to_path_buf(), report, record))
}

/// One run: same target, selection, commit and shard count throughout (`shards` non-empty).
fn check_one_run(shards: &[Shard]) -> Result<(), MergeError> {
    let (first_dir, first, first_rec) = &shards[0];
    for (dir, report, rec) in &shards[1..] {
        let checks: [(&'static str, String, String); 9] = [
            ("target", first.target.clone(), report.target.clone()),
            (
                "device",
                format!("{:?}", first.device),
                format!("{:?}", report.device),
            ),
            (
                "reference",
                format!("{:?}", first.reference),
                format!("{:?}", report.reference),
            ),
            (
                "suites",
                format!("{:?}", first_rec.suites),
                format!("{:?}", rec.suites),
            ),
            (
                "filter",
                format!("{:?}", first_rec.filter),
                format!("{:?}", rec.filter),
            ),
            (
                "commit",
                first_rec.commit.clone().unwrap_or_else(|| "unknown".into()),
                rec.commit.clone().unwrap_or_else(|| "unknown".into()),
            ),
            (
                "selection digest",
                first_rec.selection.clone(),
                rec.selection.clone(),
            ),
            (
                "shard count N",
                first_rec.count.to_string(),
                rec.count.to_string(),
            ),
            (
                "snapshot files",
                first_rec.snapshots.join(", "),
                rec.snapshots.join(", "),
            ),
        ];
        for (field, expected, found) in checks {
            if expected != found {
                return Err(MergeError::Different {
                    field,
                    dir: dir.clone(),
                    found,
                    first: first_dir.clone(),
                    expected,
                });
            }
        }
    }
    Ok(())
}

/// Every shard I of N once, and every selected case in exactly one shard.
fn check_every_case_once(shards: &[Shard]) -> Result<(), MergeError> {
    let first_rec = &shards[0].2;
    let count = first_rec.count;
    let mut by_index: BTreeMap<usize, &PathBuf> = BTreeMap::new();
    for (dir, _, rec) in shards {
        if let Some(a) = by_index.insert(rec.index, dir) {
            return Err(MergeError::Overlap {
                index: rec.index,
                count,
                a: a.clone(),
                b: dir.clone(),
            });
        }
    }
    let missing: Vec<usize> = (1..=count).filter(|i| !by_index.contains_key(i)).collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing {
            present: by_index.len(),
            count,
            missing,
        });
    }
    let mut owner: BTreeMap<&str, &PathBuf> = BTreeMap::new();
    for (dir, _, rec) in shards {
        for case in rec.positions.keys() {
            if let Some(a) = owner.insert(case, dir) {
                return Err(MergeError::OverlapCase {
                    case: case.clone(),
                    a: a.clone(),
                    b: dir.clone(),
                });
            }
        }
    }
    let positions: BTreeSet<usize> = shards
        .iter()
        .flat_map(|(_, _, r)| r.positions.values().copied())
        .collect();
    let selected = first_rec.selected;
    if owner.len() != selected || positions.len() != selected || positions.last() >= Some(&selected)
    {
        return Err(MergeError::Incomplete {
            held: owner.len(),
            selected,
        });
    }
    Ok(())
}

/// The shards' verdicts in the unsharded run's order, and their timing combined.
struct Placed {
    verdicts: Vec<Verdict>,
    wall_s: f64,
    workers: usize,
    times: PhaseTimes,
    suite_costs: Vec<SuiteCost>,
    group_costs: Vec<SuiteCost>,
}

/// Each shard's verdicts put where the unsharded run puts them: the case-independent checks
/// first, then the cases' checks and the sanitizer skips each by case position; details naming
/// a shard's artifact folder name `artifacts` instead.
fn place_verdicts(shards: &[Shard], artifacts: &Path) -> Result<Placed, MergeError> {
    let mut global = Vec::new();
    let mut cases: Vec<(usize, Verdict)> = Vec::new();
    let mut skips: Vec<(usize, Verdict)> = Vec::new();
    let (mut wall_s, mut workers, mut times) = (0.0f64, 0usize, PhaseTimes::default());
    let (mut suite_rows, mut group_rows): (Vec<&SuiteCost>, Vec<&SuiteCost>) = Default::default();
    for (dir, report, rec) in shards {
        if let Some(t) = &report.timing {
            wall_s = wall_s.max(t.wall_s);
            workers += t.workers;
            times.merge(&t.phases);
            suite_rows.extend(&t.suites);
            group_rows.extend(&t.groups);
        }
        let place = |v: &Verdict| {
            rec.positions
                .get(&v.case_id)
                .copied()
                .ok_or_else(|| MergeError::Unplaced {
                    dir: dir.clone(),
                    case: v.case_id.clone(),
                })
        };
        let s = rec.sections;
        let (from, to) = (
            artifact_mention(&rec.artifacts),
            artifact_mention(&artifacts.display().to_string()),
        );
        for (i, v) in report.verdicts.iter().enumerate() {
            let mut v = v.clone();
            if v.detail.contains(&from) {
                v.detail = v.detail.replace(&from, &to);
            }
            if i < s.global {
                global.push(v);
            } else if i < s.global + s.cases {
                cases.push((place(&v)?, v));
            } else {
                skips.push((place(&v)?, v));
            }
        }
    }
    cases.sort_by_key(|(p, _)| *p);
    skips.sort_by_key(|(p, _)| *p);
    let mut verdicts = global;
    verdicts.extend(cases.into_iter().map(|(_, v)| v));
    verdicts.extend(skips.into_iter().map(|(_, v)| v));
    Ok(Placed {
        verdicts,
        wall_s,
        workers,
        times,
        suite_costs: merge_suite_costs(suite_rows),
        group_costs: merge_suite_costs(group_rows),
    })
}

/// Each snapshot file the shards list, with the union of their rows.
fn merged_snapshots(shards: &[Shard]) -> Result<Vec<(SnapshotFile, Vec<SnapshotRow>)>, MergeError> {
    let (first_dir, first, first_rec) = &shards[0];
    let mut snapshots = Vec::new();
    for name in &first_rec.snapshots {
        let key = snapshot::parse_file_name(name).ok_or_else(|| MergeError::Snapshot {
            path: snapshot_part_dir(first_dir).join(name),
            why: "expected a verdict snapshot name `verdicts-<suite>[.sanitize-<tool>]@<target>.snap`".into(),
        })?;
        let mut rows = Vec::new();
        for (dir, _, _) in shards {
            let path = snapshot_part_dir(dir).join(name);
            let text = std::fs::read_to_string(&path).map_err(|e| MergeError::Snapshot {
                path: path.clone(),
                why: format!("the shard lists this snapshot file but it cannot be read: {e}"),
            })?;
            rows.extend(snapshot::parse_rows(&text));
        }
        let left_out = first_rec.left_out.get(&key.suite).cloned();
        snapshots.push((key.recorded_by(first.device).left_out(left_out), rows));
    }
    Ok(snapshots)
}

/// Copies each shard's failure artifacts into the merged folder (their names are per case and
/// check, so shards never collide).
fn copy_artifacts(dirs: &[PathBuf], to: &Path) -> Result<(), MergeError> {
    for dir in dirs {
        let from = dir.join("artifacts");
        let Ok(entries) = std::fs::read_dir(&from) else {
            continue;
        };
        FileError::at(to, std::fs::create_dir_all(to))?;
        for entry in entries {
            let entry = FileError::at(&from, entry)?;
            let target = to.join(entry.file_name());
            std::fs::copy(entry.path(), &target).map_err(|source| MergeError::Copy {
                from: entry.path(),
                to: target.clone(),
                source,
            })?;
        }
    }
    Ok(())
}

/// Writes the merged snapshot files into `dir` (`<out>/snapshots/`), as a run's
/// `--snapshot update` writes them into an empty folder.
pub fn write_merged_snapshots(dir: &Path, merged: &Merged) -> Result<(), FileError> {
    if merged.snapshots.is_empty() {
        return Ok(());
    }
    FileError::at(dir, std::fs::create_dir_all(dir))?;
    for (key, rows) in &merged.snapshots {
        let path = dir.join(key.file_name());
        let text = snapshot::render_file(key, &snapshot::render_rows(rows.iter().cloned()));
        FileError::at(&path, std::fs::write(&path, text))?;
    }
    Ok(())
}

/// `w4a16 merge`: the shards in `dirs` combined into `out` (report.json, junit.xml, summary.md
/// and `snapshots/`), byte for byte what one unsharded run writes but for its timing; then, with
/// `snapshot`, the merged verdicts compared with (or recorded in) `snapshot_dir` as `run` does.
pub fn merge_command(
    dirs: &[PathBuf],
    out: &Path,
    snapshot: Option<(snapshot::SnapshotMode, &Path)>,
) -> Result<RunEnd, RunError> {
    let artifacts = out.join("artifacts");
    let merged = merge(dirs, &artifacts)?;
    copy_artifacts(dirs, &artifacts)?;
    let target = w4a16_kernels::RunTarget::parse(&merged.target).ok_or_else(|| {
        MergeError::UnknownTarget {
            path: dirs[0].join("report.json"),
            target: merged.target.clone(),
        }
    })?;
    cli_run::write_reports(
        out,
        target,
        merged.reference,
        merged.device,
        &merged.verdicts,
        merged.timing(),
    )?;
    write_merged_snapshots(&snapshot_part_dir(out), &merged)?;
    let differing = match snapshot {
        Some((mode, dir)) if !merged.snapshots.is_empty() => cli_run::snapshots(
            dir,
            mode,
            merged.snapshots.iter().map(|(k, _)| k.clone()),
            &merged.verdicts,
        )?,
        Some(_) => {
            eprintln!(
                "w4a16: SNAPSHOTS NOT COMPARED: the shards recorded no verdict snapshots (run them with --snapshot check on a GPU)"
            );
            Vec::new()
        }
        None => Vec::new(),
    };
    let summary = super::Summary::of(&merged.verdicts);
    print!("{summary}");
    println!(
        "merged {} shards: {} verdicts; longest shard {:.1} s wall, {} workers in all",
        dirs.len(),
        merged.verdicts.len(),
        merged.wall_s,
        merged.workers
    );
    println!(
        "reports: {}/{{report.json,junit.xml,summary.md}}",
        out.display()
    );
    Ok(RunEnd {
        summary,
        differing_snapshots: differing,
    })
}

#[cfg(test)]
mod tests;
