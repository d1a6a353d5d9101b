//! One MoE case end to end: seeded routing and experts → the MoE selection (tile, `block_m`) →
//! `moe_align` on the device, checked exactly against the ordering contract → `moe` on the
//! device's own alignment against the grouped f64 reference and its bound (zero rows for experts
//! mapped away, every slot's row written, nothing outside C) → the whole pipeline again, bit for
//! bit (determinism).

use std::sync::Arc;
use std::time::Instant;

use super::execute::reference_failure;
use super::execute::{Prepared, RunContext, forget_prepared_layer, keep_prepared, reuse_prepared};
use super::timing::{Phase, PhaseTimes};
use super::verdict::{
    Cause, Check, KernelPath, Mismatch, Outcome, OutputProblems, ReferenceStage, Verdict,
};
use crate::require::{Requirement, Skip};
use w4a16_cases::{Case, MoeRouting};
use w4a16_device::moe::RowPlacement;
use w4a16_device::tensor::XBuffer;
use w4a16_device::validate::ContractError;
use w4a16_device::{Device, DeviceFault, MoeLaunch, MoeOutput};
use w4a16_kernels::{KernelId, set};
use w4a16_reference::bound::BoundModel;
use w4a16_reference::compare::{self, CompareMode};
use w4a16_reference::data::{self, DataClass};
use w4a16_reference::formats::RowPadding;
use w4a16_reference::layer::Activations;
use w4a16_reference::moe::{
    ExpertMap, GroupedReport, MoeLayer, MoeSpec, Routing, StackedExperts, check_align,
    check_align_tails, compare_grouped_mode, grouped_reference_with, route,
};
use w4a16_select::moe::{MoeChoice, MoeRequest, MoeSelection, select_moe};

/// The checks a MoE case makes on the device, in order.
fn device_checks() -> [Check; 3] {
    [
        Check::kernel(KernelId::MoeAlign),
        Check::Path(moe_path()),
        Check::Determinism(KernelId::Moe),
    ]
}

/// `moe_align+moe`: the path C goes through.
fn moe_path() -> KernelPath {
    KernelPath::new(vec![KernelId::MoeAlign, KernelId::Moe]).expect("two kernels")
}

/// The experts of a case, keyed by everything they depend on (not T, the routing or the routed
/// weight), kept as the thread's prepared layer ([`Prepared::Experts`]) so that the cases of
/// one MoE layer (`Case::layer_key`, which the runner keeps together) make them once.
pub(crate) struct PreparedExperts {
    /// What seeds the experts ([`experts_seed_key`]).
    key: String,
    layer: MoeLayer,
    stacked: StackedExperts,
}

/// The key whose seed draws a case's experts: fixed, since the committed verdict snapshots hold
/// the data it draws. It names what the experts depend on: suite, shape, dtype, symmetry, group,
/// class, the local experts and the resolved row padding.
fn experts_seed_key(case: &Case, local_experts: usize, padding: RowPadding) -> String {
    format!(
        "{}/{}/{}/{}/g{}/{}/e{}/{:?}",
        case.suite,
        case.shape_name,
        case.dtype.name(),
        case.symmetry.name(),
        case.shape.group,
        case.class.name(),
        local_experts,
        padding
    )
}

/// A MoE case's seeded data: the expert map, the routing and X, and the experts' spec.
struct MoeData {
    map: ExpertMap,
    routing: Routing,
    x: Activations,
    spec: MoeSpec,
}

struct MoeRun<'c, 'a> {
    case: &'c Case,
    routing: MoeRouting,
    ctx: &'c RunContext<'a>,
    verdicts: Vec<Verdict>,
    times: PhaseTimes,
    /// The experts when they come from a checkpoint (`w4a16 check-model`), not from seeds.
    given: Option<&'c MoeLayer>,
}

