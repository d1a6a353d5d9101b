//! Floating-point rules of the gfx11 / gfx12 VALU and SALU as the kernels run them: IEEE-754
//! round to nearest even, NaN results quiet, and the float mode HIP gives every kernel on these
//! targets (LLVM AMDGPUUsage: FLOAT_DENORM_MODE_32 = FLOAT_DENORM_MODE_16_64 = 3, denormals
//! neither flushed on input nor on output). The emulator implements that mode only: f32 and f16
//! denormals are kept everywhere except in `v_dot2*_f32_f16`, which flushes its f32 operand and
//! result regardless of the mode (see [`dot2_f32_f16`]). The host's f32 arithmetic is IEEE with
//! denormals (Rust never sets FTZ/DAZ), so `+ - * mul_add` on `f32` are the hardware's results.
//!
//! f16 results are computed exactly (or rounded to odd at a wider precision, which then rounds to
//! f16 as one rounding would) and rounded once: `half`'s `f16::from_f64` goes through f32 on
//! hosts with F16C (a double rounding), so f64 → f16 here rounds to odd at f32 first.

use half::f16;

pub mod fused;

/// Bits of the default quiet NaN.
pub const F32_QNAN: u32 = 0x7FC0_0000;

/// `x` with a NaN made quiet (bit 22 set, payload kept as far as the host kept it).
#[inline]
pub fn quiet(x: f32) -> f32 {
    if x.is_nan() {
        f32::from_bits(x.to_bits() | 0x0040_0000)
    } else {
        x
    }
}

/// VOP3 source modifiers on an f32 operand's bits: `|x|` clears the sign, then `-x` flips it
/// (also for NaN: modifiers are bit operations).
pub fn mods32(bits: u32, abs: bool, neg: bool) -> u32 {
    let b = if abs { bits & 0x7FFF_FFFF } else { bits };
    if neg { b ^ 0x8000_0000 } else { b }
}

/// The same on an f16 operand's 16 bits.
pub fn mods16(bits: u16, abs: bool, neg: bool) -> u16 {
    let b = if abs { bits & 0x7FFF } else { bits };
    if neg { b ^ 0x8000 } else { b }
}

/// f16 → f32: exact (every f16, subnormals included, is an f32 normal or zero); a NaN stays
/// NaN, quiet.
/// `half`'s integer conversion rather than `to_f32`, which on x86 checks for F16C and calls
/// out for every value; the bits are the same (a test compares all 65536).
#[inline]
pub fn f16_to_f32(h: u16) -> f32 {
    quiet(f16::from_bits(h).to_f32_const())
}

/// bf16 → f32: exact, the bf16 bits are the f32's upper half.
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// f32 → f16 (`v_cvt_f16_f32`): round to nearest even, overflow to ±inf, f16 subnormals kept,
/// NaN → quiet NaN with the payload's upper bits.
pub fn f32_to_f16(x: f32) -> u16 {
    let h = f16::from_f32(x).to_bits();
    if x.is_nan() { h | 0x0200 } else { h }
}

/// `x` rounded to f32 precision by round-to-odd: the f32 nearest `x` toward zero, with its last
/// bit set when `x` is not exact. A later round to nearest even to ≤ 22 bits then equals one
/// rounding of `x` (Boldo & Melquiond, "When double rounding is odd").
fn round_odd_f32(x: f64) -> f32 {
    let f = x as f32;
    if !f.is_finite() || f as f64 == x {
        return f;
    }
    let bits = f.to_bits();
    if bits & 1 == 1 {
        return f;
    }
    // `f` is even and inexact: step one ulp toward `x`.
    let toward_larger_magnitude = (x.abs()) > (f as f64).abs();
    f32::from_bits(if toward_larger_magnitude {
        bits + 1
    } else {
        bits - 1
    })
}

/// f64 → f16 with one rounding to nearest even.
pub fn f64_to_f16(x: f64) -> u16 {
    if x.is_nan() {
        return 0x7E00;
    }
    f16::from_f32(round_odd_f32(x)).to_bits()
}

fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// The exact sum of three f64 terms, rounded to odd at f64 precision (so that a following
/// rounding to f32 or f16 is the one rounding of the exact sum). Infinities and NaNs take the
/// ordinary IEEE sum; an exact zero is −0 only when every term is −0.
pub fn sum3_odd(a: f64, b: f64, c: f64) -> f64 {
    if !(a.is_finite() && b.is_finite() && c.is_finite()) {
        return a + b + c;
    }
    if a == 0.0 && b == 0.0 && c == 0.0 {
        return a + b + c; // IEEE: −0 only if all are −0
    }
    let (s, e) = two_sum(a, b);
    let (t, f) = two_sum(s, c);
    let (g, h) = two_sum(f, e);
    let (v, w) = two_sum(t, g);
    // The exact sum is v + w + h; w + h has the sign of (sum − v) and is smaller than ulp(v).
    let r = w + h;
    if r == 0.0 {
        return v;
    }
    if v == 0.0 {
        return r;
    }
    let vb = v.to_bits();
    if vb & 1 == 1 {
        return v;
    }
    f64::from_bits(if (r > 0.0) == (v > 0.0) {
        vb + 1
    } else {
        vb - 1
    })
}

/// `v_add_f16`: the exact sum (exact in f64) rounded once to f16.
pub fn add_f16(a: u16, b: u16) -> u16 {
    f64_to_f16(f16_to_f32(a) as f64 + f16_to_f32(b) as f64)
}

/// `v_pk_mul_f16` per half: the exact product (22 bits, exact in f64) rounded once to f16.
pub fn mul_f16(a: u16, b: u16) -> u16 {
    f64_to_f16(f16_to_f32(a) as f64 * f16_to_f32(b) as f64)
}

/// `v_pk_fma_f16` per half: fused, a·b + c rounded once to f16.
pub fn fma_f16(a: u16, b: u16, c: u16) -> u16 {
    let p = f16_to_f32(a) as f64 * f16_to_f32(b) as f64;
    f64_to_f16(sum3_odd(p, f16_to_f32(c) as f64, 0.0))
}

/// f32 denormal → zero of the same sign.
pub fn flush32(x: f32) -> f32 {
    if x.is_subnormal() {
        f32::from_bits(x.to_bits() & 0x8000_0000)
    } else {
        x
    }
}

/// `v_dot2_f32_f16` / `v_dot2acc_f32_f16`: a.lo·b.lo + a.hi·b.hi + c.
///
/// The ISA pseudocode writes two `tmp +=` steps, but LLVM (review D49146: "This operation only
/// rounds a single time") and the kernels' own AMD emulation (kernels/hip/amd_emulation.h,
/// `fdot2_f32_f16`) take one rounding of the exact three-term sum; so does this, so that the two
/// emulations agree bit for bit. The f16 products are exact; the f32 `c` and an f32 denormal
/// result are flushed to zero of the same sign regardless of the mode (LLVM SIISelLowering:
/// "fdot2_f32_f16 always flushes fp32 denormal operand and output to zero"). Any NaN operand,
/// 0·inf or inf − inf gives the default quiet NaN.
pub fn dot2_f32_f16(a: [u16; 2], b: [u16; 2], c: f32) -> f32 {
    let nan = f32::from_bits(F32_QNAN);
    if a.iter().chain(&b).any(|&h| f16::from_bits(h).is_nan()) || c.is_nan() {
        return nan;
    }
    let c = flush32(c) as f64;
    let p0 = f16_to_f32(a[0]) as f64 * f16_to_f32(b[0]) as f64;
    let p1 = f16_to_f32(a[1]) as f64 * f16_to_f32(b[1]) as f64;
    let s = sum3_odd(p0, p1, c);
    if s.is_nan() {
        return nan;
    }
    flush32(s as f32)
}

/// `v_cvt_u32_f32`: truncate toward zero; NaN and negatives → 0, ≥ 2³² and +inf → 0xFFFFFFFF
/// (the ISA's f32_to_u32; Rust's saturating `as` has exactly these rules).
pub fn cvt_u32_f32(x: f32) -> u32 {
    x as u32
}

/// `v_cvt_f32_u32`: round to nearest even (2²⁴ + 1 → 2²⁴).
pub fn cvt_f32_u32(x: u32) -> f32 {
    x as f32
}

