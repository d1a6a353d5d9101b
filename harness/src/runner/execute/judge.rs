//! Judging an output: the reference (computed once per recipe key), the derived bound or, for
//! large layers, Freivalds plus sampled lines; the fallback as second opinion; and a failure's
//! cause, repro command and artifact.

use super::ReferenceChoice;
use super::{CaseRun, repro_command};
use crate::runner::verdict::{
    Cause, Check, Mismatch, Outcome, OutputProblems, ReferenceStage, SourceError, Verdict,
};
use std::rc::Rc;
use w4a16_device::GemmOutput;
use w4a16_kernels::{KernelId, set};
use w4a16_reference::NumericRecipe;
use w4a16_reference::bound::BoundModel;
use w4a16_reference::compare::{self, CompareMode, CompareReport, OutputBits};
use w4a16_reference::gemm::{self, Reference};
use w4a16_reference::layer::{Activations, QuantizedLayer};
use w4a16_reference::offload::{HeldReference, LayerWeights, OffloadError};
use w4a16_reference::verify::{self, VerifyBudget};

/// Which reference a recipe needs: its magnitude lane's offset (bits) and whether the offset is
/// accumulated (which changes the IEEE values of special rows).
pub(super) type ReferenceKey = (Option<u64>, bool);

/// A case's reference for one recipe key: on the host, or with its lanes held on the
/// device (`--reference gpu`), judged there and brought to the host only on demand (once).
#[derive(Clone)]
pub(super) enum Formed<'a> {
    Host(Rc<Reference>),
    Held {
        lanes: Rc<HeldReference<'a>>,
        host: Rc<std::cell::OnceCell<Rc<Reference>>>,
    },
}

impl Formed<'_> {
    /// Every element of `out` against the reference (bound, or bit-exact for `exact`).
    fn compare(
        &self,
        model: &BoundModel,
        out: OutputBits<'_>,
        exact: bool,
    ) -> Result<CompareReport, OffloadError> {
        match (self, exact) {
            (Formed::Host(r), false) => Ok(compare::compare(r, model, out)?),
            (Formed::Host(r), true) => Ok(compare::compare_bit_exact(r, model, out)?),
            (Formed::Held { lanes, .. }, false) => lanes.compare(model, out, CompareMode::Bound),
            (Formed::Held { lanes, .. }, true) => lanes.compare(model, out, CompareMode::BitExact),
        }
    }

    /// The reference on the host (downloaded from the device where it is held, once per
    /// case: the fallback's second opinion and a failure's artifact may both need it).
    fn host(&self) -> Result<Rc<Reference>, OffloadError> {
        match self {
            Formed::Host(r) => Ok(Rc::clone(r)),
            Formed::Held { lanes, host } => {
                if let Some(r) = host.get() {
                    return Ok(Rc::clone(r));
                }
                let r = Rc::new(lanes.to_host()?);
                let _ = host.set(Rc::clone(&r));
                Ok(r)
            }
        }
    }
}

/// A check that could not be judged: the reference side failed at `stage` with `error`.
pub(crate) fn reference_failure(
    id: impl Into<String>,
    check: Check,
    stage: ReferenceStage,
    error: impl std::error::Error + Send + Sync + 'static,
) -> Verdict {
    let error = SourceError::new(error);
    Verdict::new(id, check, Outcome::Fail).because(Cause::Reference { stage, error })
}

/// A reference that could not be formed: bad input fails the check as before; the GPU
/// reference's GEMM failing, or disagreeing with the CPU reference, is a FAULT of the reference
/// (the kernel was not judged).
fn reference_stage(e: &OffloadError) -> (Outcome, ReferenceStage) {
    match e {
        OffloadError::Input(_) => (Outcome::Fail, ReferenceStage::Reference),
        OffloadError::Gemm { .. } | OffloadError::Length { .. } | OffloadError::Held { .. } => {
            (Outcome::Fault, ReferenceStage::GpuReference)
        }
        OffloadError::Disagrees { .. } => (Outcome::Fault, ReferenceStage::CrossCheck),
    }
}

