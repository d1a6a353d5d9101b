//! Judging one case: each side against its golden, and the candidate against the control, in
//! the ratio domain (time over the control measured beside it) so that clocks and load cancel.
//! A shift counts only when it is both outside the band and significant (Mann–Whitney).

use super::golden::{GoldenEntry, GoldenFile};
use super::key::{KernelLabel, Measured, PerfKey};
use super::peers::PeerTimes;
use super::report::{fmt_delta, fmt_p};
use super::stats::{Summary, mann_whitney, median};
use serde::{Deserialize, Serialize};

/// What counts as moved, too noisy, significant, and failing.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct JudgePolicy {
    /// Half-width of the band around the golden ratio, as a fraction (0.08 = ±8 %).
    pub band: f64,
    /// Largest IQR/median of the ratio samples that can still be judged.
    pub noise_limit: f64,
    /// Significance level of the Mann–Whitney test.
    pub alpha: f64,
    /// Out-of-band improvements fail too, as in the field: goldens must be updated explicitly.
    pub fail_improvements: bool,
}

impl Default for JudgePolicy {
    fn default() -> Self {
        JudgePolicy {
            band: 0.08,
            noise_limit: 0.15,
            alpha: 0.05,
            fail_improvements: true,
        }
    }
}

impl JudgePolicy {
    /// The policy a run judges with, decided in one place: a band or noise limit given for
    /// this run (`--band`, `--noise-limit`) wins over the golden file's per-target override,
    /// which wins over the defaults.
    pub fn resolve(
        band: Option<f64>,
        noise_limit: Option<f64>,
        fail_improvements: bool,
        goldens: Option<&GoldenFile>,
    ) -> JudgePolicy {
        let d = JudgePolicy::default();
        JudgePolicy {
            band: band.or(goldens.and_then(|g| g.band)).unwrap_or(d.band),
            noise_limit: noise_limit
                .or(goldens.and_then(|g| g.noise_limit))
                .unwrap_or(d.noise_limit),
            fail_improvements,
            ..d
        }
    }

    /// Whether a spread (IQR/median) is small enough to judge; NaN is not.
    fn is_quiet(&self, iqr_rel: f64) -> bool {
        iqr_rel <= self.noise_limit
    }
}

/// Which way an out-of-band case moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Slower,
    Faster,
}

/// The verdict on one side of one case. `delta` is median ratio over the reference's − 1
/// (positive: slower); `p` the two-sided Mann–Whitney p-value.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Judgement {
    /// Inside the band, or outside it without significance. `p` is `None` only when there were
    /// no reference samples to test against.
    WithinBand {
        delta: f64,
        p: Option<f64>,
    },
    Improvement {
        delta: f64,
        p: f64,
    },
    Regression {
        delta: f64,
        p: f64,
    },
    /// IQR/median of the ratio samples above the noise limit: reported, never passed.
    TooNoisy {
        iqr_rel: f64,
    },
    /// A different kernel ran than the one the golden was recorded with.
    WrongKernel {
        golden: KernelLabel,
        ran: KernelLabel,
    },
    NoGolden,
}

impl Judgement {
    pub fn name(&self) -> &'static str {
        match self {
            Judgement::WithinBand { .. } => "within band",
            Judgement::Improvement { .. } => "improvement",
            Judgement::Regression { .. } => "regression",
            Judgement::TooNoisy { .. } => "too noisy",
            Judgement::WrongKernel { .. } => "wrong kernel",
            Judgement::NoGolden => "no golden",
        }
    }

    pub fn out_of_band_direction(&self) -> Option<Direction> {
        match self {
            Judgement::Regression { .. } => Some(Direction::Slower),
            Judgement::Improvement { .. } => Some(Direction::Faster),
            _ => None,
        }
    }

    /// The shift measured, where there is one.
    pub fn delta(&self) -> Option<f64> {
        match *self {
            Judgement::WithinBand { delta, .. }
            | Judgement::Improvement { delta, .. }
            | Judgement::Regression { delta, .. } => Some(delta),
            _ => None,
        }
    }

    /// The p-value of the test, where one ran.
    pub fn p(&self) -> Option<f64> {
        match *self {
            Judgement::WithinBand { p, .. } => p,
            Judgement::Improvement { p, .. } | Judgement::Regression { p, .. } => Some(p),
            _ => None,
        }
    }

    /// Whether this judgement alone fails a run under `policy`.
    pub fn fails(&self, policy: &JudgePolicy) -> bool {
        match self {
            Judgement::WithinBand { .. } => false,
            Judgement::Improvement { .. } => policy.fail_improvements,
            _ => true,
        }
    }
}

