//! The kernel set, one declaration per kernel. The argument lists below ARE the launch ABI:
//! the HIP sources, launch packing, validation and the code-object checks all follow them.

use crate::decl::{
    ArgDecl, ArgKind, ContractDecl, GroupRule, KernelDecl, KernelId, LaunchGeometry, LaunchShape,
    RoutedDims, RowLayoutRule, ScalarArg, TensorRole, Tile,
};
use crate::source;
use crate::target::Target;
use crate::tiles;
use w4a16_reference::{ActDtype, BiasStage, NumericRecipe};

const fn ptr(name: &'static str, role: TensorRole) -> ArgDecl {
    ArgDecl {
        name,
        kind: ArgKind::Pointer {
            role,
            writes: false,
            nullable: false,
        },
    }
}
const fn opt_ptr(name: &'static str, role: TensorRole) -> ArgDecl {
    ArgDecl {
        name,
        kind: ArgKind::Pointer {
            role,
            writes: false,
            nullable: true,
        },
    }
}
const fn out_ptr(name: &'static str, role: TensorRole) -> ArgDecl {
    ArgDecl {
        name,
        kind: ArgKind::Pointer {
            role,
            writes: true,
            nullable: false,
        },
    }
}
const fn int(name: &'static str, s: ScalarArg) -> ArgDecl {
    ArgDecl {
        name,
        kind: ArgKind::I32(s),
    }
}

/// `skinny`, `fused` and `fallback` share one GEMM signature:
/// `(x, w, scales, zeros?, bias?, y, m, n, k, group, x_row_stride, w_row_stride_bytes,
///   scale_row_stride, y_row_stride)`; zero points are contiguous `[N/8, K/G]` (the fallback
///   also takes `[ceil(N/8), K/G]`, `ContractDecl::packed_zero_points_any_n`).
pub static GEMM_ARGS: [ArgDecl; 14] = [
    ptr("x", TensorRole::X),
    ptr("w", TensorRole::Weights),
    ptr("scales", TensorRole::Scales),
    opt_ptr("zeros", TensorRole::Zeros),
    opt_ptr("bias", TensorRole::Bias),
    out_ptr("y", TensorRole::Y),
    int("m", ScalarArg::M),
    int("n", ScalarArg::N),
    int("k", ScalarArg::K),
    int("group", ScalarArg::Group),
    int("x_row_stride", ScalarArg::XRowStride),
    int("w_row_stride_bytes", ScalarArg::WeightRowStrideBytes),
    int("scale_row_stride", ScalarArg::ScaleRowStride),
    int("y_row_stride", ScalarArg::YRowStride),
];

/// `fused_carrier`: GEMM_ARGS with the scales and zero points replaced by the carrier and its row
/// stride: `(x, w, carrier, bias?, y, m, n, k, group, x_row_stride, w_row_stride_bytes,
/// carrier_row_stride, y_row_stride)`; the carrier is `[N, K/G]` u32, rows exactly K/G apart.
pub static FUSED_CARRIER_ARGS: [ArgDecl; 13] = [
    ptr("x", TensorRole::X),
    ptr("w", TensorRole::Weights),
    ptr("carrier", TensorRole::Carrier),
    opt_ptr("bias", TensorRole::Bias),
    out_ptr("y", TensorRole::Y),
    int("m", ScalarArg::M),
    int("n", ScalarArg::N),
    int("k", ScalarArg::K),
    int("group", ScalarArg::Group),
    int("x_row_stride", ScalarArg::XRowStride),
    int("w_row_stride_bytes", ScalarArg::WeightRowStrideBytes),
    int("carrier_row_stride", ScalarArg::CarrierRowStride),
    int("y_row_stride", ScalarArg::YRowStride),
];

/// `dequant`: `(w, scales, zeros?, out, n, k, group, w_row_stride_bytes, scale_row_stride,
/// out_row_stride)`.
pub static DEQUANT_ARGS: [ArgDecl; 10] = [
    ptr("w", TensorRole::Weights),
    ptr("scales", TensorRole::Scales),
    opt_ptr("zeros", TensorRole::Zeros),
    out_ptr("out", TensorRole::Dense),
    int("n", ScalarArg::N),
    int("k", ScalarArg::K),
    int("group", ScalarArg::Group),
    int("w_row_stride_bytes", ScalarArg::WeightRowStrideBytes),
    int("scale_row_stride", ScalarArg::ScaleRowStride),
    int("out_row_stride", ScalarArg::DenseRowStride),
];

/// `dense` runs in the vendor BLAS: `Y = X · Denseᵀ` with a leading dimension per operand
/// (`ldb`, `lda`, `ldc` of the column-major call). Declared for validation only; it has no HIP
/// entry point.
pub static DENSE_ARGS: [ArgDecl; 10] = [
    ptr("x", TensorRole::X),
    ptr("dense", TensorRole::Dense),
    opt_ptr("bias", TensorRole::Bias),
    out_ptr("y", TensorRole::Y),
    int("m", ScalarArg::M),
    int("n", ScalarArg::N),
    int("k", ScalarArg::K),
    int("x_row_stride", ScalarArg::XRowStride),
    int("dense_row_stride", ScalarArg::DenseRowStride),
    int("y_row_stride", ScalarArg::YRowStride),
];

