//! The activation dtype shared by X, scales, bias and Y.

use half::{bf16, f16};

crate::named_enum! {
    /// Case files and reports spell it `f16`/`bf16`; the command line also takes torch's and
    /// Hugging Face's spellings.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum ActDtype {
        F16 = "f16" | "fp16" | "float16" | "half",
        Bf16 = "bf16" | "bfloat16",
    }
}

/// 2^e for the normal f64 exponents (−1022..=1023), built from its bits (`powi` is a libm loop).
fn pow2(e: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&e), "2^{e} is not a normal f64");
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// `v` (not NaN) rounded to f32 to odd: toward zero, with the lowest bit set when anything
/// was dropped (see [`ActDtype::from_f64`]). Without branches: whether the nearest f32 lies
/// above or below is a coin toss per element, and this runs once per compared element.
#[inline]
fn f32_to_odd(v: f64) -> f32 {
    let nearest = v as f32;
    let back = f64::from(nearest);
    // The magnitude's bits are ordered as the magnitudes: one step toward zero (f32::MAX for
    // a value past it), then sticky.
    let toward_zero = nearest
        .to_bits()
        .wrapping_sub(u32::from(back.abs() > v.abs()));
    f32::from_bits(toward_zero | u32::from(back != v))
}

/// Round to nearest even of an f32 (not NaN) to bf16 on the bits: add just under half of the
/// dropped unit, plus the kept lowest bit; a carry out of the significand steps the exponent,
/// up to Inf past the threshold.
#[inline]
fn bf16_nearest_even(v: f32) -> u16 {
    let b = v.to_bits();
    (b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16) as u16
}

impl ActDtype {
    /// Unit roundoff of round-to-nearest in this format (half an ulp at 1.0).
    pub fn unit_roundoff(self) -> f64 {
        match self {
            ActDtype::F16 => 2f64.powi(-11),
            ActDtype::Bf16 => 2f64.powi(-8),
        }
    }

    /// The largest finite value: fp16 65504, bf16 (2 − 2⁻⁷)·2¹²⁷.
    pub fn max_finite(self) -> f64 {
        match self {
            ActDtype::F16 => 65504.0,
            ActDtype::Bf16 => (2.0 - 2f64.powi(-7)) * 2f64.powi(127),
        }
    }

    /// The overflow threshold of round-to-nearest-even (docs/contract.md §6 "The range edge"): the largest
    /// finite value plus half its ulp. A real of magnitude ≥ this rounds to ±Inf (the tie at the
    /// threshold goes to the even neighbour, which is Inf); anything smaller rounds to a finite
    /// value. fp16 65504 + 16 = 65520; bf16 2¹²⁸ − 2¹²⁰ + 2¹¹⁹ = 2¹²⁸·(1 − 2⁻⁹).
    pub fn overflow_threshold(self) -> f64 {
        match self {
            ActDtype::F16 => 65520.0,
            ActDtype::Bf16 => pow2(128) * (1.0 - pow2(-9)),
        }
    }

    /// Round-to-nearest-even of an f32 into this format; returns the bits.
    #[inline]
    pub fn from_f32(self, v: f32) -> u16 {
        match self {
            ActDtype::F16 => f16::from_f32(v).to_bits(),
            ActDtype::Bf16 => bf16::from_f32(v).to_bits(),
        }
    }

    /// Round-to-nearest-even of an f64, a single rounding on every platform. (`half`'s own
    /// conversions are not: on x86 with F16C its f16 path goes through f32, and its software
    /// paths drop the low 32 bits of the f64 significand before rounding; both round values just
    /// off a tie, e.g. 65519.99999 to Inf, the wrong way.)
    ///
    /// Through f32 rounded to odd: f64 → f32 truncated toward zero with the lowest bit set when
    /// anything was dropped, then one round-to-nearest-even into the format. With f32 carrying
    /// at least two more bits than f16 (11) and bf16 (8) at every exponent the formats reach
    /// (their subnormals included), the odd bit keeps ties and near-ties apart, so the two steps
    /// give the single rounding (Boldo and Melquiond, "Emulation of FMA and correctly rounded
    /// sums: proved algorithms using rounding to odd", 2008). A handful of instructions: this
    /// runs once per generated and once per compared element.
    #[inline]
    pub fn from_f64(self, v: f64) -> u16 {
        if v.is_nan() {
            return self.nan_bits();
        }
        let odd = f32_to_odd(v);
        match self {
            ActDtype::F16 => f16::from_f32(odd).to_bits(),
            ActDtype::Bf16 => bf16_nearest_even(odd),
        }
    }

