//! Model descriptions (`cases/models/<name>.toml`): enough of a model to size its resident
//! weights, its dense prefill cache and its KV cache for the startup memory check (docs/contract.md §5).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use w4a16_reference::ActDtype;
use w4a16_reference::layer::{LayerShape, Symmetry};

use super::error::{CaseFileError, SpanIndex, from_toml_error};
use super::schema::Positive;

/// The KV-cache element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KvDtype {
    F16,
    Bf16,
    Fp8,
}

impl KvDtype {
    pub fn bytes(self) -> u64 {
        match self {
            KvDtype::F16 | KvDtype::Bf16 => 2,
            KvDtype::Fp8 => 1,
        }
    }
}

/// One quantized linear layer of every transformer block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Linear {
    pub name: String,
    pub shape: LayerShape,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ModelDescription {
    pub name: String,
    pub file: PathBuf,
    /// Transformer blocks; each holds every linear of `linears` once.
    pub layers: u64,
    /// Blocks whose attention keeps a KV cache (every block, unless a hybrid model's
    /// linear-attention blocks keep none, or a checkpoint lists its linears once for the whole
    /// model with `layers = 1`).
    pub kv_layers: u64,
    pub dtype: ActDtype,
    pub symmetry: Symmetry,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub kv_dtype: KvDtype,
    /// The model's default context length, used when the caller gives none.
    pub max_model_len: u64,
    pub linears: Vec<Linear>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: String,
    layers: Positive,
    kv_layers: Option<Positive>,
    dtype: ActDtype,
    symmetry: Symmetry,
    group: Positive,
    kv_heads: Positive,
    head_dim: Positive,
    kv_dtype: KvDtype,
    max_model_len: Positive,
    linear: Vec<RawLinear>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLinear {
    name: String,
    k: Positive,
    n: Positive,
    group: Option<Positive>,
}

impl ModelDescription {
    pub fn load(path: &Path) -> Result<ModelDescription, CaseFileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CaseFileError::new(path, "", format!("cannot read: {e}")))?;
        ModelDescription::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<ModelDescription, CaseFileError> {
        let raw: Raw = toml::from_str(text).map_err(|e| from_toml_error(path, text, &e))?;
        let index = SpanIndex::new(text);
        let err = |key: String, msg: String| {
            let line = index.as_ref().and_then(|ix| ix.line_of_key(&key));
            CaseFileError::new(path, key, msg).with_line(line)
        };
        if raw.linear.is_empty() {
            return Err(err(
                "linear".into(),
                "a model needs at least one [[linear]] layer".into(),
            ));
        }
        let mut linears = Vec::new();
        for (i, l) in raw.linear.iter().enumerate() {
            let group = l.group.unwrap_or(raw.group).0;
            let (k, n) = (l.k.0, l.n.0);
            if k % group != 0 {
                return Err(err(
                    format!("linear[{i}].k"),
                    format!("K={k} is not a multiple of the group size {group}"),
                ));
            }
            if k % 8 != 0 {
                return Err(err(
                    format!("linear[{i}].k"),
                    format!("K={k} must be a multiple of 8 (8 codes per u32 word)"),
                ));
            }
            if linears.iter().any(|x: &Linear| x.name == l.name) {
                return Err(err(
                    format!("linear[{i}].name"),
                    format!("linear \"{}\" is listed twice", l.name),
                ));
            }
            linears.push(Linear {
                name: l.name.clone(),
                shape: LayerShape::new(n, k, group),
            });
        }
        Ok(ModelDescription {
            name: raw.name,
            file: path.to_path_buf(),
            layers: raw.layers.0 as u64,
            kv_layers: raw.kv_layers.map_or(raw.layers.0, |p| p.0) as u64,
            dtype: raw.dtype,
            symmetry: raw.symmetry,
            kv_heads: raw.kv_heads.0 as u64,
            head_dim: raw.head_dim.0 as u64,
            kv_dtype: raw.kv_dtype,
            max_model_len: raw.max_model_len.0 as u64,
            linears,
        })
    }

    /// KV cache for one request of `max_model_len` tokens: 2 × kv layers × kv_heads × head_dim
    /// × max_model_len × kv bytes.
    pub fn kv_bytes(&self, max_model_len: u64) -> u64 {
        2 * self.kv_layers * self.kv_heads * self.head_dim * max_model_len * self.kv_dtype.bytes()
    }
}
