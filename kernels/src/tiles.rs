//! Tile tables of the `fused` kernel, per target and activation dtype, restricted to the variants
//! that `kernels/hip/fused.hip` compiles. Every tile keeps the invariants of SPEC §5: BK ≤ G for
//! every fast-path group size, BK % 8 == 0, positive sizes, and a shared-memory footprint the
//! target can give one block.

use crate::decl::Tile;
use crate::target::{Target, Vendor};
use w4a16_reference::ActDtype;

/// K step of every variant: one scale and zero point per step needs BK ≤ G, and 32 is the
/// smallest fast-path G.
pub const BK: u32 = 32;

/// Depth of the shared-memory ring of every variant (`STAGES` in `fused.hip`).
pub const STAGES: u32 = 3;

/// Small M (decode-like batches that missed `skinny`).
pub const TILE_16X64: Tile = Tile {
    bm: 16,
    bn: 64,
    bk: BK,
    warps: 4,
};
/// Medium M, or too few 128x128 tiles to fill the device.
pub const TILE_64X64: Tile = Tile {
    bm: 64,
    bn: 64,
    bk: BK,
    warps: 4,
};
/// Large M and N.
pub const TILE_128X128: Tile = Tile {
    bm: 128,
    bn: 128,
    bk: BK,
    warps: 8,
};

/// The compiled variants, each an entry point `w4a16_fused_<dtype>_<BM>x<BN>x<BK>w<warps>`.
pub static FUSED_VARIANTS: [Tile; 3] = [TILE_16X64, TILE_64X64, TILE_128X128];

/// The tile behind the plain `w4a16_fused_<dtype>` entry point.
pub const FUSED_DEFAULT: Tile = TILE_64X64;

/// The group sizes the fused kernel accepts (its contract); the invariants are checked for each.
pub const FAST_GROUPS: [usize; 3] = [32, 64, 128];

/// Compute units (CUs / SMs) of the part each target names, used to size grids: RX 7900 XTX
/// (gfx1100), Radeon 8060S (gfx1151), RX 9070 XT / R9700 (gfx1201), MI300X (gfx942), H100/H200
/// SXM (sm_90). Only a tuning input: every kernel is correct for any grid.
pub fn compute_units(target: Target) -> u32 {
    match target {
        Target::Gfx1100 => 96,
        Target::Gfx1151 => 40,
        Target::Gfx1201 => 64,
        Target::Gfx942 => 304,
        Target::Sm90 => 132,
    }
}

/// Statically allocated shared memory one block may use: NVIDIA caps `__shared__` arrays at
/// 48 KiB (more needs dynamic shared memory and an opt-in attribute, which the set avoids).
pub fn static_shared_limit(target: Target) -> usize {
    match target.vendor() {
        Vendor::Nvidia => 48 * 1024,
        Vendor::Amd => target.shared_mem_bytes(),
    }
}

/// Shared memory of one fused block: a `STAGES`-deep ring of X (BM x BK, 2 bytes) and packed
/// weights (BN x BK / 2 bytes), plus two dequantized weight tiles (BN x BK, 2 bytes).
pub fn shared_mem_bytes(tile: Tile) -> usize {
    let (bm, bn, bk) = (tile.bm as usize, tile.bn as usize, tile.bk as usize);
    STAGES as usize * (bm * bk * 2 + bn * bk / 2) + 2 * bn * bk * 2
}

/// Threads of one fused block.
pub fn threads(tile: Tile) -> u32 {
    tile.warps * 32
}

/// The tile for one problem on one target. The same ladder serves both dtypes (the variants
/// dequantize and multiply in either). Above M = 64 the 128x128 tile is used only when it still
/// gives every compute unit two blocks.
pub fn fused_tile(
    target: Target,
    dtype: ActDtype,
    m: usize,
    n: usize,
    k: usize,
    group: usize,
) -> Tile {
    let _ = (dtype, k, group);
    if m <= 16 {
        return TILE_16X64;
    }
    if m <= 64 {
        return TILE_64X64;
    }
    let big_tiles = m.div_ceil(128) * n.div_ceil(128);
    if big_tiles >= 2 * compute_units(target) as usize {
        TILE_128X128
    } else {
        TILE_64X64
    }
}

