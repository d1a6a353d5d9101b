//! Launch-boundary validation without a GPU: every contract rule refuses a bad launch with a
//! typed error that names the tensor, what the kernel's declaration expects and what it got;
//! valid symmetric, asymmetric and padded launches pass for every kernel that takes them; and
//! the argument buffer is packed at the declared offsets.

use w4a16_device::launch::{DeviceInputs, HostBytes, RawArg, pack_args};
use w4a16_device::tensor::{DenseSpec, ElemType, LaunchInputs, TensorView, XBuffer, YSpec};
use w4a16_device::validate::{ArgValue, ContractError, validate};
use w4a16_kernels::decl::{RowLayoutRule, arg_offsets};
use w4a16_kernels::{ArgDecl, ArgKind, KernelDecl, KernelId, ScalarArg, TensorRole, set};
use w4a16_reference::formats::{
    Carrier, PackedZeroPoints, ResidentLayer, ResidentScales, ResidentWeights, UnpackedZeroPoints,
    ZeroPoints,
};
use w4a16_reference::{ActDtype, Activations, LayerShape};

use w4a16_kernels::set::decl;

const GEMM_KERNELS: [KernelId; 3] = [KernelId::Skinny, KernelId::Fused, KernelId::Fallback];

/// Layout knobs for a test layer.
#[derive(Clone, Copy)]
struct Layout {
    asym: bool,
    bias: bool,
    /// Extra bytes per weight row.
    weight_pad: usize,
    /// Extra elements per scale row.
    scale_pad: usize,
}

const PLAIN: Layout = Layout {
    asym: false,
    bias: false,
    weight_pad: 0,
    scale_pad: 0,
};
const ASYM: Layout = Layout {
    asym: true,
    bias: false,
    weight_pad: 0,
    scale_pad: 0,
};
const PADDED: Layout = Layout {
    asym: true,
    bias: true,
    weight_pad: 128,
    scale_pad: 8,
};

fn layer(n: usize, k: usize, g: usize, dtype: ActDtype, l: Layout) -> ResidentLayer {
    let groups = k / g;
    let row = k / 2 + l.weight_pad;
    let weights = ResidentWeights {
        n,
        k,
        row_stride_bytes: row,
        bytes: (0..(n - 1) * row + k / 2).map(|i| (i * 7) as u8).collect(),
    };
    let srow = groups + l.scale_pad;
    let scales = ResidentScales {
        n,
        groups,
        row_stride: srow,
        dtype,
        bits: vec![dtype.from_f32(0.5); (n - 1) * srow + groups],
    };
    let zeros = l.asym.then(|| {
        ZeroPoints::Packed(PackedZeroPoints {
            n,
            groups,
            words: vec![0x8888_8888; n.div_ceil(8) * groups],
        })
    });
    let bias = l.bias.then(|| vec![dtype.from_f32(1.0); n]);
    ResidentLayer {
        shape: LayerShape::new(n, k, g),
        dtype,
        weights,
        scales,
        zeros,
        bias,
    }
}

fn legacy_zeros(layer: &mut ResidentLayer) {
    let (n, groups, dtype) = (layer.shape.n, layer.shape.groups(), layer.dtype);
    layer.zeros = Some(ZeroPoints::UnpackedLegacy(UnpackedZeroPoints {
        n,
        groups,
        dtype,
        bits: vec![dtype.from_f32(8.0); n * groups],
    }));
}

fn x(m: usize, k: usize, dtype: ActDtype) -> Activations {
    Activations {
        m,
        k,
        row_stride: k,
        dtype,
        data: vec![dtype.from_f32(1.0); m * k],
    }
}

/// A valid GEMM launch: M=2, N=256, K=1024, G=128.
fn gemm_inputs(dtype: ActDtype, l: Layout) -> LaunchInputs {
    let lay = layer(256, 1024, 128, dtype, l);
    LaunchInputs::gemm(&lay, &x(2, 1024, dtype), &YSpec::dense(2, 256, dtype))
}

fn refuse(kernel: KernelId, li: &LaunchInputs) -> ContractError {
    match validate(decl(kernel), li) {
        Ok(v) => panic!("{kernel} accepted a launch it must refuse: {v:?}"),
        Err(e) => e,
    }
}

fn assert_msg(e: &ContractError, parts: &[&str]) {
    let msg = e.to_string();
    for p in parts {
        assert!(msg.contains(p), "message {msg:?} lacks {p:?}");
    }
}

// ---- the zero-point hand-off of docs/contract.md §2 ------------------------------------------------------

#[test]
fn unpacked_zero_points_are_refused_with_the_spec_message() {
    let mut lay = layer(256, 1024, 128, ActDtype::F16, ASYM);
    legacy_zeros(&mut lay);
    let li = LaunchInputs::gemm(
        &lay,
        &x(1, 1024, ActDtype::F16),
        &YSpec::dense(1, 256, ActDtype::F16),
    );
    for kernel in GEMM_KERNELS {
        let e = refuse(kernel, &li);
        assert!(
            matches!(e, ContractError::ZeroPointLayout { .. }),
            "{kernel}: {e:?}"
        );
        assert_eq!(
            e.to_string(),
            "zero points must be i32/u32 packed 8×u4 along dim 0 with shape [N/8, K/G] = [32, 8]; got f16 [256, 8]"
        );
    }
    // the dequant kernel takes the same resident tensors
    let li = LaunchInputs::dequant(&lay, &DenseSpec::unpadded(256, 1024, ActDtype::F16));
    let e = refuse(KernelId::Dequant, &li);
    assert!(matches!(e, ContractError::ZeroPointLayout { .. }));
    assert_msg(&e, &["[32, 8]", "got f16 [256, 8]"]);
}

#[test]
fn unpacked_zero_points_are_refused_before_any_device_work() {
    let mut lay = layer(256, 1024, 128, ActDtype::Bf16, ASYM);
    legacy_zeros(&mut lay);
    let xs = x(4, 1024, ActDtype::Bf16);
    let e = DeviceInputs::gemm(
        decl(KernelId::Skinny),
        &lay,
        &xs,
        YSpec::dense(4, 256, ActDtype::Bf16),
    )
    .unwrap_err();
    assert!(matches!(e, ContractError::ZeroPointLayout { .. }));
    assert_msg(&e, &["got bf16 [256, 8]"]);
}

#[test]
fn packed_zero_points_of_the_wrong_shape_are_refused() {
    let mut li = gemm_inputs(ActDtype::F16, ASYM);
    li.zeros = Some(TensorView::matrix(ElemType::U32, 16, 8, 8, 16 * 8 * 4));
    let e = refuse(KernelId::Fused, &li);
    assert!(matches!(e, ContractError::ZeroPointLayout { .. }));
    assert_msg(&e, &["[N/8, K/G] = [32, 8]", "got u32 [16, 8]"]);
}

