//! docs/contract.md §6 "The range edge": when a non-finite result is correct, how two results
//! agree, and the bits an exact-accumulator kernel produces.

use crate::bound::BoundModel;
use crate::dtype::ActDtype;
use crate::recipe::BiasStage;

/// docs/contract.md §6 "The range edge": the ratio of the error to the bound for a result `bits`
/// against the exact value `y`, where either may be non-finite. `None` for a result that no real in
/// `[y − bound, y + bound]` can round to whatever the bound (a NaN where `y` is not NaN, a
/// finite value or the wrong infinity where `y` is ±Inf or NaN, the opposite infinity).
/// `Some(r)` with `r ≤ 1` means acceptable. `bound` is evaluated only where it is needed.
pub fn element_ratio(
    dtype: ActDtype,
    bits: u16,
    y: f64,
    bound: impl FnOnce() -> f64,
) -> Option<f64> {
    let finite = dtype.is_finite_bits(bits);
    if y.is_nan() {
        return dtype.is_nan_bits(bits).then_some(0.0);
    }
    if y.is_infinite() {
        // IEEE inputs: Inf of the same sign exactly.
        return (bits == dtype.from_f64(y)).then_some(0.0);
    }
    if finite {
        return Some((dtype.to_f64(bits) - y).abs() / bound());
    }
    if dtype.is_nan_bits(bits) {
        return None;
    }
    let negative = bits & 0x8000 != 0;
    Some(infinity_ratio(dtype, negative, y, bound()))
}

/// How far the exact value `y` is from the reals that round to ±Inf, over the bound: 0 when `y`
/// itself rounds to that infinity, ≤ 1 when `[y − bound, y + bound]` reaches the overflow
/// threshold on that side (the infinity is then a correct result).
pub fn infinity_ratio(dtype: ActDtype, negative: bool, y: f64, bound: f64) -> f64 {
    let t = dtype.overflow_threshold();
    let distance = if negative { y + t } else { t - y };
    distance.max(0.0) / bound
}

/// Whether a result is acceptable for the exact value `y` and its bound (docs/contract.md §6,
/// with the range edge): [`element_ratio`] at most 1.
pub fn acceptable(dtype: ActDtype, bits: u16, y: f64, bound: f64) -> bool {
    element_ratio(dtype, bits, y, || bound).is_some_and(|r| r <= 1.0)
}

/// Whether two kernels' results agree within `tol` of each other under the same range-edge rule:
/// both finite and within `tol`; both the same infinity or both NaN; or one ±Inf and the other a
/// finite value within `tol` of that infinity's overflow threshold (both correct roundings of
/// some real between them).
pub fn agree_within(dtype: ActDtype, a: u16, b: u16, tol: f64) -> bool {
    let (fa, fb) = (dtype.is_finite_bits(a), dtype.is_finite_bits(b));
    match (fa, fb) {
        (true, true) => (dtype.to_f64(a) - dtype.to_f64(b)).abs() <= tol,
        (false, false) => a == b || (dtype.is_nan_bits(a) && dtype.is_nan_bits(b)),
        (true, false) | (false, true) => {
            let (v, inf) = if fa { (a, b) } else { (b, a) };
            !dtype.is_nan_bits(inf) && acceptable(dtype, inf, dtype.to_f64(v), tol)
        }
    }
}

/// The bits an exact-accumulator kernel of this recipe produces: one rounding of `y`, or for
/// bias-after-cast recipes `fl(fl(y − b) + b)` (the accumulator is cast before the bias is added).
/// For [`BiasStage::Either`] this is the single rounding; the comparison also accepts the other.
#[inline]
pub fn correctly_rounded(dtype: ActDtype, model: &BoundModel, y: f64, bias: f64) -> u16 {
    match model.recipe.bias {
        BiasStage::AfterCast if bias != 0.0 => rounded_after_cast(dtype, y, bias),
        _ => dtype.from_f64(y),
    }
}

#[inline]
pub(super) fn rounded_after_cast(dtype: ActDtype, y: f64, bias: f64) -> u16 {
    dtype.from_f64(dtype.to_f64(dtype.from_f64(y - bias)) + bias)
}
