//! The record of one target's block coverage (`coverage/<gfx>.json`): per entry, its blocks,
//! which of them each suite executed (a bitmap over the entry's blocks in address order) and
//! every block no suite executed, with its first instructions and source line.

use super::SuiteCoverage;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use w4a16_device::BlockCoverage;

/// One target's record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub target: String,
    /// The suites run, in order.
    pub suites: Vec<String>,
    /// Said when the run left cases out (a budget), else `None`.
    pub subset: Option<String>,
    /// Blocks over every entry.
    pub blocks: usize,
    pub executed: usize,
    pub entries: Vec<EntryRecord>,
}

/// One entry (kernel function) of a code object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EntryRecord {
    /// The code object (its kernel: `fused`, `fused_carrier`, …).
    pub kernel: String,
    pub entry: String,
    /// Of the machine code recorded: another hash means the record is stale.
    pub code_hash: String,
    pub blocks: usize,
    pub executed: usize,
    /// Per suite, the blocks it executed: bit i (byte i / 8, bit i % 8) for block i, in hex.
    pub executed_by: BTreeMap<String, String>,
    /// The blocks no suite executed, in address order; empty for an entry no suite launched
    /// (all its `blocks` are uncovered, and only `blocks = "all"` names them).
    pub uncovered: Vec<UncoveredBlock>,
}

/// A block no suite executed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UncoveredBlock {
    /// Byte offset of its first instruction from the entry, `+0x1a4`.
    pub offset: String,
    pub instructions: usize,
    pub line: Option<String>,
    pub first: Vec<String>,
}

/// `+0x1a4`.
pub fn offset_text(offset: u64) -> String {
    format!("+{offset:#x}")
}

/// Flags as a hex bitmap.
pub fn bitmap(flags: &[bool]) -> String {
    let mut bytes = vec![0u8; flags.len().div_ceil(8)];
    for (i, f) in flags.iter().enumerate() {
        if *f {
            bytes[i / 8] |= 1 << (i % 8);
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The flags of a hex bitmap over `n` blocks; `None` if it is not one.
pub fn flags(bitmap: &str, n: usize) -> Option<Vec<bool>> {
    if bitmap.len() != 2 * n.div_ceil(8) {
        return None;
    }
    let bytes: Vec<u8> = (0..bitmap.len() / 2)
        .map(|i| u8::from_str_radix(bitmap.get(2 * i..2 * i + 2)?, 16).ok())
        .collect::<Option<_>>()?;
    Some((0..n).map(|i| bytes[i / 8] & (1 << (i % 8)) != 0).collect())
}

impl Record {
    /// The record of the suites' runs (each over the same machine code).
    pub fn of(target: &str, runs: &[SuiteCoverage], subset: Option<String>) -> Record {
        let mut union: Option<BlockCoverage> = None;
        for r in runs {
            match &mut union {
                None => union = Some(r.blocks.clone()),
                Some(u) => u.union(&r.blocks),
            }
        }
        let union = union.unwrap_or_default();
        let entries: Vec<EntryRecord> = union
            .entries()
            .map(|(c, e)| {
                let by_suite = runs.iter().map(|r| {
                    let flags: Vec<bool> = r
                        .blocks
                        .entries()
                        .find(|(rc, re)| rc.kernel == c.kernel && re.entry == e.entry)
                        .map(|(_, re)| re.blocks.iter().map(|b| b.executed).collect())
                        .unwrap_or_else(|| vec![false; e.blocks.len()]);
                    (r.suite.clone(), bitmap(&flags))
                });
                EntryRecord {
                    kernel: c.kernel.clone(),
                    entry: e.entry.clone(),
                    code_hash: e.code_hash.clone(),
                    blocks: e.blocks.len(),
                    executed: e.executed(),
                    executed_by: by_suite.collect(),
                    uncovered: e
                        .blocks
                        .iter()
                        .filter(|b| !b.executed && e.executed() > 0)
                        .map(|b| UncoveredBlock {
                            offset: offset_text(b.offset),
                            instructions: b.instructions,
                            line: b.line.clone(),
                            first: b.first.clone(),
                        })
                        .collect(),
                }
            })
            .collect();
        Record {
            target: target.to_string(),
            suites: runs.iter().map(|r| r.suite.clone()).collect(),
            subset,
            blocks: entries.iter().map(|e| e.blocks).sum(),
            executed: entries.iter().map(|e| e.executed).sum(),
            entries,
        }
    }

    /// Executed blocks over all blocks, in percent.
    pub fn percent(&self) -> f64 {
        percent(self.executed, self.blocks)
    }
}

impl EntryRecord {
    pub fn percent(&self) -> f64 {
        percent(self.executed, self.blocks)
    }
}

/// `part` of `whole` in percent (100 for nothing to cover).
pub fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        100.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmaps_round_trip_and_refuse_other_lengths() {
        let f = vec![true, false, false, true, false, false, false, false, true];
        let b = bitmap(&f);
        assert_eq!(b, "0901");
        assert_eq!(flags(&b, 9), Some(f));
        assert_eq!(flags(&b, 17), None);
        assert_eq!(flags("zz", 3), None);
        assert_eq!(offset_text(0x1a4), "+0x1a4");
    }
}
