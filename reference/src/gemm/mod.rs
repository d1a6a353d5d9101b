//! The f64 reference (docs/contract.md §6): per output element the value `y` and the magnitude
//! `a = Σ_k |x_k|·|w_k|` (and, for offset-accumulating and pre-rounded-bias recipes,
//! `a_offset`, see
//! [`NumericRecipe::magnitude_offset`](crate::recipe::NumericRecipe::magnitude_offset)).
//!
//! Every product `x·w` is exact in f64 (an 11-bit significand times a 5-bit integer times an
//! 11-bit significand), so the only error in `y` is the f64 summation, at most
//! `γ64_{K+1}·(a + |bias|)`; bound.rs adds that term explicitly. Exact-class data (small integers,
//! power-of-two scales) sum without any error, which is what the bit-exact mode relies on.
//!
//! W is never dequantized whole: [`weight_pass`] decodes it tile by tile into f64 and multiplies
//! each tile by a set of "lanes" (X rows, Freivalds combinations, magnitudes). Many lanes go
//! through `ndarray`'s `general_mat_mul` (matrixmultiply, AVX2/FMA chosen at run time); a few
//! lanes through a fused loop that reads each decoded value once for all of them. X is handled
//! the same way by [`activation_pass`]. Work is split into a fixed number of contiguous rayon
//! tasks whose partial sums are added in order, so results do not depend on scheduling.
//! (The `gemm` crate only exposes an `unsafe fn`, which this crate forbids.)

mod activation_pass;
mod decode;
mod lines;
mod reference;
mod special;
mod validate;
mod weight_pass;

#[cfg(test)]
mod tests;

pub use reference::{
    LineAxis, Lines, Reference, WeightRounding, reference, reference_cols, reference_rows,
    reference_with, reference_with_rounding,
};
pub use special::{SpecialRow, SpecialRows};
pub use validate::{
    InputError, NonFiniteX, validate, validate_against_layer, validate_layer, validate_with,
};

pub(crate) use activation_pass::{ActivationLanes, activation_pass};
pub(crate) use decode::{bias_values, bits_to_f64};
pub(crate) use lines::{
    activation_rows, cols_from_pass, cols_unchecked, elements_unchecked, rows_from_pass,
    rows_unchecked, weight_rows, weight_rows_into,
};
pub(crate) use validate::mismatch;
pub(crate) use weight_pass::{WeightLanes, weight_pass};
