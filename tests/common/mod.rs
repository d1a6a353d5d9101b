//! One test body per backend: `#[apply(backends)]` makes a named case of a test for each
//! backend (`…::case_1_cuda`, `…::case_2_rocm`), and each case opens its own device or skips
//! loudly under the per-vendor rule of `w4a16_require` (its crate docs): under
//! `W4A16_REQUIRE=gpu` a case fails only when no GPU backend opened on this machine at all.
//!
//! A backend is one line of the template (and one arm of `w4a16_device::open`); [`GPU_BACKENDS`]
//! lists the GPU ones, which alone count as "this machine's GPU" (an ISA emulator opens
//! everywhere and does not belong there).

// Each test binary includes this module and uses a part of it (amd_rocm, its ROCm-only tests,
// not the template).
#![allow(dead_code, unused_macros)]

use std::sync::OnceLock;

use rstest_reuse::template;
use w4a16_device::{DeviceBench, DeviceKind, DeviceRequest, open};
use w4a16_harness::require::{Requirement, Skip, backend_skip_or_fail};

#[template]
#[rstest::rstest]
#[case::cuda(DeviceKind::Cuda)]
#[case::rocm(DeviceKind::Rocm)]
pub fn backends(#[case] kind: DeviceKind) {}

/// The AMD targets the ISA emulator runs (their real code objects, on the host): a test body
/// applied to it gets a case per target (`…::case_1_gfx1100`, …), each opening the emulator.
#[template]
#[rstest::rstest]
#[case::gfx1100(w4a16_kernels::Target::Gfx1100)]
#[case::gfx1151(w4a16_kernels::Target::Gfx1151)]
#[case::gfx1201(w4a16_kernels::Target::Gfx1201)]
pub fn emulated_targets(#[case] target: w4a16_kernels::Target) {}

/// The ISA emulator for `target`, or `None` after a loud skip (no LLVM disassembler or no code
/// objects: a failure under `W4A16_REQUIRE=amd-toolchain`).
pub fn emulator(target: w4a16_kernels::Target) -> Option<Box<dyn DeviceBench>> {
    match open(DeviceRequest::emulator(target)) {
        Ok(d) => Some(d),
        Err(skip) => {
            w4a16_harness::require::skip_or_fail(&skip);
            None
        }
    }
}

/// The backends whose device is a GPU of one vendor.
pub const GPU_BACKENDS: [DeviceKind; 2] = [DeviceKind::Cuda, DeviceKind::Rocm];

/// What `W4A16_REQUIRE` names to demand this backend.
pub fn requirement(kind: DeviceKind) -> Requirement {
    match kind {
        DeviceKind::Cuda => Requirement::Cuda,
        DeviceKind::Rocm => Requirement::Rocm,
        DeviceKind::Simulated => panic!("a simulated device is no backend of a GPU test"),
        DeviceKind::Emulator => Requirement::AmdToolchain,
    }
}

/// The GPU backends that open on this machine, probed once per test binary (only when a skip
/// under `W4A16_REQUIRE=gpu` asks).
fn opening_here() -> &'static [DeviceKind] {
    static OPEN: OnceLock<Vec<DeviceKind>> = OnceLock::new();
    OPEN.get_or_init(|| {
        GPU_BACKENDS
            .into_iter()
            .filter(|&k| open(DeviceRequest::kind(k)).is_ok())
            .collect()
    })
}

/// A loud skip of this backend's case, or a failure under the per-vendor rule.
pub fn skip_or_fail(kind: DeviceKind, skip: &Skip) {
    backend_skip_or_fail(requirement(kind), skip, || {
        opening_here().iter().any(|&k| k != kind)
    });
}

/// This backend's device, or `None` after [`skip_or_fail`].
pub fn device(kind: DeviceKind) -> Option<Box<dyn DeviceBench>> {
    match open(DeviceRequest::kind(kind)) {
        Ok(d) => Some(d),
        Err(skip) => {
            skip_or_fail(kind, &skip);
            None
        }
    }
}