#[test]
fn strided_zero_points_are_refused() {
    let mut li = gemm_inputs(ActDtype::F16, ASYM);
    li.zeros = Some(TensorView::matrix(ElemType::I32, 32, 8, 16, 32 * 16 * 4));
    let e = refuse(KernelId::Skinny, &li);
    assert!(matches!(e, ContractError::NotContiguous { .. }), "{e:?}");
    assert_msg(
        &e,
        &[
            "zero points must be contiguous",
            "strides [8, 1]",
            "got strides [16, 1]",
        ],
    );
}

#[test]
fn packed_zero_points_need_n_a_multiple_of_8() {
    let lay = layer(100, 1024, 128, ActDtype::F16, ASYM);
    let li = LaunchInputs::gemm(
        &lay,
        &x(1, 1024, ActDtype::F16),
        &YSpec::dense(1, 100, ActDtype::F16),
    );
    // The fast kernels read zero points in whole words per tile.
    for kernel in [KernelId::Skinny, KernelId::Fused] {
        let e = refuse(kernel, &li);
        assert_eq!(e, ContractError::NNotMultipleOf8 { n: 100 });
        assert_msg(&e, &["N = 100", "multiple of 8", "packed"]);
    }
}

/// The fallback takes a partial last word (compressed-tensors' `[ceil(N/8), K/G]`), and refuses
/// `[N/8, K/G]` rounded down, naming the ceil formula.
#[test]
fn the_fallback_takes_ceil_n_over_8_zero_point_rows() {
    let lay = layer(100, 1024, 128, ActDtype::F16, ASYM);
    let li = LaunchInputs::gemm(
        &lay,
        &x(1, 1024, ActDtype::F16),
        &YSpec::dense(1, 100, ActDtype::F16),
    );
    assert_eq!(
        li.zeros.as_ref().map(|z| z.shape.clone()),
        Some(vec![13, 8])
    );
    validate(decl(KernelId::Fallback), &li).unwrap();
    let mut short = li.clone();
    short.zeros = Some(TensorView::matrix(ElemType::U32, 12, 8, 8, 12 * 8 * 4));
    let e = refuse(KernelId::Fallback, &short);
    assert!(matches!(e, ContractError::ZeroPointLayout { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "zero points must be i32/u32 packed 8×u4 along dim 0 with shape [ceil(N/8), K/G] = [13, 8]; got u32 [12, 8]"
    );
    // The view must be backed by ceil(N/8)·(K/G) words.
    let mut thin = li.clone();
    thin.zeros = Some(TensorView::matrix(ElemType::U32, 13, 8, 8, 12 * 8 * 4));
    let e = refuse(KernelId::Fallback, &thin);
    assert_msg(&e, &["zero points", "ceil(N/8)·(K/G)·4"]);
    // The legacy unpacked tensor is still the ABI trap at a ragged N.
    let mut legacy = layer(100, 1024, 128, ActDtype::F16, ASYM);
    legacy_zeros(&mut legacy);
    let li = LaunchInputs::gemm(
        &legacy,
        &x(1, 1024, ActDtype::F16),
        &YSpec::dense(1, 100, ActDtype::F16),
    );
    let e = refuse(KernelId::Fallback, &li);
    assert!(matches!(e, ContractError::ZeroPointLayout { .. }), "{e:?}");
    assert_msg(&e, &["[ceil(N/8), K/G] = [13, 8]", "got f16 [100, 8]"]);
}

// ---- dtypes --------------------------------------------------------------------------------

#[test]
fn activation_tensors_must_share_the_activation_dtype() {
    for (role, name) in [
        (TensorRole::X, "x"),
        (TensorRole::Scales, "scales"),
        (TensorRole::Bias, "bias"),
        (TensorRole::Y, "y"),
    ] {
        let mut li = gemm_inputs(ActDtype::F16, PADDED);
        li.view_mut(role).unwrap().elem = ElemType::Bf16;
        let e = refuse(KernelId::Skinny, &li);
        assert!(
            matches!(
                e,
                ContractError::Dtype {
                    got: ElemType::Bf16,
                    ..
                }
            ),
            "{name}: {e:?}"
        );
        assert_msg(
            &e,
            &[&format!(
                "{name} must be f16 (the activation dtype); got bf16"
            )],
        );
    }
}

#[test]
fn weights_must_be_u32_words_or_u8_bytes() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    li.weights.as_mut().unwrap().elem = ElemType::F16;
    let e = refuse(KernelId::Fused, &li);
    assert!(matches!(
        e,
        ContractError::Dtype {
            tensor: "weights",
            ..
        }
    ));
    assert_msg(&e, &["weights must be u32 (or u8 bytes)", "got f16"]);
}

// ---- shapes --------------------------------------------------------------------------------

#[test]
fn weights_of_the_wrong_shape_are_refused() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    li.weights = Some(TensorView::matrix(ElemType::U32, 256, 64, 64, 256 * 64 * 4));
    let e = refuse(KernelId::Skinny, &li);
    assert!(matches!(
        e,
        ContractError::Shape {
            tensor: "weights",
            ..
        }
    ));
    assert_msg(
        &e,
        &["weights must have shape [N, K/8] = [256, 128]; got [256, 64]"],
    );
}

#[test]
fn weights_of_the_wrong_rank_are_refused() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    li.weights = Some(TensorView::vector(ElemType::U32, 256 * 128, 256 * 128 * 4));
    let e = refuse(KernelId::Fallback, &li);
    assert!(matches!(e, ContractError::Rank { expected: 2, .. }));
    assert_msg(&e, &["weights must have rank 2", "got u32 [32768]"]);
}

#[test]
fn scales_must_have_one_column_per_group() {
    let mut li = gemm_inputs(ActDtype::Bf16, PLAIN);
    li.scales = Some(TensorView::matrix(
        ElemType::Bf16,
        256,
        16,
        16,
        256 * 16 * 2,
    ));
    let e = refuse(KernelId::Fused, &li);
    assert!(matches!(
        e,
        ContractError::Shape {
            tensor: "scales",
            ..
        }
    ));
    assert_msg(
        &e,
        &["scales must have shape [N, K/G] = [256, 8]; got [256, 16]"],
    );
}

#[test]
fn scales_need_a_unit_inner_stride() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    li.scales.as_mut().unwrap().strides = vec![16, 2];
    li.scales.as_mut().unwrap().bytes_available = 256 * 16 * 2;
    let e = refuse(KernelId::Skinny, &li);
    assert_eq!(
        e,
        ContractError::InnerStride {
            tensor: "scales",
            got: 2
        }
    );
    assert_msg(&e, &["scales must have unit inner stride; got 2"]);
}

#[test]
fn bias_must_have_n_elements() {
    let mut li = gemm_inputs(ActDtype::F16, PADDED);
    li.bias = Some(TensorView::vector(ElemType::F16, 248, 248 * 2));
    let e = refuse(KernelId::Fallback, &li);
    assert!(matches!(e, ContractError::Shape { tensor: "bias", .. }));
    assert_msg(&e, &["bias must have shape [N] = [256]; got [248]"]);
}

