//! Reference rows, columns and single elements without validation (the entry points and the
//! verifiers validate once up front), formed from the two passes.

use super::activation_pass::{ActivationLanes, activation_pass};
use super::decode::{bias_values, bits_to_f64, decode_weight_row};
use super::reference::{LineAxis, Lines};
use super::weight_pass::{WeightLanes, WeightPassOut, weight_pass};
use crate::layer::{Activations, QuantizedLayer};
use ndarray::{Array2, Axis, Slice};
use rayon::prelude::*;

/// `[R, K]` f64 copies of the given X rows and their absolute values.
pub(crate) fn activation_rows(x: &Activations, rows: &[usize]) -> (Array2<f64>, Array2<f64>) {
    let k = x.k;
    let mut lx = Array2::zeros((rows.len(), k));
    let mut la = Array2::zeros((rows.len(), k));
    for ((mut dst, mut dsta), &m) in lx.outer_iter_mut().zip(la.outer_iter_mut()).zip(rows) {
        let src = &x.data[m * x.row_stride..m * x.row_stride + k];
        let d = dst.as_slice_mut().expect("row-major");
        bits_to_f64(x.dtype, src, d);
        dsta.iter_mut()
            .zip(d.iter())
            .for_each(|(a, v)| *a = v.abs());
    }
    (lx, la)
}

/// W rows `cols` decoded: `[C, K]` values, and `[C or 2C, K]` |W| rows followed (offset recipes)
/// by offset-magnitude rows.
pub(crate) fn weight_rows(
    layer: &QuantizedLayer,
    offset: Option<f64>,
    cols: &[usize],
) -> (Array2<f64>, Array2<f64>) {
    let (mut w, mut wa) = (Vec::new(), Vec::new());
    weight_rows_into(layer, offset, cols.iter().copied(), &mut w, &mut wa);
    let (c, k) = (cols.len(), layer.shape.k);
    let ca = c * (1 + usize::from(offset.is_some()));
    (
        Array2::from_shape_vec((c, k), w).expect("C·K values"),
        Array2::from_shape_vec((ca, k), wa).expect("lanes·K values"),
    )
}

/// [`weight_rows`] into reused buffers: `w` becomes `[C, K]` and `wa` `[C or 2C, K]`, every
/// value written (their old contents and capacity are reused, not cleared).
pub(crate) fn weight_rows_into(
    layer: &QuantizedLayer,
    offset: Option<f64>,
    cols: impl ExactSizeIterator<Item = usize>,
    w: &mut Vec<f64>,
    wa: &mut Vec<f64>,
) {
    let (c, k) = (cols.len(), layer.shape.k);
    crate::scratch::resize_for_overwrite(w, c * k);
    crate::scratch::resize_for_overwrite(wa, c * k * (1 + usize::from(offset.is_some())));
    let (wabs, woff) = wa.split_at_mut(c * k);
    // k = 0: no values to write, and chunks of 0 are not allowed.
    if k == 0 {
        return;
    }
    let mut woff = woff.chunks_exact_mut(k);
    for ((n, wr), ar) in cols
        .zip(w.chunks_exact_mut(k))
        .zip(wabs.chunks_exact_mut(k))
    {
        let off = offset.and_then(|o| woff.next().map(|r| (r, o)));
        decode_weight_row(layer, n, wr, ar, off);
    }
}

/// `skip` = (signed, abs) lanes in front of the row lanes.
fn finish_rows(
    layer: &QuantizedLayer,
    rows: &[usize],
    out: WeightPassOut,
    skip: (usize, usize),
) -> Lines {
    let bias = bias_values(layer);
    let n = layer.shape.n;
    let take = |a: &Array2<f64>, skip: usize| -> Vec<f64> {
        a.slice_axis(Axis(0), Slice::from(skip..))
            .iter()
            .copied()
            .collect()
    };
    let mut y = take(&out.signed, skip.0);
    if layer.bias.is_some() && n > 0 {
        y.chunks_mut(n)
            .for_each(|row| row.iter_mut().zip(&bias).for_each(|(v, b)| *v += b));
    }
    Lines {
        axis: LineAxis::Rows,
        index: rows.to_vec(),
        len: n,
        y,
        a: take(&out.abs, skip.1),
        a_offset: out.offset.as_ref().map(|o| take(o, skip.1)),
        bias,
    }
}

/// Reference rows without validation (the verifiers validate once up front).
pub(crate) fn rows_unchecked(
    x: &Activations,
    layer: &QuantizedLayer,
    offset: Option<f64>,
    rows: &[usize],
) -> Lines {
    let (lx, la) = activation_rows(x, rows);
    let out = weight_pass(
        layer,
        offset,
        &WeightLanes {
            signed: lx.view(),
            abs: la.view(),
            right: None,
        },
    );
    finish_rows(layer, rows, out, (0, 0))
}

