//! The kernel set, one declaration per kernel (ARCHITECTURE.md rule 1): the argument lists
//! (`args`) ARE the launch ABI; the HIP sources, launch packing, validation and the code-object
//! checks all follow them. Each declaration gathers its contract, recipe (`recipes`) and launch
//! geometry (`geometry`); `skinny`'s capacities and edge shapes are in `skinny`.

mod args;
mod geometry;
mod recipes;
mod skinny;
#[cfg(test)]
mod tests;

use crate::decl::{ContractDecl, GroupRule, KernelDecl, KernelId, RowLayoutRule};
use crate::source;
use crate::tiles;
use w4a16_reference::ActDtype;

pub use args::{DENSE_ARGS, DEQUANT_ARGS, FUSED_CARRIER_ARGS, GEMM_ARGS, MOE_ALIGN_ARGS, MOE_ARGS};
pub use geometry::{
    DEQUANT_THREADS, FALLBACK_ROWS, FALLBACK_THREADS, MOE_ALIGN_EXPERT_WINDOW, MOE_ALIGN_THREADS,
    fused_geometry_for, moe_geometry_for,
};
pub use skinny::{
    CapacityEdge, EdgeSide, RAGGED_ROW_TILE_N, SKINNY_EDGE_N, SKINNY_M_MAX, SKINNY_SCALE_CAPACITY,
    SKINNY_SPAN, SKINNY_STAGE_ROW_BYTES, SKINNY_STREAMED_SPANS, SKINNY_THREADS,
    SKINNY_WEIGHT_STAGES, SKINNY_X_CAPACITY, SkinnyCapacity, skinny_capacity_edges,
    skinny_dynamic_shared_bytes, skinny_row_tiles, skinny_streamed_x_edges,
};

use geometry::{
    dense_geometry, dequant_geometry, fallback_geometry, fused_geometry, fused_pick,
    moe_align_geometry, moe_geometry, moe_pick, skinny_geometry,
};
use recipes::{
    dense_recipe, dequant_recipe, exact_weights_recipe, fused_carrier_recipe, fused_recipe,
    moe_align_recipe,
};

/// What `moe_align` may write: `blocks = ⌈(slots + experts·(block_m − 1)) / block_m⌉` blocks (every
/// expert's run padded by at most `block_m − 1`), `sorted = blocks · block_m` slot entries. The
/// reference's formula, so the launch sizes and the checker cannot disagree.
pub use w4a16_reference::moe::AlignCapacity as MoeAlignCapacity;

/// The capacity of `moe_align`'s outputs for `slots` slots over `experts` global experts; `None`
/// on overflow or a zero block size.
pub use w4a16_reference::moe::checked_align_capacity as moe_align_capacity;

/// Entry-point names: `w4a16_<kernel>_<f16|bf16>`, `extern "C"` in the HIP sources.
pub fn entry_name(kernel: crate::KernelId, dtype: w4a16_reference::ActDtype) -> String {
    format!("w4a16_{}_{}", kernel.name(), dtype.name())
}

/// The group sizes of the fast path (docs/contract.md §1).
pub const FAST_GROUPS: &[usize] = &[32, 64, 128];

/// [`entry_name`] as the `&'static str` a declaration hands out: built once from it for every
/// kernel and dtype, so the names are spelled in one place.
fn name_of(kernel: KernelId, dtype: ActDtype) -> &'static str {
    static NAMES: std::sync::OnceLock<Vec<(KernelId, ActDtype, &'static str)>> =
        std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        KernelId::ALL
            .into_iter()
            .flat_map(|k| ActDtype::ALL.into_iter().map(move |d| (k, d)))
            .map(|(k, d)| (k, d, &*Box::leak(entry_name(k, d).into_boxed_str())))
            .collect()
    });
    names
        .iter()
        .find(|(k, d, _)| (*k, *d) == (kernel, dtype))
        .map(|(_, _, name)| *name)
        .expect("every kernel and dtype has an entry point")
}

