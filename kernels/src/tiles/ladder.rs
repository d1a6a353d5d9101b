//! What a tile table is: an ordered list of rungs (an M bound, a rule on the layer's N, K and G,
//! and the tile), the first rung that matches wins. The tables themselves are data in
//! `tables.rs`; this module picks from them and derives, from a table's own thresholds, the
//! boundary layers that reach each of its rungs (the selection sweeps check that every rung is
//! chosen by some case).

use std::collections::BTreeSet;
use std::fmt;

use crate::decl::Tile;

/// A rule on the layer (N output features, K input features, G group size) that a rung needs
/// after its M bound. Closed, so that the boundary derivation knows every threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeRule {
    /// Every layer.
    Any,
    /// `K ≥ f·N` (the field's "tall" is f = 2).
    KAtLeastNTimes(usize),
    /// `N ≥ f·K`.
    NAtLeastKTimes(usize),
    /// `N > K`.
    NAboveK,
    NAtMost(usize),
    NAtLeast(usize),
    KAtMost(usize),
    KAtLeast(usize),
    /// Every rule holds.
    All(&'static [ShapeRule]),
    /// Some rule holds.
    Either(&'static [ShapeRule]),
    /// Exactly this layer (the field's per-model overrides).
    Exact {
        group: usize,
        k: usize,
        n: usize,
    },
}

impl ShapeRule {
    /// The field's "tall" layer: `K ≥ 2N`.
    pub const TALL: ShapeRule = ShapeRule::KAtLeastNTimes(2);

    pub fn holds(self, n: usize, k: usize, group: usize) -> bool {
        match self {
            ShapeRule::Any => true,
            ShapeRule::KAtLeastNTimes(f) => k >= f * n,
            ShapeRule::NAtLeastKTimes(f) => n >= f * k,
            ShapeRule::NAboveK => n > k,
            ShapeRule::NAtMost(v) => n <= v,
            ShapeRule::NAtLeast(v) => n >= v,
            ShapeRule::KAtMost(v) => k <= v,
            ShapeRule::KAtLeast(v) => k >= v,
            ShapeRule::All(rules) => rules.iter().all(|r| r.holds(n, k, group)),
            ShapeRule::Either(rules) => rules.iter().any(|r| r.holds(n, k, group)),
            ShapeRule::Exact {
                group: g,
                k: kk,
                n: nn,
            } => (group, k, n) == (g, kk, nn),
        }
    }

    /// Calls `f` on every rule this one is made of, itself included.
    fn visit(self, f: &mut impl FnMut(ShapeRule)) {
        f(self);
        if let ShapeRule::All(rules) | ShapeRule::Either(rules) = self {
            for r in rules {
                r.visit(f);
            }
        }
    }
}

impl fmt::Display for ShapeRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Members that are themselves compound are bracketed: `(a or (b and c))`.
        let join = |f: &mut fmt::Formatter<'_>, rules: &[ShapeRule], sep: &str| {
            for (i, r) in rules.iter().enumerate() {
                if i > 0 {
                    f.write_str(sep)?;
                }
                match r {
                    ShapeRule::All(_) => write!(f, "({r})")?,
                    _ => write!(f, "{r}")?,
                }
            }
            Ok(())
        };
        match *self {
            ShapeRule::Any => f.write_str("any N, K"),
            ShapeRule::KAtLeastNTimes(x) => write!(f, "K ≥ {x}N"),
            ShapeRule::NAtLeastKTimes(x) => write!(f, "N ≥ {x}K"),
            ShapeRule::NAboveK => f.write_str("N > K"),
            ShapeRule::NAtMost(v) => write!(f, "N ≤ {v}"),
            ShapeRule::NAtLeast(v) => write!(f, "N ≥ {v}"),
            ShapeRule::KAtMost(v) => write!(f, "K ≤ {v}"),
            ShapeRule::KAtLeast(v) => write!(f, "K ≥ {v}"),
            ShapeRule::All(rules) => join(f, rules, " and "),
            ShapeRule::Either(rules) => {
                f.write_str("(")?;
                join(f, rules, " or ")?;
                f.write_str(")")
            }
            ShapeRule::Exact { group, k, n } => write!(f, "G = {group}, K = {k}, N = {n}"),
        }
    }
}