#[test]
fn y_must_be_m_by_n() {
    let lay = layer(256, 1024, 128, ActDtype::F16, PLAIN);
    let li = LaunchInputs::gemm(
        &lay,
        &x(2, 1024, ActDtype::F16),
        &YSpec::dense(3, 256, ActDtype::F16),
    );
    let e = refuse(KernelId::Fused, &li);
    assert!(matches!(e, ContractError::Shape { tensor: "y", .. }));
    assert_msg(&e, &["y must have shape [M, N] = [2, 256]; got [3, 256]"]);
}

// ---- strides and bytes -----------------------------------------------------------------------

#[test]
fn weight_rows_shorter_than_k_over_2_bytes_are_refused() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    li.weights = Some(TensorView::matrix(ElemType::U8, 256, 512, 256, 256 * 512));
    let e = refuse(KernelId::Fallback, &li);
    assert!(
        matches!(
            e,
            ContractError::RowStride {
                tensor: "weights",
                min: 512,
                got: 256,
                ..
            }
        ),
        "{e:?}"
    );
    assert_msg(
        &e,
        &["weights row stride must be ≥ K/2 = 512 bytes; got 256"],
    );
}

#[test]
fn weight_rows_must_be_aligned_as_the_kernel_declares() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    // 516-byte rows: whole u32 words, but not the 16-byte alignment skinny declares
    li.weights = Some(TensorView::matrix(
        ElemType::U32,
        256,
        128,
        129,
        255 * 516 + 512,
    ));
    let e = refuse(KernelId::Skinny, &li);
    assert!(
        matches!(
            e,
            ContractError::RowStrideAlign {
                align: 16,
                got: 516,
                ..
            }
        ),
        "{e:?}"
    );
    assert_msg(
        &e,
        &["weights row stride must be a multiple of 16 bytes for skinny; got 516 bytes"],
    );
    // fallback declares 4-byte rows and takes the same view
    assert!(validate(decl(KernelId::Fallback), &li).is_ok());
}

#[test]
fn a_padded_weight_view_with_too_few_bytes_is_refused() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    // rows padded to 640 bytes, but the buffer is only the unpadded N·K/2
    li.weights = Some(TensorView::matrix(ElemType::U32, 256, 128, 160, 256 * 512));
    let e = refuse(KernelId::Fused, &li);
    let needed = 255 * 640 + 512;
    assert!(matches!(
        e,
        ContractError::TooFewBytes {
            tensor: "weights",
            ..
        }
    ));
    assert_msg(
        &e,
        &[&format!(
            "weights must hold (N−1)·stride + K/2 = {needed} bytes; got {}",
            256 * 512
        )],
    );
}

#[test]
fn x_rows_shorter_than_k_are_refused() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    li.x.as_mut().unwrap().strides = vec![1000, 1];
    let e = refuse(KernelId::Skinny, &li);
    assert!(matches!(e, ContractError::RowStride { tensor: "x", .. }));
    assert_msg(&e, &["x row stride must be ≥ K = 1024 elements; got 1000"]);
}

#[test]
fn y_rows_shorter_than_n_and_short_y_buffers_are_refused() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    li.y.as_mut().unwrap().strides = vec![200, 1];
    let e = refuse(KernelId::Fused, &li);
    assert!(matches!(e, ContractError::RowStride { tensor: "y", .. }));
    assert_msg(&e, &["y row stride must be ≥ N = 256 elements; got 200"]);

    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    li.y = Some(TensorView::matrix(ElemType::F16, 2, 256, 264, 2 * 256 * 2));
    let e = refuse(KernelId::Fused, &li);
    assert!(
        matches!(
            e,
            ContractError::TooFewBytes {
                tensor: "y",
                needed: 1040,
                got: 1024,
                ..
            }
        ),
        "{e:?}"
    );
    assert_msg(
        &e,
        &["y must hold ((M−1)·stride + N)·2 = 1040 bytes; got 1024"],
    );
}

#[test]
fn scale_rows_shorter_than_the_group_count_are_refused() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    li.scales.as_mut().unwrap().strides = vec![4, 1];
    let e = refuse(KernelId::Fallback, &li);
    assert!(matches!(
        e,
        ContractError::RowStride {
            tensor: "scales",
            ..
        }
    ));
    assert_msg(&e, &["scales row stride must be ≥ K/G = 8 elements; got 4"]);
}

#[test]
fn an_offset_view_needs_the_offset_bytes_too() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    let s = li.scales.as_mut().unwrap();
    s.byte_offset = 256;
    let e = refuse(KernelId::Skinny, &li);
    assert!(matches!(
        e,
        ContractError::TooFewBytes {
            tensor: "scales",
            ..
        }
    ));
    assert_msg(
        &e,
        &[
            "scales must hold offset + ((N−1)·stride + K/G)·2",
            "got 4096",
        ],
    );
}

#[test]
fn a_stride_the_kernel_is_not_told_about_must_be_unpadded() {
    // A declaration like dense's but without the x row stride argument (as dense was before it
    // passed the BLAS its X leading dimension): a padded X must be refused, not misread.
    let args: Vec<ArgDecl> = set::DENSE_ARGS
        .iter()
        .copied()
        .filter(|a| a.kind != ArgKind::I32(ScalarArg::XRowStride))
        .collect();
    let no_x_stride = KernelDecl {
        args: Box::leak(args.into_boxed_slice()),
        ..*decl(KernelId::Dense)
    };
    let xs = x(4, 1024, ActDtype::F16).with_row_stride(1032);
    let dense = DenseSpec::unpadded(256, 1024, ActDtype::F16);
    let li = LaunchInputs::dense(&xs, &dense, None, &YSpec::dense(4, 256, ActDtype::F16));
    let e = validate(&no_x_stride, &li).unwrap_err();
    assert!(
        matches!(
            e,
            ContractError::StrideNotPassed {
                tensor: "x",
                expected: 1024,
                got: 1032,
                ..
            }
        ),
        "{e:?}"
    );
    assert_msg(
        &e,
        &[
            "x row stride must be exactly K = 1024 elements",
            "dense takes no x row stride argument",
            "got 1032",
        ],
    );
    // The real dense declaration passes X's row stride to the BLAS as its leading dimension.
    let v = validate(decl(KernelId::Dense), &li).unwrap();
    assert_eq!(v.scalar(ScalarArg::XRowStride), Some(1032));
}

#[test]
fn dense_copy_rows_shorter_than_k_are_refused() {
    let lay = layer(256, 1024, 128, ActDtype::F16, PLAIN);
    let li = LaunchInputs::dequant(
        &lay,
        &DenseSpec {
            n: 256,
            k: 1024,
            row_stride: 1000,
            dtype: ActDtype::F16,
        },
    );
    let e = refuse(KernelId::Dequant, &li);
    assert!(matches!(
        e,
        ContractError::RowStride {
            tensor: "dense weights",
            ..
        }
    ));
    assert_msg(
        &e,
        &["dense weights row stride must be ≥ K = 1024 elements; got 1000"],
    );
}

