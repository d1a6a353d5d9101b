//! The bound is sound for emulated fp32 kernels, tight enough to see a one-code corruption, and
//! the comparison classifies poison, NaN/Inf and bit-exact agreement.
mod oracle;

use oracle::{Data, case, emulate, naive, recipe, rounded};
use w4a16_reference::bound::{BoundModel, U32, output_underflow};
use w4a16_reference::compare::{
    CompareMode, OutputBits, RATIO_BUCKETS, acceptable, agree_within, bucket, compare,
    compare_bit_exact, infinity_ratio,
};
use w4a16_reference::data::{DataClass, DataSpec, generate};
use w4a16_reference::gemm::{NonFiniteX, Reference, reference, reference_with};
use w4a16_reference::layer::{LayerShape, Symmetry};
use w4a16_reference::{ActDtype, BiasStage, NumericRecipe};

#[test]
fn random_order_fp32_sums_stay_inside_the_bound() {
    let mut worst: f64 = 0.0;
    for dtype in ActDtype::ALL {
        for stage in [BiasStage::BeforeCast, BiasStage::AfterCast] {
            for rounds in [false, true] {
                for (seed, asym) in [(1u64, false), (2, true)] {
                    let rec = recipe(dtype, rounds, stage, None);
                    let c = case(
                        6,
                        24,
                        512,
                        128,
                        dtype,
                        asym,
                        true,
                        Data::Realistic,
                        seed * 31 + rounds as u64,
                    );
                    let r = reference(&c.x, &c.layer, &rec).unwrap();
                    let model = BoundModel::new(&rec, 512, 1.0).unwrap();
                    for trial in 0..3 {
                        let y = emulate(&c.x, &c.layer, &rec, seed * 100 + trial);
                        let rep = compare(&r, &model, OutputBits::new(&y, 24)).unwrap();
                        assert!(rep.passed(), "{dtype} {stage:?} rounds={rounds}: {rep:?}");
                        assert_eq!(rep.checked, 6 * 24);
                        worst = worst.max(rep.worst_ratio);
                    }
                }
            }
        }
    }
    // The bound must not be vacuous: the emulated kernels use a visible part of it.
    assert!(worst > 1.0 / 64.0, "worst ratio {worst}");
}

#[test]
fn rounded_weight_kernel_needs_the_weight_term() {
    // The same rounded-weight output judged by a recipe that claims exact weights uses far more
    // of the bound: the u_w·a term is what makes the rounded recipe pass comfortably.
    let dtype = ActDtype::Bf16;
    let c = case(8, 32, 1024, 128, dtype, true, false, Data::Realistic, 9);
    let rounded_rec = recipe(dtype, true, BiasStage::BeforeCast, None);
    let y = emulate(&c.x, &c.layer, &rounded_rec, 4);
    let r = reference(&c.x, &c.layer, &rounded_rec).unwrap();
    let with = compare(
        &r,
        &BoundModel::new(&rounded_rec, 1024, 1.0).unwrap(),
        OutputBits::new(&y, 32),
    )
    .unwrap();
    let exact_rec = NumericRecipe::fp32_exact_weights(dtype);
    let without = compare(
        &r,
        &BoundModel::new(&exact_rec, 1024, 1.0).unwrap(),
        OutputBits::new(&y, 32),
    )
    .unwrap();
    assert!(with.passed());
    assert!(without.worst_ratio > with.worst_ratio);
}

#[test]
fn offset_accumulation_with_large_activations_stays_inside_the_offset_bound() {
    let dtype = ActDtype::Bf16;
    for stage in [BiasStage::BeforeCast, BiasStage::AfterCast] {
        let rec = recipe(dtype, false, stage, Some(128.0));
        let c = case(
            4,
            16,
            1024,
            128,
            dtype,
            true,
            true,
            Data::LargeActivation,
            21,
        );
        let r = reference(&c.x, &c.layer, &rec).unwrap();
        let model = BoundModel::new(&rec, 1024, 1.0).unwrap();
        for trial in 0..3 {
            let y = emulate(&c.x, &c.layer, &rec, trial);
            let rep = compare(&r, &model, OutputBits::new(&y, 16)).unwrap();
            assert!(rep.passed(), "{stage:?}: {rep:?}");
        }
    }
}

