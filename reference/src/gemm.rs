//! The f64 reference (SPEC §6): per output element the value `y` and the magnitude
//! `a = Σ_k |x_k|·|w_k|` (and, for offset-accumulating recipes, `a_offset`).
//!
//! Every product `x·w` is exact in f64 (an 11-bit significand times a 5-bit integer times an
//! 11-bit significand), so the only error in `y` is the f64 summation, at most
//! `γ64_{K+1}·(a + |bias|)`; bound.rs adds that term explicitly. Exact-class data (small integers,
//! power-of-two scales) sum without any error, which is what the bit-exact mode relies on.
//!
//! The products run through `ndarray`'s `general_mat_mul` (matrixmultiply, AVX2/FMA picked at run
//! time) on blocks of dequantized weights, one block per rayon task. The `gemm` crate only exposes
//! an `unsafe fn`, which this crate forbids.

use crate::dtype::ActDtype;
use crate::layer::{Activations, QuantizedLayer};
use crate::recipe::NumericRecipe;
use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;

/// Bad input to the reference, the bound, the comparison or the verifiers.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum InputError {
    #[error("{what}: expected {expected}, got {got}")]
    Mismatch {
        what: &'static str,
        expected: String,
        got: String,
    },
    #[error("{what}: value {value} at index {index} is not a 4-bit code (expected 0..=15)")]
    CodeOutOfRange {
        what: &'static str,
        index: usize,
        value: u8,
    },
    #[error("{what}: element {index} is NaN or infinite (expected finite inputs)")]
    NonFinite { what: &'static str, index: usize },
    #[error("{what}: index {index} out of range (expected < {extent})")]
    IndexOutOfRange {
        what: &'static str,
        index: usize,
        extent: usize,
    },
}

fn mismatch(what: &'static str, expected: impl ToString, got: impl ToString) -> InputError {
    InputError::Mismatch {
        what,
        expected: expected.to_string(),
        got: got.to_string(),
    }
}

/// Checks that X, the layer and the recipe describe one operation (SPEC §1) and that every code
/// is a nibble and every value finite, so that later stages can index without checks.
pub fn validate(
    x: &Activations,
    layer: &QuantizedLayer,
    recipe: &NumericRecipe,
) -> Result<(), InputError> {
    let sh = layer.shape;
    if sh.group == 0 {
        return Err(mismatch("layer group size", "≥ 1", 0));
    }
    if x.k != sh.k {
        return Err(mismatch("X columns (K)", sh.k, x.k));
    }
    if x.row_stride < x.k {
        return Err(mismatch(
            "X row stride",
            format!("≥ K = {}", x.k),
            x.row_stride,
        ));
    }
    let needed = if x.m == 0 {
        0
    } else {
        (x.m - 1) * x.row_stride + x.k
    };
    if x.data.len() < needed {
        return Err(mismatch(
            "X data length",
            format!("≥ {needed}"),
            x.data.len(),
        ));
    }
    if x.dtype != layer.dtype {
        return Err(mismatch("X dtype", layer.dtype, x.dtype));
    }
    if recipe.output != layer.dtype {
        return Err(mismatch("recipe output dtype", layer.dtype, recipe.output));
    }
    if let Some(off) = recipe.offset_accumulation
        && !(off.is_finite() && off >= 0.0)
    {
        return Err(mismatch(
            "recipe offset_accumulation",
            "a finite offset ≥ 0",
            off,
        ));
    }
    let groups = sh.groups();
    if layer.q.len() != sh.n * sh.k {
        return Err(mismatch("layer q length (N·K)", sh.n * sh.k, layer.q.len()));
    }
    if layer.scales.len() != sh.n * groups {
        return Err(mismatch(
            "layer scales length (N·groups)",
            sh.n * groups,
            layer.scales.len(),
        ));
    }
    if let Some(z) = &layer.zeros {
        if z.len() != sh.n * groups {
            return Err(mismatch(
                "layer zeros length (N·groups)",
                sh.n * groups,
                z.len(),
            ));
        }
        check_codes("layer zeros", z)?;
    }
    if let Some(b) = &layer.bias {
        if b.len() != sh.n {
            return Err(mismatch("layer bias length (N)", sh.n, b.len()));
        }
        check_finite("layer bias", b, layer.dtype)?;
    }
    check_codes("layer q", &layer.q)?;
    check_finite("layer scales", &layer.scales, layer.dtype)?;
    let bad_x = (0..x.m).into_par_iter().find_map_first(|m| {
        let row = &x.data[m * x.row_stride..m * x.row_stride + x.k];
        row.iter()
            .position(|&b| !is_finite_bits(x.dtype, b))
            .map(|k| m * x.row_stride + k)
    });
    if let Some(index) = bad_x {
        return Err(InputError::NonFinite { what: "X", index });
    }
    Ok(())
}

