//! Tile tables of the `fused` kernel, per target and activation dtype, restricted to the variants
//! that `kernels/hip/fused.hip` compiles. Every tile keeps the invariants of docs/contract.md §5: BK ≤ G for
//! every fast-path group size, BK % 8 == 0, positive sizes, and a shared-memory footprint the
//! target can give one block.

mod ladder;
mod moe;
mod tables;

pub use ladder::{
    BOUNDARY_BASE, BOUNDARY_GROUP, BOUNDARY_STEP, BoundaryLayer, DeadRung, FieldTile, Pick, Rung,
    RungId, Segment, ShapeRule, TileTable, field, unreached,
};
pub use moe::{
    ALL_MOE_TABLES, DECODE_BM, DECODE_SLOTS_PER_EXPERT, MOE_DEFAULT, MOE_TILE_16X64W4,
    MOE_TILE_16X128W4, MOE_TILE_32X64W4, MOE_TILE_32X128W4, MOE_TILE_64X64W4, MOE_TILE_64X128W8,
    MOE_VARIANTS, MoeRung, MoeTable, MoeTables, check_moe_tile, moe_shared_mem_bytes, moe_tables,
    moe_tile, slots_per_expert,
};
pub use tables::{ALL_TABLES, table, table_named};

use crate::decl::Tile;
use crate::target::Target;
use w4a16_reference::ActDtype;

/// K step of every variant: one scale and zero point per step needs BK ≤ G, and 32 is the
/// smallest fast-path G.
pub const BK: u32 = 32;

/// Depth of the shared-memory ring of every variant (`STAGES` in `fused.hip`).
pub const STAGES: u32 = 3;

const fn tile(bm: u32, bn: u32, warps: u32) -> Tile {
    Tile {
        bm,
        bn,
        bk: BK,
        warps,
    }
}

// The compiled variants (`fused.hip` instantiates each for both dtypes; the tables in
// `tiles/tables.rs` say which field rung each stands for).
pub const TILE_16X64W4: Tile = tile(16, 64, 4);
pub const TILE_32X32W4: Tile = tile(32, 32, 4);
pub const TILE_32X64W4: Tile = tile(32, 64, 4);
pub const TILE_32X128W4: Tile = tile(32, 128, 4);
pub const TILE_64X16W1: Tile = tile(64, 16, 1);
pub const TILE_64X32W4: Tile = tile(64, 32, 4);
pub const TILE_64X64W4: Tile = tile(64, 64, 4);
pub const TILE_64X128W8: Tile = tile(64, 128, 8);
pub const TILE_128X32W4: Tile = tile(128, 32, 4);
pub const TILE_128X64W8: Tile = tile(128, 64, 8);
pub const TILE_128X128W8: Tile = tile(128, 128, 8);

/// The compiled variants, each an entry point `w4a16_fused_<dtype>_<BM>x<BN>x<BK>w<warps>`.
/// Every one is a rung of some table (tested), and every rung one of these.
pub static FUSED_VARIANTS: [Tile; 11] = [
    TILE_16X64W4,
    TILE_32X32W4,
    TILE_32X64W4,
    TILE_32X128W4,
    TILE_64X16W1,
    TILE_64X32W4,
    TILE_64X64W4,
    TILE_64X128W8,
    TILE_128X32W4,
    TILE_128X64W8,
    TILE_128X128W8,
];

/// The tile behind the plain `w4a16_fused_<dtype>` entry point.
pub const FUSED_DEFAULT: Tile = TILE_64X64W4;

/// The group sizes the fused kernel accepts (its contract, declared in `set`); the invariants
/// are checked for each.
pub use crate::set::FAST_GROUPS;

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

/// NVIDIA caps statically allocated `__shared__` arrays at 48 KiB per block (more needs dynamic
/// shared memory and an opt-in attribute, which the set avoids).
pub const NVIDIA_STATIC_SHARED_LIMIT: usize = 48 * 1024;

