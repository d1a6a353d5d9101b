//! Building the resident layout (docs/contract.md §2) from a logical layer and back, the row-padding rules
//! against the cache cliff (docs/contract.md §5), and the checks that a strided view is really backed by
//! enough memory.

use super::exllama::{pack_exllama_row, pack_zero_points, unpack_zero_points};
use super::nibble::EXLLAMA_SHIFTS;
use super::resident::{
    PackedZeroPoints, ResidentLayer, ResidentScales, ResidentWeights, UnpackedZeroPoints,
    ZeroPoints,
};
use crate::dtype::ActDtype;
use crate::layer::{LayerShape, QuantizedLayer};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// What the cache-cliff rule adds to an aliasing row (docs/contract.md §5).
pub const CACHE_CLIFF_PAD_BYTES: usize = 128;

/// Filler for weight padding bytes: nibbles 5 and 10, so a kernel that reads padding as codes
/// gets wrong values rather than zeros that might cancel out.
pub const WEIGHT_PAD_BYTE: u8 = 0xA5;

/// Which row padding a layout gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PaddingRule {
    /// Rows are exactly as long as their data.
    #[default]
    None,
    /// The gfx11 rule of docs/contract.md §5 (+128 B on aliasing row strides).
    CacheCliff,
    /// Fixed extra bytes per weight row and elements per dense row, so targets that pad nothing
    /// still run padded layouts.
    #[serde(rename_all = "kebab-case")]
    Forced {
        weight_extra_bytes: usize,
        dense_extra_elems: usize,
    },
}

/// The cache-cliff rule itself (docs/contract.md §5), the one copy every layer calls: a row of
/// `row_bytes` that is a positive multiple of `period` bytes maps onto the same cache sets as its
/// neighbours, so it gets [`CACHE_CLIFF_PAD_BYTES`] more; any other row gets nothing.
fn cache_cliff_pad_bytes(row_bytes: usize, period: usize) -> usize {
    if row_bytes > 0 && row_bytes.is_multiple_of(period) {
        CACHE_CLIFF_PAD_BYTES
    } else {
        0
    }
}

/// Rows of int4 weights (`K/2` bytes) alias from this many bytes.
const WEIGHT_CLIFF_PERIOD_BYTES: usize = 1024;
/// Rows of 2-byte elements (the dense cache, the engine's per-call copy of X) alias from this
/// many bytes.
const ELEM_CLIFF_PERIOD_BYTES: usize = 2048;

/// Row stride in bytes of the int4 weights `[N, K/2]`: +128 B when `K/2` is a multiple of 1024
/// under [`PaddingRule::CacheCliff`].
pub fn weight_row_stride_bytes(k: usize, rule: PaddingRule) -> usize {
    let row = k / 2;
    match rule {
        PaddingRule::None => row,
        PaddingRule::CacheCliff => row + cache_cliff_pad_bytes(row, WEIGHT_CLIFF_PERIOD_BYTES),
        PaddingRule::Forced {
            weight_extra_bytes, ..
        } => row + weight_extra_bytes,
    }
}

/// Row stride in elements of a `[rows, K]` matrix of 2-byte elements: the dense dequant cache,
/// and X where the engine copies it per call. +128 B when `K·2` bytes is a multiple of 2048
/// under [`PaddingRule::CacheCliff`].
pub fn dense_row_stride_elems(k: usize, rule: PaddingRule) -> usize {
    const ELEM: usize = 2;
    match rule {
        PaddingRule::None => k,
        PaddingRule::CacheCliff => {
            k + cache_cliff_pad_bytes(k * ELEM, ELEM_CLIFF_PERIOD_BYTES) / ELEM
        }
        PaddingRule::Forced {
            dense_extra_elems, ..
        } => k + dense_extra_elems,
    }
}

/// Concrete extra room per row of the resident weights and scales.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RowPadding {
    pub weight_extra_bytes: usize,
    pub scale_extra_elems: usize,
}

impl RowPadding {
    pub const NONE: RowPadding = RowPadding {
        weight_extra_bytes: 0,
        scale_extra_elems: 0,
    };

    /// The weight padding a rule asks for at this K. No rule pads scales; set
    /// `scale_extra_elems` by hand to exercise a padded scale stride.
    pub fn from_rule(k: usize, rule: PaddingRule) -> Self {
        RowPadding {
            weight_extra_bytes: weight_row_stride_bytes(k, rule) - k / 2,
            scale_extra_elems: 0,
        }
    }
}

