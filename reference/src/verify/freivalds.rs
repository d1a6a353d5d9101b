//! Freivalds' check in both directions, with ±1 vectors and a tolerance that is a theorem.
//!
//! Rows: `Y·r` (from the kernel output) against `X·(Wᵀ·r) + r·bias`, per row `m`.
//! Columns: `sᵀ·Y` against `(sᵀ·X)·Wᵀ + (Σ s)·bias`, per column `n`.
//! Both sides share one pass over W, one over Y and two over X; nothing of size M×N is formed.
//!
//! Tolerance of row `m`: `Σ_n bound(m, n)`, which the linearity of the bound lets us evaluate from
//! `Σ_n a(m,n) = Σ_k |x_mk|·Σ_n |w_nk|` (and the same for `a_offset`) and `|y| ≤ a + |bias|`,
//! `|y − bias| ≤ a`; columns likewise with `Σ_m`. On top comes the f64 error of forming the two
//! sides. Because the tolerance sums the bounds of a whole line, the row check sees errors in
//! whole rows and tiles; the column check adds whole columns; single elements are seen when
//! their error exceeds the line's tolerance (sampled verification covers them exactly).

use crate::bound::{BoundModel, U64, gamma};
use crate::compare::{OutputBits, check_model_for};
use crate::gemm::{InputError, bias_values, decode_table, validate};
use crate::layer::{Activations, QuantizedLayer};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Independent ±1 vectors per direction. Each adds one lane to every pass; the fourth lane of
/// the 4-wide accumulators carries the magnitudes.
pub const TRIALS: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Line {
    Row(usize),
    Col(usize),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FreivaldsReport {
    pub trials: usize,
    pub seed: u64,
    /// Rows whose check failed in some trial, or that hold NaN/Inf/poison.
    pub failed_rows: Vec<usize>,
    pub failed_cols: Vec<usize>,
    /// Largest `|Y·r − X·(Wᵀ·r)| / tolerance` over rows and columns.
    pub worst_ratio: f64,
    pub worst_line: Option<Line>,
    pub nonfinite: usize,
    pub poison_left: usize,
}

impl FreivaldsReport {
    pub fn passed(&self) -> bool {
        self.failed_rows.is_empty()
            && self.failed_cols.is_empty()
            && self.nonfinite == 0
            && self.poison_left == 0
    }
}

type Lanes = [f64; 4];

/// ±1 in the trial lanes, 1 in the magnitude lane.
fn signs(rng: &mut ChaCha8Rng, count: usize) -> Vec<Lanes> {
    (0..count)
        .map(|_| {
            let bits: u32 = rng.random();
            std::array::from_fn(|l| {
                if l == TRIALS || bits >> l & 1 == 0 {
                    1.0
                } else {
                    -1.0
                }
            })
        })
        .collect()
}

fn blocks(extent: usize) -> Vec<std::ops::Range<usize>> {
    let parts = (4 * rayon::current_num_threads()).clamp(1, extent.max(1));
    let len = extent.div_ceil(parts).max(1);
    (0..extent)
        .step_by(len)
        .map(|s| s..(s + len).min(extent))
        .collect()
}

fn add_lanes(dst: &mut [Lanes], src: &[Lanes]) {
    for (d, s) in dst.iter_mut().zip(src) {
        for l in 0..4 {
            d[l] += s[l];
        }
    }
}

/// Runs the check. Deterministic for a given seed: partial sums are combined in a fixed order.
pub fn freivalds(
    x: &Activations,
    layer: &QuantizedLayer,
    model: &BoundModel,
    out: OutputBits<'_>,
    seed: u64,
) -> Result<FreivaldsReport, InputError> {
    validate(x, layer, &model.recipe)?;
    check_model_for(model, layer.shape.k, layer.dtype)?;
    out.validate(x.m, layer.shape.n)?;
    Ok(run(x, layer, model, out, seed))
}

pub(crate) fn run(
    x: &Activations,
    layer: &QuantizedLayer,
    model: &BoundModel,
    out: OutputBits<'_>,
    seed: u64,
) -> FreivaldsReport {
    let (m_rows, n_cols, k) = (x.m, layer.shape.n, layer.shape.k);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let r = signs(&mut rng, n_cols);
    let s = signs(&mut rng, m_rows);
    let table = decode_table(x.dtype);
    let offset = model.recipe.offset_accumulation;
    let bias = bias_values(layer);

    // X pass 1: tx[k] = (Σ_m s_m·x_mk per trial, Σ_m |x_mk|).
    let partials: Vec<Vec<Lanes>> = blocks(m_rows)
        .into_par_iter()
        .map(|rows| {
            let mut acc = vec![[0.0; 4]; k];
            for m in rows {
                let sm = s[m];
                let src = &x.data[m * x.row_stride..m * x.row_stride + k];
                for (a, &b) in acc.iter_mut().zip(src) {
                    let v = table[usize::from(b)];
                    let xv = [v, v, v, v.abs()];
                    for l in 0..4 {
                        a[l] += sm[l] * xv[l];
                    }
                }
            }
            acc
        })
        .collect();
    let mut tx = vec![[0.0; 4]; k];
    for p in &partials {
        add_lanes(&mut tx, p);
    }
    drop(partials);

    // W pass: v[k] = (Σ_n r_n·w_nk per trial, Σ_n |w_nk|), voff[k] = Σ_n |s|(2·off+q+z);
    // per column n: (Σ_k tx_k·w_nk per trial, Σ_m a(m,n)), and Σ_m a_offset(m,n).
    let mut col_dots = vec![[0.0; 4]; n_cols];
    let mut col_off = vec![0.0; n_cols];
    let nblocks = blocks(n_cols);
    let nb = nblocks.first().map_or(1, |b| b.len());
    let partials: Vec<(Vec<Lanes>, Vec<f64>)> = col_dots
        .par_chunks_mut(nb)
        .zip(col_off.par_chunks_mut(nb))
        .enumerate()
        .map(|(bi, (dots, offs))| {
            let mut v = vec![[0.0; 4]; k];
            let mut voff = vec![0.0; if offset.is_some() { k } else { 0 }];
            for (i, (dot_n, off_n)) in dots.iter_mut().zip(offs.iter_mut()).enumerate() {
                let n = bi * nb + i;
                let rn = r[n];
                let codes = &layer.q[n * k..(n + 1) * k];
                let mut d0 = [0.0; 4];
                let mut d1 = [0.0; 4];
                let mut doff = 0.0;
                for g in 0..layer.shape.groups() {
                    let (k0, k1) = (g * layer.shape.group, ((g + 1) * layer.shape.group).min(k));
                    let (sc, z) = (layer.scale(n, g), f64::from(layer.zero(n, g)));
                    let lut: [Lanes; 16] = std::array::from_fn(|c| {
                        let w = (c as f64 - z) * sc;
                        [w, w, w, w.abs()]
                    });
                    let (vg, txg, cg) = (&mut v[k0..k1], &tx[k0..k1], &codes[k0..k1]);
                    let mut pairs_v = vg.chunks_exact_mut(2);
                    let mut pairs_t = txg.chunks_exact(2);
                    let mut pairs_c = cg.chunks_exact(2);
                    for ((vp, tp), cp) in (&mut pairs_v).zip(&mut pairs_t).zip(&mut pairs_c) {
                        let w0 = lut[usize::from(cp[0] & 15)];
                        let w1 = lut[usize::from(cp[1] & 15)];
                        for l in 0..4 {
                            vp[0][l] += rn[l] * w0[l];
                            vp[1][l] += rn[l] * w1[l];
                            d0[l] += tp[0][l] * w0[l];
                            d1[l] += tp[1][l] * w1[l];
                        }
                    }
                    for ((vk, tk), &c) in pairs_v
                        .into_remainder()
                        .iter_mut()
                        .zip(pairs_t.remainder())
                        .zip(pairs_c.remainder())
                    {
                        let w = lut[usize::from(c & 15)];
                        for l in 0..4 {
                            vk[l] += rn[l] * w[l];
                            d0[l] += tk[l] * w[l];
                        }
                    }
                    if let Some(off) = offset {
                        let base = 2.0 * off + z;
                        for ((vo, t), &c) in voff[k0..k1].iter_mut().zip(&tx[k0..k1]).zip(cg) {
                            let wo = sc.abs() * (base + f64::from(c));
                            *vo += wo;
                            doff += t[3] * wo;
                        }
                    }
                }
                *dot_n = std::array::from_fn(|l| d0[l] + d1[l]);
                *off_n = doff;
            }
            (v, voff)
        })
        .collect();
    let mut v = vec![[0.0; 4]; k];
    let mut voff = vec![0.0; k];
    for (pv, po) in &partials {
        add_lanes(&mut v, pv);
        for (d, s) in voff.iter_mut().zip(po) {
            *d += s;
        }
    }
    drop(partials);

    // X pass 2 per row: (Σ_k x·v per trial, Σ_n a(m,n)) and Σ_n a_offset(m,n).
    let row_rhs: Vec<(Lanes, f64)> = (0..m_rows)
        .into_par_iter()
        .map(|m| {
            let src = &x.data[m * x.row_stride..m * x.row_stride + k];
            let mut acc = [0.0; 4];
            let mut off = 0.0;
            for ((vk, vo), &b) in v
                .iter()
                .zip(voff.iter().chain(std::iter::repeat(&0.0)))
                .zip(src)
            {
                let xv = table[usize::from(b)];
                let xl = [xv, xv, xv, xv.abs()];
                for l in 0..4 {
                    acc[l] += xl[l] * vk[l];
                }
                off += xl[3] * vo;
            }
            (acc, off)
        })
        .collect();

    // Y pass: per row (Σ_n r_n·ŷ per trial, Σ_n |ŷ|), per column (Σ_m s_m·ŷ, Σ_m |ŷ|).
    let poison = x.dtype.poison_bits();
    struct YPart {
        cols: Vec<Lanes>,
        col_bad: Vec<bool>,
        rows: Vec<(Lanes, bool)>,
        nonfinite: usize,
        poison: usize,
    }
    let yparts: Vec<YPart> = blocks(m_rows)
        .into_par_iter()
        .map(|range| {
            let mut part = YPart {
                cols: vec![[0.0; 4]; n_cols],
                col_bad: vec![false; n_cols],
                rows: Vec::with_capacity(range.len()),
                nonfinite: 0,
                poison: 0,
            };
            for m in range {
                let sm = s[m];
                let src = &out.bits[m * out.row_stride..m * out.row_stride + n_cols];
                let mut acc = [0.0; 4];
                let mut bad = false;
                for (n, &b) in src.iter().enumerate() {
                    let mut yv = table[usize::from(b)];
                    if !yv.is_finite() {
                        if b == poison {
                            part.poison += 1;
                        } else {
                            part.nonfinite += 1;
                        }
                        part.col_bad[n] = true;
                        bad = true;
                        yv = 0.0;
                    }
                    let yl = [yv, yv, yv, yv.abs()];
                    let (rn, c) = (r[n], &mut part.cols[n]);
                    for l in 0..4 {
                        acc[l] += rn[l] * yl[l];
                        c[l] += sm[l] * yl[l];
                    }
                }
                part.rows.push((acc, bad));
            }
            part
        })
        .collect();
    let mut col_lhs = vec![[0.0; 4]; n_cols];
    let mut col_bad = vec![false; n_cols];
    let mut row_lhs = Vec::with_capacity(m_rows);
    let (mut nonfinite, mut poison_left) = (0, 0);
    for p in yparts {
        add_lanes(&mut col_lhs, &p.cols);
        for (d, b) in col_bad.iter_mut().zip(p.col_bad) {
            *d |= b;
        }
        row_lhs.extend(p.rows);
        nonfinite += p.nonfinite;
        poison_left += p.poison;
    }

    let any_bias = bias.iter().any(|&b| b != 0.0);
    let bias_abs: f64 = bias.iter().map(|b| b.abs()).sum();
    let rb: [f64; TRIALS] =
        std::array::from_fn(|t| r.iter().zip(&bias).map(|(rn, b)| rn[t] * b).sum());
    let s_sum: [f64; TRIALS] = std::array::from_fn(|t| s.iter().map(|sm| sm[t]).sum());
    let row_gamma = gamma(n_cols + k + 4, U64).unwrap_or(f64::INFINITY);
    let col_gamma = gamma(m_rows + k + 4, U64).unwrap_or(f64::INFINITY);

    let mut report = FreivaldsReport {
        trials: TRIALS,
        seed,
        failed_rows: Vec::new(),
        failed_cols: Vec::new(),
        worst_ratio: 0.0,
        worst_line: None,
        nonfinite,
        poison_left,
    };
    let terms = model.terms(any_bias);
    for (m, ((lhs, bad), (rhs, a_off))) in row_lhs.iter().zip(&row_rhs).enumerate() {
        let sum_a = rhs[3];
        let sum_acc = if offset.is_some() { *a_off } else { sum_a };
        let tol = terms.eval(sum_acc, sum_a, sum_a + bias_abs, sum_a)
            + n_cols.saturating_sub(1) as f64 * terms.floor;
        let slack = row_gamma * (lhs[3] + sum_a + bias_abs);
        let limit = tol * (1.0 + 2.0 * row_gamma) + slack;
        let ratio = (0..TRIALS)
            .map(|t| (lhs[t] - (rhs[t] + rb[t])).abs() / limit)
            .fold(0.0, f64::max);
        note(&mut report, Line::Row(m), ratio, *bad);
    }
    for (n, ((lhs, rhs), (off, bad))) in col_lhs
        .iter()
        .zip(&col_dots)
        .zip(col_off.iter().zip(&col_bad))
        .enumerate()
    {
        let (b, mf) = (bias[n], m_rows as f64);
        let terms = model.terms(b != 0.0);
        let sum_a = rhs[3];
        let sum_acc = if offset.is_some() { *off } else { sum_a };
        let tol = terms.eval(sum_acc, sum_a, sum_a + mf * b.abs(), sum_a)
            + (mf - 1.0).max(0.0) * terms.floor;
        let slack = col_gamma * (lhs[3] + sum_a + mf * b.abs());
        let limit = tol * (1.0 + 2.0 * col_gamma) + slack;
        let ratio = (0..TRIALS)
            .map(|t| (lhs[t] - (rhs[t] + s_sum[t] * b)).abs() / limit)
            .fold(0.0, f64::max);
        note(&mut report, Line::Col(n), ratio, *bad);
    }
    report
}

fn note(report: &mut FreivaldsReport, line: Line, ratio: f64, bad: bool) {
    if bad || ratio > 1.0 {
        match line {
            Line::Row(m) => report.failed_rows.push(m),
            Line::Col(n) => report.failed_cols.push(n),
        }
    }
    if report.worst_line.is_none() || ratio > report.worst_ratio {
        report.worst_ratio = ratio;
        report.worst_line = Some(line);
    }
}