/// Runs one MoE case (`case.moe` is `routing`).
pub(crate) fn run_moe_case(
    case: &Case,
    routing: MoeRouting,
    ctx: &RunContext<'_>,
    given: Option<&MoeLayer>,
) -> (Vec<Verdict>, PhaseTimes) {
    let mut run = MoeRun {
        case,
        routing,
        ctx,
        verdicts: Vec::new(),
        times: PhaseTimes::default(),
        given,
    };
    run.run();
    (run.verdicts, run.times)
}

impl<'a> MoeRun<'_, 'a> {
    fn verdict(&mut self, check: Check, outcome: Outcome, detail: impl Into<String>) {
        self.verdicts
            .push(Verdict::new(&self.case.id, check, outcome).detail(detail));
    }

    /// The case's data could not be built at `stage`: a `data` failure, its error typed; `None`
    /// for the step that needed the data.
    fn data_failure<T>(
        &mut self,
        stage: ReferenceStage,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> Option<T> {
        let v = reference_failure(&self.case.id, Check::Data, stage, error);
        self.verdicts.push(v);
        None
    }

    /// A device fault: a SKIP where a capability is missing, else a FAULT.
    fn push_device(&mut self, check: Check, fault: DeviceFault) {
        let (outcome, cause) = Cause::of_device(fault);
        self.verdicts
            .push(Verdict::new(&self.case.id, check, outcome).because(cause));
    }

    /// A contract refusal of a valid layer: a failure of the declarations (every MoE case is a
    /// layer the set takes), on every device check. The pipeline is validated as one launch
    /// pair, named by its GEMM.
    fn push_refused(&mut self, error: ContractError) {
        for check in device_checks() {
            let cause = Cause::Contract {
                kernel: KernelId::Moe,
                error: error.clone(),
            };
            self.verdicts
                .push(Verdict::new(&self.case.id, check, Outcome::Fail).because(cause));
        }
    }

    fn run(&mut self) {
        let Some(sel) = self.select() else {
            return;
        };
        let Some(device) = self.device_or_skip() else {
            return;
        };
        let Some(data) = self.data() else {
            return;
        };
        let Some(experts) = self.prepared(&data.spec) else {
            return;
        };
        self.launch_and_check(device, &sel, &data, &experts);
    }

    /// The MoE selection, its verdict pushed; `None` when no kernel takes the layer.
    fn select(&mut self) -> Option<MoeChoice> {
        let request = MoeRequest::from_case(self.case, self.routing);
        match select_moe(self.ctx.target, &request) {
            MoeSelection::Chosen(sel) => {
                let detail = sel.describe();
                self.verdict(Check::Selection(Some(moe_path())), Outcome::Pass, detail);
                Some(sel)
            }
            MoeSelection::Refused { reasons } => {
                // Every case of a MoE sweep is a layer the set takes: a refusal is a failure.
                let detail = format!("no kernel takes this MoE layer: {reasons}");
                self.verdict(Check::Selection(None), Outcome::Fail, detail);
                None
            }
        }
    }

    /// The device the case runs on; without one, every device check is a loud skip.
    fn device_or_skip(&mut self) -> Option<&'a dyn Device> {
        if let Some(device) = self.ctx.device {
            return Some(device);
        }
        let skip = self.ctx.no_device.clone().unwrap_or_else(|| Skip {
            requirement: Requirement::Gpu,
            reason: "no GPU".into(),
        });
        for check in device_checks() {
            let mut v = Verdict::skipped(&self.case.id, check, skip.clone());
            v.detail = format!("needs a GPU: {}", v.detail);
            self.verdicts.push(v);
        }
        None
    }

    /// The case's seeded data: routing and X from the case id (the experts come from the layer
    /// key, [`Self::prepared`]); `None` after a `data` failure.
    fn data(&mut self) -> Option<MoeData> {
        let seed = data::case_seed(&self.case.id);
        let map = match ExpertMap::new(self.routing.map, self.routing.experts) {
            Ok(m) => m,
            Err(e) => return self.data_failure(ReferenceStage::ExpertMap, e),
        };
        let start = Instant::now();
        let routing = route(
            self.routing.routing,
            seed ^ ROUTING_SEED_SALT,
            self.case.m,
            self.routing.experts,
            self.routing.top_k,
        );
        let routing = match routing {
            Ok(r) => r,
            Err(e) => return self.data_failure(ReferenceStage::Routing, e),
        };
        let spec = self.spec(map.local_experts());
        let x = match data::generate_activations(seed, &spec.data_spec(self.case.m)) {
            Ok(x) => x,
            Err(e) => return self.data_failure(ReferenceStage::Activations, e),
        };
        self.times.add(Phase::Data, start.elapsed());
        Some(MoeData {
            map,
            routing,
            x,
            spec,
        })
    }

    /// Validates and launches the pipeline twice, then judges the alignment, C and determinism.
    fn launch_and_check(
        &mut self,
        device: &dyn Device,
        sel: &MoeChoice,
        data: &MoeData,
        experts: &PreparedExperts,
    ) {
        let uses_map = self.routing.map != w4a16_reference::moe::MapKind::All;
        let map_ref = uses_map.then_some(&data.map);
        let st = &experts.stacked;
        let (xl, yl) = (self.case.x_layout, self.case.y_layout);
        let x = XBuffer::new(&data.x, xl.row_stride(data.x.k), xl.offset());
        let launch = MoeLaunch {
            // Every layout's stride is at least K, so this never falls back.
            x: x.unwrap_or_else(|| XBuffer::as_laid_out(&data.x)),
            weights: &st.weights,
            scales: &st.scales,
            zeros: st.zeros.as_deref(),
            w_row_stride_bytes: st.w_row_stride_bytes,
            scale_row_stride: st.scale_row_stride,
            topk_ids: &data.routing.ids,
            topk_weights: self
                .routing
                .routed_weight
                .then_some(&data.routing.weights[..]),
            expert_map: map_ref.map(|m| &m.local_of[..]),
            tokens: self.case.m,
            top_k: self.routing.top_k,
            experts: self.routing.experts,
            experts_local: st.experts,
            n: st.shape.n,
            k: st.shape.k,
            group: st.shape.group,
            dtype: st.dtype,
            tile: sel.tile,
            c_placement: Some(RowPlacement {
                row_stride: yl.row_stride(st.shape.n),
                offset: yl.offset(),
            }),
        };
        let inputs = match launch.validate() {
            Ok(i) => i,
            Err(e) => return self.push_refused(e),
        };
        let [align_check, path_check, det_check] = device_checks();
        let start = Instant::now();
        let first = device.run_moe(&inputs);
        let second = first.as_ref().ok().map(|_| device.run_moe(&inputs));
        self.times.add(Phase::Device, start.elapsed());
        let first = match first {
            Ok(o) => o,
            Err(fault) => {
                for check in device_checks() {
                    self.push_device(check, fault.clone());
                }
                return;
            }
        };

        let start = Instant::now();
        self.check_alignment(align_check, sel, &data.routing, map_ref, &first);
        // C against the grouped reference.
        let v = self.judge(
            path_check,
            &data.x,
            &experts.layer,
            &data.routing,
            map_ref,
            &first,
        );
        self.verdicts.push(v);
        self.check_determinism(det_check, &first, second);
        self.times.add(Phase::Verify, start.elapsed());
    }

    /// The device's alignment, exactly against the ordering contract, and nothing written where
    /// the step must not write: the entries past the padded length and past the last block keep
    /// their poison, the guard bands around the three outputs theirs.
    fn check_alignment(
        &mut self,
        check: Check,
        sel: &MoeChoice,
        routing: &Routing,
        map: Option<&ExpertMap>,
        out: &MoeOutput,
    ) {
        let bm = sel.tile.bm as usize;
        let aligned = check_align(
            routing,
            bm,
            map,
            &out.sorted_token_ids,
            &out.expert_ids,
            out.num_tokens_post_padded,
        )
        .and_then(|()| {
            check_align_tails(
                &out.sorted_token_ids,
                &out.expert_ids,
                out.num_tokens_post_padded as usize,
                bm,
                out.align_poison.sorted_token_id,
                out.align_poison.expert_id,
            )
        });
        if let Some((role, g)) = out.align_guard_violations.first() {
            let detail = format!(
                "written outside the align outputs ({} guard bands): {}: {g}",
                out.align_guard_violations.len(),
                role.name()
            );
            let cause = Cause::Mismatch(Mismatch::Alignment { detail });
            let v = Verdict::new(&self.case.id, check, Outcome::Fail).because(cause);
            self.verdicts.push(v);
            return;
        }
        match aligned {
            Ok(()) => self.verdict(
                check,
                Outcome::Pass,
                format!(
                    "block_m {}: {} slots padded to {}",
                    sel.tile.bm,
                    routing.slots(),
                    out.num_tokens_post_padded
                ),
            ),
            Err(e) => {
                self.verdicts
                    .push(Verdict::new(&self.case.id, check, Outcome::Fail).because(
                        Cause::Mismatch(Mismatch::Alignment {
                            detail: e.to_string(),
                        }),
                    ))
            }
        }
    }

    /// The pipeline's second run gave the same bits as its first.
    fn check_determinism(
        &mut self,
        check: Check,
        first: &MoeOutput,
        second: Option<Result<MoeOutput, DeviceFault>>,
    ) {
        match second {
            Some(Ok(again)) => {
                let differ = differing(first, &again);
                if differ == 0 {
                    self.verdict(check, Outcome::Pass, "two runs, identical bits");
                } else {
                    self.verdicts
                        .push(Verdict::new(&self.case.id, check, Outcome::Fail).because(
                            Cause::Mismatch(Mismatch::Nondeterministic { elements: differ }),
                        ));
                }
            }
            Some(Err(fault)) => self.push_device(check, fault),
            None => {}
        }
    }

    fn spec(&self, local_experts: usize) -> MoeSpec {
        MoeSpec {
            class: self.case.class,
            shape: self.case.shape,
            dtype: self.case.dtype,
            symmetry: self.case.symmetry,
            experts: local_experts,
            // Each expert its own draw: a slot computed with another expert's weights fails.
            distinguishable: self.case.class != DataClass::Ones,
        }
    }

    /// The case's experts, generated and stacked, or reused from the thread's last case.
    fn prepared(&mut self, spec: &MoeSpec) -> Option<Arc<PreparedExperts>> {
        let case = self.case;
        let padding = RowPadding::from_rule(
            case.shape.k,
            w4a16_select::padding::padding_rule(self.ctx.target, case.padding),
        );
        let key = experts_seed_key(case, spec.experts, padding);
        let cached = reuse_prepared(|p| match p {
            Prepared::Experts(e) if e.key == key => Some(Arc::clone(e)),
            _ => None,
        });
        if cached.is_some() {
            return cached;
        }
        // Drop the previous layer before building the next: large layers are GB-sized.
        forget_prepared_layer();
        #[cfg(test)]
        tests::EXPERT_DRAWS.with(|n| n.set(n.get() + 1));
        let start = Instant::now();
        let built = match self.given {
            Some(layer) => layer.stack(padding).map(|stacked| (layer.clone(), stacked)),
            None => MoeLayer::generate(data::case_seed(&key), spec)
                .and_then(|layer| layer.stack(padding).map(|stacked| (layer, stacked))),
        };
        self.times.add(Phase::Data, start.elapsed());
        match built {
            Ok((layer, stacked)) => {
                let p = Arc::new(PreparedExperts {
                    key,
                    layer,
                    stacked,
                });
                keep_prepared(Prepared::Experts(Arc::clone(&p)));
                Some(p)
            }
            Err(e) => self.data_failure(ReferenceStage::Experts, e),
        }
    }

    /// C against the grouped reference: computed rows within bound (bit-exact for exact-class
    /// data), zero rows exactly zero, every element written, nothing written outside C.
    fn judge(
        &self,
        check: Check,
        x: &Activations,
        layer: &MoeLayer,
        routing: &Routing,
        map: Option<&ExpertMap>,
        out: &MoeOutput,
    ) -> Verdict {
        let id = &self.case.id;
        let recipe = (set::MOE.recipe)(self.case.dtype);
        let model = match BoundModel::new(&recipe, self.case.shape.k, self.ctx.c_target) {
            Ok(m) => m,
            Err(e) => return reference_failure(id, check, ReferenceStage::Bound, e),
        };
        let reference = grouped_reference_with(
            x,
            layer,
            routing,
            map,
            self.routing.routed_weight,
            &recipe,
            self.case.class.non_finite_x(),
        );
        let reference = match reference {
            Ok(r) => r,
            Err(e) => {
                let stage = ReferenceStage::Reference;
                return reference_failure(id, Check::Reference, stage, e);
            }
        };
        let exact = self.case.class == DataClass::Exact;
        let mode = if exact {
            CompareMode::BitExact
        } else {
            CompareMode::Bound
        };
        let c = &out.c;
        let report = match compare_grouped_mode(&reference, &model, &c.y_bits, c.n, mode) {
            Ok(r) => r,
            Err(e) => {
                return reference_failure(id, check, ReferenceStage::Compare, e);
            }
        };
        let outside_clean = c.guard_violations.is_empty() && c.stray_writes == 0;
        if report.passed() && outside_clean && c.unwritten == 0 {
            let bucket = if exact {
                "bit-exact".to_string()
            } else {
                compare::bucket(report.worst_ratio()).to_string()
            };
            let mut v = Verdict::new(id, check, Outcome::Pass)
                .bucket(bucket)
                .detail(format!(
                    "{} rows ({} zero), worst ratio {:.3e} at {:?}",
                    reference.slots,
                    report.zero_rows,
                    report.worst_ratio(),
                    report.report.worst_at
                ));
            v.worst_ratio = Some(report.worst_ratio());
            return v;
        }
        let problems = OutputProblems {
            guard_bytes: c.guard_violations.len(),
            stray_writes: c.stray_writes,
            unwritten: c.unwritten,
            over_bound: report.report.over_bound,
            nonfinite: report.report.nonfinite,
            poison_left: report.report.poison_left,
            bit_mismatches: report.report.exact_mismatches,
            worst_ratio: report.worst_ratio(),
            worst_at: report.report.worst_at,
            sampled: None,
        };
        let mut v = Verdict::new(id, check, Outcome::Fail)
            .because(Cause::Mismatch(Mismatch::Output(problems)));
        v.detail = format!("{}; {}", v.detail, failing_rows(&report));
        v.worst_ratio = Some(report.worst_ratio());
        v
    }
}

