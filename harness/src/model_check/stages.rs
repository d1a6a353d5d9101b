//! One decoder layer's checks in three stages, so that its conversion checks run in parallel and
//! each tensor is read once (docs/check-model.md, "At model scale"):
//!
//! 1. every linear read, checked against its format, the architecture and the oracle, and
//!    converted — one linear per thread;
//! 2. each fused projection (q|k|v, gate|up) built from its parts as stage 1 read them (not read
//!    again) and converted — one per thread; then each MoE layer's experts, read and converted
//!    one per thread, and stacked;
//! 3. the launches at every batch size, one layer after another on the calling thread (a device
//!    runs one layer at a time), reusing stage 1's and 2's conversions — in this process the
//!    linears' launches come before stage 2, so their conversions are dropped before the fused
//!    projections' are made; for workers ([`super::isolated`]) each conversion is written to
//!    the unit's handoff folder as soon as its stage ends, and dropped.
//!
//! Memory stays at one decoder layer: nothing of a layer outlives its stage 3.

use super::experts::StackedExperts;
use super::fused::{FusedPart, FusedProjection};
use super::run::{LaunchLayer, Run, finish};
use super::{DefectCell, LayerKind, LayerRecord, LayerStatus};
use crate::runner::execute::{self, PreparedHandoff};
use crate::runner::verdict::{Cause, Check, CheckpointRefusal, Outcome, SourceError, Verdict};
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;
use w4a16_cases::Case;
use w4a16_checkpoint::{CheckpointDefect, LinearEntry, LoadedLinear};
use w4a16_reference::formats::{Checkpoint, LoadTarget};
use w4a16_reference::layer::{LayerShape, Symmetry};

/// The layers of one decoder layer (or one module outside the decoder layers), each with its
/// place in the report's order.
pub(super) struct Unit<'m> {
    /// `model.layers.3`, or the module itself (`lm_head`).
    pub(super) name: String,
    /// Linears, and whether each is launched only inside a fused projection.
    pub(super) linears: Vec<(usize, &'m LinearEntry, bool)>,
    /// Fused projections: name and parts.
    pub(super) fused: Vec<(usize, &'m str, &'m [String])>,
    /// MoE layers: name and members (see `expert_layers`).
    pub(super) experts: Vec<(usize, &'m str, &'m [Vec<String>])>,
}

/// A linear as stage 1 read it, for the fused projection that stacks it.
struct ReadPart {
    entry: LinearEntry,
    /// Its tensors, or the refusal verdict its fused projection repeats under its own id.
    read: Result<PartRead, Verdict>,
}

struct PartRead {
    checkpoint: Arc<dyn Checkpoint>,
    target: LoadTarget,
    group: usize,
    shard: String,
    defects: Vec<String>,
    defect_cells: Vec<DefectCell>,
}

impl PartRead {
    /// What a fused projection takes of a loaded linear, and its checkpoint.
    fn of(loaded: LoadedLinear) -> (Arc<dyn Checkpoint>, PartRead) {
        let checkpoint: Arc<dyn Checkpoint> = Arc::from(loaded.checkpoint);
        let read = PartRead {
            checkpoint: Arc::clone(&checkpoint),
            target: loaded.target,
            group: loaded.group_size,
            shard: loaded.shard.display().to_string(),
            defects: loaded
                .defects
                .iter()
                .map(CheckpointDefect::to_string)
                .collect(),
            defect_cells: DefectCell::of(&loaded.defects),
        };
        (checkpoint, read)
    }
}

/// A layer waiting for its launches.
pub(super) enum Pending {
    /// A linear or a fused projection, converted ahead when this process launches it.
    Dense {
        layer: LaunchLayer,
        prepared: Option<PreparedHandoff>,
    },
    /// A MoE layer's experts, stacked.
    Experts {
        name: String,
        stacked: StackedExperts,
    },
}

impl Pending {
    /// The module (or fused projection, or MoE layer) its cases are named after.
    pub(super) fn name(&self) -> &str {
        match self {
            Pending::Dense { layer, .. } => &layer.module,
            Pending::Experts { name, .. } => name,
        }
    }
}

/// One layer's checks: the fork of the run holding its verdicts, its record, its launch.
pub(super) struct Staged<'r, 'a> {
    pub(super) slot: usize,
    pub(super) run: Run<'r, 'a>,
    pub(super) record: LayerRecord,
    pub(super) pending: Option<Pending>,
}

