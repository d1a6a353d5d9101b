//! The unified W4A16 kernel set: HIP C++ sources under `kernels/hip/` and, here, the one place
//! each kernel is declared (launch ABI, tensor contract, numeric recipe, geometry, tiles).
//! Launch packing, launch-boundary validation and the code-object ABI checks all read these
//! declarations; nothing repeats them.

pub mod amd;
pub mod decl;
pub mod emulation;
pub mod mutants;
pub mod nvrtc;
pub mod set;
pub mod source;
pub mod target;
pub mod tiles;

pub use decl::{ArgDecl, ArgKind, KernelDecl, KernelId, RoutedDims, ScalarArg, TensorRole, Tile};
pub use target::{Execution, RunTarget, Target};
