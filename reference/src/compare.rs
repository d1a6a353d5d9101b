//! Kernel output against the reference: the error/bound ratio per element, NaN/Inf, poison left
//! behind, and bit-exact agreement with the correctly rounded result.
//!
//! Rules: an element still holding the poison pattern counts in `poison_left` only. The rest
//! follows docs/contract.md §6 "The range edge" ([`acceptable`]): a finite result gets
//! `ratio = |ŷ − y| / bound`; ±Inf is a correct result where `[y − bound, y + bound]` reaches the
//! dtype's overflow threshold on that side ([`ActDtype::overflow_threshold`]), with the ratio
//! `distance from y to the threshold / bound` ([`infinity_ratio`], 0 when y itself rounds to
//! Inf); NaN is correct only where the reference is NaN, and a reference NaN or ±Inf (IEEE
//! inputs, the special-values class) must be matched exactly. Everything else non-finite counts
//! in `nonfinite`. Bit-exact agreement is with what a kernel with an exact accumulator produces
//! under the recipe ([`correctly_rounded`], which may be ±Inf) and treats +0 and −0 as equal
//! (the sign of an exact zero depends on summation order, not on the mathematics) and any two
//! NaNs as equal.

use crate::bound::{BoundModel, BoundTerms};
use crate::dtype::ActDtype;
use crate::gemm::{
    InputError, Lines, NonFiniteX, Reference, WeightRounding, reference_with_rounding,
};
use crate::layer::{Activations, QuantizedLayer};
use crate::recipe::{BiasStage, NumericRecipe};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Bucket labels for snapshots, in order. Edges are powers of two (1/64, 1/16, 1/4, 1/2, 1):
/// coarse enough that a run-to-run change of a few ulps never moves a snapshot, fine enough
/// that drift toward the bound shows long before a failure.
pub const RATIO_BUCKETS: [&str; 7] = ["0", "<1/64", "<1/16", "<1/4", "<1/2", "<1", ">=1"];

/// Index into [`RATIO_BUCKETS`]; NaN goes to the last bucket.
#[inline]
pub fn bucket_index(ratio: f64) -> usize {
    const EDGES: [f64; 5] = [1.0 / 64.0, 1.0 / 16.0, 0.25, 0.5, 1.0];
    if ratio == 0.0 {
        0
    } else if ratio.is_nan() {
        RATIO_BUCKETS.len() - 1
    } else {
        // Counted, not searched: ratios spread over the buckets, and a branch per edge is
        // mispredicted per element.
        1 + EDGES
            .iter()
            .map(|&e| usize::from(ratio >= e))
            .sum::<usize>()
    }
}

/// Relative width of the band below the worst ratio so far inside which the comparison forms
/// the quotient itself: far wider than the rounding of `worst·bound` (2⁻⁵³).
const RATIO_HAIR: f64 = 1.0 / (1u64 << 40) as f64;

/// Bounds from here up keep `edge·bound` a normal number for every bucket edge (the smallest
/// is 2⁻⁶), so the products [`ratio_class`] compares against are exact.
const SMALLEST_CLASSIFIED_BOUND: f64 = f64::MIN_POSITIVE * 64.0;

/// The bucket of `fl(err / bound)` for an error `err ≥ 0` and a finite bound of at least
/// [`SMALLEST_CLASSIFIED_BOUND`], without dividing. The edges are powers of two, so
/// `P = edge·bound` is exact. `err ≥ P` means the quotient, and so its rounding, is at least
/// the edge. `err < P` means `err` is at most P's predecessor, `P·(1 − 2⁻⁵³)` or lower, so the
/// quotient is at most `edge·(1 − 2⁻⁵³)`, the edge's own predecessor: its rounding stays below
/// the edge. The same argument at the edge 1 makes `err > bound` the test `fl(err/bound) > 1`.
#[inline]
fn ratio_class(err: f64, bound: f64) -> usize {
    const EDGES: [f64; 5] = [1.0 / 64.0, 1.0 / 16.0, 0.25, 0.5, 1.0];
    if err == 0.0 {
        return 0;
    }
    1 + EDGES
        .iter()
        .map(|&edge| usize::from(err >= edge * bound))
        .sum::<usize>()
}