fn check_codes(what: &'static str, codes: &[u8]) -> Result<(), InputError> {
    match codes.par_iter().position_first(|&c| c > 15) {
        Some(index) => Err(InputError::CodeOutOfRange {
            what,
            index,
            value: codes[index],
        }),
        None => Ok(()),
    }
}

fn check_finite(what: &'static str, bits: &[u16], dtype: ActDtype) -> Result<(), InputError> {
    match bits.iter().position(|&b| !is_finite_bits(dtype, b)) {
        Some(index) => Err(InputError::NonFinite { what, index }),
        None => Ok(()),
    }
}

pub(crate) fn is_finite_bits(dtype: ActDtype, bits: u16) -> bool {
    match dtype {
        ActDtype::F16 => bits & 0x7C00 != 0x7C00,
        ActDtype::Bf16 => bits & 0x7F80 != 0x7F80,
    }
}

/// Every 16-bit pattern of `dtype` as f64: one table lookup per element in the hot loops.
pub(crate) fn decode_table(dtype: ActDtype) -> Vec<f64> {
    (0..=u16::MAX).map(|b| dtype.to_f64(b)).collect()
}

/// The full reference for one case.
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub dtype: ActDtype,
    /// `[M, N]` row-major, bias included.
    pub y: Vec<f64>,
    /// `[M, N]` `Σ_k |x||w|`.
    pub a: Vec<f64>,
    /// `[M, N]` `Σ_k |x|·|s|·(2·offset + q + z)`, only for offset-accumulating recipes.
    pub a_offset: Option<Vec<f64>>,
    /// `[N]` bias values (zeros without bias); the bound needs `y − bias` for after-cast recipes.
    pub bias: Vec<f64>,
}

impl Reference {
    pub fn y_at(&self, m: usize, n: usize) -> f64 {
        self.y[m * self.n + n]
    }

    pub fn a_at(&self, m: usize, n: usize) -> f64 {
        self.a[m * self.n + n]
    }

    /// The correctly rounded result (round-to-nearest-even, once, from the exact value).
    pub fn rounded_bits(&self, m: usize, n: usize) -> u16 {
        self.dtype.from_f64(self.y_at(m, n))
    }
}

/// Whole rows or whole columns of the reference (sampled verification).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineAxis {
    Rows,
    Cols,
}

/// Reference values for a set of rows (each of length N) or columns (each of length M),
/// stored line after line: entry `(i, j)` is at `i·len + j`.
#[derive(Clone, Debug, PartialEq)]
pub struct Lines {
    pub axis: LineAxis,
    pub index: Vec<usize>,
    pub len: usize,
    pub y: Vec<f64>,
    pub a: Vec<f64>,
    pub a_offset: Option<Vec<f64>>,
    /// `[N]` bias values of the layer (zeros without bias).
    pub bias: Vec<f64>,
}

impl Lines {
    /// The output coordinates `(m, n)` of entry `j` of line `i`.
    pub fn coords(&self, i: usize, j: usize) -> (usize, usize) {
        match self.axis {
            LineAxis::Rows => (self.index[i], j),
            LineAxis::Cols => (j, self.index[i]),
        }
    }
}

