//! The report of a counted perf run: `counters-summary.md` (counts, every moved counter with its
//! delta and kernel label, the cases left out, a model-time table labelled as a model) and
//! `counters.json`, through the one report writer ([`crate::report`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::LeftOut;
use super::judge::{CountJudgement, CountOutcome};
use crate::report::{FileError, ReportDir, ReportFiles, json, markdown::Table};

/// The files a counted perf report owns in its folder.
pub const FILES: [&str; 2] = ["counters-summary.md", "counters.json"];

/// Everything one counted run produced.
#[derive(Clone, Debug, Serialize)]
pub struct CountRun {
    pub target: String,
    pub device: String,
    pub suite: String,
    pub max_macs: u64,
    pub candidate: String,
    pub control: Option<String>,
    pub outcomes: Vec<CountOutcome>,
    pub left_out: Vec<LeftOut>,
    /// (case id, why it is not counted: MoE, same key, no kernel).
    pub not_counted: Vec<(String, String)>,
}

impl CountRun {
    pub fn failing(&self) -> usize {
        self.outcomes.iter().filter(|o| o.fails()).count()
    }

    /// Per judgement name: how many cases of the candidate against the goldens.
    pub fn counts(&self) -> Vec<(&'static str, usize)> {
        let mut out: Vec<(&'static str, usize)> = ["same", "moved", "wrong kernel", "no golden"]
            .iter()
            .map(|n| (*n, 0))
            .collect();
        for o in &self.outcomes {
            let name = o.candidate_judgement.name();
            if let Some(slot) = out.iter_mut().find(|(n, _)| *n == name) {
                slot.1 += 1;
            }
        }
        out.push((
            "stale golden",
            self.outcomes.iter().filter(|o| o.stale_golden).count(),
        ));
        out
    }
}

/// The one-line text of a judgement, with every moved counter.
pub fn describe(j: &CountJudgement) -> String {
    match j {
        CountJudgement::Moved { moves } => {
            let list: Vec<String> = moves.iter().map(ToString::to_string).collect();
            format!("moved: {}", list.join("; "))
        }
        CountJudgement::WrongKernel { golden, ran } => {
            format!("wrong kernel: ran {ran}, golden {golden}")
        }
        other => other.name().to_string(),
    }
}

/// `counters-summary.md`.
pub fn summary_markdown(run: &CountRun) -> String {
    let mut md = format!(
        "# Perf counters: {} on {}\n\nSuite `{}`, MAC budget {} (2^{:.1}); candidate: {}{}.\n\
         Counters are judged exactly against `perf/{}.counters.json`; the model time is a **model** \
         (docs/perf-counters.md), never judged.\n\n",
        run.target,
        run.device,
        run.suite,
        run.max_macs,
        (run.max_macs as f64).log2(),
        run.candidate,
        run.control
            .as_ref()
            .map_or(String::new(), |c| format!("; control: {c}")),
        run.target,
    );
    let mut counts = Table::new(["judgement", "cases"]);
    for (name, n) in run.counts() {
        counts.row([name.to_string(), n.to_string()]);
    }
    let _ = writeln!(
        md,
        "{}\n{} of {} counted cases fail; {} left out by the MAC budget; {} not counted.\n",
        counts.render(),
        run.failing(),
        run.outcomes.len(),
        run.left_out.len(),
        run.not_counted.len()
    );
    let mut cases = Table::new([
        "case",
        "kernel",
        "vs golden",
        "vs control",
        "model µs (model)",
    ]);
    for o in &run.outcomes {
        cases.row([
            o.key.to_string(),
            o.candidate.kernel.to_string(),
            describe(&o.candidate_judgement),
            o.vs_control.as_ref().map_or("-".into(), describe),
            o.candidate
                .model_us
                .map_or("-".into(), |t| format!("{t:.2}")),
        ]);
    }
    let _ = writeln!(md, "## Cases\n\n{}", cases.render());
    if !run.left_out.is_empty() {
        let mut left = Table::new(["case", "MACs"]);
        for l in &run.left_out {
            left.row([l.case_id.clone(), l.macs.to_string()]);
        }
        let _ = writeln!(
            md,
            "## Left out by the MAC budget ({})\n\n{}",
            run.left_out.len(),
            left.render()
        );
    }
    md
}

/// Writes the report into `dir`; returns the summary's path.
pub fn write_reports(run: &CountRun, dir: &Path) -> Result<PathBuf, FileError> {
    let folder = ReportDir::open(dir, &FILES)?;
    let [summary, data] = FILES;
    folder.write(
        &ReportFiles::new()
            .with(summary, summary_markdown(run))
            .with(data, json::pretty(run, "counters report")),
    )?;
    Ok(dir.join(summary))
}
