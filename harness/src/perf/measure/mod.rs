//! Times the selected path of every perf case on the candidate (and control) device.
//!
//! Per case and side: `reps` per-launch device times of the path the selection picks (every
//! launch on one of `copies` separately staged copies of the inputs: cold reads), then the
//! control right beside it (a rotating cold copy of the case's logical traffic for M ≤ 5, the
//! vendor BLAS on the dequantized weights for M > 5). With a control device the two sides are
//! interleaved case by case, so both see the same clocks and load.
//!
//! Perf times the plain layer of a case: the key holds no variant (bias, X/Y views, producer,
//! carrier), so the layer is generated without them, the realistic data class, the target's
//! default layouts.

mod cases;

pub use cases::{MOE_NOT_TIMED, PerfCase, perf_cases};

use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};
use w4a16_kernels::decl::LaunchGeometry;
use w4a16_kernels::set::decl;
use w4a16_kernels::{Execution, KernelDecl, KernelId, RunTarget, Target};
use w4a16_reference::Activations;
use w4a16_reference::data::{DataClass, DataError, DataSpec, generate};
use w4a16_reference::formats::{self, LayoutError, ResidentLayer};

use super::key::{ControlKind, Measured, PerfKey};
use w4a16_device::launch::DeviceInputs;
use w4a16_device::tensor::{XBuffer, YSpec};
use w4a16_device::validate::ContractError;
use w4a16_device::{BenchPlan, DeviceBench, DeviceFault, Timing};
use w4a16_select::padding;

/// How each case is timed: `reps` per-launch samples per side (9–30), after `warmup` launches
/// left queued, rotating through at least `copies` separately allocated copies of the inputs,
/// more where needed to span [`PerfPlan::COLD_FOOTPRINT_BYTES`] (cold reads); the controls too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerfPlan {
    pub reps: usize,
    pub warmup: usize,
    pub copies: usize,
}

impl Default for PerfPlan {
    fn default() -> Self {
        PerfPlan {
            reps: 15,
            warmup: 5,
            copies: 8,
        }
    }
}

impl PerfPlan {
    /// Repetitions per side: fewer leave the Mann–Whitney test without power, more only cost
    /// device time.
    pub const REPS: RangeInclusive<usize> = 9..=30;

    /// The plan, or the typed reason it cannot time anything meaningfully.
    pub fn checked(self) -> Result<Self, PerfError> {
        if !Self::REPS.contains(&self.reps) {
            return Err(PerfError::Reps {
                reps: self.reps,
                min: *Self::REPS.start(),
                max: *Self::REPS.end(),
            });
        }
        if self.copies == 0 {
            return Err(PerfError::NoCopies);
        }
        Ok(self)
    }

    /// Bytes that a rotation must cycle through before a buffer is read again: twice the H200's
    /// 60 MB L2 and above RDNA3's 96 MB Infinity Cache, so no launch finds its inputs cached.
    pub const COLD_FOOTPRINT_BYTES: u64 = 128 << 20;
    /// Most copies one rotation allocates (small layers would otherwise need thousands).
    pub const MAX_COPIES: usize = 64;

    /// Copies of `bytes_per_copy` to rotate through: at least `copies`, and enough to span
    /// [`Self::COLD_FOOTPRINT_BYTES`] (a self-control run of small layers found 8 copies of an
    /// 8 MB layer, and one 32 MB dense copy, partly cached: ratios moved by up to 50 %).
    pub fn copies_for(&self, bytes_per_copy: u64) -> usize {
        self.copies.max(Self::cold_copies(bytes_per_copy))
    }

    /// Copies that span the cold footprint, at least one (for inputs that are big on their own,
    /// like the dense copy of the weights).
    pub fn cold_copies(bytes_per_copy: u64) -> usize {
        (Self::COLD_FOOTPRINT_BYTES.div_ceil(bytes_per_copy.max(1)) as usize)
            .clamp(1, Self::MAX_COPIES)
    }

    pub(crate) fn bench(&self) -> BenchPlan {
        BenchPlan {
            warmup: self.warmup,
            iters: self.reps,
        }
    }
}

