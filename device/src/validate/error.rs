//! [`ContractError`]: how the validator says what a launch got wrong, serializable so that a
//! fault-isolated worker can hand it to its parent.

use super::*;

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
pub(super) fn interned<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
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

pub(super) fn fmt_range(min: usize, max: Option<usize>) -> String {
    match max {
        Some(max) => format!("[{min}, {max}]"),
        None => format!("[{min}, ∞)"),
    }
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
