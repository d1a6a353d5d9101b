//! Every path of the kernel set that may take one call, not only the one [`crate::select`]
//! picks: perf's regret mode times each of them to say where the selection is not the fastest.
//! Legality is the selection's own: the priority list's `can_implement`, the hybrid's decode
//! range (the skinny kernel's declared largest M), the dense cache existing under the kernel
//! config, and the tile invariants of each rung of the target's table. Never a path the
//! selection could not launch for the layer.

use serde::{Deserialize, Serialize};
use w4a16_kernels::decl::Tile;
use w4a16_kernels::{KernelId, Target, tiles};

use crate::config::KernelConfig;
use crate::{LayerKernel, LayerRequest, SKINNY_MAX_M, Selection, can_implement};

/// One path of the set, with the fused kernel's tile variant: what regret mode times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum LinearPath {
    Skinny,
    /// The fused kernel launched with `tile` (its compiled variant); `rung` is the first rung of
    /// the target's table holding that tile, so several rungs with one tile are timed once.
    Fused {
        rung: usize,
        tile: TileSize,
    },
    /// The dense cache (dequantized at load) and the vendor BLAS per call.
    DequantDense,
    Fallback,
}

/// A fused tile as the reports name it (`64x64x32w4`), serializable both ways.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TileSize {
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    pub warps: u32,
}

impl From<Tile> for TileSize {
    fn from(t: Tile) -> Self {
        TileSize {
            bm: t.bm,
            bn: t.bn,
            bk: t.bk,
            warps: t.warps,
        }
    }
}

impl From<TileSize> for Tile {
    fn from(t: TileSize) -> Self {
        Tile {
            bm: t.bm,
            bn: t.bn,
            bk: t.bk,
            warps: t.warps,
        }
    }
}

impl std::fmt::Display for TileSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}x{}w{}", self.bm, self.bn, self.bk, self.warps)
    }
}

impl LinearPath {
    /// The kernels the path runs, as [`Selection::path`] lists them.
    pub fn kernels(&self) -> &'static [KernelId] {
        match self {
            LinearPath::Skinny => &[KernelId::Skinny],
            LinearPath::Fused { .. } => &[KernelId::Fused],
            LinearPath::DequantDense => &[KernelId::Dequant, KernelId::Dense],
            LinearPath::Fallback => &[KernelId::Fallback],
        }
    }

    /// The path `sel` took, `None` when no kernel takes the layer.
    pub fn of_selection(sel: &Selection) -> Option<LinearPath> {
        Some(match sel.path.as_slice() {
            [KernelId::Skinny] => LinearPath::Skinny,
            [KernelId::Fused] => LinearPath::Fused {
                rung: sel.tile_rung?.index,
                tile: sel.tile?.into(),
            },
            [KernelId::Dequant, KernelId::Dense] => LinearPath::DequantDense,
            [KernelId::Fallback] => LinearPath::Fallback,
            _ => return None,
        })
    }

    /// Whether two paths run the same kernels with the same tile (the rung that named a tile
    /// does not matter: the launch is the same).
    pub fn same_launch(&self, other: &LinearPath) -> bool {
        match (self, other) {
            (LinearPath::Fused { tile: a, .. }, LinearPath::Fused { tile: b, .. }) => a == b,
            (a, b) => a == b,
        }
    }
}

impl std::fmt::Display for LinearPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinearPath::Skinny => f.write_str("skinny"),
            LinearPath::Fused { rung, tile } => write!(f, "fused#{rung}:{tile}"),
            LinearPath::DequantDense => f.write_str("dequant+dense"),
            LinearPath::Fallback => f.write_str("fallback"),
        }
    }
}

