//! Every dequantization trick, all 16 × 16 (q, z) pairs, both dtypes, against the exact value.
use half::{bf16, f16};
use w4a16_reference::ActDtype;
use w4a16_reference::bound::BoundModel;
use w4a16_reference::recipe::{BiasStage, NumericRecipe};
use w4a16_reference::tricks::*;

fn pairs() -> impl Iterator<Item = (u8, u8)> {
    (0..16u8).flat_map(|q| (0..16u8).map(move |z| (q, z)))
}

/// Eight codes with `q` in slot `slot` and distinct neighbours, so a wrong lane shows.
fn word_with(q: u8, slot: usize) -> [u8; 8] {
    std::array::from_fn(|i| {
        if i == slot {
            q
        } else {
            ((q as usize + 3 * i + 1) % 16) as u8
        }
    })
}

#[test]
fn magic_constants_are_what_they_claim() {
    assert_eq!(f16::from_bits(FP16_MAGIC).to_f32(), 1024.0);
    assert_eq!(bf16::from_bits(BF16_MAGIC).to_f32(), 128.0);
    for q in 0..16u8 {
        assert_eq!(fp16_biased(q).to_f32(), 1024.0 + f32::from(q));
        assert_eq!(bf16_biased(q).to_f32(), 128.0 + f32::from(q));
    }
}

#[test]
fn exllama_pack_unpack_round_trips_every_code_in_every_slot() {
    for slot in 0..8 {
        for q in 0..16u8 {
            let codes = word_with(q, slot);
            let w = exllama_pack(codes);
            assert_eq!(exllama_unpack(w), codes);
            // Element 2p sits at bits 4p, element 2p+1 at bits 16 + 4p.
            let bit = if slot % 2 == 0 {
                4 * (slot / 2)
            } else {
                16 + 4 * (slot / 2)
            };
            assert_eq!((w >> bit) & 15, u32::from(q));
        }
    }
}

#[test]
fn per_element_forms_are_exact_for_all_pairs() {
    for (q, z) in pairs() {
        let exact = f32::from(q) - f32::from(z);
        assert_eq!(fp16_element(q, z).to_f32(), exact, "fp16 q={q} z={z}");
        assert_eq!(bf16_element(q, z).to_f32(), exact, "bf16 q={q} z={z}");
    }
}

#[test]
fn two_at_once_forms_are_exact_in_k_order_for_all_pairs_and_slots() {
    for (q, z) in pairs() {
        for slot in 0..8 {
            let codes = word_with(q, slot);
            let w = exllama_pack(codes);
            let h = fp16_word(w, z);
            let b = bf16_word(w, z);
            for i in 0..8 {
                let exact = f32::from(codes[i]) - f32::from(z);
                assert_eq!(h[i].to_f32(), exact, "fp16 q={q} z={z} slot={slot} i={i}");
                assert_eq!(b[i].to_f32(), exact, "bf16 q={q} z={z} slot={slot} i={i}");
            }
            // The raw pair for shift 4p is (1024 + code[2p], 1024 + code[2p+1]).
            let p = slot / 2;
            let [lo, hi] = fp16_pair(w, 4 * p as u32);
            assert_eq!(
                (lo.to_f32(), hi.to_f32()),
                (
                    1024.0 + f32::from(codes[2 * p]),
                    1024.0 + f32::from(codes[2 * p + 1])
                )
            );
            let [lo, hi] = bf16_pair(w, 4 * p as u32);
            assert_eq!(
                (lo.to_f32(), hi.to_f32()),
                (
                    128.0 + f32::from(codes[2 * p]),
                    128.0 + f32::from(codes[2 * p + 1])
                )
            );
        }
    }
}

#[test]
fn hip_lo_hi_variant_is_exact_sym_and_asym_fused_or_not() {
    for (q, z) in pairs() {
        for slot in 0..8 {
            let codes = word_with(q, slot);
            let w = exllama_pack(codes);
            for fused in [true, false] {
                let asym = fp16_word_hip(w, Some(z), fused);
                let sym = fp16_word_hip(w, None, fused);
                for i in 0..8 {
                    assert_eq!(
                        asym[i].to_f32(),
                        f32::from(codes[i]) - f32::from(z),
                        "asym q={q} z={z} slot={slot} i={i}"
                    );
                    assert_eq!(
                        sym[i].to_f32(),
                        f32::from(codes[i]) - 8.0,
                        "sym q={q} slot={slot} i={i}"
                    );
                }
            }
        }
    }
}