/// `v_cvt_f32_i32`: round to nearest even.
pub fn cvt_f32_i32(x: i32) -> f32 {
    x as f32
}

/// `v_trunc_f32`: toward zero, −0 and ±inf kept, NaN quiet.
pub fn trunc_f32(x: f32) -> f32 {
    quiet(x.trunc())
}

/// `v_rcp_iflag_f32`: 1/x. The hardware's reciprocal is specified to 1 ulp, not correctly
/// rounded, and its exact bits are not public; the emulator returns the correctly rounded
/// 1/x (denormals kept). The kernels use it in integer division, whose correction steps accept
/// any result within the hardware's bound, so the quotient does not depend on this choice.
pub fn rcp_f32(x: f32) -> f32 {
    quiet(1.0 / x)
}

/// `v_cmp_ge_f32` / `s_cmp_ge_f32`: ordered ≥ (false when either is NaN; −0 ≥ +0).
pub fn ge_f32(a: f32, b: f32) -> bool {
    a >= b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_to_f32_is_halfs_to_f32_for_every_bit_pattern() {
        for h in 0..=u16::MAX {
            let want = quiet(f16::from_bits(h).to_f32()).to_bits();
            assert_eq!(f16_to_f32(h).to_bits(), want, "{h:#06x}");
        }
    }

    #[test]
    fn f64_to_f16_rounds_once() {
        // 1 + 2^-11 is the tie between 1 and 1 + 2^-10: to even (1).
        assert_eq!(f64_to_f16(1.0 + 2f64.powi(-11)), 0x3C00);
        // A hair above the tie rounds up; through f32 the hair would be lost (double rounding).
        assert_eq!(f64_to_f16(1.0 + 2f64.powi(-11) + 2f64.powi(-40)), 0x3C01);
        assert_eq!(f64_to_f16(1.0 + 3.0 * 2f64.powi(-11)), 0x3C02);
        assert_eq!(f64_to_f16(65520.0), 0x7C00);
        assert_eq!(f64_to_f16(65519.99), 0x7BFF);
        assert_eq!(f64_to_f16(2f64.powi(-25)), 0x0000); // tie to even: 0
        assert_eq!(f64_to_f16(2f64.powi(-25) + 2f64.powi(-60)), 0x0001);
        assert_eq!(f64_to_f16(-0.0), 0x8000);
    }

    #[test]
    fn sum3_odd_is_exact_where_f64_is_not() {
        // 2^40 + 1 − 2^40 with a tiny term: the f64 sum loses it, round-to-odd keeps its side.
        let s = sum3_odd(2f64.powi(60), 1.0, -(2f64.powi(60)));
        assert_eq!(s, 1.0);
        let s = sum3_odd(1.0, 2f64.powi(-80), 0.0);
        assert!(s > 1.0 && (s as f32) == 1.0);
        assert_eq!(sum3_odd(-0.0, -0.0, -0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(sum3_odd(-0.0, 0.0, -0.0).to_bits(), 0);
    }

    #[test]
    fn fma_f16_is_fused() {
        // (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20; minus 1 − 2^-9 leaves 2^-20 only if fused.
        let a = 0x3C01; // 1 + 2^-10
        let c = f64_to_f16(-(1.0 + 2f64.powi(-9)));
        assert_eq!(fma_f16(a, a, c), f64_to_f16(2f64.powi(-20)));
    }

    #[test]
    fn dot2_rounds_once_and_flushes_f32_denormals() {
        let one = 0x3C00;
        let tiny = 0x0001; // 2^-24
        // 1·1 + 2^-24·2^-24 + (−1): exact sum 2^-48, a normal f32.
        assert_eq!(dot2_f32_f16([one, tiny], [one, tiny], -1.0), 2f32.powi(-48));
        // A denormal c is flushed.
        assert_eq!(dot2_f32_f16([0, 0], [0, 0], f32::from_bits(1)), 0.0);
        assert_eq!(dot2_f32_f16([0x7E00, 0], [one, 0], 0.0).to_bits(), F32_QNAN);
    }
}