/// `moe_align`: `(topk_ids, expert_map?, sorted_token_ids, expert_ids, num_tokens_post_padded,
/// slots, experts, block_m, sorted_capacity)`. The outputs hold `sorted_capacity` and
/// `sorted_capacity / block_m` entries and one ([`moe_align_capacity`]).
pub static MOE_ALIGN_ARGS: [ArgDecl; 9] = [
    ptr("topk_ids", TensorRole::TopkIds),
    opt_ptr("expert_map", TensorRole::ExpertMap),
    out_ptr("sorted_token_ids", TensorRole::SortedTokenIds),
    out_ptr("expert_ids", TensorRole::ExpertIds),
    out_ptr("num_tokens_post_padded", TensorRole::TokensPostPadded),
    int("slots", ScalarArg::Slots),
    int("experts", ScalarArg::Experts),
    int("block_m", ScalarArg::BlockM),
    int("sorted_capacity", ScalarArg::SortedCapacity),
];

/// `moe`: `(x, w, scales, zeros?, topk_weights?, sorted_token_ids, expert_ids,
/// num_tokens_post_padded, y, slots, top_k, n, k, group, x_row_stride, w_row_stride_bytes,
/// scale_row_stride, y_row_stride)`. The weights, scales and zero points are stacked per local
/// expert, the expert strides derived from the row strides (N rows each; N/8·K/G words of zero
/// points); `y` is C `[slots, N]`; a null `topk_weights` skips the routed-weight multiply.
pub static MOE_ARGS: [ArgDecl; 18] = [
    ptr("x", TensorRole::X),
    ptr("w", TensorRole::Weights),
    ptr("scales", TensorRole::Scales),
    opt_ptr("zeros", TensorRole::Zeros),
    opt_ptr("topk_weights", TensorRole::TopkWeights),
    ptr("sorted_token_ids", TensorRole::SortedTokenIds),
    ptr("expert_ids", TensorRole::ExpertIds),
    ptr("num_tokens_post_padded", TensorRole::TokensPostPadded),
    out_ptr("y", TensorRole::Y),
    int("slots", ScalarArg::Slots),
    int("top_k", ScalarArg::TopK),
    int("n", ScalarArg::N),
    int("k", ScalarArg::K),
    int("group", ScalarArg::Group),
    int("x_row_stride", ScalarArg::XRowStride),
    int("w_row_stride_bytes", ScalarArg::WeightRowStrideBytes),
    int("scale_row_stride", ScalarArg::ScaleRowStride),
    int("y_row_stride", ScalarArg::YRowStride),
];

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

// ---------------------------------------------------------------------------------------------
// The declarations.

/// The group sizes of the fast path (docs/contract.md §1).
pub const FAST_GROUPS: &[usize] = &[32, 64, 128];

/// Threads of a `skinny` block: 8 warps as `(32 * KS, RT)`.
pub const SKINNY_THREADS: u32 = 256;
/// Largest M `skinny` takes.
pub const SKINNY_M_MAX: usize = 5;
/// Elements of X that `skinny` stages in shared memory (`SK_XCAP`); the rest streams from
/// global memory, so this is a speed knob, not a limit.
pub const SKINNY_X_CAPACITY: usize = 16384;
/// Shared-memory stages of weights per `skinny` warp on NVIDIA (`SK_WST`): the MMA engine reads
/// its weights through a cp.async ring of 16 rows x `SKINNY_STAGE_ROW_BYTES` per stage (dynamic
/// shared memory; the AMD ALU engine loads weights directly and asks for none).
pub const SKINNY_WEIGHT_STAGES: usize = 2;
/// Bytes of one row in one weight stage (`SK_WROW`): whole 128-byte lines.
pub const SKINNY_STAGE_ROW_BYTES: usize = 128;

/// Dynamic shared memory of one `skinny` block on `target`.
pub fn skinny_dynamic_shared_bytes(target: Target) -> u32 {
    match target.vendor() {
        crate::target::Vendor::Nvidia => {
            (SKINNY_THREADS as usize / 32 * SKINNY_WEIGHT_STAGES * 16 * SKINNY_STAGE_ROW_BYTES)
                as u32
        }
        crate::target::Vendor::Amd => 0,
    }
}
/// Threads of a `dequant` block; one thread per packed word.
pub const DEQUANT_THREADS: u32 = 256;
/// Threads of a `fallback` block; one thread per output element.
pub const FALLBACK_THREADS: u32 = 128;
/// Threads of the one `moe_align` block (`MA_THREADS`); also the slots it ranks per step.
pub const MOE_ALIGN_THREADS: u32 = 256;
/// Experts `moe_align` counts per pass over the slots (`MA_WINDOW`): any number of experts is
/// taken, in ⌈E / window⌉ passes, so E = 257 already takes two.
pub const MOE_ALIGN_EXPERT_WINDOW: usize = 256;

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

/// Scale entries (and, over 8, packed zero-point words) of its rows that one `skinny` block can
/// stage in shared memory (`SK_SCAP`; `SK_ZCAP` = `SK_SCAP` / 8).
pub const SKINNY_SCALE_CAPACITY: usize = 4096;

/// A declared `skinny` capacity that edge shapes straddle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SkinnyCapacity {
    /// [`SKINNY_M_MAX`]: M above it is refused (another path takes the layer).
    Rows,
    /// [`SKINNY_X_CAPACITY`]: M·K elements of X staged in shared memory, the rest streamed.
    StagedX,
    /// [`SKINNY_SCALE_CAPACITY`]: `16·RT·K/G` scales staged, or every span reads them from
    /// global memory.
    StagedScales,
}

