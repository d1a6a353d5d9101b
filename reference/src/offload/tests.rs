use super::*;
use crate::ActDtype;
use crate::bound::BoundModel;
use crate::compare::{self, CompareMode, CompareReport, JudgeRequest, OutputBits};
use crate::data::{self, DataClass, DataSpec};
use crate::gemm::{self, InputError, NonFiniteX, Reference, weight_rows_into};
use crate::layer::{Activations, LayerShape, QuantizedLayer, Symmetry};
use crate::recipe::{BiasStage, NumericRecipe};

/// The device's DGEMM on the host: each element summed in order, independently.
fn host_gemm(
    x: &[f64],
    w: &[f64],
    m: usize,
    n: usize,
    k: usize,
) -> Result<(Vec<f64>, Vec<f64>), GemmError> {
    let mut y = vec![0.0; m * n];
    let mut a = vec![0.0; m * n];
    for r in 0..m {
        for c in 0..n {
            let (xr, wr) = (&x[r * k..(r + 1) * k], &w[c * k..(c + 1) * k]);
            // Reverse order: a different summation order than the cross-check's.
            y[r * n + c] = xr.iter().zip(wr).rev().map(|(p, q)| p * q).sum();
            a[r * n + c] = xr.iter().zip(wr).rev().map(|(p, q)| (p * q).abs()).sum();
        }
    }
    Ok((y, a))
}

fn case(m: usize, n: usize, k: usize, with_bias: bool) -> (Activations, QuantizedLayer) {
    let spec = DataSpec {
        class: DataClass::Realistic,
        m,
        shape: LayerShape::new(n, k, 32),
        dtype: ActDtype::Bf16,
        symmetry: Symmetry::Asym,
        with_bias,
    };
    let g = data::generate_seeded(7, 11, &spec).unwrap();
    (g.x, g.layer)
}

fn assert_close(cpu: &Reference, off: &Reference) {
    assert_eq!((cpu.m, cpu.n, cpu.k), (off.m, off.n, off.k));
    assert_eq!(cpu.bias, off.bias);
    for i in 0..cpu.y.len() {
        let tol = cross_check_tolerance(cpu.k, cpu.a[i], cpu.y[i], off.y[i]);
        assert!((cpu.y[i] - off.y[i]).abs() <= tol, "y at {i}");
        assert!((cpu.a[i] - off.a[i]).abs() <= tol, "a at {i}");
    }
    match (&cpu.a_offset, &off.a_offset) {
        (Some(c), Some(o)) => {
            for i in 0..c.len() {
                let tol = cross_check_tolerance(cpu.k, c[i], c[i], o[i]);
                assert!((c[i] - o[i]).abs() <= tol, "a_offset at {i}");
            }
        }
        (None, None) => {}
        _ => panic!("a_offset present on one side only"),
    }
}

/// The offloaded reference of one case (host GEMM, one chunk) against the CPU reference.
fn assert_matches_cpu(x: &Activations, layer: &QuantizedLayer, recipe: &NumericRecipe) {
    let cpu = gemm::reference_with(x, layer, recipe, NonFiniteX::Refuse).unwrap();
    let off = reference_offloaded(
        x,
        layer,
        recipe,
        NonFiniteX::Refuse,
        &mut host_gemm,
        DEFAULT_W_MAX_BYTES,
        3,
    )
    .unwrap();
    assert_close(&cpu, &off);
}

#[test]
fn offloaded_reference_matches_the_cpu_reference() {
    let (x, layer) = case(5, 37, 96, true);
    for recipe in [
        NumericRecipe::fp32_exact_weights(ActDtype::Bf16),
        NumericRecipe {
            offset_accumulation: Some(128.0),
            ..NumericRecipe::fp32_exact_weights(ActDtype::Bf16)
        },
    ] {
        assert_matches_cpu(&x, &layer, &recipe);
    }
}

