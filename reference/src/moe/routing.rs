//! Which experts each token goes to: the router (softmax over seeded logits, then top-k) and the
//! hand-made routings (experts that get no token, every slot on one expert, one token
//! sent to the same expert twice).
//!
//! A routing is `[T, top_k]` row-major: slot `s = t·top_k + j` is token `t`'s `j`-th choice,
//! `ids[s]` its global expert and `weights[s]` its routed weight (f32, like the field's router
//! output).

use crate::data::{RoutingPicks, router_logits};

/// `[T, top_k]` expert ids (global, i32) and routed weights (f32), row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Routing {
    pub tokens: usize,
    pub top_k: usize,
    /// Global expert count `E`: every id lies in `0..E`.
    pub experts: usize,
    pub ids: Vec<i32>,
    pub weights: Vec<f32>,
}

impl Routing {
    /// `S = T·top_k`; also the sentinel of the aligned ids.
    pub fn slots(&self) -> usize {
        self.tokens * self.top_k
    }

    /// The X row slot `s` reads.
    pub fn token_of(&self, slot: usize) -> usize {
        slot / self.top_k.max(1)
    }

    /// The global expert of slot `s` (call on a validated routing).
    pub fn expert_of(&self, slot: usize) -> usize {
        self.ids[slot] as usize
    }

    /// Checks dimensions, lengths, expert ids and weights, so that later stages can index
    /// without checks.
    pub fn validate(&self) -> Result<(), RoutingError> {
        check_dims(self.tokens, self.experts, self.top_k)?;
        let s = self.slots();
        for (tensor, got) in [
            ("topk_ids", self.ids.len()),
            ("topk_weights", self.weights.len()),
        ] {
            if got != s {
                return Err(RoutingError::Length {
                    tensor,
                    expected: s,
                    got,
                });
            }
        }
        if let Some(slot) = self
            .ids
            .iter()
            .position(|&id| id < 0 || id as usize >= self.experts)
        {
            return Err(RoutingError::ExpertOutOfRange {
                slot,
                id: self.ids[slot],
                experts: self.experts,
            });
        }
        if let Some(slot) = self.weights.iter().position(|w| !w.is_finite()) {
            return Err(RoutingError::WeightNotFinite {
                slot,
                weight: self.weights[slot],
            });
        }
        Ok(())
    }
}

crate::named_enum! {
    /// How the routing of a case is made.
    /// Case files spell it as [`RoutingKind::name`].
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum RoutingKind {
        /// Softmax over seeded logits, then the top-k (ties to the lower expert index); the weights
        /// are the top-k probabilities renormalised to sum to 1, as f32.
        Softmax = "softmax",
        /// Only `top_k + 1` seeded experts receive tokens (each token picks its top-k among them by
        /// the softmax rule); every other expert gets none, so the align step must give them no
        /// block. Needs `E ≥ top_k + 2` so that at least one expert is empty.
        EmptyExperts = "empty-experts",
        /// Every slot on one seeded expert. With `top_k > 1` each token therefore names that expert
        /// `top_k` times (the same expert in every one of its slots), which a router never does but
        /// the kernels must survive: the expert's run holds all `T·top_k` slots. The weights are
        /// the softmax weights of the same seed's logits (over `max(E, top_k)` columns).
        AllOnOneExpert = "one-expert",
        /// The softmax routing with one seeded token's second choice replaced by its first: that
        /// token sends two slots to the same expert, every other token is normal. Needs `top_k ≥ 2`.
        SameExpertTwice = "same-expert-twice",
    }
}

impl RoutingKind {}

