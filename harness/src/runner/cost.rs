//! What each suite of a run cost: its cases, the worker-seconds they took (per case and per
//! GFLOP of kernel output checked) and how that time split into the runner's phases. Reported
//! beside the verdicts (report.json's `timing.suites`, summary.md, the run's last lines), never
//! in snapshots.
//!
//! A suite's time per case says which suites a runner pays for; its time per GFLOP checked says
//! whether that cost follows the work checked or something avoidable (data made per case, a
//! reference formed on the host) — the question behind moving a suite to a smaller runner.

use super::timing::PhaseTimes;
use super::verdict::{Check, KernelPath, Outcome, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use w4a16_cases::Case;
use w4a16_kernels::KernelId;

/// The suite a case id belongs to: its first segment (`field/qwen3-8b.o_proj/M=1/…` → `field`).
pub fn suite_of(case_id: &str) -> &str {
    case_id.split('/').next().unwrap_or(case_id)
}

/// The group a case id belongs to within its suite: its data class, with the id's tag after it
/// (a view such as `x-odd-stride`, `bias`, `carrier`) where it has one, or `moe` and the class
/// for a MoE case (`…/T=64/…/realistic/e64-top6/…` → `moe realistic`). Groups say which kind of
/// case a suite's time goes to: the classes judged on the host, the views, the MoE layers.
pub fn group_of(case_id: &str) -> String {
    let segments: Vec<&str> = case_id.split('/').collect();
    let class = segments.get(6).copied().unwrap_or("other");
    let moe = segments.get(2).is_some_and(|s| s.starts_with("T="));
    match (moe, segments.get(7)) {
        (true, _) => format!("moe {class}"),
        (false, Some(tag)) => format!("{class} {tag}"),
        (false, None) => class.to_string(),
    }
}

/// Phase times per suite and per group within it ([`group_of`]), summed over the cases and
/// the workers that ran them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SuiteTimes {
    suites: BTreeMap<String, PhaseTimes>,
    groups: BTreeMap<String, BTreeMap<String, PhaseTimes>>,
}

impl SuiteTimes {
    /// Charges one finished case's times to its suite and its group.
    pub fn add_case(&mut self, case_id: &str, times: &PhaseTimes) {
        let suite = suite_of(case_id).to_string();
        self.suites.entry(suite.clone()).or_default().merge(times);
        let groups = self.groups.entry(suite).or_default();
        groups.entry(group_of(case_id)).or_default().merge(times);
    }

    /// Folds another worker's (device's, shard's) suite times into these.
    pub fn merge(&mut self, other: &SuiteTimes) {
        for (suite, times) in &other.suites {
            self.suites.entry(suite.clone()).or_default().merge(times);
        }
        for (suite, groups) in &other.groups {
            let mine = self.groups.entry(suite.clone()).or_default();
            for (group, times) in groups {
                mine.entry(group.clone()).or_default().merge(times);
            }
        }
    }

    /// The suites, in name order, with their times.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &PhaseTimes)> {
        self.suites.iter().map(|(s, t)| (s.as_str(), t))
    }

    /// `(suite, group, times)` in suite then group order.
    pub fn groups(&self) -> impl Iterator<Item = (&str, &str, &PhaseTimes)> {
        self.groups
            .iter()
            .flat_map(|(s, gs)| gs.iter().map(move |(g, t)| (s.as_str(), g.as_str(), t)))
    }
}

/// One suite's row of the cost table. The ratios are derived from the sums when the row is
/// made ([`SuiteCost::new`]), so a merge of shards adds the sums and derives them again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SuiteCost {
    pub suite: String,
    /// The group within the suite ([`group_of`]) for a row of the per-group breakdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub cases: usize,
    /// The suite's cases end to end, summed over the workers.
    pub worker_s: f64,
    pub worker_s_per_case: f64,
    /// 2·rows·N·K summed over the checks that judged a kernel's output ([`flop_checked`]).
    pub gflop_checked: f64,
    /// `None` where no kernel output was checked (every launch skipped, or none in the suite).
    pub worker_s_per_gflop: Option<f64>,
    /// The same worker-seconds by phase.
    pub phases: PhaseTimes,
}

impl SuiteCost {
    pub fn new(suite: impl Into<String>, phases: PhaseTimes, gflop_checked: f64) -> SuiteCost {
        let worker_s = phases.case_s;
        let cases = phases.cases;
        SuiteCost {
            suite: suite.into(),
            group: None,
            cases,
            worker_s,
            worker_s_per_case: if cases == 0 {
                0.0
            } else {
                worker_s / cases as f64
            },
            gflop_checked,
            worker_s_per_gflop: (gflop_checked > 0.0).then(|| worker_s / gflop_checked),
            phases,
        }
    }

