//! `w4a16 check-model`: a quantized checkpoint directory, one decoder layer at a time, through
//! the same checks as the suites (its producer's own reading against the converter, the
//! selection and its contract cross-check, the selected path and the fallback against the f64
//! reference for each batch size), plus what only a real checkpoint has: refusals naming shard
//! and tensor, producer defects, the producer library's own oracle, and the engine's fused
//! projections. A decoder layer's layers are read and converted in parallel (`stages.rs`); on a
//! GPU they launch in the runner's fault-isolated workers (`isolated.rs`).
//!
//! Memory: the shards are memory-mapped, only the tensors of the decoder layer being checked are
//! copied (and their mapped pages released), so the memory in use (RSS) is about one decoder
//! layer whatever the model's size.

mod experts;
pub mod fused;
mod handoff;
pub mod isolated;
pub mod oracle;
mod pipeline;
pub mod report;
mod run;
mod stages;
mod startup_memory;

pub use startup_memory::StartupMemoryModelError;

use crate::runner::execute::RunContext;
use crate::runner::timing::PhaseTimes;
use crate::runner::verdict::Check;
use crate::runner::verdict::{Cause, CheckpointRefusal, Outcome, SourceError, Verdict};
use run::Run;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;
use w4a16_checkpoint::{CheckpointError, LinearEntry, ModelDir};
use w4a16_reference::ActDtype;
use w4a16_reference::formats::Producer;
use w4a16_reference::layer::{LayerShape, Symmetry};
use w4a16_select::config::StartupMemoryReport;

/// The batch sizes a layer runs at unless told otherwise: decode (skinny's range and its edge)
/// and a prefill batch (fused, or the dense cache when enabled).
pub const DEFAULT_BATCHES: [usize; 4] = [1, 5, 6, 256];