/// The decoded weights are reused for the same layer only: a second layer of the same shape
/// (other codes, same place in memory or not) gets its own weights, and a layer seen again
/// gives the same reference as the first time.
#[test]
fn the_weight_cache_is_keyed_by_the_layers_content() {
    let (x, layer) = case(3, 24, 64, true);
    let recipe = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
    let run = |l: &QuantizedLayer| {
        reference_offloaded(
            &x,
            l,
            &recipe,
            NonFiniteX::Refuse,
            &mut host_gemm,
            DEFAULT_W_MAX_BYTES,
            3,
        )
        .unwrap()
    };
    let first = run(&layer);
    let mut other = layer.clone();
    other.q.iter_mut().for_each(|q| *q = 15 - *q);
    let changed = run(&other);
    let cpu = gemm::reference_with(&x, &other, &recipe, NonFiniteX::Refuse).unwrap();
    assert_close(&cpu, &changed);
    assert_ne!(first.y, changed.y);
    assert_eq!(run(&layer), first);
    assert_eq!(run(&layer), first, "from the cache");
}

/// The buffers of one layer serve the next, larger or smaller, with or without an offset
/// lane: stale values never reach a reference.
#[test]
fn reused_buffers_give_each_layer_its_own_reference() {
    let exact = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
    let offset = NumericRecipe {
        offset_accumulation: Some(128.0),
        ..exact
    };
    for (m, n, k, recipe) in [
        (6, 40, 128, offset),
        (2, 9, 64, exact),
        (3, 24, 96, offset),
        (7, 48, 160, exact),
    ] {
        let (x, layer) = case(m, n, k, true);
        assert_matches_cpu(&x, &layer, &recipe);
    }
}

#[test]
fn chunks_along_n_within_w_max_bytes() {
    let (x, layer) = case(3, 41, 64, true);
    let recipe = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
    let whole = reference_offloaded(
        &x,
        &layer,
        &recipe,
        NonFiniteX::Refuse,
        &mut host_gemm,
        DEFAULT_W_MAX_BYTES,
        3,
    )
    .unwrap();
    // 5 rows of W per call: 9 calls, the last one of a single row.
    let mut calls = Vec::new();
    let mut counting = |x: &[f64], w: &[f64], m: usize, n: usize, k: usize| {
        assert!(w.len() * 8 <= 5 * 64 * 8);
        calls.push(n);
        host_gemm(x, w, m, n, k)
    };
    let chunked = reference_offloaded(
        &x,
        &layer,
        &recipe,
        NonFiniteX::Refuse,
        &mut counting,
        5 * 64 * 8,
        3,
    )
    .unwrap();
    assert_eq!(calls, [5, 5, 5, 5, 5, 5, 5, 5, 1]);
    assert_eq!(whole, chunked);
}