/// Where an edge shape sits against its capacity: one step (a row, a group) below the largest
/// size that fits, that size, or one step past it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EdgeSide {
    Below,
    At,
    Above,
}

/// One generated edge shape (M, K, N, G) of the `skinny` kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapacityEdge {
    pub capacity: SkinnyCapacity,
    pub side: EdgeSide,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub group: usize,
}

impl CapacityEdge {
    /// What the capacity counts for this shape (M; M·K; the scales of one row tile).
    pub fn load(&self) -> usize {
        match self.capacity {
            SkinnyCapacity::Rows => self.m,
            SkinnyCapacity::StagedX => self.m * self.k,
            SkinnyCapacity::StagedScales => 16 * (self.k / self.group),
        }
    }

    /// The declared capacity [`Self::load`] is held against.
    pub fn limit(&self) -> usize {
        match self.capacity {
            SkinnyCapacity::Rows => SKINNY_M_MAX,
            SkinnyCapacity::StagedX => SKINNY_X_CAPACITY,
            SkinnyCapacity::StagedScales => SKINNY_SCALE_CAPACITY,
        }
    }
}

/// The `skinny` edge shapes generated from the declared capacities (as CUTLASS derives its test
/// shapes from tile sizes), so that changing a constant moves its edge cases with it: M at
/// [`SKINNY_M_MAX`] − 1, = and + 1; for every M it takes, K a group below, at and a group past
/// the largest K whose M·K fits [`SKINNY_X_CAPACITY`]; K/G = 255, 256, 257 scales' worth of
/// [`SKINNY_SCALE_CAPACITY`] at one row tile. N = 256 gives one row tile (RT = 1) on every
/// target, so the scale edge is the kernel's own.
pub fn skinny_capacity_edges() -> Vec<CapacityEdge> {
    const N: usize = 256;
    let sides = [EdgeSide::Below, EdgeSide::At, EdgeSide::Above];
    let step = |side: EdgeSide, at: usize, by: usize| match side {
        EdgeSide::Below => at - by,
        EdgeSide::At => at,
        EdgeSide::Above => at + by,
    };
    let mut edges = Vec::new();
    for side in sides {
        edges.push(CapacityEdge {
            capacity: SkinnyCapacity::Rows,
            side,
            m: step(side, SKINNY_M_MAX, 1),
            k: 1024,
            n: N,
            group: 128,
        });
    }
    let group = 128;
    for m in 1..=SKINNY_M_MAX {
        let at = SKINNY_X_CAPACITY / m / group * group;
        for side in sides {
            edges.push(CapacityEdge {
                capacity: SkinnyCapacity::StagedX,
                side,
                m,
                k: step(side, at, group),
                n: N,
                group,
            });
        }
    }
    // The smallest group gives the most groups per K: the scale edge at the shortest K.
    let group = FAST_GROUPS[0];
    let groups_at = SKINNY_SCALE_CAPACITY / 16;
    for side in sides {
        edges.push(CapacityEdge {
            capacity: SkinnyCapacity::StagedScales,
            side,
            m: 1,
            k: step(side, groups_at, 1) * group,
            n: N,
            group,
        });
    }
    edges
}

/// Row tiles of 16 per `skinny` block (`RT`, the block's y size; `KS = 8 / RT` warps split K):
/// the largest of 8, 4, 2, 1 that still gives every compute unit a block (small N gets more
/// K-splits) and whose rows' scales fit the block's shared-memory stage (otherwise every span
/// waits for its scales from global memory); where none fits, the largest that fills the device.
pub fn skinny_row_tiles(n: usize, k: usize, group: usize, target: Target) -> u32 {
    let cus = tiles::compute_units(target) as usize;
    let groups = k / group.max(1);
    let fills = |rt: u32| n.div_ceil(16 * rt as usize) >= cus || rt == 1;
    let fits = |rt: u32| 16 * rt as usize * groups <= SKINNY_SCALE_CAPACITY;
    let ladder = [8u32, 4, 2, 1];
    ladder
        .into_iter()
        .find(|&rt| fills(rt) && fits(rt))
        .or_else(|| ladder.into_iter().find(|&rt| fills(rt)))
        .unwrap_or(1)
}

fn skinny_geometry(s: &LaunchShape, t: Target) -> LaunchGeometry {
    let rt = skinny_row_tiles(s.n, s.k, s.group, t);
    LaunchGeometry {
        grid: [s.n.div_ceil(16 * rt as usize) as u32, 1, 1],
        block: [SKINNY_THREADS / rt, rt, 1],
        shared_mem_bytes: skinny_dynamic_shared_bytes(t),
    }
}

fn fused_pick(s: &LaunchShape, t: Target) -> Tile {
    tiles::fused_tile(t, s.dtype, s.m, s.n, s.k, s.group)
}

fn fused_geometry(s: &LaunchShape, t: Target) -> LaunchGeometry {
    let tile = fused_pick(s, t);
    LaunchGeometry {
        grid: [
            s.n.div_ceil(tile.bn as usize) as u32,
            s.m.div_ceil(tile.bm as usize) as u32,
            1,
        ],
        block: [tiles::threads(tile), 1, 1],
        shared_mem_bytes: 0,
    }
}

