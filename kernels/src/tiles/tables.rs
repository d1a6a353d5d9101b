//! The fused kernel's tile tables, per target and activation dtype: data, shaped after the
//! field's Triton tables (docs/field.md §3.3), each field rung mapped to the nearest tile our kernel
//! compiles.
//!
//! The field's tiles are (BM, BN, BK, warps[, stages]); ours are narrower in four ways, and each
//! rung keeps the field's tile beside ours (`field(...)`) so that the mapping can be read here:
//! - **BK is 32 everywhere** (`tiles::BK`): the kernel takes one scale and zero point per K step
//!   (BK ≤ G for G = 32) and its loads are written for 32. The field's BK = 64/128 rungs keep
//!   their (BM, BN) and run BK = 32.
//! - **Warps must divide the tile into 16x16 fragments and the dequant split**: BN·4 packed
//!   words per step shared by 32·warps threads, 1, 2 or 4 words each, so BN ∈ {8, 16, 32}·warps;
//!   `BN = 32` takes at most 4 warps, `BN = 16` at most 2. A field tile whose warps do not fit
//!   keeps (BM, BN) and takes the nearest warp count that does.
//! - **48 KiB of static shared memory on every target** (the AMD targets also run emulated on
//!   NVIDIA, where that is the cap): BN = 256/512 and BM = 256 rungs are halved to 128 (BM
//!   ≤ 128 with BN ≤ 128; 128x128 is 47104 bytes).
//! - **A modest variant list** (each variant is compiled per dtype per target): 64x64 with 8 warps
//!   runs as 64x64w4, 64x128 with 4 warps as 64x128w8, 128x128 with 4 warps as 128x128w8 (4 warps
//!   on 128x128 hold 128 fp32 accumulators each: spills on gfx11).
//!
//! Stages: our ring is 3 deep on every tile; the field's per-rung stages (1, 2, 4) are not
//! expressible. The gfx1150 and gfx1103 specials of the fork's gfx11 table are for parts we do
//! not target and are left out. Tall = `K ≥ 2N` throughout, as in the field.
//!
//! Every rung is reached: the selection sweeps derive boundary layers from these thresholds and
//! fail naming any rung no case lands on (`select/src/reach.rs`).

use super::ladder::{FieldTile, Rung, Segment, ShapeRule, TileTable, field};
use super::{
    TILE_16X64W4, TILE_32X32W4, TILE_32X64W4, TILE_32X128W4, TILE_64X16W1, TILE_64X32W4,
    TILE_64X64W4, TILE_64X128W8, TILE_128X32W4, TILE_128X64W8, TILE_128X128W8,
};
use crate::decl::Tile;
use crate::target::Target;
use w4a16_reference::ActDtype;

use ShapeRule::{
    All, Any, Either, Exact, KAtLeast, KAtMost, NAboveK, NAtLeast, NAtLeastKTimes, NAtMost,
};

const TALL: ShapeRule = ShapeRule::TALL;

/// A rung for `M ≤ m_max`.
const fn upto(m_max: usize, when: ShapeRule, tile: Tile, field: FieldTile) -> Rung {
    Rung {
        m_max: Some(m_max),
        when,
        tile,
        field,
    }
}

/// A rung for any M (above the bounds of the rungs before it).
const fn above(when: ShapeRule, tile: Tile, field: FieldTile) -> Rung {
    Rung {
        m_max: None,
        when,
        tile,
        field,
    }
}

/// Very wide (the fork's gfx11 fp16 tiers): `N ≥ 8192 and K ≤ 2048`.
const VERY_WIDE: ShapeRule = All(&[NAtLeast(8192), KAtMost(2048)]);

