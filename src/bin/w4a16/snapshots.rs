//! `w4a16 snapshots`: a finished run's report.json against the verdict snapshots. Its verdicts
//! must come from a GPU run: a skipped check would be recorded as one.

use super::args;
use super::exit::{CliError, Status};
use std::path::{Path, PathBuf};
use w4a16_cases::CaseSet;
use w4a16_device::DeviceKind;
use w4a16_harness::report::FileError;
use w4a16_harness::runner::budget::CaseBudget;
use w4a16_harness::runner::cli_run::{self, CasesError, load_with_dir};
use w4a16_harness::runner::snapshot::{self, LeftOut, SnapshotFile, SnapshotMode};
use w4a16_harness::runner::verdict::SanitizerTool;
use w4a16_harness::runner::{Outcome, Verdict};
use w4a16_kernels::RunTarget;

/// `w4a16 snapshots`' options.
#[derive(clap::Args)]
pub struct SnapshotsArgs {
    /// The run's report (its target and verdicts).
    #[arg(long, default_value = "target/w4a16-report/report.json")]
    report: PathBuf,
    /// Record the snapshots that differ instead of comparing (writes `.snap` files).
    #[arg(long)]
    update: bool,
    /// Folder of the verdict snapshots (default: `snapshots/` beside the cases folder).
    #[arg(long, value_name = "DIR")]
    snapshots: Option<PathBuf>,
    /// The run was under compute-sanitizer with this tool (its snapshots are its own).
    #[arg(long, value_parser = args::named::<SanitizerTool>())]
    sanitize: Option<SanitizerTool>,
}

/// What a run's report.json must hold for its snapshots.
const EXPECTED: &str = "a run's report.json (`target` and `verdicts`)";

/// A report.json that is not a finished GPU run's.
#[derive(Debug, thiserror::Error)]
pub enum RunReportError {
    #[error("{}: expected {EXPECTED}: {why}", path.display())]
    NotARun { path: PathBuf, why: String },
    #[error("{}: target {target:?} is none of {}", path.display(), RunTarget::known_names().join(", "))]
    UnknownTarget { path: PathBuf, target: String },
    #[error(
        "{}: {count} skipped checks (e.g. {case} [{check}]: {detail}): snapshots record runs on the target's GPU",
        path.display()
    )]
    Skipped {
        path: PathBuf,
        count: usize,
        case: String,
        check: String,
        detail: String,
    },
    #[error("{}: `device` {device}: expected cuda, rocm, emulator or simulated: {why}", path.display())]
    UnknownDevice {
        path: PathBuf,
        device: String,
        why: String,
    },
    #[error("{0} (needed for the snapshot folder or for the cases a budgeted run left out)")]
    CasesNeeded(CasesError),
}

/// The parts of a run's report.json the snapshots read.
struct RunReport {
    target: String,
    run_target: RunTarget,
    device: Option<DeviceKind>,
    verdicts: Vec<Verdict>,
}

pub fn snapshots(args: SnapshotsArgs, cases: Option<PathBuf>) -> Result<Status, CliError> {
    let mode = match args.update {
        true => SnapshotMode::Update,
        false => SnapshotMode::Check,
    };
    let report = read_run_report(&args.report)?;
    let target = &report.target;
    // The case files are read only where they are needed: for the snapshot folder beside them,
    // and for the cases a budgeted run (an emulator's) left out.
    let budgeted = CaseBudget::of(report.run_target, report.device, None)
        .interpreter()
        .is_some();
    let needed = RunReportError::CasesNeeded;
    let (dir, set): (PathBuf, Option<CaseSet>) = match args.snapshots {
        Some(dir) if !budgeted => (dir, None),
        Some(dir) => (dir, Some(load_with_dir(cases).map_err(needed)?.1)),
        None => {
            let (cases_dir, set) = load_with_dir(cases).map_err(needed)?;
            (snapshot::snapshot_dir(None, &cases_dir), Some(set))
        }
    };
    // One snapshot per suite of the run, as `run` writes them (run-wide checks have none).
    let suites = report
        .verdicts
        .iter()
        .filter(|v| !v.check.run_wide())
        .map(|v| v.case_id.split('/').next().unwrap_or_default());
    let files = suites.map(|s| {
        let left_out = set.as_ref().and_then(|set| {
            let budget = CaseBudget::of(report.run_target, report.device, set.suite(s));
            LeftOut::of(budget, s, set.cases())
        });
        SnapshotFile::new(s, target, args.sanitize)
            .recorded_by(report.device)
            .left_out(left_out)
    });
    let differing =
        cli_run::snapshots(&dir, mode, files, &report.verdicts).map_err(cli_run::RunError::from)?;
    if differing.is_empty() {
        println!(
            "verdict snapshots of {target}: {}",
            match mode {
                SnapshotMode::Check => "all unchanged",
                SnapshotMode::Update => "recorded",
            }
        );
        Ok(Status::Passed)
    } else {
        println!(
            "SNAPSHOTS DIFFER on {target}: {} (review the .snap.new files with `cargo insta review`, or record with --update)",
            differing.join(", ")
        );
        Ok(Status::Failed)
    }
}

/// A run's report.json: its target, device and verdicts, none of them skipped.
fn read_run_report(path: &Path) -> Result<RunReport, CliError> {
    let text = FileError::at(path, std::fs::read_to_string(path))?;
    let not_a_run = |why: String| RunReportError::NotARun {
        path: path.to_path_buf(),
        why,
    };
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| not_a_run(e.to_string()))?;
    let target = json["target"]
        .as_str()
        .ok_or_else(|| not_a_run("no `target`".into()))?
        .to_string();
    let Some(run_target) = RunTarget::parse(&target) else {
        return Err(RunReportError::UnknownTarget {
            path: path.to_path_buf(),
            target,
        }
        .into());
    };
    let verdicts: Vec<Verdict> = serde_json::from_value(json["verdicts"].clone())
        .map_err(|e| not_a_run(format!("`verdicts`: {e}")))?;
    let mut skips = verdicts.iter().filter(|v| v.outcome == Outcome::Skip);
    if let Some(skip) = skips.next() {
        return Err(RunReportError::Skipped {
            path: path.to_path_buf(),
            count: 1 + skips.count(),
            case: skip.case_id.clone(),
            check: skip.check.to_string(),
            detail: skip.detail.clone(),
        }
        .into());
    }
    let device =
        match json.get("device") {
            None => None,
            Some(d) => Some(serde_json::from_value(d.clone()).map_err(|e| {
                RunReportError::UnknownDevice {
                    path: path.to_path_buf(),
                    device: d.to_string(),
                    why: e.to_string(),
                }
            })?),
        };
    Ok(RunReport {
        target,
        run_target,
        device,
        verdicts,
    })
}
