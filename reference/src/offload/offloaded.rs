//! The host path: W decoded here in column chunks of at most `w_max_bytes`, the products formed by
//! an outside f64 GEMM, the full [`Reference`] assembled on the host.

use super::cross_check::cross_check;
use super::error::{GemmError, OffloadError};
use super::weight_cache::{WeightChunk, keep_weights, take_weights};
use crate::gemm::{
    self, LineAxis, Lines, NonFiniteX, Reference, SpecialRows, bits_to_f64, weight_rows_into,
};
use crate::layer::{Activations, QuantizedLayer};
use crate::recipe::NumericRecipe;
use crate::scratch::{self, Role};

/// W in f64 per GEMM call is kept under this many bytes (chunks along N).
pub const DEFAULT_W_MAX_BYTES: usize = 4 << 30;

/// `(y, a)` for `x[M, K]` and `w[N, K]` row-major: `y = x·wᵀ`, `a = |x|·|w|ᵀ`, both `[M, N]`.
pub trait F64Gemm {
    fn gemm(
        &mut self,
        x: &[f64],
        w: &[f64],
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), GemmError>;

    /// [`F64Gemm::gemm`] with `w_key` naming `w`'s content when the caller will hand the same
    /// `w` again (a layer's next batch size): a device GEMM may hold `w` under it
    /// instead of sending it again. A wrong key cannot pass unseen: the cross-check recomputes
    /// sampled elements from the layer itself.
    fn gemm_keyed(
        &mut self,
        x: &[f64],
        w: &[f64],
        w_key: Option<u64>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), GemmError> {
        let _ = w_key;
        self.gemm(x, w, m, n, k)
    }

    /// A GEMM that computes nothing (`bench --cpu-side`'s stand-in, timing the CPU's share):
    /// the cross-check still recomputes its sampled elements on the CPU (that cost is the
    /// CPU's), but its comparison is not applied to products nobody formed.
    fn stands_in(&self) -> bool {
        false
    }
}

impl<F> F64Gemm for F
where
    F: FnMut(&[f64], &[f64], usize, usize, usize) -> Result<(Vec<f64>, Vec<f64>), GemmError>,
{
    fn gemm(
        &mut self,
        x: &[f64],
        w: &[f64],
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), GemmError> {
        self(x, w, m, n, k)
    }
}

