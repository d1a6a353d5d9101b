//! `--reference gpu` on the device: the full-precision reference with its products by the
//! vendor's f64 GEMM (cuBLAS DGEMM) judges every element of a large layer, so one wrong element
//! planted in a kernel's output is reported at its exact position (the CPU side could only
//! sample there: Freivalds plus sampled lines); and on a medium case it agrees with the f64 CPU
//! reference element by element. A backend whose device does not open is a loud skip
//! (tests/common); only CUDA has the f64 GEMM.

mod common;

use common::{backends, device};
use rstest_reuse::apply;
use w4a16_harness::device::{Device, DeviceKind};
use w4a16_harness::launch::DeviceInputs;
use w4a16_harness::runner::execute::reference_on;
use w4a16_harness::tensor::YSpec;
use w4a16_kernels::KernelId;
use w4a16_kernels::set::decl;
use w4a16_reference::bound::BoundModel;
use w4a16_reference::compare::{self, OutputBits};
use w4a16_reference::data::{DataClass, DataSpec, case_seed, generate};
use w4a16_reference::formats::{ResidentLayer, RowPadding};
use w4a16_reference::gemm::{self, NonFiniteX};
use w4a16_reference::layer::Symmetry;
use w4a16_reference::offload::cross_check_tolerance;
use w4a16_reference::{ActDtype, LayerShape};

fn spec(m: usize, n: usize, k: usize) -> DataSpec {
    DataSpec {
        class: DataClass::Realistic,
        m,
        shape: LayerShape::new(n, k, 128),
        dtype: ActDtype::Bf16,
        symmetry: Symmetry::Asym,
        with_bias: true,
    }
}

/// The target's safety factor from the committed cases (as a run reads it).
fn c_target(dev: &dyn Device) -> f64 {
    let dir = w4a16_harness::cases::locate(None).expect("the committed cases are found");
    w4a16_harness::runner::session::c_target(&dir, dev.target()).expect("safety.toml")
}

#[apply(backends)]
fn a_wrong_element_of_a_large_layer_is_reported_at_its_position(kind: DeviceKind) {
    let Some(dev) = device(kind) else { return };
    let (m, n, k) = (16, 8192, 8192);
    let id = "gpu-reference/n8192-k8192/M=16/bf16/asym/g128/realistic/bias";
    let g = generate(id, &spec(m, n, k)).expect("data");
    let resident = ResidentLayer::from_logical(&g.layer, RowPadding::NONE).expect("converts");
    let d = decl(KernelId::Fallback);
    let recipe = (d.recipe)(ActDtype::Bf16);
    let inputs = DeviceInputs::gemm(d, &resident, &g.x, YSpec::dense(m, n, ActDtype::Bf16))
        .expect("the fallback takes the case");
    let entry = d.launch_entry(&inputs.validated().shape, dev.target());
    let out = dev.run_gemm(d, &entry, &inputs).expect("the fallback runs");
    assert!(
        out.clean(),
        "guards, stray writes or unwritten elements: {out:?}"
    );

    let reference = reference_on(
        dev.as_ref(),
        &g.x,
        &g.layer,
        &recipe,
        NonFiniteX::Refuse,
        case_seed(id),
    )
    .expect("the GPU reference forms and passes its cross-check");
    let model = BoundModel::new(&recipe, k, c_target(dev.as_ref())).expect("bound");
    let clean = compare::compare(&reference, &model, OutputBits::new(&out.y_bits, n)).unwrap();
    assert!(clean.passed(), "the unplanted output fails: {clean:?}");
    assert_eq!(clean.checked, m * n, "every element is judged");

    // One wrong element, far inside the layer (no sampled line is likely to hold it).
    let (pm, pn) = (11, 6007);
    let mut planted = out.y_bits.clone();
    let wrong = reference.y_at(pm, pn) + 1.0 + 100.0 * reference.a_at(pm, pn);
    planted[pm * n + pn] = ActDtype::Bf16.from_f64(wrong);
    let report = compare::compare(&reference, &model, OutputBits::new(&planted, n)).unwrap();
    assert!(!report.passed());
    assert_eq!(report.over_bound, 1, "{report:?}");
    assert_eq!(report.worst_at, Some((pm, pn)), "{report:?}");
}

#[apply(backends)]
fn the_gpu_reference_agrees_with_the_cpu_reference_elementwise(kind: DeviceKind) {
    let Some(dev) = device(kind) else { return };
    let (m, n, k) = (8, 1024, 2048);
    let id = "gpu-reference/n1024-k2048/M=8/bf16/asym/g128/realistic/bias";
    let g = generate(id, &spec(m, n, k)).expect("data");
    let recipe = (decl(KernelId::Fallback).recipe)(ActDtype::Bf16);
    let gpu = reference_on(
        dev.as_ref(),
        &g.x,
        &g.layer,
        &recipe,
        NonFiniteX::Refuse,
        case_seed(id),
    )
    .expect("the GPU reference forms");
    let cpu = gemm::reference_with(&g.x, &g.layer, &recipe, NonFiniteX::Refuse).expect("cpu");
    assert_eq!((gpu.m, gpu.n, gpu.k), (cpu.m, cpu.n, cpu.k));
    assert_eq!(gpu.bias, cpu.bias);
    assert_eq!(gpu.a_offset.is_some(), cpu.a_offset.is_some());
    let mut worst = 0.0f64;
    for i in 0..m * n {
        let tol = cross_check_tolerance(k, cpu.a[i], gpu.y[i], cpu.y[i]);
        assert!(
            (gpu.y[i] - cpu.y[i]).abs() <= tol,
            "y[{}, {}]: GPU {:e}, CPU {:e}, tolerance {tol:e}",
            i / n,
            i % n,
            gpu.y[i],
            cpu.y[i]
        );
        let tol_a = cross_check_tolerance(k, cpu.a[i], gpu.a[i], cpu.a[i]);
        assert!((gpu.a[i] - cpu.a[i]).abs() <= tol_a, "a at {i}");
        if tol > 0.0 {
            worst = worst.max((gpu.y[i] - cpu.y[i]).abs() / tol);
        }
    }
    eprintln!("GPU vs CPU reference: worst |Δy| / tolerance = {worst:.3e}");
}
