//! The f64 reference (docs/contract.md §6): per output element the value `y` and the magnitude
//! `a = Σ_k |x_k|·|w_k|` (and, for offset-accumulating and pre-rounded-bias recipes,
//! `a_offset`, see [`NumericRecipe::magnitude_offset`]).
//!
//! Every product `x·w` is exact in f64 (an 11-bit significand times a 5-bit integer times an
//! 11-bit significand), so the only error in `y` is the f64 summation, at most
//! `γ64_{K+1}·(a + |bias|)`; bound.rs adds that term explicitly. Exact-class data (small integers,
//! power-of-two scales) sum without any error, which is what the bit-exact mode relies on.
//!
//! W is never dequantized whole: [`weight_pass`] decodes it tile by tile into f64 and multiplies
//! each tile by a set of "lanes" (X rows, Freivalds combinations, magnitudes). Many lanes go
//! through `ndarray`'s `general_mat_mul` (matrixmultiply, AVX2/FMA chosen at run time); a few
//! lanes through a fused loop that reads each decoded value once for all of them. X is handled
//! the same way by [`activation_pass`]. Work is split into a fixed number of contiguous rayon
//! tasks whose partial sums are added in order, so results do not depend on scheduling.
//! (The `gemm` crate only exposes an `unsafe fn`, which this crate forbids.)

use crate::dtype::ActDtype;
use crate::layer::{Activations, QuantizedLayer};
use crate::recipe::NumericRecipe;
use half::f16;
use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
use ndarray::linalg::general_mat_mul;
use ndarray::{Array2, ArrayView2, ArrayViewMut2, Axis, Slice};
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

pub(crate) fn mismatch(
    what: &'static str,
    expected: impl ToString,
    got: impl ToString,
) -> InputError {
    InputError::Mismatch {
        what,
        expected: expected.to_string(),
        got: got.to_string(),
    }
}

/// What the reference accepts in X. Codes, scales and bias are always checked; NaN or ±Inf there
/// is bad input whatever the policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NonFiniteX {
    /// NaN or ±Inf in X is bad input ([`InputError::NonFinite`] naming the element).
    #[default]
    Refuse,
    /// X may hold NaN and ±Inf (the special-values data class). The reference follows IEEE rules
    /// (docs/contract.md §6): NaN propagates, Inf·0 is NaN, +Inf + −Inf is NaN; recipes that accumulate
    /// `Σx·(offset + q)` and subtract `(offset + z)·Σx` give NaN for any Inf in the row (Inf − Inf).
    /// Every element of a row with a non-finite x is therefore NaN or ±Inf ([`SpecialRows`]).
    Ieee,
}

/// Checks that X, the layer and the recipe describe one operation (docs/contract.md §1) and that every code
/// is a nibble and every value finite, so that later stages can index without checks.
pub fn validate(
    x: &Activations,
    layer: &QuantizedLayer,
    recipe: &NumericRecipe,
) -> Result<(), InputError> {
    validate_with(x, layer, recipe, NonFiniteX::Refuse)
}

/// [`validate`], with the policy for non-finite X.
pub fn validate_with(
    x: &Activations,
    layer: &QuantizedLayer,
    recipe: &NumericRecipe,
    non_finite_x: NonFiniteX,
) -> Result<(), InputError> {
    validate_layer(layer)?;
    validate_against_layer(x, layer, recipe, non_finite_x)
}

