//! `--reference gpu` on the device: the full-precision reference with its products by the
//! vendor's f64 GEMM (cuBLAS DGEMM) judges every element of a large layer, so one wrong element
//! planted in a kernel's output is reported at its exact position (the CPU side could only
//! sample there: Freivalds plus sampled lines); and on a medium case it agrees with the f64 CPU
//! reference element by element. A backend whose device does not open is a loud skip
//! (tests/common); only CUDA has the f64 GEMM.

mod common;

use common::{backends, device};
use rstest_reuse::apply;
use w4a16_device::held::DeviceHeldGemm;
use w4a16_device::launch::DeviceInputs;
use w4a16_device::tensor::YSpec;
use w4a16_device::{Device, DeviceKind};
use w4a16_harness::require::Skip;
use w4a16_harness::runner::execute::{held_reference_on, reference_on};
use w4a16_kernels::KernelId;
use w4a16_kernels::set::decl;
use w4a16_reference::bound::BoundModel;
use w4a16_reference::compare::{self, CompareMode, JudgeRequest, OutputBits};
use w4a16_reference::data::{
    DataClass, DataSpec, Generated, StreamKey, case_seed, generate, realistic_on_host,
};
use w4a16_reference::formats::{ResidentLayer, RowPadding};
use w4a16_reference::gemm::{self, NonFiniteX};
use w4a16_reference::layer::Symmetry;
use w4a16_reference::offload::{
    ActivationOperand, HeldGemm, LayerWeights, WeightOperand, cross_check_tolerance,
};
use w4a16_reference::{ActDtype, BiasStage, LayerShape, NumericRecipe};

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

/// A backend whose device keeps no held lanes (only CUDA does): a loud skip, or a failure
/// where `W4A16_REQUIRE` demands this backend.
fn no_held_lanes(kind: DeviceKind, dev: &dyn Device) {
    let skip = Skip {
        requirement: common::requirement(kind),
        reason: format!("no device-held reference lanes on {}", dev.name()),
    };
    common::skip_or_fail(kind, &skip);
}

/// Realistic X drawn on the device is the host's draw bit for bit: both dtypes, counts that end
/// inside a group of eight and inside a block, and one past a whole grid's stride.
#[apply(backends)]
fn realistic_x_drawn_on_the_device_is_the_hosts(kind: DeviceKind) {
    let Some(dev) = device(kind) else { return };
    for dtype in ActDtype::ALL {
        for (i, count) in [1usize, 7, 8, 9, 1000, 8 * 4096 * 256 + 13]
            .into_iter()
            .enumerate()
        {
            let stream = StreamKey::activations(case_seed(&format!("draw/{dtype}/{i}")));
            let drawn = dev
                .draw_realistic(&stream, dtype, count)
                .expect("the draw runs");
            let Some(drawn) = drawn else {
                let skip = Skip {
                    requirement: common::requirement(kind),
                    reason: format!("{} draws no activations", dev.name()),
                };
                return common::skip_or_fail(kind, &skip);
            };
            let host = realistic_on_host(&stream, dtype, count);
            assert_eq!(drawn.len(), count);
            if let Some(at) = (0..count).find(|&e| drawn[e] != host[e]) {
                panic!(
                    "{dtype} count {count}: element {at} is {:#06x}, the host drew {:#06x}",
                    drawn[at], host[at]
                );
            }
        }
    }
}

/// The target's safety factor from the committed cases (as a run reads it).
fn c_target(dev: &dyn Device) -> f64 {
    let dir = w4a16_cases::locate(None).expect("the committed cases are found");
    w4a16_harness::runner::session::c_target(&dir, dev.target()).expect("safety.toml")
}

/// A layer too large for the CPU reference's full regime: M, N, K.
const LARGE: (usize, usize, usize) = (16, 8192, 8192);
const LARGE_ID: &str = "gpu-reference/n8192-k8192/M=16/bf16/asym/g128/realistic/bias";