// ---- sizes the kernel accepts ----------------------------------------------------------------

#[test]
fn group_sizes_outside_the_fast_path_are_refused_by_fast_kernels() {
    let lay = layer(256, 1024, 256, ActDtype::F16, PLAIN);
    let li = LaunchInputs::gemm(
        &lay,
        &x(1, 1024, ActDtype::F16),
        &YSpec::dense(1, 256, ActDtype::F16),
    );
    for kernel in [KernelId::Skinny, KernelId::Fused] {
        let e = refuse(kernel, &li);
        assert!(
            matches!(e, ContractError::GroupNotAllowed { group: 256, .. }),
            "{e:?}"
        );
        assert_msg(
            &e,
            &[
                "group size G = 256",
                kernel.name(),
                "allowed: {32, 64, 128}",
            ],
        );
    }
    // the fallback takes every G the formats allow, channelwise included
    assert!(validate(decl(KernelId::Fallback), &li).is_ok());
    let ch = layer(256, 1024, 1024, ActDtype::F16, PLAIN);
    let li = LaunchInputs::gemm(
        &ch,
        &x(1, 1024, ActDtype::F16),
        &YSpec::dense(1, 256, ActDtype::F16),
    );
    assert!(validate(decl(KernelId::Fallback), &li).is_ok());
}

#[test]
fn group_sizes_that_are_not_multiples_of_8_are_refused_by_the_fallback() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    li.group = 20;
    let e = refuse(KernelId::Fallback, &li);
    assert!(matches!(
        e,
        ContractError::GroupNotAllowed { group: 20, .. }
    ));
    assert_msg(&e, &["G = 20", "multiple of 8 that divides K"]);
}

#[test]
fn k_must_be_a_multiple_of_the_group() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    li.group = 96;
    let e = refuse(KernelId::Fallback, &li);
    assert_eq!(
        e,
        ContractError::KNotDivisibleByGroup { k: 1024, group: 96 }
    );
    assert_msg(
        &e,
        &["K = 1024 must be a multiple of the group size G = 96"],
    );
}

#[test]
fn k_must_be_a_multiple_of_the_declared_k_multiple() {
    let lay = layer(64, 1000, 8, ActDtype::F16, PLAIN);
    let li = LaunchInputs::gemm(
        &lay,
        &x(1, 1000, ActDtype::F16),
        &YSpec::dense(1, 64, ActDtype::F16),
    );
    let e = refuse(KernelId::Fallback, &li);
    assert!(matches!(
        e,
        ContractError::KNotMultiple {
            k: 1000,
            multiple: 16,
            ..
        }
    ));
    assert_msg(&e, &["K = 1000 must be a multiple of 16 for fallback"]);
}

#[test]
fn skinny_refuses_m_above_its_range() {
    let lay = layer(256, 1024, 128, ActDtype::F16, PLAIN);
    let li = LaunchInputs::gemm(
        &lay,
        &x(6, 1024, ActDtype::F16),
        &YSpec::dense(6, 256, ActDtype::F16),
    );
    let e = refuse(KernelId::Skinny, &li);
    assert_eq!(
        e,
        ContractError::MOutOfRange {
            kernel: KernelId::Skinny,
            m: 6,
            min: 1,
            max: Some(5)
        }
    );
    assert_msg(&e, &["M = 6 is outside the range skinny accepts: [1, 5]"]);
    assert!(validate(decl(KernelId::Fused), &li).is_ok());
}

#[test]
fn zero_sized_dimensions_are_refused() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    li.m = 0;
    let e = refuse(KernelId::Fused, &li);
    assert_eq!(
        e,
        ContractError::ZeroSized {
            kernel: KernelId::Fused,
            dim: "M"
        }
    );
    assert_msg(&e, &["M must be positive for fused; got 0"]);
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    li.n = 0;
    assert!(matches!(
        refuse(KernelId::Fallback, &li),
        ContractError::ZeroSized { dim: "N", .. }
    ));
}

// ---- pointers ----------------------------------------------------------------------------------

#[test]
fn a_null_pointer_for_a_required_argument_is_refused() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    li.set(TensorRole::X, None);
    let e = refuse(KernelId::Skinny, &li);
    assert_eq!(
        e,
        ContractError::NullPointer {
            kernel: KernelId::Skinny,
            arg: "x",
            tensor: "x"
        }
    );
    assert_msg(
        &e,
        &["argument `x` of skinny", "null pointer", "not nullable"],
    );
}

#[test]
fn a_tensor_the_kernel_has_no_argument_for_is_refused() {
    let lay = layer(256, 1024, 128, ActDtype::F16, PLAIN);
    let mut li = LaunchInputs::dequant(&lay, &DenseSpec::unpadded(256, 1024, ActDtype::F16));
    li.bias = Some(TensorView::vector(ElemType::F16, 256, 512));
    let e = refuse(KernelId::Dequant, &li);
    assert!(matches!(
        e,
        ContractError::UnexpectedTensor { tensor: "bias", .. }
    ));
    assert_msg(&e, &["dequant takes no bias argument; got f16 [256]"]);
}

#[test]
fn misaligned_pointers_are_refused() {
    // Tensors other than X and Y follow the declaration's pointer alignment: skinny loads its
    // weights 16 bytes at a time.
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    let wv = li.weights.as_mut().unwrap();
    wv.byte_offset = 4;
    wv.bytes_available += 4;
    let e = refuse(KernelId::Skinny, &li);
    assert_eq!(
        e,
        ContractError::Misaligned {
            tensor: "weights",
            align: 16,
            got: 4,
            offset: 4
        }
    );
    assert_msg(
        &e,
        &["weights must start at an address aligned to 16 bytes; got alignment 4"],
    );
    assert_eq!(e.row_layout_tensor(), None);
    // the same view with a 16-byte offset is fine
    let wv = li.weights.as_mut().unwrap();
    wv.byte_offset = 16;
    wv.bytes_available += 12;
    assert!(validate(decl(KernelId::Skinny), &li).is_ok());
}

// ---- X and Y row layouts (docs/contract.md §2: strided, offset slices) ----------------------------------

/// Every kernel that reads X and writes Y: the GEMMs and the dense (vendor BLAS) path.
const XY_KERNELS: [KernelId; 4] = [
    KernelId::Skinny,
    KernelId::Fused,
    KernelId::Fallback,
    KernelId::Dense,
];

