use super::fixture::{E, K, Layer, N, T, TOP_K};
use super::*;
use crate::validate::ArgValue;
use w4a16_kernels::ScalarArg;

fn refused(l: &MoeLaunch<'_>) -> ContractError {
    match l.validate() {
        Ok(_) => panic!("accepted a launch it must refuse"),
        Err(e) => e,
    }
}

#[test]
fn a_valid_launch_validates_both_kernels_with_the_routing_scalars() {
    let layer = Layer::new();
    let l = layer.launch();
    let v = l.validate().unwrap();
    let cap = set::moe_align_capacity(T * TOP_K, E, 16).unwrap();
    assert_eq!(cap.blocks, 5);
    let a = v.align();
    assert_eq!(a.scalar(ScalarArg::Slots), Some(6));
    assert_eq!(a.scalar(ScalarArg::Experts), Some(4));
    assert_eq!(a.scalar(ScalarArg::BlockM), Some(16));
    assert_eq!(a.scalar(ScalarArg::SortedCapacity), Some(cap.sorted as i32));
    // The map is optional: null here.
    assert!(a.args.contains(&ArgValue::Pointer {
        role: TensorRole::ExpertMap,
        present: false,
        byte_offset: 0
    }));
    let m = v.moe();
    assert_eq!(m.scalar(ScalarArg::TopK), Some(2));
    assert_eq!(m.scalar(ScalarArg::Slots), Some(6));
    assert_eq!(m.scalar(ScalarArg::WeightRowStrideBytes), Some(32));
    assert_eq!(m.scalar(ScalarArg::ScaleRowStride), Some(2));
    assert_eq!(m.scalar(ScalarArg::YRowStride), Some(N as i32));
    assert_eq!(
        m.shape.routing,
        Some(w4a16_kernels::RoutedDims {
            top_k: TOP_K,
            experts: E
        })
    );
    assert_eq!(v.moe_entry(), "w4a16_moe_f16_16x64x32w4");
    assert_eq!(v.moe_geometry().grid, [1, cap.blocks as u32, 1]);
    layer.mapped().validate().unwrap();
}

#[test]
fn a_tile_that_is_not_compiled_is_refused() {
    let layer = Layer::new();
    let tile = Tile {
        bm: 16,
        bn: 16,
        bk: 32,
        warps: 1,
    };
    let e = refused(&MoeLaunch {
        tile,
        ..layer.launch()
    });
    assert!(
        matches!(e, ContractError::TileNotCompiled { kernel: KernelId::Moe, tile: t, .. } if t == tile),
        "{e}"
    );
    assert!(e.to_string().contains("16x64x32w4"), "{e}");
}

#[test]
fn topk_ids_outside_the_experts_are_refused() {
    let mut layer = Layer::new();
    layer.ids[3] = E as i32;
    let e = refused(&layer.launch());
    assert_eq!(
        e,
        ContractError::TopkIdOutOfRange {
            index: 3,
            id: 4,
            experts: E
        }
    );
    layer.ids[3] = -1;
    assert!(matches!(
        refused(&layer.launch()),
        ContractError::TopkIdOutOfRange {
            index: 3,
            id: -1,
            ..
        }
    ));
    assert_eq!(e.tensor(), Some("topk ids"));
}

