//! Launch geometry of each kernel (grid, block, dynamic shared memory) and the tile pickers
//! the tiled kernels launch with.

use super::moe_align_capacity;
use super::skinny::{SKINNY_THREADS, skinny_dynamic_shared_bytes, skinny_row_tiles};
use crate::decl::{LaunchGeometry, LaunchShape, RoutedDims, Tile};
use crate::target::Target;
use crate::tiles;

/// Threads of a `dequant` block; one thread per packed word.
pub const DEQUANT_THREADS: u32 = 256;
/// Threads of a `fallback` block; one thread per output column.
pub const FALLBACK_THREADS: u32 = 128;
/// Rows of X each `fallback` thread sums (`FB_ROWS`): a decoded weight feeds that many outputs.
pub const FALLBACK_ROWS: u32 = 8;
/// Threads of the one `moe_align` block (`MA_THREADS`); also the slots it ranks per step.
pub const MOE_ALIGN_THREADS: u32 = 256;
/// Experts `moe_align` counts per pass over the slots (`MA_WINDOW`): any number of experts is
/// taken, in ⌈E / window⌉ passes, so E = 257 already takes two.
pub const MOE_ALIGN_EXPERT_WINDOW: usize = 256;

pub(super) fn skinny_geometry(s: &LaunchShape, t: Target) -> LaunchGeometry {
    let rt = skinny_row_tiles(s.n, s.k, s.group, t);
    LaunchGeometry {
        grid: [s.n.div_ceil(16 * rt as usize) as u32, 1, 1],
        block: [SKINNY_THREADS / rt, rt, 1],
        shared_mem_bytes: skinny_dynamic_shared_bytes(t),
    }
}

pub(super) fn fused_pick(s: &LaunchShape, t: Target) -> Tile {
    tiles::fused_tile(t, s.dtype, s.m, s.n, s.k, s.group)
}

pub(super) fn fused_geometry(s: &LaunchShape, t: Target) -> LaunchGeometry {
    fused_geometry_for(s, fused_pick(s, t))
}

/// The geometry of the fused variant `tile` on `s`, whichever rung picked it: perf's regret mode
/// launches every rung of a table on one case, not only the one the table picks for it.
pub fn fused_geometry_for(s: &LaunchShape, tile: Tile) -> LaunchGeometry {
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

pub(super) fn moe_align_geometry(_s: &LaunchShape, _t: Target) -> LaunchGeometry {
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

pub(super) fn moe_pick(s: &LaunchShape, t: Target) -> Tile {
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

pub(super) fn moe_geometry(s: &LaunchShape, t: Target) -> LaunchGeometry {
    moe_geometry_for(s, moe_pick(s, t))
}

pub(super) fn dequant_geometry(s: &LaunchShape, _t: Target) -> LaunchGeometry {
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
pub(super) fn dense_geometry(_s: &LaunchShape, _t: Target) -> LaunchGeometry {
    LaunchGeometry {
        grid: [0, 0, 0],
        block: [0, 0, 0],
        shared_mem_bytes: 0,
    }
}

pub(super) fn fallback_geometry(s: &LaunchShape, _t: Target) -> LaunchGeometry {
    LaunchGeometry {
        grid: [
            (s.m.div_ceil(FALLBACK_ROWS as usize) * s.n.div_ceil(FALLBACK_THREADS as usize)) as u32,
            1,
            1,
        ],
        block: [FALLBACK_THREADS, 1, 1],
        shared_mem_bytes: 0,
    }
}
