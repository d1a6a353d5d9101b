//! Rows of X holding NaN or ±Inf (the special-values class) and the IEEE values of their
//! elements (docs/contract.md §6): the finite part is computed on X with these rows zeroed.

use super::reference::Lines;
use super::validate::{NonFiniteX, first_nonfinite};
use crate::layer::{Activations, QuantizedLayer};
use rayon::prelude::*;

/// The non-finite entries of one X row (IEEE inputs).
#[derive(Clone, Debug, PartialEq)]
pub struct SpecialRow {
    pub m: usize,
    pub nan: bool,
    /// Columns k with x = +Inf.
    pub pos_inf: Vec<usize>,
    /// Columns k with x = −Inf.
    pub neg_inf: Vec<usize>,
}

/// The rows of X holding NaN or ±Inf, and what IEEE arithmetic makes of them. Every element of
/// such a row is non-finite: a NaN input propagates; an Inf input gives Inf·w = ±Inf, or NaN where
/// w = 0; Infs of both signs in one element give NaN. The finite part of the reference (lines,
/// projections) is computed on X with these rows zeroed ([`SpecialRows::prepare`]) and the
/// elements of these rows are then set to their IEEE values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpecialRows {
    /// Sorted by `m`.
    pub rows: Vec<SpecialRow>,
}

impl SpecialRows {
    /// Scans X (none under [`NonFiniteX::Refuse`], where validation refused them) and returns X
    /// with the special rows zeroed (borrowed when there are none).
    pub fn prepare(
        x: &Activations,
        non_finite_x: NonFiniteX,
    ) -> (std::borrow::Cow<'_, Activations>, SpecialRows) {
        if non_finite_x == NonFiniteX::Refuse {
            return (std::borrow::Cow::Borrowed(x), SpecialRows::default());
        }
        let rows: Vec<SpecialRow> = (0..x.m)
            .into_par_iter()
            .filter_map(|m| {
                let row = &x.data[m * x.row_stride..m * x.row_stride + x.k];
                first_nonfinite(row, x.dtype)?;
                let mut sr = SpecialRow {
                    m,
                    nan: false,
                    pos_inf: Vec::new(),
                    neg_inf: Vec::new(),
                };
                for (k, &b) in row.iter().enumerate() {
                    if x.dtype.is_nan_bits(b) {
                        sr.nan = true;
                    } else if !x.dtype.is_finite_bits(b) {
                        if b & 0x8000 == 0 {
                            sr.pos_inf.push(k);
                        } else {
                            sr.neg_inf.push(k);
                        }
                    }
                }
                Some(sr)
            })
            .collect();
        if rows.is_empty() {
            return (std::borrow::Cow::Borrowed(x), SpecialRows { rows });
        }
        let mut zeroed = x.clone();
        let zero = x.dtype.from_f64(0.0);
        for r in &rows {
            zeroed.data[r.m * x.row_stride..r.m * x.row_stride + x.k].fill(zero);
        }
        (std::borrow::Cow::Owned(zeroed), SpecialRows { rows })
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn row(&self, m: usize) -> Option<&SpecialRow> {
        self.rows
            .binary_search_by_key(&m, |r| r.m)
            .ok()
            .map(|i| &self.rows[i])
    }

    /// The IEEE value of element `(m, n)` when row `m` is special (bias is finite and changes
    /// nothing). `offset`: the recipe's offset accumulation, where any Inf ends in Inf − Inf.
    pub fn value(
        &self,
        layer: &QuantizedLayer,
        offset: Option<f64>,
        m: usize,
        n: usize,
    ) -> Option<f64> {
        let row = self.row(m)?;
        if row.nan || offset.is_some() {
            return Some(f64::NAN);
        }
        let (mut pos, mut neg) = (false, false);
        for (ks, sign) in [(&row.pos_inf, 1.0), (&row.neg_inf, -1.0)] {
            for &k in ks {
                let w = layer.weight(n, k);
                if w == 0.0 {
                    return Some(f64::NAN);
                }
                if w * sign > 0.0 {
                    pos = true;
                } else {
                    neg = true;
                }
            }
        }
        Some(match (pos, neg) {
            (true, false) => f64::INFINITY,
            (false, true) => f64::NEG_INFINITY,
            _ => f64::NAN,
        })
    }

    /// Sets the elements of `lines` that lie on special rows to their IEEE values.
    pub(crate) fn patch(&self, lines: &mut Lines, layer: &QuantizedLayer, offset: Option<f64>) {
        if self.is_empty() {
            return;
        }
        for i in 0..lines.index.len() {
            for j in 0..lines.len {
                let (m, n) = lines.coords(i, j);
                if let Some(v) = self.value(layer, offset, m, n) {
                    lines.y[i * lines.len + j] = v;
                }
            }
        }
    }
}
