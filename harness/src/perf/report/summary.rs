//! `summary.md`: the run's facts, the counts table, the worst cases, the cases not judged, the
//! plot, and every case collapsed — one function per section.

use super::format::{fmt_delta, fmt_p, fmt_sig3, opt, plural};
use super::{Counts, LIST_ROWS, PerfRun, RunCounts};
use crate::perf::judge::{CaseOutcome, JudgePolicy, Judgement, ratio_samples};
use crate::perf::key::ControlKind;
use crate::perf::stats::median;
use crate::report::markdown::{Table, escape as cell};
use std::fmt::Write as _;

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

/// The whole `summary.md`.
pub(super) fn summary_markdown(run: &PerfRun) -> String {
    let counts = RunCounts::of(run);
    let mut md = String::new();
    facts(&mut md, run, &counts);
    counts_section(&mut md, &counts);
    worst_cases(&mut md, run);
    not_judged(&mut md, run);
    md.push_str("\n## Plot\n\n[![ratio against the golden per shape and M](plot.svg)](plot.svg)\n");
    if let Some(note) = &run.peers_note {
        let _ = writeln!(md, "\nPeers: {note}");
    }
    all_cases(&mut md, run);
    not_timed(&mut md, run);
    md
}

/// The title with the verdict and the key/value table of what was run and how.
fn facts(md: &mut String, run: &PerfRun, counts: &RunCounts) {
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
    let mut t = Table::new(["", ""]);
    t.row(["target".into(), format!("`{}`", run.target)]);
    t.row(["device".into(), cell(&run.device)]);
    t.row([
        "suite".into(),
        format!(
            "`{}`: {} cases timed, {} not timed",
            run.suite,
            run.outcomes.len(),
            run.not_timed.len()
        ),
    ]);
    t.row([
        "plan".into(),
        format!(
            "{} launches a side, {} warm-up, inputs (and the controls') rotated over at least {} copies spanning {} MiB, so every read is cold",
            run.plan.reps,
            run.plan.warmup,
            run.plan.copies,
            crate::perf::measure::PerfPlan::COLD_FOOTPRINT_BYTES >> 20
        ),
    ]);
    t.row(["policy".into(), policy_line(&run.policy)]);
    t.row(["candidate".into(), cell(&run.candidate)]);
    t.row([
        "control".into(),
        cell(run.control.as_deref().unwrap_or("none")),
    ]);
    md.push_str(&t.render());
}

/// The counts table of the three comparisons, and the stale-goldens note.
fn counts_section(md: &mut String, counts: &RunCounts) {
    md.push_str(
        "\nTimes are per-launch medians in µs; ratio = time / median of the control measured \
         beside it (copy ceiling for M ≤ 5, vendor BLAS above); Δ = ratio / golden ratio − 1, \
         + is slower.\n\n## Counts\n\n",
    );
    let mut t = Table::new([
        "",
        "within band",
        "improvement",
        "regression",
        "too noisy",
        "wrong kernel",
        "no golden",
        "stale golden",
    ]);
    let row = |t: &mut Table, title: &str, c: &Counts, stale: &str| {
        t.row([
            title.to_string(),
            c.within_band.to_string(),
            c.improvement.to_string(),
            c.regression.to_string(),
            c.too_noisy.to_string(),
            c.wrong_kernel.to_string(),
            c.no_golden.to_string(),
            stale.to_string(),
        ]);
    };
    row(
        &mut t,
        "candidate vs goldens",
        &counts.candidate_vs_goldens,
        &counts.stale_golden.to_string(),
    );
    if let (Some(ctrl), Some(vs)) = (&counts.control_vs_goldens, &counts.candidate_vs_control) {
        row(&mut t, "control vs goldens", ctrl, "—");
        row(&mut t, "candidate vs control", vs, "—");
    }
    md.push_str(&t.render());
    if counts.stale_golden > 0 {
        let _ = writeln!(
            md,
            "\n{} moved alike on both sides and the candidate is within band of the \
             control: goldens stale, run `w4a16 perf --update-goldens`. They do not fail the run.",
            plural(counts.stale_golden, "case")
        );
    }
}

/// `… and N more` under a list cut at [`LIST_ROWS`].
fn more_rows(md: &mut String, shown_of: usize) {
    if shown_of > LIST_ROWS {
        let _ = writeln!(
            md,
            "\n… and {} more in the per-case table.",
            shown_of - LIST_ROWS
        );
    }
}

