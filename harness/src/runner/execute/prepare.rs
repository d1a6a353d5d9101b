//! The case's layer: generated from the case's seed (or read from a given checkpoint), built
//! by the case's producer and put through the converter, with the `convert:<producer>`
//! verdict. One prepared layer is kept per thread ([`Prepared`]: a linear layer here, a MoE
//! layer's experts in `runner::moe`), so that the cases of one layer at every batch size (every
//! T and routing of a MoE layer) make its weights once.

use super::{CaseRun, padding_rule, producer_of};
use crate::runner::moe::PreparedExperts;
use crate::runner::timing::Phase;
use crate::runner::verdict::{Check, Outcome, ReferenceStage, Verdict};
use std::cell::RefCell;
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use w4a16_device::OutputLayout;
use w4a16_kernels::Target;
use w4a16_reference::data;
use w4a16_reference::formats::{ConvertError, LoadTarget, Producer, ResidentLayer, RowPadding};
use w4a16_reference::gemm::InputError;
use w4a16_reference::layer::QuantizedLayer;
use w4a16_reference::offload::LayerWeights;

/// Drops this thread's prepared layer: a caller that knows no later case reuses it (a model
/// check moving to its next layer) keeps the memory in use at one layer.
pub fn forget_prepared_layer() {
    LAST_PREPARED.with(|slot| slot.borrow_mut().take());
}

/// What a thread keeps of the last layer it prepared, for the next case of the same layer: a
/// linear layer converted, or a MoE layer's experts generated and stacked. One slot for both,
/// so a thread holds one layer's weights whichever kind (large layers are GB-sized).
pub(crate) enum Prepared {
    Linear(Arc<PreparedLayer>),
    Experts(Arc<PreparedExperts>),
}

/// This thread's prepared layer, if `reuse` takes it (the layer of the case at hand).
pub(crate) fn reuse_prepared<T>(reuse: impl FnOnce(&Prepared) -> Option<T>) -> Option<T> {
    LAST_PREPARED.with(|slot| slot.borrow().as_ref().and_then(reuse))
}

/// Makes `prepared` this thread's prepared layer, in place of the last.
pub(crate) fn keep_prepared(prepared: Prepared) {
    LAST_PREPARED.with(|slot| *slot.borrow_mut() = Some(prepared));
}

/// A layer converted on one thread, handed to the thread that runs its cases: a model check
/// converts a decoder layer's linears in parallel and launches them one by one, and the
/// launching thread must not convert them again.
pub struct PreparedHandoff(pub(super) Arc<PreparedLayer>);

/// Takes this thread's prepared linear layer out of its slot (`None` when the last case's layer
/// could not be read, or was a MoE layer's experts), to be [adopted](adopt_prepared_layer) by
/// another thread.
pub fn take_prepared_layer() -> Option<PreparedHandoff> {
    LAST_PREPARED.with(|slot| {
        let mut slot = slot.borrow_mut();
        match slot.take() {
            Some(Prepared::Linear(p)) => Some(PreparedHandoff(p)),
            other => {
                *slot = other;
                None
            }
        }
    })
}

/// Makes `prepared` this thread's prepared layer: the next case of the same layer, target and
/// data spec reuses its conversion (and replays its `convert` verdicts) instead of converting.
pub fn adopt_prepared_layer(prepared: PreparedHandoff) {
    keep_prepared(Prepared::Linear(prepared.0));
}

/// What identifies a prepared layer: the case id without its batch segment, the data spec
/// without M, and the target (its padding rule shapes the resident layout).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct PreparedKey {
    pub(super) layer: String,
    pub(super) spec: data::DataSpec,
    pub(super) target: Target,
}

/// A generated layer, its resident form (when the conversion succeeded) and the conversion's
/// verdicts, replayed for every case that reuses it.
pub(crate) struct PreparedLayer {
    pub(super) key: PreparedKey,
    pub(super) layer: QuantizedLayer,
    pub(super) resident: Option<ResidentLayer>,
    pub(super) convert_verdicts: Vec<Verdict>,
    /// The layer's half of the GPU reference, formed by its first case that needs one.
    pub(super) weights: OnceLock<Result<LayerWeights, InputError>>,
    /// The dequant kernel's expected copy `[N, K]`, formed by the layer's first case that
    /// launches it: every batch size compares against the same bits.
    pub(super) dense_copy: OnceLock<Vec<u16>>,
    /// The buffer payload a correct dequant kernel leaves for the last output layout asked
    /// about (the expected copy at its rows, the poison between them): compared on the device.
    pub(super) dequant_payload: std::sync::Mutex<Option<(OutputLayout, Arc<Vec<u16>>)>>,
}

