//! The main job on a machine without a GPU: rather than leave every kernel check skipped, the
//! ISA emulator runs the default target's real code objects in the GPU's place, over the main
//! job's share of the suites (`budget::MAIN_JOB_WHOLE_SUITES` whole, the rest up to
//! `budget::MAIN_JOB_SHARE_MACS` a case), and the run says so in its first line. Without the
//! AMD toolchain the GPU checks stay skipped, the skip naming the install command.

use super::{DeviceSource, RunOptions};
use crate::require::{Requirement, Skip};
use crate::runner::gpus::Gpus;
use crate::runner::session::Backend;
use w4a16_device::{Allocation, DeviceKind};
use w4a16_kernels::{RunTarget, Target};

/// The target the main job checks where no GPU says otherwise (the field's decode target).
pub const MAIN_JOB_DEFAULT_TARGET: Target = Target::Gfx1151;

/// The device a run got, and whether it is the ISA emulator standing in for a missing GPU
/// (which runs only the main job's share).
pub(super) struct Chosen {
    pub(super) target: RunTarget,
    pub(super) backend: Backend,
    pub(super) main_job_share: bool,
}

/// `opened` as it is, or — when no GPU opened and the run asked nothing of the device (no
/// target, device list, snapshot or sanitizer, no GPU demanded by `W4A16_REQUIRE`) — the ISA
/// emulator for [`MAIN_JOB_DEFAULT_TARGET`], or the skip saying what is missing for it.
pub(super) fn in_place_of_a_missing_gpu(
    opts: &RunOptions,
    opened: (RunTarget, Backend),
    devices: &dyn DeviceSource,
) -> Chosen {
    let (target, backend) = opened;
    // Only where nothing was asked of the device: a named target, a device list, a snapshot
    // (whose rows are a target's whole budget), a sanitizer, or a GPU demanded by
    // `W4A16_REQUIRE` (a runner whose GPU went missing must fail, not pass on the emulator)
    // keeps the run as it was.
    let gpu_demanded =
        crate::require::required_from(std::env::var("W4A16_REQUIRE").ok().as_deref())
            .iter()
            .any(|r| matches!(r, Requirement::Gpu | Requirement::Cuda | Requirement::Rocm));
    let asked = opts.target.is_some()
        || !matches!(opts.gpus, Gpus::First)
        || opts.snapshot.is_some()
        || opts.sanitize.is_some()
        || gpu_demanded;
    let no_gpu = match &backend {
        Backend::None(skip) if !asked => skip.clone(),
        _ => {
            return Chosen {
                target,
                backend,
                main_job_share: false,
            };
        }
    };
    let want = RunTarget::native(MAIN_JOB_DEFAULT_TARGET);
    match devices.open(Some(want), 0, &opts.sources, Allocation::Guarded) {
        (t, Backend::Device(d)) if d.kind() == DeviceKind::Emulator => {
            eprintln!(
                "w4a16: no GPU here ({}): the ISA emulator runs {t}'s code objects in its place, over the main job's share of the suites (`--target {t}` runs its whole budget)",
                no_gpu.reason
            );
            Chosen {
                target: t,
                backend: Backend::Device(d),
                main_job_share: true,
            }
        }
        (_, other) => {
            let why = match other {
                Backend::None(skip) => skip.reason,
                Backend::Device(d) => format!("{} opened in its place", d.name()),
            };
            let reason = format!(
                "{}; the ISA emulator, which would run {want}'s code objects here, did not open ({why}): install the AMD toolchain with `scripts/amd-toolchain.sh`",
                no_gpu.reason
            );
            eprintln!("w4a16: no GPU and no ISA emulator here: {reason}");
            Chosen {
                target,
                backend: Backend::None(Skip {
                    requirement: no_gpu.requirement,
                    reason,
                }),
                main_job_share: false,
            }
        }
    }
}
