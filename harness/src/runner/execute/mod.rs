//! One case, end to end: seeded data → producer checkpoint → its own reading and the converter
//! → resident layout → selection and the static cross-check → launch(es) → reference and bound
//! → verdicts. Pure data flow; the device is behind the backend-neutral [`Device`] trait.
//!
//! The case's steps live beside this file, each an `impl CaseRun` block of its own concern:
//! `prepare` (the layer, its conversion and the per-thread cache), `selection` (the
//! selected path and the static contract cross-check), `layout` (X/Y/dense geometry),
//! `launch` (paths, determinism and the padding identity), `carrier` (the carrier case)
//! and `judge` (reference, bound, second opinion, failure artifacts). This file holds the
//! entry points, the known-bad application and the case state they share.

mod carrier;
mod gpu_reference;
mod handoff;
mod judge;
mod launch;
mod layout;
mod prepare;
mod selection;
#[cfg(test)]
mod tests;

pub use gpu_reference::{ReferenceChoice, ReferenceError, held_reference_on, reference_on};
pub use handoff::{HandoffError, read_resident_layer, write_resident_layer};
pub(crate) use handoff::{read_header, write_header};
use judge::ReferenceKey;
pub(crate) use judge::reference_failure;
pub(crate) use prepare::{Prepared, keep_prepared, reuse_prepared};
pub use prepare::{
    PreparedHandoff, adopt_prepared_layer, forget_prepared_layer, take_prepared_layer,
};

use super::timing::{Phase, PhaseTimes};
use super::verdict::{Cause, Check, KernelPath, Outcome, ReferenceStage, SourceError, Verdict};
use crate::require::Skip;
use std::path::PathBuf;
use std::time::Instant;
use w4a16_cases::{Case, KnownBad, Xfail};
use w4a16_device::validate::ContractError;
use w4a16_device::{Device, DeviceFault};
use w4a16_kernels::{Execution, KernelId, RunTarget, Target};
use w4a16_reference::data;
use w4a16_reference::formats::{Carrier, PaddingRule, Producer};
use w4a16_reference::layer::Activations;
use w4a16_select::config::KernelConfig;

/// Without a device, layers above this many weights get static checks only (their data would
/// feed nothing but skipped launches).
pub const CPU_ONLY_DATA_LIMIT: usize = 1 << 24;

/// Which kernels a case runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every kernel of the set that accepts the case, plus determinism, padding and
    /// second-opinion checks (the kernel-set suites).
    Differential,
    /// The path the selection picks, as the engine would run it (the field matrix).
    Selected,
    /// The selected path and the fallback beside it, each against the reference, and the
    /// selected path against the fallback (`w4a16 check-model`: a real layer gets the engine's
    /// path and the universal second opinion).
    SelectedWithFallback,
}

/// A layer that exists before its case: a real checkpoint's linear (`w4a16 check-model`). The
/// case then checks the checkpoint's own reading against the converter instead of a generated
/// layer, and runs on these activations where they are given.
#[derive(Clone, Debug)]
pub struct GivenLayer {
    pub checkpoint: std::sync::Arc<dyn w4a16_reference::formats::Checkpoint>,
    /// Recorded activations `[R, K]`: a case of batch M takes the first M rows, repeated in
    /// order when M > R. `None`: seeded activations from the case id.
    pub activations: Option<Activations>,
}

impl GivenLayer {
    /// X for a batch of `m` rows from the recorded activations (`None` when there are none).
    pub fn activations_for(&self, m: usize) -> Option<Activations> {
        let a = self.activations.as_ref().filter(|a| a.m > 0)?;
        let mut data = Vec::with_capacity(m * a.k);
        for row in 0..m {
            let r = row % a.m;
            data.extend_from_slice(&a.data[r * a.row_stride..r * a.row_stride + a.k]);
        }
        Some(Activations {
            m,
            k: a.k,
            row_stride: a.k,
            dtype: a.dtype,
            data,
        })
    }
}

