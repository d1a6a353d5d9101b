//! Synthetic model directories of real size (`w4a16 make-synthetic-model`): a decoder model's
//! quantized linears in one producer's format (config.json, one safetensors shard per decoder
//! layer and the index), for measuring check-model on models too large to commit.
//!
//! The weights are the reference's seeded realistic data, so a directory is the same bytes for
//! the same options and seed. The writer streams: it holds one decoder layer at a time (its
//! linears generated in parallel), so an 80-layer 70B shape needs memory for one layer, not
//! 35 GB.

use crate::error::CheckpointError;
use crate::writer::{
    ModelSpec, decoder_linears, producer_tensors, quantization_config, seeded_layer, write_index,
    write_json, write_safetensors,
};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use w4a16_reference::ActDtype;
use w4a16_reference::formats::{LayerError, Producer, Tensor};

/// A decoder's dimensions, named after the model whose shapes it copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyntheticShape {
    /// Llama 3 70B: hidden 8192, 64 heads of 128, 8 KV heads, intermediate 28672, 80 layers.
    Llama70b,
    /// Llama 3 8B: hidden 4096, 32 heads of 128, 8 KV heads, intermediate 14336, 32 layers.
    Llama8b,
    /// Llama 3.2 1B: hidden 2048, 32 heads of 64, 8 KV heads, intermediate 8192, 16 layers.
    Llama1b,
    /// A small decoder (hidden 512, 8 heads of 64, 2 KV heads, intermediate 1024) for tests.
    Tiny,
}

impl SyntheticShape {
    pub const ALL: [SyntheticShape; 4] = [
        SyntheticShape::Llama70b,
        SyntheticShape::Llama8b,
        SyntheticShape::Llama1b,
        SyntheticShape::Tiny,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SyntheticShape::Llama70b => "llama-70b",
            SyntheticShape::Llama8b => "llama-8b",
            SyntheticShape::Llama1b => "llama-1b",
            SyntheticShape::Tiny => "tiny",
        }
    }

    pub fn parse(name: &str) -> Result<SyntheticShape, SyntheticError> {
        Self::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| SyntheticError::UnknownShape {
                got: name.to_string(),
                expected: Self::ALL.map(|s| s.name()).join(", "),
            })
    }

    /// The decoder layers of the model the shape copies.
    pub fn full_layers(self) -> usize {
        match self {
            SyntheticShape::Llama70b => 80,
            SyntheticShape::Llama8b => 32,
            SyntheticShape::Llama1b => 16,
            SyntheticShape::Tiny => 2,
        }
    }

    /// `(hidden, heads, kv heads, head dim, intermediate)`.
    fn dims(self) -> (usize, usize, usize, usize, usize) {
        match self {
            SyntheticShape::Llama70b => (8192, 64, 8, 128, 28672),
            SyntheticShape::Llama8b => (4096, 32, 8, 128, 14336),
            SyntheticShape::Llama1b => (2048, 32, 8, 64, 8192),
            SyntheticShape::Tiny => (512, 8, 2, 64, 1024),
        }
    }

    /// The architecture of `layers` decoder layers of this shape in `dtype`.
    pub fn spec(self, layers: usize, dtype: ActDtype) -> ModelSpec {
        let (hidden, heads, kv, head_dim, inter) = self.dims();
        ModelSpec {
            architecture: "LlamaForCausalLM".into(),
            hidden_size: hidden,
            intermediate_size: inter,
            num_hidden_layers: layers,
            num_attention_heads: heads,
            num_key_value_heads: kv,
            head_dim,
            dtype,
            moe: None,
        }
    }
}

/// What to write: a shape, how many of its decoder layers, and how they are quantized.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticModel {
    pub shape: SyntheticShape,
    pub layers: usize,
    /// The format the shards are in (its library's tensor names, packing and config).
    pub producer: Producer,
    pub group: usize,
    pub symmetric: bool,
    pub dtype: ActDtype,
    /// Every weight follows from it: the same seed writes the same bytes.
    pub seed: u64,
}

/// One decoder layer on disk.
#[derive(Clone, Debug)]
pub struct LayerWritten {
    pub layer: usize,
    pub shard: PathBuf,
    pub bytes: u64,
}

