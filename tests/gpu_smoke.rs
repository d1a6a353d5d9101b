//! Every kernel of the set on one small case on each backend's GPU (a case per backend,
//! `…::case_1_cuda`, `…::case_2_rocm`), checked against a naive f64 computation done here, with
//! poison and guard bands checked. A backend whose device does not open reports a loud skip
//! (`W4A16-SKIP [cuda] …`); under `W4A16_REQUIRE=gpu` it fails when no GPU backend opened
//! (tests/common).
//!
//! The data are of the exact class (every fp32 partial sum exact), so each output is the
//! declared recipe's rounding of the exact value, bit for bit.

mod common;

use common::{backends, device};
use rstest_reuse::apply;
use w4a16_device::launch::DeviceInputs;
use w4a16_device::tensor::{DenseSpec, YSpec};
use w4a16_device::{BenchPlan, Device, DeviceFault, DeviceKind, GemmOutput, Health};
use w4a16_kernels::set::decl;
use w4a16_kernels::{KernelDecl, KernelId};
use w4a16_reference::data::{DataClass, DataSpec, generate};
use w4a16_reference::formats::{ResidentLayer, RowPadding};
use w4a16_reference::layer::Symmetry;
use w4a16_reference::{ActDtype, Activations, BiasStage, LayerShape, QuantizedLayer};

struct Case {
    id: String,
    x: Activations,
    layer: QuantizedLayer,
    resident: ResidentLayer,
}

/// N = 200 is not a multiple of any row tile; K = 512 holds four groups of 128.
fn case(m: usize, dtype: ActDtype, symmetry: Symmetry, bias: bool, padding: RowPadding) -> Case {
    let id = format!(
        "smoke/n200-k512/M={m}/{dtype}/{}/g128/exact",
        symmetry.name()
    );
    let spec = DataSpec {
        class: DataClass::Exact,
        m,
        shape: LayerShape::new(200, 512, 128),
        dtype,
        symmetry,
        with_bias: bias,
    };
    let g = generate(&id, &spec).expect("exact data fit K = 512");
    let resident = ResidentLayer::from_logical(&g.layer, padding).expect("a valid layer converts");
    Case {
        id,
        x: g.x,
        layer: g.layer,
        resident,
    }
}

/// Σ_k x·w in f64 (exact for this data class).
fn exact_dot(c: &Case, m: usize, n: usize) -> f64 {
    (0..c.layer.shape.k)
        .map(|k| c.x.get(m, k) * c.layer.weight(n, k))
        .sum()
}

/// The recipe's rounding(s) of the exact result: one cast with the bias before it, or a cast of
/// the product and a second rounding after adding the bias in the activation dtype (either, for
/// a recipe that leaves the stage open).
fn expected(c: &Case, kernel: &KernelDecl, m: usize, n: usize) -> [u16; 2] {
    let dt = c.layer.dtype;
    let dot = exact_dot(c, m, n);
    let bias = c.layer.bias_value(n);
    let once = dt.from_f64(dot + bias);
    let twice = dt.from_f64(dt.to_f64(dt.from_f64(dot)) + bias);
    match (kernel.recipe)(dt).bias {
        _ if c.layer.bias.is_none() => [once; 2],
        BiasStage::BeforeCast => [once; 2],
        BiasStage::AfterCast => [twice; 2],
        BiasStage::Either => [once, twice],
    }
}

fn assert_clean(what: &str, out: &GemmOutput) {
    assert!(
        out.guard_violations.is_empty(),
        "{what}: wrote into the guard bands: {:?}",
        out.guard_violations
    );
    assert_eq!(out.stray_writes, 0, "{what}: wrote into Y's row padding");
    assert_eq!(
        out.unwritten, 0,
        "{what}: left elements of Y unwritten (still poison)"
    );
}

fn check_gemm(dev: &dyn Device, kernel: KernelId, c: &Case, y_pad: usize) {
    let d = decl(kernel);
    let m = c.x.m;
    let y = YSpec {
        m,
        n: 200,
        row_stride: 200 + y_pad,
        offset: 0,
        dtype: c.layer.dtype,
    };
    let inputs = DeviceInputs::gemm(d, &c.resident, &c.x, y)
        .unwrap_or_else(|e| panic!("{} {kernel}: {e}", c.id));
    let entry = d.launch_entry(&inputs.validated().shape, dev.target());
    let out = dev
        .run_gemm(d, &entry, &inputs)
        .unwrap_or_else(|e| panic!("{} {kernel} ({entry}): {e}", c.id));
    let what = format!("{} {kernel}", c.id);
    assert_clean(&what, &out);
    for mi in 0..m {
        for n in 0..200 {
            let want = expected(c, d, mi, n);
            let got = out.y_bits[mi * 200 + n];
            assert!(
                want.contains(&got),
                "{what}: Y[{mi}, {n}] = {got:#06x}, expected {want:#06x?} (exact {})",
                exact_dot(c, mi, n)
            );
        }
    }
}

