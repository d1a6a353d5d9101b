//! The f64 reference of the `moe` GEMM: per local expert, the dense reference rows
//! ([`crate::gemm`]) of the X rows its slots read, scattered to the slots' rows of C. A slot row
//! is one dense GEMM row of its expert on X row `t = slot / top_k`; with the routed-weight
//! multiply the kernel then rounds `acc·r` to fp32 before the single cast, which the bound adds
//! ([`crate::bound::BoundModel::routed_element`]). Slots routed to an expert that is mapped away
//! are rows the GEMM writes as zeros.

use super::layer::MoeLayer;
use super::map::ExpertMap;
use super::routing::{Routing, RoutingError};
use crate::dtype::ActDtype;
use crate::gemm::{InputError, NonFiniteX, SpecialRows, rows_unchecked, validate_with};
use crate::layer::Activations;
use crate::recipe::NumericRecipe;

/// What the GEMM does with one row of C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowKind {
    /// `C[slot] = cast(X[t]·W_localᵀ (· r))`.
    Computed { local: usize, global: usize },
    /// The slot's expert is mapped away (block id −1): every element must be exactly zero.
    Zero { global: usize },
}

/// Inputs the grouped reference cannot take.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GroupedError {
    #[error(transparent)]
    Routing(#[from] RoutingError),
    #[error(transparent)]
    Map(#[from] super::map::MapError),
    #[error("expert map: expected one entry per global expert (E = {routing}), got {map}")]
    MapExperts { map: usize, routing: usize },
    #[error(
        "MoE layer: expected {expected} local experts (the map's, or E without one), got {layer}"
    )]
    LocalExperts { layer: usize, expected: usize },
    #[error("X: expected one row per token (T = {tokens}), got {rows}")]
    Tokens { rows: usize, tokens: usize },
    #[error("expert {expert}: {source}")]
    Input {
        expert: usize,
        #[source]
        source: InputError,
    },
    #[error(transparent)]
    Compare(InputError),
}

/// The reference of C `[S, N]`: per slot row its kind and the dense row of its expert (values
/// and magnitudes before the routed weight), plus the inputs the wrong-expert diagnosis reruns.
#[derive(Clone, Debug)]
pub struct GroupedReference<'a> {
    pub slots: usize,
    pub n: usize,
    pub k: usize,
    pub dtype: ActDtype,
    /// Whether the kernel multiplies each row by its routed weight.
    pub mul_routed: bool,
    pub rows: Vec<RowKind>,
    /// `[S, N]` dense values `X[t]·W_eᵀ` (0 on zero rows).
    pub y: Vec<f64>,
    /// `[S, N]` `Σ_k |x||w|`.
    pub a: Vec<f64>,
    /// `[S, N]` offset magnitudes, for offset-accumulating recipes.
    pub a_offset: Option<Vec<f64>>,
    /// The global expert of each local id.
    pub globals: Vec<usize>,
    pub(crate) x: &'a Activations,
    pub(crate) layer: &'a MoeLayer,
    pub(crate) routing: &'a Routing,
    pub(crate) offset: Option<f64>,
    pub(crate) non_finite_x: NonFiniteX,
}

impl GroupedReference<'_> {
    /// The routed weight the kernel multiplies row `slot` by, if it does.
    pub fn routed_weight(&self, slot: usize) -> Option<f32> {
        self.mul_routed.then(|| self.routing.weights[slot])
    }

    /// The exact value of `C[slot, n]`.
    pub fn value(&self, slot: usize, n: usize) -> f64 {
        let y = self.y[slot * self.n + n];
        match (self.rows[slot], self.routed_weight(slot)) {
            (RowKind::Zero { .. }, _) => 0.0,
            (RowKind::Computed { .. }, Some(r)) => y * f64::from(r),
            (RowKind::Computed { .. }, None) => y,
        }
    }

    /// Slots whose rows must be exactly zero.
    pub fn zero_rows(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.slots).filter(|&s| matches!(self.rows[s], RowKind::Zero { .. }))
    }

    pub fn routing(&self) -> &Routing {
        self.routing
    }

    pub fn layer(&self) -> &MoeLayer {
        self.layer
    }
}

