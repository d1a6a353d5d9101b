//! What a device decodes next to its DGEMM: the codes with per-group scales and zero points, and
//! the activation bits, each exact in f64 so that a device's decode gives the host's bits.

use crate::ActDtype;
use crate::gemm::bits_to_f64;
use crate::layer::{Activations, QuantizedLayer, SYMMETRIC_ZERO};
use std::borrow::Cow;

/// The raw lanes of the products, `[M, N]` each: `y` before the bias, `a`, and `a_offset`.
pub type RawLanes = (Vec<f64>, Vec<f64>, Option<Vec<f64>>);

/// The layer as a device decodes it next to its DGEMM: the codes `[N, K]` (one per byte) and,
/// per `(n, group)`, the scale and the zero point in f64. The exact weights are
/// `w = (q − z)·s`, their magnitudes `|w|`, and with an offset lane `|s|·(2·offset + z + q)`:
/// every one a small integer times a 16-bit float, exact in f64, so a device's decode gives the
/// host's bits (and the cross-check decodes its sampled columns on the host, independently).
pub struct WeightOperand<'a> {
    pub n: usize,
    pub k: usize,
    pub group: usize,
    pub codes: &'a [u8],
    /// `[N, groups]`.
    pub scales: Cow<'a, [f64]>,
    /// `[N, groups]`.
    pub zeros: Cow<'a, [f64]>,
    /// The offset lane's offset, for offset-accumulating recipes.
    pub offset: Option<f64>,
}

impl<'a> WeightOperand<'a> {
    /// The operand of `layer`, its per-group values decoded here (see
    /// [`LayerWeights`](super::LayerWeights) for decoding them once per layer).
    pub fn new(layer: &'a QuantizedLayer, offset: Option<f64>) -> Self {
        let (scales, zeros) = per_group_values(layer);
        WeightOperand {
            n: layer.shape.n,
            k: layer.shape.k,
            group: layer.shape.group,
            codes: &layer.q,
            scales: Cow::Owned(scales),
            zeros: Cow::Owned(zeros),
            offset,
        }
    }

    /// `(w, |w|, offset rows)` `[N, K]` each, decoded on the host (a device in host code).
    pub fn decode(&self) -> RawLanes {
        let groups = self.k.div_ceil(self.group.max(1));
        let at = |i: usize| {
            let (r, c) = (i / self.k.max(1), i % self.k.max(1));
            let g = r * groups + c / self.group.max(1);
            (f64::from(self.codes[i] & 15), self.scales[g], self.zeros[g])
        };
        let len = self.n * self.k;
        let w: Vec<f64> = (0..len)
            .map(|i| {
                let (q, s, z) = at(i);
                (q - z) * s
            })
            .collect();
        let wa = w.iter().map(|v| v.abs()).collect();
        let off = self.offset.map(|o| {
            (0..len)
                .map(|i| {
                    let (q, s, z) = at(i);
                    s.abs() * (2.0 * o + z + q)
                })
                .collect()
        });
        (w, wa, off)
    }
}

/// X as a device widens it next to its DGEMM: the activation bits `[M, K]` (rows packed), 2
/// bytes per element where f64 would be 8. Every 16-bit float is exact in f64.
pub struct ActivationOperand<'a> {
    pub m: usize,
    pub k: usize,
    pub dtype: ActDtype,
    pub bits: std::borrow::Cow<'a, [u16]>,
}

impl<'a> ActivationOperand<'a> {
    pub fn new(x: &'a Activations) -> Self {
        let (m, k) = (x.m, x.k);
        let bits = if x.row_stride == k || m == 0 {
            std::borrow::Cow::Borrowed(&x.data[..m * k])
        } else {
            let rows = (0..m).flat_map(|r| &x.data[r * x.row_stride..r * x.row_stride + k]);
            std::borrow::Cow::Owned(rows.copied().collect())
        };
        ActivationOperand {
            m,
            k,
            dtype: x.dtype,
            bits,
        }
    }

    /// X in f64 on the host (a device in host code).
    pub fn to_f64(&self) -> Vec<f64> {
        let mut out = vec![0.0; self.bits.len()];
        bits_to_f64(self.dtype, &self.bits, &mut out);
        out
    }
}

/// The scales and zero points `[N, groups]` of `layer` in f64.
pub(super) fn per_group_values(layer: &QuantizedLayer) -> (Vec<f64>, Vec<f64>) {
    let dtype = layer.dtype;
    let scales = layer.scales.iter().map(|&b| dtype.to_f64(b)).collect();
    let zeros = match &layer.zeros {
        Some(z) => z.iter().map(|&q| f64::from(q)).collect(),
        None => vec![f64::from(SYMMETRIC_ZERO); layer.scales.len()],
    };
    (scales, zeros)
}
