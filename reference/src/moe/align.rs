//! The reference `moe_align` (docs/contract.md §4 item 5): slots grouped by global expert, experts
//! ascending, slots ascending within an expert's run, each run padded with the sentinel `S` to a
//! multiple of `block_m`; experts without slots get no block. The order is fully determined, so
//! a device result can be checked entry by entry ([`super::check::check_align`]).

use super::map::ExpertMap;
use super::routing::{Routing, RoutingError};

/// The aligned routing, exactly `num_tokens_post_padded` entries long (device buffers are
/// [`AlignCapacity::sorted`] long; entries past `num_tokens_post_padded` are unspecified).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Aligned {
    pub sorted_token_ids: Vec<i32>,
    /// One per block: the local id of the run's expert, or −1 when it is mapped away.
    pub expert_ids: Vec<i32>,
    pub num_tokens_post_padded: usize,
}

/// How large the device's align buffers must be for any routing of `S` slots over `E` experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlignCapacity {
    /// `blocks·block_m` entries of `sorted_token_ids`.
    pub sorted: usize,
    /// `ceil((S + E·(block_m − 1)) / block_m)` entries of `expert_ids`: each expert's run pads
    /// at most `block_m − 1` entries.
    pub blocks: usize,
}

/// The capacity of the align buffers. `block_m = 0` has no blocks and gets zero capacity
/// ([`moe_align`] and the checker refuse it with [`AlignError::ZeroBlockM`]).
pub fn align_capacity(slots: usize, experts: usize, block_m: usize) -> AlignCapacity {
    checked_align_capacity(slots, experts, block_m).unwrap_or(AlignCapacity {
        sorted: 0,
        blocks: 0,
    })
}

/// The capacity of the align buffers, the one formula the kernels' launch sizes read too;
/// `None` on overflow or `block_m = 0`.
pub fn checked_align_capacity(
    slots: usize,
    experts: usize,
    block_m: usize,
) -> Option<AlignCapacity> {
    if block_m == 0 {
        return None;
    }
    let worst = experts.checked_mul(block_m - 1)?.checked_add(slots)?;
    let blocks = worst.div_ceil(block_m);
    Some(AlignCapacity {
        sorted: blocks.checked_mul(block_m)?,
        blocks,
    })
}

/// Input the align step cannot take.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AlignError {
    #[error("block_m: expected ≥ 1, got 0")]
    ZeroBlockM,
    #[error(transparent)]
    Routing(#[from] RoutingError),
    #[error("expert map: expected one entry per global expert (E = {routing}), got {map}")]
    MapExperts { map: usize, routing: usize },
    #[error(transparent)]
    Map(#[from] super::map::MapError),
}

/// One expert's run in the aligned order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    pub global: usize,
    /// The id written to `expert_ids` (local id, or −1 when mapped away).
    pub block_id: i32,
    /// Ascending.
    pub slots: Vec<usize>,
}

/// Checks the align step's inputs.
pub(crate) fn check_inputs(
    routing: &Routing,
    block_m: usize,
    map: Option<&ExpertMap>,
) -> Result<(), AlignError> {
    if block_m == 0 {
        return Err(AlignError::ZeroBlockM);
    }
    routing.validate()?;
    if let Some(m) = map {
        m.validate()?;
        if m.experts() != routing.experts {
            return Err(AlignError::MapExperts {
                map: m.experts(),
                routing: routing.experts,
            });
        }
    }
    Ok(())
}

/// The runs of the experts that have slots, experts ascending (inputs checked).
pub(crate) fn runs(routing: &Routing, map: Option<&ExpertMap>) -> Vec<Run> {
    let mut by_expert: Vec<Vec<usize>> = vec![Vec::new(); routing.experts];
    for s in 0..routing.slots() {
        by_expert[routing.expert_of(s)].push(s);
    }
    by_expert
        .into_iter()
        .enumerate()
        .filter(|(_, slots)| !slots.is_empty())
        .map(|(global, slots)| Run {
            global,
            block_id: match map {
                Some(m) => m.local_of[global],
                None => global as i32,
            },
            slots,
        })
        .collect()
}

/// The reference align of `routing` with blocks of `block_m` rows.
pub fn moe_align(
    routing: &Routing,
    block_m: usize,
    map: Option<&ExpertMap>,
) -> Result<Aligned, AlignError> {
    check_inputs(routing, block_m, map)?;
    let sentinel = routing.slots() as i32;
    let mut sorted_token_ids = Vec::new();
    let mut expert_ids = Vec::new();
    for run in runs(routing, map) {
        let blocks = run.slots.len().div_ceil(block_m);
        sorted_token_ids.extend(run.slots.iter().map(|&s| s as i32));
        sorted_token_ids.resize(
            sorted_token_ids.len() + blocks * block_m - run.slots.len(),
            sentinel,
        );
        expert_ids.extend(std::iter::repeat_n(run.block_id, blocks));
    }
    Ok(Aligned {
        num_tokens_post_padded: sorted_token_ids.len(),
        sorted_token_ids,
        expert_ids,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::moe::map::MapKind;

    /// A hand-checked align: 3 tokens, top_k 2, 4 experts, block_m 2, every-other map.
    #[test]
    fn small_align_by_hand() {
        let routing = Routing {
            tokens: 3,
            top_k: 2,
            experts: 4,
            ids: vec![2, 1, 2, 0, 3, 2],
            weights: vec![0.5; 6],
        };
        let map = ExpertMap::new(MapKind::EveryOther, 4).unwrap();
        let a = moe_align(&routing, 2, Some(&map)).unwrap();
        // Expert 0: slot 3; expert 1: slot 1; expert 2: slots 0, 2, 5; expert 3: slot 4.
        assert_eq!(a.sorted_token_ids, [3, 6, 1, 6, 0, 2, 5, 6, 4, 6]);
        assert_eq!(a.expert_ids, [0, -1, 1, 1, -1]);
        assert_eq!(a.num_tokens_post_padded, 10);
        let no_map = moe_align(&routing, 2, None).unwrap();
        assert_eq!(no_map.expert_ids, [0, 1, 2, 2, 3]);
        assert!(a.num_tokens_post_padded <= align_capacity(6, 4, 2).sorted);
        assert_eq!(moe_align(&routing, 0, None), Err(AlignError::ZeroBlockM));
    }
}
