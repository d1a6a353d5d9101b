//! One model check in progress ([`Run`]): each linear and fused projection read, checked
//! against its producer's own reading and the oracle, and run at every batch size.

use super::{CheckModelOptions, LayerKind, LayerRecord, LayerStatus, SelectedPath, oracle};
use crate::runner::execute::{self, GivenLayer, Mode, RunContext};
use crate::runner::timing::PhaseTimes;
use crate::runner::verdict::Check;
use crate::runner::verdict::{Cause, CheckpointRefusal, Outcome, SourceError, Verdict};
use std::sync::Arc;
use std::time::Instant;
use w4a16_cases::{CarrierMode, Case, ViewLayout};
use w4a16_checkpoint::{CheckpointDefect, LinearEntry, LoadedLinear, ModelDir};
use w4a16_reference::ActDtype;
use w4a16_reference::data::DataClass;
use w4a16_reference::formats::{Checkpoint, Producer};
use w4a16_reference::layer::{Activations, LayerShape, Symmetry};

/// One model check in progress: what it reads from and what it has found so far.
pub(super) struct Run<'r, 'a> {
    pub(super) name: String,
    pub(super) model: &'r ModelDir,
    pub(super) opts: &'r CheckModelOptions,
    pub(super) ctx: &'r RunContext<'a>,
    pub(super) recorded: Option<&'r w4a16_checkpoint::ActivationsFile>,
    pub(super) oracle: Option<&'r w4a16_checkpoint::Oracle>,
    /// The recipe the oracle file declares for its `y`, else each producer's default.
    pub(super) y_recipe: Option<w4a16_checkpoint::YRecipe>,
    /// A worker's run: only what the launches need (a fused part's own conversion, which only
    /// gives its own verdict, is the parent's).
    pub(super) launch_only: bool,
    pub(super) layers: Vec<LayerRecord>,
    pub(super) verdicts: Vec<Verdict>,
    pub(super) times: PhaseTimes,
    pub(super) read_s: f64,
}

impl<'r, 'a> Run<'r, 'a> {
    /// An empty run over the same model, options and context: one layer's checks on a thread
    /// of their own, [merged](Run::merge) back in the report's order.
    pub(super) fn fork(&self) -> Run<'r, 'a> {
        Run {
            name: self.name.clone(),
            model: self.model,
            opts: self.opts,
            ctx: self.ctx,
            recorded: self.recorded,
            oracle: self.oracle,
            y_recipe: self.y_recipe,
            launch_only: self.launch_only,
            layers: Vec::new(),
            verdicts: Vec::new(),
            times: PhaseTimes::default(),
            read_s: 0.0,
        }
    }

    /// Takes in what a [fork](Run::fork) found, after what this run found so far.
    pub(super) fn merge(&mut self, fork: Run<'_, '_>) {
        self.layers.extend(fork.layers);
        self.verdicts.extend(fork.verdicts);
        self.times.merge(&fork.times);
        self.read_s += fork.read_s;
    }
}

impl Run<'_, '_> {
    fn layer_id(&self, module: &str) -> String {
        format!("{}/{module}", self.name)
    }