    /// This row and `other`'s (the same suite on another shard) as one.
    pub fn merged(&self, other: &SuiteCost) -> SuiteCost {
        let mut phases = self.phases;
        phases.merge(&other.phases);
        SuiteCost {
            group: self.group.clone(),
            ..SuiteCost::new(
                self.suite.clone(),
                phases,
                self.gflop_checked + other.gflop_checked,
            )
        }
    }

    /// A row of the per-group breakdown.
    pub fn of_group(
        suite: impl Into<String>,
        group: impl Into<String>,
        phases: PhaseTimes,
        gflop_checked: f64,
    ) -> SuiteCost {
        SuiteCost {
            group: Some(group.into()),
            ..SuiteCost::new(suite, phases, gflop_checked)
        }
    }
}

/// Whether a path computes an output GEMM (not only the dequant copy or the MoE alignment,
/// whose work is no multiply-add of X by W).
fn computes_gemm(path: &KernelPath) -> bool {
    !matches!(
        path.kernels().last(),
        Some(KernelId::Dequant | KernelId::MoeAlign)
    )
}

/// The floating-point operations of kernel output that verdict `v` of `case` judged:
/// 2·rows·N·K for a path check whose kernels ran and whose output was compared (rows: the
/// batch M, or a MoE case's routed rows T·top_k), 0 for every other check and outcome.
pub fn flop_checked(case: &Case, v: &Verdict) -> f64 {
    let Check::Path(path) = &v.check else {
        return 0.0;
    };
    let judged = matches!(
        v.outcome,
        Outcome::Pass | Outcome::Fail | Outcome::ExpectedFail | Outcome::UnexpectedPass
    );
    if !judged || !computes_gemm(path) {
        return 0.0;
    }
    let rows = match &case.moe {
        Some(moe) => case.m * moe.top_k,
        None => case.m,
    };
    2.0 * rows as f64 * case.shape.n as f64 * case.shape.k as f64
}

/// GFLOP checked per key of `verdicts` (ids not among `cases`, the run-wide checks, count no
/// work).
fn gflop_by<'c, K: Ord>(
    cases: impl IntoIterator<Item = &'c Case>,
    verdicts: &[Verdict],
    key: impl Fn(&str) -> K,
) -> BTreeMap<K, f64> {
    let by_id: BTreeMap<&str, &Case> = cases.into_iter().map(|c| (c.id.as_str(), c)).collect();
    let mut gflop: BTreeMap<K, f64> = BTreeMap::new();
    for v in verdicts {
        if let Some(case) = by_id.get(v.case_id.as_str()) {
            *gflop.entry(key(&v.case_id)).or_default() += flop_checked(case, v) * 1e-9;
        }
    }
    gflop
}

/// One row per suite of `times`, its GFLOP checked summed from `verdicts` over the shapes of
/// `cases` (verdicts of ids not among `cases`, the run-wide checks, count no work).
pub fn suite_costs<'c>(
    times: &SuiteTimes,
    cases: impl IntoIterator<Item = &'c Case>,
    verdicts: &[Verdict],
) -> Vec<SuiteCost> {
    let gflop = gflop_by(cases, verdicts, |id| suite_of(id).to_string());
    times
        .iter()
        .map(|(suite, t)| SuiteCost::new(suite, *t, gflop.get(suite).copied().unwrap_or(0.0)))
        .collect()
}

/// As [`suite_costs`], one row per group within each suite ([`group_of`]).
pub fn group_costs<'c>(
    times: &SuiteTimes,
    cases: impl IntoIterator<Item = &'c Case>,
    verdicts: &[Verdict],
) -> Vec<SuiteCost> {
    let gflop = gflop_by(cases, verdicts, |id| {
        (suite_of(id).to_string(), group_of(id))
    });
    times
        .groups()
        .map(|(suite, group, t)| {
            let key = (suite.to_string(), group.to_string());
            let g = gflop.get(&key).copied().unwrap_or(0.0);
            SuiteCost::of_group(suite, group, *t, g)
        })
        .collect()
}

/// Rows of the same suite and group (from shards of one run) as one row each, in suite then
/// group order.
pub fn merge_suite_costs<'a>(rows: impl IntoIterator<Item = &'a SuiteCost>) -> Vec<SuiteCost> {
    let mut by_key: BTreeMap<(&str, Option<&str>), SuiteCost> = BTreeMap::new();
    for row in rows {
        by_key
            .entry((row.suite.as_str(), row.group.as_deref()))
            .and_modify(|r| *r = r.merged(row))
            .or_insert_with(|| row.clone());
    }
    by_key.into_values().collect()
}

/// The cost per suite as the run's last lines say it (nothing where no suite ran a case).
pub struct CostTable<'a>(pub &'a [SuiteCost]);