/// The snapshot label of a ratio.
pub fn bucket(ratio: f64) -> &'static str {
    RATIO_BUCKETS[bucket_index(ratio)]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompareMode {
    /// Passes when every element is within its bound.
    Bound,
    /// Passes when every element equals the correctly rounded reference (exact-class data).
    BitExact,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    pub mode: CompareMode,
    /// Largest `|ŷ − y| / bound` over finite elements (0 when none).
    pub worst_ratio: f64,
    /// Where the worst ratio is; ties go to the smallest `(m, n)` so reports are deterministic.
    pub worst_at: Option<(usize, usize)>,
    pub over_bound: usize,
    pub nonfinite: usize,
    pub poison_left: usize,
    pub checked: usize,
    /// Elements whose bits differ from the correctly rounded reference.
    pub exact_mismatches: usize,
    /// Element counts per [`RATIO_BUCKETS`] (finite elements only).
    pub buckets: [usize; 7],
}

impl CompareReport {
    pub fn new(mode: CompareMode) -> Self {
        CompareReport {
            mode,
            worst_ratio: 0.0,
            worst_at: None,
            over_bound: 0,
            nonfinite: 0,
            poison_left: 0,
            checked: 0,
            exact_mismatches: 0,
            buckets: [0; 7],
        }
    }

    pub fn passed(&self) -> bool {
        let values_ok = match self.mode {
            CompareMode::Bound => self.over_bound == 0,
            CompareMode::BitExact => self.exact_mismatches == 0,
        };
        values_ok && self.nonfinite == 0 && self.poison_left == 0
    }

