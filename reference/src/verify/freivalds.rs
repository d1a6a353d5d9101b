//! Freivalds' check in both directions, with ±1 vectors and a tolerance that is a theorem.
//!
//! Rows: `Y·r` (from the kernel output) against `X·(Wᵀ·r) + r·bias`, per row `m`.
//! Columns: `sᵀ·Y` against `(sᵀ·X)·Wᵀ + (Σ s)·bias`, per column `n`.
//! Both sides share one pass over W, one over Y and two over X; nothing of size M×N is formed,
//! and every product runs through the GEMM on f64 blocks.
//!
//! Tolerance of row `m`: `Σ_n bound(m, n)`, which the linearity of the bound lets us evaluate from
//! `Σ_n a(m,n) = Σ_k |x_mk|·Σ_n |w_nk|` (and the same for `a_offset`) and `|y| ≤ a + |bias|`,
//! `|y − bias| ≤ a`; columns likewise with `Σ_m`. On top comes the f64 error of forming the two
//! sides. Because the tolerance sums the bounds of a whole line, the row check sees errors in
//! whole rows and tiles, the column check whole columns; a single element is seen when its
//! error exceeds its line's tolerance (sampled verification checks chosen lines exactly).
//!
//! Non-finite outputs (docs/contract.md §6 "The range edge") are checked one by one and left out of the
//! projections: a ±Inf against the exact reference dot product of its element (f64, with the
//! element's own bound: correct where `[y − bound, y + bound]` reaches the overflow threshold),
//! its exact value then subtracted on the reference side of its row and column (and its
//! magnitudes from their tolerances); a NaN fails with its position. Under IEEE inputs
//! ([`NonFiniteX::Ieee`]) the rows of X holding NaN/±Inf are zeroed for the projections and
//! every element of those rows is checked against its IEEE value instead. Every failing element
//! names its row and column.

use crate::bound::{BoundModel, U64, gamma};
use crate::compare::{OutputBits, check_model_for, element_ratio};
use crate::gemm::{
    ActivationLanes, InputError, Lines, NonFiniteX, SpecialRows, WeightLanes, activation_pass,
    activation_rows, bias_values, bits_to_f64, cols_from_pass, elements_unchecked, rows_from_pass,
    validate_with, weight_pass, weight_rows,
};
use crate::layer::{Activations, QuantizedLayer};
use ndarray::{Array1, Array2, ArrayView2, Axis, concatenate};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Independent ±1 vectors per direction.
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
    /// Rows whose check failed in some trial, or that hold poison or a wrong non-finite
    /// element; sorted.
    pub failed_rows: Vec<usize>,
    pub failed_cols: Vec<usize>,
    /// Largest `|Y·r − X·(Wᵀ·r)| / tolerance` over rows and columns.
    pub worst_ratio: f64,
    pub worst_line: Option<Line>,
    /// Elements checked one by one (±Inf/NaN outputs, and every element of a row of X holding
    /// NaN/±Inf), correct or not.
    pub checked_one_by_one: usize,
    /// Of those, the wrong ones: a NaN where the reference is not NaN, an Inf beyond the range
    /// edge, a finite value where the reference is NaN/±Inf.
    pub nonfinite: usize,
    /// The first [`MAX_POSITIONS`] wrong elements, `(m, n)`.
    pub nonfinite_at: Vec<(usize, usize)>,
    pub poison_left: usize,
}

/// Wrong non-finite elements listed by position in a report.
pub const MAX_POSITIONS: usize = 16;

impl FreivaldsReport {
    pub fn passed(&self) -> bool {
        self.failed_rows.is_empty()
            && self.failed_cols.is_empty()
            && self.nonfinite == 0
            && self.poison_left == 0
    }
}

/// `[count, TRIALS]` of ±1.
fn signs(rng: &mut ChaCha8Rng, count: usize) -> Array2<f64> {
    Array2::from_shape_fn((count, TRIALS), |_| {
        if rng.random::<bool>() { 1.0 } else { -1.0 }
    })
}

/// Runs the check. Deterministic for a given seed: partial sums are combined in a fixed order.
pub fn freivalds(
    x: &Activations,
    layer: &QuantizedLayer,
    model: &BoundModel,
    out: OutputBits<'_>,
    seed: u64,
) -> Result<FreivaldsReport, InputError> {
    freivalds_with(x, layer, model, out, seed, NonFiniteX::Refuse)
}