/// The out-of-band cases, largest |Δ| first.
fn worst_cases(md: &mut String, run: &PerfRun) {
    let with_control = run.control.is_some();
    let mut worst: Vec<(&CaseOutcome, f64)> = run
        .outcomes
        .iter()
        .filter_map(|o| worst_shift(o).map(|d| (o, d)))
        .collect();
    worst.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.key.cmp(&b.0.key)));
    md.push_str("\n## Worst cases (out of band, by |Δ|)\n\n");
    if worst.is_empty() {
        md.push_str("No case is out of band.\n");
        return;
    }
    let mut t = Table::new([
        "case",
        "kernel",
        "time µs",
        "ratio",
        "golden ratio",
        "Δ",
        "p",
        "verdict",
        "kernel time Δ",
        "control time Δ",
    ]);
    if with_control {
        t.column("cand/control");
        t.column("vs control");
    }
    for (o, _) in worst.iter().take(LIST_ROWS) {
        let (ratio, golden) = ratios(o);
        let j = &o.candidate_judgement;
        let mut cells = vec![
            format!("`{}`", o.key),
            format!("`{}`", cell(&o.candidate.kernel.0)),
            opt(median(&o.candidate.times_us), fmt_sig3),
            opt(ratio, fmt_sig3),
            opt(golden, fmt_sig3),
            opt(j.delta(), fmt_delta),
            opt(j.p(), fmt_p),
            format!(
                "{}{}",
                j.name(),
                if o.stale_golden {
                    " (stale golden)"
                } else {
                    ""
                }
            ),
            opt(o.time_shift.map(|s| s.kernel), fmt_delta),
            opt(o.time_shift.map(|s| s.control), fmt_delta),
        ];
        if with_control {
            cells.push(opt(o.cand_over_control, fmt_delta));
            cells.push(
                o.vs_control
                    .as_ref()
                    .map_or("—".into(), |j| cell(&j.to_string())),
            );
        }
        t.row(cells);
    }
    md.push_str(&t.render());
    more_rows(md, worst.len());
    let band = run.policy.band;
    let alone = worst
        .iter()
        .filter(|(o, _)| o.time_shift.is_some_and(|s| s.control_alone(band)))
        .count();
    if alone > 0 {
        let _ = writeln!(
            md,
            "\n**{alone} of these {} out-of-band cases moved with the kernel's own time within \
             ±{} of its golden and the control's beyond it**: the control did not reproduce \
             (kernel time Δ, control time Δ); the verdicts stand, read them as the control's \
             spread before looking for a kernel change.",
            worst.len(),
            fmt_delta(band).trim_start_matches('+')
        );
    }
}

/// The cases without a shift to judge: wrong kernel, too noisy, no golden.
fn not_judged(md: &mut String, run: &PerfRun) {
    let unjudged: Vec<&CaseOutcome> = run
        .outcomes
        .iter()
        .filter(|o| o.candidate_judgement.delta().is_none())
        .collect();
    if unjudged.is_empty() {
        return;
    }
    md.push_str("\n## Not judged (wrong kernel, too noisy, no golden)\n\n");
    let mut t = Table::new(["case", "kernel", "verdict"]);
    for o in unjudged.iter().take(LIST_ROWS) {
        t.row([
            format!("`{}`", o.key),
            format!("`{}`", cell(&o.candidate.kernel.0)),
            cell(&o.candidate_judgement.to_string()),
        ]);
    }
    md.push_str(&t.render());
    more_rows(md, unjudged.len());
}

/// Every case, collapsed, with the control build's and the peers' columns where they ran.
fn all_cases(md: &mut String, run: &PerfRun) {
    let with_control = run.control.is_some();
    let with_peers = run.outcomes.iter().any(|o| o.peers.is_some());
    let _ = writeln!(
        md,
        "\n<details><summary>All {} cases</summary>\n",
        run.outcomes.len()
    );
    let mut t = Table::new([
        "case",
        "kernel",
        "time µs",
        "throughput",
        "ratio to",
        "its µs",
        "ratio",
        "golden ratio",
        "Δ",
        "p",
        "verdict",
    ]);
    if with_control {
        for title in [
            "control build µs",
            "control build verdict",
            "cand/control",
            "vs control",
        ] {
            t.column(title);
        }
    }
    if with_peers {
        t.column("torch int4 µs");
        t.column("dense fp16 µs");
    }
    for o in &run.outcomes {
        let (ratio, golden) = ratios(o);
        let j = &o.candidate_judgement;
        let mut cells = vec![
            format!("`{}`", o.key),
            format!("`{}`", cell(&o.candidate.kernel.0)),
            opt(median(&o.candidate.times_us), fmt_sig3),
            throughput(o),
            o.candidate.control.name().to_string(),
            opt(median(&o.candidate.control_us), fmt_sig3),
            opt(ratio, fmt_sig3),
            opt(golden, fmt_sig3),
            opt(j.delta(), fmt_delta),
            opt(j.p(), fmt_p),
            j.name().to_string(),
        ];
        if with_control {
            cells.extend([
                opt(
                    o.control.as_ref().and_then(|c| median(&c.times_us)),
                    fmt_sig3,
                ),
                o.control_judgement
                    .as_ref()
                    .map_or("—", Judgement::name)
                    .to_string(),
                opt(o.cand_over_control, fmt_delta),
                o.vs_control
                    .as_ref()
                    .map_or("—", Judgement::name)
                    .to_string(),
            ]);
        }
        if with_peers {
            let peers = o.peers.as_ref();
            cells.extend([
                opt(peers.and_then(|p| p.torch_int4_us), fmt_sig3),
                opt(peers.and_then(|p| p.dense_fp16_us), fmt_sig3),
            ]);
        }
        t.row(cells);
    }
    md.push_str(&t.render());
    md.push_str("\n</details>\n");
}

/// The suite's cases perf does not time, with why.
fn not_timed(md: &mut String, run: &PerfRun) {
    if run.not_timed.is_empty() {
        return;
    }
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
