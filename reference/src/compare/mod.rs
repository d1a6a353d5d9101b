//! Kernel output against the reference: the error/bound ratio per element, NaN/Inf, poison left
//! behind, and bit-exact agreement with the correctly rounded result.
//!
//! Rules: an element still holding the poison pattern counts in `poison_left` only. The rest
//! follows docs/contract.md §6 "The range edge" ([`acceptable`]): a finite result gets
//! `ratio = |ŷ − y| / bound`; ±Inf is a correct result where `[y − bound, y + bound]` reaches the
//! dtype's overflow threshold on that side
//! ([`ActDtype::overflow_threshold`](crate::dtype::ActDtype::overflow_threshold)), with the ratio
//! `distance from y to the threshold / bound` ([`infinity_ratio`], 0 when y itself rounds to
//! Inf); NaN is correct only where the reference is NaN, and a reference NaN or ±Inf (IEEE
//! inputs, the special-values class) must be matched exactly. Everything else non-finite counts
//! in `nonfinite`. Bit-exact agreement is with what a kernel with an exact accumulator produces
//! under the recipe ([`correctly_rounded`], which may be ±Inf) and treats +0 and −0 as equal
//! (the sign of an exact zero depends on summation order, not on the mathematics) and any two
//! NaNs as equal.

mod buckets;
mod judge;
mod output;
mod range_edge;
mod report;

#[cfg(test)]
mod tests;

pub use buckets::{RATIO_BUCKETS, bucket, bucket_index};
pub(crate) use judge::compare_lines;
pub use judge::{JudgeRequest, compare, compare_bit_exact, compare_library_output, judge_plain};
pub use output::OutputBits;
pub(crate) use output::{check_model, check_model_for};
pub use range_edge::{acceptable, agree_within, correctly_rounded, element_ratio, infinity_ratio};
pub use report::{CompareMode, CompareReport};
