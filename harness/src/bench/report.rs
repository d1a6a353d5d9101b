//! From raw timings to the report: bytes moved, rates, ratios, the conventions every report
//! carries and the benchmark's targets judged. Arithmetic only; no device here.

use super::{BenchError, FusedTiming, RunInfo, SkinnyTiming};

use serde::Serialize;
use w4a16_reference::layer::Symmetry;
use w4a16_reference::{ActDtype, LayerShape};

use w4a16_device::Timing;

/// The benchmark's targets (bench/README.md).
pub const SKINNY_OF_COPY_TARGET: f64 = 0.75;
pub const SKINNY_M5_OVER_M1_TARGET: f64 = 1.3;
pub const FUSED_OVER_DENSE_TARGET: f64 = 0.4;

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

/// One of the benchmark's targets, evaluated.
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

/// Turns raw timings into the report: bytes, rates, ratios and the benchmark's targets.
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