/// [`freivalds`], with the policy for non-finite X.
pub fn freivalds_with(
    x: &Activations,
    layer: &QuantizedLayer,
    model: &BoundModel,
    out: OutputBits<'_>,
    seed: u64,
    non_finite_x: NonFiniteX,
) -> Result<FreivaldsReport, InputError> {
    validate_with(x, layer, &model.recipe, non_finite_x)?;
    check_model_for(model, layer.shape.k, layer.dtype)?;
    out.validate(x.m, layer.shape.n)?;
    let (xz, special) = SpecialRows::prepare(x, non_finite_x);
    Ok(run(&xz, &special, layer, model, out, seed, &[], &[]).0)
}

/// Row and column sums of the kernel output.
struct OutputSums {
    /// `[M, TRIALS + 1]`: `Σ_n r_n·ŷ_mn` per trial, then `Σ_n |ŷ_mn|`.
    rows: Array2<f64>,
    /// `[TRIALS + 1, N]`: `Σ_m s_m·ŷ_mn` per trial, then `Σ_m |ŷ_mn|`.
    cols: Array2<f64>,
    row_bad: Vec<bool>,
    col_bad: Vec<bool>,
    /// Non-finite elements (not poison) outside the skipped rows, `(m, n, bits)`.
    nonfinite: Vec<(usize, usize, u16)>,
    poison: usize,
}

/// Rows of Y handled together: each column accumulator is read and written once per group.
const Y_GROUP: usize = 4;

/// `Σ_j a_j·b_j` with independent partial sums, so the loop vectorizes.
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for j in 0..8 {
            acc[j] += x[j] * y[j];
        }
    }
    acc.iter().sum::<f64>() + tail
}

