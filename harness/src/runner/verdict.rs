//! What one check of one case concluded. Rows are stable across runs (ARCHITECTURE.md rule 6): no
//! timings, paths or driver strings; the error/bound ratio only as a coarse bucket.

pub use super::check::{Check, KernelPath};
use crate::require::{Requirement, Skip};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use w4a16_device::DeviceFault;
use w4a16_device::validate::ContractError;
use w4a16_kernels::KernelId;

w4a16_reference::named_enum! {
    #[names_only]
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "kebab-case")]
    pub enum Outcome {
        /// Within the bound (or bit-exact where exactness is required).
        Pass = "pass",
        /// The case was meant to be refused and was, with a typed error before any launch.
        Refused = "refused",
        /// A known-bad case (data, ARCHITECTURE.md rule 5) that still fails, as recorded.
        ExpectedFail = "xfail",
        /// Wrong answer, unexpected refusal, guard/poison violation, nondeterminism.
        Fail = "FAIL",
        /// The device faulted or hung on this case.
        Fault = "FAULT",
        /// A known-bad case that now passes: the suppression must be removed.
        UnexpectedPass = "XPASS",
        /// A known-bad entry past its expiry date.
        Expired = "EXPIRED",
        /// Could not run here; `detail` says why.
        Skip = "skip",
    }
}

impl Outcome {
    /// Whether this outcome makes the run fail.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Outcome::Fail | Outcome::Fault | Outcome::UnexpectedPass | Outcome::Expired
        )
    }
}

/// Why a check did not pass, typed where it was found (validation, the device, a comparison).
/// A verdict's `detail` is rendered from it, with context (a repro command, an artifact path).
/// Serializable: a fault-isolated worker hands it to its parent inside the verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// The check cannot run on this machine (no GPU, another GPU, no sanitizer binary).
    #[error("{}", .0.reason)]
    NotHere(Skip),
    /// `kernel`'s declared contract refuses the launch.
    #[error("{kernel}: {error}")]
    Contract {
        kernel: KernelId,
        error: ContractError,
    },
    /// The device failed the call (a FAULT), or lacks a capability the check needs (a SKIP).
    #[error("{0}")]
    Device(DeviceFault),
    /// Outputs that must agree did not.
    #[error("{0}")]
    Mismatch(Mismatch),
    /// The reference side failed at `stage` (data, conversion, the reference, the bound, the
    /// comparison): the layer under test was never judged.
    #[error("{}{error}", stage.prefix())]
    Reference {
        stage: ReferenceStage,
        error: SourceError,
    },
    /// The selection chose a path that its own declarations would refuse at launch.
    #[error("selected path would fail at launch: {0}")]
    Selection(SourceError),
    /// The fault-isolated worker running the case stopped (crashed, hung) or could not set up
    /// the case's session: the case in flight is charged.
    #[error("{0}")]
    Worker(WorkerFailure),
    /// `check-model` refused a model, a layer or a fusion of a real checkpoint before launching.
    #[error("{0}")]
    Checkpoint(CheckpointRefusal),
}

/// Why `check-model` refused part of a real checkpoint (rendered as its verdict's detail).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CheckpointRefusal {
    /// The model as a whole, or a module that could not be detected.
    #[error("refused: {error}")]
    Model { error: SourceError },
    /// A layer's tensors do not load as a layer the converters take.
    #[error("refused before any launch: {error}")]
    Load { error: SourceError },
    /// `--strict` and the layer has checkpoint defects.
    #[error("refused under --strict: {defects}")]
    StrictDefects { defects: String },
    /// `--strict` and a part of a fused projection has a checkpoint defect.
    #[error("refused under --strict: part {module} has a checkpoint defect")]
    StrictPart { module: String },
    /// The parts cannot be fused as the engine fuses them.
    #[error("cannot be fused as the engine fuses it: {error}")]
    Unfusable { error: SourceError },
    /// One MoE expert's parts cannot be fused.
    #[error("expert {expert}: cannot be fused: {error}")]
    UnfusableExpert { expert: String, error: SourceError },
}

/// How a worker process failed a case (`runner::isolate`, the CLI's `worker`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum WorkerFailure {
    /// The process ended before the case's end line (a crash, a kill, an abort).
    #[error("worker exited ({status})")]
    Exited { status: String },
    /// No line for longer than the watchdog allows (a hang); the worker was killed.
    #[error("no progress for {seconds} s (watchdog)")]
    Watchdog { seconds: u64 },
    /// The worker could not run the case's session at all (its setup failed).
    #[error("{error}")]
    Session { error: String },
    /// The worker's case files hold no case of this id (they differ from the parent's).
    #[error("no such case id {id:?} in the worker's case files")]
    UnknownCase { id: String },
}

