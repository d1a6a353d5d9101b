//! Tile tables of the `moe` kernel, per target: a decode table (BM = 16) for launches whose
//! experts get few slots each, and a prefill table (BM = 32 or 64) for the rest. The tile's BM is
//! also the `block_m` of the `moe_align` step that feeds it (each block of sorted slots is one
//! tile's rows), so the table decides the padding too.
//!
//! What the tables weigh: a block holds the slots of one expert only, so BM above an expert's
//! slot count is padding the MMA computes for nothing; the mean slots per expert,
//! `⌈T·top_k / E⌉`, picks the table and the BM. BN trades column blocks in flight (active experts
//! × N/BN) against the X tile each block re-reads: 64 up to N = 1024 (the qwen3.5-35b-a3b gate_up
//! projection, N = 1024, keeps 16 column blocks per expert), 128 above.
//!
//! Per target: the gfx11 parts keep BM = 32 for every prefill launch, the block size of the
//! field's gfx11 MoE WMMA kernel (docs/field.md §3.5, block_m = 32); gfx1201 and any other device go to
//! BM = 64 once the mean expert holds more than 64 slots. Every tile is one of [`MOE_VARIANTS`],
//! which `kernels/hip/moe.hip` instantiates, and keeps the fused kernel's invariants (BK = 32 ≤ G,
//! whole fragments, the dequant split) plus the row table moe adds to shared memory.

use super::{TileInvariantError, check_tile, shared_mem_bytes, static_shared_limit, tile};
use crate::decl::Tile;
use crate::target::Target;
use w4a16_reference::ActDtype;

pub const MOE_TILE_16X64W4: Tile = tile(16, 64, 4);
pub const MOE_TILE_16X128W4: Tile = tile(16, 128, 4);
pub const MOE_TILE_32X64W4: Tile = tile(32, 64, 4);
pub const MOE_TILE_32X128W4: Tile = tile(32, 128, 4);
pub const MOE_TILE_64X64W4: Tile = tile(64, 64, 4);
pub const MOE_TILE_64X128W8: Tile = tile(64, 128, 8);

/// The compiled `moe` variants, each an entry point `w4a16_moe_<dtype>_<BM>x<BN>x<BK>w<warps>`.
/// Every one is a rung of some table (tested), and every rung one of these.
pub static MOE_VARIANTS: [Tile; 6] = [
    MOE_TILE_16X64W4,
    MOE_TILE_16X128W4,
    MOE_TILE_32X64W4,
    MOE_TILE_32X128W4,
    MOE_TILE_64X64W4,
    MOE_TILE_64X128W8,
];

/// The tile behind the plain `w4a16_moe_<dtype>` entry point.
pub const MOE_DEFAULT: Tile = MOE_TILE_32X64W4;

/// The BM of every decode-table tile.
pub const DECODE_BM: u32 = 16;

/// Mean slots per expert up to which a launch takes the decode table (one BM = 16 block holds
/// them).
pub const DECODE_SLOTS_PER_EXPERT: usize = DECODE_BM as usize;

/// One rung: the first rung whose bounds hold for a launch gives its tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeRung {
    /// Largest mean slots per expert (`⌈T·top_k / E⌉`) of the rung; `None` = any.
    pub slots_per_expert_max: Option<usize>,
    /// Largest N of the rung; `None` = any.
    pub n_max: Option<usize>,
    pub tile: Tile,
}

/// An ordered list of rungs; the last takes every launch.
#[derive(Debug)]
pub struct MoeTable {
    pub name: &'static str,
    pub rungs: &'static [MoeRung],
}

impl MoeTable {
    /// The first rung that holds for (`slots_per_expert`, `n`), with its index.
    pub fn pick(&self, slots_per_expert: usize, n: usize) -> (usize, Tile) {
        let holds = |bound: Option<usize>, v: usize| bound.is_none_or(|b| v <= b);
        self.rungs
            .iter()
            .enumerate()
            .find(|(_, r)| holds(r.slots_per_expert_max, slots_per_expert) && holds(r.n_max, n))
            .map_or(
                (self.rungs.len() - 1, self.rungs[self.rungs.len() - 1].tile),
                |(i, r)| (i, r.tile),
            )
    }
}

/// A target's pair of tables.
#[derive(Debug)]
pub struct MoeTables {
    pub decode: &'static MoeTable,
    pub prefill: &'static MoeTable,
}

const fn rung(slots_per_expert_max: Option<usize>, n_max: Option<usize>, tile: Tile) -> MoeRung {
    MoeRung {
        slots_per_expert_max,
        n_max,
        tile,
    }
}

/// Decode on every target: one 16-row block per expert, BN by N.
pub static DECODE: MoeTable = MoeTable {
    name: "moe-decode",
    rungs: &[
        rung(None, Some(1024), MOE_TILE_16X64W4),
        rung(None, None, MOE_TILE_16X128W4),
    ],
};