impl<'c, 'a> CaseRun<'c, 'a> {
    fn reference(
        &mut self,
        x: &Activations,
        logical: &QuantizedLayer,
        recipe: &NumericRecipe,
    ) -> Option<Formed<'a>> {
        let key = (
            recipe.magnitude_offset().map(f64::to_bits),
            recipe.offset_accumulation.is_some(),
        );
        if let Some(i) = self.references.iter().position(|(k, _)| *k == key) {
            return Some(self.references[i].1.clone());
        }
        let policy = self.case.class.non_finite_x();
        let seed = w4a16_reference::data::case_seed(&self.case.id);
        let result = match self.gpu_reference_device() {
            Some(device) => self.gpu_reference(device, x, logical, recipe, seed),
            None => gemm::reference_with(x, logical, recipe, policy)
                .map(|r| Formed::Host(Rc::new(r)))
                .map_err(OffloadError::Input),
        };
        match result {
            Ok(r) => {
                self.references.push((key, r.clone()));
                Some(r)
            }
            Err(e) => {
                let (outcome, stage) = reference_stage(&e);
                self.push_reference(Check::Reference, outcome, stage, e);
                None
            }
        }
    }

    /// The reference with its products on `device`: held there where it can be, else with
    /// its lanes brought to the host.
    fn gpu_reference(
        &self,
        device: &'a dyn w4a16_device::Device,
        x: &Activations,
        logical: &QuantizedLayer,
        recipe: &NumericRecipe,
        seed: u64,
    ) -> Result<Formed<'a>, OffloadError> {
        let policy = self.case.class.non_finite_x();
        // The prepared layer's weights, formed once per layer; any other layer's (a carrier's)
        // for this case alone.
        let prepared = self.prepared.clone();
        let prepared = prepared.filter(|p| std::ptr::eq(&p.layer, logical));
        let own;
        let weights = match &prepared {
            Some(p) => p.layer_weights(),
            None => {
                own = LayerWeights::new(logical);
                own.as_ref()
            }
        };
        let weights = weights.map_err(|e| OffloadError::Input(e.clone()))?;
        match super::held_reference_on(device, x, logical, weights, recipe, policy, seed)? {
            Some(r) => Ok(Formed::Held {
                lanes: Rc::new(r),
                host: Rc::default(),
            }),
            None => super::reference_on(device, x, logical, recipe, policy, seed)
                .map(|r| Formed::Host(Rc::new(r))),
        }
    }

    /// The device whose f64 GEMM forms the reference (`--reference gpu`), if any.
    fn gpu_reference_device(&self) -> Option<&'a dyn w4a16_device::Device> {
        match self.ctx.reference {
            ReferenceChoice::Gpu => self.ctx.device,
            ReferenceChoice::Cpu => None,
        }
    }

    pub(super) fn judge(
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
            Err(e) => return reference_failure(id, check, ReferenceStage::Bound, e),
        };
        let macs = (x.m * logical.shape.n * logical.shape.k) as f64;
        let bits = OutputBits::new(&out.y_bits, logical.shape.n);
        let exact = self.case.class == w4a16_reference::data::DataClass::Exact;
        // The GPU reference judges every element of every shape: no sampled regime.
        if macs > self.ctx.full_reference_macs && self.gpu_reference_device().is_none() {
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
                Err(e) => reference_failure(id, check, ReferenceStage::VerificationInput, e),
            };
        }
        let Some(reference) = self.reference(x, logical, recipe) else {
            // A reference at fault (the GPU reference's GEMM, or its cross-check) leaves the
            // kernel unjudged: that is no failure of the kernel.
            let faulted = self
                .verdicts
                .iter()
                .any(|v| v.check == Check::Reference && v.outcome == Outcome::Fault);
            return match faulted {
                true => Verdict::new(id, check, Outcome::Fault)
                    .detail("not judged: the reference is at fault (its own verdict says why)"),
                false => Verdict::new(id, check, Outcome::Fail).detail("no reference"),
            };
        };
        // Exact-class data: every fp32 partial sum is exact, so only the recipe's cast(s) round;
        // the bit-exact comparison expects exactly those (bias after the cast rounds twice).
        let report = match reference.compare(&model, bits, exact) {
            Ok(r) => r,
            Err(OffloadError::Input(e)) => {
                return reference_failure(id, check, ReferenceStage::Compare, e);
            }
            Err(e) => {
                let (outcome, stage) = reference_stage(&e);
                let error = SourceError::new(e);
                return Verdict::new(id, check, outcome).because(Cause::Reference { stage, error });
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
            // The failure's artifact holds the reference: brought to the host now.
            let host = reference.host();
            self.fail(check, problems, x, logical, out, host.ok().as_deref())
        }
    }

    /// The fallback as a second opinion: both outputs within their bounds of each other.
    pub(super) fn second_opinion(
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
        let Some(formed) = self.reference(x, logical, &rf) else {
            return;
        };
        let r = match formed.host() {
            Ok(r) => r,
            Err(e) => {
                let (outcome, stage) = reference_stage(&e);
                self.push_reference(check, outcome, stage, e);
                return;
            }
        };
        let dtype = self.case.dtype;
        let mut over = 0usize;
        for i in 0..fast.len() {
            let (m, n) = (i / r.n, i % r.n);
            let (y, a, b) = (r.y_at(m, n), r.a_at(m, n), r.bias[n]);
            let acc = r.a_offset.as_ref().map_or(a, |o| o[i]);
            let tol = mf.element(y, a, acc, b) + mb.element(y, a, a, b);
            // The range edge (docs/contract.md §6): both at the same Inf, or one at Inf and the other within
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
            match crate::runner::artifact::write(
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
