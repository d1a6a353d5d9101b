//! Launch-boundary validation without a GPU, the tensor contract: every rule (zero points,
//! dtypes, shapes, strides and bytes, sizes, pointers) refuses a bad launch with a typed error
//! that names the tensor, what the kernel's declaration expects and what it got
//! (docs/contract.md §2, ARCHITECTURE.md rule 1). X and Y views, valid launches and argument
//! packing: `validation_launches.rs`; the carrier hand-off: `validation_carrier.rs`.

mod common;

use common::{
    ASYM, GEMM_KERNELS, PADDED, PLAIN, assert_msg, gemm_inputs, layer, legacy_zeros, refuse, x,
};
use w4a16_device::launch::DeviceInputs;
use w4a16_device::tensor::{DenseSpec, ElemType, LaunchInputs, TensorView, YSpec};
use w4a16_device::validate::{ContractError, validate};
use w4a16_kernels::set::decl;
use w4a16_kernels::{ArgDecl, ArgKind, KernelDecl, KernelId, ScalarArg, TensorRole, set};
use w4a16_reference::ActDtype;

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
