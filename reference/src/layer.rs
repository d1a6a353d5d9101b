//! The logical quantized layer: the meaning every checkpoint format and the resident layout
//! encode. Producers, converters, the reference and the runner all meet here.

use crate::dtype::ActDtype;
use crate::formats::layout::{LayerError, validate_logical};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Logical shape of one linear layer: `Y[M,N] = X[M,K]·Wᵀ`, groups of `group` along K.
/// `group == k` is channelwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LayerShape {
    pub n: usize,
    pub k: usize,
    pub group: usize,
}

impl LayerShape {
    pub fn new(n: usize, k: usize, group: usize) -> Self {
        LayerShape { n, k, group }
    }

    pub fn groups(&self) -> usize {
        self.k.div_ceil(self.group.max(1))
    }

    pub fn is_channelwise(&self) -> bool {
        self.group == self.k
    }
}

crate::named_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Symmetry {
        /// `uint4b8`: z = 8 everywhere, no zero-point tensor.
        Sym = "sym",
        /// `uint4`: explicit z per (n, g).
        Asym = "asym",
    }
}

/// The symmetric zero point of `uint4b8`.
pub const SYMMETRIC_ZERO: u8 = 8;

/// A quantized layer in logical form, row-major and unpadded.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizedLayer {
    pub shape: LayerShape,
    pub dtype: ActDtype,
    /// `[N, K]` codes in 0..15.
    pub q: Vec<u8>,
    /// `[N, groups]` zero points in 0..15; `None` for symmetric (z = 8).
    pub zeros: Option<Vec<u8>>,
    /// `[N, groups]` scales as bits of `dtype`.
    pub scales: Vec<u16>,
    /// `[N]` bias as bits of `dtype`.
    pub bias: Option<Vec<u16>>,
}

impl QuantizedLayer {
    pub fn symmetry(&self) -> Symmetry {
        if self.zeros.is_some() {
            Symmetry::Asym
        } else {
            Symmetry::Sym
        }
    }

    pub fn code(&self, n: usize, k: usize) -> u8 {
        self.q[n * self.shape.k + k]
    }

    pub fn zero(&self, n: usize, g: usize) -> u8 {
        match &self.zeros {
            Some(z) => z[n * self.shape.groups() + g],
            None => SYMMETRIC_ZERO,
        }
    }

    pub fn scale(&self, n: usize, g: usize) -> f64 {
        self.dtype.to_f64(self.scales[n * self.shape.groups() + g])
    }

    /// The exact dequantized weight `(q − z)·s`, in f64 (exact: 5-bit integer times a 16-bit float).
    pub fn weight(&self, n: usize, k: usize) -> f64 {
        let g = k / self.shape.group;
        (self.code(n, k) as f64 - self.zero(n, g) as f64) * self.scale(n, g)
    }

    pub fn bias_value(&self, n: usize) -> f64 {
        self.bias.as_ref().map_or(0.0, |b| self.dtype.to_f64(b[n]))
    }

    /// The whole `[N, K]` weight matrix `(q − z)·s`, exact in f64: what a checkpoint means,
    /// to compare against a producer library's own dequantized tensor. Checks the layer first
    /// (lengths and code ranges), so a malformed layer is a typed error, not a panic.
    pub fn dequantize_all(&self) -> Result<DequantizedWeights, LayerError> {
        validate_logical(self)?;
        let (n, k) = (self.shape.n, self.shape.k);
        let mut values = vec![0.0; n * k];
        values
            .par_chunks_mut(k.max(1))
            .enumerate()
            .for_each(|(row, out)| self.row_weights(row, |v| v, out));
        Ok(DequantizedWeights { n, k, values })
    }

    /// The `[N, K]` weights as bits of the activation dtype, `(q − z)·s` rounded to nearest
    /// even once (from the exact f64 value): what a dequantize-then-matmul library holds before
    /// its matmul, e.g. compressed-tensors' `decompress` in fp16/bf16. A product past the
    /// dtype's range rounds to ±Inf, as it does there.
    pub fn dequantize_rounded(&self) -> Result<Vec<u16>, LayerError> {
        validate_logical(self)?;
        Ok(self.rounded_unchecked())
    }

    /// [`dequantize_rounded`](Self::dequantize_rounded) of a layer known to be well formed (one
    /// the harness generated): rows in parallel, as a 70B layer has 10⁸ weights.
    ///
    /// # Panics
    /// On a code, zero point or length out of range: call the checked form for input.
    pub fn rounded_unchecked(&self) -> Vec<u16> {
        let (n, k) = (self.shape.n, self.shape.k);
        let mut bits = vec![0u16; n * k];
        bits.par_chunks_mut(k.max(1))
            .enumerate()
            .for_each(|(row, out)| self.rounded_row(row, out));
        bits
    }

