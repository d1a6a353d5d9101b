//! The full reference with its products from an outside f64 GEMM (the GPU's DGEMM): the
//! exact weights `(q − z)·s` and X are built here in f64 by the CPU reference's own decoding
//! ([`gemm::weight_rows`](crate::gemm::weight_rows),
//! [`gemm::activation_rows`](crate::gemm::activation_rows)), handed to the GEMM in column chunks
//! (so that W in f64 stays under `w_max_bytes`), and the results assembled into the same
//! [`Reference`](crate::gemm::Reference) the CPU computes: bias added, special rows patched,
//! every element present, so the comparison judges every element of every shape (no sampling).
//!
//! The GEMM is not trusted: a seeded sample of elements is recomputed on the CPU from the same
//! decoded rows and must agree within [`cross_check_tolerance`] ([`OffloadError::Disagrees`],
//! a fault of the reference, not of the kernel under test).
//!
//! Two paths: [`reference_offloaded`] brings the products to the host ([`F64Gemm`]);
//! [`reference_held`] leaves them where they were formed and judges them there
//! ([`HeldGemm`]).

mod cross_check;
mod error;
mod held;
mod layer_weights;
mod offloaded;
mod operands;
mod weight_cache;

#[cfg(test)]
mod tests;

pub use cross_check::{CROSS_CHECK_SAMPLES, cross_check_tolerance, sample_positions};
pub use error::{GemmError, Lane, OffloadError};
pub use held::{HeldGemm, HeldProducts, HeldReference, reference_held};
pub use layer_weights::LayerWeights;
pub use offloaded::{DEFAULT_W_MAX_BYTES, F64Gemm, reference_offloaded};
pub use operands::{ActivationOperand, RawLanes, WeightOperand};
pub use weight_cache::WEIGHT_CACHE_BYTES;