/// Statically allocated shared memory one block may use on `target`: 48 KiB on every target,
/// the AMD ones included, because the AMD targets' kernels also run emulated on an NVIDIA GPU
/// (`--target gfxNNNN-emu`), where the NVIDIA cap holds; the real AMD parts have 64 KiB of LDS.
pub fn static_shared_limit(target: Target) -> usize {
    NVIDIA_STATIC_SHARED_LIMIT.min(target.shared_mem_bytes())
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

/// The rung of `table(target, dtype)` that (M, N, K, G) lands on, with its tile.
pub fn fused_pick(
    target: Target,
    dtype: ActDtype,
    m: usize,
    n: usize,
    k: usize,
    group: usize,
) -> Pick {
    table(target, dtype).pick(m, n, k, group)
}

/// The tile for one problem on one target: the target's table for the activation dtype.
pub fn fused_tile(
    target: Target,
    dtype: ActDtype,
    m: usize,
    n: usize,
    k: usize,
    group: usize,
) -> Tile {
    fused_pick(target, dtype, m, n, k, group).tile
}

/// The warp grid (WM, WN) `fused.hip` instantiates `tile` with: warp tiles of whole 16x16
/// fragments, as square as the warps allow (the fewest warp rows on a tie); `None` when no grid
/// divides the tile.
pub fn warp_grid(tile: Tile) -> Option<(u32, u32)> {
    (1..=tile.warps)
        .filter(|wm| tile.warps.is_multiple_of(*wm))
        .map(|wm| (wm, tile.warps / wm))
        .filter(|&(wm, wn)| tile.bm.is_multiple_of(16 * wm) && tile.bn.is_multiple_of(16 * wn))
        .min_by_key(|&(wm, wn)| (tile.bm / wm).abs_diff(tile.bn / wn))
}

/// Packed weight words of one K step each thread dequantizes (`WPT` in `fused.hip`): BN rows of
/// BK / 8 words over 32·warps threads, which must come out as 1, 2 or 4.
pub fn dequant_words_per_thread(tile: Tile) -> Option<u32> {
    let words = tile.bn * (tile.bk / 8);
    let threads = threads(tile);
    (threads > 0 && words.is_multiple_of(threads))
        .then(|| words / threads)
        .filter(|w| [1, 2, 4].contains(w))
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
    #[error(
        "tile {tile:?}: BN x BK / 8 packed words per step must split 1, 2 or 4 per thread over {} threads",
        tile.warps * 32
    )]
    DequantSplit { tile: Tile },
}

