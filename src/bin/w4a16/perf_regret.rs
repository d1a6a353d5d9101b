//! `w4a16 perf --regret`: every legal path of every dense case timed on the target's GPU, the
//! selected path's time over the best (the regret) and the prefill dequant option's value,
//! with the peers beside them on request; `regret.md`, `regret.json`, `regret.svg`.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use super::exit::{CliError, Status};
use super::perf::{Devices, PerfArgs, PerfCliError, PerfScope};
use w4a16_harness::perf::PerfError;
use w4a16_harness::perf::measure::PerfPlan;
use w4a16_harness::perf::peers::{self, PeerCase};
use w4a16_harness::perf::regret::report::{self, NOISE_REGRET};
use w4a16_harness::perf::regret::{
    Clock, RegretCase, RegretRow, RegretRun, TimeSource, measure_regret_each, regret_cases,
    regret_each, resume,
};

/// Flags `--regret` does not combine with: it judges no goldens and times one build.
pub fn refuse_flags(args: &PerfArgs, control: bool) -> Result<(), PerfCliError> {
    let flag = if control {
        Some("--control")
    } else if args.update_goldens {
        Some("--update-goldens")
    } else {
        None
    };
    match flag {
        Some(flag) => Err(PerfCliError::RegretWith { flag }),
        None => Ok(()),
    }
}

/// The regret run on `devices.candidate`: device events on the target's GPU; on the ISA
/// emulator (a gfx target without its GPU) one counted launch per path timed by the target's
/// declared machine, reported as a MODEL, within `--max-macs`.
pub fn perf_regret(
    scope: PerfScope<'_>,
    plan: PerfPlan,
    devices: Devices,
) -> Result<Status, CliError> {
    let PerfScope {
        args,
        suite,
        providers,
        config,
        repo,
    } = scope;
    let target = devices.target.target;
    let model = devices.candidate.kind() == w4a16_device::DeviceKind::Emulator;
    let device_name = devices.candidate.name();
    let (mut cases, mut not_timed) = regret_cases(suite, providers, target, config);
    for c in &mut cases {
        c.limit_fallback(args.regret_fallback_max_macs);
    }
    if model {
        cases = for_the_model(cases, &mut not_timed, args.max_macs);
        if !devices.candidate.count_launches(true) {
            let device = device_name.clone();
            return Err(PerfCliError::from(PerfError::NotCounting { device }).into());
        }
    }
    let left_out: usize = cases.iter().map(|c| c.left_out.len()).sum();
    let paths: usize = cases.iter().map(|c| c.paths.len()).sum();
    let times = match model {
        true => format!(
            "a MODEL: no {target} GPU here, each path counted once on the ISA emulator and timed \
             by {target}'s declared machine, cases within --max-macs {}",
            args.max_macs
        ),
        false => "device events".into(),
    };
    eprintln!(
        "w4a16 perf --regret: {} cases of {} on {device_name} ({target}), {paths} path timings \
         ({times}), {} not timed; prefill dequant {}; {left_out} paths left out (the fallback \
         above --regret-fallback-max-macs {}; the dense path under the model)",
        cases.len(),
        args.suite,
        not_timed.len(),
        config.prefill_dequant,
        args.regret_fallback_max_macs
    );
    let out_dir = args.report_dir.clone().unwrap_or_else(|| {
        PathBuf::from("target")
            .join("perf-regret")
            .join(target.to_string())
    });
    let folder = report::open(&out_dir).map_err(PerfCliError::from)?;
    let mut run = RegretRun {
        target: target.to_string(),
        device: device_name,
        suite: args.suite.clone(),
        prefill_dequant: config.prefill_dequant,
        plan,
        source: match model {
            true => TimeSource::Model,
            false => TimeSource::DeviceEvents,
        },
        kernels: devices.sources.digest().map_err(PerfCliError::from)?,
        planned: cases.len(),
        rows: Vec::new(),
        not_timed,
        peers_note: None,
    };
    let to_time = match &args.regret_resume {
        Some(path) => {
            let todo = resume_from(path, &mut run, cases.clone())?;
            eprintln!(
                "perf --regret: continuing {}: {} rows kept, {} cases left to time",
                path.display(),
                run.rows.len(),
                todo.len()
            );
            todo
        }
        None => cases.clone(),
    };
    // The report so far after every case: a run stopped by a time limit keeps what it timed.
    let mut write_error = None;
    let started = std::time::Instant::now();
    let stop_after = args.stop_after.map(std::time::Duration::from_secs);
    let device = devices.candidate.as_ref();
    let mut on_row = |row: &RegretRow| {
        run.rows.push(row.clone());
        if write_error.is_none() {
            write_error = report::write_into(&folder, &run).err();
        }
        match stop_after {
            Some(limit) if started.elapsed() >= limit => {
                eprintln!(
                    "perf --regret: --stop-after {}s reached: {} of {} cases timed; \
                         continue with --regret-resume on this report's regret.json",
                    limit.as_secs(),
                    run.rows.len(),
                    run.planned
                );
                ControlFlow::Break(())
            }
            _ => ControlFlow::Continue(()),
        }
    };
    let mut progress = |s: &str| eprintln!("perf --regret: {s}");
    let measured = match model {
        true => regret_each(
            Clock::Model { device },
            &to_time,
            &mut progress,
            &mut on_row,
        ),
        false => measure_regret_each(device, &to_time, plan, &mut progress, &mut on_row),
    };
    if let Some(e) = write_error {
        return Err(PerfCliError::from(e).into());
    }
    // Every row, kept and new, is in `run.rows` (pushed as each case was timed).
    measured.map_err(PerfCliError::from)?;
    // Kernels done: the peers (torch, in its own process) get the GPU to themselves.
    drop(devices);
    if args.peers && model {
        eprintln!(
            "W4A16-SKIP [peers] torch's kernels run on the target's GPU; this regret is a model"
        );
    } else if args.peers {
        peers_where_missing(repo, &cases, plan, &out_dir, &mut run)?;
    }
    let files = report::write_into(&folder, &run).map_err(PerfCliError::from)?;
    let regretting = run.rows.iter().filter(|r| r.regret >= NOISE_REGRET).count();
    println!(
        "{regretting} of {} cases have a legal path at least {NOISE_REGRET}× faster than the \
         selected one; reports: {}, {}, {}",
        run.rows.len(),
        files.markdown.display(),
        files.json.display(),
        files.plot.display()
    );
    // A report, not a gate: regret is what the selection thresholds are tuned from.
    Ok(Status::Passed)
}

