//! Validation at the launch boundary (ARCHITECTURE.md rule 1). Every rule here is read from the kernel's
//! declaration (`KernelDecl::args` says which tensors and scalars a launch has, `ContractDecl`
//! holds the shape rules); nothing restates a kernel's contract. A launch that passes yields a
//! [`ValidatedLaunch`], the only thing the devices pack kernel arguments from.

use w4a16_kernels::decl::{ContractDecl, GroupRule, LaunchShape, RowLayoutRule};
use w4a16_kernels::{ArgKind, KernelDecl, KernelId, ScalarArg, TensorRole, Tile};

mod error;
mod tensor_rules;

pub use error::{ContractError, Name};
use tensor_rules::*;

use crate::tensor::{ElemType, LaunchInputs, MoeRouting, TensorView, fmt_shape};
use w4a16_reference::formats::{packed_zero_point_formula, packed_zero_point_rows};
use w4a16_reference::layer::Symmetry;

/// One launch argument after validation, in declaration order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgValue {
    /// A tensor; `present == false` is a null pointer (only for nullable arguments).
    Pointer {
        role: TensorRole,
        present: bool,
        byte_offset: usize,
    },
    I32 {
        scalar: ScalarArg,
        value: i32,
    },
}

/// A launch that passed the contract: the argument values in `decl.args` order, and the problem
/// shape the launch geometry is computed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidatedLaunch {
    pub kernel: KernelId,
    pub shape: LaunchShape,
    pub args: Vec<ArgValue>,
}

impl ValidatedLaunch {
    pub fn scalar(&self, which: ScalarArg) -> Option<i32> {
        self.args.iter().find_map(|a| match a {
            ArgValue::I32 { scalar, value } if *scalar == which => Some(*value),
            _ => None,
        })
    }

    /// The scalar arguments in declaration order.
    pub fn scalars(&self) -> Vec<(ScalarArg, i32)> {
        self.args
            .iter()
            .filter_map(|a| match a {
                ArgValue::I32 { scalar, value } => Some((*scalar, *value)),
                ArgValue::Pointer { .. } => None,
            })
            .collect()
    }
}

/// Checks `inputs` against `decl` and returns the argument values to pack.
pub fn validate(
    decl: &KernelDecl,
    inputs: &LaunchInputs,
) -> Result<ValidatedLaunch, ContractError> {
    let kernel = decl.id;
    let c = &decl.contract;
    let has = |s: ScalarArg| decl.args.iter().any(|a| a.kind == ArgKind::I32(s));

    let routed = has(ScalarArg::Slots);
    check_sizes(decl, inputs)?;
    check_declared_tensors(decl, inputs)?;

    let mut args = Vec::with_capacity(decl.args.len());
    for a in decl.args {
        match a.kind {
            ArgKind::Pointer { role, nullable, .. } => match inputs.view(role) {
                None if !nullable => {
                    return Err(ContractError::NullPointer {
                        kernel,
                        arg: a.name,
                        tensor: role.name(),
                    });
                }
                None => args.push(ArgValue::Pointer {
                    role,
                    present: false,
                    byte_offset: 0,
                }),
                Some(v) => {
                    let stride_passed = stride_scalar(role).is_some_and(has);
                    match inputs.routing.filter(|_| routed) {
                        Some(r) => check_routed_tensor(kernel, c, role, v, inputs, r)?,
                        None => check_tensor(kernel, c, role, v, inputs, stride_passed)?,
                    }
                    args.push(ArgValue::Pointer {
                        role,
                        present: true,
                        byte_offset: v.byte_offset,
                    });
                }
            },
            ArgKind::I32(scalar) => {
                let value = scalar_value(scalar, inputs);
                let value = i32::try_from(value).map_err(|_| ContractError::Int32Overflow {
                    what: format!("{} (argument `{}`)", scalar_name(scalar), a.name),
                    value: value as u128,
                })?;
                args.push(ArgValue::I32 { scalar, value });
            }
        }
    }

    Ok(ValidatedLaunch {
        kernel,
        shape: LaunchShape {
            m: inputs.m,
            n: inputs.n,
            k: inputs.k,
            group: inputs.group,
            dtype: inputs.dtype,
            asymmetric: inputs.asymmetric(),
            routing: inputs.routing.filter(|_| routed).map(|r| r.dims()),
        },
        args,
    })
}