impl std::fmt::Display for Judgement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Judgement::WithinBand { delta, p } => {
                write!(f, "within band {}", fmt_delta(*delta))?;
                match p {
                    Some(p) => write!(f, " (p {})", fmt_p(*p)),
                    None => Ok(()),
                }
            }
            Judgement::Improvement { delta, p } | Judgement::Regression { delta, p } => {
                write!(f, "{} {} (p {})", self.name(), fmt_delta(*delta), fmt_p(*p))
            }
            Judgement::TooNoisy { iqr_rel } => {
                write!(
                    f,
                    "too noisy: IQR/median {}",
                    fmt_delta(*iqr_rel).trim_start_matches('+')
                )
            }
            Judgement::WrongKernel { golden, ran } => {
                write!(f, "wrong kernel: ran {ran}, golden {golden}")
            }
            Judgement::NoGolden => f.write_str("no golden"),
        }
    }
}

/// Ratio samples of one side: each launch's time over the median of its control. Empty when
/// either is empty or not finite (judged too noisy, never passed).
pub fn ratio_samples(m: &Measured) -> Vec<f64> {
    match median(&m.control_us) {
        Some(c) if c > 0.0 => m.times_us.iter().map(|t| t / c).collect(),
        _ => Vec::new(),
    }
}

/// Judges one side against its golden entry.
pub fn judge(m: &Measured, golden: Option<&GoldenEntry>, policy: &JudgePolicy) -> Judgement {
    let Some(golden) = golden else {
        return Judgement::NoGolden;
    };
    if golden.kernel != m.kernel {
        return Judgement::WrongKernel {
            golden: golden.kernel.clone(),
            ran: m.kernel.clone(),
        };
    }
    judge_shift(
        &ratio_samples(m),
        &golden.ratio_samples,
        golden.ratio,
        policy,
    )
}

/// Noise check of `samples`, then the shift of their median against `reference_median`, out
/// of band only when Mann–Whitney against `reference` agrees at `alpha`. With few samples the
/// test cannot reach significance (2 against 2 gives p ≥ 0.245), so a large shift on too few
/// samples stays within band: the sample count (9..=30) is what makes the test bite.
fn judge_shift(
    samples: &[f64],
    reference: &[f64],
    reference_median: f64,
    policy: &JudgePolicy,
) -> Judgement {
    let Some(summary) = Summary::of(samples) else {
        return Judgement::TooNoisy {
            iqr_rel: f64::INFINITY,
        };
    };
    let iqr_rel = summary.iqr_rel();
    if !policy.is_quiet(iqr_rel) {
        return Judgement::TooNoisy { iqr_rel };
    }
    let delta = summary.median / reference_median - 1.0;
    let p = mann_whitney(samples, reference).map(|r| r.p_two_sided);
    // Without reference samples there is no test; the band alone decides (p reported as NaN).
    let significant = p.is_none_or(|p| p < policy.alpha);
    if delta.abs() > policy.band && significant {
        let p = p.unwrap_or(f64::NAN);
        if delta > 0.0 {
            Judgement::Regression { delta, p }
        } else {
            Judgement::Improvement { delta, p }
        }
    } else {
        Judgement::WithinBand { delta, p }
    }
}

