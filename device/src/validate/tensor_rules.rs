//! What each tensor must look like in terms of the launch sizes: shape, element type, strides,
//! placement and extent, for a plain launch ([`check_tensor`]) and a routed MoE launch
//! ([`check_routed_tensor`]).

use super::*;

/// What each tensor role must look like, in terms of the launch sizes.
pub(super) fn check_tensor(
    kernel: KernelId,
    c: &ContractDecl,
    role: TensorRole,
    v: &TensorView,
    li: &LaunchInputs,
    stride_passed: bool,
) -> Result<(), ContractError> {
    let tensor = role.name();
    // A row stride the kernel is not told about must be the unpadded one.
    let row_stride = |tensor, v: &TensorView, formula, min, unit| {
        if stride_passed {
            row_stride(tensor, v, formula, min, unit)
        } else if v.strides[0] != min && v.shape[0] > 1 {
            Err(ContractError::StrideNotPassed {
                kernel,
                tensor,
                formula,
                expected: min,
                unit,
                got: v.strides[0],
            })
        } else {
            Ok(())
        }
    };
    let act = ElemType::from(li.dtype);
    let groups = li.k / li.group.max(1);
    match role {
        TensorRole::X => {
            matrix(tensor, v, act, li.m, li.k, "[M, K]")?;
            row_stride(tensor, v, "K", li.k, "elements")?;
            bytes(tensor, v, "((M−1)·stride + K)·2")?;
        }
        TensorRole::Weights => {
            let (cols, formula) = match v.elem {
                ElemType::U32 => (li.k / 8, "[N, K/8]"),
                ElemType::U8 => (li.k / 2, "[N, K/2]"),
                got => {
                    return Err(ContractError::Dtype {
                        tensor,
                        expected: "u32 (or u8 bytes) int4 codes".into(),
                        got,
                    });
                }
            };
            rank2(tensor, v)?;
            shape(tensor, v, &[li.n, cols], formula)?;
            inner(tensor, v)?;
            let stride_bytes = v.strides[0] * v.elem.size_bytes();
            if !stride_passed && stride_bytes != li.k / 2 && li.n > 1 {
                let (formula, expected, unit) = ("K/2", li.k / 2, "bytes");
                return Err(ContractError::StrideNotPassed {
                    kernel,
                    tensor,
                    formula,
                    expected,
                    unit,
                    got: stride_bytes,
                });
            }
            weight_row_stride(kernel, tensor, stride_bytes, li.k, c.weight_row_align_bytes)?;
            bytes(tensor, v, "(N−1)·stride + K/2")?;
        }
        TensorRole::Scales => {
            matrix(tensor, v, act, li.n, groups, "[N, K/G]")?;
            row_stride(tensor, v, "K/G", groups, "elements")?;
            bytes(tensor, v, "((N−1)·stride + K/G)·2")?;
        }
        TensorRole::Zeros => {
            if c.packed_zero_points {
                check_packed_zero_points(tensor, v, li, groups)?;
            } else {
                matrix(tensor, v, act, li.n, groups, "[N, K/G]")?;
                row_stride(tensor, v, "K/G", groups, "elements")?;
                bytes(tensor, v, "((N−1)·stride + K/G)·2")?;
            }
        }
        TensorRole::Bias => {
            dtype(tensor, v, act)?;
            if v.rank() != 1 {
                return Err(ContractError::Rank {
                    tensor,
                    expected: 1,
                    got: v.describe(),
                });
            }
            shape(tensor, v, &[li.n], "[N]")?;
            inner(tensor, v)?;
            bytes(tensor, v, "N·2")?;
        }
        TensorRole::Y => {
            matrix(tensor, v, act, li.m, li.n, "[M, N]")?;
            row_stride(tensor, v, "N", li.n, "elements")?;
            bytes(tensor, v, "((M−1)·stride + N)·2")?;
        }
        TensorRole::Dense => {
            matrix(tensor, v, act, li.n, li.k, "[N, K]")?;
            row_stride(tensor, v, "K", li.k, "elements")?;
            bytes(tensor, v, "((N−1)·stride + K)·2")?;
        }
        // Only the MoE kernels take these, and they are checked with their routing.
        TensorRole::TopkIds
        | TensorRole::TopkWeights
        | TensorRole::ExpertMap
        | TensorRole::SortedTokenIds
        | TensorRole::ExpertIds
        | TensorRole::TokensPostPadded => return Err(ContractError::MissingRouting { kernel }),
        TensorRole::Carrier => {
            let expected = vec![li.n, groups];
            if v.elem != ElemType::U32 || v.rank() != 2 || v.shape != expected {
                return Err(ContractError::CarrierLayout {
                    expected,
                    got: v.describe(),
                });
            }
            inner(tensor, v)?;
            if v.strides[0] != groups && li.n > 1 {
                return Err(ContractError::CarrierRowStride {
                    expected: groups,
                    got: v.strides[0],
                });
            }
            bytes(tensor, v, "N·(K/G)·4")?;
        }
    }
    placement(kernel, c, role, v)
}

