//! `w4a16 coverage`: which basic blocks of a target's code objects the suites execute on the
//! ISA emulator, written as `coverage/<gfx>.json` (the record) and `coverage/<gfx>.md` and
//! judged against `cases/exceptions/coverage.toml` (docs/block-coverage.md).

use super::args;
use super::exit::{CliError, Status};
use std::path::{Path, PathBuf};
use w4a16_cases::coverage_exceptions::{self, Uncovered};
use w4a16_cases::{Case, CaseFileError, Date};
use w4a16_harness::block_coverage::{
    self, BlockCoverageError, ISA_EMULATOR_SUITES, Reading, Record, Share, SuiteCoverage, markdown,
};
use w4a16_harness::report::{FileError, write_atomic};
use w4a16_harness::runner::budget::RunBudget;
use w4a16_harness::runner::cli_run::{check_suites, choose, load_with_dir};
use w4a16_harness::runner::session::SessionOptions;
use w4a16_kernels::RunTarget;
use w4a16_kernels::target::Vendor;
use w4a16_select::config::KernelConfig;

/// `w4a16 coverage`'s options.
#[derive(clap::Args)]
pub struct CoverageArgs {
    /// The target whose code objects run: gfx1100, gfx1151 or gfx1201.
    #[arg(long, value_parser = args::run_target())]
    target: RunTarget,
    /// Suites to run (repeatable; default: the suites the ISA emulator runs in CI).
    #[arg(long = "suite")]
    suites: Vec<String>,
    /// Where `<gfx>.json` and `<gfx>.md` go.
    #[arg(long, default_value = block_coverage::RECORD_DIR)]
    out: PathBuf,
    /// Only case ids matching this glob: a subset, said in the report's header.
    #[arg(long)]
    filter: Option<String>,
    /// Run one case in this many of each suite (by position): a subset, said in the header.
    #[arg(long, default_value_t = 1)]
    every: usize,
    /// Write `<gfx>.md` again from the committed `<gfx>.json` and the reasons, running nothing.
    #[arg(long)]
    render_only: bool,
    /// Compile the kernels from the HIP sources in DIR (see `run --kernel-sources`).
    #[arg(long, value_name = "DIR")]
    kernel_sources: Option<PathBuf>,
}