    pub fn worst_bucket(&self) -> &'static str {
        bucket(self.worst_ratio)
    }

    /// Folds another report (of the same mode) into this one.
    pub fn merge(&mut self, other: &CompareReport) {
        let better = match (self.worst_at, other.worst_at) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(a), Some(b)) => {
                other.worst_ratio > self.worst_ratio
                    || (other.worst_ratio == self.worst_ratio && b < a)
            }
        };
        if better {
            self.worst_ratio = other.worst_ratio;
            self.worst_at = other.worst_at;
        }
        self.over_bound += other.over_bound;
        self.nonfinite += other.nonfinite;
        self.poison_left += other.poison_left;
        self.checked += other.checked;
        self.exact_mismatches += other.exact_mismatches;
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            *a += b;
        }
    }

    /// [`CompareReport::record`] for the elements of one output row (`y`, `a`, `acc`, `bias`
    /// and `bits` all of its length), a block at a time: the arithmetic of every element
    /// first (the result's value, the correctly rounded bits, the ratio to the bound) in
    /// branch-free passes the compiler vectorizes, then the counting. The common element (a
    /// finite result of a finite reference) is judged from those; the others, and the poison,
    /// go through `record`. The report is the one `record` element by element gives (tested).
    /// Returns how many elements went through `record` (the on-device judge leaves exactly
    /// those to the host: [`judge_plain`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_row(
        &mut self,
        m: usize,
        bits: &[u16],
        dtype: ActDtype,
        y: &[f64],
        a: &[f64],
        acc: &[f64],
        bias: &[f64],
        model: &BoundModel,
    ) -> usize {
        const BLOCK: usize = 256;
        let mut special = 0;
        let poison = dtype.poison_bits();
        let stage = model.recipe.bias;
        let (with, without) = (model.terms(true), model.terms(false));
        let mut value = [0f64; BLOCK];
        let mut rounded = [0u16; BLOCK];
        let mut err = [0f64; BLOCK];
        let mut bound = [0f64; BLOCK];
        for j0 in (0..bits.len()).step_by(BLOCK) {
            let j1 = (j0 + BLOCK).min(bits.len());
            let (b, yb, ab, accb, bb) = (
                &bits[j0..j1],
                &y[j0..j1],
                &a[j0..j1],
                &acc[j0..j1],
                &bias[j0..j1],
            );
            let len = b.len();
            let (value, rounded) = (&mut value[..len], &mut rounded[..len]);
            let (err, bound) = (&mut err[..len], &mut bound[..len]);
            crate::gemm::bits_to_f64(dtype, b, value);
            dtype.from_f64_slice(yb, rounded);
            for j in 0..len {
                // The terms chosen coefficient by coefficient (selects, not a pointer).
                let nz = bb[j] != 0.0;
                let pick = |w: f64, wo: f64| if nz { w } else { wo };
                let t = BoundTerms {
                    accumulation: pick(with.accumulation, without.accumulation),
                    weight: pick(with.weight, without.weight),
                    y: pick(with.y, without.y),
                    y_pre_bias: pick(with.y_pre_bias, without.y_pre_bias),
                    floor: pick(with.floor, without.floor),
                };
                bound[j] = t.eval(accb[j], ab[j], yb[j].abs(), (yb[j] - bb[j]).abs());
                err[j] = (value[j] - yb[j]).abs();
            }
            for j in 0..len {
                let (bj, yj, biasj) = (b[j], yb[j], bb[j]);
                let (e, bd) = (err[j], bound[j]);
                let plain = bd.is_finite() && bd >= SMALLEST_CLASSIFIED_BOUND;
                if bj == poison || !dtype.is_finite_bits(bj) || !yj.is_finite() || !plain {
                    let at = (m, j0 + j);
                    self.record(at, bj, dtype, yj, ab[j], accb[j], biasj, model);
                    special += 1;
                    continue;
                }
                self.checked += 1;
                // ±0 are equal; no NaN here (a finite result).
                let same = |x: u16| bj == x || (bj & 0x7FFF == 0 && x & 0x7FFF == 0);
                let matched = match stage {
                    BiasStage::AfterCast if biasj != 0.0 => {
                        same(rounded_after_cast(dtype, yj, biasj))
                    }
                    BiasStage::Either if biasj != 0.0 => {
                        same(rounded[j]) || same(rounded_after_cast(dtype, yj, biasj))
                    }
                    _ => same(rounded[j]),
                };
                self.exact_mismatches += usize::from(!matched);
                // The bucket and the bound by exact comparisons (see `ratio_class`); the
                // ratio `fl(e / bd)` itself only where it may be the worst so far.
                self.buckets[ratio_class(e, bd)] += 1;
                self.over_bound += usize::from(e > bd);
                if self.worst_at.is_some() && e <= self.worst_ratio * bd * (1.0 - RATIO_HAIR) {
                    continue;
                }
                let r = e / bd;
                // Visited in (m, n) order: a tie never moves the worst position.
                if self.worst_at.is_none() || r > self.worst_ratio {
                    self.worst_ratio = r;
                    self.worst_at = Some((m, j0 + j));
                }
            }
        }
        special
    }

    /// Checks one element. `acc_magnitude` is `a_offset` for offset recipes, else `a`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record(
        &mut self,
        at: (usize, usize),
        bits: u16,
        dtype: ActDtype,
        y: f64,
        a: f64,
        acc_magnitude: f64,
        bias: f64,
        model: &BoundModel,
    ) {
        self.checked += 1;
        if bits == dtype.poison_bits() {
            self.poison_left += 1;
            self.exact_mismatches += 1;
            return;
        }
        let expected = correctly_rounded(dtype, model, y, bias);
        let matches = |e: u16| {
            bits == e
                || (bits & 0x7FFF == 0 && e & 0x7FFF == 0)
                || (dtype.is_nan_bits(bits) && dtype.is_nan_bits(e))
        };
        let also = (model.recipe.bias == BiasStage::Either && bias != 0.0)
            .then(|| rounded_after_cast(dtype, y, bias));
        if !(matches(expected) || also.is_some_and(matches)) {
            self.exact_mismatches += 1;
        }
        let ratio = if y.is_finite() && dtype.is_finite_bits(bits) {
            (dtype.to_f64(bits) - y).abs() / model.element(y, a, acc_magnitude, bias)
        } else {
            match element_ratio(dtype, bits, y, || model.element(y, a, acc_magnitude, bias)) {
                Some(r) if r <= 1.0 => r,
                _ => {
                    self.nonfinite += 1;
                    return;
                }
            }
        };
        self.buckets[bucket_index(ratio)] += 1;
        if ratio > 1.0 {
            self.over_bound += 1;
        }
        if self.worst_at.is_none()
            || ratio > self.worst_ratio
            || (ratio == self.worst_ratio && Some(at) < self.worst_at)
        {
            self.worst_ratio = ratio;
            self.worst_at = Some(at);
        }
    }
}

