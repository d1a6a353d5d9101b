//! A run's report folder: `report.json`, `junit.xml` and `summary.md` (a Markdown summary for
//! a pull-request comment). The content is built here; [`crate::report`] writes it.

use super::cost::SuiteCost;
use super::execute::{self, ReferenceChoice};
use super::shard::ShardRecord;
use super::timing::PhaseTimes;
use super::verdict::{Summary, Verdict};
use crate::report::markdown::{self, Align, Table};
use crate::report::{self as writer, FileError, ReportFiles};
use quick_junit::{Report, TestCase, TestCaseStatus, TestSuite};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use w4a16_device::DeviceKind;
use w4a16_kernels::RunTarget;

/// The files a run's report owns in its folder, in the order they are written.
pub const FILES: [&str; 3] = ["report.json", "junit.xml", "summary.md"];

#[derive(Serialize)]
struct JsonReport<'a> {
    target: &'a str,
    /// Where the reference's products were formed (`gpu` or `cpu`); absent where not recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    reference: Option<&'a str>,
    /// What ran the launches (`cuda`, `rocm`, `emulator`, `simulated`); absent without a device.
    #[serde(skip_serializing_if = "Option::is_none")]
    device: Option<DeviceKind>,
    summary: &'a Summary,
    /// Where the time went; absent when the run was not timed. Never part of a snapshot.
    #[serde(skip_serializing_if = "Option::is_none")]
    timing: Option<Timing<'a>>,
    /// Which share of the cases this is (`w4a16 run --shard I/N`); absent in an unsharded run
    /// and in the merge of the shards.
    #[serde(skip_serializing_if = "Option::is_none")]
    shard: Option<&'a ShardRecord>,
    verdicts: &'a [Verdict],
}

/// A run's wall time, worker count, phase split and cost per suite.
#[derive(Clone, Copy, Serialize)]
pub struct Timing<'a> {
    pub wall_s: f64,
    pub workers: usize,
    pub phases: &'a PhaseTimes,
    /// One row per suite that ran cases ([`SuiteCost`]); empty where not gathered.
    #[serde(skip_serializing_if = "<[SuiteCost]>::is_empty")]
    pub suites: &'a [SuiteCost],
    /// The same per group within each suite (`cost::group_of`: class, view, MoE).
    #[serde(skip_serializing_if = "<[SuiteCost]>::is_empty")]
    pub groups: &'a [SuiteCost],
}

