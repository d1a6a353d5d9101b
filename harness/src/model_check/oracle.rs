//! The producer library as a second oracle for a checkpoint: its own dequantized weights must
//! equal our reading rounded to the activation dtype, bit for bit, and its output on recorded
//! activations must lie within the bound of the reference on those rounded weights
//! (`WeightRounding::ToActivationDtype`). Both come from `w4a16-oracle.safetensors`, written
//! beside the checkpoint by the library itself (scripts/checkpoint-fixtures.py).

use crate::runner::verdict::Check;
use crate::runner::verdict::{Outcome, Verdict};
use w4a16_checkpoint::Oracle;
use w4a16_reference::compare::{self, OutputBits};
use w4a16_reference::formats::Checkpoint;

/// The `oracle` verdict of one module; `None` when the oracle file does not hold it.
pub fn check(
    oracle: &Oracle,
    module: &str,
    checkpoint: &dyn Checkpoint,
    c_target: f64,
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
    if let (Some(x), Some(y)) = (&layer.x, &layer.y) {
        match compare::compare_library_output(x, &own, OutputBits::new(y, n), c_target) {
            Ok(r) if r.passed() => parts.push(format!(
                "the library's output on {} recorded rows is within the rounded-weight reference's bound (worst ratio {:.3e})",
                x.m, r.worst_ratio
            )),
            Ok(r) => {
                ok = false;
                parts.push(format!(
                    "the library's output is outside the rounded-weight reference's bound in {} elements (worst ratio {:.3e} at {:?})",
                    r.over_bound, r.worst_ratio, r.worst_at
                ));
            }
            Err(e) => {
                ok = false;
                parts.push(format!("the library's output cannot be compared: {e}"));
            }
        }
    }
    let outcome = if ok { Outcome::Pass } else { Outcome::Fail };
    Some(Verdict::new(id, Check::Oracle, outcome).detail(parts.join("; ")))
}