/// The [`LARGE`] layer's tensors, the fallback's recipe, and its output on `dev`.
fn fallback_on_the_large_layer(
    dev: &dyn Device,
) -> (Generated, NumericRecipe, w4a16_device::GemmOutput) {
    let (m, n, k) = LARGE;
    let g = generate(LARGE_ID, &spec(m, n, k)).expect("data");
    let resident = ResidentLayer::from_logical(&g.layer, RowPadding::NONE).expect("converts");
    let d = decl(KernelId::Fallback);
    let recipe = (d.recipe)(ActDtype::Bf16);
    let inputs = DeviceInputs::gemm(d, &resident, &g.x, YSpec::dense(m, n, ActDtype::Bf16))
        .expect("the fallback takes the case");
    let entry = d.launch_entry(&inputs.validated().shape, dev.target());
    let out = dev.run_gemm(d, &entry, &inputs).expect("the fallback runs");
    (g, recipe, out)
}

#[apply(backends)]
fn a_wrong_element_of_a_large_layer_is_reported_at_its_position(kind: DeviceKind) {
    let Some(dev) = device(kind) else { return };
    let (m, n, k) = LARGE;
    let (g, recipe, out) = fallback_on_the_large_layer(dev.as_ref());
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
        case_seed(LARGE_ID),
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
    let fallback = (decl(KernelId::Fallback).recipe)(ActDtype::Bf16);
    let with_offset = NumericRecipe {
        offset_accumulation: Some(128.0),
        ..fallback
    };
    for recipe in [fallback, with_offset] {
        let cpu = gemm::reference_with(&g.x, &g.layer, &recipe, NonFiniteX::Refuse).expect("cpu");
        let host_lanes = reference_on(
            dev.as_ref(),
            &g.x,
            &g.layer,
            &recipe,
            NonFiniteX::Refuse,
            case_seed(id),
        )
        .expect("the GPU reference forms");
        // Decoded on the device, its lanes left there, brought back here to compare.
        let held = held_reference_on(
            dev.as_ref(),
            &g.x,
            &g.layer,
            &LayerWeights::new(&g.layer).expect("the layer's weights"),
            &recipe,
            NonFiniteX::Refuse,
            case_seed(id),
        )
        .expect("the held reference forms")
        .map(|r| r.to_host().expect("its lanes come back"));
        for gpu in std::iter::once(host_lanes).chain(held) {
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
                if let (Some(go), Some(co)) = (&gpu.a_offset, &cpu.a_offset) {
                    let tol_o = cross_check_tolerance(k, co[i], go[i], co[i]);
                    assert!((go[i] - co[i]).abs() <= tol_o, "a_offset at {i}");
                }
                if tol > 0.0 {
                    worst = worst.max((gpu.y[i] - cpu.y[i]).abs() / tol);
                }
            }
            eprintln!("GPU vs CPU reference: worst |Δy| / tolerance = {worst:.3e}");
        }
    }
}