fn abs_sum(a: &[f64]) -> f64 {
    let mut acc = [0.0; 8];
    let ca = a.chunks_exact(8);
    let tail: f64 = ca.remainder().iter().map(|x| x.abs()).sum();
    for x in ca {
        for j in 0..8 {
            acc[j] += x[j].abs();
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// One pass over Y, converted to f64 a few rows at a time. Non-finite elements enter the sums as
/// 0: poison flags its row and column, the others are listed for the one-by-one check. Rows
/// marked in `skip` enter as 0 whole (they are checked element by element).
fn output_sums(
    out: OutputBits<'_>,
    dtype: crate::ActDtype,
    r: &Array2<f64>,
    s: &Array2<f64>,
    skip: &[bool],
) -> OutputSums {
    let (m, n) = (s.nrows(), r.nrows());
    let poison = dtype.poison_bits();
    // Trial vectors as plain slices (structure of arrays) for the dot products.
    let r_soa: Vec<Vec<f64>> = (0..TRIALS).map(|t| r.column(t).to_vec()).collect();
    let tasks = (4 * rayon::current_num_threads()).clamp(1, m.max(1));
    let per_task = m.div_ceil(tasks).div_ceil(Y_GROUP).max(1) * Y_GROUP;
    struct Part {
        rows: Vec<[f64; TRIALS + 1]>,
        row_bad: Vec<bool>,
        cols: Vec<Vec<f64>>,
        col_bad: Vec<bool>,
        nonfinite: Vec<(usize, usize, u16)>,
        poison: usize,
    }
    let parts: Vec<Part> = (0..m.div_ceil(per_task))
        .into_par_iter()
        .map(|ti| {
            let rows = ti * per_task..((ti + 1) * per_task).min(m);
            let mut part = Part {
                rows: Vec::with_capacity(rows.len()),
                row_bad: Vec::with_capacity(rows.len()),
                cols: vec![vec![0.0; n]; TRIALS + 1],
                col_bad: vec![false; n],
                nonfinite: Vec::new(),
                poison: 0,
            };
            let mut buf: Vec<Vec<f64>> = vec![vec![0.0; n]; Y_GROUP];
            for g0 in rows.clone().step_by(Y_GROUP) {
                let cnt = Y_GROUP.min(rows.end - g0);
                for (i, y) in buf.iter_mut().enumerate().take(cnt) {
                    let src = &out.bits[(g0 + i) * out.row_stride..(g0 + i) * out.row_stride + n];
                    let mut bad = false;
                    if skip[g0 + i] {
                        y.fill(0.0);
                        for (j, &b) in src.iter().enumerate() {
                            if b == poison {
                                part.poison += 1;
                                part.col_bad[j] = true;
                                bad = true;
                            }
                        }
                    } else {
                        bits_to_f64(dtype, src, y);
                    }
                    if !skip[g0 + i]
                        && src.iter().filter(|&&b| !dtype.is_finite_bits(b)).count() > 0
                    {
                        for (j, (&b, v)) in src.iter().zip(y.iter_mut()).enumerate() {
                            if !dtype.is_finite_bits(b) {
                                if b == poison {
                                    part.poison += 1;
                                    part.col_bad[j] = true;
                                    bad = true;
                                } else {
                                    part.nonfinite.push((g0 + i, j, b));
                                }
                                *v = 0.0;
                            }
                        }
                    }
                    let mut lanes = [0.0; TRIALS + 1];
                    for t in 0..TRIALS {
                        lanes[t] = dot(&r_soa[t], y);
                    }
                    lanes[TRIALS] = abs_sum(y);
                    part.rows.push(lanes);
                    part.row_bad.push(bad);
                }
                for y in buf.iter_mut().skip(cnt) {
                    y.fill(0.0);
                }
                let sg: Vec<[f64; Y_GROUP]> = (0..TRIALS)
                    .map(|t| std::array::from_fn(|i| if i < cnt { s[[g0 + i, t]] } else { 0.0 }))
                    .collect();
                let [y0, y1, y2, y3] = &buf[..] else {
                    unreachable!("Y_GROUP rows")
                };
                for (t, c) in part.cols.iter_mut().enumerate() {
                    if t < TRIALS {
                        let w = sg[t];
                        for ((((c, a), b), d), e) in c.iter_mut().zip(y0).zip(y1).zip(y2).zip(y3) {
                            *c += w[0] * a + w[1] * b + w[2] * d + w[3] * e;
                        }
                    } else {
                        for ((((c, a), b), d), e) in c.iter_mut().zip(y0).zip(y1).zip(y2).zip(y3) {
                            *c += a.abs() + b.abs() + d.abs() + e.abs();
                        }
                    }
                }
            }
            part
        })
        .collect();
    let mut sums = OutputSums {
        rows: Array2::zeros((m, TRIALS + 1)),
        cols: Array2::zeros((TRIALS + 1, n)),
        row_bad: Vec::with_capacity(m),
        col_bad: vec![false; n],
        nonfinite: Vec::new(),
        poison: 0,
    };
    let mut at = 0;
    for p in parts {
        for (i, lanes) in p.rows.iter().enumerate() {
            for (l, v) in lanes.iter().enumerate() {
                sums.rows[[at + i, l]] = *v;
            }
        }
        at += p.rows.len();
        for (t, c) in p.cols.iter().enumerate() {
            sums.cols
                .row_mut(t)
                .iter_mut()
                .zip(c)
                .for_each(|(d, v)| *d += v);
        }
        sums.col_bad
            .iter_mut()
            .zip(p.col_bad)
            .for_each(|(d, b)| *d |= b);
        sums.row_bad.extend(p.row_bad);
        sums.nonfinite.extend(p.nonfinite);
        sums.poison += p.poison;
    }
    sums
}

/// One check's inputs, shared by its steps.
struct Case<'a> {
    /// X with the rows in `special` zeroed.
    x: &'a Activations,
    special: &'a SpecialRows,
    layer: &'a QuantizedLayer,
    model: &'a BoundModel,
    out: OutputBits<'a>,
    /// `[N]` bias values (zeros without bias).
    bias: Vec<f64>,
}

impl Case<'_> {
    /// The magnitude lane's offset.
    fn offset(&self) -> Option<f64> {
        self.model.recipe.magnitude_offset()
    }

    /// The offset that decides IEEE special values (only offset accumulation turns an Inf into
    /// Inf − Inf; the pre-rounded bias keeps w = 0 ⇔ ŵ = 0).
    fn special_offset(&self) -> Option<f64> {
        self.model.recipe.offset_accumulation
    }
}

/// The ±1 vectors: `r` `[N, TRIALS]` multiplies Y from the right, `s` `[M, TRIALS]` from the left.
struct Signs {
    r: Array2<f64>,
    s: Array2<f64>,
}

/// The reference side of both projections, from the three passes over X and W, and the sampled
/// lines formed in the same passes.
struct Projections {
    /// `[M, TRIALS]`: `X·(Wᵀ·r)` per trial.
    row_rhs: Array2<f64>,
    /// `[M, 1 (+ 1)]`: `|X|·Σ_n|w|`, then (offset recipes) `|X|·Σ_n(offset magnitude)`.
    row_mag: Array2<f64>,
    /// `[TRIALS, N]`: `(sᵀ·X)·Wᵀ` per trial.
    col_dots: Array2<f64>,
    /// `[N]`: `Σ_m a(m, n)`, and (offset recipes) `Σ_m a_offset(m, n)`.
    col_mag: Array1<f64>,
    col_off: Option<Array1<f64>>,
    /// The row and column magnitudes before any element is taken out of them: the slack of the
    /// f64 sums is formed from these.
    row_mag_all: Array1<f64>,
    col_mag_all: Array1<f64>,
    row_lines: Lines,
    col_lines: Lines,
}

/// The check, plus the exact reference lines for `rows` and `cols` computed in the same passes
/// (sampled verification fused in: the sampled rows ride the W pass, the columns the X pass).
/// `x` is X with the rows in `special` zeroed ([`SpecialRows::prepare`]); the returned lines hold
/// the IEEE values on those rows.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    x: &Activations,
    special: &SpecialRows,
    layer: &QuantizedLayer,
    model: &BoundModel,
    out: OutputBits<'_>,
    seed: u64,
    rows: &[usize],
    cols: &[usize],
) -> (FreivaldsReport, Lines, Lines) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let r = signs(&mut rng, layer.shape.n);
    let s = signs(&mut rng, x.m);
    let signs = Signs { r, s };
    let bias = bias_values(layer);
    let case = Case {
        x,
        special,
        layer,
        model,
        out,
        bias,
    };
    let mut p = projections(&case, &signs, rows, cols);

    // Y pass.
    let mut skip = vec![false; x.m];
    for row in &special.rows {
        skip[row.m] = true;
    }
    let ys = output_sums(out, x.dtype, &signs.r, &signs.s, &skip);
    let (wrong, checked_one_by_one) = check_one_by_one(&case, &signs, &ys, &mut p);

    let mut report = FreivaldsReport {
        trials: TRIALS,
        seed,
        failed_rows: Vec::new(),
        failed_cols: Vec::new(),
        worst_ratio: 0.0,
        worst_line: None,
        checked_one_by_one,
        nonfinite: wrong.len(),
        nonfinite_at: wrong.iter().take(MAX_POSITIONS).copied().collect(),
        poison_left: ys.poison,
    };
    judge_rows(&case, &signs, &ys, &skip, &p, &mut report);
    judge_cols(&case, &signs, &ys, &p, &mut report);
    for &(m, n) in &wrong {
        report.failed_rows.push(m);
        report.failed_cols.push(n);
    }
    for v in [&mut report.failed_rows, &mut report.failed_cols] {
        v.sort_unstable();
        v.dedup();
    }
    (report, p.row_lines, p.col_lines)
}

