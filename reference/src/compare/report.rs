//! The comparison's report and the per-element rules that fill it.

use super::buckets::{RATIO_HAIR, SMALLEST_CLASSIFIED_BOUND, bucket, bucket_index, ratio_class};
use super::range_edge::{correctly_rounded, element_ratio, rounded_after_cast};
use crate::bound::{BoundModel, BoundTerms};
use crate::dtype::ActDtype;
use crate::recipe::BiasStage;
use serde::{Deserialize, Serialize};

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
    /// Element counts per [`RATIO_BUCKETS`](super::RATIO_BUCKETS) (finite elements only).
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
    /// those to the host: [`judge_plain`](super::judge_plain)).
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
