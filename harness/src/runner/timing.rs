//! Where a run's time goes, per phase of the case pipeline. Reported beside the verdicts (the
//! JSON report and the summary), never in snapshots: timings are not stable across runs.
//!
//! The split answers the question a CI owner asks before moving a suite to a smaller runner:
//! how much of the wall time is the GPU, and how much is the CPU checking the GPU's answers.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::{Duration, Instant};

/// A phase of one case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Seeded activations and the logical layer.
    Data,
    /// Producer checkpoint, its own reading, the converter and the read-back.
    Convert,
    /// Everything behind the [`w4a16_device::Device`] call: upload, poison, launch, the
    /// synchronise, download and the guard-band check.
    Device,
    /// The f64 reference (or Freivalds plus sampled lines), the comparison against the bound,
    /// the dequant copy's bit-exact check and the second opinion.
    Verify,
}

/// Seconds spent per phase, summed over the cases (and the workers) it covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseTimes {
    pub cases: usize,
    pub data_s: f64,
    pub convert_s: f64,
    pub device_s: f64,
    pub verify_s: f64,
    /// The slowest single case, end to end.
    pub slowest_case_s: f64,
    /// Layers put through the converter (check-model counts them: each layer is converted once,
    /// by the process that checks it, never again by the worker that launches it).
    #[serde(default)]
    pub conversions: usize,
    /// The cases end to end, summed: the worker-seconds they took, phases and all that lies
    /// between them (selection, validation, known-bad entries). Absent from older reports.
    #[serde(default)]
    pub case_s: f64,
}

impl PhaseTimes {
    pub fn add(&mut self, phase: Phase, d: Duration) {
        let s = d.as_secs_f64();
        match phase {
            Phase::Data => self.data_s += s,
            Phase::Convert => self.convert_s += s,
            Phase::Device => self.device_s += s,
            Phase::Verify => self.verify_s += s,
        }
    }

    /// Runs `f`, charging its time to `phase`.
    pub fn time<T>(&mut self, phase: Phase, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.add(phase, start.elapsed());
        out
    }

    /// Folds another case's (or worker's) times into these.
    pub fn merge(&mut self, other: &PhaseTimes) {
        self.cases += other.cases;
        self.data_s += other.data_s;
        self.convert_s += other.convert_s;
        self.device_s += other.device_s;
        self.verify_s += other.verify_s;
        self.case_s += other.case_s;
        self.slowest_case_s = self.slowest_case_s.max(other.slowest_case_s);
        self.conversions += other.conversions;
    }

    /// One case's times, `elapsed` end to end: counted once, its own slowest.
    pub fn finish_case(&mut self, elapsed: Duration) {
        let s = elapsed.as_secs_f64();
        self.cases = 1;
        self.slowest_case_s = s;
        self.case_s = s;
    }

    pub fn total_s(&self) -> f64 {
        self.data_s + self.convert_s + self.device_s + self.verify_s
    }

    /// The host-only share: what a runner must do on its CPUs whatever GPU it has.
    pub fn cpu_side_s(&self) -> f64 {
        self.data_s + self.convert_s + self.verify_s
    }
}

impl fmt::Display for PhaseTimes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.total_s().max(f64::MIN_POSITIVE);
        writeln!(
            f,
            "time per phase over {} cases (seconds summed over workers):",
            self.cases
        )?;
        for (name, s) in [
            ("data generation", self.data_s),
            ("conversion", self.convert_s),
            ("device (upload, launch, sync, download)", self.device_s),
            ("reference + verification", self.verify_s),
        ] {
            writeln!(f, "  {name:<42} {s:>9.1} s {:>5.1}%", 100.0 * s / total)?;
        }
        writeln!(f, "  {:<42} {:>9.1} s", "slowest case", self.slowest_case_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_add_up_and_merge_keeps_the_slowest_case() {
        let mut a = PhaseTimes {
            cases: 1,
            slowest_case_s: 2.0,
            ..PhaseTimes::default()
        };
        a.add(Phase::Data, Duration::from_millis(500));
        a.add(Phase::Device, Duration::from_millis(250));
        let mut b = PhaseTimes {
            cases: 2,
            slowest_case_s: 5.0,
            ..PhaseTimes::default()
        };
        b.add(Phase::Verify, Duration::from_secs(3));
        b.add(Phase::Convert, Duration::from_millis(125));
        a.merge(&b);
        assert_eq!(a.cases, 3);
        assert_eq!(a.slowest_case_s, 5.0);
        approx::assert_abs_diff_eq!(a.total_s(), 3.875, epsilon = 1e-9);
        approx::assert_abs_diff_eq!(a.cpu_side_s(), 3.625, epsilon = 1e-9);
        let text = a.to_string();
        assert!(text.contains("3 cases"), "{text}");
        assert!(text.contains("reference + verification"), "{text}");
    }
}
