//! Strategies and checks shared by the format tests.
#![allow(dead_code)]

use proptest::prelude::*;
use w4a16_reference::ActDtype;
use w4a16_reference::layer::{LayerShape, QuantizedLayer};

pub const CASES: u32 = 64;

/// Logical layers with N = 8·n8 (or any N ≥ 1 when `any_n`), K = G·groups, G ∈ {8, 16, 32}.
/// Scales are arbitrary bit patterns (NaN and ∞ included): conversions move bits, never values.
pub fn logical_layer(any_n: bool) -> impl Strategy<Value = QuantizedLayer> {
    let n = if any_n {
        (1usize..=24).boxed()
    } else {
        (1usize..=4).prop_map(|x| 8 * x).boxed()
    };
    (
        n,
        1usize..=4,
        prop::sample::select(vec![8usize, 16, 32]),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_flat_map(|(n, groups, group, f16, asym, bias)| {
            let k = group * groups;
            let dtype = if f16 { ActDtype::F16 } else { ActDtype::Bf16 };
            (
                Just((LayerShape::new(n, k, group), dtype, asym, bias)),
                prop::collection::vec(0u8..16, n * k),
                prop::collection::vec(0u8..16, n * groups),
                prop::collection::vec(any::<u16>(), n * groups),
                prop::collection::vec(any::<u16>(), n),
            )
        })
        .prop_map(
            |((shape, dtype, asym, with_bias), q, zeros, scales, bias)| QuantizedLayer {
                shape,
                dtype,
                q,
                zeros: asym.then_some(zeros),
                scales,
                bias: with_bias.then_some(bias),
            },
        )
}

/// Every dequantized weight of `got` has the same bits as in `want`, and the layers are equal.
pub fn assert_same_dequantized(got: &QuantizedLayer, want: &QuantizedLayer) {
    assert_eq!(got.shape, want.shape);
    for n in 0..want.shape.n {
        for k in 0..want.shape.k {
            assert_eq!(
                got.weight(n, k).to_bits(),
                want.weight(n, k).to_bits(),
                "(n, k) = ({n}, {k})"
            );
        }
        assert_eq!(
            got.bias_value(n).to_bits(),
            want.bias_value(n).to_bits(),
            "bias n = {n}"
        );
    }
    assert_eq!(got, want);
}

/// A small fixed layer (N = 16, K = 64, G = 32) for the refusal tests.
pub fn fixed_layer(asym: bool) -> QuantizedLayer {
    let shape = LayerShape::new(16, 64, 32);
    let groups = shape.groups();
    QuantizedLayer {
        shape,
        dtype: ActDtype::F16,
        q: (0..shape.n * shape.k)
            .map(|i| ((i * 7 + i / 5) % 16) as u8)
            .collect(),
        zeros: asym.then(|| {
            (0..shape.n * groups)
                .map(|i| ((i * 3 + 1) % 16) as u8)
                .collect()
        }),
        scales: (0..shape.n * groups)
            .map(|i| ActDtype::F16.from_f32(0.01 * (i + 1) as f32))
            .collect(),
        bias: Some(
            (0..shape.n)
                .map(|i| ActDtype::F16.from_f32(i as f32 - 3.0))
                .collect(),
        ),
    }
}
