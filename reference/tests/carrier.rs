//! The asymmetric carrier (docs/contract.md §2, docs/field.md §0 item 7 and §6 item 9): its words against the scales
//! and zero points it is built from, its refusals, the weight a carrier kernel forms from it, and
//! the pre-rounded-bias bound: loose enough for fp16 FMA and mul+add evaluation, tight enough to
//! fail a wrong carrier.
mod common;
mod oracle;

use common::{CASES, logical_layer};
use oracle::{Data, case};
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use w4a16_reference::bound::BoundModel;
use w4a16_reference::compare::{OutputBits, compare, compare_bit_exact};
use w4a16_reference::formats::{
    BiasEvaluation, Carrier, CarrierError, PackedZeroPoints, ResidentLayer, ResidentScales,
    RowPadding, UnpackedZeroPoints, ZeroPoints,
};
use w4a16_reference::gemm::reference;
use w4a16_reference::layer::QuantizedLayer;
use w4a16_reference::{ActDtype, Activations, BiasStage, NumericRecipe};

/// fused_carrier's recipe: fused's, plus the pre-rounded bias for fp16 (bf16 carries the raw z).
fn carrier_recipe(dtype: ActDtype) -> NumericRecipe {
    NumericRecipe {
        rounds_dequantized_weight: true,
        offset_accumulation: None,
        bias: BiasStage::AfterCast,
        output: dtype,
        single_rounding: false,
        pre_rounded_bias: dtype == ActDtype::F16,
    }
}

fn padded(scale_extra_elems: usize) -> RowPadding {
    RowPadding {
        weight_extra_bytes: 0,
        scale_extra_elems,
    }
}

