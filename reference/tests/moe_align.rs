//! Routing and the align step: the routings are what they claim, the reference align equals an
//! independent sort-and-pad oracle and satisfies the exact checker over the routing grid, and
//! each kind of corruption of a correct output is caught with the variant that names it.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use w4a16_reference::data::router_logits;
use w4a16_reference::moe::{
    AlignBuffer, AlignError, AlignMismatch, Aligned, ExpertMap, MapKind, Routing, RoutingError,
    RoutingKind, align_capacity, check_align, check_align_tails, moe_align, route,
};

const EXPERTS: [usize; 4] = [8, 64, 128, 257];
const TOP_K: [usize; 4] = [1, 2, 6, 8];
const TOKENS: [usize; 4] = [1, 5, 33, 256];
const BLOCK_M: [usize; 3] = [16, 32, 64];

/// The align written differently from the crate: a stable sort of the slots by expert, then
/// each expert's group padded.
fn oracle_align(r: &Routing, block_m: usize, map: Option<&ExpertMap>) -> Aligned {
    let s = r.slots();
    let mut order: Vec<usize> = (0..s).collect();
    order.sort_by_key(|&slot| r.ids[slot]);
    let mut sorted = Vec::new();
    let mut expert_ids = Vec::new();
    let mut i = 0;
    while i < s {
        let e = r.ids[order[i]];
        let group: Vec<usize> = order[i..]
            .iter()
            .copied()
            .take_while(|&x| r.ids[x] == e)
            .collect();
        i += group.len();
        let padded = group.len().div_ceil(block_m) * block_m;
        for j in 0..padded {
            sorted.push(group.get(j).map_or(s as i32, |&x| x as i32));
        }
        let id = map.map_or(e, |m| m.local_of[e as usize]);
        expert_ids.extend(std::iter::repeat_n(id, padded / block_m));
    }
    Aligned {
        num_tokens_post_padded: sorted.len(),
        sorted_token_ids: sorted,
        expert_ids,
    }
}

fn maps(experts: usize) -> [Option<ExpertMap>; 3] {
    [
        None,
        Some(ExpertMap::new(MapKind::All, experts).unwrap()),
        Some(ExpertMap::new(MapKind::EveryOther, experts).unwrap()),
    ]
}

/// The routing of `kind`, or the typed refusal the combination must get.
fn route_or_refusal(kind: RoutingKind, seed: u64, t: usize, e: usize, k: usize) -> Option<Routing> {
    let got = route(kind, seed, t, e, k);
    let refusal = match kind {
        RoutingKind::AllOnOneExpert => None,
        _ if k > e => Some(RoutingError::TopKExceedsExperts {
            top_k: k,
            experts: e,
        }),
        RoutingKind::EmptyExperts if e < k + 2 => Some(RoutingError::TooFewExpertsToLeaveEmpty {
            top_k: k,
            experts: e,
        }),
        RoutingKind::SameExpertTwice if k < 2 => Some(RoutingError::NeedsTwoSlots { top_k: k }),
        _ => None,
    };
    match refusal {
        Some(err) => {
            assert_eq!(got, Err(err), "{kind} T={t} E={e} k={k}");
            None
        }
        None => Some(got.unwrap_or_else(|e| panic!("{kind}: {e}"))),
    }
}

/// Device buffers as large as the capacity, with garbage past the valid part.
fn device_buffers(a: &Aligned, r: &Routing, block_m: usize) -> (Vec<i32>, Vec<i32>) {
    let cap = align_capacity(r.slots(), r.experts, block_m);
    let mut sorted = a.sorted_token_ids.clone();
    sorted.resize(cap.sorted, -7);
    let mut ids = a.expert_ids.clone();
    ids.resize(cap.blocks, 999);
    (sorted, ids)
}