/// A tile of the field's tables as published: (BM, BN, BK, warps). Kept beside ours so that
/// every mapping can be read off the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldTile {
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    pub warps: u32,
}

/// `FieldTile` from the field's `(BM, BN, BK, warps)` order.
pub const fn field(bm: u32, bn: u32, bk: u32, warps: u32) -> FieldTile {
    FieldTile { bm, bn, bk, warps }
}

/// One rung: for `M ≤ m_max` (any M when `None`) and layers where `when` holds, take `tile`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rung {
    pub m_max: Option<usize>,
    pub when: ShapeRule,
    /// The compiled variant this rung launches (one of `FUSED_VARIANTS`).
    pub tile: Tile,
    /// The field's tile this rung stands for.
    pub field: FieldTile,
}

impl fmt::Display for Rung {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.m_max {
            Some(m) => write!(f, "M ≤ {m}")?,
            None => f.write_str("any M")?,
        }
        let t = self.tile;
        let d = self.field;
        write!(
            f,
            ", {} → {}x{}x{}w{} (field {},{},{},{})",
            self.when, t.bm, t.bn, t.bk, t.warps, d.bm, d.bn, d.bk, d.warps
        )
    }
}

/// A named run of rungs that several tables share (the gfx1151 scalar ladder serves gfx1151
/// bf16, gfx1151 fp16 below M = 128 and gfx1100 bf16).
#[derive(Debug)]
pub struct Segment {
    pub name: &'static str,
    pub rungs: &'static [Rung],
}

/// The tile table of one (target, dtype): its segments in order, first matching rung wins.
/// The last rung of every table takes every layer (`tables.rs` tests it), so a pick always
/// lands on a rung.
#[derive(Debug)]
pub struct TileTable {
    pub name: &'static str,
    pub segments: &'static [&'static Segment],
}

/// One rung of one table, by position, as selection reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct RungId {
    pub table: &'static str,
    /// Position among all rungs of the table, from 0.
    pub index: usize,
}

/// The rung a layer lands on and its tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pick {
    pub rung: RungId,
    pub tile: Tile,
}

/// A layer the boundary derivation produces: `M` and the layer's (N, K, G).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BoundaryLayer {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub group: usize,
}

/// Step of the derived boundary values: a multiple of every fast-path G (so K stays valid for
/// each) and of 8 (so N can carry packed zero points).
pub const BOUNDARY_STEP: usize = 128;
/// N and K of the layers that no threshold names.
pub const BOUNDARY_BASE: usize = 4096;
/// G of the layers that no rule names.
pub const BOUNDARY_GROUP: usize = 128;

