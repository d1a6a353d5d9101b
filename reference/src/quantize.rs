//! Per-group round-to-nearest quantization of f32 weights `[N, K]` to the logical layer.
//!
//! Scales are stored in the activation dtype, so they are rounded; the rounding is chosen so the
//! 16-level grid still covers the group's range, which is what makes the error bound hold with
//! the *stored* scale `s_r`:
//!
//! - symmetric (`uint4b8`, z = 8): `s = max|w| / 7`, rounded to nearest; raised by one ulp while
//!   `7.5·s_r < max(w, 0)` or `8.5·s_r < −min(w, 0)` (only possible through underflow).
//! - asymmetric (`uint4`): range `[lo, hi] = [min(w, 0), max(w, 0)]`, `s = (hi − lo) / 15`
//!   rounded **up** so that `15·s_r ≥ hi − lo` (round-to-nearest could leave `hi` half a step
//!   outside the grid and clamp it, doubling its error), `z = round(−lo / s_r)`.
//! - codes `q = clamp(round(w / s_r) + z, 0, 15)`; an all-zero group gets `s_r = 1`.
//!
//! Then every weight satisfies `|(q − z)·s_r − w| ≤ s_r/2 + |w|·2⁻⁵⁰` (the second term covers
//! the f64 rounding of `w / s_r` at a tie), and for scales in the dtype's normal range
//! `s_r ≤ s·(1 + 2u)`, u the dtype's unit roundoff.

use crate::dtype::ActDtype;
use crate::layer::{LayerShape, QuantizedLayer, SYMMETRIC_ZERO, Symmetry};

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum QuantizeError {
    #[error("weights: expected N·K = {expected} values for [N, K] = [{n}, {k}], got {got}")]
    Length {
        n: usize,
        k: usize,
        expected: usize,
        got: usize,
    },
    #[error("group_size: expected a positive divisor of K = {k}, got {got}")]
    Group { k: usize, got: usize },
    #[error("weights: expected finite values, got {got} at (n = {n}, k = {k})")]
    NonFinite { n: usize, k: usize, got: f32 },
    #[error("scale at (n = {n}, g = {g}): expected a finite {dtype} value, got {scale} (overflow)")]
    ScaleOverflow {
        n: usize,
        g: usize,
        scale: f64,
        dtype: ActDtype,
    },
}

/// The next representable value above a non-negative finite `bits` (positive half formats
/// order like their bit patterns).
fn next_up(bits: u16) -> u16 {
    bits + 1
}

/// The stored scale of one group and its zero point.
fn group_scale(
    w: &[f32],
    dtype: ActDtype,
    symmetry: Symmetry,
    at: (usize, usize),
) -> Result<(u16, u8), QuantizeError> {
    let lo = w.iter().fold(0f64, |m, &v| m.min(f64::from(v)));
    let hi = w.iter().fold(0f64, |m, &v| m.max(f64::from(v)));
    let one = dtype.from_f32(1.0);
    if hi - lo == 0.0 {
        let z = match symmetry {
            Symmetry::Sym => SYMMETRIC_ZERO,
            Symmetry::Asym => 0,
        };
        return Ok((one, z));
    }
    let s = match symmetry {
        Symmetry::Sym => hi.max(-lo) / 7.0,
        Symmetry::Asym => (hi - lo) / 15.0,
    };
    let covers = |s: f64| match symmetry {
        Symmetry::Sym => 7.5 * s >= hi && 8.5 * s >= -lo,
        Symmetry::Asym => 15.0 * s >= hi - lo,
    };
    let mut bits = dtype.from_f64(s);
    while dtype.to_f64(bits).is_finite() && !covers(dtype.to_f64(bits)) {
        bits = next_up(bits);
    }
    let s_r = dtype.to_f64(bits);
    if !s_r.is_finite() {
        return Err(QuantizeError::ScaleOverflow {
            n: at.0,
            g: at.1,
            scale: s,
            dtype,
        });
    }
    let z = match symmetry {
        Symmetry::Sym => SYMMETRIC_ZERO,
        Symmetry::Asym => (-lo / s_r).round().clamp(0.0, 15.0) as u8,
    };
    Ok((bits, z))
}

/// Quantizes row-major `[N, K]` weights in groups of `shape.group` along K.
pub fn quantize(
    weights: &[f32],
    shape: LayerShape,
    dtype: ActDtype,
    symmetry: Symmetry,
) -> Result<QuantizedLayer, QuantizeError> {
    let LayerShape { n, k, group } = shape;
    if weights.len() != n * k {
        return Err(QuantizeError::Length {
            n,
            k,
            expected: n * k,
            got: weights.len(),
        });
    }
    if group == 0 || !k.is_multiple_of(group) {
        return Err(QuantizeError::Group { k, got: group });
    }
    if let Some(i) = weights.iter().position(|v| !v.is_finite()) {
        return Err(QuantizeError::NonFinite {
            n: i / k,
            k: i % k,
            got: weights[i],
        });
    }
    let groups = k / group;
    let mut q = vec![0u8; n * k];
    let mut scales = Vec::with_capacity(n * groups);
    let mut zeros = Vec::with_capacity(n * groups);
    for r in 0..n {
        for g in 0..groups {
            let range = r * k + g * group..r * k + (g + 1) * group;
            let (s_bits, z) = group_scale(&weights[range.clone()], dtype, symmetry, (r, g))?;
            let s_r = dtype.to_f64(s_bits);
            for (dst, &w) in q[range.clone()].iter_mut().zip(&weights[range]) {
                *dst = ((f64::from(w) / s_r).round() + f64::from(z)).clamp(0.0, 15.0) as u8;
            }
            scales.push(s_bits);
            zeros.push(z);
        }
    }
    Ok(QuantizedLayer {
        shape,
        dtype,
        q,
        zeros: (symmetry == Symmetry::Asym).then_some(zeros),
        scales,
        bias: None,
    })
}