/// The full reference `Y = X·Wᵀ + bias` with its magnitudes.
pub fn reference(
    x: &Activations,
    layer: &QuantizedLayer,
    recipe: &NumericRecipe,
) -> Result<Reference, InputError> {
    validate(x, layer, recipe)?;
    let rows: Vec<usize> = (0..x.m).collect();
    let lines = rows_unchecked(x, layer, recipe.offset_accumulation, &rows);
    Ok(Reference {
        m: x.m,
        n: layer.shape.n,
        k: layer.shape.k,
        dtype: layer.dtype,
        y: lines.y,
        a: lines.a,
        a_offset: lines.a_offset,
        bias: lines.bias,
    })
}

/// Whole rows `rows` of the reference: costs `2·|rows|·N·K` flops per product.
pub fn reference_rows(
    x: &Activations,
    layer: &QuantizedLayer,
    recipe: &NumericRecipe,
    rows: &[usize],
) -> Result<Lines, InputError> {
    validate(x, layer, recipe)?;
    check_indices("row index", rows, x.m)?;
    Ok(rows_unchecked(x, layer, recipe.offset_accumulation, rows))
}

/// Whole columns `cols` of the reference: costs `2·|cols|·M·K` flops per product.
pub fn reference_cols(
    x: &Activations,
    layer: &QuantizedLayer,
    recipe: &NumericRecipe,
    cols: &[usize],
) -> Result<Lines, InputError> {
    validate(x, layer, recipe)?;
    check_indices("column index", cols, layer.shape.n)?;
    Ok(cols_unchecked(x, layer, recipe.offset_accumulation, cols))
}

fn check_indices(what: &'static str, idx: &[usize], extent: usize) -> Result<(), InputError> {
    match idx.iter().find(|&&i| i >= extent) {
        Some(&index) => Err(InputError::IndexOutOfRange {
            what,
            index,
            extent,
        }),
        None => Ok(()),
    }
}

pub(crate) fn bias_values(layer: &QuantizedLayer) -> Vec<f64> {
    (0..layer.shape.n).map(|n| layer.bias_value(n)).collect()
}

/// Row `n` of W, |W| and (with an offset) `|s|·(2·offset + q + z)`, all exact in f64.
pub(crate) fn decode_weight_row(
    layer: &QuantizedLayer,
    n: usize,
    w: &mut [f64],
    wabs: &mut [f64],
    mut woff: Option<(&mut [f64], f64)>,
) {
    let (k, group) = (layer.shape.k, layer.shape.group);
    let codes = &layer.q[n * k..(n + 1) * k];
    for g in 0..layer.shape.groups() {
        let (k0, k1) = (g * group, ((g + 1) * group).min(k));
        let (s, z) = (layer.scale(n, g), f64::from(layer.zero(n, g)));
        let lut: [f64; 16] = std::array::from_fn(|c| (c as f64 - z) * s);
        let cg = &codes[k0..k1];
        for ((d, da), &q) in w[k0..k1].iter_mut().zip(&mut wabs[k0..k1]).zip(cg) {
            let v = lut[usize::from(q & 15)];
            *d = v;
            *da = v.abs();
        }
        if let Some((dst, off)) = woff.as_mut() {
            let base = 2.0 * *off + z;
            for (d, &q) in dst[k0..k1].iter_mut().zip(cg) {
                *d = s.abs() * (base + f64::from(q));
            }
        }
    }
}

/// f64 working memory per block and array: keeps a few blocks per thread within L3-ish sizes.
const BLOCK_ELEMS: usize = 1 << 21;

fn block_len(extent: usize, k: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    let by_memory = (BLOCK_ELEMS / k.max(1)).max(8);
    let by_parallelism = extent.div_ceil(4 * threads).max(8);
    by_memory.min(by_parallelism).max(1)
}