impl fmt::Display for CostTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return Ok(());
        }
        writeln!(
            f,
            "cost per suite (worker-seconds; phases: data, conversion, device, reference + verification):"
        )?;
        writeln!(
            f,
            "  {:<14} {:>6} {:>9} {:>8} {:>11} {:>9}  {:>8} {:>8} {:>8} {:>8}",
            "suite",
            "cases",
            "worker-s",
            "s/case",
            "GFLOP",
            "s/GFLOP",
            "data",
            "convert",
            "device",
            "verify"
        )?;
        for r in self.0 {
            let per_gflop = r
                .worker_s_per_gflop
                .map_or_else(|| "—".to_string(), |s| format!("{s:.3}"));
            writeln!(
                f,
                "  {:<14} {:>6} {:>9.1} {:>8.3} {:>11.3} {:>9}  {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
                r.suite,
                r.cases,
                r.worker_s,
                r.worker_s_per_case,
                r.gflop_checked,
                per_gflop,
                r.phases.data_s,
                r.phases.convert_s,
                r.phases.device_s,
                r.phases.verify_s
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! The cost rows of runs on the simulated device: they add up to the run's cases, their
    //! times are positive, and their GFLOP follow the shapes of the checks that ran.

    use super::*;
    use crate::runner::session::{Backend, SessionOptions, run_in_process};
    use w4a16_kernels::Target;

    const MOE_CASE: &str =
        "moe/moe.k256-n64-e8/T=7/f16/asym/g64/realistic/e8-top2/softmax/map-every-other";

    /// The GEMM paths' output checks a case ran, as the snapshot names them.
    fn judged_gemm_paths(verdicts: &[Verdict], id: &str) -> usize {
        verdicts
            .iter()
            .filter(|v| v.case_id == id)
            .filter(|v| matches!(&v.check, Check::Path(p) if computes_gemm(p)))
            .filter(|v| v.outcome != Outcome::Skip && v.outcome != Outcome::Refused)
            .count()
    }

    #[test]
    fn the_rows_add_up_to_the_runs_cases_with_positive_times_and_gflop_from_the_shapes() {
        let dir = w4a16_cases::locate(None).unwrap();
        let set = w4a16_cases::load_all(&dir).unwrap();
        let mut cases: Vec<&Case> = Vec::new();
        for suite in ["smoke", "regressions"] {
            let small = set.cases().filter(|c| c.suite == suite && c.m <= 6);
            cases.extend(small.take(4));
        }
        cases.push(set.case(MOE_CASE).unwrap());
        let opts = SessionOptions::new(dir, Target::Sm90);
        let backend = Backend::Device(w4a16_device::simulated::device_at(0));
        let out = run_in_process(&set, &cases, &backend, &opts, &|_| {}).unwrap();
        let rows = suite_costs(&out.suites, cases.iter().copied(), &out.verdicts);

        let suites: Vec<&str> = rows.iter().map(|r| r.suite.as_str()).collect();
        assert_eq!(suites, ["moe", "regressions", "smoke"]);
        let cases_in_rows: usize = rows.iter().map(|r| r.cases).sum();
        assert_eq!(cases_in_rows, cases.len());
        assert_eq!(cases_in_rows, out.times.cases);
        let worker_s: f64 = rows.iter().map(|r| r.worker_s).sum();
        approx::assert_relative_eq!(worker_s, out.times.case_s, max_relative = 1e-9);
        for r in &rows {
            assert!(r.worker_s > 0.0 && r.phases.total_s() > 0.0, "{r:?}");
            assert!(r.phases.total_s() <= r.worker_s * (1.0 + 1e-9), "{r:?}");
            approx::assert_relative_eq!(r.worker_s_per_case * r.cases as f64, r.worker_s);
            let per_gflop = r.worker_s_per_gflop.expect("kernels ran");
            approx::assert_relative_eq!(per_gflop * r.gflop_checked, r.worker_s);
        }

        // Each suite's GFLOP: 2·rows·N·K for every GEMM path whose output was judged.
        for r in &rows {
            let expected: f64 = cases
                .iter()
                .filter(|c| c.suite == r.suite)
                .map(|c| {
                    let rows = c.m * c.moe.map_or(1, |m| m.top_k);
                    let flop = 2.0 * (rows * c.shape.n * c.shape.k) as f64;
                    flop * judged_gemm_paths(&out.verdicts, &c.id) as f64 * 1e-9
                })
                .sum();
            assert!(expected > 0.0, "{}", r.suite);
            approx::assert_relative_eq!(r.gflop_checked, expected, max_relative = 1e-12);
        }
        // The MoE case: T = 7 tokens, top-2, N = 64, K = 256, one `moe_align+moe` output.
        let moe = rows.iter().find(|r| r.suite == "moe").unwrap();
        approx::assert_relative_eq!(moe.gflop_checked, 2.0 * 14.0 * 64.0 * 256.0 * 1e-9);
    }

    #[test]
    fn groups_name_the_class_and_tag_and_add_up_to_their_suite() {
        assert_eq!(
            group_of("other-shapes/gemma-7b.down_proj/M=33/bf16/asym/g128/realistic/x-odd-stride"),
            "realistic x-odd-stride"
        );
        assert_eq!(
            group_of("field/qwen3-8b.o_proj/M=1/f16/sym/g128/saturating"),
            "saturating"
        );
        assert_eq!(group_of(MOE_CASE), "moe realistic");
        let t = |case_s| PhaseTimes {
            cases: 1,
            case_s,
            device_s: case_s,
            ..PhaseTimes::default()
        };
        let mut times = SuiteTimes::default();
        times.add_case("s/a.b/M=1/f16/sym/g128/saturating", &t(1.0));
        times.add_case("s/a.b/M=6/f16/sym/g128/saturating", &t(2.0));
        let mut other = SuiteTimes::default();
        other.add_case("s/a.b/M=1/f16/sym/g128/realistic/x-offset-2b", &t(4.0));
        times.merge(&other);
        let groups: Vec<(&str, &str, usize, f64)> = times
            .groups()
            .map(|(s, g, p)| (s, g, p.cases, p.case_s))
            .collect();
        assert_eq!(
            groups,
            [
                ("s", "realistic x-offset-2b", 1, 4.0),
                ("s", "saturating", 2, 3.0)
            ]
        );
        let suite: Vec<(&str, usize, f64)> =
            times.iter().map(|(s, p)| (s, p.cases, p.case_s)).collect();
        assert_eq!(suite, [("s", 3, 7.0)]);
        let rows = group_costs(&times, [], &[]);
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.suite == "s" && r.group.is_some()));
        let merged = merge_suite_costs(rows.iter().chain(&rows));
        assert_eq!(merged.len(), 2, "the same group of two shards is one row");
        assert_eq!(merged[1].cases, 4);
    }

    #[test]
    fn skipped_and_refused_launches_and_non_gemm_paths_count_no_work() {
        let dir = w4a16_cases::locate(None).unwrap();
        let set = w4a16_cases::load_all(&dir).unwrap();
        let case = set.cases().find(|c| c.suite == "smoke").unwrap();
        let (m, n, k) = (case.m as f64, case.shape.n as f64, case.shape.k as f64);
        let v = |check: Check, outcome| Verdict::new(&case.id, check, outcome);
        let fused = || Check::kernel(KernelId::Fused);
        assert_eq!(
            flop_checked(case, &v(fused(), Outcome::Pass)),
            2.0 * m * n * k
        );
        assert_eq!(
            flop_checked(case, &v(fused(), Outcome::Fail)),
            2.0 * m * n * k
        );
        assert_eq!(flop_checked(case, &v(fused(), Outcome::Skip)), 0.0);
        assert_eq!(flop_checked(case, &v(fused(), Outcome::Refused)), 0.0);
        let dequant = Check::kernel(KernelId::Dequant);
        assert_eq!(flop_checked(case, &v(dequant, Outcome::Pass)), 0.0);
        let two = KernelPath::new(vec![KernelId::Dequant, KernelId::Dense]).unwrap();
        assert_eq!(
            flop_checked(case, &v(Check::Path(two), Outcome::Pass)),
            2.0 * m * n * k
        );
        let det = Check::Determinism(KernelId::Fused);
        assert_eq!(flop_checked(case, &v(det, Outcome::Pass)), 0.0);
    }

    #[test]
    fn shard_rows_of_one_suite_merge_into_one_with_its_ratios_derived_again() {
        let phases = |cases, case_s| PhaseTimes {
            cases,
            case_s,
            data_s: case_s / 2.0,
            ..PhaseTimes::default()
        };
        let a = SuiteCost::new("moe", phases(2, 4.0), 1.0);
        let b = SuiteCost::new("moe", phases(6, 4.0), 3.0);
        let c = SuiteCost::new("field", phases(1, 1.0), 0.0);
        let merged = merge_suite_costs([&a, &c, &b]);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0], c);
        assert_eq!(merged[0].worker_s_per_gflop, None);
        let moe = &merged[1];
        assert_eq!((moe.cases, moe.worker_s, moe.gflop_checked), (8, 8.0, 4.0));
        assert_eq!(moe.worker_s_per_case, 1.0);
        assert_eq!(moe.worker_s_per_gflop, Some(2.0));
        assert_eq!(moe.phases.data_s, 4.0);
        let table = CostTable(&merged).to_string();
        assert!(
            table.lines().count() == 4 && table.contains("moe"),
            "{table}"
        );
        assert_eq!(CostTable(&[]).to_string(), "");
    }
}
