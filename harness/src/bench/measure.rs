//! Measurement: generates each layer once, times the copy ceiling, `skinny`, `fused` and the
//! dense path (dequant + vendor BLAS) on the device, and hands the raw timings to
//! [`super::build_report`].

use super::{BenchError, BenchReport, BenchSuite, FusedCase, SkinnyCase, build_report, dev};

use w4a16_kernels::set::decl;
use w4a16_kernels::{KernelDecl, KernelId};
use w4a16_reference::data::{DataClass, DataSpec, generate};
use w4a16_reference::formats::{PaddingRule, ResidentLayer, RowPadding, dense_row_stride_elems};
use w4a16_reference::layer::Symmetry;
use w4a16_reference::{ActDtype, Activations, LayerShape};

use w4a16_device::launch::DeviceInputs;
use w4a16_device::tensor::{DenseSpec, YSpec};
use w4a16_device::{BenchPlan, DeviceBench, Timing};

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

/// The speed benchmark's suite on `device`.
pub fn run_benchmarks(
    device: &dyn DeviceBench,
    plan: BenchPlan,
) -> Result<BenchReport, BenchError> {
    run_suite(device, &BenchSuite::standard(), plan)
}

/// Measures `suite` on `device` and computes the report.
pub fn run_suite(
    device: &dyn DeviceBench,
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

pub(super) fn progress(what: &str) {
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
    device: &dyn DeviceBench,
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
    device: &dyn DeviceBench,
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