/// A logical layer that cannot be what it claims.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayerError {
    #[error("layer shape: group size must be positive, got 0")]
    ZeroGroup,
    #[error("layer shape: K must be a multiple of 8 (8 codes per packed word), got K = {k}")]
    KNotMultipleOf8 { k: usize },
    #[error(
        "layer shape: {packed} are packed 8 per word along N, so N must be a multiple of 8; got N = {n}"
    )]
    NNotMultipleOf8 { packed: &'static str, n: usize },
    #[error("{tensor}: expected {expected} elements ({layout}), got {got}")]
    Length {
        tensor: &'static str,
        layout: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("{tensor}: expected 4-bit codes 0..=15, got {got} at index {index}")]
    CodeRange {
        tensor: &'static str,
        index: usize,
        got: u8,
    },
}

/// A resident layout that cannot be read as declared.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LayoutError {
    #[error(transparent)]
    Layer(#[from] LayerError),
    #[error("weights: row stride must cover a row of K/2 = {min} bytes, got {got} bytes")]
    WeightRowStride { min: usize, got: usize },
    #[error("weights: row stride must be a multiple of 4 bytes (rows of u32 words), got {got}")]
    WeightStrideAlignment { got: usize },
    #[error(
        "weights: a [N, K/2] = [{n}, {row}] view with row stride {stride} B needs {needed} bytes, got {got}"
    )]
    WeightBytes {
        n: usize,
        row: usize,
        stride: usize,
        needed: usize,
        got: usize,
    },
    #[error("scales: row stride must cover K/G = {min} elements, got {got}")]
    ScaleRowStride { min: usize, got: usize },
    #[error(
        "scales: a [N, K/G] = [{n}, {groups}] view with row stride {stride} needs {needed} elements, got {got}"
    )]
    ScaleElems {
        n: usize,
        groups: usize,
        stride: usize,
        needed: usize,
        got: usize,
    },
    #[error("{tensor}: expected {expected}, got {got}")]
    Mismatch {
        tensor: &'static str,
        expected: String,
        got: String,
    },
    #[error("zero points (legacy): expected integers 0..=15, got {got} at (n = {n}, g = {g})")]
    LegacyZeroValue { n: usize, g: usize, got: f64 },
    #[error(
        "zero points: N = {n} fills {used} of the 8 nibbles of the last word of each group, so nibbles {used}..=7 must be 0; got {word:#010x} at [{row}, {g}]"
    )]
    UnusedZeroPointNibbles {
        n: usize,
        used: usize,
        row: usize,
        g: usize,
        word: u32,
    },
}

/// Rows of packed zero points for N output rows: `ceil(N/8)` (compressed-tensors stores a
/// partial last word when N % 8 != 0).
pub fn packed_zero_point_rows(n: usize) -> usize {
    n.div_ceil(8)
}

/// The shape formula of packed zero points as messages name it: `[N/8, K/G]` when N is a
/// multiple of 8 (every existing message), else `[ceil(N/8), K/G]`.
pub fn packed_zero_point_formula(n: usize) -> &'static str {
    if n.is_multiple_of(8) {
        "[N/8, K/G]"
    } else {
        "[ceil(N/8), K/G]"
    }
}

/// The first word of the last row of `[ceil(N/8), groups]` packed zero points whose unused
/// high nibbles (rows N..8·ceil(N/8)) are not 0, as `(row, g, word)`; `None` when N % 8 == 0
/// or all are 0. A nonzero there means the tensor was packed some other way.
pub(crate) fn unused_zero_point_nibbles(
    words: &[u32],
    n: usize,
    groups: usize,
) -> Option<(usize, usize, u32)> {
    let used = n % 8;
    if used == 0 {
        return None;
    }
    let row = n / 8;
    let mask = !((1u32 << (4 * used)) - 1);
    (0..groups)
        .map(|g| (g, words.get(row * groups + g).copied().unwrap_or(0)))
        .find(|&(_, w)| w & mask != 0)
        .map(|(g, w)| (row, g, w))
}