/// Where on the reference side a case failed; each renders the prefix its detail always had.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReferenceStage {
    /// Seeded data generation.
    Data,
    /// A MoE case's expert map.
    ExpertMap,
    /// A MoE case's routing.
    Routing,
    /// A MoE case's activations.
    Activations,
    /// A MoE case's experts.
    Experts,
    /// The producer's checkpoint reading its own output back.
    OwnReading,
    /// The producer cannot write the case's layer.
    Producer,
    /// The converter refused the checkpoint.
    Converter,
    /// The converter's resident layout does not read back.
    ResidentLayout,
    /// Building the asymmetric carrier.
    Carrier,
    /// The exact reference output.
    Reference,
    /// The derived bound.
    Bound,
    /// The inputs of sampled verification.
    VerificationInput,
    /// Comparing the output against the reference.
    Compare,
    /// The GPU reference's f64 GEMM (`--reference gpu`) failed or gave back the wrong extent.
    GpuReference,
    /// The GPU reference disagrees with the CPU f64 reference on a sampled element: the
    /// reference is at fault, not the kernel (a FAULT).
    CrossCheck,
}

impl ReferenceStage {
    fn prefix(self) -> &'static str {
        match self {
            ReferenceStage::Data | ReferenceStage::Carrier | ReferenceStage::Reference => "",
            ReferenceStage::ExpertMap => "expert map: ",
            ReferenceStage::Routing => "routing: ",
            ReferenceStage::Activations => "X: ",
            ReferenceStage::Experts => "experts: ",
            ReferenceStage::OwnReading => "own reading refused: ",
            ReferenceStage::Producer => "producer cannot express the case: ",
            ReferenceStage::Converter => "converter refused: ",
            ReferenceStage::ResidentLayout => "resident layout invalid: ",
            ReferenceStage::Bound => "bound: ",
            ReferenceStage::VerificationInput => "verification input: ",
            ReferenceStage::Compare => "compare: ",
            ReferenceStage::GpuReference => "GPU reference: ",
            ReferenceStage::CrossCheck => "GPU reference disagrees with the CPU reference: ",
        }
    }
}

/// An error of another layer (the reference crate, the converters, the selection), kept as
/// itself in the process that found it ([`SourceError::downcast_ref`]) and as its rendering
/// across the worker pipe: those types hold `&'static str` names and do not deserialize.
#[derive(Clone, Debug)]
pub struct SourceError {
    text: String,
    error: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl SourceError {
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        SourceError {
            text: error.to_string(),
            error: Some(Arc::new(error)),
        }
    }

    /// An error only lent here (it stays with its owner): kept as its rendering.
    pub fn rendered(error: &dyn std::error::Error) -> Self {
        SourceError {
            text: error.to_string(),
            error: None,
        }
    }

    /// The typed error, where this verdict was made in this process.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.error.as_deref().and_then(|e| e.downcast_ref())
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Equal when they say the same: the typed error may not have crossed the pipe.
impl PartialEq for SourceError {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Serialize for SourceError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for SourceError {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(SourceError {
            text: String::deserialize(d)?,
            error: None,
        })
    }
}

impl Cause {
    /// What a skip with this cause needed: `W4A16_REQUIRE` naming it makes the skip a failure.
    /// A device without a capability (e.g. the vendor BLAS) cannot give the GPU verdicts.
    pub fn requirement(&self) -> Option<Requirement> {
        match self {
            Cause::NotHere(skip) => Some(skip.requirement),
            Cause::Device(f) if f.missing_capability().is_some() => Some(Requirement::Gpu),
            _ => None,
        }
    }

    /// The outcome of a check that got `fault` from the device: SKIP when the device only lacks
    /// a capability, FAULT when it misbehaved.
    pub fn of_device(fault: DeviceFault) -> (Outcome, Cause) {
        let outcome = if fault.missing_capability().is_some() {
            Outcome::Skip
        } else {
            Outcome::Fault
        };
        (outcome, Cause::Device(fault))
    }

    /// The contract error, when this is one.
    pub fn contract(&self) -> Option<(KernelId, &ContractError)> {
        match self {
            Cause::Contract { kernel, error } => Some((*kernel, error)),
            _ => None,
        }
    }

