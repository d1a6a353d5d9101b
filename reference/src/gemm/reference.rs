//! The reference's entry points: the whole `[M, N]` result, whole rows or whole columns, on the
//! exact weights or on weights rounded to the activation dtype.

use super::lines::{cols_unchecked, rows_unchecked};
use super::special::SpecialRows;
use super::validate::{InputError, NonFiniteX, check_finite, mismatch, validate, validate_with};
use crate::dtype::ActDtype;
use crate::layer::{Activations, QuantizedLayer};
use crate::recipe::NumericRecipe;

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