/// Why a perf run stopped; each names the case (and side) it was timing.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    #[error(
        "--reps {reps}: expected {min} to {max} repetitions per side (fewer leave the Mann–Whitney test without power)"
    )]
    Reps { reps: usize, min: usize, max: usize },
    #[error("--copies 0: expected at least one copy of the inputs to rotate through")]
    NoCopies,
    #[error(
        "{target} is emulated: emulation timings are not the target's; perf runs on the target's own GPU"
    )]
    Emulated { target: RunTarget },
    #[error(
        "{case}: selected for {selected_for}, but the {side} device {device} is {device_target}"
    )]
    WrongTarget {
        case: PerfKey,
        side: Side,
        selected_for: Target,
        device: String,
        device_target: Target,
    },
    #[error("{case} ({side}): {during}: {fault}")]
    Device {
        case: PerfKey,
        side: Side,
        during: String,
        fault: Box<DeviceFault>,
    },
    #[error("{case} ({side}): {during}: the launch was refused: {error}")]
    Contract {
        case: PerfKey,
        side: Side,
        during: String,
        error: Box<ContractError>,
    },
    #[error("{case}: generating the data of {case_id}: {error}")]
    Data {
        case: PerfKey,
        case_id: String,
        error: Box<DataError>,
    },
    #[error("{case}: laying out the weights of {case_id}: {error}")]
    Layout {
        case: PerfKey,
        case_id: String,
        error: Box<LayoutError>,
    },
    #[error(
        "{device} does not count launches: perf counts on the ISA emulator only (docs/perf-counters.md)"
    )]
    NotCounting { device: String },
    #[error(transparent)]
    Regret {
        error: Box<super::regret::RegretError>,
    },
    #[error("{case}: the selected path {path} is not one perf knows how to time")]
    Path { case: PerfKey, path: String },
    #[error("{case}: {target} has no declared machine to turn counters into a model time")]
    NoMachine { case: PerfKey, target: Target },
}

/// Which device of the run a measurement was taken on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Candidate,
    Control,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Candidate => "candidate",
            Side::Control => "control",
        })
    }
}

/// One (shape, provider) layer, generated at the largest M of its cases and laid out for the
/// target; its dense copy per side, made once by that side's dequant kernel when first needed.
pub(crate) struct PreparedLayer {
    pub(crate) shape: String,
    pub(crate) provider: String,
    pub(crate) layer: ResidentLayer,
    /// X at the largest M; each case takes its leading rows.
    pub(crate) x: Activations,
    dense: [Option<Vec<u16>>; 2],
}