    /// The device fault, when this is one.
    pub fn device_fault(&self) -> Option<&DeviceFault> {
        match self {
            Cause::Device(f) => Some(f),
            _ => None,
        }
    }
}

/// Outputs that must agree, and how many of their elements did not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "kebab-case")]
pub enum Mismatch {
    /// A second identical launch gave other bits.
    #[error("{elements} elements differ between two identical launches")]
    Nondeterministic { elements: usize },
    /// The padded/strided/offset layouts gave other bits than the unpadded contiguous one.
    #[error(
        "{elements} elements differ between the padded/strided/offset and the unpadded contiguous layouts"
    )]
    LayoutDependent { elements: usize },
    /// The dequantized copy is not `(q − z)·s` rounded once, or wrote outside itself.
    #[error(
        "{elements} elements differ from (q−z)·s rounded once; {guard_violations} guard violations"
    )]
    Dequant {
        elements: usize,
        guard_violations: usize,
    },
    /// A fast kernel and the fallback disagree beyond both their bounds.
    #[error("{elements} elements disagree with fallback beyond both bounds")]
    DisagreesWithFallback { elements: usize },
    /// The output against the reference and its bound, and against its buffer.
    #[error("{0}")]
    Output(OutputProblems),
    /// `moe_align`'s outputs differ from the ordering contract (the first problem, named).
    #[error("alignment: {detail}")]
    Alignment { detail: String },
}

/// What is wrong with a path's output: writes outside it, and (full comparison) elements over
/// the bound, or (sampled verification) a failed Freivalds check or sampled line.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputProblems {
    pub guard_bytes: usize,
    pub stray_writes: usize,
    pub unwritten: usize,
    pub over_bound: usize,
    pub nonfinite: usize,
    pub poison_left: usize,
    pub bit_mismatches: usize,
    /// JSON has no Inf or NaN: a non-finite ratio crosses the worker pipe as `null` and comes
    /// back NaN (the verdict's detail keeps the worker's rendering).
    #[serde(deserialize_with = "nan_when_null")]
    pub worst_ratio: f64,
    pub worst_at: Option<(usize, usize)>,
    /// Sampled verification only: whether Freivalds passed, and the sampled report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<(bool, String)>,
}

fn nan_when_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

impl fmt::Display for OutputProblems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.guard_bytes > 0 {
            parts.push(format!("{} guard-band bytes overwritten", self.guard_bytes));
        }
        if self.stray_writes > 0 {
            parts.push(format!("{} writes outside [M, N]", self.stray_writes));
        }
        match &self.sampled {
            Some((freivalds, sampled)) => {
                parts.push(format!("Freivalds passed: {freivalds}, sampled: {sampled}"))
            }
            None => {
                if self.unwritten > 0 {
                    parts.push(format!(
                        "{} elements never written (still poison)",
                        self.unwritten
                    ));
                }
                parts.push(format!(
                    "{} over bound, {} non-finite, {} poison left, {} bit mismatches; worst ratio {:.3e} at {:?}",
                    self.over_bound, self.nonfinite, self.poison_left, self.bit_mismatches, self.worst_ratio, self.worst_at
                ));
            }
        }
        f.write_str(&parts.join("; "))
    }
}

/// One check of one case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub case_id: String,
    /// What was checked; serialized as its snapshot name (`skinny`, `convert:gptq-v1`, ...).
    pub check: Check,
    pub outcome: Outcome,
    /// Coarse error/bound bucket (snapshotted); `None` where no numeric comparison ran.
    pub bucket: Option<String>,
    /// Human detail for logs and reports, rendered from `cause` where there is one; never
    /// snapshotted.
    pub detail: String,
    /// Why the check did not pass, typed; `None` for passes and for the failures that are only
    /// described (a wrong carrier word, a checkpoint reading back differently).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<Cause>,
    /// Worst |ŷ−y|/bound, for reports only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_ratio: Option<f64>,
}

impl Verdict {
    pub fn new(case_id: impl Into<String>, check: Check, outcome: Outcome) -> Self {
        Verdict {
            case_id: case_id.into(),
            check,
            outcome,
            bucket: None,
            detail: String::new(),
            cause: None,
            worst_ratio: None,
        }
    }