/// docs/contract.md §6 "The range edge": the ratio of the error to the bound for a result `bits` against the
/// exact value `y`, where either may be non-finite. `None` for a result that no real in
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

/// Whether a result is acceptable for the exact value `y` and its bound (docs/contract.md §6, with the
/// range edge): [`element_ratio`] at most 1.
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
fn rounded_after_cast(dtype: ActDtype, y: f64, bias: f64) -> u16 {
    dtype.from_f64(dtype.to_f64(dtype.from_f64(y - bias)) + bias)
}

/// A kernel's output: `[M, N]` bits of the activation dtype with a row stride in elements.
#[derive(Clone, Copy, Debug)]
pub struct OutputBits<'a> {
    pub bits: &'a [u16],
    pub row_stride: usize,
}

impl<'a> OutputBits<'a> {
    pub fn new(bits: &'a [u16], row_stride: usize) -> Self {
        OutputBits { bits, row_stride }
    }

    pub fn get(&self, m: usize, n: usize) -> u16 {
        self.bits[m * self.row_stride + n]
    }

    /// Checks that an `[m, n]` output fits.
    pub fn validate(&self, m: usize, n: usize) -> Result<(), InputError> {
        if self.row_stride < n {
            return Err(InputError::Mismatch {
                what: "Y row stride",
                expected: format!("≥ N = {n}"),
                got: self.row_stride.to_string(),
            });
        }
        let needed = if m == 0 {
            0
        } else {
            (m - 1) * self.row_stride + n
        };
        if self.bits.len() < needed {
            return Err(InputError::Mismatch {
                what: "Y data length",
                expected: format!("≥ {needed}"),
                got: self.bits.len().to_string(),
            });
        }
        Ok(())
    }
}

pub(crate) fn check_model(
    model: &BoundModel,
    k: usize,
    dtype: ActDtype,
    has_offset: bool,
) -> Result<(), InputError> {
    if model.k != k {
        return Err(InputError::Mismatch {
            what: "bound model K",
            expected: k.to_string(),
            got: model.k.to_string(),
        });
    }
    if model.recipe.output != dtype {
        return Err(InputError::Mismatch {
            what: "bound model output dtype",
            expected: dtype.to_string(),
            got: model.recipe.output.to_string(),
        });
    }
    if model.uses_offset() != has_offset {
        return Err(InputError::Mismatch {
            what: "reference a_offset (recipe offset_accumulation)",
            expected: if model.uses_offset() {
                "present"
            } else {
                "absent"
            }
            .into(),
            got: if has_offset { "present" } else { "absent" }.into(),
        });
    }
    Ok(())
}

/// Every element against its bound.
pub fn compare(
    reference: &Reference,
    model: &BoundModel,
    out: OutputBits<'_>,
) -> Result<CompareReport, InputError> {
    compare_mode(reference, model, out, CompareMode::Bound)
}

/// Every element against the correctly rounded reference, bit for bit (ratios still reported).
pub fn compare_bit_exact(
    reference: &Reference,
    model: &BoundModel,
    out: OutputBits<'_>,
) -> Result<CompareReport, InputError> {
    compare_mode(reference, model, out, CompareMode::BitExact)
}

fn compare_mode(
    reference: &Reference,
    model: &BoundModel,
    out: OutputBits<'_>,
    mode: CompareMode,
) -> Result<CompareReport, InputError> {
    check_model(
        model,
        reference.k,
        reference.dtype,
        reference.a_offset.is_some(),
    )?;
    out.validate(reference.m, reference.n)?;
    let (n, dtype) = (reference.n, reference.dtype);
    let report = (0..reference.m)
        .into_par_iter()
        .fold(
            || CompareReport::new(mode),
            |mut rep, m| {
                let row = m * n..(m + 1) * n;
                let (y, a) = (&reference.y[row.clone()], &reference.a[row.clone()]);
                let acc = reference.a_offset.as_ref().map_or(a, |o| &o[row]);
                let bits = &out.bits[m * out.row_stride..m * out.row_stride + n];
                rep.record_row(m, bits, dtype, y, a, acc, &reference.bias, model);
                rep
            },
        )
        .reduce(
            || CompareReport::new(mode),
            |mut a, b| {
                a.merge(&b);
                a
            },
        );
    Ok(report)
}

