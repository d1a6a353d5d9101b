//! CPU emulation of the dequantization bit tricks the kernels use (docs/contract.md §4 fast-path numerics,
//! docs/field.md §4), so that each can be checked exhaustively against the exact `(q − z)·s`.
//!
//! Half-precision arithmetic goes through the `half` crate, which computes each operation in
//! fp32 and rounds once to the 16-bit format. That equals the hardware's correctly rounded
//! fp16/bf16 operation: fp32 carries at least `2p + 2` bits for `p` = 11 (fp16) and 8 (bf16), so
//! the double rounding is innocuous for +, −, ×.
//!
//! ExLlama word order (docs/contract.md §2): element `2p` of a group of eight at bits `4p`, element `2p + 1`
//! at bits `16 + 4p`, `p = 0..3`. Masking with `0x000F000F` after shifting by `4p` therefore yields
//! elements `2p` and `2p + 1` in the low and high 16-bit halves: K order with shifts 0, 4, 8, 12.

use half::{bf16, f16};

/// `0x6400` is fp16 1024.0: its ulp is 1, so OR-ing a nibble into the mantissa adds the nibble.
pub const FP16_MAGIC: u16 = 0x6400;
/// `0x4300` is bf16 128.0, whose ulp is 1.
pub const BF16_MAGIC: u16 = 0x4300;
pub const FP16_MAGIC_PAIR: u32 = 0x6400_6400;
pub const BF16_MAGIC_PAIR: u32 = 0x4300_4300;
pub const LO_MASK: u32 = 0x000F_000F;
pub const HI_MASK: u32 = 0x00F0_00F0;
/// The symmetric zero point of `uint4b8`.
const SYM_Z: u8 = 8;

/// Packs eight codes (K order) into one ExLlama word.
pub fn exllama_pack(codes: [u8; 8]) -> u32 {
    (0..4).fold(0u32, |w, p| {
        w | u32::from(codes[2 * p] & 15) << (4 * p)
            | u32::from(codes[2 * p + 1] & 15) << (16 + 4 * p)
    })
}

/// The eight codes of an ExLlama word, in K order.
pub fn exllama_unpack(word: u32) -> [u8; 8] {
    std::array::from_fn(|i| {
        let (p, hi) = (i / 2, i % 2);
        ((word >> (16 * hi + 4 * p)) & 15) as u8
    })
}

/// `nibble | 0x6400` = 1024 + q.
pub fn fp16_biased(q: u8) -> f16 {
    f16::from_bits(FP16_MAGIC | u16::from(q & 15))
}

/// `nibble | 0x4300` = 128 + q.
pub fn bf16_biased(q: u8) -> bf16 {
    bf16::from_bits(BF16_MAGIC | u16::from(q & 15))
}

/// Per element, fp16: `(1024 + q) − (1024 + z)`, one fp16 subtraction (exact).
pub fn fp16_element(q: u8, z: u8) -> f16 {
    fp16_biased(q) - fp16_biased(z)
}

/// Per element, bf16: `(128 + q) − (128 + z)`, one bf16 subtraction (exact).
pub fn bf16_element(q: u8, z: u8) -> bf16 {
    bf16_biased(q) - bf16_biased(z)
}

fn halves(v: u32) -> [u16; 2] {
    [(v & 0xFFFF) as u16, (v >> 16) as u16]
}

/// Two at once: `((word >> shift) & 0x000F000F) | 0x64006400`, the two fp16 halves (low first).
pub fn fp16_pair(word: u32, shift: u32) -> [f16; 2] {
    halves(((word >> shift) & LO_MASK) | FP16_MAGIC_PAIR).map(f16::from_bits)
}

/// Two at once: `((word >> shift) & 0x000F000F) | 0x43004300`, the two bf16 halves (low first).
pub fn bf16_pair(word: u32, shift: u32) -> [bf16; 2] {
    halves(((word >> shift) & LO_MASK) | BF16_MAGIC_PAIR).map(bf16::from_bits)
}

/// A whole word, fp16, pair form with shifts 0, 4, 8, 12, minus `1024 + z`: `q − z` in K order.
pub fn fp16_word(word: u32, z: u8) -> [f16; 8] {
    let sub = fp16_biased(z);
    let mut out = [f16::ZERO; 8];
    for p in 0..4 {
        let [lo, hi] = fp16_pair(word, 4 * p as u32);
        out[2 * p] = lo - sub;
        out[2 * p + 1] = hi - sub;
    }
    out
}

/// A whole word, bf16, pair form with shifts 0, 4, 8, 12, minus `128 + z`: `q − z` in K order.
pub fn bf16_word(word: u32, z: u8) -> [bf16; 8] {
    let sub = bf16_biased(z);
    let mut out = [bf16::ZERO; 8];
    for p in 0..4 {
        let [lo, hi] = bf16_pair(word, 4 * p as u32);
        out[2 * p] = lo - sub;
        out[2 * p + 1] = hi - sub;
    }
    out
}

