//! The logical quantized layer: the meaning every checkpoint format and the resident layout
//! encode. Producers, converters, the reference and the runner all meet here.

use crate::dtype::ActDtype;
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Symmetry {
    /// `uint4b8`: z = 8 everywhere, no zero-point tensor.
    Sym,
    /// `uint4`: explicit z per (n, g).
    Asym,
}

impl Symmetry {
    pub fn name(self) -> &'static str {
        match self {
            Symmetry::Sym => "sym",
            Symmetry::Asym => "asym",
        }
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