/// What building the carrier of `layer` must give: the first refusal in row-major order, or
/// `None` when it builds.
fn expected_refusal(layer: &QuantizedLayer) -> Option<CarrierError> {
    let zeros = layer.zeros.as_ref()?;
    let d = layer.dtype;
    let groups = layer.shape.groups();
    for n in 0..layer.shape.n {
        for g in 0..groups {
            let s = layer.scales[n * groups + g];
            if !d.is_finite_bits(s) {
                return Some(CarrierError::NonFiniteScale { n, g });
            }
            let z = zeros[n * groups + g];
            if d == ActDtype::F16 && !d.is_finite_bits(d.from_f64(-f64::from(z) * d.to_f64(s))) {
                return Some(CarrierError::BiasOverflow {
                    n,
                    g,
                    z,
                    scale: d.to_f64(s),
                });
            }
        }
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// Every word holds the scale's bits low and fp16(−z·s) (RNE) or the raw z high, at row
    /// stride K/G whatever the scales' padding; z decodes back wherever s ≠ 0. Scales are
    /// arbitrary bit patterns: non-finite ones and fp16 biases that overflow are the typed
    /// refusals, in row-major order; symmetric layers have no carrier.
    #[test]
    fn the_carrier_round_trips_its_scales_and_zero_points(
        layer in logical_layer(false),
        extra in 0usize..5,
    ) {
        let resident = ResidentLayer::from_logical(&layer, padded(extra)).unwrap();
        let built = Carrier::from_resident(&resident);
        if layer.zeros.is_none() {
            prop_assert_eq!(built, Err(CarrierError::SymmetricLayer));
            return Ok(());
        }
        if let Some(refusal) = expected_refusal(&layer) {
            prop_assert_eq!(built, Err(refusal));
            return Ok(());
        }
        let c = built.unwrap();
        let (n, groups, d) = (layer.shape.n, layer.shape.groups(), layer.dtype);
        prop_assert_eq!((c.n, c.groups, c.dtype), (n, groups, d));
        prop_assert_eq!(c.words.len(), n * groups);
        let zeros = layer.zeros.as_ref().unwrap();
        for r in 0..n {
            for g in 0..groups {
                let (s, z) = (layer.scales[r * groups + g], zeros[r * groups + g]);
                prop_assert_eq!(c.words[r * groups + g], c.word(r, g));
                prop_assert_eq!(c.scale_bits(r, g), s);
                let hi = match d {
                    ActDtype::F16 => d.from_f64(-f64::from(z) * d.to_f64(s)),
                    ActDtype::Bf16 => u16::from(z),
                };
                prop_assert_eq!(c.high(r, g), hi);
                if d == ActDtype::Bf16 || d.to_f64(s) != 0.0 {
                    prop_assert_eq!(c.zero(r, g), Some(z), "({}, {})", r, g);
                }
            }
        }
    }

    /// bf16 carriers leave nothing pre-rounded: every weight is fused's `round((q − z)·s)`.
    #[test]
    fn bf16_carrier_weights_are_the_exact_rounded_weights(seed in any::<u64>()) {
        let c = case(1, 16, 64, 32, ActDtype::Bf16, true, false, Data::Realistic, seed);
        let r = ResidentLayer::from_logical(&c.layer, RowPadding::NONE).unwrap();
        let carrier = Carrier::from_resident(&r).unwrap();
        for n in 0..16 {
            for k in 0..64 {
                for eval in BiasEvaluation::ALL {
                    prop_assert_eq!(
                        carrier.weight(c.layer.code(n, k), n, k / 32, eval),
                        ActDtype::Bf16.from_f64(c.layer.weight(n, k))
                    );
                }
            }
        }
    }
}

#[test]
fn unpacked_or_mismatched_zero_points_are_refused_naming_what_was_expected() {
    let c = case(
        1,
        16,
        64,
        32,
        ActDtype::F16,
        true,
        false,
        Data::Realistic,
        3,
    );
    let r = ResidentLayer::from_logical(&c.layer, RowPadding::NONE).unwrap();
    let legacy = ZeroPoints::UnpackedLegacy(UnpackedZeroPoints {
        n: 16,
        groups: 2,
        dtype: ActDtype::F16,
        bits: vec![0; 32],
    });
    let e = Carrier::build(&r.scales, Some(&legacy)).unwrap_err();
    assert_eq!(
        e,
        CarrierError::UnpackedZeroPoints {
            expected: vec![2, 2],
            got: "f16 [16, 2]".into()
        }
    );
    assert!(
        e.to_string()
            .contains("packed u32 [N/8, K/G] = [2, 2]; got the legacy unpacked f16 [16, 2]"),
        "{e}"
    );
    let other = ZeroPoints::Packed(PackedZeroPoints {
        n: 8,
        groups: 2,
        words: vec![0; 2],
    });
    let e = Carrier::build(&r.scales, Some(&other)).unwrap_err();
    assert!(
        matches!(&e, CarrierError::ShapeMismatch { tensor: "zero points", expected, got, .. }
            if *expected == vec![2, 2] && *got == vec![1, 2]),
        "{e:?}"
    );
    let short = ResidentScales {
        bits: r.scales.bits[..20].to_vec(),
        ..r.scales.clone()
    };
    let e = Carrier::build(&short, r.zeros.as_ref()).unwrap_err();
    assert_eq!(
        e,
        CarrierError::TooFewElements {
            tensor: "scales",
            stride: 2,
            needed: 32,
            got: 20
        }
    );
}

/// The per-weight lemma of bound.rs, exhaustively: for every finite fp16 scale whose products
/// stay finite and every (q, z), `|ŵ − w| ≤ u·|w| + u(1+u)·|s|·(q + z)` under both evaluations
/// (FMA: `u(1+u)·|s|·z` for the second term), a nonzero w keeps its sign, and mul+add gives 0
/// exactly where w is 0 (the FMA leaves the residue `z·s − fl(z·s)` there, which is why the
/// reference refuses IEEE special values in X for this recipe). The mul+add evaluation uses more
/// than half of its bound somewhere (the lemma is not loose).
#[test]
fn every_fp16_carrier_weight_is_within_the_per_weight_lemma() {
    let d = ActDtype::F16;
    let u = d.unit_roundoff();
    let scales: Vec<u16> = (0..=u16::MAX)
        .filter(|&b| d.is_finite_bits(b) && d.to_f64(b).abs() * 15.0 < 65504.0)
        .collect();
    let n = scales.len().next_multiple_of(8);
    let mut bits = scales.clone();
    bits.resize(n, 0);
    let resident_scales = ResidentScales {
        n,
        groups: 1,
        row_stride: 1,
        dtype: d,
        bits,
    };
    let mut worst = [0f64; 2];
    for z in 0..16u8 {
        let zeros = ZeroPoints::Packed(PackedZeroPoints {
            n,
            groups: 1,
            words: vec![u32::from(z) * 0x1111_1111; n / 8],
        });
        let c = Carrier::build(&resident_scales, Some(&zeros)).unwrap();
        for (r, &sb) in scales.iter().enumerate() {
            let s = d.to_f64(sb);
            for q in 0..16u8 {
                let w = (f64::from(q) - f64::from(z)) * s;
                for (i, eval) in BiasEvaluation::ALL.into_iter().enumerate() {
                    let got = d.to_f64(c.weight(q, r, 0, eval));
                    let qs = if eval == BiasEvaluation::Fma {
                        0.0
                    } else {
                        f64::from(q)
                    };
                    let bound = u * w.abs() + u * (1.0 + u) * s.abs() * (qs + f64::from(z));
                    let err = (got - w).abs();
                    assert!(
                        err <= bound,
                        "{eval:?} s={s:e} q={q} z={z}: ŵ={got:e} w={w:e} err {err:e} > {bound:e}"
                    );
                    if eval == BiasEvaluation::MulAdd {
                        assert_eq!(got == 0.0, w == 0.0, "{eval:?} s={s:e} q={q} z={z}");
                    }
                    assert!(
                        w == 0.0 || got.signum() == w.signum(),
                        "{eval:?} s={s:e} q={q} z={z}"
                    );
                    if bound > 0.0 {
                        worst[i] = worst[i].max(err / bound);
                    }
                }
            }
        }
    }
    assert!(worst[1] > 0.5, "mul+add worst ratio {}", worst[1]);
    assert!(worst[0] > 0.0, "the pre-rounding must show under FMA");
}

/// Which carrier a simulated kernel reads.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Seeded {
    Right,
    /// fp16: `+z·s` in the high half instead of `−z·s`.
    BiasSignFlipped,
    /// Row n's words carry row n+1's zero point (mod N).
    NeighbourRowZero,
}

