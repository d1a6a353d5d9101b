//! The activation dtype shared by X, scales, bias and Y.

use half::{bf16, f16};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActDtype {
    F16,
    Bf16,
}

impl ActDtype {
    pub const ALL: [ActDtype; 2] = [ActDtype::F16, ActDtype::Bf16];

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

    /// The overflow threshold of round-to-nearest-even (SPEC §6 "The range edge"): the largest
    /// finite value plus half its ulp. A real of magnitude ≥ this rounds to ±Inf (the tie at the
    /// threshold goes to the even neighbour, which is Inf); anything smaller rounds to a finite
    /// value. fp16 65504 + 16 = 65520; bf16 2¹²⁸ − 2¹²⁰ + 2¹¹⁹ = 2¹²⁸·(1 − 2⁻⁹).
    pub fn overflow_threshold(self) -> f64 {
        match self {
            ActDtype::F16 => 65520.0,
            ActDtype::Bf16 => 2f64.powi(128) * (1.0 - 2f64.powi(-9)),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ActDtype::F16 => "f16",
            ActDtype::Bf16 => "bf16",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "f16" | "fp16" | "float16" | "half" => Some(ActDtype::F16),
            "bf16" | "bfloat16" => Some(ActDtype::Bf16),
            _ => None,
        }
    }

    /// Round-to-nearest-even of an f32 into this format; returns the bits.
    pub fn from_f32(self, v: f32) -> u16 {
        match self {
            ActDtype::F16 => f16::from_f32(v).to_bits(),
            ActDtype::Bf16 => bf16::from_f32(v).to_bits(),
        }
    }

    /// Round-to-nearest-even of an f64 (single rounding, no detour through f32).
    pub fn from_f64(self, v: f64) -> u16 {
        match self {
            ActDtype::F16 => f16::from_f64(v).to_bits(),
            ActDtype::Bf16 => bf16::from_f64(v).to_bits(),
        }
    }

    pub fn to_f32(self, bits: u16) -> f32 {
        match self {
            ActDtype::F16 => f16::from_bits(bits).to_f32(),
            ActDtype::Bf16 => bf16::from_bits(bits).to_f32(),
        }
    }

    pub fn to_f64(self, bits: u16) -> f64 {
        self.to_f32(bits) as f64
    }

    /// The NaN pattern written into outputs before a launch (DESIGN rule 7).
    pub fn poison_bits(self) -> u16 {
        match self {
            ActDtype::F16 => 0x7E01,
            ActDtype::Bf16 => 0x7FC1,
        }
    }

    /// Whether the bits are a NaN or an infinity.
    pub fn is_finite_bits(self, bits: u16) -> bool {
        let exp = self.exponent_mask();
        bits & exp != exp
    }

    /// Whether the bits are a NaN.
    pub fn is_nan_bits(self, bits: u16) -> bool {
        !self.is_finite_bits(bits) && bits & self.mantissa_mask() != 0
    }

    fn exponent_mask(self) -> u16 {
        match self {
            ActDtype::F16 => 0x7C00,
            ActDtype::Bf16 => 0x7F80,
        }
    }

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

impl std::fmt::Display for ActDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
