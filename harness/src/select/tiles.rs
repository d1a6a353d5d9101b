//! The fused kernel's tile choice, as selection sees it.
//!
//! PLACEHOLDER: the per-target tables belong to the kernel crate (`w4a16_kernels::tiles`,
//! written on branch kernels-hip). Until it lands, this is FIELD §3.3's "any other device" row
//! with BK clamped to the group size, so that selection tables and the invariant tests have a
//! tile to show. Replace the body of [`fused_tile`] with a call into the kernel crate.

use w4a16_kernels::Target;
use w4a16_kernels::decl::Tile;
use w4a16_reference::ActDtype;

/// The fused kernel's tile for one problem.
pub fn fused_tile(
    target: Target,
    dtype: ActDtype,
    m: usize,
    n: usize,
    k: usize,
    group: usize,
) -> Tile {
    let _ = (target, dtype, n, k);
    let (bm, bn) = match m {
        0..=32 => (32, 64),
        33..=64 => (64, 64),
        _ => (128, 128),
    };
    // One scale and zero point per BK step: BK ≤ G and a multiple of 8 (SPEC §4).
    let bk = 32.min(group as u32 / 8 * 8).max(8);
    Tile {
        bm,
        bn,
        bk,
        warps: 4,
    }
}

/// Shared memory one tile stages: the X tile and the dequantized W tile, in the activation dtype.
pub fn tile_shared_bytes(tile: &Tile, dtype: ActDtype) -> usize {
    (tile.bm as usize + tile.bn as usize) * tile.bk as usize * dtype.size_bytes()
}