/// The sizes (every tensor rule is stated in terms of them), the routing, and the layer rules
/// that need no tensor: packed zero points' N, a carrier kernel's asymmetric layer.
fn check_sizes(decl: &KernelDecl, inputs: &LaunchInputs) -> Result<(), ContractError> {
    let kernel = decl.id;
    let c = &decl.contract;
    let has = |s: ScalarArg| decl.args.iter().any(|a| a.kind == ArgKind::I32(s));
    // Sizes first: every tensor rule below is stated in terms of them.
    let routed = has(ScalarArg::Slots);
    let tokens_scalar = routed && !has(ScalarArg::M);
    for (dim, value, applies) in [
        ("M", inputs.m, has(ScalarArg::M)),
        ("tokens T", inputs.m, tokens_scalar),
        ("N", inputs.n, has(ScalarArg::N)),
        ("K", inputs.k, has(ScalarArg::K)),
        ("group size G", inputs.group, has(ScalarArg::Group)),
    ] {
        if applies && value == 0 {
            return Err(ContractError::ZeroSized { kernel, dim });
        }
    }
    if routed {
        check_routing(kernel, inputs)?;
    }
    if has(ScalarArg::M) {
        let m = inputs.m;
        if m < c.m_min || c.m_max.is_some_and(|max| m > max) {
            return Err(ContractError::MOutOfRange {
                kernel,
                m,
                min: c.m_min,
                max: c.m_max,
            });
        }
    }
    if c.k_multiple > 1 && !inputs.k.is_multiple_of(c.k_multiple) {
        return Err(ContractError::KNotMultiple {
            kernel,
            k: inputs.k,
            multiple: c.k_multiple,
        });
    }
    if has(ScalarArg::Group) {
        check_group(kernel, c, inputs.k, inputs.group)?;
    }
    let zeros_declared = decl.args.iter().any(|a| {
        matches!(
            a.kind,
            ArgKind::Pointer {
                role: TensorRole::Zeros,
                ..
            }
        )
    });
    if zeros_declared
        && inputs.zeros.is_some()
        && c.packed_zero_points
        && !c.packed_zero_points_any_n
        && !inputs.n.is_multiple_of(8)
    {
        return Err(ContractError::NNotMultipleOf8 { n: inputs.n });
    }

    // A carrier kernel reads asymmetric layers only; checked before the tensors, so that a
    // symmetric layer's missing carrier is named as such rather than as a null pointer.
    let carrier_declared = decl.args.iter().any(|a| {
        matches!(
            a.kind,
            ArgKind::Pointer {
                role: TensorRole::Carrier,
                ..
            }
        )
    });
    if carrier_declared && inputs.layer_symmetry != Some(Symmetry::Asym) {
        return Err(ContractError::CarrierForSymmetricLayer {
            kernel,
            layer: inputs.layer_symmetry,
        });
    }
    Ok(())
}

/// Which tensors the launch has must match the argument list exactly.
fn check_declared_tensors(decl: &KernelDecl, inputs: &LaunchInputs) -> Result<(), ContractError> {
    let kernel = decl.id;
    for role in inputs.present_roles() {
        let declared = decl
            .args
            .iter()
            .any(|a| matches!(a.kind, ArgKind::Pointer { role: r, .. } if r == role));
        if !declared {
            let got = inputs
                .view(role)
                .map(TensorView::describe)
                .unwrap_or_default();
            return Err(ContractError::UnexpectedTensor {
                kernel,
                tensor: role.name(),
                got,
            });
        }
    }
    Ok(())
}

/// The routing sizes of a MoE launch: present, positive, the local experts among the global
/// ones, and a capacity the 32-bit kernels can address.
fn check_routing(kernel: KernelId, inputs: &LaunchInputs) -> Result<(), ContractError> {
    let r = inputs
        .routing
        .ok_or(ContractError::MissingRouting { kernel })?;
    for (dim, value) in [
        ("top_k", r.top_k),
        ("experts", r.experts),
        ("local experts", r.experts_local),
        ("block_m", r.block_m),
    ] {
        if value == 0 {
            return Err(ContractError::ZeroSized { kernel, dim });
        }
    }
    if r.experts_local > r.experts {
        return Err(ContractError::LocalExperts {
            local: r.experts_local,
            experts: r.experts,
        });
    }
    let overflow = |what: &str, value: u128| ContractError::Int32Overflow {
        what: what.into(),
        value,
    };
    let slots = inputs.m as u128 * r.top_k as u128;
    let worst = slots + r.experts as u128 * (r.block_m as u128 - 1);
    let sorted = worst.div_ceil(r.block_m as u128) * r.block_m as u128;
    if slots > i32::MAX as u128 {
        return Err(overflow("slots T·top_k", slots));
    }
    if sorted > i32::MAX as u128 {
        return Err(overflow("sorted capacity", sorted));
    }
    Ok(())
}

fn check_group(
    kernel: KernelId,
    c: &ContractDecl,
    k: usize,
    group: usize,
) -> Result<(), ContractError> {
    match c.groups {
        GroupRule::OneOf(allowed) => {
            if !allowed.contains(&group) {
                let list: Vec<String> = allowed.iter().map(|g| g.to_string()).collect();
                return Err(ContractError::GroupNotAllowed {
                    kernel,
                    group,
                    allowed: format!("{{{}}}", list.join(", ")),
                });
            }
        }
        GroupRule::AnyDividingK => {
            if !group.is_multiple_of(8) {
                return Err(ContractError::GroupNotAllowed {
                    kernel,
                    group,
                    allowed: "any multiple of 8 that divides K (channelwise G = K included)".into(),
                });
            }
        }
    }
    if !k.is_multiple_of(group) {
        return Err(ContractError::KNotDivisibleByGroup { k, group });
    }
    Ok(())
}