/// A launch of `kernel` (M = 2, N = 256, K = 1024) with X and Y as the given views.
fn xy_inputs(kernel: KernelId, xv: TensorView, y: YSpec) -> LaunchInputs {
    let dtype = ActDtype::F16;
    let mut li = match kernel {
        KernelId::Dense => {
            let dense = DenseSpec::unpadded(256, 1024, dtype);
            LaunchInputs::dense(&x(2, 1024, dtype), &dense, None, &y)
        }
        _ => gemm_inputs(dtype, PLAIN),
    };
    li.x = Some(xv);
    li.y = Some(y.view());
    li
}

fn x_view(stride: usize, offset: usize) -> TensorView {
    XBuffer::planned_view(2, 1024, stride, offset, ActDtype::F16)
}

fn y_spec(stride: usize, offset: usize) -> YSpec {
    YSpec::strided(2, 256, stride, offset, ActDtype::F16)
}

/// The kernel sources pick vector accesses at run time (skinny `x_vec16`/`x_vec8`, fused
/// `x_vec`) and the BLAS takes any leading dimension: every element-aligned view is theirs.
#[test]
fn every_kernel_takes_the_strided_and_offset_views_it_declares() {
    for kernel in XY_KERNELS {
        let d = decl(kernel);
        assert_eq!(d.contract.x_rows, Some(RowLayoutRule::ELEMENT), "{kernel}");
        assert_eq!(d.contract.y_rows, Some(RowLayoutRule::ELEMENT), "{kernel}");
        for pad in [0usize, 3, 4, 8] {
            for offset in [0usize, 1, 4] {
                let li = xy_inputs(kernel, x_view(1024 + pad, offset), y_spec(256, 0));
                let v = validate(d, &li)
                    .unwrap_or_else(|e| panic!("{kernel} x pad {pad} offset {offset}: {e}"));
                assert_eq!(v.scalar(ScalarArg::XRowStride), Some(1024 + pad as i32));
                assert!(v.args.contains(&ArgValue::Pointer {
                    role: TensorRole::X,
                    present: true,
                    byte_offset: 2 * offset
                }));
                let li = xy_inputs(kernel, x_view(1024, 0), y_spec(256 + pad, offset));
                let v = validate(d, &li)
                    .unwrap_or_else(|e| panic!("{kernel} y pad {pad} offset {offset}: {e}"));
                assert_eq!(v.scalar(ScalarArg::YRowStride), Some(256 + pad as i32));
                assert!(v.args.contains(&ArgValue::Pointer {
                    role: TensorRole::Y,
                    present: true,
                    byte_offset: 2 * offset
                }));
            }
        }
    }
}

#[test]
fn every_kernel_refuses_x_or_y_off_its_element_alignment() {
    for kernel in XY_KERNELS {
        let mut xv = x_view(1024, 0);
        xv.byte_offset = 1;
        xv.bytes_available += 1;
        let e = refuse(kernel, &xy_inputs(kernel, xv, y_spec(256, 0)));
        assert_eq!(
            e,
            ContractError::Misaligned {
                tensor: "x",
                align: 2,
                got: 1,
                offset: 1
            },
            "{kernel}"
        );
        assert_msg(
            &e,
            &["x must start at an address aligned to 2 bytes; got alignment 1 (byte offset 1)"],
        );
        assert_eq!(e.row_layout_tensor(), Some(TensorRole::X));

        let mut li = xy_inputs(kernel, x_view(1024, 0), y_spec(256, 0));
        let yv = li.y.as_mut().unwrap();
        yv.byte_offset = 3;
        yv.bytes_available += 3;
        let e = refuse(kernel, &li);
        assert!(
            matches!(
                e,
                ContractError::Misaligned {
                    tensor: "y",
                    align: 2,
                    got: 1,
                    offset: 3
                }
            ),
            "{kernel}: {e:?}"
        );
        assert_eq!(e.row_layout_tensor(), Some(TensorRole::Y));
    }
}

/// A kernel that vectorised X and Y unconditionally would declare 16-byte rows; validation
/// then refuses strides and bases off that rule, naming the tensor, the rule and the view.
#[test]
fn a_declared_vector_row_rule_refuses_the_views_it_cannot_take() {
    let vec16 = RowLayoutRule {
        row_stride_multiple: 8,
        base_align_bytes: 16,
    };
    for kernel in XY_KERNELS {
        let mut d = *decl(kernel);
        d.contract.x_rows = Some(vec16);
        d.contract.y_rows = Some(vec16);
        // accepted: 16-byte rows at a 16-byte base
        let li = xy_inputs(kernel, x_view(1032, 8), y_spec(264, 0));
        validate(&d, &li).unwrap_or_else(|e| panic!("{kernel}: {e}"));

        let e = validate(&d, &xy_inputs(kernel, x_view(1027, 0), y_spec(256, 0))).unwrap_err();
        assert_eq!(
            e,
            ContractError::RowStrideAlign {
                kernel,
                tensor: "x",
                align: 16,
                got: 2054
            }
        );
        assert_msg(
            &e,
            &[&format!(
                "x row stride must be a multiple of 16 bytes for {kernel}; got 2054 bytes"
            )],
        );
        assert_eq!(e.row_layout_tensor(), Some(TensorRole::X));

        let e = validate(&d, &xy_inputs(kernel, x_view(1024, 4), y_spec(256, 0))).unwrap_err();
        assert_eq!(
            e,
            ContractError::Misaligned {
                tensor: "x",
                align: 16,
                got: 8,
                offset: 8
            },
            "{kernel}"
        );

        let e = validate(&d, &xy_inputs(kernel, x_view(1024, 0), y_spec(260, 0))).unwrap_err();
        assert_eq!(
            e,
            ContractError::RowStrideAlign {
                kernel,
                tensor: "y",
                align: 16,
                got: 520
            }
        );
        assert_eq!(e.row_layout_tensor(), Some(TensorRole::Y));
        let e = validate(&d, &xy_inputs(kernel, x_view(1024, 0), y_spec(256, 1))).unwrap_err();
        assert!(
            matches!(
                e,
                ContractError::Misaligned {
                    tensor: "y",
                    align: 16,
                    got: 2,
                    ..
                }
            ),
            "{kernel}: {e:?}"
        );

        // one row has no stride to align
        let mut li = xy_inputs(kernel, x_view(1027, 0), y_spec(260, 0));
        li.m = 1;
        li.x = Some(XBuffer::planned_view(1, 1024, 1027, 0, ActDtype::F16));
        li.y = Some(YSpec::strided(1, 256, 260, 0, ActDtype::F16).view());
        validate(&d, &li).unwrap_or_else(|e| panic!("{kernel} M=1: {e}"));
    }
}

#[test]
fn kernels_without_x_or_y_declare_no_row_rule_and_take_no_such_tensor() {
    let d = decl(KernelId::Dequant);
    assert_eq!((d.contract.x_rows, d.contract.y_rows), (None, None));
    let lay = layer(256, 1024, 128, ActDtype::F16, PLAIN);
    let mut li = LaunchInputs::dequant(&lay, &DenseSpec::unpadded(256, 1024, ActDtype::F16));
    li.x = Some(x_view(1027, 1));
    let e = refuse(KernelId::Dequant, &li);
    assert!(
        matches!(e, ContractError::UnexpectedTensor { tensor: "x", .. }),
        "{e:?}"
    );
}