/// What a judge next to the reference's lanes needs (the GPU reference judges on the device,
/// `offload::ResidentReference`): the output, the bound, and the bias the raw products get
/// before they are compared.
#[derive(Clone, Copy, Debug)]
pub struct JudgeRequest<'a> {
    pub out: OutputBits<'a>,
    /// Its recipe's output dtype and bias stage, and its coefficients with and without a bias
    /// ([`BoundModel::terms`]), are all a judge reads.
    pub model: BoundModel,
    pub mode: CompareMode,
    /// `[N]`; added to the raw products only where the layer has a bias (`has_bias`), as the
    /// host reference does.
    pub bias: &'a [f64],
    pub has_bias: bool,
}

/// The host twin of the on-device judge: the report of `[M, N]` raw lanes (`y` before the
/// bias, `a`, and `acc` = `a_offset` where the recipe has one) against `request.out`, or `None`
/// when any element is not plain (poison, a non-finite result or reference, a bound out of
/// range), which only the host's full rules judge. A device's judge must return exactly this;
/// it is the oracle of that test, and the judge of host-held lanes.
pub fn judge_plain(
    request: &JudgeRequest<'_>,
    m: usize,
    n: usize,
    y: &[f64],
    a: &[f64],
    acc: Option<&[f64]>,
) -> Option<CompareReport> {
    let mut report = CompareReport::new(request.mode);
    let mut row_y = vec![0.0; n];
    for r in 0..m {
        let row = r * n..(r + 1) * n;
        row_y.copy_from_slice(&y[row.clone()]);
        if request.has_bias {
            row_y
                .iter_mut()
                .zip(request.bias)
                .for_each(|(v, b)| *v += b);
        }
        let bits = &request.out.bits[r * request.out.row_stride..][..n];
        let acc = acc.map_or(&a[row.clone()], |o| &o[row.clone()]);
        let special = report.record_row(
            r,
            bits,
            request.model.recipe.output,
            &row_y,
            &a[row],
            acc,
            request.bias,
            &request.model,
        );
        if special > 0 {
            return None;
        }
    }
    Some(report)
}

/// Judges a dequantize-then-matmul library's output `[M, N]` (bits of the activation dtype,
/// e.g. torch's `F.linear(x, w)` on compressed-tensors' decompressed `w`): against the reference
/// on the weights rounded to the activation dtype ([`WeightRounding::ToActivationDtype`]), every
/// element within `c_target·γ_K·a + u_out·|y|` (plus the small terms of [`BoundModel`]), the bias
/// added before or after the cast ([`NumericRecipe::dequantize_then_matmul`]). The bound assumes
/// fp32 accumulation: torch's reduced-precision reductions (the `allow_*_reduced_precision_
/// reduction` switches) are outside it.
pub fn compare_library_output(
    x: &Activations,
    layer: &QuantizedLayer,
    out: OutputBits<'_>,
    c_target: f64,
) -> Result<CompareReport, InputError> {
    let recipe = NumericRecipe::dequantize_then_matmul(layer.dtype);
    let model = BoundModel::new(&recipe, layer.shape.k, c_target)?;
    let reference = reference_with_rounding(
        x,
        layer,
        &recipe,
        NonFiniteX::Refuse,
        WeightRounding::ToActivationDtype,
    )?;
    compare(&reference, &model, out)
}

/// Reference lines against the output, one report per line (sampled verification).
pub(crate) fn compare_lines(
    lines: &Lines,
    model: &BoundModel,
    dtype: ActDtype,
    out: OutputBits<'_>,
) -> Vec<CompareReport> {
    (0..lines.index.len())
        .into_par_iter()
        .map(|i| {
            let mut rep = CompareReport::new(CompareMode::Bound);
            for j in 0..lines.len {
                let e = i * lines.len + j;
                let (m, n) = lines.coords(i, j);
                let a = lines.a[e];
                let acc = lines.a_offset.as_ref().map_or(a, |o| o[e]);
                rep.record(
                    (m, n),
                    out.get(m, n),
                    dtype,
                    lines.y[e],
                    a,
                    acc,
                    lines.bias[n],
                    model,
                );
            }
            rep
        })
        .collect()
}

