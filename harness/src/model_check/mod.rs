//! `w4a16 check-model`: a quantized checkpoint directory, one layer at a time, through the same
//! checks as the suites (its producer's own reading against the converter, the selection and its
//! contract cross-check, the selected path and the fallback against the f64 reference for each
//! batch size), plus what only a real checkpoint has: refusals naming shard and tensor, producer
//! defects, the producer library's own oracle, and the engine's fused projections.
//!
//! Memory: the shards are memory-mapped and only the tensors of the layer being checked are
//! copied, so the resident set is about one layer (a fused projection counts as one).

pub mod fused;
pub mod oracle;
pub mod report;

use crate::runner::execute::{self, GivenLayer, Mode, RunContext};
use crate::runner::timing::PhaseTimes;
use crate::runner::verdict::Check;
use crate::runner::verdict::{Cause, CheckpointRefusal, Outcome, SourceError, Verdict};
use fused::{FusedPart, FusedProjection};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use w4a16_cases::{CarrierMode, Case, ViewLayout};
use w4a16_checkpoint::{CheckpointDefect, CheckpointError, LinearEntry, LoadedLinear, ModelDir};
use w4a16_reference::ActDtype;
use w4a16_reference::data::DataClass;
use w4a16_reference::formats::{Checkpoint, Producer};
use w4a16_reference::layer::{Activations, LayerShape, Symmetry};
use w4a16_select::config::{
    BudgetError, BudgetReport, PrefillDequant, StartupRequest, check_startup_budget,
};

/// The batch sizes a layer runs at unless told otherwise: decode (skinny's range and its edge)
/// and a prefill batch (fused, or the dense cache when enabled).
pub const DEFAULT_BATCHES: [usize; 4] = [1, 5, 6, 256];

/// What the engine would be started with, for the startup budget (docs/contract.md §5).
#[derive(Clone, Copy, Debug)]
pub struct BudgetInputs {
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
    pub budget: Option<BudgetInputs>,
}

