//! The speed benchmark of issue 3: `skinny` against the device's own copy bandwidth, `fused`
//! against the vendor BLAS on the dequantized copy, all in one run on one device.
//!
//! Conventions (also written into every report, so a table never travels without them):
//! - the copy ceiling counts read + write bytes: a copy of B bytes moves 2·B through memory;
//! - a GEMM's traffic is the logical bytes it must touch once: int4 weights N·K/2, scales
//!   N·(K/G)·2, packed zero points (N/8)·(K/G)·4 (asymmetric only), X M·K·2 and Y M·N·2; row
//!   padding is not counted;
//! - TFLOP/s = 2·M·N·K / t, for the fused kernel and the BLAS alike (dequantization not counted);
//! - times are medians of per-launch device-event intervals, with warm-up launches left queued
//!   so that each interval holds device time, not the host's enqueue latency;
//! - the int4 weights (~29 MB here) would fit in the H200's L2, so `skinny` and `fused` rotate
//!   through [`BenchSuite::weight_copies`] separately allocated copies of all their inputs:
//!   each launch reads buffers that several launches' worth of other data have passed through
//!   the cache since (cold reads, as a decode step sees its weights). The dense copy (N·K·2
//!   bytes, ~117 MB) is larger than L2 on its own and is not rotated.

pub mod moe;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use serde::Serialize;
use w4a16_kernels::set::decl;
use w4a16_kernels::{KernelDecl, KernelId};
use w4a16_reference::data::{DataClass, DataError, DataSpec, generate};
use w4a16_reference::formats::{
    LayoutError, PaddingRule, ResidentLayer, RowPadding, dense_row_stride_elems,
};
use w4a16_reference::layer::Symmetry;
use w4a16_reference::{ActDtype, Activations, LayerShape};

use crate::device::{Allocation, BenchPlan, Device, DeviceFault, Timing, open_default_with};
use crate::launch::DeviceInputs;
use crate::tensor::{DenseSpec, YSpec};
use crate::validate::ContractError;
use w4a16_kernels::source::KernelSources;

/// The plan `w4a16 bench` uses. The warm-up launches stay queued ahead of the timed ones, so
/// they must outlast the host: 200 `skinny` launches (~1.5 ms of device work) keep the queue
/// full through 100 timed launches even if each costs the host a few microseconds more to
/// enqueue (launch + two events) than the device takes to run it.
pub const CLI_PLAN: BenchPlan = BenchPlan {
    warmup: 200,
    iters: 100,
};

/// Issue 3's targets.
pub const SKINNY_OF_COPY_TARGET: f64 = 0.75;
pub const SKINNY_M5_OVER_M1_TARGET: f64 = 1.3;
pub const FUSED_OVER_DENSE_TARGET: f64 = 0.4;

/// One `skinny` measurement to take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SkinnyCase {
    pub m: usize,
    pub dtype: ActDtype,
    pub symmetry: Symmetry,
}

/// One `fused` measurement, with the dense path of the same problem beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FusedCase {
    pub m: usize,
    pub dtype: ActDtype,
}

/// What to measure.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchSuite {
    pub shape: LayerShape,
    /// Bytes of the device-to-device copy that sets the bandwidth ceiling.
    pub copy_bytes: usize,
    /// Separately allocated copies of each GEMM's inputs, launched in turn.
    pub weight_copies: usize,
    pub skinny: Vec<SkinnyCase>,
    pub fused: Vec<FusedCase>,
}

impl BenchSuite {
    /// Issue 3: K = 4096, N = 14336, G = 128; a 1 GiB copy; `skinny` at M = 1..5 in fp16 and
    /// bf16 (symmetric) plus M = 1 asymmetric; `fused` at M = 2048 in fp16 and bf16. Eight
    /// rotated copies put ~240 MB of weights between two reads of the same buffer.
    pub fn issue3() -> Self {
        let mut skinny = Vec::new();
        for dtype in [ActDtype::F16, ActDtype::Bf16] {
            for m in 1..=5 {
                skinny.push(SkinnyCase {
                    m,
                    dtype,
                    symmetry: Symmetry::Sym,
                });
            }
            skinny.push(SkinnyCase {
                m: 1,
                dtype,
                symmetry: Symmetry::Asym,
            });
        }
        BenchSuite {
            shape: LayerShape::new(14336, 4096, 128),
            copy_bytes: 1 << 30,
            weight_copies: 8,
            skinny,
            fused: vec![
                FusedCase {
                    m: 2048,
                    dtype: ActDtype::F16,
                },
                FusedCase {
                    m: 2048,
                    dtype: ActDtype::Bf16,
                },
            ],
        }
    }
}

