//! AWQ (docs/contract.md §3): `qweight [K, N/8]` i32 packed along **N** with the AWQ interleave (bit slot p
//! holds column `8w + AWQ_ORDER[p]`), `scales [K/G, N]`, `qzeros [K/G, N/8]` with the same
//! interleave.

use super::convert::{
    Checkpoint, ConvertError, Converted, LoadTarget, StoredZeros, assemble, check_group,
    check_packed_dim, expect, half_bits, pack_zeros_group_major, scales_from_group_major,
    scales_to_group_major, unpack_zeros_group_major, words,
};
use super::layout::{LayerError, RowPadding, validate_logical};
use super::nibble::NibbleOrder;
use super::tensor::{StoredDtype, Tensor, TensorData};
use crate::layer::{LayerShape, QuantizedLayer};

/// The `quant_config` entries that matter here (w_bit = 4, version GEMM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AwqConfig {
    pub group_size: usize,
    /// AWQ's name for asymmetric quantization.
    pub zero_point: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AwqLayer {
    pub config: AwqConfig,
    pub qweight: Tensor,
    pub qzeros: Option<Tensor>,
    pub scales: Tensor,
    pub bias: Option<Tensor>,
}

const ORDER: NibbleOrder = NibbleOrder::AwqInterleaved;

impl AwqLayer {
    /// Writes a logical layer the way AutoAWQ's GEMM packer does. N must be a multiple of 8
    /// (the weights themselves are packed along N).
    pub fn from_logical(layer: &QuantizedLayer) -> Result<Self, LayerError> {
        validate_logical(layer)?;
        let LayerShape { n, k, group } = layer.shape;
        if !n.is_multiple_of(8) {
            return Err(LayerError::NNotMultipleOf8 {
                packed: "AWQ weights",
                n,
            });
        }
        let groups = layer.shape.groups();
        let mut qweight = Vec::with_capacity(k * n / 8);
        for row in 0..k {
            for nw in 0..n / 8 {
                qweight.push(ORDER.pack(std::array::from_fn(|c| layer.code(8 * nw + c, row))));
            }
        }
        let scales = scales_to_group_major(&layer.scales, n, groups);
        let qzeros = layer.zeros.as_ref().map(|z| {
            let w = pack_zeros_group_major(n, groups, ORDER, |row, g| z[row * groups + g]);
            Tensor::i32_packed("qzeros", vec![groups, n / 8], w)
        });
        Ok(AwqLayer {
            config: AwqConfig {
                group_size: group,
                zero_point: layer.zeros.is_some(),
            },
            qweight: Tensor::i32_packed("qweight", vec![k, n / 8], qweight),
            qzeros,
            scales: Tensor::new(
                "scales",
                vec![groups, n],
                TensorData::act(layer.dtype, scales),
            ),
            bias: layer
                .bias
                .as_ref()
                .map(|b| Tensor::new("bias", vec![n], TensorData::act(layer.dtype, b.clone()))),
        })
    }
}

impl Checkpoint for AwqLayer {
    fn format_name(&self) -> &'static str {
        "awq"
    }

    fn to_resident(
        &self,
        target: &LoadTarget,
        padding: RowPadding,
    ) -> Result<Converted, ConvertError> {
        let LoadTarget { n, k, dtype } = *target;
        let group = self.config.group_size;
        check_group(k, group)?;
        let groups = k / group;
        check_packed_dim(&self.qweight.name, "N", n)?;
        expect(&self.qweight, StoredDtype::I32, "[K, N/8]", &[k, n / 8])?;
        expect(&self.scales, dtype.into(), "[K/G, N]", &[groups, n])?;
        let qw = words(&self.qweight);
        let mut q = vec![0u8; n * k];
        for row in 0..k {
            for nw in 0..n / 8 {
                for (c, code) in ORDER.unpack(qw[row * (n / 8) + nw]).into_iter().enumerate() {
                    q[(8 * nw + c) * k + row] = code;
                }
            }
        }
        let scales = scales_from_group_major(half_bits(&self.scales), n, groups);
        let zeros = match &self.qzeros {
            None => None,
            Some(t) => {
                expect(t, StoredDtype::I32, "[K/G, N/8]", &[groups, n / 8])?;
                Some(unpack_zeros_group_major(&words(t), n, groups, ORDER, |c| c))
            }
        };
        let zeros = StoredZeros {
            symmetric: !self.config.zero_point,
            expected_name: "qzeros",
            stored_name: self.qzeros.as_ref().map(|t| t.name.as_str()),
            decoded: zeros,
        };
        assemble(target, group, q, scales, zeros, self.bias.as_ref(), padding)
    }

    fn decode_own_semantics(&self) -> Result<QuantizedLayer, ConvertError> {
        super::own::awq(self)
    }
}