/// The passes over X, W and X again: the reference side of both projections and their
/// magnitudes, with the sampled rows and columns riding along.
fn projections(case: &Case<'_>, signs: &Signs, rows: &[usize], cols: &[usize]) -> Projections {
    let (x, layer, special) = (case.x, case.layer, case.special);
    let (offset, special_offset) = (case.offset(), case.special_offset());
    let (r, s) = (&signs.r, &signs.s);

    // X pass 1: sᵀ·X per trial and Σ_m |x_mk|; sampled columns X·W_colsᵀ, |X|·|W_cols|ᵀ.
    let (wc, wca) = weight_rows(layer, offset, cols);
    let st = s.t();
    let xp = activation_pass(
        x,
        &ActivationLanes {
            left: Some(st),
            signed: Some(wc.view()),
            abs: Some(wca.view()),
        },
    );
    let tx = xp.left.expect("left lanes");
    let mut col_lines = cols_from_pass(
        layer,
        offset,
        cols,
        &xp.signed.expect("signed lanes"),
        &xp.abs.expect("abs lanes"),
        (0, 0),
    );
    special.patch(&mut col_lines, layer, special_offset);

    // W pass: lanes [sᵀX trials; sampled X rows] against W, [Σ|x|; sampled |X| rows] against |W|,
    // and rᵀ·W with Σ_n |w_nk| (and the offset magnitude) from the other side.
    let (lx, la) = activation_rows(x, rows);
    let signed = concatenate(
        Axis(0),
        &[tx.slice_axis(Axis(0), (0..TRIALS).into()), lx.view()],
    )
    .expect("lanes");
    let abs = concatenate(
        Axis(0),
        &[
            tx.slice_axis(Axis(0), (TRIALS..TRIALS + 1).into()),
            la.view(),
        ],
    )
    .expect("lanes");
    let wp = weight_pass(
        layer,
        offset,
        &WeightLanes {
            signed: signed.view(),
            abs: abs.view(),
            right: Some(r.view()),
        },
    );
    let col_dots = wp.signed.slice_axis(Axis(0), (0..TRIALS).into()).to_owned();
    let col_mag = wp.abs.row(0).to_owned();
    let col_off = wp.offset.as_ref().map(|o| o.row(0).to_owned());
    let v = wp.right.clone().expect("right lanes");
    let mut row_lines = rows_from_pass(layer, rows, wp, (TRIALS, 1));
    special.patch(&mut row_lines, layer, special_offset);

    // X pass 2: X·(Wᵀr) per trial; |X|·Σ_n|w| and |X|·Σ_n(offset magnitude).
    let vt = v.slice_axis(Axis(0), (0..TRIALS).into());
    let mags = v.slice_axis(Axis(0), (TRIALS..v.nrows()).into());
    let xp2 = activation_pass(
        x,
        &ActivationLanes {
            left: None,
            signed: Some(vt),
            abs: Some(mags),
        },
    );
    let row_rhs = xp2.signed.expect("signed lanes");
    let row_mag = xp2.abs.expect("abs lanes");
    Projections {
        row_mag_all: row_mag.column(0).to_owned(),
        col_mag_all: col_mag.clone(),
        row_rhs,
        row_mag,
        col_dots,
        col_mag,
        col_off,
        row_lines,
        col_lines,
    }
}

