//! One pass over W for a set of lanes: a fused loop for a few lanes, the GEMM on decoded tiles
//! for many. W is decoded tile by tile; nothing of size N×K is held.

use super::decode::{row_chunks, task_len};
use crate::layer::QuantizedLayer;
use ndarray::linalg::general_mat_mul;
use ndarray::{Array2, ArrayView2, Axis, Slice};
use rayon::prelude::*;

/// Lanes multiplied against W in one pass over it (see [`weight_pass`]).
pub(crate) struct WeightLanes<'a> {
    /// `[s, K]`, multiplied by W: output `[s, N]`.
    pub signed: ArrayView2<'a, f64>,
    /// `[a, K]`, multiplied by |W| (and by the offset magnitude for offset recipes).
    pub abs: ArrayView2<'a, f64>,
    /// `[N, t]`, multiplied by W from the other side: `Rᵀ·W`, `[t, K]`.
    pub right: Option<ArrayView2<'a, f64>>,
}

pub(crate) struct WeightPassOut {
    pub signed: Array2<f64>,
    pub abs: Array2<f64>,
    pub offset: Option<Array2<f64>>,
    /// `[t + 1 (+ 1), K]`: `Rᵀ·W`, then `Σ_n |w_nk|`, then (offset recipes) `Σ_n |s|(2·off+q+z)`.
    pub right: Option<Array2<f64>>,
}

/// K columns decoded per chunk: four rows of three planes stay in L1/L2.
const W_TILE_COLS: usize = 1024;

/// Above this many lanes the GEMM on decoded tiles beats the fused loop (the GEMM pays for
/// packing every tile, the loop pays per lane). Measured on the 4096×14336×28672 verification:
/// 8 lanes 3.3 CPU-s in the loop vs 3.8 with the GEMM; 12 lanes 4.2–4.8 vs 3.9–4.2.
const GEMM_LANES: usize = 8;

/// W rows decoded and consumed together: every lane value loaded is used four times.
const W_GROUP: usize = 4;

/// Four dot products of one lane against four rows, with independent partial sums so that the
/// loop vectorizes.
fn dots4(lane: &[f64], rows: [&[f64]; W_GROUP]) -> [f64; W_GROUP] {
    let mut acc = [[0.0; 4]; W_GROUP];
    let len = lane.len() / 4 * 4;
    for k in (0..len).step_by(4) {
        let l = &lane[k..k + 4];
        for (a, r) in acc.iter_mut().zip(rows) {
            let r = &r[k..k + 4];
            for j in 0..4 {
                a[j] += l[j] * r[j];
            }
        }
    }
    std::array::from_fn(|i| {
        acc[i].iter().sum::<f64>()
            + lane[len..]
                .iter()
                .zip(&rows[i][len..])
                .map(|(a, b)| a * b)
                .sum::<f64>()
    })
}