    /// A check that cannot run here: a loud SKIP whose detail is the reason.
    pub fn skipped(case_id: impl Into<String>, check: Check, skip: Skip) -> Self {
        Verdict::new(case_id, check, Outcome::Skip).because(Cause::NotHere(skip))
    }

    pub fn detail(mut self, d: impl Into<String>) -> Self {
        self.detail = d.into();
        self
    }

    /// Sets the cause, and the detail to its rendering.
    pub fn because(mut self, cause: Cause) -> Self {
        self.detail = cause.to_string();
        self.cause = Some(cause);
        self
    }

    pub fn bucket(mut self, b: impl Into<String>) -> Self {
        self.bucket = Some(b.into());
        self
    }

    /// What this verdict's skip needed, when it is a skip.
    pub fn skip_requirement(&self) -> Option<Requirement> {
        (self.outcome == Outcome::Skip)
            .then(|| self.cause.as_ref().and_then(Cause::requirement))
            .flatten()
    }

    /// The stable snapshot line.
    pub fn snapshot_row(&self) -> String {
        super::snapshot::SnapshotRow::from(self).line()
    }
}

/// `W4A16_REQUIRE` applied to a run's verdicts (ARCHITECTURE.md rule 4): a skip whose requirement is in
/// `required` becomes a FAIL that says so (its cause kept), so the summary, the reports and the
/// exit code all count it. Returns how many verdicts it turned.
pub fn apply_required(verdicts: &mut [Verdict], required: &[Requirement]) -> usize {
    let mut turned = 0;
    for v in verdicts.iter_mut() {
        if let Some(r) = v.skip_requirement().filter(|r| required.contains(r)) {
            v.outcome = Outcome::Fail;
            v.detail = format!("W4A16_REQUIRE={r} but the check was skipped: {}", v.detail);
            turned += 1;
        }
    }
    turned
}

/// Counts for the summary line, plus skip reasons grouped (loud skips, ARCHITECTURE.md rule 4).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub passed: usize,
    pub refused: usize,
    pub expected_fail: usize,
    pub failed: usize,
    pub faults: usize,
    pub unexpected_pass: usize,
    pub expired: usize,
    pub skipped: usize,
    pub skip_reasons: BTreeMap<String, usize>,
    /// Skips by what they needed (`W4A16_REQUIRE` names these).
    pub skips_needing: BTreeMap<Requirement, usize>,
}

impl Summary {
    pub fn of(verdicts: &[Verdict]) -> Summary {
        let mut s = Summary::default();
        for v in verdicts {
            match v.outcome {
                Outcome::Pass => s.passed += 1,
                Outcome::Refused => s.refused += 1,
                Outcome::ExpectedFail => s.expected_fail += 1,
                Outcome::Fail => s.failed += 1,
                Outcome::Fault => s.faults += 1,
                Outcome::UnexpectedPass => s.unexpected_pass += 1,
                Outcome::Expired => s.expired += 1,
                Outcome::Skip => {
                    s.skipped += 1;
                    *s.skip_reasons.entry(v.detail.clone()).or_default() += 1;
                    if let Some(r) = v.skip_requirement() {
                        *s.skips_needing.entry(r).or_default() += 1;
                    }
                }
            }
        }
        s
    }

    pub fn failures(&self) -> usize {
        self.failed + self.faults + self.unexpected_pass + self.expired
    }

