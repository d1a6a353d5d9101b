//! A decoder layer's conversions handed from the check-model parent to the worker that launches
//! them: the parent reads, checks and converts each layer once and writes the launch layers'
//! conversions to a folder of the unit; the worker reads them instead of reading the shards and
//! converting again (docs/check-model.md, "At model scale"). A MoE layer's experts go over the
//! same way, stacked as converted. A worker finds a layer's file or reads that layer itself, as
//! before (a layer whose own reading failed).

use super::experts::StackedExperts;
use super::run::LaunchLayer;
use super::stages::Pending;
use crate::runner::execute::{
    HandoffError, PreparedHandoff, read_header, read_resident_layer, write_header,
    write_resident_layer,
};

/// No launch layer's or MoE layer's header is near this long.
const MAX_META: u64 = 1 << 20;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use w4a16_reference::ActDtype;
use w4a16_reference::formats::Producer;
use w4a16_reference::formats::{Checkpoint, ConvertError, Converted, LoadTarget, RowPadding};
use w4a16_reference::layer::{LayerShape, QuantizedLayer, Symmetry};
use w4a16_reference::moe::MoeLayer;

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

fn experts_file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{}.experts", file_name(name)))
}

/// What the worker needs of a MoE layer besides its experts.
#[derive(Serialize, Deserialize)]
struct ExpertsMeta {
    name: String,
    producer: Producer,
    experts: usize,
}

/// Writes `f`'s bytes to `path` aside, then renames: the file appears whole or not at all.
fn write_whole(
    path: &Path,
    f: impl FnOnce(&mut BufWriter<File>) -> Result<(), HandoffError>,
) -> Result<(), HandoffError> {
    let part = path.with_extension("part");
    let written = (|| {
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&part)?);
        f(&mut w)?;
        w.into_inner().map_err(|e| e.into_error())?;
        std::fs::rename(&part, path)?;
        Ok(())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    written
}

/// Writes a MoE layer's stacked experts into the unit's folder, whole or not at all.
pub(super) fn write_experts(
    dir: &Path,
    name: &str,
    stacked: &StackedExperts,
) -> Result<(), HandoffError> {
    write_whole(&experts_file(dir, name), |w| {
        let experts = &stacked.layer.experts;
        let meta = ExpertsMeta {
            name: name.to_string(),
            producer: stacked.producer,
            experts: experts.len(),
        };
        write_header(w, &meta)?;
        experts.iter().try_for_each(|e| write_resident_layer(w, e))
    })
}

/// The layer the parent handed over as `module`: a launch layer with its conversion, or a MoE
/// layer's stacked experts.
pub(super) fn read_handed(dir: &Path, module: &str) -> Result<Pending, HandoffError> {
    if !experts_file(dir, module).is_file() {
        let (layer, prepared) = read_layer(dir, module)?;
        let prepared = Some(prepared);
        return Ok(Pending::Dense { layer, prepared });
    }
    let file = File::open(experts_file(dir, module))?;
    let mut r = BufReader::with_capacity(1 << 20, file);
    let meta: ExpertsMeta = read_header(&mut r, "a MoE layer's header", MAX_META)?;
    let experts = (0..meta.experts)
        .map(|_| read_resident_layer(&mut r))
        .collect::<Result<Vec<_>, _>>()?;
    let layer = MoeLayer::from_experts(experts).map_err(HandoffError::Experts)?;
    let stacked = StackedExperts {
        layer,
        producer: meta.producer,
    };
    Ok(Pending::Experts {
        name: meta.name,
        stacked,
    })
}

/// Writes `layer` and its conversion into the unit's folder; the file appears whole or not at
/// all (written aside, then renamed).
pub(super) fn write_layer(
    dir: &Path,
    layer: &LaunchLayer,
    prepared: &PreparedHandoff,
) -> Result<(), HandoffError> {
    write_whole(&layer_file(dir, &layer.module), |w| {
        let meta = LaunchMeta {
            module: layer.module.clone(),
            input_of: layer.input_of.clone(),
            shape: layer.shape,
            dtype: layer.dtype,
            symmetry: layer.symmetry,
            producer: layer.producer,
            bias: layer.bias,
        };
        write_header(w, &meta)?;
        prepared.write_to(w)
    })
}

/// Whether the parent handed `module` (a launch layer, or a MoE layer's experts) over.
pub(super) fn has_layer(dir: &Path, module: &str) -> bool {
    layer_file(dir, module).is_file() || experts_file(dir, module).is_file()
}

/// The layer the parent handed over as `module`, with its conversion; its checkpoint refuses to
/// be converted again ([`HandedOver`]).
fn read_layer(dir: &Path, module: &str) -> Result<(LaunchLayer, PreparedHandoff), HandoffError> {
    let mut r = BufReader::with_capacity(1 << 20, File::open(layer_file(dir, module))?);
    let meta: LaunchMeta = read_header(&mut r, "a launch layer's header", MAX_META)?;
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

    /// A MoE layer's stacked experts go over and come back as they were (every expert's
    /// resident arrays, the producer, the name), found by the name the worker asks for.
    #[test]
    fn handed_over_experts_read_back_as_they_were_written() {
        use w4a16_reference::data::DataClass;
        use w4a16_reference::moe::MoeSpec;
        let spec = MoeSpec {
            class: DataClass::Realistic,
            shape: LayerShape::new(24, 64, 32),
            dtype: ActDtype::Bf16,
            symmetry: Symmetry::Asym,
            experts: 3,
            distinguishable: true,
        };
        let layer = MoeLayer::generate(7, &spec).unwrap();
        let stacked = StackedExperts {
            layer: layer.clone(),
            producer: Producer::CompressedTensors,
        };
        let dir = tempfile::tempdir().unwrap();
        let name = "model.layers.3.mlp.experts.gate_up_proj";
        assert!(!has_layer(dir.path(), name));
        write_experts(dir.path(), name, &stacked).unwrap();
        assert!(has_layer(dir.path(), name));
        match read_handed(dir.path(), name).unwrap() {
            Pending::Experts { name: got, stacked } => {
                assert_eq!(got, name);
                assert_eq!(stacked.producer, Producer::CompressedTensors);
                assert_eq!(stacked.layer, layer);
            }
            Pending::Dense { .. } => panic!("experts read back as a dense layer"),
        }
        // A truncated file is a typed error, not a panic or a short layer.
        let path = experts_file(dir.path(), name);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 9]).unwrap();
        assert!(read_handed(dir.path(), name).is_err());
    }

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
