//! Emulated AMD targets: a gfx11/gfx12 target's configuration compiled by NVRTC and run on an
//! NVIDIA GPU. The kernels take their AMD branches (wave32 ALU skinny engine, the target's WMMA
//! fragment layout, software bf16, synchronous copies) and the AMD builtins are replaced by
//! portable emulations (`kernels/hip/amd_emulation.h`). Selection, tiles and padding are the
//! AMD target's, because the host side reads the target, not the GPU it runs on.
//!
//! Emulation checks the AMD algorithms and layouts, not the AMD hardware.

use crate::target::Target;

/// The macro that switches `compat.h` into emulation of one AMD target.
pub const EMULATE_MACRO: &str = "W4_EMULATE_AMD";

/// A target that has no emulated configuration (only the RDNA code-object targets do).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{target} has no emulated configuration; emulated targets: gfx1100, gfx1151, gfx1201")]
pub struct NotEmulable {
    pub target: Target,
}

/// The gfx number `compat.h` reads from [`EMULATE_MACRO`] (1100, 1151, 1201).
pub fn gfx_number(target: Target) -> Result<u32, NotEmulable> {
    match target {
        Target::Gfx1100 => Ok(1100),
        Target::Gfx1151 => Ok(1151),
        Target::Gfx1201 => Ok(1201),
        Target::Gfx942 | Target::Sm90 => Err(NotEmulable { target }),
    }
}

/// Multiply-adds (M·N·K) above which a case is not run on an emulated target. The emulated WMMA
/// gathers its operands with about ninety shuffles per 16×16×16 product where the hardware spends
/// one instruction, so emulated fused launches run two orders of magnitude slower than native
/// ones: on the H200, with 14 workers sharing it, every fp16 field case from 3.6·10¹¹ MACs up
/// outlived the 20 s hang watchdog on gfx1100-emu, while everything below finished. 2³⁷
/// (1.4·10¹¹) keeps a factor 2.6 from the smallest that did not. Every case of the differential
/// suites is within it (a test checks); the field matrix loses its largest prefill shapes (124 of
/// 2128 cases) on emulated targets only, and says so when it runs.
pub const MAX_CASE_MACS: u64 = 1 << 37;

/// Whether a case of `m` rows on an N×K layer has at most `max` multiply-adds (no overflow for
/// any sizes): the test of every emulation budget, this one's and the ISA emulator's.
pub fn macs_within(m: usize, n: usize, k: usize, max: u64) -> bool {
    (m as u128)
        .checked_mul(n as u128)
        .and_then(|mn| mn.checked_mul(k as u128))
        .is_some_and(|macs| macs <= max as u128)
}

/// The extra NVRTC options that compile the kernel set in `target`'s AMD configuration.
pub fn nvrtc_options(target: Target) -> Result<Vec<String>, NotEmulable> {
    Ok(vec![format!("-D{EMULATE_MACRO}={}", gfx_number(target)?)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_inclusive_and_does_not_overflow() {
        let within = |m, n, k| macs_within(m, n, k, MAX_CASE_MACS);
        assert!(within(1 << 17, 1 << 10, 1 << 10));
        assert!(!within((1 << 17) + 1, 1 << 10, 1 << 10));
        assert!(!within(usize::MAX, usize::MAX, usize::MAX));
        assert!(within(0, usize::MAX, usize::MAX));
    }

    #[test]
    fn only_the_rdna_code_object_targets_are_emulable() {
        for t in Target::ALL {
            let emulable = Target::AMD_CODE_OBJECT_TARGETS.contains(&t);
            assert_eq!(nvrtc_options(t).is_ok(), emulable, "{t}");
        }
        assert_eq!(
            nvrtc_options(Target::Gfx1151).unwrap(),
            vec!["-DW4_EMULATE_AMD=1151".to_string()]
        );
    }
}