/// One pass over W, four rows at a time decoded into f64 K-chunks (W, |W|, offset magnitude) and
/// consumed at once by every lane: dot products for the lanes, axpys for the right-hand side.
/// Nothing of size N×K is held.
pub(crate) fn weight_pass(
    layer: &QuantizedLayer,
    offset: Option<f64>,
    lanes: &WeightLanes<'_>,
) -> WeightPassOut {
    if lanes.signed.nrows() + lanes.abs.nrows() > GEMM_LANES {
        return weight_pass_gemm(layer, offset, lanes);
    }
    let (n, k) = (layer.shape.n, layer.shape.k);
    let (ns, na) = (lanes.signed.nrows(), lanes.abs.nrows());
    let t = lanes.right.map_or(0, |r| r.ncols());
    let extra = 1 + usize::from(offset.is_some());
    let nplanes = 2 + usize::from(offset.is_some());
    let signed: Vec<&[f64]> = lanes
        .signed
        .outer_iter()
        .map(|r| r.to_slice().expect("row-major lanes"))
        .collect();
    let abs: Vec<&[f64]> = lanes
        .abs
        .outer_iter()
        .map(|r| r.to_slice().expect("row-major lanes"))
        .collect();
    let mut out_s = Array2::zeros((n, ns));
    let mut out_a = Array2::zeros((n, na));
    let mut out_o = offset.map(|_| Array2::zeros((n, na)));
    let mut right = lanes.right.map(|_| Array2::zeros((t + extra, k)));
    if n > 0 && k > 0 {
        let per_task = task_len(n.div_ceil(W_GROUP)) * W_GROUP;
        let tasks = n.div_ceil(per_task);
        let (sc, ac, oc) = (
            row_chunks(Some(&mut out_s), per_task, tasks),
            row_chunks(Some(&mut out_a), per_task, tasks),
            row_chunks(out_o.as_mut(), per_task, tasks),
        );
        let partials: Vec<Option<Array2<f64>>> = sc
            .into_par_iter()
            .zip(ac)
            .zip(oc)
            .enumerate()
            .map(|(ti, ((sc, ac), mut oc))| {
                let (mut sc, mut ac) = (sc.expect("signed"), ac.expect("abs"));
                // planes[p][i]: row i of plane p (W, |W|, offset magnitude), a K-chunk wide.
                let mut planes: Vec<Vec<Vec<f64>>> =
                    vec![vec![vec![0.0; W_TILE_COLS]; W_GROUP]; nplanes];
                let mut acc = lanes.right.map(|_| Array2::<f64>::zeros((t + extra, k)));
                let rows_here = sc.nrows();
                for r0 in (0..rows_here).step_by(W_GROUP) {
                    let cnt = W_GROUP.min(rows_here - r0);
                    let n0 = ti * per_task + r0;
                    let mut ds = vec![[0.0; W_GROUP]; ns];
                    let mut da = vec![[0.0; W_GROUP]; na];
                    let mut dof = vec![[0.0; W_GROUP]; if offset.is_some() { na } else { 0 }];
                    for k0 in (0..k).step_by(W_TILE_COLS) {
                        let k1 = (k0 + W_TILE_COLS).min(k);
                        let width = k1 - k0;
                        for (i, p) in (0..W_GROUP).map(|i| (i, i < cnt)) {
                            if p {
                                decode_chunk(layer, offset, n0 + i, k0, k1, &mut planes, i);
                            } else {
                                planes.iter_mut().for_each(|pl| pl[i][..width].fill(0.0));
                            }
                        }
                        let rows_of = |p: usize| -> [&[f64]; W_GROUP] {
                            std::array::from_fn(|i| &planes[p][i][..width])
                        };
                        let (w, wa) = (rows_of(0), rows_of(1));
                        for (d, l) in ds.iter_mut().zip(&signed) {
                            let v = dots4(&l[k0..k1], w);
                            d.iter_mut().zip(v).for_each(|(d, v)| *d += v);
                        }
                        for (d, l) in da.iter_mut().zip(&abs) {
                            let v = dots4(&l[k0..k1], wa);
                            d.iter_mut().zip(v).for_each(|(d, v)| *d += v);
                        }
                        if offset.is_some() {
                            let wo = rows_of(2);
                            for (d, l) in dof.iter_mut().zip(&abs) {
                                let v = dots4(&l[k0..k1], wo);
                                d.iter_mut().zip(v).for_each(|(d, v)| *d += v);
                            }
                        }
                        if let (Some(acc), Some(r)) = (acc.as_mut(), lanes.right) {
                            for tt in 0..t + extra {
                                let c: [f64; W_GROUP] =
                                    std::array::from_fn(|i| match (tt < t, i < cnt) {
                                        (true, true) => r[[n0 + i, tt]],
                                        (false, true) => 1.0,
                                        (_, false) => 0.0,
                                    });
                                let src = if tt < t { w } else { rows_of(1 + tt - t) };
                                let mut dst = acc.row_mut(tt);
                                let dst = &mut dst.as_slice_mut().expect("row-major")[k0..k1];
                                for ((((d, a), b), e), f) in dst
                                    .iter_mut()
                                    .zip(src[0])
                                    .zip(src[1])
                                    .zip(src[2])
                                    .zip(src[3])
                                {
                                    *d += c[0] * a + c[1] * b + c[2] * e + c[3] * f;
                                }
                            }
                        }
                    }
                    for i in 0..cnt {
                        sc.row_mut(r0 + i)
                            .iter_mut()
                            .zip(&ds)
                            .for_each(|(o, d)| *o = d[i]);
                        ac.row_mut(r0 + i)
                            .iter_mut()
                            .zip(&da)
                            .for_each(|(o, d)| *o = d[i]);
                        if let Some(oc) = oc.as_mut() {
                            oc.row_mut(r0 + i)
                                .iter_mut()
                                .zip(&dof)
                                .for_each(|(o, d)| *o = d[i]);
                        }
                    }
                }
                acc
            })
            .collect();
        if let Some(total) = right.as_mut() {
            for p in partials.iter().flatten() {
                *total += p;
            }
        }
    }
    WeightPassOut {
        signed: out_s.reversed_axes().as_standard_layout().into_owned(),
        abs: out_a.reversed_axes().as_standard_layout().into_owned(),
        offset: out_o.map(|o| o.reversed_axes().as_standard_layout().into_owned()),
        right,
    }
}