/// Checks that a logical layer's tensors have the lengths and ranges its shape implies.
pub fn validate_logical(layer: &QuantizedLayer) -> Result<(), LayerError> {
    let s = layer.shape;
    if s.group == 0 {
        return Err(LayerError::ZeroGroup);
    }
    let groups = s.groups();
    let check = |tensor, layout, expected, got| {
        if expected == got {
            Ok(())
        } else {
            Err(LayerError::Length {
                tensor,
                layout,
                expected,
                got,
            })
        }
    };
    check("q", "[N, K]", s.n * s.k, layer.q.len())?;
    check("scales", "[N, K/G]", s.n * groups, layer.scales.len())?;
    if let Some(z) = &layer.zeros {
        check("zeros", "[N, K/G]", s.n * groups, z.len())?;
    }
    if let Some(b) = &layer.bias {
        check("bias", "[N]", s.n, b.len())?;
    }
    let range = |tensor, v: &[u8]| {
        // Every code of a layer is checked at each conversion: an OR over all of them (which
        // vectorizes) says whether any is out of range; only then is the first one looked for.
        if v.iter().fold(0u8, |acc, &c| acc | c) <= 15 {
            return Ok(());
        }
        match v.iter().position(|&c| c > 15) {
            Some(index) => Err(LayerError::CodeRange {
                tensor,
                index,
                got: v[index],
            }),
            None => Ok(()),
        }
    };
    range("q", &layer.q)?;
    if let Some(z) = &layer.zeros {
        range("zeros", z)?;
    }
    Ok(())
}

/// The packing constraints on top of [`validate_logical`]: K%8 (weights are packed along K).
/// Zero points take any N: `[ceil(N/8), K/G]`.
pub(crate) fn validate_packable(layer: &QuantizedLayer) -> Result<(), LayerError> {
    validate_logical(layer)?;
    if !layer.shape.k.is_multiple_of(8) {
        return Err(LayerError::KNotMultipleOf8 { k: layer.shape.k });
    }
    Ok(())
}

impl ResidentWeights {
    /// A strided view over `bytes`, refused when the bytes cannot hold it.
    pub fn view(
        n: usize,
        k: usize,
        row_stride_bytes: usize,
        bytes: Vec<u8>,
    ) -> Result<Self, LayoutError> {
        let w = ResidentWeights {
            n,
            k,
            row_stride_bytes,
            bytes,
        };
        w.validate()?;
        Ok(w)
    }

    /// Bytes a view of this shape and stride must have behind it.
    pub fn required_bytes(&self) -> usize {
        if self.n == 0 {
            0
        } else {
            (self.n - 1) * self.row_stride_bytes + self.k / 2
        }
    }

    pub fn validate(&self) -> Result<(), LayoutError> {
        if !self.k.is_multiple_of(8) {
            return Err(LayerError::KNotMultipleOf8 { k: self.k }.into());
        }
        let row = self.k / 2;
        if self.row_stride_bytes < row {
            return Err(LayoutError::WeightRowStride {
                min: row,
                got: self.row_stride_bytes,
            });
        }
        if !self.row_stride_bytes.is_multiple_of(4) {
            return Err(LayoutError::WeightStrideAlignment {
                got: self.row_stride_bytes,
            });
        }
        let needed = self.required_bytes();
        if self.bytes.len() < needed {
            return Err(LayoutError::WeightBytes {
                n: self.n,
                row,
                stride: self.row_stride_bytes,
                needed,
                got: self.bytes.len(),
            });
        }
        Ok(())
    }

    /// Word `j` (k = 8j..8j+7) of row `n`. Call on a validated view.
    pub fn word(&self, n: usize, j: usize) -> u32 {
        let at = n * self.row_stride_bytes + 4 * j;
        u32::from_le_bytes(self.bytes[at..at + 4].try_into().expect("4 bytes"))
    }

    /// The code at `(n, k)`, read with the ExLlama shifts.
    pub fn code(&self, n: usize, k: usize) -> u8 {
        ((self.word(n, k / 8) >> EXLLAMA_SHIFTS[k % 8]) & 0xF) as u8
    }
}

impl ResidentScales {
    pub fn validate(&self) -> Result<(), LayoutError> {
        if self.row_stride < self.groups {
            return Err(LayoutError::ScaleRowStride {
                min: self.groups,
                got: self.row_stride,
            });
        }
        let needed = if self.n == 0 {
            0
        } else {
            (self.n - 1) * self.row_stride + self.groups
        };
        if self.bits.len() < needed {
            return Err(LayoutError::ScaleElems {
                n: self.n,
                groups: self.groups,
                stride: self.row_stride,
                needed,
                got: self.bits.len(),
            });
        }
        Ok(())
    }