    /// Row `row` of [`rounded_unchecked`](Self::rounded_unchecked) into `out` (length K), for a
    /// caller that places rows itself (a strided buffer).
    ///
    /// # Panics
    /// As [`rounded_unchecked`](Self::rounded_unchecked), or when `out` is not K long.
    pub fn rounded_row(&self, row: usize, out: &mut [u16]) {
        assert_eq!(out.len(), self.shape.k, "a row of K weights");
        self.row_weights(row, |v| self.dtype.from_f64(v), out);
    }

    /// Row `row` of `(q − z)·s` written into `out` (length K) through `map(exact value)`:
    /// each group's sixteen possible values are mapped once and the codes look them up, so a
    /// row costs 16 maps a group instead of one per weight. Bit for bit what
    /// [`weight`](Self::weight) gives, element by element.
    fn row_weights<T: Copy + Default>(&self, row: usize, map: impl Fn(f64) -> T, out: &mut [T]) {
        let k = self.shape.k;
        let codes = &self.q[row * k..(row + 1) * k];
        let group = self.shape.group.max(1);
        for (g, (outs, qs)) in out.chunks_mut(group).zip(codes.chunks(group)).enumerate() {
            let (z, s) = (f64::from(self.zero(row, g)), self.scale(row, g));
            let mut table = [T::default(); 16];
            for (q, t) in table.iter_mut().enumerate() {
                *t = map((q as f64 - z) * s);
            }
            for (o, &q) in outs.iter_mut().zip(qs) {
                *o = table[usize::from(q)];
            }
        }
    }
}

/// A whole dequantized weight matrix `[N, K]`, row-major, exact in f64.
#[derive(Clone, Debug, PartialEq)]
pub struct DequantizedWeights {
    pub n: usize,
    pub k: usize,
    pub values: Vec<f64>,
}

impl DequantizedWeights {
    pub fn get(&self, n: usize, k: usize) -> f64 {
        self.values[n * self.k + k]
    }
}

/// `X[M, K]` in the activation dtype, row-major with a row stride in elements (≥ K).
#[derive(Clone, Debug, PartialEq)]
pub struct Activations {
    pub m: usize,
    pub k: usize,
    pub row_stride: usize,
    pub dtype: ActDtype,
    pub data: Vec<u16>,
}

impl Activations {
    pub fn get(&self, m: usize, k: usize) -> f64 {
        self.dtype.to_f64(self.data[m * self.row_stride + k])
    }

