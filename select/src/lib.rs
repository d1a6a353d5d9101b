//! Kernel selection as the engine does it (docs/contract.md §5): a priority list of linear
//! kernels (the hybrid, then the fallback), each with a `can_implement` that gives a reason for
//! every rejection, and the hybrid's M-dispatch (skinny, fused, or dequant cache + dense); the
//! MoE method's choice; the kernel configuration that steers them. Pure logic: no device, so
//! every target's tables are checked on any machine. A layer below the harness: it reads case
//! files and kernel declarations, and hands planned launches to the launch-boundary validation.

pub mod check;
pub mod config;
pub mod legal;
pub mod moe;
pub mod padding;
mod print;
pub mod reach;
mod reason;

use serde::Serialize;
use w4a16_kernels::decl::Tile;
use w4a16_kernels::{KernelId, Target, tiles};
use w4a16_reference::ActDtype;
use w4a16_reference::layer::{LayerShape, Symmetry};

use crate::config::{KernelConfig, PrefillDequant};
use w4a16_cases::{Case, RowPadding};

pub use check::{
    ContractValidator, CrossCheckError, DeclaredContracts, PlannedLaunch, PlannedTensor,
    TensorElem, cross_check, plan_launches,
};
pub use legal::{LinearPath, TileSize, legal_paths};
pub use print::{render, row};
pub use reason::{Dispatch, MoeRefusal, MoeRefusals, RejectReason};

/// Batches up to this M take the skinny (decode) kernel: the largest M skinny declares.
pub const SKINNY_MAX_M: usize = w4a16_kernels::set::SKINNY_M_MAX;
/// Batches from this M take the dense cache when it is enabled and built, on a target without
/// a threshold of its own ([`dense_min_m`]): upstream's rule (docs/contract.md §5.2).
pub const DENSE_MIN_M: usize = 256;

/// The smallest M that takes the dense cache when it is enabled and built, per target: like
/// the tile tables, data of the target (docs/contract.md §5.2). sm_90 takes it from the first
/// M above skinny's (the fork's rule): measured on the H200, dequant + dense beat every fused
/// tile at every M from 8 on every field shape, 2 to 25 times over (bench/regret-sm_90-h200-f16-sym.md).
pub fn dense_min_m(target: Target) -> usize {
    match target {
        Target::Sm90 => SKINNY_MAX_M + 1,
        _ => DENSE_MIN_M,
    }
}
/// Group sizes of the fast path, as the kernels declare them.
pub const HYBRID_GROUPS: &[usize] = w4a16_kernels::set::FAST_GROUPS;
/// Every path a linear layer's selection can take: the hybrid's decode, mid-M and prefill paths
/// and the fallback. A differential case runs each of them that takes it; a test below checks
/// that [`select`] reaches exactly these.
pub const LINEAR_PATHS: [&[KernelId]; 4] = [
    &[KernelId::Skinny],
    &[KernelId::Fused],
    &[KernelId::Fallback],
    &[KernelId::Dequant, KernelId::Dense],
];

w4a16_reference::named_enum! {
    /// The linear kernels of the priority list, in priority order.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum LayerKernel {
        /// Skinny / fused / dequant+dense, dispatched on M.
        Hybrid = "hybrid",
        /// The plain dequant GEMM that takes every shape the formats allow.
        Fallback = "fallback",
    }
}

impl LayerKernel {
    pub const PRIORITY: [LayerKernel; 2] = [LayerKernel::Hybrid, LayerKernel::Fallback];
}

/// One linear layer call as the engine sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct LayerRequest {
    pub shape: LayerShape,
    pub m: usize,
    /// fp16 or bf16: other activation dtypes are not representable, so the hybrid's dtype rule
    /// holds by construction.
    pub dtype: ActDtype,
    pub symmetry: Symmetry,
    pub bias: bool,
    /// The checkpoint has act-order (`g_idx`).
    pub act_order: bool,
    pub padding: RowPadding,
    /// The dense prefill cache exists for this layer (built at load when the option is
    /// enabled and the startup memory check allowed it).
    pub dense_cache_built: bool,
}

impl LayerRequest {
    pub fn new(shape: LayerShape, m: usize, dtype: ActDtype, symmetry: Symmetry) -> Self {
        LayerRequest {
            shape,
            m,
            dtype,
            symmetry,
            bias: false,
            act_order: false,
            padding: RowPadding::CacheCliff,
            dense_cache_built: true,
        }
    }

