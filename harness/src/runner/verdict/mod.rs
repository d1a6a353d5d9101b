//! The runner's model (ARCHITECTURE.md rule 6): what a check is ([`Check`]), what it concluded
//! ([`Outcome`], [`Verdict`]), why it did not pass ([`Cause`]) and its stable snapshot line
//! ([`SnapshotRow`]). Rows are stable across runs: no timings, paths or driver strings; the
//! error/bound ratio only as a coarse bucket.
//!
//! The bottom of the runner: everything else in it (execute, snapshot, report, sanitize, the
//! session) builds on these types, and nothing here names another runner module.

mod cause;
mod check;
mod outcome;
mod row;
mod summary;
#[cfg(test)]
mod tests;

pub use cause::{
    Cause, CheckpointRefusal, Mismatch, OutputProblems, ReferenceStage, SourceError, WorkerFailure,
};
pub use check::{Check, KernelPath, SanitizeScope, SanitizerTool, UnknownCheck};
pub use outcome::Outcome;
pub use row::SnapshotRow;
pub use summary::Summary;

use serde::{Deserialize, Serialize};
use w4a16_require::{Requirement, Skip};

/// One check of one case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub case_id: String,
    /// What was checked; serialized as its snapshot name (`skinny`, `convert:gptq-v1`, ...).
    pub check: Check,
    pub outcome: Outcome,
    /// Coarse error/bound bucket (snapshotted); `None` where no numeric comparison ran.
    pub bucket: Option<String>,
    /// Human detail for logs and reports, rendered from `cause` where there is one; never
    /// snapshotted.
    pub detail: String,
    /// Why the check did not pass, typed; `None` for passes and for the failures that are only
    /// described (a wrong carrier word, a checkpoint reading back differently).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<Cause>,
    /// Worst |ŷ−y|/bound, for reports only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_ratio: Option<f64>,
}

impl Verdict {
    pub fn new(case_id: impl Into<String>, check: Check, outcome: Outcome) -> Self {
        Verdict {
            case_id: case_id.into(),
            check,
            outcome,
            bucket: None,
            detail: String::new(),
            cause: None,
            worst_ratio: None,
        }
    }

    /// A check that cannot run here: a loud SKIP whose detail is the reason.
    pub fn skipped(case_id: impl Into<String>, check: Check, skip: Skip) -> Self {
        Verdict::new(case_id, check, Outcome::Skip).because(Cause::NotHere(skip))
    }

    pub fn detail(mut self, d: impl Into<String>) -> Self {
        self.detail = d.into();
        self
    }

    /// Sets the cause, and the detail to its rendering.
    pub fn because(mut self, cause: Cause) -> Self {
        self.detail = cause.to_string();
        self.cause = Some(cause);
        self
    }

    pub fn bucket(mut self, b: impl Into<String>) -> Self {
        self.bucket = Some(b.into());
        self
    }

    /// What this verdict's skip needed, when it is a skip.
    pub fn skip_requirement(&self) -> Option<Requirement> {
        (self.outcome == Outcome::Skip)
            .then(|| self.cause.as_ref().and_then(Cause::requirement))
            .flatten()
    }

    /// The stable snapshot line.
    pub fn snapshot_row(&self) -> String {
        SnapshotRow::from(self).line()
    }
}

/// `W4A16_REQUIRE` applied to a run's verdicts (ARCHITECTURE.md rule 4): a skip whose requirement is in
/// `required` becomes a FAIL that says so (its cause kept), so the summary, the reports and the
/// exit code all count it. Returns how many verdicts it turned.
pub fn apply_required(verdicts: &mut [Verdict], required: &[Requirement]) -> usize {
    let mut turned = 0;
    for v in verdicts.iter_mut() {
        if let Some(r) = v.skip_requirement().filter(|r| required.contains(r)) {
            v.outcome = Outcome::Fail;
            v.detail = format!("W4A16_REQUIRE={r} but the check was skipped: {}", v.detail);
            turned += 1;
        }
    }
    turned
}