/// Everything a case needs besides itself.
pub struct RunContext<'a> {
    /// The configuration the host side follows (selection, tiles, padding, tolerances).
    pub target: Target,
    /// Native, or that configuration emulated on an NVIDIA GPU: part of the repro line and of
    /// which known-bad entries apply.
    pub execution: Execution,
    pub device: Option<&'a dyn Device>,
    /// Why there is no device (reported on every GPU-bound check).
    pub no_device: Option<Skip>,
    pub config: KernelConfig,
    /// Per-target safety factor of docs/contract.md §6, from data.
    pub c_target: f64,
    pub known_bad: &'a [KnownBad],
    pub today: w4a16_cases::Date,
    /// Failure artifacts go here (ARCHITECTURE.md rule 9); `None` writes none.
    pub artifacts: Option<PathBuf>,
    /// Above this many multiply-adds (M·N·K) the full reference gives way to Freivalds plus
    /// sampled lines.
    pub full_reference_macs: f64,
    pub sample_flops: f64,
    /// Where the reference's products are formed; `Gpu` needs `device` (its f64 GEMM) and then
    /// judges every element of every shape (no Freivalds, no sampling).
    pub reference: ReferenceChoice,
}

impl RunContext<'_> {
    /// The target as the run names it (`gfx1151`, `gfx1151-emu`).
    pub fn run_target(&self) -> RunTarget {
        RunTarget {
            target: self.target,
            execution: self.execution,
        }
    }

    /// The same context with no device: GPU-bound checks skip with `why`.
    pub fn without_device(&self, why: Skip) -> RunContext<'_> {
        RunContext {
            target: self.target,
            execution: self.execution,
            device: None,
            no_device: Some(why),
            config: self.config,
            c_target: self.c_target,
            known_bad: self.known_bad,
            today: self.today,
            artifacts: self.artifacts.clone(),
            full_reference_macs: self.full_reference_macs,
            sample_flops: self.sample_flops,
            reference: ReferenceChoice::Cpu,
        }
    }
}

/// The command that reruns exactly one case (ARCHITECTURE.md rule 9).
pub fn repro_command(case_id: &str, target: RunTarget) -> String {
    format!("cargo run --release --bin w4a16 -- repro '{case_id}' --target {target}")
}

fn producer_of(case: &Case) -> Producer {
    case.producer
}

fn padding_rule(case: &Case, target: Target) -> PaddingRule {
    w4a16_select::padding::padding_rule(target, case.padding)
}

/// Runs one case and applies its known-bad entry, if any.
pub fn run_case(case: &Case, mode: Mode, ctx: &RunContext<'_>) -> Vec<Verdict> {
    run_case_timed(case, mode, ctx).0
}

/// As [`run_case`], with the time each phase of the case took.
pub fn run_case_timed(case: &Case, mode: Mode, ctx: &RunContext<'_>) -> (Vec<Verdict>, PhaseTimes) {
    run_timed(case, mode, ctx, None)
}

/// As [`run_case_timed`] for a MoE case whose experts are `experts` (a checkpoint's MoE layer,
/// stacked as the moe kernel reads them); `case.moe` must be set.
pub fn run_given_moe_case_timed(
    case: &Case,
    experts: &w4a16_reference::moe::MoeLayer,
    ctx: &RunContext<'_>,
) -> (Vec<Verdict>, PhaseTimes) {
    let Some(routing) = case.moe else {
        let v = Verdict::new(&case.id, Check::Case, Outcome::Fail)
            .detail("a case with given experts needs its MoE routing");
        return (vec![v], PhaseTimes::default());
    };
    let start = Instant::now();
    let (out, mut times) = super::moe::run_moe_case(case, routing, ctx, Some(experts));
    times.finish_case(start.elapsed());
    (out, times)
}

/// As [`run_case_timed`] for a case whose layer is `given` (a dense linear of a checkpoint).
pub fn run_given_case_timed(
    case: &Case,
    given: &GivenLayer,
    mode: Mode,
    ctx: &RunContext<'_>,
) -> (Vec<Verdict>, PhaseTimes) {
    run_timed(case, mode, ctx, Some(given))
}

