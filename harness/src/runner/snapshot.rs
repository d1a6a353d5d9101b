//! Verdict snapshots, one file per suite per target (`snapshots/verdicts-<suite>@<target>.snap`);
//! a sanitizer run's are keyed by its tool too (`verdicts-<suite>.sanitize-<tool>@<target>.snap`).
//! insta writes and compares them; this module also reads committed ones back so a machine
//! without the target's GPU can still check that they are current and all passing.

use super::sanitize::SanitizerTool;
use super::verdict::Verdict;
use std::path::{Path, PathBuf};

/// The repo-root `snapshots/` folder, relative to this file (insta resolves it from here;
/// `INSTA_WORKSPACE_ROOT` relocates it when binaries run on another machine).
const SNAPSHOT_DIR_FROM_HERE: &str = "../../../snapshots";

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

/// What a verdict snapshot's file name says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotFile {
    pub suite: String,
    pub target: String,
    pub sanitize: Option<SanitizerTool>,
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
    Some(SnapshotFile {
        suite: suite.to_string(),
        target: target.to_string(),
        sanitize,
    })
}

/// Stable text: one row per check, sorted by case id then check.
pub fn render(verdicts: &[Verdict]) -> String {
    let mut rows: Vec<String> = verdicts.iter().map(Verdict::snapshot_row).collect();
    rows.sort();
    rows.dedup();
    let mut out = String::with_capacity(rows.len() * 80);
    for r in rows {
        out.push_str(&r);
        out.push('\n');
    }
    out
}

/// Compare (or, under `INSTA_UPDATE`, record) the verdict snapshot of `suite` on `target`.
pub fn assert_verdicts(suite: &str, target: &str, verdicts: &[Verdict]) {
    assert_verdicts_of(suite, target, None, verdicts)
}

/// As [`assert_verdicts`], for a run under `sanitize` when given.
pub fn assert_verdicts_of(
    suite: &str,
    target: &str,
    sanitize: Option<SanitizerTool>,
    verdicts: &[Verdict],
) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(SNAPSHOT_DIR_FROM_HERE);
    settings.set_prepend_module_to_snapshot(false);
    settings.set_snapshot_suffix(target);
    settings.set_omit_expression(true);
    settings.set_description(match sanitize {
        Some(tool) => format!(
            "verdicts of suite `{suite}` on target `{target}` under compute-sanitizer {tool}, exact-size allocations"
        ),
        None => format!("verdicts of suite `{suite}` on target `{target}`"),
    });
    let text = render(verdicts);
    settings.bind(|| insta::assert_snapshot!(snapshot_name_of(suite, sanitize), text));
}

/// The committed snapshot file for a suite and target.
pub fn committed_path(repo_root: &Path, suite: &str, target: &str) -> PathBuf {
    repo_root
        .join("snapshots")
        .join(format!("{}@{}.snap", snapshot_name(suite), target))
}

/// One parsed snapshot row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotRow {
    pub case_id: String,
    pub check: String,
    pub outcome: String,
    pub bucket: Option<String>,
}

/// Reads the rows of an insta snapshot file (skipping its `---` header).
pub fn parse_rows(text: &str) -> Vec<SnapshotRow> {
    let body = match text.strip_prefix("---") {
        Some(rest) => rest.split_once("\n---\n").map(|(_, b)| b).unwrap_or(""),
        None => text,
    };
    body.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let parts: Vec<&str> = l.split(" | ").collect();
            match parts.as_slice() {
                [id, check, outcome] => Some(SnapshotRow {
                    case_id: id.to_string(),
                    check: check.to_string(),
                    outcome: outcome.to_string(),
                    bucket: None,
                }),
                [id, check, outcome, bucket] => Some(SnapshotRow {
                    case_id: id.to_string(),
                    check: check.to_string(),
                    outcome: outcome.to_string(),
                    bucket: Some(bucket.to_string()),
                }),
                _ => None,
            }
        })
        .collect()
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
                sanitize: Some(SanitizerTool::Racecheck)
            })
        );
        assert_eq!(
            parse_file_name("verdicts-smoke@sm_90.snap"),
            Some(SnapshotFile {
                suite: "smoke".into(),
                target: "sm_90".into(),
                sanitize: None
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