/// Rows from a weight pass whose last lanes were X rows `rows` (fused with other lanes);
/// `skip` counts the (signed, abs) lanes in front of them.
pub(crate) fn rows_from_pass(
    layer: &QuantizedLayer,
    rows: &[usize],
    out: WeightPassOut,
    skip: (usize, usize),
) -> Lines {
    finish_rows(layer, rows, out, skip)
}

/// Columns from an activation pass over `[C, K]` W rows (`signed`) and `[C (+C), K]` |W| and
/// offset rows (`abs`); `first` is the first of those lanes in the pass outputs.
pub(crate) fn cols_from_pass(
    layer: &QuantizedLayer,
    offset: Option<f64>,
    cols: &[usize],
    signed: &Array2<f64>,
    abs: &Array2<f64>,
    first: (usize, usize),
) -> Lines {
    let (c, m) = (cols.len(), signed.nrows());
    let bias = bias_values(layer);
    let lines = |a: &Array2<f64>, from: usize| -> Vec<f64> {
        let mut v = Vec::with_capacity(c * m);
        for i in 0..c {
            v.extend(a.column(from + i).iter());
        }
        v
    };
    let mut y = lines(signed, first.0);
    if layer.bias.is_some() {
        for (i, &n) in cols.iter().enumerate() {
            y[i * m..(i + 1) * m].iter_mut().for_each(|v| *v += bias[n]);
        }
    }
    Lines {
        axis: LineAxis::Cols,
        index: cols.to_vec(),
        len: m,
        y,
        a: lines(abs, first.1),
        a_offset: offset.map(|_| lines(abs, first.1 + c)),
        bias,
    }
}

/// One element of the reference: `(y, a, a_offset)`.
pub(crate) type ElementRef = (f64, f64, f64);

/// Single elements `(m, n)` of the reference without validation: `(y, a, a_offset)` each, in the
/// order given (`a_offset` is `a` without an offset). Each W row is decoded once for all its
/// elements; the cost is about `3·K` flops per element.
pub(crate) fn elements_unchecked(
    x: &Activations,
    layer: &QuantizedLayer,
    offset: Option<f64>,
    elements: &[(usize, usize)],
) -> Vec<ElementRef> {
    let k = layer.shape.k;
    let mut order: Vec<usize> = (0..elements.len()).collect();
    order.sort_by_key(|&i| (elements[i].1, elements[i].0));
    // Runs of one column.
    let mut runs: Vec<&[usize]> = Vec::new();
    let mut rest = &order[..];
    while let Some(&first) = rest.first() {
        let n = elements[first].1;
        let len = rest.iter().take_while(|&&i| elements[i].1 == n).count();
        let (run, tail) = rest.split_at(len);
        runs.push(run);
        rest = tail;
    }
    let per_run: Vec<Vec<(usize, ElementRef)>> = runs
        .into_par_iter()
        .map(|run| {
            let n = elements[run[0]].1;
            let (mut w, mut wa) = (vec![0.0; k], vec![0.0; k]);
            let mut wo = offset.map(|_| vec![0.0; k]);
            let off = match (wo.as_mut(), offset) {
                (Some(b), Some(o)) => Some((b.as_mut_slice(), o)),
                _ => None,
            };
            decode_weight_row(layer, n, &mut w, &mut wa, off);
            let mut xr = vec![0.0; k];
            run.iter()
                .map(|&i| {
                    let m = elements[i].0;
                    bits_to_f64(
                        x.dtype,
                        &x.data[m * x.row_stride..m * x.row_stride + k],
                        &mut xr,
                    );
                    let (mut y, mut a, mut ao) = (0.0, 0.0, 0.0);
                    for kk in 0..k {
                        y += xr[kk] * w[kk];
                        a += xr[kk].abs() * wa[kk];
                        if let Some(o) = &wo {
                            ao += xr[kk].abs() * o[kk];
                        }
                    }
                    let ao = if wo.is_some() { ao } else { a };
                    (i, (y + layer.bias_value(n), a, ao))
                })
                .collect()
        })
        .collect();
    let mut out = vec![(0.0, 0.0, 0.0); elements.len()];
    for (i, v) in per_run.into_iter().flatten() {
        out[i] = v;
    }
    out
}

/// Reference columns without validation.
pub(crate) fn cols_unchecked(
    x: &Activations,
    layer: &QuantizedLayer,
    offset: Option<f64>,
    cols: &[usize],
) -> Lines {
    let (w, wa) = weight_rows(layer, offset, cols);
    let out = activation_pass(
        x,
        &ActivationLanes {
            left: None,
            signed: Some(w.view()),
            abs: Some(wa.view()),
        },
    );
    let (s, a) = (
        out.signed.expect("signed lanes"),
        out.abs.expect("abs lanes"),
    );
    cols_from_pass(layer, offset, cols, &s, &a, (0, 0))
}