fn moe_align_geometry(_s: &LaunchShape, _t: Target) -> LaunchGeometry {
    LaunchGeometry {
        grid: [1, 1, 1],
        block: [MOE_ALIGN_THREADS, 1, 1],
        shared_mem_bytes: 0,
    }
}

/// The routing of a MoE launch shape (one token on one expert for a shape without one, which
/// validation never lets through to a launch).
fn routing_of(s: &LaunchShape) -> RoutedDims {
    s.routing.unwrap_or(RoutedDims {
        top_k: 1,
        experts: 1,
    })
}

fn moe_pick(s: &LaunchShape, t: Target) -> Tile {
    let r = routing_of(s);
    tiles::moe_tile(t, s.dtype, s.m, r.top_k, r.experts, s.n, s.k, s.group)
}

/// The `moe` launch of `shape` with `tile` (the table's, or one a caller chose among
/// [`MOE`]'s variants): one block per BN columns and per block of sorted slots the align step
/// may write (`moe_align_capacity`); the blocks past `num_tokens_post_padded / BM` exit at once.
pub fn moe_geometry_for(s: &LaunchShape, tile: Tile) -> LaunchGeometry {
    let r = routing_of(s);
    let blocks = moe_align_capacity(s.m.saturating_mul(r.top_k), r.experts, tile.bm as usize)
        .map_or(u32::MAX, |c| u32::try_from(c.blocks).unwrap_or(u32::MAX));
    LaunchGeometry {
        grid: [s.n.div_ceil(tile.bn as usize) as u32, blocks, 1],
        block: [tiles::threads(tile), 1, 1],
        shared_mem_bytes: 0,
    }
}

fn moe_geometry(s: &LaunchShape, t: Target) -> LaunchGeometry {
    moe_geometry_for(s, moe_pick(s, t))
}

fn dequant_geometry(s: &LaunchShape, _t: Target) -> LaunchGeometry {
    LaunchGeometry {
        grid: [
            s.n as u32,
            (s.k / 8).div_ceil(DEQUANT_THREADS as usize) as u32,
            1,
        ],
        block: [DEQUANT_THREADS, 1, 1],
        shared_mem_bytes: 0,
    }
}

/// `dense` launches no kernel of ours: the vendor BLAS chooses its own grid.
fn dense_geometry(_s: &LaunchShape, _t: Target) -> LaunchGeometry {
    LaunchGeometry {
        grid: [0, 0, 0],
        block: [0, 0, 0],
        shared_mem_bytes: 0,
    }
}

fn fallback_geometry(s: &LaunchShape, _t: Target) -> LaunchGeometry {
    LaunchGeometry {
        grid: [(s.m * s.n.div_ceil(FALLBACK_THREADS as usize)) as u32, 1, 1],
        block: [FALLBACK_THREADS, 1, 1],
        shared_mem_bytes: 0,
    }
}

fn exact_weights_recipe(dtype: ActDtype) -> NumericRecipe {
    NumericRecipe::fp32_exact_weights(dtype)
}

/// Weights rounded to the activation dtype before the matrix multiply, fp32 accumulation, one
/// cast, then the bias added in the activation dtype (the field's Triton prefill path).
fn fused_recipe(dtype: ActDtype) -> NumericRecipe {
    NumericRecipe {
        rounds_dequantized_weight: true,
        offset_accumulation: None,
        bias: BiasStage::AfterCast,
        output: dtype,
        single_rounding: false,
        pre_rounded_bias: false,
    }
}

/// fused's recipe; on fp16 layers the weight is `q·s + bias_eff` with the bias pre-rounded in the
/// carrier (FMA or mul+add: the bound covers both). bf16 carriers hold the raw z, so bf16 is
/// fused's recipe exactly.
fn fused_carrier_recipe(dtype: ActDtype) -> NumericRecipe {
    NumericRecipe {
        pre_rounded_bias: dtype == ActDtype::F16,
        ..fused_recipe(dtype)
    }
}

/// The dense copy holds round((q - z) * s): one rounding of an exact product.
fn dequant_recipe(dtype: ActDtype) -> NumericRecipe {
    NumericRecipe {
        rounds_dequantized_weight: true,
        offset_accumulation: None,
        bias: BiasStage::BeforeCast,
        output: dtype,
        single_rounding: true,
        pre_rounded_bias: false,
    }
}

/// `moe_align` moves integers only: its outputs are exact and are checked entry by entry, never
/// against a bound (this recipe says so, for uniformity).
fn moe_align_recipe(dtype: ActDtype) -> NumericRecipe {
    NumericRecipe {
        rounds_dequantized_weight: false,
        offset_accumulation: None,
        bias: BiasStage::BeforeCast,
        output: dtype,
        single_rounding: true,
        pre_rounded_bias: false,
    }
}