/// Times every case on `candidate` and, interleaved case by case, on `control`: per side the
/// selected path then its control. Results are in `cases` order.
pub fn measure_suite(
    candidate: &dyn DeviceBench,
    control: Option<&dyn DeviceBench>,
    cases: &[PerfCase],
    plan: PerfPlan,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<(Measured, Option<Measured>)>, PerfError> {
    measure_suite_until(candidate, control, cases, plan, progress, &mut || false)
}

/// As [`measure_suite`], asking `stop` before each case: once it says yes, no further case
/// starts and the results so far (a prefix of `cases`) are returned — a time limit that ends a
/// batch of golden recording cleanly instead of killing it with nothing written.
pub fn measure_suite_until(
    candidate: &dyn DeviceBench,
    control: Option<&dyn DeviceBench>,
    cases: &[PerfCase],
    plan: PerfPlan,
    progress: &mut dyn FnMut(&str),
    stop: &mut dyn FnMut() -> bool,
) -> Result<Vec<(Measured, Option<Measured>)>, PerfError> {
    let plan = plan.checked()?;
    let sides: Vec<(Side, &dyn DeviceBench)> = std::iter::once((Side::Candidate, candidate))
        .chain(control.map(|d| (Side::Control, d)))
        .collect();
    for &(side, device) in &sides {
        if device.execution() != Execution::Native {
            return Err(PerfError::Emulated {
                target: device.run_target(),
            });
        }
        if let Some(case) = cases.iter().find(|c| c.target != device.target()) {
            return Err(PerfError::WrongTarget {
                case: case.key.clone(),
                side,
                selected_for: case.target,
                device: device.name(),
                device_target: device.target(),
            });
        }
    }
    let mut prepared: Option<PreparedLayer> = None;
    let mut out = Vec::with_capacity(cases.len());
    for (i, case) in cases.iter().enumerate() {
        if stop() {
            progress(&format!("stopped before case {} of {}", i + 1, cases.len()));
            break;
        }
        let same = |p: &PreparedLayer| p.shape == case.key.shape && p.provider == case.key.provider;
        if !prepared.as_ref().is_some_and(same) {
            // The previous layer goes first: the largest are GB-sized.
            drop(prepared.take());
            progress(&format!(
                "data: {} {} (M up to {})",
                case.key.shape,
                case.key.provider,
                largest_m(cases, case)
            ));
            prepared = Some(prepare(cases, case)?);
        }
        let layer = prepared.as_mut().expect("prepared above");
        progress(&format!(
            "[{}/{}] {} {}",
            i + 1,
            cases.len(),
            case.key,
            case.label()
        ));
        let cand = measure_case(candidate, Side::Candidate, case, layer, plan)?;
        let ctrl = match control {
            Some(d) => Some(measure_case(d, Side::Control, case, layer, plan)?),
            None => None,
        };
        out.push((cand, ctrl));
    }
    Ok(out)
}

/// The largest M among the cases sharing `case`'s shape and provider.
pub(crate) fn largest_m(cases: &[PerfCase], case: &PerfCase) -> usize {
    cases
        .iter()
        .filter(|c| c.key.shape == case.key.shape && c.key.provider == case.key.provider)
        .map(|c| c.m)
        .max()
        .unwrap_or(case.m)
}

pub(crate) fn prepare(cases: &[PerfCase], case: &PerfCase) -> Result<PreparedLayer, PerfError> {
    let owner = cases
        .iter()
        .filter(|c| c.key.shape == case.key.shape && c.key.provider == case.key.provider)
        .max_by_key(|c| c.m)
        .unwrap_or(case);
    let spec = DataSpec {
        class: DataClass::Realistic,
        m: owner.m,
        shape: case.shape,
        dtype: case.dtype,
        symmetry: case.symmetry,
        with_bias: false,
    };
    // Seeded by the case id as the correctness run seeds it (the layer by its M-less key).
    let g = generate(&owner.case_id, &spec).map_err(|error| PerfError::Data {
        case: owner.key.clone(),
        case_id: owner.case_id.clone(),
        error: Box::new(error),
    })?;
    let rows = formats::RowPadding::from_rule(case.shape.k, case.padding_rule());
    let layer = ResidentLayer::from_logical(&g.layer, rows).map_err(|error| PerfError::Layout {
        case: owner.key.clone(),
        case_id: owner.case_id.clone(),
        error: Box::new(error),
    })?;
    Ok(PreparedLayer {
        shape: case.key.shape.clone(),
        provider: case.key.provider.clone(),
        layer,
        x: g.x,
        dense: [None, None],
    })
}

/// The first `m` rows of X, each `row_stride` elements apart (≥ K; the rest is poison).
pub(crate) fn leading_rows(x: &Activations, m: usize, row_stride: usize) -> Activations {
    let mut data = vec![x.dtype.poison_bits(); m.saturating_sub(1) * row_stride + x.k];
    for r in 0..m.min(x.m) {
        data[r * row_stride..r * row_stride + x.k]
            .copy_from_slice(&x.data[r * x.row_stride..r * x.row_stride + x.k]);
    }
    Activations {
        m,
        k: x.k,
        row_stride,
        dtype: x.dtype,
        data,
    }
}

/// The error for a device fault while timing `case` on `side`.
pub(crate) fn device_fault(
    case: &PerfCase,
    side: Side,
    during: String,
) -> impl FnOnce(DeviceFault) -> PerfError {
    let key = case.key.clone();
    move |fault| PerfError::Device {
        case: key,
        side,
        during,
        fault: Box::new(fault),
    }
}

/// The error for inputs the launch contract refused while preparing `case` on `side`.
pub(crate) fn refused(
    case: &PerfCase,
    side: Side,
    during: &str,
) -> impl FnOnce(ContractError) -> PerfError {
    let (key, during) = (case.key.clone(), during.to_string());
    move |error| PerfError::Contract {
        case: key,
        side,
        during,
        error: Box::new(error),
    }
}

/// One side's timing of one case: the selected path, then its control.
fn measure_case(
    device: &dyn DeviceBench,
    side: Side,
    case: &PerfCase,
    layer: &mut PreparedLayer,
    plan: PerfPlan,
) -> Result<Measured, PerfError> {
    let kernel = match case.path.as_slice() {
        [KernelId::Dequant, KernelId::Dense] => time_dense(device, side, case, layer, plan)?,
        [k @ (KernelId::Skinny | KernelId::Fused | KernelId::Fallback)] => {
            let d = decl(*k);
            let launch = KernelLaunch {
                decl: d,
                entry: &case.entry(d),
                geometry: None,
            };
            time_kernel(device, side, case, &case.path, layer, plan, launch)?
        }
        other => {
            return Err(PerfError::Path {
                case: case.key.clone(),
                path: other.iter().map(|k| k.name()).collect::<Vec<_>>().join("+"),
            });
        }
    };
    let control = case.control();
    let control_t = match control {
        ControlKind::CopyCeiling => {
            let bytes = case.traffic_bytes() as usize;
            device
                .bench_copy_rotating(bytes, plan.copies_for(2 * bytes as u64), plan.bench())
                .map_err(device_fault(
                    case,
                    side,
                    format!("the copy ceiling ({bytes} bytes)"),
                ))?
        }
        ControlKind::VendorBlas => time_dense(device, side, case, layer, plan)?,
    };
    Ok(Measured {
        key: case.key.clone(),
        kernel: case.label(),
        times_us: kernel.samples,
        control,
        control_us: control_t.samples,
        traffic_bytes: case.traffic_bytes(),
        flops: case.flops(),
    })
}

/// A kernel of the set as perf launches it: its declaration, the entry (a fused tile's own
/// variant in regret mode) and the geometry where not the declaration's own for the shape.
pub(crate) struct KernelLaunch<'a> {
    pub(crate) decl: &'a KernelDecl,
    pub(crate) entry: &'a str,
    pub(crate) geometry: Option<&'a LaunchGeometry>,
}