impl Staged<'_, '_> {
    /// Writes this layer's conversion to the unit's handoff folder and drops it here. Without a
    /// folder, or when writing fails (said on stderr), it is dropped all the same and the
    /// worker reads and converts the layer itself: slower, never a different verdict.
    fn hand_over(&mut self, handoff: Option<&std::path::Path>) {
        let Some(dir) = handoff else {
            return;
        };
        let written = match &mut self.pending {
            Some(Pending::Dense { layer, prepared }) => match prepared.take() {
                Some(p) => super::handoff::write_layer(dir, layer, &p),
                None => return,
            },
            // The stacked experts stay here too: the cases' ids are made from them.
            Some(Pending::Experts { name, stacked }) if !super::handoff::has_layer(dir, name) => {
                super::handoff::write_experts(dir, name, stacked)
            }
            _ => return,
        };
        if let Err(e) = written {
            let name = self.pending.as_ref().map_or("?", Pending::name);
            eprintln!(
                "w4a16: handing {name} over to its worker failed, which converts it again: {e}"
            );
        }
    }
}

impl<'r, 'a> Run<'r, 'a> {
    /// Checks one unit in this process; returns each layer's fork (its record last in `layers`)
    /// with its slot in the report's order. The linears launch before stage 2, so their
    /// conversions are gone before the fused projections' are made: the peak memory is one
    /// stage's, not both.
    pub(super) fn check_unit(&self, unit: &Unit<'_>) -> Vec<(usize, Run<'r, 'a>)> {
        let mut staged = self.stage_unit(unit, &launch_here);
        launch_here(&mut staged);
        finish_unit(staged)
    }

    /// Stages 1 and 2 of a unit whose launches go to workers: each launch layer's conversion is
    /// written to `handoff` (the unit's folder) and dropped as soon as its stage ends.
    pub(super) fn stage_for_workers(
        &self,
        unit: &Unit<'_>,
        handoff: Option<&std::path::Path>,
    ) -> Vec<Staged<'r, 'a>> {
        let hand_over = |staged: &mut [Staged<'r, 'a>]| {
            staged.par_iter_mut().for_each(|s| s.hand_over(handoff));
        };
        let mut staged = self.stage_unit(unit, &hand_over);
        hand_over(&mut staged);
        staged
    }

    /// The case of `pending` at batch `m` (tokens, for experts).
    pub(super) fn pending_case(&self, pending: &Pending, m: usize) -> Case {
        match pending {
            Pending::Dense { layer, .. } => layer.case(&self.name, m),
            Pending::Experts { name, stacked } => self.moe_case(name, stacked, m),
        }
    }

    /// `pending`'s cases at `batches`, in this process (a dense layer's conversion made ahead
    /// is used once, by the first).
    pub(super) fn launch(
        &mut self,
        pending: &mut Pending,
        batches: &[usize],
        record: &mut LayerRecord,
    ) {
        match pending {
            Pending::Dense { layer, prepared } => {
                self.run_cases(layer, batches, prepared.take(), record);
            }
            Pending::Experts { name, stacked } => {
                self.run_experts(name, stacked, batches, record);
            }
        }
    }

    /// Stages 1 and 2 of a unit: its linears, then its fused projections, each with the launch
    /// it waits for (converted ahead unless workers launch it, which convert it themselves).
    /// `between` is given stage 1's layers before stage 2 starts.
    pub(super) fn stage_unit(
        &self,
        unit: &Unit<'_>,
        between: &dyn Fn(&mut [Staged<'r, 'a>]),
    ) -> Vec<Staged<'r, 'a>> {
        let (mut linears, read): (Vec<Staged<'r, 'a>>, Vec<ReadPart>) = unit
            .linears
            .par_iter()
            .map(|&(slot, entry, in_fused)| {
                let mut run = self.fork();
                let (record, part, pending) = run.read_linear(entry, in_fused);
                let staged = Staged {
                    slot,
                    run,
                    record,
                    pending,
                };
                (staged, part)
            })
            .unzip();
        between(&mut linears);
        let parts: HashMap<&str, &ReadPart> =
            read.iter().map(|p| (p.entry.module.as_str(), p)).collect();
        let fused: Vec<Staged<'r, 'a>> = unit
            .fused
            .par_iter()
            .map(|&(slot, name, members)| {
                let mut run = self.fork();
                let (record, pending) = run.fuse(name, members, &parts);
                Staged {
                    slot,
                    run,
                    record,
                    pending,
                }
            })
            .collect();
        linears.extend(fused);
        // A MoE layer's experts are read and converted in parallel within it.
        for &(slot, name, members) in &unit.experts {
            let mut run = self.fork();
            let (record, stacked) = run.experts(name, members);
            let pending = stacked.map(|stacked| Pending::Experts {
                name: name.to_string(),
                stacked,
            });
            linears.push(Staged {
                slot,
                run,
                record,
                pending,
            });
        }
        linears
    }

