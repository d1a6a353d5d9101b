use super::buckets::{SMALLEST_CLASSIFIED_BOUND, ratio_class};
use super::judge::compare_mode;
use super::*;
use crate::bound::BoundModel;
use crate::dtype::ActDtype;
use crate::gemm::{InputError, NonFiniteX, Reference, WeightRounding, reference_with_rounding};
use crate::layer::{Activations, QuantizedLayer};
use crate::recipe::{BiasStage, NumericRecipe};

use rand::{Rng, SeedableRng};

/// The bucket and the over-bound test without the quotient agree with the quotient's, at
/// the edges exactly, a few ulps either side, and at random.
#[test]
fn the_ratio_class_is_the_bucket_of_the_rounded_quotient() {
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let edges = [1.0 / 64.0, 1.0 / 16.0, 0.25, 0.5, 1.0];
    for _ in 0..200_000 {
        let bound = r.random_range(0.5..2.0) * 2f64.powi(r.random_range(-60..40));
        let mut errs = vec![0.0, bound * r.random_range(0.0..1.5), f64::MIN_POSITIVE];
        for e in edges {
            let at = e * bound;
            errs.extend([at, at.next_up(), at.next_down(), at * (1.0 - 1e-13)]);
            errs.push(at.next_down().next_down());
            errs.push(at.next_up().next_up());
        }
        for err in errs {
            let q = err / bound;
            assert_eq!(
                ratio_class(err, bound),
                bucket_index(q),
                "{err:e} / {bound:e}"
            );
            assert_eq!(err > bound, q > 1.0, "{err:e} / {bound:e}");
        }
    }
    // The smallest bound classified, with every mantissa at the edges.
    for bits in 0..4096u64 {
        let bound = f64::from_bits(SMALLEST_CLASSIFIED_BOUND.to_bits() + (bits << 40));
        for e in edges {
            let at = e * bound;
            for err in [at, at.next_up(), at.next_down()] {
                assert_eq!(ratio_class(err, bound), bucket_index(err / bound));
            }
        }
    }
}

/// The report of a row judged in blocks is the report of `record` element by element: every
/// kind of element (poison, NaN, ±Inf, ±0, one ulp off, far off, a NaN or Inf reference),
/// with and without bias, for every bias stage and an offset lane, in both dtypes.
#[test]
fn rows_judged_in_blocks_report_what_record_reports_element_by_element() {
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(12);
    let (m, n, k) = (3, 700, 256);
    for dtype in ActDtype::ALL {
        for stage in [
            BiasStage::BeforeCast,
            BiasStage::AfterCast,
            BiasStage::Either,
        ] {
            for offset in [None, Some(128.0)] {
                let recipe = NumericRecipe {
                    bias: stage,
                    offset_accumulation: offset,
                    ..NumericRecipe::fp32_exact_weights(dtype)
                };
                let model = BoundModel::new(&recipe, k, 2.0).unwrap();
                let y: Vec<f64> = (0..m * n)
                    .map(|i| match i % 97 {
                        0 => f64::NAN,
                        1 => f64::INFINITY,
                        2 => -f64::INFINITY,
                        3 => 0.0,
                        _ => r.random_range(-40.0..40.0) * 2f64.powi(r.random_range(-12..6)),
                    })
                    .collect();
                let a: Vec<f64> = y
                    .iter()
                    .map(|v| v.abs() * r.random_range(1.0..9.0))
                    .collect();
                let a_offset = offset.map(|_| a.iter().map(|v| 3.0 * v).collect::<Vec<_>>());
                let bias: Vec<f64> = (0..n)
                    .map(|j| {
                        if j % 3 == 0 {
                            0.0
                        } else {
                            r.random_range(-1.0..1.0)
                        }
                    })
                    .collect();
                let bits: Vec<u16> = y
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| {
                        let near = dtype.from_f64(v);
                        match (i * 7 + 3) % 13 {
                            0 => dtype.poison_bits(),
                            1 => dtype.from_f64(f64::NAN),
                            2 => dtype.from_f64(f64::INFINITY),
                            3 => 0x8000,
                            4 => near.wrapping_add(1),
                            5 => near.wrapping_sub(1),
                            6 => r.random(),
                            7 => dtype.from_f64(v * 1.5),
                            _ => near,
                        }
                    })
                    .collect();
                let reference = Reference {
                    m,
                    n,
                    k,
                    dtype,
                    y,
                    a,
                    a_offset,
                    bias,
                };
                let got = compare_mode(
                    &reference,
                    &model,
                    OutputBits::new(&bits, n),
                    CompareMode::Bound,
                )
                .unwrap();
                let mut want = CompareReport::new(CompareMode::Bound);
                for i in 0..m * n {
                    let (row, j) = (i / n, i % n);
                    let acc = reference.a_offset.as_ref().map_or(reference.a[i], |o| o[i]);
                    want.record(
                        (row, j),
                        bits[i],
                        dtype,
                        reference.y[i],
                        reference.a[i],
                        acc,
                        reference.bias[j],
                        &model,
                    );
                }
                let what = format!("{dtype} {stage:?} offset {offset:?}");
                assert_eq!(got, want, "{what}");
                assert!(want.nonfinite > 0 && want.poison_left > 0, "{what}");
                assert!(want.over_bound > 0 && want.exact_mismatches > 0, "{what}");
                assert!(
                    want.buckets[1..6].iter().all(|&c| c > 0),
                    "{what}: {want:?}"
                );
            }
        }
    }
}
use crate::data::{DataClass, DataSpec, generate_seeded};
use crate::gemm::reference;
use crate::layer::{LayerShape, Symmetry};

