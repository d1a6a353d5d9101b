//! The reports of a perf run, for people first: `summary.md` (the field's counts table, the
//! worst cases, every case collapsed), `perf.json`, `perf-junit.xml` and `plot.svg`.

use super::judge::{CaseOutcome, JudgePolicy, Judgement, ratio_samples};
use super::key::ControlKind;
use super::measure::PerfPlan;
use super::plot::render_svg;
use super::stats::median;
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Rows shown in the worst-cases and not-judged lists; the rest is in the per-case table.
const LIST_ROWS: usize = 15;

/// Everything one `w4a16 perf` run produced, as the reports and `--update-goldens` read it.
#[derive(Clone, Debug, Serialize)]
pub struct PerfRun {
    pub target: String,
    pub device: String,
    pub suite: String,
    /// The policy in force, with the golden file's overrides applied.
    pub policy: JudgePolicy,
    pub plan: PerfPlan,
    /// "embedded kernels" or the kernel-source folder.
    pub candidate: String,
    pub control: Option<String>,
    pub outcomes: Vec<CaseOutcome>,
    /// (case id, why it is not timed here).
    pub not_timed: Vec<(String, String)>,
    pub peers_note: Option<String>,
}

/// Where [`write_reports`] put each report.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportFiles {
    pub summary_md: PathBuf,
    pub json: PathBuf,
    pub junit: PathBuf,
    pub plot: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("plot: {0}")]
    Plot(String),
    #[error("JUnit report: {0}")]
    Junit(#[from] quick_junit::SerializeError),
}

/// Writes `summary.md`, `perf.json`, `perf-junit.xml` and `plot.svg` into `dir` (created).
pub fn write_reports(run: &PerfRun, dir: &Path) -> Result<ReportFiles, ReportError> {
    let files = ReportFiles {
        summary_md: dir.join("summary.md"),
        json: dir.join("perf.json"),
        junit: dir.join("perf-junit.xml"),
        plot: dir.join("plot.svg"),
    };
    let write = |path: &Path, text: String| {
        std::fs::write(path, text).map_err(|source| ReportError::Io {
            path: path.to_path_buf(),
            source,
        })
    };
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    write(&files.plot, render_svg(run)?)?;
    write(&files.summary_md, summary_markdown(run))?;
    write(&files.json, json(run))?;
    write(&files.junit, junit(run)?)?;
    Ok(files)
}

/// How many judgements of one comparison fell in each class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub within_band: usize,
    pub improvement: usize,
    pub regression: usize,
    pub too_noisy: usize,
    pub wrong_kernel: usize,
    pub no_golden: usize,
}

impl Counts {
    pub fn of<'a>(judgements: impl IntoIterator<Item = &'a Judgement>) -> Counts {
        let mut c = Counts::default();
        for j in judgements {
            *match j {
                Judgement::WithinBand { .. } => &mut c.within_band,
                Judgement::Improvement { .. } => &mut c.improvement,
                Judgement::Regression { .. } => &mut c.regression,
                Judgement::TooNoisy { .. } => &mut c.too_noisy,
                Judgement::WrongKernel { .. } => &mut c.wrong_kernel,
                Judgement::NoGolden => &mut c.no_golden,
            } += 1;
        }
        c
    }
}

/// The three comparisons of the counts table, the control ones absent without a control.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RunCounts {
    pub candidate_vs_goldens: Counts,
    pub control_vs_goldens: Option<Counts>,
    pub candidate_vs_control: Option<Counts>,
    pub stale_golden: usize,
    pub failing: usize,
}

impl RunCounts {
    pub fn of(run: &PerfRun) -> RunCounts {
        let with_control = run.control.is_some();
        RunCounts {
            candidate_vs_goldens: Counts::of(run.outcomes.iter().map(|o| &o.candidate_judgement)),
            control_vs_goldens: with_control.then(|| {
                Counts::of(
                    run.outcomes
                        .iter()
                        .filter_map(|o| o.control_judgement.as_ref()),
                )
            }),
            candidate_vs_control: with_control
                .then(|| Counts::of(run.outcomes.iter().filter_map(|o| o.vs_control.as_ref()))),
            stale_golden: run.outcomes.iter().filter(|o| o.stale_golden).count(),
            failing: run.outcomes.iter().filter(|o| o.fails(&run.policy)).count(),
        }
    }
}

