use super::*;
use crate::launch::DeviceInputs;
use crate::tensor::{XBuffer, YSpec};
use w4a16_reference::data::{DataClass, DataSpec, generate};
use w4a16_reference::formats::{ResidentLayer, RowPadding};
use w4a16_reference::layer::Symmetry;
use w4a16_reference::{ActDtype, Activations, LayerShape};

fn data(m: usize) -> (Activations, ResidentLayer) {
    let spec = DataSpec {
        class: DataClass::Exact,
        m,
        shape: LayerShape::new(40, 64, 32),
        dtype: ActDtype::F16,
        symmetry: Symmetry::Asym,
        with_bias: false,
    };
    let g = generate("sim/n40-k64", &spec).unwrap();
    let r = ResidentLayer::from_logical(&g.layer, RowPadding::NONE).unwrap();
    (g.x, r)
}

fn run(mode: Misbehave, y_pad: usize) -> (Sim, Result<GemmOutput, DeviceFault>) {
    run_with(mode, Allocation::Guarded, y_pad)
}

fn run_with(
    mode: Misbehave,
    allocation: Allocation,
    y_pad: usize,
) -> (Sim, Result<GemmOutput, DeviceFault>) {
    let sim = Sim::with(mode, allocation);
    let (x, layer) = data(3);
    let d = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Fallback);
    let y = YSpec {
        m: 3,
        n: 40,
        row_stride: 40 + y_pad,
        offset: 0,
        dtype: ActDtype::F16,
    };
    let inputs = DeviceInputs::gemm(d, &layer, &x, y).unwrap();
    let out = sim.run_gemm(d, "w4a16_fallback_f16", &inputs);
    (sim, out)
}

/// A launch of the fallback declaration with X and Y as given views.
fn run_views(
    mode: Misbehave,
    x_stride_pad: usize,
    x_offset: usize,
    y: YSpec,
) -> (Activations, Result<GemmOutput, DeviceFault>) {
    let sim = Sim::new(mode);
    let (x, layer) = data(y.m);
    let xb = XBuffer::new(&x, x.k + x_stride_pad, x_offset).unwrap();
    let d = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Fallback);
    let inputs = DeviceInputs::gemm_strided(d, &layer, &xb, y).unwrap();
    assert_eq!(
        inputs.launch().x.as_ref().unwrap().byte_offset,
        2 * x_offset
    );
    let out = sim.run_gemm(d, "w4a16_fallback_f16", &inputs);
    (x, out)
}

#[test]
fn an_offset_strided_y_lands_in_its_own_elements() {
    // Y [3, 40], rows 43 apart (odd: rows change alignment), one element into its buffer.
    let y = YSpec::strided(3, 40, 43, 1, ActDtype::F16);
    let (_, out) = run_views(Misbehave::None, 0, 0, y);
    let out = out.unwrap();
    assert!(out.clean(), "{out:?}");
    assert_eq!(out.y_bits, (0..120).collect::<Vec<u16>>());
}

#[test]
fn a_write_into_a_row_gap_of_a_strided_y_is_stray() {
    let y = YSpec::strided(3, 40, 43, 4, ActDtype::F16);
    let (_, out) = run_views(Misbehave::IntoPadding, 0, 0, y);
    let out = out.unwrap();
    assert!(out.guard_violations.is_empty());
    assert_eq!((out.stray_writes, out.unwritten), (1, 0));
}

#[test]
fn a_write_before_the_base_of_a_slice_is_stray_and_of_a_buffer_hits_the_guard() {
    // Y a slice four elements into its buffer: the element before it is the slice's offset.
    let y = YSpec::strided(3, 40, 40, 4, ActDtype::F16);
    let out = run_views(Misbehave::BeforeBase, 0, 0, y).1.unwrap();
    assert!(out.guard_violations.is_empty(), "{out:?}");
    assert_eq!(out.stray_writes, 1);
    // Y at the start of its buffer: the element before it is the guard band.
    let out = run_views(
        Misbehave::BeforeBase,
        0,
        0,
        YSpec::dense(3, 40, ActDtype::F16),
    )
    .1
    .unwrap();
    assert_eq!(out.guard_violations.len(), 1);
    assert_eq!(out.guard_violations[0].side, GuardSide::Before);
    assert_eq!(out.guard_violations[0].last, GUARD_BYTES - 1);
}

