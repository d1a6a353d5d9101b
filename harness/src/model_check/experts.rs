//! A MoE layer's experts in a model check: each expert read and checked under the layer, fused
//! where gate and up fuse, converted and read back, stacked, and run through moe_align + moe.

use super::fused::{FusedPart, FusedProjection};
use super::run::Run;
use super::{LayerKind, LayerRecord, LayerStatus};
use crate::runner::execute;
use crate::runner::timing::Phase;
use crate::runner::verdict::Check;
use crate::runner::verdict::{Cause, CheckpointRefusal, Outcome, SourceError, Verdict};
use rayon::prelude::*;
use std::sync::Arc;
use std::time::Instant;
use w4a16_cases::{CarrierMode, Case, ViewLayout};
use w4a16_reference::data::DataClass;
use w4a16_reference::formats::{Checkpoint, LoadTarget, Producer, ResidentLayer};
use w4a16_reference::moe::MoeLayer;

/// How reading one expert ended.
enum ExpertRead {
    /// Its checkpoint (its parts fused) and the layout it converts to.
    Read(Arc<dyn Checkpoint>, LoadTarget),
    /// None of its modules is in the checkpoint.
    Absent,
    /// The layer stops here; the record says why.
    Stop,
}

/// The experts converted so far, and why the others did not read back.
#[derive(Default)]
struct Stack {
    residents: Vec<ResidentLayer>,
    disagreements: Vec<String>,
}

/// A MoE layer's experts stacked as the moe kernel reads them, waiting for their launches.
pub(super) struct StackedExperts {
    pub(super) layer: MoeLayer,
    pub(super) producer: Producer,
}

/// One expert as its thread read and converted it: the fork holding its verdicts, its share of
/// the layer's record, and its converted layer.
struct ExpertDone<'r, 'a> {
    run: Run<'r, 'a>,
    record: LayerRecord,
    producer: Option<Producer>,
    stack: Stack,
    stop: bool,
}

/// What one expert's thread added to its copy of the layer's record, added to the record.
fn absorb_expert(record: &mut LayerRecord, expert: LayerRecord) {
    record.read_s += expert.read_s;
    record.times.merge(&expert.times);
    record.producer = expert.producer.or(record.producer);
    record.defects.extend(expert.defects);
    record.defect_cells.extend(expert.defect_cells);
    record.notes.extend(expert.notes);
    if expert.status == LayerStatus::Refused {
        record.status = LayerStatus::Refused;
    }
}

impl Run<'_, '_> {
    /// One projection of a MoE layer's experts: each expert read (its own `checkpoint` and
    /// `oracle` checks under its module), fused where `members` fuse, converted and read back,
    /// stacked, and run through moe_align + moe at every batch size (as tokens) with seeded
    /// softmax routing over the model's `num_experts_per_tok`.
    ///
    /// This reads, checks, converts and stacks them: the layer's record, and the stacked layer
    /// when it goes on to its launches ([`Run::run_experts`]).
    pub(super) fn experts(
        &mut self,
        name: &str,
        members: &[Vec<String>],
    ) -> (LayerRecord, Option<StackedExperts>) {
        let mut record = self.empty_record(name, LayerKind::Experts);
        let mut stack = Stack::default();
        let mut producer = None;
        // Each expert is read and converted on a thread of its own; their findings are taken in
        // expert order, up to the first that stops the layer, as one after another would give.
        let template = &record;
        let done: Vec<ExpertDone<'_, '_>> = members
            .par_iter()
            .enumerate()
            .map(|(e, parts)| {
                let mut run = self.fork();
                let mut record = template.clone();
                let mut producer = None;
                let mut stack = Stack::default();
                let stop = match run.read_expert(e, parts, &mut record, &mut producer) {
                    ExpertRead::Read(ckpt, target) => {
                        run.convert_expert(e, ckpt.as_ref(), &target, &mut record, &mut stack);
                        false
                    }
                    ExpertRead::Absent => false,
                    ExpertRead::Stop => true,
                };
                ExpertDone {
                    run,
                    record,
                    producer,
                    stack,
                    stop,
                }
            })
            .collect();
        for d in done {
            self.merge(d.run);
            absorb_expert(&mut record, d.record);
            producer = d.producer.or(producer);
            stack.residents.extend(d.stack.residents);
            stack.disagreements.extend(d.stack.disagreements);
            if d.stop {
                return (record, None);
            }
        }
        let Some(producer) = producer else {
            return (record, None);
        };
        record.producer = Some(producer);
        let stacked = self
            .stack_experts(stack, producer, &mut record)
            .map(|layer| StackedExperts { layer, producer });
        (record, stacked)
    }