    /// The same values with a wider row stride (padding filled with NaN so a kernel that reads
    /// it shows up).
    pub fn with_row_stride(&self, row_stride: usize) -> Activations {
        assert!(row_stride >= self.k);
        let mut data =
            vec![self.dtype.poison_bits(); self.m.saturating_sub(1) * row_stride + self.k];
        for m in 0..self.m {
            data[m * row_stride..m * row_stride + self.k]
                .copy_from_slice(&self.data[m * self.row_stride..m * self.row_stride + self.k]);
        }
        Activations {
            m: self.m,
            k: self.k,
            row_stride,
            dtype: self.dtype,
            data,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{DataClass, DataSpec, generate_layer};
    use crate::formats::Producer;

    fn layer(dtype: ActDtype, symmetry: Symmetry) -> QuantizedLayer {
        let spec = DataSpec {
            class: DataClass::Realistic,
            m: 1,
            shape: LayerShape::new(16, 64, 32),
            dtype,
            symmetry,
            with_bias: true,
        };
        generate_layer(7, &spec).unwrap()
    }

    /// Every element is `(q − z)·s` of its own group, computed here from the fields.
    #[test]
    fn dequantize_all_is_q_minus_z_times_s_per_element() {
        for dtype in ActDtype::ALL {
            for sym in [Symmetry::Sym, Symmetry::Asym] {
                let l = layer(dtype, sym);
                let w = l.dequantize_all().unwrap();
                assert_eq!((w.n, w.k, w.values.len()), (16, 64, 16 * 64));
                for n in 0..16 {
                    for k in 0..64 {
                        let g = k / 32;
                        let z = l.zeros.as_ref().map_or(8.0, |z| f64::from(z[n * 2 + g]));
                        let s = dtype.to_f64(l.scales[n * 2 + g]);
                        assert_eq!(w.get(n, k), (f64::from(l.q[n * 64 + k]) - z) * s);
                    }
                }
            }
        }
    }

    /// Rounded once from the exact value: 15·s with a full bf16 significand needs 12 bits, so
    /// the rounded weight differs from the exact one (and ties go to even).
    #[test]
    fn dequantize_rounded_rounds_the_exact_weight_once() {
        let dtype = ActDtype::Bf16;
        let s = 1.0 + 3.0 / 128.0; // bf16: 8 significant bits
        let mut l = QuantizedLayer {
            shape: LayerShape::new(1, 8, 8),
            dtype,
            q: vec![0, 1, 2, 3, 8, 13, 15, 15],
            zeros: Some(vec![0]),
            scales: vec![dtype.from_f64(s)],
            bias: None,
        };
        assert_eq!(dtype.to_f64(l.scales[0]), s);
        let exact = l.dequantize_all().unwrap();
        let rounded = l.dequantize_rounded().unwrap();
        for (k, (&b, &v)) in rounded.iter().zip(&exact.values).enumerate() {
            assert_eq!(b, dtype.from_f64(v), "k = {k}");
        }
        // 15·(1 + 3/128) = 15.3515625; bf16 spacing at 8..16 is 1/16: 15.375 is nearest.
        assert_eq!(exact.values[7], 15.3515625);
        assert_eq!(dtype.to_f64(rounded[7]), 15.375);
        // 2·s = 2.046875 is exact in bf16 (spacing 1/64 at 2..4); 3·s = 3.0703125 is 196.5
        // spacings: the tie goes to the even 196, 3.0625.
        assert_eq!(dtype.to_f64(rounded[2]), exact.values[2]);
        assert_eq!(dtype.to_f64(rounded[3]), 3.0625);
        // A product past the range rounds to Inf, as in the library.
        l.scales = vec![dtype.from_f64(2f64.powi(126) * 1.5)];
        l.q = vec![15; 8];
        let r = l.dequantize_rounded().unwrap();
        assert!(
            r.iter()
                .all(|&b| !dtype.is_finite_bits(b) && !dtype.is_nan_bits(b))
        );
    }

    /// The per-group table gives what `weight` gives element by element, rounded once: every
    /// data class (saturating scales that round to Inf among them), both dtypes and symmetries,
    /// a group of K (one group a row) and a ragged last group.
    #[test]
    fn rounded_rows_equal_the_elementwise_weights() {
        let mut layers = 0;
        for class in DataClass::ALL {
            for (n, k, group) in [(16, 64, 32), (8, 96, 96), (5, 80, 32)] {
                for dtype in ActDtype::ALL {
                    for symmetry in [Symmetry::Sym, Symmetry::Asym] {
                        let spec = DataSpec {
                            class,
                            m: 1,
                            shape: LayerShape::new(n, k, group),
                            dtype,
                            symmetry,
                            with_bias: false,
                        };
                        let Ok(l) = generate_layer(11, &spec) else {
                            continue;
                        };
                        layers += 1;
                        let rounded = l.rounded_unchecked();
                        let exact = l.dequantize_all().unwrap();
                        for (i, (&b, &v)) in rounded.iter().zip(&exact.values).enumerate() {
                            let (r, c) = (i / k, i % k);
                            assert_eq!(
                                v.to_bits(),
                                l.weight(r, c).to_bits(),
                                "{spec:?} [{r}, {c}]"
                            );
                            assert_eq!(b, dtype.from_f64(l.weight(r, c)), "{spec:?} [{r}, {c}]");
                        }
                    }
                }
            }
        }
        println!("{layers} layers compared");
        assert!(
            layers >= DataClass::ALL.len() * 8,
            "only {layers} layers generated"
        );
    }

    #[test]
    fn a_malformed_layer_is_a_typed_error() {
        let mut l = layer(ActDtype::F16, Symmetry::Asym);
        l.scales.pop();
        assert!(matches!(
            l.dequantize_all(),
            Err(LayerError::Length {
                tensor: "scales",
                ..
            })
        ));
        let mut l = layer(ActDtype::F16, Symmetry::Sym);
        l.q[5] = 16;
        assert!(matches!(
            l.dequantize_rounded(),
            Err(LayerError::CodeRange { index: 5, .. })
        ));
    }

    /// Every producer's checkpoint dequantizes, through its own semantics, to the layer it was
    /// written from.
    #[test]
    fn checkpoint_dequantize_all_reads_the_producer_semantics() {
        for dtype in ActDtype::ALL {
            for sym in [Symmetry::Sym, Symmetry::Asym] {
                let l = layer(dtype, sym);
                let want = l.dequantize_all().unwrap();
                for p in Producer::ALL {
                    let ckpt = p.build(&l).unwrap();
                    assert_eq!(ckpt.dequantize_all().unwrap(), want, "{p}");
                }
            }
        }
    }
}
