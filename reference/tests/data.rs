//! Seeded data: stable across machines, keyed by the case id, and each class shaped as
//! documented.

use w4a16_reference::ActDtype;
use w4a16_reference::data::{
    DataClass, DataError, DataSpec, EXACT_MAX_K, Generated, case_seed, fnv1a64, generate,
    generate_seeded, layer_key,
};
use w4a16_reference::layer::{LayerShape, Symmetry};

fn spec(class: DataClass, m: usize, dtype: ActDtype, symmetry: Symmetry) -> DataSpec {
    DataSpec {
        class,
        m,
        shape: LayerShape::new(24, 256, 64),
        dtype,
        symmetry,
        with_bias: true,
    }
}

/// Published FNV-1a 64 test vectors: the seed does not depend on the Rust version or platform.
#[test]
fn seed_is_fnv1a_of_the_case_id() {
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    let id = "field/qwen3-8b.down/M=4/bf16/asym/g128/realistic";
    assert_eq!(case_seed(id), fnv1a64(id.as_bytes()));
}

#[test]
fn same_id_same_tensors_different_id_different_tensors() {
    let id = "unit/small/M=3/f16/asym/g64/realistic";
    for class in DataClass::ALL {
        let s = spec(class, 3, ActDtype::F16, Symmetry::Asym);
        let a = generate(id, &s).unwrap();
        assert_eq!(a, generate(id, &s).unwrap(), "{class}");
        assert_eq!(
            a,
            generate_seeded(a.seed, a.layer_seed, &s).unwrap(),
            "{class}"
        );
        let b = generate("unit/small/M=3/f16/asym/g64/realistic/2", &s).unwrap();
        // Ones is constant apart from the asymmetric zero points.
        if class == DataClass::Ones {
            assert_ne!(a.layer.zeros, b.layer.zeros);
        } else {
            assert_ne!(a.layer.q, b.layer.q, "{class}");
            assert_ne!(a.layer.scales, b.layer.scales, "{class}");
            assert_ne!(a.x.data, b.x.data, "{class}");
        }
    }
}

/// Each tensor reads its own stream: W does not depend on M, and row 0 of X does not either.
#[test]
fn weights_do_not_depend_on_m() {
    let a = generate(
        "id",
        &spec(DataClass::Realistic, 1, ActDtype::Bf16, Symmetry::Sym),
    )
    .unwrap();
    let b = generate(
        "id",
        &spec(DataClass::Realistic, 5, ActDtype::Bf16, Symmetry::Sym),
    )
    .unwrap();
    assert_eq!(a.layer, b.layer);
    assert_eq!(a.x.data[..256], b.x.data[..256]);
}

/// The cases of one layer at different batch sizes share the layer and nothing else: the
/// runner converts the layer once and reuses it across M.
#[test]
fn batch_sizes_of_one_layer_share_the_weights_not_the_activations() {
    let id = |m: usize| format!("field/qwen3-8b.down_proj/M={m}/f16/asym/g128/realistic");
    assert_eq!(
        layer_key(&id(1)),
        "field/qwen3-8b.down_proj/f16/asym/g128/realistic"
    );
    for class in DataClass::ALL {
        let a = generate(&id(4), &spec(class, 4, ActDtype::F16, Symmetry::Asym)).unwrap();
        let b = generate(&id(7), &spec(class, 7, ActDtype::F16, Symmetry::Asym)).unwrap();
        assert_eq!(a.layer, b.layer, "{class}");
        assert_eq!(a.layer_seed, b.layer_seed);
        assert_ne!(a.seed, b.seed);
        if class != DataClass::Ones {
            assert_ne!(a.x.data, b.x.data, "{class}");
        }
    }
    // A different dtype, symmetry, group or variant is a different layer.
    assert_ne!(
        layer_key(&id(1)),
        layer_key("field/qwen3-8b.down_proj/M=1/f16/sym/g128/realistic")
    );
}

fn f64_dot(g: &Generated, m: usize, n: usize) -> f64 {
    (0..g.x.k)
        .map(|k| g.x.get(m, k) * g.layer.weight(n, k))
        .sum::<f64>()
        + g.layer.bias_value(n)
}