/// A routing that cannot be made or cannot be what it claims.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RoutingError {
    #[error("tokens: expected T ≥ 1, got 0")]
    ZeroTokens,
    #[error("experts: expected E ≥ 1, got 0")]
    ZeroExperts,
    #[error("top_k: expected top_k ≥ 1, got 0")]
    ZeroTopK,
    #[error(
        "top_k: a softmax top-k picks distinct experts, so top_k ≤ E; got top_k = {top_k}, E = {experts}"
    )]
    TopKExceedsExperts { top_k: usize, experts: usize },
    #[error(
        "empty-experts routing: top_k + 1 experts receive tokens and at least one gets none, so E ≥ top_k + 2; got top_k = {top_k}, E = {experts}"
    )]
    TooFewExpertsToLeaveEmpty { top_k: usize, experts: usize },
    #[error(
        "same-expert-twice routing: a token needs two slots, so top_k ≥ 2; got top_k = {top_k}"
    )]
    NeedsTwoSlots { top_k: usize },
    #[error("slots: S = T·top_k is the i32 sentinel, so S ≤ {max}; got T = {tokens}, top_k = {top_k}", max = i32::MAX)]
    TooManySlots { tokens: usize, top_k: usize },
    #[error("experts: ids are i32, so E ≤ {max}; got {experts}", max = i32::MAX)]
    TooManyExperts { experts: usize },
    #[error("{tensor}: expected T·top_k = {expected} entries, got {got}")]
    Length {
        tensor: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("topk_ids: slot {slot} names expert {id}, expected 0 ≤ id < E = {experts}")]
    ExpertOutOfRange {
        slot: usize,
        id: i32,
        experts: usize,
    },
    #[error("topk_weights: slot {slot} holds {weight}, expected a finite weight")]
    WeightNotFinite { slot: usize, weight: f32 },
}

fn check_dims(tokens: usize, experts: usize, top_k: usize) -> Result<(), RoutingError> {
    if tokens == 0 {
        return Err(RoutingError::ZeroTokens);
    }
    if experts == 0 {
        return Err(RoutingError::ZeroExperts);
    }
    if top_k == 0 {
        return Err(RoutingError::ZeroTopK);
    }
    if experts > i32::MAX as usize {
        return Err(RoutingError::TooManyExperts { experts });
    }
    if tokens
        .checked_mul(top_k)
        .is_none_or(|s| s > i32::MAX as usize)
    {
        return Err(RoutingError::TooManySlots { tokens, top_k });
    }
    Ok(())
}

/// `2^(f/8)` for `f = 0..8`, correctly rounded decimal literals (Rust parses them exactly the
/// same everywhere), so the softmax below needs no `exp`.
const EIGHTH_POWERS_OF_TWO: [f64; 8] = [
    1.0,
    1.090_507_732_665_257_7,
    1.189_207_115_002_721,
    1.296_839_554_651_009_6,
    std::f64::consts::SQRT_2,
    1.542_210_825_407_940_7,
    1.681_792_830_507_429,
    1.834_008_086_409_342_4,
];

/// `exp(−d·ln2/8) = 2^(−d/8)` for `d ≥ 0`.
fn exp_eighths_down(d: i64) -> f64 {
    let (q, r) = (d.div_euclid(8), d.rem_euclid(8));
    if r == 0 {
        2f64.powi(-(q as i32))
    } else {
        // 2^(−q − r/8) = 2^(−q−1) · 2^((8 − r)/8): a power of two times a table entry.
        2f64.powi(-(q as i32) - 1) * EIGHTH_POWERS_OF_TWO[(8 - r) as usize]
    }
}

/// The top-k of one token's logits (in eighths of ln 2, see [`router_logits`]) among the allowed
/// experts: descending logit, ties to the lower index; weights renormalised over the k.
fn softmax_top_k(logits: &[i32], allowed: impl Fn(usize) -> bool, top_k: usize) -> Vec<(i32, f32)> {
    let mut order: Vec<usize> = (0..logits.len()).filter(|&e| allowed(e)).collect();
    order.sort_by_key(|&e| (std::cmp::Reverse(logits[e]), e));
    order.truncate(top_k);
    let top = order.first().map_or(0, |&e| i64::from(logits[e]));
    let p: Vec<f64> = order
        .iter()
        .map(|&e| exp_eighths_down(top - i64::from(logits[e])))
        .collect();
    let sum: f64 = p.iter().sum();
    order
        .iter()
        .zip(&p)
        .map(|(&e, &pe)| (e as i32, (pe / sum) as f32))
        .collect()
}