fn carrier_for(layer: &QuantizedLayer, seeded: Seeded) -> Carrier {
    let mut source = layer.clone();
    if seeded == Seeded::NeighbourRowZero {
        let groups = layer.shape.groups();
        let z = source.zeros.as_mut().unwrap();
        z.rotate_left(groups);
    }
    let r = ResidentLayer::from_logical(&source, RowPadding::NONE).unwrap();
    let mut c = Carrier::from_resident(&r).unwrap();
    if seeded == Seeded::BiasSignFlipped {
        c.words.iter_mut().for_each(|w| *w ^= 0x8000_0000);
    }
    c
}

/// A carrier kernel on the CPU: weights formed from the carrier under `eval`, fp32 products
/// (exact) summed in a random order per element, one cast, bias after the cast (fused's order).
fn emulate_carrier(
    x: &Activations,
    layer: &QuantizedLayer,
    carrier: &Carrier,
    eval: BiasEvaluation,
    seed: u64,
) -> Vec<u16> {
    let (n, k, group, d) = (layer.shape.n, layer.shape.k, layer.shape.group, layer.dtype);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..k).collect();
    let w: Vec<f32> = (0..n * k)
        .map(|i| {
            let (r, kk) = (i / k, i % k);
            d.to_f32(carrier.weight(layer.code(r, kk), r, kk / group, eval))
        })
        .collect();
    let mut out = vec![0u16; x.m * n];
    for m in 0..x.m {
        for j in 0..n {
            order.shuffle(&mut rng);
            let acc = order
                .iter()
                .fold(0f32, |acc, &kk| acc + x.get(m, kk) as f32 * w[j * k + kk]);
            let y = d.from_f32(acc);
            out[m * n + j] = match &layer.bias {
                None => y,
                Some(_) => d.from_f32(d.to_f32(y) + layer.bias_value(j) as f32),
            };
        }
    }
    out
}

