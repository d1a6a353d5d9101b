//! Judging counters: exact. Any counter of any launch that differs from the golden is a moved
//! counter, reported with its delta and the kernel label; a different label or a different
//! number of launches is a wrong kernel.

use serde::Serialize;

use super::Counted;
use super::golden::CountersEntry;
use crate::perf::key::{KernelLabel, PerfKey};

/// One counter of one launch that differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CounterMove {
    /// The launch's entry point (its place in the path when a path launches twice).
    pub entry: String,
    pub counter: String,
    pub golden: u64,
    pub now: u64,
}

impl CounterMove {
    pub fn delta(&self) -> i128 {
        i128::from(self.now) - i128::from(self.golden)
    }
}

impl std::fmt::Display for CounterMove {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = self.delta();
        let rel = match self.golden {
            0 => String::new(),
            g => format!(" ({:+.1} %)", 100.0 * d as f64 / g as f64),
        };
        write!(
            f,
            "{} {}: {} → {} ({d:+}{rel})",
            self.entry, self.counter, self.golden, self.now
        )
    }
}

/// A case's counters against a reference (the golden, or the control's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "judgement", rename_all = "kebab-case")]
pub enum CountJudgement {
    /// Every counter of every launch equal.
    Same,
    /// Counters moved (the kernel label is the same).
    Moved {
        moves: Vec<CounterMove>,
    },
    /// Another kernel ran, or another number of launches.
    WrongKernel {
        golden: KernelLabel,
        ran: KernelLabel,
    },
    NoGolden,
}

impl CountJudgement {
    pub fn name(&self) -> &'static str {
        match self {
            CountJudgement::Same => "same",
            CountJudgement::Moved { .. } => "moved",
            CountJudgement::WrongKernel { .. } => "wrong kernel",
            CountJudgement::NoGolden => "no golden",
        }
    }

    /// Whether it fails a run (everything but `same`, as the timed perf mode fails everything
    /// but `within band`).
    pub fn fails(&self) -> bool {
        !matches!(self, CountJudgement::Same)
    }
}

/// `now` against `reference` (kernel label and launches), exactly.
pub fn judge_counts(
    now: &Counted,
    reference: Option<(&KernelLabel, &[super::LaunchCount])>,
) -> CountJudgement {
    let Some((label, launches)) = reference else {
        return CountJudgement::NoGolden;
    };
    if label != &now.kernel || launches.len() != now.launches.len() {
        return CountJudgement::WrongKernel {
            golden: label.clone(),
            ran: now.kernel.clone(),
        };
    }
    let mut moves = Vec::new();
    for (g, n) in launches.iter().zip(&now.launches) {
        let names: std::collections::BTreeSet<&String> =
            g.counters.keys().chain(n.counters.keys()).collect();
        for name in names {
            let (gv, nv) = (
                g.counters.get(name).copied().unwrap_or(0),
                n.counters.get(name).copied().unwrap_or(0),
            );
            if gv != nv {
                moves.push(CounterMove {
                    entry: n.entry.clone(),
                    counter: name.clone(),
                    golden: gv,
                    now: nv,
                });
            }
        }
    }
    match moves.is_empty() {
        true => CountJudgement::Same,
        false => CountJudgement::Moved { moves },
    }
}

/// Everything judged about one counted case.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CountOutcome {
    pub key: PerfKey,
    pub candidate: Counted,
    pub candidate_judgement: CountJudgement,
    pub control: Option<Counted>,
    pub control_judgement: Option<CountJudgement>,
    /// The candidate against the control, counter by counter.
    pub vs_control: Option<CountJudgement>,
    /// Both sides moved from the golden the same way (candidate same as control): the golden
    /// is stale, not this change; it does not fail the run.
    pub stale_golden: bool,
}

impl CountOutcome {
    /// Whether the case fails the run: the candidate against the golden or the control, unless
    /// the golden is stale. The control's own judgement never fails a run.
    pub fn fails(&self) -> bool {
        !self.stale_golden
            && (self.candidate_judgement.fails()
                || self.vs_control.as_ref().is_some_and(CountJudgement::fails))
    }
}