#[test]
fn a_wrong_product_is_caught_by_the_cross_check() {
    let (x, layer) = case(4, 16, 64, false);
    let recipe = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
    let seed = 9;
    // Every sampled position is planted in turn; each must be named.
    for &(pm, pn) in sample_positions(4, 16, CROSS_CHECK_SAMPLES, seed)
        .iter()
        .take(4)
    {
        let mut planted = |x: &[f64], w: &[f64], m: usize, n: usize, k: usize| {
            let (mut y, a) = host_gemm(x, w, m, n, k)?;
            y[pm * n + pn] += 1e-9 * (1.0 + a[pm * n + pn]);
            Ok((y, a))
        };
        let err = reference_offloaded(
            &x,
            &layer,
            &recipe,
            NonFiniteX::Refuse,
            &mut planted,
            DEFAULT_W_MAX_BYTES,
            seed,
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                OffloadError::Disagrees { m, n, lane: Lane::Signed, .. } if (m, n) == (pm, pn)
            ),
            "{err}"
        );
    }
    // A GEMM that gives back the wrong number of values is its own error.
    let mut short = |x: &[f64], w: &[f64], m: usize, n: usize, k: usize| {
        let (mut y, a) = host_gemm(x, w, m, n, k)?;
        y.pop();
        Ok((y, a))
    };
    let err = reference_offloaded(
        &x,
        &layer,
        &recipe,
        NonFiniteX::Refuse,
        &mut short,
        DEFAULT_W_MAX_BYTES,
        seed,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            OffloadError::Length {
                expected: 64,
                got: 63,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn special_rows_are_patched_as_on_the_cpu() {
    let (mut x, layer) = case(3, 8, 32, true);
    x.data[x.row_stride + 5] = ActDtype::Bf16.from_f64(f64::INFINITY);
    let recipe = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
    let cpu = gemm::reference_with(&x, &layer, &recipe, NonFiniteX::Ieee).unwrap();
    let off = reference_offloaded(
        &x,
        &layer,
        &recipe,
        NonFiniteX::Ieee,
        &mut host_gemm,
        DEFAULT_W_MAX_BYTES,
        1,
    )
    .unwrap();
    for c in 0..8 {
        let (p, q) = (cpu.y_at(1, c), off.y_at(1, c));
        assert!(
            p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()),
            "col {c}"
        );
    }
    assert!(!off.y_at(1, 0).is_finite());
}

/// Host lanes standing in for a device's: the products of `host_gemm` (optionally off by
/// a little in every `y`), judged by the host twin; `judged` counts the reports it gave and
/// `declined` the outputs it left to the host.
struct HostLanes {
    lanes: RawLanes,
    m: usize,
    n: usize,
    judged: std::rc::Rc<std::cell::Cell<usize>>,
    declined: std::rc::Rc<std::cell::Cell<usize>>,
}

impl HeldProducts for HostLanes {
    fn gather(&self, index: &[usize]) -> Result<Vec<[f64; 3]>, GemmError> {
        let (y, a, o) = &self.lanes;
        Ok(index
            .iter()
            .map(|&i| [y[i], a[i], o.as_ref().map_or(0.0, |o| o[i])])
            .collect())
    }

    fn download(&self) -> Result<RawLanes, GemmError> {
        Ok(self.lanes.clone())
    }

    fn overwrite_y_rows(&mut self, rows: &[(usize, Vec<f64>)]) -> Result<(), GemmError> {
        for (m, values) in rows {
            self.lanes.0[m * self.n..(m + 1) * self.n].copy_from_slice(values);
        }
        Ok(())
    }

    fn judge(&self, request: &JudgeRequest<'_>) -> Result<Option<CompareReport>, GemmError> {
        let (y, a, o) = &self.lanes;
        let report = compare::judge_plain(request, self.m, self.n, y, a, o.as_deref());
        let counter = if report.is_some() {
            &self.judged
        } else {
            &self.declined
        };
        counter.set(counter.get() + 1);
        Ok(report)
    }
}

#[derive(Default)]
struct HostHeldGemm {
    wrong: bool,
    judged: std::rc::Rc<std::cell::Cell<usize>>,
    declined: std::rc::Rc<std::cell::Cell<usize>>,
}

impl HeldGemm<'static> for HostHeldGemm {
    fn products(
        &mut self,
        x: &ActivationOperand<'_>,
        weights: &WeightOperand<'_>,
        _w_key: Option<u64>,
    ) -> Result<Option<Box<dyn HeldProducts>>, GemmError> {
        let (m, n, k) = (x.m, weights.n, weights.k);
        let x = &x.to_f64();
        let (w, _, w_offset) = weights.decode();
        let w_offset = w_offset.as_deref();
        let (mut y, a) = host_gemm(x, &w, m, n, k)?;
        if self.wrong {
            y.iter_mut()
                .zip(&a)
                .for_each(|(v, t)| *v += 1e-6 * (1.0 + t));
        }
        let xa: Vec<f64> = x.iter().map(|v| v.abs()).collect();
        let offset = w_offset.map(|o| host_gemm(&xa, o, m, n, k).map(|p| p.0));
        Ok(Some(Box::new(HostLanes {
            lanes: (y, a, offset.transpose()?),
            m,
            n,
            judged: self.judged.clone(),
            declined: self.declined.clone(),
        })))
    }
}

