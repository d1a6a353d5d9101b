//! `w4a16 bench --emulator`: how fast the ISA emulator runs a suite on this machine, as
//! wave-instructions executed per second (one thread: the emulator's memory is one lock) and the
//! suite's wall time. The answer to "does the ISA emulator's gfx check fit a CI runner?".

use super::session::{Backend, RunOutput, SessionError, SessionOptions, run_in_process};
use serde::Serialize;
use std::fmt;
use std::time::Instant;
use w4a16_cases::{Case, CaseSet};
use w4a16_device::{DeviceBench, EmulatorWork};

/// One timed run of the emulator.
#[derive(Clone, Debug, Serialize)]
pub struct EmulatorSpeed {
    pub target: String,
    pub device: String,
    pub cases: usize,
    pub checks: usize,
    /// Checks that failed or faulted (a speed figure from a failing run still says so).
    pub failing: usize,
    pub wall_s: f64,
    pub work: EmulatorWork,
}

impl EmulatorSpeed {
    /// Wave-instructions the emulator executed per second of its launches.
    pub fn wave_instructions_per_s(&self) -> f64 {
        self.work.wave_instructions as f64 / self.work.seconds.max(f64::MIN_POSITIVE)
    }
}

/// Why the emulator's speed could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorSpeedError {
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The device given is no emulator.
    #[error("{device} is not the ISA emulator: no emulator work to report")]
    NoEmulatorWork { device: String },
}

/// Runs `cases` in this process on `device` (the emulator) and reads back its work.
pub fn measure(
    set: &CaseSet,
    cases: &[&Case],
    opts: &SessionOptions,
    device: Box<dyn DeviceBench>,
) -> Result<EmulatorSpeed, EmulatorSpeedError> {
    let name = device.name();
    let backend = Backend::Device(device);
    let start = Instant::now();
    let RunOutput { verdicts, .. } = run_in_process(set, cases, &backend, opts, &|_| {})?;
    let wall_s = start.elapsed().as_secs_f64();
    let Backend::Device(device) = &backend else {
        unreachable!("built as a device above")
    };
    let work = device
        .emulator_work()
        .ok_or(EmulatorSpeedError::NoEmulatorWork {
            device: name.clone(),
        })?;
    Ok(EmulatorSpeed {
        target: opts.target.name().to_string(),
        device: name,
        cases: cases.len(),
        checks: verdicts.len(),
        failing: verdicts.iter().filter(|v| v.outcome.is_failure()).count(),
        wall_s,
        work,
    })
}

impl fmt::Display for EmulatorSpeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} on {}", self.target, self.device)?;
        writeln!(
            f,
            "  {} cases, {} checks ({} failing) in {:.1} s wall on one thread",
            self.cases, self.checks, self.failing, self.wall_s
        )?;
        writeln!(
            f,
            "  {} launches, {:.3} G wave-instructions in {:.1} s of emulation: {:.1} M wave-instructions/s",
            self.work.launches,
            self.work.wave_instructions as f64 / 1e9,
            self.work.seconds,
            self.wave_instructions_per_s() / 1e6
        )?;
        let mut kernels: Vec<_> = self.work.per_kernel.iter().collect();
        kernels.sort_by(|a, b| b.1.seconds.total_cmp(&a.1.seconds));
        writeln!(
            f,
            "  {:<44} {:>8} {:>10} {:>9} {:>6}",
            "kernel", "launches", "G w-inst", "seconds", "share"
        )?;
        for (name, k) in kernels {
            writeln!(
                f,
                "  {name:<44} {:>8} {:>10.3} {:>9.1} {:>5.1}%",
                k.launches,
                k.wave_instructions as f64 / 1e9,
                k.seconds,
                100.0 * k.seconds / self.work.seconds.max(f64::MIN_POSITIVE)
            )?;
        }
        Ok(())
    }
}