/// A tile that breaks an invariant, with the rule it breaks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TileInvariantError {
    #[error("tile {tile:?}: sizes must be positive")]
    NonPositive { tile: Tile },
    #[error("tile {tile:?}: BK = {} must be a multiple of 8", tile.bk)]
    BkNotMultipleOf8 { tile: Tile },
    #[error("tile {tile:?}: BK = {} exceeds the group size {group} (one scale per K step)", tile.bk)]
    BkAboveGroup { tile: Tile, group: usize },
    #[error(
        "tile {tile:?}: {bytes} bytes of shared memory exceed the {limit} bytes {target} gives one block"
    )]
    SharedMemory {
        tile: Tile,
        target: Target,
        bytes: usize,
        limit: usize,
    },
    #[error(
        "tile {tile:?}: BM and BN must be multiples of 16 split over the warps (16x16 MMA fragments)"
    )]
    Fragments { tile: Tile },
}

/// Checks the SPEC §5 invariants of `tile` for `group` on `target`.
pub fn check_tile(tile: Tile, target: Target, group: usize) -> Result<(), TileInvariantError> {
    if tile.bm == 0 || tile.bn == 0 || tile.bk == 0 || tile.warps == 0 {
        return Err(TileInvariantError::NonPositive { tile });
    }
    if !tile.bk.is_multiple_of(8) {
        return Err(TileInvariantError::BkNotMultipleOf8 { tile });
    }
    if tile.bk as usize > group {
        return Err(TileInvariantError::BkAboveGroup { tile, group });
    }
    if !tile.bm.is_multiple_of(16)
        || !tile.bn.is_multiple_of(16)
        || (tile.bm / 16) * (tile.bn / 16) < tile.warps
    {
        return Err(TileInvariantError::Fragments { tile });
    }
    let bytes = shared_mem_bytes(tile);
    let limit = static_shared_limit(target).min(target.shared_mem_bytes());
    if bytes > limit {
        return Err(TileInvariantError::SharedMemory {
            tile,
            target,
            bytes,
            limit,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BATCHES: [usize; 18] = [
        1, 2, 3, 4, 5, 6, 8, 16, 17, 32, 64, 65, 128, 256, 512, 1024, 2048, 4096,
    ];
    /// (K, N) pairs from SPEC §7 plus small and ragged ones.
    const SHAPES: [(usize, usize); 10] = [
        (2048, 32768),
        (16384, 2048),
        (4096, 14336),
        (4096, 2560),
        (8192, 512),
        (5376, 43008),
        (256, 512),
        (512, 8),
        (1024, 200),
        (96, 24),
    ];

    #[test]
    fn every_chosen_tile_is_a_compiled_variant_and_keeps_the_invariants() {
        for target in Target::ALL {
            for dtype in ActDtype::ALL {
                for m in BATCHES {
                    for (k, n) in SHAPES {
                        for group in FAST_GROUPS {
                            let tile = fused_tile(target, dtype, m, n, k, group);
                            assert!(
                                FUSED_VARIANTS.contains(&tile),
                                "{target} {dtype} m={m} n={n} k={k}: {tile:?}"
                            );
                            check_tile(tile, target, group).unwrap();
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_variant_fits_every_target_for_every_fast_group() {
        for target in Target::ALL {
            for tile in FUSED_VARIANTS {
                for group in FAST_GROUPS {
                    check_tile(tile, target, group).unwrap();
                }
            }
        }
    }

    #[test]
    fn footprints_match_what_ptxas_reports() {
        // Static shared memory of the sm_90 builds, as `--ptxas-options=-v` printed it.
        assert_eq!(shared_mem_bytes(TILE_16X64), 14336);
        assert_eq!(shared_mem_bytes(TILE_64X64), 23552);
        assert_eq!(shared_mem_bytes(TILE_128X128), 47104);
    }

    #[test]
    fn the_checks_reject_broken_tiles() {
        let t = Target::Sm90;
        let wide_k = Tile {
            bk: 64,
            ..TILE_64X64
        };
        assert_eq!(
            check_tile(wide_k, t, 32),
            Err(TileInvariantError::BkAboveGroup {
                tile: wide_k,
                group: 32
            })
        );
        let odd_k = Tile {
            bk: 12,
            ..TILE_64X64
        };
        assert_eq!(
            check_tile(odd_k, t, 32),
            Err(TileInvariantError::BkNotMultipleOf8 { tile: odd_k })
        );
        let zero = Tile {
            bm: 0,
            ..TILE_64X64
        };
        assert_eq!(
            check_tile(zero, t, 32),
            Err(TileInvariantError::NonPositive { tile: zero })
        );
        let huge = Tile {
            bm: 256,
            bn: 256,
            bk: 32,
            warps: 8,
        };
        assert!(matches!(
            check_tile(huge, t, 32),
            Err(TileInvariantError::SharedMemory { .. })
        ));
        let ragged = Tile {
            bm: 24,
            ..TILE_64X64
        };
        assert_eq!(
            check_tile(ragged, t, 32),
            Err(TileInvariantError::Fragments { tile: ragged })
        );
    }

    #[test]
    fn large_problems_take_the_large_tile_and_small_grids_do_not() {
        assert_eq!(
            fused_tile(Target::Sm90, ActDtype::F16, 2048, 14336, 4096, 128),
            TILE_128X128
        );
        assert_eq!(
            fused_tile(Target::Sm90, ActDtype::F16, 256, 512, 4096, 128),
            TILE_64X64
        );
        assert_eq!(
            fused_tile(Target::Gfx1151, ActDtype::Bf16, 8, 4096, 4096, 32),
            TILE_16X64
        );
    }

    /// The variants listed here are the ones `fused.hip` instantiates, with the same warps and
    /// ring depth.
    #[test]
    fn variants_match_the_hip_instantiations() {
        let src = crate::source::FUSED_HIP;
        let mut found = Vec::new();
        for line in src.lines().filter(|l| l.starts_with("W4_FUSED_ENTRY(")) {
            let inner = line
                .trim_start_matches("W4_FUSED_ENTRY(")
                .trim_end_matches(')');
            let f: Vec<&str> = inner.split(',').map(str::trim).collect();
            assert_eq!(f.len(), 7, "{line}");
            let num = |i: usize| f[i].parse::<u32>().unwrap();
            let tile = Tile {
                bm: num(2),
                bn: num(3),
                bk: BK,
                warps: num(4) * num(5),
            };
            assert_eq!(num(6), STAGES, "{line}");
            found.push((f[0].to_owned(), tile));
        }
        for dtype in ActDtype::ALL {
            for tile in FUSED_VARIANTS {
                let name = format!(
                    "w4a16_fused_{}_{}x{}x{}w{}",
                    dtype.name(),
                    tile.bm,
                    tile.bn,
                    tile.bk,
                    tile.warps
                );
                assert!(
                    found.contains(&(name.clone(), tile)),
                    "{name} is not instantiated as {tile:?}"
                );
            }
            let plain = format!("w4a16_fused_{}", dtype.name());
            assert!(
                found.contains(&(plain.clone(), FUSED_DEFAULT)),
                "{plain} must be the default tile"
            );
        }
        assert_eq!(
            found.len(),
            2 * (FUSED_VARIANTS.len() + 1),
            "unexpected extra instantiations: {found:?}"
        );
    }
}
