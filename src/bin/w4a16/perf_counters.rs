//! `w4a16 perf --target gfxNNNN` without that GPU here: the perf cases within `--max-macs`
//! counted on the ISA emulator, judged exactly against `perf/<target>.counters.json`, the
//! control beside them, the reports, and the goldens rewritten only with `--update-goldens`
//! (docs/perf-counters.md).

use std::path::{Path, PathBuf};

use super::exit::{CliError, Status};
use super::perf::{Devices, PerfArgs, PerfCliError, PerfScope, git_head};
use w4a16_harness::perf::counters::golden::{self, CountersFile};
use w4a16_harness::perf::counters::judge::{self, CountOutcome};
use w4a16_harness::perf::counters::report::{self, CountRun};
use w4a16_harness::perf::counters::{self, Counted};
use w4a16_harness::perf::measure::perf_cases;
use w4a16_harness::perf::update::UpdateScope;
use w4a16_harness::report::FileError;
use w4a16_kernels::source::KernelSources;

pub fn perf_counted(scope: PerfScope<'_>, devices: Devices) -> Result<Status, CliError> {
    let PerfScope {
        args,
        suite,
        providers,
        config,
        repo,
    } = scope;
    let target = devices.target.target.to_string();
    let device_name = devices.candidate.name();
    let (cases, not_counted) = perf_cases(suite, providers, devices.target.target, config);
    let (cases, left_out) = counters::within_budget(cases, args.max_macs);
    eprintln!(
        "w4a16 perf: no {target} GPU here: counting {} perf cases of {} on {device_name}; \
         {} LEFT OUT by --max-macs {} (listed in the report), {} not counted (MoE, same key, no kernel)",
        cases.len(),
        args.suite,
        left_out.len(),
        args.max_macs,
        not_counted.len()
    );
    for l in &left_out {
        eprintln!(
            "W4A16-LEFT-OUT {} ({} MACs > --max-macs {})",
            l.case_id, l.macs, args.max_macs
        );
    }
    let counted = counters::count_suite(
        devices.candidate.as_ref(),
        devices.control.as_deref(),
        &cases,
        &mut |s| eprintln!("perf: {s}"),
    )
    .map_err(PerfCliError::from)?;
    let goldens_dir = args.goldens.clone().unwrap_or_else(|| repo.join("perf"));
    let golden_path = CountersFile::path_for(&goldens_dir, &target);
    let goldens = CountersFile::load(&golden_path).map_err(PerfCliError::from)?;
    let outcomes: Vec<CountOutcome> = counted
        .into_iter()
        .map(|(cand, ctrl)| {
            let golden = goldens.as_ref().and_then(|g| g.entry(&cand.key));
            judge::judge_case(cand, ctrl, golden)
        })
        .collect();
    let source_name = |s: &KernelSources| {
        s.as_dir_arg()
            .map_or("embedded kernels".into(), |d| d.display().to_string())
    };
    let run = CountRun {
        target: target.clone(),
        device: device_name,
        suite: args.suite.clone(),
        max_macs: args.max_macs,
        candidate: source_name(&devices.sources),
        control: devices.control_src.as_ref().map(source_name),
        outcomes,
        left_out,
        not_counted,
    };
    let out_dir = args
        .report_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("target").join("perf").join(&target));
    let summary = report::write_reports(&run, &out_dir)?;
    print_outcomes(&run);
    println!(
        "{} of {} cases fail; {} left out by --max-macs {}; report: {}",
        run.failing(),
        run.outcomes.len(),
        run.left_out.len(),
        run.max_macs,
        summary.display()
    );
    if goldens.is_none() {
        println!(
            "no counter goldens at {}: every case is `no golden` (record them with --update-goldens)",
            golden_path.display()
        );
    }
    if args.update_goldens {
        write_counter_goldens(args, repo, &goldens_dir, goldens.as_ref(), &run)?;
        return Ok(Status::Passed);
    }
    Ok(Status::passed_if(run.failing() == 0))
}

/// Every case's judgement, and each moved counter on its own line.
fn print_outcomes(run: &CountRun) {
    for (name, n) in run.counts() {
        print!("{name}: {n}  ");
    }
    println!();
    for o in run.outcomes.iter().filter(|o| o.fails() || o.stale_golden) {
        println!(
            "{} {}: {}{}",
            o.key,
            o.candidate.kernel,
            report::describe(&o.candidate_judgement),
            if o.stale_golden {
                " (stale golden)"
            } else {
                ""
            }
        );
        if let Some(v) = o.vs_control.as_ref().filter(|v| v.fails()) {
            println!("  vs control: {}", report::describe(v));
        }
    }
}

/// `--update-goldens`: the candidate's counters as the new goldens (the one writer), and what
/// changed beside them.
fn write_counter_goldens(
    args: &PerfArgs,
    repo: &Path,
    dir: &Path,
    old: Option<&CountersFile>,
    run: &CountRun,
) -> Result<(), CliError> {
    let recorded = format!(
        "{} w4a16 {}",
        git_head(repo),
        std::env::args().skip(1).collect::<Vec<_>>().join(" ")
    );
    let scope = match args.filter {
        Some(_) => UpdateScope::Filtered,
        None => UpdateScope::WholeSuite,
    };
    let counted: Vec<&Counted> = run.outcomes.iter().map(|o| &o.candidate).collect();
    let left: Vec<_> = run.left_out.iter().map(|l| l.key.clone()).collect();
    let (new, changed) = golden::update(
        old,
        &run.target,
        &run.device,
        &counted,
        &left,
        run.max_macs,
        scope,
        recorded,
    );
    let path = CountersFile::path_for(dir, &run.target);
    new.save(&path).map_err(PerfCliError::from)?;
    let moved = dir.join(format!("{}.counters.moved.md", run.target));
    FileError::at(
        &moved,
        std::fs::write(&moved, changed.markdown(&run.target)),
    )?;
    println!(
        "counter goldens written: {} ({} entries); what changed: {}",
        path.display(),
        new.entries.len(),
        moved.display()
    );
    Ok(())
}
