//! The MoE layer, its stacked layout, the grouped reference and its comparison: emulated kernels
//! pass with a bound they visibly use, zero rows must be zero, and with distinguishable experts a
//! slot sent to the wrong expert fails and is named as such.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use w4a16_reference::bound::BoundModel;
use w4a16_reference::compare::{CompareMode, correctly_rounded};
use w4a16_reference::data::{DataClass, generate_activations};
use w4a16_reference::formats::layout::{LayoutError, PaddingRule, RowPadding, WEIGHT_PAD_BYTE};
use w4a16_reference::formats::resident::{UnpackedZeroPoints, ZeroPoints};
use w4a16_reference::gemm::{InputError, NonFiniteX};
use w4a16_reference::layer::{Activations, LayerShape, Symmetry};
use w4a16_reference::moe::{
    ExpertMap, GroupedError, GroupedReference, MapKind, MoeLayer, MoeLayerError, MoeSpec, Routing,
    RoutingKind, RowKind, WrongExpert, compare_grouped, compare_grouped_mode, grouped_reference,
    grouped_reference_with, route,
};
use w4a16_reference::{ActDtype, BiasStage, NumericRecipe};

/// The `fused` recipe the moe kernel shares: weights rounded to the activation dtype, fp32
/// accumulation, one cast.
fn recipe(dtype: ActDtype) -> NumericRecipe {
    NumericRecipe {
        rounds_dequantized_weight: true,
        offset_accumulation: None,
        bias: BiasStage::AfterCast,
        output: dtype,
        single_rounding: false,
        pre_rounded_bias: false,
    }
}

fn spec(class: DataClass, dtype: ActDtype, symmetry: Symmetry, experts: usize) -> MoeSpec {
    MoeSpec {
        class,
        shape: LayerShape::new(64, 256, 64),
        dtype,
        symmetry,
        experts,
        distinguishable: true,
    }
}

/// Everything one MoE case needs.
struct Case {
    x: Activations,
    layer: MoeLayer,
    routing: Routing,
    map: Option<ExpertMap>,
}

fn case(
    s: &MoeSpec,
    kind: RoutingKind,
    tokens: usize,
    experts: usize,
    top_k: usize,
    map: Option<MapKind>,
    seed: u64,
) -> Case {
    let map = map.map(|m| ExpertMap::new(m, experts).unwrap());
    let locals = map.as_ref().map_or(experts, ExpertMap::local_experts);
    let layer = MoeLayer::generate(
        seed,
        &MoeSpec {
            experts: locals,
            ..*s
        },
    )
    .unwrap();
    Case {
        x: generate_activations(seed ^ 1, &s.data_spec(tokens)).unwrap(),
        layer,
        routing: route(kind, seed ^ 2, tokens, experts, top_k).unwrap(),
        map,
    }
}

impl Case {
    fn reference(&self, mul_routed: bool) -> GroupedReference<'_> {
        grouped_reference(
            &self.x,
            &self.layer,
            &self.routing,
            self.map.as_ref(),
            mul_routed,
            &recipe(self.layer.dtype),
        )
        .unwrap()
    }

    fn local(&self, global: usize) -> Option<usize> {
        self.map.as_ref().map_or(Some(global), |m| m.local(global))
    }
}

/// A kernel emulated on the CPU from the stacked layout: per element, fp32 products of x and
/// the rounded weight summed in a random order, then (routed) one fp32 multiply, then the cast.
/// Zero rows are +0. Non-finite x follows IEEE arithmetic.
fn emulate(c: &Case, mul_routed: bool, seed: u64) -> Vec<u16> {
    let stacked = c.layer.stack(RowPadding::NONE).unwrap();
    let experts: Vec<_> = (0..stacked.experts)
        .map(|e| stacked.expert_logical(e))
        .collect();
    let (n, k, dtype) = (c.layer.shape.n, c.layer.shape.k, c.layer.dtype);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..k).collect();
    let mut out = vec![0u16; c.routing.slots() * n];
    for slot in 0..c.routing.slots() {
        let Some(local) = c.local(c.routing.ids[slot] as usize) else {
            continue;
        };
        let (t, w) = (slot / c.routing.top_k, &experts[local]);
        for j in 0..n {
            order.shuffle(&mut rng);
            let mut acc = 0f32;
            for &kk in &order {
                let wr = dtype.to_f32(dtype.from_f64(w.weight(j, kk)));
                acc += c.x.get(t, kk) as f32 * wr;
            }
            let v = if mul_routed {
                acc * c.routing.weights[slot]
            } else {
                acc
            };
            out[slot * n + j] = dtype.from_f32(v);
        }
    }
    out
}