/// X as `path` reads it on `case`: the engine hands the fused kernel its per-call copy, padded
/// by the target's rule; the others read the caller's rows.
pub(crate) fn x_on_path(case: &PerfCase, path: &[KernelId], layer: &PreparedLayer) -> Activations {
    let stride =
        padding::x_row_stride_on_path(case.target, path, case.shape.k, case.dtype, case.padding);
    leading_rows(&layer.x, case.m, stride)
}

/// `launch`, a kernel of `path`, timed on `case`: X in the rows the path reads (the engine
/// hands the fused kernel its per-call copy, padded by the target's rule; the others read the
/// caller's rows), every launch on one of enough separately staged copies of the inputs to
/// read them cold.
pub(crate) fn time_kernel(
    device: &dyn DeviceBench,
    side: Side,
    case: &PerfCase,
    path: &[KernelId],
    layer: &PreparedLayer,
    plan: PerfPlan,
    launch: KernelLaunch<'_>,
) -> Result<Timing, PerfError> {
    let KernelLaunch {
        decl: d,
        entry,
        geometry,
    } = launch;
    let x = x_on_path(case, path, layer);
    let xb = XBuffer::as_laid_out(&x);
    let y = YSpec::dense(case.m, case.shape.n, case.dtype);
    let copies = (0..plan.copies_for(case.traffic_bytes()))
        .map(|_| DeviceInputs::gemm_strided(d, &layer.layer, &xb, y))
        .collect::<Result<Vec<_>, _>>()
        .map_err(refused(case, side, entry))?;
    let timed = match geometry {
        Some(g) => device.bench_kernel_rotating_at(d, entry, g, &copies, plan.bench()),
        None => device.bench_kernel_rotating(d, entry, &copies, plan.bench()),
    };
    timed.map_err(device_fault(case, side, format!("timing {entry}")))
}

/// The vendor BLAS on this side's dense copy of the weights (dequantized once per layer by the
/// side's own dequant kernel, as at load), X in the caller's rows.
pub(crate) fn time_dense(
    device: &dyn DeviceBench,
    side: Side,
    case: &PerfCase,
    layer: &mut PreparedLayer,
    plan: PerfPlan,
) -> Result<Timing, PerfError> {
    let dense = case.dense_spec();
    let slot = match side {
        Side::Candidate => 0,
        Side::Control => 1,
    };
    if layer.dense[slot].is_none() {
        let dq = decl(KernelId::Dequant);
        let inputs = DeviceInputs::dequant(dq, &layer.layer, dense)
            .map_err(refused(case, side, "dequant"))?;
        let entry = case.entry(dq);
        let copy = device.dequant(dq, &entry, &inputs).map_err(device_fault(
            case,
            side,
            format!("the dense copy ({entry})"),
        ))?;
        layer.dense[slot] = Some(copy.strided_bits);
    }
    let bits = layer.dense[slot].as_deref().expect("made above");
    let x = leading_rows(&layer.x, case.m, case.shape.k);
    let xb = XBuffer::as_laid_out(&x);
    let dn = decl(KernelId::Dense);
    let y = YSpec::dense(case.m, case.shape.n, case.dtype);
    let per_copy =
        (dense.n * dense.row_stride * 2 + case.m * (case.shape.k + case.shape.n) * 2) as u64;
    let copies = (0..PerfPlan::cold_copies(per_copy))
        .map(|_| DeviceInputs::dense_strided(dn, &xb, dense, bits, None, y))
        .collect::<Result<Vec<_>, _>>()
        .map_err(refused(case, side, "the dense GEMM"))?;
    device
        .bench_dense_gemm(dn, &copies, plan.bench())
        .map_err(device_fault(
            case,
            side,
            "timing the vendor BLAS".to_string(),
        ))
}

#[cfg(test)]
pub(crate) mod tests;
