//! What the CPU side of a run costs on this machine: data generation, conversion, the
//! reference and the verification of every selected case, with a stand-in device that returns
//! at once (`device::stand_in`). The answer to "can a small runner keep up with the GPU?".

use super::session::{Backend, RunOutput, SessionError, SessionOptions, run_in_process};
use super::timing::PhaseTimes;
use serde::Serialize;
use std::fmt;
use std::time::Instant;
use w4a16_cases::{Case, CaseSet};
use w4a16_device::stand_in::StandInDevice;

/// The measured sample and what it extrapolates to.
#[derive(Clone, Debug, Serialize)]
pub struct CpuSideReport {
    pub target: String,
    /// `gpu`: the reference's products are the device's (not timed); `cpu`: all of it here.
    pub reference: &'static str,
    pub threads: usize,
    /// Cases in the selection, and those timed (the cases of the sampled layers).
    pub cases_selected: usize,
    pub cases_timed: usize,
    pub wall_s: f64,
    pub phases: PhaseTimes,
    /// `wall_s` scaled from the timed cases to the whole selection.
    pub extrapolated_wall_s: f64,
}

/// Whether `case` is in a 1-in-`every` sample of layers. Whole layers (every batch size of
/// one, as a worker runs them, converting the layer once) picked by the layer's seed, not by
/// position, so the sample spreads over shapes and providers however the suite is ordered.
pub fn in_sample(case: &Case, every: usize) -> bool {
    use w4a16_reference::data::case_seed;
    every <= 1 || case_seed(&case.layer_key()).is_multiple_of(every as u64)
}

/// Why the CPU side could not be timed.
#[derive(Debug, thiserror::Error)]
pub enum CpuSideError {
    #[error(
        "--every {every}: no case of the {selected} selected falls in the sample; use a smaller --every"
    )]
    EmptySample { every: usize, selected: usize },
    #[error("thread pool: {0}")]
    ThreadPool(rayon::ThreadPoolBuildError),
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// Times the CPU side of `cases` (1 in `every`) on `threads` threads.
pub fn measure(
    set: &CaseSet,
    cases: &[&Case],
    opts: &SessionOptions,
    every: usize,
    threads: usize,
) -> Result<CpuSideReport, CpuSideError> {
    let sample: Vec<&Case> = cases
        .iter()
        .copied()
        .filter(|c| in_sample(c, every))
        .collect();
    if sample.is_empty() {
        return Err(CpuSideError::EmptySample {
            every,
            selected: cases.len(),
        });
    }
    let mut opts = opts.clone();
    // A stand-in output fails its checks; its artifacts would be noise.
    opts.artifacts = None;
    let backend = Backend::Device(Box::new(StandInDevice::new(opts.target)));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .map_err(CpuSideError::ThreadPool)?;
    let start = Instant::now();
    let RunOutput { times, .. } =
        pool.install(|| run_in_process(set, &sample, &backend, &opts, &|_| {}))?;
    let wall_s = start.elapsed().as_secs_f64();
    Ok(CpuSideReport {
        target: opts.target.name().to_string(),
        reference: opts.reference.name(),
        threads: pool.current_num_threads(),
        cases_selected: cases.len(),
        cases_timed: sample.len(),
        wall_s,
        phases: times,
        extrapolated_wall_s: wall_s * cases.len() as f64 / sample.len() as f64,
    })
}

impl fmt::Display for CpuSideReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "CPU side for {} with the {} reference on {} threads: {} of {} cases timed in {:.1} s wall",
            self.target,
            self.reference,
            self.threads,
            self.cases_timed,
            self.cases_selected,
            self.wall_s
        )?;
        write!(f, "{}", self.phases)?;
        writeln!(
            f,
            "extrapolated to all {} cases: {:.0} s wall ({:.1} min) on {} threads",
            self.cases_selected,
            self.extrapolated_wall_s,
            self.extrapolated_wall_s / 60.0,
            self.threads
        )
    }
}