/// What an exact-accumulator kernel writes: the recipe's correct rounding of each row, after the
/// fp32 routed multiply when there is one.
fn simulate(r: &GroupedReference<'_>, model: &BoundModel) -> Vec<u16> {
    let mut out = vec![0u16; r.slots * r.n];
    for slot in 0..r.slots {
        if let RowKind::Computed { .. } = r.rows[slot] {
            for j in 0..r.n {
                let y = r.y[slot * r.n + j];
                out[slot * r.n + j] = match r.routed_weight(slot) {
                    Some(w) => r.dtype.from_f32(y as f32 * w),
                    None => correctly_rounded(r.dtype, model, y, 0.0),
                };
            }
        }
    }
    out
}

fn model(c: &Case) -> BoundModel {
    BoundModel::new(&recipe(c.layer.dtype), c.layer.shape.k, 1.0).unwrap()
}

#[test]
fn grouped_reference_is_each_slots_dense_row() {
    let s = spec(DataClass::Realistic, ActDtype::Bf16, Symmetry::Asym, 0);
    let c = case(
        &s,
        RoutingKind::SameExpertTwice,
        9,
        8,
        3,
        Some(MapKind::EveryOther),
        5,
    );
    let r = c.reference(true);
    let n = c.layer.shape.n;
    let mut zero = 0;
    for slot in 0..c.routing.slots() {
        let global = c.routing.ids[slot] as usize;
        let t = slot / 3;
        match (r.rows[slot], c.local(global)) {
            (RowKind::Computed { local, global: g }, Some(l)) => {
                assert_eq!((local, g), (l, global));
                let w = c.layer.expert(local).unwrap();
                for j in 0..n {
                    let (mut y, mut a) = (0.0, 0.0);
                    for kk in 0..c.x.k {
                        y += c.x.get(t, kk) * w.weight(j, kk);
                        a += (c.x.get(t, kk) * w.weight(j, kk)).abs();
                    }
                    let i = slot * n + j;
                    approx::assert_abs_diff_eq!(r.y[i], y, epsilon = 1e-12 * a);
                    approx::assert_abs_diff_eq!(r.a[i], a, epsilon = 1e-12 * a);
                    let routed = f64::from(c.routing.weights[slot]);
                    assert_eq!(r.value(slot, j), r.y[i] * routed);
                }
            }
            (RowKind::Zero { global: g }, None) => {
                assert_eq!(g, global);
                assert!((0..n).all(|j| r.value(slot, j) == 0.0));
                zero += 1;
            }
            (kind, local) => panic!("slot {slot}: {kind:?} for local {local:?}"),
        }
    }
    assert!(
        zero > 0,
        "the every-other map sends some slots to expert −1"
    );
    assert_eq!(r.zero_rows().count(), zero);
    assert_eq!(r.globals, [0, 2, 4, 6]);
}

#[test]
fn emulated_kernels_pass_and_use_the_bound() {
    let mut worst: f64 = 0.0;
    for dtype in ActDtype::ALL {
        for symmetry in [Symmetry::Sym, Symmetry::Asym] {
            for (class, map) in [
                (DataClass::Realistic, None),
                (DataClass::Realistic, Some(MapKind::EveryOther)),
                (DataClass::LargeActivation, Some(MapKind::All)),
                (DataClass::Saturating, None),
            ] {
                let s = spec(class, dtype, symmetry, 0);
                let c = case(&s, RoutingKind::Softmax, 17, 8, 2, map, 40);
                for mul_routed in [false, true] {
                    let r = c.reference(mul_routed);
                    let m = model(&c);
                    for trial in 0..2 {
                        let out = emulate(&c, mul_routed, 7 + trial);
                        let rep = compare_grouped(&r, &m, &out, c.layer.shape.n).unwrap();
                        assert!(
                            rep.passed(),
                            "{dtype} {symmetry:?} {class} routed={mul_routed}: {:?}",
                            rep.failures.first()
                        );
                        assert_eq!(rep.report.checked, (34 - rep.zero_rows) * 64);
                        worst = worst.max(rep.worst_ratio());
                    }
                }
            }
        }
    }
    assert!(
        worst > 1.0 / 64.0,
        "the bound is not vacuous: worst ratio {worst}"
    );
}

