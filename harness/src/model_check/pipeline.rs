//! check-model with workers, decoder layers overlapped: while the workers launch decoder layer
//! i (a launcher thread waits on them), this thread reads, checks and converts layer i + 1 and
//! hands its conversions over (`handoff.rs`). It waits for layer i before handing layer i + 1
//! to the launcher, so at most two decoder layers are in flight — one staged here, one in a
//! worker — whatever the number of layers, and the findings are taken in unit order, so the
//! report is the one a run without overlap gives.

use super::Progress;
use super::handoff::HandoffDir;
use super::isolated::ModelWorkers;
use super::run::Run;
use super::stages::{Staged, Unit, finish_unit};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Instant;

/// One staged unit on its way to the workers: its index, its layers and its handoff folder, and
/// where its time went (`W4A16_SPANS`).
struct Job<'r, 'a> {
    index: usize,
    staged: Vec<Staged<'r, 'a>>,
    handoff: Option<PathBuf>,
    spans: Spans,
}

/// Seconds a unit spent staged here, then waiting for the previous unit, then launching.
#[derive(Default)]
struct Spans {
    staged_s: f64,
    waited_s: f64,
    launched_s: f64,
}

/// With `W4A16_SPANS` set, one line per decoder layer on stderr: whether the parent (staging) or
/// the workers (launching) bound the run.
fn say_spans(unit: &Unit<'_>, spans: &Spans) {
    if std::env::var_os("W4A16_SPANS").is_some() {
        eprintln!(
            "w4a16 spans: {}: staged in {:.2} s, waited {:.2} s for the workers, launched in {:.2} s",
            unit.name, spans.staged_s, spans.waited_s, spans.launched_s
        );
    }
}

/// Checks `units` with their launches in `workers`, unit i + 1 staged while unit i launches;
/// each layer's findings go to its slot.
pub(super) fn check_units<'r, 'a>(
    run: &Run<'r, 'a>,
    units: &[Unit<'_>],
    workers: &ModelWorkers,
    progress: &dyn Fn(Progress<'_>),
    slots: &mut [Option<Run<'r, 'a>>],
) {
    let folder = HandoffDir::create()
        .inspect_err(|e| {
            eprintln!(
                "w4a16: no folder to hand conversions to the workers ({e}): they convert each layer again"
            )
        })
        .ok();
    std::thread::scope(|scope| {
        // A rendezvous: the launcher takes a unit only when it is idle.
        let (jobs, to_launch) = mpsc::sync_channel::<Job<'r, 'a>>(0);
        let (launched, done) = mpsc::channel::<Job<'r, 'a>>();
        scope.spawn(move || {
            for mut job in to_launch {
                let start = Instant::now();
                run.launch_in_workers(workers, &mut job.staged, job.handoff.as_deref());
                job.spans.launched_s = start.elapsed().as_secs_f64();
                if let Some(dir) = &job.handoff {
                    // The unit's conversions are no longer needed once its cases ran.
                    let _ = std::fs::remove_dir_all(dir);
                }
                if launched.send(job).is_err() {
                    break;
                }
            }
        });
        let mut in_flight = false;
        for (index, unit) in units.iter().enumerate() {
            progress(Progress::Started(&unit.name));
            let handoff = folder.as_ref().and_then(|f| {
                f.unit(index, &unit.name)
                    .inspect_err(|e| {
                        eprintln!(
                            "w4a16: no folder for {}'s conversions ({e}): its worker converts them again",
                            unit.name
                        )
                    })
                    .ok()
            });
            let start = Instant::now();
            let staged = run.stage_for_workers(unit, handoff.as_deref());
            let staged_s = start.elapsed().as_secs_f64();
            if in_flight {
                let job = done.recv().expect("the launcher hands back every unit");
                job_done(units, job, progress, slots);
            }
            let job = Job {
                index,
                staged,
                handoff,
                spans: Spans {
                    staged_s,
                    waited_s: start.elapsed().as_secs_f64() - staged_s,
                    launched_s: 0.0,
                },
            };
            jobs.send(job).expect("the launcher takes every unit");
            in_flight = true;
        }
        drop(jobs);
        if in_flight {
            let job = done.recv().expect("the launcher hands back every unit");
            job_done(units, job, progress, slots);
        }
    });
}

/// A unit back from the workers: its findings into their slots.
fn job_done<'r, 'a>(
    units: &[Unit<'_>],
    job: Job<'r, 'a>,
    progress: &dyn Fn(Progress<'_>),
    slots: &mut [Option<Run<'r, 'a>>],
) {
    let unit = &units[job.index];
    say_spans(unit, &job.spans);
    unit_done(unit, finish_unit(job.staged), progress, slots);
}

/// A finished unit's layers into their slots, with their progress events.
pub(super) fn unit_done<'r, 'a>(
    unit: &Unit<'_>,
    done: Vec<(usize, Run<'r, 'a>)>,
    progress: &dyn Fn(Progress<'_>),
    slots: &mut [Option<Run<'r, 'a>>],
) {
    for (slot, fork) in done {
        if let Some(record) = fork.layers.last() {
            progress(Progress::Finished(record));
        }
        slots[slot] = Some(fork);
    }
    progress(Progress::UnitDone(&unit.name));
}