    /// The request `case` makes with the dense cache built (its M-dispatch as if the option
    /// were enabled); [`LayerRequest::from_case_under`] for a configuration's own.
    pub fn from_case(case: &Case) -> Self {
        LayerRequest {
            shape: case.shape,
            m: case.m,
            dtype: case.dtype,
            symmetry: case.symmetry,
            bias: case.bias,
            act_order: case.act_order,
            padding: case.padding,
            dense_cache_built: true,
        }
    }

    /// The request `case` makes under `config`: the dense cache built as the configuration
    /// builds it ([`KernelConfig::builds_dense_cache`]), the one place that fact is derived.
    pub fn from_case_under(case: &Case, config: &KernelConfig) -> Self {
        LayerRequest {
            dense_cache_built: config.builds_dense_cache(),
            ..Self::from_case(case)
        }
    }

    pub fn asymmetric(&self) -> bool {
        self.symmetry == Symmetry::Asym
    }
}

/// Why a kernel of the priority list did not take the layer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Rejection {
    pub kernel: LayerKernel,
    pub reason: RejectReason,
}

/// Row strides of every tensor the chosen path touches (elements unless named bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Strides {
    pub x_row_stride: usize,
    pub weight_row_stride_bytes: usize,
    /// `weight_row_stride_bytes − K/2`.
    pub weight_pad_bytes: usize,
    pub scale_row_stride: usize,
    pub y_row_stride: usize,
    /// The dense cache's row stride, when the path uses it.
    pub dense_row_stride: Option<usize>,
}

impl Strides {
    pub fn dense_pad_elems(&self, k: usize) -> Option<usize> {
        self.dense_row_stride.map(|s| s - k)
    }
}

/// The outcome of selection for one layer call on one target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Selection {
    pub target: Target,
    pub request: LayerRequest,
    /// `None`: no kernel of the list can take the layer (the reasons are in `rejections`).
    pub layer_kernel: Option<LayerKernel>,
    /// Kernels run per call, in order: `[skinny]`, `[fused]`, `[dequant, dense]` (the dequant
    /// runs once at load, the dense per call), `[fallback]`, or empty.
    pub path: Vec<KernelId>,
    /// Why this path: the hybrid's M-dispatch, the fallback, or no kernel.
    pub dispatch: Dispatch,
    /// The fused kernel's tile (fused path only).
    pub tile: Option<Tile>,
    /// The rung of the target's tile table that gave `tile` (fused path only).
    pub tile_rung: Option<tiles::RungId>,
    pub strides: Strides,
    /// Every kernel earlier in the list that did not take the layer, with every reason.
    pub rejections: Vec<Rejection>,
}

impl Selection {
    /// `skinny`, `fused`, `dequant+dense`, `fallback` or `none`.
    pub fn path_name(&self) -> String {
        if self.path.is_empty() {
            "none".to_owned()
        } else {
            self.path
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join("+")
        }
    }

    /// Every rejection as `kernel: reason`, `; `-separated: why no kernel takes the layer, as
    /// the runner's and perf mode's refusals give it.
    pub fn rejection_list(&self) -> String {
        let why: Vec<String> = self
            .rejections
            .iter()
            .map(|r| format!("{}: {}", r.kernel.name(), r.reason))
            .collect();
        why.join("; ")
    }
}

/// Every reason `kernel` cannot take `req` on `target`; empty when it can.
pub fn can_implement(kernel: LayerKernel, target: Target, req: &LayerRequest) -> Vec<RejectReason> {
    let LayerShape { n, k, group } = req.shape;
    let mut why = Vec::new();
    if req.m == 0 {
        why.push(RejectReason::MZero);
    }
    match kernel {
        LayerKernel::Hybrid => {
            if !wave32_capable(target) {
                why.push(RejectReason::NotWave32 { target });
            }
            if !HYBRID_GROUPS.contains(&group) {
                why.push(RejectReason::NotFastGroup { k, group });
            }
            if k % 16 != 0 {
                why.push(RejectReason::KNotMultipleOf16 { k });
            }
            if group == 0 || k % group != 0 {
                why.push(RejectReason::KNotMultipleOfGroup { k, group });
            }
            if req.asymmetric() && n % 8 != 0 {
                why.push(RejectReason::ZeroPointsNNotMultipleOf8 { n });
            }
            if req.act_order {
                why.push(RejectReason::ActOrder);
            }
        }
        LayerKernel::Fallback => {
            if k % 16 != 0 {
                why.push(RejectReason::KNotMultipleOf16 { k });
            }
            if group == 0 || group % 8 != 0 || k % group != 0 {
                why.push(RejectReason::FallbackGroup { k, group });
            }
            // Asymmetric N % 8 != 0 is taken: the zero points' partial last word
            // ([ceil(N/8), K/G]) is read row by row (the contract's `packed_zero_points_any_n`).
            if req.act_order {
                why.push(RejectReason::ActOrder);
            }
        }
    }
    why
}