/// `x` to 3 significant digits (33.6, 1370, 0.213); "—" where there is no number.
pub(crate) fn fmt_sig3(x: f64) -> String {
    if !x.is_finite() {
        return "—".into();
    }
    if x == 0.0 {
        return "0".into();
    }
    // Round first, so that 9.996 prints as 10.0 rather than 10.00.
    let magnitude = |v: f64| v.abs().log10().floor() as i32;
    let f = 10f64.powi(2 - magnitude(x));
    let r = (x * f).round() / f;
    let decimals = (2 - magnitude(r)).max(0) as usize;
    format!("{r:.decimals$}")
}

/// A shift as a signed percentage, one decimal: `+20.0 %`.
pub(crate) fn fmt_delta(d: f64) -> String {
    if d.is_finite() {
        format!("{:+.1} %", d * 100.0)
    } else {
        "—".into()
    }
}

/// A p-value: three decimals, scientific below 0.001, `n/a` where no test ran.
pub(crate) fn fmt_p(p: f64) -> String {
    if !p.is_finite() {
        "n/a".into()
    } else if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

fn opt(x: Option<f64>, f: fn(f64) -> String) -> String {
    x.map_or_else(|| "—".into(), f)
}

/// `1 case`, `2 cases`.
fn plural(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// Markdown table cells must not contain a bare `|`.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// Median ratio of the candidate and the golden ratio it was judged against (recovered from
/// delta = ratio / golden − 1, so no second copy of the goldens is needed).
fn ratios(o: &CaseOutcome) -> (Option<f64>, Option<f64>) {
    let ratio = median(&ratio_samples(&o.candidate));
    let golden = ratio
        .zip(o.candidate_judgement.delta())
        .map(|(r, d)| r / (1.0 + d));
    (ratio, golden)
}

/// Achieved throughput against what the control measures: GB/s of logical traffic beside the
/// copy ceiling, TFLOP/s beside the BLAS.
fn throughput(o: &CaseOutcome) -> String {
    let Some(t) = median(&o.candidate.times_us).filter(|t| *t > 0.0) else {
        return "—".into();
    };
    match o.candidate.control {
        ControlKind::CopyCeiling => format!(
            "{} GB/s",
            fmt_sig3(o.candidate.traffic_bytes as f64 / t / 1e3)
        ),
        ControlKind::VendorBlas => {
            format!("{} TFLOP/s", fmt_sig3(o.candidate.flops as f64 / t / 1e6))
        }
    }
}

fn policy_line(p: &JudgePolicy) -> String {
    format!(
        "band ±{}, noise limit IQR/median {}, Mann–Whitney α {}, improvements {}",
        fmt_delta(p.band).trim_start_matches('+'),
        fmt_delta(p.noise_limit).trim_start_matches('+'),
        p.alpha,
        if p.fail_improvements {
            "fail"
        } else {
            "allowed"
        }
    )
}

fn counts_row(md: &mut String, title: &str, c: &Counts, stale: &str) {
    let _ = writeln!(
        md,
        "| {title} | {} | {} | {} | {} | {} | {} | {stale} |",
        c.within_band, c.improvement, c.regression, c.too_noisy, c.wrong_kernel, c.no_golden
    );
}

/// The largest out-of-band shift of a case, against the golden or the control.
fn worst_shift(o: &CaseOutcome) -> Option<f64> {
    [Some(&o.candidate_judgement), o.vs_control.as_ref()]
        .into_iter()
        .flatten()
        .filter(|j| j.out_of_band_direction().is_some())
        .filter_map(|j| j.delta())
        .map(f64::abs)
        .max_by(f64::total_cmp)
}

fn summary_markdown(run: &PerfRun) -> String {
    let counts = RunCounts::of(run);
    let with_control = run.control.is_some();
    let with_peers = run.outcomes.iter().any(|o| o.peers.is_some());
    let mut md = String::new();
    let verdict = if counts.failing == 0 {
        "pass".to_string()
    } else {
        format!(
            "FAIL, {} of {}",
            counts.failing,
            plural(run.outcomes.len(), "case")
        )
    };
    let _ = writeln!(md, "# Perf `{}`: {verdict}\n", run.target);
    md.push_str("| | |\n|---|---|\n");
    let _ = writeln!(md, "| target | `{}` |", run.target);
    let _ = writeln!(md, "| device | {} |", cell(&run.device));
    let _ = writeln!(
        md,
        "| suite | `{}`: {} cases timed, {} not timed |",
        run.suite,
        run.outcomes.len(),
        run.not_timed.len()
    );
    let _ = writeln!(
        md,
        "| plan | {} launches a side, {} warm-up, inputs (and the controls') rotated over at least {} copies spanning {} MiB, so every read is cold |",
        run.plan.reps,
        run.plan.warmup,
        run.plan.copies,
        crate::perf::measure::PerfPlan::COLD_FOOTPRINT_BYTES >> 20
    );
    let _ = writeln!(md, "| policy | {} |", policy_line(&run.policy));
    let _ = writeln!(md, "| candidate | {} |", cell(&run.candidate));
    let _ = writeln!(
        md,
        "| control | {} |",
        cell(run.control.as_deref().unwrap_or("none"))
    );
    md.push_str(
        "\nTimes are per-launch medians in µs; ratio = time / median of the control measured \
         beside it (copy ceiling for M ≤ 5, vendor BLAS above); Δ = ratio / golden ratio − 1, \
         + is slower.\n\n## Counts\n\n\
         | | within band | improvement | regression | too noisy | wrong kernel | no golden | stale golden |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    counts_row(
        &mut md,
        "candidate vs goldens",
        &counts.candidate_vs_goldens,
        &counts.stale_golden.to_string(),
    );
    if let (Some(ctrl), Some(vs)) = (&counts.control_vs_goldens, &counts.candidate_vs_control) {
        counts_row(&mut md, "control vs goldens", ctrl, "—");
        counts_row(&mut md, "candidate vs control", vs, "—");
    }
    if counts.stale_golden > 0 {
        let _ = writeln!(
            md,
            "\n{} moved alike on both sides and the candidate is within band of the \
             control: goldens stale, run `w4a16 perf --update-goldens`. They do not fail the run.",
            plural(counts.stale_golden, "case")
        );
    }

    let mut worst: Vec<(&CaseOutcome, f64)> = run
        .outcomes
        .iter()
        .filter_map(|o| worst_shift(o).map(|d| (o, d)))
        .collect();
    worst.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.key.cmp(&b.0.key)));
    md.push_str("\n## Worst cases (out of band, by |Δ|)\n\n");
    if worst.is_empty() {
        md.push_str("No case is out of band.\n");
    } else {
        md.push_str("| case | kernel | time µs | ratio | golden ratio | Δ | p | verdict |");
        md.push_str(if with_control {
            " cand/control | vs control |\n"
        } else {
            "\n"
        });
        md.push_str("|---|---|---|---|---|---|---|---|");
        md.push_str(if with_control { "---|---|\n" } else { "\n" });
        for (o, _) in worst.iter().take(LIST_ROWS) {
            let (ratio, golden) = ratios(o);
            let j = &o.candidate_judgement;
            let _ = write!(
                md,
                "| `{}` | `{}` | {} | {} | {} | {} | {} | {}{} |",
                o.key,
                cell(&o.candidate.kernel.0),
                opt(median(&o.candidate.times_us), fmt_sig3),
                opt(ratio, fmt_sig3),
                opt(golden, fmt_sig3),
                opt(j.delta(), fmt_delta),
                opt(j.p(), fmt_p),
                j.name(),
                if o.stale_golden {
                    " (stale golden)"
                } else {
                    ""
                },
            );
            if with_control {
                let _ = write!(
                    md,
                    " {} | {} |",
                    opt(o.cand_over_control, fmt_delta),
                    o.vs_control
                        .as_ref()
                        .map_or("—".into(), |j| cell(&j.to_string()))
                );
            }
            md.push('\n');
        }
        if worst.len() > LIST_ROWS {
            let _ = writeln!(
                md,
                "\n… and {} more in the per-case table.",
                worst.len() - LIST_ROWS
            );
        }
    }

    let unjudged: Vec<&CaseOutcome> = run
        .outcomes
        .iter()
        .filter(|o| o.candidate_judgement.delta().is_none())
        .collect();
    if !unjudged.is_empty() {
        md.push_str("\n## Not judged (wrong kernel, too noisy, no golden)\n\n| case | kernel | verdict |\n|---|---|---|\n");
        for o in unjudged.iter().take(LIST_ROWS) {
            let _ = writeln!(
                md,
                "| `{}` | `{}` | {} |",
                o.key,
                cell(&o.candidate.kernel.0),
                cell(&o.candidate_judgement.to_string())
            );
        }
        if unjudged.len() > LIST_ROWS {
            let _ = writeln!(
                md,
                "\n… and {} more in the per-case table.",
                unjudged.len() - LIST_ROWS
            );
        }
    }

    md.push_str("\n## Plot\n\n[![ratio against the golden per shape and M](plot.svg)](plot.svg)\n");
    if let Some(note) = &run.peers_note {
        let _ = writeln!(md, "\nPeers: {note}");
    }

    let _ = writeln!(
        md,
        "\n<details><summary>All {} cases</summary>\n",
        run.outcomes.len()
    );
    md.push_str("| case | kernel | time µs | throughput | ratio to | its µs | ratio | golden ratio | Δ | p | verdict |");
    let mut rule = String::from("|---|---|---|---|---|---|---|---|---|---|---|");
    if with_control {
        md.push_str(" control build µs | control build verdict | cand/control | vs control |");
        rule.push_str("---|---|---|---|");
    }
    if with_peers {
        md.push_str(" torch int4 µs | dense fp16 µs |");
        rule.push_str("---|---|");
    }
    let _ = writeln!(md, "\n{rule}");
    for o in &run.outcomes {
        let (ratio, golden) = ratios(o);
        let j = &o.candidate_judgement;
        let _ = write!(
            md,
            "| `{}` | `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            o.key,
            cell(&o.candidate.kernel.0),
            opt(median(&o.candidate.times_us), fmt_sig3),
            throughput(o),
            o.candidate.control.name(),
            opt(median(&o.candidate.control_us), fmt_sig3),
            opt(ratio, fmt_sig3),
            opt(golden, fmt_sig3),
            opt(j.delta(), fmt_delta),
            opt(j.p(), fmt_p),
            j.name(),
        );
        if with_control {
            let _ = write!(
                md,
                " {} | {} | {} | {} |",
                opt(
                    o.control.as_ref().and_then(|c| median(&c.times_us)),
                    fmt_sig3
                ),
                o.control_judgement.as_ref().map_or("—", Judgement::name),
                opt(o.cand_over_control, fmt_delta),
                o.vs_control.as_ref().map_or("—", Judgement::name),
            );
        }
        if with_peers {
            let peers = o.peers.as_ref();
            let _ = write!(
                md,
                " {} | {} |",
                opt(peers.and_then(|p| p.torch_int4_us), fmt_sig3),
                opt(peers.and_then(|p| p.dense_fp16_us), fmt_sig3),
            );
        }
        md.push('\n');
    }
    md.push_str("\n</details>\n");
    if !run.not_timed.is_empty() {
        let _ = writeln!(
            md,
            "\n<details><summary>{} not timed</summary>\n",
            plural(run.not_timed.len(), "case")
        );
        for (id, why) in &run.not_timed {
            let _ = writeln!(md, "- `{id}`: {why}");
        }
        md.push_str("\n</details>\n");
    }
    md
}