/// bf16 saturating data: exact values beyond fp32's range overflow the accumulator, and
/// `Inf·r` is what the kernel must write even where `y·r` itself would be finite.
#[test]
fn an_accumulator_beyond_fp32_range_may_give_infinity() {
    let s = spec(DataClass::Saturating, ActDtype::Bf16, Symmetry::Sym, 0);
    let c = case(&s, RoutingKind::Softmax, 8, 8, 4, None, 3);
    let r = c.reference(true);
    let out = emulate(&c, true, 1);
    let finite_expected_inf = (0..out.len()).filter(|&i| {
        let (slot, j) = (i / 64, i % 64);
        out[i] & 0x7FFF == 0x7F80 && r.value(slot, j).abs() < ActDtype::Bf16.overflow_threshold()
    });
    assert!(
        finite_expected_inf.count() > 0,
        "the case reaches the fp32 overflow"
    );
    assert!(compare_grouped(&r, &model(&c), &out, 64).unwrap().passed());
}

#[test]
fn special_values_propagate_through_the_grouped_reference() {
    let s = spec(DataClass::SpecialValues, ActDtype::F16, Symmetry::Asym, 0);
    let c = case(
        &s,
        RoutingKind::Softmax,
        16,
        8,
        2,
        Some(MapKind::EveryOther),
        9,
    );
    for mul_routed in [false, true] {
        let r = grouped_reference_with(
            &c.x,
            &c.layer,
            &c.routing,
            c.map.as_ref(),
            mul_routed,
            &recipe(ActDtype::F16),
            NonFiniteX::Ieee,
        )
        .unwrap();
        assert!(r.y.iter().any(|v| !v.is_finite()));
        let out = emulate(&c, mul_routed, 2);
        assert!(compare_grouped(&r, &model(&c), &out, 64).unwrap().passed());
    }
    assert!(matches!(
        grouped_reference(
            &c.x,
            &c.layer,
            &c.routing,
            c.map.as_ref(),
            true,
            &recipe(ActDtype::F16)
        ),
        Err(GroupedError::Input {
            expert: 0,
            source: InputError::NonFinite { what: "X", .. }
        })
    ));
}

/// A C with the routed multiply judged as one without it (and the reverse) fails.
#[test]
fn the_routed_multiply_is_checked() {
    let s = spec(DataClass::Realistic, ActDtype::F16, Symmetry::Sym, 0);
    let c = case(&s, RoutingKind::Softmax, 12, 8, 4, None, 21);
    let m = model(&c);
    for mul_routed in [false, true] {
        let out = emulate(&c, mul_routed, 3);
        let rep = compare_grouped(&c.reference(!mul_routed), &m, &out, 64).unwrap();
        assert!(!rep.passed());
        assert!(rep.failures.len() > 40, "{} of 48 rows", rep.failures.len());
        assert!(rep.failures.iter().all(|f| f.wrong_expert.is_none()));
    }
}

#[test]
fn zero_rows_must_be_zero_and_poison_is_caught() {
    let s = spec(DataClass::Realistic, ActDtype::Bf16, Symmetry::Asym, 0);
    let c = case(
        &s,
        RoutingKind::Softmax,
        10,
        8,
        2,
        Some(MapKind::EveryOther),
        13,
    );
    let (r, m) = (c.reference(true), model(&c));
    let good = simulate(&r, &m);
    assert!(compare_grouped(&r, &m, &good, 64).unwrap().passed());
    let zero_slot = r.zero_rows().next().unwrap();
    let computed = (0..r.slots)
        .find(|&s| matches!(r.rows[s], RowKind::Computed { .. }))
        .unwrap();

    let mut neg = good.clone();
    neg[zero_slot * 64 + 5] = 0x8000;
    assert!(
        compare_grouped(&r, &m, &neg, 64).unwrap().passed(),
        "−0 is zero"
    );

    let mut bad = good.clone();
    bad[zero_slot * 64 + 5] = ActDtype::Bf16.from_f64(2f64.powi(-100));
    let rep = compare_grouped(&r, &m, &bad, 64).unwrap();
    assert!(!rep.passed());
    assert_eq!(rep.failures.len(), 1);
    let f = &rep.failures[0];
    assert_eq!((f.slot, f.nonzero, f.first_bad), (zero_slot, 1, 5));
    assert!(matches!(f.kind, RowKind::Zero { .. }));

    let mut poisoned = good.clone();
    poisoned[computed * 64 + 63] = ActDtype::Bf16.poison_bits();
    poisoned[zero_slot * 64] = ActDtype::Bf16.poison_bits();
    let rep = compare_grouped(&r, &m, &poisoned, 64).unwrap();
    assert_eq!(rep.report.poison_left, 2);
    let slots: Vec<usize> = rep.failures.iter().map(|f| f.slot).collect();
    let mut want = vec![computed, zero_slot];
    want.sort();
    assert_eq!(slots, want);
    assert!(rep.failures.iter().all(|f| f.poison_left == 1));
}