/// What the engine would be started with, for the startup memory check (docs/contract.md §5.3).
#[derive(Clone, Copy, Debug)]
pub struct StartupMemoryInputs {
    pub device_memory_bytes: u64,
    pub gpu_memory_utilization: f64,
    pub max_model_len: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct CheckModelOptions {
    pub batches: Vec<usize>,
    /// Checkpoint defects (the GPTQ v1 zero-point overflow) refuse the layer instead of being
    /// reported beside its verdicts.
    pub strict: bool,
    /// Recorded activations (safetensors), one tensor per module.
    pub activations: Option<PathBuf>,
    /// Only modules matching this glob.
    pub filter: Option<String>,
    /// Checked when the kernel configuration enables the prefill dequant cache.
    pub startup_memory: Option<StartupMemoryInputs>,
    /// Launch the layers in the runner's fault-isolated workers (`check-model` on a GPU); `None`
    /// launches them in this process.
    pub workers: Option<isolated::ModelWorkers>,
}

impl Default for CheckModelOptions {
    fn default() -> Self {
        CheckModelOptions {
            batches: DEFAULT_BATCHES.to_vec(),
            strict: false,
            activations: None,
            filter: None,
            startup_memory: None,
            workers: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LayerKind {
    /// One quantized linear, launched on its own.
    Linear,
    /// One quantized linear the engine launches only inside a fused projection: read, converted
    /// and checked against its oracle here, launched as part of the fused layer.
    FusedPart,
    /// q|k|v or gate|up stacked along N, launched as one layer.
    FusedProjection,
    /// One projection of every expert of a MoE layer (gate|up fused per expert where both
    /// exist), stacked as the moe kernel reads them and launched through moe_align + moe.
    Experts,
}

/// The path the selection took for one batch size, as launched.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SelectedPath {
    pub m: usize,
    /// `skinny`, `fused`, `dequant+dense`, `fallback`; `none` when no kernel takes the layer.
    pub path: String,
    /// The selection's dispatch line (kernel entry and tile).
    pub dispatch: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LayerStatus {
    Pass,
    /// Passed, with a checkpoint defect reported (refused under `--strict`).
    Defect,
    /// Refused before any launch: the files do not hold a layer the converters take.
    Refused,
    /// A check failed or faulted.
    Fail,
}

/// One layer's line in the reports.
#[derive(Clone, Debug, Serialize)]
pub struct LayerRecord {
    /// `<model>/<module>`: the prefix of its verdicts' case ids.
    pub id: String,
    pub module: String,
    pub kind: LayerKind,
    pub producer: Option<Producer>,
    pub shard: Option<String>,
    pub shape: Option<LayerShape>,
    pub dtype: Option<ActDtype>,
    pub symmetry: Option<Symmetry>,
    pub selected: Vec<SelectedPath>,
    pub defects: Vec<String>,
    /// The defects' cells, machine-readable (the prose is in `defects`).
    pub defect_cells: Vec<DefectCell>,
    pub notes: Vec<String>,
    pub status: LayerStatus,
    /// Reading the layer's tensors from the shards.
    pub read_s: f64,
    pub times: PhaseTimes,
}

/// One zero point a checkpoint defect may have changed (the GPTQ v1 overflow): `certain` when
/// checked against what was quantized, otherwise possibly wrong (docs/check-model.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DefectCell {
    /// The qzeros tensor.
    pub tensor: String,
    pub row: usize,
    pub group: usize,
    pub stored_nibble: u8,
    pub decoded_z: u8,
    pub certain: bool,
}

impl DefectCell {
    /// Every cell of `defects`, in their order.
    pub fn of(defects: &[w4a16_checkpoint::CheckpointDefect]) -> Vec<DefectCell> {
        let mut out = Vec::new();
        for w4a16_checkpoint::CheckpointDefect::GptqV1ZeroOverflow(d) in defects {
            out.extend(d.cells.iter().map(|c| DefectCell {
                tensor: d.tensor.clone(),
                row: c.row,
                group: c.group,
                stored_nibble: c.stored_nibble,
                decoded_z: c.decoded_z,
                certain: c.certain,
            }));
        }
        out
    }
}

/// A whole model's check.
#[derive(Clone, Debug, Serialize)]
pub struct ModelCheck {
    pub model: String,
    pub dir: PathBuf,
    pub target: String,
    /// Whether a GPU ran the launches; without one only the CPU-side checks ran.
    pub gpu: bool,
    pub architecture: String,
    pub quantization: String,
    pub layers: Vec<LayerRecord>,
    pub verdicts: Vec<Verdict>,
    /// Refusals of the model as a whole or of modules that could not be detected.
    pub refusals: Vec<String>,
    pub unquantized: usize,
    pub startup_memory: Option<StartupMemoryOutcome>,
    pub read_s: f64,
    pub wall_s: f64,
    pub times: PhaseTimes,
    /// The process's peak memory (RSS), where the OS reports it.
    pub peak_rss_bytes: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case", tag = "result")]
pub enum StartupMemoryOutcome {
    Fits(StartupMemoryReport),
    DoesNotFit {
        message: String,
    },
    /// The prefill dequant option is enabled but no device memory size was given or found.
    NotChecked {
        reason: String,
    },
}

impl ModelCheck {
    /// Whether the run must end non-zero: a refusal, a failure, a fault, or the startup memory check.
    pub fn failed(&self) -> bool {
        !self.refusals.is_empty()
            || self
                .layers
                .iter()
                .any(|l| matches!(l.status, LayerStatus::Refused | LayerStatus::Fail))
            || self.verdicts.iter().any(|v| {
                matches!(
                    v.outcome,
                    Outcome::Fail | Outcome::Fault | Outcome::UnexpectedPass | Outcome::Expired
                )
            })
            || matches!(
                self.startup_memory,
                Some(StartupMemoryOutcome::DoesNotFit { .. })
            )
    }
}

/// Why a model could not be checked as a whole (every per-layer problem is a verdict instead).
#[derive(Debug, thiserror::Error)]
pub enum ModelCheckError {
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A quantization config over weights none of which is quantized: nothing would be checked.
    #[error(
        "{file} declares {quantization} but no quantized linear was found: {unquantized} linears hold unquantized weights (e.g. {example}); expected each quantized linear's packed weight, scales and zero points"
    )]
    NothingQuantized {
        file: String,
        quantization: String,
        unquantized: usize,
        example: String,
    },
    /// `--filter` selects no quantized linear of the model: nothing would be checked.
    #[error(
        "--filter {filter:?} matches none of the model's {linears} quantized linears (e.g. {example}); expected a glob over module names such as `model.layers.0.*`"
    )]
    FilterMatchesNothing {
        filter: String,
        linears: usize,
        example: String,
    },
}