pub(crate) fn check_model_for(
    model: &BoundModel,
    k: usize,
    dtype: ActDtype,
) -> Result<(), InputError> {
    check_model(model, k, dtype, model.uses_offset())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The bucket and the over-bound test without the quotient agree with the quotient's, at
    /// the edges exactly, a few ulps either side, and at random.
    #[test]
    fn the_ratio_class_is_the_bucket_of_the_rounded_quotient() {
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let edges = [1.0 / 64.0, 1.0 / 16.0, 0.25, 0.5, 1.0];
        for _ in 0..200_000 {
            let bound = r.random_range(0.5..2.0) * 2f64.powi(r.random_range(-60..40));
            let mut errs = vec![0.0, bound * r.random_range(0.0..1.5), f64::MIN_POSITIVE];
            for e in edges {
                let at = e * bound;
                errs.extend([at, at.next_up(), at.next_down(), at * (1.0 - 1e-13)]);
                errs.push(at.next_down().next_down());
                errs.push(at.next_up().next_up());
            }
            for err in errs {
                let q = err / bound;
                assert_eq!(
                    ratio_class(err, bound),
                    bucket_index(q),
                    "{err:e} / {bound:e}"
                );
                assert_eq!(err > bound, q > 1.0, "{err:e} / {bound:e}");
            }
        }
        // The smallest bound classified, with every mantissa at the edges.
        for bits in 0..4096u64 {
            let bound = f64::from_bits(SMALLEST_CLASSIFIED_BOUND.to_bits() + (bits << 40));
            for e in edges {
                let at = e * bound;
                for err in [at, at.next_up(), at.next_down()] {
                    assert_eq!(ratio_class(err, bound), bucket_index(err / bound));
                }
            }
        }
    }

    /// The report of a row judged in blocks is the report of `record` element by element: every
    /// kind of element (poison, NaN, ±Inf, ±0, one ulp off, far off, a NaN or Inf reference),
    /// with and without bias, for every bias stage and an offset lane, in both dtypes.
    #[test]
    fn rows_judged_in_blocks_report_what_record_reports_element_by_element() {
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(12);
        let (m, n, k) = (3, 700, 256);
        for dtype in ActDtype::ALL {
            for stage in [
                BiasStage::BeforeCast,
                BiasStage::AfterCast,
                BiasStage::Either,
            ] {
                for offset in [None, Some(128.0)] {
                    let recipe = NumericRecipe {
                        bias: stage,
                        offset_accumulation: offset,
                        ..NumericRecipe::fp32_exact_weights(dtype)
                    };
                    let model = BoundModel::new(&recipe, k, 2.0).unwrap();
                    let y: Vec<f64> = (0..m * n)
                        .map(|i| match i % 97 {
                            0 => f64::NAN,
                            1 => f64::INFINITY,
                            2 => -f64::INFINITY,
                            3 => 0.0,
                            _ => r.random_range(-40.0..40.0) * 2f64.powi(r.random_range(-12..6)),
                        })
                        .collect();
                    let a: Vec<f64> = y
                        .iter()
                        .map(|v| v.abs() * r.random_range(1.0..9.0))
                        .collect();
                    let a_offset = offset.map(|_| a.iter().map(|v| 3.0 * v).collect::<Vec<_>>());
                    let bias: Vec<f64> = (0..n)
                        .map(|j| {
                            if j % 3 == 0 {
                                0.0
                            } else {
                                r.random_range(-1.0..1.0)
                            }
                        })
                        .collect();
                    let bits: Vec<u16> = y
                        .iter()
                        .enumerate()
                        .map(|(i, &v)| {
                            let near = dtype.from_f64(v);
                            match (i * 7 + 3) % 13 {
                                0 => dtype.poison_bits(),
                                1 => dtype.from_f64(f64::NAN),
                                2 => dtype.from_f64(f64::INFINITY),
                                3 => 0x8000,
                                4 => near.wrapping_add(1),
                                5 => near.wrapping_sub(1),
                                6 => r.random(),
                                7 => dtype.from_f64(v * 1.5),
                                _ => near,
                            }
                        })
                        .collect();
                    let reference = Reference {
                        m,
                        n,
                        k,
                        dtype,
                        y,
                        a,
                        a_offset,
                        bias,
                    };
                    let got = compare_mode(
                        &reference,
                        &model,
                        OutputBits::new(&bits, n),
                        CompareMode::Bound,
                    )
                    .unwrap();
                    let mut want = CompareReport::new(CompareMode::Bound);
                    for i in 0..m * n {
                        let (row, j) = (i / n, i % n);
                        let acc = reference.a_offset.as_ref().map_or(reference.a[i], |o| o[i]);
                        want.record(
                            (row, j),
                            bits[i],
                            dtype,
                            reference.y[i],
                            reference.a[i],
                            acc,
                            reference.bias[j],
                            &model,
                        );
                    }
                    let what = format!("{dtype} {stage:?} offset {offset:?}");
                    assert_eq!(got, want, "{what}");
                    assert!(want.nonfinite > 0 && want.poison_left > 0, "{what}");
                    assert!(want.over_bound > 0 && want.exact_mismatches > 0, "{what}");
                    assert!(
                        want.buckets[1..6].iter().all(|&c| c > 0),
                        "{what}: {want:?}"
                    );
                }
            }
        }
    }
    use crate::data::{DataClass, DataSpec, generate_seeded};
    use crate::gemm::reference;
    use crate::layer::{LayerShape, Symmetry};

    /// bf16, K = 64, two groups of 32: group 0 has w = 15·s₀ with s₀ = 1 + 3/128, exactly
    /// 15.3515625, which bf16 rounds to 15.375; group 1 has w = s₁ = 15.375 (exact) against
    /// x = −1. The exact y is 32·(15.3515625 − 15.375) = −0.75; on the rounded weights it is 0.
    fn rounding_sensitive() -> (Activations, QuantizedLayer) {
        let d = ActDtype::Bf16;
        let layer = QuantizedLayer {
            shape: LayerShape::new(1, 64, 32),
            dtype: d,
            q: [vec![15; 32], vec![1; 32]].concat(),
            zeros: Some(vec![0, 0]),
            scales: vec![d.from_f64(1.0 + 3.0 / 128.0), d.from_f64(15.375)],
            bias: None,
        };
        let x = Activations {
            m: 1,
            k: 64,
            row_stride: 64,
            dtype: d,
            data: [vec![d.from_f64(1.0); 32], vec![d.from_f64(-1.0); 32]].concat(),
        };
        (x, layer)
    }

    /// The switch matters: the two references differ by far more than the exact-weight bound
    /// allows, so a library's correct output fails the kernels' judge and a kernel's correct
    /// output fails the library's.
    #[test]
    fn rounded_and_exact_references_differ_beyond_the_exact_bound() {
        let (x, layer) = rounding_sensitive();
        let d = layer.dtype;
        let exact_recipe = NumericRecipe::fp32_exact_weights(d);
        let exact = reference(&x, &layer, &exact_recipe).unwrap();
        let lib_recipe = NumericRecipe::dequantize_then_matmul(d);
        let rounded = reference_with_rounding(
            &x,
            &layer,
            &lib_recipe,
            NonFiniteX::Refuse,
            WeightRounding::ToActivationDtype,
        )
        .unwrap();
        assert_eq!(exact.y, vec![-0.75]);
        assert_eq!(rounded.y, vec![0.0]);
        assert_eq!(rounded.a, vec![64.0 * 15.375]);
        let exact_model = BoundModel::new(&exact_recipe, 64, 1.0).unwrap();
        let exact_bound = exact_model.element(exact.y[0], exact.a[0], exact.a[0], 0.0);
        assert!(
            (exact.y[0] - rounded.y[0]).abs() > 50.0 * exact_bound,
            "{exact_bound}"
        );
        // `Exact` through the switch is the plain reference.
        let same = reference_with_rounding(
            &x,
            &layer,
            &exact_recipe,
            NonFiniteX::Refuse,
            WeightRounding::Exact,
        )
        .unwrap();
        assert_eq!(same, exact);

        let library_out = [d.from_f64(0.0)];
        let kernel_out = [d.from_f64(-0.75)];
        let lib =
            compare_library_output(&x, &layer, OutputBits::new(&library_out, 1), 1.0).unwrap();
        assert!(lib.passed(), "{lib:?}");
        let as_kernel = compare(&exact, &exact_model, OutputBits::new(&library_out, 1)).unwrap();
        assert!(!as_kernel.passed() && as_kernel.over_bound == 1);
        let kernel = compare(&exact, &exact_model, OutputBits::new(&kernel_out, 1)).unwrap();
        assert!(kernel.passed());
        let kernel_as_lib =
            compare_library_output(&x, &layer, OutputBits::new(&kernel_out, 1), 1.0).unwrap();
        assert!(!kernel_as_lib.passed() && kernel_as_lib.over_bound == 1);
    }

    /// What the library does, simulated: weights rounded to the dtype, fp32 products and sums
    /// in k order, the bias added in fp32 before the cast or in the dtype after it. Both pass;
    /// an element a few ulps off does not.
    #[test]
    fn a_simulated_library_output_passes_either_bias_stage() {
        for dtype in ActDtype::ALL {
            for symmetry in [Symmetry::Sym, Symmetry::Asym] {
                let spec = DataSpec {
                    class: DataClass::Realistic,
                    m: 4,
                    shape: LayerShape::new(24, 256, 64),
                    dtype,
                    symmetry,
                    with_bias: true,
                };
                let g = generate_seeded(11, 12, &spec).unwrap();
                let (x, layer) = (&g.x, &g.layer);
                let w = layer.dequantize_rounded().unwrap();
                let (n, k) = (24, 256);
                let mut before = vec![0u16; 4 * n];
                let mut after = vec![0u16; 4 * n];
                for m in 0..4 {
                    for j in 0..n {
                        let mut acc = 0f32;
                        for kk in 0..k {
                            acc += dtype.to_f32(x.data[m * k + kk]) * dtype.to_f32(w[j * k + kk]);
                        }
                        let b = layer.bias_value(j);
                        before[m * n + j] = dtype.from_f32(acc + b as f32);
                        let t = dtype.to_f64(dtype.from_f32(acc));
                        after[m * n + j] = dtype.from_f64(t + b);
                    }
                }
                for out in [&before, &after] {
                    let r = compare_library_output(x, layer, OutputBits::new(out, n), 1.0).unwrap();
                    assert!(r.passed(), "{dtype} {symmetry:?}: {r:?}");
                    assert_eq!(r.checked, 4 * n);
                }
                let mut off = before.clone();
                off[5] = off[5].wrapping_add(if off[5] & 0x7FFF == 0 { 64 } else { 8 });
                let r = compare_library_output(x, layer, OutputBits::new(&off, n), 1.0).unwrap();
                assert!(!r.passed() && r.worst_at == Some((0, 5)), "{r:?}");
            }
        }
    }

    #[test]
    fn bad_inputs_to_the_library_judge_are_typed_errors() {
        let (x, mut layer) = rounding_sensitive();
        let out = [0u16];
        assert!(matches!(
            compare_library_output(&x, &layer, OutputBits::new(&out, 1), 0.0),
            Err(InputError::Mismatch {
                what: "c_target",
                ..
            })
        ));
        // A rounded weight past bf16's range.
        layer.scales[1] = ActDtype::Bf16.from_f64(2f64.powi(127) * 1.5);
        layer.q[63] = 15;
        assert!(matches!(
            compare_library_output(&x, &layer, OutputBits::new(&out, 1), 1.0),
            Err(InputError::NonFinite { index: 63, .. })
        ));
        // Offset recipes form their weights differently: not with rounded weights.
        let (x, layer) = rounding_sensitive();
        let recipe = NumericRecipe {
            offset_accumulation: Some(128.0),
            ..NumericRecipe::fp32_exact_weights(ActDtype::Bf16)
        };
        assert!(
            reference_with_rounding(
                &x,
                &layer,
                &recipe,
                NonFiniteX::Refuse,
                WeightRounding::ToActivationDtype
            )
            .is_err()
        );
    }
}