#[derive(Serialize)]
struct JsonReport<'a> {
    counts: RunCounts,
    #[serde(flatten)]
    run: &'a PerfRun,
}

/// The whole run plus its counts; numbers that do not exist (an infinite spread) are `null`.
fn json(run: &PerfRun) -> String {
    serde_json::to_string_pretty(&JsonReport {
        counts: RunCounts::of(run),
        run,
    })
    .expect("perf run serializes")
}

/// One test case per key (classname provider/shape, name `M=…`); a failing case's message
/// names its judgements, a passing one's output says what was measured.
fn junit(run: &PerfRun) -> Result<String, ReportError> {
    let mut report = Report::new(format!("w4a16 perf@{}", run.target));
    let mut suite = TestSuite::new(format!("perf.{}", run.suite));
    for o in &run.outcomes {
        let mut story = format!(
            "kernel {}; median {} µs; against the golden: {}",
            o.candidate.kernel,
            opt(median(&o.candidate.times_us), fmt_sig3),
            o.candidate_judgement
        );
        if let Some(vs) = &o.vs_control {
            let _ = write!(story, "; against the control: {vs}");
        }
        if o.stale_golden {
            story.push_str("; goldens stale, run --update-goldens");
        }
        let status = if o.fails(&run.policy) {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            let mut reasons = Vec::new();
            if o.candidate_judgement.fails(&run.policy) {
                reasons.push(o.candidate_judgement.to_string());
            }
            if let Some(vs) = o.vs_control.as_ref().filter(|j| j.fails(&run.policy)) {
                reasons.push(format!("against the control: {vs}"));
            }
            s.set_message(reasons.join("; "));
            s.set_type(o.candidate_judgement.name());
            s
        } else {
            TestCaseStatus::success()
        };
        let mut tc = TestCase::new(format!("M={}", o.key.m), status);
        tc.set_classname(format!("{}/{}", o.key.provider, o.key.shape));
        tc.set_system_out(story);
        suite.add_test_case(tc);
    }
    report.add_test_suite(suite);
    Ok(report.to_string()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::judge::judge_case;
    use crate::perf::judge::tests::measured;
    use crate::perf::peers::PeerTimes;
    use crate::perf::update::golden_entry;

    #[test]
    fn numbers_read_as_an_engineer_writes_them() {
        assert_eq!(fmt_sig3(33.612), "33.6");
        assert_eq!(fmt_sig3(1372.4), "1370");
        assert_eq!(fmt_sig3(0.21345), "0.213");
        assert_eq!(fmt_sig3(9.996), "10.0");
        assert_eq!(fmt_sig3(f64::NAN), "—");
        assert_eq!(fmt_delta(0.2), "+20.0 %");
        assert_eq!(fmt_delta(-0.0312), "-3.1 %");
        assert_eq!(fmt_p(0.000_182_67), "1.8e-4");
        assert_eq!(fmt_p(0.245), "0.245");
        assert_eq!(fmt_p(f64::NAN), "n/a");
    }

    /// Four M of one shape against goldens at 30 µs: M=1 20 % slower, M=2 within band, M=3 a
    /// different kernel, M=4 without a golden; the control runs everything at the golden's speed.
    fn run() -> PerfRun {
        let policy = JudgePolicy::default();
        let goldens = crate::perf::judge::tests::goldens(
            (1..=3)
                .map(|m| {
                    golden_entry(&measured(m, "skinny:w4a16_skinny_f16", 30.0, 0.02, 15)).unwrap()
                })
                .collect(),
            None,
        );
        let sides = [
            (1, "skinny:w4a16_skinny_f16", 36.0),
            (2, "skinny:w4a16_skinny_f16", 30.5),
            (3, "fused:w4a16_fused_f16", 30.0),
            (4, "skinny:w4a16_skinny_f16", 30.0),
        ];
        let mut outcomes: Vec<CaseOutcome> = sides
            .iter()
            .map(|&(m, kernel, t)| {
                judge_case(
                    measured(m, kernel, t, 0.02, 15),
                    Some(measured(m, "skinny:w4a16_skinny_f16", 30.0, 0.02, 15)),
                    Some(&goldens),
                    &policy,
                )
            })
            .collect();
        outcomes[0].peers = Some(PeerTimes {
            torch_int4_us: Some(20.3),
            dense_fp16_us: Some(34.2),
            skipped: Vec::new(),
        });
        PerfRun {
            target: "sm_90".into(),
            device: "NVIDIA H200".into(),
            suite: "field".into(),
            policy,
            plan: PerfPlan::default(),
            candidate: "embedded kernels".into(),
            control: Some("../base/kernels".into()),
            outcomes,
            not_timed: vec![("field/moe/x".into(), "MoE: timed by bench --moe".into())],
            peers_note: None,
        }
    }

    #[test]
    fn write_reports_writes_all_four_readable_files() {
        let dir = std::env::temp_dir().join(format!("w4a16-perf-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let run = run();
        let files = write_reports(&run, &dir).unwrap();

        let md = std::fs::read_to_string(&files.summary_md).unwrap();
        assert!(md.starts_with("# Perf `sm_90`: FAIL, 3 of 4 cases"), "{md}");
        assert!(
            md.contains("| candidate vs goldens | 1 | 0 | 1 | 0 | 1 | 1 | 0 |"),
            "{md}"
        );
        assert!(
            md.contains("| control vs goldens | 3 | 0 | 0 | 0 | 0 | 1 | — |"),
            "{md}"
        );
        assert!(
            md.contains("| candidate vs control | 3 | 0 | 1 | 0 | 0 | 0 | — |"),
            "{md}"
        );
        // The worst case is named with its label, time, ratio, golden ratio and shift.
        let worst = md
            .split("## Worst cases")
            .nth(1)
            .unwrap()
            .lines()
            .nth(4)
            .unwrap();
        assert!(
            worst.starts_with("| `hybrid-w4a16-zp-bf16/qwen3-8b.mlp_down/M=1` | `skinny:w4a16_skinny_f16` | 36.0 | 3.60 | 3.00 | +20.0 % |"),
            "{worst}"
        );
        assert!(
            md.contains("wrong kernel: ran fused:w4a16_fused_f16, golden skinny:w4a16_skinny_f16"),
            "{md}"
        );
        assert!(md.contains("| 20.3 | 34.2 |"), "peers columns: {md}");
        assert!(md.contains("](plot.svg)"));
        assert!(
            md.contains("1 case not timed</summary>\n\n- `field/moe/x`: MoE: timed by bench --moe"),
            "{md}"
        );

        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&files.json).unwrap()).unwrap();
        assert_eq!(json["counts"]["failing"], 3);
        assert_eq!(
            json["outcomes"][0]["candidate_judgement"]["kind"],
            "regression"
        );
        assert_eq!(json["target"], "sm_90");

        let xml = std::fs::read_to_string(&files.junit).unwrap();
        assert_eq!(xml.matches("<testcase ").count(), 4);
        assert_eq!(xml.matches("<failure").count(), 3, "{xml}");
        assert!(
            xml.contains("classname=\"hybrid-w4a16-zp-bf16/qwen3-8b.mlp_down\""),
            "{xml}"
        );
        assert!(xml.contains("message=\"regression +20.0 %"), "{xml}");

        let svg = std::fs::read_to_string(&files.plot).unwrap();
        assert!(
            svg.contains("<svg") && svg.contains("qwen3-8b.mlp_down"),
            "{svg}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_clean_run_says_pass_and_has_no_failures() {
        let mut run = run();
        run.outcomes.truncate(2);
        run.outcomes.remove(0);
        run.control = None;
        for o in &mut run.outcomes {
            (
                o.control,
                o.control_judgement,
                o.vs_control,
                o.cand_over_control,
            ) = (None, None, None, None);
        }
        let md = summary_markdown(&run);
        assert!(md.starts_with("# Perf `sm_90`: pass"), "{md}");
        assert!(md.contains("No case is out of band."));
        assert!(!md.contains("control vs goldens"));
        assert!(!junit(&run).unwrap().contains("<failure"));
    }
}