/// Bytes a GEMM must move once (see the module conventions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Traffic {
    pub weights: u64,
    pub scales: u64,
    pub zero_points: u64,
    pub x: u64,
    pub y: u64,
}

impl Traffic {
    pub fn gemm(shape: LayerShape, m: usize, symmetry: Symmetry) -> Self {
        let (n, k) = (shape.n as u64, shape.k as u64);
        let groups = shape.groups() as u64;
        Traffic {
            weights: n * k / 2,
            scales: n * groups * 2,
            zero_points: match symmetry {
                Symmetry::Sym => 0,
                Symmetry::Asym => n.div_ceil(8) * groups * 4,
            },
            x: m as u64 * k * 2,
            y: m as u64 * n * 2,
        }
    }

    pub fn total(&self) -> u64 {
        self.weights + self.scales + self.zero_points + self.x + self.y
    }
}

/// Bytes per microsecond is 10⁶ bytes per second; GB/s is 10⁹.
pub fn gb_per_s(bytes: u64, us: f64) -> f64 {
    bytes as f64 / us / 1e3
}

/// The copy ceiling: a copy of `bytes` reads and writes them.
pub fn copy_gb_per_s(bytes: u64, us: f64) -> f64 {
    gb_per_s(2 * bytes, us)
}

/// 2·M·N·K floating-point operations in `us` microseconds.
pub fn tflop_per_s(m: usize, n: usize, k: usize, us: f64) -> f64 {
    2.0 * m as f64 * n as f64 * k as f64 / us / 1e6
}

