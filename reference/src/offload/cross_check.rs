//! The outside GEMM is not trusted: a seeded sample of elements recomputed on the CPU from the
//! same decoded rows must agree within rounding.

use super::error::{Lane, OffloadError};
use crate::gemm::{SpecialRows, activation_rows, weight_rows};
use crate::layer::{Activations, QuantizedLayer};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Elements recomputed on the CPU per reference (the cross-check sample).
pub const CROSS_CHECK_SAMPLES: usize = 32;

/// How far two f64 evaluations of one length-`k` dot product may lie apart. Each is within
/// `γ_k·a` of the exact sum (`γ_k = k·u/(1 − k·u)`, `u = 2⁻⁵³`, whatever the summation order,
/// blocking or FMA use of the DGEMM), so they differ by at most `2·γ_k·a ≤ 1.01·k·ε·a`
/// (`ε = 2u`, `k·u < 0.01`); adding the bias rounds once more, `u·|y|` each. Anything wider is a
/// wrong product (a wrong element, index or chunk), not rounding.
pub fn cross_check_tolerance(k: usize, a: f64, y_gemm: f64, y_cpu: f64) -> f64 {
    1.01 * k as f64 * f64::EPSILON * a + 0.5 * f64::EPSILON * (y_gemm.abs() + y_cpu.abs())
}

/// `count` seeded positions `(m, n)` in `[M, N]` (repeats possible on tiny outputs).
pub fn sample_positions(m: usize, n: usize, count: usize, seed: u64) -> Vec<(usize, usize)> {
    if m == 0 || n == 0 {
        return Vec::new();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|_| (rng.random_range(0..m), rng.random_range(0..n)))
        .collect()
}

/// The GEMM's raw products (before bias and special rows) at element indices `m·N + n`:
/// `(y, a, a_offset)`.
pub(super) type RawAt = (f64, f64, Option<f64>);

/// The sampled elements recomputed from the CPU reference's decoded rows, summed in order,
/// against the products `raw` returns for their indices. Special rows are zeroed in `xz` and
/// overwritten afterwards: their products are skipped.
pub(super) fn cross_check(
    xz: &Activations,
    layer: &QuantizedLayer,
    offset: Option<f64>,
    special: &SpecialRows,
    raw: impl FnOnce(&[usize]) -> Result<Vec<RawAt>, OffloadError>,
    seed: u64,
) -> Result<(), OffloadError> {
    let (m, n, k) = (xz.m, layer.shape.n, layer.shape.k);
    let positions: Vec<(usize, usize)> = sample_positions(m, n, CROSS_CHECK_SAMPLES, seed)
        .into_iter()
        .filter(|&(r, _)| special.row(r).is_none())
        .collect();
    if positions.is_empty() {
        return Ok(());
    }
    let rows: Vec<usize> = positions.iter().map(|p| p.0).collect();
    let cols: Vec<usize> = positions.iter().map(|p| p.1).collect();
    let index: Vec<usize> = positions.iter().map(|&(r, col)| r * n + col).collect();
    let products = raw(&index)?;
    let (lx, la) = activation_rows(xz, &rows);
    let (w, wa) = weight_rows(layer, offset, &cols);
    let c = cols.len();
    for (i, &(r, col)) in positions.iter().enumerate() {
        let (xr, ar) = (lx.row(i), la.row(i));
        let dot = |p: ndarray::ArrayView1<'_, f64>, q: ndarray::ArrayView1<'_, f64>| {
            p.iter().zip(q.iter()).fold(0.0, |s, (u, v)| u * v + s)
        };
        let y_cpu = dot(xr, w.row(i));
        let a_cpu = dot(ar, wa.row(i));
        let (y_gemm, a_gemm, o_gemm) = products[i];
        let mut lanes = vec![(Lane::Signed, y_gemm, y_cpu, a_cpu)];
        lanes.push((Lane::Abs, a_gemm, a_cpu, a_cpu));
        if let Some(o) = o_gemm {
            let o_cpu = dot(ar, wa.row(c + i));
            lanes.push((Lane::Offset, o, o_cpu, o_cpu));
        }
        for (lane, gemm, cpu, mag) in lanes {
            let tolerance = cross_check_tolerance(k, mag, gemm, cpu);
            // NaN on either side is a disagreement: the products of finite X and W are finite.
            let agree = (gemm - cpu).abs() <= tolerance;
            if !agree {
                return Err(OffloadError::Disagrees {
                    m: r,
                    n: col,
                    lane,
                    gemm,
                    cpu,
                    tolerance,
                });
            }
        }
    }
    Ok(())
}
