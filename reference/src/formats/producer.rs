//! The checkpoint producers a case can name (SPEC §3), and how each writes a logical layer.

use super::awq::AwqLayer;
use super::compressed::CompressedTensorsLayer;
use super::convert::Checkpoint;
use super::gptq::{GptqLayer, GptqVersion};
use super::layout::LayerError;
use super::legacy::LegacyLayer;
use crate::layer::QuantizedLayer;
use serde::{Deserialize, Serialize};

/// Every producer expresses both symmetries; what a producer cannot take is a shape (AWQ packs
/// weights along N, so N % 8 == 0), which [`Producer::build`] reports as a [`LayerError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Producer {
    CompressedTensors,
    GptqV1,
    GptqV2,
    Awq,
    LegacyUnpackedZp,
}

impl Producer {
    pub const ALL: [Producer; 5] = [
        Producer::CompressedTensors,
        Producer::GptqV1,
        Producer::GptqV2,
        Producer::Awq,
        Producer::LegacyUnpackedZp,
    ];

    /// Same as the serde name and the built checkpoint's `format_name()`.
    pub fn name(self) -> &'static str {
        match self {
            Producer::CompressedTensors => "compressed-tensors",
            Producer::GptqV1 => "gptq-v1",
            Producer::GptqV2 => "gptq-v2",
            Producer::Awq => "awq",
            Producer::LegacyUnpackedZp => "legacy-unpacked-zp",
        }
    }

    pub fn parse(s: &str) -> Option<Producer> {
        Producer::ALL.into_iter().find(|p| p.name() == s)
    }

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

impl std::fmt::Display for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
