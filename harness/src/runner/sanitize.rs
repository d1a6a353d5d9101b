//! Sanitizer mode (`w4a16 run --sanitize TOOL`): on an NVIDIA GPU the fault-isolated workers run
//! under NVIDIA's compute-sanitizer with exact-size allocations ([`Allocation::Exact`]), so that
//! an access past a tensor lands outside every allocation. The tool prints its reports on the
//! worker's stdout, each line prefixed `=========`; the parent charges them to the case the worker
//! announced last (`BEGIN <id>` opens a case's window, the next `BEGIN` closes it) and turns the
//! first report against each kernel into that case's `sanitize:<tool>:<kernel>` FAIL.
//!
//! On a gfx target run by the ISA emulator, racecheck and initcheck are the emulator's own
//! ([`Engine::Emulator`], `w4a16_emu::sanitize`): the workers run unwrapped, their device
//! watches every launch, and each case's reports are printed in compute-sanitizer's layout on
//! the worker's stdout ([`emulated`]), where the same windows and parser charge them to the case.
//! memcheck there is the emulator's own fault on any access outside a tensor (a skip that says
//! so); synccheck has no emulator counterpart.
//!
//! Elsewhere (ROCm, no GPU, a simulated device, no compute-sanitizer binary) every case gets a
//! loud `sanitize:<tool>` skip with the reason, a failure under `W4A16_REQUIRE=gpu`.
//!
//! [`Allocation::Exact`]: w4a16_device::Allocation::Exact

pub mod emulated;
mod findings;
#[cfg(test)]
mod tests;
mod window;

pub use findings::{Finding, FindingKind, ReportLine, Space, parse_findings, report_line};
pub use window::{CaseWindow, unattributed_errors};

use super::verdict::{Outcome, SanitizerTool, Verdict};
use crate::require::{Requirement, Skip};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use w4a16_device::DeviceKind;
use w4a16_kernels::RunTarget;

/// compute-sanitizer's `--kernel-name` filter: only kernels whose (unmangled, `extern "C"`)
/// name contains `w4a16_` are checked, i.e. every entry point of the set
/// (`w4a16_<kernel>_<dtype>[_variant]`) and nothing of cuBLAS.
pub const KERNEL_FILTER: &str = "kns=w4a16_";

/// memcheck's `--padding`: bytes of unallocated space after every allocation, so that an access
/// just past a buffer is never absorbed by a neighbour allocated back to back.
pub const MEMCHECK_PADDING_BYTES: usize = 4096;

/// Seconds compute-sanitizer waits for the worker to connect (its default, 10 s, is short for a
/// dozen workers starting at once on a loaded host).
pub const LAUNCH_TIMEOUT_S: u32 = 120;

/// The prefix compute-sanitizer puts before each of its lines (`--prefix`, the default).
pub const REPORT_PREFIX: &str = "=========";

/// What watches the workers' kernels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Engine {
    /// NVIDIA's compute-sanitizer found here, wrapping each worker.
    ComputeSanitizer(PathBuf),
    /// The ISA emulator's own sanitizer, inside each worker's device (gfx targets).
    Emulator,
}

/// A sanitizer for the run: the tool, and what runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sanitizer {
    pub tool: SanitizerTool,
    pub engine: Engine,
}

impl Sanitizer {
    /// The command that runs `worker worker_args…` under the tool: `(program, arguments)`
    /// (the ISA emulator's runs inside the worker: the worker itself).
    pub fn command(&self, worker: &Path, worker_args: &[String]) -> (PathBuf, Vec<String>) {
        let executable = match &self.engine {
            Engine::ComputeSanitizer(e) => e,
            Engine::Emulator => return (worker.to_path_buf(), worker_args.to_vec()),
        };
        let mut args: Vec<String> = vec![
            "--tool".into(),
            self.tool.name().into(),
            "--kernel-name".into(),
            KERNEL_FILTER.into(),
            // Every report counts: the default stops printing after 100 per process, and a
            // worker runs many cases.
            "--print-limit".into(),
            "0".into(),
            // A precise error ends the kernel, not the context: the worker's next cases run.
            "--destroy-on-device-error".into(),
            "kernel".into(),
            "--launch-timeout".into(),
            LAUNCH_TIMEOUT_S.to_string(),
            "--target-processes".into(),
            "application-only".into(),
            // The worker's exit status is the parent's business (a crash is already a fault).
            "--check-exit-code".into(),
            "no".into(),
        ];
        if self.tool == SanitizerTool::Memcheck {
            args.extend([
                "--padding".into(),
                MEMCHECK_PADDING_BYTES.to_string(),
                // Every driver status is checked by the backend and becomes a typed fault;
                // memcheck's own API-error reports would also flag the driver's probing calls.
                "--report-api-errors".into(),
                "no".into(),
            ]);
        }
        args.push("--".into());
        args.push(worker.display().to_string());
        args.extend(worker_args.iter().cloned());
        (executable.clone(), args)
    }

    /// The emulator's tool the workers' devices run, for [`Engine::Emulator`].
    pub fn emulator_tool(&self) -> Option<SanitizerTool> {
        (self.engine == Engine::Emulator).then_some(self.tool)
    }

    /// What watches, for the run's announcement.
    pub fn describe(&self) -> String {
        match &self.engine {
            Engine::ComputeSanitizer(e) => format!(
                "compute-sanitizer {} ({}) watches the workers; allocations are exact-size",
                self.tool,
                e.display()
            ),
            Engine::Emulator => format!(
                "the ISA emulator's {} watches every launch in the workers (docs/sanitize.md)",
                self.tool
            ),
        }
    }
}

