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

/// One staged unit on its way to the workers: its index, its layers and its handoff folder.
struct Job<'r, 'a> {
    index: usize,
    staged: Vec<Staged<'r, 'a>>,
    handoff: Option<PathBuf>,
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
                run.launch_in_workers(workers, &mut job.staged, job.handoff.as_deref());
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
            let staged = run.stage_for_workers(unit, handoff.as_deref());
            if in_flight {
                let job = done.recv().expect("the launcher hands back every unit");
                unit_done(&units[job.index], finish_unit(job.staged), progress, slots);
            }
            let job = Job {
                index,
                staged,
                handoff,
            };
            jobs.send(job).expect("the launcher takes every unit");
            in_flight = true;
        }
        drop(jobs);
        if in_flight {
            let job = done.recv().expect("the launcher hands back every unit");
            unit_done(&units[job.index], finish_unit(job.staged), progress, slots);
        }
    });
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
