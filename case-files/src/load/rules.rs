//! The format rules a layer and a case must meet, as values: each names what is wrong and
//! where the loader should point (the key it came from).

use w4a16_reference::data::EXACT_MAX_K;
use w4a16_reference::layer::Symmetry;

use crate::schema::GroupSpec;
use crate::{DataClass, NamedShape};

/// A layer shape the resident layout cannot hold (docs/contract.md §1–2).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum ShapeError {
    #[error("K={k} must be a multiple of 8 (8 codes per u32 word)")]
    KNotWholeWords { k: usize },
    #[error("K={k} is not a multiple of the group size {group}")]
    GroupDoesNotDivideK { k: usize, group: usize },
}

impl ShapeError {
    /// The key at fault: `k` or `group`.
    pub(super) fn key(&self) -> &'static str {
        match self {
            ShapeError::KNotWholeWords { .. } => "k",
            ShapeError::GroupDoesNotDivideK { .. } => "group",
        }
    }
}

/// Format-level rules of a layer shape (docs/contract.md §1–2): the resident layout must be able to hold it.
pub(super) fn check_shape(k: usize, group: usize) -> Result<(), ShapeError> {
    if !k.is_multiple_of(8) {
        return Err(ShapeError::KNotWholeWords { k });
    }
    if group > k || !k.is_multiple_of(group) {
        return Err(ShapeError::GroupDoesNotDivideK { k, group });
    }
    Ok(())
}

/// A sweep's or a case's group spec that cannot apply to one of its shapes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum GroupError {
    /// The group size must divide K (whole groups along K).
    #[error("group size {group} does not divide K={k} of shape \"{shape}\"")]
    DoesNotDivideK {
        group: usize,
        k: usize,
        shape: String,
    },
}

/// The group size a spec means for one shape.
pub(super) fn group_for(spec: GroupSpec, s: &NamedShape) -> Result<usize, GroupError> {
    let k = s.shape.k;
    let g = match spec {
        GroupSpec::Shape => s.shape.group,
        GroupSpec::Channelwise => k,
        GroupSpec::Size(g) => g,
    };
    if g > k || !k.is_multiple_of(g) {
        return Err(GroupError::DoesNotDivideK {
            group: g,
            k,
            shape: s.name.clone(),
        });
    }
    Ok(g)
}

/// The exact class keeps every fp32 partial sum exact only up to this K.
pub(super) fn exact_too_large(class: DataClass, k: usize) -> Option<String> {
    (class == DataClass::Exact && k > EXACT_MAX_K)
        .then(|| format!("the exact class keeps fp32 sums exact only for K ≤ {EXACT_MAX_K}; K={k}"))
}

/// Why no kernel of the set runs a case (docs/contract.md §1); a suite refuses such a case
/// unless it sets `allow_unsupported` to test the refusal.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum Unsupported {
    #[error("K={k} is not a multiple of 16 (docs/contract.md §1)")]
    KNotMultipleOf16 { k: usize },
    #[error(
        "asymmetric zero points are packed 8 per u32 along N, and N={n} is not a multiple of 8"
    )]
    AsymNNotMultipleOf8 { n: usize },
    #[error("no kernel of the set takes act-order (g_idx) layers")]
    ActOrder,
}

impl Unsupported {
    /// The axis at fault: `shapes`, `symmetry` or `act_order`.
    pub(super) fn axis(&self) -> &'static str {
        match self {
            Unsupported::KNotMultipleOf16 { .. } => "shapes",
            Unsupported::AsymNNotMultipleOf8 { .. } => "symmetry",
            Unsupported::ActOrder => "act_order",
        }
    }
}

/// Rules every case of a suite without `allow_unsupported` must meet (docs/contract.md §1): K % 16 == 0,
/// packed zero points need N % 8 == 0, and no format carries act-order.
pub(super) fn unsupported_reason(
    k: usize,
    n: usize,
    symmetry: Symmetry,
    act_order: bool,
) -> Option<Unsupported> {
    if !k.is_multiple_of(16) {
        return Some(Unsupported::KNotMultipleOf16 { k });
    }
    if symmetry == Symmetry::Asym && !n.is_multiple_of(8) {
        return Some(Unsupported::AsymNNotMultipleOf8 { n });
    }
    if act_order {
        return Some(Unsupported::ActOrder);
    }
    None
}