/// Realistic data, both dtypes, with and without bias, G 32 and 128: the right carrier passes
/// the derived bound under FMA and under mul+add evaluation; a carrier whose fp16 bias has the
/// wrong sign, or whose zero points come from the neighbouring row, fails it.
#[test]
fn the_bound_takes_both_evaluations_and_fails_a_wrong_carrier() {
    let mut worst: f64 = 0.0;
    for dtype in ActDtype::ALL {
        for (k, group, bias, seed) in [(512, 32, true, 1u64), (2048, 128, false, 2)] {
            let c = case(4, 32, k, group, dtype, true, bias, Data::Realistic, seed);
            let rec = carrier_recipe(dtype);
            let r = reference(&c.x, &c.layer, &rec).unwrap();
            assert!(r.a_offset.is_some() == (dtype == ActDtype::F16));
            let model = BoundModel::new(&rec, k, 1.0).unwrap();
            for eval in BiasEvaluation::ALL {
                let y = emulate_carrier(
                    &c.x,
                    &c.layer,
                    &carrier_for(&c.layer, Seeded::Right),
                    eval,
                    seed,
                );
                let rep = compare(&r, &model, OutputBits::new(&y, 32)).unwrap();
                assert!(rep.passed(), "{dtype} {eval:?} K={k}: {rep:?}");
                worst = worst.max(rep.worst_ratio);
                let wrong: &[Seeded] = match dtype {
                    ActDtype::F16 => &[Seeded::BiasSignFlipped, Seeded::NeighbourRowZero],
                    ActDtype::Bf16 => &[Seeded::NeighbourRowZero],
                };
                for &seeded in wrong {
                    let y =
                        emulate_carrier(&c.x, &c.layer, &carrier_for(&c.layer, seeded), eval, seed);
                    let rep = compare(&r, &model, OutputBits::new(&y, 32)).unwrap();
                    assert!(
                        !rep.passed() && rep.over_bound > 4 * 32 / 2,
                        "{dtype} {eval:?} {seeded:?}: a wrong carrier passed: {rep:?}"
                    );
                }
            }
        }
    }
    assert!(worst > 1.0 / 256.0, "worst ratio {worst}");
}

/// Worst case for the pre-rounding: codes within one of their zero point (small |w|, large
/// z·s) and each X row's signs following the weight errors of one output column, so every error
/// of that dot product adds up. Both evaluations stay inside the pre-rounded-bias bound; fused's
/// bound (exact `(q − z)·s`, rounded once) does not hold them, so the extra term is needed.
#[test]
fn aligned_errors_stay_inside_the_carrier_bound_and_outside_the_fused_one() {
    let d = ActDtype::F16;
    let (n, k, group) = (8, 1024, 64);
    let mut c = case(1, n, k, group, d, true, false, Data::Realistic, 11);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for j in 0..n {
        for kk in 0..k {
            let z = i32::from(c.layer.zero(j, kk / group));
            c.layer.q[j * k + kk] = (z + rng.random_range(-1..=1)).clamp(0, 15) as u8;
        }
    }
    let carrier = carrier_for(&c.layer, Seeded::Right);
    for eval in BiasEvaluation::ALL {
        let mut data = Vec::with_capacity(n * k);
        for j in 0..n {
            for kk in 0..k {
                let w = c.layer.weight(j, kk);
                let wh = d.to_f64(carrier.weight(c.layer.code(j, kk), j, kk / group, eval));
                let mag = 0.5 + rng.random::<f64>();
                data.push(d.from_f64(if wh >= w { mag } else { -mag }));
            }
        }
        let x = Activations {
            m: n,
            k,
            row_stride: k,
            dtype: d,
            data,
        };
        let y = emulate_carrier(&x, &c.layer, &carrier, eval, 3);
        let rec = carrier_recipe(d);
        let r = reference(&x, &c.layer, &rec).unwrap();
        let rep = compare(
            &r,
            &BoundModel::new(&rec, k, 1.0).unwrap(),
            OutputBits::new(&y, n),
        )
        .unwrap();
        assert!(rep.passed(), "{eval:?}: {rep:?}");
        // Aligned errors use a visible share of the bound (about a fifth): it is not vacuous.
        assert!(rep.worst_ratio > 1.0 / 8.0, "{eval:?}: {rep:?}");
        let fused = NumericRecipe {
            pre_rounded_bias: false,
            ..rec
        };
        let rf = reference(&x, &c.layer, &fused).unwrap();
        let rep_f = compare(
            &rf,
            &BoundModel::new(&fused, k, 1.0).unwrap(),
            OutputBits::new(&y, n),
        )
        .unwrap();
        assert!(
            !rep_f.passed(),
            "{eval:?}: aligned carrier errors fit fused's bound, the test lost its teeth: {rep_f:?}"
        );
    }
}

