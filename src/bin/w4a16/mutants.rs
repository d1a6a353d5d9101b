//! `w4a16 mutants`: the harness's detection power, suites run against every seeded bug of the
//! mutant catalogue ([`w4a16_harness::mutants`]).

use super::args::{self, TargetArg};
use super::exit::{CliError, Status};
use std::path::{Path, PathBuf};
use std::time::Duration;
use w4a16_harness::mutants::{self, MutantResult, MutantStatus, MutantsError};
use w4a16_harness::runner::cli_run::{check_suites, load_with_dir};
use w4a16_harness::runner::session::{self, Backend};
use w4a16_harness::runner::verdict::SanitizerTool;
use w4a16_kernels::Target;
use w4a16_kernels::mutants::{Catalogue, CatalogueError, Mutant};
use w4a16_kernels::target::Vendor;

/// The GPU job's memcheck suites (`scripts/gpu-job.sh memory`), the default sanitizer share.
pub const MEMCHECK_SUITES: [&str; 4] = ["smoke", "kernels", "moe", "carrier"];

/// `w4a16 mutants`' options.
#[derive(clap::Args)]
pub struct MutantsArgs {
    /// Suites, in the order they run (repeatable; default: smoke, kernels, edges).
    #[arg(long = "suite")]
    suites: Vec<String>,
    /// Only mutant ids matching one of these globs (`*` wildcards; repeatable).
    #[arg(long)]
    only: Vec<String>,
    /// The unmutated sources (default: the copies built into this binary).
    #[arg(long, value_name = "DIR")]
    kernel_sources_base: Option<PathBuf>,
    /// The Markdown table (default: bench/mutants-<target>.md); the JSON goes next to it.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The catalogue folder (default: kernels/mutants next to the cases folder).
    #[arg(long)]
    catalogue: Option<PathBuf>,
    /// `auto` (the GPU found here) or a target.
    #[arg(long, default_value = "auto", value_parser = args::target_or_auto())]
    target: TargetArg,
    /// Worker processes of each suite run.
    #[arg(long, default_value_t = args::default_jobs())]
    jobs: usize,
    /// After the suites, run the GPU job's sanitizer share on the mutants they let through:
    /// `--sanitize-suite`s under compute-sanitizer with this tool and exact-size allocations
    /// (`run --sanitize`; on a gfx target, the ISA emulator's racecheck or initcheck); its kills
    /// are reported apart. Only `memcheck` is the GPU job's.
    #[arg(long, value_parser = args::named::<SanitizerTool>())]
    sanitize: Option<SanitizerTool>,
    /// The suites of the sanitizer share (repeatable; default: smoke, kernels, moe, carrier, the
    /// GPU job's memcheck suites).
    #[arg(long = "sanitize-suite", requires = "sanitize")]
    sanitize_suites: Vec<String>,
    /// Run every suite on every mutant (default: stop at the first suite that kills it).
    #[arg(long)]
    each_suite: bool,
    /// Also run the mutants the catalogue marks equivalent (a kill is then flagged).
    #[arg(long)]
    run_equivalent: bool,
    /// Mutated source trees, run reports and logs.
    #[arg(long, default_value = "target/w4a16-mutants")]
    work_dir: PathBuf,
    /// Per-case watchdog of the suite runs, seconds (a mutant may hang a kernel).
    #[arg(long, default_value_t = 60)]
    case_timeout: u64,
}