/// Row `n`, columns `k0..k1` of W, |W| and (offset recipes) the offset magnitude into row `i` of
/// each plane.
fn decode_chunk(
    layer: &QuantizedLayer,
    offset: Option<f64>,
    n: usize,
    k0: usize,
    k1: usize,
    planes: &mut [Vec<Vec<f64>>],
    i: usize,
) {
    let (k, group) = (layer.shape.k, layer.shape.group);
    let codes = &layer.q[n * k..(n + 1) * k];
    let [w, wa, rest @ ..] = planes else { return };
    let (w, wa) = (&mut w[i], &mut wa[i]);
    let mut kk = k0;
    while kk < k1 {
        let g = kk / group;
        let end = ((g + 1) * group).min(k1);
        let (s, z) = (layer.scale(n, g), f64::from(layer.zero(n, g)));
        let lut: [f64; 16] = std::array::from_fn(|c| (c as f64 - z) * s);
        let (a, b) = (kk - k0, end - k0);
        for ((d, da), &q) in w[a..b].iter_mut().zip(&mut wa[a..b]).zip(&codes[kk..end]) {
            let v = lut[usize::from(q & 15)];
            *d = v;
            *da = v.abs();
        }
        if let (Some(off), [wo, ..]) = (offset, &mut *rest) {
            let base = 2.0 * off + z;
            for (d, &q) in wo[i][a..b].iter_mut().zip(&codes[kk..end]) {
                *d = s.abs() * (base + f64::from(q));
            }
        }
        kk = end;
    }
}

/// W rows and K columns per decoded tile: 64 × 512 f64 is 256 KiB per plane, so a tile's planes
/// stay in L2 while the GEMM packs them.
const W_TILE_ROWS: usize = 64;
const W_GEMM_COLS: usize = 512;

/// Writes rows `n0..n0+rows`, columns `k0..k1` of W, |W| and (offset recipes) the offset
/// magnitude into `[rows, k1 − k0]` planes.
fn decode_tile(
    layer: &QuantizedLayer,
    offset: Option<f64>,
    n0: usize,
    rows: usize,
    k0: usize,
    k1: usize,
    planes: &mut [Vec<f64>],
) {
    let (k, group) = (layer.shape.k, layer.shape.group);
    let width = k1 - k0;
    let [w, wa, rest @ ..] = planes else { return };
    for i in 0..rows {
        let n = n0 + i;
        let codes = &layer.q[n * k..(n + 1) * k];
        let mut kk = k0;
        while kk < k1 {
            let g = kk / group;
            let end = ((g + 1) * group).min(k1);
            let (s, z) = (layer.scale(n, g), f64::from(layer.zero(n, g)));
            let lut: [f64; 16] = std::array::from_fn(|c| (c as f64 - z) * s);
            let (dst, dsta) = (
                &mut w[i * width + kk - k0..i * width + end - k0],
                &mut wa[i * width + kk - k0..i * width + end - k0],
            );
            for ((d, da), &q) in dst.iter_mut().zip(dsta.iter_mut()).zip(&codes[kk..end]) {
                let v = lut[usize::from(q & 15)];
                *d = v;
                *da = v.abs();
            }
            if let (Some(off), [wo, ..]) = (offset, &mut *rest) {
                let base = 2.0 * off + z;
                for (d, &q) in wo[i * width + kk - k0..i * width + end - k0]
                    .iter_mut()
                    .zip(&codes[kk..end])
                {
                    *d = s.abs() * (base + f64::from(q));
                }
            }
            kk = end;
        }
    }
}

