//! The asymmetric carrier (docs/contract.md §2, docs/field.md §0 item 7): the fork's fused path reads an asymmetric
//! layer's scales and zero points as one u32 word per (n, g), `[N, K/G]`, never padded. The low
//! half holds the scale's bits; the high half holds `bias_eff = −z·s` rounded to fp16 (fp16
//! layers) or the raw z (bf16 layers). A kernel then forms the fp16 weight as `q·s + bias_eff`,
//! which is not bit-exact against `(q − z)·s` (docs/field.md §6 item 9): [`Carrier::weight`] says what it
//! gives under either evaluation, and the recipe's `pre_rounded_bias` bounds it.
//!
//! Symmetric layers have no carrier (they read their scales directly), and the legacy unpacked
//! zero points are not read: both are typed refusals.

use super::resident::{PackedZeroPoints, ResidentLayer, ResidentScales, ZeroPoints};
use crate::dtype::ActDtype;

/// `[N, K/G]` u32 carrier words, rows `groups` words apart (the carrier has no padding).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Carrier {
    pub words: Vec<u32>,
    pub n: usize,
    pub groups: usize,
    /// The activation dtype of the layer: it decides what the high half holds.
    pub dtype: ActDtype,
}

/// How a kernel evaluates `q·s + bias_eff` in fp16. Both round `bias_eff` beforehand; the bound
/// of the pre-rounded-bias recipe covers both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BiasEvaluation {
    /// One fused multiply-add, one rounding: `fl(q·s + b)`.
    Fma,
    /// A rounded multiply, then a rounded add: `fl(fl(q·s) + b)`.
    MulAdd,
}

impl BiasEvaluation {
    pub const ALL: [BiasEvaluation; 2] = [BiasEvaluation::Fma, BiasEvaluation::MulAdd];
}

/// Why a layer has no carrier.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CarrierError {
    #[error(
        "carrier: the layer is symmetric (no zero points); symmetric layers read their scales directly and have no carrier"
    )]
    SymmetricLayer,
    #[error(
        "carrier: zero points must be packed u32 [N/8, K/G] = {}; got the legacy unpacked {got}",
        fmt_dims(.expected)
    )]
    UnpackedZeroPoints { expected: Vec<usize>, got: String },
    #[error("carrier: {tensor} must have shape {formula} = {}; got {}", fmt_dims(.expected), fmt_dims(.got))]
    ShapeMismatch {
        tensor: &'static str,
        formula: &'static str,
        expected: Vec<usize>,
        got: Vec<usize>,
    },
    #[error(
        "carrier: N = {n} is not a multiple of 8; the carrier is built for fused_carrier, which takes whole zero-point words [N/8, K/G] (a partial last word runs on the fallback)"
    )]
    RaggedN { n: usize },
    #[error("carrier: scales are {got}, the layer is {expected}")]
    DtypeMismatch { expected: ActDtype, got: ActDtype },
    #[error(
        "carrier: {tensor} holds {got} elements; its [N, K/G] view with row stride {stride} needs {needed}"
    )]
    TooFewElements {
        tensor: &'static str,
        stride: usize,
        needed: usize,
        got: usize,
    },
    #[error("carrier: scale at (n = {n}, g = {g}) is NaN or infinite")]
    NonFiniteScale { n: usize, g: usize },
    #[error("carrier: bias_eff = −z·s = −{z}·{scale} at (n = {n}, g = {g}) overflows fp16")]
    BiasOverflow {
        n: usize,
        g: usize,
        z: u8,
        scale: f64,
    },
}