fn run_timed(
    case: &Case,
    mode: Mode,
    ctx: &RunContext<'_>,
    given: Option<&GivenLayer>,
) -> (Vec<Verdict>, PhaseTimes) {
    let start = Instant::now();
    let (mut out, mut times) = match (case.moe, given) {
        (Some(routing), _) => super::moe::run_moe_case(case, routing, ctx, None),
        (None, given) => {
            let mut run = CaseRun::new(case, mode, ctx);
            run.given = given;
            run.run()
        }
    };
    if let Some(kb) =
        w4a16_cases::known_bad::known_bad_for(ctx.known_bad, &case.id, &ctx.run_target().name())
    {
        apply_known_bad(&mut out, kb, ctx.today);
    }
    times.finish_case(start.elapsed());
    (out, times)
}

/// The case's verdicts under its known-bad entry, by the one strict-xfail rule
/// ([`w4a16_cases::strict_xfail`]) that the code-object gates use too.
fn apply_known_bad(verdicts: &mut [Verdict], kb: &KnownBad, today: w4a16_cases::Date) {
    let failed = verdicts
        .iter()
        .any(|v| matches!(v.outcome, Outcome::Fail | Outcome::Fault));
    match kb.judge(failed, today) {
        Xfail::Expired => {
            for v in verdicts.iter_mut() {
                v.detail = format!(
                    "known-bad entry expired ({}): {}; {}",
                    kb.tracking, kb.reason, v.detail
                );
                v.outcome = Outcome::Expired;
            }
        }
        Xfail::Caught => {
            for v in verdicts
                .iter_mut()
                .filter(|v| matches!(v.outcome, Outcome::Fail | Outcome::Fault))
            {
                v.detail = format!("known bad ({}): {}; {}", kb.tracking, kb.reason, v.detail);
                v.outcome = Outcome::ExpectedFail;
            }
        }
        // Strict: a suppression that no longer catches a failure must be removed.
        Xfail::UnexpectedPass => {
            for v in verdicts.iter_mut().filter(|v| v.outcome == Outcome::Pass) {
                v.outcome = Outcome::UnexpectedPass;
                v.detail = format!("known-bad entry ({}) now passes: remove it", kb.tracking);
            }
        }
    }
}

struct CaseRun<'c, 'a> {
    case: &'c Case,
    mode: Mode,
    ctx: &'c RunContext<'a>,
    verdicts: Vec<Verdict>,
    /// Shared, not cloned, with the judging that borrows `self` mutably: a reference is
    /// M×N f64 twice or thrice.
    references: Vec<(ReferenceKey, judge::Formed<'a>)>,
    times: PhaseTimes,
    /// The asymmetric carrier of a carrier case's layer, once built (`None` for every other
    /// case, and where the layer has none).
    carrier: Option<Carrier>,
    /// The case's layer when it comes from a checkpoint rather than from seeded data.
    given: Option<&'c GivenLayer>,
    /// The case's layer as this thread prepared it (shared with the layer's other batch sizes).
    prepared: Option<std::sync::Arc<prepare::PreparedLayer>>,
}

impl<'c, 'a> CaseRun<'c, 'a> {
    fn new(case: &'c Case, mode: Mode, ctx: &'c RunContext<'a>) -> Self {
        CaseRun {
            case,
            mode,
            ctx,
            verdicts: Vec::new(),
            references: Vec::new(),
            times: PhaseTimes::default(),
            carrier: None,
            given: None,
            prepared: None,
        }
    }

    fn push(&mut self, check: Check, outcome: Outcome, detail: impl Into<String>) {
        self.verdicts
            .push(Verdict::new(&self.case.id, check, outcome).detail(detail));
    }

    /// A failure of the reference side at `stage`, its error kept typed in the cause.
    fn push_reference(
        &mut self,
        check: Check,
        outcome: Outcome,
        stage: ReferenceStage,
        error: impl std::error::Error + Send + Sync + 'static,
    ) {
        let error = SourceError::new(error);
        self.push_cause(check, outcome, Cause::Reference { stage, error });
    }

