//! One suite run against one source tree, in a subprocess (`w4a16 run --fail-fast`), read back
//! from the report folder it leaves as a [`SuiteOutcome`].

use super::{SuiteOutcome, SuiteRun};
use crate::runner::verdict::SanitizerTool;
use crate::runner::{Outcome, Verdict};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How to run one suite in a subprocess.
#[derive(Clone, Debug)]
pub struct SuiteRunner {
    /// The `w4a16` executable.
    pub exe: PathBuf,
    /// `--cases` for the subprocess, when not found from its working directory.
    pub cases_dir: Option<PathBuf>,
    pub target: String,
    pub jobs: usize,
    pub case_timeout: Duration,
}

/// The per-case watchdog of a run under compute-sanitizer at least: instrumented kernels run
/// 10-100x slower (`scripts/gpu-job.sh`'s sanitizer steps give a case as long).
pub const SANITIZED_CASE_TIMEOUT: Duration = Duration::from_secs(600);

/// Why a suite run's report.json could not be read (the suite outcome is then an error).
#[derive(Debug, thiserror::Error)]
enum ReadReportError {
    #[error(transparent)]
    Read(#[from] std::io::Error),
    /// Not the JSON report `w4a16 run` writes (a `verdicts` array).
    #[error(transparent)]
    Parse(#[from] serde_json::Error),
}

#[derive(Deserialize)]
struct ReportVerdicts {
    verdicts: Vec<Verdict>,
}

/// Reads what a `run --fail-fast` left in `report_dir` (and its exit status) as a suite outcome.
pub fn suite_outcome(report_dir: &Path, exit_ok: bool, log_tail: &str) -> SuiteOutcome {
    let path = report_dir.join("report.json");
    let report: ReportVerdicts = match std::fs::read_to_string(&path)
        .map_err(ReadReportError::from)
        .and_then(|t| Ok(serde_json::from_str(&t)?))
    {
        Ok(r) => r,
        Err(e) => {
            return SuiteOutcome::Error {
                reason: format!("{}: {e}; log: {log_tail}", path.display()),
            };
        }
    };
    if let Some(v) = report.verdicts.iter().find(|v| v.outcome.is_failure()) {
        if v.detail.starts_with("compiling ") && v.detail.contains(" failed: ") {
            return SuiteOutcome::CompileError {
                detail: v.detail.clone(),
            };
        }
        return SuiteOutcome::Killed {
            case_id: v.case_id.clone(),
            check: v.check.to_string(),
            outcome: v.outcome,
            detail: v.detail.clone(),
        };
    }
    if !exit_ok {
        return SuiteOutcome::Error {
            reason: format!("the run failed without a failing verdict; log: {log_tail}"),
        };
    }
    let skipped = report
        .verdicts
        .iter()
        .filter(|v| v.outcome == Outcome::Skip)
        .count();
    SuiteOutcome::Passed {
        checks: report.verdicts.len(),
        skipped,
    }
}

impl SuiteRunner {
    /// `w4a16 run --suite <suite> --kernel-sources <tree> --fail-fast` into `work/<suite>/`;
    /// with `sanitize`, under compute-sanitizer (`--sanitize TOOL`: exact-size allocations) into
    /// `work/<suite>.<tool>/`.
    pub fn run_suite(
        &self,
        suite: &str,
        tree: &Path,
        work: &Path,
        sanitize: Option<SanitizerTool>,
    ) -> SuiteRun {
        let start = Instant::now();
        let report_dir = match sanitize {
            Some(tool) => work.join(format!("{suite}.{tool}")),
            None => work.join(suite),
        };
        let case_timeout = match sanitize {
            Some(_) => self.case_timeout.max(SANITIZED_CASE_TIMEOUT),
            None => self.case_timeout,
        };
        let _ = std::fs::remove_dir_all(&report_dir);
        let _ = std::fs::create_dir_all(&report_dir);
        let log_path = report_dir.join("run.log");
        let mut cmd = Command::new(&self.exe);
        if let Some(c) = &self.cases_dir {
            cmd.arg("--cases").arg(c);
        }
        cmd.args([
            "run",
            "--suite",
            suite,
            "--target",
            &self.target,
            "--fail-fast",
        ])
        .arg("--jobs")
        .arg(self.jobs.to_string())
        .arg("--case-timeout")
        .arg(case_timeout.as_secs().max(1).to_string())
        .arg("--kernel-sources")
        .arg(tree)
        .arg("--report-dir")
        .arg(&report_dir);
        if let Some(tool) = sanitize {
            cmd.arg("--sanitize").arg(tool.to_string());
        }
        let outcome = match std::fs::File::create(&log_path).and_then(|log| {
            let err = log.try_clone()?;
            cmd.stdout(log).stderr(err).status()
        }) {
            Ok(status) => {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(3).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                suite_outcome(&report_dir, status.success(), &tail.join(" | "))
            }
            Err(e) => SuiteOutcome::Error {
                reason: format!("starting {}: {e}", self.exe.display()),
            },
        };
        SuiteRun {
            suite: suite.to_owned(),
            sanitize,
            outcome,
            wall_s: start.elapsed().as_secs_f64(),
        }
    }

    /// The suites in order against `tree` (each under `sanitize` when given); stops after the
    /// first one that does not pass unless `each_suite`.
    pub fn run_suites(
        &self,
        suites: &[String],
        tree: &Path,
        work: &Path,
        each_suite: bool,
        sanitize: Option<SanitizerTool>,
    ) -> Vec<SuiteRun> {
        let mut runs = Vec::new();
        for s in suites {
            let r = self.run_suite(s, tree, work, sanitize);
            let passed = matches!(r.outcome, SuiteOutcome::Passed { .. });
            let killed = matches!(r.outcome, SuiteOutcome::Killed { .. });
            runs.push(r);
            // Go on after a pass, or after a kill when every suite is wanted.
            let go_on = passed || (each_suite && killed);
            if !go_on {
                break;
            }
        }
        runs
    }
}