/// The judge that runs next to the held lanes (`cuda/reference_judge.cu`) reports exactly
/// what its host twin (`compare::judge_plain`) reports on the same lanes: counts, buckets,
/// mismatches and the worst ratio at its position, bit for bit; and both leave an output with
/// a special element to the host. Both dtypes, every bias stage, with and without a bias and an
/// offset lane, a padded row stride, and more elements than the judge has threads.
#[apply(backends)]
fn the_held_judge_reports_what_its_host_twin_reports(kind: DeviceKind) {
    let Some(dev) = device(kind) else { return };
    let mut judged = 0;
    for (m, n, k, stride) in [(7, 300, 256, 300), (64, 5000, 128, 5008)] {
        for dtype in [ActDtype::F16, ActDtype::Bf16] {
            for with_bias in [false, true] {
                let spec = DataSpec {
                    dtype,
                    with_bias,
                    ..spec(m, n, k)
                };
                let id = format!("gpu-reference/judge/{m}x{n}x{k}/{dtype}/{with_bias}");
                let g = generate(&id, &spec).expect("data");
                let bias: Vec<f64> = (0..n)
                    .map(|c| g.layer.bias.as_ref().map_or(0.0, |b| dtype.to_f64(b[c])))
                    .collect();
                for (stage, offset) in [
                    (BiasStage::BeforeCast, None),
                    (BiasStage::AfterCast, None),
                    (BiasStage::Either, Some(128.0)),
                ] {
                    let recipe = NumericRecipe {
                        bias: stage,
                        offset_accumulation: offset,
                        ..NumericRecipe::fp32_exact_weights(dtype)
                    };
                    let weights = WeightOperand::new(&g.layer, offset);
                    let lanes = DeviceHeldGemm(dev.as_ref())
                        .products(&ActivationOperand::new(&g.x), &weights, None)
                        .expect("the products form");
                    let Some(lanes) = lanes else {
                        return no_held_lanes(kind, dev.as_ref());
                    };
                    let (y, a, o) = lanes.download().expect("the lanes come back");
                    let model = BoundModel::new(&recipe, k, 1.0).expect("bound");
                    let exact: Vec<f64> = (0..m * n)
                        .map(|i| y[i] + if with_bias { bias[i % n] } else { 0.0 })
                        .collect();
                    let output = |shift: &dyn Fn(usize) -> u16| {
                        let mut bits = vec![0x3C00u16; (m - 1) * stride + n];
                        for (i, &v) in exact.iter().enumerate() {
                            let (r, c) = (i / n, i % n);
                            bits[r * stride + c] = dtype.from_f64(v).wrapping_add(shift(i));
                        }
                        bits
                    };
                    let rounded = output(&|_| 0);
                    let off = output(&|i| ((i % 7) * (i % 3)) as u16);
                    let mut special = off.clone();
                    special[(m / 2) * stride + n / 3] = dtype.poison_bits();
                    for (bits, plain) in [(rounded, true), (off, true), (special, false)] {
                        for mode in [CompareMode::Bound, CompareMode::BitExact] {
                            let request = JudgeRequest {
                                out: OutputBits::new(&bits, stride),
                                model,
                                mode,
                                bias: &bias,
                                has_bias: with_bias,
                            };
                            let on_device = lanes.judge(&request).expect("the judge runs");
                            let twin = compare::judge_plain(&request, m, n, &y, &a, o.as_deref());
                            assert_eq!(on_device, twin, "{id} {stage:?} {offset:?} {mode:?}");
                            assert_eq!(on_device.is_some(), plain, "{id} {stage:?}");
                            judged += usize::from(plain);
                        }
                    }
                }
            }
        }
    }
    eprintln!("held judge: {judged} reports equal to the host twin's");
}

/// With `--reference gpu` on a device that keeps the lanes, a wrong element planted in a large
/// layer is reported at its exact position by the judge on the device.
#[apply(backends)]
fn a_wrong_element_is_reported_at_its_position_by_the_held_judge(kind: DeviceKind) {
    let Some(dev) = device(kind) else { return };
    let (m, n, k) = LARGE;
    let (g, recipe, out) = fallback_on_the_large_layer(dev.as_ref());
    let reference = held_reference_on(
        dev.as_ref(),
        &g.x,
        &g.layer,
        &LayerWeights::new(&g.layer).expect("the layer's weights"),
        &recipe,
        NonFiniteX::Refuse,
        case_seed(LARGE_ID),
    )
    .expect("the held reference forms and passes its cross-check");
    let Some(reference) = reference else {
        return no_held_lanes(kind, dev.as_ref());
    };
    let model = BoundModel::new(&recipe, k, c_target(dev.as_ref())).expect("bound");
    let bits = OutputBits::new(&out.y_bits, n);
    let clean = reference.compare(&model, bits, CompareMode::Bound).unwrap();
    assert!(clean.passed(), "the unplanted output fails: {clean:?}");
    assert_eq!(clean.checked, m * n, "every element is judged");
    let host = reference.to_host().expect("the lanes come back");
    assert_eq!(clean, compare::compare(&host, &model, bits).unwrap());

    let (pm, pn) = (11, 6007);
    let mut planted = out.y_bits.clone();
    let wrong = host.y_at(pm, pn) + 1.0 + 100.0 * host.a_at(pm, pn);
    planted[pm * n + pn] = ActDtype::Bf16.from_f64(wrong);
    let bits = OutputBits::new(&planted, n);
    let report = reference.compare(&model, bits, CompareMode::Bound).unwrap();
    assert!(!report.passed());
    assert_eq!(report.over_bound, 1, "{report:?}");
    assert_eq!(report.worst_at, Some((pm, pn)), "{report:?}");
    assert_eq!(report, compare::compare(&host, &model, bits).unwrap());
}