#[test]
fn reference_align_matches_the_oracle_and_the_checker_over_the_grid() {
    let mut checked = 0;
    for e in EXPERTS {
        let maps = maps(e);
        for k in TOP_K {
            for t in TOKENS {
                for kind in RoutingKind::ALL {
                    let seed = (e * 1_000_000 + k * 10_000 + t) as u64;
                    let Some(r) = route_or_refusal(kind, seed, t, e, k) else {
                        continue;
                    };
                    for bm in BLOCK_M {
                        for map in &maps {
                            let map = map.as_ref();
                            let a = moe_align(&r, bm, map).unwrap();
                            assert_eq!(a, oracle_align(&r, bm, map), "{kind} E={e} k={k} T={t}");
                            let cap = align_capacity(r.slots(), e, bm);
                            assert!(a.num_tokens_post_padded <= cap.sorted);
                            assert!(a.expert_ids.len() <= cap.blocks);
                            assert_eq!(cap.sorted, cap.blocks * bm);
                            let (sorted, ids) = device_buffers(&a, &r, bm);
                            let ntpp = a.num_tokens_post_padded as i32;
                            assert_eq!(check_align(&r, bm, map, &sorted, &ids, ntpp), Ok(()));
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    // Every combination ran but the 20 refused routings (empty-experts with E = 8, top_k = 8;
    // same-expert-twice with top_k = 1), each under 3 block sizes and 3 maps.
    assert_eq!(checked, (256 - 20) * 9);
}

/// Worst case for the capacity: every expert gets one slot, so every run pads block_m − 1.
#[test]
fn capacity_is_reached_when_every_expert_has_one_slot() {
    for (e, bm) in [(8, 16), (64, 32), (257, 64)] {
        let r = Routing {
            tokens: e,
            top_k: 1,
            experts: e,
            ids: (0..e as i32).collect(),
            weights: vec![1.0; e],
        };
        let a = moe_align(&r, bm, None).unwrap();
        let cap = align_capacity(e, e, bm);
        assert_eq!(a.num_tokens_post_padded, e * bm);
        assert!(
            a.num_tokens_post_padded <= cap.sorted && cap.sorted < a.num_tokens_post_padded + bm
        );
    }
    assert_eq!(align_capacity(10, 4, 0).sorted, 0);
}

#[test]
fn softmax_routing_is_the_top_k_of_the_logits() {
    let (t, e, k) = (40, 64, 8);
    let r = route(RoutingKind::Softmax, 11, t, e, k).unwrap();
    assert_eq!(r, route(RoutingKind::Softmax, 11, t, e, k).unwrap());
    assert_ne!(r.ids, route(RoutingKind::Softmax, 12, t, e, k).unwrap().ids);
    let logits = router_logits(11, t, e);
    assert!(logits.iter().all(|l| l.abs() <= 96));
    let mut ties = 0;
    for tok in 0..t {
        let row = &logits[tok * e..(tok + 1) * e];
        let ids = &r.ids[tok * k..(tok + 1) * k];
        let w = &r.weights[tok * k..(tok + 1) * k];
        // Descending logit, ties to the lower index, and nothing left out beats the last pick.
        for p in ids.windows(2) {
            let (a, b) = (p[0] as usize, p[1] as usize);
            assert!(row[a] > row[b] || (row[a] == row[b] && a < b));
            ties += usize::from(row[a] == row[b]);
        }
        let last = *ids.last().unwrap() as usize;
        for (x, &l) in row.iter().enumerate() {
            if !ids.contains(&(x as i32)) {
                assert!(l < row[last] || (l == row[last] && x > last));
            }
        }
        // Weights: exp of the logit differences (ln2/8 units), renormalised.
        let p: Vec<f64> = ids
            .iter()
            .map(|&x| 2f64.powf(f64::from(row[x as usize] - row[ids[0] as usize]) / 8.0))
            .collect();
        let sum: f64 = p.iter().sum();
        for (wi, pi) in w.iter().zip(&p) {
            approx::assert_abs_diff_eq!(f64::from(*wi), pi / sum, epsilon = 1e-7 * (pi / sum));
        }
        assert!(w.windows(2).all(|p| p[0] >= p[1]));
        let total: f32 = w.iter().sum();
        approx::assert_abs_diff_eq!(total, 1.0, epsilon = 1e-6);
    }
    assert!(ties > 0, "the seed exercises the tie rule");
}

#[test]
fn hand_routings_are_what_they_claim() {
    let (t, e, k) = (33, 64, 6);
    let per_token_distinct = |r: &Routing, skip: Option<usize>| {
        for tok in 0..t {
            if Some(tok) == skip {
                continue;
            }
            let mut ids = r.ids[tok * k..(tok + 1) * k].to_vec();
            ids.sort();
            ids.dedup();
            assert_eq!(ids.len(), k, "token {tok}");
        }
    };
    let used = |r: &Routing| {
        let mut u = r.ids.clone();
        u.sort();
        u.dedup();
        u
    };

    let empty = route(RoutingKind::EmptyExperts, 3, t, e, k).unwrap();
    per_token_distinct(&empty, None);
    assert_eq!(
        used(&empty).len(),
        k + 1,
        "top_k + 1 live experts, the rest empty"
    );

    let one = route(RoutingKind::AllOnOneExpert, 3, t, e, k).unwrap();
    assert_eq!(used(&one).len(), 1);
    // top_k may exceed E here: the same expert top_k times.
    let one_small = route(RoutingKind::AllOnOneExpert, 3, 5, 2, 8).unwrap();
    assert_eq!(used(&one_small).len(), 1);
    assert_eq!(one_small.slots(), 40);

    let twice = route(RoutingKind::SameExpertTwice, 3, t, e, k).unwrap();
    let soft = route(RoutingKind::Softmax, 3, t, e, k).unwrap();
    let changed: Vec<usize> = (0..t * k)
        .filter(|&s| twice.ids[s] != soft.ids[s])
        .collect();
    assert_eq!(changed.len(), 1, "exactly one slot rerouted");
    let tok = changed[0] / k;
    assert_eq!(changed[0], tok * k + 1);
    assert_eq!(twice.ids[tok * k], twice.ids[tok * k + 1]);
    assert_eq!(twice.weights, soft.weights);
    per_token_distinct(&twice, Some(tok));

    for kind in RoutingKind::ALL {
        assert_eq!(RoutingKind::parse(kind.name()), Some(kind));
    }
    assert_eq!(
        RoutingKind::parse("one-expert"),
        Some(RoutingKind::AllOnOneExpert)
    );
    assert_eq!(MapKind::parse("every-other"), Some(MapKind::EveryOther));
}

#[test]
fn bad_routing_input_gets_typed_errors() {
    assert_eq!(
        route(RoutingKind::Softmax, 1, 0, 8, 2),
        Err(RoutingError::ZeroTokens)
    );
    assert_eq!(
        route(RoutingKind::Softmax, 1, 4, 0, 2),
        Err(RoutingError::ZeroExperts)
    );
    assert_eq!(
        route(RoutingKind::Softmax, 1, 4, 8, 0),
        Err(RoutingError::ZeroTopK)
    );
    assert_eq!(
        route(RoutingKind::Softmax, 1, 4, 8, 9),
        Err(RoutingError::TopKExceedsExperts {
            top_k: 9,
            experts: 8
        })
    );
    assert_eq!(
        route(RoutingKind::Softmax, 1, usize::MAX / 2, 8, 4),
        Err(RoutingError::TooManySlots {
            tokens: usize::MAX / 2,
            top_k: 4
        })
    );
    let mut r = route(RoutingKind::Softmax, 1, 4, 8, 2).unwrap();
    r.ids[5] = 8;
    assert_eq!(
        r.validate(),
        Err(RoutingError::ExpertOutOfRange {
            slot: 5,
            id: 8,
            experts: 8
        })
    );
    r.ids[5] = 0;
    r.weights[2] = f32::NAN;
    assert!(matches!(
        r.validate(),
        Err(RoutingError::WeightNotFinite { slot: 2, .. })
    ));
    r.weights.pop();
    assert_eq!(
        r.validate(),
        Err(RoutingError::Length {
            tensor: "topk_weights",
            expected: 8,
            got: 7
        })
    );
    // The align step refuses the same inputs.
    assert_eq!(
        moe_align(&r, 16, None),
        Err(AlignError::Routing(RoutingError::Length {
            tensor: "topk_weights",
            expected: 8,
            got: 7
        }))
    );
    let r = route(RoutingKind::Softmax, 1, 4, 8, 2).unwrap();
    let map = ExpertMap::new(MapKind::All, 9).unwrap();
    assert_eq!(
        moe_align(&r, 16, Some(&map)),
        Err(AlignError::MapExperts { map: 9, routing: 8 })
    );
    assert_eq!(
        check_align(&r, 0, None, &[], &[], 0),
        Err(AlignMismatch::Input(AlignError::ZeroBlockM))
    );
}

/// A correct device output and where its runs are.
struct Setup {
    r: Routing,
    bm: usize,
    map: Option<ExpertMap>,
    sorted: Vec<i32>,
    ids: Vec<i32>,
    ntpp: i32,
    /// `(first entry, slot count, padded length, global expert)` per run.
    runs: Vec<(usize, usize, usize, usize)>,
}

impl Setup {
    fn new(
        kind: RoutingKind,
        seed: u64,
        t: usize,
        e: usize,
        k: usize,
        bm: usize,
        every_other: bool,
    ) -> Self {
        let r = route(kind, seed, t, e, k).unwrap();
        let map = every_other.then(|| ExpertMap::new(MapKind::EveryOther, e).unwrap());
        let a = moe_align(&r, bm, map.as_ref()).unwrap();
        let (sorted, ids) = device_buffers(&a, &r, bm);
        let mut runs = Vec::new();
        let mut at = 0;
        while at < a.num_tokens_post_padded {
            let expert = r.ids[a.sorted_token_ids[at] as usize] as usize;
            let count = (0..r.slots())
                .filter(|&s| r.ids[s] as usize == expert)
                .count();
            let len = count.div_ceil(bm) * bm;
            runs.push((at, count, len, expert));
            at += len;
        }
        Setup {
            ntpp: a.num_tokens_post_padded as i32,
            r,
            bm,
            map,
            sorted,
            ids,
            runs,
        }
    }

    fn check(&self, sorted: &[i32], ids: &[i32], ntpp: i32) -> Result<(), AlignMismatch> {
        check_align(&self.r, self.bm, self.map.as_ref(), sorted, ids, ntpp)
    }

    fn sentinel(&self) -> i32 {
        self.r.slots() as i32
    }
}

fn setups() -> Vec<Setup> {
    let mut v = Vec::new();
    for (i, (kind, t, e, k, bm)) in [
        (RoutingKind::Softmax, 33, 8, 2, 16),
        (RoutingKind::Softmax, 256, 64, 6, 32),
        (RoutingKind::EmptyExperts, 33, 128, 8, 16),
        (RoutingKind::SameExpertTwice, 5, 257, 8, 64),
        (RoutingKind::Softmax, 256, 257, 8, 64),
    ]
    .into_iter()
    .enumerate()
    {
        for every_other in [false, true] {
            v.push(Setup::new(kind, 100 + i as u64, t, e, k, bm, every_other));
        }
    }
    v
}

/// Each corruption is drawn from `rng` in a fixed order (the steps below, trial after trial), so
/// a failure names the same corruption on every run.
#[test]
fn corruptions_are_caught_with_the_variant_that_names_them() {
    let mut rng = ChaCha8Rng::seed_from_u64(2024);
    for su in setups() {
        assert_eq!(su.check(&su.sorted, &su.ids, su.ntpp), Ok(()));
        for _trial in 0..8 {
            swapped_experts(&su, &mut rng);
            corrupted_padding(&su, &mut rng);
            wrong_tokens_post_padded(&su);
            wrong_expert_id(&su, &mut rng);
            dropped_slot(&su, &mut rng);
            slots_out_of_order(&su, &mut rng);
            padding_before_slot(&su);
        }
        short_buffers(&su);
    }
}

/// Two slots of different experts swapped (the draws are made with one run too).
fn swapped_experts(su: &Setup, rng: &mut ChaCha8Rng) {
    let ntpp = su.ntpp;
    let (a, b) = {
        let ra = rng.random_range(0..su.runs.len());
        let mut rb = rng.random_range(0..su.runs.len());
        while su.runs.len() > 1 && rb == ra {
            rb = rng.random_range(0..su.runs.len());
        }
        let pick =
            |r: usize, rng: &mut ChaCha8Rng| su.runs[r].0 + rng.random_range(0..su.runs[r].1);
        (pick(ra, rng), pick(rb, rng))
    };
    if su.runs.len() > 1 {
        let mut bad = su.sorted.clone();
        bad.swap(a, b);
        let entry = a.min(b);
        assert!(
            matches!(su.check(&bad, &su.ids, ntpp), Err(AlignMismatch::SlotInWrongExpert { entry: x, .. }) if x == entry),
            "swap {a} {b}: {:?}",
            su.check(&bad, &su.ids, ntpp)
        );
    }
}

/// A wrong value in a padding entry, and a slot copied into padding (duplicated).
fn corrupted_padding(su: &Setup, rng: &mut ChaCha8Rng) {
    let (sentinel, ntpp) = (su.sentinel(), su.ntpp);
    let padding: Vec<usize> = (0..ntpp as usize)
        .filter(|&i| su.sorted[i] == sentinel)
        .collect();
    if padding.is_empty() {
        return;
    }
    let at = padding[rng.random_range(0..padding.len())];
    for wrong in [sentinel + 1, -1, i32::MIN] {
        let mut bad = su.sorted.clone();
        bad[at] = wrong;
        assert_eq!(
            su.check(&bad, &su.ids, ntpp),
            Err(AlignMismatch::SentinelWrong {
                entry: at,
                expected: sentinel,
                got: wrong
            })
        );
    }
    let slot_at = su.runs[rng.random_range(0..su.runs.len())].0;
    let mut bad = su.sorted.clone();
    bad[at] = bad[slot_at];
    let (first, second) = (slot_at.min(at), slot_at.max(at));
    assert_eq!(
        su.check(&bad, &su.ids, ntpp),
        Err(AlignMismatch::DuplicateSlot {
            slot: su.sorted[slot_at] as usize,
            first_entry: first,
            entry: second
        })
    );
}

/// num_tokens_post_padded off by one, and off by a block.
fn wrong_tokens_post_padded(su: &Setup) {
    let (ntpp, bm) = (su.ntpp, su.bm as i32);
    for got in [ntpp + 1, ntpp - 1] {
        assert_eq!(
            su.check(&su.sorted, &su.ids, got),
            Err(AlignMismatch::TokensPostPaddedNotMultiple {
                got,
                block_m: su.bm
            })
        );
    }
    for got in [ntpp + bm, ntpp - bm, -bm] {
        assert_eq!(
            su.check(&su.sorted, &su.ids, got),
            Err(AlignMismatch::TokensPostPadded {
                expected: ntpp as usize,
                got
            })
        );
    }
}

/// A wrong expert id: another expert, then the "no expert" id (or one below it).
fn wrong_expert_id(su: &Setup, rng: &mut ChaCha8Rng) {
    let ntpp = su.ntpp;
    let block = rng.random_range(0..ntpp as usize / su.bm);
    let mut ids = su.ids.clone();
    let expected = ids[block];
    ids[block] = if expected == -1 {
        0
    } else {
        expected + 1 + rng.random_range(0..3)
    };
    assert_eq!(
        su.check(&su.sorted, &ids, ntpp),
        Err(AlignMismatch::WrongExpertId {
            block,
            expected,
            got: ids[block]
        })
    );
    ids[block] = -1 - i32::from(expected == -1);
    assert!(
        matches!(su.check(&su.sorted, &ids, ntpp), Err(AlignMismatch::WrongExpertId { block: b, .. }) if b == block)
    );
}

/// A dropped slot (its entry left as padding), and at the same entry a slot value out of range.
fn dropped_slot(su: &Setup, rng: &mut ChaCha8Rng) {
    let (s, sentinel, ntpp) = (su.r.slots(), su.sentinel(), su.ntpp);
    let run = su.runs[rng.random_range(0..su.runs.len())];
    let at = run.0 + rng.random_range(0..run.1);
    let mut bad = su.sorted.clone();
    bad[at] = sentinel;
    assert_eq!(
        su.check(&bad, &su.ids, ntpp),
        Err(AlignMismatch::MissingSlot {
            slot: su.sorted[at] as usize,
            expert: run.3
        })
    );
    let mut bad = su.sorted.clone();
    bad[at] = sentinel + 5;
    assert_eq!(
        su.check(&bad, &su.ids, ntpp),
        Err(AlignMismatch::SlotOutOfRange {
            entry: at,
            got: sentinel + 5,
            slots: s
        })
    );
}

/// Two slots of one run out of order.
fn slots_out_of_order(su: &Setup, rng: &mut ChaCha8Rng) {
    let Some(run) = su
        .runs
        .iter()
        .filter(|r| r.1 >= 2)
        .nth(rng.random_range(0..4))
    else {
        return;
    };
    let i = run.0 + rng.random_range(0..run.1 - 1);
    let mut bad = su.sorted.clone();
    bad.swap(i, i + 1);
    assert_eq!(
        su.check(&bad, &su.ids, su.ntpp),
        Err(AlignMismatch::SlotOrder {
            entry: i + 1,
            slot: su.sorted[i] as usize,
            previous: su.sorted[i + 1] as usize,
            expert: run.3
        })
    );
}

/// A run's last slot moved behind its padding.
fn padding_before_slot(su: &Setup) {
    let Some(run) = su.runs.iter().find(|r| r.2 > r.1) else {
        return;
    };
    let last = run.0 + run.1 - 1;
    let end = run.0 + run.2 - 1;
    let mut bad = su.sorted.clone();
    bad.swap(last, end);
    assert_eq!(
        su.check(&bad, &su.ids, su.ntpp),
        Err(AlignMismatch::PaddingBeforeSlot {
            entry: end,
            slot: su.sorted[last] as usize,
            expert: run.3
        })
    );
}

/// Buffers shorter than num_tokens_post_padded asks for; what lies past the valid part is not
/// read.
fn short_buffers(su: &Setup) {
    let ntpp = su.ntpp;
    assert_eq!(
        su.check(&su.sorted[..ntpp as usize - 1], &su.ids, ntpp),
        Err(AlignMismatch::BufferTooShort {
            buffer: AlignBuffer::SortedTokenIds,
            needed: ntpp as usize,
            got: ntpp as usize - 1
        })
    );
    let blocks = ntpp as usize / su.bm;
    assert_eq!(
        su.check(&su.sorted, &su.ids[..blocks - 1], ntpp),
        Err(AlignMismatch::BufferTooShort {
            buffer: AlignBuffer::ExpertIds,
            needed: blocks,
            got: blocks - 1
        })
    );
    let mut tail = su.sorted.clone();
    tail.truncate(ntpp as usize);
    assert_eq!(su.check(&tail, &su.ids[..blocks], ntpp), Ok(()));
}

/// The tails the step must not write: untouched tails pass; a sentinel one entry past the padded
/// length, or an expert id one block past the last, fails naming the entry, the poison and the
/// value found.
#[test]
fn align_tails_must_keep_their_poison() {
    let r = route(RoutingKind::Softmax, 3, 5, 8, 2).unwrap();
    let bm = 16;
    let a = moe_align(&r, bm, None).unwrap();
    let (sorted, ids) = device_buffers(&a, &r, bm);
    let padded = a.sorted_token_ids.len();
    assert!(
        padded < sorted.len() && padded / bm < ids.len(),
        "room past the padded length"
    );
    assert_eq!(
        check_align_tails(&sorted, &ids, padded, bm, -7, 999),
        Ok(())
    );

    let mut past = sorted.clone();
    past[padded] = r.slots() as i32;
    assert_eq!(
        check_align_tails(&past, &ids, padded, bm, -7, 999),
        Err(AlignMismatch::WrittenPastPaddedLength {
            entry: padded,
            padded,
            poison: -7,
            got: r.slots() as i32
        })
    );
    let mut block = ids.clone();
    block[padded / bm] = 0;
    let e = check_align_tails(&sorted, &block, padded, bm, -7, 999).unwrap_err();
    assert_eq!(
        e,
        AlignMismatch::WrittenPastLastBlock {
            block: padded / bm,
            blocks: padded / bm,
            poison: 999,
            got: 0
        }
    );
    assert!(e.to_string().contains("past the last block"), "{e}");
    // The logical part is not the tails check's business: a wrong entry there still passes it.
    let mut inside = sorted;
    inside[0] = 12345;
    assert_eq!(
        check_align_tails(&inside, &ids, padded, bm, -7, 999),
        Ok(())
    );
}