#[test]
fn one_corrupted_weight_code_is_detected() {
    for dtype in ActDtype::ALL {
        let rec = NumericRecipe::fp32_exact_weights(dtype);
        let c = case(16, 32, 256, 64, dtype, true, true, Data::Realistic, 13);
        let r = reference(&c.x, &c.layer, &rec).unwrap();
        let model = BoundModel::new(&rec, 256, 1.0).unwrap();
        // A code in a group whose scale is not tiny, flipped in its top bit (|Δq| = 8).
        let (n, k) = (0..32 * 256)
            .map(|i| (i / 256, i % 256))
            .find(|&(n, k)| c.layer.scale(n, k / 64) > 0.02)
            .unwrap();
        let mut bad = c.layer.clone();
        bad.q[n * 256 + k] ^= 8;
        let y = emulate(&c.x, &bad, &rec, 1);
        let rep = compare(&r, &model, OutputBits::new(&y, 32)).unwrap();
        assert!(
            !rep.passed() && rep.over_bound > 0 && rep.worst_ratio > 1.0,
            "{dtype}: {rep:?}"
        );
        assert_eq!(rep.worst_at.unwrap().1, n);
        // The clean kernel passes with the same data.
        let clean = emulate(&c.x, &c.layer, &rec, 1);
        assert!(
            compare(&r, &model, OutputBits::new(&clean, 32))
                .unwrap()
                .passed()
        );
    }
}

#[test]
fn poison_nan_inf_and_row_stride_are_reported() {
    let dtype = ActDtype::F16;
    let rec = NumericRecipe::fp32_exact_weights(dtype);
    let c = case(4, 8, 64, 32, dtype, false, true, Data::Realistic, 17);
    let r = reference(&c.x, &c.layer, &rec).unwrap();
    let model = BoundModel::new(&rec, 64, 1.0).unwrap();
    let stride = 11;
    let mut y = vec![dtype.poison_bits(); 3 * stride + 8];
    for m in 0..4 {
        for n in 0..8 {
            y[m * stride + n] = r.rounded_bits(m, n);
        }
    }
    let ok = compare(&r, &model, OutputBits::new(&y, stride)).unwrap();
    assert!(ok.passed(), "{ok:?}");
    assert_eq!((ok.checked, ok.exact_mismatches), (32, 0));
    y[stride + 2] = dtype.poison_bits();
    y[2 * stride + 3] = 0x7E00; // a NaN that is not the poison pattern
    y[3 * stride + 7] = 0xFC00; // -Inf
    let rep = compare(&r, &model, OutputBits::new(&y, stride)).unwrap();
    assert_eq!((rep.poison_left, rep.nonfinite, rep.over_bound), (1, 2, 0));
    assert!(!rep.passed());
    assert!(compare(&r, &model, OutputBits::new(&y[..20], stride)).is_err());
}

#[test]
fn overflow_to_the_same_infinity_is_not_a_failure() {
    let dtype = ActDtype::F16;
    let rec = NumericRecipe::fp32_exact_weights(dtype);
    // x = 1000, w = 7·s with s = 1: y = 1000·7·16 = 112000 > 65504.
    let mut c = case(1, 8, 16, 16, dtype, false, false, Data::Realistic, 1);
    c.x.data
        .iter_mut()
        .for_each(|b| *b = dtype.from_f64(1000.0));
    c.layer.q.iter_mut().for_each(|q| *q = 15);
    c.layer
        .scales
        .iter_mut()
        .for_each(|s| *s = dtype.from_f64(1.0));
    let r = reference(&c.x, &c.layer, &rec).unwrap();
    let model = BoundModel::new(&rec, 16, 1.0).unwrap();
    let y = vec![0x7C00u16; 8];
    let rep = compare(&r, &model, OutputBits::new(&y, 8)).unwrap();
    assert!(rep.passed(), "{rep:?}");
    let neg = vec![0xFC00u16; 8];
    assert_eq!(
        compare(&r, &model, OutputBits::new(&neg, 8))
            .unwrap()
            .nonfinite,
        8
    );
}