/// Salt between the seeds of X and of the routing (both from the case id).
const ROUTING_SEED_SALT: u64 = 0x6d6f_655f_726f_7574;

/// The failing rows of a report, with the wrong-expert diagnosis: what a kernel engineer reads
/// first.
fn failing_rows(report: &GroupedReport) -> String {
    let shown: Vec<String> = report
        .failures
        .iter()
        .take(4)
        .map(|f| {
            let mut s = format!(
                "slot {} (token {}, {:?}): {} over bound, {} non-zero, worst {:.3e} from n={}",
                f.slot, f.token, f.kind, f.over_bound, f.nonzero, f.worst_ratio, f.first_bad
            );
            if let Some(w) = f.wrong_expert {
                s.push_str(&format!(
                    "; matches expert {} (local {}) instead: routed to the wrong expert",
                    w.global, w.local
                ));
            }
            s
        })
        .collect();
    format!(
        "{} failing rows ({} of {} diagnosed rows match another expert): {}",
        report.failures.len(),
        report.wrong_expert_rows,
        report.diagnosed,
        shown.join(" | ")
    )
}

/// Elements (align outputs and C) that differ between two runs.
fn differing(a: &MoeOutput, b: &MoeOutput) -> usize {
    let ntpp = usize::from(a.num_tokens_post_padded != b.num_tokens_post_padded);
    let sorted = count_diff(&a.sorted_token_ids, &b.sorted_token_ids);
    let ids = count_diff(&a.expert_ids, &b.expert_ids);
    let c = count_diff(&a.c.y_bits, &b.c.y_bits);
    ntpp + sorted + ids + c
}

