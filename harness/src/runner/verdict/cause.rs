//! Why a check did not pass, typed where it was found; a verdict's detail is its rendering.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;
use w4a16_device::DeviceFault;
use w4a16_device::validate::ContractError;
use w4a16_kernels::KernelId;
use w4a16_require::{Requirement, Skip};

use super::Outcome;

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