#[test]
fn bit_exact_mode_for_exact_class_data() {
    for dtype in ActDtype::ALL {
        let rec = NumericRecipe::fp32_exact_weights(dtype);
        let c = case(8, 32, 256, 32, dtype, true, true, Data::Exact, 23);
        let r = reference(&c.x, &c.layer, &rec).unwrap();
        let model = BoundModel::new(&rec, 256, 1.0).unwrap();
        // An fp32 kernel in any order sums exact-class data exactly: bit-exact after one cast.
        let y = emulate(&c.x, &c.layer, &rec, 5);
        assert_eq!(y, rounded(&r));
        let rep = compare_bit_exact(&r, &model, OutputBits::new(&y, 32)).unwrap();
        assert!(rep.passed() && rep.mode == CompareMode::BitExact, "{rep:?}");
        // One ulp off where an ulp is below γ_K·a: inside the bound, but not bit-exact.
        let mut off = y.clone();
        let i = (0..off.len())
            .find(|&i| (1.0..2.0).contains(&r.y[i].abs()))
            .unwrap();
        off[i] += 1;
        assert!(
            !compare_bit_exact(&r, &model, OutputBits::new(&off, 32))
                .unwrap()
                .passed()
        );
        let bounded = compare(&r, &model, OutputBits::new(&off, 32)).unwrap();
        assert!(bounded.passed() && bounded.exact_mismatches == 1);
        // -0 where the exact result is +0 counts as bit-exact.
        let mut zero = c.layer.clone();
        zero.bias = None;
        zero.q.iter_mut().for_each(|q| *q = 8);
        zero.zeros = None;
        let rz = reference(&c.x, &zero, &rec).unwrap();
        let negzero = vec![0x8000u16; 8 * 32];
        assert!(
            compare_bit_exact(&rz, &model, OutputBits::new(&negzero, 32))
                .unwrap()
                .passed()
        );
    }
}

#[test]
fn bit_exact_mode_follows_a_bias_after_cast_recipe() {
    // fl(fl(y − b) + b) is what an exact accumulator gives when the bias is added after the
    // cast; it differs from fl(y) for some elements, and bit-exact mode must expect it.
    for dtype in ActDtype::ALL {
        let rec = recipe(dtype, false, BiasStage::AfterCast, None);
        let mut c = case(8, 64, 256, 32, dtype, true, true, Data::Exact, 31);
        // Fractional biases make the two roundings differ from one.
        let bias: Vec<u16> = (0..64)
            .map(|j| dtype.from_f64(0.375 + j as f64 * 0.0625))
            .collect();
        c.layer.bias = Some(bias);
        let r = reference(&c.x, &c.layer, &rec).unwrap();
        let model = BoundModel::new(&rec, 256, 1.0).unwrap();
        let y = emulate(&c.x, &c.layer, &rec, 2);
        let rep = compare_bit_exact(&r, &model, OutputBits::new(&y, 64)).unwrap();
        assert!(rep.passed(), "{dtype}: {rep:?}");
        let once = rounded(&r);
        assert!(
            y != once,
            "{dtype}: the test needs elements where the two roundings differ"
        );
    }
}