    /// A layer's launch, converted ahead (once: a worker that launches it takes this
    /// conversion, handed over).
    fn pending(&mut self, layer: LaunchLayer, record: &mut LayerRecord) -> Pending {
        let prepared = self.convert_ahead(&layer, false, record);
        Pending::Dense { layer, prepared }
    }

    /// Stage 1 for one linear: read, `checkpoint` and `oracle` verdicts, converted ahead.
    fn read_linear(
        &mut self,
        entry: &LinearEntry,
        in_fused: bool,
    ) -> (LayerRecord, ReadPart, Option<Pending>) {
        let kind = if in_fused {
            LayerKind::FusedPart
        } else {
            LayerKind::Linear
        };
        let mut record = self.empty_record(&entry.module, kind);
        let Some(loaded) = self.load(entry, &mut record) else {
            let refusal = self
                .verdicts
                .last()
                .cloned()
                .expect("load pushed its refusal");
            let part = ReadPart {
                entry: entry.clone(),
                read: Err(refusal),
            };
            return (record, part, None);
        };
        let go_on = self.checkpoint_verdict(&loaded, &mut record);
        let (checkpoint, read) = PartRead::of(loaded);
        self.oracle_check(&entry.module, checkpoint.as_ref(), &mut record);
        let part = ReadPart {
            entry: entry.clone(),
            read: Ok(read),
        };
        if !go_on {
            return (record, part, None);
        }
        let layer = LaunchLayer {
            module: entry.module.clone(),
            input_of: entry.module.clone(),
            shape: record.shape.expect("set by checkpoint_verdict"),
            dtype: record.dtype.expect("set by checkpoint_verdict"),
            symmetry: record.symmetry.expect("set by checkpoint_verdict"),
            producer: entry.producer,
            bias: entry.tensors.contains_key("bias"),
            checkpoint,
        };
        if in_fused {
            // Converted alone for its own `convert` verdict; launched inside its projection.
            if !self.launch_only {
                self.convert_ahead(&layer, true, &mut record);
            }
            return (record, part, None);
        }
        let pending = self.pending(layer, &mut record);
        (record, part, Some(pending))
    }