/// gfx12 (tuned on gfx1201, both dtypes).
#[rustfmt::skip]
pub static GFX12_LADDER: Segment = Segment {
    name: "gfx12",
    rungs: &[
        // 16x16 cannot feed 4 warps one fragment each: BN 16 → 64.
        upto(32, Any, TILE_16X64W4, field(16, 16, 128, 4)),
        // BN = 32 feeds at most 4 warps.
        upto(64, TALL, TILE_64X32W4, field(64, 32, 128, 8)),
        upto(64, NAboveK, TILE_64X32W4, field(64, 32, 64, 8)),
        upto(64, Any, TILE_32X64W4, field(32, 64, 128, 4)),
        upto(128, TALL, TILE_64X16W1, field(64, 16, 64, 1)),
        upto(128, NAtLeastKTimes(2), TILE_64X128W8, field(64, 128, 64, 8)),
        upto(128, Any, TILE_64X64W4, field(64, 64, 64, 8)),
        upto(512, TALL, TILE_128X64W8, field(128, 64, 64, 8)),
        upto(512, NAtLeastKTimes(4), TILE_128X128W8, field(128, 128, 64, 8)),
        upto(512, Any, TILE_64X128W8, field(64, 128, 64, 8)),
        above(TALL, TILE_128X64W8, field(128, 64, 64, 8)),
        // BM 256 does not fit 48 KiB: halved.
        above(NAtLeastKTimes(4), TILE_128X64W8, field(256, 64, 64, 8)),
        above(Any, TILE_128X128W8, field(128, 128, 32, 8)),
    ],
};

/// gfx1151's per-model overrides (upstream's later table, docs/field.md §3.3), (G, K, N) exact,
/// below M = 129; the field's stages (4, 2, 1) become our 3.
#[rustfmt::skip]
pub static GFX1151_OVERRIDES: Segment = Segment {
    name: "gfx1151-overrides",
    rungs: &[
        // SmolLM2-1.7B-AWQ
        upto(128, Exact { group: 32, k: 2048, n: 6144 }, TILE_128X32W4, field(128, 32, 32, 4)),
        upto(128, Exact { group: 32, k: 2048, n: 2048 }, TILE_128X32W4, field(128, 32, 32, 4)),
        upto(128, Exact { group: 32, k: 2048, n: 16384 }, TILE_128X32W4, field(128, 32, 32, 4)),
        upto(128, Exact { group: 32, k: 8192, n: 2048 }, TILE_128X64W8, field(128, 64, 32, 8)),
        // Qwen3-8B w4a16
        upto(128, Exact { group: 128, k: 4096, n: 6144 }, TILE_128X64W8, field(128, 64, 128, 8)),
        upto(128, Exact { group: 128, k: 4096, n: 4096 }, TILE_128X32W4, field(128, 32, 128, 4)),
        // 2 warps → 4 (64x32 takes up to 4).
        upto(128, Exact { group: 128, k: 4096, n: 24576 }, TILE_64X32W4, field(64, 32, 128, 2)),
        upto(128, Exact { group: 128, k: 12288, n: 4096 }, TILE_128X64W8, field(128, 64, 128, 8)),
    ],
};

/// gfx1151's scalar ladder up to M = 128 (bf16, fp16 below M = 129 after the overrides, and
/// the fork's gfx11 bf16).
#[rustfmt::skip]
pub static GFX1151_SCALAR_SMALL: Segment = Segment {
    name: "gfx1151-scalar",
    rungs: &[
        upto(32, Any, TILE_32X32W4, field(32, 32, 128, 4)),
        upto(64, Any, TILE_64X64W4, field(64, 64, 32, 4)),
        upto(128, TALL, TILE_64X16W1, field(64, 16, 64, 1)),
        upto(128, NAboveK, TILE_64X64W4, field(64, 64, 64, 4)),
        upto(128, Any, TILE_64X32W4, field(64, 32, 64, 4)),
    ],
};