/// The held reference is the host one (same products, brought back with the bias
/// added), and its judge's report is the host comparison's for every kind of output: every
/// element plain (judged next to the lanes), and with a poisoned, a NaN or an infinite
/// element (left to the host, whose rules for them are the only ones). Both dtypes, every
/// bias stage, with and without bias and offset lane, bound and bit-exact mode.
#[test]
fn a_held_reference_judges_as_the_host_reference() {
    let mut g = HostHeldGemm::default();
    for dtype in [ActDtype::F16, ActDtype::Bf16] {
        for with_bias in [false, true] {
            let spec = DataSpec {
                class: DataClass::Realistic,
                m: 6,
                shape: LayerShape::new(40, 96, 32),
                dtype,
                symmetry: Symmetry::Asym,
                with_bias,
            };
            let generated = data::generate_seeded(5, 13, &spec).unwrap();
            let (x, layer) = (generated.x, generated.layer);
            for (bias, offset) in [
                (BiasStage::BeforeCast, None),
                (BiasStage::AfterCast, None),
                (BiasStage::Either, Some(128.0)),
            ] {
                let recipe = NumericRecipe {
                    bias,
                    offset_accumulation: offset,
                    ..NumericRecipe::fp32_exact_weights(dtype)
                };
                let host = reference_offloaded(
                    &x,
                    &layer,
                    &recipe,
                    NonFiniteX::Refuse,
                    &mut host_gemm,
                    DEFAULT_W_MAX_BYTES,
                    3,
                )
                .unwrap();
                let held = reference_held(
                    &x,
                    &layer,
                    &LayerWeights::new(&layer).unwrap(),
                    &recipe,
                    NonFiniteX::Refuse,
                    &mut g,
                    DEFAULT_W_MAX_BYTES,
                    3,
                )
                .unwrap()
                .expect("host lanes are always kept");
                assert_eq!(held.to_host().unwrap(), host);
                let model = BoundModel::new(&recipe, layer.shape.k, 1.0).unwrap();
                let rounded: Vec<u16> = (0..host.m * host.n)
                    .map(|i| host.rounded_bits(i / host.n, i % host.n))
                    .collect();
                // Off by a growing number of ulps: every bucket, some over the bound.
                let off: Vec<u16> = rounded
                    .iter()
                    .enumerate()
                    .map(|(i, &b)| b.wrapping_add((i % 7) as u16 * (i % 3) as u16))
                    .collect();
                let with = |i: usize, v: u16| {
                    let mut o = off.clone();
                    o[i] = v;
                    o
                };
                let outputs = [
                    (rounded.clone(), true),
                    (off.clone(), true),
                    (with(17, dtype.poison_bits()), false),
                    (with(3, dtype.from_f64(f64::NAN)), false),
                    (with(40, dtype.from_f64(f64::INFINITY)), false),
                ];
                for (out, plain) in outputs {
                    let bits = OutputBits::new(&out, host.n);
                    for mode in [CompareMode::Bound, CompareMode::BitExact] {
                        let (judged, declined) = (g.judged.get(), g.declined.get());
                        let expected = match mode {
                            CompareMode::Bound => compare::compare(&host, &model, bits),
                            CompareMode::BitExact => {
                                compare::compare_bit_exact(&host, &model, bits)
                            }
                        }
                        .unwrap();
                        let got = held.compare(&model, bits, mode).unwrap();
                        assert_eq!(got, expected, "{dtype:?} {bias:?} {offset:?} {mode:?}");
                        assert_eq!(g.judged.get(), judged + usize::from(plain));
                        assert_eq!(g.declined.get(), declined + usize::from(!plain));
                    }
                }
            }
        }
    }
}