/// Packed zero points: `[ceil(N/8), K/G]` u32 words, contiguous.
pub(super) fn check_packed_zero_points(
    tensor: &'static str,
    v: &TensorView,
    li: &LaunchInputs,
    groups: usize,
) -> Result<(), ContractError> {
    // `[ceil(N/8), K/G]`: a partial last word when N % 8 != 0 (kernels that cannot
    // take one were refused by `check_sizes`); `[N/8, K/G]`, as always, otherwise.
    let expected = vec![packed_zero_point_rows(li.n), groups];
    let packed_dtype = matches!(v.elem, ElemType::U32 | ElemType::I32);
    if !packed_dtype || v.shape != expected {
        return Err(ContractError::ZeroPointLayout {
            dim: 0,
            formula: packed_zero_point_formula(li.n),
            expected,
            got: v.describe(),
        });
    }
    let contiguous = vec![groups, 1];
    if !v.is_contiguous() {
        return Err(ContractError::NotContiguous {
            tensor,
            expected: contiguous,
            got: v.strides.clone(),
        });
    }
    let formula = if li.n.is_multiple_of(8) {
        "(N/8)·(K/G)·4"
    } else {
        "ceil(N/8)·(K/G)·4"
    };
    bytes(tensor, v, formula)
}

/// Where a tensor may start: X and Y by their declared row layout, every other tensor at the
/// declared pointer alignment (never less than its element's).
pub(super) fn placement(
    kernel: KernelId,
    c: &ContractDecl,
    role: TensorRole,
    v: &TensorView,
) -> Result<(), ContractError> {
    let tensor = role.name();
    match c.row_layout(role) {
        Some(rule) => row_layout(kernel, tensor, v, rule),
        None => {
            let align = c.pointer_align_bytes.max(v.elem.size_bytes());
            aligned(tensor, v, align)
        }
    }
}

/// The tensors of a MoE launch (`moe_align`, `moe`): X as for the GEMMs (`T` rows), the
/// stacked experts `[E_local, …]` with N rows per expert, the routing tensors `[T, top_k]` and the
/// expert map `[E]`, the align step's outputs sized by its capacity, and C `[T·top_k, N]`.
pub(super) fn check_routed_tensor(
    kernel: KernelId,
    c: &ContractDecl,
    role: TensorRole,
    v: &TensorView,
    li: &LaunchInputs,
    r: MoeRouting,
) -> Result<(), ContractError> {
    let tensor = role.name();
    let act = ElemType::from(li.dtype);
    let groups = li.k / li.group.max(1);
    // `check_routing` proved these fit.
    let slots = r.slots(li.m).unwrap_or(0);
    let cap = r.capacity(li.m);
    let (sorted, blocks) = cap.map_or((0, 0), |c| (c.sorted, c.blocks));
    let e = r.experts_local;
    match role {
        TensorRole::X => return check_tensor(kernel, c, role, v, li, true),
        TensorRole::Y => {
            matrix(tensor, v, act, slots, li.n, "[T·top_k, N]")?;
            row_stride(tensor, v, "N", li.n, "elements")?;
            bytes(tensor, v, "((T·top_k−1)·stride + N)·2")?;
        }
        TensorRole::Weights => {
            let (cols, formula) = match v.elem {
                ElemType::U32 => (li.k / 8, "[E, N, K/8]"),
                ElemType::U8 => (li.k / 2, "[E, N, K/2]"),
                got => {
                    return Err(ContractError::Dtype {
                        tensor,
                        expected: "u32 (or u8 bytes) int4 codes".into(),
                        got,
                    });
                }
            };
            rank(tensor, v, 3)?;
            shape(tensor, v, &[e, li.n, cols], formula)?;
            inner(tensor, v)?;
            let stride_bytes = v.strides[1] * v.elem.size_bytes();
            weight_row_stride(kernel, tensor, stride_bytes, li.k, c.weight_row_align_bytes)?;
            expert_stride(kernel, tensor, v, li.n)?;
            bytes(tensor, v, "((E·N−1)·stride + K/2)")?;
        }
        TensorRole::Scales => {
            dtype(tensor, v, act)?;
            rank(tensor, v, 3)?;
            shape(tensor, v, &[e, li.n, groups], "[E, N, K/G]")?;
            inner(tensor, v)?;
            if v.strides[1] < groups {
                return Err(ContractError::RowStride {
                    tensor,
                    formula: "K/G",
                    min: groups,
                    unit: "elements",
                    got: v.strides[1],
                });
            }
            expert_stride(kernel, tensor, v, li.n)?;
            bytes(tensor, v, "((E·N−1)·stride + K/G)·2")?;
        }
        TensorRole::Zeros => {
            let expected = vec![e, li.n / 8, groups];
            let packed_dtype = matches!(v.elem, ElemType::U32 | ElemType::I32);
            if !c.packed_zero_points || !packed_dtype || v.shape != expected {
                return Err(ContractError::ZeroPointLayout {
                    dim: 1,
                    formula: "[E, N/8, K/G]",
                    expected,
                    got: v.describe(),
                });
            }
            if !v.is_contiguous() {
                return Err(ContractError::NotContiguous {
                    tensor,
                    expected: vec![(li.n / 8) * groups, groups, 1],
                    got: v.strides.clone(),
                });
            }
            bytes(tensor, v, "E·(N/8)·(K/G)·4")?;
        }
        TensorRole::TopkIds => {
            routing_matrix(tensor, v, ElemType::I32, li.m, r.top_k)?;
        }
        TensorRole::TopkWeights => {
            routing_matrix(tensor, v, ElemType::F32, li.m, r.top_k)?;
        }
        TensorRole::ExpertMap => int_vector(tensor, v, r.experts, "[E]")?,
        TensorRole::SortedTokenIds => int_vector(tensor, v, sorted, "[capacity]")?,
        TensorRole::ExpertIds => int_vector(tensor, v, blocks, "[capacity / block_m]")?,
        TensorRole::TokensPostPadded => int_vector(tensor, v, 1, "[1]")?,
        TensorRole::Bias | TensorRole::Dense | TensorRole::Carrier => {
            return Err(ContractError::UnexpectedTensor {
                kernel,
                tensor,
                got: v.describe(),
            });
        }
    }
    placement(kernel, c, role, v)
}