/// gfx1151's scalar ladder above M = 128.
#[rustfmt::skip]
pub static GFX1151_SCALAR_LARGE: Segment = Segment {
    name: "gfx1151-scalar-large",
    rungs: &[
        upto(1024, TALL, TILE_64X64W4, field(64, 64, 64, 4)),
        upto(1024, NAtLeastKTimes(4), TILE_128X64W8, field(128, 64, 64, 8)),
        upto(1024, Any, TILE_64X128W8, field(64, 128, 32, 4)),
        // BN 512 / 16 warps: far beyond 48 KiB; the nearest that fits.
        above(TALL, TILE_128X128W8, field(128, 512, 32, 16)),
        above(Any, TILE_128X64W8, field(128, 64, 64, 8)),
    ],
};

/// gfx1151 fp16 above M = 128 (upstream's later table, docs/field.md §3.3; also the fork's gfx11
/// fp16 above 128).
/// The field caps BN at 32 when N ≤ 1024 and M ≤ 512 (its 128x128 and 128x256 rungs); with
/// BN = 256 halved to 128 the M ≤ 256 and M < 2048 rungs give the same tile and are one rung.
#[rustfmt::skip]
pub static GFX11_F16_LARGE: Segment = Segment {
    name: "gfx11-f16-large",
    rungs: &[
        upto(512, NAtMost(1024), TILE_128X32W4, field(128, 32, 32, 8)),
        upto(2047, Any, TILE_128X128W8, field(128, 256, 32, 8)),
        above(All(&[NAtMost(2048), KAtLeast(4096)]), TILE_64X128W8, field(64, 256, 32, 8)),
        above(Any, TILE_128X128W8, field(128, 256, 32, 8)),
    ],
};

/// The fork's gfx11 fp16 small-M tiers (all gfx11 parts), up to M = 128.
#[rustfmt::skip]
pub static GFX11_F16_SMALL: Segment = Segment {
    name: "gfx11-f16",
    rungs: &[
        upto(16, Either(&[NAtMost(1024), VERY_WIDE]), TILE_32X32W4, field(32, 32, 128, 4)),
        upto(16, Any, TILE_16X64W4, field(16, 64, 128, 4)),
        upto(32, VERY_WIDE, TILE_32X32W4, field(32, 32, 128, 4)),
        upto(32, Any, TILE_32X64W4, field(32, 64, 128, 4)),
        upto(64, Either(&[TALL, NAtLeastKTimes(4)]), TILE_32X64W4, field(32, 64, 128, 4)),
        upto(64, Any, TILE_32X128W4, field(32, 128, 64, 4)),
        upto(128, TALL, TILE_32X128W4, field(32, 128, 64, 4)),
        upto(128, All(&[NAtLeast(32768), KAtMost(2048)]), TILE_128X64W8, field(128, 64, 64, 8)),
        upto(128, NAtLeast(16384), TILE_128X128W8, field(128, 128, 32, 8)),
        upto(128, KAtMost(2048), TILE_32X64W4, field(32, 64, 128, 4)),
        upto(128, Any, TILE_64X128W8, field(64, 128, 32, 4)),
    ],
};

