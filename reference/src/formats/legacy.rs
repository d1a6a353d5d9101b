//! The legacy unpacked-zero-point layout (docs/contract.md §2–3): weights and scales as compressed-tensors,
//! zero points `[N, K/G]` in the activation dtype. A legacy loader passes that tensor through as
//! it is; the result, [`ZeroPoints::UnpackedLegacy`], exists so that packed-zp kernels can be
//! shown to refuse it.

use super::compressed::{CompressedTensorsLayer, pack_along_k_sequential};
use super::convert::{
    Checkpoint, ConvertError, Converted, LoadTarget, expect, half_bits, read_bias, resolve_zeros,
};
use super::layout::{LayerError, RowPadding, legacy_codes, validate_logical};
use super::resident::{ResidentLayer, UnpackedZeroPoints, ZeroPoints};
use super::tensor::{Tensor, TensorData};
use crate::layer::{LayerShape, QuantizedLayer};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LegacyConfig {
    pub group_size: usize,
    pub symmetric: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LegacyLayer {
    pub config: LegacyConfig,
    pub weight_packed: Tensor,
    pub weight_scale: Tensor,
    /// `[N, K/G]` in the activation dtype.
    pub weight_zero_point: Option<Tensor>,
    pub bias: Option<Tensor>,
}

impl LegacyLayer {
    pub fn from_logical(layer: &QuantizedLayer) -> Result<Self, LayerError> {
        validate_logical(layer)?;
        let LayerShape { n, k, group } = layer.shape;
        if !k.is_multiple_of(8) {
            return Err(LayerError::KNotMultipleOf8 { k });
        }
        let groups = layer.shape.groups();
        let act = |v: Vec<u16>| TensorData::act(layer.dtype, v);
        Ok(LegacyLayer {
            config: LegacyConfig {
                group_size: group,
                symmetric: layer.zeros.is_none(),
            },
            weight_packed: Tensor::i32_packed(
                "weight_packed",
                vec![n, k / 8],
                pack_along_k_sequential(layer),
            ),
            weight_scale: Tensor::new("weight_scale", vec![n, groups], act(layer.scales.clone())),
            weight_zero_point: layer.zeros.as_ref().map(|z| {
                let bits = z
                    .iter()
                    .map(|&c| layer.dtype.from_f32(f32::from(c)))
                    .collect();
                Tensor::new("weight_zero_point", vec![n, groups], act(bits))
            }),
            bias: layer
                .bias
                .as_ref()
                .map(|b| Tensor::new("bias", vec![n], act(b.clone()))),
        })
    }
}

impl Checkpoint for LegacyLayer {
    fn format_name(&self) -> &'static str {
        "legacy-unpacked-zp"
    }

    /// Yields [`ZeroPoints::UnpackedLegacy`] for asymmetric layers: no N%8 requirement, since
    /// nothing is packed along N.
    fn to_resident(
        &self,
        target: &LoadTarget,
        padding: RowPadding,
    ) -> Result<Converted, ConvertError> {
        let LoadTarget { n, k, dtype } = *target;
        let group = self.config.group_size;
        let (q, scales) = CompressedTensorsLayer::read_codes_and_scales(
            &self.weight_packed,
            &self.weight_scale,
            group,
            target,
        )?;
        let groups = k / group;
        let zeros = match &self.weight_zero_point {
            None => None,
            Some(t) => {
                expect(t, dtype.into(), "[N, K/G]", &[n, groups])?;
                let codes = legacy_codes(dtype, half_bits(t), groups).map_err(|(n, g, got)| {
                    ConvertError::ZeroPointValue {
                        tensor: t.name.clone(),
                        n,
                        g,
                        got,
                    }
                })?;
                Some((codes, half_bits(t).to_vec()))
            }
        };
        // Not `assemble`: kept zero points stay unpacked `[N, K/G]`, which holds any N, where
        // the packed layout would refuse N % 8 ≠ 0 before the hand-off could be refused.
        let mut notes = Vec::new();
        let kept = resolve_zeros(
            self.config.symmetric,
            "weight_zero_point",
            self.weight_zero_point.as_ref().map(|t| t.name.as_str()),
            zeros.as_ref().map(|(c, _)| c.clone()),
            groups,
            &mut notes,
        )?;
        let bias = read_bias(self.bias.as_ref(), target)?;
        let logical = QuantizedLayer {
            shape: LayerShape::new(n, k, group),
            dtype,
            q,
            zeros: None,
            scales,
            bias,
        };
        let mut layer = ResidentLayer::from_logical(&logical, padding)?;
        if kept.is_some() {
            let (_, bits) = zeros.expect("kept zero points come from the tensor");
            layer.zeros = Some(ZeroPoints::UnpackedLegacy(UnpackedZeroPoints {
                n,
                groups,
                dtype,
                bits,
            }));
        }
        Ok(Converted { layer, notes })
    }

    fn decode_own_semantics(&self) -> Result<QuantizedLayer, ConvertError> {
        super::own::legacy(self)
    }
}