    pub fn get(&self, n: usize, g: usize) -> u16 {
        self.bits[n * self.row_stride + g]
    }
}

impl PackedZeroPoints {
    /// `ceil(N/8)`: the rows of words.
    pub fn rows(&self) -> usize {
        packed_zero_point_rows(self.n)
    }

    /// `ceil(N/8)·groups` words; when N % 8 != 0 the last row's unused high nibbles must be 0.
    pub fn validate(&self) -> Result<(), LayoutError> {
        let rows = self.rows();
        let expected = rows * self.groups;
        if self.words.len() != expected {
            return Err(LayoutError::Mismatch {
                tensor: "zero points",
                expected: format!(
                    "{expected} words for {} = [{rows}, {}]",
                    packed_zero_point_formula(self.n),
                    self.groups
                ),
                got: format!("{} words", self.words.len()),
            });
        }
        if let Some((row, g, word)) = unused_zero_point_nibbles(&self.words, self.n, self.groups) {
            return Err(LayoutError::UnusedZeroPointNibbles {
                n: self.n,
                used: self.n % 8,
                row,
                g,
                word,
            });
        }
        Ok(())
    }

    pub fn get(&self, n: usize, g: usize) -> u8 {
        ((self.words[(n / 8) * self.groups + g] >> (4 * (n % 8))) & 0xF) as u8
    }
}

impl ResidentLayer {
    /// Lays a logical layer out as a loader leaves it on the device. Padding bytes are filled
    /// with [`WEIGHT_PAD_BYTE`] and padded scale slots with the dtype's NaN poison.
    pub fn from_logical(layer: &QuantizedLayer, padding: RowPadding) -> Result<Self, LayoutError> {
        validate_packable(layer)?;
        let LayerShape { n, k, .. } = layer.shape;
        let groups = layer.shape.groups();
        let row = k / 2;
        let stride = row + padding.weight_extra_bytes;
        if !stride.is_multiple_of(4) {
            return Err(LayoutError::WeightStrideAlignment { got: stride });
        }
        let mut bytes = vec![WEIGHT_PAD_BYTE; n * stride];
        if stride > 0 {
            // Rows in parallel: a 70B-class projection packs 235 M codes.
            bytes
                .par_chunks_mut(stride)
                .zip(layer.q.par_chunks(k.max(1)))
                .for_each(|(dst, codes)| {
                    let words = pack_exllama_row(codes);
                    for (chunk, w) in dst[..row].chunks_exact_mut(4).zip(&words) {
                        chunk.copy_from_slice(&w.to_le_bytes());
                    }
                });
        }
        let scale_stride = groups + padding.scale_extra_elems;
        let mut bits = vec![layer.dtype.poison_bits(); n * scale_stride];
        for r in 0..n {
            bits[r * scale_stride..r * scale_stride + groups]
                .copy_from_slice(&layer.scales[r * groups..(r + 1) * groups]);
        }
        let zeros = layer.zeros.as_ref().map(|z| {
            ZeroPoints::Packed(PackedZeroPoints {
                n,
                groups,
                words: pack_zero_points(z, n, groups),
            })
        });
        Ok(ResidentLayer {
            shape: layer.shape,
            dtype: layer.dtype,
            weights: ResidentWeights {
                n,
                k,
                row_stride_bytes: stride,
                bytes,
            },
            scales: ResidentScales {
                n,
                groups,
                row_stride: scale_stride,
                dtype: layer.dtype,
                bits,
            },
            zeros,
            bias: layer.bias.clone(),
        })
    }