/// Why `w4a16 coverage` could not do its job.
#[derive(Debug, thiserror::Error)]
pub enum CoverageCliError {
    #[error(transparent)]
    Measure(#[from] BlockCoverageError),
    #[error(transparent)]
    Exceptions(#[from] CaseFileError),
    #[error("{}: {detail}", path.display())]
    Record { path: PathBuf, detail: String },
}

pub fn coverage(
    args: CoverageArgs,
    cases: Option<PathBuf>,
    config: KernelConfig,
) -> Result<Status, CliError> {
    let target = args.target;
    if target.target.vendor() != Vendor::Amd || target.is_emulated() {
        return Err(CliError::NotAnEmulatorTarget { target });
    }
    if args.every == 0 {
        return Err(CliError::EveryZero);
    }
    let (dir, set) = load_with_dir(cases)?;
    let reasons = load_reasons(&dir)?;
    let gfx = target.target.name();
    let json = args.out.join(format!("{gfx}.json"));
    let md = args.out.join(format!("{gfx}.md"));
    let share_file = args.out.join(format!("{gfx}.ci-share.toml"));
    let (record, share) = if args.render_only {
        (read_record(&json)?, None)
    } else {
        match measure(&args, &dir, &set, config)? {
            Some((r, s)) => (r, Some(s)),
            None => return Ok(Status::Passed),
        }
    };
    FileError::at(&args.out, std::fs::create_dir_all(&args.out))?;
    let text = serde_json::to_string_pretty(&record)? + "\n";
    if let Some(share) = &share {
        write_atomic(&json, text.as_bytes())?;
        write_atomic(&share_file, share.to_toml().as_bytes())?;
        println!(
            "{gfx}: the CI share is {} of {} cases, {:.1} % of their emulator instructions; wrote {}",
            share.cases.len(),
            share.recorded_cases,
            100.0 * share.wave_instructions as f64 / share.recorded_wave_instructions.max(1) as f64,
            share_file.display()
        );
    }
    write_atomic(&md, markdown::render(&record, &reasons).as_bytes())?;
    println!(
        "{gfx}: {} of {} blocks executed ({:.1} %); wrote {} and {}",
        record.executed,
        record.blocks,
        record.percent(),
        json.display(),
        md.display()
    );
    let problems = block_coverage::judge(&record, &reasons, Date::today_utc());
    for p in &problems {
        eprintln!("w4a16 coverage: {p}");
    }
    Ok(Status::passed_if(problems.is_empty()))
}

fn load_reasons(dir: &Path) -> Result<Vec<Uncovered>, CliError> {
    let path = coverage_exceptions::exceptions_path(dir);
    if !path.is_file() {
        return Ok(Vec::new());
    }
    Ok(coverage_exceptions::load(&path).map_err(CoverageCliError::from)?)
}

fn read_record(path: &Path) -> Result<Record, CliError> {
    let bad = |detail: String| CoverageCliError::Record {
        path: path.to_path_buf(),
        detail,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    Ok(serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?)
}

/// Runs the suites on the recording emulator, reading each case's blocks on its own: the
/// record and the CI share chosen from it; `None` after a loud skip (no toolchain).
fn measure(
    args: &CoverageArgs,
    dir: &Path,
    set: &w4a16_cases::CaseSet,
    config: KernelConfig,
) -> Result<Option<(Record, Share)>, CliError> {
    let target = args.target;
    let suites: Vec<String> = if args.suites.is_empty() {
        ISA_EMULATOR_SUITES.map(String::from).to_vec()
    } else {
        args.suites.clone()
    };
    check_suites(set, &suites)?;
    let budget = RunBudget::of(target, Some(w4a16_device::DeviceKind::Emulator), set);
    let mut left_out = 0;
    let chosen: Vec<(String, Vec<&Case>)> = suites
        .iter()
        .map(|s| {
            let all = choose(set, std::slice::from_ref(s), args.filter.as_deref());
            let (kept, out): (Vec<&Case>, Vec<&Case>) =
                all.into_iter().partition(|c| budget.admits(c));
            left_out += out.len();
            let kept = kept.into_iter().step_by(args.every).collect();
            (s.clone(), kept)
        })
        .collect();
    let mut subset = Vec::new();
    if let Some(f) = &args.filter {
        subset.push(format!("only case ids matching `{f}`"));
    }
    if args.every > 1 {
        subset.push(format!(
            "one case in {} of each suite (`--every {}`)",
            args.every, args.every
        ));
    }
    if left_out > 0 {
        eprintln!(
            "w4a16: {left_out} cases above the ISA emulator's budget left out, as a run leaves them"
        );
    }
    let sources = args::kernel_sources("--kernel-sources", args.kernel_sources.as_deref())?;
    let request = w4a16_device::DeviceRequest::emulator(target.target)
        .with_sources(sources)
        .recording_blocks();
    let device = match w4a16_device::open(request) {
        Ok(d) => d,
        Err(skip) => {
            w4a16_harness::require::announce_skip(skip.requirement.name(), &skip.reason);
            return Ok(None);
        }
    };
    let mut opts = SessionOptions::new(dir.to_path_buf(), target);
    opts.config = config;
    opts.artifacts = None;
    let progress = |s: &SuiteCoverage| {
        eprintln!(
            "w4a16 coverage: {} {}: {} cases, {} checks ({} failing) in {:.1} s",
            target,
            s.suite,
            s.cases,
            s.verdicts.len(),
            s.failing(),
            s.wall_s
        );
    };
    let runs = block_coverage::run(set, &chosen, &opts, device, Reading::PerCase, &progress)
        .map_err(CoverageCliError::from)?;
    let subset = (!subset.is_empty()).then(|| subset.join("; "));
    let per_case: Vec<_> = runs.iter().flat_map(|r| r.per_case.clone()).collect();
    let share = Share::choose(target.target.name(), subset.clone(), &per_case);
    Ok(Some((
        Record::of(target.target.name(), &runs, subset),
        share,
    )))
}