impl Carrier {
    /// Builds the carrier from resident scales (any row stride) and packed zero points.
    pub fn build(
        scales: &ResidentScales,
        zeros: Option<&ZeroPoints>,
    ) -> Result<Carrier, CarrierError> {
        let zeros = match zeros {
            None => return Err(CarrierError::SymmetricLayer),
            Some(ZeroPoints::UnpackedLegacy(u)) => {
                return Err(CarrierError::UnpackedZeroPoints {
                    expected: vec![u.n / 8, u.groups],
                    got: format!("{} {}", u.dtype, fmt_dims(&[u.n, u.groups])),
                });
            }
            Some(ZeroPoints::Packed(p)) => p,
        };
        let (n, groups) = (scales.n, scales.groups);
        check_packed(zeros, n, groups)?;
        if scales.row_stride < groups {
            return Err(CarrierError::ShapeMismatch {
                tensor: "scales row stride",
                formula: "[≥ K/G]",
                expected: vec![groups],
                got: vec![scales.row_stride],
            });
        }
        let needed = if n == 0 {
            0
        } else {
            (n - 1) * scales.row_stride + groups
        };
        if scales.bits.len() < needed {
            return Err(CarrierError::TooFewElements {
                tensor: "scales",
                stride: scales.row_stride,
                needed,
                got: scales.bits.len(),
            });
        }
        let dtype = scales.dtype;
        let mut words = Vec::with_capacity(n * groups);
        for r in 0..n {
            for g in 0..groups {
                let s_bits = scales.bits[r * scales.row_stride + g];
                let z = zeros.get(r, g);
                words.push(pack_word(dtype, s_bits, z, r, g)?);
            }
        }
        Ok(Carrier {
            words,
            n,
            groups,
            dtype,
        })
    }

    /// The carrier of a resident layer (its scales and packed zero points).
    pub fn from_resident(layer: &ResidentLayer) -> Result<Carrier, CarrierError> {
        if layer.scales.dtype != layer.dtype {
            return Err(CarrierError::DtypeMismatch {
                expected: layer.dtype,
                got: layer.scales.dtype,
            });
        }
        Carrier::build(&layer.scales, layer.zeros.as_ref())
    }

    /// The word of (n, g).
    pub fn word(&self, n: usize, g: usize) -> u32 {
        self.words[n * self.groups + g]
    }

    /// The scale's bits (low half).
    pub fn scale_bits(&self, n: usize, g: usize) -> u16 {
        (self.word(n, g) & 0xFFFF) as u16
    }

    /// The high half: fp16 `bias_eff` bits, or the raw z (bf16).
    pub fn high(&self, n: usize, g: usize) -> u16 {
        (self.word(n, g) >> 16) as u16
    }

    /// The zero point the word encodes: the raw z (bf16), or `−bias_eff / s` rounded to the
    /// nearest integer (fp16; exact because `|fl(z·s) − z·s| ≤ 2⁻¹¹·15·|s| < |s|/2`). `None`
    /// where it cannot be recovered: a zero scale (the bias is ±0 whatever z), or a value that
    /// is no code in 0..=15.
    pub fn zero(&self, n: usize, g: usize) -> Option<u8> {
        let hi = self.high(n, g);
        match self.dtype {
            ActDtype::Bf16 => u8::try_from(hi).ok().filter(|z| *z <= 15),
            ActDtype::F16 => {
                let s = ActDtype::F16.to_f64(self.scale_bits(n, g));
                let b = ActDtype::F16.to_f64(hi);
                if s == 0.0 || !s.is_finite() || !b.is_finite() {
                    return None;
                }
                let z = (-b / s).round();
                ((0.0..=15.0).contains(&z) && ActDtype::F16.from_f64(-z * s) == hi)
                    .then_some(z as u8)
            }
        }
    }

    /// The weight a carrier kernel forms from code `q` in group (n, g), as activation-dtype
    /// bits. fp16: `q·s + bias_eff` under `eval`; bf16: `(q − z)·s` rounded once (the raw z
    /// leaves nothing pre-rounded; `eval` does not matter).
    pub fn weight(&self, q: u8, n: usize, g: usize, eval: BiasEvaluation) -> u16 {
        let d = self.dtype;
        let s = d.to_f64(self.scale_bits(n, g));
        let hi = self.high(n, g);
        let q = f64::from(q);
        match d {
            // q·s, q·s + b and (q − z)·s are exact in f64 (≤ 16 significant bits each).
            ActDtype::Bf16 => d.from_f64((q - f64::from(hi)) * s),
            ActDtype::F16 => {
                let b = d.to_f64(hi);
                match eval {
                    BiasEvaluation::Fma => d.from_f64(q * s + b),
                    BiasEvaluation::MulAdd => d.from_f64(d.to_f64(d.from_f64(q * s)) + b),
                }
            }
        }
    }
}

/// `[a, b]`, the form error messages use.
fn fmt_dims(dims: &[usize]) -> String {
    let parts: Vec<String> = dims.iter().map(usize::to_string).collect();
    format!("[{}]", parts.join(", "))
}