/// gfx11, gfx12 and NVIDIA sm_80+ run 32-lane waves; CDNA (gfx942) runs 64.
pub fn wave32_capable(target: Target) -> bool {
    target.wave_size() == 32 && (target.is_gfx11() || target.is_gfx12() || target == Target::Sm90)
}

/// Selects the kernel (and path, tile and strides) for one call. Never fails: a layer no kernel
/// takes yields an empty path and the reasons.
pub fn select(target: Target, req: &LayerRequest, config: &KernelConfig) -> Selection {
    let LayerShape { n, k, group } = req.shape;
    let mut rejections = Vec::new();
    let mut chosen = None;
    for kernel in LayerKernel::PRIORITY {
        let why = can_implement(kernel, target, req);
        if why.is_empty() {
            chosen = Some(kernel);
            break;
        }
        rejections.extend(why.into_iter().map(|reason| Rejection { kernel, reason }));
    }

    let dispatch = match chosen {
        None => Dispatch::NoKernel,
        Some(LayerKernel::Fallback) => Dispatch::Fallback,
        Some(LayerKernel::Hybrid) => hybrid_dispatch(target, req, config),
    };
    let path = dispatch.path().to_vec();
    let uses_dense = path.contains(&KernelId::Dense);
    let weight_row_stride_bytes = padding::weight_row_stride_bytes(target, k, req.padding);
    let strides = Strides {
        x_row_stride: padding::x_row_stride_on_path(target, &path, k, req.dtype, req.padding),
        weight_row_stride_bytes,
        weight_pad_bytes: weight_row_stride_bytes - k / 2,
        scale_row_stride: req.shape.groups(),
        y_row_stride: n,
        dense_row_stride: uses_dense
            .then(|| padding::dense_row_stride(target, k, req.dtype, req.padding)),
    };
    let pick = path
        .contains(&KernelId::Fused)
        .then(|| tiles::fused_pick(target, req.dtype, req.m, n, k, group));
    Selection {
        target,
        request: *req,
        layer_kernel: chosen,
        path,
        dispatch,
        tile: pick.map(|p| p.tile),
        tile_rung: pick.map(|p| p.rung),
        strides,
        rejections,
    }
}

/// The hybrid's M-dispatch on `target` (docs/contract.md §5).
fn hybrid_dispatch(target: Target, req: &LayerRequest, config: &KernelConfig) -> Dispatch {
    let m = req.m;
    if m <= SKINNY_MAX_M {
        return Dispatch::Decode { m };
    }
    let dense_from = dense_min_m(target);
    if m < dense_from {
        return Dispatch::MidM { m, dense_from };
    }
    match (config.prefill_dequant, req.dense_cache_built) {
        (PrefillDequant::Enable, true) => Dispatch::DenseCache { m, dense_from },
        (PrefillDequant::Enable, false) => Dispatch::NoCacheBuilt { m, dense_from },
        (PrefillDequant::Disable, _) => Dispatch::PrefillDequantDisabled { m, dense_from },
    }
}

#[cfg(test)]
mod named_tests {
    use crate::LayerKernel;
    use crate::config::PrefillDequant;

    w4a16_reference::named_enum_tests! {
        prefill_dequant: PrefillDequant,
        layer_kernel: LayerKernel,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// [`LINEAR_PATHS`] is what the selection reaches: every path of it is chosen for some
    /// request, and no request gets another.
    #[test]
    fn the_linear_paths_are_the_ones_the_selection_reaches() {
        let mut reached = BTreeSet::new();
        for target in Target::ALL {
            for prefill in [PrefillDequant::Enable, PrefillDequant::Disable] {
                let config = KernelConfig::with_prefill_dequant(prefill);
                // A group the hybrid takes and one only the fallback does (channelwise).
                for group in [128, 4096] {
                    for m in [1, SKINNY_MAX_M, SKINNY_MAX_M + 1, DENSE_MIN_M, 2048] {
                        for built in [true, false] {
                            let mut req = LayerRequest::new(
                                LayerShape::new(4096, 4096, group),
                                m,
                                ActDtype::F16,
                                Symmetry::Asym,
                            );
                            req.dense_cache_built = built;
                            let sel = select(target, &req, &config);
                            if !sel.path.is_empty() {
                                reached.insert(sel.path);
                            }
                        }
                    }
                }
            }
        }
        let declared: BTreeSet<Vec<KernelId>> = LINEAR_PATHS.iter().map(|p| p.to_vec()).collect();
        assert_eq!(reached, declared);
    }
}