    pub(super) fn empty_record(&self, module: &str, kind: LayerKind) -> LayerRecord {
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
            defect_cells: Vec::new(),
            notes: Vec::new(),
            status: LayerStatus::Pass,
            read_s: 0.0,
            times: PhaseTimes::default(),
        }
    }

    /// Reads one linear (timed) and returns it with its `checkpoint` verdict pushed.
    pub(super) fn load(
        &mut self,
        entry: &LinearEntry,
        record: &mut LayerRecord,
    ) -> Option<LoadedLinear> {
        let start = Instant::now();
        let loaded = self.model.load(entry);
        let read = start.elapsed().as_secs_f64();
        record.read_s += read;
        self.read_s += read;
        record.producer = Some(entry.producer);
        match loaded {
            Ok(mut l) => {
                self.resolve_defects(&mut l);
                record
                    .defect_cells
                    .extend(super::DefectCell::of(&l.defects));
                Some(l)
            }
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

    /// The overflow's possibly wrong cells narrowed to the certainly wrong ones where the oracle
    /// file records what was quantized (`intended_dequantized`) beside the library's reading.
    fn resolve_defects(&self, loaded: &mut LoadedLinear) {
        let Some(oracle) = &self.oracle else { return };
        let (n, k, dtype) = (loaded.target.n, loaded.target.k, loaded.target.dtype);
        let Ok(entry) = oracle.module(&loaded.entry.module, n, k, dtype) else {
            return;
        };
        let (Some(intended), Some(read)) = (&entry.intended, &entry.dequantized) else {
            return;
        };
        for CheckpointDefect::GptqV1ZeroOverflow(d) in &mut loaded.defects {
            d.resolve(intended, read);
        }
    }

    /// The `checkpoint` verdict of a loaded linear: its notes, and its defects (refused under
    /// `--strict`). Returns whether the layer may go on to the kernels.
    pub(super) fn checkpoint_verdict(
        &mut self,
        loaded: &LoadedLinear,
        record: &mut LayerRecord,
    ) -> bool {
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

    /// The layer converted on this thread, without a device: what its launches (later, on the
    /// launching thread) or its fused projection would convert. With `keep` (a fused part,
    /// launched only inside its projection) its `convert` verdicts go under the record; else
    /// they are replayed by the launches. Returns the prepared layer for the launching thread.
    pub(super) fn convert_ahead(
        &mut self,
        layer: &LaunchLayer,
        keep: bool,
        record: &mut LayerRecord,
    ) -> Option<execute::PreparedHandoff> {
        let given = GivenLayer {
            checkpoint: Arc::clone(&layer.checkpoint),
            activations: None,
        };
        let case = layer.case(&self.name, 1);
        let ctx = self.ctx.without_device(crate::require::Skip {
            requirement: crate::require::Requirement::Gpu,
            reason: "converted ahead of its launches".into(),
        });
        let (vs, t) =
            execute::run_given_case_timed(&case, &given, Mode::SelectedWithFallback, &ctx);
        let t = if keep {
            // Only the reading and conversion belong to the part.
            self.verdicts.extend(
                vs.into_iter()
                    .filter(|v| matches!(v.check, Check::Convert(_)))
                    .map(|mut v| {
                        v.case_id = record.id.clone();
                        v
                    }),
            );
            t
        } else {
            // The case itself runs again at each batch size: only its conversion is counted here.
            PhaseTimes {
                data_s: t.data_s,
                convert_s: t.convert_s,
                conversions: t.conversions,
                ..PhaseTimes::default()
            }
        };
        record.times.merge(&t);
        self.times.merge(&t);
        execute::take_prepared_layer()
    }

    /// The layer's cases, one per batch size, reusing the layer `prepared` ahead when given.
    pub(super) fn run_cases(
        &mut self,
        layer: &LaunchLayer,
        batches: &[usize],
        prepared: Option<execute::PreparedHandoff>,
        record: &mut LayerRecord,
    ) {
        let activations = self.recorded_activations(layer, record);
        let given = GivenLayer {
            checkpoint: Arc::clone(&layer.checkpoint),
            activations,
        };
        let mode = Mode::SelectedWithFallback;
        if let Some(p) = prepared {
            execute::adopt_prepared_layer(p);
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
    pub(super) fn absorb(
        &mut self,
        m: usize,
        vs: Vec<Verdict>,
        t: &PhaseTimes,
        record: &mut LayerRecord,
    ) {
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
    pub(super) fn recorded_activations(
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

    pub(super) fn oracle_check(
        &mut self,
        module: &str,
        checkpoint: &dyn Checkpoint,
        record: &mut LayerRecord,
    ) {
        let Some(oracle) = &self.oracle else { return };
        let recipe = self.y_recipe.unwrap_or_else(|| {
            record.producer.map_or(
                w4a16_checkpoint::YRecipe::Fp32Accumulate,
                w4a16_checkpoint::recipe::default_recipe,
            )
        });
        let judged = (self.ctx.c_target, recipe);
        let v = oracle::check(oracle, module, checkpoint, judged, &record.id);
        if let Some(v) = v {
            self.verdicts.push(v);
        }
    }
}

pub(super) fn symmetry(loaded: &LoadedLinear) -> Symmetry {
    if loaded.entry.scheme.symmetric {
        Symmetry::Sym
    } else {
        Symmetry::Asym
    }
}

/// A layer as it is launched: a linear or a fused projection.
pub(super) struct LaunchLayer {
    pub(super) module: String,
    /// The module whose recorded input this layer takes (a fused projection's first part).
    pub(super) input_of: String,
    pub(super) shape: LayerShape,
    pub(super) dtype: ActDtype,
    pub(super) symmetry: Symmetry,
    pub(super) producer: Producer,
    pub(super) bias: bool,
    pub(super) checkpoint: Arc<dyn Checkpoint>,
}

impl LaunchLayer {
    /// The case for batch `m`: `<model>/<module>/M=<m>/<dtype>/<sym>/g<G>/realistic[/<producer>]`.
    pub(super) fn case(&self, model: &str, m: usize) -> Case {
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
pub(super) fn finish(record: &mut LayerRecord, verdicts: &[Verdict]) {
    let prefix = format!("{}/", record.id);
    let failed = verdicts
        .iter()
        .filter(|v| v.case_id == record.id || v.case_id.starts_with(&prefix))
        .any(|v| matches!(v.outcome, Outcome::Fail | Outcome::Fault));
    if failed && record.status != LayerStatus::Refused {
        record.status = LayerStatus::Fail;
    }
}
