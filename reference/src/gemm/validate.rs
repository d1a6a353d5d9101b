//! What the reference accepts: X, the layer and the recipe describe one operation
//! (docs/contract.md §1), every code is a nibble and every value finite, so that later stages
//! index without checks.

use crate::dtype::ActDtype;
use crate::layer::{Activations, QuantizedLayer};
use crate::recipe::NumericRecipe;
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
    /// (docs/contract.md §6): NaN propagates, Inf·0 is NaN, +Inf + −Inf is NaN; recipes that
    /// accumulate `Σx·(offset + q)` and subtract `(offset + z)·Σx` give NaN for any Inf in the
    /// row (Inf − Inf). Every element of a row with a non-finite x is therefore NaN or ±Inf
    /// ([`SpecialRows`](super::SpecialRows)).
    Ieee,
}

/// Checks that X, the layer and the recipe describe one operation (docs/contract.md §1) and that
/// every code is a nibble and every value finite, so that later stages can index without checks.
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

pub(super) fn check_finite(
    what: &'static str,
    bits: &[u16],
    dtype: ActDtype,
) -> Result<(), InputError> {
    let bad = bits
        .par_chunks(SCAN_CHUNK)
        .enumerate()
        .find_map_first(|(ci, chunk)| first_nonfinite(chunk, dtype).map(|i| ci * SCAN_CHUNK + i));
    match bad {
        Some(index) => Err(InputError::NonFinite { what, index }),
        None => Ok(()),
    }
}

pub(super) fn first_nonfinite(bits: &[u16], dtype: ActDtype) -> Option<usize> {
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
