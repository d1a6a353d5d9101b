//! The producer library's own results, when the fixture script wrote them beside the model
//! (`w4a16-oracle.safetensors`): per module the library's dequantized weight `[N, K]`, and an
//! input `x [M, K]` with the library's `F.linear(x, w)` output `y [M, N]`. A second oracle that
//! owes nothing to this project's readers.

use crate::activations::to_activations;
use crate::error::CheckpointError;
use crate::recipe::{Y_BLOCK_K_KEY, Y_RECIPE_KEY, YRecipe};
use crate::shards::SafetensorsFile;
use std::path::Path;
use w4a16_reference::formats::TensorData;
use w4a16_reference::{ActDtype, Activations};

pub const ORACLE_FILE: &str = "w4a16-oracle.safetensors";

#[derive(Debug)]
pub struct Oracle {
    file: SafetensorsFile,
}

/// What the oracle file holds for one module.
#[derive(Clone, Debug, PartialEq)]
pub struct OracleEntry {
    /// `[N, K]` bits in the activation dtype.
    pub dequantized: Option<Vec<u16>>,
    pub x: Option<Activations>,
    /// `[M, N]` bits in the activation dtype (M from `x`).
    pub y: Option<Vec<u16>>,
    /// `[N, K]` bits: what was quantized, before the producer packed it, where the fixture
    /// script records it (a producer with a packing defect reads back something else).
    pub intended: Option<Vec<u16>>,
}

impl Oracle {
    /// `dir/w4a16-oracle.safetensors`, or `None` when the directory has none.
    pub fn open(dir: &Path) -> Result<Option<Oracle>, CheckpointError> {
        let path = dir.join(ORACLE_FILE);
        if !path.exists() {
            return Ok(None);
        }
        Ok(Some(Oracle {
            file: SafetensorsFile::open(&path)?,
        }))
    }

    /// The recipe the file declares for its `y` (metadata `y_recipe`, `y_block_k`); `None`
    /// when it declares none and the producer's default applies ([`crate::recipe`]).
    pub fn y_recipe(&self) -> Result<Option<YRecipe>, CheckpointError> {
        YRecipe::from_metadata(
            self.file.metadata_value(Y_RECIPE_KEY),
            self.file.metadata_value(Y_BLOCK_K_KEY),
        )
    }

    fn half(
        &self,
        name: &str,
        shape: &[usize],
        dtype: ActDtype,
    ) -> Result<Option<Vec<u16>>, CheckpointError> {
        if !self.file.contains(name) {
            return Ok(None);
        }
        let t = self.file.tensor(name)?;
        match (&t.data, dtype) {
            (TensorData::F16(b), ActDtype::F16) | (TensorData::Bf16(b), ActDtype::Bf16)
                if t.shape == shape =>
            {
                Ok(Some(b.clone()))
            }
            _ => Err(CheckpointError::Activations {
                file: ORACLE_FILE.into(),
                tensor: name.into(),
                detail: format!(
                    "expected {} {shape:?} (the model's dtype), got {} {:?}",
                    dtype.name(),
                    t.dtype(),
                    t.shape
                ),
            }),
        }
    }

    /// The oracle tensors of `module` (an `[N, K]` linear of dtype `dtype`).
    pub fn module(
        &self,
        module: &str,
        n: usize,
        k: usize,
        dtype: ActDtype,
    ) -> Result<OracleEntry, CheckpointError> {
        let dequantized = self.half(&format!("{module}.dequantized"), &[n, k], dtype)?;
        let xname = format!("{module}.x");
        let x = if self.file.contains(&xname) {
            Some(to_activations(
                ORACLE_FILE,
                &self.file.tensor(&xname)?,
                k,
                dtype,
            )?)
        } else {
            None
        };
        let y = match &x {
            Some(x) => self.half(&format!("{module}.y"), &[x.m, n], dtype)?,
            None => None,
        };
        let intended = self.half(&format!("{module}.intended_dequantized"), &[n, k], dtype)?;
        Ok(OracleEntry {
            dequantized,
            x,
            y,
            intended,
        })
    }
}