/// The elements checked one by one, each taken out of the projections where it is finite on the
/// reference side: every element of a special row against its IEEE value, and ±Inf/NaN outputs
/// elsewhere against the exact element. Returns the wrong ones and how many were checked.
fn check_one_by_one(
    case: &Case<'_>,
    signs: &Signs,
    ys: &OutputSums,
    p: &mut Projections,
) -> (Vec<(usize, usize)>, usize) {
    let (layer, model, out, dtype) = (case.layer, case.model, case.out, case.x.dtype);
    let (offset, special_offset) = (case.offset(), case.special_offset());
    let (r, s) = (&signs.r, &signs.s);
    let mut wrong: Vec<(usize, usize)> = Vec::new();
    let mut checked_one_by_one = 0;

    // Rows of X with NaN/±Inf: every element against its IEEE value, nothing in the sums.
    for row in &case.special.rows {
        for n in 0..layer.shape.n {
            let bits = out.get(row.m, n);
            if bits == dtype.poison_bits() {
                continue; // counted by the Y pass
            }
            checked_one_by_one += 1;
            let y = case
                .special
                .value(layer, special_offset, row.m, n)
                .expect("a special row");
            if element_ratio(dtype, bits, y, || f64::INFINITY).is_none() {
                wrong.push((row.m, n));
            }
        }
    }
    // ±Inf and NaN outputs elsewhere: one by one against the exact element, then out of the
    // projections on the reference side too.
    let infinite: Vec<(usize, usize)> = ys
        .nonfinite
        .iter()
        .filter(|&&(_, _, b)| !dtype.is_nan_bits(b))
        .map(|&(m, n, _)| (m, n))
        .collect();
    for &(m, n, b) in &ys.nonfinite {
        if dtype.is_nan_bits(b) {
            checked_one_by_one += 1;
            wrong.push((m, n)); // the reference is finite outside the special rows
        }
    }
    let exact = elements_unchecked(case.x, layer, offset, &infinite);
    for (&(m, n), &(y, a, acc)) in infinite.iter().zip(&exact) {
        checked_one_by_one += 1;
        let b = case.bias[n];
        let ok = element_ratio(dtype, out.get(m, n), y, || model.element(y, a, acc, b))
            .is_some_and(|ratio| ratio <= 1.0);
        if !ok {
            wrong.push((m, n));
        }
        for t in 0..TRIALS {
            p.row_rhs[[m, t]] -= r[[n, t]] * y;
            p.col_dots[[t, n]] -= s[[m, t]] * y;
        }
        p.row_mag[[m, 0]] -= a;
        p.col_mag[n] -= a;
        if offset.is_some() {
            p.row_mag[[m, 1]] -= acc;
            if let Some(o) = p.col_off.as_mut() {
                o[n] -= acc;
            }
        }
    }
    (wrong, checked_one_by_one)
}