/// `--peers` for every row of `cases` still without them (a stopped or resumed run leaves some).
fn peers_where_missing(
    repo: &Path,
    cases: &[RegretCase],
    plan: PerfPlan,
    out_dir: &Path,
    run: &mut RegretRun,
) -> Result<(), PerfCliError> {
    let lacking: Vec<RegretCase> = cases
        .iter()
        .filter(|c| {
            run.rows
                .iter()
                .any(|r| r.case_id == c.perf.case_id && r.peers.is_none())
        })
        .cloned()
        .collect();
    if !lacking.is_empty() {
        let note = with_peers(repo, &cases_of(&lacking), plan, out_dir, &mut run.rows)?;
        run.peers_note = Some(note);
    }
    Ok(())
}

/// Reads the report at `path` and starts `run` from it: the cases of `cases` still to time.
fn resume_from(
    path: &Path,
    run: &mut RegretRun,
    cases: Vec<RegretCase>,
) -> Result<Vec<RegretCase>, PerfCliError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| PerfCliError::ResumeIo {
        path: name.clone(),
        source,
    })?;
    let previous = report::read_json(&name, &text)?;
    Ok(resume::resume(run, previous, cases, &name)?)
}

/// The cases the counter model times: within `max_macs` (the ISA emulator runs every path),
/// the dense path left out (no model time); the others go to `not_timed` with why.
fn for_the_model(
    cases: Vec<RegretCase>,
    not_timed: &mut Vec<(String, String)>,
    max_macs: u64,
) -> Vec<RegretCase> {
    let mut kept = Vec::with_capacity(cases.len());
    for mut c in cases {
        match c.leave_out_unmodelled(max_macs) {
            Ok(()) => kept.push(c),
            Err(why) => not_timed.push((c.perf.case_id.clone(), why.to_string())),
        }
    }
    kept
}

fn cases_of(cases: &[RegretCase]) -> Vec<PeerCase> {
    cases
        .iter()
        .map(|c| {
            let p = &c.perf;
            PeerCase::new(p.key.clone(), &p.shape, p.dtype, p.symmetry)
        })
        .collect()
}

/// `--peers`: torch's int4 kernel and dense fp16 on the same cases, set beside each row; the
/// note the report carries (why they are missing, where torch is not there).
fn with_peers(
    repo: &Path,
    cases: &[PeerCase],
    plan: PerfPlan,
    out_dir: &Path,
    rows: &mut [RegretRow],
) -> Result<String, PerfCliError> {
    let script = repo.join("scripts").join("perf-peers.py");
    match peers::run_peers(&script, cases, plan, &out_dir.join("peers")) {
        Ok(table) => {
            // Rows outside `cases` (kept from a resumed report) keep the peers they had.
            for r in rows.iter_mut() {
                if let Some(p) = table.rows.get(&r.key) {
                    r.peers = Some(p.clone());
                }
            }
            Ok(table.note())
        }
        Err(e) if e.is_unavailable() => {
            eprintln!("W4A16-SKIP [peers] {e}");
            Ok(e.to_string())
        }
        Err(e) => Err(e.into()),
    }
}
