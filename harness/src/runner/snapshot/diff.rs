//! How a run's rows differ from a committed snapshot's, compactly: verdict changes first, bucket
//! moves counted, a few added and removed rows.

use std::collections::BTreeMap;
use std::fmt;

use crate::runner::verdict::SnapshotRow;

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