/// Each row's projections `Y·r` against `X·(Wᵀ·r) + r·bias` within the sum of the row's bounds
/// and the f64 error of forming both sides.
fn judge_rows(
    case: &Case<'_>,
    signs: &Signs,
    ys: &OutputSums,
    skip: &[bool],
    p: &Projections,
    report: &mut FreivaldsReport,
) {
    let (n_cols, k) = (case.layer.shape.n, case.layer.shape.k);
    let bias = &case.bias;
    let any_bias = bias.iter().any(|&b| b != 0.0);
    let bias_abs: f64 = bias.iter().map(|b| b.abs()).sum();
    let bias_col = ArrayView2::from_shape((n_cols, 1), bias.as_slice()).expect("bias");
    let rb = signs.r.t().dot(&bias_col);
    let row_gamma = gamma(n_cols + k + 4, U64).unwrap_or(f64::INFINITY);
    let terms = case.model.terms(any_bias);
    // `skip` has one entry per row of X.
    for (m, &skipped) in skip.iter().enumerate() {
        let sum_a = p.row_mag[[m, 0]].max(0.0);
        let sum_acc = if case.offset().is_some() {
            p.row_mag[[m, 1]].max(0.0)
        } else {
            sum_a
        };
        let tol = terms.eval(sum_acc, sum_a, sum_a + bias_abs, sum_a)
            + n_cols.saturating_sub(1) as f64 * terms.floor;
        let slack = row_gamma * (ys.rows[[m, TRIALS]] + p.row_mag_all[m] + bias_abs);
        let limit = tol * (1.0 + 2.0 * row_gamma) + slack;
        let ratio = (0..TRIALS)
            .map(|t| {
                // Rows of X with NaN/±Inf are out of both sides, their bias included.
                let bias_part = if skipped { 0.0 } else { rb[[t, 0]] };
                (ys.rows[[m, t]] - (p.row_rhs[[m, t]] + bias_part)).abs() / limit
            })
            .fold(0.0, f64::max);
        note(report, Line::Row(m), ratio, ys.row_bad[m]);
    }
}

/// Each column's projections `sᵀ·Y` against `(sᵀ·X)·Wᵀ + (Σ s)·bias` within the sum of the
/// column's bounds and the f64 error of forming both sides.
fn judge_cols(
    case: &Case<'_>,
    signs: &Signs,
    ys: &OutputSums,
    p: &Projections,
    report: &mut FreivaldsReport,
) {
    let (m_rows, k) = (case.x.m, case.layer.shape.k);
    let s = &signs.s;
    // Rows of X with NaN/±Inf are out of both sides of the projections, their bias included.
    let mut s_sum = s.sum_axis(Axis(0));
    for row in &case.special.rows {
        for t in 0..TRIALS {
            s_sum[t] -= s[[row.m, t]];
        }
    }
    let col_gamma = gamma(m_rows + k + 4, U64).unwrap_or(f64::INFINITY);
    let mf = m_rows as f64;
    for n in 0..case.layer.shape.n {
        let b = case.bias[n];
        let terms = case.model.terms(b != 0.0);
        let sum_a = p.col_mag[n].max(0.0);
        let sum_acc = p.col_off.as_ref().map_or(sum_a, |o| o[n].max(0.0));
        let tol = terms.eval(sum_acc, sum_a, sum_a + mf * b.abs(), sum_a)
            + (mf - 1.0).max(0.0) * terms.floor;
        let slack = col_gamma * (ys.cols[[TRIALS, n]] + p.col_mag_all[n] + mf * b.abs());
        let limit = tol * (1.0 + 2.0 * col_gamma) + slack;
        let ratio = (0..TRIALS)
            .map(|t| (ys.cols[[t, n]] - (p.col_dots[[t, n]] + s_sum[t] * b)).abs() / limit)
            .fold(0.0, f64::max);
        note(report, Line::Col(n), ratio, ys.col_bad[n]);
    }
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