/// bf16, K = 64, two groups of 32: group 0 has w = 15·s₀ with s₀ = 1 + 3/128, exactly
/// 15.3515625, which bf16 rounds to 15.375; group 1 has w = s₁ = 15.375 (exact) against
/// x = −1. The exact y is 32·(15.3515625 − 15.375) = −0.75; on the rounded weights it is 0.
fn rounding_sensitive() -> (Activations, QuantizedLayer) {
    let d = ActDtype::Bf16;
    let layer = QuantizedLayer {
        shape: LayerShape::new(1, 64, 32),
        dtype: d,
        q: [vec![15; 32], vec![1; 32]].concat(),
        zeros: Some(vec![0, 0]),
        scales: vec![d.from_f64(1.0 + 3.0 / 128.0), d.from_f64(15.375)],
        bias: None,
    };
    let x = Activations {
        m: 1,
        k: 64,
        row_stride: 64,
        dtype: d,
        data: [vec![d.from_f64(1.0); 32], vec![d.from_f64(-1.0); 32]].concat(),
    };
    (x, layer)
}

/// The switch matters: the two references differ by far more than the exact-weight bound
/// allows, so a library's correct output fails the kernels' judge and a kernel's correct
/// output fails the library's.
#[test]
fn rounded_and_exact_references_differ_beyond_the_exact_bound() {
    let (x, layer) = rounding_sensitive();
    let d = layer.dtype;
    let exact_recipe = NumericRecipe::fp32_exact_weights(d);
    let exact = reference(&x, &layer, &exact_recipe).unwrap();
    let lib_recipe = NumericRecipe::dequantize_then_matmul(d);
    let rounded = reference_with_rounding(
        &x,
        &layer,
        &lib_recipe,
        NonFiniteX::Refuse,
        WeightRounding::ToActivationDtype,
    )
    .unwrap();
    assert_eq!(exact.y, vec![-0.75]);
    assert_eq!(rounded.y, vec![0.0]);
    assert_eq!(rounded.a, vec![64.0 * 15.375]);
    let exact_model = BoundModel::new(&exact_recipe, 64, 1.0).unwrap();
    let exact_bound = exact_model.element(exact.y[0], exact.a[0], exact.a[0], 0.0);
    assert!(
        (exact.y[0] - rounded.y[0]).abs() > 50.0 * exact_bound,
        "{exact_bound}"
    );
    // `Exact` through the switch is the plain reference.
    let same = reference_with_rounding(
        &x,
        &layer,
        &exact_recipe,
        NonFiniteX::Refuse,
        WeightRounding::Exact,
    )
    .unwrap();
    assert_eq!(same, exact);

    let library_out = [d.from_f64(0.0)];
    let kernel_out = [d.from_f64(-0.75)];
    let lib = compare_library_output(&x, &layer, OutputBits::new(&library_out, 1), 1.0).unwrap();
    assert!(lib.passed(), "{lib:?}");
    let as_kernel = compare(&exact, &exact_model, OutputBits::new(&library_out, 1)).unwrap();
    assert!(!as_kernel.passed() && as_kernel.over_bound == 1);
    let kernel = compare(&exact, &exact_model, OutputBits::new(&kernel_out, 1)).unwrap();
    assert!(kernel.passed());
    let kernel_as_lib =
        compare_library_output(&x, &layer, OutputBits::new(&kernel_out, 1), 1.0).unwrap();
    assert!(!kernel_as_lib.passed() && kernel_as_lib.over_bound == 1);
}