/// Progress events for a caller's progress bar. The run goes one decoder layer (a *unit*: every
/// linear, fused projection and MoE layer of `model.layers.<i>`, or one module outside them) at
/// a time, so its units are equal steps for an ETA.
pub enum Progress<'a> {
    /// The units the run will check, and the layers (records) in them.
    Planned { units: usize, layers: usize },
    /// A unit begins: its name (`model.layers.3`, `lm_head`).
    Started(&'a str),
    /// One layer of the unit is done.
    Finished(&'a LayerRecord),
    /// The unit is done.
    UnitDone(&'a str),
}

/// Checks the model in `dir`. `Err` only when the model as a whole cannot be read (no
/// config.json, an unknown quantization config, an unreadable shard set) or there is nothing
/// to check (no quantized linear, a filter matching none); every per-layer problem is a layer
/// verdict and the run goes on.
pub fn check_model(
    dir: &Path,
    opts: &CheckModelOptions,
    ctx: &RunContext<'_>,
    progress: &dyn Fn(Progress<'_>),
) -> Result<ModelCheck, ModelCheckError> {
    let start = Instant::now();
    let model = ModelDir::open(dir)?;
    let name = model_name(dir);
    let recorded = match &opts.activations {
        Some(path) => Some(w4a16_checkpoint::ActivationsFile::open(path)?),
        None => None,
    };
    let oracle = model.oracle()?;
    let y_recipe = match &oracle {
        Some(o) => o.y_recipe()?,
        None => None,
    };
    let mut run = Run {
        name: name.clone(),
        model: &model,
        opts,
        ctx,
        recorded: recorded.as_ref(),
        oracle: oracle.as_ref(),
        y_recipe,
        launch_only: false,
        layers: Vec::new(),
        verdicts: Vec::new(),
        times: PhaseTimes::default(),
        read_s: 0.0,
    };
    let Plan {
        linears,
        fused,
        experts: expert_groups,
    } = Plan::of(&model, opts.filter.as_deref());
    let planned = linears.len() + fused.len() + expert_groups.len();
    if planned == 0 && model.refusals().is_empty() {
        return Err(nothing_to_check(&model, opts.filter.as_deref()));
    }
    let units = units(&linears, &fused, &expert_groups);
    progress(Progress::Planned {
        units: units.len(),
        layers: planned,
    });
    // Each layer's findings in its slot, so the reports keep one order (linears, fused
    // projections, MoE layers) whatever order the units' threads finish in.
    let mut slots: Vec<Option<Run<'_, '_>>> = (0..planned).map(|_| None).collect();
    match &opts.workers {
        Some(workers) => pipeline::check_units(&run, &units, workers, progress, &mut slots),
        None => {
            for unit in &units {
                progress(Progress::Started(&unit.name));
                let done = run.check_unit(unit);
                pipeline::unit_done(unit, done, progress, &mut slots);
            }
        }
    }
    for fork in slots.into_iter().flatten() {
        run.merge(fork);
    }
    let refusals: Vec<String> = model.refusals().iter().map(|e| e.to_string()).collect();
    for r in model.refusals() {
        run.verdicts.push(
            Verdict::new(format!("{name}/model"), Check::Checkpoint, Outcome::Fail).because(
                Cause::Checkpoint(CheckpointRefusal::Model {
                    error: SourceError::rendered(r),
                }),
            ),
        );
    }
    let startup_memory = run.startup_memory();
    let Run {
        layers,
        verdicts,
        times,
        read_s,
        ..
    } = run;
    let config = model.config();
    Ok(ModelCheck {
        model: name,
        dir: dir.to_path_buf(),
        target: ctx.run_target().name(),
        gpu: ctx.device.is_some(),
        architecture: config.architecture.clone(),
        quantization: quantization_summary(&model),
        layers,
        verdicts,
        refusals,
        unquantized: model.unquantized_linears().len(),
        startup_memory,
        read_s,
        wall_s: start.elapsed().as_secs_f64(),
        times,
        peak_rss_bytes: peak_rss_bytes(),
    })
}

/// The layers a run checks: the quantized linears the filter selects (a MoE layer's experts
/// excepted), the fused projections with a selected part, and the MoE layers.
struct Plan {
    linears: Vec<LinearEntry>,
    fused: Vec<w4a16_checkpoint::FusedGroup>,
    experts: Vec<(String, Vec<Vec<String>>)>,
}

impl Plan {
    fn of(model: &ModelDir, filter: Option<&str>) -> Plan {
        let selected =
            |module: &str| filter.is_none_or(|f| w4a16_cases::glob::glob_match(f, module));
        let fused: Vec<_> = model
            .fused_groups()
            .iter()
            .filter(|g| g.parts.iter().any(|p| selected(p)))
            .cloned()
            .collect();
        let experts = expert_layers(model, &selected);
        let linears: Vec<LinearEntry> = model
            .linears()
            .iter()
            .filter(|l| selected(&l.module))
            .filter(|l| {
                !experts
                    .iter()
                    .any(|(_, members)| members.iter().flatten().any(|m| *m == l.module))
            })
            .cloned()
            .collect();
        Plan {
            linears,
            fused,
            experts,
        }
    }
}

/// The layers grouped by decoder layer (one unit per `model.layers.<i>`, one per module outside
/// them), in decoder-layer order; each layer keeps its slot in the report's order.
fn units<'m>(
    linears: &'m [LinearEntry],
    fused: &'m [w4a16_checkpoint::FusedGroup],
    experts: &'m [(String, Vec<Vec<String>>)],
) -> Vec<stages::Unit<'m>> {
    let mut units: Vec<stages::Unit<'m>> = Vec::new();
    let mut slot = 0..;
    for entry in linears {
        let in_fused = fused.iter().any(|g| g.parts.contains(&entry.module));
        let u = unit_of(&mut units, &entry.module);
        units[u]
            .linears
            .push((slot.next().expect("endless"), entry, in_fused));
    }
    for g in fused {
        let first = g.parts.first().map_or(g.name.as_str(), String::as_str);
        let u = unit_of(&mut units, first);
        units[u].fused.push((
            slot.next().expect("endless"),
            g.name.as_str(),
            g.parts.as_slice(),
        ));
    }
    for (name, members) in experts {
        let u = unit_of(&mut units, name);
        units[u].experts.push((
            slot.next().expect("endless"),
            name.as_str(),
            members.as_slice(),
        ));
    }
    // In decoder-layer order (`layers.2` before `layers.10`), as the progress bar counts them.
    units.sort_by_cached_key(|u| match u.name.rsplit_once('.') {
        Some((prefix, i)) => match i.parse::<u64>() {
            Ok(i) => (prefix.to_string(), i),
            Err(_) => (u.name.clone(), u64::MAX),
        },
        None => (u.name.clone(), u64::MAX),
    });
    units
}

/// The index of `module`'s unit in `units`, a new one at the end when it has none yet.
fn unit_of(units: &mut Vec<stages::Unit<'_>>, module: &str) -> usize {
    let key = stages::decoder_layer_of(module);
    if let Some(i) = units.iter().position(|u| u.name == key) {
        return i;
    }
    units.push(stages::Unit {
        name: key.to_string(),
        linears: Vec::new(),
        fused: Vec::new(),
        experts: Vec::new(),
    });
    units.len() - 1
}

/// Why a run would check no layer: a filter that matches nothing, or no quantized linear.
fn nothing_to_check(model: &ModelDir, filter: Option<&str>) -> ModelCheckError {
    let linears = model.linears();
    match (filter, linears.first()) {
        (Some(filter), Some(first)) => ModelCheckError::FilterMatchesNothing {
            filter: filter.to_string(),
            linears: linears.len(),
            example: first.module.clone(),
        },
        _ => {
            let unquantized = model.unquantized_linears();
            ModelCheckError::NothingQuantized {
                file: model.config().quantization.file.clone(),
                quantization: quantization_summary(model),
                unquantized: unquantized.len(),
                example: unquantized
                    .first()
                    .map_or_else(|| "none".to_string(), |m| format!("{m}.weight")),
            }
        }
    }
}

/// The MoE layers: per expert group prefix, gate|up fused per expert when both projections have
/// the same experts, every other projection alone. `(name, members)`: members[e] are the
/// modules of expert e, in fusion order.
fn expert_layers(
    model: &ModelDir,
    selected: &dyn Fn(&str) -> bool,
) -> Vec<(String, Vec<Vec<String>>)> {
    use w4a16_checkpoint::Proj;
    let groups = model.expert_groups();
    let mut out = Vec::new();
    for g in groups {
        if !g.experts.iter().any(|m| selected(m)) {
            continue;
        }
        let partner = |proj: Proj| {
            groups.iter().find(|o| {
                o.prefix == g.prefix && o.proj == proj && o.experts.len() == g.experts.len()
            })
        };
        match g.proj {
            Proj::Gate if partner(Proj::Up).is_some() => {
                let up = partner(Proj::Up).expect("checked");
                let members = g
                    .experts
                    .iter()
                    .zip(&up.experts)
                    .map(|(a, b)| vec![a.clone(), b.clone()])
                    .collect();
                out.push((format!("{}.gate_up_proj", g.prefix), members));
            }
            Proj::Up if partner(Proj::Gate).is_some() => {}
            proj => out.push((
                format!("{}.{}", g.prefix, proj.name()),
                g.experts.iter().map(|m| vec![m.clone()]).collect(),
            )),
        }
    }
    out
}

fn model_name(dir: &Path) -> String {
    let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    canonical
        .file_name()
        .map(|s| s.to_string_lossy().replace('/', "_"))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "model".into())
}

fn quantization_summary(model: &ModelDir) -> String {
    let q = &model.config().quantization;
    let scheme = &q.schemes[0];
    let group = match scheme.group_size {
        w4a16_checkpoint::GroupSize::Size(g) => format!("g{g}"),
        w4a16_checkpoint::GroupSize::Channelwise => "channelwise".into(),
    };
    let sym = if scheme.symmetric { "sym" } else { "asym" };
    format!(
        "{} {group} {sym}{} ({})",
        q.method.producer(),
        if q.act_order() { " act-order" } else { "" },
        q.file
    )
}

/// The process's peak memory (RSS, Linux `VmHWM`).
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