    /// [`ActDtype::from_f64`] of every value of `src` into `dst` (same length), in bulk: the
    /// comparison rounds every reference element (the bits a correctly rounding kernel gives).
    pub fn from_f64_slice(self, src: &[f64], dst: &mut [u16]) {
        const BLOCK: usize = 256;
        let mut odd = [0f32; BLOCK];
        for (s, d) in src.chunks(BLOCK).zip(dst.chunks_mut(BLOCK)) {
            let odd = &mut odd[..s.len()];
            odd.iter_mut().zip(s).for_each(|(o, &v)| *o = f32_to_odd(v));
            match self {
                ActDtype::F16 => self.from_f32_slice(odd, d),
                ActDtype::Bf16 => d
                    .iter_mut()
                    .zip(odd.iter())
                    .for_each(|(d, &o)| *d = bf16_nearest_even(o)),
            }
            for (d, v) in d.iter_mut().zip(s) {
                if v.is_nan() {
                    *d = self.nan_bits();
                }
            }
        }
    }

    /// The NaN [`ActDtype::from_f64`] gives.
    fn nan_bits(self) -> u16 {
        match self {
            ActDtype::F16 => 0x7E00,
            ActDtype::Bf16 => 0x7FC0,
        }
    }

    /// [`ActDtype::from_f32`] of every value of `src` into `dst` (same length), in bulk.
    pub fn from_f32_slice(self, src: &[f32], dst: &mut [u16]) {
        use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
        match self {
            ActDtype::F16 => dst
                .reinterpret_cast_mut::<f16>()
                .convert_from_f32_slice(src),
            ActDtype::Bf16 => dst
                .reinterpret_cast_mut::<bf16>()
                .convert_from_f32_slice(src),
        }
    }

    #[inline]
    pub fn to_f32(self, bits: u16) -> f32 {
        match self {
            ActDtype::F16 => f16::from_bits(bits).to_f32(),
            ActDtype::Bf16 => bf16::from_bits(bits).to_f32(),
        }
    }

    #[inline]
    pub fn to_f64(self, bits: u16) -> f64 {
        self.to_f32(bits) as f64
    }

    /// The NaN pattern written into outputs before a launch (ARCHITECTURE.md rule 7).
    #[inline]
    pub fn poison_bits(self) -> u16 {
        match self {
            ActDtype::F16 => 0x7E01,
            ActDtype::Bf16 => 0x7FC1,
        }
    }

    /// Whether the bits are a NaN or an infinity.
    #[inline]
    pub fn is_finite_bits(self, bits: u16) -> bool {
        let exp = self.exponent_mask();
        bits & exp != exp
    }

    /// Whether the bits are a NaN.
    #[inline]
    pub fn is_nan_bits(self, bits: u16) -> bool {
        !self.is_finite_bits(bits) && bits & self.mantissa_mask() != 0
    }

    #[inline]
    fn exponent_mask(self) -> u16 {
        match self {
            ActDtype::F16 => 0x7C00,
            ActDtype::Bf16 => 0x7F80,
        }
    }

    #[inline]
    fn mantissa_mask(self) -> u16 {
        match self {
            ActDtype::F16 => 0x03FF,
            ActDtype::Bf16 => 0x007F,
        }
    }