/// Judges both sides against the golden and the candidate against the control.
pub fn judge_case(
    candidate: Counted,
    control: Option<Counted>,
    golden: Option<&CountersEntry>,
) -> CountOutcome {
    let reference = golden.map(|g| (&g.kernel, g.launches.as_slice()));
    let candidate_judgement = judge_counts(&candidate, reference);
    let control_judgement = control.as_ref().map(|c| judge_counts(c, reference));
    let vs_control = control
        .as_ref()
        .map(|c| judge_counts(&candidate, Some((&c.kernel, c.launches.as_slice()))));
    let stale_golden = candidate_judgement.fails()
        && candidate_judgement != CountJudgement::NoGolden
        && vs_control == Some(CountJudgement::Same);
    CountOutcome {
        key: candidate.key.clone(),
        candidate,
        candidate_judgement,
        control,
        control_judgement,
        vs_control,
        stale_golden,
    }
}

#[cfg(test)]
mod tests {
    use super::super::LaunchCount;
    use super::*;

    pub(crate) fn counted(label: &str, valu: u64) -> Counted {
        let mut l = LaunchCount {
            entry: "w4a16_skinny_f16".into(),
            counters: Default::default(),
        };
        l.counters.insert("SQ_INSTS_VALU".into(), valu);
        l.counters.insert("SQ_WAVES".into(), 64);
        Counted {
            key: PerfKey {
                provider: "hybrid-w4a16".into(),
                shape: "qwen3-8b.q_proj".into(),
                m: 1,
            },
            kernel: KernelLabel(label.into()),
            launches: vec![l],
            model_us: None,
        }
    }

    fn entry_of(c: &Counted) -> CountersEntry {
        CountersEntry {
            key: c.key.clone(),
            kernel: c.kernel.clone(),
            launches: c.launches.clone(),
            model_us: None,
        }
    }

    #[test]
    fn a_changed_counter_is_flagged_with_its_delta_and_the_kernel_label() {
        let golden = entry_of(&counted("skinny:w4a16_skinny_f16", 1000));
        let same = judge_case(
            counted("skinny:w4a16_skinny_f16", 1000),
            None,
            Some(&golden),
        );
        assert_eq!(same.candidate_judgement, CountJudgement::Same);
        assert!(!same.fails());
        let moved = judge_case(
            counted("skinny:w4a16_skinny_f16", 1250),
            None,
            Some(&golden),
        );
        assert!(moved.fails());
        let CountJudgement::Moved { moves } = &moved.candidate_judgement else {
            panic!("{:?}", moved.candidate_judgement)
        };
        assert_eq!(moves.len(), 1);
        assert_eq!(moves[0].delta(), 250);
        assert_eq!(moves[0].counter, "SQ_INSTS_VALU");
        let shown = moves[0].to_string();
        assert!(
            shown.contains("w4a16_skinny_f16") && shown.contains("+250"),
            "{shown}"
        );
        let other = judge_case(counted("fused:w4a16_fused_f16", 1000), None, Some(&golden));
        assert!(matches!(
            other.candidate_judgement,
            CountJudgement::WrongKernel { .. }
        ));
        assert_eq!(
            judge_case(counted("x", 1), None, None).candidate_judgement,
            CountJudgement::NoGolden
        );
    }

    #[test]
    fn both_sides_moved_alike_is_a_stale_golden_and_passes() {
        let golden = entry_of(&counted("skinny:w4a16_skinny_f16", 1000));
        let o = judge_case(
            counted("skinny:w4a16_skinny_f16", 900),
            Some(counted("skinny:w4a16_skinny_f16", 900)),
            Some(&golden),
        );
        assert!(o.stale_golden && !o.fails());
        let o = judge_case(
            counted("skinny:w4a16_skinny_f16", 1100),
            Some(counted("skinny:w4a16_skinny_f16", 1000)),
            Some(&golden),
        );
        assert!(!o.stale_golden && o.fails());
    }
}
