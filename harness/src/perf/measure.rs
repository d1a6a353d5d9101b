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

use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};
use w4a16_kernels::decl::LaunchShape;
use w4a16_kernels::set::decl;
use w4a16_kernels::{Execution, KernelDecl, KernelId, RunTarget, Target};
use w4a16_reference::data::{DataClass, DataError, DataSpec, generate};
use w4a16_reference::formats::{self, LayoutError, ResidentLayer};
use w4a16_reference::layer::Symmetry;
use w4a16_reference::{ActDtype, Activations, LayerShape};

use super::key::{ControlKind, KernelLabel, Measured, PerfKey};
use crate::bench::Traffic;
use w4a16_cases::{Provider, RowPadding, Suite};
use w4a16_device::launch::DeviceInputs;
use w4a16_device::tensor::{DenseSpec, XBuffer, YSpec};
use w4a16_device::validate::ContractError;
use w4a16_device::{BenchPlan, DeviceBench, DeviceFault, Timing};
use w4a16_select::config::KernelConfig;
use w4a16_select::{LayerRequest, padding};

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

    fn bench(&self) -> BenchPlan {
        BenchPlan {
            warmup: self.warmup,
            iters: self.reps,
        }
    }
}

/// One dense case to time: the first case of the suite with its key, as the selection takes it
/// on `target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfCase {
    pub key: PerfKey,
    pub case_id: String,
    pub shape: LayerShape,
    pub m: usize,
    pub dtype: ActDtype,
    pub symmetry: Symmetry,
    /// The target the selection ran for (both devices must be it).
    pub target: Target,
    /// The case's row padding (the target's rule decides what it pads).
    pub padding: RowPadding,
    /// The kernels the selection runs per call: `[skinny]`, `[fused]`, `[dequant, dense]` or
    /// `[fallback]` (never empty: a case without a path is not timed).
    pub path: Vec<KernelId>,
}

impl PerfCase {
    fn launch_shape(&self) -> LaunchShape {
        LaunchShape {
            m: self.m,
            n: self.shape.n,
            k: self.shape.k,
            group: self.shape.group,
            dtype: self.dtype,
            asymmetric: self.symmetry == Symmetry::Asym,
            routing: None,
        }
    }

    /// The entry point `kernel` launches for this case.
    fn entry(&self, kernel: &KernelDecl) -> String {
        kernel.launch_entry(&self.launch_shape(), self.target)
    }

    /// `<kernel>:<entry>` per kernel of the path, joined by `+`; the vendor BLAS is `dense:blas`.
    pub fn label(&self) -> KernelLabel {
        let parts: Vec<String> = self
            .path
            .iter()
            .map(|&k| match k {
                KernelId::Dense => "dense:blas".to_string(),
                k => format!("{}:{}", k.name(), self.entry(decl(k))),
            })
            .collect();
        KernelLabel(parts.join("+"))
    }

    pub fn control(&self) -> ControlKind {
        ControlKind::for_m(self.m)
    }

    /// Logical bytes of one call (`bench::Traffic`: weights, scales, zero points, X, Y).
    pub fn traffic_bytes(&self) -> u64 {
        Traffic::gemm(self.shape, self.m, self.symmetry).total()
    }

    pub fn flops(&self) -> u64 {
        2 * self.m as u64 * self.shape.n as u64 * self.shape.k as u64
    }

    fn padding_rule(&self) -> formats::PaddingRule {
        padding::padding_rule(self.target, self.padding)
    }

    fn dense_spec(&self) -> DenseSpec {
        DenseSpec {
            n: self.shape.n,
            k: self.shape.k,
            row_stride: padding::dense_row_stride(
                self.target,
                self.shape.k,
                self.dtype,
                self.padding,
            ),
            dtype: self.dtype,
        }
    }
}

/// Why a case was not timed: MoE layers are `w4a16 bench --moe`'s.
pub const MOE_NOT_TIMED: &str = "a MoE case: `w4a16 bench --moe` times MoE layers";