    /// Checks every tensor against the layer's shape and dtype, and every view against the
    /// memory behind it.
    pub fn validate(&self) -> Result<(), LayoutError> {
        let s = self.shape;
        if s.group == 0 {
            return Err(LayerError::ZeroGroup.into());
        }
        let groups = s.groups();
        let mismatch = |tensor, expected: String, got: String| {
            Err(LayoutError::Mismatch {
                tensor,
                expected,
                got,
            })
        };
        if (self.weights.n, self.weights.k) != (s.n, s.k) {
            return mismatch(
                "weights",
                format!("[N, K] = [{}, {}]", s.n, s.k),
                format!("[{}, {}]", self.weights.n, self.weights.k),
            );
        }
        self.weights.validate()?;
        if (self.scales.n, self.scales.groups) != (s.n, groups) {
            return mismatch(
                "scales",
                format!("[N, K/G] = [{}, {groups}]", s.n),
                format!("[{}, {}]", self.scales.n, self.scales.groups),
            );
        }
        if self.scales.dtype != self.dtype {
            return mismatch(
                "scales",
                format!("dtype {}", self.dtype),
                format!("dtype {}", self.scales.dtype),
            );
        }
        self.scales.validate()?;
        match &self.zeros {
            None => {}
            Some(ZeroPoints::Packed(z)) => {
                if (z.n, z.groups) != (s.n, groups) {
                    return mismatch(
                        "zero points",
                        format!("packed for [N, K/G] = [{}, {groups}]", s.n),
                        format!("packed for [{}, {}]", z.n, z.groups),
                    );
                }
                z.validate()?;
            }
            Some(ZeroPoints::UnpackedLegacy(z))
                if (z.n, z.groups) != (s.n, groups) || z.bits.len() != s.n * groups =>
            {
                return mismatch(
                    "zero points (legacy)",
                    format!("[N, K/G] = [{}, {groups}]", s.n),
                    format!("[{}, {}] with {} elements", z.n, z.groups, z.bits.len()),
                );
            }
            Some(ZeroPoints::UnpackedLegacy(_)) => {}
        }
        if let Some(b) = &self.bias
            && b.len() != s.n
        {
            return mismatch("bias", format!("[N] = [{}]", s.n), format!("[{}]", b.len()));
        }
        Ok(())
    }

    /// Reads the resident tensors back into logical form (validating first). Legacy unpacked
    /// zero points are read as the integers they hold.
    pub fn to_logical(&self) -> Result<QuantizedLayer, LayoutError> {
        self.validate()?;
        let LayerShape { n, k, .. } = self.shape;
        let groups = self.shape.groups();
        // A word (eight codes) at a time: the ExLlama shifts of `ResidentWeights::code`; rows
        // in parallel.
        let mut q = vec![0u8; n * k];
        if k > 0 {
            q.par_chunks_mut(k).enumerate().for_each(|(r, row)| {
                for (w, codes) in row.chunks_mut(8).enumerate() {
                    let word = self.weights.word(r, w);
                    for (c, s) in codes.iter_mut().zip(&EXLLAMA_SHIFTS) {
                        *c = ((word >> s) & 0xF) as u8;
                    }
                }
            });
        }
        let mut scales = Vec::with_capacity(n * groups);
        for r in 0..n {
            scales.extend((0..groups).map(|g| self.scales.get(r, g)));
        }
        let zeros = match &self.zeros {
            None => None,
            Some(ZeroPoints::Packed(z)) => Some(unpack_zero_points(&z.words, n, groups)),
            Some(ZeroPoints::UnpackedLegacy(z)) => Some(legacy_zero_codes(z)?),
        };
        Ok(QuantizedLayer {
            shape: self.shape,
            dtype: self.dtype,
            q,
            zeros,
            scales,
            bias: self.bias.clone(),
        })
    }
}

/// Legacy zero points hold small integers in the activation dtype; anything else is refused.
pub(crate) fn legacy_zero_codes(z: &UnpackedZeroPoints) -> Result<Vec<u8>, LayoutError> {
    legacy_codes(z.dtype, &z.bits, z.groups).map_err(|(n, g, got)| LayoutError::LegacyZeroValue {
        n,
        g,
        got,
    })
}

/// `(n, g, value)` of the first entry that is not an integer in 0..=15.
pub(crate) fn legacy_codes(
    dtype: ActDtype,
    bits: &[u16],
    groups: usize,
) -> Result<Vec<u8>, (usize, usize, f64)> {
    bits.iter()
        .enumerate()
        .map(|(i, &b)| {
            let v = dtype.to_f64(b);
            if (0.0..=15.0).contains(&v) && v.fract() == 0.0 {
                Ok(v as u8)
            } else {
                Err((i / groups.max(1), i % groups.max(1), v))
            }
        })
        .collect()
}