    /// Reads expert `e`'s modules with their checkpoint and oracle checks and fuses them.
    fn read_expert(
        &mut self,
        e: usize,
        parts: &[String],
        record: &mut LayerRecord,
        producer: &mut Option<Producer>,
    ) -> ExpertRead {
        let mut loaded_parts = Vec::new();
        for module in parts {
            let Some(entry) = self.model.linear(module) else {
                continue;
            };
            let entry = entry.clone();
            let Some(loaded) = self.load(&entry, record) else {
                return ExpertRead::Stop;
            };
            *producer = Some(entry.producer);
            // Under the layer's id, so its reports group each expert's checks with it.
            let mut part_record = self.empty_record(module, LayerKind::FusedPart);
            part_record.id = format!("{}/{module}", record.id);
            let go_on = self.checkpoint_verdict(&loaded, &mut part_record);
            record.defects.append(&mut part_record.defects);
            record.defect_cells.append(&mut part_record.defect_cells);
            if !go_on {
                record.status = LayerStatus::Refused;
                return ExpertRead::Stop;
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
        match loaded_parts.len() {
            0 => ExpertRead::Absent,
            1 => {
                let p = loaded_parts.pop().expect("one part");
                ExpertRead::Read(p.checkpoint, p.target)
            }
            _ => match FusedProjection::new(loaded_parts) {
                Ok(f) => {
                    let t = f.target();
                    ExpertRead::Read(Arc::new(f), t)
                }
                Err(err) => {
                    record.status = LayerStatus::Refused;
                    self.verdicts.push(
                        Verdict::new(&record.id, Check::FusedProjection, Outcome::Fail).because(
                            Cause::Checkpoint(CheckpointRefusal::UnfusableExpert {
                                expert: e.to_string(),
                                error: SourceError::new(err),
                            }),
                        ),
                    );
                    ExpertRead::Stop
                }
            },
        }
    }

    /// Converts expert `e` (timed) and keeps it when it reads back as its own reading.
    fn convert_expert(
        &mut self,
        e: usize,
        ckpt: &dyn Checkpoint,
        target: &LoadTarget,
        record: &mut LayerRecord,
        stack: &mut Stack,
    ) {
        let start = Instant::now();
        let own = ckpt.decode_own_semantics();
        let converted = ckpt.to_resident(target, w4a16_reference::formats::RowPadding::NONE);
        let elapsed = start.elapsed();
        record.times.add(Phase::Convert, elapsed);
        self.times.add(Phase::Convert, elapsed);
        record.times.conversions += 1;
        self.times.conversions += 1;
        let disagreement = match (own, converted) {
            (Ok(own), Ok(c)) => match c.layer.to_logical() {
                Ok(back) if back == own => {
                    stack.residents.push(c.layer);
                    return;
                }
                Ok(_) => format!(
                    "expert {e}: the converter's output reads back differently from the checkpoint's own reading"
                ),
                Err(err) => format!("expert {e}: resident layout invalid: {err}"),
            },
            (Err(err), _) => format!("expert {e}: own reading refused: {err}"),
            (_, Err(err)) => format!("expert {e}: converter refused: {err}"),
        };
        stack.disagreements.push(disagreement);
    }

    /// The experts stacked into one MoE layer, with the `convert` verdict either way.
    fn stack_experts(
        &mut self,
        stack: Stack,
        producer: Producer,
        record: &mut LayerRecord,
    ) -> Option<MoeLayer> {
        if !stack.disagreements.is_empty() {
            record.status = LayerStatus::Fail;
            self.verdicts.push(
                Verdict::new(&record.id, Check::Convert(producer), Outcome::Fail)
                    .detail(stack.disagreements.join("; ")),
            );
            return None;
        }
        let layer = match MoeLayer::from_experts(stack.residents) {
            Ok(l) => l,
            Err(err) => {
                record.status = LayerStatus::Fail;
                self.verdicts.push(
                    Verdict::new(&record.id, Check::Convert(producer), Outcome::Fail)
                        .detail(format!("the experts cannot be stacked: {err}")),
                );
                return None;
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
        Some(layer)
    }

    /// The stacked layer's case at each of `batches` (as tokens).
    pub(super) fn run_experts(
        &mut self,
        name: &str,
        stacked: &StackedExperts,
        batches: &[usize],
        record: &mut LayerRecord,
    ) {
        for &t in batches {
            let case = self.moe_case(name, stacked, t);
            let (vs, times) = execute::run_given_moe_case_timed(&case, &stacked.layer, self.ctx);
            self.absorb(t, vs, &times, record);
        }
    }

    /// The stacked layer's case at `t` tokens, routed over the model's `num_experts_per_tok`.
    pub(super) fn moe_case(&self, name: &str, stacked: &StackedExperts, t: usize) -> Case {
        let layer = &stacked.layer;
        let experts = layer.local_experts();
        let top_k = self
            .model
            .config()
            .num_experts_per_tok
            .unwrap_or(2)
            .clamp(1, experts);
        let routed_weight = name.ends_with("down_proj") || name.ends_with(".w2");
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
            producer: stacked.producer,
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
        case
    }
}
