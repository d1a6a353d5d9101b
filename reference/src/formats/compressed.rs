//! compressed-tensors `pack-quantized` (docs/contract.md §3): `weight_packed [N, K/8]` i32 with sequential
//! nibbles along K, `weight_scale [N, K/G]`, `weight_zero_point [ceil(N/8), K/G]` i32 packed
//! along N (asymmetric only; when N % 8 != 0 the last row of words is partial, its unused high
//! nibbles 0, as the library's `pack_to_int32` pads it).

use super::convert::{
    Checkpoint, ConvertError, Converted, LoadTarget, StoredZeros, assemble, check_group,
    check_packed_dim, expect, half_bits, words,
};
use super::layout::{
    LayerError, RowPadding, packed_zero_point_formula, packed_zero_point_rows,
    unused_zero_point_nibbles, validate_logical,
};
use super::nibble::NibbleOrder;
use super::tensor::{StoredDtype, Tensor, TensorData};
use crate::layer::{LayerShape, QuantizedLayer};

/// The `quantization_config` entries that matter here (num_bits = 4, strategy = group).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompressedTensorsConfig {
    pub group_size: usize,
    pub symmetric: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CompressedTensorsLayer {
    pub config: CompressedTensorsConfig,
    pub weight_packed: Tensor,
    pub weight_scale: Tensor,
    pub weight_zero_point: Option<Tensor>,
    pub bias: Option<Tensor>,
}

/// `[N, K/8]` words, element i of each word at bits 4i.
pub(crate) fn pack_along_k_sequential(layer: &QuantizedLayer) -> Vec<u32> {
    NibbleOrder::Sequential.pack_run(&layer.q)
}

/// `[ceil(N/8), K/G]` words, row 8w+i at bits 4i; rows past N are 0.
pub(crate) fn pack_zeros_along_n_sequential(zeros: &[u8], n: usize, groups: usize) -> Vec<u32> {
    let rows = packed_zero_point_rows(n);
    let mut out = Vec::with_capacity(rows * groups);
    for w in 0..rows {
        for g in 0..groups {
            out.push(NibbleOrder::Sequential.pack(std::array::from_fn(|i| {
                let row = 8 * w + i;
                if row < n { zeros[row * groups + g] } else { 0 }
            })));
        }
    }
    out
}

/// The inverse of [`pack_zeros_along_n_sequential`] for rows below N (call after checking the
/// unused nibbles).
pub(crate) fn unpack_zeros_along_n_sequential(words: &[u32], n: usize, groups: usize) -> Vec<u8> {
    let mut z = vec![0u8; n * groups];
    for w in 0..packed_zero_point_rows(n) {
        for g in 0..groups {
            for (i, c) in NibbleOrder::Sequential
                .unpack(words[w * groups + g])
                .into_iter()
                .enumerate()
                .take_while(|&(i, _)| 8 * w + i < n)
            {
                z[(8 * w + i) * groups + g] = c;
            }
        }
    }
    z
}

impl CompressedTensorsLayer {
    /// Writes a logical layer the way the compressed-tensors compressor does.
    pub fn from_logical(layer: &QuantizedLayer) -> Result<Self, LayerError> {
        validate_logical(layer)?;
        let LayerShape { n, k, group } = layer.shape;
        if !k.is_multiple_of(8) {
            return Err(LayerError::KNotMultipleOf8 { k });
        }
        let groups = layer.shape.groups();
        let weight_zero_point = layer.zeros.as_ref().map(|z| {
            Tensor::i32_packed(
                "weight_zero_point",
                vec![packed_zero_point_rows(n), groups],
                pack_zeros_along_n_sequential(z, n, groups),
            )
        });
        Ok(CompressedTensorsLayer {
            config: CompressedTensorsConfig {
                group_size: group,
                symmetric: layer.zeros.is_none(),
            },
            weight_packed: Tensor::i32_packed(
                "weight_packed",
                vec![n, k / 8],
                pack_along_k_sequential(layer),
            ),
            weight_scale: Tensor::new(
                "weight_scale",
                vec![n, groups],
                TensorData::act(layer.dtype, layer.scales.clone()),
            ),
            weight_zero_point,
            bias: layer
                .bias
                .as_ref()
                .map(|b| Tensor::new("bias", vec![n], TensorData::act(layer.dtype, b.clone()))),
        })
    }

    /// The checks and unpacking shared with the legacy format: codes and scales.
    pub(crate) fn read_codes_and_scales(
        weight_packed: &Tensor,
        weight_scale: &Tensor,
        group_size: usize,
        target: &LoadTarget,
    ) -> Result<(Vec<u8>, Vec<u16>), ConvertError> {
        let LoadTarget { n, k, dtype } = *target;
        check_group(k, group_size)?;
        check_packed_dim(&weight_packed.name, "K", k)?;
        expect(weight_packed, StoredDtype::I32, "[N, K/8]", &[n, k / 8])?;
        expect(weight_scale, dtype.into(), "[N, K/G]", &[n, k / group_size])?;
        let q = NibbleOrder::Sequential.unpack_run(&words(weight_packed));
        Ok((q, half_bits(weight_scale).to_vec()))
    }
}

impl Checkpoint for CompressedTensorsLayer {
    fn format_name(&self) -> &'static str {
        "compressed-tensors"
    }

    fn to_resident(
        &self,
        target: &LoadTarget,
        padding: RowPadding,
    ) -> Result<Converted, ConvertError> {
        let LoadTarget { n, k, .. } = *target;
        let group = self.config.group_size;
        let (q, scales) =
            Self::read_codes_and_scales(&self.weight_packed, &self.weight_scale, group, target)?;
        let groups = k / group;
        let zeros = match &self.weight_zero_point {
            None => None,
            Some(t) => {
                let rows = packed_zero_point_rows(n);
                expect(
                    t,
                    StoredDtype::I32,
                    packed_zero_point_formula(n),
                    &[rows, groups],
                )?;
                let w = words(t);
                // Another packing would put codes there: refuse rather than drop them.
                if let Some((row, g, word)) = unused_zero_point_nibbles(&w, n, groups) {
                    return Err(ConvertError::UnusedZeroPointNibbles {
                        tensor: t.name.clone(),
                        n,
                        used: n % 8,
                        row,
                        g,
                        word,
                    });
                }
                Some(unpack_zeros_along_n_sequential(&w, n, groups))
            }
        };
        let zeros = StoredZeros {
            symmetric: self.config.symmetric,
            expected_name: "weight_zero_point",
            stored_name: self.weight_zero_point.as_ref().map(|t| t.name.as_str()),
            decoded: zeros,
        };
        assemble(target, group, q, scales, zeros, self.bias.as_ref(), padding)
    }

    fn decode_own_semantics(&self) -> Result<QuantizedLayer, ConvertError> {
        super::own::compressed_tensors(self)
    }
}