impl Default for CheckModelOptions {
    fn default() -> Self {
        CheckModelOptions {
            batches: DEFAULT_BATCHES.to_vec(),
            strict: false,
            activations: None,
            filter: None,
            budget: None,
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
    pub notes: Vec<String>,
    pub status: LayerStatus,
    /// Reading the layer's tensors from the shards.
    pub read_s: f64,
    pub times: PhaseTimes,
}

/// A whole model's check.
#[derive(Clone, Debug, Serialize)]
pub struct ModelCheck {
    pub model: String,
    pub dir: PathBuf,
    pub target: String,
    pub architecture: String,
    pub quantization: String,
    pub layers: Vec<LayerRecord>,
    pub verdicts: Vec<Verdict>,
    /// Refusals of the model as a whole or of modules that could not be detected.
    pub refusals: Vec<String>,
    pub unquantized: usize,
    pub budget: Option<BudgetOutcome>,
    pub read_s: f64,
    pub wall_s: f64,
    pub times: PhaseTimes,
    /// The process's peak resident set, where the OS reports it.
    pub peak_rss_bytes: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case", tag = "result")]
pub enum BudgetOutcome {
    Fits(BudgetReport),
    DoesNotFit {
        message: String,
    },
    /// The prefill dequant option is enabled but no device memory size was given or found.
    NotChecked {
        reason: String,
    },
}

impl ModelCheck {
    /// Whether the run must end non-zero: a refusal, a failure, a fault, or the budget.
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
            || matches!(self.budget, Some(BudgetOutcome::DoesNotFit { .. }))
    }
}

/// Progress events for a caller's progress bar.
pub enum Progress<'a> {
    /// The number of layers the run will check.
    Planned(usize),
    Started(&'a str),
    Finished(&'a LayerRecord),
}

/// Checks the model in `dir`. `Err` only when the model as a whole cannot be read (no
/// config.json, an unknown quantization config, an unreadable shard set); every per-layer
/// problem is a layer verdict and the run goes on.
pub fn check_model(
    dir: &Path,
    opts: &CheckModelOptions,
    ctx: &RunContext<'_>,
    progress: &dyn Fn(Progress<'_>),
) -> Result<ModelCheck, CheckpointError> {
    let start = Instant::now();
    let model = ModelDir::open(dir)?;
    let name = model_name(dir);
    let recorded = match &opts.activations {
        Some(path) => Some(w4a16_checkpoint::ActivationsFile::open(path)?),
        None => None,
    };
    let oracle = model.oracle()?;
    let mut run = Run {
        name: name.clone(),
        model: &model,
        opts,
        ctx,
        recorded,
        oracle,
        layers: Vec::new(),
        verdicts: Vec::new(),
        times: PhaseTimes::default(),
        read_s: 0.0,
    };
    let selected = |module: &str| {
        opts.filter
            .as_deref()
            .is_none_or(|f| w4a16_cases::glob::glob_match(f, module))
    };
    let fused: Vec<_> = model
        .fused_groups()
        .iter()
        .filter(|g| g.parts.iter().any(|p| selected(p)))
        .cloned()
        .collect();
    let linears: Vec<LinearEntry> = model
        .linears()
        .iter()
        .filter(|l| selected(&l.module))
        .cloned()
        .collect();
    let expert_groups = expert_layers(&model, &selected);
    let linears: Vec<LinearEntry> = linears
        .into_iter()
        .filter(|l| {
            !expert_groups
                .iter()
                .any(|(_, members)| members.iter().flatten().any(|m| *m == l.module))
        })
        .collect();
    progress(Progress::Planned(
        linears.len() + fused.len() + expert_groups.len(),
    ));
    for entry in &linears {
        let in_fused = fused.iter().any(|g| g.parts.contains(&entry.module));
        progress(Progress::Started(&entry.module));
        let record = run.linear(entry, in_fused);
        progress(Progress::Finished(&record));
        run.layers.push(record);
    }
    for group in &fused {
        progress(Progress::Started(&group.name));
        let record = run.fused(&group.name, &group.parts);
        progress(Progress::Finished(&record));
        run.layers.push(record);
    }
    for (name, members) in &expert_groups {
        progress(Progress::Started(name));
        let record = run.experts(name, members);
        progress(Progress::Finished(&record));
        run.layers.push(record);
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
    let budget = run.budget();
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
        architecture: config.architecture.clone(),
        quantization: quantization_summary(&model),
        layers,
        verdicts,
        refusals,
        unquantized: model.unquantized_linears().len(),
        budget,
        read_s,
        wall_s: start.elapsed().as_secs_f64(),
        times,
        peak_rss_bytes: peak_rss_bytes(),
    })
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

/// The process's peak resident set (Linux `VmHWM`).
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

struct Run<'r, 'a> {
    name: String,
    model: &'r ModelDir,
    opts: &'r CheckModelOptions,
    ctx: &'r RunContext<'a>,
    recorded: Option<w4a16_checkpoint::ActivationsFile>,
    oracle: Option<w4a16_checkpoint::Oracle>,
    layers: Vec<LayerRecord>,
    verdicts: Vec<Verdict>,
    times: PhaseTimes,
    read_s: f64,
}

impl Run<'_, '_> {
    fn layer_id(&self, module: &str) -> String {
        format!("{}/{module}", self.name)
    }

    fn empty_record(&self, module: &str, kind: LayerKind) -> LayerRecord {
        LayerRecord {
            id: self.layer_id(module),
            module: module.to_string(),
            kind,
            producer: None,
            shard: None,
            shape: None,
            dtype: None,
            symmetry: None,
            selected: Vec::new(),
            defects: Vec::new(),
            notes: Vec::new(),
            status: LayerStatus::Pass,
            read_s: 0.0,
            times: PhaseTimes::default(),
        }
    }

    /// Reads one linear (timed) and returns it with its `checkpoint` verdict pushed.
    fn load(&mut self, entry: &LinearEntry, record: &mut LayerRecord) -> Option<LoadedLinear> {
        let start = Instant::now();
        let loaded = self.model.load(entry);
        let read = start.elapsed().as_secs_f64();
        record.read_s += read;
        self.read_s += read;
        record.producer = Some(entry.producer);
        match loaded {
            Ok(l) => Some(l),
            Err(e) => {
                record.status = LayerStatus::Refused;
                self.verdicts.push(
                    Verdict::new(&record.id, Check::Checkpoint, Outcome::Fail).because(
                        Cause::Checkpoint(CheckpointRefusal::Load {
                            error: SourceError::new(e),
                        }),
                    ),
                );
                None
            }
        }
    }

    /// The `checkpoint` verdict of a loaded linear: its notes, and its defects (refused under
    /// `--strict`). Returns whether the layer may go on to the kernels.
    fn checkpoint_verdict(&mut self, loaded: &LoadedLinear, record: &mut LayerRecord) -> bool {
        record.shard = Some(loaded.shard.display().to_string());
        record.shape = Some(LayerShape::new(
            loaded.target.n,
            loaded.target.k,
            loaded.group_size,
        ));
        record.dtype = Some(loaded.target.dtype);
        record.symmetry = Some(symmetry(loaded));
        record.notes.extend(loaded.notes.iter().cloned());
        record.defects = loaded
            .defects
            .iter()
            .map(CheckpointDefect::to_string)
            .collect();
        let shard = loaded
            .shard
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if loaded.defects.is_empty() {
            let mut detail = format!(
                "{} {}×{} g{} {} from {shard}",
                loaded.entry.producer,
                loaded.target.n,
                loaded.target.k,
                loaded.group_size,
                loaded.target.dtype.name()
            );
            for n in &loaded.notes {
                detail.push_str("; ");
                detail.push_str(n);
            }
            self.verdicts
                .push(Verdict::new(&record.id, Check::Checkpoint, Outcome::Pass).detail(detail));
            return true;
        }
        let defects = record.defects.join("; ");
        if self.opts.strict {
            record.status = LayerStatus::Refused;
            self.verdicts.push(
                Verdict::new(&record.id, Check::Checkpoint, Outcome::Fail).because(
                    Cause::Checkpoint(CheckpointRefusal::StrictDefects { defects }),
                ),
            );
            false
        } else {
            record.status = LayerStatus::Defect;
            // Reported, not failed: the kernels are still checked against what the file says
            // (which is what every engine reads); the defect is the checkpoint's.
            self.verdicts.push(
                Verdict::new(&record.id, Check::Checkpoint, Outcome::ExpectedFail).detail(format!(
                    "checkpoint defect (refused under --strict): {defects}"
                )),
            );
            true
        }
    }

    fn linear(&mut self, entry: &LinearEntry, in_fused: bool) -> LayerRecord {
        let kind = if in_fused {
            LayerKind::FusedPart
        } else {
            LayerKind::Linear
        };
        let mut record = self.empty_record(&entry.module, kind);
        let Some(loaded) = self.load(entry, &mut record) else {
            return record;
        };
        let go_on = self.checkpoint_verdict(&loaded, &mut record);
        let checkpoint: Arc<dyn Checkpoint> = Arc::from(loaded.checkpoint);
        self.oracle_check(&entry.module, checkpoint.as_ref(), &mut record);
        if go_on {
            let shape = record.shape.expect("set by checkpoint_verdict");
            let layer = LaunchLayer {
                module: entry.module.clone(),
                input_of: entry.module.clone(),
                shape,
                dtype: loaded.target.dtype,
                symmetry: record.symmetry.expect("set"),
                producer: entry.producer,
                bias: entry.tensors.contains_key("bias"),
                checkpoint,
            };
            if in_fused {
                // Converted alone (its `convert` verdict at one batch size); launched fused.
                self.run_cases(&layer, &[], &mut record);
            } else {
                let batches = self.opts.batches.clone();
                self.run_cases(&layer, &batches, &mut record);
            }
        }
        finish(&mut record, &self.verdicts);
        execute::forget_prepared_layer();
        record
    }

    fn fused(&mut self, name: &str, parts: &[String]) -> LayerRecord {
        let mut record = self.empty_record(name, LayerKind::FusedProjection);
        let mut loaded_parts = Vec::new();
        for module in parts {
            let Some(entry) = self.model.linear(module) else {
                continue;
            };
            let entry = entry.clone();
            let Some(loaded) = self.load(&entry, &mut record) else {
                return record;
            };
            record.producer = Some(entry.producer);
            record
                .defects
                .extend(loaded.defects.iter().map(CheckpointDefect::to_string));
            if !loaded.defects.is_empty() && self.opts.strict {
                record.status = LayerStatus::Refused;
                self.verdicts.push(
                    Verdict::new(&record.id, Check::FusedProjection, Outcome::Fail).because(
                        Cause::Checkpoint(CheckpointRefusal::StrictPart {
                            module: module.to_string(),
                        }),
                    ),
                );
                return record;
            }
            loaded_parts.push((entry, loaded));
        }
        let first_shard = loaded_parts
            .first()
            .map(|(_, l)| l.shard.display().to_string());
        record.shard = first_shard;
        let bias = loaded_parts
            .iter()
            .any(|(e, _)| e.tensors.contains_key("bias"));
        let producer = loaded_parts.first().map(|(e, _)| e.producer);
        let fused_parts: Vec<FusedPart> = loaded_parts
            .into_iter()
            .map(|(entry, l)| FusedPart {
                symmetric: symmetry(&l) == Symmetry::Sym,
                module: entry.module,
                target: l.target,
                group: l.group_size,
                checkpoint: Arc::from(l.checkpoint),
            })
            .collect();
        let fusion = match FusedProjection::new(fused_parts) {
            Ok(f) => f,
            Err(e) => {
                record.status = LayerStatus::Refused;
                self.verdicts.push(
                    Verdict::new(&record.id, Check::FusedProjection, Outcome::Fail).because(
                        Cause::Checkpoint(CheckpointRefusal::Unfusable {
                            error: SourceError::new(e),
                        }),
                    ),
                );
                return record;
            }
        };
        let target = fusion.target();
        let shape = LayerShape::new(target.n, target.k, fusion.group());
        let symmetry = if fusion.parts()[0].symmetric {
            Symmetry::Sym
        } else {
            Symmetry::Asym
        };
        let names: Vec<&str> = fusion.parts().iter().map(|p| p.module.as_str()).collect();
        self.verdicts.push(
            Verdict::new(&record.id, Check::FusedProjection, Outcome::Pass).detail(format!(
                "{} stacked along N: {}×{} g{}",
                names.join(" | "),
                shape.n,
                shape.k,
                shape.group
            )),
        );
        record.shape = Some(shape);
        record.dtype = Some(target.dtype);
        record.symmetry = Some(symmetry);
        if !record.defects.is_empty() {
            record.status = LayerStatus::Defect;
        }
        let layer = LaunchLayer {
            module: name.to_string(),
            input_of: names[0].to_string(),
            shape,
            dtype: target.dtype,
            symmetry,
            producer: producer.expect("a fused projection has parts"),
            bias,
            checkpoint: Arc::new(fusion),
        };
        let batches = self.opts.batches.clone();
        self.run_cases(&layer, &batches, &mut record);
        finish(&mut record, &self.verdicts);
        execute::forget_prepared_layer();
        record
    }

    /// One projection of a MoE layer's experts: each expert read (its own `checkpoint` and
    /// `oracle` checks under its module), fused where `members` fuse, converted and read back,
    /// stacked, and run through moe_align + moe at every batch size (as tokens) with seeded
    /// softmax routing over the model's `num_experts_per_tok`.
    fn experts(&mut self, name: &str, members: &[Vec<String>]) -> LayerRecord {
        let mut record = self.empty_record(name, LayerKind::Experts);
        let mut residents = Vec::with_capacity(members.len());
        let mut disagreements = Vec::new();
        let mut producer = None;
        for (e, parts) in members.iter().enumerate() {
            let mut loaded_parts = Vec::new();
            for module in parts {
                let Some(entry) = self.model.linear(module) else {
                    continue;
                };
                let entry = entry.clone();
                let Some(loaded) = self.load(&entry, &mut record) else {
                    return record;
                };
                producer = Some(entry.producer);
                // Under the layer's id, so its reports group each expert's checks with it.
                let mut part_record = self.empty_record(module, LayerKind::FusedPart);
                part_record.id = format!("{}/{module}", record.id);
                let go_on = self.checkpoint_verdict(&loaded, &mut part_record);
                record.defects.append(&mut part_record.defects);
                if !go_on {
                    record.status = LayerStatus::Refused;
                    return record;
                }
                let ckpt: Arc<dyn Checkpoint> = Arc::from(loaded.checkpoint);
                self.oracle_check(module, ckpt.as_ref(), &mut part_record);
                loaded_parts.push(FusedPart {
                    symmetric: entry.scheme.symmetric,
                    module: entry.module.clone(),
                    target: loaded.target,
                    group: loaded.group_size,
                    checkpoint: ckpt,
                });
            }
            let (ckpt, target): (Arc<dyn Checkpoint>, _) = match loaded_parts.len() {
                0 => continue,
                1 => {
                    let p = loaded_parts.pop().expect("one part");
                    (p.checkpoint, p.target)
                }
                _ => match FusedProjection::new(loaded_parts) {
                    Ok(f) => {
                        let t = f.target();
                        (Arc::new(f), t)
                    }
                    Err(err) => {
                        record.status = LayerStatus::Refused;
                        self.verdicts.push(
                            Verdict::new(&record.id, Check::FusedProjection, Outcome::Fail)
                                .because(Cause::Checkpoint(CheckpointRefusal::UnfusableExpert {
                                    expert: e.to_string(),
                                    error: SourceError::new(err),
                                })),
                        );
                        return record;
                    }
                },
            };
            let start = Instant::now();
            let own = ckpt.decode_own_semantics();
            let converted = ckpt.to_resident(&target, w4a16_reference::formats::RowPadding::NONE);
            let elapsed = start.elapsed();
            record
                .times
                .add(crate::runner::timing::Phase::Convert, elapsed);
            self.times
                .add(crate::runner::timing::Phase::Convert, elapsed);
            match (own, converted) {
                (Ok(own), Ok(c)) => match c.layer.to_logical() {
                    Ok(back) if back == own => residents.push(c.layer),
                    Ok(_) => disagreements.push(format!(
                        "expert {e}: the converter's output reads back differently from the checkpoint's own reading"
                    )),
                    Err(err) => disagreements.push(format!("expert {e}: resident layout invalid: {err}")),
                },
                (Err(err), _) => disagreements.push(format!("expert {e}: own reading refused: {err}")),
                (_, Err(err)) => disagreements.push(format!("expert {e}: converter refused: {err}")),
            }
        }
        let Some(producer) = producer else {
            return record;
        };
        record.producer = Some(producer);
        if !disagreements.is_empty() {
            record.status = LayerStatus::Fail;
            self.verdicts.push(
                Verdict::new(&record.id, Check::Convert(producer), Outcome::Fail)
                    .detail(disagreements.join("; ")),
            );
            return record;
        }
        let layer = match w4a16_reference::moe::MoeLayer::from_experts(residents) {
            Ok(l) => l,
            Err(err) => {
                record.status = LayerStatus::Fail;
                self.verdicts.push(
                    Verdict::new(&record.id, Check::Convert(producer), Outcome::Fail)
                        .detail(format!("the experts cannot be stacked: {err}")),
                );
                return record;
            }
        };
        self.verdicts.push(
            Verdict::new(&record.id, Check::Convert(producer), Outcome::Pass).detail(format!(
                "{} experts read back as their producer's own reading; stacked [E, N, K/8] = [{}, {}, {}]",
                layer.local_experts(),
                layer.local_experts(),
                layer.shape.n,
                layer.shape.k / 8
            )),
        );
        record.shape = Some(layer.shape);
        record.dtype = Some(layer.dtype);
        record.symmetry = Some(layer.symmetry);
        let experts = layer.local_experts();
        let top_k = self
            .model
            .config()
            .num_experts_per_tok
            .unwrap_or(2)
            .clamp(1, experts);
        let routed_weight = name.ends_with("down_proj") || name.ends_with(".w2");
        for &t in &self.opts.batches.clone() {
            let mut case = Case {
                id: String::new(),
                suite: self.name.clone(),
                shape_name: name.to_string(),
                shape: layer.shape,
                m: t,
                dtype: layer.dtype,
                symmetry: layer.symmetry,
                class: DataClass::Realistic,
                padding: w4a16_cases::RowPadding::CacheCliff,
                bias: false,
                act_order: false,
                producer,
                x_layout: ViewLayout::default(),
                y_layout: ViewLayout::default(),
                carrier: CarrierMode::Off,
                moe: Some(w4a16_cases::MoeRouting {
                    experts,
                    top_k,
                    routing: w4a16_cases::RoutingKind::Softmax,
                    map: w4a16_cases::MapKind::All,
                    routed_weight,
                }),
            };
            case.id = case.make_id();
            let (vs, times) = execute::run_given_moe_case_timed(&case, &layer, self.ctx);
            self.absorb(t, vs, &times, &mut record);
        }
        finish(&mut record, &self.verdicts);
        execute::forget_prepared_layer();
        record
    }

    /// The layer's cases, one per batch size (the conversion alone when `batches` is empty).
    fn run_cases(&mut self, layer: &LaunchLayer, batches: &[usize], record: &mut LayerRecord) {
        let activations = self.recorded_activations(layer, record);
        let given = GivenLayer {
            checkpoint: Arc::clone(&layer.checkpoint),
            activations,
        };
        let mode = Mode::SelectedWithFallback;
        if batches.is_empty() {
            let case = layer.case(&self.name, 1);
            let ctx = self.ctx.without_device(crate::require::Skip {
                requirement: crate::require::Requirement::Gpu,
                reason: "launched inside its fused projection".into(),
            });
            let (vs, t) = execute::run_given_case_timed(&case, &given, mode, &ctx);
            // Only the reading and conversion belong to the part.
            self.verdicts.extend(
                vs.into_iter()
                    .filter(|v| matches!(v.check, Check::Convert(_)))
                    .map(|mut v| {
                        v.case_id = record.id.clone();
                        v
                    }),
            );
            record.times.merge(&t);
            self.times.merge(&t);
            return;
        }
        for &m in batches {
            let case = layer.case(&self.name, m);
            let (mut vs, t) = execute::run_given_case_timed(&case, &given, mode, self.ctx);
            for v in vs.iter_mut() {
                // A suite's selection-boundary case is meant to be refused; a real layer that no
                // kernel takes is one the engine cannot serve.
                if v.check == Check::Selection(None) && v.outcome == Outcome::Refused {
                    v.outcome = Outcome::Fail;
                    v.detail = format!("the engine cannot serve this layer: {}", v.detail);
                }
            }
            self.absorb(m, vs, &t, record);
        }
    }

    /// One case's verdicts and time, with the path its selection took at batch `m`.
    fn absorb(&mut self, m: usize, vs: Vec<Verdict>, t: &PhaseTimes, record: &mut LayerRecord) {
        for v in &vs {
            if let Check::Selection(path) = &v.check {
                record.selected.push(SelectedPath {
                    m,
                    path: path
                        .as_ref()
                        .map_or_else(|| "none".to_string(), |p| p.to_string()),
                    dispatch: v.detail.clone(),
                });
            }
        }
        self.verdicts.extend(vs);
        record.times.merge(t);
        self.times.merge(t);
    }

    /// The recorded activations for this layer, when a file was given (a note when it lacks
    /// the layer, a refusal verdict when its tensor is wrong).
    fn recorded_activations(
        &mut self,
        layer: &LaunchLayer,
        record: &mut LayerRecord,
    ) -> Option<Activations> {
        let file = self.recorded.as_ref()?;
        match file.for_module(&layer.input_of, layer.shape.k, layer.dtype) {
            Ok(Some(a)) => {
                record
                    .notes
                    .push(format!("recorded activations: {} rows", a.m));
                Some(a)
            }
            Ok(None) => {
                record.notes.push(format!(
                    "no recorded activations for {} in {}: seeded activations",
                    layer.input_of,
                    file.path().display()
                ));
                None
            }
            Err(e) => {
                self.verdicts.push(
                    Verdict::new(&record.id, Check::Data, Outcome::Fail)
                        .detail(format!("recorded activations refused: {e}")),
                );
                None
            }
        }
    }

    fn oracle_check(
        &mut self,
        module: &str,
        checkpoint: &dyn Checkpoint,
        record: &mut LayerRecord,
    ) {
        let Some(oracle) = &self.oracle else { return };
        let v = oracle::check(oracle, module, checkpoint, self.ctx.c_target, &record.id);
        if let Some(v) = v {
            self.verdicts.push(v);
        }
    }

    fn budget(&self) -> Option<BudgetOutcome> {
        if self.ctx.config.prefill_dequant != PrefillDequant::Enable {
            return None;
        }
        let Some(inputs) = self.opts.budget else {
            return Some(BudgetOutcome::NotChecked {
                reason: "rdna_hybrid_w4a16_prefill_dequant is enabled but no device memory size is known (give --device-memory-gib)".into(),
            });
        };
        let description = match budget_model(self.model, &self.name) {
            Ok(d) => d,
            Err(reason) => return Some(BudgetOutcome::NotChecked { reason }),
        };
        let req = StartupRequest {
            model: &description,
            target: self.ctx.target,
            device_memory_bytes: inputs.device_memory_bytes,
            gpu_memory_utilization: inputs.gpu_memory_utilization,
            max_model_len: inputs.max_model_len,
        };
        Some(match check_startup_budget(&self.ctx.config, &req) {
            Ok(r) => BudgetOutcome::Fits(r),
            Err(BudgetError::DoesNotFit(r)) => BudgetOutcome::DoesNotFit {
                message: BudgetError::DoesNotFit(r).to_string(),
            },
            Err(e) => BudgetOutcome::NotChecked {
                reason: e.to_string(),
            },
        })
    }
}

/// The model as the startup budget sees it: every detected quantized linear once (one "block"
/// holding them all) and the KV cache of every attention layer.
fn budget_model(model: &ModelDir, name: &str) -> Result<w4a16_cases::ModelDescription, String> {
    let config = model.config();
    let mut linears = Vec::new();
    for entry in model.linears() {
        let (n, k) = model
            .shape_of(entry)
            .map_err(|e| format!("cannot size {}: {e}", entry.module))?;
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

fn symmetry(loaded: &LoadedLinear) -> Symmetry {
    if loaded.entry.scheme.symmetric {
        Symmetry::Sym
    } else {
        Symmetry::Asym
    }
}

/// A layer as it is launched: a linear or a fused projection.
struct LaunchLayer {
    module: String,
    /// The module whose recorded input this layer takes (a fused projection's first part).
    input_of: String,
    shape: LayerShape,
    dtype: ActDtype,
    symmetry: Symmetry,
    producer: Producer,
    bias: bool,
    checkpoint: Arc<dyn Checkpoint>,
}

impl LaunchLayer {
    /// The case for batch `m`: `<model>/<module>/M=<m>/<dtype>/<sym>/g<G>/realistic[/<producer>]`.
    fn case(&self, model: &str, m: usize) -> Case {
        let mut case = Case {
            id: String::new(),
            suite: model.to_string(),
            shape_name: self.module.clone(),
            shape: self.shape,
            m,
            dtype: self.dtype,
            symmetry: self.symmetry,
            class: DataClass::Realistic,
            padding: w4a16_cases::RowPadding::CacheCliff,
            bias: self.bias,
            act_order: false,
            producer: self.producer,
            x_layout: ViewLayout::default(),
            y_layout: ViewLayout::default(),
            carrier: CarrierMode::Off,
            moe: None,
        };
        case.id = case.make_id();
        case
    }
}

/// The layer's status from its verdicts (a refusal or defect set earlier stands unless a check
/// failed).
fn finish(record: &mut LayerRecord, verdicts: &[Verdict]) {
    let prefix = format!("{}/", record.id);
    let failed = verdicts
        .iter()
        .filter(|v| v.case_id == record.id || v.case_id.starts_with(&prefix))
        .any(|v| matches!(v.outcome, Outcome::Fail | Outcome::Fault));
    if failed && record.status != LayerStatus::Refused {
        record.status = LayerStatus::Fail;
    }
}