/// Softmax routing restricted to the allowed experts, over logit rows `width` wide.
fn softmax_routing(
    seed: u64,
    tokens: usize,
    experts: usize,
    width: usize,
    top_k: usize,
    allowed: impl Fn(usize) -> bool + Copy,
) -> Routing {
    let logits = router_logits(seed, tokens, width);
    let mut ids = Vec::with_capacity(tokens * top_k);
    let mut weights = Vec::with_capacity(tokens * top_k);
    for row in logits.chunks_exact(width) {
        for (id, w) in softmax_top_k(row, allowed, top_k) {
            ids.push(id);
            weights.push(w);
        }
    }
    Routing {
        tokens,
        top_k,
        experts,
        ids,
        weights,
    }
}

/// `count` distinct experts of `0..experts` (a partial Fisher–Yates shuffle).
fn distinct_experts(picks: &mut RoutingPicks, experts: usize, count: usize) -> Vec<usize> {
    let mut all: Vec<usize> = (0..experts).collect();
    for i in 0..count {
        let j = i + picks.below((experts - i) as u32) as usize;
        all.swap(i, j);
    }
    all.truncate(count);
    all
}

/// The routing of `kind` for `tokens` tokens over `experts` global experts.
pub fn route(
    kind: RoutingKind,
    seed: u64,
    tokens: usize,
    experts: usize,
    top_k: usize,
) -> Result<Routing, RoutingError> {
    check_dims(tokens, experts, top_k)?;
    let distinct = |top_k: usize| {
        if top_k > experts {
            Err(RoutingError::TopKExceedsExperts { top_k, experts })
        } else {
            Ok(())
        }
    };
    let mut picks = RoutingPicks::new(seed);
    let routing = match kind {
        RoutingKind::Softmax => {
            distinct(top_k)?;
            softmax_routing(seed, tokens, experts, experts, top_k, |_| true)
        }
        RoutingKind::EmptyExperts => {
            distinct(top_k)?;
            if experts < top_k + 2 {
                return Err(RoutingError::TooFewExpertsToLeaveEmpty { top_k, experts });
            }
            let mut live = vec![false; experts];
            for e in distinct_experts(&mut picks, experts, top_k + 1) {
                live[e] = true;
            }
            softmax_routing(seed, tokens, experts, experts, top_k, |e| live[e])
        }
        RoutingKind::AllOnOneExpert => {
            let one = picks.below(experts as u32) as i32;
            let width = experts.max(top_k);
            let mut r = softmax_routing(seed, tokens, experts, width, top_k, |_| true);
            r.ids.fill(one);
            r
        }
        RoutingKind::SameExpertTwice => {
            distinct(top_k)?;
            if top_k < 2 {
                return Err(RoutingError::NeedsTwoSlots { top_k });
            }
            let mut r = softmax_routing(seed, tokens, experts, experts, top_k, |_| true);
            let t = picks.below(tokens as u32) as usize;
            r.ids[t * top_k + 1] = r.ids[t * top_k];
            r
        }
    };
    routing.validate()?;
    Ok(routing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eighth_powers_are_the_correctly_rounded_values() {
        for (f, &v) in EIGHTH_POWERS_OF_TWO.iter().enumerate() {
            let want = 2f64.powf(f as f64 / 8.0);
            approx::assert_abs_diff_eq!(v, want, epsilon = f64::EPSILON * want);
        }
        for d in 0..40 {
            let want = 2f64.powf(-(d as f64) / 8.0);
            let got = exp_eighths_down(d);
            approx::assert_abs_diff_eq!(got, want, epsilon = 2.0 * f64::EPSILON * want);
        }
    }

    #[test]
    fn ties_go_to_the_lower_index_and_weights_sum_to_one() {
        // Experts 1 and 3 tie at the top, 0 and 2 tie below them.
        let picked = softmax_top_k(&[0, 8, 0, 8], |_| true, 3);
        let ids: Vec<i32> = picked.iter().map(|p| p.0).collect();
        assert_eq!(ids, [1, 3, 0]);
        // p ∝ 1, 1, 2^(−1): weights 0.4, 0.4, 0.2.
        let w: Vec<f32> = picked.iter().map(|p| p.1).collect();
        assert_eq!(w, [0.4f32, 0.4, 0.2]);
    }
}