/// Median, min and max of a [`Timing`] (the samples stay out of the report).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TimeUs {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl From<&Timing> for TimeUs {
    fn from(t: &Timing) -> Self {
        TimeUs {
            median: t.median_us,
            min: t.min_us,
            max: t.max_us,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CopyResult {
    pub bytes: u64,
    pub time_us: TimeUs,
    /// Read + write bytes per second.
    pub gb_per_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SkinnyResult {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub group: usize,
    pub dtype: &'static str,
    pub symmetry: &'static str,
    pub entry: String,
    pub time_us: TimeUs,
    pub traffic: Traffic,
    pub bytes: u64,
    pub gb_per_s: f64,
    /// `gb_per_s` over the copy ceiling's.
    pub of_copy: f64,
    /// Median time over the M = 1 median of the same dtype and symmetry, where measured.
    pub over_m1: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FusedResult {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub group: usize,
    pub dtype: &'static str,
    pub entry: String,
    pub fused_us: TimeUs,
    pub fused_tflop_per_s: f64,
    /// The vendor BLAS on the dequantized copy (the GEMM only).
    pub dense_us: TimeUs,
    pub dense_tflop_per_s: f64,
    /// Fused TFLOP/s over dense TFLOP/s (= dense time over fused time).
    pub fused_over_dense: f64,
    /// The dequant kernel that makes the dense copy (once per weight update in a real model).
    pub dequant_us: TimeUs,
}

/// One of issue 3's targets, evaluated.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TargetCheck {
    pub what: String,
    pub value: f64,
    /// `">= 0.75"` or `"<= 1.3"`.
    pub target: String,
    pub met: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchReport {
    pub device: String,
    pub target: String,
    pub warmup: usize,
    pub iters: usize,
    pub weight_copies: usize,
    pub conventions: Vec<String>,
    pub copy: CopyResult,
    pub skinny: Vec<SkinnyResult>,
    pub fused: Vec<FusedResult>,
    pub targets: Vec<TargetCheck>,
}

/// Why a benchmark run stopped; each names the measurement it was taking.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{during}: {fault}")]
    Device { during: String, fault: DeviceFault },
    #[error("{during}: the launch was refused: {error}")]
    Contract {
        during: String,
        error: ContractError,
    },
    #[error("generating the data of {case}: {error}")]
    Data { case: String, error: DataError },
    #[error("laying out the weights of {case}: {error}")]
    Layout { case: String, error: LayoutError },
    #[error("the suite has no {what}; the report needs it")]
    EmptySuite { what: &'static str },
    #[error("the MoE layer of {case}: {error}")]
    MoeLayer {
        case: String,
        error: w4a16_reference::moe::MoeLayerError,
    },
    #[error("the routing of {case}: {error}")]
    Routing {
        case: String,
        error: w4a16_reference::moe::RoutingError,
    },
}

fn dev(during: impl FnOnce() -> String) -> impl FnOnce(DeviceFault) -> BenchError {
    move |fault| BenchError::Device {
        during: during(),
        fault,
    }
}

/// Raw measurements of one `skinny` case.
#[derive(Clone, Debug)]
pub struct SkinnyTiming {
    pub case: SkinnyCase,
    pub entry: String,
    pub timing: Timing,
}

/// Raw measurements of one `fused` case and its dense path.
#[derive(Clone, Debug)]
pub struct FusedTiming {
    pub case: FusedCase,
    pub entry: String,
    pub fused: Timing,
    pub dense: Timing,
    pub dequant: Timing,
}

/// Identity and settings of a run, for the report header.
#[derive(Clone, Debug)]
pub struct RunInfo {
    pub device: String,
    pub target: String,
    pub plan: BenchPlan,
    pub weight_copies: usize,
}

/// Issue 3's suite on `device`.
pub fn run_benchmarks(device: &dyn Device, plan: BenchPlan) -> Result<BenchReport, BenchError> {
    run_suite(device, &BenchSuite::issue3(), plan)
}

/// Measures `suite` on `device` and computes the report.
pub fn run_suite(
    device: &dyn Device,
    suite: &BenchSuite,
    plan: BenchPlan,
) -> Result<BenchReport, BenchError> {
    let target = device.target();
    let shape = suite.shape;
    let copies = suite.weight_copies.max(1);
    progress(&format!(
        "copy ceiling: {} MiB device to device",
        suite.copy_bytes >> 20
    ));
    let copy = device.bench_copy(suite.copy_bytes, plan).map_err(dev(|| {
        format!("benchmark of a {}-byte copy", suite.copy_bytes)
    }))?;

    // One layer per (dtype, symmetry), with X for the largest M that uses it.
    let padding_rule = if target.pads_cache_cliff() {
        PaddingRule::CacheCliff
    } else {
        PaddingRule::None
    };
    let mut wanted: Vec<(ActDtype, Symmetry, usize)> = Vec::new();
    let uses = suite
        .skinny
        .iter()
        .map(|c| (c.dtype, c.symmetry, c.m))
        .chain(suite.fused.iter().map(|c| (c.dtype, Symmetry::Sym, c.m)));
    for (dtype, symmetry, m) in uses {
        match wanted
            .iter_mut()
            .find(|(d, s, _)| *d == dtype && *s == symmetry)
        {
            Some(w) => w.2 = w.2.max(m),
            None => wanted.push((dtype, symmetry, m)),
        }
    }
    let mut layers = Vec::with_capacity(wanted.len());
    for (dtype, symmetry, m) in wanted {
        let case = format!(
            "bench/k{}.n{}/{}/{}/g{}/realistic",
            shape.k,
            shape.n,
            dtype.name(),
            symmetry.name(),
            shape.group
        );
        progress(&format!("data: {case} (M up to {m})"));
        let spec = DataSpec {
            class: DataClass::Realistic,
            m,
            shape,
            dtype,
            symmetry,
            with_bias: false,
        };
        let g = generate(&case, &spec).map_err(|error| BenchError::Data {
            case: case.clone(),
            error,
        })?;
        let layer =
            ResidentLayer::from_logical(&g.layer, RowPadding::from_rule(shape.k, padding_rule))
                .map_err(|error| BenchError::Layout { case, error })?;
        layers.push((dtype, symmetry, layer, g.x));
    }
    let find = |dtype: ActDtype, symmetry: Symmetry| {
        let (_, _, layer, x) = layers
            .iter()
            .find(|(d, s, _, _)| *d == dtype && *s == symmetry)
            .expect("every case's layer was generated above");
        (layer, x)
    };

    let mut skinny = Vec::new();
    for c in &suite.skinny {
        let (layer, x_all) = find(c.dtype, c.symmetry);
        let x = first_rows(x_all, c.m);
        let what = || format!("skinny M={} {} {}", c.m, c.dtype.name(), c.symmetry.name());
        progress(&what());
        let (entry, timing) = bench_rotating(
            device,
            decl(KernelId::Skinny),
            layer,
            &x,
            copies,
            plan,
            &what(),
        )?;
        skinny.push(SkinnyTiming {
            case: *c,
            entry,
            timing,
        });
    }

    let mut fused = Vec::new();
    for c in &suite.fused {
        let (layer, x_all) = find(c.dtype, Symmetry::Sym);
        let x = first_rows(x_all, c.m);
        let what = || format!("fused M={} {}", c.m, c.dtype.name());
        progress(&what());
        let (entry, fused_t) = bench_rotating(
            device,
            decl(KernelId::Fused),
            layer,
            &x,
            copies,
            plan,
            &what(),
        )?;
        progress(&format!("dense path M={} {}", c.m, c.dtype.name()));
        let (dequant, dense) = bench_dense_path(device, layer, &x, padding_rule, plan)?;
        fused.push(FusedTiming {
            case: *c,
            entry,
            fused: fused_t,
            dense,
            dequant,
        });
    }

    let info = RunInfo {
        device: device.name(),
        target: target.to_string(),
        plan,
        weight_copies: copies,
    };
    build_report(
        &info,
        shape,
        suite.copy_bytes as u64,
        &copy,
        &skinny,
        &fused,
    )
}

fn progress(what: &str) {
    eprintln!("bench: {what}");
}

/// The first `m` rows of X, unpadded.
fn first_rows(x: &Activations, m: usize) -> Activations {
    let mut data = Vec::with_capacity(m * x.k);
    for r in 0..m.min(x.m) {
        data.extend_from_slice(&x.data[r * x.row_stride..r * x.row_stride + x.k]);
    }
    Activations {
        m,
        k: x.k,
        row_stride: x.k,
        dtype: x.dtype,
        data,
    }
}

fn bench_rotating(
    device: &dyn Device,
    kernel: &KernelDecl,
    layer: &ResidentLayer,
    x: &Activations,
    copies: usize,
    plan: BenchPlan,
    what: &str,
) -> Result<(String, Timing), BenchError> {
    let y = YSpec::dense(x.m, layer.shape.n, layer.dtype);
    let inputs = (0..copies)
        .map(|_| DeviceInputs::gemm(kernel, layer, x, y))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| BenchError::Contract {
            during: what.to_string(),
            error,
        })?;
    let entry = kernel.launch_entry(&inputs[0].validated().shape, device.target());
    let t = device
        .bench_kernel_rotating(kernel, &entry, &inputs, plan)
        .map_err(dev(|| format!("{what} ({entry})")))?;
    Ok((entry, t))
}

/// Dequantizes once, then times the BLAS GEMM on that copy; also times the dequant launch.
fn bench_dense_path(
    device: &dyn Device,
    layer: &ResidentLayer,
    x: &Activations,
    rule: PaddingRule,
    plan: BenchPlan,
) -> Result<(Timing, Timing), BenchError> {
    let LayerShape { n, k, .. } = layer.shape;
    let dtype = layer.dtype;
    let dense = DenseSpec {
        n,
        k,
        row_stride: dense_row_stride_elems(k, rule),
        dtype,
    };
    let refused = |what: &str| {
        let what = what.to_string();
        move |error| BenchError::Contract {
            during: what,
            error,
        }
    };
    let dq = decl(KernelId::Dequant);
    let dq_inputs = DeviceInputs::dequant(dq, layer, dense).map_err(refused("dequant"))?;
    let dq_entry = dq.launch_entry(&dq_inputs.validated().shape, device.target());
    let copy = device
        .dequant(dq, &dq_entry, &dq_inputs)
        .map_err(dev(|| format!("dequant ({dq_entry})")))?;
    let dequant_t = device
        .bench_kernel(dq, &dq_entry, &dq_inputs, plan)
        .map_err(dev(|| format!("benchmark of dequant ({dq_entry})")))?;
    let dn = decl(KernelId::Dense);
    let y = YSpec::dense(x.m, n, dtype);
    let dn_inputs = DeviceInputs::dense(dn, x, dense, &copy.strided_bits, None, y)
        .map_err(refused("dense GEMM"))?;
    let dense_t = device
        .bench_dense_gemm(dn, std::slice::from_ref(&dn_inputs), plan)
        .map_err(dev(|| "benchmark of the dense GEMM".to_string()))?;
    Ok((dequant_t, dense_t))
}

/// The conventions every report carries.
pub fn conventions(weight_copies: usize) -> Vec<String> {
    vec![
        "copy GB/s counts read + write: 2 x bytes copied / time".into(),
        "GEMM bytes = int4 weights N*K/2 + scales N*(K/G)*2 + packed zero points (N/8)*(K/G)*4 \
         (asym only) + x M*K*2 + y M*N*2; no row padding"
            .into(),
        "GB/s = bytes / median time; of_copy = GB/s / copy GB/s".into(),
        "TFLOP/s = 2*M*N*K / median time; dense = vendor BLAS GEMM on the dequantized copy, \
         dequant timed separately"
            .into(),
        format!(
            "skinny and fused rotate through {weight_copies} separately allocated input copies \
             (cold weights); the dense copy is larger than L2 and is not rotated"
        ),
        "time = median of per-launch device-event intervals after queued warm-up".into(),
    ]
}

/// Turns raw timings into the report: bytes, rates, ratios and issue 3's targets.
pub fn build_report(
    info: &RunInfo,
    shape: LayerShape,
    copy_bytes: u64,
    copy: &Timing,
    skinny: &[SkinnyTiming],
    fused: &[FusedTiming],
) -> Result<BenchReport, BenchError> {
    let copy = CopyResult {
        bytes: copy_bytes,
        time_us: copy.into(),
        gb_per_s: copy_gb_per_s(copy_bytes, copy.median_us),
    };
    if !(copy.gb_per_s.is_finite() && copy.gb_per_s > 0.0) {
        return Err(BenchError::EmptySuite {
            what: "copy ceiling with a positive time",
        });
    }
    let m1 = |dtype: ActDtype, symmetry: Symmetry| {
        skinny
            .iter()
            .find(|s| s.case.m == 1 && s.case.dtype == dtype && s.case.symmetry == symmetry)
            .map(|s| s.timing.median_us)
    };
    let skinny: Vec<SkinnyResult> = skinny
        .iter()
        .map(|s| {
            let traffic = Traffic::gemm(shape, s.case.m, s.case.symmetry);
            let bytes = traffic.total();
            let t = s.timing.median_us;
            let gbps = gb_per_s(bytes, t);
            SkinnyResult {
                m: s.case.m,
                n: shape.n,
                k: shape.k,
                group: shape.group,
                dtype: s.case.dtype.name(),
                symmetry: s.case.symmetry.name(),
                entry: s.entry.clone(),
                time_us: (&s.timing).into(),
                traffic,
                bytes,
                gb_per_s: gbps,
                of_copy: gbps / copy.gb_per_s,
                over_m1: m1(s.case.dtype, s.case.symmetry).map(|t1| t / t1),
            }
        })
        .collect();
    let fused: Vec<FusedResult> = fused
        .iter()
        .map(|f| {
            let (m, n, k) = (f.case.m, shape.n, shape.k);
            let ft = tflop_per_s(m, n, k, f.fused.median_us);
            let dt = tflop_per_s(m, n, k, f.dense.median_us);
            FusedResult {
                m,
                n,
                k,
                group: shape.group,
                dtype: f.case.dtype.name(),
                entry: f.entry.clone(),
                fused_us: (&f.fused).into(),
                fused_tflop_per_s: ft,
                dense_us: (&f.dense).into(),
                dense_tflop_per_s: dt,
                fused_over_dense: ft / dt,
                dequant_us: (&f.dequant).into(),
            }
        })
        .collect();

    let mut targets = Vec::new();
    for s in skinny.iter().filter(|s| s.m == 1 && s.dtype == "f16") {
        targets.push(at_least(
            format!("skinny M=1 f16 {}: of copy bandwidth", s.symmetry),
            s.of_copy,
            SKINNY_OF_COPY_TARGET,
        ));
    }
    for s in skinny.iter().filter(|s| s.m == 5) {
        if let Some(r) = s.over_m1 {
            targets.push(at_most(
                format!("skinny {} {}: time M=5 / M=1", s.dtype, s.symmetry),
                r,
                SKINNY_M5_OVER_M1_TARGET,
            ));
        }
    }
    for f in fused.iter().filter(|f| f.dtype == "f16") {
        targets.push(at_least(
            format!("fused M={} f16: TFLOP/s over cuBLAS dense", f.m),
            f.fused_over_dense,
            FUSED_OVER_DENSE_TARGET,
        ));
    }

    Ok(BenchReport {
        device: info.device.clone(),
        target: info.target.clone(),
        warmup: info.plan.warmup,
        iters: info.plan.iters,
        weight_copies: info.weight_copies,
        conventions: conventions(info.weight_copies),
        copy,
        skinny,
        fused,
        targets,
    })
}

fn at_least(what: String, value: f64, target: f64) -> TargetCheck {
    TargetCheck {
        what,
        value,
        target: format!(">= {target}"),
        met: value >= target,
    }
}

fn at_most(what: String, value: f64, target: f64) -> TargetCheck {
    TargetCheck {
        what,
        value,
        target: format!("<= {target}"),
        met: value <= target,
    }
}

/// Markdown tables of the report, conventions first.
pub fn render_table(r: &BenchReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "device: {} ({}); warm-up {}, {} timed launches, {} rotated input copies",
        r.device, r.target, r.warmup, r.iters, r.weight_copies
    );
    for c in &r.conventions {
        let _ = writeln!(s, "- {c}");
    }
    let _ = writeln!(
        s,
        "\ncopy ceiling: {} MiB device to device, median {:.1} us, {:.0} GB/s (read + write)\n",
        r.copy.bytes >> 20,
        r.copy.time_us.median,
        r.copy.gb_per_s
    );
    let _ = writeln!(
        s,
        "| skinny | M | dtype | zp | median us | min us | bytes | GB/s | of copy | / M=1 |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|");
    for k in &r.skinny {
        let _ = writeln!(
            s,
            "| {}x{} g{} | {} | {} | {} | {:.2} | {:.2} | {} | {:.0} | {:.3} | {} |",
            k.k,
            k.n,
            k.group,
            k.m,
            k.dtype,
            k.symmetry,
            k.time_us.median,
            k.time_us.min,
            k.bytes,
            k.gb_per_s,
            k.of_copy,
            k.over_m1.map_or("-".into(), |v| format!("{v:.3}"))
        );
    }
    let _ = writeln!(
        s,
        "\n| fused | M | dtype | fused us | TFLOP/s | cuBLAS us | TFLOP/s | fused / cuBLAS | dequant us |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    for f in &r.fused {
        let _ = writeln!(
            s,
            "| {}x{} g{} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} | {:.1} |",
            f.k,
            f.n,
            f.group,
            f.m,
            f.dtype,
            f.fused_us.median,
            f.fused_tflop_per_s,
            f.dense_us.median,
            f.dense_tflop_per_s,
            f.fused_over_dense,
            f.dequant_us.median
        );
    }
    let _ = writeln!(s, "\ntargets:");
    for t in &r.targets {
        let _ = writeln!(
            s,
            "- [{}] {}: {:.3} (target {})",
            if t.met { "met" } else { "MISSED" },
            t.what,
            t.value,
            t.target
        );
    }
    s
}

/// `w4a16 bench [--json PATH]`: issue 3's suite on the first device that opens, the table on
/// stdout. Without a GPU, a loud skip (a failure under `W4A16_REQUIRE=gpu`).
/// The device a benchmark runs on, or how the command ends without one: a loud skip, a failure
/// under `W4A16_REQUIRE=gpu`.
fn device_or_exit(sources: &KernelSources) -> Result<Box<dyn Device>, ExitCode> {
    open_default_with(sources, Allocation::Guarded).map_err(|skip| {
        if skip.requirement.is_required() {
            eprintln!("W4A16_REQUIRE={} but {skip}", skip.requirement);
            ExitCode::FAILURE
        } else {
            eprintln!("W4A16-SKIP [{}] {}", skip.requirement, skip.reason);
            ExitCode::SUCCESS
        }
    })
}

pub fn cli(json: Option<&Path>, sources: &KernelSources) -> ExitCode {
    let device = match device_or_exit(sources) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let report = match run_benchmarks(device.as_ref(), CLI_PLAN) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bench failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    print!("{}", render_table(&report));
    if let Some(path) = json {
        let text = match serde_json::to_string_pretty(&report) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("bench: serialising the report: {e}");
                return ExitCode::FAILURE;
            }
        };
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("bench: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use w4a16_kernels::Target;

    use super::*;
    use crate::device::{DequantOutput, GemmOutput, Health};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
    }

    fn t(us: f64) -> Timing {
        // the median is `us`; min and max straddle it
        Timing::from_samples(vec![us * 1.5, us, us * 0.9]).unwrap()
    }

    #[test]
    fn bytes_rates_and_flops_of_the_issue_3_shape() {
        let shape = LayerShape::new(14336, 4096, 128);
        let sym = Traffic::gemm(shape, 1, Symmetry::Sym);
        assert_eq!(
            sym,
            Traffic {
                weights: 29_360_128,
                scales: 917_504,
                zero_points: 0,
                x: 8_192,
                y: 28_672,
            }
        );
        assert_eq!(sym.total(), 30_314_496);
        let asym5 = Traffic::gemm(shape, 5, Symmetry::Asym);
        assert_eq!(asym5.zero_points, 1792 * 32 * 4);
        assert_eq!(asym5.x + asym5.y, 5 * (8_192 + 28_672));
        assert!(close(gb_per_s(30_314_496, 10.0), 3031.4496));
        assert!(close(
            copy_gb_per_s(1 << 30, 600.0),
            2.0 * 1073741824.0 / 600e3
        ));
        assert!(close(tflop_per_s(2048, 14336, 4096, 1000.0), 240.518168576));
    }

    #[test]
    fn the_report_computes_ratios_and_judges_the_targets() {
        let shape = LayerShape::new(14336, 4096, 128);
        let info = RunInfo {
            device: "fake".into(),
            target: "sm_90".into(),
            plan: BenchPlan {
                warmup: 1,
                iters: 3,
            },
            weight_copies: 4,
        };
        let sk = |m, symmetry, us| SkinnyTiming {
            case: SkinnyCase {
                m,
                dtype: ActDtype::F16,
                symmetry,
            },
            entry: "w4a16_skinny_f16".into(),
            timing: t(us),
        };
        // copy: 2 GiB moved in 600 us; M=1 at 10 us
        let skinny = [
            sk(1, Symmetry::Sym, 10.0),
            sk(5, Symmetry::Sym, 13.5),
            sk(1, Symmetry::Asym, 12.0),
        ];
        let fused = [FusedTiming {
            case: FusedCase {
                m: 2048,
                dtype: ActDtype::F16,
            },
            entry: "w4a16_fused_f16_x".into(),
            fused: t(2000.0),
            dense: t(700.0),
            dequant: t(50.0),
        }];
        let r = build_report(&info, shape, 1 << 30, &t(600.0), &skinny, &fused).unwrap();
        let copy = 2.0 * 1073741824.0 / 600e3;
        assert!(close(r.copy.gb_per_s, copy));
        assert_eq!(r.copy.time_us.min, 540.0);
        let m1 = &r.skinny[0];
        assert_eq!(m1.bytes, 30_314_496);
        assert!(close(m1.of_copy, 3031.4496 / copy));
        assert_eq!(m1.over_m1, Some(1.0));
        assert!(close(r.skinny[1].over_m1.unwrap(), 1.35));
        assert_eq!(r.skinny[2].bytes, 30_314_496 + 229_376);
        assert_eq!(r.skinny[2].over_m1, Some(1.0), "asym compares to asym M=1");
        let f = &r.fused[0];
        assert!(close(f.fused_tflop_per_s, 240.518168576 / 2.0));
        assert!(close(f.fused_over_dense, 0.35));
        assert_eq!(f.dequant_us.median, 50.0);

        let met: Vec<(&str, bool)> = r.targets.iter().map(|t| (t.what.as_str(), t.met)).collect();
        assert_eq!(
            met,
            vec![
                ("skinny M=1 f16 sym: of copy bandwidth", true),
                ("skinny M=1 f16 asym: of copy bandwidth", false),
                ("skinny f16 sym: time M=5 / M=1", false),
                ("fused M=2048 f16: TFLOP/s over cuBLAS dense", false),
            ]
        );
        // 3031 / 3579 = 0.847
        assert!(r.targets[0].met);

        let table = render_table(&r);
        assert!(table.contains("| 4096x14336 g128 | 1 | f16 | sym | 10.00 | 9.00 | 30314496 |"));
        assert!(table.contains("- [MISSED] fused M=2048 f16: TFLOP/s over cuBLAS dense: 0.350"));
        let json: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(json["skinny"][2]["traffic"]["zero_points"], 229_376);
        assert_eq!(json["fused"][0]["dtype"], "f16");
    }

    #[test]
    fn a_copy_ceiling_without_a_positive_time_is_an_error() {
        let info = RunInfo {
            device: "fake".into(),
            target: "sm_90".into(),
            plan: BenchPlan::default(),
            weight_copies: 1,
        };
        let e = build_report(
            &info,
            LayerShape::new(64, 256, 128),
            1024,
            &t(0.0),
            &[],
            &[],
        )
        .unwrap_err();
        assert!(e.to_string().contains("copy ceiling"), "{e}");
    }

    /// A device whose "hardware" runs at fixed rates: the copy and `skinny` at set GB/s (from
    /// the bytes actually uploaded), `fused` and the BLAS at set TFLOP/s.
    struct Fake {
        copy_gbps: f64,
        skinny_gbps: f64,
        fused_tflops: f64,
        dense_tflops: f64,
        /// (kernel, M, copies) of every kernel benchmark.
        benched: Mutex<Vec<(KernelId, usize, usize)>>,
    }

    fn mnk(i: &DeviceInputs<'_>) -> (usize, usize, usize) {
        let l = i.launch();
        (l.m, l.n, l.k)
    }

    impl Device for Fake {
        fn target(&self) -> Target {
            Target::Sm90
        }
        fn name(&self) -> String {
            "fake".into()
        }
        fn health(&self) -> Health {
            Health::Ok
        }
        fn run_gemm(
            &self,
            _: &KernelDecl,
            _: &str,
            _: &DeviceInputs<'_>,
        ) -> Result<GemmOutput, DeviceFault> {
            unreachable!("the benchmark does not run GEMMs for results")
        }
        fn dequant(
            &self,
            _: &KernelDecl,
            _: &str,
            i: &DeviceInputs<'_>,
        ) -> Result<DequantOutput, DeviceFault> {
            let (_, n, k) = mnk(i);
            let row_stride = i.launch().dense.as_ref().unwrap().strides[0];
            Ok(DequantOutput {
                n,
                k,
                row_stride,
                dense_bits: vec![0; n * k],
                strided_bits: vec![0; (n - 1) * row_stride + k],
                guard_violations: vec![],
                stray_writes: 0,
                unwritten: 0,
            })
        }
        fn dense_gemm(
            &self,
            _: &KernelDecl,
            _: &DeviceInputs<'_>,
        ) -> Result<GemmOutput, DeviceFault> {
            unreachable!("the benchmark does not run GEMMs for results")
        }
        fn bench_kernel(
            &self,
            kernel: &KernelDecl,
            _: &str,
            _: &DeviceInputs<'_>,
            _: BenchPlan,
        ) -> Result<Timing, DeviceFault> {
            assert_eq!(kernel.id, KernelId::Dequant);
            Ok(t(42.0))
        }
        fn bench_kernel_rotating(
            &self,
            kernel: &KernelDecl,
            entry: &str,
            copies: &[DeviceInputs<'_>],
            _: BenchPlan,
        ) -> Result<Timing, DeviceFault> {
            let (m, n, k) = mnk(&copies[0]);
            assert_eq!(
                entry,
                kernel.launch_entry(&copies[0].validated().shape, Target::Sm90)
            );
            self.benched
                .lock()
                .unwrap()
                .push((kernel.id, m, copies.len()));
            let us = match kernel.id {
                KernelId::Skinny => {
                    let i = &copies[0];
                    let uploaded: usize = i
                        .launch()
                        .present_roles()
                        .into_iter()
                        .filter_map(|r| i.host(r))
                        .map(|h| h.len_bytes())
                        .sum();
                    (uploaded + m * n * 2) as f64 / self.skinny_gbps / 1e3
                }
                _ => 2.0 * (m * n * k) as f64 / self.fused_tflops / 1e6,
            };
            Ok(t(us))
        }
        fn bench_sequence(
            &self,
            _: &KernelDecl,
            _: &[Vec<DeviceInputs<'_>>],
            _: BenchPlan,
        ) -> Result<Timing, DeviceFault> {
            unreachable!("this suite has no launch sequence")
        }
        fn bench_copy(&self, bytes: usize, _: BenchPlan) -> Result<Timing, DeviceFault> {
            Ok(t(2.0 * bytes as f64 / self.copy_gbps / 1e3))
        }
        fn bench_dense_gemm(
            &self,
            _: &KernelDecl,
            copies: &[DeviceInputs<'_>],
            _: BenchPlan,
        ) -> Result<Timing, DeviceFault> {
            let i = &copies[0];
            let (m, n, k) = mnk(i);
            assert!(i.host(w4a16_kernels::TensorRole::Dense).is_some());
            Ok(t(2.0 * (m * n * k) as f64 / self.dense_tflops / 1e6))
        }
    }

    #[test]
    fn a_suite_on_a_device_of_known_rates_reports_those_rates() {
        let fake = Fake {
            copy_gbps: 4000.0,
            skinny_gbps: 3200.0,
            fused_tflops: 150.0,
            dense_tflops: 400.0,
            benched: Mutex::new(Vec::new()),
        };
        let mut suite = BenchSuite::issue3();
        suite.shape = LayerShape::new(64, 256, 128);
        suite.copy_bytes = 1 << 20;
        suite.weight_copies = 3;
        for f in &mut suite.fused {
            f.m = 32;
        }
        let r = run_suite(&fake, &suite, BenchPlan::default()).unwrap();
        assert!(close(r.copy.gb_per_s, 4000.0));
        assert_eq!(r.skinny.len(), 12);
        for s in &r.skinny {
            // the uploaded buffers are exactly the counted traffic (no padding on sm_90)
            assert!(close(s.gb_per_s, 3200.0), "{s:?}");
            assert!(close(s.of_copy, 0.8));
        }
        let m5 = r
            .skinny
            .iter()
            .find(|s| s.m == 5 && s.dtype == "bf16")
            .unwrap();
        // weights 8192 + scales 256 + x 5·512 + y 5·128 over weights + scales + 512 + 128
        assert!(close(
            m5.over_m1.unwrap(),
            (8192.0 + 256.0 + 3200.0) / 9088.0
        ));
        for f in &r.fused {
            assert!(close(f.fused_tflop_per_s, 150.0));
            assert!(close(f.dense_tflop_per_s, 400.0));
            assert!(close(f.fused_over_dense, 0.375));
            assert_eq!(f.dequant_us.median, 42.0);
        }
        let benched = fake.benched.lock().unwrap().clone();
        assert_eq!(benched.len(), 12 + 2);
        assert!(benched.iter().all(|&(_, _, copies)| copies == 3));
        assert_eq!(benched.iter().filter(|b| b.0 == KernelId::Fused).count(), 2);
        assert!(
            r.targets
                .iter()
                .any(|t| t.what.starts_with("fused") && !t.met)
        );
        assert!(
            r.targets
                .iter()
                .filter(|t| t.what.contains("of copy"))
                .all(|t| t.met)
        );
    }
}
