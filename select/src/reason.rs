//! Why selection took its path and why a kernel did not take the layer, as data. Each `Display`
//! is the text the committed selection and verdict snapshots hold (snapshots/selection*@*.snap),
//! so rewording a reason is a snapshot change; serialized, a reason is that same text.

use std::fmt;

use serde::{Serialize, Serializer};
use w4a16_kernels::{KernelId, Target};

use crate::{HYBRID_GROUPS, SKINNY_MAX_M};

/// Serializes a reason as its text, the form reports have always carried.
macro_rules! serialize_as_text {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    )*};
}

serialize_as_text!(Dispatch, RejectReason, MoeRefusal);

/// Why the selection took its path: the priority list's outcome, or the hybrid's M-dispatch
/// (docs/contract.md §5). The path follows from it ([`Dispatch::path`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dispatch {
    /// No kernel of the priority list takes the layer.
    NoKernel,
    /// The fallback took the layer (the hybrid did not).
    Fallback,
    /// `M ≤ SKINNY_MAX_M`: the skinny decode kernel.
    Decode { m: usize },
    /// `SKINNY_MAX_M < M < dense_from` (the target's [`crate::dense_min_m`]): the fused kernel.
    MidM { m: usize, dense_from: usize },
    /// `M ≥ dense_from`, prefill dequant enabled and the cache built: dequant + dense.
    DenseCache { m: usize, dense_from: usize },
    /// `M ≥ dense_from`, prefill dequant enabled but no cache built for the layer: fused.
    NoCacheBuilt { m: usize, dense_from: usize },
    /// `M ≥ dense_from` with prefill dequant disabled: fused.
    PrefillDequantDisabled { m: usize, dense_from: usize },
}

impl Dispatch {
    /// The kernels run per call on this dispatch, in order (empty when no kernel takes the
    /// layer).
    pub fn path(self) -> &'static [KernelId] {
        match self {
            Dispatch::NoKernel => &[],
            Dispatch::Fallback => &[KernelId::Fallback],
            Dispatch::Decode { .. } => &[KernelId::Skinny],
            Dispatch::MidM { .. }
            | Dispatch::NoCacheBuilt { .. }
            | Dispatch::PrefillDequantDisabled { .. } => &[KernelId::Fused],
            Dispatch::DenseCache { .. } => &[KernelId::Dequant, KernelId::Dense],
        }
    }
}

impl fmt::Display for Dispatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Dispatch::NoKernel => f.write_str("no kernel of the priority list takes this layer"),
            Dispatch::Fallback => f.write_str("fallback: every shape the formats allow"),
            Dispatch::Decode { m } => write!(f, "M = {m} ≤ {SKINNY_MAX_M}: decode"),
            Dispatch::MidM { m, dense_from } => {
                write!(f, "{SKINNY_MAX_M} < M = {m} < {dense_from}: fused")
            }
            Dispatch::DenseCache { m, dense_from } => write!(
                f,
                "M = {m} ≥ {dense_from}, prefill dequant enabled and cache built"
            ),
            Dispatch::NoCacheBuilt { m, dense_from } => write!(
                f,
                "M = {m} ≥ {dense_from}, prefill dequant enabled but no cache built"
            ),
            Dispatch::PrefillDequantDisabled { m, dense_from } => {
                write!(f, "M = {m} ≥ {dense_from}, prefill dequant disabled")
            }
        }
    }
}

