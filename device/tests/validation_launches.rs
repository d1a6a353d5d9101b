//! Launch-boundary validation without a GPU, the launch as a whole: the X and Y views each
//! kernel takes (docs/contract.md §2), launch scalars and byte extents within i32, valid
//! symmetric, asymmetric and padded launches passing every kernel that takes them, and the
//! argument buffer packed at the declared offsets (ARCHITECTURE.md rule 1).

mod common;

use common::{
    ASYM, GEMM_KERNELS, Layout, PADDED, PLAIN, assert_msg, gemm_inputs, layer, refuse, x,
};
use w4a16_device::launch::{DeviceInputs, HostBytes, RawArg, pack_args};
use w4a16_device::tensor::{DenseSpec, ElemType, LaunchInputs, TensorView, XBuffer, YSpec};
use w4a16_device::validate::{ArgValue, ContractError, validate};
use w4a16_kernels::decl::{RowLayoutRule, arg_offsets};
use w4a16_kernels::set::decl;
use w4a16_kernels::{ArgKind, KernelDecl, KernelId, ScalarArg, TensorRole};
use w4a16_reference::ActDtype;
use w4a16_reference::formats::ResidentWeights;

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
