//! GPTQ (AutoGPTQ, docs/contract.md §3): `qweight [K/8, N]` i32 packed along K (sequential nibbles),
//! `scales [K/G, N]`, `qzeros [K/G, N/8]` i32 packed along N (sequential).
//!
//! v1 checkpoints store `z − 1`. A 4-bit field cannot hold −1, so z = 0 is stored as nibble 15
//! (`(z − 1) mod 16`) and read back as `(stored + 1) mod 16`; all 16 zero points round-trip.
//! (The original AutoGPTQ packer ORs the sign-extended −1 into the whole word, corrupting the
//! neighbouring zero points; that behaviour is a bug of that packer and is not reproduced.)

use super::convert::{
    Checkpoint, ConvertError, Converted, LoadTarget, StoredZeros, assemble, check_group,
    check_packed_dim, expect, half_bits, pack_zeros_group_major, scales_from_group_major,
    scales_to_group_major, unpack_zeros_group_major, words,
};
use super::layout::{LayerError, RowPadding, validate_logical};
use super::nibble::NibbleOrder;
use super::tensor::{StoredDtype, Tensor, TensorData};
use crate::layer::{LayerShape, QuantizedLayer, SYMMETRIC_ZERO};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GptqVersion {
    /// Zero points stored as `z − 1` (mod 16).
    V1,
    /// Zero points stored as `z`.
    V2,
}

impl GptqVersion {
    pub fn store(self, z: u8) -> u8 {
        match self {
            GptqVersion::V1 => z.wrapping_sub(1) & 0xF,
            GptqVersion::V2 => z & 0xF,
        }
    }

    pub fn load(self, stored: u8) -> u8 {
        match self {
            GptqVersion::V1 => stored.wrapping_add(1) & 0xF,
            GptqVersion::V2 => stored & 0xF,
        }
    }
}

/// The `quantize_config.json` entries that matter here (bits = 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GptqConfig {
    pub group_size: usize,
    pub sym: bool,
    pub desc_act: bool,
    pub version: GptqVersion,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GptqLayer {
    pub config: GptqConfig,
    pub qweight: Tensor,
    pub qzeros: Option<Tensor>,
    pub scales: Tensor,
    pub bias: Option<Tensor>,
}

impl GptqLayer {
    /// Writes a logical layer the way AutoGPTQ does. Symmetric layers still get `qzeros` (all
    /// z = 8, as AutoGPTQ writes them) when N is a multiple of 8.
    pub fn from_logical(layer: &QuantizedLayer, version: GptqVersion) -> Result<Self, LayerError> {
        validate_logical(layer)?;
        let LayerShape { n, k, group } = layer.shape;
        if !k.is_multiple_of(8) {
            return Err(LayerError::KNotMultipleOf8 { k });
        }
        if layer.zeros.is_some() && !n.is_multiple_of(8) {
            return Err(LayerError::NNotMultipleOf8 {
                packed: "zero points",
                n,
            });
        }
        let groups = layer.shape.groups();
        let mut qweight = Vec::with_capacity(k / 8 * n);
        for kw in 0..k / 8 {
            for col in 0..n {
                qweight.push(
                    NibbleOrder::Sequential
                        .pack(std::array::from_fn(|i| layer.code(col, 8 * kw + i))),
                );
            }
        }
        let scales = scales_to_group_major(&layer.scales, n, groups);
        let qzeros = n.is_multiple_of(8).then(|| {
            let w = pack_zeros_group_major(n, groups, NibbleOrder::Sequential, |row, g| {
                let z = layer
                    .zeros
                    .as_ref()
                    .map_or(SYMMETRIC_ZERO, |z| z[row * groups + g]);
                version.store(z)
            });
            Tensor::i32_packed("qzeros", vec![groups, n / 8], w)
        });
        Ok(GptqLayer {
            config: GptqConfig {
                group_size: group,
                sym: layer.zeros.is_none(),
                desc_act: false,
                version,
            },
            qweight: Tensor::i32_packed("qweight", vec![k / 8, n], qweight),
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

impl Checkpoint for GptqLayer {
    fn format_name(&self) -> &'static str {
        match self.config.version {
            GptqVersion::V1 => "gptq-v1",
            GptqVersion::V2 => "gptq-v2",
        }
    }

    fn to_resident(
        &self,
        target: &LoadTarget,
        padding: RowPadding,
    ) -> Result<Converted, ConvertError> {
        let LoadTarget { n, k, dtype } = *target;
        let group = self.config.group_size;
        if self.config.desc_act {
            return Err(ConvertError::ActOrder);
        }
        check_group(k, group)?;
        let groups = k / group;
        check_packed_dim(&self.qweight.name, "K", k)?;
        expect(&self.qweight, StoredDtype::I32, "[K/8, N]", &[k / 8, n])?;
        expect(&self.scales, dtype.into(), "[K/G, N]", &[groups, n])?;
        let qw = words(&self.qweight);
        let mut q = vec![0u8; n * k];
        for kw in 0..k / 8 {
            for col in 0..n {
                for (i, c) in NibbleOrder::Sequential
                    .unpack(qw[kw * n + col])
                    .into_iter()
                    .enumerate()
                {
                    q[col * k + 8 * kw + i] = c;
                }
            }
        }
        let scales = scales_from_group_major(half_bits(&self.scales), n, groups);
        let zeros = match &self.qzeros {
            None => None,
            Some(t) => {
                check_packed_dim(&t.name, "N", n)?;
                expect(t, StoredDtype::I32, "[K/G, N/8]", &[groups, n / 8])?;
                let version = self.config.version;
                Some(unpack_zeros_group_major(
                    &words(t),
                    n,
                    groups,
                    NibbleOrder::Sequential,
                    |c| version.load(c),
                ))
            }
        };
        let zeros = StoredZeros {
            symmetric: self.config.sym,
            expected_name: "qzeros",
            stored_name: self.qzeros.as_ref().map(|t| t.name.as_str()),
            decoded: zeros,
        };
        assemble(target, group, q, scales, zeros, self.bias.as_ref(), padding)
    }

    fn decode_own_semantics(&self) -> Result<QuantizedLayer, ConvertError> {
        super::own::gptq(self)
    }
}