/// Checks the docs/contract.md §5 invariants of `tile` for `group` on `target`, and that `fused.hip` can
/// instantiate it (a warp grid of whole fragments, the dequant split).
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
    if warp_grid(tile).is_none() {
        return Err(TileInvariantError::Fragments { tile });
    }
    if dequant_words_per_thread(tile).is_none() {
        return Err(TileInvariantError::DequantSplit { tile });
    }
    let bytes = shared_mem_bytes(tile);
    let limit = static_shared_limit(target);
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
    /// (K, N) pairs from docs/contract.md §7 plus small and ragged ones.
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
                        for &group in FAST_GROUPS {
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
                for &group in FAST_GROUPS {
                    check_tile(tile, target, group).unwrap();
                }
                assert!(shared_mem_bytes(tile) <= NVIDIA_STATIC_SHARED_LIMIT);
            }
        }
    }

    #[test]
    fn every_table_ends_in_a_rung_that_takes_every_layer() {
        for t in ALL_TABLES {
            let (_, last) = t.rung(t.len() - 1).unwrap();
            assert_eq!(
                (last.m_max, last.when),
                (None, ShapeRule::Any),
                "{}",
                t.name
            );
        }
    }

    #[test]
    fn every_rung_is_a_compiled_variant_and_every_variant_a_rung() {
        let mut used = std::collections::BTreeSet::new();
        for t in ALL_TABLES {
            for (i, (_, r)) in t.rungs().enumerate() {
                assert!(
                    FUSED_VARIANTS.contains(&r.tile),
                    "{} is not compiled",
                    t.describe(i)
                );
                assert_eq!(r.tile.bk, BK, "{}", t.describe(i));
                used.insert(FUSED_VARIANTS.iter().position(|v| *v == r.tile).unwrap());
            }
        }
        let unused: Vec<_> = (0..FUSED_VARIANTS.len())
            .filter(|i| !used.contains(i))
            .map(|i| FUSED_VARIANTS[i])
            .collect();
        assert!(unused.is_empty(), "variants no table uses: {unused:?}");
    }

    #[test]
    fn every_target_and_dtype_has_a_listed_table() {
        for target in Target::ALL {
            for dtype in ActDtype::ALL {
                let t = table(target, dtype);
                assert!(std::ptr::eq(table_named(t.name).unwrap(), t));
            }
        }
        let mut names: Vec<_> = ALL_TABLES.iter().map(|t| t.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ALL_TABLES.len(), "table names must be unique");
    }

    #[test]
    fn footprints_match_what_ptxas_reports() {
        // Static shared memory of the sm_90 builds, as `--ptxas-options=-v` printed it.
        assert_eq!(shared_mem_bytes(TILE_16X64W4), 14336);
        assert_eq!(shared_mem_bytes(TILE_64X64W4), 23552);
        assert_eq!(shared_mem_bytes(TILE_128X128W8), 47104);
    }

    #[test]
    fn warp_grids_are_the_squarest_whole_fragment_split() {
        assert_eq!(warp_grid(TILE_16X64W4), Some((1, 4)));
        assert_eq!(warp_grid(TILE_64X64W4), Some((2, 2)));
        assert_eq!(warp_grid(TILE_128X128W8), Some((2, 4)));
        assert_eq!(warp_grid(TILE_128X64W8), Some((4, 2)));
        assert_eq!(warp_grid(TILE_128X32W4), Some((4, 1)));
        assert_eq!(warp_grid(TILE_64X16W1), Some((1, 1)));
        assert_eq!(warp_grid(tile(16, 16, 4)), None);
        assert_eq!(dequant_words_per_thread(TILE_64X16W1), Some(2));
        assert_eq!(dequant_words_per_thread(TILE_32X128W4), Some(4));
        assert_eq!(dequant_words_per_thread(tile(64, 32, 8)), None);
    }

    #[test]
    fn the_checks_reject_broken_tiles() {
        let t = Target::Sm90;
        let wide_k = Tile {
            bk: 64,
            ..TILE_64X64W4
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
            ..TILE_64X64W4
        };
        assert_eq!(
            check_tile(odd_k, t, 32),
            Err(TileInvariantError::BkNotMultipleOf8 { tile: odd_k })
        );
        let zero = Tile {
            bm: 0,
            ..TILE_64X64W4
        };
        assert_eq!(
            check_tile(zero, t, 32),
            Err(TileInvariantError::NonPositive { tile: zero })
        );
        let huge = tile(256, 256, 8);
        assert!(matches!(
            check_tile(huge, t, 32),
            Err(TileInvariantError::SharedMemory { .. })
        ));
        // 48 KiB on the AMD targets too (they run emulated on NVIDIA): the field's 64x256 is
        // 57344 bytes, within the 64 KiB of LDS but not within the NVIDIA cap.
        let wide = tile(64, 256, 8);
        for amd in [Target::Gfx1100, Target::Gfx1151, Target::Gfx1201] {
            assert_eq!(
                check_tile(wide, amd, 32),
                Err(TileInvariantError::SharedMemory {
                    tile: wide,
                    target: amd,
                    bytes: 57344,
                    limit: 49152
                })
            );
        }
        let ragged = Tile {
            bm: 24,
            ..TILE_64X64W4
        };
        assert_eq!(
            check_tile(ragged, t, 32),
            Err(TileInvariantError::Fragments { tile: ragged })
        );
        let starved = tile(64, 32, 8);
        assert_eq!(
            check_tile(starved, t, 32),
            Err(TileInvariantError::DequantSplit { tile: starved })
        );
    }

    #[test]
    fn each_target_and_dtype_reads_its_own_table() {
        use ActDtype::{Bf16, F16};
        let pick = |t, d, m, n, k, g| fused_tile(t, d, m, n, k, g);
        // gfx1151: an override for Qwen3-8B's gate_up in fp16 and bf16 alike, below M = 129.
        for d in [F16, Bf16] {
            assert_eq!(pick(Target::Gfx1151, d, 64, 24576, 4096, 128), TILE_64X32W4);
        }
        assert_eq!(
            pick(Target::Gfx1151, F16, 64, 24576, 4096, 64),
            TILE_64X64W4
        );
        // gfx1151 above M = 128: fp16 has its own ladder (BN capped for N ≤ 1024), bf16 not.
        assert_eq!(
            pick(Target::Gfx1151, F16, 300, 1024, 4096, 128),
            TILE_128X32W4
        );
        assert_eq!(
            pick(Target::Gfx1151, Bf16, 300, 1024, 4096, 128),
            TILE_64X64W4
        );
        // gfx1100 fp16: the fork's small-M tiers; bf16: the scalar ladder.
        assert_eq!(pick(Target::Gfx1100, F16, 8, 4096, 4096, 128), TILE_16X64W4);
        assert_eq!(
            pick(Target::Gfx1100, Bf16, 8, 4096, 4096, 128),
            TILE_32X32W4
        );
        // gfx1201: tall layers at M ≤ 128 take one warp of 64x16.
        assert_eq!(
            pick(Target::Gfx1201, Bf16, 100, 1024, 4096, 32),
            TILE_64X16W1
        );
        // sm_90: 32x64 while M·N ≤ 2^20 (in N bands), then 64x64 up to M = 64, 128x128 above.
        assert_eq!(pick(Target::Sm90, F16, 128, 4096, 12288, 128), TILE_32X64W4);
        assert_eq!(pick(Target::Sm90, F16, 64, 24576, 4096, 128), TILE_64X64W4);
        assert_eq!(
            pick(Target::Sm90, F16, 65, 24576, 4096, 128),
            TILE_128X128W8
        );
        assert_eq!(
            pick(Target::Sm90, Bf16, 257, 4096, 4096, 128),
            TILE_128X128W8
        );
        assert_eq!(pick(Target::Sm90, F16, 4096, 256, 8192, 128), TILE_32X64W4);
        assert_eq!(
            pick(Target::Sm90, F16, 1024, 2048, 8192, 128),
            TILE_128X128W8
        );
        // gfx942 (wave64; the table exists for reports): 128x128 above M = 64.
        assert_eq!(
            pick(Target::Gfx942, F16, 65, 512, 4096, 128),
            TILE_128X128W8
        );
        assert_eq!(pick(Target::Gfx942, Bf16, 33, 512, 4096, 128), TILE_64X64W4);
        assert_eq!(pick(Target::Sm90, Bf16, 33, 512, 4096, 128), TILE_32X64W4);
    }

    /// Every rung is reached by some layer of its table's own boundary derivation (the
    /// selection sweeps check the same through selection, per target and dtype).
    #[test]
    fn boundary_layers_reach_every_rung_of_every_table() {
        for t in ALL_TABLES {
            let layers = t.boundary_layers(1);
            let chosen = layers
                .iter()
                .map(|l| t.pick(l.m, l.n, l.k, l.group).rung.index)
                .collect();
            let dead = unreached(t, t.name, &chosen);
            assert!(dead.is_empty(), "{dead:#?}");
            assert!(layers.iter().all(|l| l.k % 128 == 0 && l.n % 8 == 0));
        }
    }

    #[test]
    fn a_shadowed_rung_is_named() {
        static SHADOWED: Segment = Segment {
            name: "shadowed",
            rungs: &[
                Rung {
                    m_max: Some(64),
                    when: ShapeRule::Any,
                    tile: TILE_64X64W4,
                    field: field(64, 64, 32, 4),
                },
                Rung {
                    m_max: Some(64),
                    when: ShapeRule::TALL,
                    tile: TILE_64X16W1,
                    field: field(64, 16, 64, 1),
                },
                Rung {
                    m_max: None,
                    when: ShapeRule::Any,
                    tile: TILE_128X128W8,
                    field: field(128, 128, 32, 8),
                },
            ],
        };
        static TABLE: TileTable = TileTable {
            name: "test-shadowed",
            segments: &[&SHADOWED],
        };
        let chosen = TABLE
            .boundary_layers(1)
            .iter()
            .map(|l| TABLE.pick(l.m, l.n, l.k, l.group).rung.index)
            .collect();
        let dead = unreached(&TABLE, "test", &chosen);
        assert_eq!(dead.len(), 1);
        assert_eq!(
            dead[0].to_string(),
            "test: dead rung test-shadowed #1 (shadowed): M ≤ 64, K ≥ 2N → 64x16x32w1 \
             (field 64,16,64,1), chosen by no case of the selection sweeps"
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
            assert_eq!(
                Some((num(4), num(5))),
                warp_grid(tile),
                "{line}: the warp grid must be warp_grid's"
            );
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