fn count_diff<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x != y).count() + a.len().abs_diff(b.len())
}

#[cfg(test)]
mod tests {
    //! The MoE runner end to end on the simulated device, whose `moe_align` follows the contract
    //! and whose `moe` writes a pattern instead of the GEMM: the align check must pass, the
    //! comparison of C must fail naming the rows, the rerun must match bit for bit. Without a
    //! device every device check is a loud skip.

    use super::*;
    use crate::runner::session::{Backend, SessionOptions, run_in_process};
    use w4a16_device::simulated;
    use w4a16_kernels::Target;

    const CASE: &str =
        "moe/moe.k256-n64-e8/T=7/f16/asym/g64/realistic/e8-top2/softmax/map-every-other";

    fn run_on(backend: Backend) -> Vec<Verdict> {
        let dir = w4a16_cases::locate(None).expect("the cases folder");
        let set = w4a16_cases::load_all(&dir).expect("the committed cases load");
        let case = set.case(CASE).expect("the case exists");
        let opts = SessionOptions::new(dir.clone(), Target::Sm90);
        run_in_process(&set, &[case], &backend, &opts, &|_| {})
            .expect("the session runs")
            .verdicts
    }

    fn find<'v>(vs: &'v [Verdict], check: &str) -> &'v Verdict {
        vs.iter()
            .find(|v| v.check == check)
            .unwrap_or_else(|| panic!("no {check} verdict in {vs:#?}"))
    }

    #[test]
    fn a_wrong_c_fails_naming_its_rows_while_the_alignment_passes() {
        let vs = run_on(Backend::Device(simulated::device(false, true)));
        assert_eq!(find(&vs, "selection:moe_align+moe").outcome, Outcome::Pass);
        let align = find(&vs, "moe_align");
        assert_eq!(align.outcome, Outcome::Pass, "{align:#?}");
        let c = find(&vs, "moe_align+moe");
        assert_eq!(c.outcome, Outcome::Fail, "{c:#?}");
        assert!(
            matches!(c.cause, Some(Cause::Mismatch(Mismatch::Output(ref p))) if p.over_bound > 0),
            "{c:#?}"
        );
        assert!(c.detail.contains("failing rows"), "{}", c.detail);
        assert_eq!(find(&vs, "determinism:moe").outcome, Outcome::Pass);
    }

    #[test]
    fn an_align_step_that_writes_past_the_padded_length_fails_naming_the_entry() {
        let vs = run_on(Backend::Device(
            simulated::device_with_align_past_padded_length(),
        ));
        let align = find(&vs, "moe_align");
        assert_eq!(align.outcome, Outcome::Fail, "{align:#?}");
        assert!(
            align.detail.contains("past the padded length")
                && align.detail.contains("expected it untouched"),
            "{}",
            align.detail
        );
        // The well-behaved device passes the same check (run_on above).
        let good = run_on(Backend::Device(simulated::device(false, true)));
        assert_eq!(find(&good, "moe_align").outcome, Outcome::Pass);
    }

    #[test]
    fn without_a_device_every_device_check_is_a_loud_skip() {
        let vs = run_on(Backend::None(Skip {
            requirement: Requirement::Gpu,
            reason: "no GPU in this test".into(),
        }));
        for check in ["moe_align", "moe_align+moe", "determinism:moe"] {
            let v = find(&vs, check);
            assert_eq!(v.outcome, Outcome::Skip, "{v:#?}");
            assert!(v.detail.contains("no GPU in this test"), "{}", v.detail);
        }
        assert_eq!(find(&vs, "selection:moe_align+moe").outcome, Outcome::Pass);
    }

    thread_local! {
        /// Experts drawn on this thread (a test's one-thread pool), counted by `prepared`.
        pub(super) static EXPERT_DRAWS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// `cases` on the simulated device in a fresh one-thread pool (its prepared slot empty):
    /// the verdicts, and how many times the experts were drawn.
    fn run_fresh(set: &w4a16_cases::CaseSet, cases: &[&Case]) -> (Vec<Verdict>, usize) {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        pool.install(|| {
            let opts = SessionOptions::new(w4a16_cases::locate(None).unwrap(), Target::Sm90);
            let backend = Backend::Device(simulated::device(false, true));
            let out = run_in_process(set, cases, &backend, &opts, &|_| {}).unwrap();
            (out.verdicts, EXPERT_DRAWS.with(std::cell::Cell::get))
        })
    }

    /// A MoE layer's cases (every T, with and without the routed weight) draw its experts once,
    /// and judge exactly as when each case draws its own: the details name worst ratios and
    /// rows, which follow the experts' bits. A case of another layer between them is kept apart.
    #[test]
    fn the_cases_of_one_moe_layer_draw_its_experts_once_with_the_verdicts_of_their_own_draws() {
        let set = w4a16_cases::load_all(&w4a16_cases::locate(None).unwrap()).unwrap();
        let layer = set.case(CASE).unwrap().layer_key();
        let mut cases: Vec<&Case> = set.cases().filter(|c| c.layer_key() == layer).collect();
        assert!(cases.len() >= 4, "{layer}: {} cases", cases.len());
        let other = set
            .cases()
            .find(|c| {
                c.moe.is_some() && c.shape_name == "moe.k256-n64-e8" && c.layer_key() != layer
            })
            .unwrap();
        cases.insert(1, other);
        let (shared, draws) = run_fresh(&set, &cases);
        assert_eq!(draws, 2, "one draw per layer");
        let mut own = Vec::new();
        for case in &cases {
            let (verdicts, draws) = run_fresh(&set, &[case]);
            assert_eq!(draws, 1);
            own.extend(verdicts);
        }
        assert_eq!(shared, own);
    }

    /// Every MoE case of the committed suites shares its layer (`Case::layer_key`) only with
    /// cases whose experts are drawn from the same seed, on every target: grouping by layer
    /// cannot change a case's data, and each group draws once.
    #[test]
    fn a_moe_layer_key_names_one_draw_of_experts_on_every_target() {
        let set = w4a16_cases::load_all(&w4a16_cases::locate(None).unwrap()).unwrap();
        let moe: Vec<&Case> = set.cases().filter(|c| c.moe.is_some()).collect();
        for target in [
            Target::Sm90,
            Target::Gfx1100,
            Target::Gfx1151,
            Target::Gfx1201,
        ] {
            let mut seed_of: std::collections::BTreeMap<String, String> = Default::default();
            for case in &moe {
                let routing = case.moe.unwrap();
                let local = ExpertMap::new(routing.map, routing.experts)
                    .unwrap()
                    .local_experts();
                let rule = w4a16_select::padding::padding_rule(target, case.padding);
                let seed = experts_seed_key(case, local, RowPadding::from_rule(case.shape.k, rule));
                let first = seed_of
                    .entry(case.layer_key())
                    .or_insert_with(|| seed.clone());
                assert_eq!(*first, seed, "{} on {target}", case.id);
            }
            assert!(seed_of.len() < moe.len() / 4, "{} layers", seed_of.len());
        }
    }
}