/// Scales with at most 3 significant bits: `(q − z)·s` then has at most 7 and is exact in both
/// formats; exponents span normal values of both.
fn exact_scales() -> Vec<f32> {
    let mut s = Vec::new();
    for e in [-12, -7, -4, -1, 0, 3] {
        for m in [1.0, 1.25, 1.5, 1.75] {
            s.push(m * 2f32.powi(e));
        }
    }
    s
}

#[test]
fn scaled_forms_equal_the_exact_product_for_all_pairs() {
    for s in exact_scales() {
        let (sh, sb) = (f16::from_f32(s), bf16::from_f32(s));
        assert_eq!((sh.to_f32(), sb.to_f32()), (s, s));
        for (q, z) in pairs() {
            let exact = (f32::from(q) - f32::from(z)) * s;
            assert_eq!(
                fp16_prefill(q, z, sh).to_f32(),
                exact,
                "fp16 s={s} q={q} z={z}"
            );
            assert_eq!((fp16_element(q, z) * sh).to_f32(), exact);
            assert_eq!(
                bf16_prefill(q, z, sb).to_f32(),
                exact,
                "bf16 s={s} q={q} z={z}"
            );
            assert_eq!((bf16_element(q, z) * sb).to_f32(), exact);
        }
    }
}

#[test]
fn fork_asymmetric_prefill_is_not_bit_identical_but_stays_within_two_roundings() {
    let mut differs = 0;
    for sbits in (0x2000u16..0x2C00).step_by(7) {
        let s = f16::from_bits(sbits);
        for (q, z) in pairs() {
            let exact = (f64::from(q) - f64::from(z)) * s.to_f64();
            let correct = fp16_prefill(q, z, s);
            assert_eq!(correct, f16::from_f64(exact), "upstream form rounds once");
            let fork = fp16_prefill_fork(q, z, s);
            if fork != correct {
                differs += 1;
            }
            let u = 2f64.powi(-11);
            let slack = 2.0 * u * (f64::from(q) + f64::from(z)) * s.to_f64()
                + u * exact.abs()
                + 2f64.powi(-24);
            assert!((fork.to_f64() - exact).abs() <= slack, "s={s} q={q} z={z}");
        }
    }
    assert!(
        differs > 0,
        "docs/field.md §4 says the fork form is not bit-identical"
    );
}

#[test]
fn bf16_offset_form_is_exact_for_exact_data_and_covered_only_by_the_offset_bound() {
    let s = bf16::from_f32(0.0390625);
    for (q, z) in pairs() {
        // Unit and small-integer activations: every fp32 sum is exact.
        let x: Vec<bf16> = (0..32)
            .map(|i| bf16::from_f32(((i % 7) as f32) - 3.0))
            .collect();
        let codes = vec![q; 32];
        assert_eq!(
            bf16_offset_group(&x, &codes, Some(z), s),
            bf16_direct_group(&x, &codes, Some(z), s)
        );
        assert_eq!(
            bf16_offset_group(&x[..1], &codes[..1], Some(z), bf16::ONE),
            -3.0 * (f32::from(q) - f32::from(z))
        );
    }
    // Large activations with q = z: the exact value is 0, so a = 0, but Σx(128+q) and (128+z)Σx
    // are large, span many binades, and their fp32 roundings do not cancel.
    let x: Vec<bf16> = (0..128)
        .map(|i| bf16::from_f32(((i * 37 % 101) as f32 - 50.3) * 2f32.powi(i % 13 - 4)))
        .collect();
    let codes = vec![5u8; 128];
    let got = bf16_offset_group(&x, &codes, Some(5), bf16::ONE) as f64;
    assert_ne!(got, 0.0, "the cancellation leaves rounding residue");
    let a_offset: f64 = x
        .iter()
        .map(|v| v.to_f64().abs() * (256.0 + 5.0 + 5.0))
        .sum();
    let offset = NumericRecipe {
        rounds_dequantized_weight: false,
        offset_accumulation: Some(128.0),
        bias: BiasStage::BeforeCast,
        output: ActDtype::Bf16,
        single_rounding: false,
        pre_rounded_bias: false,
    };
    let with = BoundModel::new(&offset, 128, 1.0)
        .unwrap()
        .element(0.0, 0.0, a_offset, 0.0);
    let plain = BoundModel::new(&NumericRecipe::fp32_exact_weights(ActDtype::Bf16), 128, 1.0)
        .unwrap()
        .element(0.0, 0.0, 0.0, 0.0);
    assert!(got.abs() <= with, "{got} within {with}");
    assert!(
        got.abs() > plain,
        "{got} exceeds the exact-weight bound {plain}"
    );
}
