//! The exact check of a device's `moe_align` output against the ordering contract
//! ([`super::align`]). The expected output is unique, so any difference is an error; the checks
//! run from the coarsest to the finest so that the error names what is wrong, not merely where
//! the first differing entry is: `num_tokens_post_padded`, buffer sizes, the expert id of each
//! block, entry ranges (and the padding sentinel), the slot set (each slot exactly once), the
//! expert each slot sits under, and the order inside each run. [`check_align_tails`] then checks
//! that the entries past `num_tokens_post_padded` (and `expert_ids` past its blocks), which the
//! step must not write, still hold what they held before it ran.

use super::align::{AlignError, check_inputs, runs};
use super::map::ExpertMap;
use super::routing::Routing;
use std::fmt;

/// Which align output a size error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlignBuffer {
    SortedTokenIds,
    ExpertIds,
}

impl fmt::Display for AlignBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AlignBuffer::SortedTokenIds => "sorted_token_ids",
            AlignBuffer::ExpertIds => "expert_ids",
        })
    }
}

/// How a device's align output differs from the contract: the first problem found, naming the
/// block or entry and what was expected there.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AlignMismatch {
    #[error("align inputs: {0}")]
    Input(#[from] AlignError),
    #[error("num_tokens_post_padded: expected a multiple of block_m = {block_m}, got {got}")]
    TokensPostPaddedNotMultiple { got: i32, block_m: usize },
    #[error("num_tokens_post_padded: expected {expected}, got {got}")]
    TokensPostPadded { expected: usize, got: i32 },
    #[error("{buffer}: expected at least {needed} entries, got {got}")]
    BufferTooShort {
        buffer: AlignBuffer,
        needed: usize,
        got: usize,
    },
    #[error("expert_ids[{block}]: expected {expected}, got {got}")]
    WrongExpertId {
        block: usize,
        expected: i32,
        got: i32,
    },
    #[error("sorted_token_ids[{entry}] is padding: expected the sentinel {expected}, got {got}")]
    SentinelWrong {
        entry: usize,
        expected: i32,
        got: i32,
    },
    #[error(
        "sorted_token_ids[{entry}]: expected a slot 0..{slots} or the sentinel {slots}, got {got}"
    )]
    SlotOutOfRange {
        entry: usize,
        got: i32,
        slots: usize,
    },
    #[error("sorted_token_ids: slot {slot} at entries {first_entry} and {entry}, expected once")]
    DuplicateSlot {
        slot: usize,
        first_entry: usize,
        entry: usize,
    },
    #[error("sorted_token_ids: slot {slot} (expert {expert}) is missing")]
    MissingSlot { slot: usize, expert: usize },
    #[error(
        "sorted_token_ids[{entry}]: slot {slot} is routed to expert {slot_expert}, but sits in the run of expert {run_expert}"
    )]
    SlotInWrongExpert {
        entry: usize,
        slot: usize,
        run_expert: usize,
        slot_expert: usize,
    },
    #[error(
        "sorted_token_ids[{entry}]: slot {slot} follows slot {previous} in the run of expert {expert}, expected ascending slots"
    )]
    SlotOrder {
        entry: usize,
        slot: usize,
        previous: usize,
        expert: usize,
    },
    #[error(
        "sorted_token_ids[{entry}]: slot {slot} follows padding in the run of expert {expert}, expected the slots first"
    )]
    PaddingBeforeSlot {
        entry: usize,
        slot: usize,
        expert: usize,
    },
    #[error(
        "sorted_token_ids[{entry}] is past the padded length {padded}: expected it untouched (the poison {poison}), got {got}"
    )]
    WrittenPastPaddedLength {
        entry: usize,
        padded: usize,
        poison: i32,
        got: i32,
    },
    #[error(
        "expert_ids[{block}] is past the last block ({blocks} blocks): expected it untouched (the poison {poison}), got {got}"
    )]
    WrittenPastLastBlock {
        block: usize,
        blocks: usize,
        poison: i32,
        got: i32,
    },
    /// Unreachable when the checks above are complete; kept so that the checker reports instead
    /// of trusting that argument.
    #[error("sorted_token_ids[{entry}]: expected {expected}, got {got}")]
    EntryMismatch {
        entry: usize,
        expected: i32,
        got: i32,
    },
}