/// The same C with one slot computed by another expert: caught and named when the experts are
/// distinguishable, invisible when they are one draw (why the option exists).
#[test]
fn a_slot_sent_to_the_wrong_expert_fails_and_is_diagnosed() {
    let mut rng = ChaCha8Rng::seed_from_u64(77);
    for dtype in ActDtype::ALL {
        for (distinguishable, map) in [
            (true, None),
            (true, Some(MapKind::EveryOther)),
            (false, None),
        ] {
            let mut s = spec(DataClass::Realistic, dtype, Symmetry::Sym, 0);
            s.distinguishable = distinguishable;
            let c = case(&s, RoutingKind::Softmax, 20, 16, 4, map, 31);
            let (r, m) = (c.reference(true), model(&c));
            let good = simulate(&r, &m);
            let rep = compare_grouped(&r, &m, &good, 64).unwrap();
            assert!(rep.passed() && rep.diagnosed == 0);

            // Pick a computed slot and another local expert for it.
            let slot = loop {
                let sl = rng.random_range(0..r.slots);
                if matches!(r.rows[sl], RowKind::Computed { .. }) {
                    break sl;
                }
            };
            let RowKind::Computed { local, .. } = r.rows[slot] else {
                unreachable!()
            };
            let wrong_local =
                (local + 1 + rng.random_range(0..r.globals.len() - 1)) % r.globals.len();
            let wrong_global = r.globals[wrong_local];
            let mut misrouted = c.routing.clone();
            misrouted.ids[slot] = wrong_global as i32;
            let r_wrong = grouped_reference(
                &c.x,
                &c.layer,
                &misrouted,
                c.map.as_ref(),
                true,
                &recipe(dtype),
            )
            .unwrap();
            let c_wrong = simulate(&r_wrong, &m);

            let rep = compare_grouped(&r, &m, &c_wrong, 64).unwrap();
            if !distinguishable {
                assert!(rep.passed(), "identical experts hide the wrong expert");
                continue;
            }
            assert!(!rep.passed());
            assert_eq!(rep.failures.len(), 1, "{dtype} only slot {slot} fails");
            let f = &rep.failures[0];
            assert_eq!(f.slot, slot);
            assert!(f.worst_ratio > 1.0 && f.over_bound > 0);
            assert_eq!(
                f.wrong_expert,
                Some(WrongExpert {
                    local: wrong_local,
                    global: wrong_global
                })
            );
            assert_eq!((rep.diagnosed, rep.wrong_expert_rows), (1, 1));
            assert!(rep.worst_ratio() > 1.0);

            // Right expert, wrong weight: fails, and is not called a wrong expert.
            let mut c_half = good.clone();
            for j in 0..64 {
                let y = r.y[slot * 64 + j];
                c_half[slot * 64 + j] = dtype.from_f32(y as f32 * c.routing.weights[slot] * 0.5);
            }
            let rep = compare_grouped(&r, &m, &c_half, 64).unwrap();
            assert_eq!(rep.failures.len(), 1);
            assert_eq!(rep.failures[0].wrong_expert, None);
            assert_eq!((rep.diagnosed, rep.wrong_expert_rows), (1, 0));
        }
    }
}