/// Every path that may take `req` on `target` under `config`, in the set's order (skinny, the
/// fused rungs in table order with one entry per distinct tile, dequant+dense, fallback).
/// The M-dispatch is deliberately not applied (it is what regret judges), but everything that
/// makes a launch impossible is: the hybrid's and the fallback's `can_implement`, the skinny
/// kernel's largest M, a dense cache the configuration does not build, a rung whose tile breaks
/// the target's invariants for the layer's group.
pub fn legal_paths(target: Target, req: &LayerRequest, config: &KernelConfig) -> Vec<LinearPath> {
    let mut out = Vec::new();
    if can_implement(LayerKernel::Hybrid, target, req).is_empty() {
        if req.m <= SKINNY_MAX_M {
            out.push(LinearPath::Skinny);
        }
        let table = tiles::table(target, req.dtype);
        for (index, (_, rung)) in table.rungs().enumerate() {
            let path = LinearPath::Fused {
                rung: index,
                tile: rung.tile.into(),
            };
            let legal = tiles::check_tile(rung.tile, target, req.shape.group).is_ok();
            if legal && !out.iter().any(|p| p.same_launch(&path)) {
                out.push(path);
            }
        }
        if config.builds_dense_cache() && req.dense_cache_built {
            out.push(LinearPath::DequantDense);
        }
    }
    if can_implement(LayerKernel::Fallback, target, req).is_empty() {
        out.push(LinearPath::Fallback);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PrefillDequant;
    use w4a16_reference::ActDtype;
    use w4a16_reference::layer::{LayerShape, Symmetry};

    fn req(m: usize, group: usize, sym: Symmetry, n: usize) -> LayerRequest {
        LayerRequest::new(LayerShape::new(n, 4096, group), m, ActDtype::F16, sym)
    }

    fn enabled() -> KernelConfig {
        KernelConfig::with_prefill_dequant(PrefillDequant::Enable)
    }

    /// The selection's own choice is always among the legal paths, for every target, M and
    /// configuration the field uses.
    #[test]
    fn the_selected_path_is_always_legal() {
        for target in Target::ALL {
            for prefill in [PrefillDequant::Enable, PrefillDequant::Disable] {
                let config = KernelConfig::with_prefill_dequant(prefill);
                for m in [1, 2, 5, 6, 16, 128, 255, 256, 2048, 4096] {
                    for r in [
                        req(m, 128, Symmetry::Asym, 4096),
                        req(m, 4096, Symmetry::Sym, 4096),
                    ] {
                        let r = LayerRequest {
                            dense_cache_built: config.builds_dense_cache(),
                            ..r
                        };
                        let sel = crate::select(target, &r, &config);
                        let legal = legal_paths(target, &r, &config);
                        match LinearPath::of_selection(&sel) {
                            Some(p) => assert!(
                                legal.iter().any(|l| l.same_launch(&p)),
                                "{target} M={m}: selected {p} not in {legal:?}"
                            ),
                            None => assert!(legal.is_empty(), "{legal:?}"),
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn illegal_paths_are_left_out() {
        let t = Target::Sm90;
        // Decode: skinny, fused rungs, fallback; no dense cache when the option is off.
        let p = legal_paths(
            t,
            &req(4, 128, Symmetry::Sym, 4096),
            &KernelConfig::default(),
        );
        assert_eq!(p.first(), Some(&LinearPath::Skinny));
        assert_eq!(p.last(), Some(&LinearPath::Fallback));
        assert!(!p.contains(&LinearPath::DequantDense), "{p:?}");
        // Above the decode range skinny is gone; the option adds the dense path at any M.
        let p = legal_paths(t, &req(6, 128, Symmetry::Sym, 4096), &enabled());
        assert!(!p.contains(&LinearPath::Skinny), "{p:?}");
        assert!(p.contains(&LinearPath::DequantDense), "{p:?}");
        // One entry per distinct tile, each a tile of the table.
        let fused: Vec<_> = p
            .iter()
            .filter_map(|p| match p {
                LinearPath::Fused { tile, .. } => Some(*tile),
                _ => None,
            })
            .collect();
        let mut distinct = fused.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), fused.len());
        let table = tiles::table(t, ActDtype::F16);
        assert!(
            fused
                .iter()
                .all(|f| table.rungs().any(|(_, r)| TileSize::from(r.tile) == *f))
        );
        // Channelwise (G = K): only the fallback; act-order: nothing at all.
        let p = legal_paths(t, &req(16, 4096, Symmetry::Sym, 4096), &enabled());
        assert_eq!(p, vec![LinearPath::Fallback]);
        let mut a = req(16, 128, Symmetry::Sym, 4096);
        a.act_order = true;
        assert!(legal_paths(t, &a, &enabled()).is_empty());
        // Asymmetric N % 8 != 0: the hybrid refuses, the fallback takes it.
        let p = legal_paths(t, &req(1, 128, Symmetry::Asym, 4100), &enabled());
        assert_eq!(p, vec![LinearPath::Fallback]);
        // Built cache missing (startup memory check said no): no dense path.
        let mut nb = req(512, 128, Symmetry::Sym, 4096);
        nb.dense_cache_built = false;
        assert!(!legal_paths(t, &nb, &enabled()).contains(&LinearPath::DequantDense));
        // gfx942 (wave64): the hybrid never runs.
        let p = legal_paths(
            Target::Gfx942,
            &req(1, 128, Symmetry::Sym, 4096),
            &enabled(),
        );
        assert_eq!(p, vec![LinearPath::Fallback]);
    }

    #[test]
    fn paths_round_trip_through_json() {
        for p in legal_paths(Target::Sm90, &req(8, 128, Symmetry::Sym, 4096), &enabled()) {
            let s = serde_json::to_string(&p).unwrap();
            assert_eq!(serde_json::from_str::<LinearPath>(&s).unwrap(), p, "{s}");
        }
    }
}
