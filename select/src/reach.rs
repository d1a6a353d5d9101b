//! No dead rung in the tile tables: every rung of the table of every (target, dtype) where the
//! hybrid runs must be chosen by some selection of the sweeps, otherwise the check fails naming
//! it (the field once shipped a gfx12 branch that an earlier gfx1x test made unreachable).
//! The sweep goes through `select` itself, so a dispatch rule that keeps a rung from being
//! asked for is caught as well as a rung shadowed inside its table. Its layers are derived from
//! each table's own thresholds (`TileTable::boundary_layers`), not picked by hand.

use std::collections::BTreeMap;
use std::fmt;

use w4a16_kernels::Target;
use w4a16_kernels::tiles::{self, DeadRung, RungId, TileTable};
use w4a16_reference::ActDtype;
use w4a16_reference::layer::{LayerShape, Symmetry};

use crate::config::{KernelConfig, PrefillDequant};
use crate::{LayerRequest, SKINNY_MAX_M, Selection, wave32_capable};

/// Which table serves a (target, dtype): `tiles::table`, or a stand-in in tests.
pub type TableOf = fn(Target, ActDtype) -> &'static TileTable;

/// The targets whose tables must be reached in full: those where the hybrid (and so the fused
/// kernel) runs. gfx942 is wave64: selection never takes the hybrid there.
pub fn targets() -> impl Iterator<Item = Target> {
    Target::ALL.into_iter().filter(|t| wave32_capable(*t))
}

/// The rungs the recorded selections landed on, per (target, dtype), each with the first
/// request that reached it.
#[derive(Clone, Debug)]
pub struct TileReach {
    tables: TableOf,
    chosen: BTreeMap<(Target, ActDtype), BTreeMap<usize, LayerRequest>>,
    /// Selections whose rung is not of the table `tables` names for their (target, dtype).
    foreign: Vec<(Target, ActDtype, RungId)>,
}

impl Default for TileReach {
    fn default() -> Self {
        Self::new()
    }
}

impl TileReach {
    /// Reachability of the shipped tables.
    pub fn new() -> Self {
        Self::with_tables(tiles::table)
    }

    pub fn with_tables(tables: TableOf) -> Self {
        TileReach {
            tables,
            chosen: BTreeMap::new(),
            foreign: Vec::new(),
        }
    }

    pub fn table(&self, target: Target, dtype: ActDtype) -> &'static TileTable {
        (self.tables)(target, dtype)
    }

    /// The derived sweep for one (target, dtype): the boundary layers of its table from the
    /// smallest M the fused path takes, as symmetric requests (G, K and N valid for the hybrid
    /// by construction).
    pub fn boundary_requests(&self, target: Target, dtype: ActDtype) -> Vec<LayerRequest> {
        self.table(target, dtype)
            .boundary_layers(SKINNY_MAX_M + 1)
            .into_iter()
            .map(|l| {
                LayerRequest::new(
                    LayerShape::new(l.n, l.k, l.group),
                    l.m,
                    dtype,
                    Symmetry::Sym,
                )
            })
            .collect()
    }

    /// Notes the rung `sel` landed on (nothing when it is not on the fused path).
    pub fn record(&mut self, sel: &Selection) {
        let Some(rung) = sel.tile_rung else {
            return;
        };
        let dtype = sel.request.dtype;
        if rung.table != self.table(sel.target, dtype).name {
            self.foreign.push((sel.target, dtype, rung));
            return;
        }
        self.chosen
            .entry((sel.target, dtype))
            .or_default()
            .entry(rung.index)
            .or_insert(sel.request);
    }

    /// Runs `select` over the derived sweep of every table that must be reached, recording
    /// each selection.
    pub fn sweep(&mut self, mut select: impl FnMut(Target, &LayerRequest) -> Selection) {
        for target in targets() {
            for dtype in ActDtype::ALL {
                for req in self.boundary_requests(target, dtype) {
                    let sel = select(target, &req);
                    self.record(&sel);
                }
            }
        }
    }

    /// The first request recorded on rung `index` of (target, dtype)'s table.
    pub fn witness(&self, target: Target, dtype: ActDtype, index: usize) -> Option<&LayerRequest> {
        self.chosen.get(&(target, dtype))?.get(&index)
    }

    /// Every rung of every table that must be reached and was not.
    pub fn dead(&self) -> Vec<DeadRung> {
        let mut out = Vec::new();
        for target in targets() {
            for dtype in ActDtype::ALL {
                let table = self.table(target, dtype);
                let chosen = self
                    .chosen
                    .get(&(target, dtype))
                    .map(|m| m.keys().copied().collect())
                    .unwrap_or_default();
                let user = format!("{target}/{}", dtype.name());
                out.extend(tiles::unreached(table, &user, &chosen));
            }
        }
        out
    }

    /// `Ok` when no rung is dead and every recorded rung came from the table of its (target,
    /// dtype); otherwise every dead rung by name.
    pub fn check(&self) -> Result<(), UnreachedRungs> {
        let dead = self.dead();
        if dead.is_empty() && self.foreign.is_empty() {
            Ok(())
        } else {
            Err(UnreachedRungs {
                dead,
                foreign: self.foreign.clone(),
            })
        }
    }
}

/// Sweeps the shipped tables through `select` with the dense cache off (the engine's default,
/// under which the fused path takes every M above the decode range) and checks that no rung is
/// dead. `w4a16 run` calls it before any case.
pub fn check_shipped() -> Result<TileReach, UnreachedRungs> {
    let config = KernelConfig {
        prefill_dequant: PrefillDequant::Disable,
    };
    let mut reach = TileReach::new();
    reach.sweep(|t, r| crate::select(t, r, &config));
    reach.check().map(|()| reach)
}

/// The tile tables have rungs no selection reaches (or selection read another table).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct UnreachedRungs {
    pub dead: Vec<DeadRung>,
    pub foreign: Vec<(Target, ActDtype, RungId)>,
}

impl fmt::Display for UnreachedRungs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} dead tile-table rung(s)", self.dead.len())?;
        for d in &self.dead {
            write!(f, "\n  {d}")?;
        }
        for (t, d, rung) in self.foreign.iter().take(10) {
            write!(
                f,
                "\n  {t}/{}: selection took rung {} #{}, not from the table of {t}/{}",
                d.name(),
                rung.table,
                rung.index,
                d.name()
            )?;
        }
        Ok(())
    }
}

/// One line per rung of every table that must be reached, for the snapshot of one target:
/// `f16 gfx1151-f16 #3 (gfx1151-scalar): M ≤ 128, ... | M=.. N=.. K=.. G=..` or `| DEAD`.
pub fn report(reach: &TileReach, target: Target) -> String {
    let mut out = String::new();
    for dtype in ActDtype::ALL {
        let table = reach.table(target, dtype);
        for index in 0..table.len() {
            let at = match reach.witness(target, dtype, index) {
                Some(r) => format!(
                    "M={} N={} K={} G={}",
                    r.m, r.shape.n, r.shape.k, r.shape.group
                ),
                None => "DEAD".to_owned(),
            };
            out.push_str(&format!(
                "{} {} | {at}\n",
                dtype.name(),
                table.describe(index)
            ));
        }
    }
    out
}