/// The weight pass for many lanes (the full reference, many sampled rows): W decoded tile by
/// tile into f64 planes (W, |W|, offset magnitude), every product done by the GEMM with the tile
/// as the large operand. Nothing of size N×K is held.
fn weight_pass_gemm(
    layer: &QuantizedLayer,
    offset: Option<f64>,
    lanes: &WeightLanes<'_>,
) -> WeightPassOut {
    let (n, k) = (layer.shape.n, layer.shape.k);
    let (ns, na) = (lanes.signed.nrows(), lanes.abs.nrows());
    let t = lanes.right.map_or(0, |r| r.ncols());
    let extra = 1 + usize::from(offset.is_some());
    let mut out_s = Array2::zeros((n, ns));
    let mut out_a = Array2::zeros((n, na));
    let mut out_o = offset.map(|_| Array2::zeros((n, na)));
    let mut right = lanes.right.map(|_| Array2::zeros((k, t + extra)));
    if n > 0 && k > 0 {
        let per_task = task_len(n.div_ceil(W_TILE_ROWS)) * W_TILE_ROWS;
        let tasks = n.div_ceil(per_task);
        let (sc, ac, oc) = (
            row_chunks(Some(&mut out_s), per_task, tasks),
            row_chunks(Some(&mut out_a), per_task, tasks),
            row_chunks(out_o.as_mut(), per_task, tasks),
        );
        let partials: Vec<Option<Array2<f64>>> = sc
            .into_par_iter()
            .zip(ac)
            .zip(oc)
            .enumerate()
            .map(|(ti, ((sc, ac), mut oc))| {
                let (mut sc, mut ac) = (sc.expect("signed"), ac.expect("abs"));
                let nplanes = 2 + usize::from(offset.is_some());
                let mut planes: Vec<Vec<f64>> = (0..nplanes)
                    .map(|_| vec![0.0; W_TILE_ROWS * W_GEMM_COLS])
                    .collect();
                let mut acc = lanes.right.map(|_| Array2::<f64>::zeros((k, t + extra)));
                let rows_here = sc.nrows();
                for r0 in (0..rows_here).step_by(W_TILE_ROWS) {
                    let rows = W_TILE_ROWS.min(rows_here - r0);
                    let n0 = ti * per_task + r0;
                    let rows_sl = Slice::from(r0..r0 + rows);
                    for k0 in (0..k).step_by(W_GEMM_COLS) {
                        let k1 = (k0 + W_GEMM_COLS).min(k);
                        let width = k1 - k0;
                        decode_tile(layer, offset, n0, rows, k0, k1, &mut planes);
                        let plane = |p: usize| {
                            ArrayView2::from_shape((rows, width), &planes[p][..rows * width])
                                .expect("plane")
                        };
                        let ks = Slice::from(k0..k1);
                        let beta = if k0 == 0 { 0.0 } else { 1.0 };
                        let lhs_s = lanes.signed.slice_axis(Axis(1), ks);
                        let lhs_a = lanes.abs.slice_axis(Axis(1), ks);
                        general_mat_mul(
                            1.0,
                            &plane(0),
                            &lhs_s.t(),
                            beta,
                            &mut sc.slice_axis_mut(Axis(0), rows_sl),
                        );
                        general_mat_mul(
                            1.0,
                            &plane(1),
                            &lhs_a.t(),
                            beta,
                            &mut ac.slice_axis_mut(Axis(0), rows_sl),
                        );
                        if let Some(oc) = oc.as_mut() {
                            general_mat_mul(
                                1.0,
                                &plane(2),
                                &lhs_a.t(),
                                beta,
                                &mut oc.slice_axis_mut(Axis(0), rows_sl),
                            );
                        }
                        if let (Some(acc), Some(r)) = (acc.as_mut(), lanes.right) {
                            let mut dst = acc.slice_axis_mut(Axis(0), ks);
                            let rb = r.slice_axis(Axis(0), Slice::from(n0..n0 + rows));
                            general_mat_mul(
                                1.0,
                                &plane(0).t(),
                                &rb,
                                1.0,
                                &mut dst.slice_axis_mut(Axis(1), Slice::from(0..t)),
                            );
                            for p in 1..1 + extra {
                                let mut col = dst.column_mut(t + p - 1);
                                for row in plane(p).outer_iter() {
                                    col.zip_mut_with(&row, |c, v| *c += v);
                                }
                            }
                        }
                    }
                }
                acc
            })
            .collect();
        if let Some(total) = right.as_mut() {
            for p in partials.iter().flatten() {
                *total += p;
            }
        }
    }
    WeightPassOut {
        signed: out_s.reversed_axes().as_standard_layout().into_owned(),
        abs: out_a.reversed_axes().as_standard_layout().into_owned(),
        offset: out_o.map(|o| o.reversed_axes().as_standard_layout().into_owned()),
        right: right.map(|r| r.reversed_axes().as_standard_layout().into_owned()),
    }
}