/// Products that are off are caught by the cross-check on the gathered elements, a fault
/// of the reference.
#[test]
fn a_wrong_held_product_is_caught_by_the_cross_check() {
    let (x, layer) = case(5, 37, 96, true);
    let recipe = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
    let mut g = HostHeldGemm {
        wrong: true,
        ..HostHeldGemm::default()
    };
    let got = reference_held(
        &x,
        &layer,
        &LayerWeights::new(&layer).unwrap(),
        &recipe,
        NonFiniteX::Refuse,
        &mut g,
        DEFAULT_W_MAX_BYTES,
        3,
    );
    assert!(
        matches!(got, Err(OffloadError::Disagrees { .. })),
        "{:?}",
        got.map(|r| r.is_some())
    );
}

/// One layer's weights serve every batch size: the same operand as decoding per case, a key
/// that names the content and the offset lane, the layer's own checks done once, and weights
/// of another layer refused by shape or caught by the cross-check.
#[test]
fn layer_weights_are_the_per_case_operand_formed_once() {
    let (x, layer) = case(5, 37, 96, true);
    let weights = LayerWeights::new(&layer).unwrap();
    for offset in [None, Some(128.0)] {
        let once = weights.operand(&layer, offset);
        let per_case = WeightOperand::new(&layer, offset);
        assert_eq!(once.scales, per_case.scales);
        assert_eq!(once.zeros, per_case.zeros);
        assert_eq!(
            (once.n, once.k, once.group),
            (per_case.n, per_case.k, per_case.group)
        );
        assert_eq!(once.offset, per_case.offset);
    }
    assert_ne!(weights.key(None), weights.key(Some(128.0)));
    assert_eq!(
        weights.key(None),
        LayerWeights::new(&layer).unwrap().key(None)
    );
    let mut other = layer.clone();
    other.q[0] ^= 1;
    let stranger = LayerWeights::new(&other).unwrap();
    assert_ne!(stranger.key(None), weights.key(None));
    let mut bad = layer.clone();
    bad.q[9] = 16;
    assert!(matches!(
        LayerWeights::new(&bad),
        Err(InputError::CodeOutOfRange { index: 9, .. })
    ));

    let recipe = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
    let mut g = HostHeldGemm::default();
    let held = |w: &LayerWeights, g: &mut HostHeldGemm| {
        reference_held(
            &x,
            &layer,
            w,
            &recipe,
            NonFiniteX::Refuse,
            g,
            DEFAULT_W_MAX_BYTES,
            3,
        )
        .map(|r| r.is_some())
    };
    assert!(matches!(held(&weights, &mut g), Ok(true)));
    // Another layer of the same shape: its products disagree with this layer's columns.
    let spec = DataSpec {
        class: DataClass::Realistic,
        m: 5,
        shape: layer.shape,
        dtype: layer.dtype,
        symmetry: Symmetry::Asym,
        with_bias: true,
    };
    let unrelated = data::generate_seeded(8, 12, &spec).unwrap().layer;
    let unrelated = LayerWeights::new(&unrelated).unwrap();
    assert!(matches!(
        held(&unrelated, &mut g),
        Err(OffloadError::Disagrees { .. })
    ));
    let (_, narrow) = case(5, 36, 96, true);
    assert!(matches!(
        held(&LayerWeights::new(&narrow).unwrap(), &mut g),
        Err(OffloadError::Input(_))
    ));
}

