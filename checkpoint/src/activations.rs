//! Real activations for `--activations FILE`: a safetensors file with one tensor per module,
//! named `<module>`, `<module>.input` or `<module>.x` (so an oracle file's recorded inputs serve
//! too), shape `[M, K]` (or `[K]`, M = 1), in the model's dtype.
//! A fused group takes its first part's input (the parts share it).

use crate::detect::FusedGroup;
use crate::error::CheckpointError;
use crate::shards::SafetensorsFile;
use std::path::Path;
use w4a16_reference::formats::{StoredDtype, Tensor, TensorData};
use w4a16_reference::{ActDtype, Activations};

#[derive(Debug)]
pub struct ActivationsFile {
    file: SafetensorsFile,
}

impl ActivationsFile {
    pub fn open(path: &Path) -> Result<Self, CheckpointError> {
        Ok(ActivationsFile {
            file: SafetensorsFile::open(path)?,
        })
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The tensor name holding `module`'s input, if the file has one.
    pub fn tensor_name(&self, module: &str) -> Option<String> {
        [
            module.to_string(),
            format!("{module}.input"),
            format!("{module}.x"),
        ]
        .into_iter()
        .find(|n| self.file.contains(n))
    }

    /// `module`'s input as `[M, K]` activations, or `None` when the file has none for it.
    pub fn for_module(
        &self,
        module: &str,
        k: usize,
        dtype: ActDtype,
    ) -> Result<Option<Activations>, CheckpointError> {
        let Some(name) = self.tensor_name(module) else {
            return Ok(None);
        };
        let t = self.file.tensor(&name)?;
        to_activations(self.file.name(), &t, k, dtype).map(Some)
    }

    pub fn for_group(
        &self,
        group: &FusedGroup,
        k: usize,
        dtype: ActDtype,
    ) -> Result<Option<Activations>, CheckpointError> {
        match group.parts.first() {
            Some(first) => self.for_module(first, k, dtype),
            None => Ok(None),
        }
    }
}

/// `[M, K]` or `[K]` in `dtype`, else a typed error naming file and tensor.
pub(crate) fn to_activations(
    file: &str,
    t: &Tensor,
    k: usize,
    dtype: ActDtype,
) -> Result<Activations, CheckpointError> {
    let err = |detail: String| CheckpointError::Activations {
        file: file.to_string(),
        tensor: t.name.clone(),
        detail,
    };
    let m = match t.shape[..] {
        [m, kk] if kk == k && m > 0 => m,
        [kk] if kk == k => 1,
        _ => {
            return Err(err(format!(
                "expected shape [M, K] or [K] with K = {k}, got {:?}",
                t.shape
            )));
        }
    };
    let bits = match (&t.data, dtype) {
        (TensorData::F16(b), ActDtype::F16) | (TensorData::Bf16(b), ActDtype::Bf16) => b.clone(),
        _ => {
            return Err(err(format!(
                "expected dtype {} (the model's), got {}",
                StoredDtype::from(dtype),
                t.dtype()
            )));
        }
    };
    Ok(Activations {
        m,
        k,
        row_stride: k,
        dtype,
        data: bits,
    })
}