#[test]
fn a_strided_offset_x_reaches_the_kernel_at_its_view() {
    // X [3, 64] with rows 67 apart, one element into its buffer; Y echoes X[m, n].
    let y = YSpec::strided(3, 40, 41, 1, ActDtype::F16);
    let (x, out) = run_views(Misbehave::EchoX, 3, 1, y);
    let out = out.unwrap();
    assert!(out.clean(), "{out:?}");
    let want: Vec<u16> = (0..3)
        .flat_map(|m| (0..40).map(move |n| (m, n)))
        .map(|(m, n)| x.data[m * x.row_stride + n])
        .collect();
    assert_eq!(out.y_bits, want);
}

#[test]
fn a_kernel_that_ignores_x_stride_reads_the_poisoned_gaps() {
    let y = YSpec::dense(3, 40, ActDtype::F16);
    let (x, out) = run_views(Misbehave::EchoXIgnoringStride, 3, 1, y);
    let out = out.unwrap();
    let poison = ActDtype::F16.poison_bits();
    // Row 1 read at 64 instead of 67: its first element is a gap (the 3-element pad of row 0
    // starts at 1 + 64) and the rest is shifted.
    assert_eq!(
        out.y_bits[40], poison,
        "the gap's NaN pattern comes through"
    );
    assert!(
        out.y_bits[40..80] != x.data[64..104],
        "row 1 is not X's row 1"
    );
    assert_eq!(
        out.y_bits[..40],
        x.data[..40],
        "row 0 starts where the view says"
    );
    // The same kernel on contiguous X would have passed: only the strided view finds it.
    let (x, out) = run_views(Misbehave::EchoXIgnoringStride, 0, 0, y);
    let out = out.unwrap();
    let want: Vec<u16> = (0..3)
        .flat_map(|m| (0..40).map(move |n| (m, n)))
        .map(|(m, n)| x.data[m * 64 + n])
        .collect();
    assert_eq!(out.y_bits, want);
}

#[test]
fn the_blas_gets_x_and_y_leading_dimensions_and_offsets_of_their_views() {
    let sim = Sim::new(Misbehave::None);
    let (x, layer) = data(3);
    let xb = XBuffer::new(&x, 64 + 3, 1).unwrap();
    let dense = crate::tensor::DenseSpec::unpadded(40, 64, ActDtype::F16);
    let dense_bits = vec![0u16; 40 * 64];
    let y = YSpec::strided(3, 40, 44, 4, ActDtype::F16);
    let d = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Dense);
    let bias = layer.bias.as_deref();
    let inputs = DeviceInputs::dense_strided(d, &xb, dense, &dense_bits, bias, y).unwrap();
    sim.dense_gemm(d, &inputs).unwrap();
    let calls = sim.blas_calls.lock().unwrap();
    let g = calls[0];
    assert_eq!((g.m, g.n, g.k), (3, 40, 64));
    assert_eq!((g.x_ld, g.dense_ld, g.y_ld), (67, 64, 44));
    assert_eq!(g.x_offset, 2, "X one element into its buffer");
    assert_eq!(g.dense_offset, 0);
    assert_eq!(
        g.y_offset,
        GUARD_BYTES + 8,
        "Y four elements past the guard band"
    );
}

#[test]
fn a_well_behaved_kernel_is_clean_and_compacted() {
    let (_, out) = run(Misbehave::None, 8);
    let out = out.unwrap();
    assert!(out.clean(), "{out:?}");
    assert_eq!(out.y_bits, (0..120).collect::<Vec<u16>>());
}

#[test]
fn writes_past_y_hit_the_guard() {
    let (_, out) = run(Misbehave::PastEnd, 0);
    let out = out.unwrap();
    assert_eq!(out.guard_violations.len(), 1);
    assert_eq!(out.guard_violations[0].side, GuardSide::After);
    assert_eq!((out.guard_violations[0].first, out.stray_writes), (0, 0));
}

#[test]
fn exact_allocations_have_the_views_sizes_and_no_guard() {
    let (sim, out) = run_with(Misbehave::None, Allocation::Exact, 8);
    let out = out.unwrap();
    assert!(out.clean(), "{out:?}");
    assert_eq!(out.y_bits, (0..120).collect::<Vec<u16>>());
    // Data of `data(3)`: N = 40, K = 64, G = 32, asymmetric f16, no bias; Y [3, 40] row stride 48.
    let mut sizes = sim.sizes.lock().unwrap().clone();
    let y = sizes.pop().unwrap();
    assert_eq!(
        y,
        (2 * 48 + 40) * 2,
        "Y ends at its last element: no guard, no row tail"
    );
    sizes.sort();
    // zero points u32 [40/8, 2] = 40 B, scales f16 [40, 2] = 160 B, weights [40, 32] B = 1280 B,
    // X f16 [3, 64] = 384 B
    assert_eq!(sizes, vec![40, 160, 384, 1280]);
    let (guarded, _) = run_with(Misbehave::None, Allocation::Guarded, 8);
    let y_guarded = *guarded.sizes.lock().unwrap().last().unwrap();
    assert_eq!(y_guarded, (2 * 48 + 40) * 2 + 2 * GUARD_BYTES);
}

