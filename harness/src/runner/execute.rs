//! One case, end to end: seeded data → producer checkpoint → its own reading and the converter
//! → resident layout → selection and the static cross-check → launch(es) → reference and bound
//! → verdicts. Pure data flow; the device is behind the backend-neutral [`Device`] trait.

use super::check::{Check, KernelPath};
use super::timing::{Phase, PhaseTimes};
use super::verdict::{Cause, Mismatch, Outcome, OutputProblems, Verdict};
use crate::cases::{self, CarrierMode, Case, KnownBad, ViewLayout, Xfail};
use crate::config::KernelConfig;
use crate::device::{Device, DeviceFault, GemmOutput};
use crate::launch::DeviceInputs;
use crate::require::Skip;
use crate::select::{self, LayerRequest};
use crate::tensor::{DenseSpec, LaunchInputs, TensorView, XBuffer, YSpec};
use crate::validate::ContractError;
use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;
use w4a16_kernels::decl::LaunchShape;
use w4a16_kernels::{Execution, KernelDecl, KernelId, RunTarget, Target, TensorRole, set};
use w4a16_reference::NumericRecipe;
use w4a16_reference::bound::BoundModel;
use w4a16_reference::compare::{self, OutputBits};
use w4a16_reference::data;
use w4a16_reference::formats::{
    Carrier, CarrierError, LoadTarget, PaddingRule, Producer, ResidentLayer, RowPadding, ZeroPoints,
};
use w4a16_reference::gemm::{self, Reference};
use w4a16_reference::layer::{Activations, QuantizedLayer};
use w4a16_reference::verify::{self, VerifyBudget};

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
    /// Per-target safety factor of SPEC §6, from data.
    pub c_target: f64,
    pub known_bad: &'a [KnownBad],
    pub today: cases::Date,
    /// Failure artifacts go here (DESIGN rule 9); `None` writes none.
    pub artifacts: Option<PathBuf>,
    /// Above this many multiply-adds (M·N·K) the full reference gives way to Freivalds plus
    /// sampled lines.
    pub full_reference_macs: f64,
    pub sample_flops: f64,
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
        }
    }
}

/// Drops this thread's prepared layer: a caller that knows no later case reuses it (a model
/// check moving to its next layer) keeps the resident set at one layer.
pub fn forget_prepared_layer() {
    LAST_PREPARED.with(|slot| slot.borrow_mut().take());
    super::moe::forget_prepared_experts();
}

/// The command that reruns exactly one case (DESIGN rule 9).
pub fn repro_command(case_id: &str, target: RunTarget) -> String {
    format!("cargo run --release --bin w4a16 -- repro '{case_id}' --target {target}")
}

fn producer_of(case: &Case) -> Producer {
    case.producer
}

fn padding_rule(case: &Case, target: Target) -> PaddingRule {
    crate::select::padding::padding_rule(target, case.padding)
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
    times.cases = 1;
    times.slowest_case_s = start.elapsed().as_secs_f64();
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
        cases::known_bad::known_bad_for(ctx.known_bad, &case.id, &ctx.run_target().name())
    {
        apply_known_bad(&mut out, kb, ctx.today);
    }
    times.cases = 1;
    times.slowest_case_s = start.elapsed().as_secs_f64();
    (out, times)
}