/// One rule of a linear kernel's `can_implement` that the layer breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// M = 0: nothing to compute.
    MZero,
    /// The hybrid needs 32-lane waves; the target runs wider ones.
    NotWave32 { target: Target },
    /// The group size (channelwise when `group == k`) is not one of [`HYBRID_GROUPS`].
    NotFastGroup { k: usize, group: usize },
    /// K must be divisible by 16.
    KNotMultipleOf16 { k: usize },
    /// K must be a multiple of the group size (and the group size positive).
    KNotMultipleOfGroup { k: usize, group: usize },
    /// The hybrid's zero points are packed 8 per u32 along N, so N must be divisible by 8.
    ZeroPointsNNotMultipleOf8 { n: usize },
    /// Act-order checkpoints (`g_idx`) are not supported.
    ActOrder,
    /// The fallback's group size must be a multiple of 8 that divides K.
    FallbackGroup { k: usize, group: usize },
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RejectReason::MZero => f.write_str("M = 0: nothing to compute"),
            RejectReason::NotWave32 { target } => write!(
                f,
                "{target} is wave{}; needs wave32 (gfx11, gfx12, sm_80+)",
                target.wave_size()
            ),
            RejectReason::NotFastGroup { k, group } => {
                if group == k && group > 0 {
                    write!(f, "channelwise (G = K = {k})")?;
                } else {
                    write!(f, "G = {group}")?;
                }
                f.write_str(" is not a fast-path group size (")?;
                for (i, g) in HYBRID_GROUPS.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    write!(f, "{sep}{g}")?;
                }
                f.write_str(")")
            }
            RejectReason::KNotMultipleOf16 { k } => write!(f, "K = {k} must be divisible by 16"),
            RejectReason::KNotMultipleOfGroup { k, group } => {
                write!(f, "K = {k} must be a multiple of G = {group}")
            }
            RejectReason::ZeroPointsNNotMultipleOf8 { n } => write!(
                f,
                "asymmetric zero points are packed 8 per u32 along N: N = {n} must be divisible by 8"
            ),
            RejectReason::ActOrder => f.write_str("act-order (g_idx) is not supported"),
            RejectReason::FallbackGroup { k, group } => write!(
                f,
                "G = {group} must be a multiple of 8 that divides K = {k}"
            ),
        }
    }
}

/// One rule of `moe`'s (or `moe_align`'s) declared contract that a MoE layer breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MoeRefusal {
    /// The group size is not one `moe` declares; the set has no MoE fallback.
    GroupNotAllowed {
        group: usize,
        allowed: &'static [usize],
    },
    /// K is not a multiple of what `moe` declares.
    KNotMultiple { k: usize, multiple: usize },
    /// Asymmetric zero points are packed 8 per u32 along N, so N must be a multiple of 8.
    ZeroPointsNNotMultipleOf8 { n: usize },
    /// The checkpoint's zero points are unpacked; `moe` takes them packed.
    UnpackedZeroPoints,
    /// `top_k` must be in `1..=experts`.
    TopK { top_k: usize, experts: usize },
    /// No tokens to route.
    NoTokens,
}

impl fmt::Display for MoeRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MoeRefusal::GroupNotAllowed { group, allowed } => write!(
                f,
                "moe: group size {group} is not one of {allowed:?} (the set has no MoE fallback)"
            ),
            MoeRefusal::KNotMultiple { k, multiple } => {
                write!(f, "moe: K={k} is not a multiple of {multiple}")
            }
            MoeRefusal::ZeroPointsNNotMultipleOf8 { n } => write!(
                f,
                "moe: zero points are packed 8 per u32 along N, and N={n} is not a multiple of 8"
            ),
            MoeRefusal::UnpackedZeroPoints => f.write_str(
                "moe: zero points unpacked [N, K/G]; moe takes packed [E, N/8, K/G] u32",
            ),
            MoeRefusal::TopK { top_k, experts } => write!(
                f,
                "moe_align: top_k = {top_k} must be 1..={experts} (the experts)"
            ),
            MoeRefusal::NoTokens => f.write_str("moe_align: no tokens"),
        }
    }
}

/// Every refusal of a MoE layer, shown `; `-separated as snapshot rows and verdicts carry them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct MoeRefusals(pub Vec<MoeRefusal>);

impl MoeRefusals {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, MoeRefusal> {
        self.0.iter()
    }
}

impl fmt::Display for MoeRefusals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { "; " };
            write!(f, "{sep}{r}")?;
        }
        Ok(())
    }
}