#[test]
fn launch_scalars_that_overflow_i32_are_refused() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    li.m = 1;
    li.y = Some(YSpec::dense(1, 256, ActDtype::F16).view());
    li.x = Some(TensorView::matrix(ElemType::F16, 1, 1024, 1 << 31, 2048));
    let e = refuse(KernelId::Fused, &li);
    assert!(
        matches!(
            e,
            ContractError::Int32Overflow {
                value: 2147483648,
                ..
            }
        ),
        "{e:?}"
    );
    assert_msg(
        &e,
        &["x row stride (argument `x_row_stride`) = 2147483648 overflows"],
    );
}

#[test]
fn byte_extents_that_overflow_i32_are_refused() {
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    li.y = Some(TensorView::matrix(
        ElemType::F16,
        2,
        256,
        1 << 30,
        usize::MAX,
    ));
    let e = refuse(KernelId::Fused, &li);
    assert!(matches!(e, ContractError::Int32Overflow { .. }), "{e:?}");
    assert_msg(&e, &["y byte extent", "overflows the kernel's 32-bit"]);
}

#[test]
fn host_buffers_shorter_than_their_views_are_refused() {
    let lay = layer(256, 1024, 128, ActDtype::F16, PLAIN);
    let xs = x(2, 1024, ActDtype::F16);
    let li = LaunchInputs::gemm(&lay, &xs, &YSpec::dense(2, 256, ActDtype::F16));
    let short = &xs.data[..1024];
    let host = vec![
        (TensorRole::X, HostBytes::U16(short)),
        (TensorRole::Weights, HostBytes::U8(&lay.weights.bytes)),
        (TensorRole::Scales, HostBytes::U16(&lay.scales.bits)),
    ];
    let e = DeviceInputs::new(decl(KernelId::Fused), li, host).unwrap_err();
    assert_eq!(
        e,
        ContractError::HostBufferShort {
            tensor: "x",
            claimed: 4096,
            got: 2048
        }
    );
}

// ---- valid launches --------------------------------------------------------------------------

#[test]
fn valid_symmetric_asymmetric_and_padded_launches_pass_every_gemm_kernel() {
    for dtype in ActDtype::ALL {
        for (name, l) in [("sym", PLAIN), ("asym", ASYM), ("padded", PADDED)] {
            for kernel in GEMM_KERNELS {
                let d = decl(kernel);
                let m = if kernel == KernelId::Skinny { 5 } else { 17 };
                let lay = layer(256, 1024, 128, dtype, l);
                let xs = if l.weight_pad > 0 {
                    x(m, 1024, dtype).with_row_stride(1040)
                } else {
                    x(m, 1024, dtype)
                };
                let y = YSpec {
                    m,
                    n: 256,
                    row_stride: 256 + l.scale_pad,
                    offset: 0,
                    dtype,
                };
                let inputs = DeviceInputs::gemm(d, &lay, &xs, y)
                    .unwrap_or_else(|e| panic!("{kernel} {dtype} {name}: {e}"));
                let v = inputs.validated();
                assert_eq!(v.kernel, kernel);
                assert_eq!(v.args.len(), d.args.len());
                assert_eq!(v.shape.asymmetric, l.asym);
                assert_eq!(v.scalar(ScalarArg::M), Some(m as i32));
                assert_eq!(
                    v.scalar(ScalarArg::WeightRowStrideBytes),
                    Some((512 + l.weight_pad) as i32)
                );
                assert_eq!(
                    v.scalar(ScalarArg::ScaleRowStride),
                    Some((8 + l.scale_pad) as i32)
                );
                assert_eq!(v.scalar(ScalarArg::XRowStride), Some(xs.row_stride as i32));
                assert_eq!(v.scalar(ScalarArg::YRowStride), Some(y.row_stride as i32));
                let zeros = v.args.iter().find(|a| {
                    matches!(
                        a,
                        ArgValue::Pointer {
                            role: TensorRole::Zeros,
                            ..
                        }
                    )
                });
                assert_eq!(
                    zeros,
                    Some(&ArgValue::Pointer {
                        role: TensorRole::Zeros,
                        present: l.asym,
                        byte_offset: 0
                    })
                );
                assert_eq!(inputs.output_role(), TensorRole::Y);
            }
        }
    }
}

#[test]
fn valid_dequant_and_dense_launches_pass() {
    for dtype in ActDtype::ALL {
        for l in [
            PLAIN,
            ASYM,
            Layout {
                bias: false,
                ..PADDED
            },
        ] {
            let lay = layer(256, 2048, 64, dtype, l);
            let dense = DenseSpec::cache_cliff_padded(256, 2048, dtype);
            assert_eq!(dense.row_stride, 2048 + 64);
            let inputs = DeviceInputs::dequant(decl(KernelId::Dequant), &lay, dense).unwrap();
            assert_eq!(
                inputs.validated().scalar(ScalarArg::DenseRowStride),
                Some(2112)
            );
            assert_eq!(inputs.output_role(), TensorRole::Dense);
            assert!(inputs.host(TensorRole::Bias).is_none());
        }
        let xs = x(256, 2048, dtype);
        let dense = DenseSpec::cache_cliff_padded(128, 2048, dtype);
        let bits = vec![0u16; dense.bytes() / 2];
        let inputs = DeviceInputs::dense(
            decl(KernelId::Dense),
            &xs,
            dense,
            &bits,
            None,
            YSpec::dense(256, 128, dtype),
        )
        .unwrap();
        assert_eq!(
            inputs.validated().scalar(ScalarArg::DenseRowStride),
            Some(2112)
        );
    }
}

#[test]
fn a_u8_view_of_the_weights_with_an_odd_stride_passes_where_alignment_allows() {
    // 514-byte rows cannot be expressed as u32 strides; the view falls back to bytes
    let mut lay = layer(64, 1024, 128, ActDtype::F16, PLAIN);
    lay.weights = ResidentWeights {
        n: 64,
        k: 1024,
        row_stride_bytes: 514,
        bytes: vec![0; 63 * 514 + 512],
    };
    let li = LaunchInputs::gemm(
        &lay,
        &x(1, 1024, ActDtype::F16),
        &YSpec::dense(1, 64, ActDtype::F16),
    );
    assert_eq!(li.weights.as_ref().unwrap().elem, ElemType::U8);
    let e = refuse(KernelId::Fallback, &li);
    assert!(
        matches!(
            e,
            ContractError::RowStrideAlign {
                align: 4,
                got: 514,
                ..
            }
        ),
        "{e:?}"
    );
}

// ---- argument packing ----------------------------------------------------------------------

