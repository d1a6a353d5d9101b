//! Machine-code coverage of one target on the ISA emulator: for every entry (kernel function)
//! of every code object the kernel set builds for the target, its basic blocks
//! (`w4a16_emu::blocks`) and whether a recording run executed each, with the first instructions
//! and the source line (the DWARF line table) of each. The union over a run's launches is kept
//! by the emulator device (`DeviceRequest::recording_blocks`) and read with
//! [`crate::DeviceInfo::block_coverage`].
//!
//! Not the emulator's instruction-set table (`emu/coverage/<gfx>.md`, which instructions the
//! emulator implements): this says which parts of the kernels' machine code a run reached.

use serde::{Deserialize, Serialize};

/// How many instructions of a block its record keeps (the report shows them).
pub const FIRST_INSTRUCTIONS: usize = 3;

/// Every entry of one target's code objects, with its blocks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockCoverage {
    pub target: String,
    /// In the kernel set's declaration order.
    pub code_objects: Vec<CodeObjectBlocks>,
}

/// One code object (named by its kernel: `fused`, `fused_carrier`, …).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CodeObjectBlocks {
    pub kernel: String,
    /// In symbol-table order.
    pub entries: Vec<EntryBlocks>,
}

/// One entry (kernel function) of a code object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EntryBlocks {
    pub entry: String,
    /// FNV-1a of the entry's machine code (addresses relative to the entry, encodings): a
    /// record of other machine code is stale.
    pub code_hash: String,
    /// In address order.
    pub blocks: Vec<BlockInfo>,
}

/// One basic block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlockInfo {
    /// Byte offset of its first instruction from the entry.
    pub offset: u64,
    pub instructions: usize,
    pub executed: bool,
    /// Its first [`FIRST_INSTRUCTIONS`] instructions, as the disassembler prints them.
    pub first: Vec<String>,
    /// `kernels/hip/skinny.hip:123`: the first of its instructions the line table places.
    pub line: Option<String>,
}

impl EntryBlocks {
    /// Blocks executed.
    pub fn executed(&self) -> usize {
        self.blocks.iter().filter(|b| b.executed).count()
    }
}

impl BlockCoverage {
    /// Every entry, with the code object it is in.
    pub fn entries(&self) -> impl Iterator<Item = (&CodeObjectBlocks, &EntryBlocks)> {
        self.code_objects
            .iter()
            .flat_map(|c| c.entries.iter().map(move |e| (c, e)))
    }

    /// Adds what `other` (of the same machine code) executed; an entry whose code differs keeps
    /// this one's blocks.
    pub fn union(&mut self, other: &BlockCoverage) {
        for c in &mut self.code_objects {
            let Some(oc) = other.code_objects.iter().find(|o| o.kernel == c.kernel) else {
                continue;
            };
            for e in &mut c.entries {
                let Some(oe) = oc.entries.iter().find(|o| o.entry == e.entry) else {
                    continue;
                };
                if oe.code_hash != e.code_hash {
                    continue;
                }
                for (b, ob) in e.blocks.iter_mut().zip(&oe.blocks) {
                    b.executed |= ob.executed;
                }
            }
        }
    }
}

/// FNV-1a over words.
pub fn fnv(words: impl IntoIterator<Item = u64>) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for w in words {
        for b in w.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

#[cfg(feature = "emu")]
pub(crate) mod from_program {
    use super::*;
    use w4a16_emu::blocks::{Executed, blocks_of};
    use w4a16_emu::lines::LineTable;
    use w4a16_emu::program::{Kernel, Program};

    /// The blocks of every entry of `program`, executed as `executed` (by entry) says.
    pub(crate) fn code_object(
        kernel: &str,
        program: &Program,
        lines: &LineTable,
        mut executed: impl FnMut(&str) -> Option<Executed>,
    ) -> CodeObjectBlocks {
        CodeObjectBlocks {
            kernel: kernel.to_string(),
            entries: program
                .kernels
                .iter()
                .map(|k| entry(k, lines, executed(&k.name).as_ref()))
                .collect(),
        }
    }

    fn entry(k: &Kernel, lines: &LineTable, executed: Option<&Executed>) -> EntryBlocks {
        let base = k.descriptor.entry;
        let blocks = blocks_of(k);
        let ran = executed.map_or_else(|| vec![false; blocks.len()], |e| e.blocks(&blocks));
        let code_hash = fnv(k
            .code
            .iter()
            .flat_map(|i| std::iter::once(i.addr - base).chain(i.words.iter().map(|w| *w as u64))));
        EntryBlocks {
            entry: k.name.clone(),
            code_hash,
            blocks: blocks
                .iter()
                .zip(ran)
                .map(|(b, executed)| {
                    let insts = b.instructions(k);
                    BlockInfo {
                        offset: b.start - base,
                        instructions: b.count,
                        executed,
                        first: insts
                            .iter()
                            .take(FIRST_INSTRUCTIONS)
                            .map(|i| i.to_string())
                            .collect(),
                        line: insts
                            .iter()
                            .find_map(|i| lines.line_of(i.addr))
                            .map(|l| l.to_string()),
                    }
                })
                .collect(),
        }
    }
}
