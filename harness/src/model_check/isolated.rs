//! A model check's launches in the runner's fault-isolated workers (ARCHITECTURE.md rule 8): a
//! kernel that faults the device or takes its process down becomes one FAULT verdict naming the
//! layer and the batch size it was launched at, and the check goes on in a fresh worker. There
//! is one worker mechanism ([`crate::runner::isolate`]): the parent sends the case ids of a
//! decoder layer's launches (its linears, fused projections and MoE layers), and the worker
//! ([`ModelLauncher`]) launches each case from the layer's conversion that the parent handed
//! over (`handoff.rs`); what was not handed over (a MoE layer, a layer whose reading failed) it
//! reads and converts itself (`stages.rs`).

use super::handoff;
use super::run::Run;
use super::stages::{self, Pending, Staged, Unit};
use super::{CheckModelOptions, LayerKind, ModelCheckError, Plan};
use crate::runner::execute::{self, RunContext};
use crate::runner::isolate::{ModelLaunches, WorkerCommand, WorkerSpec, run_worker};
use crate::runner::session::StopFlag;
use crate::runner::timing::PhaseTimes;
use crate::runner::verdict::{Cause, Check, Outcome, Verdict, WorkerFailure};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use w4a16_checkpoint::{ActivationsFile, ModelDir};

/// How the parent starts the workers that launch a model's layers.
#[derive(Clone, Debug)]
pub struct ModelWorkers {
    /// This executable (its hidden `worker` subcommand).
    pub exe: PathBuf,
    /// What the workers run; its `model` names the model and the options that choose layers.
    pub spec: WorkerSpec,
    /// The watchdog: the longest one case may take, including, for the first case of each
    /// decoder layer, reading and converting that layer.
    pub per_case_timeout: Duration,
}

impl Run<'_, '_> {
    /// Stage 3 in workers: each pending launch of the unit as one case id per batch size, the
    /// verdicts coming back absorbed into the layer's record as an in-process launch's are. The
    /// workers take the unit's conversions from `handoff` (its folder) where given.
    pub(super) fn launch_in_workers(
        &self,
        workers: &ModelWorkers,
        staged: &mut [Staged<'_, '_>],
        handoff: Option<&Path>,
    ) {
        let batches = self.opts.batches.clone();
        let mut ids = Vec::new();
        let mut owner: HashMap<String, (usize, usize)> = HashMap::new();
        for (i, s) in staged.iter_mut().enumerate() {
            let Some(p) = s.pending.take() else { continue };
            // The notes (and a refusal) on recorded activations are the parent's; the worker
            // only takes the rows.
            if let Pending::Dense { layer, .. } = &p {
                s.run.recorded_activations(layer, &mut s.record);
            }
            for &m in &batches {
                let id = self.pending_case(&p, m).id;
                owner.insert(id.clone(), (i, m));
                ids.push(id);
            }
        }
        let Some(first) = ids.first() else { return };
        let mut spec = workers.spec.clone();
        if let Some(model) = spec.model.as_mut() {
            model.handoff = handoff.map(Path::to_path_buf);
        }
        let command = WorkerCommand {
            exe: &workers.exe,
            spec: &spec,
            sanitizer: None,
        };
        let never = StopFlag::default();
        let mut by_case: HashMap<String, Vec<Verdict>> = HashMap::new();
        match run_worker(&command, &ids, workers.per_case_timeout, &never, |_| {}) {
            Ok(out) => {
                for v in out.verdicts {
                    by_case.entry(v.case_id.clone()).or_default().push(v);
                }
                let (i, _) = owner[first];
                staged[i].run.times.merge(&out.times);
            }
            Err(e) => {
                let error = format!("starting a worker ({}): {e}", workers.exe.display());
                for id in &ids {
                    let cause = Cause::Worker(WorkerFailure::Session {
                        error: error.clone(),
                    });
                    let v = Verdict::new(id, Check::Device, Outcome::Fault).because(cause);
                    by_case.insert(id.clone(), vec![v]);
                }
            }
        }
        for id in &ids {
            let (i, m) = owner[id];
            let vs = by_case.remove(id).unwrap_or_default();
            let Staged { run, record, .. } = &mut staged[i];
            run.absorb(m, vs, &PhaseTimes::default(), record);
        }
    }
}

