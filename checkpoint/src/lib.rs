//! Hugging Face style quantized model directories (config.json + safetensors shards + index),
//! read one linear at a time into the reference's checkpoint types.
//!
//! [`ModelDir::open`] parses the config and the shard headers (memory-mapped, no tensor data)
//! and detects every quantized linear; [`ModelDir::load`] copies one linear's tensors, checks
//! them against the format and the architecture, and returns a reference
//! [`w4a16_reference::formats::Checkpoint`]. Refusals name the file, the tensor and the rule.

pub mod activations;
pub mod config;
pub mod detect;
pub mod error;
pub mod fixtures;
pub mod load;
pub mod oracle;
pub mod project_models;
pub mod recipe;
pub mod shards;
pub mod synthetic;
pub mod writer;

pub use activations::ActivationsFile;
pub use config::{GroupSize, ModelConfig, QuantMethod, QuantScheme, QuantizationConfig};
pub use detect::{ExpertGroup, FusedGroup, LinearEntry, LinearRole, Proj};
pub use error::CheckpointError;
pub use load::{CheckpointDefect, GptqV1Overflow, LoadedLinear, OverflowCell, load_linear};
pub use oracle::{Oracle, OracleEntry};
pub use recipe::YRecipe;
pub use shards::{SafetensorsFile, ShardSet, TensorMeta};

use std::path::{Path, PathBuf};

/// An opened model directory: config, shard headers and the detected linears.
#[derive(Debug)]
pub struct ModelDir {
    path: PathBuf,
    config: ModelConfig,
    shards: ShardSet,
    detection: detect::Detection,
}

impl ModelDir {
    /// Reads config.json and the shard headers and detects the linears. A module refused by
    /// detection is kept in [`ModelDir::refusals`]; the others stay usable.
    pub fn open(path: &Path) -> Result<ModelDir, CheckpointError> {
        let config = ModelConfig::load(path)?;
        let shards = ShardSet::open(path)?;
        let detection = detect::detect(&config, &shards);
        Ok(ModelDir {
            path: path.to_path_buf(),
            config,
            shards,
            detection,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn shards(&self) -> &ShardSet {
        &self.shards
    }

    /// Every quantized linear detected, sorted by module name.
    pub fn linears(&self) -> &[LinearEntry] {
        &self.detection.linears
    }

    pub fn linear(&self, module: &str) -> Option<&LinearEntry> {
        self.detection.linears.iter().find(|l| l.module == module)
    }

    /// Linears stored unquantized (lm_head, routers, ignored modules).
    pub fn unquantized_linears(&self) -> &[String] {
        &self.detection.unquantized
    }

    pub fn fused_groups(&self) -> &[FusedGroup] {
        &self.detection.fused
    }

    pub fn expert_groups(&self) -> &[ExpertGroup] {
        &self.detection.experts
    }

    /// Modules refused while detecting (missing or extra tensors, untargeted, …).
    pub fn refusals(&self) -> &[CheckpointError] {
        &self.detection.refusals
    }

    /// `(N, K)` of a linear from its packed weight's header shape alone (no tensor data read):
    /// what the startup memory check needs for every layer of a model without loading any.
    pub fn shape_of(&self, entry: &LinearEntry) -> Result<(usize, usize), CheckpointError> {
        let main = match entry.method {
            QuantMethod::CompressedTensors => "weight_packed",
            QuantMethod::Gptq(_) | QuantMethod::Awq => "qweight",
        };
        let name = entry
            .tensors
            .get(main)
            .ok_or_else(|| CheckpointError::TensorNotFound {
                tensor: format!("{}.{main}", entry.module),
            })?;
        let meta = self
            .shards
            .meta(name)
            .ok_or_else(|| CheckpointError::TensorNotFound {
                tensor: name.clone(),
            })?;
        let [a, b] = meta.shape[..] else {
            return Err(CheckpointError::Rank {
                shard: self.shards.shard_name(name),
                tensor: name.clone(),
                expected: "a rank-2 packed weight".into(),
                got: meta.shape.clone(),
            });
        };
        Ok(match entry.method {
            // [N, K/8]
            QuantMethod::CompressedTensors => (a, 8 * b),
            // [K/8, N]
            QuantMethod::Gptq(_) => (b, 8 * a),
            // [K, N/8]
            QuantMethod::Awq => (8 * b, a),
        })
    }

    /// Copies and checks one linear's tensors.
    pub fn load(&self, entry: &LinearEntry) -> Result<LoadedLinear, CheckpointError> {
        load_linear(&self.config, &self.shards, entry)
    }

    /// The producer library's own results, when the directory carries them.
    pub fn oracle(&self) -> Result<Option<Oracle>, CheckpointError> {
        Oracle::open(&self.path)
    }
}