/// `[R, K]` f64 copies of X rows and their absolute values.
fn lhs_rows(x: &Activations, table: &[f64], rows: &[usize]) -> (Vec<f64>, Vec<f64>) {
    let k = x.k;
    let mut lx = vec![0.0; rows.len() * k];
    let mut la = vec![0.0; rows.len() * k];
    if k == 0 {
        return (lx, la);
    }
    lx.par_chunks_mut(k)
        .zip(la.par_chunks_mut(k))
        .zip(rows.par_iter())
        .for_each(|((dst, dsta), &m)| {
            let src = &x.data[m * x.row_stride..m * x.row_stride + k];
            for ((d, da), &b) in dst.iter_mut().zip(dsta.iter_mut()).zip(src) {
                let v = table[usize::from(b)];
                *d = v;
                *da = v.abs();
            }
        });
    (lx, la)
}

/// Reference rows without validation (the verifiers validate once up front).
pub(crate) fn rows_unchecked(
    x: &Activations,
    layer: &QuantizedLayer,
    offset: Option<f64>,
    rows: &[usize],
) -> Lines {
    let (r, n, k) = (rows.len(), layer.shape.n, layer.shape.k);
    let bias = bias_values(layer);
    let table = decode_table(x.dtype);
    let (lx, la) = lhs_rows(x, &table, rows);
    let mut y = vec![0.0; r * n];
    let mut a = vec![0.0; r * n];
    let mut aoff = offset.map(|_| vec![0.0; r * n]);
    if r > 0 && n > 0 && k > 0 {
        let lxv = ArrayView2::from_shape((r, k), &lx).expect("lhs shape");
        let lav = ArrayView2::from_shape((r, k), &la).expect("lhs shape");
        let nb = block_len(n, k);
        let mut yv = ArrayViewMut2::from_shape((r, n), &mut y).expect("y shape");
        let mut av = ArrayViewMut2::from_shape((r, n), &mut a).expect("a shape");
        let ychunks: Vec<_> = yv.axis_chunks_iter_mut(Axis(1), nb).collect();
        let achunks: Vec<_> = av.axis_chunks_iter_mut(Axis(1), nb).collect();
        let mut ov = aoff
            .as_mut()
            .map(|o| ArrayViewMut2::from_shape((r, n), o).expect("a_offset shape"));
        let ochunks: Vec<Option<ArrayViewMut2<f64>>> = match ov.as_mut() {
            Some(v) => v.axis_chunks_iter_mut(Axis(1), nb).map(Some).collect(),
            None => (0..ychunks.len()).map(|_| None).collect(),
        };
        ychunks
            .into_par_iter()
            .zip(achunks)
            .zip(ochunks)
            .enumerate()
            .for_each(|(bi, ((mut yc, mut ac), oc))| {
                let (n0, cnt) = (bi * nb, yc.ncols());
                let mut w = vec![0.0; cnt * k];
                let mut wa = vec![0.0; cnt * k];
                let mut wo = offset.map(|_| vec![0.0; cnt * k]);
                for i in 0..cnt {
                    let off = wo
                        .as_mut()
                        .zip(offset)
                        .map(|(o, off)| (&mut o[i * k..(i + 1) * k], off));
                    decode_weight_row(
                        layer,
                        n0 + i,
                        &mut w[i * k..(i + 1) * k],
                        &mut wa[i * k..(i + 1) * k],
                        off,
                    );
                }
                let wv = ArrayView2::from_shape((cnt, k), &w).expect("block shape");
                general_mat_mul(1.0, &lxv, &wv.t(), 0.0, &mut yc);
                let wav = ArrayView2::from_shape((cnt, k), &wa).expect("block shape");
                general_mat_mul(1.0, &lav, &wav.t(), 0.0, &mut ac);
                if let (Some(mut oc), Some(wo)) = (oc, wo) {
                    let wov = ArrayView2::from_shape((cnt, k), &wo).expect("block shape");
                    general_mat_mul(1.0, &lav, &wov.t(), 0.0, &mut oc);
                }
            });
    }
    if layer.bias.is_some() && n > 0 {
        y.par_chunks_mut(n)
            .for_each(|row| row.iter_mut().zip(&bias).for_each(|(v, b)| *v += b));
    }
    Lines {
        axis: LineAxis::Rows,
        index: rows.to_vec(),
        len: n,
        y,
        a,
        a_offset: aoff,
        bias,
    }
}

