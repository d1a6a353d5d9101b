//! `skinny`'s declared capacities (rows, staged X, staged scales), its row tiles, and the edge
//! shapes generated from those capacities, so that changing a constant moves its edge cases.

use super::FAST_GROUPS;
use crate::target::Target;
use crate::tiles;

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
/// size that fits, that size, or one step past it; for staged X also far past it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EdgeSide {
    Below,
    At,
    Above,
    /// K past the staged X by [`SKINNY_STREAMED_SPANS`] spans: every K-split warp streams X
    /// from global memory, and one of them in both slots of its two-slot weight ring (one span
    /// past, as `Above`, reaches only the slot that span happens to land in).
    FarAbove,
}

/// Columns of K one `skinny` warp takes per step (the kernel's `SK_SPAN`).
pub const SKINNY_SPAN: usize = 128;

/// Spans past the staged X of the [`EdgeSide::FarAbove`] edges: one per K-split warp of a row
/// tile of [`SKINNY_EDGE_N`] (`KS = 8 / RT`, RT = 1) and one more.
pub const SKINNY_STREAMED_SPANS: usize = (SKINNY_THREADS as usize / 32) + 1;

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
/// target, so the scale edge is the kernel's own. The scale edges come twice more with
/// [`RAGGED_ROW_TILE_N`]: a row tile whose second half lies past N, so the masks of rows past N
/// are exercised both while the tile's metadata sits in shared memory and, past the edge, while
/// every span reads it from global memory (where a row let through reads past the tensor).
pub fn skinny_capacity_edges() -> Vec<CapacityEdge> {
    const N: usize = SKINNY_EDGE_N;
    let sides = [EdgeSide::Below, EdgeSide::At, EdgeSide::Above];
    let mut edges = Vec::new();
    for side in sides {
        edges.push(CapacityEdge {
            capacity: SkinnyCapacity::Rows,
            side,
            m: edge_size(side, SKINNY_M_MAX, 1),
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
                k: edge_size(side, at, group),
                n: N,
                group,
            });
        }
    }
    // The smallest group gives the most groups per K: the scale edge at the shortest K.
    let group = FAST_GROUPS[0];
    let groups_at = SKINNY_SCALE_CAPACITY / 16;
    for n in [N, RAGGED_ROW_TILE_N] {
        for side in sides {
            edges.push(CapacityEdge {
                capacity: SkinnyCapacity::StagedScales,
                side,
                m: 1,
                k: edge_size(side, groups_at, 1) * group,
                n,
                group,
            });
        }
    }
    edges
}

/// The size on `side` of a capacity edge at `at`, one step being `by` (far past staged X: a
/// span per K-split warp and one more, whatever the step).
fn edge_size(side: EdgeSide, at: usize, by: usize) -> usize {
    match side {
        EdgeSide::Below => at - by,
        EdgeSide::At => at,
        EdgeSide::Above => at + by,
        EdgeSide::FarAbove => at + SKINNY_STREAMED_SPANS * SKINNY_SPAN,
    }
}

/// For every M skinny takes, K far past the largest K whose M·K fits [`SKINNY_X_CAPACITY`]
/// ([`EdgeSide::FarAbove`]: every K-split warp streams X from global memory, one of them in both
/// slots of its weight ring), N = [`SKINNY_EDGE_N`]. Apart from [`skinny_capacity_edges`] (which
/// every differential suite takes whole): these reach machine code, not a capacity, and run where
/// the machine code is measured (the edges suite, docs/block-coverage.md).
pub fn skinny_streamed_x_edges() -> Vec<CapacityEdge> {
    let group = 128;
    (1..=SKINNY_M_MAX)
        .map(|m| CapacityEdge {
            capacity: SkinnyCapacity::StagedX,
            side: EdgeSide::FarAbove,
            m,
            k: edge_size(
                EdgeSide::FarAbove,
                SKINNY_X_CAPACITY / m / group * group,
                group,
            ),
            n: SKINNY_EDGE_N,
            group,
        })
        .collect()
}

/// N of the ragged scale edges: 8 rows short of a multiple of the 16-row tile, so each warp's
/// second group of eight rows (the lanes' `h` rows) lies wholly past N in the last tile.
pub const RAGGED_ROW_TILE_N: usize = SKINNY_EDGE_N - 8;

/// N of the edge shapes: one row tile (RT = 1) on every target.
pub const SKINNY_EDGE_N: usize = 256;

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
