//! Why a model directory, or one of its layers, is refused. Every message names the file (shard
//! or config), the tensor where there is one, the rule broken, and what was expected vs got, so
//! a user can find the thing wrong without reading this crate.

use std::path::PathBuf;
use w4a16_reference::formats::ConvertError;

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: malformed JSON: {detail}")]
    ConfigJson { file: String, detail: String },
    /// A field of config.json (or quantize_config.json) that is missing, mistyped or out of range.
    #[error("{file}: {field}: expected {expected}, got {got}")]
    ConfigField {
        file: String,
        field: String,
        expected: String,
        got: String,
    },
    #[error(
        "{file}: no quantization_config, and no quantize_config.json beside it: expected a quantized checkpoint (compressed-tensors pack-quantized, GPTQ or AWQ GEMM)"
    )]
    MissingQuantizationConfig { file: String },
    #[error("{file}: unsupported quantization: {field}: expected {expected}, got {got}")]
    UnknownQuantization {
        file: String,
        field: String,
        got: String,
        expected: String,
    },
    #[error("{}: no *.safetensors file in the directory", .dir.display())]
    NoShards { dir: PathBuf },
    #[error(
        "{index}: weight_map names shard {shard} for {tensor}, but the directory has no such file"
    )]
    IndexShardMissing {
        index: String,
        shard: String,
        tensor: String,
    },
    #[error("{index}: weight_map puts {tensor} in {shard}, but {shard} has no tensor of that name")]
    TensorNotInShard {
        index: String,
        tensor: String,
        shard: String,
    },
    #[error(
        "{shard}: {tensor}: not listed in {index}'s weight_map (every tensor of an indexed shard must be)"
    )]
    TensorNotInIndex {
        shard: String,
        tensor: String,
        index: String,
    },
    #[error("{tensor}: stored in both {first} and {second}; expected each tensor in one shard")]
    DuplicateTensor {
        tensor: String,
        first: String,
        second: String,
    },
    #[error("{shard}: truncated safetensors file: {detail}")]
    Truncated { shard: String, detail: String },
    #[error("{shard}: invalid safetensors file: {detail}")]
    Safetensors { shard: String, detail: String },
    #[error("{shard}: {tensor}: unsupported dtype {got}; expected one of I32, I64, F16, BF16, F32")]
    UnsupportedDtype {
        shard: String,
        tensor: String,
        got: String,
    },
    #[error("{tensor}: no such tensor in the checkpoint")]
    TensorNotFound { tensor: String },
    #[error("{shard}: {module}: missing tensor {tensor}: {rule}")]
    MissingTensor {
        shard: String,
        module: String,
        tensor: String,
        rule: String,
    },
    #[error("{shard}: {tensor}: unexpected tensor: {rule}")]
    ExtraTensor {
        shard: String,
        tensor: String,
        rule: String,
    },
    #[error("{shard}: {tensor}: act-order checkpoints are not supported: {detail}")]
    ActOrder {
        shard: String,
        tensor: String,
        detail: String,
    },
    /// A tensor dtype that disagrees with the format or with the model's dtype.
    #[error("{shard}: {tensor}: expected dtype {expected} ({rule}), got {got}")]
    Dtype {
        shard: String,
        tensor: String,
        expected: String,
        got: String,
        rule: String,
    },
    /// A dimension that disagrees with the architecture (config.json) or with another tensor of
    /// the same module; `rule` says where the expected number comes from.
    #[error("{shard}: {tensor}: {dim} = {got} disagrees with {rule} = {expected}")]
    ShapeMismatch {
        shard: String,
        tensor: String,
        dim: String,
        expected: usize,
        got: usize,
        rule: String,
    },
    #[error("{shard}: {tensor}: expected {expected}, got shape {got:?}")]
    Rank {
        shard: String,
        tensor: String,
        expected: String,
        got: Vec<usize>,
    },
    #[error("{file}: {module}: {rule}")]
    Detection {
        file: String,
        module: String,
        rule: String,
    },
    #[error("{shard}: {source}")]
    Convert {
        shard: String,
        module: String,
        /// Boxed: the converter's error is large, and this enum travels in every `Result`.
        #[source]
        source: Box<ConvertError>,
    },
    /// A `__metadata__` value of the oracle file that is not one the reader knows.
    #[error("{file}: metadata {key} = {got:?}: expected {expected}")]
    OracleMetadata {
        file: String,
        key: String,
        got: String,
        expected: String,
    },
    #[error("{file}: {tensor}: {detail}")]
    Activations {
        file: String,
        tensor: String,
        detail: String,
    },
}

impl CheckpointError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CheckpointError::Io {
            path: path.into(),
            source,
        }
    }
}