#[test]
fn exact_data_is_bit_exact() {
    let s = spec(DataClass::Exact, ActDtype::F16, Symmetry::Asym, 0);
    let c = case(&s, RoutingKind::AllOnOneExpert, 6, 8, 2, None, 4);
    let m = model(&c);
    for mul_routed in [false, true] {
        let r = c.reference(mul_routed);
        let good = emulate(&c, mul_routed, 5);
        let rep = compare_grouped_mode(&r, &m, &good, 64, CompareMode::BitExact).unwrap();
        assert!(rep.passed() && rep.report.exact_mismatches == 0);
        let mut off = good.clone();
        let i = (0..off.len()).find(|&i| off[i] & 0x7FFF != 0).unwrap();
        off[i] += 1;
        let rep = compare_grouped_mode(&r, &m, &off, 64, CompareMode::BitExact).unwrap();
        assert!(!rep.passed());
        assert_eq!(rep.report.exact_mismatches, 1);
        assert_eq!(rep.failures.len(), 1);
        assert_eq!(
            (rep.failures[0].slot, rep.failures[0].first_bad),
            (i / 64, i % 64)
        );
    }
}

#[test]
fn stacked_layout_reads_back_every_expert() {
    for symmetry in [Symmetry::Sym, Symmetry::Asym] {
        let mut s = spec(DataClass::Realistic, ActDtype::F16, symmetry, 5);
        s.shape = LayerShape::new(16, 2048, 128);
        let layer = MoeLayer::generate(8, &s).unwrap();
        for padding in [
            RowPadding::NONE,
            RowPadding {
                weight_extra_bytes: 16,
                scale_extra_elems: 3,
            },
            RowPadding::from_rule(2048, PaddingRule::CacheCliff),
        ] {
            let st = layer.stack(padding).unwrap();
            assert_eq!(st.padding(), padding);
            assert_eq!(st.w_row_stride_bytes, 1024 + padding.weight_extra_bytes);
            assert_eq!(st.weights.len() * 4, 5 * st.expert_weight_stride_bytes());
            assert_eq!(st.scales.len(), 5 * st.expert_scale_stride());
            assert_eq!(st.weight_bytes().len(), st.weights.len() * 4);
            for e in 0..5 {
                assert_eq!(
                    &st.expert_logical(e),
                    layer.expert(e).unwrap(),
                    "expert {e}"
                );
                for n in 0..16 {
                    let row = (e * 16 + n) * st.w_row_stride_bytes / 4;
                    let pad = &st.weights[row + 256..row + st.w_row_stride_bytes / 4];
                    assert!(
                        pad.iter()
                            .all(|&w| w == u32::from_le_bytes([WEIGHT_PAD_BYTE; 4]))
                    );
                    let srow = e * st.expert_scale_stride() + n * st.scale_row_stride;
                    let spad = &st.scales[srow + 16..srow + st.scale_row_stride];
                    assert!(spad.iter().all(|&b| b == ActDtype::F16.poison_bits()));
                }
            }
            match symmetry {
                Symmetry::Sym => assert_eq!(st.zeros, None),
                Symmetry::Asym => {
                    assert_eq!(
                        st.zeros.as_ref().unwrap().len(),
                        5 * st.expert_zero_stride_words()
                    );
                    assert_eq!(st.expert_zero_stride_words(), 2 * 16);
                }
            }
        }
        assert_eq!(
            layer.stack(RowPadding {
                weight_extra_bytes: 2,
                scale_extra_elems: 0
            }),
            Err(MoeLayerError::WeightStrideAlignment {
                extra: 2,
                stride: 1026
            })
        );
    }
}