#[test]
fn packing_follows_the_declared_offsets() {
    for kernel in GEMM_KERNELS {
        let d = decl(kernel);
        let li = gemm_inputs(
            ActDtype::F16,
            Layout {
                asym: false,
                ..PADDED
            },
        );
        let v = validate(d, &li).unwrap();
        let base = |role: TensorRole| 0x7000_0000_0000u64 + 0x1_0000 * (role as u64 + 1);
        let packed = pack_args(d, &v, &base).unwrap();
        let (offsets, size) = arg_offsets(d.args);
        assert_eq!(packed.offsets, offsets);
        assert_eq!(packed.bytes.len(), size);
        assert_eq!(size, 6 * 8 + 8 * 4, "GEMM ABI: six pointers then eight i32");
        for ((a, &off), raw) in d.args.iter().zip(&offsets).zip(packed.values(d).unwrap()) {
            match a.kind {
                ArgKind::Pointer { role, .. } => {
                    let got = u64::from_le_bytes(packed.bytes[off..off + 8].try_into().unwrap());
                    let want = if role == TensorRole::Zeros {
                        0
                    } else {
                        base(role)
                    };
                    assert_eq!(got, want, "{kernel} {}", a.name);
                    assert_eq!(raw, RawArg::Pointer(want));
                }
                ArgKind::I32(s) => {
                    let got = i32::from_le_bytes(packed.bytes[off..off + 4].try_into().unwrap());
                    assert_eq!(Some(got), v.scalar(s), "{kernel} {}", a.name);
                    assert_eq!(raw, RawArg::I32(got));
                }
            }
        }
    }
}

#[test]
fn packing_adds_view_offsets_and_refuses_a_foreign_validation() {
    let d = decl(KernelId::Fallback);
    let mut li = gemm_inputs(ActDtype::F16, PLAIN);
    let xv = li.x.as_mut().unwrap();
    xv.byte_offset = 64;
    xv.bytes_available += 64;
    let v = validate(d, &li).unwrap();
    let packed = pack_args(d, &v, &|_| 0x1000).unwrap();
    assert_eq!(
        u64::from_le_bytes(packed.bytes[0..8].try_into().unwrap()),
        0x1000 + 64
    );

    let e = pack_args(decl(KernelId::Dequant), &v, &|_| 0x1000).unwrap_err();
    assert_eq!(
        e,
        ContractError::WrongKernel {
            kernel: KernelId::Dequant,
            validated: KernelId::Fallback
        }
    );
}

#[test]
fn every_gemm_kernel_reads_the_same_argument_list() {
    let names: Vec<Vec<&str>> = GEMM_KERNELS
        .iter()
        .map(|k| decl(*k).args.iter().map(|a| a.name).collect())
        .collect();
    assert!(names.windows(2).all(|w| w[0] == w[1]));
    let _: &KernelDecl = decl(KernelId::Dense);
}

#[test]
fn the_dense_path_takes_a_bias_of_n_elements() {
    let dtype = ActDtype::Bf16;
    let xs = x(3, 1024, dtype);
    let dense = DenseSpec::unpadded(256, 1024, dtype);
    let bits = vec![0u16; dense.bytes() / 2];
    let bias = vec![dtype.from_f32(0.5); 256];
    let inputs = DeviceInputs::dense(
        decl(KernelId::Dense),
        &xs,
        dense,
        &bits,
        Some(&bias),
        YSpec::dense(3, 256, dtype),
    )
    .unwrap();
    assert_eq!(
        inputs.host(TensorRole::Bias),
        Some(HostBytes::U16(&bias[..]))
    );
    assert!(matches!(
        inputs.validated().args[2],
        ArgValue::Pointer {
            role: TensorRole::Bias,
            present: true,
            ..
        }
    ));

    let short = vec![0u16; 255];
    let mut li = LaunchInputs::dense(&xs, &dense, Some(&short), &YSpec::dense(3, 256, dtype));
    let e = refuse(KernelId::Dense, &li);
    assert!(
        matches!(e, ContractError::Shape { tensor: "bias", .. }),
        "{e:?}"
    );
    li.bias = Some(TensorView::vector(ElemType::F16, 256, 512));
    let e = refuse(KernelId::Dense, &li);
    assert!(
        matches!(e, ContractError::Dtype { tensor: "bias", .. }),
        "{e:?}"
    );
}

// ---- the carrier hand-off (docs/contract.md §2; docs/field.md §0 item 7, §6 items 4 and 9) ------------------------

/// A valid fused_carrier launch on `lay` (M=2, N=256, K=1024, G=128) with its carrier.
fn carrier_inputs(lay: &ResidentLayer, carrier: Option<&Carrier>) -> LaunchInputs {
    let dtype = lay.dtype;
    let xs = x(2, 1024, dtype);
    LaunchInputs::gemm_carrier_view(
        lay,
        carrier,
        w4a16_device::tensor::activations_view(&xs),
        &YSpec::dense(2, 256, dtype),
    )
}

/// The carrier launch passes with padded weights and scales: the carrier keeps its own stride
/// K/G, packed in place of the scales' (`carrier_row_stride`), and no scales or zero points go
/// with it.
#[test]
fn a_carrier_launch_passes_with_the_carriers_own_stride() {
    for dtype in ActDtype::ALL {
        let lay = layer(256, 1024, 128, dtype, PADDED);
        let c = Carrier::from_resident(&lay).unwrap();
        let xs = x(17, 1024, dtype);
        let xb = XBuffer::as_laid_out(&xs);
        let d = decl(KernelId::FusedCarrier);
        let y = YSpec::dense(17, 256, dtype);
        let inputs = DeviceInputs::gemm_carrier_strided(d, &lay, Some(&c), &xb, y)
            .unwrap_or_else(|e| panic!("{dtype}: {e}"));
        let v = inputs.validated();
        assert!(v.shape.asymmetric);
        assert_eq!(v.scalar(ScalarArg::CarrierRowStride), Some(8));
        assert_eq!(v.scalar(ScalarArg::ScaleRowStride), None);
        assert_eq!(v.scalar(ScalarArg::WeightRowStrideBytes), Some(512 + 128));
        assert!(v.args.contains(&ArgValue::Pointer {
            role: TensorRole::Carrier,
            present: true,
            byte_offset: 0
        }));
        let roles = inputs.launch().present_roles();
        assert!(!roles.contains(&TensorRole::Scales) && !roles.contains(&TensorRole::Zeros));
        assert_eq!(
            inputs.host(TensorRole::Carrier),
            Some(HostBytes::U32(&c.words))
        );
        let packed = pack_args(d, v, &|role| match role {
            TensorRole::Carrier => 0x7000,
            _ => 0x1000,
        })
        .unwrap();
        let (offsets, _) = arg_offsets(d.args);
        let at = offsets[d
            .args
            .iter()
            .position(|a| a.name == "carrier_row_stride")
            .unwrap()];
        assert_eq!(packed.bytes[at..at + 4], 8i32.to_le_bytes());
        let at = offsets[2];
        assert_eq!(packed.bytes[at..at + 8], 0x7000u64.to_le_bytes());
    }
}