#[test]
fn a_write_past_an_exact_output_is_an_illegal_address_not_slack() {
    let (sim, out) = run_with(Misbehave::PastEnd, Allocation::Exact, 0);
    let err = out.unwrap_err();
    assert!(err.context_unusable(), "{err}");
    let text = err.to_string();
    assert!(text.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{text}");
    assert!(text.contains("outside every allocation"), "{text}");
    assert!(matches!(sim.health(), Health::Lost { .. }));
    // The same kernel with guards: the write is absorbed by the band and seen only there.
    let (_, out) = run_with(Misbehave::PastEnd, Allocation::Guarded, 0);
    assert_eq!(out.unwrap().guard_violations.len(), 1);
}

#[test]
fn a_write_into_row_padding_is_still_stray_with_exact_allocations() {
    let (_, out) = run_with(Misbehave::IntoPadding, Allocation::Exact, 8);
    let out = out.unwrap();
    assert!(out.guard_violations.is_empty());
    assert_eq!(out.stray_writes, 1);
}

#[test]
fn the_simulator_is_no_cuda_device() {
    let sim = Sim::new(Misbehave::None);
    assert_eq!(DeviceInfo::kind(&sim), DeviceKind::Simulated);
    assert_eq!(DeviceInfo::allocation(&sim), Allocation::Guarded);
}

#[test]
fn an_unwritten_element_stays_poison() {
    let (_, out) = run(Misbehave::SkipLast, 0);
    let out = out.unwrap();
    assert_eq!(out.unwritten, 1);
    assert_eq!(*out.y_bits.last().unwrap(), ActDtype::F16.poison_bits());
    assert!(!out.clean());
}

#[test]
fn writes_into_row_padding_are_caught() {
    let (_, out) = run(Misbehave::IntoPadding, 8);
    let out = out.unwrap();
    assert!(out.guard_violations.is_empty());
    assert_eq!(out.stray_writes, 1);
}

#[test]
fn a_sticky_fault_loses_the_device_and_later_calls_refuse() {
    let (sim, out) = run(Misbehave::Sticky, 0);
    let err = out.unwrap_err();
    assert!(err.context_unusable(), "{err}");
    assert!(matches!(sim.health(), Health::Lost { .. }));
    let err = sim.bench_copy(1024, BenchPlan::default()).unwrap_err();
    assert!(matches!(err, DeviceFault::ContextLost { .. }), "{err}");
}

#[test]
fn a_hang_is_a_timeout_not_a_wait() {
    let (sim, out) = run(Misbehave::Hang, 0);
    assert!(matches!(out.unwrap_err(), DeviceFault::Timeout { .. }));
    let (x, layer) = data(1);
    let d = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Skinny);
    let inputs = DeviceInputs::gemm(d, &layer, &x, YSpec::dense(1, 40, ActDtype::F16)).unwrap();
    assert!(matches!(
        sim.run_gemm(d, "w4a16_skinny_f16", &inputs),
        Err(DeviceFault::ContextLost { .. })
    ));
}

#[test]
fn inputs_validated_for_another_kernel_are_refused_before_any_allocation() {
    let sim = Sim::new(Misbehave::None);
    let (x, layer) = data(2);
    let fb = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Fallback);
    let inputs = DeviceInputs::gemm(fb, &layer, &x, YSpec::dense(2, 40, ActDtype::F16)).unwrap();
    let sk = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Skinny);
    let err = sim.run_gemm(sk, "w4a16_skinny_f16", &inputs).unwrap_err();
    assert!(matches!(err, DeviceFault::WrongKernel { .. }));
    assert!(sim.live.lock().unwrap().is_empty(), "nothing was allocated");
}

