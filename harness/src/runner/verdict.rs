//! What one check of one case concluded. Rows are stable across runs (DESIGN rule 6): no
//! timings, paths or driver strings; the error/bound ratio only as a coarse bucket.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Within the bound (or bit-exact where exactness is required).
    Pass,
    /// The case was meant to be refused and was, with a typed error before any launch.
    Refused,
    /// A known-bad case (data, DESIGN rule 5) that still fails, as recorded.
    ExpectedFail,
    /// Wrong answer, unexpected refusal, guard/poison violation, nondeterminism.
    Fail,
    /// The device faulted or hung on this case.
    Fault,
    /// A known-bad case that now passes: the suppression must be removed.
    UnexpectedPass,
    /// A known-bad entry past its expiry date.
    Expired,
    /// Could not run here; `detail` says why.
    Skip,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Refused => "refused",
            Outcome::ExpectedFail => "xfail",
            Outcome::Fail => "FAIL",
            Outcome::Fault => "FAULT",
            Outcome::UnexpectedPass => "XPASS",
            Outcome::Expired => "EXPIRED",
            Outcome::Skip => "skip",
        }
    }

    /// Whether this outcome makes the run fail.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Outcome::Fail | Outcome::Fault | Outcome::UnexpectedPass | Outcome::Expired
        )
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One check of one case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub case_id: String,
    /// What was checked: a kernel path (`skinny`, `dequant+dense`), `selection`,
    /// `convert:gptq-v1`, `determinism`, `padding`, `second-opinion:fallback`, ...
    pub check: String,
    pub outcome: Outcome,
    /// Coarse error/bound bucket (snapshotted); `None` where no numeric comparison ran.
    pub bucket: Option<String>,
    /// Human detail for logs and reports; never snapshotted.
    pub detail: String,
    /// Worst |ŷ−y|/bound, for reports only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_ratio: Option<f64>,
}

impl Verdict {
    pub fn new(case_id: impl Into<String>, check: impl Into<String>, outcome: Outcome) -> Self {
        Verdict {
            case_id: case_id.into(),
            check: check.into(),
            outcome,
            bucket: None,
            detail: String::new(),
            worst_ratio: None,
        }
    }

    pub fn detail(mut self, d: impl Into<String>) -> Self {
        self.detail = d.into();
        self
    }

    pub fn bucket(mut self, b: impl Into<String>) -> Self {
        self.bucket = Some(b.into());
        self
    }

    /// The stable snapshot line.
    pub fn snapshot_row(&self) -> String {
        match &self.bucket {
            Some(b) => format!(
                "{} | {} | {} | {}",
                self.case_id, self.check, self.outcome, b
            ),
            None => format!("{} | {} | {}", self.case_id, self.check, self.outcome),
        }
    }
}

/// Counts for the summary line, plus skip reasons grouped (loud skips, DESIGN rule 4).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub passed: usize,
    pub refused: usize,
    pub expected_fail: usize,
    pub failed: usize,
    pub faults: usize,
    pub unexpected_pass: usize,
    pub expired: usize,
    pub skipped: usize,
    pub skip_reasons: std::collections::BTreeMap<String, usize>,
}

impl Summary {
    pub fn of(verdicts: &[Verdict]) -> Summary {
        let mut s = Summary::default();
        for v in verdicts {
            match v.outcome {
                Outcome::Pass => s.passed += 1,
                Outcome::Refused => s.refused += 1,
                Outcome::ExpectedFail => s.expected_fail += 1,
                Outcome::Fail => s.failed += 1,
                Outcome::Fault => s.faults += 1,
                Outcome::UnexpectedPass => s.unexpected_pass += 1,
                Outcome::Expired => s.expired += 1,
                Outcome::Skip => {
                    s.skipped += 1;
                    *s.skip_reasons.entry(v.detail.clone()).or_default() += 1;
                }
            }
        }
        s
    }

    pub fn failures(&self) -> usize {
        self.failed + self.faults + self.unexpected_pass + self.expired
    }

    pub fn total(&self) -> usize {
        self.passed + self.refused + self.expected_fail + self.failures() + self.skipped
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} checks: {} passed, {} refused as intended, {} expected failures, {} FAILED, {} faults, {} unexpected passes, {} expired suppressions, {} skipped",
            self.total(),
            self.passed,
            self.refused,
            self.expected_fail,
            self.failed,
            self.faults,
            self.unexpected_pass,
            self.expired,
            self.skipped
        )?;
        for (reason, n) in &self.skip_reasons {
            writeln!(f, "  skipped {n:>6} × {reason}")?;
        }
        Ok(())
    }
}