/// What the library does, simulated: weights rounded to the dtype, fp32 products and sums
/// in k order, the bias added in fp32 before the cast or in the dtype after it. Both pass;
/// an element a few ulps off does not.
#[test]
fn a_simulated_library_output_passes_either_bias_stage() {
    for dtype in ActDtype::ALL {
        for symmetry in [Symmetry::Sym, Symmetry::Asym] {
            let spec = DataSpec {
                class: DataClass::Realistic,
                m: 4,
                shape: LayerShape::new(24, 256, 64),
                dtype,
                symmetry,
                with_bias: true,
            };
            let g = generate_seeded(11, 12, &spec).unwrap();
            let (x, layer) = (&g.x, &g.layer);
            let w = layer.dequantize_rounded().unwrap();
            let (n, k) = (24, 256);
            let mut before = vec![0u16; 4 * n];
            let mut after = vec![0u16; 4 * n];
            for m in 0..4 {
                for j in 0..n {
                    let mut acc = 0f32;
                    for kk in 0..k {
                        acc += dtype.to_f32(x.data[m * k + kk]) * dtype.to_f32(w[j * k + kk]);
                    }
                    let b = layer.bias_value(j);
                    before[m * n + j] = dtype.from_f32(acc + b as f32);
                    let t = dtype.to_f64(dtype.from_f32(acc));
                    after[m * n + j] = dtype.from_f64(t + b);
                }
            }
            for out in [&before, &after] {
                let r = compare_library_output(x, layer, OutputBits::new(out, n), 1.0).unwrap();
                assert!(r.passed(), "{dtype} {symmetry:?}: {r:?}");
                assert_eq!(r.checked, 4 * n);
            }
            let mut off = before.clone();
            off[5] = off[5].wrapping_add(if off[5] & 0x7FFF == 0 { 64 } else { 8 });
            let r = compare_library_output(x, layer, OutputBits::new(&off, n), 1.0).unwrap();
            assert!(!r.passed() && r.worst_at == Some((0, 5)), "{r:?}");
        }
    }
}

#[test]
fn bad_inputs_to_the_library_judge_are_typed_errors() {
    let (x, mut layer) = rounding_sensitive();
    let out = [0u16];
    assert!(matches!(
        compare_library_output(&x, &layer, OutputBits::new(&out, 1), 0.0),
        Err(InputError::Mismatch {
            what: "c_target",
            ..
        })
    ));
    // A rounded weight past bf16's range.
    layer.scales[1] = ActDtype::Bf16.from_f64(2f64.powi(127) * 1.5);
    layer.q[63] = 15;
    assert!(matches!(
        compare_library_output(&x, &layer, OutputBits::new(&out, 1), 1.0),
        Err(InputError::NonFinite { index: 63, .. })
    ));
    // Offset recipes form their weights differently: not with rounded weights.
    let (x, layer) = rounding_sensitive();
    let recipe = NumericRecipe {
        offset_accumulation: Some(128.0),
        ..NumericRecipe::fp32_exact_weights(ActDtype::Bf16)
    };
    assert!(
        reference_with_rounding(
            &x,
            &layer,
            &recipe,
            NonFiniteX::Refuse,
            WeightRounding::ToActivationDtype
        )
        .is_err()
    );
}