impl<'a> Timing<'a> {
    /// A run's timing without its per-suite rows.
    pub fn of(wall_s: f64, workers: usize, phases: &'a PhaseTimes) -> Timing<'a> {
        Timing {
            wall_s,
            workers,
            phases,
            suites: &[],
            groups: &[],
        }
    }
}

/// The JSON report; `timing` is the run's wall time, worker count, phase split and suite costs.
pub fn json(target: &str, verdicts: &[Verdict], timing: Option<Timing<'_>>) -> String {
    json_full(target, None, None, verdicts, timing, None)
}

/// As [`json`], recording which reference (`--reference gpu|cpu`) judged the run and, for one
/// shard of a run (`--shard I/N`), which share it is.
pub fn json_full(
    target: &str,
    reference: Option<&str>,
    device: Option<DeviceKind>,
    verdicts: &[Verdict],
    timing: Option<Timing<'_>>,
    shard: Option<&ShardRecord>,
) -> String {
    let summary = Summary::of(verdicts);
    writer::json::pretty(
        &JsonReport {
            target,
            reference,
            device,
            summary: &summary,
            timing,
            shard,
            verdicts,
        },
        "a run's verdicts",
    )
}

/// A verdict as a JUnit test case status (see [`writer::junit::verdict_status`]).
pub fn junit_status(v: &Verdict) -> TestCaseStatus {
    writer::junit::verdict_status(v)
}

/// JUnit XML: one suite per case-id prefix (the suite name), one test case per check.
pub fn junit(target: &str, verdicts: &[Verdict]) -> String {
    let mut report = Report::new(format!("w4a16@{target}"));
    let mut suites: BTreeMap<&str, Vec<&Verdict>> = BTreeMap::new();
    for v in verdicts {
        let suite = v.case_id.split('/').next().unwrap_or("cases");
        suites.entry(suite).or_default().push(v);
    }
    for (name, vs) in suites {
        let mut suite = TestSuite::new(name);
        for v in vs {
            let status = junit_status(v);
            let mut tc = TestCase::new(format!("{} [{}]", v.case_id, v.check), status);
            tc.set_classname(format!("w4a16.{target}.{name}"));
            suite.add_test_case(tc);
        }
        report.add_test_suite(suite);
    }
    writer::junit::render(&report).expect("junit serializes")
}

/// A Markdown summary: the counts, every failure with its repro line, skip reasons.
pub fn markdown(target: &str, verdicts: &[Verdict], repro: impl Fn(&Verdict) -> String) -> String {
    let s = Summary::of(verdicts);
    let mut out = String::new();
    let status = if s.failures() == 0 { "✅" } else { "❌" };
    out.push_str(&format!("### {status} W4A16 harness on `{target}`\n\n"));
    let mut counts = Table::aligned(
        [
            "passed", "refused", "xfail", "failed", "faults", "xpass", "expired", "skipped",
        ]
        .map(|h| (h, Align::Right)),
    );
    counts.row(
        [
            s.passed,
            s.refused,
            s.expected_fail,
            s.failed,
            s.faults,
            s.unexpected_pass,
            s.expired,
            s.skipped,
        ]
        .map(|n| n.to_string()),
    );
    out.push_str(&counts.render());
    out.push('\n');
    let failures: Vec<&Verdict> = verdicts.iter().filter(|v| v.outcome.is_failure()).collect();
    if !failures.is_empty() {
        let mut table = Table::new(["case", "check", "outcome", "detail", "repro"]);
        for v in failures.iter().take(200) {
            table.row([
                format!("`{}`", v.case_id),
                v.check.to_string(),
                v.outcome.to_string(),
                markdown::escape_line(&v.detail),
                format!("`{}`", repro(v)),
            ]);
        }
        out.push_str("<details open><summary>Failures</summary>\n\n");
        out.push_str(&table.render());
        if failures.len() > 200 {
            out.push_str(&format!(
                "\n… and {} more (see the JSON report)\n",
                failures.len() - 200
            ));
        }
        out.push_str("\n</details>\n\n");
    }
    if !s.skip_reasons.is_empty() {
        out.push_str("Skipped:\n\n");
        for (reason, n) in &s.skip_reasons {
            out.push_str(&format!("- {n} × {reason}\n"));
        }
    }
    out
}

/// The cost per suite as a Markdown table: cases, worker-seconds (in all, per case, per GFLOP
/// checked), GFLOP checked, and the seconds of each phase.
pub fn suite_cost_table(rows: &[SuiteCost]) -> Table {
    let mut table = Table::aligned([
        ("suite", Align::Left),
        ("cases", Align::Right),
        ("worker-s", Align::Right),
        ("worker-s/case", Align::Right),
        ("GFLOP checked", Align::Right),
        ("worker-s/GFLOP", Align::Right),
        ("data s", Align::Right),
        ("conversion s", Align::Right),
        ("device s", Align::Right),
        ("reference + verification s", Align::Right),
    ]);
    for r in rows {
        let name = match &r.group {
            Some(g) => format!("`{}` {g}", r.suite),
            None => format!("`{}`", r.suite),
        };
        table.row([
            name,
            r.cases.to_string(),
            format!("{:.1}", r.worker_s),
            format!("{:.3}", r.worker_s_per_case),
            format!("{:.3}", r.gflop_checked),
            r.worker_s_per_gflop
                .map_or_else(|| "—".to_string(), |s| format!("{s:.3}")),
            format!("{:.1}", r.phases.data_s),
            format!("{:.1}", r.phases.convert_s),
            format!("{:.1}", r.phases.device_s),
            format!("{:.1}", r.phases.verify_s),
        ]);
    }
    table
}

/// What a run (or the merge of its shards) reports: the inputs of its three files.
#[derive(Clone, Copy)]
pub struct RunReport<'a> {
    pub target: RunTarget,
    /// Which reference (`--reference gpu|cpu`) judged the run.
    pub reference: Option<ReferenceChoice>,
    pub device: Option<DeviceKind>,
    pub verdicts: &'a [Verdict],
    /// Wall seconds, workers, the phase split and the cost per suite.
    pub timing: Timing<'a>,
    /// For one shard of a run (`--shard I/N`), which share it is.
    pub shard: Option<&'a ShardRecord>,
}