    pub fn total(&self) -> usize {
        self.passed + self.refused + self.expected_fail + self.failures() + self.skipped
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} checks: {} passed, {} refused as intended, {} expected failures, {} FAILED, {} faults, {} unexpected passes, {} expired suppressions, {} skipped",
            self.total(),
            self.passed,
            self.refused,
            self.expected_fail,
            self.failed,
            self.faults,
            self.unexpected_pass,
            self.expired,
            self.skipped
        )?;
        for (reason, n) in &self.skip_reasons {
            writeln!(f, "  skipped {n:>6} × {reason}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use w4a16_device::Capability;

    fn no(requirement: Requirement) -> Skip {
        Skip {
            requirement,
            reason: format!("no {requirement} here"),
        }
    }

    #[test]
    fn only_skips_of_a_required_need_turn_into_failures() {
        let kernel = || Check::kernel(KernelId::Skinny);
        let (blas_outcome, blas) = Cause::of_device(DeviceFault::MissingCapability {
            capability: Capability::VendorBlas,
            device: "d".into(),
            why: "not installed".into(),
        });
        let (sticky_outcome, sticky) = Cause::of_device(DeviceFault::Sticky {
            during: "sync".into(),
            code: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
        });
        assert_eq!(
            (blas_outcome, sticky_outcome),
            (Outcome::Skip, Outcome::Fault)
        );
        let mut vs = vec![
            Verdict::skipped("a", kernel(), no(Requirement::Gpu)),
            Verdict::skipped("b", kernel(), no(Requirement::Nvrtc)),
            Verdict::new("c", kernel(), blas_outcome).because(blas),
            Verdict::new("d", kernel(), sticky_outcome).because(sticky),
            Verdict::new("e", kernel(), Outcome::Pass),
        ];
        let s = Summary::of(&vs);
        assert_eq!((s.skipped, s.faults, s.failures()), (3, 1, 1));
        assert_eq!(s.skips_needing.get(&Requirement::Gpu), Some(&2));
        assert_eq!(s.skips_needing.get(&Requirement::Nvrtc), Some(&1));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["skips_needing"]["gpu"], 2);

        assert_eq!(apply_required(&mut vs, &[]), 0);
        assert_eq!(apply_required(&mut vs, &[Requirement::Gpu]), 2);
        let outcomes: Vec<Outcome> = vs.iter().map(|v| v.outcome).collect();
        assert_eq!(
            outcomes,
            [
                Outcome::Fail,
                Outcome::Skip,
                Outcome::Fail,
                Outcome::Fault,
                Outcome::Pass
            ]
        );
        assert_eq!(
            vs[0].detail,
            "W4A16_REQUIRE=gpu but the check was skipped: no gpu here"
        );
        // Applying it again changes nothing: the turned verdicts are no skips any more.
        assert_eq!(apply_required(&mut vs, &[Requirement::Gpu]), 0);
        assert_eq!(Summary::of(&vs).failures(), 3);
    }

    #[test]
    fn a_verdict_with_its_cause_survives_the_worker_pipe() {
        let v = Verdict::new("a", Check::Determinism(KernelId::Fused), Outcome::Fail)
            .because(Cause::Mismatch(Mismatch::Nondeterministic { elements: 3 }));
        assert_eq!(v.detail, "3 elements differ between two identical launches");
        let json = serde_json::to_string(&v).unwrap();
        assert!(json.contains("\"check\":\"determinism:fused\""), "{json}");
        assert_eq!(serde_json::from_str::<Verdict>(&json).unwrap(), v);
        // A non-finite worst ratio (every element Inf) still crosses.
        let problems = OutputProblems {
            over_bound: 4,
            worst_ratio: f64::INFINITY,
            ..OutputProblems::default()
        };
        let v = Verdict::new("a", Check::kernel(KernelId::Fused), Outcome::Fail)
            .because(Cause::Mismatch(Mismatch::Output(problems)));
        let json = serde_json::to_string(&v).unwrap();
        let back: Verdict = serde_json::from_str(&json).unwrap();
        assert_eq!(back.detail, v.detail);
        let Some(Cause::Mismatch(Mismatch::Output(p))) = back.cause else {
            panic!("{back:?}")
        };
        assert_eq!(p.over_bound, 4);
        assert!(p.worst_ratio.is_nan());
        // A reference-side error keeps its type here and its text across the pipe.
        let bad = w4a16_reference::data::DataError::ZeroGroup;
        let v = Verdict::new("a", Check::Data, Outcome::Fail).because(Cause::Reference {
            stage: ReferenceStage::Bound,
            error: SourceError::new(bad.clone()),
        });
        assert_eq!(v.detail, format!("bound: {bad}"));
        let Some(Cause::Reference { error, .. }) = &v.cause else {
            panic!("{v:?}")
        };
        assert_eq!(error.downcast_ref(), Some(&bad));
        let json = serde_json::to_string(&v).unwrap();
        assert!(json.contains(r#""stage":"bound""#), "{json}");
        let back: Verdict = serde_json::from_str(&json).unwrap();
        assert_eq!(back, v);
        let Some(Cause::Reference { error, .. }) = &back.cause else {
            panic!("{back:?}")
        };
        assert_eq!(
            error.downcast_ref::<w4a16_reference::data::DataError>(),
            None
        );
        // A verdict from before causes existed still reads.
        let old = r#"{"case_id":"a","check":"skinny","outcome":"pass","bucket":null,"detail":""}"#;
        let v: Verdict = serde_json::from_str(old).unwrap();
        assert_eq!((v.check, v.cause), (Check::kernel(KernelId::Skinny), None));
    }
}
