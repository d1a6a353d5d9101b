//! Checks that belong to no case: the exhaustive dequant-trick emulation (docs/contract.md §4) over all
//! 16 × 16 (q, z) pairs in every nibble slot, for both dtypes.

use super::verdict::Check;
use super::verdict::{Outcome, Verdict};
use w4a16_reference::tricks;

fn verdict(form: &str, mismatches: Vec<String>) -> Verdict {
    let id = format!("tricks/{form}");
    if mismatches.is_empty() {
        Verdict::new(id, Check::Exhaustive, Outcome::Pass)
            .detail("all 16×16 (q, z) pairs equal q − z")
    } else {
        Verdict::new(id, Check::Exhaustive, Outcome::Fail).detail(format!(
            "{} mismatches, first: {}",
            mismatches.len(),
            mismatches[0]
        ))
    }
}

pub fn dequant_trick_checks() -> Vec<Verdict> {
    let mut fp16_el = Vec::new();
    let mut bf16_el = Vec::new();
    let mut fp16_w = Vec::new();
    let mut bf16_w = Vec::new();
    let mut fp16_hip = Vec::new();
    for z in 0..16u8 {
        for q in 0..16u8 {
            let want = q as f32 - z as f32;
            if tricks::fp16_element(q, z).to_f32() != want {
                fp16_el.push(format!("q={q} z={z}"));
            }
            if tricks::bf16_element(q, z).to_f32() != want {
                bf16_el.push(format!("q={q} z={z}"));
            }
            // q in every nibble slot, its neighbours cycling through the other codes.
            for slot in 0..8 {
                let mut codes = [0u8; 8];
                for (i, c) in codes.iter_mut().enumerate() {
                    *c = if i == slot {
                        q
                    } else {
                        (q + i as u8 * 5 + 3) % 16
                    };
                }
                let word = tricks::exllama_pack(codes);
                let a = tricks::fp16_word(word, z);
                let b = tricks::bf16_word(word, z);
                let h = tricks::fp16_word_hip(word, Some(z), true);
                for i in 0..8 {
                    let w = codes[i] as f32 - z as f32;
                    if a[i].to_f32() != w {
                        fp16_w.push(format!("word {word:#010x} slot {i} z={z}"));
                    }
                    if b[i].to_f32() != w {
                        bf16_w.push(format!("word {word:#010x} slot {i} z={z}"));
                    }
                    if h[i].to_f32() != w {
                        fp16_hip.push(format!("word {word:#010x} slot {i} z={z}"));
                    }
                }
            }
        }
    }
    vec![
        verdict("fp16-0x6400-element", fp16_el),
        verdict("bf16-0x4300-element", bf16_el),
        verdict("fp16-0x64006400-pair", fp16_w),
        verdict("bf16-0x43004300-pair", bf16_w),
        verdict("fp16-hip-hi-lo", fp16_hip),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_trick_form_is_exact() {
        let v = super::dequant_trick_checks();
        assert_eq!(v.len(), 5);
        for x in v {
            assert_eq!(
                x.outcome,
                super::Outcome::Pass,
                "{}: {}",
                x.case_id,
                x.detail
            );
        }
    }
}
