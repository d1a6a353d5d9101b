//! A device's C against the grouped reference: every element of a computed row within its bound
//! (docs/contract.md §6, with the routed-weight rounding), every element of a zero row exactly ±0, and for
//! failing rows a diagnosis: does the row match what another local expert gives for the same
//! token (the slot went to the wrong expert)?

use super::grouped::{GroupedError, GroupedReference, RowKind};
use crate::bound::BoundModel;
use crate::compare::{
    CompareMode, CompareReport, OutputBits, bucket_index, check_model_for, element_ratio,
};
use crate::dtype::ActDtype;
use crate::gemm::{InputError, Lines, SpecialRows, rows_unchecked};
use rayon::prelude::*;

/// Failing computed rows that are rerun against every other local expert (each costs one dense
/// row per local expert; the first ones in slot order are enough to name the fault).
pub const DIAGNOSED_ROWS: usize = 16;

/// The fp32 overflow threshold of round-to-nearest-even, `2¹²⁸·(1 − 2⁻²⁵)`: an accumulator
/// whose exact value may reach it may be ±Inf before the routed-weight multiply.
const F32_OVERFLOW_THRESHOLD: f64 = 3.402_823_567_797_336_6e38;

/// The local expert whose result a failing row matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrongExpert {
    pub local: usize,
    pub global: usize,
}

/// One row of C that fails.
#[derive(Clone, Debug, PartialEq)]
pub struct SlotFailure {
    pub slot: usize,
    pub token: usize,
    pub kind: RowKind,
    /// Largest error over bound among the row's finite elements.
    pub worst_ratio: f64,
    pub over_bound: usize,
    pub nonfinite: usize,
    pub poison_left: usize,
    /// Bit-exact mode only: elements that differ from the exact-accumulator result.
    pub exact_mismatches: usize,
    /// Zero rows: elements that are not ±0.
    pub nonzero: usize,
    /// The first failing column.
    pub first_bad: usize,
    /// Set when the row is within bound of another local expert's result for the same token
    /// (only for the first [`DIAGNOSED_ROWS`] failing computed rows).
    pub wrong_expert: Option<WrongExpert>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GroupedReport {
    /// Every element of the computed rows, as for a dense GEMM; `worst_at` is `(slot, n)`.
    pub report: CompareReport,
    pub zero_rows: usize,
    /// Every failing row (computed or zero), in slot order.
    pub failures: Vec<SlotFailure>,
    /// Failing computed rows checked against the other experts.
    pub diagnosed: usize,
    /// Of those, rows that match another expert's result.
    pub wrong_expert_rows: usize,
}

impl GroupedReport {
    pub fn passed(&self) -> bool {
        self.report.passed() && self.failures.is_empty()
    }