    pub fn size_bytes(self) -> usize {
        2
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    /// The rounding as first written (libm's `powi` for the quantum, `half`'s f64 conversion of
    /// the representable result): the fast path must give the same bits.
    fn from_f64_as_written(d: ActDtype, v: f64) -> u16 {
        let (digits, min_exp) = match d {
            ActDtype::F16 => (11, -14),
            ActDtype::Bf16 => (8, -126),
        };
        if v.is_nan() {
            return d.from_f64(v);
        }
        let sign: u16 = if v.is_sign_negative() { 0x8000 } else { 0 };
        let a = v.abs();
        let exact = |r: f64| match d {
            ActDtype::F16 => f16::from_f64(r).to_bits(),
            ActDtype::Bf16 => bf16::from_f64(r).to_bits(),
        };
        if a >= d.overflow_threshold() {
            return sign | exact(f64::INFINITY);
        }
        if a == 0.0 {
            return sign;
        }
        let e = ((a.to_bits() >> 52) as i32 - 1023).max(min_exp);
        let quantum = 2f64.powi(e - (digits - 1));
        sign | exact((a / quantum).round_ties_even() * quantum)
    }

    #[test]
    fn rounding_through_f32_to_odd_gives_the_bits_of_the_rounding_as_written() {
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for d in [ActDtype::F16, ActDtype::Bf16] {
            assert_eq!(pow2(-9), 2f64.powi(-9));
            assert_eq!(pow2(128), 2f64.powi(128));
            for _ in 0..200_000 {
                // Every exponent from far below the subnormals to past the overflow.
                let e = r.random_range(-160..140);
                let v = f64::from_bits(
                    r.random::<u64>() & !(0x7FFu64 << 52) | ((e + 1023) as u64) << 52,
                );
                assert_eq!(d.from_f64(v), from_f64_as_written(d, v), "{d:?} {v:e}");
                // Ties and neighbours of representable values.
                let bits = d.from_f64(v);
                let x = d.to_f64(bits);
                // The exact midpoint to the next value up (a tie) and its f64 neighbours, which
                // differ from the tie only in bits that f32 drops.
                let next = d.to_f64(bits.wrapping_add(1) & 0x7FFF | bits & 0x8000);
                let mid = (x + next) / 2.0;
                let (below, above) = (mid.next_down(), mid.next_up());
                for t in [
                    x,
                    x * (1.0 + d.unit_roundoff()),
                    x * (1.0 - d.unit_roundoff() / 2.0),
                    mid,
                    below,
                    above,
                ] {
                    assert_eq!(d.from_f64(t), from_f64_as_written(d, t), "{d:?} {t:e}");
                }
            }
        }
    }

    use super::*;

    #[test]
    fn the_bulk_rounding_from_f64_is_the_one_by_one_rounding() {
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let src: Vec<f64> = (0..1031)
            .map(|i| match i % 9 {
                0 => f64::NAN,
                1 => f64::INFINITY,
                2 => -65520.0,
                3 => f64::from_bits(r.random()),
                _ => r.random_range(-8.0..8.0) * 2f64.powi(r.random_range(-140..130)),
            })
            .collect();
        for d in ActDtype::ALL {
            let mut bulk = vec![0u16; src.len()];
            d.from_f64_slice(&src, &mut bulk);
            for (v, b) in src.iter().zip(&bulk) {
                assert_eq!(*b, d.from_f64(*v), "{d} {v:e}");
            }
        }
    }

    #[test]
    fn the_bulk_conversion_from_f32_is_the_one_by_one_conversion() {
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let src: Vec<f32> = (0..4099)
            .map(|i| match i % 7 {
                0 => f32::from_bits(r.random()),
                1 => 65520.0 * (1.0 + (i as f32) * 1e-7),
                _ => r.random_range(-8.0f32..8.0) * 2f32.powi(r.random_range(-30..20)),
            })
            .collect();
        for d in ActDtype::ALL {
            let mut bulk = vec![0u16; src.len()];
            d.from_f32_slice(&src, &mut bulk);
            for (v, b) in src.iter().zip(&bulk) {
                let one = d.from_f32(*v);
                assert!(
                    *b == one || (d.is_nan_bits(*b) && d.is_nan_bits(one)),
                    "{d} {v:e}"
                );
            }
        }
    }

    /// Single rounding from f64: values just off a tie and just below the overflow threshold,
    /// which a detour through f32 (or a truncated significand) rounds the wrong way.
    #[test]
    fn from_f64_rounds_once() {
        let below = |v: f64| f64::from_bits(v.to_bits() - 1);
        let above = |v: f64| f64::from_bits(v.to_bits() + 1);
        // fp16: 1 + 2⁻¹¹ is the tie between 1 and 1 + 2⁻¹⁰.
        let tie = 1.0 + 2f64.powi(-11);
        assert_eq!(ActDtype::F16.from_f64(tie), 0x3C00);
        assert_eq!(ActDtype::F16.from_f64(above(tie)), 0x3C01);
        assert_eq!(ActDtype::F16.from_f64(below(65520.0)), 0x7BFF);
        assert_eq!(ActDtype::F16.from_f64(65520.0), 0x7C00);
        assert_eq!(ActDtype::F16.from_f64(-65520.0), 0xFC00);
        // Subnormals: 2⁻²⁵ is the tie between 0 and the smallest subnormal.
        assert_eq!(ActDtype::F16.from_f64(2f64.powi(-25)), 0x0000);
        assert_eq!(ActDtype::F16.from_f64(above(2f64.powi(-25))), 0x0001);
        assert_eq!(ActDtype::F16.from_f64(-3.0 * 2f64.powi(-25)), 0x8002);
        // bf16: 1 + 2⁻⁸ is the tie between 1 and 1 + 2⁻⁷; just above it only the low 32 bits
        // of the f64 significand differ.
        let tie = 1.0 + 2f64.powi(-8);
        assert_eq!(ActDtype::Bf16.from_f64(tie), 0x3F80);
        assert_eq!(ActDtype::Bf16.from_f64(above(tie)), 0x3F81);
        let t = 2f64.powi(128) - 2f64.powi(119);
        assert_eq!(ActDtype::Bf16.from_f64(below(t)), 0x7F7F);
        assert_eq!(ActDtype::Bf16.from_f64(t), 0x7F80);
        assert_eq!(ActDtype::Bf16.from_f64(2f64.powi(-134)), 0x0000);
        assert_eq!(ActDtype::Bf16.from_f64(above(2f64.powi(-134))), 0x0001);
        for d in ActDtype::ALL {
            assert!(d.is_nan_bits(d.from_f64(f64::NAN)));
            assert_eq!(d.from_f64(-0.0), 0x8000);
            assert_eq!(d.to_f64(d.from_f64(f64::NEG_INFINITY)), f64::NEG_INFINITY);
            assert_eq!(d.to_f64(d.from_f64(1e300)), f64::INFINITY);
            // Exhaustively: every finite value converts back to itself.
            for b in 0..=u16::MAX {
                if d.is_finite_bits(b) {
                    let v = d.to_f64(b);
                    let back = d.from_f64(v);
                    assert!(
                        back == b || (v == 0.0 && back & 0x7FFF == 0),
                        "{d} {b:#06x}"
                    );
                }
            }
        }
    }
}