/// fp16 fused multiply-add with one rounding. The f64 intermediate is exact for the operands
/// used here (the product has ≤ 22 significant bits and the addend is within 2⁵³ of it).
pub fn fp16_fma(a: f16, b: f16, c: f16) -> f16 {
    f16::from_f64(a.to_f64() * b.to_f64() + c.to_f64())
}

/// The HIP fp16 decode (docs/field.md §4): per 8-bit step, `lo = (w & 0x000F000F) | 0x64006400`
/// (`1024 + q`, elements 0 and 1) and `hi = (w & 0x00F000F0) | 0x64006400` (`1024 + 16·q`,
/// elements 2 and 3), then `w >>= 8` for elements 4..7. Symmetric (`z = None`): `lo − 1032` and
/// `fma(hi, 1/16, −72)`. Asymmetric: `lo − 1024` and `fma(hi, 1/16, −64)` give `q`, then `− z`.
/// `fused = false` replaces each fma by a multiply and an add, each rounded.
pub fn fp16_word_hip(word: u32, z: Option<u8>, fused: bool) -> [f16; 8] {
    let sixteenth = f16::from_bits(0x2C00);
    let (lo_sub, hi_add) = match z {
        None => (f16::from_bits(0x6408), f16::from_bits(0xD480)),
        Some(_) => (f16::from_bits(0x6400), f16::from_bits(0xD400)),
    };
    let zf = f16::from_f32(f32::from(z.unwrap_or(0)));
    let mut out = [f16::ZERO; 8];
    for step in 0..2 {
        let w = word >> (8 * step);
        let lo = halves((w & LO_MASK) | FP16_MAGIC_PAIR).map(f16::from_bits);
        let hi = halves((w & HI_MASK) | FP16_MAGIC_PAIR).map(f16::from_bits);
        for h in 0..2 {
            let l = lo[h] - lo_sub;
            let u = if fused {
                fp16_fma(hi[h], sixteenth, hi_add)
            } else {
                hi[h] * sixteenth + hi_add
            };
            let (l, u) = if z.is_some() {
                (l - zf, u - zf)
            } else {
                (l, u)
            };
            out[4 * step + h] = l;
            out[4 * step + 2 + h] = u;
        }
    }
    out
}

/// Triton fp16 prefill, symmetric and upstream asymmetric: `(b − (1024 + z))·s`, one rounding.
pub fn fp16_prefill(q: u8, z: u8, s: f16) -> f16 {
    fp16_element(q, z) * s
}

/// The fork's asymmetric fp16 prefill: `(b − 1024)·s + bias_eff` with `bias_eff = fl(−z·s)`
/// already rounded. Not bit-identical to `(q − z)·s` (docs/field.md §4).
pub fn fp16_prefill_fork(q: u8, z: u8, s: f16) -> f16 {
    let bias_eff = f16::from_f32(-f32::from(z)) * s;
    (fp16_biased(q) - f16::from_bits(FP16_MAGIC)) * s + bias_eff
}

/// Triton bf16 prefill: `q − z` in the integer domain, cast to bf16 (exact), times `s`.
pub fn bf16_prefill(q: u8, z: u8, s: bf16) -> bf16 {
    bf16::from_f32(f32::from(i16::from(q) - i16::from(z))) * s
}

/// The HIP bf16 decode with the offset subtracted after the dot (docs/field.md §4), for one group:
/// `(Σ x·(128 + q) − (128 + z)·Σ x)·s` in fp32. Products `x·(128 + q)` are exact (8 × 8 bits);
/// each sum is accumulated in K order with one fp32 rounding per addition; `Σ x` is the dot
/// with bf16 ones. `z = None` is symmetric (136).
pub fn bf16_offset_group(x: &[bf16], codes: &[u8], z: Option<u8>, s: bf16) -> f32 {
    let zb = bf16_biased(z.unwrap_or(SYM_Z)).to_f32();
    let (mut dot, mut sum) = (0f32, 0f32);
    for (&xv, &q) in x.iter().zip(codes) {
        dot += xv.to_f32() * bf16_biased(q).to_f32();
        sum += xv.to_f32();
    }
    (dot - zb * sum) * s.to_f32()
}

/// The same group with `q − z` formed first (the exact-weight form): the fp32 value to compare.
pub fn bf16_direct_group(x: &[bf16], codes: &[u8], z: Option<u8>, s: bf16) -> f32 {
    let zi = i16::from(z.unwrap_or(SYM_Z));
    let mut dot = 0f32;
    for (&xv, &q) in x.iter().zip(codes) {
        dot += xv.to_f32() * f32::from(i16::from(q) - zi);
    }
    dot * s.to_f32()
}