/// Exact-class data (power-of-two scales, small integers): `−z·s` is exact in fp16, so the
/// carrier kernel is bit-exact like fused.
#[test]
fn exact_class_carriers_are_bit_exact() {
    for dtype in ActDtype::ALL {
        let c = case(3, 16, 256, 32, dtype, true, true, Data::Exact, 21);
        let carrier = carrier_for(&c.layer, Seeded::Right);
        let rec = carrier_recipe(dtype);
        let r = reference(&c.x, &c.layer, &rec).unwrap();
        let model = BoundModel::new(&rec, 256, 1.0).unwrap();
        for eval in BiasEvaluation::ALL {
            let y = emulate_carrier(&c.x, &c.layer, &carrier, eval, 1);
            let rep = compare_bit_exact(&r, &model, OutputBits::new(&y, 16)).unwrap();
            assert!(rep.passed(), "{dtype} {eval:?}: {rep:?}");
        }
    }
}

#[test]
fn the_pre_rounded_bias_needs_rounded_weights_and_no_offset() {
    for bad in [
        NumericRecipe {
            rounds_dequantized_weight: false,
            ..carrier_recipe(ActDtype::F16)
        },
        NumericRecipe {
            offset_accumulation: Some(128.0),
            ..carrier_recipe(ActDtype::F16)
        },
    ] {
        assert!(BoundModel::new(&bad, 64, 1.0).is_err(), "{bad:?}");
        let c = case(1, 8, 64, 32, ActDtype::F16, true, false, Data::Realistic, 1);
        assert!(reference(&c.x, &c.layer, &bad).is_err(), "{bad:?}");
    }
    assert_eq!(carrier_recipe(ActDtype::F16).magnitude_offset(), Some(0.0));
    assert_eq!(carrier_recipe(ActDtype::Bf16).magnitude_offset(), None);
}

/// The second oracle reads the same recipe: Freivalds plus sampled lines (the path of outputs
/// too large for the full reference) pass the right fp16 carrier under both evaluations and
/// catch a carrier with the bias of the wrong sign, with a small sampling budget so that most
/// elements are seen through the projections only.
#[test]
fn large_output_verification_uses_the_carrier_magnitude() {
    use w4a16_reference::verify::{VerifyBudget, verify_large};
    let d = ActDtype::F16;
    let (m, n, k, group) = (24, 64, 1024, 64);
    let c = case(m, n, k, group, d, true, true, Data::Realistic, 41);
    let rec = carrier_recipe(d);
    let budget = VerifyBudget {
        sample_flops: 2.0 * 4.0 * (k * (m + n)) as f64,
        seed: 9,
    };
    for eval in BiasEvaluation::ALL {
        let y = emulate_carrier(
            &c.x,
            &c.layer,
            &carrier_for(&c.layer, Seeded::Right),
            eval,
            2,
        );
        let r = verify_large(&c.x, &c.layer, &rec, OutputBits::new(&y, n), 1.0, &budget).unwrap();
        assert!(r.passed(), "{eval:?}: {r:?}");
        let bad = carrier_for(&c.layer, Seeded::BiasSignFlipped);
        let y = emulate_carrier(&c.x, &c.layer, &bad, eval, 2);
        let r = verify_large(&c.x, &c.layer, &rec, OutputBits::new(&y, n), 1.0, &budget).unwrap();
        assert!(
            !r.freivalds.passed(),
            "{eval:?}: Freivalds missed a wrong carrier: {r:?}"
        );
    }
}