/// The case's verdicts under its known-bad entry, by the one strict-xfail rule
/// ([`cases::strict_xfail`]) that the code-object gates use too.
fn apply_known_bad(verdicts: &mut [Verdict], kb: &KnownBad, today: cases::Date) {
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

/// What identifies a prepared layer: the case id without its batch segment, the data spec
/// without M, and the target (its padding rule shapes the resident layout).
#[derive(Clone, Debug, PartialEq)]
struct PreparedKey {
    layer: String,
    spec: data::DataSpec,
    target: Target,
}

/// A generated layer, its resident form (when the conversion succeeded) and the conversion's
/// verdicts, replayed for every case that reuses it.
struct PreparedLayer {
    key: PreparedKey,
    layer: QuantizedLayer,
    resident: Option<ResidentLayer>,
    convert_verdicts: Vec<Verdict>,
}

thread_local! {
    /// One layer per thread: a worker process runs its cases on one thread, grouped by layer.
    static LAST_PREPARED: RefCell<Option<Rc<PreparedLayer>>> = const { RefCell::new(None) };
}

/// Which reference a recipe needs: its magnitude lane's offset (bits) and whether the offset is
/// accumulated (which changes the IEEE values of special rows).
type ReferenceKey = (Option<u64>, bool);

struct CaseRun<'c, 'a> {
    case: &'c Case,
    mode: Mode,
    ctx: &'c RunContext<'a>,
    verdicts: Vec<Verdict>,
    references: Vec<(ReferenceKey, Reference)>,
    times: PhaseTimes,
    /// The asymmetric carrier of a carrier case's layer, once built (`None` for every other
    /// case, and where the layer has none).
    carrier: Option<Carrier>,
    /// The case's layer when it comes from a checkpoint rather than from seeded data.
    given: Option<&'c GivenLayer>,
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
        }
    }

    fn push(&mut self, check: Check, outcome: Outcome, detail: impl Into<String>) {
        self.verdicts
            .push(Verdict::new(&self.case.id, check, outcome).detail(detail));
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
            Some(_) => data::generate_activations(seed, &spec),
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
                self.push(Check::Data, Outcome::Fail, e.to_string());
                return (self.verdicts, self.times);
            }
        };
        if let Some(resident) = &prepared.resident {
            self.select_and_launch(&x, &prepared.layer, resident, seed);
        }
        (self.verdicts, self.times)
    }

    /// The case's layer, generated and converted, with the conversion's verdicts pushed. The
    /// cases of one layer at every batch size share it (`data::layer_key`), so each thread keeps
    /// the last one and converts a layer once per run of its cases, not once per M.
    fn prepared_layer(&mut self, spec: &data::DataSpec) -> Option<Rc<PreparedLayer>> {
        let key = PreparedKey {
            layer: data::layer_key(&self.case.id),
            spec: data::DataSpec { m: 0, ..*spec },
            target: self.ctx.target,
        };
        let cached = LAST_PREPARED.with(|slot| {
            slot.borrow()
                .as_ref()
                .filter(|p| p.key == key)
                .map(Rc::clone)
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
                LAST_PREPARED.with(|slot| slot.borrow_mut().take());
                let first = self.verdicts.len();
                let (layer, resident) = match self.given {
                    Some(given) => {
                        let start = Instant::now();
                        let own = given.checkpoint.decode_own_semantics();
                        let out = match own {
                            Ok(layer) => {
                                let resident =
                                    self.check_conversion(given.checkpoint.as_ref(), &layer);
                                (layer, resident)
                            }
                            Err(e) => {
                                let check = Check::Convert(producer_of(self.case));
                                self.push(
                                    check,
                                    Outcome::Fail,
                                    format!("own reading refused: {e}"),
                                );
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
                                self.push(Check::Data, Outcome::Fail, e.to_string());
                                return None;
                            }
                        };
                        let start = Instant::now();
                        let resident = self.convert(&layer);
                        self.times.add(Phase::Convert, start.elapsed());
                        (layer, resident)
                    }
                };
                let convert_verdicts = self.verdicts[first..].to_vec();
                let p = Rc::new(PreparedLayer {
                    key,
                    layer,
                    resident,
                    convert_verdicts,
                });
                LAST_PREPARED.with(|slot| *slot.borrow_mut() = Some(Rc::clone(&p)));
                p
            }
        };
        Some(prepared)
    }

    /// Without a device, a large layer's data would only feed skipped launches: check the
    /// selection against the declared contracts on the planned tensors instead.
    fn select_statically(&mut self) {
        let case = self.case;
        let sel = select::select(
            self.ctx.target,
            &LayerRequest::from_case(case),
            &self.ctx.config,
        );
        let Some(path) = KernelPath::new(sel.path.clone()) else {
            self.push(
                Check::Selection(None),
                Outcome::Refused,
                "no kernel takes the layer",
            );
            return;
        };
        let check = Check::Selection(Some(path.clone()));
        match select::cross_check(&sel, &select::check::DeclaredContracts) {
            Ok(()) => self.push(check, Outcome::Pass, sel.dispatch.clone()),
            Err(e) => self.push(
                check,
                Outcome::Fail,
                format!("selected path would fail at launch: {e}"),
            ),
        }
        self.push_no_device(Check::Path(path));
    }

    /// Producer → its own reading and the converter; both must give back the logical layer.
    fn convert(&mut self, logical: &QuantizedLayer) -> Option<ResidentLayer> {
        let case = self.case;
        let producer = producer_of(case);
        let check = || Check::Convert(producer);
        let ckpt = match producer.build(logical) {
            Ok(c) => c,
            Err(e) => {
                self.push(
                    check(),
                    Outcome::Fail,
                    format!("producer cannot express the case: {e}"),
                );
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
                self.push(check(), Outcome::Fail, format!("own reading refused: {e}"));
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
        let case = self.case;
        let producer = producer_of(case);
        let check = || Check::Convert(producer);
        let target = LoadTarget {
            n: case.shape.n,
            k: case.shape.k,
            dtype: case.dtype,
        };
        let padding = RowPadding {
            scale_extra_elems: case.carrier.scale_extra_elems(),
            ..RowPadding::from_rule(case.shape.k, padding_rule(case, self.ctx.target))
        };
        let converted = match ckpt.to_resident(&target, padding) {
            Ok(c) => c,
            Err(e) => {
                self.push(check(), Outcome::Fail, format!("converter refused: {e}"));
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
                    self.push(
                        check(),
                        Outcome::Fail,
                        format!("resident layout invalid: {e}"),
                    );
                    return None;
                }
            }
        }
        let notes: Vec<String> = converted.notes.iter().map(|n| format!("{n:?}")).collect();
        self.push(check(), Outcome::Pass, notes.join("; "));
        Some(resident)
    }

    fn select_and_launch(
        &mut self,
        x: &Activations,
        logical: &QuantizedLayer,
        resident: &ResidentLayer,
        seed: u64,
    ) {
        let case = self.case;
        let mut req = LayerRequest::from_case(case);
        req.dense_cache_built =
            self.ctx.config.prefill_dequant == crate::config::PrefillDequant::Enable;
        let sel = select::select(self.ctx.target, &req, &self.ctx.config);
        let legacy = producer_of(case) == Producer::LegacyUnpackedZp;

        // Static cross-check with the real resident tensors: the chosen path's declared
        // contracts must accept them, or the selection would crash at launch.
        let mut refusal = None;
        for &k in &sel.path {
            if let Err(e) = self.check_case_contract(set::decl(k), x, resident) {
                refusal = Some((k, e));
                break;
            }
        }
        let layout_refusal = refusal
            .as_ref()
            .and_then(|(_, e)| self.declared_layout_refusal(e));
        let Some(sel_path) = KernelPath::new(sel.path.clone()) else {
            let why: Vec<String> = sel
                .rejections
                .iter()
                .map(|r| format!("{}: {}", r.kernel.name(), r.reason))
                .collect();
            self.push(
                Check::Selection(None),
                Outcome::Refused,
                format!("no kernel takes the layer: {}", why.join("; ")),
            );
            return;
        };
        let check = Check::Selection(Some(sel_path));
        match (refusal, legacy) {
            (Some(r), true) => {
                self.push_contract(check, Outcome::Refused, r, |c| {
                    format!("the legacy unpacked zero points were refused before launch: {c}")
                });
                return;
            }
            // The case's X/Y view is one the selected kernel declares it does not take: the
            // engine must hand it another view, which is not the kernel's bug.
            (Some(r), false) if layout_refusal.is_some() => {
                let view = self.layout_name(layout_refusal);
                self.push_contract(check, Outcome::Refused, r, |c| {
                    format!("refuses this {view} view as declared: {c}")
                });
                if self.mode != Mode::Differential {
                    return;
                }
            }
            (Some(r), false) => {
                self.push_contract(check, Outcome::Fail, r, |c| {
                    format!("selected path would fail at launch: {c}")
                });
                return;
            }
            (None, true) => {
                self.push(
                    check,
                    Outcome::Fail,
                    "legacy unpacked zero points were accepted by a packed-zp kernel",
                );
                return;
            }
            (None, false) => self.push(check, Outcome::Pass, sel.dispatch.clone()),
        }

        let paths: Vec<Vec<KernelId>> = match self.mode {
            Mode::Selected => vec![sel.path.clone()],
            Mode::SelectedWithFallback => {
                let mut p = vec![sel.path.clone()];
                if sel.path != [KernelId::Fallback]
                    && self.takes_case_layout(&[KernelId::Fallback], x, resident)
                {
                    p.push(vec![KernelId::Fallback]);
                }
                p
            }
            Mode::Differential => {
                let mut p = Vec::new();
                for k in [KernelId::Skinny, KernelId::Fused, KernelId::Fallback] {
                    if self.takes_case_layout(&[k], x, resident) {
                        p.push(vec![k]);
                    }
                }
                let dense = [KernelId::Dequant, KernelId::Dense];
                if self.takes_case_layout(&dense, x, resident) {
                    p.push(dense.to_vec());
                }
                if self.case.carrier.is_on() && self.carrier_path(x, resident) {
                    p.push(vec![KernelId::FusedCarrier]);
                }
                p
            }
        };
        let Some(device) = self.ctx.device else {
            for p in paths {
                self.push_no_device(path_check(&p));
            }
            return;
        };
        let mut fallback_out: Option<Vec<u16>> = None;
        let mut fast_outs: Vec<(KernelId, Vec<u16>)> = Vec::new();
        for p in paths {
            let Some(out) = self.run_path(device, &p, x, logical, resident, seed) else {
                continue;
            };
            if p == [KernelId::Fallback] {
                fallback_out = Some(out);
            } else if p.len() == 1 || self.mode == Mode::SelectedWithFallback {
                // A selected multi-kernel path (dequant+dense) is judged by its last kernel's
                // recipe, as its own check is.
                fast_outs.push((*p.last().expect("non-empty path"), out));
            }
        }
        if let (Mode::Differential | Mode::SelectedWithFallback, Some(fb)) =
            (self.mode, fallback_out)
        {
            let start = Instant::now();
            for (k, out) in fast_outs {
                self.second_opinion(k, &out, &fb, x, logical);
            }
            self.times.add(Phase::Verify, start.elapsed());
        }
    }

    /// A carrier case: builds the layer's carrier (the `carrier` verdict), checks the stride
    /// trap of a padded-scales case, and decides whether fused_carrier runs. A symmetric layer
    /// has no carrier: its carrier launch must be refused by validation, typed, before any
    /// launch (the `fused_carrier` verdict, `Refused`).
    fn carrier_path(&mut self, x: &Activations, resident: &ResidentLayer) -> bool {
        let path = [KernelId::FusedCarrier];
        self.carrier = self.build_carrier(resident);
        if resident.zeros.is_none() {
            let decl = set::decl(KernelId::FusedCarrier);
            match self.check_case_contract(decl, x, resident) {
                Err(e @ ContractError::CarrierForSymmetricLayer { .. }) => {
                    self.push_contract(
                        path_check(&path),
                        Outcome::Refused,
                        (decl.id, e),
                        |c| format!("refused before launch, as a symmetric layer must be: {c}"),
                    );
                }
                Err(e) => self.push_contract(path_check(&path), Outcome::Fail, (decl.id, e), |c| {
                    format!("a symmetric layer's carrier launch was refused for another reason than its symmetry: {c}")
                }),
                Ok(()) => self.push(
                    path_check(&path),
                    Outcome::Fail,
                    "a carrier launch for a symmetric layer passed validation",
                ),
            }
            return false;
        }
        if self.carrier.is_none() {
            return false;
        }
        if self.case.carrier == CarrierMode::PaddedScales {
            self.stride_trap(x, resident);
        }
        self.takes_case_layout(&path, x, resident)
    }

    /// The carrier of the resident layer, checked against the scales and packed zero points it
    /// was built from (the `carrier` verdict). `None` without one: a symmetric layer (no verdict
    /// here; its launch is the refusal), legacy zero points (refused), or a failure.
    fn build_carrier(&mut self, resident: &ResidentLayer) -> Option<Carrier> {
        let c = match Carrier::from_resident(resident) {
            Ok(c) => c,
            Err(CarrierError::SymmetricLayer) => return None,
            Err(e @ CarrierError::UnpackedZeroPoints { .. }) => {
                self.push(Check::Carrier, Outcome::Refused, e.to_string());
                return None;
            }
            Err(e) => {
                self.push(Check::Carrier, Outcome::Fail, e.to_string());
                return None;
            }
        };
        let Some(ZeroPoints::Packed(zeros)) = &resident.zeros else {
            unreachable!("a carrier is built from packed zero points only");
        };
        let (n, groups) = (resident.shape.n, resident.shape.groups());
        let f16 = resident.dtype == w4a16_reference::ActDtype::F16;
        let wrong = (0..n)
            .flat_map(|r| (0..groups).map(move |g| (r, g)))
            .find(|&(r, g)| {
                let s = resident.scales.get(r, g);
                // An fp16 word of a zero scale holds ±0 whatever z: nothing to read back.
                let z_lost = f16 && resident.dtype.to_f64(s) == 0.0;
                c.scale_bits(r, g) != s || (!z_lost && c.zero(r, g) != Some(zeros.get(r, g)))
            });
        match wrong {
            _ if (c.n, c.groups, c.words.len()) != (n, groups, n * groups) => self.push(
                Check::Carrier,
                Outcome::Fail,
                format!(
                    "carrier is [{}, {}] with {} words, expected [N, K/G] = [{n}, {groups}]",
                    c.n,
                    c.groups,
                    c.words.len()
                ),
            ),
            Some((r, g)) => self.push(
                Check::Carrier,
                Outcome::Fail,
                format!(
                    "word (n = {r}, g = {g}) = {:#010x} does not read back as scale {:#06x}, z = {}",
                    c.word(r, g),
                    resident.scales.get(r, g),
                    zeros.get(r, g)
                ),
            ),
            None => self.push(
                Check::Carrier,
                Outcome::Pass,
                format!(
                    "u32 [{n}, {groups}], row stride K/G = {groups} (scales row stride {}); reads back as the scales and zero points",
                    resident.scales.row_stride
                ),
            ),
        }
        Some(c)
    }

    /// FIELD §6 item 4: the unpadded carrier handed over with the scales' padded row stride
    /// must be refused, typed, before any launch.
    fn stride_trap(&mut self, x: &Activations, resident: &ResidentLayer) {
        let Some(c) = &self.carrier else { return };
        let decl = set::decl(KernelId::FusedCarrier);
        let stride = resident.scales.row_stride;
        let xv = self.x_view(decl.id, x, ViewLayout::default());
        let y = self.y_spec(x.m, ViewLayout::default());
        let mut inputs = LaunchInputs::gemm_carrier_view(resident, Some(c), xv, &y);
        inputs.carrier = Some(TensorView::matrix(
            crate::tensor::ElemType::U32,
            c.n,
            c.groups,
            stride,
            c.words.len() * 4,
        ));
        let check = Check::CarrierStrideTrap;
        match crate::validate::validate(decl, &inputs) {
            Err(e @ ContractError::CarrierRowStride { .. }) => {
                self.push_contract(check, Outcome::Refused, (decl.id, e), |c| {
                    format!("the carrier with the scales' padded row stride was refused before launch: {c}")
                });
            }
            Err(e) => self.push_contract(check, Outcome::Fail, (decl.id, e), |c| {
                format!("the mis-strided carrier was refused for another reason than its stride: {c}")
            }),
            Ok(_) => self.push(
                check,
                Outcome::Fail,
                format!(
                    "the carrier with the scales' row stride {stride} (not K/G = {}) passed validation",
                    c.groups
                ),
            ),
        }
    }

    /// Whether `decl`'s declared contract accepts this launch (the static cross-check), with X
    /// and Y as the case lays them out for that kernel.
    fn check_case_contract(
        &self,
        decl: &KernelDecl,
        x: &Activations,
        resident: &ResidentLayer,
    ) -> Result<(), ContractError> {
        let (xl, yl) = (self.case.x_layout, self.case.y_layout);
        self.check_contract(decl, x, resident, xl, yl)
    }

    /// As [`Self::check_case_contract`] with the X and Y layouts given.
    fn check_contract(
        &self,
        decl: &KernelDecl,
        x: &Activations,
        resident: &ResidentLayer,
        x_layout: ViewLayout,
        y_layout: ViewLayout,
    ) -> Result<(), ContractError> {
        let dense = self.dense_spec(resident);
        let xv = self.x_view(decl.id, x, x_layout);
        let y = self.y_spec(x.m, y_layout);
        let inputs = match decl.id {
            KernelId::Dequant => LaunchInputs::dequant(resident, &dense),
            // The dense kernel reads the dense copy: checked on that copy's shape, since its data
            // does not exist before the dequant runs.
            KernelId::Dense => LaunchInputs::dense_view(xv, &dense, resident.bias.as_deref(), &y),
            KernelId::FusedCarrier => {
                LaunchInputs::gemm_carrier_view(resident, self.carrier.as_ref(), xv, &y)
            }
            _ => LaunchInputs::gemm_view(resident, xv, &y),
        };
        crate::validate::validate(decl, &inputs).map(|_| ())
    }

    /// Differential mode: whether every kernel of `path` takes the case with its X/Y layouts.
    /// A kernel that refuses only the layout, and with its declared row-layout rule, is
    /// `Refused` as intended; one that refuses the layout for any other reason fails; one that
    /// refuses the case whatever the layout is simply not run (as for M or G outside its range).
    fn takes_case_layout(
        &mut self,
        path: &[KernelId],
        x: &Activations,
        resident: &ResidentLayer,
    ) -> bool {
        for &k in path {
            let decl = set::decl(k);
            let Err(e) = self.check_case_contract(decl, x, resident) else {
                continue;
            };
            let default = ViewLayout::default();
            let takes_default = self
                .check_contract(decl, x, resident, default, default)
                .is_ok();
            if !takes_default {
                return false;
            }
            let tensor = self.declared_layout_refusal(&e);
            if tensor.is_some() {
                let view = self.layout_name(tensor);
                self.push_contract(path_check(path), Outcome::Refused, (k, e), |c| {
                    format!("refuses this {view} view as declared: {c}")
                });
            } else {
                self.push_contract(path_check(path), Outcome::Fail, (k, e), |c| {
                    format!("takes contiguous X and Y but refuses this case's views with a reason its row-layout rules do not give: {c}")
                });
            }
            return false;
        }
        true
    }

    /// X or Y, when `e` is that tensor's declared row-layout refusal of a layout the case asked
    /// for (a refusal of the default layout is no case-made choice: the caller fails it).
    fn declared_layout_refusal(&self, e: &ContractError) -> Option<TensorRole> {
        e.row_layout_tensor().filter(|role| match role {
            TensorRole::X => !self.case.x_layout.is_default(),
            TensorRole::Y => !self.case.y_layout.is_default(),
            _ => false,
        })
    }

    /// `x offset-2b` / `y odd-stride`, for refusal messages.
    fn layout_name(&self, tensor: Option<TensorRole>) -> String {
        match tensor {
            Some(TensorRole::X) => format!("x {}", self.case.x_layout.name()),
            Some(TensorRole::Y) => format!("y {}", self.case.y_layout.name()),
            _ => "x/y".to_string(),
        }
    }

    /// X's row stride and offset (elements) for `kernel`: the layout's, except that the
    /// default layout on a kernel that gets the engine's per-call copy of X (fused) follows
    /// the target's activation-row padding rule (SPEC §5).
    fn x_geometry(&self, kernel: KernelId, k: usize, layout: ViewLayout) -> (usize, usize) {
        if layout.is_default() && crate::select::padding::copies_x(kernel) {
            let stride = crate::select::padding::activation_row_stride(
                self.ctx.target,
                k,
                self.case.dtype,
                self.case.padding,
            );
            (stride, 0)
        } else {
            (layout.row_stride(k), layout.offset())
        }
    }

    /// The view of X a launch of `kernel` gets, without building its buffer.
    fn x_view(&self, kernel: KernelId, x: &Activations, layout: ViewLayout) -> TensorView {
        let (stride, offset) = self.x_geometry(kernel, x.k, layout);
        XBuffer::planned_view(x.m, x.k, stride, offset, x.dtype)
    }

    /// X laid out as the case asks for `kernel` (borrowed when that is `x`'s own layout).
    fn x_buffer<'x>(&self, kernel: KernelId, x: &'x Activations) -> XBuffer<'x> {
        let (stride, offset) = self.x_geometry(kernel, x.k, self.case.x_layout);
        // Every layout's stride is at least K, so this never falls back.
        XBuffer::new(x, stride, offset).unwrap_or_else(|| XBuffer::as_laid_out(x))
    }

    /// Y `[m, N]` as `layout` places it in its buffer.
    fn y_spec(&self, m: usize, layout: ViewLayout) -> YSpec {
        let n = self.case.shape.n;
        YSpec::strided(m, n, layout.row_stride(n), layout.offset(), self.case.dtype)
    }

    fn dense_spec(&self, resident: &ResidentLayer) -> DenseSpec {
        let stride = crate::select::padding::dense_row_stride(
            self.ctx.target,
            resident.shape.k,
            resident.dtype,
            self.case.padding,
        );
        DenseSpec {
            n: resident.shape.n,
            k: resident.shape.k,
            row_stride: stride,
            dtype: resident.dtype,
        }
    }

    fn entry(&self, decl: &KernelDecl, x: &Activations) -> String {
        let shape = LaunchShape {
            m: x.m,
            n: self.case.shape.n,
            k: self.case.shape.k,
            group: self.case.shape.group,
            dtype: self.case.dtype,
            asymmetric: self.case.symmetry == w4a16_reference::layer::Symmetry::Asym,
            routing: None,
        };
        decl.launch_entry(&shape, self.ctx.target)
    }

    /// Launches one path; returns its output bits when it produced any.
    fn run_path(
        &mut self,
        device: &dyn Device,
        path: &[KernelId],
        x: &Activations,
        logical: &QuantizedLayer,
        resident: &ResidentLayer,
        seed: u64,
    ) -> Option<Vec<u16>> {
        let check = path_check(path);
        let y = self.y_spec(x.m, self.case.y_layout);
        let last = set::decl(*path.last().expect("non-empty path"));
        let output = if path == [KernelId::Dequant, KernelId::Dense] {
            self.run_dequant_dense(device, x, logical, resident, &y)
        } else {
            let decl = set::decl(path[0]);
            let entry = self.entry(decl, x);
            let xb = self.x_buffer(decl.id, x);
            let carrier = self.carrier.clone();
            let inputs = match decl.id {
                KernelId::FusedCarrier => {
                    DeviceInputs::gemm_carrier_strided(decl, resident, carrier.as_ref(), &xb, y)
                }
                _ => DeviceInputs::gemm_strided(decl, resident, &xb, y),
            };
            let inputs = match inputs {
                Ok(i) => i,
                Err(e) => {
                    self.push_contract(check, Outcome::Fail, (decl.id, e), |c| {
                        format!("refused at launch: {c}")
                    });
                    return None;
                }
            };
            let first = self
                .times
                .time(Phase::Device, || device.run_gemm(decl, &entry, &inputs));
            if let (Ok(a), Mode::Differential) = (&first, self.mode) {
                // Determinism: a second launch must match bit for bit.
                let second = self
                    .times
                    .time(Phase::Device, || device.run_gemm(decl, &entry, &inputs));
                let det = Check::Determinism(decl.id);
                match second {
                    Ok(b) if b.y_bits == a.y_bits => self.push(det, Outcome::Pass, ""),
                    Ok(b) => {
                        let elements = differing(&a.y_bits, &b.y_bits);
                        self.push_cause(
                            det,
                            Outcome::Fail,
                            Cause::Mismatch(Mismatch::Nondeterministic { elements }),
                        );
                    }
                    Err(e) => self.push_device(det, e),
                }
                let views = (inputs.launch().x.clone(), y);
                self.padding_identity(device, decl, &entry, x, logical, resident, views, &a.y_bits);
            }
            first.map_err(Cause::Device)
        };
        let out = match output {
            Ok(o) => o,
            Err(Cause::Device(e)) => {
                self.push_device(check, e);
                return None;
            }
            Err(cause) => {
                self.push_cause(check, Outcome::Fail, cause);
                return None;
            }
        };
        let recipe = (last.recipe)(self.case.dtype);
        let start = Instant::now();
        let v = self.judge(check, &recipe, x, logical, &out, seed);
        self.times.add(Phase::Verify, start.elapsed());
        self.verdicts.push(v);
        Some(out.y_bits)
    }

    /// The dequant kernel (its own bit-exact `dequant` check), then the vendor BLAS on its copy.
    /// A refusal or a device error of either stage is the path's cause.
    fn run_dequant_dense(
        &mut self,
        device: &dyn Device,
        x: &Activations,
        logical: &QuantizedLayer,
        resident: &ResidentLayer,
        y: &YSpec,
    ) -> Result<GemmOutput, Cause> {
        let dq = set::decl(KernelId::Dequant);
        let dense = self.dense_spec(resident);
        let contract = |kernel: KernelId| move |error| Cause::Contract { kernel, error };
        let inputs =
            DeviceInputs::dequant(dq, resident, dense).map_err(contract(KernelId::Dequant))?;
        let entry = (dq.entry_point)(self.case.dtype).to_string();
        let d = self
            .times
            .time(Phase::Device, || device.dequant(dq, &entry, &inputs))
            .map_err(Cause::Device)?;
        // The dequantized copy is bit-exact: (q − z)·s in fp32, rounded once.
        let (n, k) = (logical.shape.n, logical.shape.k);
        let mismatches = self.times.time(Phase::Verify, || {
            (0..n)
                .flat_map(|r| (0..k).map(move |c| (r, c)))
                .filter(|&(r, c)| {
                    d.dense_bits[r * k + c] != logical.dtype.from_f64(logical.weight(r, c))
                })
                .count()
        });
        let guards = d.guard_violations.len();
        let dq_check = Check::kernel(KernelId::Dequant);
        if mismatches == 0 && guards == 0 {
            self.push(dq_check, Outcome::Pass, "bit-exact");
        } else {
            let cause = Cause::Mismatch(Mismatch::Dequant {
                elements: mismatches,
                guard_violations: guards,
            });
            self.push_cause(dq_check, Outcome::Fail, cause);
        }
        let dn = set::decl(KernelId::Dense);
        let xb = self.x_buffer(KernelId::Dense, x);
        let bias = resident.bias.as_deref();
        let inputs = DeviceInputs::dense_strided(dn, &xb, dense, &d.strided_bits, bias, *y)
            .map_err(contract(KernelId::Dense))?;
        self.times
            .time(Phase::Device, || device.dense_gemm(dn, &inputs))
            .map_err(Cause::Device)
    }

    /// Padded and unpadded layouts must give bit-identical results (SPEC §5), and so must
    /// strided and offset views of X and Y against contiguous ones: `views` are the X view and
    /// Y the padded run had.
    #[allow(clippy::too_many_arguments)]
    fn padding_identity(
        &mut self,
        device: &dyn Device,
        decl: &KernelDecl,
        entry: &str,
        x: &Activations,
        logical: &QuantizedLayer,
        resident: &ResidentLayer,
        views: (Option<TensorView>, YSpec),
        padded_bits: &[u16],
    ) {
        let unpadded_stride = resident.shape.k / 2;
        let (xv, yv) = views;
        let x_contiguous = xv.is_none_or(|v| v.strides[0] == x.k && v.byte_offset == 0);
        let y_plain = yv.row_stride == yv.n && yv.offset == 0;
        if resident.weights.row_stride_bytes == unpadded_stride
            && resident.scales.row_stride == resident.scales.groups
            && x_contiguous
            && y_plain
        {
            return;
        }
        let Ok(plain) = ResidentLayer::from_logical(logical, RowPadding::NONE) else {
            return;
        };
        let x_plain = x.with_row_stride(x.k);
        let y = YSpec::dense(x.m, self.case.shape.n, self.case.dtype);
        let check = Check::Padding(decl.id);
        // The carrier of the unpadded layer (the same words: the carrier is never padded).
        let plain_carrier = match decl.id {
            KernelId::FusedCarrier => Carrier::from_resident(&plain).ok(),
            _ => None,
        };
        let xb_plain = XBuffer::as_laid_out(&x_plain);
        let inputs = match decl.id {
            KernelId::FusedCarrier => DeviceInputs::gemm_carrier_strided(
                decl,
                &plain,
                plain_carrier.as_ref(),
                &xb_plain,
                y,
            ),
            _ => DeviceInputs::gemm(decl, &plain, &x_plain, y),
        };
        let inputs = match inputs {
            Ok(i) => i,
            Err(e) => {
                self.push_contract(check, Outcome::Fail, (decl.id, e), |c| {
                    format!("the unpadded contiguous layout was refused: {c}")
                });
                return;
            }
        };
        let unpadded = self
            .times
            .time(Phase::Device, || device.run_gemm(decl, entry, &inputs));
        match unpadded {
            Ok(o) if o.y_bits == padded_bits => self.push(
                check,
                Outcome::Pass,
                "padded/strided/offset == unpadded contiguous",
            ),
            Ok(o) => {
                let elements = differing(&o.y_bits, padded_bits);
                self.push_cause(
                    check,
                    Outcome::Fail,
                    Cause::Mismatch(Mismatch::LayoutDependent { elements }),
                );
            }
            Err(e) => self.push_device(check, e),
        }
    }

    fn reference(
        &mut self,
        x: &Activations,
        logical: &QuantizedLayer,
        recipe: &NumericRecipe,
    ) -> Option<&Reference> {
        let key = (
            recipe.magnitude_offset().map(f64::to_bits),
            recipe.offset_accumulation.is_some(),
        );
        if let Some(i) = self.references.iter().position(|(k, _)| *k == key) {
            return Some(&self.references[i].1);
        }
        match gemm::reference_with(x, logical, recipe, self.case.class.non_finite_x()) {
            Ok(r) => {
                self.references.push((key, r));
                self.references.last().map(|(_, r)| r)
            }
            Err(e) => {
                self.push(Check::Reference, Outcome::Fail, e.to_string());
                None
            }
        }
    }

    fn judge(
        &mut self,
        check: Check,
        recipe: &NumericRecipe,
        x: &Activations,
        logical: &QuantizedLayer,
        out: &GemmOutput,
        seed: u64,
    ) -> Verdict {
        let id = self.case.id.clone();
        let mut problems = OutputProblems {
            guard_bytes: out.guard_violations.len(),
            stray_writes: out.stray_writes,
            ..OutputProblems::default()
        };
        let outside_clean = problems.guard_bytes == 0 && problems.stray_writes == 0;
        let model = match BoundModel::new(recipe, logical.shape.k, self.ctx.c_target) {
            Ok(m) => m,
            Err(e) => return Verdict::new(id, check, Outcome::Fail).detail(format!("bound: {e}")),
        };
        let macs = (x.m * logical.shape.n * logical.shape.k) as f64;
        let bits = OutputBits::new(&out.y_bits, logical.shape.n);
        let exact = self.case.class == w4a16_reference::data::DataClass::Exact;
        if macs > self.ctx.full_reference_macs {
            let budget = VerifyBudget {
                sample_flops: self.ctx.sample_flops,
                seed,
            };
            let policy = self.case.class.non_finite_x();
            return match verify::verify_large_with(
                x,
                logical,
                recipe,
                bits,
                self.ctx.c_target,
                &budget,
                policy,
            ) {
                Ok(r) if r.passed() && outside_clean => Verdict::new(id, check, Outcome::Pass)
                    .bucket(format!(
                        "sampled {}",
                        compare::bucket(r.sampled.report.worst_ratio)
                    ))
                    .detail(format!(
                        "Freivalds + {} sampled lines",
                        r.sampled.rows.len() + r.sampled.cols.len()
                    )),
                Ok(r) => {
                    problems.sampled = Some((r.freivalds.passed(), format!("{:?}", r.sampled)));
                    self.fail(check, problems, x, logical, out, None)
                }
                Err(e) => Verdict::new(id, check, Outcome::Fail)
                    .detail(format!("verification input: {e}")),
            };
        }
        let Some(reference) = self.reference(x, logical, recipe).cloned() else {
            return Verdict::new(id, check, Outcome::Fail).detail("no reference");
        };
        // Exact-class data: every fp32 partial sum is exact, so only the recipe's cast(s) round;
        // the bit-exact comparison expects exactly those (bias after the cast rounds twice).
        let report = if exact {
            compare::compare_bit_exact(&reference, &model, bits)
        } else {
            compare::compare(&reference, &model, bits)
        };
        let report = match report {
            Ok(r) => r,
            Err(e) => {
                return Verdict::new(id, check, Outcome::Fail).detail(format!("compare: {e}"));
            }
        };
        let bucket = if exact {
            "bit-exact".to_string()
        } else {
            report.worst_bucket().to_string()
        };
        if report.passed() && outside_clean && out.unwritten == 0 {
            let mut v = Verdict::new(id, check, Outcome::Pass)
                .bucket(bucket)
                .detail(format!(
                    "worst ratio {:.3e} at {:?}",
                    report.worst_ratio, report.worst_at
                ));
            v.worst_ratio = Some(report.worst_ratio);
            v
        } else {
            problems = OutputProblems {
                unwritten: out.unwritten,
                over_bound: report.over_bound,
                nonfinite: report.nonfinite,
                poison_left: report.poison_left,
                bit_mismatches: report.exact_mismatches,
                worst_ratio: report.worst_ratio,
                worst_at: report.worst_at,
                ..problems
            };
            self.fail(check, problems, x, logical, out, Some(&reference))
        }
    }

    /// The fallback as a second opinion: both outputs within their bounds of each other.
    fn second_opinion(
        &mut self,
        k: KernelId,
        fast: &[u16],
        fb: &[u16],
        x: &Activations,
        logical: &QuantizedLayer,
    ) {
        let check = Check::SecondOpinion(k);
        let macs = (x.m * logical.shape.n * logical.shape.k) as f64;
        if macs > self.ctx.full_reference_macs {
            return;
        }
        let rf = (set::decl(k).recipe)(self.case.dtype);
        let rb = (set::decl(KernelId::Fallback).recipe)(self.case.dtype);
        let (Ok(mf), Ok(mb)) = (
            BoundModel::new(&rf, logical.shape.k, self.ctx.c_target),
            BoundModel::new(&rb, logical.shape.k, self.ctx.c_target),
        ) else {
            return;
        };
        let Some(r) = self.reference(x, logical, &rf).cloned() else {
            return;
        };
        let dtype = self.case.dtype;
        let mut over = 0usize;
        for i in 0..fast.len() {
            let (m, n) = (i / r.n, i % r.n);
            let (y, a, b) = (r.y_at(m, n), r.a_at(m, n), r.bias[n]);
            let acc = r.a_offset.as_ref().map_or(a, |o| o[i]);
            let tol = mf.element(y, a, acc, b) + mb.element(y, a, a, b);
            // The range edge (SPEC §6): both at the same Inf, or one at Inf and the other within
            // `tol` of its overflow threshold, agree.
            if !compare::agree_within(dtype, fast[i], fb[i], tol) {
                over += 1;
            }
        }
        if over == 0 {
            self.push(
                check,
                Outcome::Pass,
                "agrees with fallback within both bounds",
            );
        } else {
            self.push_cause(
                check,
                Outcome::Fail,
                Cause::Mismatch(Mismatch::DisagreesWithFallback { elements: over }),
            );
        }
    }

    /// A wrong output: its problems are the cause; the detail adds the repro command and the
    /// artifact written for it.
    fn fail(
        &self,
        check: Check,
        problems: OutputProblems,
        x: &Activations,
        logical: &QuantizedLayer,
        out: &GemmOutput,
        reference: Option<&Reference>,
    ) -> Verdict {
        let repro = repro_command(&self.case.id, self.ctx.run_target());
        let mut v = Verdict::new(&self.case.id, check, Outcome::Fail)
            .because(Cause::Mismatch(Mismatch::Output(problems)));
        v.detail = format!("{}; repro: {repro}", v.detail);
        if let Some(dir) = &self.ctx.artifacts {
            match super::artifact::write(
                dir,
                &self.case.id,
                &v.check.to_string(),
                &v.detail,
                x,
                logical,
                &out.y_bits,
                reference,
            ) {
                Ok(p) => v.detail.push_str(&format!("; artifact: {}", p.display())),
                Err(e) => v.detail.push_str(&format!("; artifact not written: {e}")),
            }
        }
        v
    }
}