/// A vendor epilogue that may round once or twice (`BiasStage::Either`): bit-exact mode takes
/// either result and nothing else, and the bound covers both stages term by term.
#[test]
fn bit_exact_mode_accepts_either_rounding_when_the_stage_is_open() {
    for dtype in ActDtype::ALL {
        let either = recipe(dtype, false, BiasStage::Either, None);
        let after = recipe(dtype, false, BiasStage::AfterCast, None);
        let mut c = case(8, 64, 256, 32, dtype, true, true, Data::Exact, 37);
        let bias: Vec<u16> = (0..64)
            .map(|j| dtype.from_f64(0.375 + j as f64 * 0.0625))
            .collect();
        c.layer.bias = Some(bias);
        let r = reference(&c.x, &c.layer, &either).unwrap();
        let model = BoundModel::new(&either, 256, 1.0).unwrap();
        let once = rounded(&r);
        let twice = emulate(&c.x, &c.layer, &after, 2);
        assert!(
            once != twice,
            "{dtype}: the test needs elements where the two differ"
        );
        // Half the rows round once, half twice: one output mixing both is accepted.
        let mixed: Vec<u16> = (0..8 * 64)
            .map(|i| if (i / 64) % 2 == 0 { once[i] } else { twice[i] })
            .collect();
        for y in [&once, &twice, &mixed] {
            let rep = compare_bit_exact(&r, &model, OutputBits::new(y, 64)).unwrap();
            assert!(rep.passed(), "{dtype}: {rep:?}");
        }
        // One ulp off both roundings is still a mismatch.
        let i = (0..8 * 64)
            .find(|&i| once[i] == twice[i] && once[i] & 0x7FFF != 0)
            .unwrap();
        let mut off = once.clone();
        off[i] += 1;
        let rep = compare_bit_exact(&r, &model, OutputBits::new(&off, 64)).unwrap();
        assert_eq!(rep.exact_mismatches, 1, "{dtype}");

        let before = BoundModel::new(
            &recipe(dtype, false, BiasStage::BeforeCast, None),
            4096,
            1.0,
        )
        .unwrap();
        let after = BoundModel::new(&after, 4096, 1.0).unwrap();
        let either = BoundModel::new(&either, 4096, 1.0).unwrap();
        for (y, a, b) in [(1e-3, 10.0, -4.0), (3.0, 5.0, 0.5), (0.0, 0.0, 0.0)] {
            let e = either.element(y, a, a, b);
            assert!(e >= before.element(y, a, a, b) && e >= after.element(y, a, a, b));
        }
    }
}

#[test]
fn subnormal_outputs_need_the_absolute_floor() {
    let dtype = ActDtype::F16;
    let rec = NumericRecipe::fp32_exact_weights(dtype);
    let c = case(8, 64, 64, 32, dtype, true, true, Data::Tiny, 29);
    let r = reference(&c.x, &c.layer, &rec).unwrap();
    let model = BoundModel::new(&rec, 64, 1.0).unwrap();
    let y = emulate(&c.x, &c.layer, &rec, 3);
    let rep = compare(&r, &model, OutputBits::new(&y, 64)).unwrap();
    assert!(rep.passed(), "{rep:?}");
    // Some outputs are subnormal and their rounding error exceeds the relative term alone.
    let min_normal = 2f64.powi(-14);
    let needs_floor = (0..8 * 64).any(|i| {
        let (yv, got) = (r.y[i], dtype.to_f64(y[i]));
        yv.abs() < min_normal
            && (got - yv).abs() > dtype.unit_roundoff() * yv.abs() + 64.0 * U32 * r.a[i]
    });
    assert!(needs_floor);
    assert!(model.element(0.0, 0.0, 0.0, 0.0) >= output_underflow(dtype));
}

#[test]
fn bias_after_cast_pays_for_the_rounding_before_the_bias() {
    for dtype in ActDtype::ALL {
        let before = BoundModel::new(
            &recipe(dtype, false, BiasStage::BeforeCast, None),
            4096,
            1.0,
        )
        .unwrap();
        let after =
            BoundModel::new(&recipe(dtype, false, BiasStage::AfterCast, None), 4096, 1.0).unwrap();
        // y ≈ 0 because the bias cancels a large product: only the after-cast bound sees u·|y − b|.
        let (y, a, b) = (1e-3, 10.0, -4.0);
        let extra = after.element(y, a, a, b) - before.element(y, a, a, b);
        // docs/contract.md §6's numbers, written here rather than read from the crate: u_out = 2⁻¹¹ (fp16)
        // or 2⁻⁸ (bf16), γ_K = K·2⁻²⁴ / (1 − K·2⁻²⁴) with K = 4096 = 2¹².
        let u = match dtype {
            ActDtype::F16 => 1.0 / 2048.0,
            ActDtype::Bf16 => 1.0 / 256.0,
        };
        let gamma_4096 = (1.0 / 4096.0) / (1.0 - 1.0 / 4096.0);
        assert_eq!(before.gamma_k, gamma_4096, "{dtype}");
        assert!(
            extra >= u * (y - b).abs() && extra < 1.01 * u * (y - b).abs() + 1e-9,
            "{dtype}: {extra}"
        );
        // Without bias both recipes round once and agree.
        assert_eq!(after.element(y, a, a, 0.0), before.element(y, a, a, 0.0));
        // The spec's leading terms are there.
        let spec = gamma_4096 * a + u * y.abs();
        let got = before.element(y, a, a, 0.0);
        assert!(
            got >= spec && got < spec * (1.0 + 2.0 * u) + 1e-9,
            "{dtype}: {got} vs {spec}"
        );
    }
}

