//! The layer's half of a held reference, formed once for all of its batch sizes.

use super::operands::{WeightOperand, per_group_values};
use super::weight_cache::weight_key;
use crate::ActDtype;
use crate::gemm::{self, InputError};
use crate::layer::{LayerShape, QuantizedLayer};
use std::borrow::Cow;

/// The half of a held reference that depends on the layer alone, formed once for all of its
/// batch sizes (a worker runs a layer's cases one after another): the layer's own tensors
/// checked ([`gemm::validate_layer`]), its per-group scales and zero points in f64 and its
/// content key. Per case these were a fifth of the CPU side of a field run.
pub struct LayerWeights {
    pub(super) shape: LayerShape,
    pub(super) dtype: ActDtype,
    /// [`weight_key`] without the offset lane's offset.
    key: u64,
    scales: Vec<f64>,
    zeros: Vec<f64>,
}

impl LayerWeights {
    pub fn new(layer: &QuantizedLayer) -> Result<Self, InputError> {
        gemm::validate_layer(layer)?;
        let (scales, zeros) = per_group_values(layer);
        Ok(LayerWeights {
            shape: layer.shape,
            dtype: layer.dtype,
            key: weight_key(layer, None, layer.shape.n),
            scales,
            zeros,
        })
    }

    /// Whether these were formed from a layer of `layer`'s shape and dtype. A same-shaped
    /// stranger is not caught here: its weights would meet the cross-check, which decodes the
    /// sampled columns from `layer` itself.
    pub(super) fn describes(&self, layer: &QuantizedLayer) -> bool {
        self.shape == layer.shape && self.dtype == layer.dtype
    }

    /// The key of the decoded weights with `offset`'s lane (the device keeps them under it).
    pub(super) fn key(&self, offset: Option<f64>) -> u64 {
        let offset = offset.map_or(u64::MAX, f64::to_bits);
        xxhash_rust::xxh3::xxh3_64_with_seed(&offset.to_le_bytes(), self.key)
            ^ 0x5245_5349_4445_4E54
    }

    pub(super) fn operand<'a>(
        &'a self,
        layer: &'a QuantizedLayer,
        offset: Option<f64>,
    ) -> WeightOperand<'a> {
        WeightOperand {
            n: self.shape.n,
            k: self.shape.k,
            group: self.shape.group,
            codes: &layer.q,
            scales: Cow::Borrowed(&self.scales),
            zeros: Cow::Borrowed(&self.zeros),
            offset,
        }
    }
}