/// Why a synthetic model was not written: the option that is wrong and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum SyntheticError {
    #[error("--shape: expected one of {expected}, got {got:?}")]
    UnknownShape { got: String, expected: String },
    #[error("--layers: expected 1 or more decoder layers, got 0")]
    NoLayers,
    #[error(
        "--group: expected a positive group size dividing every K of {shape} ({ks}), got {group}"
    )]
    GroupDoesNotDivide {
        shape: &'static str,
        ks: String,
        group: usize,
    },
    #[error(
        "--format: {producer} is not a format a Hugging Face library writes; expected compressed-tensors, gptq-v1, gptq-v2 or awq"
    )]
    NotAWrittenFormat { producer: Producer },
    #[error(
        "{}: the directory is not empty; expected a new or empty directory (a synthetic model never mixes with other shards)",
        .dir.display()
    )]
    NotEmpty { dir: PathBuf },
    #[error("{module}: {producer} refused the layer: {source}")]
    Producer {
        module: String,
        producer: Producer,
        source: LayerError,
    },
    #[error(transparent)]
    Write(#[from] CheckpointError),
}

impl SyntheticModel {
    /// The options' own errors, before anything is written.
    pub fn validate(&self) -> Result<(), SyntheticError> {
        if self.layers == 0 {
            return Err(SyntheticError::NoLayers);
        }
        if self.producer == Producer::LegacyUnpackedZp {
            return Err(SyntheticError::NotAWrittenFormat {
                producer: self.producer,
            });
        }
        let spec = self.shape.spec(1, self.dtype);
        let mut ks: Vec<usize> = decoder_linears(&spec, 0, false)
            .into_iter()
            .map(|(_, _, k)| k)
            .collect();
        ks.sort_unstable();
        ks.dedup();
        if self.group == 0 || ks.iter().any(|k| k % self.group != 0) {
            return Err(SyntheticError::GroupDoesNotDivide {
                shape: self.shape.name(),
                ks: ks
                    .iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                group: self.group,
            });
        }
        Ok(())
    }

    /// Writes the model into `dir` (created if missing, refused unless empty), one decoder
    /// layer at a time, telling `on_layer` after each. Returns the bytes of tensor data.
    pub fn write(
        &self,
        dir: &Path,
        on_layer: &mut dyn FnMut(&LayerWritten),
    ) -> Result<u64, SyntheticError> {
        self.validate()?;
        let not_empty = std::fs::read_dir(dir)
            .map(|mut entries| entries.next().is_some())
            .unwrap_or(false);
        if not_empty {
            return Err(SyntheticError::NotEmpty {
                dir: dir.to_path_buf(),
            });
        }
        std::fs::create_dir_all(dir).map_err(|e| CheckpointError::io(dir, e))?;
        let spec = self.shape.spec(self.layers, self.dtype);
        let group = (self.group != 0).then_some(self.group);
        let config = spec.config_json(Some(quantization_config(
            self.producer,
            group,
            self.symmetric,
        )));
        write_json(&dir.join(crate::config::CONFIG_JSON), &config)?;
        let mut weight_map = BTreeMap::new();
        let mut total = 0u64;
        for layer in 0..self.layers {
            let file = format!("model-{:05}-of-{:05}.safetensors", layer + 1, self.layers);
            let tensors = self.layer_tensors(&spec, layer)?;
            let mut bytes = 0u64;
            for t in &tensors {
                weight_map.insert(t.name.clone(), file.clone());
                bytes += (t.data.len() * t.dtype().size_bytes()) as u64;
            }
            let shard = dir.join(&file);
            write_safetensors(&shard, &tensors)?;
            total += bytes;
            on_layer(&LayerWritten {
                layer,
                shard,
                bytes,
            });
        }
        write_index(dir, &weight_map)?;
        Ok(total)
    }

    /// One decoder layer's tensors, its linears generated and packed in parallel.
    fn layer_tensors(&self, spec: &ModelSpec, layer: usize) -> Result<Vec<Tensor>, SyntheticError> {
        let linears = decoder_linears(spec, layer, false);
        let per_linear: Vec<Result<Vec<Tensor>, SyntheticError>> = linears
            .into_par_iter()
            .map(|(module, n, k)| {
                let seed = w4a16_reference::data::case_seed(&format!("{}/{module}", self.seed));
                let logical =
                    seeded_layer(seed, n, k, self.group, self.dtype, self.symmetric, false);
                producer_tensors(self.producer, &logical, &module).map_err(|source| {
                    SyntheticError::Producer {
                        module,
                        producer: self.producer,
                        source,
                    }
                })
            })
            .collect();
        let mut out = Vec::new();
        for tensors in per_linear {
            out.extend(tensors?);
        }
        Ok(out)
    }
}
