//! JUnit XML report files (quick-junit), and the one mapping of a verdict to a test status.

use crate::runner::verdict::{Outcome, Verdict};
use quick_junit::{NonSuccessKind, Report, TestCaseStatus};

/// The XML of `report`.
pub fn render(report: &Report) -> Result<String, quick_junit::SerializeError> {
    report.to_string()
}

/// A verdict as a JUnit test case status: refusals and expected failures pass, skips carry their
/// reason, faults are errors, the rest failures. Shared by every JUnit report of verdicts.
pub fn verdict_status(v: &Verdict) -> TestCaseStatus {
    match v.outcome {
        Outcome::Pass | Outcome::Refused | Outcome::ExpectedFail => TestCaseStatus::success(),
        Outcome::Skip => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(v.detail.clone());
            s
        }
        Outcome::Fault => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
            s.set_message(v.detail.clone());
            s
        }
        Outcome::Fail | Outcome::UnexpectedPass | Outcome::Expired => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(format!("{}: {}", v.outcome, v.detail));
            s
        }
    }
}
