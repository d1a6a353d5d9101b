//! Mixture-of-experts (docs/contract.md §4 item 5): routing, the expert map, the reference `moe_align` and its
//! exact checker, the MoE layer with its stacked device layout, and the grouped GEMM reference
//! with its comparison. The grouped reference is the dense reference ([`crate::gemm`]) run per
//! expert on the rows its slots read, and its bound is the dense bound plus the routed-weight
//! rounding ([`crate::bound::BoundModel::routed_element`]).

pub mod align;
pub mod check;
pub mod compare;
pub mod grouped;
pub mod layer;
pub mod map;
pub mod routing;

pub use align::{
    AlignCapacity, AlignError, Aligned, align_capacity, checked_align_capacity, moe_align,
};
pub use check::{AlignBuffer, AlignMismatch, check_align, check_align_tails};
pub use compare::{
    DIAGNOSED_ROWS, GroupedReport, SlotFailure, WrongExpert, compare_grouped, compare_grouped_mode,
};
pub use grouped::{
    GroupedError, GroupedReference, RowKind, grouped_reference, grouped_reference_with,
};
pub use layer::{MoeLayer, MoeLayerError, MoeSpec, StackedExperts};
pub use map::{ExpertMap, MapError, MapKind};
pub use routing::{Routing, RoutingError, RoutingKind, route};