/// How the candidate's own times moved against the golden's, each as median / golden − 1: the
/// ratio cancels a clock that moved both, but it also moves when only the control does, and
/// the report tells a reader which of the two it was.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TimeShift {
    /// The selected path's median time over the golden's.
    pub kernel: f64,
    /// The control's median time over the golden's.
    pub control: f64,
}

impl TimeShift {
    /// `None` without samples or with a golden time that is not positive.
    pub fn of(m: &Measured, golden: &GoldenEntry) -> Option<TimeShift> {
        let shift =
            |now: &[f64], then: f64| median(now).filter(|_| then > 0.0).map(|t| t / then - 1.0);
        Some(TimeShift {
            kernel: shift(&m.times_us, golden.time_us)?,
            control: shift(&m.control_us, golden.control_us)?,
        })
    }

    /// The kernel's own time within `band` while its control moved beyond it: a ratio out of
    /// band for this reason says the control did not reproduce, not that the kernel changed.
    pub fn control_alone(&self, band: f64) -> bool {
        self.kernel.abs() <= band && self.control.abs() > band
    }
}

/// Everything judged about one case, for reports and the exit status.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CaseOutcome {
    pub key: PerfKey,
    pub candidate: Measured,
    pub candidate_judgement: Judgement,
    pub control: Option<Measured>,
    pub control_judgement: Option<Judgement>,
    /// Candidate ratio samples against the control's, judged like a golden comparison.
    pub vs_control: Option<Judgement>,
    /// median(candidate ratios) / median(control ratios) − 1.
    pub cand_over_control: Option<f64>,
    /// Both sides out of band against the golden in the same direction while the candidate is
    /// within band of the control: the goldens moved, not this change.
    pub stale_golden: bool,
    /// The candidate's own kernel and control times against the golden's (reported, never
    /// judged: the verdict is the ratio's).
    pub time_shift: Option<TimeShift>,
    pub peers: Option<PeerTimes>,
}

/// Judges both sides of a case against the goldens (with the file's band and noise overrides)
/// and the candidate against the control. Candidate against control compares speed only: a
/// different label there is the change under test, and shows against the goldens already.
pub fn judge_case(
    candidate: Measured,
    control: Option<Measured>,
    goldens: Option<&GoldenFile>,
    policy: &JudgePolicy,
) -> CaseOutcome {
    let golden = goldens.and_then(|g| g.entry(&candidate.key));
    let candidate_judgement = judge(&candidate, golden, policy);
    let time_shift = golden.and_then(|g| TimeShift::of(&candidate, g));
    let control_judgement = control.as_ref().map(|c| judge(c, golden, policy));
    let (vs_control, cand_over_control) = match &control {
        Some(c) => {
            let cand = ratio_samples(&candidate);
            let ctrl = ratio_samples(c);
            let ctrl_summary = Summary::of(&ctrl);
            let judgement = match ctrl_summary {
                None => Judgement::TooNoisy {
                    iqr_rel: f64::INFINITY,
                },
                Some(s) if !policy.is_quiet(s.iqr_rel()) => Judgement::TooNoisy {
                    iqr_rel: s.iqr_rel(),
                },
                Some(s) => judge_shift(&cand, &ctrl, s.median, policy),
            };
            let over = median(&cand)
                .zip(ctrl_summary)
                .map(|(a, s)| a / s.median - 1.0);
            (Some(judgement), over)
        }
        None => (None, None),
    };
    let stale_golden = matches!(vs_control, Some(Judgement::WithinBand { .. }))
        && candidate_judgement.out_of_band_direction().is_some()
        && candidate_judgement.out_of_band_direction()
            == control_judgement
                .as_ref()
                .and_then(Judgement::out_of_band_direction);
    CaseOutcome {
        key: candidate.key.clone(),
        candidate,
        candidate_judgement,
        control,
        control_judgement,
        vs_control,
        cand_over_control,
        stale_golden,
        time_shift,
        peers: None,
    }
}