#[test]
fn bound_parameters_are_validated() {
    let rec = NumericRecipe::fp32_exact_weights(ActDtype::F16);
    assert!(BoundModel::new(&rec, 1024, f64::NAN).is_err());
    assert!(BoundModel::new(&rec, 1024, 0.0).is_err());
    let err = BoundModel::new(&rec, 1 << 24, 1.0).unwrap_err().to_string();
    assert!(err.contains("K"), "{err}");
    let model = BoundModel::new(&rec, 1024, 2.0).unwrap();
    let ones = BoundModel::new(&rec, 1024, 1.0).unwrap();
    assert!(model.element(1.0, 5.0, 5.0, 0.0) > ones.element(1.0, 5.0, 5.0, 0.0));
}

#[test]
fn ratio_buckets_have_documented_edges() {
    let cases = [
        (0.0, "0"),
        (1e-9, "<1/64"),
        (1.0 / 64.0, "<1/16"),
        (0.0624, "<1/16"),
        (0.0625, "<1/4"),
        (0.3, "<1/2"),
        (0.5, "<1"),
        (0.999, "<1"),
        (1.0, ">=1"),
        (7.0, ">=1"),
        (f64::NAN, ">=1"),
        (f64::INFINITY, ">=1"),
        (0.25f64.next_down(), "<1/4"),
    ];
    for (ratio, label) in cases {
        assert_eq!(bucket(ratio), label, "{ratio}");
    }
    assert_eq!(RATIO_BUCKETS.len(), 7);
}

/// A reference of one row with chosen exact values, to put elements exactly where the range
/// edge is (docs/contract.md §6): `a` sets the accumulation part of the bound.
fn edge_reference(dtype: ActDtype, ys: &[f64], a: f64) -> Reference {
    let n = ys.len();
    Reference {
        m: 1,
        n,
        k: 1024,
        dtype,
        y: ys.to_vec(),
        a: vec![a; n],
        a_offset: None,
        bias: vec![0.0; n],
    }
}

/// The overflow thresholds written from the formats' numbers: fp16 65504 + 32/2, bf16
/// (2 − 2⁻⁷)·2¹²⁷ + 2¹²⁰/2.
fn threshold_literal(dtype: ActDtype) -> f64 {
    match dtype {
        ActDtype::F16 => 65520.0,
        ActDtype::Bf16 => 2f64.powi(128) - 2f64.powi(120) + 2f64.powi(119),
    }
}

fn inf_bits(dtype: ActDtype, negative: bool) -> u16 {
    let b = match dtype {
        ActDtype::F16 => 0x7C00,
        ActDtype::Bf16 => 0x7F80,
    };
    if negative { b | 0x8000 } else { b }
}

#[test]
fn overflow_threshold_is_where_round_to_nearest_overflows() {
    for dtype in ActDtype::ALL {
        let t = threshold_literal(dtype);
        assert_eq!(dtype.overflow_threshold(), t, "{dtype}");
        // The tie at the threshold goes to Inf; the largest real below it does not.
        let below = f64::from_bits(t.to_bits() - 1);
        assert_eq!(dtype.from_f64(t), inf_bits(dtype, false), "{dtype}");
        assert_eq!(dtype.from_f64(-t), inf_bits(dtype, true), "{dtype}");
        assert_eq!(
            dtype.to_f64(dtype.from_f64(below)),
            dtype.max_finite(),
            "{dtype}"
        );
        assert_eq!(
            dtype.to_f64(dtype.from_f64(-below)),
            -dtype.max_finite(),
            "{dtype}"
        );
    }
}

