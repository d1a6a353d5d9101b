//! A decoder layer's conversions handed from the check-model parent to the worker that launches
//! them: the parent reads, checks and converts each layer once and writes the launch layers'
//! conversions to a folder of the unit; the worker reads them instead of reading the shards and
//! converting again (docs/check-model.md, "At model scale"). A worker finds a layer's file or
//! reads that layer itself, as before (a layer whose own reading failed, a MoE layer).

use super::run::LaunchLayer;
use crate::runner::execute::{HandoffError, PreparedHandoff};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use w4a16_reference::ActDtype;
use w4a16_reference::formats::Producer;
use w4a16_reference::formats::{Checkpoint, ConvertError, Converted, LoadTarget, RowPadding};
use w4a16_reference::layer::{LayerShape, QuantizedLayer, Symmetry};

/// The run's folder of handed-over layers, one subfolder per decoder layer in flight; removed
/// with everything in it when the run ends.
pub(super) struct HandoffDir {
    root: PathBuf,
}

impl HandoffDir {
    /// A fresh folder under the system's temporary folder (named by process and a counter:
    /// checks in one process, as the tests run them, each get their own).
    pub(super) fn create() -> std::io::Result<HandoffDir> {
        static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let root = std::env::temp_dir().join(format!(
            "w4a16-handoff-{}-{run}-{nanos:09}",
            std::process::id()
        ));
        std::fs::create_dir(&root)?;
        Ok(HandoffDir { root })
    }

    /// The folder of the `index`-th unit (created empty).
    pub(super) fn unit(&self, index: usize, name: &str) -> std::io::Result<PathBuf> {
        let dir = self.root.join(format!("{index}-{}", file_name(name)));
        std::fs::create_dir(&dir)?;
        Ok(dir)
    }
}

impl Drop for HandoffDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// What the worker needs of a [`LaunchLayer`] besides its conversion.
#[derive(Serialize, Deserialize)]
struct LaunchMeta {
    module: String,
    input_of: String,
    shape: LayerShape,
    dtype: ActDtype,
    symmetry: Symmetry,
    producer: Producer,
    bias: bool,
}

fn file_name(module: &str) -> String {
    module.replace(['/', '\\'], "_")
}

fn layer_file(dir: &Path, module: &str) -> PathBuf {
    dir.join(format!("{}.layer", file_name(module)))
}

/// Writes `layer` and its conversion into the unit's folder; the file appears whole or not at
/// all (written aside, then renamed).
pub(super) fn write_layer(
    dir: &Path,
    layer: &LaunchLayer,
    prepared: &PreparedHandoff,
) -> Result<(), HandoffError> {
    let path = layer_file(dir, &layer.module);
    let part = path.with_extension("part");
    let written = (|| {
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&part)?);
        let meta = serde_json::to_vec(&LaunchMeta {
            module: layer.module.clone(),
            input_of: layer.input_of.clone(),
            shape: layer.shape,
            dtype: layer.dtype,
            symmetry: layer.symmetry,
            producer: layer.producer,
            bias: layer.bias,
        })?;
        w.write_all(&(meta.len() as u64).to_le_bytes())?;
        w.write_all(&meta)?;
        prepared.write_to(&mut w)?;
        w.into_inner().map_err(|e| e.into_error())?;
        std::fs::rename(&part, &path)?;
        Ok(())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    written
}

/// Whether the parent handed `module` over.
pub(super) fn has_layer(dir: &Path, module: &str) -> bool {
    layer_file(dir, module).is_file()
}

/// The layer the parent handed over as `module`, with its conversion; its checkpoint refuses to
/// be converted again ([`HandedOver`]).
pub(super) fn read_layer(
    dir: &Path,
    module: &str,
) -> Result<(LaunchLayer, PreparedHandoff), HandoffError> {
    let mut r = BufReader::with_capacity(1 << 20, File::open(layer_file(dir, module))?);
    let mut len = [0u8; 8];
    std::io::Read::read_exact(&mut r, &mut len)?;
    let len = u64::from_le_bytes(len);
    if len > 1 << 20 {
        let (what, max) = ("a launch layer's header", 1 << 20);
        return Err(HandoffError::TooLong { what, len, max });
    }
    let mut meta = vec![0u8; len as usize];
    std::io::Read::read_exact(&mut r, &mut meta)?;
    let meta: LaunchMeta = serde_json::from_slice(&meta)?;
    let prepared = PreparedHandoff::read_from(&mut r)?;
    let layer = LaunchLayer {
        checkpoint: Arc::new(HandedOver {
            module: meta.module.clone(),
        }),
        module: meta.module,
        input_of: meta.input_of,
        shape: meta.shape,
        dtype: meta.dtype,
        symmetry: meta.symmetry,
        producer: meta.producer,
        bias: meta.bias,
    };
    Ok((layer, prepared))
}

/// The checkpoint of a layer handed over: the worker launches the parent's conversion, so a
/// case that would convert it again is refused by name instead of silently converting.
#[derive(Debug)]
pub(super) struct HandedOver {
    module: String,
}

impl HandedOver {
    fn refused(&self) -> ConvertError {
        ConvertError::NotHandedOver {
            module: self.module.clone(),
        }
    }
}

impl Checkpoint for HandedOver {
    fn format_name(&self) -> &'static str {
        "handed-over"
    }

    fn to_resident(&self, _: &LoadTarget, _: RowPadding) -> Result<Converted, ConvertError> {
        Err(self.refused())
    }

    fn decode_own_semantics(&self) -> Result<QuantizedLayer, ConvertError> {
        Err(self.refused())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker that would convert a handed-over layer again gets a refusal naming the layer, so
    /// the `convert` check fails instead of silently converting twice.
    #[test]
    fn a_handed_over_layer_refuses_to_be_converted_again_naming_it() {
        let module = "model.layers.0.mlp.down_proj";
        let layer = HandedOver {
            module: module.into(),
        };
        let own = layer.decode_own_semantics().expect_err("no own reading");
        assert!(own.to_string().contains(module), "{own}");
        let target = LoadTarget {
            n: 8,
            k: 128,
            dtype: ActDtype::Bf16,
        };
        let converted = layer.to_resident(&target, RowPadding::NONE);
        assert!(
            matches!(converted, Err(ConvertError::NotHandedOver { .. })),
            "{converted:?}"
        );
    }
}
