//! The unified W4A16 kernel set: HIP C++ sources under `kernels/hip/` and, here, the one place
//! each kernel is declared (launch ABI, tensor contract, numeric recipe, geometry, tiles).
//! Launch packing, launch-boundary validation and the code-object ABI checks all read these
//! declarations; nothing repeats them.

pub mod amd;
pub mod decl;
pub mod emulation;
pub mod glob;
pub mod mutants;
pub mod nvrtc;
pub mod set;
pub mod source;
pub mod target;
pub mod tiles;
pub mod xfail;

pub use decl::{ArgDecl, ArgKind, KernelDecl, KernelId, RoutedDims, ScalarArg, TensorRole, Tile};
pub use target::{Execution, RunTarget, Target};

#[cfg(test)]
mod named_tests {
    w4a16_reference::named_enum_tests! {
        kernel_id: crate::KernelId,
        target: crate::Target,
        source_file: crate::source::SourceFile,
    }

    /// The names snapshots, case files and reports use; `sm90` is still read from a command line.
    #[test]
    fn names_are_the_ones_on_disk() {
        use crate::{KernelId, Target};
        assert_eq!(
            Target::NAMES,
            ["gfx1100", "gfx1151", "gfx1201", "gfx942", "sm_90"]
        );
        assert_eq!(Target::parse("sm90"), Some(Target::Sm90));
        assert_eq!(
            KernelId::NAMES,
            [
                "skinny",
                "fused",
                "dequant",
                "dense",
                "fallback",
                "moe_align",
                "moe",
                "fused_carrier"
            ]
        );
    }
}