impl TileTable {
    /// Every rung in order, with the segment it belongs to.
    pub fn rungs(&self) -> impl Iterator<Item = (&'static Segment, &'static Rung)> + '_ {
        self.segments
            .iter()
            .flat_map(|s| s.rungs.iter().map(move |r| (*s, r)))
    }

    pub fn len(&self) -> usize {
        self.segments.iter().map(|s| s.rungs.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rung at `index` (see `RungId`).
    pub fn rung(&self, index: usize) -> Option<(&'static Segment, &'static Rung)> {
        self.rungs().nth(index)
    }

    /// `gfx1151-bf16 #7 (gfx1151-scalar): M ≤ 128, N > K → 64x64x32w4 (field 64,64,64,4)`.
    pub fn describe(&self, index: usize) -> String {
        match self.rung(index) {
            Some((seg, r)) => format!("{} #{index} ({}): {r}", self.name, seg.name),
            None => format!("{} #{index} (no such rung)", self.name),
        }
    }

    /// The first rung that takes (M, N, K, G); the last rung when none does (it takes every
    /// layer in every shipped table).
    pub fn pick(&self, m: usize, n: usize, k: usize, group: usize) -> Pick {
        let len = self.len();
        let (index, rung) = self
            .rungs()
            .enumerate()
            .find(|(_, (_, r))| r.m_max.is_none_or(|mm| m <= mm) && r.when.holds(n, k, group))
            .map(|(i, (_, r))| (i, r))
            .or_else(|| self.rung(len.saturating_sub(1)).map(|(_, r)| (len - 1, r)))
            .expect("a tile table has at least one rung");
        Pick {
            rung: RungId {
                table: self.name,
                index,
            },
            tile: rung.tile,
        }
    }

    /// Layers on both sides of every threshold of this table, CUTLASS-style: `min_m` (the
    /// smallest M the caller's dispatch sends to this kernel), every M bound from there and the
    /// M just above it, and every N and K a rule names with its neighbour one
    /// `BOUNDARY_STEP` across; ratio rules (`N ≥ fK`, `K ≥ fN`, `N > K`) get their boundary
    /// from each named (or base) value of the other side; exact layers come as they are.
    /// Their cross product reaches every rung that any layer reaches, for the rules above.
    pub fn boundary_layers(&self, min_m: usize) -> Vec<BoundaryLayer> {
        let mut ms = BTreeSet::from([min_m]);
        let mut ns = BTreeSet::from([BOUNDARY_BASE]);
        let mut ks = BTreeSet::from([BOUNDARY_BASE]);
        let mut n_per_k = BTreeSet::new();
        let mut k_per_n = BTreeSet::new();
        let mut n_above_k = false;
        let mut exact = BTreeSet::new();
        let around = |set: &mut BTreeSet<usize>, v: usize| {
            set.insert(v);
            set.insert(v + BOUNDARY_STEP);
            if v > BOUNDARY_STEP {
                set.insert(v - BOUNDARY_STEP);
            }
        };
        for (_, r) in self.rungs() {
            if let Some(m) = r.m_max.filter(|m| *m >= min_m) {
                ms.insert(m);
                ms.insert(m + 1);
            }
            r.when.visit(&mut |rule| match rule {
                ShapeRule::NAtMost(v) | ShapeRule::NAtLeast(v) => around(&mut ns, v),
                ShapeRule::KAtMost(v) | ShapeRule::KAtLeast(v) => around(&mut ks, v),
                ShapeRule::NAtLeastKTimes(f) => {
                    n_per_k.insert(f);
                }
                ShapeRule::KAtLeastNTimes(f) => {
                    k_per_n.insert(f);
                }
                ShapeRule::NAboveK => n_above_k = true,
                ShapeRule::Exact { group, k, n } => {
                    exact.insert((n, k, group));
                }
                ShapeRule::Any | ShapeRule::All(_) | ShapeRule::Either(_) => {}
            });
        }
        let (base_ns, base_ks) = (ns.clone(), ks.clone());
        for &k in &base_ks {
            for &f in &n_per_k {
                around(&mut ns, f * k);
            }
            if n_above_k {
                around(&mut ns, k);
            }
        }
        for &n in &base_ns {
            for &f in &k_per_n {
                around(&mut ks, f * n);
            }
        }
        let mut out = Vec::new();
        for &m in &ms {
            for &n in &ns {
                for &k in &ks {
                    out.push(BoundaryLayer {
                        m,
                        n,
                        k,
                        group: BOUNDARY_GROUP,
                    });
                }
            }
            for &(n, k, group) in &exact {
                out.push(BoundaryLayer { m, n, k, group });
            }
        }
        out
    }
}

/// A rung that no layer of a sweep lands on, for one (target, dtype).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadRung {
    /// Who uses the table: `gfx1151/bf16`.
    pub user: String,
    pub rung: RungId,
    /// `TileTable::describe` of the rung.
    pub description: String,
}

impl fmt::Display for DeadRung {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: dead rung {}, chosen by no case of the selection sweeps",
            self.user, self.description
        )
    }
}

/// The rungs of `table` that are not in `chosen` (indices of rungs some case landed on).
pub fn unreached(table: &TileTable, user: &str, chosen: &BTreeSet<usize>) -> Vec<DeadRung> {
    (0..table.len())
        .filter(|i| !chosen.contains(i))
        .map(|index| DeadRung {
            user: user.to_owned(),
            rung: RungId {
                table: table.name,
                index,
            },
            description: table.describe(index),
        })
        .collect()
}