/// Prefill on gfx1100 and gfx1151: BM = 32 throughout (the field's gfx11 MoE block size).
pub static PREFILL_GFX11: MoeTable = MoeTable {
    name: "moe-prefill-gfx11",
    rungs: &[
        rung(None, Some(1024), MOE_TILE_32X64W4),
        rung(None, None, MOE_TILE_32X128W4),
    ],
};

/// Prefill on gfx1201 and any other device: BM = 32 up to 64 slots per expert, 64 above.
pub static PREFILL_OTHER: MoeTable = MoeTable {
    name: "moe-prefill",
    rungs: &[
        rung(Some(64), Some(1024), MOE_TILE_32X64W4),
        rung(Some(64), None, MOE_TILE_32X128W4),
        rung(None, Some(1024), MOE_TILE_64X64W4),
        rung(None, None, MOE_TILE_64X128W8),
    ],
};

pub static GFX11_TABLES: MoeTables = MoeTables {
    decode: &DECODE,
    prefill: &PREFILL_GFX11,
};
pub static OTHER_TABLES: MoeTables = MoeTables {
    decode: &DECODE,
    prefill: &PREFILL_OTHER,
};

/// Every table, for reports and the reach test.
pub static ALL_MOE_TABLES: [&MoeTable; 3] = [&DECODE, &PREFILL_GFX11, &PREFILL_OTHER];

/// The tables `moe` reads on `target`.
pub fn moe_tables(target: Target) -> &'static MoeTables {
    match target {
        Target::Gfx1100 | Target::Gfx1151 => &GFX11_TABLES,
        Target::Gfx1201 | Target::Gfx942 | Target::Sm90 => &OTHER_TABLES,
    }
}

/// Mean slots per expert of a launch: `⌈T·top_k / E⌉` (0 experts count as one).
pub fn slots_per_expert(tokens: usize, top_k: usize, experts: usize) -> usize {
    tokens.saturating_mul(top_k).div_ceil(experts.max(1))
}

/// The `moe` tile (and `moe_align` block size) for a launch of `tokens` tokens routed to `top_k`
/// of `experts` experts, on an `n × k` layer with groups of `group`. The tables do not split by
/// dtype, K or G today (every variant takes every fast-path G); they are part of the signature so
/// that a tuned table can.
#[allow(clippy::too_many_arguments)] // the launch's sizes, as `fused_tile` takes them, plus routing
pub fn moe_tile(
    target: Target,
    _dtype: ActDtype,
    tokens: usize,
    top_k: usize,
    experts: usize,
    n: usize,
    _k: usize,
    _group: usize,
) -> Tile {
    let spe = slots_per_expert(tokens, top_k, experts);
    let tables = moe_tables(target);
    let table = if spe <= DECODE_SLOTS_PER_EXPERT {
        tables.decode
    } else {
        tables.prefill
    };
    table.pick(spe, n).1
}

/// Shared memory of one moe block: the fused tile's, plus the slot and the X row of each of its
/// BM rows (two i32 each).
pub fn moe_shared_mem_bytes(tile: Tile) -> usize {
    shared_mem_bytes(tile) + 8 * tile.bm as usize
}