/// The layer's own half of [`validate_with`]: a group size, tensor lengths, every code and zero
/// point a nibble, scales and bias finite. It depends on nothing a batch size changes, so a
/// caller that forms several references of one layer checks it once
/// ([`crate::offload::LayerWeights`]).
pub fn validate_layer(layer: &QuantizedLayer) -> Result<(), InputError> {
    let sh = layer.shape;
    if sh.group == 0 {
        return Err(mismatch("layer group size", "≥ 1", 0));
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
    check_finite("layer scales", &layer.scales, layer.dtype)
}

/// The per-case half of [`validate_with`] for a layer [`validate_layer`] accepted: X's shape,
/// stride, length and dtype against the layer, the recipe against both, and X's values by the
/// policy.
pub fn validate_against_layer(
    x: &Activations,
    layer: &QuantizedLayer,
    recipe: &NumericRecipe,
    non_finite_x: NonFiniteX,
) -> Result<(), InputError> {
    let sh = layer.shape;
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
    if recipe.pre_rounded_bias
        && (!recipe.rounds_dequantized_weight || recipe.offset_accumulation.is_some())
    {
        return Err(mismatch(
            "recipe pre_rounded_bias",
            "rounded dequantized weights and no offset accumulation",
            format!(
                "rounds_dequantized_weight = {}, offset_accumulation = {:?}",
                recipe.rounds_dequantized_weight, recipe.offset_accumulation
            ),
        ));
    }
    if recipe.pre_rounded_bias && non_finite_x == NonFiniteX::Ieee {
        // Under an FMA, q = z gives the residue z·s − fl(z·s), not 0: Inf·ŵ has no single IEEE
        // value the reference could name.
        return Err(mismatch(
            "X for a pre-rounded-bias recipe",
            "finite X (an FMA-evaluated carrier turns w = 0 into a rounding residue)",
            "IEEE special values",
        ));
    }
    if non_finite_x == NonFiniteX::Ieee {
        return Ok(());
    }
    let bad_x = (0..x.m).into_par_iter().find_map_first(|m| {
        let row = &x.data[m * x.row_stride..m * x.row_stride + x.k];
        first_nonfinite(row, x.dtype).map(|k| m * x.row_stride + k)
    });
    if let Some(index) = bad_x {
        return Err(InputError::NonFinite { what: "X", index });
    }
    Ok(())
}

/// Chunk size for the validation scans: large enough that rayon's per-item cost vanishes.
const SCAN_CHUNK: usize = 1 << 16;

fn check_codes(what: &'static str, codes: &[u8]) -> Result<(), InputError> {
    // OR-reduce each chunk (vectorizes); only a failing chunk is searched element by element.
    let bad = codes
        .par_chunks(SCAN_CHUNK)
        .enumerate()
        .find_map_first(|(ci, chunk)| {
            let any_high = chunk.iter().fold(0u8, |acc, &c| acc | c) > 15;
            any_high.then(|| ci * SCAN_CHUNK + chunk.iter().position(|&c| c > 15).unwrap_or(0))
        });
    match bad {
        Some(index) => Err(InputError::CodeOutOfRange {
            what,
            index,
            value: codes[index],
        }),
        None => Ok(()),
    }
}

fn check_finite(what: &'static str, bits: &[u16], dtype: ActDtype) -> Result<(), InputError> {
    let bad = bits
        .par_chunks(SCAN_CHUNK)
        .enumerate()
        .find_map_first(|(ci, chunk)| first_nonfinite(chunk, dtype).map(|i| ci * SCAN_CHUNK + i));
    match bad {
        Some(index) => Err(InputError::NonFinite { what, index }),
        None => Ok(()),
    }
}

fn first_nonfinite(bits: &[u16], dtype: ActDtype) -> Option<usize> {
    let exp = match dtype {
        ActDtype::F16 => 0x7C00,
        ActDtype::Bf16 => 0x7F80,
    };
    // Count first (vectorizes), search only when something is there.
    let count = bits.iter().filter(|&&b| b & exp == exp).count();
    if count == 0 {
        None
    } else {
        bits.iter().position(|&b| b & exp == exp)
    }
}

/// The non-finite entries of one X row (IEEE inputs).
#[derive(Clone, Debug, PartialEq)]
pub struct SpecialRow {
    pub m: usize,
    pub nan: bool,
    /// Columns k with x = +Inf.
    pub pos_inf: Vec<usize>,
    /// Columns k with x = −Inf.
    pub neg_inf: Vec<usize>,
}

/// The rows of X holding NaN or ±Inf, and what IEEE arithmetic makes of them. Every element of
/// such a row is non-finite: a NaN input propagates; an Inf input gives Inf·w = ±Inf, or NaN where
/// w = 0; Infs of both signs in one element give NaN. The finite part of the reference (lines,
/// projections) is computed on X with these rows zeroed ([`SpecialRows::prepare`]) and the
/// elements of these rows are then set to their IEEE values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpecialRows {
    /// Sorted by `m`.
    pub rows: Vec<SpecialRow>,
}