/// The model a worker launches from, and the options that chose its layers.
struct LaunchSource {
    model: ModelDir,
    name: String,
    opts: CheckModelOptions,
    recorded: Option<ActivationsFile>,
    /// The folder of the parent's conversions of the decoder layer this worker serves.
    handoff: Option<PathBuf>,
}

/// The decoder layer a worker is launching: the layer handed over last, and what it read and
/// converted itself (only what was not handed over).
struct UnitLaunches {
    name: String,
    handed: Option<(String, Pending)>,
    read_here: Option<HashMap<String, Pending>>,
    /// What reading and converting the unit here took, charged to the case that needed it
    /// (a worker's conversions are counted as the parent's are).
    staging: Option<PhaseTimes>,
}

/// The worker's side: the cases of a model's layers launched by id, from the conversions the
/// parent handed over (one layer in memory at a time), else one decoder layer read and converted
/// (in parallel) here.
pub struct ModelLauncher {
    source: LaunchSource,
    unit: Option<UnitLaunches>,
}

impl ModelLauncher {
    /// Opens the model the parent checks, with its options.
    pub fn open(spec: &ModelLaunches) -> Result<ModelLauncher, ModelCheckError> {
        let model = ModelDir::open(&spec.dir)?;
        let recorded = match &spec.activations {
            Some(path) => Some(ActivationsFile::open(path)?),
            None => None,
        };
        let opts = CheckModelOptions {
            batches: Vec::new(),
            strict: spec.strict,
            activations: spec.activations.clone(),
            filter: spec.filter.clone(),
            startup_memory: None,
            workers: None,
        };
        Ok(ModelLauncher {
            source: LaunchSource {
                name: super::model_name(&spec.dir),
                model,
                opts,
                recorded,
                handoff: spec.handoff.clone(),
            },
            unit: None,
        })
    }

    /// One case: its verdicts and times. An id naming no layer of the model is the case's
    /// failure, as an unknown case id is a suite worker's.
    pub fn launch(&mut self, id: &str, ctx: &RunContext<'_>) -> (Vec<Verdict>, PhaseTimes) {
        let source = &self.source;
        let Some((module, m)) = case_of(&source.name, id) else {
            return unknown(id);
        };
        let unit_name = stages::decoder_layer_of(module);
        if self.unit.as_ref().is_none_or(|u| u.name != unit_name) {
            // The previous decoder layer's conversions go before the next one's are made.
            self.unit = None;
            execute::forget_prepared_layer();
            self.unit = Some(UnitLaunches {
                name: unit_name.to_string(),
                handed: None,
                read_here: None,
                staging: None,
            });
        }
        let unit = self.unit.as_mut().expect("set above");
        let handed_here = source
            .handoff
            .as_deref()
            .filter(|dir| handoff::has_layer(dir, module));
        let pending = match handed_here {
            Some(dir) => {
                if unit.handed.as_ref().is_none_or(|(name, _)| name != module) {
                    // One handed-over layer in memory at a time.
                    unit.handed = None;
                    execute::forget_prepared_layer();
                    match handoff::read_handed(dir, module) {
                        Ok(p) => unit.handed = Some((module.to_string(), p)),
                        Err(e) => return handoff_failed(id, module, &e),
                    }
                }
                unit.handed.as_mut().map(|(_, p)| p)
            }
            None => {
                if unit.read_here.is_none() {
                    let (pending, times) = source.prepare(unit_name, ctx);
                    unit.read_here = Some(pending);
                    unit.staging = Some(times);
                }
                unit.read_here.as_mut().and_then(|p| p.get_mut(module))
            }
        };
        let Some(pending) = pending else {
            return unknown(id);
        };
        let mut run = source.run(ctx);
        let mut record = run.empty_record(module, LayerKind::Linear);
        run.launch(pending, &[m], &mut record);
        if let Some(staging) = unit.staging.take() {
            run.times.merge(&staging);
        }
        let verdicts = run.verdicts.into_iter().filter(|v| v.case_id == id);
        (verdicts.collect(), run.times)
    }
}

impl LaunchSource {
    fn run<'r, 'a>(&'r self, ctx: &'r RunContext<'a>) -> Run<'r, 'a> {
        Run {
            name: self.name.clone(),
            model: &self.model,
            opts: &self.opts,
            ctx,
            recorded: self.recorded.as_ref(),
            oracle: None,
            y_recipe: None,
            launch_only: true,
            layers: Vec::new(),
            verdicts: Vec::new(),
            times: PhaseTimes::default(),
            read_s: 0.0,
        }
    }