/// sm_90 (H200), from `w4a16 perf --regret` over the field (bench/regret-sm_90-h200-f16-sym.md): the grid
/// decides. 32x64 wins while the output has at most 2^20 elements (M·N ≤ 2^20: 512 of its
/// tiles, about 4 per SM of the 132); above that the larger tiles' better reuse wins, 64x64 up
/// to M = 64 and 128x128 beyond. The M·N bound is written as N bands at each power-of-two M
/// bound (a rung's rule sees N, K and G). Measured on the field's fp16 symmetric cases, this
/// table's worst regret among the fused tiles was 1.05× (the previous M-only ladder: 1.62×).
/// The field has no sm_90 table: each rung's `field` repeats its own tile.
#[rustfmt::skip]
pub static SM90_LADDER: Segment = Segment {
    name: "sm_90",
    rungs: &[
        upto(32, Any, TILE_32X64W4, field(32, 64, 32, 4)),
        upto(64, NAtMost(16384), TILE_32X64W4, field(32, 64, 32, 4)),
        upto(64, Any, TILE_64X64W4, field(64, 64, 32, 4)),
        upto(128, NAtMost(8192), TILE_32X64W4, field(32, 64, 32, 4)),
        upto(256, NAtMost(4096), TILE_32X64W4, field(32, 64, 32, 4)),
        upto(512, NAtMost(2048), TILE_32X64W4, field(32, 64, 32, 4)),
        upto(1024, NAtMost(1024), TILE_32X64W4, field(32, 64, 32, 4)),
        upto(2048, NAtMost(512), TILE_32X64W4, field(32, 64, 32, 4)),
        upto(4096, NAtMost(256), TILE_32X64W4, field(32, 64, 32, 4)),
        above(NAtMost(128), TILE_32X64W4, field(32, 64, 32, 4)),
        above(Any, TILE_128X128W8, field(128, 128, 32, 4)),
    ],
};

/// Any other device (gfx942 would, but the hybrid never runs on wave64): 4 warps.
#[rustfmt::skip]
pub static OTHER_LADDER: Segment = Segment {
    name: "other",
    rungs: &[
        upto(32, Any, TILE_32X64W4, field(32, 64, 32, 4)),
        upto(64, Any, TILE_64X64W4, field(64, 64, 32, 4)),
        above(Any, TILE_128X128W8, field(128, 128, 32, 4)),
    ],
};

pub static GFX1201: TileTable = TileTable {
    name: "gfx1201",
    segments: &[&GFX12_LADDER],
};
pub static GFX1151_F16: TileTable = TileTable {
    name: "gfx1151-f16",
    segments: &[&GFX1151_OVERRIDES, &GFX1151_SCALAR_SMALL, &GFX11_F16_LARGE],
};
pub static GFX1151_BF16: TileTable = TileTable {
    name: "gfx1151-bf16",
    segments: &[
        &GFX1151_OVERRIDES,
        &GFX1151_SCALAR_SMALL,
        &GFX1151_SCALAR_LARGE,
    ],
};
pub static GFX1100_F16: TileTable = TileTable {
    name: "gfx1100-f16",
    segments: &[&GFX11_F16_SMALL, &GFX11_F16_LARGE],
};
pub static GFX1100_BF16: TileTable = TileTable {
    name: "gfx1100-bf16",
    segments: &[&GFX1151_SCALAR_SMALL, &GFX1151_SCALAR_LARGE],
};
pub static SM90: TileTable = TileTable {
    name: "sm_90",
    segments: &[&SM90_LADDER],
};
pub static OTHER: TileTable = TileTable {
    name: "other",
    segments: &[&OTHER_LADDER],
};

/// Every table, for reports and lookups by name.
pub static ALL_TABLES: [&TileTable; 7] = [
    &GFX1100_F16,
    &GFX1100_BF16,
    &GFX1151_F16,
    &GFX1151_BF16,
    &GFX1201,
    &SM90,
    &OTHER,
];

/// The table the fused kernel's tile comes from on `target` for `dtype`.
pub fn table(target: Target, dtype: ActDtype) -> &'static TileTable {
    match (target, dtype) {
        (Target::Gfx1100, ActDtype::F16) => &GFX1100_F16,
        (Target::Gfx1100, ActDtype::Bf16) => &GFX1100_BF16,
        (Target::Gfx1151, ActDtype::F16) => &GFX1151_F16,
        (Target::Gfx1151, ActDtype::Bf16) => &GFX1151_BF16,
        (Target::Gfx1201, _) => &GFX1201,
        (Target::Sm90, _) => &SM90,
        (Target::Gfx942, _) => &OTHER,
    }
}

/// The table named `name`.
pub fn table_named(name: &str) -> Option<&'static TileTable> {
    ALL_TABLES.iter().copied().find(|t| t.name == name)
}