impl PreparedLayer {
    /// The layer's half of a held reference, formed once for all of its batch sizes.
    pub(super) fn layer_weights(&self) -> Result<&LayerWeights, &InputError> {
        self.weights
            .get_or_init(|| LayerWeights::new(&self.layer))
            .as_ref()
    }

    /// The payload a correct dequant kernel leaves in `layout` (`None` where its rows do not lie
    /// in place), formed once per layout.
    pub(super) fn dequant_payload(&self, layout: &OutputLayout) -> Option<Arc<Vec<u16>>> {
        let mut kept = self
            .dequant_payload
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, p)) = kept.as_ref().filter(|(l, _)| l == layout) {
            return Some(Arc::clone(p));
        }
        // Straight from the layer's rows: the compact copy is formed only where a kernel's
        // output comes back to the host to be compared.
        let payload = Arc::new(layout.payload_with_rows(|r, out| self.layer.rounded_row(r, out))?);
        *kept = Some((layout.clone(), Arc::clone(&payload)));
        Some(payload)
    }

    /// The dequant kernel's expected copy of this layer, formed once for all its batch sizes.
    pub(super) fn dense_copy(&self) -> &[u16] {
        self.dense_copy
            .get_or_init(|| expected_dense_copy(&self.layer))
    }
}

/// The dequant kernel's copy of `layer` bit for bit, `[N, K]` row-major: `(q − z)·s` exact in
/// f64, rounded once to the activation dtype. The layer is well formed: generated here, or a
/// checkpoint's own reading (four-bit codes, tensors of its shape) the converter matched.
pub(super) fn expected_dense_copy(layer: &QuantizedLayer) -> Vec<u16> {
    layer.rounded_unchecked()
}

thread_local! {
    /// One layer per thread: a worker process runs its cases on one thread, grouped by layer
    /// (`Case::layer_key`; a model check converts on one thread and launches on another:
    /// [`PreparedHandoff`]).
    static LAST_PREPARED: RefCell<Option<Prepared>> = const { RefCell::new(None) };
}

impl<'c, 'a> CaseRun<'c, 'a> {
    /// The case's layer, generated and converted, with the conversion's verdicts pushed. The
    /// cases of one layer at every batch size share it (`data::layer_key`), so each thread keeps
    /// the last one and converts a layer once per run of its cases, not once per M.
    pub(super) fn prepared_layer(&mut self, spec: &data::DataSpec) -> Option<Arc<PreparedLayer>> {
        let key = PreparedKey {
            layer: data::layer_key(&self.case.id),
            spec: data::DataSpec { m: 0, ..*spec },
            target: self.ctx.target,
        };
        let cached = reuse_prepared(|p| match p {
            Prepared::Linear(p) if p.key == key => Some(Arc::clone(p)),
            _ => None,
        });
        let prepared = match cached {
            Some(p) => {
                for v in &p.convert_verdicts {
                    self.verdicts.push(Verdict {
                        case_id: self.case.id.clone(),
                        ..v.clone()
                    });
                }
                p
            }
            None => {
                // Drop the previous layer before building the next: large layers are GB-sized.
                forget_prepared_layer();
                let first = self.verdicts.len();
                let (layer, resident) = match self.given {
                    Some(given) => {
                        let start = Instant::now();
                        self.times.conversions += 1;
                        let ckpt = given.checkpoint.as_ref();
                        let (target, padding) = self.conversion_target();
                        // The own reading and the converter are independent: side by side, as
                        // a real layer's conversion is on check-model's critical path.
                        let (own, converted) = rayon::join(
                            || ckpt.decode_own_semantics(),
                            || ckpt.to_resident(&target, padding),
                        );
                        let out = match own {
                            Ok(layer) => {
                                let resident = self.check_converted(converted, &layer);
                                (layer, resident)
                            }
                            Err(e) => {
                                let check = Check::Convert(producer_of(self.case));
                                let stage = ReferenceStage::OwnReading;
                                self.push_reference(check, Outcome::Fail, stage, e);
                                return None;
                            }
                        };
                        self.times.add(Phase::Convert, start.elapsed());
                        out
                    }
                    None => {
                        let layer_seed = data::case_seed(&key.layer);
                        let layer = self
                            .times
                            .time(Phase::Data, || data::generate_layer(layer_seed, spec));
                        let layer = match layer {
                            Ok(l) => l,
                            Err(e) => {
                                let stage = ReferenceStage::Data;
                                self.push_reference(Check::Data, Outcome::Fail, stage, e);
                                return None;
                            }
                        };
                        let start = Instant::now();
                        self.times.conversions += 1;
                        let resident = self.convert(&layer);
                        self.times.add(Phase::Convert, start.elapsed());
                        (layer, resident)
                    }
                };
                let convert_verdicts = self.verdicts[first..].to_vec();
                let p = Arc::new(PreparedLayer {
                    key,
                    layer,
                    resident,
                    convert_verdicts,
                    weights: OnceLock::new(),
                    dense_copy: OnceLock::new(),
                    dequant_payload: Default::default(),
                });
                keep_prepared(Prepared::Linear(Arc::clone(&p)));
                p
            }
        };
        self.prepared = Some(Arc::clone(&prepared));
        Some(prepared)
    }