    /// Stages 1 and 2 of decoder layer `unit` as the parent planned it, for the layers the
    /// parent did not hand over: each one's launch, converted, by module (a fused projection by
    /// its name; its parts are read for it alone).
    fn prepare(&self, unit: &str, ctx: &RunContext<'_>) -> (HashMap<String, Pending>, PhaseTimes) {
        let plan = Plan::of(&self.model, self.opts.filter.as_deref());
        let units = super::units(&plan.linears, &plan.fused, &plan.experts);
        let Some(unit) = units.iter().find(|u| u.name == unit) else {
            return (HashMap::new(), PhaseTimes::default());
        };
        let here = |name: &str| {
            self.handoff
                .as_deref()
                .is_none_or(|dir| !handoff::has_layer(dir, name))
        };
        let unit = Unit {
            name: unit.name.clone(),
            linears: (unit.linears.iter())
                .filter(|(_, e, in_fused)| !in_fused && here(&e.module))
                .copied()
                .collect(),
            fused: (unit.fused.iter())
                .filter(|(_, name, _)| here(name))
                .copied()
                .collect(),
            experts: (unit.experts.iter())
                .filter(|(_, name, _)| here(name))
                .copied()
                .collect(),
        };
        let mut times = PhaseTimes::default();
        let mut pending = HashMap::new();
        for staged in self.run(ctx).stage_unit(&unit, &|_| {}) {
            times.merge(&staged.run.times);
            if let Some(p) = staged.pending {
                pending.insert(p.name().to_string(), p);
            }
        }
        (pending, times)
    }
}

/// `(module, M)` of a case id `<model>/<module>/M=<m>/…`, or `(layer, T)` of a MoE layer's
/// `<model>/<layer>/T=<tokens>/…`.
fn case_of<'i>(model: &str, id: &'i str) -> Option<(&'i str, usize)> {
    let rest = id.strip_prefix(model)?.strip_prefix('/')?;
    let at = rest.find("/M=").or_else(|| rest.find("/T="))?;
    let m = rest[at + 3..].split('/').next()?.parse().ok()?;
    Some((&rest[..at], m))
}

/// The case's failure when the layer the parent handed over cannot be read back.
fn handoff_failed(
    id: &str,
    module: &str,
    error: &crate::runner::execute::HandoffError,
) -> (Vec<Verdict>, PhaseTimes) {
    let cause = Cause::Worker(WorkerFailure::Session {
        error: format!("reading {module} as the parent handed it over: {error}"),
    });
    let v = Verdict::new(id, Check::Session, Outcome::Fail).because(cause);
    (vec![v], PhaseTimes::default())
}

fn unknown(id: &str) -> (Vec<Verdict>, PhaseTimes) {
    let cause = Cause::Worker(WorkerFailure::UnknownCase { id: id.to_string() });
    let v = Verdict::new(id, Check::Case, Outcome::Fail).because(cause);
    (vec![v], PhaseTimes::default())
}

/// The worker spec's model part for a check of `dir` under `opts`.
pub fn launches(dir: &Path, opts: &CheckModelOptions) -> ModelLaunches {
    ModelLaunches {
        dir: dir.to_path_buf(),
        filter: opts.filter.clone(),
        strict: opts.strict,
        activations: opts.activations.clone(),
        handoff: None,
    }
}

#[cfg(test)]
mod tests {
    use super::case_of;

    #[test]
    fn a_case_id_names_its_module_and_batch() {
        let id = "m/model.layers.0.mlp.down_proj/M=256/bf16/asym/g128/realistic/awq";
        assert_eq!(
            case_of("m", id),
            Some(("model.layers.0.mlp.down_proj", 256))
        );
        assert_eq!(case_of("other", id), None);
        assert_eq!(case_of("m", "m/lm_head"), None);
        assert_eq!(case_of("m", "m/lm_head/M=x/f16"), None);
        let moe =
            "m/model.layers.0.mlp.experts.gate_up_proj/T=5/bf16/asym/g32/realistic/e4-top2/softmax";
        assert_eq!(
            case_of("m", moe),
            Some(("model.layers.0.mlp.experts.gate_up_proj", 5))
        );
    }
}