impl SpecialRows {
    /// Scans X (none under [`NonFiniteX::Refuse`], where validation refused them) and returns X
    /// with the special rows zeroed (borrowed when there are none).
    pub fn prepare(
        x: &Activations,
        non_finite_x: NonFiniteX,
    ) -> (std::borrow::Cow<'_, Activations>, SpecialRows) {
        if non_finite_x == NonFiniteX::Refuse {
            return (std::borrow::Cow::Borrowed(x), SpecialRows::default());
        }
        let rows: Vec<SpecialRow> = (0..x.m)
            .into_par_iter()
            .filter_map(|m| {
                let row = &x.data[m * x.row_stride..m * x.row_stride + x.k];
                first_nonfinite(row, x.dtype)?;
                let mut sr = SpecialRow {
                    m,
                    nan: false,
                    pos_inf: Vec::new(),
                    neg_inf: Vec::new(),
                };
                for (k, &b) in row.iter().enumerate() {
                    if x.dtype.is_nan_bits(b) {
                        sr.nan = true;
                    } else if !x.dtype.is_finite_bits(b) {
                        if b & 0x8000 == 0 {
                            sr.pos_inf.push(k);
                        } else {
                            sr.neg_inf.push(k);
                        }
                    }
                }
                Some(sr)
            })
            .collect();
        if rows.is_empty() {
            return (std::borrow::Cow::Borrowed(x), SpecialRows { rows });
        }
        let mut zeroed = x.clone();
        let zero = x.dtype.from_f64(0.0);
        for r in &rows {
            zeroed.data[r.m * x.row_stride..r.m * x.row_stride + x.k].fill(zero);
        }
        (std::borrow::Cow::Owned(zeroed), SpecialRows { rows })
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn row(&self, m: usize) -> Option<&SpecialRow> {
        self.rows
            .binary_search_by_key(&m, |r| r.m)
            .ok()
            .map(|i| &self.rows[i])
    }

    /// The IEEE value of element `(m, n)` when row `m` is special (bias is finite and changes
    /// nothing). `offset`: the recipe's offset accumulation, where any Inf ends in Inf − Inf.
    pub fn value(
        &self,
        layer: &QuantizedLayer,
        offset: Option<f64>,
        m: usize,
        n: usize,
    ) -> Option<f64> {
        let row = self.row(m)?;
        if row.nan || offset.is_some() {
            return Some(f64::NAN);
        }
        let (mut pos, mut neg) = (false, false);
        for (ks, sign) in [(&row.pos_inf, 1.0), (&row.neg_inf, -1.0)] {
            for &k in ks {
                let w = layer.weight(n, k);
                if w == 0.0 {
                    return Some(f64::NAN);
                }
                if w * sign > 0.0 {
                    pos = true;
                } else {
                    neg = true;
                }
            }
        }
        Some(match (pos, neg) {
            (true, false) => f64::INFINITY,
            (false, true) => f64::NEG_INFINITY,
            _ => f64::NAN,
        })
    }

    /// Sets the elements of `lines` that lie on special rows to their IEEE values.
    pub(crate) fn patch(&self, lines: &mut Lines, layer: &QuantizedLayer, offset: Option<f64>) {
        if self.is_empty() {
            return;
        }
        for i in 0..lines.index.len() {
            for j in 0..lines.len {
                let (m, n) = lines.coords(i, j);
                if let Some(v) = self.value(layer, offset, m, n) {
                    lines.y[i * lines.len + j] = v;
                }
            }
        }
    }
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
    reference_with(x, layer, recipe, NonFiniteX::Refuse)
}

/// [`reference`], with the policy for non-finite X. Under [`NonFiniteX::Ieee`] the elements of
/// rows holding NaN/±Inf are their IEEE values ([`SpecialRows`]) and their magnitudes are 0.
pub fn reference_with(
    x: &Activations,
    layer: &QuantizedLayer,
    recipe: &NumericRecipe,
    non_finite_x: NonFiniteX,
) -> Result<Reference, InputError> {
    validate_with(x, layer, recipe, non_finite_x)?;
    let (xz, special) = SpecialRows::prepare(x, non_finite_x);
    let rows: Vec<usize> = (0..x.m).collect();
    let mut lines = rows_unchecked(&xz, layer, recipe.magnitude_offset(), &rows);
    special.patch(&mut lines, layer, recipe.offset_accumulation);
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

/// Which weights the reference multiplies X by.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum WeightRounding {
    /// The exact dequantized weights `(q − z)·s`: what the kernels of the set are judged
    /// against (a recipe that rounds them says so in its bound, `u_w·a`).
    #[default]
    Exact,
    /// Every dequantized weight rounded once (to nearest even) to the activation dtype before
    /// the matmul: what a dequantize-then-matmul library multiplies (compressed-tensors'
    /// `decompress` to fp16/bf16, then torch's `F.linear`). `y` and `a` are computed from the
    /// rounded weights, so a bound on that library's output needs no weight-rounding term.
    ToActivationDtype,
}

/// [`reference_with`] on the weights `rounding` names. Under
/// [`WeightRounding::ToActivationDtype`] a rounded weight past the dtype's range (±Inf) is bad
/// input, and recipes with an extra magnitude lane (offset accumulation, pre-rounded bias) are
/// refused: those describe kernels that form their weights differently.
pub fn reference_with_rounding(
    x: &Activations,
    layer: &QuantizedLayer,
    recipe: &NumericRecipe,
    non_finite_x: NonFiniteX,
    rounding: WeightRounding,
) -> Result<Reference, InputError> {
    match rounding {
        WeightRounding::Exact => reference_with(x, layer, recipe, non_finite_x),
        WeightRounding::ToActivationDtype => {
            validate_with(x, layer, recipe, non_finite_x)?;
            if recipe.magnitude_offset().is_some() {
                return Err(mismatch(
                    "recipe for weights rounded to the activation dtype",
                    "no offset accumulation and no pre-rounded bias",
                    format!(
                        "offset_accumulation = {:?}, pre_rounded_bias = {}",
                        recipe.offset_accumulation, recipe.pre_rounded_bias
                    ),
                ));
            }
            let rounded = rounded_weight_layer(layer)?;
            reference_with(x, &rounded, recipe, non_finite_x)
        }
    }
}

/// The layer whose exact weights are `layer`'s weights rounded to its dtype: groups of one
/// column, `q = 9` over the symmetric `z = 8`, the rounded weight as the scale, so
/// `(q − z)·s` is the rounded weight exactly. (A rounded weight is 0 exactly where the exact
/// one is: `(q − z)·s` is a multiple of the dtype's smallest subnormal, which rounding keeps.)
fn rounded_weight_layer(layer: &QuantizedLayer) -> Result<QuantizedLayer, InputError> {
    let bits = layer
        .dequantize_rounded()
        .map_err(|e| mismatch("layer", "codes 0..=15 and tensors of the layer's shape", e))?;
    let what = "dequantized weight rounded to the activation dtype (row-major [N, K])";
    check_finite(what, &bits, layer.dtype)?;
    let (n, k) = (layer.shape.n, layer.shape.k);
    Ok(QuantizedLayer {
        shape: crate::layer::LayerShape::new(n, k, 1),
        dtype: layer.dtype,
        q: vec![crate::layer::SYMMETRIC_ZERO + 1; n * k],
        zeros: None,
        scales: bits,
        bias: layer.bias.clone(),
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
    Ok(rows_unchecked(x, layer, recipe.magnitude_offset(), rows))
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
    Ok(cols_unchecked(x, layer, recipe.magnitude_offset(), cols))
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

/// X (or Y) rows converted per block.
const X_BLOCK: usize = 32;

/// Contiguous task ranges of `blocks` blocks: a fixed split, so every sum is formed in the same
/// order on every run whatever the scheduling.
fn task_len(blocks: usize) -> usize {
    let tasks = (4 * rayon::current_num_threads()).clamp(1, blocks.max(1));
    blocks.div_ceil(tasks).max(1)
}

/// Bulk conversion of dtype bits to f64 (F16C when the CPU has it, through `half`).
pub(crate) fn bits_to_f64(dtype: ActDtype, src: &[u16], dst: &mut [f64]) {
    match dtype {
        ActDtype::F16 => src.reinterpret_cast::<f16>().convert_to_f64_slice(dst),
        // bf16 is the top half of an f32 (NaNs included): a shift the compiler vectorizes
        // (`half`'s slice conversion goes element by element, three times slower).
        ActDtype::Bf16 => dst
            .iter_mut()
            .zip(src)
            .for_each(|(d, &b)| *d = f64::from(f32::from_bits(u32::from(b) << 16))),
    }
}

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

fn row_chunks(
    a: Option<&mut Array2<f64>>,
    size: usize,
    count: usize,
) -> Vec<Option<ArrayViewMut2<'_, f64>>> {
    match a {
        Some(a) => a.axis_chunks_iter_mut(Axis(0), size).map(Some).collect(),
        None => (0..count).map(|_| None).collect(),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::LayerShape;

    /// The fused loop and the GEMM tiles compute the same lanes (one path each side of
    /// `GEMM_LANES`), including the right-hand side and the offset magnitude.
    #[test]
    fn weight_pass_paths_agree_with_a_plain_sum() {
        let (n, k, g) = (37, 1100, 100);
        let layer = QuantizedLayer {
            shape: LayerShape::new(n, k, g),
            dtype: ActDtype::F16,
            q: (0..n * k).map(|i| ((i * 7 + i / 5) % 16) as u8).collect(),
            zeros: Some((0..n * k / g).map(|i| (i % 16) as u8).collect()),
            scales: (0..n * k / g)
                .map(|i| ActDtype::F16.from_f64(0.01 + 0.001 * (i % 9) as f64))
                .collect(),
            bias: None,
        };
        let lane = |j: usize, kk: usize| ((j * 31 + kk * 17) % 23) as f64 / 7.0 - 1.5;
        let right =
            Array2::from_shape_fn((n, 3), |(i, t)| if (i + t) % 3 == 0 { 1.0 } else { -1.0 });
        for lanes_each in [2, 5] {
            let signed = Array2::from_shape_fn((lanes_each, k), |(j, kk)| lane(j, kk));
            let abs = signed.mapv(f64::abs);
            let lanes = WeightLanes {
                signed: signed.view(),
                abs: abs.view(),
                right: Some(right.view()),
            };
            let out = weight_pass(&layer, Some(128.0), &lanes);
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-11 * (1.0 + b.abs());
            for j in 0..lanes_each {
                for nn in 0..n {
                    let (mut ys, mut ya, mut yo) = (0.0, 0.0, 0.0);
                    for kk in 0..k {
                        let w = layer.weight(nn, kk);
                        let off = layer.scale(nn, kk / g).abs()
                            * (256.0
                                + f64::from(layer.code(nn, kk))
                                + f64::from(layer.zero(nn, kk / g)));
                        ys += signed[[j, kk]] * w;
                        ya += abs[[j, kk]] * w.abs();
                        yo += abs[[j, kk]] * off;
                    }
                    assert!(close(out.signed[[j, nn]], ys) && close(out.abs[[j, nn]], ya));
                    assert!(close(out.offset.as_ref().unwrap()[[j, nn]], yo));
                }
            }
            let r = out.right.unwrap();
            for kk in (0..k).step_by(97) {
                let want: Vec<f64> = (0..3)
                    .map(|t| (0..n).map(|nn| right[[nn, t]] * layer.weight(nn, kk)).sum())
                    .collect();
                let abs_sum: f64 = (0..n).map(|nn| layer.weight(nn, kk).abs()).sum();
                assert!((0..3).all(|t| close(r[[t, kk]], want[t])) && close(r[[3, kk]], abs_sum));
            }
        }
    }
}