#[test]
fn benchmarks_time_only_the_timed_launches() {
    let sim = Sim::new(Misbehave::None);
    let (x, layer) = data(2);
    let d = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Fallback);
    let inputs = DeviceInputs::gemm(d, &layer, &x, YSpec::dense(2, 40, ActDtype::F16)).unwrap();
    let t = sim
        .bench_kernel(
            d,
            "w4a16_fallback_f16",
            &inputs,
            BenchPlan {
                warmup: 3,
                iters: 4,
            },
        )
        .unwrap();
    assert_eq!(
        t.samples,
        vec![10.0; 4],
        "one launch between each pair of events"
    );
    assert_eq!(*sim.launches.lock().unwrap(), 1 + 3 + 4);
}

#[test]
fn a_rotating_benchmark_reads_each_copy_in_turn() {
    let sim = Sim::new(Misbehave::None);
    let (x, layer) = data(2);
    let d = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Fallback);
    let y = YSpec::dense(2, 40, ActDtype::F16);
    let copies: Vec<_> = (0..3)
        .map(|_| DeviceInputs::gemm(d, &layer, &x, y).unwrap())
        .collect();
    let plan = BenchPlan {
        warmup: 2,
        iters: 4,
    };
    let t = sim
        .bench_kernel_rotating(d, "w4a16_fallback_f16", &copies, plan)
        .unwrap();
    assert_eq!(t.samples, vec![10.0; 4]);
    let read = sim.weights_read.lock().unwrap().clone();
    assert_eq!(read.len(), 1 + 2 + 4);
    let distinct: std::collections::BTreeSet<u64> = read.iter().copied().collect();
    assert_eq!(distinct.len(), 3, "three staged weight buffers: {read:x?}");
    for (i, p) in read.iter().enumerate() {
        assert_eq!(*p, read[i % 3], "launch {i} reads copy {}", i % 3);
    }
    assert!(read[0] != read[1] && read[1] != read[2] && read[0] != read[2]);
}

#[test]
fn a_rotating_copy_benchmark_copies_between_each_pair_in_turn() {
    let sim = Sim::new(Misbehave::None);
    let plan = BenchPlan {
        warmup: 2,
        iters: 5,
    };
    let t = sim.bench_copy_rotating(1000, 3, plan).unwrap();
    assert_eq!(t.samples.len(), 5);
    assert_eq!(
        *sim.sizes.lock().unwrap(),
        vec![1000; 6],
        "three source/destination pairs"
    );
    let copies = sim.copies.lock().unwrap().clone();
    assert_eq!(copies.len(), 1 + 2 + 5);
    let distinct: std::collections::BTreeSet<u64> =
        copies.iter().flat_map(|&(s, d)| [s, d]).collect();
    assert_eq!(distinct.len(), 6, "every buffer is its own: {copies:x?}");
    for (i, c) in copies.iter().enumerate() {
        assert_eq!(*c, copies[i % 3], "copy {i} uses pair {}", i % 3);
    }
    let err = sim.bench_copy_rotating(1000, 0, plan).unwrap_err();
    assert!(matches!(err, DeviceFault::Unsupported { .. }), "{err}");
}

#[test]
fn a_rotating_benchmark_refuses_copies_of_different_shapes() {
    let sim = Sim::new(Misbehave::None);
    let (x2, layer) = data(2);
    let (x3, _) = data(3);
    let d = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Fallback);
    let copies = vec![
        DeviceInputs::gemm(d, &layer, &x2, YSpec::dense(2, 40, ActDtype::F16)).unwrap(),
        DeviceInputs::gemm(d, &layer, &x3, YSpec::dense(3, 40, ActDtype::F16)).unwrap(),
    ];
    let err = sim
        .bench_kernel_rotating(d, "w4a16_fallback_f16", &copies, BenchPlan::default())
        .unwrap_err();
    assert!(matches!(err, DeviceFault::Unsupported { .. }), "{err}");
    assert_eq!(
        *sim.launches.lock().unwrap(),
        0,
        "refused before any launch"
    );
    let err = sim
        .bench_kernel_rotating(d, "w4a16_fallback_f16", &[], BenchPlan::default())
        .unwrap_err();
    assert!(err.to_string().contains("no input copies"), "{err}");
}

// ---- the MoE launch path ---------------------------------------------------------------------

use crate::moe::fixture::{Layer, N, T, TOP_K};

/// The slots per expert of the fixture, padded to blocks of 16 with the sentinel 6.
fn fixture_sorted() -> Vec<i32> {
    let pad = |run: &[i32]| {
        let mut v = run.to_vec();
        v.resize(16, (T * TOP_K) as i32);
        v
    };
    [pad(&[0, 5]), pad(&[2]), pad(&[1, 3]), pad(&[4])].concat()
}

