//! Per-group quantization: the error bound with the stored (rounded) scale, and the refusals.

use proptest::prelude::*;
use w4a16_reference::ActDtype;
use w4a16_reference::layer::{LayerShape, Symmetry};
use w4a16_reference::quantize::{QuantizeError, quantize};

fn weights() -> impl Strategy<Value = (LayerShape, Vec<f32>, i32)> {
    (
        1usize..=4,
        1usize..=3,
        prop::sample::select(vec![8usize, 32, 128]),
        -3i32..=3,
    )
        .prop_flat_map(|(n, groups, group, e)| {
            let shape = LayerShape::new(n, groups * group, group);
            // Values of one decade around 10^e, with exact zeros and same-sign groups mixed in.
            let v = prop_oneof![
                4 => -1.0f32..1.0,
                1 => 0.0f32..1.0,
                1 => Just(0.0f32),
            ];
            (Just(shape), prop::collection::vec(v, n * shape.k), Just(e))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// `|(q − z)·s_r − w| ≤ s_r/2 + |w|·2⁻⁵⁰` with the stored scale `s_r`, and the stored scale
    /// is within `(1 + 2u)` of the unrounded one `s` (max|w|/7 or range/15) whenever it is a
    /// normal number of the dtype.
    #[test]
    fn dequantized_error_is_at_most_half_a_step(
        (shape, raw, e) in weights(),
        f16 in any::<bool>(),
        asym in any::<bool>(),
    ) {
        let dtype = if f16 { ActDtype::F16 } else { ActDtype::Bf16 };
        let symmetry = if asym { Symmetry::Asym } else { Symmetry::Sym };
        let w: Vec<f32> = raw.iter().map(|v| v * 10f32.powi(e)).collect();
        let layer = quantize(&w, shape, dtype, symmetry).unwrap();
        prop_assert!(layer.q.iter().all(|&q| q < 16));
        prop_assert_eq!(layer.zeros.is_some(), asym);
        let u = dtype.unit_roundoff();
        let min_normal = match dtype { ActDtype::F16 => 2f64.powi(-14), ActDtype::Bf16 => 2f64.powi(-126) };
        for n in 0..shape.n {
            for g in 0..shape.groups() {
                let s_r = layer.scale(n, g);
                let group: Vec<f64> = (g * shape.group..(g + 1) * shape.group).map(|k| f64::from(w[n * shape.k + k])).collect();
                let lo = group.iter().fold(0f64, |m, &v| m.min(v));
                let hi = group.iter().fold(0f64, |m, &v| m.max(v));
                let s = if asym { (hi - lo) / 15.0 } else { hi.max(-lo) / 7.0 };
                if s > 0.0 && s_r >= min_normal {
                    prop_assert!(s_r <= s * (1.0 + 2.0 * u), "s_r = {s_r}, s = {s}");
                }
                for (i, &wv) in group.iter().enumerate() {
                    let k = g * shape.group + i;
                    let err = (layer.weight(n, k) - wv).abs();
                    prop_assert!(err <= s_r / 2.0 + wv.abs() * 2f64.powi(-50),
                        "(n, k) = ({n}, {k}): w = {wv}, q = {}, z = {}, s_r = {s_r}, err = {err}",
                        layer.code(n, k), layer.zero(n, g));
                }
            }
        }
    }
}

#[test]
fn bad_weights_refused() {
    let shape = LayerShape::new(2, 64, 32);
    let mut w = vec![0.5f32; 128];
    assert_eq!(
        quantize(&w[..100], shape, ActDtype::F16, Symmetry::Sym).unwrap_err(),
        QuantizeError::Length {
            n: 2,
            k: 64,
            expected: 128,
            got: 100
        }
    );
    assert_eq!(
        quantize(&w, LayerShape::new(2, 64, 48), ActDtype::F16, Symmetry::Sym).unwrap_err(),
        QuantizeError::Group { k: 64, got: 48 }
    );
    w[70] = f32::NAN;
    let err = quantize(&w, shape, ActDtype::Bf16, Symmetry::Asym).unwrap_err();
    assert!(
        matches!(err, QuantizeError::NonFinite { n: 1, k: 6, .. }),
        "{err:?}"
    );
    // max|w|/7 above the f16 maximum (65504) cannot be stored; bf16 takes it.
    w[70] = 1.0e6;
    let err = quantize(&w, shape, ActDtype::F16, Symmetry::Sym).unwrap_err();
    assert!(
        matches!(err, QuantizeError::ScaleOverflow { n: 1, g: 0, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("f16"));
    assert!(quantize(&w, shape, ActDtype::Bf16, Symmetry::Sym).is_ok());
}

/// Many groups at once: round-to-nearest scales fall just short of the range in a few percent
/// of bf16 groups, which must not push the group's maximum outside the grid.
#[test]
fn bound_holds_on_many_groups() {
    let shape = LayerShape::new(2048, 32, 8);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let w: Vec<f32> = (0..shape.n * shape.k)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 0.8
        })
        .collect();
    for dtype in ActDtype::ALL {
        for symmetry in [Symmetry::Sym, Symmetry::Asym] {
            let layer = quantize(&w, shape, dtype, symmetry).unwrap();
            for n in 0..shape.n {
                for k in 0..shape.k {
                    let wv = f64::from(w[n * shape.k + k]);
                    let s_r = layer.scale(n, k / shape.group);
                    let err = (layer.weight(n, k) - wv).abs();
                    assert!(
                        err <= s_r / 2.0 + wv.abs() * 2f64.powi(-50),
                        "{dtype} {symmetry:?} ({n}, {k}): err {err}, s_r {s_r}"
                    );
                }
            }
        }
    }
}