    /// The worst error in bound units over the computed rows.
    pub fn worst_ratio(&self) -> f64 {
        self.report.worst_ratio
    }
}

/// C `[S, N]` (row stride in elements) against its bound, in [`CompareMode::Bound`].
pub fn compare_grouped(
    reference: &GroupedReference<'_>,
    model: &BoundModel,
    c_bits: &[u16],
    c_row_stride: usize,
) -> Result<GroupedReport, GroupedError> {
    compare_grouped_mode(reference, model, c_bits, c_row_stride, CompareMode::Bound)
}

/// [`compare_grouped`] in either mode. Bit-exact (exact-class data, whose fp32 sums are exact):
/// each element must equal `cast(fl32(y)·r)` (routed) or `cast(y)`.
pub fn compare_grouped_mode(
    reference: &GroupedReference<'_>,
    model: &BoundModel,
    c_bits: &[u16],
    c_row_stride: usize,
    mode: CompareMode,
) -> Result<GroupedReport, GroupedError> {
    let (s, n, dtype) = (reference.slots, reference.n, reference.dtype);
    check_model_for(model, reference.k, dtype).map_err(GroupedError::Compare)?;
    if model.uses_offset() != reference.a_offset.is_some() {
        return Err(GroupedError::Compare(InputError::Mismatch {
            what: "reference a_offset (recipe offset_accumulation)",
            expected: if model.uses_offset() {
                "present"
            } else {
                "absent"
            }
            .into(),
            got: if model.uses_offset() {
                "absent"
            } else {
                "present"
            }
            .into(),
        }));
    }
    let out = OutputBits::new(c_bits, c_row_stride);
    out.validate(s, n).map_err(GroupedError::Compare)?;

    let per_row: Vec<(CompareReport, Option<SlotFailure>)> = (0..s)
        .into_par_iter()
        .map(|slot| judge_row(reference, model, out, slot, mode))
        .collect();
    let mut report = CompareReport::new(mode);
    let mut failures = Vec::new();
    for (rep, failure) in per_row {
        report.merge(&rep);
        failures.extend(failure);
    }
    let (diagnosed, wrong_expert_rows) = diagnose(reference, model, out, &mut failures);
    Ok(GroupedReport {
        report,
        zero_rows: reference.zero_rows().count(),
        failures,
        diagnosed,
        wrong_expert_rows,
    })
}

/// One element of a computed row: `Some(ratio)` when acceptable or merely over bound, `None`
/// for a non-finite result the range-edge rule does not accept.
fn element(
    model: &BoundModel,
    dtype: ActDtype,
    bits: u16,
    (y, a, acc): (f64, f64, f64),
    routed: Option<f32>,
) -> Option<f64> {
    let bound = || match routed {
        Some(r) => model.routed_element(y, a, acc, f64::from(r)),
        None => model.element(y, a, acc, 0.0),
    };
    let v = routed.map_or(y, |r| y * f64::from(r));
    if v.is_finite() && dtype.is_finite_bits(bits) {
        return Some((dtype.to_f64(bits) - v).abs() / bound());
    }
    // The fp32 accumulator itself may overflow before the multiply (bf16 range): then ±Inf of
    // the value's sign is what the kernel must produce.
    if routed.is_some() && y.is_finite() && !dtype.is_finite_bits(bits) && !dtype.is_nan_bits(bits)
    {
        let err = model.accumulator_error(a, acc);
        let same_sign = (bits & 0x8000 != 0) == (v < 0.0);
        if same_sign && y.abs() + err >= F32_OVERFLOW_THRESHOLD {
            return Some((F32_OVERFLOW_THRESHOLD - y.abs()).max(0.0) / err);
        }
    }
    element_ratio(dtype, bits, v, bound).filter(|r| *r <= 1.0)
}

/// The bits an exact-accumulator kernel produces.
fn exact_bits(dtype: ActDtype, y: f64, routed: Option<f32>) -> u16 {
    match routed {
        Some(r) => dtype.from_f32((y as f32) * r),
        None => dtype.from_f64(y),
    }
}

fn same_bits(dtype: ActDtype, a: u16, b: u16) -> bool {
    a == b || (a & 0x7FFF == 0 && b & 0x7FFF == 0) || (dtype.is_nan_bits(a) && dtype.is_nan_bits(b))
}

fn dense_at(reference: &GroupedReference<'_>, i: usize) -> (f64, f64, f64) {
    let a = reference.a[i];
    (
        reference.y[i],
        a,
        reference.a_offset.as_ref().map_or(a, |o| o[i]),
    )
}

fn judge_row(
    reference: &GroupedReference<'_>,
    model: &BoundModel,
    out: OutputBits<'_>,
    slot: usize,
    mode: CompareMode,
) -> (CompareReport, Option<SlotFailure>) {
    let (n, dtype) = (reference.n, reference.dtype);
    let kind = reference.rows[slot];
    let mut rep = CompareReport::new(mode);
    let mut f = SlotFailure {
        slot,
        token: reference.routing.token_of(slot),
        kind,
        worst_ratio: 0.0,
        over_bound: 0,
        nonfinite: 0,
        poison_left: 0,
        exact_mismatches: 0,
        nonzero: 0,
        first_bad: n,
        wrong_expert: None,
    };
    let routed = reference.routed_weight(slot);
    let computed = matches!(kind, RowKind::Computed { .. });
    for j in 0..n {
        let bits = out.get(slot, j);
        rep.checked += usize::from(computed);
        let bad = if bits == dtype.poison_bits() {
            f.poison_left += 1;
            rep.poison_left += 1;
            rep.exact_mismatches += usize::from(computed);
            true
        } else if !computed {
            let nonzero = bits & 0x7FFF != 0;
            f.nonzero += usize::from(nonzero);
            nonzero
        } else {
            let dense = dense_at(reference, slot * n + j);
            let inexact = !same_bits(dtype, bits, exact_bits(dtype, dense.0, routed));
            rep.exact_mismatches += usize::from(inexact);
            f.exact_mismatches += usize::from(inexact);
            match element(model, dtype, bits, dense, routed) {
                None => {
                    rep.nonfinite += 1;
                    f.nonfinite += 1;
                    true
                }
                Some(ratio) => {
                    rep.buckets[bucket_index(ratio)] += 1;
                    if rep.worst_at.is_none() || ratio > rep.worst_ratio {
                        rep.worst_ratio = ratio;
                        rep.worst_at = Some((slot, j));
                    }
                    f.worst_ratio = f.worst_ratio.max(ratio);
                    let over = ratio > 1.0;
                    rep.over_bound += usize::from(over);
                    f.over_bound += usize::from(over);
                    over || (mode == CompareMode::BitExact && inexact)
                }
            }
        };
        if bad && f.first_bad == n {
            f.first_bad = j;
        }
    }
    let failed = f.first_bad < n;
    (rep, failed.then_some(f))
}

/// Reruns the first failing computed rows against every other local expert; returns how many
/// rows were diagnosed and how many match another expert.
fn diagnose(
    reference: &GroupedReference<'_>,
    model: &BoundModel,
    out: OutputBits<'_>,
    failures: &mut [SlotFailure],
) -> (usize, usize) {
    let picked: Vec<usize> = failures
        .iter()
        .enumerate()
        .filter(|(_, f)| matches!(f.kind, RowKind::Computed { .. }))
        .map(|(i, _)| i)
        .take(DIAGNOSED_ROWS)
        .collect();
    if picked.is_empty() {
        return (0, 0);
    }
    let (n, dtype) = (reference.n, reference.dtype);
    let tokens: Vec<usize> = picked.iter().map(|&i| failures[i].token).collect();
    let (xz, special) = SpecialRows::prepare(reference.x, reference.non_finite_x);
    for (local, expert) in reference.layer.logical().iter().enumerate() {
        let mut lines: Lines = rows_unchecked(&xz, expert, reference.offset, &tokens);
        special.patch(&mut lines, expert, reference.offset);
        for (row, &fi) in picked.iter().enumerate() {
            let f = &mut failures[fi];
            let own = matches!(f.kind, RowKind::Computed { local: l, .. } if l == local);
            if own || f.wrong_expert.is_some() {
                continue;
            }
            let routed = reference.routed_weight(f.slot);
            let matches = (0..n).all(|j| {
                let i = row * n + j;
                let a = lines.a[i];
                let acc = lines.a_offset.as_ref().map_or(a, |o| o[i]);
                let bits = out.get(f.slot, j);
                bits != dtype.poison_bits()
                    && element(model, dtype, bits, (lines.y[i], a, acc), routed)
                        .is_some_and(|r| r <= 1.0)
            });
            if matches {
                f.wrong_expert = Some(WrongExpert {
                    local,
                    global: reference.globals[local],
                });
            }
        }
    }
    let wrong = picked
        .iter()
        .filter(|&&i| failures[i].wrong_expert.is_some())
        .count();
    (picked.len(), wrong)
}
