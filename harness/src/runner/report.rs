//! Machine-readable reports (JSON, JUnit XML) and a Markdown summary for a pull-request comment.

use super::shard::ShardRecord;
use super::timing::PhaseTimes;
use super::verdict::{Outcome, Summary, Verdict};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use serde::Serialize;
use std::collections::BTreeMap;
use w4a16_device::DeviceKind;

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

/// A run's wall time, worker count and phase split.
#[derive(Serialize)]
pub struct Timing<'a> {
    pub wall_s: f64,
    pub workers: usize,
    pub phases: &'a PhaseTimes,
}

/// The JSON report; `timing` is the run's wall time, worker count and phase split.
pub fn json(
    target: &str,
    verdicts: &[Verdict],
    timing: Option<(f64, usize, &PhaseTimes)>,
) -> String {
    json_full(target, None, None, verdicts, timing, None)
}

/// As [`json`], recording which reference (`--reference gpu|cpu`) judged the run and, for one
/// shard of a run (`--shard I/N`), which share it is.
pub fn json_full(
    target: &str,
    reference: Option<&str>,
    device: Option<DeviceKind>,
    verdicts: &[Verdict],
    timing: Option<(f64, usize, &PhaseTimes)>,
    shard: Option<&ShardRecord>,
) -> String {
    let summary = Summary::of(verdicts);
    serde_json::to_string_pretty(&JsonReport {
        target,
        reference,
        device,
        summary: &summary,
        timing: timing.map(|(wall_s, workers, phases)| Timing {
            wall_s,
            workers,
            phases,
        }),
        shard,
        verdicts,
    })
    .expect("verdicts serialize")
}

/// A verdict as a JUnit test case status: refusals and expected failures pass, skips carry their
/// reason, faults are errors, the rest failures. Shared by every JUnit report.
pub fn junit_status(v: &Verdict) -> TestCaseStatus {
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
    report.to_string().expect("junit serializes")
}

/// A Markdown summary: the counts, every failure with its repro line, skip reasons.
pub fn markdown(target: &str, verdicts: &[Verdict], repro: impl Fn(&Verdict) -> String) -> String {
    let s = Summary::of(verdicts);
    let mut out = String::new();
    let status = if s.failures() == 0 { "✅" } else { "❌" };
    out.push_str(&format!("### {status} W4A16 harness on `{target}`\n\n"));
    out.push_str("| passed | refused | xfail | failed | faults | xpass | expired | skipped |\n");
    out.push_str("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    out.push_str(&format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} |\n\n",
        s.passed,
        s.refused,
        s.expected_fail,
        s.failed,
        s.faults,
        s.unexpected_pass,
        s.expired,
        s.skipped
    ));
    let failures: Vec<&Verdict> = verdicts.iter().filter(|v| v.outcome.is_failure()).collect();
    if !failures.is_empty() {
        out.push_str("<details open><summary>Failures</summary>\n\n| case | check | outcome | detail | repro |\n|---|---|---|---|---|\n");
        for v in failures.iter().take(200) {
            out.push_str(&format!(
                "| `{}` | {} | {} | {} | `{}` |\n",
                v.case_id,
                v.check,
                v.outcome,
                v.detail.replace('|', "\\|").replace('\n', " "),
                repro(v)
            ));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    use crate::runner::Check;
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
        let j = json("sm_90", &sample(), Some((3.0, 14, &phases)));
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["timing"]["wall_s"], 3.0);
        assert_eq!(v["timing"]["workers"], 14);
        assert_eq!(v["timing"]["phases"]["cases"], 2);
        assert_eq!(v["timing"]["phases"]["verify_s"], 1.5);
    }
}