pub static SKINNY: KernelDecl = KernelDecl {
    id: KernelId::Skinny,
    source_file: source::file_name(KernelId::Skinny),
    entry_point: |d| name_of(KernelId::Skinny, d),
    args: &GEMM_ARGS,
    contract: ContractDecl {
        groups: GroupRule::OneOf(FAST_GROUPS),
        m_min: 1,
        m_max: Some(SKINNY_M_MAX),
        k_multiple: 16,
        weight_row_align_bytes: 16,
        packed_zero_points: true,
        packed_zero_points_any_n: false,
        pointer_align_bytes: 16,
        // X: 16- and 8-byte loads only where `x_vec16` / `x_vec8` found the base and the row
        // stride aligned at run time, element loads otherwise. Y: one 2-byte store per element.
        x_rows: Some(RowLayoutRule::ELEMENT),
        y_rows: Some(RowLayoutRule::ELEMENT),
    },
    recipe: exact_weights_recipe,
    geometry: skinny_geometry,
    variants: &[],
    tile: None,
};

pub static FUSED: KernelDecl = KernelDecl {
    id: KernelId::Fused,
    source_file: source::file_name(KernelId::Fused),
    entry_point: |d| name_of(KernelId::Fused, d),
    args: &GEMM_ARGS,
    contract: ContractDecl {
        groups: GroupRule::OneOf(FAST_GROUPS),
        m_min: 1,
        m_max: None,
        k_multiple: 16,
        weight_row_align_bytes: 16,
        packed_zero_points: true,
        packed_zero_points_any_n: false,
        pointer_align_bytes: 16,
        // X: 16-byte async copies only where `x_vec` found the base 16-byte aligned and the row
        // stride a multiple of 8 at run time, element loads otherwise. Y: 2-byte stores.
        x_rows: Some(RowLayoutRule::ELEMENT),
        y_rows: Some(RowLayoutRule::ELEMENT),
    },
    recipe: fused_recipe,
    geometry: fused_geometry,
    variants: &tiles::FUSED_VARIANTS,
    tile: Some(fused_pick),
};

pub static DEQUANT: KernelDecl = KernelDecl {
    id: KernelId::Dequant,
    source_file: source::file_name(KernelId::Dequant),
    entry_point: |d| name_of(KernelId::Dequant, d),
    args: &DEQUANT_ARGS,
    contract: ContractDecl {
        groups: GroupRule::AnyDividingK,
        m_min: 0,
        m_max: None,
        k_multiple: 16,
        weight_row_align_bytes: 4,
        packed_zero_points: true,
        packed_zero_points_any_n: false,
        pointer_align_bytes: 4,
        x_rows: None,
        y_rows: None,
    },
    recipe: dequant_recipe,
    geometry: dequant_geometry,
    variants: &[],
    tile: None,
};

pub static DENSE: KernelDecl = KernelDecl {
    id: KernelId::Dense,
    source_file: source::file_name(KernelId::Dense),
    entry_point: |d| name_of(KernelId::Dense, d),
    args: &DENSE_ARGS,
    contract: ContractDecl {
        groups: GroupRule::AnyDividingK,
        m_min: 1,
        m_max: None,
        k_multiple: 16,
        weight_row_align_bytes: 16,
        packed_zero_points: false,
        packed_zero_points_any_n: false,
        pointer_align_bytes: 16,
        // cuBLAS `cublasGemmEx` (and rocBLAS/hipBLAS `gemm_ex`) take any leading dimension
        // ≥ the row length and element-aligned pointers; since cuBLAS 11 alignment only
        // decides whether a tensor-core algorithm is eligible, not whether the call is legal.
        x_rows: Some(RowLayoutRule::ELEMENT),
        y_rows: Some(RowLayoutRule::ELEMENT),
    },
    recipe: dense_recipe,
    geometry: dense_geometry,
    variants: &[],
    tile: None,
};