/// How many elements of two outputs of one shape differ.
fn differing(a: &[u16], b: &[u16]) -> usize {
    a.iter().zip(b).filter(|(p, q)| p != q).count()
}

/// The check of a launched path's output.
fn path_check(path: &[KernelId]) -> Check {
    Check::Path(KernelPath::new(path.to_vec()).expect("a launched path has a kernel"))
}

#[cfg(test)]
mod tests {
    //! Typed outcomes end to end on the simulated device: what the device lacks is a SKIP with
    //! its reason, what it does wrong is a FAULT, and a contract refusal keeps its typed error.

    use super::*;
    use crate::device::{Capability, simulated};
    use crate::require::Requirement;
    use crate::runner::session::{Backend, SessionOptions, run_in_process};
    use crate::runner::verdict::{Summary, apply_required};
    use std::path::Path;

    /// A small differential case whose dense path runs (the smoke suite's `dequant+dense`).
    const DENSE_CASE: &str = "smoke/op.k1024-n128/M=1/f16/asym/g128/exact/bias";
    /// A legacy checkpoint: every packed-zero-point kernel refuses its zero points.
    const LEGACY_CASE: &str =
        "checkpoints/ckpt.k256-n128/M=1/bf16/asym/g128/exact/legacy-unpacked-zp";