fn check_packed(z: &PackedZeroPoints, n: usize, groups: usize) -> Result<(), CarrierError> {
    let packed = |got: Vec<usize>| CarrierError::ShapeMismatch {
        tensor: "zero points",
        formula: "[N/8, K/G]",
        expected: vec![n / 8, groups],
        got,
    };
    if (z.n, z.groups) != (n, groups) {
        return Err(packed(vec![z.n.div_ceil(8), z.groups]));
    }
    if !n.is_multiple_of(8) {
        return Err(CarrierError::RaggedN { n });
    }
    if z.words.len() != n / 8 * groups {
        return Err(CarrierError::TooFewElements {
            tensor: "zero points",
            stride: groups,
            needed: n / 8 * groups,
            got: z.words.len(),
        });
    }
    Ok(())
}

/// One word: scale bits low; fp16 `fl(−z·s)` or the raw z high.
fn pack_word(dtype: ActDtype, s_bits: u16, z: u8, n: usize, g: usize) -> Result<u32, CarrierError> {
    if !dtype.is_finite_bits(s_bits) {
        return Err(CarrierError::NonFiniteScale { n, g });
    }
    let hi = match dtype {
        ActDtype::Bf16 => u16::from(z),
        ActDtype::F16 => {
            let s = dtype.to_f64(s_bits);
            // −z·s is exact in f64; one rounding to nearest even.
            let b = dtype.from_f64(-f64::from(z) * s);
            if !dtype.is_finite_bits(b) {
                return Err(CarrierError::BiasOverflow { n, g, z, scale: s });
            }
            b
        }
    };
    Ok(u32::from(s_bits) | (u32::from(hi) << 16))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::RowPadding;
    use crate::layer::{LayerShape, QuantizedLayer};

    fn layer(dtype: ActDtype, zeros: Option<Vec<u8>>) -> QuantizedLayer {
        let (n, k, g) = (16, 64, 32);
        QuantizedLayer {
            shape: LayerShape::new(n, k, g),
            dtype,
            q: (0..n * k).map(|i| (i % 16) as u8).collect(),
            zeros,
            scales: (0..n * 2)
                .map(|i| dtype.from_f64(0.01 * (1 + i) as f64))
                .collect(),
            bias: None,
        }
    }

    #[test]
    fn the_words_hold_scale_bits_low_and_bias_or_z_high() {
        let zeros: Vec<u8> = (0..32).map(|i| (i * 5 % 16) as u8).collect();
        for dtype in ActDtype::ALL {
            let l = layer(dtype, Some(zeros.clone()));
            let padding = RowPadding {
                weight_extra_bytes: 0,
                scale_extra_elems: 3,
            };
            let r = ResidentLayer::from_logical(&l, padding).unwrap();
            let c = Carrier::from_resident(&r).unwrap();
            assert_eq!((c.n, c.groups, c.words.len()), (16, 2, 32));
            for n in 0..16 {
                for g in 0..2 {
                    let z = zeros[n * 2 + g];
                    let s = l.scales[n * 2 + g];
                    assert_eq!(c.scale_bits(n, g), s);
                    let hi = match dtype {
                        ActDtype::F16 => dtype.from_f64(-f64::from(z) * dtype.to_f64(s)),
                        ActDtype::Bf16 => u16::from(z),
                    };
                    assert_eq!(c.high(n, g), hi, "{dtype} ({n}, {g})");
                    assert_eq!(c.zero(n, g), Some(z));
                }
            }
        }
    }

    #[test]
    fn a_ragged_n_has_no_carrier_and_says_why() {
        let layer = QuantizedLayer {
            shape: LayerShape::new(12, 32, 32),
            dtype: ActDtype::F16,
            q: vec![3; 12 * 32],
            zeros: Some(vec![5; 12]),
            scales: vec![ActDtype::F16.from_f64(0.5); 12],
            bias: None,
        };
        let r = ResidentLayer::from_logical(&layer, RowPadding::NONE).unwrap();
        let e = Carrier::from_resident(&r).unwrap_err();
        assert_eq!(e, CarrierError::RaggedN { n: 12 });
        assert!(
            e.to_string().contains("N = 12 is not a multiple of 8"),
            "{e}"
        );
    }

    #[test]
    fn layers_without_packed_zero_points_have_no_carrier() {
        let r = ResidentLayer::from_logical(&layer(ActDtype::F16, None), RowPadding::NONE).unwrap();
        assert_eq!(
            Carrier::from_resident(&r),
            Err(CarrierError::SymmetricLayer)
        );
    }
}
