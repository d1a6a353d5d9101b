//! The checkpoint producers a case can name (docs/contract.md §3), and how each writes a logical layer.

use super::awq::AwqLayer;
use super::compressed::CompressedTensorsLayer;
use super::convert::Checkpoint;
use super::gptq::{GptqLayer, GptqVersion};
use super::layout::LayerError;
use super::legacy::LegacyLayer;
use crate::layer::QuantizedLayer;

crate::named_enum! {
    /// Every producer expresses both symmetries; what a producer cannot take is a shape (AWQ packs
    /// weights along N, so N % 8 == 0), which [`Producer::build`] reports as a [`LayerError`].
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Producer {
        CompressedTensors = "compressed-tensors",
        GptqV1 = "gptq-v1",
        GptqV2 = "gptq-v2",
        Awq = "awq",
        LegacyUnpackedZp = "legacy-unpacked-zp",
    }
}

impl Producer {
    /// Whether this producer writes asymmetric layers with N % 8 != 0: compressed-tensors (a
    /// partial last zero-point word, `[ceil(N/8), K/G]`) and the legacy layout (zero points not
    /// packed). GPTQ and AWQ pack zero points in whole words along N; their
    /// [`Producer::build`] refuses such a layer with [`LayerError::NNotMultipleOf8`].
    pub fn writes_zero_points_for_any_n(self) -> bool {
        matches!(
            self,
            Producer::CompressedTensors | Producer::LegacyUnpackedZp
        )
    }

    /// Writes `layer` as this producer's checkpoint.
    pub fn build(self, layer: &QuantizedLayer) -> Result<Box<dyn Checkpoint>, LayerError> {
        Ok(match self {
            Producer::CompressedTensors => Box::new(CompressedTensorsLayer::from_logical(layer)?),
            Producer::GptqV1 => Box::new(GptqLayer::from_logical(layer, GptqVersion::V1)?),
            Producer::GptqV2 => Box::new(GptqLayer::from_logical(layer, GptqVersion::V2)?),
            Producer::Awq => Box::new(AwqLayer::from_logical(layer)?),
            Producer::LegacyUnpackedZp => Box::new(LegacyLayer::from_logical(layer)?),
        })
    }
}