/// Elements just below, at and just beyond the point where `[y − bound, y + bound]` reaches
/// the overflow threshold, both dtypes, both signs: ±Inf of that sign is correct exactly when the
/// interval reaches the threshold; the opposite Inf and NaN never are; the finite extreme follows
/// the ordinary bound. Bit-exact mode expects the correctly rounded value, Inf included.
#[test]
fn the_range_edge_admits_inf_exactly_where_the_interval_reaches_the_threshold() {
    for dtype in ActDtype::ALL {
        let t = threshold_literal(dtype);
        let max = dtype.max_finite();
        let rec = NumericRecipe::fp32_exact_weights(dtype);
        let model = BoundModel::new(&rec, 1024, 1.0).unwrap();
        let a = max;
        let b_t = model.element(t, a, a, 0.0);
        // Distances of y below the threshold, in bounds: the interval reaches it for f ≤ 1.
        // Negative f: y beyond the threshold. (The bound shrinks with |y| by u_out, 2⁻⁸ for
        // bf16, so f = 1 ± 1 % sits on either side for both dtypes.)
        let fs = [3.0, 1.01, 0.99, 0.5, 1e-6, 0.0, -1e-6, -0.5, -3.0];
        let mut inside = 0;
        for negative in [false, true] {
            let sign = if negative { -1.0 } else { 1.0 };
            let ys: Vec<f64> = fs.iter().map(|f| sign * (t - f * b_t)).collect();
            let r = edge_reference(dtype, &ys, a);
            let inf = vec![inf_bits(dtype, negative); ys.len()];
            let wrong_inf = vec![inf_bits(dtype, !negative); ys.len()];
            for (j, &y) in ys.iter().enumerate() {
                let b = model.element(y, a, a, 0.0);
                let reaches = y.abs() + b >= t;
                assert_eq!(reaches, fs[j] <= 1.0, "{dtype} f = {}", fs[j]);
                inside += usize::from(reaches);
                let one = |bits: u16| {
                    let mut y_bits = r.y.iter().map(|&v| dtype.from_f64(v)).collect::<Vec<_>>();
                    y_bits[j] = bits;
                    let rep = compare(&r, &model, OutputBits::new(&y_bits, ys.len())).unwrap();
                    let exact =
                        compare_bit_exact(&r, &model, OutputBits::new(&y_bits, ys.len())).unwrap();
                    (rep, exact)
                };
                let (rep, exact) = one(inf[j]);
                assert_eq!(rep.passed(), reaches, "{dtype} y = {y}: {rep:?}");
                assert_eq!(rep.nonfinite, usize::from(!reaches), "{dtype} y = {y}");
                // Bit-exact: Inf is right only where y itself rounds to it (|y| ≥ threshold).
                assert_eq!(exact.passed(), y.abs() >= t, "{dtype} y = {y}: {exact:?}");
                assert!(acceptable(dtype, inf[j], y, b) == reaches);
                assert!(
                    !one(wrong_inf[j]).0.passed(),
                    "{dtype} y = {y}: the other Inf"
                );
                let nan = match dtype {
                    ActDtype::F16 => 0x7E00,
                    ActDtype::Bf16 => 0x7FC0,
                };
                assert!(!one(nan).0.passed(), "{dtype} y = {y}: NaN");
                // The largest finite value of that sign: the ordinary bound decides.
                let (rep, _) = one(dtype.from_f64(sign * max));
                assert_eq!(rep.passed(), (sign * max - y).abs() <= b, "{dtype} y = {y}");
            }
        }
        assert_eq!(inside, 2 * 7, "{dtype}");
        // The ratio reported for an accepted Inf: distance to the threshold over the bound.
        let y = t - 0.5 * b_t;
        let r = infinity_ratio(dtype, false, y, model.element(y, a, a, 0.0));
        approx::assert_abs_diff_eq!(r, 0.5, epsilon = 1e-3);
        assert_eq!(infinity_ratio(dtype, true, -2.0 * t, 1.0), 0.0);
    }
}