#[test]
fn moe_layers_refuse_what_the_moe_kernel_cannot_take() {
    let s = spec(DataClass::Realistic, ActDtype::Bf16, Symmetry::Asym, 3);
    let layer = MoeLayer::generate(1, &s).unwrap();
    // Distinguishable experts are distinct draws; otherwise one draw.
    let q = |l: &MoeLayer, e: usize| l.expert(e).unwrap().q.clone();
    assert!(q(&layer, 0) != q(&layer, 1) && q(&layer, 1) != q(&layer, 2));
    let same = MoeLayer::generate(
        1,
        &MoeSpec {
            distinguishable: false,
            ..s
        },
    )
    .unwrap();
    assert!(same.expert(0) == same.expert(2) && same.expert(0) == layer.expert(0));
    assert_eq!(
        MoeLayer::generate(
            1,
            &MoeSpec {
                class: DataClass::Ones,
                ..s
            }
        ),
        Err(MoeLayerError::NotDistinguishable {
            class: DataClass::Ones
        })
    );
    assert_eq!(
        MoeLayer::generate(1, &MoeSpec { experts: 0, ..s }),
        Err(MoeLayerError::NoExperts)
    );

    // Legacy unpacked zero points: read by the reference, refused by the stacked layout.
    let mut experts = layer.experts.clone();
    let logical = layer.expert(1).unwrap();
    experts[1].zeros = Some(ZeroPoints::UnpackedLegacy(UnpackedZeroPoints {
        n: 64,
        groups: 4,
        dtype: ActDtype::Bf16,
        bits: logical
            .zeros
            .as_ref()
            .unwrap()
            .iter()
            .map(|&z| ActDtype::Bf16.from_f64(f64::from(z)))
            .collect(),
    }));
    let legacy = MoeLayer::from_experts(experts.clone()).unwrap();
    assert_eq!(legacy.expert(1), layer.expert(1));
    assert_eq!(
        legacy.stack(RowPadding::NONE),
        Err(MoeLayerError::UnpackedZeroPoints { expert: 1 })
    );

    let other = MoeLayer::generate(
        2,
        &MoeSpec {
            shape: LayerShape::new(64, 256, 128),
            ..s
        },
    )
    .unwrap();
    let mut mixed = layer.experts.clone();
    mixed[2] = other.experts[0].clone();
    assert!(matches!(
        MoeLayer::from_experts(mixed),
        Err(MoeLayerError::ShapeMismatch { expert: 2, .. })
    ));
    let f16 = MoeLayer::generate(
        2,
        &MoeSpec {
            dtype: ActDtype::F16,
            ..s
        },
    )
    .unwrap();
    let mut mixed = layer.experts.clone();
    mixed[1] = f16.experts[0].clone();
    assert!(matches!(
        MoeLayer::from_experts(mixed),
        Err(MoeLayerError::DtypeMismatch { expert: 1, .. })
    ));
    let sym = MoeLayer::generate(
        2,
        &MoeSpec {
            symmetry: Symmetry::Sym,
            ..s
        },
    )
    .unwrap();
    let mut mixed = layer.experts.clone();
    mixed[2] = sym.experts[0].clone();
    assert_eq!(
        MoeLayer::from_experts(mixed),
        Err(MoeLayerError::SymmetryMismatch {
            expert: 2,
            expected: Symmetry::Asym,
            got: Symmetry::Sym
        })
    );
    let mut biased = layer.experts.clone();
    biased[0].bias = Some(vec![0; 64]);
    assert_eq!(
        MoeLayer::from_experts(biased),
        Err(MoeLayerError::BiasNotSupported { expert: 0 })
    );
    let mut short = layer.experts.clone();
    short[1].scales.bits.truncate(10);
    assert!(matches!(
        MoeLayer::from_experts(short),
        Err(MoeLayerError::Layout {
            expert: 1,
            source: LayoutError::ScaleElems { .. }
        })
    ));
    assert_eq!(
        MoeLayer::from_experts(Vec::new()),
        Err(MoeLayerError::NoExperts)
    );
}

#[test]
fn grouped_inputs_are_checked() {
    let s = spec(DataClass::Realistic, ActDtype::F16, Symmetry::Sym, 0);
    let c = case(&s, RoutingKind::Softmax, 6, 8, 2, None, 2);
    let rec = recipe(ActDtype::F16);
    let short_x = generate_activations(3, &s.data_spec(5)).unwrap();
    assert_eq!(
        grouped_reference(&short_x, &c.layer, &c.routing, None, true, &rec).err(),
        Some(GroupedError::Tokens { rows: 5, tokens: 6 })
    );
    let half = ExpertMap::new(MapKind::EveryOther, 8).unwrap();
    assert_eq!(
        grouped_reference(&c.x, &c.layer, &c.routing, Some(&half), true, &rec).err(),
        Some(GroupedError::LocalExperts {
            layer: 8,
            expected: 4
        })
    );
    let wide = ExpertMap::new(MapKind::All, 9).unwrap();
    assert_eq!(
        grouped_reference(&c.x, &c.layer, &c.routing, Some(&wide), true, &rec).err(),
        Some(GroupedError::MapExperts { map: 9, routing: 8 })
    );
    let bf = recipe(ActDtype::Bf16);
    assert!(matches!(
        grouped_reference(&c.x, &c.layer, &c.routing, None, true, &bf),
        Err(GroupedError::Input {
            expert: 0,
            source: InputError::Mismatch { .. }
        })
    ));
    let r = c.reference(true);
    let m = model(&c);
    let out = simulate(&r, &m);
    assert!(matches!(
        compare_grouped(&r, &m, &out[..out.len() - 1], 64),
        Err(GroupedError::Compare(InputError::Mismatch {
            what: "Y data length",
            ..
        }))
    ));
    let wrong_k = BoundModel::new(&rec, 128, 1.0).unwrap();
    assert!(matches!(
        compare_grouped(&r, &wrong_k, &out, 64),
        Err(GroupedError::Compare(InputError::Mismatch {
            what: "bound model K",
            ..
        }))
    ));
    // A padded C row stride: the padding is not read.
    let mut padded = vec![ActDtype::F16.poison_bits(); r.slots * 72];
    for slot in 0..r.slots {
        padded[slot * 72..slot * 72 + 64].copy_from_slice(&out[slot * 64..(slot + 1) * 64]);
    }
    assert!(compare_grouped(&r, &m, &padded, 72).unwrap().passed());
}

