//! The resident layout (docs/contract.md §2): what every kernel of the set reads.

use crate::dtype::ActDtype;
use crate::layer::LayerShape;

/// `[N, K/8]` u32 words, ExLlama nibble order, rows `row_stride_bytes` apart (≥ K/2, padding allowed).
#[derive(Clone, Debug, PartialEq)]
pub struct ResidentWeights {
    pub n: usize,
    pub k: usize,
    pub row_stride_bytes: usize,
    /// Little-endian bytes; at least `(n − 1)·row_stride_bytes + k/2` long.
    pub bytes: Vec<u8>,
}

/// `[N, K/G]` in the activation dtype, unit inner stride, rows `row_stride` elements apart.
#[derive(Clone, Debug, PartialEq)]
pub struct ResidentScales {
    pub n: usize,
    pub groups: usize,
    pub row_stride: usize,
    pub dtype: ActDtype,
    pub bits: Vec<u16>,
}

/// `[ceil(N/8), K/G]` u32: row `n` in word `n/8` at bits `4·(n%8)`. When N % 8 != 0 the last
/// row of words is partial and its unused high nibbles are 0 (as compressed-tensors stores it).
#[derive(Clone, Debug, PartialEq)]
pub struct PackedZeroPoints {
    pub n: usize,
    pub groups: usize,
    pub words: Vec<u32>,
}

/// The legacy `[N, K/G]` zero points in the activation dtype. Exists so that packed-zp kernels
/// can be shown to refuse it.
#[derive(Clone, Debug, PartialEq)]
pub struct UnpackedZeroPoints {
    pub n: usize,
    pub groups: usize,
    pub dtype: ActDtype,
    pub bits: Vec<u16>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ZeroPoints {
    Packed(PackedZeroPoints),
    UnpackedLegacy(UnpackedZeroPoints),
}

/// One layer as a model loader leaves it on the device.
#[derive(Clone, Debug, PartialEq)]
pub struct ResidentLayer {
    pub shape: LayerShape,
    pub dtype: ActDtype,
    pub weights: ResidentWeights,
    pub scales: ResidentScales,
    pub zeros: Option<ZeroPoints>,
    pub bias: Option<Vec<u16>>,
}