/// [`gemm::reference_with`] with its products from `g`, W built and multiplied in column chunks
/// of at most `w_max_bytes` of f64, then cross-checked at
/// [`CROSS_CHECK_SAMPLES`](super::CROSS_CHECK_SAMPLES) positions
/// drawn from `seed`.
pub fn reference_offloaded(
    x: &Activations,
    layer: &QuantizedLayer,
    recipe: &NumericRecipe,
    non_finite_x: NonFiniteX,
    g: &mut dyn F64Gemm,
    w_max_bytes: usize,
    seed: u64,
) -> Result<Reference, OffloadError> {
    gemm::validate_with(x, layer, recipe, non_finite_x)?;
    let (xz, special) = SpecialRows::prepare(x, non_finite_x);
    let (m, n, k) = (x.m, layer.shape.n, layer.shape.k);
    let offset = recipe.magnitude_offset();
    let rows: Vec<usize> = (0..m).collect();
    // X, and |X| where an offset lane multiplies it (the device forms |X| for the abs lane),
    // in this thread's kept buffers.
    let mut lx = scratch::take(Role::XSigned, m * k);
    let mut la = offset.map(|_| scratch::take(Role::XAbs, m * k));
    activations_into(&xz, &mut lx, la.as_deref_mut());
    let chunk = (w_max_bytes / (8 * k.max(1))).clamp(1, n.max(1));
    // One chunk (W within `w_max_bytes`, every field layer): the GEMM's outputs are the products
    // as they are, with no [M, N] buffers zeroed and copied into (most of the host's share).
    let whole = chunk >= n;
    let full = |len: usize| if whole { Vec::new() } else { vec![0.0; len] };
    let mut y = full(m * n);
    let mut a = full(m * n);
    let mut a_off = offset.map(|_| full(m * n));
    let (mut cache, key, mut spare) = take_weights(layer, offset, chunk);
    let fresh = cache.chunks.is_empty();
    let mut n0 = 0;
    let mut index = 0;
    while n0 < n {
        let n1 = (n0 + chunk).min(n);
        let c = n1 - n0;
        if fresh {
            let (mut w, mut wa) = spare
                .pop()
                .map_or_else(Default::default, |s: WeightChunk| (s.w, s.wa));
            weight_rows_into(layer, offset, n0..n1, &mut w, &mut wa);
            cache.chunks.push(WeightChunk { n0, n1, w, wa });
        }
        let WeightChunk { w, wa, .. } = &cache.chunks[index];
        debug_assert_eq!((cache.chunks[index].n0, cache.chunks[index].n1), (n0, n1));
        index += 1;
        let chunk_key = key.map(|key| key ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let call = |g: &mut dyn F64Gemm, x: &[f64], w: &[f64], w_key: Option<u64>| {
            let (cy, ca) = g
                .gemm_keyed(x, w, w_key, m, c, k)
                .map_err(|error| OffloadError::Gemm { n0, n1, error })?;
            for got in [cy.len(), ca.len()] {
                if got != m * c {
                    let expected = m * c;
                    return Err(OffloadError::Length {
                        n0,
                        n1,
                        expected,
                        got,
                    });
                }
            }
            Ok((cy, ca))
        };
        let (cy, ca) = call(g, &lx, w, chunk_key)?;
        if whole {
            (y, a) = (cy, ca);
        } else {
            scatter(&mut y, &cy, n, n0, c);
            scatter(&mut a, &ca, n, n0, c);
        }
        if let (Some(dst), Some(la)) = (a_off.as_mut(), la.as_ref()) {
            // |x|·woffᵀ: woff ≥ 0, so the signed product of |X| and the offset rows is the lane.
            let (co, _) = call(g, la, &wa[c * k..], None)?;
            if whole {
                *dst = co;
            } else {
                scatter(dst, &co, n, n0, c);
            }
        }
        n0 = n1;
    }
    scratch::give(Role::XSigned, lx);
    if let Some(la) = la {
        scratch::give(Role::XAbs, la);
    }
    keep_weights(cache, key);
    let raw = |index: &[usize]| {
        let at = |i: usize| (y[i], a[i], a_off.as_ref().map(|o| o[i]));
        Ok(index.iter().map(|&i| at(i)).collect())
    };
    let checked = cross_check(&xz, layer, offset, &special, raw, seed);
    if !g.stands_in() {
        checked?;
    }
    let bias = gemm::bias_values(layer);
    if layer.bias.is_some() && n > 0 {
        y.chunks_mut(n)
            .for_each(|row| row.iter_mut().zip(&bias).for_each(|(v, b)| *v += b));
    }
    let mut lines = Lines {
        axis: LineAxis::Rows,
        index: rows,
        len: n,
        y,
        a,
        a_offset: a_off,
        bias,
    };
    special.patch(&mut lines, layer, recipe.offset_accumulation);
    Ok(Reference {
        m,
        n,
        k,
        dtype: layer.dtype,
        y: lines.y,
        a: lines.a,
        a_offset: lines.a_offset,
        bias: lines.bias,
    })
}

/// X `[M, K]` (rows packed, the row stride dropped) in f64 into `lx`, and |X| into `la`.
fn activations_into(x: &Activations, lx: &mut [f64], la: Option<&mut [f64]>) {
    let k = x.k;
    if k == 0 {
        return;
    }
    for (m, dst) in lx.chunks_exact_mut(k).enumerate() {
        bits_to_f64(
            x.dtype,
            &x.data[m * x.row_stride..m * x.row_stride + k],
            dst,
        );
    }
    if let Some(la) = la {
        la.iter_mut().zip(lx.iter()).for_each(|(a, v)| *a = v.abs());
    }
}

/// Columns `n0..n0+c` of `[M, N]` from a compact `[M, c]` chunk.
fn scatter(dst: &mut [f64], chunk: &[f64], n: usize, n0: usize, c: usize) {
    for (row, src) in dst.chunks_mut(n).zip(chunk.chunks(c)) {
        row[n0..n0 + c].copy_from_slice(src);
    }
}
