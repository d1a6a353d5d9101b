//! Launch-boundary validation without a GPU, the carrier hand-off of fused_carrier
//! (docs/contract.md §2; docs/field.md §0 item 7, §6 items 4 and 9): its own row stride, plain
//! scales in its place, symmetric layers, and its refusals through the worker pipe.

mod common;

use common::{ASYM, PADDED, PLAIN, assert_msg, layer, refuse, x};
use w4a16_device::launch::{DeviceInputs, HostBytes, pack_args};
use w4a16_device::tensor::{ElemType, LaunchInputs, TensorView, XBuffer, YSpec};
use w4a16_device::validate::{ArgValue, ContractError, validate};
use w4a16_kernels::decl::arg_offsets;
use w4a16_kernels::set::decl;
use w4a16_kernels::{KernelId, ScalarArg, TensorRole};
use w4a16_reference::ActDtype;
use w4a16_reference::formats::{Carrier, ResidentLayer};

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