/// Checks a device's align output exactly (see the module doc).
pub fn check_align(
    routing: &Routing,
    block_m: usize,
    map: Option<&ExpertMap>,
    sorted: &[i32],
    expert_ids: &[i32],
    ntpp: i32,
) -> Result<(), AlignMismatch> {
    check_inputs(routing, block_m, map)?;
    let runs = runs(routing, map);
    let s = routing.slots();
    let sentinel = s as i32;

    // Expected layout: per block, the run it belongs to; per entry, the expected value.
    let mut block_run = Vec::new();
    let mut expected = Vec::new();
    for (ri, run) in runs.iter().enumerate() {
        let blocks = run.slots.len().div_ceil(block_m);
        block_run.extend(std::iter::repeat_n(ri, blocks));
        expected.extend(run.slots.iter().map(|&x| x as i32));
        expected.resize(block_run.len() * block_m, sentinel);
    }
    let want_ntpp = expected.len();

    if ntpp >= 0 && !(ntpp as usize).is_multiple_of(block_m) {
        return Err(AlignMismatch::TokensPostPaddedNotMultiple { got: ntpp, block_m });
    }
    if usize::try_from(ntpp) != Ok(want_ntpp) {
        return Err(AlignMismatch::TokensPostPadded {
            expected: want_ntpp,
            got: ntpp,
        });
    }
    let blocks = block_run.len();
    for (buffer, needed, got) in [
        (AlignBuffer::SortedTokenIds, want_ntpp, sorted.len()),
        (AlignBuffer::ExpertIds, blocks, expert_ids.len()),
    ] {
        if got < needed {
            return Err(AlignMismatch::BufferTooShort {
                buffer,
                needed,
                got,
            });
        }
    }
    let sorted = &sorted[..want_ntpp];

    for (block, (&got, &ri)) in expert_ids.iter().zip(&block_run).enumerate() {
        if got != runs[ri].block_id {
            return Err(AlignMismatch::WrongExpertId {
                block,
                expected: runs[ri].block_id,
                got,
            });
        }
    }

    for (entry, (&got, &want)) in sorted.iter().zip(&expected).enumerate() {
        if !(0..=sentinel).contains(&got) {
            return Err(if want == sentinel {
                AlignMismatch::SentinelWrong {
                    entry,
                    expected: sentinel,
                    got,
                }
            } else {
                AlignMismatch::SlotOutOfRange {
                    entry,
                    got,
                    slots: s,
                }
            });
        }
    }

    let mut seen_at: Vec<Option<usize>> = vec![None; s];
    for (entry, &got) in sorted.iter().enumerate() {
        if got == sentinel {
            continue;
        }
        let slot = got as usize;
        if let Some(first_entry) = seen_at[slot].replace(entry) {
            return Err(AlignMismatch::DuplicateSlot {
                slot,
                first_entry,
                entry,
            });
        }
    }
    if let Some(slot) = seen_at.iter().position(Option::is_none) {
        return Err(AlignMismatch::MissingSlot {
            slot,
            expert: routing.expert_of(slot),
        });
    }

    for (entry, &got) in sorted.iter().enumerate() {
        let run_expert = runs[block_run[entry / block_m]].global;
        if got != sentinel && routing.expert_of(got as usize) != run_expert {
            return Err(AlignMismatch::SlotInWrongExpert {
                entry,
                slot: got as usize,
                run_expert,
                slot_expert: routing.expert_of(got as usize),
            });
        }
    }

    let mut start = 0;
    for run in &runs {
        let len = run.slots.len().div_ceil(block_m) * block_m;
        let (mut previous, mut padding) = (None::<usize>, false);
        for (entry, &got) in sorted.iter().enumerate().skip(start).take(len) {
            if got == sentinel {
                padding = true;
                continue;
            }
            let slot = got as usize;
            if padding {
                return Err(AlignMismatch::PaddingBeforeSlot {
                    entry,
                    slot,
                    expert: run.global,
                });
            }
            if let Some(previous) = previous.filter(|&p| p >= slot) {
                return Err(AlignMismatch::SlotOrder {
                    entry,
                    slot,
                    previous,
                    expert: run.global,
                });
            }
            previous = Some(slot);
        }
        start += len;
    }

    match sorted.iter().zip(&expected).position(|(g, w)| g != w) {
        Some(entry) => Err(AlignMismatch::EntryMismatch {
            entry,
            expected: expected[entry],
            got: sorted[entry],
        }),
        None => Ok(()),
    }
}

/// The align outputs' tails: every `sorted_token_ids` entry at or past the padded length `padded`
/// still holds `poison_sorted`, every `expert_ids` entry at or past block `padded / block_m` still
/// holds `poison_expert` (what the buffers were filled with before the step ran). Meaningful after
/// [`check_align`] accepted `padded`; the first written entry is named.
pub fn check_align_tails(
    sorted: &[i32],
    expert_ids: &[i32],
    padded: usize,
    block_m: usize,
    poison_sorted: i32,
    poison_expert: i32,
) -> Result<(), AlignMismatch> {
    let tail = |values: &[i32], from: usize, poison: i32| {
        values
            .iter()
            .enumerate()
            .skip(from)
            .find(|&(_, &v)| v != poison)
            .map(|(i, &v)| (i, v))
    };
    if let Some((entry, got)) = tail(sorted, padded, poison_sorted) {
        return Err(AlignMismatch::WrittenPastPaddedLength {
            entry,
            padded,
            poison: poison_sorted,
            got,
        });
    }
    let blocks = padded / block_m.max(1);
    if let Some((block, got)) = tail(expert_ids, blocks, poison_expert) {
        return Err(AlignMismatch::WrittenPastLastBlock {
            block,
            blocks,
            poison: poison_expert,
            got,
        });
    }
    Ok(())
}