/// The experts of a stacked `[E, N, cols]` tensor must be N rows apart (the kernels compute
/// `expert · N · row stride`); one expert has no stride to speak of.
pub(super) fn expert_stride(
    kernel: KernelId,
    tensor: &'static str,
    v: &TensorView,
    n: usize,
) -> Result<(), ContractError> {
    let expected = n.saturating_mul(v.strides[1]);
    if v.shape[0] > 1 && v.strides[0] != expected {
        return Err(ContractError::ExpertStride {
            kernel,
            tensor,
            formula: "N·row stride",
            expected,
            got: v.strides[0],
        });
    }
    Ok(())
}

/// A contiguous `[T, top_k]` routing tensor of `elem`.
pub(super) fn routing_matrix(
    tensor: &'static str,
    v: &TensorView,
    elem: ElemType,
    tokens: usize,
    top_k: usize,
) -> Result<(), ContractError> {
    elem_type(tensor, v, elem)?;
    rank(tensor, v, 2)?;
    shape(tensor, v, &[tokens, top_k], "[T, top_k]")?;
    contiguous(tensor, v)?;
    bytes(tensor, v, "T·top_k·4")
}

/// A contiguous i32 vector of `len` elements.
pub(super) fn int_vector(
    tensor: &'static str,
    v: &TensorView,
    len: usize,
    formula: &'static str,
) -> Result<(), ContractError> {
    elem_type(tensor, v, ElemType::I32)?;
    rank(tensor, v, 1)?;
    shape(tensor, v, &[len], formula)?;
    contiguous(tensor, v)?;
    bytes(tensor, v, "length·4")
}

pub(super) fn elem_type(
    tensor: &'static str,
    v: &TensorView,
    elem: ElemType,
) -> Result<(), ContractError> {
    if v.elem != elem {
        return Err(ContractError::Dtype {
            tensor,
            expected: elem.name().into(),
            got: v.elem,
        });
    }
    Ok(())
}

pub(super) fn contiguous(tensor: &'static str, v: &TensorView) -> Result<(), ContractError> {
    if !v.is_contiguous() {
        let mut expected = vec![1usize; v.shape.len()];
        for i in (0..v.shape.len().saturating_sub(1)).rev() {
            expected[i] = expected[i + 1] * v.shape[i + 1];
        }
        return Err(ContractError::NotContiguous {
            tensor,
            expected,
            got: v.strides.clone(),
        });
    }
    Ok(())
}

pub(super) fn rank(
    tensor: &'static str,
    v: &TensorView,
    expected: usize,
) -> Result<(), ContractError> {
    if v.rank() != expected || v.strides.len() != expected {
        return Err(ContractError::Rank {
            tensor,
            expected,
            got: v.describe(),
        });
    }
    Ok(())
}

pub(super) fn aligned(
    tensor: &'static str,
    v: &TensorView,
    align: usize,
) -> Result<(), ContractError> {
    if v.address_align() < align {
        return Err(ContractError::Misaligned {
            tensor,
            align,
            got: v.address_align(),
            offset: v.byte_offset,
        });
    }
    Ok(())
}