#[test]
fn an_expert_map_must_number_exactly_the_local_experts() {
    let mut layer = Layer::new();
    layer.map = vec![0, -1, 0, -1];
    assert_eq!(
        refused(&layer.mapped()),
        ContractError::ExpertMapEntry {
            index: 2,
            value: 0,
            local: 2
        }
    );
    layer.map = vec![0, -1, 2, -1];
    assert!(matches!(
        refused(&layer.mapped()),
        ContractError::ExpertMapEntry {
            index: 2,
            value: 2,
            ..
        }
    ));
    layer.map = vec![0, -1, -1, -2];
    assert!(matches!(
        refused(&layer.mapped()),
        ContractError::ExpertMapEntry {
            index: 3,
            value: -2,
            ..
        }
    ));
    layer.map = vec![0, -1, -1, -1];
    assert_eq!(
        refused(&layer.mapped()),
        ContractError::ExpertMapCount {
            mapped: 1,
            local: 2
        }
    );
    // Without a map every expert must be held.
    let layer = Layer::new();
    let l = MoeLaunch {
        expert_map: None,
        ..layer.mapped()
    };
    assert_eq!(
        refused(&l),
        ContractError::ExpertMapCount {
            mapped: 4,
            local: 2
        }
    );
    // A map of the wrong length is a shape error of the align launch.
    let short = [0, -1, 1];
    let e = refused(&MoeLaunch {
        expert_map: Some(&short),
        ..layer.mapped()
    });
    assert!(
        matches!(
            e,
            ContractError::TooFewBytes {
                tensor: "expert map",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn x_must_be_the_tokens_rows_of_k_in_the_launch_dtype() {
    let layer = Layer::new();
    let e = refused(&MoeLaunch {
        tokens: T + 1,
        ..layer.launch()
    });
    assert!(matches!(e, ContractError::Shape { tensor: "x", .. }), "{e}");
    let e = refused(&MoeLaunch {
        dtype: ActDtype::Bf16,
        ..layer.launch()
    });
    assert!(matches!(e, ContractError::Dtype { tensor: "x", .. }), "{e}");
}

#[test]
fn short_host_buffers_are_refused_by_the_views_they_back() {
    let layer = Layer::new();
    let e = refused(&MoeLaunch {
        weights: &layer.weights[..layer.weights.len() - 1],
        ..layer.launch()
    });
    assert!(
        matches!(
            e,
            ContractError::TooFewBytes {
                tensor: "weights",
                ..
            }
        ),
        "{e}"
    );
    let e = refused(&MoeLaunch {
        topk_ids: &layer.ids[..5],
        ..layer.launch()
    });
    assert!(
        matches!(
            e,
            ContractError::TooFewBytes {
                tensor: "topk ids",
                ..
            }
        ),
        "{e}"
    );
    let e = refused(&MoeLaunch {
        topk_weights: Some(&layer.routed[..5]),
        ..layer.launch()
    });
    assert!(
        matches!(
            e,
            ContractError::TooFewBytes {
                tensor: "topk weights",
                ..
            }
        ),
        "{e}"
    );
}

/// The launch-boundary rules of the new roles, on the views (`validate` itself).
#[test]
fn routing_tensors_of_the_wrong_type_or_shape_are_refused() {
    let layer = Layer::new();
    let l = layer.launch();
    let mut li = l.align_inputs();
    li.topk_ids.as_mut().unwrap().elem = ElemType::F32;
    let e = validate(&MOE_ALIGN, &li).unwrap_err();
    assert!(
        matches!(
            e,
            ContractError::Dtype {
                tensor: "topk ids",
                got: ElemType::F32,
                ..
            }
        ),
        "{e}"
    );

    let mut li = l.moe_inputs();
    li.topk_weights = Some(TensorView::matrix(ElemType::F32, T, 3, 3, T * 3 * 4));
    let e = validate(&MOE, &li).unwrap_err();
    assert!(
        matches!(
            e,
            ContractError::Shape {
                tensor: "topk weights",
                formula: "[T, top_k]",
                ..
            }
        ),
        "{e}"
    );
    let mut li = l.moe_inputs();
    li.topk_weights.as_mut().unwrap().elem = ElemType::F16;
    assert!(matches!(
        validate(&MOE, &li).unwrap_err(),
        ContractError::Dtype {
            tensor: "topk weights",
            ..
        }
    ));

    let mut li = layer.mapped().align_inputs();
    li.expert_map = Some(TensorView::vector(ElemType::I32, E + 1, (E + 1) * 4));
    assert!(matches!(
        validate(&MOE_ALIGN, &li).unwrap_err(),
        ContractError::Shape {
            tensor: "expert map",
            formula: "[E]",
            ..
        }
    ));
    let mut li = layer.mapped().align_inputs();
    li.expert_map.as_mut().unwrap().elem = ElemType::U32;
    assert!(matches!(
        validate(&MOE_ALIGN, &li).unwrap_err(),
        ContractError::Dtype {
            tensor: "expert map",
            ..
        }
    ));

    // The align outputs handed to moe must hold the declared capacity.
    let mut li = l.moe_inputs();
    li.sorted_token_ids = Some(TensorView::vector(ElemType::I32, 10, 40));
    assert!(matches!(
        validate(&MOE, &li).unwrap_err(),
        ContractError::Shape {
            tensor: "sorted token ids",
            ..
        }
    ));
    let mut li = l.moe_inputs();
    li.routing = None;
    assert_eq!(
        validate(&MOE, &li).unwrap_err(),
        ContractError::MissingRouting {
            kernel: KernelId::Moe
        }
    );
    let mut li = l.align_inputs();
    li.routing.as_mut().unwrap().experts_local = E + 1;
    assert_eq!(
        validate(&MOE_ALIGN, &li).unwrap_err(),
        ContractError::LocalExperts {
            local: E + 1,
            experts: E
        }
    );
    let mut li = l.align_inputs();
    li.routing.as_mut().unwrap().top_k = 0;
    assert!(matches!(
        validate(&MOE_ALIGN, &li).unwrap_err(),
        ContractError::ZeroSized { dim: "top_k", .. }
    ));
}

/// The kernels derive each expert's base from N and the row stride: a stacked tensor whose
/// experts sit elsewhere is refused, naming the tensor and both strides.
#[test]
fn an_expert_stride_other_than_n_rows_is_refused() {
    let layer = Layer::new();
    let l = layer.launch();
    for role in [TensorRole::Weights, TensorRole::Scales] {
        let mut li = l.moe_inputs();
        let v = li.view_mut(role).unwrap();
        let rows = v.strides[1] * N;
        v.strides[0] = rows + v.strides[1];
        v.bytes_available *= 2;
        let e = validate(&MOE, &li).unwrap_err();
        assert_eq!(
            e,
            ContractError::ExpertStride {
                kernel: KernelId::Moe,
                tensor: role.name(),
                formula: "N·row stride",
                expected: rows,
                got: rows + li.view(role).unwrap().strides[1],
            },
        );
        assert!(
            e.to_string().contains("derives it from the row stride"),
            "{e}"
        );
    }
    // A padded row stride is fine: the expert stride follows it.
    let mut w = layer.weights.clone();
    w.resize(E * N * (K / 8 + 4), 0);
    let padded = MoeLaunch {
        weights: &w,
        w_row_stride_bytes: K / 2 + 16,
        ..l.clone()
    };
    let v = padded.validate().unwrap();
    assert_eq!(v.moe().scalar(ScalarArg::WeightRowStrideBytes), Some(48));
}

/// Unpacked zero points (the legacy `[N, K/G]` per expert in the activation dtype) are
/// refused as for the other kernels (docs/field.md §6.1), with the stacked shape in the message.
#[test]
fn unpacked_zero_points_are_refused() {
    let layer = Layer::new();
    let mut li = layer.launch().moe_inputs();
    li.zeros = Some(TensorView {
        elem: ElemType::F16,
        shape: vec![E, N, K / 32],
        strides: vec![N * 2, 2, 1],
        byte_offset: 0,
        bytes_available: E * N * 2 * 2,
        base_align: crate::tensor::ALLOCATION_ALIGN,
    });
    let e = validate(&MOE, &li).unwrap_err();
    assert!(
        matches!(e, ContractError::ZeroPointLayout { dim: 1, .. }),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "zero points must be i32/u32 packed 8×u4 along dim 1 with shape [E, N/8, K/G] = [4, 2, 2]; got f16 [4, 16, 2]"
    );
    assert_eq!(e.tensor(), Some("zero points"));
}

/// The new refusals travel from a worker to its parent like the others.
#[test]
fn moe_refusals_survive_the_worker_pipe() {
    let errors = [
        ContractError::ExpertStride {
            kernel: KernelId::Moe,
            tensor: TensorRole::Scales.name(),
            formula: "N·row stride",
            expected: 32,
            got: 34,
        },
        ContractError::TileNotCompiled {
            kernel: KernelId::Moe,
            tile: w4a16_kernels::tiles::MOE_DEFAULT,
            compiled: "16x64x32w4".into(),
        },
        ContractError::ExpertMapEntry {
            index: 1,
            value: 7,
            local: 2,
        },
    ];
    for e in errors {
        let json = serde_json::to_string(&e).unwrap();
        let back: ContractError = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e, "{json}");
    }
}

#[test]
fn the_stand_in_has_no_moe_path_and_says_so() {
    let layer = Layer::new();
    let l = layer.launch();
    let v = l.validate().unwrap();
    let d = super::super::stand_in::StandInDevice::new(w4a16_kernels::Target::Sm90);
    let e = super::super::Device::run_moe(&d, &v).unwrap_err();
    assert_eq!(
        e.missing_capability(),
        Some(super::super::Capability::MoeLaunch)
    );
    assert!(super::super::Device::run_moe_align(&d, &v).is_err());
}