#[test]
fn the_moe_path_returns_the_align_outputs_and_c_through_their_guards() {
    let sim = Sim::new(Misbehave::None);
    let layer = Layer::new();
    let l = layer.launch();
    let inputs = l.validate().unwrap();
    let out = sim.run_moe(&inputs).unwrap();
    assert_eq!(out.num_tokens_post_padded, 64);
    let cap = w4a16_kernels::set::moe_align_capacity(6, 4, 16).unwrap();
    assert_eq!(out.sorted_token_ids.len(), cap.sorted);
    assert_eq!(out.sorted_token_ids[..64], fixture_sorted()[..]);
    assert!(
        out.sorted_token_ids[64..]
            .iter()
            .all(|&v| v == T as i32 * TOP_K as i32 - 1),
        "entries past the padded length keep the poison: the last slot"
    );
    assert_eq!(out.align_poison.sorted_token_id, 5);
    assert_eq!(
        out.expert_ids,
        vec![0, 1, 2, 3, crate::moe::EXPERT_ID_POISON]
    );
    assert!(out.align_guard_violations.is_empty());
    // C [6, 16]: every slot's row written from the sorted ids the align step left on the device.
    assert!(out.c.clean(), "{:?}", out.c);
    let want: Vec<u16> = (0..T * TOP_K * N).map(|i| (i + 1) as u16).collect();
    assert_eq!(out.c.y_bits, want);
    assert_eq!(*sim.launches.lock().unwrap(), 2, "moe_align, then moe");
    // The align step alone gives the same.
    let a = sim.run_moe_align(&inputs).unwrap();
    assert_eq!(
        (a.sorted_token_ids, a.expert_ids, a.num_tokens_post_padded),
        (out.sorted_token_ids, out.expert_ids, 64)
    );
}

#[test]
fn blocks_of_experts_held_elsewhere_write_zero_rows() {
    let sim = Sim::new(Misbehave::None);
    let layer = Layer::new();
    let l = layer.mapped();
    let out = sim.run_moe(&l.validate().unwrap()).unwrap();
    assert_eq!(out.expert_ids[..4], [0, -1, 1, -1]);
    assert!(out.c.clean(), "{:?}", out.c);
    for slot in 0..T * TOP_K {
        let row = &out.c.y_bits[slot * N..(slot + 1) * N];
        // Slots 2 and 4 went to experts 1 and 3.
        if slot == 2 || slot == 4 {
            assert!(row.iter().all(|&v| v == 0), "slot {slot}: {row:?}");
        } else {
            assert_eq!(row[0], (slot * N + 1) as u16, "slot {slot}");
        }
    }
}

#[test]
fn moe_buffers_are_exact_under_the_sanitizer_allocation() {
    let sim = Sim::with(Misbehave::None, Allocation::Exact);
    let layer = Layer::new();
    let l = layer.launch();
    let out = sim.run_moe(&l.validate().unwrap()).unwrap();
    assert!(out.c.clean() && out.align_guard_violations.is_empty());
    let sizes = sim.sizes.lock().unwrap().clone();
    let cap = w4a16_kernels::set::moe_align_capacity(6, 4, 16).unwrap();
    // Inputs: topk ids, X, weights, scales, zero points, topk weights; then the three align
    // outputs and C, each at exactly its extent.
    assert_eq!(
        sizes,
        vec![
            6 * 4,
            T * 64 * 2,
            layer.weights.len() * 4,
            layer.scales.len() * 2,
            layer.zeros.len() * 4,
            6 * 4,
            cap.sorted * 4,
            cap.blocks * 4,
            4,
            T * TOP_K * N * 2,
        ]
    );
}

#[test]
fn a_lost_device_refuses_the_moe_path_before_any_allocation() {
    let sim = Sim::new(Misbehave::Sticky);
    let layer = Layer::new();
    let l = layer.launch();
    let inputs = l.validate().unwrap();
    let err = sim.run_moe(&inputs).unwrap_err();
    assert!(err.context_unusable(), "{err}");
    let before = sim.sizes.lock().unwrap().len();
    assert!(matches!(
        sim.run_moe(&inputs),
        Err(DeviceFault::ContextLost { .. })
    ));
    assert_eq!(sim.sizes.lock().unwrap().len(), before);
}

