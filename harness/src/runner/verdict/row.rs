//! A verdict's stable snapshot line, `<case> | <check> | <outcome>[ | <bucket>]`: what the
//! committed snapshots hold of it (no detail, no cause, no ratio; ARCHITECTURE.md rule 6).

use super::Verdict;

/// One snapshot row, as rendered from a verdict or read back from a committed file.
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
