//! Validation at the launch boundary (ARCHITECTURE.md rule 1). Every rule here is read from the kernel's
//! declaration (`KernelDecl::args` says which tensors and scalars a launch has, `ContractDecl`
//! holds the shape rules); nothing restates a kernel's contract. A launch that passes yields a
//! [`ValidatedLaunch`], the only thing the devices pack kernel arguments from.

use w4a16_kernels::decl::{ContractDecl, GroupRule, LaunchShape, RowLayoutRule};
use w4a16_kernels::{ArgKind, KernelDecl, KernelId, ScalarArg, TensorRole, Tile};

use crate::tensor::{ElemType, LaunchInputs, MoeRouting, TensorView, fmt_shape};
use w4a16_reference::formats::{packed_zero_point_formula, packed_zero_point_rows};
use w4a16_reference::layer::Symmetry;

/// A launch the kernel's contract refuses. Each message names the tensor (or size), what the
/// contract expects and what the launch had.
///
/// Serializable so that a fault-isolated worker can hand it to its parent inside a verdict; the
/// names it holds (tensors, formulas, units) come back interned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[serde(tag = "error", rename_all = "kebab-case")]
pub enum ContractError {
    #[error("{dim} must be positive for {kernel}; got 0")]
    ZeroSized {
        kernel: KernelId,
        #[serde(deserialize_with = "interned")]
        dim: Name,
    },

    #[error("M = {m} is outside the range {kernel} accepts: {}", fmt_range(*.min, *.max))]
    MOutOfRange {
        kernel: KernelId,
        m: usize,
        min: usize,
        max: Option<usize>,
    },

    #[error("K = {k} must be a multiple of {multiple} for {kernel}")]
    KNotMultiple {
        kernel: KernelId,
        k: usize,
        multiple: usize,
    },

    #[error("group size G = {group} is not accepted by {kernel}; allowed: {allowed}")]
    GroupNotAllowed {
        kernel: KernelId,
        group: usize,
        allowed: String,
    },

    #[error("K = {k} must be a multiple of the group size G = {group}")]
    KNotDivisibleByGroup { k: usize, group: usize },

    #[error("N = {n} must be a multiple of 8 when zero points are packed 8×u4 along N")]
    NNotMultipleOf8 { n: usize },