/// The vendor GEMM on the rounded copy with fp32 compute; the bias enters as `beta = 1` on an
/// output pre-filled with it. The vendor does not say where its epilogue rounds, and on sm_90
/// cuBLAS does both: the first H200 run had 40 exact-class bias cases that round the product
/// before adding C, and the GPU shape fuzzer then shrank to one (K = 2688, N = 24, M = 3, fp16,
/// `cases/regressions.toml`) that rounds once. Both hold with reduced-precision reduction
/// disallowed (checked on the H200: declaring `BeforeCast` fails those 40, `AfterCast` fails the
/// regression), so the bias stage is declared `Either`.
fn dense_recipe(dtype: ActDtype) -> NumericRecipe {
    NumericRecipe {
        rounds_dequantized_weight: true,
        offset_accumulation: None,
        bias: BiasStage::Either,
        output: dtype,
        single_rounding: false,
        pre_rounded_bias: false,
    }
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
    // Fused's contract: the same tile main loop reads the same layouts (per expert).
    contract: ContractDecl {
        groups: GroupRule::OneOf(FAST_GROUPS),
        m_min: 1,
        m_max: None,
        k_multiple: 16,
        weight_row_align_bytes: 16,
        packed_zero_points: true,
        packed_zero_points_any_n: false,
        pointer_align_bytes: 16,
        // X: as fused (`x_vec` at run time, element loads otherwise). Y (C): 2-byte stores.
        x_rows: Some(RowLayoutRule::ELEMENT),
        y_rows: Some(RowLayoutRule::ELEMENT),
    },
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every declared `skinny` capacity has a generated shape one step below, at and one step
    /// past its edge, and each is a shape skinny's contract takes (apart from M past its cap).
    #[test]
    fn the_skinny_edge_shapes_straddle_every_declared_capacity() {
        let edges = skinny_capacity_edges();
        let caps = [
            SkinnyCapacity::Rows,
            SkinnyCapacity::StagedX,
            SkinnyCapacity::StagedScales,
        ];
        for cap in caps {
            for side in [EdgeSide::Below, EdgeSide::At, EdgeSide::Above] {
                assert!(
                    edges.iter().any(|e| (e.capacity, e.side) == (cap, side)),
                    "{cap:?}: no shape {side:?} the edge"
                );
            }
        }
        let ms: Vec<usize> = edges
            .iter()
            .filter(|e| e.capacity == SkinnyCapacity::StagedX)
            .map(|e| e.m)
            .collect();
        assert!((1..=SKINNY_M_MAX).all(|m| ms.contains(&m)), "{ms:?}");
        for e in &edges {
            // One step: a row of M, a group of K.
            let unit = match e.capacity {
                SkinnyCapacity::Rows => 1,
                SkinnyCapacity::StagedX => e.m * e.group,
                SkinnyCapacity::StagedScales => 16,
            };
            let (load, limit) = (e.load(), e.limit());
            match e.side {
                EdgeSide::Below => assert!(load + unit <= limit, "{e:?}"),
                EdgeSide::At => assert!(load <= limit && load + unit > limit, "{e:?}"),
                EdgeSide::Above => assert!(load > limit && load - unit <= limit, "{e:?}"),
            }
            assert!(FAST_GROUPS.contains(&e.group), "{e:?}");
            assert_eq!(e.k % SKINNY.contract.k_multiple, 0, "{e:?}");
            assert_eq!(e.k % e.group, 0, "{e:?}");
            assert_eq!(e.n % 8, 0, "{e:?}");
            if e.capacity == SkinnyCapacity::StagedScales {
                for t in Target::ALL {
                    assert_eq!(skinny_row_tiles(e.n, e.k, e.group, t), 1, "{e:?} on {t:?}");
                }
            }
        }
    }

    #[test]
    fn the_table_is_complete_and_named_by_entry_name() {
        for (id, d) in KernelId::ALL.into_iter().zip(all()) {
            assert_eq!(d.id, id);
            assert_eq!(decl(id).id, id);
            assert_eq!(d.source_file.is_some(), source::WITH_SOURCE.contains(&id));
            for dtype in ActDtype::ALL {
                assert_eq!((d.entry_point)(dtype), entry_name(id, dtype));
            }
        }
    }

    /// Every entry point names its kernel and dtype, the underscores of `moe_align` and
    /// `fused_carrier` included.
    #[test]
    fn entries_name_their_kernel() {
        for d in all() {
            for dtype in ActDtype::ALL {
                for e in d.entries(dtype) {
                    let (k, dt, _) = KernelId::split_entry(&e).unwrap();
                    assert_eq!((k, dt), (d.id, dtype), "{e}");
                }
            }
        }
        assert_eq!(
            KernelId::split_entry("w4a16_moe_align_f16"),
            Some((KernelId::MoeAlign, ActDtype::F16, None))
        );
        assert_eq!(
            KernelId::split_entry("w4a16_moe_bf16_16x64x32w4"),
            Some((KernelId::Moe, ActDtype::Bf16, Some("16x64x32w4")))
        );
        assert_eq!(KernelId::split_entry("w4a16_fused"), None);
        assert_eq!(KernelId::split_entry("w4a16_probe_f16"), None);
    }

    /// One parameter of a HIP entry point, as written in the source.
    #[derive(Debug)]
    struct HipParam {
        name: String,
        pointer: bool,
        constant: bool,
    }

    /// The parameter list of `W4_<KERNEL>_ENTRY`'s `void NAME(...)` and the entry names the
    /// source instantiates, read from the source text (no toolchain needed).
    fn hip_entries(src: &str, kernel: KernelId) -> (Vec<HipParam>, Vec<String>) {
        let mac = format!("W4_{}_ENTRY(", kernel.name().to_uppercase());
        let def_at = src
            .find(&format!("#define {mac}"))
            .unwrap_or_else(|| panic!("no #define {mac}"));
        let body: String = src[def_at..]
            .lines()
            .take_while(|l| l.trim_end().ends_with('\\'))
            .collect::<Vec<_>>()
            .join(" ");
        let body = body.replace('\\', " ");
        let open = body.find("void NAME(").expect("void NAME(") + "void NAME(".len();
        let close = open + body[open..].find(')').unwrap();
        let params = body[open..close]
            .split(',')
            .map(|p| {
                let p = p.trim();
                let name = p.rsplit([' ', '*']).next().unwrap().to_owned();
                HipParam {
                    name,
                    pointer: p.contains('*'),
                    constant: p.starts_with("const "),
                }
            })
            .collect();
        let names = src
            .lines()
            .filter(|l| l.starts_with(&mac))
            .map(|l| l[mac.len()..].split(',').next().unwrap().trim().to_owned())
            .collect();
        (params, names)
    }

    #[test]
    fn hip_parameter_lists_follow_the_declared_abi() {
        for d in all() {
            let Some(src) = source::source(d.id) else {
                continue;
            };
            let (params, names) = hip_entries(src, d.id);
            assert_eq!(params.len(), d.args.len(), "{}: {params:?}", d.id);
            for (p, a) in params.iter().zip(d.args) {
                assert_eq!(p.name, a.name, "{}", d.id);
                match a.kind {
                    ArgKind::Pointer { writes, .. } => {
                        assert!(p.pointer, "{}: {} must be a pointer", d.id, a.name);
                        assert_eq!(p.constant, !writes, "{}: {} constness", d.id, a.name);
                    }
                    ArgKind::I32(_) => assert!(!p.pointer, "{}: {} must be an int", d.id, a.name),
                }
            }
            let mut want: Vec<String> = ActDtype::ALL
                .into_iter()
                .flat_map(|t| d.entries(t))
                .collect();
            let mut got = names.clone();
            want.sort();
            got.sort();
            assert_eq!(got, want, "{}: entry points", d.id);
        }
    }

    fn shape(m: usize, n: usize, k: usize, group: usize) -> LaunchShape {
        LaunchShape {
            m,
            n,
            k,
            group,
            dtype: ActDtype::F16,
            asymmetric: true,
            routing: None,
        }
    }

    #[test]
    fn skinny_blocks_are_eight_warps_covering_n() {
        for target in Target::ALL {
            for n in [8usize, 16, 200, 2048, 14336, 151936] {
                let g = (SKINNY.geometry)(&shape(3, n, 4096, 128), target);
                assert_eq!(g.block[0] * g.block[1], SKINNY_THREADS);
                assert_eq!(g.block[0] % 32, 0);
                let rows = 16 * g.block[1] as usize;
                assert!(
                    g.grid[0] as usize * rows >= n && (g.grid[0] as usize - 1) * rows < n,
                    "{target} n={n}"
                );
            }
        }
        assert_eq!(skinny_row_tiles(14336, 4096, 128, Target::Sm90), 4);
        assert_eq!(skinny_row_tiles(14336, 4096, 32, Target::Sm90), 2);
        assert_eq!(skinny_row_tiles(2048, 4096, 128, Target::Sm90), 1);
        // K so long that even one row tile's scales overflow the stage: still fill the device.
        assert_eq!(skinny_row_tiles(14336, 131072, 32, Target::Sm90), 4);
    }

    #[test]
    fn fused_launches_the_variant_its_geometry_is_for() {
        for target in Target::ALL {
            for (m, n) in [(6usize, 256usize), (64, 4096), (2048, 14336), (257, 200)] {
                let s = shape(m, n, 4096, 64);
                let tile = tiles::fused_tile(target, s.dtype, m, n, 4096, 64);
                let g = (FUSED.geometry)(&s, target);
                assert_eq!(g.block, [tile.warps * 32, 1, 1]);
                assert_eq!(
                    g.grid,
                    [
                        n.div_ceil(tile.bn as usize) as u32,
                        m.div_ceil(tile.bm as usize) as u32,
                        1
                    ]
                );
                let entry = FUSED.launch_entry(&s, target);
                assert!(FUSED.entries(s.dtype).contains(&entry), "{entry}");
                assert!(
                    entry.ends_with(&format!(
                        "{}x{}x{}w{}",
                        tile.bm, tile.bn, tile.bk, tile.warps
                    )),
                    "{entry}"
                );
            }
        }
        assert_eq!(
            SKINNY.launch_entry(&shape(1, 64, 256, 32), Target::Sm90),
            "w4a16_skinny_f16"
        );
    }

    #[test]
    fn other_geometries_cover_their_outputs() {
        let s = shape(17, 1000, 4096, 128);
        let g = (DEQUANT.geometry)(&s, Target::Gfx1151);
        assert_eq!((g.grid[0], g.grid[1] * g.block[0]), (1000, 512));
        let g = (FALLBACK.geometry)(&s, Target::Sm90);
        assert_eq!(g.grid[0] * g.block[0], 17 * 1024);
    }

    /// The value of `#define NAME value` in a source.
    fn define(src: &str, name: &str) -> usize {
        let prefix = format!("#define {name} ");
        let line = src
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no {prefix}"));
        line[prefix.len()..].trim().parse().unwrap()
    }

    #[test]
    fn skinny_capacities_match_the_source() {
        let src = source::SKINNY_HIP;
        assert_eq!(define(src, "SK_XCAP"), SKINNY_X_CAPACITY);
        assert_eq!(define(src, "SK_SCAP"), SKINNY_SCALE_CAPACITY);
        assert_eq!(define(src, "SK_ZCAP") * 8, SKINNY_SCALE_CAPACITY);
        assert_eq!(define(src, "SK_THREADS"), SKINNY_THREADS as usize);
        assert_eq!(define(src, "SK_MMAX"), SKINNY_M_MAX);
        assert_eq!(define(src, "SK_WST"), SKINNY_WEIGHT_STAGES);
        assert_eq!(define(src, "SK_WROW"), SKINNY_STAGE_ROW_BYTES);
        assert_eq!(
            define(source::DEQUANT_HIP, "DQ_THREADS"),
            DEQUANT_THREADS as usize
        );
        assert_eq!(
            define(source::FALLBACK_HIP, "FB_THREADS"),
            FALLBACK_THREADS as usize
        );
        assert_eq!(
            define(source::MOE_ALIGN_HIP, "MA_THREADS"),
            MOE_ALIGN_THREADS as usize
        );
        assert_eq!(
            define(source::MOE_ALIGN_HIP, "MA_WINDOW"),
            MOE_ALIGN_EXPERT_WINDOW
        );
    }

    fn routed(m: usize, n: usize, top_k: usize, experts: usize) -> LaunchShape {
        LaunchShape {
            routing: Some(RoutedDims { top_k, experts }),
            ..shape(m, n, 2048, 128)
        }
    }

    #[test]
    fn moe_launches_the_variant_its_geometry_is_for() {
        for target in Target::ALL {
            for (m, n, top_k, experts) in [
                (1usize, 1024usize, 8usize, 256usize),
                (16, 2048, 8, 257),
                (2048, 1024, 8, 256),
                (8192, 4096, 2, 8),
                (3, 200, 1, 64),
            ] {
                let s = routed(m, n, top_k, experts);
                let tile = tiles::moe_tile(target, s.dtype, m, top_k, experts, n, s.k, s.group);
                let g = (MOE.geometry)(&s, target);
                assert_eq!(g, moe_geometry_for(&s, tile));
                assert_eq!(g.block, [tile.warps * 32, 1, 1]);
                let cap = moe_align_capacity(m * top_k, experts, tile.bm as usize).unwrap();
                assert_eq!(
                    g.grid,
                    [n.div_ceil(tile.bn as usize) as u32, cap.blocks as u32, 1]
                );
                let entry = MOE.launch_entry(&s, target);
                assert!(MOE.entries(s.dtype).contains(&entry), "{entry}");
                assert_eq!(entry, MOE.variant_entry(s.dtype, tile));
            }
        }
        let g = (MOE_ALIGN.geometry)(&routed(5, 64, 2, 8), Target::Gfx1100);
        assert_eq!((g.grid, g.block), ([1, 1, 1], [MOE_ALIGN_THREADS, 1, 1]));
        assert_eq!(
            MOE_ALIGN.launch_entry(&routed(5, 64, 2, 8), Target::Sm90),
            "w4a16_moe_align_f16"
        );
    }

    /// The capacity holds the worst case: every expert's run padded by block_m − 1.
    #[test]
    fn moe_align_capacity_holds_every_padded_run() {
        let c = moe_align_capacity(8, 257, 16).unwrap();
        assert_eq!(c.blocks, (8 + 257 * 15_usize).div_ceil(16));
        assert_eq!(c.sorted, c.blocks * 16);
        // One slot on each of E experts: E blocks, each one slot and block_m − 1 sentinels.
        for (experts, bm) in [(8usize, 16usize), (64, 32), (257, 64)] {
            let c = moe_align_capacity(experts, experts, bm).unwrap();
            assert_eq!(c.blocks, experts);
        }
        // 100 slots on one expert take 2 blocks; the bound (the plan's formula) allows 3.
        let c = moe_align_capacity(100, 1, 64).unwrap();
        assert_eq!((c.blocks, c.sorted), (3, 192));
        assert_eq!(moe_align_capacity(1, 1, 0), None);
        assert_eq!(moe_align_capacity(usize::MAX, 2, 16), None);
    }

    #[test]
    fn recipes_say_where_each_kernel_rounds() {
        for dtype in ActDtype::ALL {
            assert_eq!(
                (SKINNY.recipe)(dtype),
                NumericRecipe::fp32_exact_weights(dtype)
            );
            assert_eq!(
                (FALLBACK.recipe)(dtype),
                NumericRecipe::fp32_exact_weights(dtype)
            );
            let f = (FUSED.recipe)(dtype);
            assert!(
                f.rounds_dequantized_weight && f.bias == BiasStage::AfterCast && f.output == dtype
            );
            assert!((DEQUANT.recipe)(dtype).single_rounding);
            assert!((DENSE.recipe)(dtype).rounds_dequantized_weight);
            assert!(
                [&SKINNY, &FUSED, &DEQUANT, &DENSE, &FALLBACK]
                    .iter()
                    .all(|d| !(d.recipe)(dtype).pre_rounded_bias)
            );
            // The carrier: fused's recipe, plus the pre-rounded bias where the carrier holds one.
            let c = (FUSED_CARRIER.recipe)(dtype);
            assert_eq!(c.pre_rounded_bias, dtype == ActDtype::F16);
            assert_eq!(
                NumericRecipe {
                    pre_rounded_bias: false,
                    ..c
                },
                f
            );
        }
    }

    /// fused_carrier is fused with the carrier in place of scales and zero points: the same
    /// tiles, geometry and contract, and its argument list is GEMM_ARGS with `scales`, `zeros`
    /// and `scale_row_stride` replaced by `carrier` and `carrier_row_stride`.
    #[test]
    fn fused_carrier_is_fused_reading_the_carrier() {
        assert_eq!(FUSED_CARRIER.contract, FUSED.contract);
        assert_eq!(FUSED_CARRIER.variants, FUSED.variants);
        let s = shape(33, 200, 1024, 64);
        for target in Target::ALL {
            assert_eq!(
                (FUSED_CARRIER.geometry)(&s, target),
                (FUSED.geometry)(&s, target)
            );
            assert_eq!(
                FUSED_CARRIER.launch_entry(&s, target),
                FUSED
                    .launch_entry(&s, target)
                    .replace("w4a16_fused_", "w4a16_fused_carrier_")
            );
        }
        let expect: Vec<ArgDecl> = GEMM_ARGS
            .iter()
            .filter_map(|a| match a.name {
                "scales" => Some(ptr("carrier", TensorRole::Carrier)),
                "zeros" => None,
                "scale_row_stride" => Some(int("carrier_row_stride", ScalarArg::CarrierRowStride)),
                _ => Some(*a),
            })
            .collect();
        assert_eq!(FUSED_CARRIER.args, expect.as_slice());
        assert_eq!(
            KernelId::split_entry("w4a16_fused_carrier_bf16_64x64x32w4"),
            Some((KernelId::FusedCarrier, ActDtype::Bf16, Some("64x64x32w4")))
        );
        assert_eq!(
            KernelId::split_entry("w4a16_fused_f16"),
            Some((KernelId::Fused, ActDtype::F16, None))
        );
        assert_eq!(KernelId::split_entry("w4a16_fused_carrier"), None);
        assert_eq!(KernelId::split_entry("w4a16_nope_f16"), None);
    }

    #[test]
    fn row_layout_rules_exist_exactly_for_x_and_y_arguments() {
        for d in all() {
            let has = |role| {
                d.args
                    .iter()
                    .any(|a| matches!(a.kind, ArgKind::Pointer { role: r, .. } if r == role))
            };
            assert_eq!(d.contract.x_rows.is_some(), has(TensorRole::X), "{}", d.id);
            assert_eq!(d.contract.y_rows.is_some(), has(TensorRole::Y), "{}", d.id);
            for rule in [d.contract.x_rows, d.contract.y_rows].into_iter().flatten() {
                assert!(rule.row_stride_multiple >= 1 && rule.base_align_bytes >= 2);
                assert!(rule.base_align_bytes.is_power_of_two(), "{}", d.id);
            }
        }
    }

    /// The element-aligned X rules of skinny and fused hold because their vector paths are
    /// chosen at run time from the base address *and* the row stride; a source that drops
    /// either test must declare the alignment its vectors need instead.
    #[test]
    fn element_aligned_x_rules_rest_on_run_time_checks_in_the_sources() {
        let checks: [(&str, &[&str]); 3] = [
            (
                source::SKINNY_HIP,
                &[
                    "a.x_vec16 = (xaddr & 15u) == 0 && (x_row_stride & 7) == 0;",
                    "a.x_vec8 = (xaddr & 7u) == 0 && (x_row_stride & 3) == 0;",
                ],
            ),
            (
                source::FUSED_HIP,
                &["a.x_vec = (((u64)(const void*)x) & 15u) == 0 && (x_row_stride & 7) == 0;"],
            ),
            (
                source::MOE_HIP,
                &["a.x_vec = (((u64)(const void*)x) & 15u) == 0 && (x_row_stride & 7) == 0;"],
            ),
        ];
        assert_eq!(SKINNY.contract.x_rows, Some(RowLayoutRule::ELEMENT));
        assert_eq!(FUSED.contract.x_rows, Some(RowLayoutRule::ELEMENT));
        assert_eq!(MOE.contract.x_rows, Some(RowLayoutRule::ELEMENT));
        for (src, lines) in checks {
            for l in lines {
                assert!(src.contains(l), "source no longer checks: {l}");
            }
        }
    }

    #[test]
    fn contracts_match_the_kernels() {
        assert_eq!(SKINNY.contract.m_max, Some(5));
        assert_eq!(SKINNY.contract.groups, GroupRule::OneOf(&[32, 64, 128]));
        assert_eq!(FUSED.contract.groups, GroupRule::OneOf(&[32, 64, 128]));
        assert_eq!(FALLBACK.contract.groups, GroupRule::AnyDividingK);
        // Every fused tile's K step fits inside every group the contract admits.
        let GroupRule::OneOf(gs) = FUSED.contract.groups else {
            unreachable!()
        };
        for g in gs {
            assert!(
                tiles::FUSED_VARIANTS
                    .iter()
                    .all(|t| t.bk as usize <= *g && *g % t.bk as usize == 0)
            );
        }
        assert!(SKINNY.variants.is_empty() && SKINNY.tile.is_none());
        // moe reads what fused reads, per expert: the same contract, every tile within every G.
        assert_eq!(MOE.contract, FUSED.contract);
        for g in gs {
            assert!(
                tiles::MOE_VARIANTS
                    .iter()
                    .all(|t| t.bk as usize <= *g && *g % t.bk as usize == 0)
            );
        }
        assert!(MOE_ALIGN.contract.x_rows.is_none() && MOE_ALIGN.contract.y_rows.is_none());
        for dtype in ActDtype::ALL {
            assert_eq!((MOE.recipe)(dtype), (FUSED.recipe)(dtype));
        }
    }
}