/// Why the mutants could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum MutantsCliError {
    #[error(transparent)]
    Catalogue(#[from] CatalogueError),
    #[error("--only {only:?}: no mutant id matches (see {})", catalogue.display())]
    NoneMatches {
        only: Vec<String>,
        catalogue: PathBuf,
    },
    #[error(transparent)]
    Measure(#[from] MutantsError),
}

pub fn mutants(args: MutantsArgs, cases: Option<PathBuf>) -> Result<Status, CliError> {
    let (dir, set) = load_with_dir(cases)?;
    let suites = if args.suites.is_empty() {
        ["smoke", "kernels", "edges"].map(String::from).to_vec()
    } else {
        args.suites
    };
    check_suites(&set, &suites)?;
    let sanitize = args.sanitize.map(|tool| mutants::SanitizeShare {
        tool,
        suites: if args.sanitize_suites.is_empty() {
            MEMCHECK_SUITES.map(String::from).to_vec()
        } else {
            args.sanitize_suites.clone()
        },
    });
    if let Some(share) = &sanitize {
        check_suites(&set, &share.suites)?;
    }
    let base = args::kernel_sources("--kernel-sources", args.kernel_sources_base.as_deref())?;
    let catalogue_dir = args.catalogue.unwrap_or_else(|| {
        let here = dir.parent().map(|r| r.join("kernels").join("mutants"));
        here.filter(|d| d.is_dir())
            .unwrap_or_else(w4a16_kernels::mutants::catalogue_dir)
    });
    let cat = load_catalogue(&catalogue_dir, &base)?;
    let only = &args.only;
    let chosen: Vec<&Mutant> = cat
        .mutants
        .iter()
        .filter(|m| only.is_empty() || only.iter().any(|g| w4a16_cases::glob::glob_match(g, &m.id)))
        .collect();
    if chosen.is_empty() {
        return Err(MutantsCliError::NoneMatches {
            only: args.only,
            catalogue: catalogue_dir,
        }
        .into());
    }
    let (target, backend) = session::open_backend(args.target.run_target());
    if let Backend::None(skip) = &backend {
        // Without the GPU nothing is measured: a loud skip, and no table.
        eprintln!(
            "W4A16-SKIP [{}] w4a16 mutants: {}; no table written ({} mutants not run)",
            skip.requirement,
            skip.reason,
            chosen.len()
        );
        return Ok(Status::passed_if(!skip.requirement.is_required()));
    }
    drop(backend);
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from("bench").join(format!("mutants-{}.md", target.name())));
    let plan = mutants::Plan {
        runner: mutants::SuiteRunner {
            exe: std::env::current_exe().map_err(CliError::CurrentExe)?,
            cases_dir: Some(dir.clone()),
            target: target.name().to_string(),
            jobs: args.jobs,
            case_timeout: Duration::from_secs(args.case_timeout),
        },
        suites,
        sanitize,
        base,
        work: args.work_dir,
        each_suite: args.each_suite,
        run_equivalent: args.run_equivalent,
        // The NVRTC compile check, with an emulated target's macros where it has them.
        nvrtc_arch: (target.executing_vendor() == Vendor::Nvidia)
            .then(|| Target::Sm90.name().to_string()),
        nvrtc_extra: target.nvrtc_options()?,
    };
    let share = plan
        .sanitize
        .as_ref()
        .map(|s| format!(", then {}", s.labels().join(" + ")))
        .unwrap_or_default();
    eprintln!(
        "w4a16 mutants: {} mutants × {}{share} on {target}; baseline first",
        chosen.len(),
        plan.suites.join(" + ")
    );
    let n = chosen.len();
    let command = format!(
        "w4a16 {}",
        std::env::args().skip(1).collect::<Vec<_>>().join(" ")
    );
    // The table so far is rewritten after every mutant: a run stopped by a timeout leaves what it
    // measured, marked partial.
    let mut so_far: Vec<MutantResult> = Vec::new();
    let mut report = mutants::measure(&plan, &cat, &chosen, &mut |r| {
        so_far.push(r.clone());
        let i = so_far.len();
        eprintln!("[{i}/{n}] {} ({:.1} s): {}", r.id, r.wall_s, said(r));
        let mut partial = mutants::MutantsReport::aggregate(
            &plan.runner.target,
            &plan.suites,
            plan.sanitize.as_ref(),
            plan.each_suite,
            &cat,
            so_far.clone(),
        );
        partial.command = format!("{command} (partial: {i} of {n} mutants measured)");
        if let Err(e) = partial.write(&out) {
            eprintln!("w4a16 mutants: the partial table was not written: {e}");
        }
    })
    .map_err(MutantsCliError::from)?;
    report.command = command;
    let json_path = report.write(&out)?;
    print!("{}", report.markdown());
    println!("table: {}  json: {}", out.display(), json_path.display());
    Ok(Status::Passed)
}

/// The catalogue, checked to cover every bug class and to apply to `base`.
fn load_catalogue(
    dir: &Path,
    base: &w4a16_kernels::source::KernelSources,
) -> Result<Catalogue, MutantsCliError> {
    let cat = Catalogue::load(dir)?;
    cat.check_coverage()?;
    cat.check_against(base)?;
    Ok(cat)
}

/// A mutant's outcome, as its progress line says it.
fn said(r: &MutantResult) -> String {
    match &r.status {
        MutantStatus::Killed { case_id, check, .. } => format!(
            "killed by {}: {case_id} [{check}]",
            r.killed_by_label().unwrap_or_default()
        ),
        MutantStatus::Survived { reason } => format!("SURVIVED ({reason})"),
        MutantStatus::Stillborn { log } => format!("stillborn: {log}"),
        MutantStatus::NotRunEquivalent => "equivalent, not run".into(),
        MutantStatus::Error { reason } => format!("ERROR: {reason}"),
    }
}