    /// Producer → its own reading and the converter; both must give back the logical layer.
    fn convert(&mut self, logical: &QuantizedLayer) -> Option<ResidentLayer> {
        let case = self.case;
        let producer = producer_of(case);
        let check = || Check::Convert(producer);
        let ckpt = match producer.build(logical) {
            Ok(c) => c,
            Err(e) => {
                self.push_reference(check(), Outcome::Fail, ReferenceStage::Producer, e);
                return None;
            }
        };
        match ckpt.decode_own_semantics() {
            Ok(own) if own == *logical => self.check_conversion(ckpt.as_ref(), logical),
            Ok(_) => {
                self.push(
                    check(),
                    Outcome::Fail,
                    "the checkpoint's own reading differs from the layer it was built from",
                );
                None
            }
            Err(e) => {
                self.push_reference(check(), Outcome::Fail, ReferenceStage::OwnReading, e);
                None
            }
        }
    }

    /// The converter on `ckpt`, whose own reading is `logical`: the resident layout it writes
    /// must read back as that reading (the `convert:<producer>` verdict).
    fn check_conversion(
        &mut self,
        ckpt: &dyn w4a16_reference::formats::Checkpoint,
        logical: &QuantizedLayer,
    ) -> Option<ResidentLayer> {
        let (target, padding) = self.conversion_target();
        let converted = ckpt.to_resident(&target, padding);
        self.check_converted(converted, logical)
    }

    /// What the case's layer converts to: its shape and the target's row padding.
    fn conversion_target(&self) -> (LoadTarget, RowPadding) {
        let case = self.case;
        let target = LoadTarget {
            n: case.shape.n,
            k: case.shape.k,
            dtype: case.dtype,
        };
        let padding = RowPadding {
            scale_extra_elems: case.carrier.scale_extra_elems(),
            ..RowPadding::from_rule(case.shape.k, padding_rule(case, self.ctx.target))
        };
        (target, padding)
    }

    /// The converter's output judged against the checkpoint's own reading `logical`.
    fn check_converted(
        &mut self,
        converted: Result<w4a16_reference::formats::Converted, ConvertError>,
        logical: &QuantizedLayer,
    ) -> Option<ResidentLayer> {
        let producer = producer_of(self.case);
        let check = || Check::Convert(producer);
        let converted = match converted {
            Ok(c) => c,
            Err(e) => {
                self.push_reference(check(), Outcome::Fail, ReferenceStage::Converter, e);
                return None;
            }
        };
        let resident = converted.layer;
        // The legacy layout cannot be read back as packed: its own verdict comes at launch.
        if producer != Producer::LegacyUnpackedZp {
            match resident.to_logical() {
                Ok(back) if back == *logical => {}
                Ok(_) => {
                    self.push(
                        check(),
                        Outcome::Fail,
                        "converter output reads back differently from the checkpoint's own reading",
                    );
                    return None;
                }
                Err(e) => {
                    let stage = ReferenceStage::ResidentLayout;
                    self.push_reference(check(), Outcome::Fail, stage, e);
                    return None;
                }
            }
        }
        let notes: Vec<String> = converted.notes.iter().map(|n| format!("{n:?}")).collect();
        self.push(check(), Outcome::Pass, notes.join("; "));
        Some(resident)
    }
}