/// [`check_tile`] with moe's shared memory.
pub fn check_moe_tile(tile: Tile, target: Target, group: usize) -> Result<(), TileInvariantError> {
    check_tile(tile, target, group)?;
    let bytes = moe_shared_mem_bytes(tile);
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
    use crate::tiles::{BK, FAST_GROUPS, STAGES, warp_grid};

    #[test]
    fn every_variant_keeps_the_invariants_on_every_target() {
        for target in Target::ALL {
            for t in MOE_VARIANTS {
                for &g in FAST_GROUPS {
                    check_moe_tile(t, target, g).unwrap();
                }
                assert_eq!(t.bk, BK);
            }
        }
        assert_eq!(
            moe_shared_mem_bytes(MOE_TILE_64X128W8),
            shared_mem_bytes(MOE_TILE_64X128W8) + 512
        );
        // The row table counts against the limit: a tile that fills fused's 48 KiB to the byte
        // would not fit moe.
        let big = tile(128, 128, 8);
        assert_eq!(moe_shared_mem_bytes(big), 47104 + 1024);
    }

    #[test]
    fn decode_tables_take_bm_16_and_prefill_tables_bm_32_or_64() {
        for target in Target::ALL {
            let t = moe_tables(target);
            assert!(t.decode.rungs.iter().all(|r| r.tile.bm == DECODE_BM));
            assert!(
                t.prefill
                    .rungs
                    .iter()
                    .all(|r| [32, 64].contains(&r.tile.bm))
            );
            for table in [t.decode, t.prefill] {
                let last = table.rungs.last().unwrap();
                assert_eq!((last.slots_per_expert_max, last.n_max), (None, None));
            }
        }
    }

    /// Every rung of every table is chosen by some launch, every rung is compiled, and every
    /// compiled variant is some rung.
    #[test]
    fn every_rung_is_reached_and_every_variant_used() {
        let mut used = std::collections::BTreeSet::new();
        let mut reached = std::collections::BTreeSet::new();
        for target in Target::ALL {
            for tokens in [1usize, 2, 16, 33, 256, 1024, 2048, 8192] {
                for (top_k, experts) in [(1usize, 8usize), (2, 64), (6, 128), (8, 257), (8, 8)] {
                    for n in [256usize, 1024, 1025, 4096] {
                        let tile =
                            moe_tile(target, ActDtype::Bf16, tokens, top_k, experts, n, 2048, 128);
                        assert!(MOE_VARIANTS.contains(&tile), "{target}: {tile:?}");
                        used.insert(MOE_VARIANTS.iter().position(|v| *v == tile).unwrap());
                        let spe = slots_per_expert(tokens, top_k, experts);
                        let t = moe_tables(target);
                        let table = if spe <= DECODE_SLOTS_PER_EXPERT {
                            t.decode
                        } else {
                            t.prefill
                        };
                        reached.insert((table.name, table.pick(spe, n).0));
                    }
                }
            }
        }
        for table in ALL_MOE_TABLES {
            for (i, r) in table.rungs.iter().enumerate() {
                assert!(MOE_VARIANTS.contains(&r.tile), "{} #{i}", table.name);
                assert!(
                    reached.contains(&(table.name, i)),
                    "{} #{i} is never chosen",
                    table.name
                );
            }
        }
        assert_eq!(used.len(), MOE_VARIANTS.len(), "a variant no table uses");
    }

    #[test]
    fn the_tables_follow_slots_per_expert_and_n() {
        use Target::{Gfx1151, Gfx1201, Sm90};
        let pick = |t, tokens, top_k, experts, n| {
            moe_tile(t, ActDtype::F16, tokens, top_k, experts, n, 2048, 128)
        };
        // qwen3.5-35b-a3b (E = 256, top_k = 8) decode at T = 1 and T = 16: ≤ 1 slot per expert.
        assert_eq!(pick(Sm90, 1, 8, 256, 1024), MOE_TILE_16X64W4);
        assert_eq!(pick(Gfx1151, 16, 8, 256, 2048), MOE_TILE_16X128W4);
        // 2048 tokens: 64 slots per expert; 8192: 256.
        assert_eq!(pick(Sm90, 2048, 8, 256, 1024), MOE_TILE_32X64W4);
        assert_eq!(pick(Sm90, 8192, 8, 256, 1024), MOE_TILE_64X64W4);
        assert_eq!(pick(Gfx1201, 8192, 8, 256, 2048), MOE_TILE_64X128W8);
        assert_eq!(pick(Gfx1151, 8192, 8, 256, 2048), MOE_TILE_32X128W4);
        // The boundary: 16 slots per expert is decode, 17 prefill.
        assert_eq!(slots_per_expert(2, 8, 1), 16);
        assert_eq!(pick(Sm90, 2, 8, 1, 256).bm, 16);
        assert_eq!(pick(Sm90, 17, 1, 1, 256).bm, 32);
    }

    /// The variants listed here are the ones `moe.hip` instantiates, with fused's warp grids and
    /// ring depth, and the plain entry is the default tile.
    #[test]
    fn variants_match_the_hip_instantiations() {
        let src = crate::source::MOE_HIP;
        let mut found = Vec::new();
        for line in src.lines().filter(|l| l.starts_with("W4_MOE_ENTRY(")) {
            let inner = line
                .trim_start_matches("W4_MOE_ENTRY(")
                .trim_end_matches(')');
            let f: Vec<&str> = inner.split(',').map(str::trim).collect();
            assert_eq!(f.len(), 7, "{line}");
            let num = |i: usize| f[i].parse::<u32>().unwrap();
            let t = Tile {
                bm: num(2),
                bn: num(3),
                bk: BK,
                warps: num(4) * num(5),
            };
            assert_eq!(num(6), STAGES, "{line}");
            assert_eq!(Some((num(4), num(5))), warp_grid(t), "{line}");
            found.push((f[0].to_owned(), t));
        }
        for dtype in ActDtype::ALL {
            for t in MOE_VARIANTS {
                let name = format!(
                    "w4a16_moe_{}_{}x{}x{}w{}",
                    dtype.name(),
                    t.bm,
                    t.bn,
                    t.bk,
                    t.warps
                );
                assert!(
                    found.contains(&(name.clone(), t)),
                    "{name} is not instantiated as {t:?}"
                );
            }
            let plain = format!("w4a16_moe_{}", dtype.name());
            assert!(
                found.contains(&(plain.clone(), MOE_DEFAULT)),
                "{plain} must be the default tile"
            );
        }
        assert_eq!(found.len(), 2 * (MOE_VARIANTS.len() + 1), "{found:?}");
    }
}