    /// Stage 2 for one fused projection, from its parts as stage 1 read them (a part the filter
    /// left out of stage 1 is read here, for this projection alone).
    fn fuse(
        &mut self,
        name: &str,
        members: &[String],
        parts: &HashMap<&str, &ReadPart>,
    ) -> (LayerRecord, Option<Pending>) {
        let mut record = self.empty_record(name, LayerKind::FusedProjection);
        let mut fused_parts = Vec::new();
        let mut read_parts: Vec<&ReadPart> = Vec::new();
        let model = self.model;
        let read_here: Vec<ReadPart> = members
            .iter()
            .filter(|m| !parts.contains_key(m.as_str()))
            .filter_map(|m| model.linear(m).cloned())
            .map(|entry| self.read_part(entry, &mut record))
            .collect();
        for module in members {
            let found = parts.get(module.as_str()).copied();
            if let Some(p) = found.or_else(|| read_here.iter().find(|p| p.entry.module == *module))
            {
                read_parts.push(p);
            }
        }
        for part in &read_parts {
            record.producer = Some(part.entry.producer);
            let read = match &part.read {
                Ok(r) => r,
                Err(refusal) => {
                    record.status = LayerStatus::Refused;
                    self.verdicts.push(Verdict {
                        case_id: record.id.clone(),
                        ..refusal.clone()
                    });
                    return (record, None);
                }
            };
            record
                .defect_cells
                .extend(read.defect_cells.iter().cloned());
            record.defects.extend(read.defects.iter().cloned());
            if !read.defects.is_empty() && self.opts.strict {
                record.status = LayerStatus::Refused;
                self.verdicts.push(
                    Verdict::new(&record.id, Check::FusedProjection, Outcome::Fail).because(
                        Cause::Checkpoint(CheckpointRefusal::StrictPart {
                            module: part.entry.module.clone(),
                        }),
                    ),
                );
                return (record, None);
            }
            fused_parts.push(FusedPart {
                symmetric: part.entry.scheme.symmetric,
                module: part.entry.module.clone(),
                target: read.target,
                group: read.group,
                checkpoint: Arc::clone(&read.checkpoint),
            });
        }
        record.shard = read_parts
            .iter()
            .find_map(|p| p.read.as_ref().ok().map(|r| r.shard.clone()));
        let bias = read_parts
            .iter()
            .any(|p| p.entry.tensors.contains_key("bias"));
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
                return (record, None);
            }
        };
        let layer = self.fused_launch_layer(name, fusion, bias, &mut record);
        let pending = self.pending(layer, &mut record);
        (record, Some(pending))
    }

    /// Reads a part for a fused projection only: no verdict of its own; a refusal is returned
    /// for the projection to repeat.
    fn read_part(&mut self, entry: LinearEntry, record: &mut LayerRecord) -> ReadPart {
        let mut scratch = self.empty_record(&entry.module, LayerKind::FusedPart);
        let loaded = self.load(&entry, &mut scratch);
        record.read_s += scratch.read_s;
        let read = match loaded {
            Some(l) => Ok(PartRead::of(l).1),
            None => Err(self.verdicts.pop().expect("load pushed its refusal")),
        };
        ReadPart { entry, read }
    }

    /// The fused projection as one layer, with its `fused-projection` verdict.
    fn fused_launch_layer(
        &mut self,
        name: &str,
        fusion: FusedProjection,
        bias: bool,
        record: &mut LayerRecord,
    ) -> LaunchLayer {
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
        LaunchLayer {
            module: name.to_string(),
            input_of: names[0].to_string(),
            shape,
            dtype: target.dtype,
            symmetry,
            producer: record.producer.expect("a fused projection has parts"),
            bias,
            checkpoint: Arc::new(fusion),
        }
    }
}

/// Each layer's fork with its record finished, and its slot in the report's order.
pub(super) fn finish_unit<'r, 'a>(staged: Vec<Staged<'r, 'a>>) -> Vec<(usize, Run<'r, 'a>)> {
    let mut out = Vec::new();
    for staged in staged {
        let Staged {
            slot,
            mut run,
            mut record,
            ..
        } = staged;
        finish(&mut record, &run.verdicts);
        run.layers.push(record);
        out.push((slot, run));
    }
    out
}

/// Stage 3 in this process: each layer's launches, one layer after another, reusing the
/// conversion made ahead.
fn launch_here(staged: &mut [Staged<'_, '_>]) {
    for s in staged {
        if let Some(mut p) = s.pending.take() {
            let batches = s.run.opts.batches.clone();
            s.run.launch(&mut p, &batches, &mut s.record);
            execute::forget_prepared_layer();
        }
    }
}

/// The decoder layer a module belongs to: its name up to `layers.<i>` (`model.layers.3`), or
/// the module itself outside the decoder layers (`lm_head`).
pub(super) fn decoder_layer_of(module: &str) -> &str {
    let mut from = 0;
    while let Some(at) = module[from..].find("layers.") {
        let start = from + at + "layers.".len();
        let digits = module[start..]
            .bytes()
            .take_while(u8::is_ascii_digit)
            .count();
        let end = start + digits;
        let boundary = at + from == 0 || module.as_bytes()[from + at - 1] == b'.';
        if digits > 0 && boundary && (module[end..].is_empty() || module[end..].starts_with('.')) {
            return &module[..end];
        }
        from = start;
    }
    module
}

#[cfg(test)]
mod tests {
    use super::decoder_layer_of;

    #[test]
    fn a_module_belongs_to_its_decoder_layer() {
        let cases = [
            ("model.layers.3.self_attn.q_proj", "model.layers.3"),
            ("model.layers.12.mlp.experts.0.w1", "model.layers.12"),
            ("layers.0.mlp.down_proj", "layers.0"),
            (
                "model.language_model.layers.7.mlp.up_proj",
                "model.language_model.layers.7",
            ),
            ("lm_head", "lm_head"),
            ("model.sublayers.1.proj", "model.sublayers.1.proj"),
            ("model.layers.x.proj", "model.layers.x.proj"),
        ];
        for (module, layer) in cases {
            assert_eq!(decoder_layer_of(module), layer, "{module}");
        }
    }
}
