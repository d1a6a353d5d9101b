//! Weights and activations decoded into f64 (every value exact), and the fixed task split both
//! passes share so that sums do not depend on scheduling.

use crate::dtype::ActDtype;
use crate::layer::QuantizedLayer;
use half::f16;
use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
use ndarray::{Array2, ArrayViewMut2, Axis};

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

/// Contiguous task ranges of `blocks` blocks: a fixed split, so every sum is formed in the same
/// order on every run whatever the scheduling.
pub(super) fn task_len(blocks: usize) -> usize {
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

pub(super) fn row_chunks(
    a: Option<&mut Array2<f64>>,
    size: usize,
    count: usize,
) -> Vec<Option<ArrayViewMut2<'_, f64>>> {
    match a {
        Some(a) => a.axis_chunks_iter_mut(Axis(0), size).map(Some).collect(),
        None => (0..count).map(|_| None).collect(),
    }
}