impl RunReport<'_> {
    /// report.json, junit.xml and summary.md (with where the time went).
    pub fn files(&self) -> ReportFiles {
        let t = &self.target.name();
        let target = self.target;
        let mut md = markdown(t, self.verdicts, |v| {
            execute::repro_command(&v.case_id, target)
        });
        let Timing {
            wall_s,
            workers,
            phases: times,
            suites,
            groups,
        } = self.timing;
        let share = |x: f64| 100.0 * x / times.total_s().max(f64::MIN_POSITIVE);
        md.push_str(&format!(
            "\n_{wall_s:.0} s wall on {workers} workers; of their summed time: device {:.0}%, reference + verification {:.0}%, data + conversion {:.0}%._\n",
            share(times.device_s),
            share(times.verify_s),
            share(times.data_s + times.convert_s),
        ));
        // The timed part is the wall-time line and what follows it.
        if !suites.is_empty() {
            md.push_str("\n<details><summary>Cost per suite</summary>\n\n");
            md.push_str(&suite_cost_table(suites).render());
            md.push_str("\n</details>\n");
        }
        if !groups.is_empty() {
            md.push_str("\n<details><summary>Cost per group within each suite</summary>\n\n");
            md.push_str(&suite_cost_table(groups).render());
            md.push_str("\n</details>\n");
        }
        let json = json_full(
            t,
            self.reference.map(ReferenceChoice::name),
            self.device,
            self.verdicts,
            Some(self.timing),
            self.shard,
        );
        let [json_name, junit_name, md_name] = FILES;
        ReportFiles::new()
            .with(json_name, json)
            .with(junit_name, junit(t, self.verdicts))
            .with(md_name, md)
    }

    /// Writes the report into `dir` (created), replacing an earlier run's.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, FileError> {
        writer::write(dir, &self.files())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::runner::Check;
    use crate::runner::verdict::Outcome;
    use w4a16_kernels::KernelId;

    fn sample() -> Vec<Verdict> {
        let skinny = Check::kernel(KernelId::Skinny);
        let fused = || Check::kernel(KernelId::Fused);
        vec![
            Verdict::new("edges/a/M=1/f16/sym/g32/exact", skinny, Outcome::Pass).bucket("0"),
            Verdict::new("edges/a/M=1/f16/sym/g32/exact", fused(), Outcome::Fail)
                .detail("3 elements over bound"),
            Verdict::new(
                "edges/b/M=6/bf16/asym/g64/realistic",
                fused(),
                Outcome::Skip,
            )
            .detail("no GPU"),
        ]
    }

    #[test]
    fn junit_marks_failures_and_skips() {
        let xml = junit("sm_90", &sample());
        assert!(xml.contains("<failure"), "{xml}");
        assert!(xml.contains("<skipped"), "{xml}");
        assert!(xml.contains("tests=\"3\""), "{xml}");
    }

    #[test]
    fn markdown_lists_failures_with_repro() {
        let md = markdown("sm_90", &sample(), |v| {
            format!("w4a16 repro '{}'", v.case_id)
        });
        assert!(md.contains("❌"));
        assert!(md.contains("w4a16 repro 'edges/a/M=1/f16/sym/g32/exact'"));
        assert!(md.contains("1 × no GPU"));
        assert!(!md.contains("edges/b/M=6/bf16/asym/g64/realistic` | fused | FAIL"));
    }

    #[test]
    fn json_round_trips_counts() {
        let j = json("sm_90", &sample(), None);
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["summary"]["failed"], 1);
        assert_eq!(v["summary"]["skipped"], 1);
        assert_eq!(v["verdicts"].as_array().unwrap().len(), 3);
        assert!(
            v.get("timing").is_none(),
            "an untimed run reports no timing"
        );
    }

    #[test]
    fn json_carries_the_phase_split_when_timed() {
        let phases = PhaseTimes {
            cases: 2,
            verify_s: 1.5,
            device_s: 0.5,
            ..PhaseTimes::default()
        };
        let j = json("sm_90", &sample(), Some(Timing::of(3.0, 14, &phases)));
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["timing"]["wall_s"], 3.0);
        assert_eq!(v["timing"]["workers"], 14);
        assert_eq!(v["timing"]["phases"]["cases"], 2);
        assert_eq!(v["timing"]["phases"]["verify_s"], 1.5);
    }
}
