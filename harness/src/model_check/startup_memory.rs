//! The startup memory check of a model check (with the prefill dequant cache enabled): the model
//! as the check sees it, against the device memory given.

use super::StartupMemoryOutcome;
use super::run::Run;
use w4a16_checkpoint::{CheckpointError, ModelDir};
use w4a16_reference::ActDtype;
use w4a16_reference::layer::{LayerShape, Symmetry};
use w4a16_select::config::{
    PrefillDequant, StartupMemoryError, StartupRequest, check_startup_memory,
};

/// Why the model cannot be described to the startup memory check (it is then not made).
#[derive(Debug, thiserror::Error)]
pub enum StartupMemoryModelError {
    /// A detected linear whose N×K the checkpoint does not give.
    #[error("cannot size {module}: {source}")]
    Unsized {
        module: String,
        source: Box<CheckpointError>,
    },
}

impl Run<'_, '_> {
    /// The startup memory check with the prefill dequant cache enabled; `None` when it is not.
    pub(super) fn startup_memory(&self) -> Option<StartupMemoryOutcome> {
        if self.ctx.config.prefill_dequant != PrefillDequant::Enable {
            return None;
        }
        let Some(inputs) = self.opts.startup_memory else {
            return Some(StartupMemoryOutcome::NotChecked {
                reason: "rdna_hybrid_w4a16_prefill_dequant is enabled but no device memory size is known (give --device-memory-gib)".into(),
            });
        };
        let description = match startup_memory_model(self.model, &self.name) {
            Ok(d) => d,
            Err(e) => {
                return Some(StartupMemoryOutcome::NotChecked {
                    reason: e.to_string(),
                });
            }
        };
        let req = StartupRequest {
            model: &description,
            target: self.ctx.target,
            device_memory_bytes: inputs.device_memory_bytes,
            gpu_memory_utilization: inputs.gpu_memory_utilization,
            max_model_len: inputs.max_model_len,
        };
        Some(match check_startup_memory(&self.ctx.config, &req) {
            Ok(r) => StartupMemoryOutcome::Fits(r),
            Err(StartupMemoryError::DoesNotFit(r)) => StartupMemoryOutcome::DoesNotFit {
                message: StartupMemoryError::DoesNotFit(r).to_string(),
            },
            Err(e) => StartupMemoryOutcome::NotChecked {
                reason: e.to_string(),
            },
        })
    }
}

/// The model as the startup memory check sees it: every detected quantized linear once (one "block"
/// holding them all) and the KV cache of every attention layer.
fn startup_memory_model(
    model: &ModelDir,
    name: &str,
) -> Result<w4a16_cases::ModelDescription, StartupMemoryModelError> {
    let config = model.config();
    let mut linears = Vec::new();
    for entry in model.linears() {
        let (n, k) = model
            .shape_of(entry)
            .map_err(|source| StartupMemoryModelError::Unsized {
                module: entry.module.clone(),
                source: Box::new(source),
            })?;
        let group = entry.scheme.group_size.resolve(k);
        linears.push(w4a16_cases::model::Linear {
            name: entry.module.clone(),
            shape: LayerShape::new(n, k, group),
        });
    }
    let symmetry = if config.quantization.symmetric() {
        Symmetry::Sym
    } else {
        Symmetry::Asym
    };
    Ok(w4a16_cases::ModelDescription {
        name: name.to_string(),
        file: model.path().join(w4a16_checkpoint::config::CONFIG_JSON),
        layers: 1,
        kv_layers: config.num_hidden_layers as u64,
        dtype: config.dtype,
        symmetry,
        kv_heads: config.num_key_value_heads as u64,
        head_dim: config.head_dim as u64,
        kv_dtype: match config.dtype {
            ActDtype::F16 => w4a16_cases::model::KvDtype::F16,
            ActDtype::Bf16 => w4a16_cases::model::KvDtype::Bf16,
        },
        max_model_len: config.max_position_embeddings.unwrap_or(4096) as u64,
        linears,
    })
}