/// Where [`locate`] looks for compute-sanitizer, in order.
pub fn search_dirs(cuda_home: Option<&OsStr>, path: Option<&OsStr>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(h) = cuda_home.filter(|h| !h.is_empty()) {
        dirs.push(Path::new(h).join("bin"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/bin"));
    if let Some(p) = path {
        dirs.extend(std::env::split_paths(p).filter(|d| !d.as_os_str().is_empty()));
    }
    dirs.dedup();
    dirs
}

/// No `compute-sanitizer` file in any folder searched: the loud skip's reason names each path
/// looked at, and how to point the harness at a toolkit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "compute-sanitizer not found (looked for {}; set CUDA_HOME to a CUDA toolkit)",
    .looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
)]
pub struct SanitizerNotFound {
    /// The candidate paths, in search order.
    pub looked: Vec<PathBuf>,
}

/// The first `compute-sanitizer` file in `dirs`.
pub fn locate_in(dirs: &[PathBuf]) -> Result<PathBuf, SanitizerNotFound> {
    let looked: Vec<PathBuf> = dirs.iter().map(|d| d.join("compute-sanitizer")).collect();
    match looked.iter().find(|c| c.is_file()) {
        Some(found) => Ok(found.clone()),
        None => Err(SanitizerNotFound { looked }),
    }
}

/// compute-sanitizer from `$CUDA_HOME/bin`, `/usr/local/cuda/bin` or `PATH`; a loud skip that
/// names every place looked at when there is none.
pub fn locate() -> Result<PathBuf, Skip> {
    let dirs = search_dirs(
        std::env::var_os("CUDA_HOME").as_deref(),
        std::env::var_os("PATH").as_deref(),
    );
    locate_in(&dirs).map_err(|not_found| Skip {
        requirement: Requirement::Gpu,
        reason: not_found.to_string(),
    })
}

/// Whether `tool` can run on what this session opened: a CUDA device and a compute-sanitizer
/// (found by `find`, called only then). Otherwise the skip every case reports.
pub fn availability(
    tool: SanitizerTool,
    device: Result<DeviceKind, &Skip>,
    target: RunTarget,
    find: impl FnOnce() -> Result<PathBuf, Skip>,
) -> Result<Sanitizer, Skip> {
    let skip = |reason: String| Skip {
        requirement: Requirement::Gpu,
        reason,
    };
    match device {
        Err(no_device) => Err(skip(format!(
            "compute-sanitizer {tool} needs an NVIDIA GPU: {}",
            no_device.reason
        ))),
        Ok(DeviceKind::Rocm) => Err(skip(format!(
            "compute-sanitizer {tool} is NVIDIA's; the device here is ROCm ({target}), which it cannot watch"
        ))),
        Ok(DeviceKind::Simulated) => Err(skip(format!(
            "compute-sanitizer {tool} watches GPU kernels; the device here is simulated on the host"
        ))),
        Ok(DeviceKind::Emulator) => match emulated::emulator_tool(tool) {
            Some(_) => Ok(Sanitizer {
                tool,
                engine: Engine::Emulator,
            }),
            None => Err(skip(emulator_reason(tool, target))),
        },
        Ok(DeviceKind::Cuda) => find().map(|executable| Sanitizer {
            tool,
            engine: Engine::ComputeSanitizer(executable),
        }),
    }
}

/// Why a tool does not run on the ISA emulator (a gfx target without its GPU). For memcheck the
/// emulator is the memory check: every tensor sits at exactly its size, far from every other, and
/// any access outside one faults the case (docs/emulation.md), so the skip says so.
pub fn emulator_reason(tool: SanitizerTool, target: RunTarget) -> String {
    let memory = "on gfx targets the ISA emulator's fault on any access outside a tensor \
                  (every tensor allocated at exactly its size) is the memory check";
    match tool {
        SanitizerTool::Memcheck => format!(
            "compute-sanitizer memcheck watches NVIDIA GPUs, not the ISA emulator running {target}; \
             it is not needed there: {memory}"
        ),
        _ => format!(
            "compute-sanitizer {tool} watches NVIDIA GPUs, not the ISA emulator running {target}, \
             which has no {tool} of its own (its racecheck and initcheck run with --sanitize; \
             {memory})"
        ),
    }
}

/// The command that reruns one case under the sanitizer (it must run in a worker, so it is a
/// filtered `run`, not `repro`).
pub fn repro_command(case_id: &str, target: RunTarget, tool: SanitizerTool) -> String {
    format!(
        "cargo run --release --bin w4a16 -- run --sanitize {tool} --filter '{case_id}' --target {target} --jobs 1"
    )
}

/// The verdict of a case the sanitizer could not watch: a loud skip, or a failure when
/// `required` (`W4A16_REQUIRE` names the skip's requirement).
pub fn skip_verdict(case_id: &str, tool: SanitizerTool, skip: &Skip, required: bool) -> Verdict {
    let v = Verdict::skipped(case_id, tool.check(), skip.clone());
    if required {
        Verdict {
            outcome: Outcome::Fail,
            detail: format!(
                "W4A16_REQUIRE={} but the sanitizer did not run: {}",
                skip.requirement, skip.reason
            ),
            ..v
        }
    } else {
        v
    }
}

/// [`skip_verdict`] for every case, `W4A16_REQUIRE` read from the environment.
pub fn skip_verdicts<'a>(
    case_ids: impl IntoIterator<Item = &'a str>,
    tool: SanitizerTool,
    skip: &Skip,
) -> Vec<Verdict> {
    let required = skip.requirement.is_required();
    case_ids
        .into_iter()
        .map(|id| skip_verdict(id, tool, skip, required))
        .collect()
}