    fn run_on(case_id: &str, backend: Backend) -> Vec<Verdict> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cases");
        let set = cases::load_all(&dir).expect("the committed cases load");
        let case = set.case(case_id).expect("the case exists");
        let opts = SessionOptions::new(dir.clone(), Target::Sm90);
        run_in_process(&set, &[case], &backend, &opts, &|_| {})
            .expect("the session runs")
            .verdicts
    }

    fn find<'v>(verdicts: &'v [Verdict], check: &str) -> &'v Verdict {
        verdicts
            .iter()
            .find(|v| v.check == check)
            .unwrap_or_else(|| panic!("no {check} verdict in {verdicts:#?}"))
    }

    #[test]
    fn a_device_without_the_vendor_blas_skips_the_dense_path_with_the_reason() {
        let mut vs = run_on(DENSE_CASE, Backend::Device(simulated::device(false, false)));
        // The dequant kernel ran (its own check has a verdict); the BLAS stage could not.
        assert_ne!(find(&vs, "dequant").outcome, Outcome::Skip);
        let dense = find(&vs, "dequant+dense");
        assert_eq!(dense.outcome, Outcome::Skip, "{dense:#?}");
        let fault = dense.cause.as_ref().and_then(Cause::device_fault);
        assert!(
            matches!(
                fault,
                Some(DeviceFault::MissingCapability {
                    capability: Capability::VendorBlas,
                    ..
                })
            ),
            "{dense:#?}"
        );
        assert!(
            dense
                .detail
                .contains("the vendor BLAS is not available on simulated"),
            "{}",
            dense.detail
        );
        assert_eq!(dense.skip_requirement(), Some(Requirement::Gpu));
        assert!(
            vs.iter().all(|v| v.outcome != Outcome::Fault),
            "a missing library is no device fault: {vs:#?}"
        );

        // Counted and shown with its reason.
        let s = Summary::of(&vs);
        assert_eq!(s.faults, 0);
        assert_eq!(s.skip_reasons.get(&dense.detail), Some(&1));
        assert_eq!(s.skips_needing.get(&Requirement::Gpu), Some(&1));
        assert!(s.to_string().contains(&dense.detail), "{s}");

        // Not demanded: the skip stands. `W4A16_REQUIRE=gpu`: it fails the run.
        let before = s.failures();
        assert_eq!(apply_required(&mut vs, &[Requirement::Nvrtc]), 0);
        assert_eq!(Summary::of(&vs).failures(), before);
        assert_eq!(apply_required(&mut vs, &[Requirement::Gpu]), 1);
        let dense = find(&vs, "dequant+dense");
        assert_eq!(dense.outcome, Outcome::Fail);
        assert!(
            dense
                .detail
                .starts_with("W4A16_REQUIRE=gpu but the check was skipped: the vendor BLAS"),
            "{}",
            dense.detail
        );
        assert!(dense.cause.as_ref().and_then(Cause::device_fault).is_some());
        let s = Summary::of(&vs);
        assert_eq!((s.failures(), s.skipped), (before + 1, 0));
    }

    #[test]
    fn with_the_vendor_blas_the_dense_path_runs_and_is_judged() {
        let vs = run_on(DENSE_CASE, Backend::Device(simulated::device(false, true)));
        let dense = find(&vs, "dequant+dense");
        assert_ne!(dense.outcome, Outcome::Skip, "{dense:#?}");
        assert!(vs.iter().all(|v| v.outcome != Outcome::Skip), "{vs:#?}");
    }

    #[test]
    fn a_sticky_device_fault_stays_a_fault() {
        let vs = run_on(DENSE_CASE, Backend::Device(simulated::device(true, true)));
        let faults: Vec<&DeviceFault> = vs
            .iter()
            .filter_map(|v| v.cause.as_ref().and_then(Cause::device_fault))
            .collect();
        assert!(
            faults
                .iter()
                .any(|f| matches!(f, DeviceFault::Sticky { .. })),
            "{vs:#?}"
        );
        for v in vs
            .iter()
            .filter(|v| v.cause.as_ref().and_then(Cause::device_fault).is_some())
        {
            assert_eq!(v.outcome, Outcome::Fault, "{v:#?}");
            assert_eq!(v.skip_requirement(), None);
        }
        assert!(Summary::of(&vs).faults > 0);
    }

    #[test]
    fn a_contract_refusal_is_typed_into_the_verdict_naming_the_tensor() {
        let none = Skip {
            requirement: Requirement::Gpu,
            reason: "no GPU in this test".into(),
        };
        let vs = run_on(LEGACY_CASE, Backend::None(none));
        let sel = vs
            .iter()
            .find(|v| matches!(v.check, Check::Selection(Some(_))))
            .expect("a selection verdict");
        assert_eq!(sel.outcome, Outcome::Refused, "{sel:#?}");
        let (kernel, error) = sel
            .cause
            .as_ref()
            .and_then(Cause::contract)
            .unwrap_or_else(|| panic!("no contract cause: {sel:#?}"));
        let Check::Selection(Some(path)) = &sel.check else {
            unreachable!()
        };
        assert_eq!(kernel, path.kernels()[0], "the selected kernel refused");
        assert!(
            matches!(error, ContractError::ZeroPointLayout { .. }),
            "{error:?}"
        );
        assert_eq!(error.tensor(), Some("zero points"));
        assert!(sel.detail.contains(&error.to_string()), "{}", sel.detail);

        // Through the worker pipe (JSON) the cause comes back equal, still typed.
        let json = serde_json::to_string(sel).unwrap();
        let back: Verdict = serde_json::from_str(&json).unwrap();
        assert_eq!(&back, sel);
    }

    /// A carrier case with padded scale rows (asymmetric) and a symmetric one.
    const CARRIER_CASE: &str =
        "carrier/kern.k128-n72/M=5/f16/asym/g32/realistic/carrier-padded-scales";
    const CARRIER_SYM_CASE: &str = "carrier/kern.k384-n200/M=1/bf16/sym/g64/realistic/carrier";

    /// Without a device: the carrier is built and reads back (`carrier`), the carrier handed
    /// over with the scales' padded stride is refused, typed (`carrier-stride-trap`), and the
    /// fused_carrier launch itself is a loud skip.
    #[test]
    fn a_carrier_case_checks_its_carrier_and_the_stride_trap_without_a_device() {
        let none = Skip {
            requirement: Requirement::Gpu,
            reason: "no GPU in this test".into(),
        };
        let vs = run_on(CARRIER_CASE, Backend::None(none));
        let built = find(&vs, "carrier");
        assert_eq!(built.outcome, Outcome::Pass, "{built:#?}");
        assert!(
            built
                .detail
                .contains("u32 [72, 4], row stride K/G = 4 (scales row stride 12)"),
            "{}",
            built.detail
        );
        let trap = find(&vs, "carrier-stride-trap");
        assert_eq!(trap.outcome, Outcome::Refused, "{trap:#?}");
        let (kernel, error) = trap.cause.as_ref().and_then(Cause::contract).unwrap();
        assert_eq!(kernel, KernelId::FusedCarrier);
        assert_eq!(
            *error,
            ContractError::CarrierRowStride {
                expected: 4,
                got: 12
            }
        );
        assert_eq!(error.tensor(), Some("carrier"));
        let run = find(&vs, "fused_carrier");
        assert_eq!(run.outcome, Outcome::Skip, "{run:#?}");
        // The other kernels of the differential matrix still run beside it.
        for k in ["skinny", "fused", "fallback"] {
            assert_eq!(find(&vs, k).outcome, Outcome::Skip);
        }
    }

    /// A symmetric layer has no carrier: its fused_carrier launch ends as the typed refusal,
    /// before any device work, on a device too.
    #[test]
    fn a_symmetric_carrier_case_ends_as_the_typed_refusal() {
        let backends = [
            Backend::None(Skip {
                requirement: Requirement::Gpu,
                reason: "no GPU in this test".into(),
            }),
            Backend::Device(simulated::device(false, true)),
        ];
        for backend in backends {
            let vs = run_on(CARRIER_SYM_CASE, backend);
            let run = find(&vs, "fused_carrier");
            assert_eq!(run.outcome, Outcome::Refused, "{run:#?}");
            let (kernel, error) = run.cause.as_ref().and_then(Cause::contract).unwrap();
            assert_eq!(kernel, KernelId::FusedCarrier);
            assert!(
                matches!(
                    error,
                    ContractError::CarrierForSymmetricLayer {
                        layer: Some(w4a16_reference::layer::Symmetry::Sym),
                        ..
                    }
                ),
                "{error:?}"
            );
            assert!(
                run.detail
                    .contains("symmetric layers read their scales directly")
            );
            assert!(
                vs.iter()
                    .all(|v| v.check != "carrier" && v.check != "carrier-stride-trap"),
                "{vs:#?}"
            );
            assert!(
                vs.iter().all(|v| v.check != "determinism:fused_carrier"),
                "a refused launch was launched: {vs:#?}"
            );
        }
    }

    /// On a device, fused_carrier is launched on the carrier (the simulated device computes no
    /// GEMM, so only the launch flow is checked: determinism, the padded-scales identity, a
    /// judged path verdict and the second opinion).
    #[test]
    fn a_carrier_case_launches_fused_carrier_on_a_device() {
        let vs = run_on(
            CARRIER_CASE,
            Backend::Device(simulated::device(false, true)),
        );
        assert_eq!(find(&vs, "carrier").outcome, Outcome::Pass);
        assert_eq!(find(&vs, "carrier-stride-trap").outcome, Outcome::Refused);
        assert_eq!(
            find(&vs, "determinism:fused_carrier").outcome,
            Outcome::Pass
        );
        assert_eq!(find(&vs, "padding:fused_carrier").outcome, Outcome::Pass);
        let run = find(&vs, "fused_carrier");
        assert!(
            !matches!(
                run.outcome,
                Outcome::Skip | Outcome::Refused | Outcome::Fault
            ),
            "{run:#?}"
        );
        find(&vs, "second-opinion:fused_carrier");
    }

    #[test]
    fn without_a_device_gpu_checks_skip_with_the_reason_and_need_the_gpu() {
        let none = Skip {
            requirement: Requirement::Gpu,
            reason: "no GPU in this test".into(),
        };
        let vs = run_on(DENSE_CASE, Backend::None(none.clone()));
        let skips: Vec<&Verdict> = vs.iter().filter(|v| v.outcome == Outcome::Skip).collect();
        assert!(!skips.is_empty(), "{vs:#?}");
        for v in skips {
            assert_eq!(v.cause, Some(Cause::NotHere(none.clone())), "{v:#?}");
            assert_eq!(v.detail, "needs a GPU: no GPU in this test");
            assert_eq!(v.skip_requirement(), Some(Requirement::Gpu));
        }
    }

    /// The runner applies the shared strict-xfail rule: a failure is caught (the pass beside it
    /// stays a pass), nothing failing is XPASS, and past the date every verdict is EXPIRED.
    #[test]
    fn known_bad_entries_apply_the_shared_strict_xfail_rule() {
        use crate::cases::glob::Glob;
        use crate::cases::known_bad::CaseIds;
        use crate::cases::suppress::{Mode, Shared};
        let kb = KnownBad {
            scope: CaseIds {
                id: Glob::new("**"),
            },
            shared: Shared {
                target: Glob::new("*"),
                reason: "bf16 tail".into(),
                tracking: "issue #0".into(),
                expires: cases::Date::new(2026, 6, 30).unwrap(),
                mode: Mode::XfailStrict,
                file: "known_bad.toml".into(),
                key: "known_bad[0]".into(),
            },
        };
        let v = |o| Verdict::new("c", "skinny".parse().unwrap(), o);
        let (on, after) = (
            cases::Date::new(2026, 6, 30).unwrap(),
            cases::Date::new(2026, 7, 1).unwrap(),
        );
        let outcomes = |mut vs: Vec<Verdict>, today| {
            apply_known_bad(&mut vs, &kb, today);
            vs.into_iter().map(|v| v.outcome).collect::<Vec<_>>()
        };
        assert_eq!(
            outcomes(
                vec![v(Outcome::Fail), v(Outcome::Pass), v(Outcome::Fault)],
                on
            ),
            [Outcome::ExpectedFail, Outcome::Pass, Outcome::ExpectedFail]
        );
        assert_eq!(
            outcomes(vec![v(Outcome::Pass), v(Outcome::Skip)], on),
            [Outcome::UnexpectedPass, Outcome::Skip]
        );
        assert_eq!(
            outcomes(vec![v(Outcome::Fail), v(Outcome::Pass)], after),
            [Outcome::Expired, Outcome::Expired]
        );
    }
}