/// The grouped reference with finite X ([`NonFiniteX::Refuse`]).
pub fn grouped_reference<'a>(
    x: &'a Activations,
    layer: &'a MoeLayer,
    routing: &'a Routing,
    map: Option<&ExpertMap>,
    mul_routed: bool,
    recipe: &NumericRecipe,
) -> Result<GroupedReference<'a>, GroupedError> {
    grouped_reference_with(
        x,
        layer,
        routing,
        map,
        mul_routed,
        recipe,
        NonFiniteX::Refuse,
    )
}

/// [`grouped_reference`] with the policy for non-finite X (the special-values class).
pub fn grouped_reference_with<'a>(
    x: &'a Activations,
    layer: &'a MoeLayer,
    routing: &'a Routing,
    map: Option<&ExpertMap>,
    mul_routed: bool,
    recipe: &NumericRecipe,
    non_finite_x: NonFiniteX,
) -> Result<GroupedReference<'a>, GroupedError> {
    routing.validate()?;
    let expected_locals = match map {
        Some(m) => {
            m.validate()?;
            if m.experts() != routing.experts {
                return Err(GroupedError::MapExperts {
                    map: m.experts(),
                    routing: routing.experts,
                });
            }
            m.local_experts()
        }
        None => routing.experts,
    };
    if layer.local_experts() != expected_locals {
        return Err(GroupedError::LocalExperts {
            layer: layer.local_experts(),
            expected: expected_locals,
        });
    }
    if x.m != routing.tokens {
        return Err(GroupedError::Tokens {
            rows: x.m,
            tokens: routing.tokens,
        });
    }
    let local_of = |g: usize| match map {
        Some(m) => m.local(g),
        None => Some(g),
    };
    let s = routing.slots();
    let rows: Vec<RowKind> = (0..s)
        .map(|slot| {
            let global = routing.expert_of(slot);
            match local_of(global) {
                Some(local) => RowKind::Computed { local, global },
                None => RowKind::Zero { global },
            }
        })
        .collect();
    let mut by_local: Vec<Vec<usize>> = vec![Vec::new(); layer.local_experts()];
    for (slot, row) in rows.iter().enumerate() {
        if let RowKind::Computed { local, .. } = *row {
            by_local[local].push(slot);
        }
    }
    let (n, k) = (layer.shape.n, layer.shape.k);
    let offset = recipe.offset_accumulation;
    let mut y = vec![0.0; s * n];
    let mut a = vec![0.0; s * n];
    let mut a_offset = offset.map(|_| vec![0.0; s * n]);
    let (xz, special) = SpecialRows::prepare(x, non_finite_x);
    for (local, (slots, expert)) in by_local.iter().zip(layer.logical()).enumerate() {
        validate_with(x, expert, recipe, non_finite_x).map_err(|source| GroupedError::Input {
            expert: local,
            source,
        })?;
        if slots.is_empty() {
            continue;
        }
        let tokens: Vec<usize> = slots.iter().map(|&sl| routing.token_of(sl)).collect();
        let mut lines = rows_unchecked(&xz, expert, offset, &tokens);
        special.patch(&mut lines, expert, offset);
        for (i, &slot) in slots.iter().enumerate() {
            let (src, dst) = (i * n..(i + 1) * n, slot * n..(slot + 1) * n);
            y[dst.clone()].copy_from_slice(&lines.y[src.clone()]);
            a[dst.clone()].copy_from_slice(&lines.a[src.clone()]);
            if let (Some(all), Some(o)) = (a_offset.as_mut(), lines.a_offset.as_ref()) {
                all[dst].copy_from_slice(&o[src]);
            }
        }
    }
    Ok(GroupedReference {
        slots: s,
        n,
        k,
        dtype: layer.dtype,
        mul_routed,
        rows,
        y,
        a,
        a_offset,
        globals: map.map_or_else(
            || (0..routing.experts).collect(),
            ExpertMap::global_of_local,
        ),
        x,
        layer,
        routing,
        offset,
        non_finite_x,
    })
}