    #[error(
        "{tensor} (argument `{arg}` of {kernel}) is a null pointer, but the argument is not nullable"
    )]
    NullPointer {
        kernel: KernelId,
        #[serde(deserialize_with = "interned")]
        arg: Name,
        #[serde(deserialize_with = "interned")]
        tensor: Name,
    },

    #[error("{kernel} takes no {tensor} argument; got {got}")]
    UnexpectedTensor {
        kernel: KernelId,
        #[serde(deserialize_with = "interned")]
        tensor: Name,
        got: String,
    },

    #[error("{tensor} must be {expected}; got {got}")]
    Dtype {
        #[serde(deserialize_with = "interned")]
        tensor: Name,
        expected: String,
        got: ElemType,
    },

    #[error("{tensor} must have rank {expected}; got {got}")]
    Rank {
        #[serde(deserialize_with = "interned")]
        tensor: Name,
        expected: usize,
        got: String,
    },

    #[error("{tensor} must have shape {formula} = {}; got {}", fmt_shape(.expected), fmt_shape(.got))]
    Shape {
        #[serde(deserialize_with = "interned")]
        tensor: Name,
        #[serde(deserialize_with = "interned")]
        formula: Name,
        expected: Vec<usize>,
        got: Vec<usize>,
    },

    /// The packed/unpacked zero-point hand-off of docs/contract.md §2 (`dim` 1 for the stacked experts of
    /// `moe`).
    #[error("zero points must be i32/u32 packed 8×u4 along dim {dim} with shape {formula} = {}; got {got}", fmt_shape(.expected))]
    ZeroPointLayout {
        dim: usize,
        #[serde(deserialize_with = "interned")]
        formula: Name,
        expected: Vec<usize>,
        got: String,
    },

    /// A stacked expert tensor whose experts are not N rows apart: the kernel derives the
    /// expert stride from the row stride it is given.
    #[error(
        "{tensor} expert stride must be {formula} = {expected} elements ({kernel} derives it from the row stride); got {got}"
    )]
    ExpertStride {
        kernel: KernelId,
        #[serde(deserialize_with = "interned")]
        tensor: Name,
        #[serde(deserialize_with = "interned")]
        formula: Name,
        expected: usize,
        got: usize,
    },

    #[error("{kernel} needs the routing sizes (top_k, experts, block_m) of a MoE launch; got none")]
    MissingRouting { kernel: KernelId },

    #[error("the stacked weights hold {local} experts, more than the {experts} global experts")]
    LocalExperts { local: usize, experts: usize },

    #[error("topk ids [{index}] = {id} is not a global expert id in [0, {experts})")]
    TopkIdOutOfRange {
        index: usize,
        id: i64,
        experts: usize,
    },

    #[error(
        "expert map [{index}] = {value}: entries must be −1 or a local expert id in [0, {local}), each id once"
    )]
    ExpertMapEntry {
        index: usize,
        value: i64,
        local: usize,
    },

    #[error(
        "the expert map maps {mapped} experts to local ids, but the stacked weights hold {local}"
    )]
    ExpertMapCount { mapped: usize, local: usize },

    #[error("{kernel} has no compiled tile {}x{}x{}w{}; compiled: {compiled}", .tile.bm, .tile.bn, .tile.bk, .tile.warps)]
    TileNotCompiled {
        kernel: KernelId,
        tile: Tile,
        compiled: String,
    },

    /// The carrier hand-off of docs/contract.md §2: one u32 word per (n, g), never the plain scales.
    #[error("carrier must be u32 [N, K/G] = {} (one word per (n, g): the scale's bits low, bias_eff or z high; plain scales are no carrier); got {got}", fmt_shape(.expected))]
    CarrierLayout { expected: Vec<usize>, got: String },

    /// The carrier's own stride (docs/field.md §6 item 4): reading it with the scales' padded stride
    /// runs past its rows.
    #[error(
        "carrier row stride must be exactly K/G = {expected} words (the carrier is never padded; a padded scales stride reads past it); got {got}"
    )]
    CarrierRowStride { expected: usize, got: usize },

    /// Symmetric layers read their scales directly; they have no carrier.
    #[error("{kernel} reads the asymmetric carrier, but the layer is {}: symmetric layers read their scales directly and have no carrier", .layer.map_or("not stated to be asymmetric", |s| if s == Symmetry::Sym { "symmetric (no zero points)" } else { "asymmetric" }))]
    CarrierForSymmetricLayer {
        kernel: KernelId,
        layer: Option<Symmetry>,
    },

    #[error("{tensor} must have unit inner stride; got {got}")]
    InnerStride {
        #[serde(deserialize_with = "interned")]
        tensor: Name,
        got: usize,
    },

    #[error("{tensor} row stride must be ≥ {formula} = {min} {unit}; got {got}")]
    RowStride {
        #[serde(deserialize_with = "interned")]
        tensor: Name,
        #[serde(deserialize_with = "interned")]
        formula: Name,
        min: usize,
        #[serde(deserialize_with = "interned")]
        unit: Name,
        got: usize,
    },

    #[error(
        "{tensor} row stride must be exactly {formula} = {expected} {unit}: {kernel} takes no {tensor} row stride argument; got {got}"
    )]
    StrideNotPassed {
        kernel: KernelId,
        #[serde(deserialize_with = "interned")]
        tensor: Name,
        #[serde(deserialize_with = "interned")]
        formula: Name,
        expected: usize,
        #[serde(deserialize_with = "interned")]
        unit: Name,
        got: usize,
    },

    #[error(
        "{tensor} row stride must be a multiple of {align} bytes for {kernel}; got {got} bytes"
    )]
    RowStrideAlign {
        kernel: KernelId,
        #[serde(deserialize_with = "interned")]
        tensor: Name,
        align: usize,
        got: usize,
    },

    #[error("{tensor} must be contiguous with strides {}; got strides {}", fmt_shape(.expected), fmt_shape(.got))]
    NotContiguous {
        #[serde(deserialize_with = "interned")]
        tensor: Name,
        expected: Vec<usize>,
        got: Vec<usize>,
    },

    #[error("{tensor} must hold {formula} = {needed} bytes; got {got}")]
    TooFewBytes {
        #[serde(deserialize_with = "interned")]
        tensor: Name,
        formula: String,
        #[serde(with = "u128_text")]
        needed: u128,
        got: usize,
    },

    #[error(
        "{tensor} must start at an address aligned to {align} bytes; got alignment {got} (byte offset {offset})"
    )]
    Misaligned {
        #[serde(deserialize_with = "interned")]
        tensor: Name,
        align: usize,
        got: usize,
        offset: usize,
    },

    #[error(
        "{what} = {value} overflows the kernel's 32-bit signed arithmetic (max {})",
        i32::MAX
    )]
    Int32Overflow {
        what: String,
        #[serde(with = "u128_text")]
        value: u128,
    },

    #[error("{tensor}: the host buffer holds {got} bytes but the view claims {claimed}")]
    HostBufferShort {
        #[serde(deserialize_with = "interned")]
        tensor: Name,
        claimed: usize,
        got: usize,
    },

    #[error("the launch was validated for {validated}, not {kernel}")]
    WrongKernel {
        kernel: KernelId,
        validated: KernelId,
    },
}