/// In the exact class every fp32 partial sum is exact: forward, backward and group-wise
/// (split-K) f32 sums all equal the f64 value, for both symmetries and dtypes.
#[test]
fn exact_class_sums_are_exact_in_f32() {
    for dtype in ActDtype::ALL {
        for symmetry in [Symmetry::Sym, Symmetry::Asym] {
            let s = DataSpec {
                shape: LayerShape::new(16, 4096, 128),
                ..spec(DataClass::Exact, 3, dtype, symmetry)
            };
            let g = generate("exact/sum", &s).unwrap();
            for m in 0..g.x.m {
                for n in 0..g.layer.shape.n {
                    let terms: Vec<f32> = (0..g.x.k)
                        .map(|k| (g.x.get(m, k) * g.layer.weight(n, k)) as f32)
                        .collect();
                    let bias = g.layer.bias_value(n) as f32;
                    let fwd = terms.iter().fold(bias, |a, &t| a + t);
                    let bwd = terms.iter().rev().fold(0f32, |a, &t| a + t) + bias;
                    let split = terms
                        .chunks(128)
                        .map(|c| c.iter().sum::<f32>())
                        .rev()
                        .fold(0f32, |a, p| a + p)
                        + bias;
                    let exact = f64_dot(&g, m, n);
                    assert_eq!(f64::from(fwd), exact, "{dtype} {symmetry:?} ({m}, {n})");
                    assert_eq!(fwd, bwd);
                    assert_eq!(fwd, split);
                }
            }
            // Dequantized weights are exact in the activation dtype (rounding them changes
            // nothing), and scales are the documented powers of two.
            for n in 0..g.layer.shape.n {
                for k in 0..g.layer.shape.k {
                    let w = g.layer.weight(n, k);
                    assert_eq!(dtype.to_f64(dtype.from_f64(w)), w);
                }
                for gi in 0..g.layer.shape.groups() {
                    let s = g.layer.scale(n, gi);
                    assert!(
                        [-7, -8, -9, -10].iter().any(|&e| s == 2f64.powi(e)),
                        "scale {s}"
                    );
                }
            }
            assert!(g.x.data.iter().all(
                |&b| (-2.0..=2.0).contains(&dtype.to_f64(b)) && dtype.to_f64(b).fract() == 0.0
            ));
        }
    }
    let too_big = DataSpec {
        shape: LayerShape::new(8, EXACT_MAX_K + 1, 1),
        ..spec(DataClass::Exact, 1, ActDtype::F16, Symmetry::Sym)
    };
    assert!(matches!(
        generate("x", &too_big),
        Err(DataError::ExactTooLarge { .. })
    ));
}

/// The patterns are what their names say.
#[test]
fn pattern_classes() {
    let (m, n, k) = (3, 24, 256);
    for symmetry in [Symmetry::Sym, Symmetry::Asym] {
        let mut s = spec(DataClass::Ones, m, ActDtype::Bf16, symmetry);
        let ones = generate("p", &s).unwrap();
        for mi in 0..m {
            for ni in 0..n {
                assert_eq!(f64_dot(&ones, mi, ni), k as f64 + 1.0);
            }
        }
        s.with_bias = false;
        s.class = DataClass::LastRow;
        let lr = generate("p", &s).unwrap();
        for mi in 0..m {
            for ni in 0..n {
                let y = f64_dot(&lr, mi, ni);
                assert_eq!(
                    y != 0.0,
                    mi == m - 1 && ni == n - 1,
                    "last-row ({mi}, {ni}) = {y}"
                );
            }
        }
        s.class = DataClass::LastCol;
        let lc = generate("p", &s).unwrap();
        for mi in 0..m {
            for ki in 0..k {
                assert_eq!(
                    lc.x.get(mi, ki) != 0.0,
                    ki == k - 1,
                    "last-col x({mi}, {ki})"
                );
            }
        }
        // Live values are those of the realistic class for the same seed.
        s.class = DataClass::Realistic;
        let real = generate("p", &s).unwrap();
        assert_eq!(lc.layer, real.layer);
        assert_eq!(lc.x.get(1, k - 1), real.x.get(1, k - 1));
    }
}

#[test]
fn realistic_and_large_activation_ranges() {
    let s = DataSpec {
        shape: LayerShape::new(64, 1024, 128),
        ..spec(DataClass::Realistic, 4, ActDtype::F16, Symmetry::Asym)
    };
    let r = generate("ranges", &s).unwrap();
    let x: Vec<f64> = r.x.data.iter().map(|&b| ActDtype::F16.to_f64(b)).collect();
    assert!(x.iter().all(|v| v.abs() <= 1.5 + 1e-3));
    let var = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    assert!(
        (var.sqrt() - 0.25).abs() < 0.02,
        "std of x = {}",
        var.sqrt()
    );
    assert!(
        r.layer
            .scales
            .iter()
            .all(|&b| (0.0..=0.05).contains(&ActDtype::F16.to_f64(b)))
    );
    let zeros = r.layer.zeros.as_ref().unwrap();
    assert!((0..16u8).all(|z| zeros.contains(&z)) && zeros.iter().all(|&z| z < 16));

    let l = generate(
        "ranges",
        &DataSpec {
            class: DataClass::LargeActivation,
            dtype: ActDtype::Bf16,
            ..s
        },
    )
    .unwrap();
    let x: Vec<f64> = l.x.data.iter().map(|&b| ActDtype::Bf16.to_f64(b)).collect();
    assert!(x.iter().all(|v| (-320.0..=448.0).contains(v)));
    // Per-group Σx is large (≈ 64·G), the term the bf16 offset form cancels.
    let group_sum: f64 = x[..128].iter().sum();
    assert!(group_sum > 32.0 * 128.0, "Σx over a group = {group_sum}");
}

#[test]
fn class_names_parse_back() {
    let names: Vec<&str> = DataClass::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(
        names,
        [
            "exact",
            "realistic",
            "large-activation",
            "ones",
            "last-row",
            "last-col"
        ]
    );
    for c in DataClass::ALL {
        assert_eq!(DataClass::parse(&c.to_string()), Some(c));
    }
    assert_eq!(DataClass::parse("Exact"), None);
    // The serde names (used by case files) are the same strings.
    use serde::Deserialize;
    use serde::de::value::{Error, StrDeserializer};
    for c in DataClass::ALL {
        assert_eq!(
            DataClass::deserialize(StrDeserializer::<Error>::new(c.name())),
            Ok(c)
        );
    }
    assert!(DataClass::deserialize(StrDeserializer::<Error>::new("last_row")).is_err());
}
