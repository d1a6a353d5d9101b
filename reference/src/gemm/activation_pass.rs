//! One pass over X for a set of lanes, converted to f64 block by block, every product done by the
//! GEMM.

use super::decode::{bits_to_f64, row_chunks, task_len};
use crate::layer::Activations;
use ndarray::linalg::general_mat_mul;
use ndarray::{Array2, ArrayView2, Axis, Slice};
use rayon::prelude::*;

/// X (or Y) rows converted per block.
const X_BLOCK: usize = 32;

/// Lanes for one pass over X (see [`activation_pass`]).
pub(crate) struct ActivationLanes<'a> {
    /// `[t, M]`, multiplied by X from the left: `L·X`, `[t, K]`, plus a lane `Σ_m |x_mk|`.
    pub left: Option<ArrayView2<'a, f64>>,
    /// `[c, K]`: `X·Cᵀ`, `[M, c]`.
    pub signed: Option<ArrayView2<'a, f64>>,
    /// `[d, K]`: `|X|·Dᵀ`, `[M, d]`.
    pub abs: Option<ArrayView2<'a, f64>>,
}

pub(crate) struct ActivationPassOut {
    /// `[t + 1, K]`; the last row is `Σ_m |x_mk|`.
    pub left: Option<Array2<f64>>,
    pub signed: Option<Array2<f64>>,
    pub abs: Option<Array2<f64>>,
}

/// One pass over X, converted to f64 block by block, every product done by the GEMM.
pub(crate) fn activation_pass(x: &Activations, lanes: &ActivationLanes<'_>) -> ActivationPassOut {
    let (m, k) = (x.m, x.k);
    let t = lanes.left.map_or(0, |l| l.nrows());
    let mut out_s = lanes.signed.map(|c| Array2::zeros((m, c.nrows())));
    let mut out_a = lanes.abs.map(|d| Array2::zeros((m, d.nrows())));
    let mut left = lanes.left.map(|_| Array2::zeros((t + 1, k)));
    if m == 0 || k == 0 {
        return ActivationPassOut {
            left,
            signed: out_s,
            abs: out_a,
        };
    }
    let per_task = task_len(m.div_ceil(X_BLOCK)) * X_BLOCK;
    let tasks = m.div_ceil(per_task);
    let (s_chunks, a_chunks) = (
        row_chunks(out_s.as_mut(), per_task, tasks),
        row_chunks(out_a.as_mut(), per_task, tasks),
    );
    let partials: Vec<Option<Array2<f64>>> = s_chunks
        .into_par_iter()
        .zip(a_chunks)
        .enumerate()
        .map(|(ti, (mut sc, mut ac))| {
            let mut buf = vec![0.0; 2 * X_BLOCK * k];
            let mut acc = lanes.left.map(|_| Array2::<f64>::zeros((t + 1, k)));
            let mut coef = Array2::<f64>::zeros((t + 1, 2 * X_BLOCK));
            let rows = (m - ti * per_task).min(per_task);
            for b0 in (0..rows).step_by(X_BLOCK) {
                let cnt = X_BLOCK.min(rows - b0);
                let m0 = ti * per_task + b0;
                let (xp, ap) = buf.split_at_mut(X_BLOCK * k);
                for i in 0..cnt {
                    let src = &x.data[(m0 + i) * x.row_stride..(m0 + i) * x.row_stride + k];
                    let dst = &mut xp[i * k..(i + 1) * k];
                    bits_to_f64(x.dtype, src, dst);
                    for (d, s) in ap[i * k..(i + 1) * k].iter_mut().zip(dst.iter()) {
                        *d = s.abs();
                    }
                }
                let xv = ArrayView2::from_shape((cnt, k), &buf[..cnt * k]).expect("block");
                let av = ArrayView2::from_shape((cnt, k), &buf[X_BLOCK * k..(X_BLOCK + cnt) * k])
                    .expect("block");
                let range = Slice::from(b0..b0 + cnt);
                if let (Some(sc), Some(c)) = (sc.as_mut(), lanes.signed) {
                    general_mat_mul(
                        1.0,
                        &xv,
                        &c.t(),
                        0.0,
                        &mut sc.slice_axis_mut(Axis(0), range),
                    );
                }
                if let (Some(ac), Some(d)) = (ac.as_mut(), lanes.abs) {
                    general_mat_mul(
                        1.0,
                        &av,
                        &d.t(),
                        0.0,
                        &mut ac.slice_axis_mut(Axis(0), range),
                    );
                }
                if let (Some(acc), Some(l)) = (acc.as_mut(), lanes.left) {
                    coef.fill(0.0);
                    for i in 0..cnt {
                        for tt in 0..t {
                            coef[[tt, i]] = l[[tt, m0 + i]];
                        }
                        coef[[t, X_BLOCK + i]] = 1.0;
                    }
                    let stacked = ArrayView2::from_shape((2 * X_BLOCK, k), &buf).expect("planes");
                    general_mat_mul(1.0, &coef, &stacked, 1.0, acc);
                }
            }
            acc
        })
        .collect();
    if let Some(total) = left.as_mut() {
        for p in partials.iter().flatten() {
            *total += p;
        }
    }
    ActivationPassOut {
        left,
        signed: out_s,
        abs: out_a,
    }
}