/// Two kernels at the range edge: the same Inf agrees, Inf against a finite value agrees only
/// within the tolerance of the threshold, opposite Infs and NaN against a value never.
#[test]
fn two_results_agree_across_the_range_edge() {
    for dtype in ActDtype::ALL {
        let (t, max) = (threshold_literal(dtype), dtype.max_finite());
        let (inf, ninf) = (inf_bits(dtype, false), inf_bits(dtype, true));
        let top = dtype.from_f64(max);
        let slack = t - max; // half an ulp at the top
        assert!(agree_within(dtype, inf, inf, 0.0));
        assert!(agree_within(dtype, ninf, ninf, 0.0));
        assert!(!agree_within(dtype, inf, ninf, max));
        assert!(agree_within(dtype, inf, top, slack) && agree_within(dtype, top, inf, slack));
        assert!(!agree_within(dtype, inf, top, 0.99 * slack));
        assert!(!agree_within(dtype, ninf, top, max));
        let nan = dtype.from_f64(f64::NAN);
        assert!(agree_within(dtype, nan, nan, 0.0));
        assert!(!agree_within(dtype, nan, top, f64::INFINITY));
        assert!(!agree_within(dtype, nan, inf, f64::INFINITY));
    }
}

/// Emulated kernels of every recipe on saturating data: no NaN anywhere (no fp32 Inf − Inf),
/// ±Inf where the true result is beyond the threshold, and the comparison passes them, including
/// elements inside the range edge.
#[test]
fn emulated_kernels_pass_saturating_data() {
    let mut at_edge = 0;
    for dtype in ActDtype::ALL {
        let mut recipes = vec![
            recipe(dtype, false, BiasStage::BeforeCast, None),
            recipe(dtype, true, BiasStage::AfterCast, None),
        ];
        if dtype == ActDtype::Bf16 {
            recipes.push(recipe(dtype, false, BiasStage::BeforeCast, Some(128.0)));
        } else {
            recipes.push(recipe(dtype, false, BiasStage::BeforeCast, Some(1024.0)));
        }
        for (k, group) in [(512, 128), (1024, 1024)] {
            let spec = DataSpec {
                class: DataClass::Saturating,
                m: 8,
                shape: LayerShape::new(32, k, group),
                dtype,
                symmetry: Symmetry::Asym,
                with_bias: true,
            };
            let g = generate(&format!("sat/emulated/{k}"), &spec).unwrap();
            for rec in &recipes {
                let r = reference(&g.x, &g.layer, rec).unwrap();
                let model = BoundModel::new(rec, k, 1.0).unwrap();
                for trial in 0..2 {
                    let y = emulate(&g.x, &g.layer, rec, trial);
                    assert!(
                        y.iter().all(|&b| !dtype.to_f64(b).is_nan()),
                        "{dtype} {rec:?}"
                    );
                    let infs = y.iter().filter(|&&b| dtype.to_f64(b).is_infinite()).count();
                    assert!(infs >= 8 * 8, "{dtype} {rec:?}: {infs} Infs");
                    let rep = compare(&r, &model, OutputBits::new(&y, 32)).unwrap();
                    assert!(rep.passed(), "{dtype} {rec:?} K={k}: {rep:?}");
                }
                let t = threshold_literal(dtype);
                at_edge += (0..8 * 32)
                    .filter(|&i| {
                        let (yv, b) = (r.y[i].abs(), model.element(r.y[i], r.a[i], r.a[i], 0.0));
                        yv < t && yv + b >= t
                    })
                    .count();
            }
        }
    }
    assert!(at_edge > 0, "no element inside the range edge");
}

