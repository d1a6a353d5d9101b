//! The bound is sound for emulated fp32 kernels, tight enough to see a one-code corruption, and
//! the comparison classifies poison, NaN/Inf and bit-exact agreement.
mod oracle;

use oracle::{Data, case, emulate, recipe, rounded};
use w4a16_reference::bound::{BoundModel, U32, output_underflow};
use w4a16_reference::compare::{
    CompareMode, OutputBits, RATIO_BUCKETS, bucket, compare, compare_bit_exact,
};
use w4a16_reference::gemm::reference;
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
        // SPEC §6's numbers, written here rather than read from the crate: u_out = 2⁻¹¹ (fp16)
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
    ];
    for (ratio, label) in cases {
        assert_eq!(bucket(ratio), label, "{ratio}");
    }
    assert_eq!(RATIO_BUCKETS.len(), 7);
}