pub static FALLBACK: KernelDecl = KernelDecl {
    id: KernelId::Fallback,
    source_file: source::file_name(KernelId::Fallback),
    entry_point: |d| name_of(KernelId::Fallback, d),
    args: &GEMM_ARGS,
    contract: ContractDecl {
        groups: GroupRule::AnyDividingK,
        m_min: 1,
        m_max: None,
        k_multiple: 16,
        weight_row_align_bytes: 4,
        packed_zero_points: true,
        // fallback.hip reads `zero_point(zeros, col, g, groups)`: word (col/8)·groups + g for
        // col < N only, so a partial last word of [ceil(N/8), K/G] is all it touches.
        packed_zero_points_any_n: true,
        pointer_align_bytes: 4,
        // One 2-byte load of X and one 2-byte store of Y per element.
        x_rows: Some(RowLayoutRule::ELEMENT),
        y_rows: Some(RowLayoutRule::ELEMENT),
    },
    recipe: exact_weights_recipe,
    geometry: fallback_geometry,
    variants: &[],
    tile: None,
};

pub static MOE_ALIGN: KernelDecl = KernelDecl {
    id: KernelId::MoeAlign,
    source_file: source::file_name(KernelId::MoeAlign),
    entry_point: |d| name_of(KernelId::MoeAlign, d),
    args: &MOE_ALIGN_ARGS,
    contract: ContractDecl {
        // No weights: the group, K and weight-row rules have nothing to apply to.
        groups: GroupRule::AnyDividingK,
        m_min: 1,
        m_max: None,
        k_multiple: 1,
        weight_row_align_bytes: 1,
        packed_zero_points: false,
        packed_zero_points_any_n: false,
        // i32 tensors read and written one element at a time.
        pointer_align_bytes: 4,
        x_rows: None,
        y_rows: None,
    },
    recipe: moe_align_recipe,
    geometry: moe_align_geometry,
    variants: &[],
    tile: None,
};

pub static MOE: KernelDecl = KernelDecl {
    id: KernelId::Moe,
    source_file: source::file_name(KernelId::Moe),
    entry_point: |d| name_of(KernelId::Moe, d),
    args: &MOE_ARGS,
    // Fused's contract: the same tile main loop reads the same layouts (per expert); X as
    // fused (`x_vec` at run time, element loads otherwise), Y (C) in 2-byte stores.
    contract: FUSED.contract,
    // Fused's recipe; the routed-weight multiply (fp32, before the one cast) is the reference's.
    recipe: fused_recipe,
    geometry: moe_geometry,
    variants: &tiles::MOE_VARIANTS,
    tile: Some(moe_pick),
};

/// `fused` on the asymmetric carrier: fused's tiles, geometry and contract (its entries are
/// fused.hip compiled with `-DW4_FUSED_CARRIER=1`, `source::defines`). Asymmetric layers only.
pub static FUSED_CARRIER: KernelDecl = KernelDecl {
    id: KernelId::FusedCarrier,
    source_file: source::file_name(KernelId::FusedCarrier),
    entry_point: |d| name_of(KernelId::FusedCarrier, d),
    args: &FUSED_CARRIER_ARGS,
    contract: FUSED.contract,
    recipe: fused_carrier_recipe,
    geometry: fused_geometry,
    variants: &tiles::FUSED_VARIANTS,
    tile: Some(fused_pick),
};

/// Every kernel of the set, in `KernelId::ALL` order.
pub fn all() -> [&'static KernelDecl; 8] {
    [
        &SKINNY,
        &FUSED,
        &DEQUANT,
        &DENSE,
        &FALLBACK,
        &MOE_ALIGN,
        &MOE,
        &FUSED_CARRIER,
    ]
}

pub fn decl(kernel: KernelId) -> &'static KernelDecl {
    match kernel {
        KernelId::Skinny => &SKINNY,
        KernelId::Fused => &FUSED,
        KernelId::Dequant => &DEQUANT,
        KernelId::Dense => &DENSE,
        KernelId::Fallback => &FALLBACK,
        KernelId::MoeAlign => &MOE_ALIGN,
        KernelId::Moe => &MOE,
        KernelId::FusedCarrier => &FUSED_CARRIER,
    }
}
