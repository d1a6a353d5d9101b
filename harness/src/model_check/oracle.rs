//! The producer library as a second oracle for a checkpoint: its own dequantized weights must
//! equal our reading rounded to the activation dtype, bit for bit, and its output on recorded
//! activations must lie within the bound of the reference on those rounded weights
//! (`WeightRounding::ToActivationDtype`). Both come from `w4a16-oracle.safetensors`, written
//! beside the checkpoint by the library itself (scripts/checkpoint-fixtures.py).
//!
//! The output is judged by the recipe that produced it ([`YRecipe`]): the file's declaration,
//! else the producer's default (`w4a16_checkpoint::recipe::DEFAULT_RECIPES`). An
//! fp16-accumulating GEMM is held to its own derived bound (docs/check-model.md).

use crate::runner::verdict::Check;
use crate::runner::verdict::{Outcome, Verdict};
use w4a16_checkpoint::recipe::{self, YRecipe};
use w4a16_checkpoint::{Oracle, OracleEntry};
use w4a16_reference::ActDtype;
use w4a16_reference::compare::{self, OutputBits};
use w4a16_reference::formats::Checkpoint;
use w4a16_reference::layer::QuantizedLayer;

/// The `oracle` verdict of one module; `None` when the oracle file does not hold it. `recipe` is
/// how the library computed its `y`.
pub fn check(
    oracle: &Oracle,
    module: &str,
    checkpoint: &dyn Checkpoint,
    (c_target, recipe): (f64, YRecipe),
    id: &str,
) -> Option<Verdict> {
    let fail = |detail: String| Some(Verdict::new(id, Check::Oracle, Outcome::Fail).detail(detail));
    let own = match checkpoint.decode_own_semantics() {
        Ok(l) => l,
        Err(e) => return fail(format!("our reading refused: {e}")),
    };
    let layer = match oracle.module(module, own.shape.n, own.shape.k, own.dtype) {
        Ok(l) => l,
        Err(e) => return fail(format!("oracle file refused: {e}")),
    };
    let library = layer.dequantized.as_ref()?;
    let ours = match own.dequantize_rounded() {
        Ok(b) => b,
        Err(e) => return fail(format!("our reading is malformed: {e}")),
    };
    let (n, k) = (own.shape.n, own.shape.k);
    if library.len() != ours.len() {
        return fail(format!(
            "the library's dequantized weight holds {} values, our reading [N, K] = [{n}, {k}]",
            library.len()
        ));
    }
    let mismatches: Vec<usize> = (0..ours.len()).filter(|&i| ours[i] != library[i]).collect();
    let mut parts = Vec::new();
    let mut ok = true;
    if let Some(&first) = mismatches.first() {
        ok = false;
        parts.push(format!(
            "{} of {} dequantized weights differ from the library's own ({:.2}%), first at (n = {}, k = {}): ours {:#06x}, library {:#06x}",
            mismatches.len(),
            ours.len(),
            100.0 * mismatches.len() as f64 / ours.len() as f64,
            first / k,
            first % k,
            ours[first],
            library[first]
        ));
    } else {
        parts.push(format!(
            "dequantized weights [{n}, {k}] bit-exact against the library's own"
        ));
    }
    if let Some(intended) = &layer.intended {
        let differ = intended.iter().zip(library).filter(|(a, b)| a != b).count();
        if differ > 0 {
            parts.push(format!(
                "the library's reading differs from what was quantized in {differ} of {} weights ({:.2}%)",
                intended.len(),
                100.0 * differ as f64 / intended.len() as f64
            ));
        }
    }
    if let Some(part) = output_check(&layer, &own, &ours, (c_target, recipe)) {
        ok &= part.0;
        parts.push(part.1);
    }
    let outcome = if ok { Outcome::Pass } else { Outcome::Fail };
    Some(Verdict::new(id, Check::Oracle, outcome).detail(parts.join("; ")))
}

/// The library's output against the bound of `recipe`: `(passed, what was found)`; `None` when
/// the file holds no output for the module.
fn output_check(
    layer: &OracleEntry,
    own: &QuantizedLayer,
    rounded: &[u16],
    (c_target, recipe): (f64, YRecipe),
) -> Option<(bool, String)> {
    let (Some(x), Some(y)) = (&layer.x, &layer.y) else {
        return None;
    };
    let n = own.shape.n;
    let name = recipe.name();
    let block_k = match recipe {
        YRecipe::Fp32Accumulate => {
            return Some(
                match compare::compare_library_output(x, own, OutputBits::new(y, n), c_target) {
                    Ok(r) if r.passed() => (
                        true,
                        format!(
                            "the library's output ({name}) on {} recorded rows is within the rounded-weight reference's bound (worst ratio {:.3e})",
                            x.m, r.worst_ratio
                        ),
                    ),
                    Ok(r) => (
                        false,
                        format!(
                            "the library's output ({name}) is outside the rounded-weight reference's bound in {} elements (worst ratio {:.3e} at {:?})",
                            r.over_bound, r.worst_ratio, r.worst_at
                        ),
                    ),
                    Err(e) => (
                        false,
                        format!("the library's output cannot be compared: {e}"),
                    ),
                },
            );
        }
        YRecipe::Fp16Accumulate { block_k } => block_k,
    };
    if own.dtype != ActDtype::F16 {
        return Some((
            false,
            format!(
                "the oracle file declares {name} for a {} model; it applies to fp16 outputs only",
                own.dtype.name()
            ),
        ));
    }
    let r = recipe::judge_fp16_accumulated(x, rounded, y, n, block_k);
    Some(if r.passed() {
        (
            true,
            format!(
                "the library's output ({name}) on {} recorded rows is within the fp16-accumulation bound (worst ratio {:.3e})",
                x.m, r.worst_ratio
            ),
        )
    } else {
        (
            false,
            format!(
                "the library's output ({name}) is outside the fp16-accumulation bound in {} of {} elements (worst ratio {:.3e} at {:?})",
                r.over_bound, r.elements, r.worst_ratio, r.worst_at
            ),
        )
    })
}