/// Reference columns without validation.
pub(crate) fn cols_unchecked(
    x: &Activations,
    layer: &QuantizedLayer,
    offset: Option<f64>,
    cols: &[usize],
) -> Lines {
    let (c, m, k) = (cols.len(), x.m, layer.shape.k);
    let bias = bias_values(layer);
    let table = decode_table(x.dtype);
    let mut w = vec![0.0; c * k];
    let mut wa = vec![0.0; c * k];
    let mut wo = offset.map(|_| vec![0.0; c * k]);
    if k > 0 {
        for (i, &n) in cols.iter().enumerate() {
            let off = wo
                .as_mut()
                .zip(offset)
                .map(|(o, off)| (&mut o[i * k..(i + 1) * k], off));
            decode_weight_row(
                layer,
                n,
                &mut w[i * k..(i + 1) * k],
                &mut wa[i * k..(i + 1) * k],
                off,
            );
        }
    }
    let mut y = vec![0.0; c * m];
    let mut a = vec![0.0; c * m];
    let mut aoff = offset.map(|_| vec![0.0; c * m]);
    if c > 0 && m > 0 && k > 0 {
        let wv = ArrayView2::from_shape((c, k), &w).expect("weights shape");
        let wav = ArrayView2::from_shape((c, k), &wa).expect("weights shape");
        let wov = wo
            .as_ref()
            .map(|o| ArrayView2::from_shape((c, k), o).expect("weights shape"));
        let mb = block_len(m, k);
        // Lines are stored [C, M]; the product block is [rows, C], so write through the transpose.
        let mut yv = ArrayViewMut2::from_shape((c, m), &mut y)
            .expect("y shape")
            .reversed_axes();
        let mut av = ArrayViewMut2::from_shape((c, m), &mut a)
            .expect("a shape")
            .reversed_axes();
        let ychunks: Vec<_> = yv.axis_chunks_iter_mut(Axis(0), mb).collect();
        let achunks: Vec<_> = av.axis_chunks_iter_mut(Axis(0), mb).collect();
        let mut ov = aoff.as_mut().map(|o| {
            ArrayViewMut2::from_shape((c, m), o)
                .expect("shape")
                .reversed_axes()
        });
        let ochunks: Vec<Option<ArrayViewMut2<f64>>> = match ov.as_mut() {
            Some(v) => v.axis_chunks_iter_mut(Axis(0), mb).map(Some).collect(),
            None => (0..ychunks.len()).map(|_| None).collect(),
        };
        ychunks
            .into_par_iter()
            .zip(achunks)
            .zip(ochunks)
            .enumerate()
            .for_each(|(bi, ((mut yc, mut ac), oc))| {
                let rows: Vec<usize> = (bi * mb..bi * mb + yc.nrows()).collect();
                let (lx, la) = lhs_rows(x, &table, &rows);
                let lxv = ArrayView2::from_shape((rows.len(), k), &lx).expect("lhs shape");
                let lav = ArrayView2::from_shape((rows.len(), k), &la).expect("lhs shape");
                general_mat_mul(1.0, &lxv, &wv.t(), 0.0, &mut yc);
                general_mat_mul(1.0, &lav, &wav.t(), 0.0, &mut ac);
                if let (Some(mut oc), Some(wov)) = (oc, wov.as_ref()) {
                    general_mat_mul(1.0, &lav, &wov.t(), 0.0, &mut oc);
                }
            });
    }
    if layer.bias.is_some() && m > 0 {
        for (i, &n) in cols.iter().enumerate() {
            y[i * m..(i + 1) * m].iter_mut().for_each(|v| *v += bias[n]);
        }
    }
    Lines {
        axis: LineAxis::Cols,
        index: cols.to_vec(),
        len: m,
        y,
        a,
        a_offset: aoff,
        bias,
    }
}
