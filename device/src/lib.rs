//! Devices: one backend-neutral [`Device`] so the same test body runs on CUDA, ROCm, the ISA
//! emulator or nothing at all (a loud skip), with what a launch needs on the way in: typed
//! tensors ([`tensor`]), the contract check at the launch boundary ([`validate`]) and argument
//! packing from the declaration ([`launch`]).
//!
//! Three traits, each saying what it is:
//! - [`Runtime`]: the primitives a GPU runtime gives (memory, launch, vendor BLAS, events, a
//!   watchdog-guarded synchronise), implemented once per backend;
//! - [`Device`]: checked launches, what the runner and the tests use; written once for every
//!   runtime in the blanket `impl<R: Runtime> Device for R` (upload, poison, guard bands,
//!   argument packing, synchronise, download, guard check);
//! - [`DeviceBench`]: device-event timing, apart so that a correctness run needs none of it.
//!
//! Both [`Runtime`] and [`Device`] extend [`DeviceInfo`] (target, name, health, kind) and
//! [`ReferenceOffload`] (the reference's work on the device), so those are declared once.
//!
//! To add a backend: implement [`DeviceInfo`], [`ReferenceOffload`] and [`Runtime`] and a
//! constructor returning `Result<YourDevice, Skip>`, as `cuda.rs` (cudarc, behind the default
//! `cuda` feature) and `rocm.rs` (hip-sys, behind the `rocm` feature) do, and open it in
//! [`open`] (`open.rs`).

pub mod amd_code;
pub mod blas;
pub mod block_coverage;
#[cfg(feature = "cuda")]
pub mod cuda;
mod device;
#[cfg(feature = "emu")]
pub mod emu;
#[cfg(feature = "emu")]
mod emu_check;
pub mod fault;
pub mod guard;
pub mod held;
#[cfg(unix)]
pub mod hipblas;
mod info;
pub mod input_cache;
pub mod launch;
pub mod moe;
pub mod none;
mod open;
mod outputs;
mod reference_offload;
#[cfg(feature = "rocm")]
pub mod rocm;
mod runtime;
pub mod sanitize;
/// Host code following each kernel's contract, for the launch flow's tests here and the
/// runner's in the harness (feature `simulated`, a dev-dependency feature there).
#[cfg(any(test, feature = "simulated"))]
pub mod simulated;
mod staging;
pub mod stand_in;
pub mod tensor;
mod timing;
pub mod validate;

use w4a16_require::{Requirement, Skip};

pub use block_coverage::BlockCoverage;
pub use device::Device;
pub use fault::{
    BadWatchdog, Capability, DeviceFault, FaultClass, Health, UnknownArch, watchdog_timeout,
};
pub use guard::{GUARD_BYTES, GuardSide, GuardViolation, OutputLayout, OutputReport};
pub use held::HeldLanes;
pub use info::{Allocation, DeviceInfo, DeviceKind, EmulatorWork, KernelWork, LaunchCounters};
pub use moe::{ALIGN_POISON, AlignOutput, MoeInputs, MoeLaunch, MoeOutput, MoeTiming};
pub use open::{DeviceChoice, DeviceRequest, device_count, open};
pub use outputs::{BlasGemm, DequantCheck, DequantOutput, GemmOutput};
pub use reference_offload::ReferenceOffload;
pub use runtime::Runtime;
pub use sanitize::{EmuSanitizer, SanitizerReport};
pub use timing::{BenchPlan, DeviceBench, Timing};

/// Skip for a requirement other than a GPU (e.g. NVRTC missing on a machine with a GPU).
pub(crate) fn skip(requirement: Requirement, reason: impl Into<String>) -> Skip {
    Skip {
        requirement,
        reason: reason.into(),
    }
}

#[cfg(test)]
mod named_tests {
    w4a16_reference::named_enum_tests! {
        elem_type: crate::tensor::ElemType,
    }
}