/// IEEE special values in X: an fp32 kernel's NaN and ±Inf positions are the reference's, and a
/// finite value or the wrong Inf there fails.
#[test]
fn special_values_follow_ieee_rules() {
    for dtype in ActDtype::ALL {
        for rec in [
            recipe(dtype, false, BiasStage::BeforeCast, None),
            recipe(dtype, true, BiasStage::AfterCast, None),
            recipe(dtype, false, BiasStage::BeforeCast, Some(128.0)),
        ] {
            let spec = DataSpec {
                class: DataClass::SpecialValues,
                m: 40,
                shape: LayerShape::new(24, 256, 64),
                dtype,
                symmetry: Symmetry::Asym,
                with_bias: true,
            };
            let g = generate("special/emulated", &spec).unwrap();
            let r = reference_with(&g.x, &g.layer, &rec, NonFiniteX::Ieee).unwrap();
            let model = BoundModel::new(&rec, 256, 1.0).unwrap();
            let y = emulate(&g.x, &g.layer, &rec, 3);
            // The oracle's naive f64 sums (IEEE by construction) classify every element alike.
            let (naive_y, _) = naive(&g.x, &g.layer);
            for (i, (&a, &b)) in r.y.iter().zip(&naive_y).enumerate() {
                if rec.offset_accumulation.is_none() {
                    let same =
                        (a.is_nan() && b.is_nan()) || (a.is_finite() && b.is_finite()) || a == b;
                    assert!(same, "{dtype} {i}: {a} vs {b}");
                } else {
                    assert_eq!(a.is_finite(), b.is_finite(), "{dtype} {i}");
                }
            }
            let nan = r.y.iter().filter(|v| v.is_nan()).count();
            let inf = r.y.iter().filter(|v| v.is_infinite()).count();
            assert!(nan > 0, "{dtype} {rec:?}");
            if rec.offset_accumulation.is_none() {
                assert!(inf > 0, "{dtype} {rec:?}");
            } else {
                assert_eq!(inf, 0, "offset forms end every Inf row in Inf − Inf");
            }
            let rep = compare(&r, &model, OutputBits::new(&y, 24)).unwrap();
            assert!(rep.passed(), "{dtype} {rec:?}: {rep:?}");
            let i_nan = r.y.iter().position(|v| v.is_nan()).unwrap();
            let mut bad = y.clone();
            bad[i_nan] = dtype.from_f64(0.0);
            let rep = compare(&r, &model, OutputBits::new(&bad, 24)).unwrap();
            assert_eq!((rep.passed(), rep.nonfinite), (false, 1), "{dtype}");
            if let Some(i_inf) = r.y.iter().position(|v| v.is_infinite()) {
                let mut bad = y.clone();
                bad[i_inf] ^= 0x8000;
                let rep = compare(&r, &model, OutputBits::new(&bad, 24)).unwrap();
                assert_eq!((rep.passed(), rep.nonfinite), (false, 1), "{dtype}");
            }
        }
    }
}

/// Bit-exact mode rejects a one-ulp difference in either direction, wherever it is: first, last
/// and middle elements, the largest and a negative value, both dtypes, two shapes; the bounded
/// comparison counts the same single mismatch.
#[test]
fn bit_exact_mode_rejects_one_ulp_anywhere() {
    for dtype in ActDtype::ALL {
        for (m, n, k, g, seed) in [(8, 32, 256, 32, 41u64), (5, 40, 512, 128, 43)] {
            let rec = NumericRecipe::fp32_exact_weights(dtype);
            let c = case(m, n, k, g, dtype, true, true, Data::Exact, seed);
            let r = reference(&c.x, &c.layer, &rec).unwrap();
            let model = BoundModel::new(&rec, k, 1.0).unwrap();
            let y = rounded(&r);
            let largest = (0..m * n)
                .max_by(|&i, &j| r.y[i].abs().total_cmp(&r.y[j].abs()))
                .unwrap();
            let negative = (0..m * n).find(|&i| r.y[i] < -1.0).unwrap();
            let mut tried = 0;
            for i in [0, m * n - 1, m * n / 2 + 3, largest, negative] {
                if y[i] & 0x7FFF == 0 {
                    continue; // ±0: one "ulp" would change the sign logic, not the magnitude
                }
                for step in [1i32, -1] {
                    let mut off = y.clone();
                    off[i] = (i32::from(off[i]) + step) as u16;
                    let exact = compare_bit_exact(&r, &model, OutputBits::new(&off, n)).unwrap();
                    assert!(!exact.passed(), "{dtype} element {i} step {step}");
                    assert_eq!(exact.exact_mismatches, 1);
                    let bounded = compare(&r, &model, OutputBits::new(&off, n)).unwrap();
                    assert_eq!(bounded.exact_mismatches, 1);
                    tried += 1;
                }
            }
            assert!(tried >= 8, "{dtype}: {tried}");
        }
    }
}