/// X and Y: the declared row layout (row-stride multiple, base alignment), never less than
/// the element's own alignment.
pub(super) fn row_layout(
    kernel: KernelId,
    tensor: &'static str,
    v: &TensorView,
    rule: RowLayoutRule,
) -> Result<(), ContractError> {
    let elem = v.elem.size_bytes();
    let multiple = rule.row_stride_multiple.max(1);
    // A single row has no stride to speak of.
    if v.shape[0] > 1 && !v.strides[0].is_multiple_of(multiple) {
        return Err(ContractError::RowStrideAlign {
            kernel,
            tensor,
            align: multiple * elem,
            got: v.strides[0] * elem,
        });
    }
    aligned(tensor, v, rule.base_align_bytes.max(elem))
}

pub(super) fn dtype(
    tensor: &'static str,
    v: &TensorView,
    act: ElemType,
) -> Result<(), ContractError> {
    if v.elem != act {
        return Err(ContractError::Dtype {
            tensor,
            expected: format!("{act} (the activation dtype)"),
            got: v.elem,
        });
    }
    Ok(())
}

/// The rule for the bytes between int4 weight rows, plain or stacked per expert: at least a
/// row (K/2) and a multiple of what the kernel's loads need.
pub(super) fn weight_row_stride(
    kernel: KernelId,
    tensor: &'static str,
    stride_bytes: usize,
    k: usize,
    align: usize,
) -> Result<(), ContractError> {
    if stride_bytes < k / 2 {
        return Err(ContractError::RowStride {
            tensor,
            formula: "K/2",
            min: k / 2,
            unit: "bytes",
            got: stride_bytes,
        });
    }
    if align > 1 && !stride_bytes.is_multiple_of(align) {
        return Err(ContractError::RowStrideAlign {
            kernel,
            tensor,
            align,
            got: stride_bytes,
        });
    }
    Ok(())
}

pub(super) fn rank2(tensor: &'static str, v: &TensorView) -> Result<(), ContractError> {
    if v.rank() != 2 || v.strides.len() != 2 {
        return Err(ContractError::Rank {
            tensor,
            expected: 2,
            got: v.describe(),
        });
    }
    Ok(())
}

pub(super) fn shape(
    tensor: &'static str,
    v: &TensorView,
    expected: &[usize],
    formula: &'static str,
) -> Result<(), ContractError> {
    if v.shape != expected {
        return Err(ContractError::Shape {
            tensor,
            formula,
            expected: expected.to_vec(),
            got: v.shape.clone(),
        });
    }
    Ok(())
}

pub(super) fn inner(tensor: &'static str, v: &TensorView) -> Result<(), ContractError> {
    let got = *v.strides.last().unwrap_or(&0);
    // a single element has no inner stride to speak of
    if got != 1 && v.shape.last().copied().unwrap_or(0) > 1 {
        return Err(ContractError::InnerStride { tensor, got });
    }
    Ok(())
}

/// Activation-dtype matrix of a given shape with unit inner stride.
pub(super) fn matrix(
    tensor: &'static str,
    v: &TensorView,
    act: ElemType,
    rows: usize,
    cols: usize,
    formula: &'static str,
) -> Result<(), ContractError> {
    dtype(tensor, v, act)?;
    rank2(tensor, v)?;
    shape(tensor, v, &[rows, cols], formula)?;
    inner(tensor, v)
}

pub(super) fn row_stride(
    tensor: &'static str,
    v: &TensorView,
    formula: &'static str,
    min: usize,
    unit: &'static str,
) -> Result<(), ContractError> {
    if v.strides[0] < min {
        return Err(ContractError::RowStride {
            tensor,
            formula,
            min,
            unit,
            got: v.strides[0],
        });
    }
    Ok(())
}

/// Enough bytes behind the base for the whole strided extent, and an extent the kernel's
/// 32-bit offsets can address.
pub(super) fn bytes(
    tensor: &'static str,
    v: &TensorView,
    formula: &str,
) -> Result<(), ContractError> {
    let mut last: u128 = 0;
    for (&d, &s) in v.shape.iter().zip(&v.strides) {
        last += (d.saturating_sub(1) as u128) * s as u128;
    }
    let extent = (last + 1) * v.elem.size_bytes() as u128;
    let needed = v.byte_offset as u128 + extent;
    if needed > i32::MAX as u128 {
        return Err(ContractError::Int32Overflow {
            what: format!("{tensor} byte extent"),
            value: needed,
        });
    }
    if needed > v.bytes_available as u128 {
        let formula = if v.byte_offset > 0 {
            format!("offset + {formula}")
        } else {
            formula.to_string()
        };
        return Err(ContractError::TooFewBytes {
            tensor,
            formula,
            needed,
            got: v.bytes_available,
        });
    }
    Ok(())
}