/// Plain scales handed over where the carrier is expected: in the carrier's slot (activation
/// dtype, not u32 words), or as the scales of a plain GEMM launch given to fused_carrier.
#[test]
fn plain_scales_where_the_carrier_is_expected_are_refused() {
    for dtype in ActDtype::ALL {
        let lay = layer(256, 1024, 128, dtype, ASYM);
        let c = Carrier::from_resident(&lay).unwrap();
        let mut li = carrier_inputs(&lay, Some(&c));
        li.carrier = Some(TensorView::matrix(dtype.into(), 256, 8, 8, 256 * 8 * 2));
        let e = refuse(KernelId::FusedCarrier, &li);
        assert_eq!(
            e,
            ContractError::CarrierLayout {
                expected: vec![256, 8],
                got: format!("{dtype} [256, 8]")
            }
        );
        assert_eq!(e.tensor(), Some("carrier"));
        assert_msg(
            &e,
            &[
                "carrier must be u32 [N, K/G] = [256, 8]",
                "plain scales are no carrier",
                &format!("got {dtype} [256, 8]"),
            ],
        );
        // A carrier of the wrong shape is the same refusal.
        li.carrier = Some(TensorView::matrix(ElemType::U32, 32, 8, 8, 32 * 8 * 4));
        assert_msg(
            &refuse(KernelId::FusedCarrier, &li),
            &["= [256, 8]", "got u32 [32, 8]"],
        );

        let plain = LaunchInputs::gemm(&lay, &x(2, 1024, dtype), &YSpec::dense(2, 256, dtype));
        let e = refuse(KernelId::FusedCarrier, &plain);
        assert!(
            matches!(
                e,
                ContractError::UnexpectedTensor {
                    kernel: KernelId::FusedCarrier,
                    tensor: "scales",
                    ..
                }
            ),
            "{e:?}"
        );
        assert_msg(
            &e,
            &[&format!(
                "fused_carrier takes no scales argument; got {dtype} [256, 8]"
            )],
        );
        // And the other way round: fused takes no carrier.
        let mut li = plain.clone();
        li.carrier = Some(w4a16_device::tensor::carrier_view(&c));
        assert_msg(
            &refuse(KernelId::Fused, &li),
            &["fused takes no carrier argument; got u32 [256, 8]"],
        );
    }
}

/// The trap of docs/field.md §6 item 4: the unpadded carrier read with the scales' padded row stride
/// runs past its rows. Refused by stride (whatever bytes the view claims), before any launch.
#[test]
fn a_carrier_with_the_scales_padded_stride_is_refused() {
    let lay = layer(256, 1024, 128, ActDtype::F16, PADDED);
    assert_eq!(lay.scales.row_stride, 16);
    let c = Carrier::from_resident(&lay).unwrap();
    assert_eq!(c.words.len(), 256 * 8, "the carrier itself is never padded");
    for (stride, bytes) in [
        (16usize, c.words.len() * 4),
        (16, 255 * 16 * 4 + 32),
        (4, 8192),
    ] {
        let mut li = carrier_inputs(&lay, Some(&c));
        li.carrier = Some(TensorView::matrix(ElemType::U32, 256, 8, stride, bytes));
        let e = refuse(KernelId::FusedCarrier, &li);
        assert_eq!(
            e,
            ContractError::CarrierRowStride {
                expected: 8,
                got: stride
            }
        );
        assert_eq!(e.tensor(), Some("carrier"));
        assert_msg(
            &e,
            &[
                "carrier row stride must be exactly K/G = 8 words",
                &format!("got {stride}"),
            ],
        );
    }
    // The same carrier at its own stride passes.
    validate(
        decl(KernelId::FusedCarrier),
        &carrier_inputs(&lay, Some(&c)),
    )
    .unwrap();
}

/// Symmetric layers read their scales directly and have no carrier: a carrier launch for one is
/// refused naming the layer, whether a carrier comes along (built for another layer) or not, and
/// before anything reaches a device.
#[test]
fn a_carrier_for_a_symmetric_layer_is_refused() {
    let sym = layer(256, 1024, 128, ActDtype::Bf16, PLAIN);
    assert!(matches!(
        Carrier::from_resident(&sym),
        Err(w4a16_reference::formats::CarrierError::SymmetricLayer)
    ));
    let other = Carrier::from_resident(&layer(256, 1024, 128, ActDtype::Bf16, ASYM)).unwrap();
    for carrier in [None, Some(&other)] {
        let e = refuse(KernelId::FusedCarrier, &carrier_inputs(&sym, carrier));
        assert_eq!(
            e,
            ContractError::CarrierForSymmetricLayer {
                kernel: KernelId::FusedCarrier,
                layer: Some(w4a16_reference::layer::Symmetry::Sym)
            }
        );
        assert_eq!(e.tensor(), Some("carrier"));
        assert_msg(
            &e,
            &[
                "fused_carrier reads the asymmetric carrier, but the layer is symmetric (no zero points)",
                "symmetric layers read their scales directly and have no carrier",
            ],
        );
    }
    let xs = x(2, 1024, ActDtype::Bf16);
    let xb = XBuffer::as_laid_out(&xs);
    let y = YSpec::dense(2, 256, ActDtype::Bf16);
    let e = DeviceInputs::gemm_carrier_strided(decl(KernelId::FusedCarrier), &sym, None, &xb, y)
        .unwrap_err();
    assert!(
        matches!(e, ContractError::CarrierForSymmetricLayer { .. }),
        "{e:?}"
    );
    // An asymmetric layer whose carrier is missing is a null carrier pointer.
    let asym = layer(256, 1024, 128, ActDtype::Bf16, ASYM);
    let e = refuse(KernelId::FusedCarrier, &carrier_inputs(&asym, None));
    assert!(
        matches!(
            e,
            ContractError::NullPointer {
                tensor: "carrier",
                ..
            }
        ),
        "{e:?}"
    );
}

/// The carrier refusals reach the parent of a fault-isolated worker intact.
#[test]
fn carrier_refusals_survive_the_worker_pipe() {
    for e in [
        ContractError::CarrierLayout {
            expected: vec![256, 8],
            got: "f16 [256, 8]".into(),
        },
        ContractError::CarrierRowStride {
            expected: 8,
            got: 16,
        },
        ContractError::CarrierForSymmetricLayer {
            kernel: KernelId::FusedCarrier,
            layer: Some(w4a16_reference::layer::Symmetry::Sym),
        },
    ] {
        let json = serde_json::to_string(&e).unwrap();
        let back: ContractError = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e, "{json}");
        assert_eq!(back.to_string(), e.to_string());
    }
}