impl CaseOutcome {
    /// Whether this case fails the run: the candidate's judgement against the golden or
    /// against the control fails, unless the goldens are stale. The control's own judgement
    /// never fails a run: it is the base, there to explain the candidate's.
    pub fn fails(&self, policy: &JudgePolicy) -> bool {
        !self.stale_golden
            && (self.candidate_judgement.fails(policy)
                || self.vs_control.as_ref().is_some_and(|j| j.fails(policy)))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::perf::golden::GOLDEN_SCHEMA;
    use crate::perf::key::ControlKind;
    use crate::perf::update::golden_entry;

    /// A side of a case: `n` launches around `time_us` spread evenly over ±`spread`/2 (in a
    /// scrambled order), controls at 10 µs ± 0.5 %.
    pub(crate) fn measured(
        m: usize,
        kernel: &str,
        time_us: f64,
        spread: f64,
        n: usize,
    ) -> Measured {
        let jitter = |i: usize| ((i * 7) % n) as f64 / (n - 1).max(1) as f64 - 0.5;
        Measured {
            key: PerfKey {
                provider: "hybrid-w4a16-zp-bf16".into(),
                shape: "qwen3-8b.mlp_down".into(),
                m,
            },
            kernel: KernelLabel(kernel.into()),
            times_us: (0..n)
                .map(|i| time_us * (1.0 + spread * jitter(i)))
                .collect(),
            control: ControlKind::for_m(m),
            control_us: (0..n).map(|i| 10.0 * (1.0 + 0.01 * jitter(i))).collect(),
            traffic_bytes: 1 << 20,
            flops: 2 * m as u64 * 4096 * 14336,
        }
    }

    const SKINNY: &str = "skinny:w4a16_skinny_f16";

    fn golden_at(time_us: f64) -> GoldenEntry {
        golden_entry(&measured(1, SKINNY, time_us, 0.02, 15)).unwrap()
    }

    fn judged(time_us: f64, spread: f64, n: usize) -> Judgement {
        let m = measured(1, SKINNY, time_us, spread, n);
        judge(&m, Some(&golden_at(30.0)), &JudgePolicy::default())
    }

    #[test]
    fn judge_gives_each_verdict() {
        let j = judged(36.0, 0.02, 15);
        assert!(
            matches!(j, Judgement::Regression { delta, p } if (delta - 0.2).abs() < 1e-9 && p < 1e-4),
            "{j:?}"
        );
        assert_eq!(j.out_of_band_direction(), Some(Direction::Slower));
        let j = judged(24.0, 0.02, 15);
        assert!(
            matches!(j, Judgement::Improvement { delta, .. } if (delta + 0.2).abs() < 1e-9),
            "{j:?}"
        );
        assert_eq!(j.out_of_band_direction(), Some(Direction::Faster));
        // 3 % slower is significant at 15 samples but inside the ±8 % band.
        let j = judged(30.9, 0.02, 15);
        assert!(
            matches!(j, Judgement::WithinBand { delta, p: Some(p) } if (delta - 0.03).abs() < 1e-9 && p < 0.05),
            "{j:?}"
        );
        assert_eq!(j.out_of_band_direction(), None);
        // ±30 % spread: IQR/median ≈ 0.3 > 0.15, whatever the shift.
        let j = judged(36.0, 0.6, 15);
        assert!(
            matches!(j, Judgement::TooNoisy { iqr_rel } if iqr_rel > 0.15),
            "{j:?}"
        );
        let same_times = measured(1, "fused:w4a16_fused_f16_t128x128", 30.0, 0.02, 15);
        let j = judge(&same_times, Some(&golden_at(30.0)), &JudgePolicy::default());
        assert_eq!(
            j,
            Judgement::WrongKernel {
                golden: KernelLabel(SKINNY.into()),
                ran: KernelLabel("fused:w4a16_fused_f16_t128x128".into())
            }
        );
        assert_eq!(
            judge(&same_times, None, &JudgePolicy::default()),
            Judgement::NoGolden
        );
    }

    #[test]
    fn a_big_shift_on_two_samples_is_not_significant() {
        // 20 % slower on 2 launches against a 2-sample golden: outside the band, but the
        // smallest two-sided Mann–Whitney p at 2 vs 2 is 0.245, so it stays within band.
        // This is why measuring enforces 9..=30 repetitions.
        let m = measured(1, SKINNY, 36.0, 0.001, 2);
        let g = golden_entry(&measured(1, SKINNY, 30.0, 0.001, 2)).unwrap();
        let j = judge(&m, Some(&g), &JudgePolicy::default());
        assert!(
            matches!(j, Judgement::WithinBand { delta, p: Some(p) } if delta > 0.19 && p > 0.2),
            "{j:?}"
        );
    }

    /// A ratio out of band because only the control moved is told apart from a kernel that
    /// moved: the verdict is the ratio's either way, the time shift says which side it was.
    #[test]
    fn the_time_shift_says_whether_the_kernel_or_its_control_moved() {
        let golden = golden_at(30.0);
        // The kernel as recorded, the control five times faster: a regression by ratio.
        let mut m = measured(1, SKINNY, 30.0, 0.02, 15);
        m.control_us.iter_mut().for_each(|c| *c /= 5.0);
        let j = judge(&m, Some(&golden), &JudgePolicy::default());
        assert!(matches!(j, Judgement::Regression { .. }), "{j:?}");
        let s = TimeShift::of(&m, &golden).unwrap();
        assert!(
            s.kernel.abs() < 0.01 && (s.control + 0.8).abs() < 0.01,
            "{s:?}"
        );
        assert!(s.control_alone(0.08));
        // The kernel 20 % slower under a steady control: not the control alone.
        let slower = measured(1, SKINNY, 36.0, 0.02, 15);
        let s = TimeShift::of(&slower, &golden).unwrap();
        assert!(
            (s.kernel - 0.2).abs() < 1e-9 && s.control.abs() < 0.01,
            "{s:?}"
        );
        assert!(!s.control_alone(0.08));
        // No samples: no shift.
        let mut empty = measured(1, SKINNY, 30.0, 0.02, 15);
        empty.times_us.clear();
        assert_eq!(TimeShift::of(&empty, &golden), None);
    }

    #[test]
    fn empty_times_are_too_noisy_not_passed() {
        let mut m = measured(1, SKINNY, 30.0, 0.02, 15);
        m.control_us.clear();
        let j = judge(&m, Some(&golden_at(30.0)), &JudgePolicy::default());
        assert!(matches!(j, Judgement::TooNoisy { .. }), "{j:?}");
    }

    /// An `sm_90` golden file of `entries` (the fixture the perf stages' tests share).
    pub(crate) fn goldens(entries: Vec<GoldenEntry>, band: Option<f64>) -> GoldenFile {
        GoldenFile {
            schema: GOLDEN_SCHEMA,
            target: "sm_90".into(),
            device: "test".into(),
            recorded: "test".into(),
            band,
            noise_limit: None,
            entries,
        }
    }

    #[test]
    fn both_sides_moved_alike_means_stale_goldens() {
        let g = goldens(vec![golden_at(30.0)], None);
        let policy = JudgePolicy::default();
        let cand = measured(1, SKINNY, 24.0, 0.02, 15);
        let ctrl = measured(1, SKINNY, 24.2, 0.02, 15);
        let o = judge_case(cand, Some(ctrl), Some(&g), &policy);
        assert!(matches!(
            o.candidate_judgement,
            Judgement::Improvement { .. }
        ));
        assert!(matches!(
            o.control_judgement,
            Some(Judgement::Improvement { .. })
        ));
        assert!(
            matches!(o.vs_control, Some(Judgement::WithinBand { .. })),
            "{:?}",
            o.vs_control
        );
        assert!(o.stale_golden);
        assert!(!o.fails(&policy));
        approx::assert_abs_diff_eq!(
            o.cand_over_control.unwrap(),
            24.0 / 24.2 - 1.0,
            epsilon = 1e-9
        );
    }

    #[test]
    fn candidate_slower_than_control_fails() {
        let g = goldens(vec![golden_at(30.0)], None);
        let policy = JudgePolicy::default();
        let o = judge_case(
            measured(1, SKINNY, 36.0, 0.02, 15),
            Some(measured(1, SKINNY, 30.0, 0.02, 15)),
            Some(&g),
            &policy,
        );
        assert!(matches!(
            o.candidate_judgement,
            Judgement::Regression { .. }
        ));
        assert!(matches!(
            o.control_judgement,
            Some(Judgement::WithinBand { .. })
        ));
        assert!(matches!(o.vs_control, Some(Judgement::Regression { .. })));
        assert!(!o.stale_golden);
        assert!(o.fails(&policy));
        // Both sides slower, the candidate 20 % more than the control: not stale.
        let o = judge_case(
            measured(1, SKINNY, 43.2, 0.02, 15),
            Some(measured(1, SKINNY, 36.0, 0.02, 15)),
            Some(&g),
            &policy,
        );
        assert!(!o.stale_golden && o.fails(&policy), "{o:?}");
    }

    #[test]
    fn improvements_fail_unless_allowed_and_the_file_band_applies() {
        let g = goldens(vec![golden_at(30.0)], None);
        let strict = JudgePolicy::default();
        let lenient = JudgePolicy {
            fail_improvements: false,
            ..strict
        };
        let faster = judge_case(measured(1, SKINNY, 24.0, 0.02, 15), None, Some(&g), &strict);
        assert!(faster.fails(&strict));
        assert!(!faster.fails(&lenient));
        assert_eq!((faster.vs_control, faster.cand_over_control), (None, None));
        // The per-target band (±25 %) turns a 20 % regression into within band...
        let wide = goldens(vec![golden_at(30.0)], Some(0.25));
        let filed = JudgePolicy::resolve(None, None, true, Some(&wide));
        assert_eq!(filed.band, 0.25);
        let o = judge_case(
            measured(1, SKINNY, 36.0, 0.02, 15),
            None,
            Some(&wide),
            &filed,
        );
        assert!(matches!(
            o.candidate_judgement,
            Judgement::WithinBand { .. }
        ));
        assert!(!o.fails(&filed));
        // ...unless this run asks for its own band, which wins over the file's.
        let asked = JudgePolicy::resolve(Some(0.08), None, true, Some(&wide));
        assert_eq!(asked.band, 0.08);
        let o = judge_case(
            measured(1, SKINNY, 36.0, 0.02, 15),
            None,
            Some(&wide),
            &asked,
        );
        assert!(matches!(
            o.candidate_judgement,
            Judgement::Regression { .. }
        ));
        assert_eq!(JudgePolicy::resolve(None, None, true, None), strict);
        let none = judge_case(measured(1, SKINNY, 36.0, 0.02, 15), None, None, &strict);
        assert!(none.candidate_judgement == Judgement::NoGolden && none.fails(&strict));
    }

    #[test]
    fn judgements_serialize_tagged_and_read_well() {
        let j = Judgement::Regression {
            delta: 0.2,
            p: 0.0002,
        };
        let v = serde_json::to_value(&j).unwrap();
        assert_eq!(v["kind"], "regression");
        assert_eq!(j.to_string(), "regression +20.0 % (p 2.0e-4)");
        let w = Judgement::WrongKernel {
            golden: KernelLabel("a".into()),
            ran: KernelLabel("b".into()),
        };
        assert_eq!(serde_json::to_value(&w).unwrap()["kind"], "wrong_kernel");
        assert_eq!(w.to_string(), "wrong kernel: ran b, golden a");
    }
}