/// The routed bound adds the fp32 product's rounding to the dense bound, and everything in it
/// but the output's absolute floor scales with |r|.
#[test]
fn routed_bound_adds_the_product_rounding_and_scales_with_the_weight() {
    for dtype in ActDtype::ALL {
        let m = BoundModel::new(&recipe(dtype), 4096, 1.5).unwrap();
        let (y, a, acc) = (3.25, 40.0, 40.0);
        let dense = m.element(y, a, acc, 0.0);
        let routed = m.routed_element(y, a, acc, 1.0);
        assert!(
            routed - dense >= w4a16_reference::bound::U32 * y.abs(),
            "{dtype}"
        );
        let floor = m.routed_terms().terms.floor;
        for r in [0.5f64, 0.125, -0.25] {
            let want = r.abs() * (routed - floor) + floor;
            let got = m.routed_element(y, a, acc, r);
            assert!(
                (got - want).abs() <= 1e-12 * want,
                "{dtype} r = {r}: {got} vs {want}"
            );
        }
    }
}

/// The exact class must see a second rounding anywhere in the epilogue: the accumulator rounded
/// to the activation dtype before the routed multiply, or the routed weight rounded to it. On the
/// moe suite's exact shapes (K = 256 and 1024, T = 33, the softmax weights of fp32), for both
/// dtypes, each such kernel differs from the single rounding in some element, so the bit-exact
/// comparison fails it, while the kernel that rounds once passes.
#[test]
fn exact_data_sees_a_second_rounding_in_the_epilogue() {
    type Epilogue = fn(ActDtype, f32, f32) -> f32;
    let twice: [(&str, Epilogue); 2] = [
        ("accumulator rounded first", |d, acc, r| {
            d.to_f32(d.from_f32(acc)) * r
        }),
        ("routed weight rounded first", |d, acc, r| {
            acc * d.to_f32(d.from_f32(r))
        }),
    ];
    for (k, n, group) in [(256, 64, 64), (1024, 64, 128)] {
        for dtype in ActDtype::ALL {
            let s = MoeSpec {
                shape: LayerShape::new(n, k, group),
                ..spec(DataClass::Exact, dtype, Symmetry::Asym, 0)
            };
            let c = case(&s, RoutingKind::Softmax, 33, 8, 2, None, 11);
            let (m, r) = (model(&c), c.reference(true));
            let once = simulate(&r, &m);
            let rep = compare_grouped_mode(&r, &m, &once, n, CompareMode::BitExact).unwrap();
            assert!(rep.passed(), "K = {k} {dtype}: one rounding passes");
            for (what, epilogue) in twice {
                let mut out = once.clone();
                for slot in 0..r.slots {
                    let w = r.routed_weight(slot).unwrap();
                    for j in 0..n {
                        let acc = r.y[slot * n + j] as f32;
                        out[slot * n + j] = dtype.from_f32(epilogue(dtype, acc, w));
                    }
                }
                let rep = compare_grouped_mode(&r, &m, &out, n, CompareMode::BitExact).unwrap();
                let share = rep.report.exact_mismatches as f64 / out.len() as f64;
                eprintln!("K = {k} {dtype} {what}: {:.2}% of C differs", 100.0 * share);
                assert!(
                    !rep.passed() && rep.report.exact_mismatches > 0,
                    "K = {k} {dtype}: {what} passed the exact class"
                );
            }
        }
    }
}