    /// A verdict whose detail is rendered from its typed cause.
    fn push_cause(&mut self, check: Check, outcome: Outcome, cause: Cause) {
        self.verdicts
            .push(Verdict::new(&self.case.id, check, outcome).because(cause));
    }

    /// A device error: a SKIP when the device lacks a capability, else a FAULT.
    fn push_device(&mut self, check: Check, fault: DeviceFault) {
        let (outcome, cause) = Cause::of_device(fault);
        self.push_cause(check, outcome, cause);
    }

    /// A contract refusal, typed, with `frame` saying what it means for this check.
    fn push_contract(
        &mut self,
        check: Check,
        outcome: Outcome,
        (kernel, error): (KernelId, ContractError),
        frame: impl FnOnce(&Cause) -> String,
    ) {
        let cause = Cause::Contract { kernel, error };
        let mut v = Verdict::new(&self.case.id, check, outcome);
        v.detail = frame(&cause);
        v.cause = Some(cause);
        self.verdicts.push(v);
    }

    /// A GPU-bound check without a device: a loud SKIP naming why there is none.
    fn push_no_device(&mut self, check: Check) {
        let skip = self.ctx.no_device.clone().unwrap_or_else(|| Skip {
            requirement: crate::require::Requirement::Gpu,
            reason: "no GPU".into(),
        });
        let mut v = Verdict::skipped(&self.case.id, check, skip);
        v.detail = format!("needs a GPU: {}", v.detail);
        self.verdicts.push(v);
    }

    fn run(mut self) -> (Vec<Verdict>, PhaseTimes) {
        let case = self.case;
        // A layer the resident layout cannot hold (selection-boundary cases) has no checkpoint
        // to build: only the selection's refusal is checked. A given checkpoint always exists:
        // its converter decides, on its real tensors, whatever the size.
        if self.given.is_none()
            && (!case.is_buildable()
                || (self.ctx.device.is_none() && case.shape.n * case.shape.k > CPU_ONLY_DATA_LIMIT))
        {
            self.select_statically();
            return (self.verdicts, self.times);
        }
        let spec = case.data_spec();
        let Some(prepared) = self.prepared_layer(&spec) else {
            return (self.verdicts, self.times);
        };
        let seed = data::case_seed(&case.id);
        let recorded = self.given.and_then(|g| g.activations_for(spec.m));
        let x = self.times.time(Phase::Data, || match self.ctx.device {
            Some(_) if recorded.is_some() => Ok(recorded.expect("checked")),
            Some(device) => {
                data::generate_activations_from(seed, &spec, Some(&DeviceDraws(device)))
            }
            // Without a device X only meets the static contract checks, which read its shape:
            // its values would feed nothing.
            None => Ok(Activations {
                m: spec.m,
                k: spec.shape.k,
                row_stride: spec.shape.k,
                dtype: spec.dtype,
                data: vec![0; spec.m * spec.shape.k],
            }),
        });
        let x = match x {
            Ok(x) => x,
            Err(e) => {
                self.push_reference(Check::Data, Outcome::Fail, ReferenceStage::Data, e);
                return (self.verdicts, self.times);
            }
        };
        if let Some(resident) = &prepared.resident {
            self.select_and_launch(&x, &prepared.layer, resident, seed);
        }
        (self.verdicts, self.times)
    }
}

/// A device as the generator of realistic X (`Device::draw_realistic`): its values are
/// spot-checked against the host stream by the data module, and a device that does not draw
/// leaves X to the host.
struct DeviceDraws<'d>(&'d dyn Device);

impl data::RealisticSource for DeviceDraws<'_> {
    fn realistic(
        &self,
        stream: &data::StreamKey,
        dtype: w4a16_reference::ActDtype,
        count: usize,
    ) -> Result<Option<Vec<u16>>, data::GeneratorError> {
        Ok(self.0.draw_realistic(stream, dtype, count)?)
    }
}

/// The check of a launched path's output.
fn path_check(path: &[KernelId]) -> Check {
    Check::Path(KernelPath::new(path.to_vec()).expect("a launched path has a kernel"))
}