#[apply(backends)]
fn gemm_kernels_match_a_naive_computation(kind: DeviceKind) {
    let Some(dev) = device(kind) else { return };
    eprintln!("device: {} ({})", dev.name(), dev.target());
    for dtype in ActDtype::ALL {
        for symmetry in [Symmetry::Sym, Symmetry::Asym] {
            for (kernel, m) in [
                (KernelId::Skinny, 3),
                (KernelId::Fused, 17),
                (KernelId::Fallback, 3),
            ] {
                check_gemm(
                    dev.as_ref(),
                    kernel,
                    &case(m, dtype, symmetry, true, RowPadding::NONE),
                    0,
                );
            }
        }
    }
}

#[apply(backends)]
fn padded_layouts_give_the_same_bits(kind: DeviceKind) {
    let Some(dev) = device(kind) else { return };
    let pad = RowPadding {
        weight_extra_bytes: 128,
        scale_extra_elems: 8,
    };
    for (kernel, m) in [
        (KernelId::Skinny, 5),
        (KernelId::Fused, 33),
        (KernelId::Fallback, 2),
    ] {
        let mut c = case(m, ActDtype::F16, Symmetry::Asym, true, pad);
        c.x = c.x.with_row_stride(512 + 64);
        check_gemm(dev.as_ref(), kernel, &c, 24);
    }
}

#[apply(backends)]
fn dequant_is_bit_exact_and_the_dense_path_matches(kind: DeviceKind) {
    let Some(dev) = device(kind) else { return };
    for dtype in ActDtype::ALL {
        for symmetry in [Symmetry::Sym, Symmetry::Asym] {
            let c = case(256, dtype, symmetry, false, RowPadding::NONE);
            let spec = DenseSpec {
                n: 200,
                k: 512,
                row_stride: 512 + 64,
                dtype,
            };
            let d = decl(KernelId::Dequant);
            let inputs = DeviceInputs::dequant(d, &c.resident, spec).unwrap();
            let entry = d.launch_entry(&inputs.validated().shape, dev.target());
            let out = dev
                .dequant(d, &entry, &inputs)
                .unwrap_or_else(|e| panic!("{} dequant: {e}", c.id));
            assert!(
                out.guard_violations.is_empty() && out.stray_writes == 0,
                "{} dequant: {out:?}",
                c.id
            );
            assert_eq!(out.unwritten, 0);
            for n in 0..200 {
                for k in 0..512 {
                    let want = dtype.from_f64(c.layer.weight(n, k));
                    assert_eq!(
                        out.dense_bits[n * 512 + k],
                        want,
                        "{} dense[{n}, {k}]",
                        c.id
                    );
                }
            }

            // the dense copy, padded rows and all, through the vendor BLAS
            let dd = decl(KernelId::Dense);
            let y = YSpec::dense(256, 200, dtype);
            let inputs = DeviceInputs::dense(dd, &c.x, spec, &out.strided_bits, None, y).unwrap();
            let g = dev
                .dense_gemm(dd, &inputs)
                .unwrap_or_else(|e| panic!("{} dense: {e}", c.id));
            assert_clean(&format!("{} dense", c.id), &g);
            for mi in (0..256).step_by(17) {
                for n in 0..200 {
                    assert_eq!(
                        g.y_bits[mi * 200 + n],
                        dtype.from_f64(exact_dot(&c, mi, n)),
                        "{} dense Y[{mi}, {n}]",
                        c.id
                    );
                }
            }
        }
    }
}

#[apply(backends)]
fn a_launch_for_another_kernel_is_refused_without_touching_the_device(kind: DeviceKind) {
    let Some(dev) = device(kind) else { return };
    let c = case(2, ActDtype::F16, Symmetry::Sym, false, RowPadding::NONE);
    let inputs = DeviceInputs::gemm(
        decl(KernelId::Fallback),
        &c.resident,
        &c.x,
        YSpec::dense(2, 200, ActDtype::F16),
    )
    .unwrap();
    let err = dev
        .run_gemm(decl(KernelId::Skinny), "w4a16_skinny_f16", &inputs)
        .unwrap_err();
    assert_eq!(
        err,
        DeviceFault::WrongKernel {
            kernel: KernelId::Skinny,
            validated: KernelId::Fallback
        }
    );
    assert_eq!(dev.health(), Health::Ok);
}

#[apply(backends)]
fn benchmarks_report_positive_device_times(kind: DeviceKind) {
    let Some(dev) = device(kind) else { return };
    let plan = BenchPlan {
        warmup: 2,
        iters: 5,
    };
    let copy = dev.bench_copy(64 << 20, plan).expect("device copy");
    assert!(
        copy.median_us > 0.0 && copy.min_us <= copy.median_us && copy.median_us <= copy.max_us,
        "{copy:?}"
    );
    let c = case(1, ActDtype::F16, Symmetry::Asym, false, RowPadding::NONE);
    let d = decl(KernelId::Skinny);
    let inputs =
        DeviceInputs::gemm(d, &c.resident, &c.x, YSpec::dense(1, 200, ActDtype::F16)).unwrap();
    let entry = d.launch_entry(&inputs.validated().shape, dev.target());
    let t = dev
        .bench_kernel(d, &entry, &inputs, plan)
        .expect("skinny benchmark");
    assert_eq!(t.samples.len(), 5);
    assert!(t.median_us > 0.0, "{t:?}");
}
