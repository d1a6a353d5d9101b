//! What a run's verdicts add up to: the summary line and its grouped skip reasons.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use w4a16_require::Requirement;

use super::{Cause, Outcome, Verdict};
use w4a16_device::DeviceFault;

/// Counts for the summary line, plus skip reasons grouped (loud skips, ARCHITECTURE.md rule 4).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub passed: usize,
    pub refused: usize,
    pub expected_fail: usize,
    pub failed: usize,
    pub faults: usize,
    /// Of the faults, those where the device's memory was exhausted: the run asked too much of
    /// the card (too many workers for its memory), not a kernel fault.
    pub out_of_memory: usize,
    pub unexpected_pass: usize,
    pub expired: usize,
    pub skipped: usize,
    pub skip_reasons: BTreeMap<String, usize>,
    /// Skips by what they needed (`W4A16_REQUIRE` names these).
    pub skips_needing: BTreeMap<Requirement, usize>,
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
                Outcome::Fault => {
                    s.faults += 1;
                    if matches!(
                        v.cause,
                        Some(Cause::Device(DeviceFault::OutOfMemory { .. }))
                    ) {
                        s.out_of_memory += 1;
                    }
                }
                Outcome::UnexpectedPass => s.unexpected_pass += 1,
                Outcome::Expired => s.expired += 1,
                Outcome::Skip => {
                    s.skipped += 1;
                    *s.skip_reasons.entry(v.detail.clone()).or_default() += 1;
                    if let Some(r) = v.skip_requirement() {
                        *s.skips_needing.entry(r).or_default() += 1;
                    }
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
        if self.out_of_memory > 0 {
            writeln!(
                f,
                "  {} of the faults: the device ran out of memory (each worker holds its own layers, \
                 copies and references; run again with fewer workers, `--jobs`)",
                self.out_of_memory
            )?;
        }
        for (reason, n) in &self.skip_reasons {
            writeln!(f, "  skipped {n:>6} × {reason}")?;
        }
        Ok(())
    }
}
