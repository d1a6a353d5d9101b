//! One case's share of a sanitized worker's output, turned into the case's sanitizer verdicts.

use super::findings::{Finding, parse_findings};
use super::repro_command;
use crate::runner::verdict::{Check, Outcome, SanitizeScope, SanitizerTool, Verdict};
use std::collections::BTreeSet;
use w4a16_kernels::{KernelId, RunTarget};

/// One case's share of a sanitized worker's output: the kernels its verdicts show it launched
/// and the report lines printed while it was the last case announced.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseWindow {
    pub case_id: String,
    pub launched: BTreeSet<KernelId>,
    pub lines: Vec<String>,
}

impl CaseWindow {
    pub fn new(case_id: impl Into<String>) -> Self {
        CaseWindow {
            case_id: case_id.into(),
            launched: BTreeSet::new(),
            lines: Vec::new(),
        }
    }

    /// Notes the kernels behind a verdict whose check is a launched path (`skinny`,
    /// `dequant+dense`, the `dequant` check): skipped and refused paths launched nothing, and
    /// the vendor-BLAS `dense` is outside the sanitizer's kernel filter.
    pub fn note(&mut self, v: &Verdict) {
        if matches!(v.outcome, Outcome::Skip | Outcome::Refused) {
            return;
        }
        for &k in v.check.launched_kernels() {
            if k != KernelId::Dense {
                self.launched.insert(k);
            }
        }
    }

    /// The case's sanitizer verdicts: one `sanitize:<tool>:<kernel>` per launched kernel (FAIL
    /// with the first report against it, else pass), and a `sanitize:<tool>` FAIL for reports
    /// that name no launched kernel (a crash, a hardware exception, the tool's own error).
    pub fn verdicts(&self, tool: SanitizerTool, target: RunTarget) -> Vec<Verdict> {
        let findings = parse_findings(&self.lines);
        let repro = repro_command(&self.case_id, target, tool);
        let fail = |check: Check, f: &Finding, n: usize| {
            Verdict::new(&self.case_id, check, Outcome::Fail).detail(format!(
                "{}{}; repro: {repro}",
                f.summary(),
                if n > 1 {
                    format!(" (first of {n} reports)")
                } else {
                    String::new()
                }
            ))
        };
        let mut out = Vec::new();
        for &k in &self.launched {
            let check = tool.check_of(SanitizeScope::Kernel(k));
            let against: Vec<&Finding> = findings
                .iter()
                .filter(|f| f.kernel_id() == Some(k))
                .collect();
            match against.first() {
                Some(f) => out.push(fail(check, f, against.len())),
                None => out.push(
                    Verdict::new(&self.case_id, check, Outcome::Pass)
                        .detail(format!("no {tool} report against {}", k.name())),
                ),
            }
        }
        let stray: Vec<&Finding> = findings
            .iter()
            .filter(|f| f.kernel_id().is_none_or(|k| !self.launched.contains(&k)))
            .collect();
        if let Some(f) = stray.first() {
            out.push(fail(tool.check(), f, stray.len()));
        }
        out
    }
}

/// A worker process's `ERROR SUMMARY` counted errors that no case's window held: the run cannot
/// claim those cases clean.
pub fn unattributed_errors(
    tool: SanitizerTool,
    reported: usize,
    attributed: usize,
    cases: &[String],
) -> Option<Verdict> {
    (reported > 0 && attributed == 0).then(|| {
        Verdict::new(
            format!("sanitize/{tool}/worker"),
            tool.check_of(SanitizeScope::WorkerSummary),
            Outcome::Fail,
        )
        .detail(format!(
            "compute-sanitizer counted {reported} errors in a worker that ran {} cases ({}…), but printed none inside a case",
            cases.len(),
            cases.first().map_or("", String::as_str)
        ))
    })
}