/// Where the host must form the reference there is no held one: W over `w_max_bytes`
/// (chunks). The same layer and X within it get one, X with NaN/±Inf rows too: the special
/// rows' IEEE values overwrite the held `y` rows, as the CPU reference patches them.
#[test]
fn the_host_forms_only_what_a_held_reference_cannot_hold() {
    let (x, layer) = case(3, 24, 64, false);
    let mut g = HostHeldGemm::default();
    let weights = LayerWeights::new(&layer).unwrap();
    let mut held = |x: &Activations, recipe: &NumericRecipe, w_max_bytes: usize| {
        reference_held(
            x,
            &layer,
            &weights,
            recipe,
            NonFiniteX::Ieee,
            &mut g,
            w_max_bytes,
            3,
        )
        .unwrap()
    };
    let plain = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
    assert!(held(&x, &plain, DEFAULT_W_MAX_BYTES).is_some());
    assert!(held(&x, &plain, 8 * 64 * 10).is_none(), "chunked W");
    let mut special = x.clone();
    let row = special.row_stride;
    special.data[row + 5] = ActDtype::Bf16.from_f64(f64::INFINITY);
    special.data[2 * row + 7] = ActDtype::Bf16.from_f64(f64::NAN);
    let offset = NumericRecipe {
        offset_accumulation: Some(128.0),
        ..plain
    };
    for recipe in [&plain, &offset] {
        let cpu = gemm::reference_with(&special, &layer, recipe, NonFiniteX::Ieee).unwrap();
        let on = held(&special, recipe, DEFAULT_W_MAX_BYTES).expect("held with special rows");
        let host = on.to_host().unwrap();
        for (i, (p, q)) in cpu.y.iter().zip(&host.y).enumerate() {
            let same = p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan());
            assert!(same, "element {i}: cpu {p}, held {q}");
        }
        assert_eq!(cpu.a, host.a);
        // Without an offset lane an Inf meets nonzero weights (±Inf or NaN); with one, every
        // Inf ends in Inf − Inf.
        let n = layer.shape.n;
        let inf_row = &host.y[n..2 * n];
        match recipe.offset_accumulation {
            None => assert!(inf_row.iter().any(|v| v.is_infinite()), "the Inf row"),
            Some(_) => assert!(inf_row.iter().all(|v| v.is_nan()), "the Inf row, offset"),
        }
        assert!(
            host.y[2 * n..3 * n].iter().all(|v| v.is_nan()),
            "the NaN row"
        );
    }
}

/// The operand a device decodes gives the CPU reference's exact weights, magnitudes and
/// offset rows, bit for bit (both asymmetric and symmetric layers).
#[test]
fn the_weight_operand_decodes_as_the_reference_does() {
    for symmetry in [Symmetry::Asym, Symmetry::Sym] {
        let spec = DataSpec {
            class: DataClass::Realistic,
            m: 1,
            shape: LayerShape::new(24, 96, 32),
            dtype: ActDtype::F16,
            symmetry,
            with_bias: false,
        };
        let layer = data::generate_seeded(1, 2, &spec).unwrap().layer;
        let (n, k) = (layer.shape.n, layer.shape.k);
        let (w, wa, off) = WeightOperand::new(&layer, Some(128.0)).decode();
        let (mut hw, mut hwa) = (Vec::new(), Vec::new());
        weight_rows_into(&layer, Some(128.0), 0..n, &mut hw, &mut hwa);
        assert_eq!(w, hw);
        assert_eq!(wa, hwa[..n * k]);
        assert_eq!(off.expect("an offset lane"), hwa[n * k..]);
        assert_eq!(WeightOperand::new(&layer, None).decode().2, None);
    }
}

/// X goes to the device as its bits with the rows packed (a padded row stride dropped),
/// and widens to the values the host reads.
#[test]
fn the_activation_operand_packs_the_rows() {
    let x = Activations {
        m: 3,
        k: 4,
        row_stride: 6,
        dtype: ActDtype::Bf16,
        data: (0..18u16).map(|i| 0x3F80 + i).collect(),
    };
    let op = ActivationOperand::new(&x);
    assert_eq!((op.m, op.k, op.bits.len()), (3, 4, 12));
    let want: Vec<f64> = (0..12).map(|i| x.get(i / 4, i % 4)).collect();
    assert_eq!(op.to_f64(), want);
    let packed = Activations {
        row_stride: 4,
        data: op.bits.to_vec(),
        ..x.clone()
    };
    assert!(matches!(
        ActivationOperand::new(&packed).bits,
        std::borrow::Cow::Borrowed(_)
    ));
}