/// The scalar that carries a tensor's row stride, if the tensor has one.
fn stride_scalar(role: TensorRole) -> Option<ScalarArg> {
    match role {
        TensorRole::X => Some(ScalarArg::XRowStride),
        TensorRole::Weights => Some(ScalarArg::WeightRowStrideBytes),
        TensorRole::Scales => Some(ScalarArg::ScaleRowStride),
        TensorRole::Y => Some(ScalarArg::YRowStride),
        TensorRole::Dense => Some(ScalarArg::DenseRowStride),
        TensorRole::Carrier => Some(ScalarArg::CarrierRowStride),
        TensorRole::Zeros
        | TensorRole::Bias
        | TensorRole::TopkIds
        | TensorRole::TopkWeights
        | TensorRole::ExpertMap
        | TensorRole::SortedTokenIds
        | TensorRole::ExpertIds
        | TensorRole::TokensPostPadded => None,
    }
}

fn scalar_name(s: ScalarArg) -> &'static str {
    match s {
        ScalarArg::M => "M",
        ScalarArg::N => "N",
        ScalarArg::K => "K",
        ScalarArg::Group => "G",
        ScalarArg::XRowStride => "x row stride",
        ScalarArg::WeightRowStrideBytes => "weights row stride (bytes)",
        ScalarArg::ScaleRowStride => "scales row stride",
        ScalarArg::YRowStride => "y row stride",
        ScalarArg::DenseRowStride => "dense row stride",
        ScalarArg::Slots => "slots T·top_k",
        ScalarArg::TopK => "top_k",
        ScalarArg::Experts => "experts",
        ScalarArg::BlockM => "block_m",
        ScalarArg::SortedCapacity => "sorted capacity",
        ScalarArg::CarrierRowStride => "carrier row stride",
    }
}

/// The value of a scalar argument. Strides come from the views, which `check_tensor` has
/// already accepted (rank 2), so the row stride is `strides[0]`.
fn scalar_value(s: ScalarArg, li: &LaunchInputs) -> usize {
    // The row stride: the second-to-last stride (stacked expert tensors are `[E, rows, cols]`).
    let row = |role: TensorRole| {
        li.view(role)
            .and_then(|v| v.strides.len().checked_sub(2).map(|i| v.strides[i]))
            .unwrap_or(0)
    };
    fn routing(li: &LaunchInputs, f: impl Fn(&MoeRouting) -> usize) -> usize {
        li.routing.as_ref().map_or(0, f)
    }
    match s {
        ScalarArg::M => li.m,
        ScalarArg::N => li.n,
        ScalarArg::K => li.k,
        ScalarArg::Group => li.group,
        ScalarArg::XRowStride => row(TensorRole::X),
        ScalarArg::WeightRowStrideBytes => li
            .weights
            .as_ref()
            .map_or(0, |v| row(TensorRole::Weights) * v.elem.size_bytes()),
        ScalarArg::ScaleRowStride => row(TensorRole::Scales),
        ScalarArg::YRowStride => row(TensorRole::Y),
        ScalarArg::DenseRowStride => row(TensorRole::Dense),
        ScalarArg::Slots => routing(li, |r| r.slots(li.m).unwrap_or(usize::MAX)),
        ScalarArg::TopK => routing(li, |r| r.top_k),
        ScalarArg::Experts => routing(li, |r| r.experts),
        ScalarArg::BlockM => routing(li, |r| r.block_m),
        ScalarArg::SortedCapacity => {
            routing(li, |r| r.capacity(li.m).map_or(usize::MAX, |c| c.sorted))
        }
        ScalarArg::CarrierRowStride => row(TensorRole::Carrier),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker hands its verdicts' contract errors to the parent as JSON: they come back equal,
    /// the 128-bit sizes and the static names included, and still name their tensor.
    #[test]
    fn contract_errors_survive_the_worker_pipe() {
        let errors = [
            ContractError::TooFewBytes {
                tensor: TensorRole::Weights.name(),
                formula: "N·row_stride_bytes".into(),
                needed: u128::from(u64::MAX) + 1,
                got: 7,
            },
            ContractError::RowStrideAlign {
                kernel: KernelId::Fused,
                tensor: TensorRole::X.name(),
                align: 16,
                got: 6,
            },
            ContractError::ZeroSized {
                kernel: KernelId::Skinny,
                dim: "M",
            },
        ];
        for e in errors {
            let json = serde_json::to_string(&e).unwrap();
            let back: ContractError = serde_json::from_str(&json).unwrap();
            assert_eq!(back, e, "{json}");
            assert_eq!(back.to_string(), e.to_string());
            assert_eq!(back.tensor(), e.tensor());
        }
    }
}