/// 128-bit sizes as decimal text: serde's buffered formats (and serde_json through them) have
/// no 128-bit integers.
mod u128_text {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(v: &u128, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
        String::deserialize(d)?.parse().map_err(D::Error::custom)
    }
}

/// A name the validator puts in an error: a tensor role, a shape formula, a unit. (An alias, so
/// that serde does not take the field for a borrow of the input.)
pub type Name = &'static str;

/// A name read back from a worker's verdict as the `&'static str` the error holds. The names are
/// the validator's own (tensor roles, shape formulas, units): a small fixed vocabulary, so each
/// distinct one is leaked once and reused ever after.
fn interned<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
    use std::collections::BTreeSet;
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<BTreeSet<&'static str>>> = OnceLock::new();
    let name = <String as serde::Deserialize>::deserialize(d)?;
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(known) = names.get(name.as_str()) {
        return Ok(known);
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.insert(leaked);
    Ok(leaked)
}

fn fmt_range(min: usize, max: Option<usize>) -> String {
    match max {
        Some(max) => format!("[{min}, {max}]"),
        None => format!("[{min}, ∞)"),
    }
}

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

    // Which tensors the launch has must match the argument list exactly.
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

/// What each tensor role must look like, in terms of the launch sizes.
fn check_tensor(
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
                // `[ceil(N/8), K/G]`: a partial last word when N % 8 != 0 (kernels that cannot
                // take one were refused above); `[N/8, K/G]`, as always, otherwise.
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
                bytes(tensor, v, formula)?;
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

/// Where a tensor may start: X and Y by their declared row layout, every other tensor at the
/// declared pointer alignment (never less than its element's).
fn placement(
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
fn check_routed_tensor(
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
fn expert_stride(
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
fn routing_matrix(
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
fn int_vector(
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

fn elem_type(tensor: &'static str, v: &TensorView, elem: ElemType) -> Result<(), ContractError> {
    if v.elem != elem {
        return Err(ContractError::Dtype {
            tensor,
            expected: elem.name().into(),
            got: v.elem,
        });
    }
    Ok(())
}

fn contiguous(tensor: &'static str, v: &TensorView) -> Result<(), ContractError> {
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

fn rank(tensor: &'static str, v: &TensorView, expected: usize) -> Result<(), ContractError> {
    if v.rank() != expected || v.strides.len() != expected {
        return Err(ContractError::Rank {
            tensor,
            expected,
            got: v.describe(),
        });
    }
    Ok(())
}

fn aligned(tensor: &'static str, v: &TensorView, align: usize) -> Result<(), ContractError> {
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
fn row_layout(
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

impl ContractError {
    /// The tensor whose declared row layout (row-stride multiple or base alignment) refused
    /// the launch: X or Y. `None` for every other refusal.
    /// The tensor the contract refused, when the refusal is about one (`X`, `weights`, ...).
    pub fn tensor(&self) -> Option<&'static str> {
        match self {
            ContractError::NullPointer { tensor, .. }
            | ContractError::UnexpectedTensor { tensor, .. }
            | ContractError::Dtype { tensor, .. }
            | ContractError::Rank { tensor, .. }
            | ContractError::Shape { tensor, .. }
            | ContractError::InnerStride { tensor, .. }
            | ContractError::RowStride { tensor, .. }
            | ContractError::StrideNotPassed { tensor, .. }
            | ContractError::RowStrideAlign { tensor, .. }
            | ContractError::NotContiguous { tensor, .. }
            | ContractError::TooFewBytes { tensor, .. }
            | ContractError::Misaligned { tensor, .. }
            | ContractError::HostBufferShort { tensor, .. }
            | ContractError::ExpertStride { tensor, .. } => Some(tensor),
            ContractError::ZeroPointLayout { .. } => Some(TensorRole::Zeros.name()),
            ContractError::TopkIdOutOfRange { .. } => Some(TensorRole::TopkIds.name()),
            ContractError::ExpertMapEntry { .. } | ContractError::ExpertMapCount { .. } => {
                Some(TensorRole::ExpertMap.name())
            }
            ContractError::CarrierLayout { .. }
            | ContractError::CarrierRowStride { .. }
            | ContractError::CarrierForSymmetricLayer { .. } => Some(TensorRole::Carrier.name()),
            ContractError::ZeroSized { .. }
            | ContractError::MOutOfRange { .. }
            | ContractError::KNotMultiple { .. }
            | ContractError::GroupNotAllowed { .. }
            | ContractError::KNotDivisibleByGroup { .. }
            | ContractError::NNotMultipleOf8 { .. }
            | ContractError::Int32Overflow { .. }
            | ContractError::WrongKernel { .. }
            | ContractError::MissingRouting { .. }
            | ContractError::LocalExperts { .. }
            | ContractError::TileNotCompiled { .. } => None,
        }
    }

    pub fn row_layout_tensor(&self) -> Option<TensorRole> {
        let tensor = match self {
            ContractError::RowStrideAlign { tensor, .. }
            | ContractError::Misaligned { tensor, .. } => *tensor,
            _ => return None,
        };
        [TensorRole::X, TensorRole::Y]
            .into_iter()
            .find(|r| r.name() == tensor)
    }
}

fn dtype(tensor: &'static str, v: &TensorView, act: ElemType) -> Result<(), ContractError> {
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
fn weight_row_stride(
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

fn rank2(tensor: &'static str, v: &TensorView) -> Result<(), ContractError> {
    if v.rank() != 2 || v.strides.len() != 2 {
        return Err(ContractError::Rank {
            tensor,
            expected: 2,
            got: v.describe(),
        });
    }
    Ok(())
}

fn shape(
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

fn inner(tensor: &'static str, v: &TensorView) -> Result<(), ContractError> {
    let got = *v.strides.last().unwrap_or(&0);
    // a single element has no inner stride to speak of
    if got != 1 && v.shape.last().copied().unwrap_or(0) > 1 {
        return Err(ContractError::InnerStride { tensor, got });
    }
    Ok(())
}

/// Activation-dtype matrix of a given shape with unit inner stride.
fn matrix(
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

fn row_stride(
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
fn bytes(tensor: &'static str, v: &TensorView, formula: &str) -> Result<(), ContractError> {
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