/// With pristine input copies, the second launch of the same inputs fills its own fresh
/// buffers by device copies from them (no upload) and gives the same output; the kernel never
/// reads a pristine copy.
#[test]
fn pristine_input_copies_fill_each_launchs_own_buffers() {
    let (x, layer) = data(3);
    let d = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Fallback);
    let y = YSpec {
        m: 3,
        n: 40,
        row_stride: 40,
        offset: 0,
        dtype: ActDtype::F16,
    };
    let inputs = DeviceInputs::gemm(d, &layer, &x, y).unwrap();
    let plain = Sim::new(Misbehave::None);
    let expected = plain.run_gemm(d, "w4a16_fallback_f16", &inputs).unwrap();
    let sim = Sim {
        input_cache: Some(Mutex::new(InputCache::new(1 << 20, 0))),
        ..Sim::new(Misbehave::None)
    };
    let first = sim.run_gemm(d, "w4a16_fallback_f16", &inputs).unwrap();
    let inputs_of_a_launch = sim.copies.lock().unwrap().len();
    assert!(inputs_of_a_launch >= 4, "x, weights, scales, zeros");
    let second = sim.run_gemm(d, "w4a16_fallback_f16", &inputs).unwrap();
    assert_eq!(first.y_bits, expected.y_bits);
    assert_eq!(second.y_bits, expected.y_bits);
    let cache = sim.input_cache.as_ref().unwrap().lock().unwrap();
    assert_eq!(cache.misses as usize, inputs_of_a_launch);
    assert_eq!(cache.hits as usize, inputs_of_a_launch);
    let copies = sim.copies.lock().unwrap().clone();
    assert_eq!(copies.len(), 2 * inputs_of_a_launch);
    let (first_copies, second_copies) = copies.split_at(inputs_of_a_launch);
    for (a, b) in first_copies.iter().zip(second_copies) {
        assert_eq!(a.0, b.0, "the same pristine source");
        assert_ne!(a.1, b.1, "each launch its own buffer");
    }
    let pristine: std::collections::BTreeSet<u64> = copies.iter().map(|c| c.0).collect();
    let read = sim.weights_read.lock().unwrap().clone();
    assert_eq!(read.len(), 2);
    assert!(read.iter().all(|w| !pristine.contains(w)), "{read:x?}");
}

/// The dequant copy compared on the device: identical to the payload a correct kernel leaves
/// (rows padded apart, the poison in the gaps), nothing comes back; one element off, the whole
/// output comes back as `dequant` gives it, and a runtime that cannot compare downloads.
#[test]
fn the_dequant_copy_is_compared_on_the_device_and_comes_back_only_when_it_differs() {
    use crate::outputs::DequantCheck;
    use crate::tensor::DenseSpec;
    let (_, layer) = data(1);
    let d = w4a16_kernels::set::decl(w4a16_kernels::KernelId::Dequant);
    let dense = DenseSpec {
        n: 40,
        k: 64,
        row_stride: 72,
        dtype: ActDtype::F16,
    };
    let inputs = DeviceInputs::dequant(d, &layer, dense).unwrap();
    let entry = "w4a16_dequant_f16";
    let plain = Sim::new(Misbehave::None);
    let out = plain.dequant(d, entry, &inputs).unwrap();
    assert!(out.guard_violations.is_empty() && out.unwritten == 0);
    let view = inputs.launch().dense.clone().unwrap();
    let layout = OutputLayout::for_view(&view, ActDtype::F16.poison_bits());
    let payload = layout.payload_of(&out.dense_bits).unwrap();
    assert_eq!(
        payload, out.strided_bits,
        "the payload of a clean copy is what it leaves"
    );
    let sim = Sim::new(Misbehave::None);
    let got = sim.dequant_against(d, entry, &inputs, &payload).unwrap();
    assert_eq!(got, DequantCheck::AsExpected);
    let mut off = payload.clone();
    off[72 + 3] ^= 1;
    match sim.dequant_against(d, entry, &inputs, &off).unwrap() {
        DequantCheck::Output(o) => assert_eq!(o, out),
        other => panic!("an expected copy one element off matched: {other:?}"),
    }
    let blind = Sim {
        compares: false,
        ..Sim::new(Misbehave::None)
    };
    // What the runner asks before it forms a payload (the trait forwards the runtime's answer).
    assert!(Device::compares_on_device(&sim) && !Device::compares_on_device(&blind));
    match blind.dequant_against(d, entry, &inputs, &payload).unwrap() {
        DequantCheck::Output(o) => assert_eq!(o, out),
        other => panic!("a runtime that cannot compare compared: {other:?}"),
    }
}