/// The dense cases of `suite` keyed (provider, shape, M), the first case of each key, as the
/// selection takes them on `target` with `config`, sorted by shape, provider and M (each layer
/// is then generated once); and every case not timed with why (MoE, no provider for its dtype
/// and symmetry, no kernel takes it, or timed under an earlier case of the same key).
pub fn perf_cases(
    suite: &Suite,
    providers: &[Provider],
    target: Target,
    config: &KernelConfig,
) -> (Vec<PerfCase>, Vec<(String, String)>) {
    let mut timed: Vec<PerfCase> = Vec::new();
    let mut not_timed = Vec::new();
    let mut first_of: std::collections::HashMap<PerfKey, String> = Default::default();
    for case in &suite.cases {
        if case.moe.is_some() {
            not_timed.push((case.id.clone(), MOE_NOT_TIMED.to_string()));
            continue;
        }
        let Some(provider) = providers
            .iter()
            .find(|p| p.dtype == case.dtype && p.symmetry == case.symmetry)
        else {
            not_timed.push((
                case.id.clone(),
                format!(
                    "no provider for {}/{} (cases/models.toml [[provider]])",
                    case.dtype.name(),
                    case.symmetry.name()
                ),
            ));
            continue;
        };
        let key = PerfKey {
            provider: provider.name.clone(),
            shape: case.shape_name.clone(),
            m: case.m,
        };
        if let Some(first) = first_of.get(&key) {
            not_timed.push((
                case.id.clone(),
                format!("same key {key} as {first}, timed once"),
            ));
            continue;
        }
        // The plain layer (see the module doc): no bias; act-order stays, as no kernel takes it.
        let mut req = LayerRequest::from_case_under(case, config);
        req.bias = false;
        let sel = w4a16_select::select(target, &req, config);
        if sel.path.is_empty() {
            not_timed.push((
                case.id.clone(),
                format!("no kernel takes the layer: {}", sel.rejection_list()),
            ));
            continue;
        }
        first_of.insert(key.clone(), case.id.clone());
        timed.push(PerfCase {
            key,
            case_id: case.id.clone(),
            shape: case.shape,
            m: case.m,
            dtype: case.dtype,
            symmetry: case.symmetry,
            target,
            padding: case.padding,
            path: sel.path,
        });
    }
    timed.sort_by(|a, b| {
        (&a.key.shape, &a.key.provider, a.key.m).cmp(&(&b.key.shape, &b.key.provider, b.key.m))
    });
    (timed, not_timed)
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
    #[error("{case}: the selected path {path} is not one perf knows how to time")]
    Path { case: PerfKey, path: String },
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
struct PreparedLayer {
    shape: String,
    provider: String,
    layer: ResidentLayer,
    /// X at the largest M; each case takes its leading rows.
    x: Activations,
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
fn largest_m(cases: &[PerfCase], case: &PerfCase) -> usize {
    cases
        .iter()
        .filter(|c| c.key.shape == case.key.shape && c.key.provider == case.key.provider)
        .map(|c| c.m)
        .max()
        .unwrap_or(case.m)
}

fn prepare(cases: &[PerfCase], case: &PerfCase) -> Result<PreparedLayer, PerfError> {
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
fn leading_rows(x: &Activations, m: usize, row_stride: usize) -> Activations {
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
fn device_fault(
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
fn refused(case: &PerfCase, side: Side, during: &str) -> impl FnOnce(ContractError) -> PerfError {
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
            let entry = case.entry(d);
            // The engine hands the fused kernel its per-call copy of X (padded by the target's
            // rule); the others read the caller's rows.
            let stride = padding::x_row_stride_on_path(
                case.target,
                &case.path,
                case.shape.k,
                case.dtype,
                case.padding,
            );
            let x = leading_rows(&layer.x, case.m, stride);
            let xb = XBuffer::as_laid_out(&x);
            let y = YSpec::dense(case.m, case.shape.n, case.dtype);
            let copies = (0..plan.copies_for(case.traffic_bytes()))
                .map(|_| DeviceInputs::gemm_strided(d, &layer.layer, &xb, y))
                .collect::<Result<Vec<_>, _>>()
                .map_err(refused(case, side, &entry))?;
            device
                .bench_kernel_rotating(d, &entry, &copies, plan.bench())
                .map_err(device_fault(case, side, format!("timing {entry}")))?
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

/// The vendor BLAS on this side's dense copy of the weights (dequantized once per layer by the
/// side's own dequant kernel, as at load), X in the caller's rows.
fn time_dense(
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
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use w4a16_cases::{CarrierMode, Case, DEFAULT_PRODUCER, ViewLayout};
    use w4a16_device::{simulated, stand_in::StandInDevice};
    use w4a16_select::config::PrefillDequant;

    fn providers() -> Vec<Provider> {
        let p = |name: &str, dtype, symmetry| Provider {
            name: name.into(),
            dtype,
            symmetry,
        };
        vec![
            p("hybrid-w4a16", ActDtype::F16, Symmetry::Sym),
            p("hybrid-w4a16-zp", ActDtype::F16, Symmetry::Asym),
            p("hybrid-w4a16-bf16", ActDtype::Bf16, Symmetry::Sym),
        ]
    }

    fn case(shape_name: &str, shape: LayerShape, m: usize, dtype: ActDtype, sym: Symmetry) -> Case {
        let mut c = Case {
            id: String::new(),
            suite: "perf-test".into(),
            shape_name: shape_name.into(),
            shape,
            m,
            dtype,
            symmetry: sym,
            class: DataClass::Realistic,
            padding: RowPadding::CacheCliff,
            bias: false,
            act_order: false,
            producer: DEFAULT_PRODUCER,
            x_layout: ViewLayout::default(),
            y_layout: ViewLayout::default(),
            carrier: CarrierMode::Off,
            moe: None,
        };
        c.id = c.make_id();
        c
    }

    fn suite(cases: Vec<Case>) -> Suite {
        Suite {
            name: "perf-test".into(),
            description: String::new(),
            file: "perf-test.toml".into(),
            allow_unsupported: true,
            isa_emulator_max_macs: None,
            isa_emulator_sweep_budgets: Default::default(),
            cases,
        }
    }

    const SMALL: LayerShape = LayerShape {
        n: 64,
        k: 256,
        group: 128,
    };

    /// M = 1 (skinny), 8 (fused) and 256 (the dense cache, built) of one small layer, f16 sym,
    /// listed out of order.
    fn small_cases() -> Vec<PerfCase> {
        let cases = [256, 1, 8]
            .map(|m| case("t.small", SMALL, m, ActDtype::F16, Symmetry::Sym))
            .to_vec();
        let config = KernelConfig::with_prefill_dequant(PrefillDequant::Enable);
        let (timed, not_timed) = perf_cases(&suite(cases), &providers(), Target::Sm90, &config);
        assert!(not_timed.is_empty(), "{not_timed:?}");
        timed
    }

    #[test]
    fn rotations_span_the_cold_footprint_within_the_copy_limits() {
        let plan = PerfPlan::default();
        // qwen3-8b.o_proj: ~8.4 MB of int4 weights per copy needs 16 copies, not 8.
        let small = 8_650_752u64;
        let n = plan.copies_for(small);
        assert_eq!(n, 16);
        assert!(n as u64 * small >= PerfPlan::COLD_FOOTPRINT_BYTES);
        assert!((n as u64 - 1) * small < PerfPlan::COLD_FOOTPRINT_BYTES);
        // Large layers keep the plan's minimum; tiny ones stop at the limit.
        assert_eq!(plan.copies_for(1 << 30), plan.copies);
        assert_eq!(plan.copies_for(1024), PerfPlan::MAX_COPIES);
        // The dense control: one copy once a copy is big enough on its own.
        assert_eq!(PerfPlan::cold_copies(1 << 30), 1);
        assert_eq!(PerfPlan::cold_copies(32 << 20), 4);
        assert_eq!(PerfPlan::cold_copies(0), PerfPlan::MAX_COPIES);
    }

    #[test]
    fn the_plan_takes_9_to_30_repetitions_and_at_least_one_copy() {
        assert_eq!(PerfPlan::default().checked().unwrap(), PerfPlan::default());
        for reps in [9, 15, 30] {
            let p = PerfPlan {
                reps,
                ..PerfPlan::default()
            };
            assert_eq!(p.checked().unwrap().reps, reps);
        }
        for reps in [0, 8, 31] {
            let p = PerfPlan {
                reps,
                ..PerfPlan::default()
            };
            let e = p.checked().unwrap_err();
            assert!(
                matches!(e, PerfError::Reps { reps: r, min: 9, max: 30 } if r == reps),
                "{e}"
            );
            assert!(e.to_string().contains(&format!("--reps {reps}")), "{e}");
        }
        let e = PerfPlan {
            copies: 0,
            ..PerfPlan::default()
        }
        .checked()
        .unwrap_err();
        assert!(matches!(e, PerfError::NoCopies), "{e}");
    }

    #[test]
    fn the_field_suite_is_every_shape_at_every_m_for_every_provider() {
        let set = w4a16_cases::load_all(&w4a16_cases::locate(None).unwrap()).unwrap();
        let field = set.suite("field").unwrap();
        let (timed, not_timed) = perf_cases(
            field,
            set.providers(),
            Target::Sm90,
            &KernelConfig::default(),
        );
        let distinct =
            |f: &dyn Fn(&Case) -> String| field.cases.iter().map(f).collect::<BTreeSet<_>>().len();
        let shapes = distinct(&|c| c.shape_name.clone());
        let ms = distinct(&|c| c.m.to_string());
        let providers = distinct(&|c| format!("{:?}/{:?}", c.dtype, c.symmetry));
        assert_eq!(providers, set.providers().len());
        assert_eq!(timed.len(), shapes * ms * providers);
        // docs/contract.md §7 as the case files spell it today: 38 shapes × 14 M × 4 providers.
        assert_eq!((shapes, ms, providers), (38, 14, 4));
        assert!(
            not_timed.is_empty(),
            "{:?}",
            &not_timed[..not_timed.len().min(3)]
        );
        let keys: BTreeSet<&PerfKey> = timed.iter().map(|c| &c.key).collect();
        assert_eq!(keys.len(), timed.len(), "one case per key");
        // Sorted by shape, provider, M: each layer's cases are adjacent.
        for w in timed.windows(2) {
            let k = |c: &PerfCase| (c.key.shape.clone(), c.key.provider.clone(), c.m);
            assert!(k(&w[0]) < k(&w[1]), "{} before {}", w[0].key, w[1].key);
        }
        for c in &timed {
            let expected = match c.m {
                1..=5 => vec![KernelId::Skinny],
                _ => vec![KernelId::Fused],
            };
            assert_eq!(c.path, expected, "{} (prefill dequant off)", c.key);
            assert_eq!(c.control(), ControlKind::for_m(c.m));
        }
    }

    #[test]
    fn moe_cases_are_listed_as_not_timed_with_the_reason() {
        let set = w4a16_cases::load_all(&w4a16_cases::locate(None).unwrap()).unwrap();
        let moe = set.suite("moe").unwrap();
        let (timed, not_timed) =
            perf_cases(moe, set.providers(), Target::Sm90, &KernelConfig::default());
        let moe_ids: BTreeSet<&str> = moe
            .cases
            .iter()
            .filter(|c| c.moe.is_some())
            .map(|c| c.id.as_str())
            .collect();
        assert!(!moe_ids.is_empty());
        let listed: BTreeSet<&str> = not_timed
            .iter()
            .filter(|(_, why)| why == MOE_NOT_TIMED)
            .map(|(id, _)| id.as_str())
            .collect();
        assert_eq!(listed, moe_ids);
        assert!(timed.iter().all(|c| !moe_ids.contains(c.case_id.as_str())));
    }

    #[test]
    fn duplicates_missing_providers_and_pathless_cases_are_not_timed() {
        let plain = case("t.small", SMALL, 2, ActDtype::F16, Symmetry::Sym);
        let mut with_bias = plain.clone();
        with_bias.bias = true;
        with_bias.id = with_bias.make_id();
        let no_provider = case("t.small", SMALL, 2, ActDtype::Bf16, Symmetry::Asym);
        let mut act_order = case("t.other", SMALL, 2, ActDtype::F16, Symmetry::Sym);
        act_order.act_order = true;
        act_order.id = act_order.make_id();
        let s = suite(vec![
            plain.clone(),
            with_bias.clone(),
            no_provider.clone(),
            act_order.clone(),
        ]);
        let (timed, not_timed) =
            perf_cases(&s, &providers(), Target::Sm90, &KernelConfig::default());
        assert_eq!(timed.len(), 1);
        assert_eq!(timed[0].case_id, plain.id, "the first case of a key wins");
        assert_eq!(timed[0].key.to_string(), "hybrid-w4a16/t.small/M=2");
        let reason = |id: &str| {
            not_timed
                .iter()
                .find(|(i, _)| i == id)
                .map(|(_, why)| why.as_str())
                .unwrap_or_else(|| panic!("{id} not listed: {not_timed:?}"))
        };
        assert!(reason(&with_bias.id).contains(&plain.id));
        assert!(reason(&no_provider.id).contains("no provider for bf16/asym"));
        assert!(reason(&act_order.id).contains("act-order"));
        assert_eq!(not_timed.len(), 3);
    }

    #[test]
    fn labels_name_each_kernel_of_the_path_with_its_entry() {
        let timed = small_cases();
        let labels: Vec<(usize, String)> = timed.iter().map(|c| (c.m, c.label().0)).collect();
        assert_eq!(labels[0], (1, "skinny:w4a16_skinny_f16".to_string()));
        assert_eq!(labels[1].0, 8);
        assert!(
            labels[1].1.starts_with("fused:w4a16_fused_f16_"),
            "{labels:?}"
        );
        assert_eq!(
            labels[2],
            (256, "dequant:w4a16_dequant_f16+dense:blas".to_string())
        );
    }

    #[test]
    fn both_sides_time_the_path_and_its_control_case_by_case() {
        let timed = small_cases();
        let (cand, ctrl) = (
            simulated::device(false, true),
            simulated::device(false, true),
        );
        let plan = PerfPlan {
            reps: 9,
            warmup: 2,
            copies: 3,
        };
        let mut said = Vec::new();
        let out = measure_suite(cand.as_ref(), Some(ctrl.as_ref()), &timed, plan, &mut |s| {
            said.push(s.to_string())
        })
        .unwrap();
        assert_eq!(out.len(), 3);
        assert_eq!(
            said.iter().filter(|s| s.starts_with("data: ")).count(),
            1,
            "one layer for the three M: {said:?}"
        );
        for ((m, c), case) in out.iter().zip(&timed) {
            let c = c.as_ref().expect("a control side");
            for side in [m, c] {
                assert_eq!(side.key, case.key);
                assert_eq!(side.kernel, case.label());
                assert_eq!(side.times_us.len(), 9);
                assert_eq!(side.control_us.len(), 9);
                assert_eq!(side.control, ControlKind::for_m(case.m));
                assert_eq!(side.flops, 2 * case.m as u64 * 64 * 256);
                assert_eq!(
                    side.traffic_bytes,
                    Traffic::gemm(SMALL, case.m, Symmetry::Sym).total()
                );
            }
        }
        // The simulator times a kernel launch at 10 µs, a copy or a BLAS call at nothing.
        assert_eq!(out[0].0.times_us, vec![10.0; 9], "skinny");
        assert_eq!(out[1].0.times_us, vec![10.0; 9], "fused");
        assert_eq!(
            out[2].0.times_us,
            vec![0.0; 9],
            "the dense path is the BLAS alone"
        );
        assert_eq!(
            out[0].0.traffic_bytes,
            64 * 128 + 64 * 2 * 2 + 256 * 2 + 64 * 2
        );
    }

    #[test]
    fn a_device_fault_names_the_case_and_the_side() {
        let timed = small_cases();
        let (ok, sticky) = (
            simulated::device(false, true),
            simulated::device(true, true),
        );
        let e = measure_suite(
            sticky.as_ref(),
            None,
            &timed,
            PerfPlan::default(),
            &mut |_| {},
        )
        .unwrap_err();
        assert!(
            matches!(&e, PerfError::Device { case, side: Side::Candidate, .. } if *case == timed[0].key),
            "{e}"
        );
        let e = measure_suite(
            ok.as_ref(),
            Some(sticky.as_ref()),
            &timed,
            PerfPlan::default(),
            &mut |_| {},
        )
        .unwrap_err();
        assert!(
            matches!(
                &e,
                PerfError::Device {
                    side: Side::Control,
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().contains("hybrid-w4a16/t.small/M=1 (control)"),
            "{e}"
        );
        // Without the vendor BLAS the M > 5 control cannot be taken: M = 8's, after M = 1.
        let no_blas = simulated::device(false, false);
        let e = measure_suite(
            no_blas.as_ref(),
            None,
            &timed,
            PerfPlan::default(),
            &mut |_| {},
        )
        .unwrap_err();
        match &e {
            PerfError::Device { case, fault, .. } => {
                assert_eq!(case.m, 8);
                assert!(
                    matches!(&**fault, DeviceFault::MissingCapability { .. }),
                    "{e}"
                );
            }
            _ => panic!("{e}"),
        }
    }

    #[test]
    fn devices_of_another_target_or_a_bad_plan_are_refused_before_any_timing() {
        let timed = small_cases();
        let gfx = StandInDevice::new(Target::Gfx1151);
        let e = measure_suite(&gfx, None, &timed, PerfPlan::default(), &mut |_| {}).unwrap_err();
        assert!(
            matches!(
                &e,
                PerfError::WrongTarget {
                    selected_for: Target::Sm90,
                    device_target: Target::Gfx1151,
                    ..
                }
            ),
            "{e}"
        );
        let sim = simulated::device(false, true);
        let bad = PerfPlan {
            reps: 40,
            ..PerfPlan::default()
        };
        let mut said = 0;
        let e = measure_suite(sim.as_ref(), None, &timed, bad, &mut |_| said += 1).unwrap_err();
        assert!(matches!(e, PerfError::Reps { reps: 40, .. }), "{e}");
        assert_eq!(said, 0);
    }
}
