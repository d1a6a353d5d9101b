//! A kernel's basic blocks, derived from its machine code, and which of them launches executed
//! (machine-code coverage; not to be confused with [`crate::coverage`], the table of which
//! instructions the emulator implements).
//!
//! Leaders are the entry, every branch target, and the instruction after a branch or an
//! `s_endpgm`; a block runs from its leader to the next leader. Code no path from the entry
//! reaches is no block: it is never meant to run. That is the trailing `s_code_end` padding (which
//! the disassembler lists under the last kernel of a code object), the `s_nop` alignment padding
//! between one entry's `s_endpgm` and the next entry, and the odd block the compiler leaves behind
//! an unconditional branch with nothing branching to it. Paths follow the branches' immediate
//! targets and the fall-through of every block not ending in `s_endpgm`, `s_code_end` or
//! `s_branch`; where a kernel holds an instruction the parser could not type (it might jump
//! anywhere), every block counts as reachable. A block counts as executed once its first instruction has run: control
//! enters a block only at its leader, so every instruction after it ran too (unless the launch
//! faulted inside the block).
//!
//! Recording is a [`Executed`] handed to [`crate::dispatch::launch_recording`]: one flag per
//! instruction, set as the instruction runs. [`crate::dispatch::launch`] passes none, and the
//! dispatcher's only cost then is one test of an `Option` per instruction.

use crate::inst::{Const, Inst, Op, Operand};
use crate::program::Kernel;

/// One basic block of a kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// Byte address of its first instruction (the leader).
    pub start: u64,
    /// Byte address one past its last instruction.
    pub end: u64,
    /// Position of its leader in [`Kernel::code`].
    pub first: usize,
    /// Instructions in the block.
    pub count: usize,
}

impl Block {
    /// The block's instructions.
    pub fn instructions<'k>(&self, kernel: &'k Kernel) -> &'k [Inst] {
        &kernel.code[self.first..self.first + self.count]
    }
}

/// Does `op` end a block (control may go elsewhere than the next instruction)?
fn ends_block(op: Op) -> bool {
    matches!(op, Op::SEndpgm | Op::SCodeEnd) || branch_op(op)
}

fn branch_op(op: Op) -> bool {
    matches!(
        op,
        Op::SBranch
            | Op::SCbranchScc0
            | Op::SCbranchScc1
            | Op::SCbranchVccz
            | Op::SCbranchVccnz
            | Op::SCbranchExecz
            | Op::SCbranchExecnz
    )
}

/// Where a SOPP branch goes when taken: `PC + 4 + simm16 * 4` (as the dispatcher computes it).
pub fn branch_target(inst: &Inst) -> Option<u64> {
    if !branch_op(inst.op) {
        return None;
    }
    let Some(Operand::Const {
        value: Const::Int(v),
        ..
    }) = inst.operands.first()
    else {
        return None;
    };
    let simm16 = *v as u16 as i16;
    (inst.addr as i64)
        .checked_add(4 + 4 * simm16 as i64)
        .filter(|t| *t >= 0)
        .map(|t| t as u64)
}

/// The basic blocks of `kernel`, in address order.
pub fn blocks_of(kernel: &Kernel) -> Vec<Block> {
    let code = &kernel.code;
    let mut leader = vec![false; code.len()];
    if let Some(l) = leader.first_mut() {
        *l = true;
    }
    for (i, inst) in code.iter().enumerate() {
        if let Some(t) = branch_target(inst) {
            // A target between typed instructions (an unknown one) leads from the next typed one.
            let at = code.partition_point(|c| c.addr < t);
            if let Some(l) = leader.get_mut(at) {
                *l = true;
            }
        }
        if ends_block(inst.op)
            && let Some(l) = leader.get_mut(i + 1)
        {
            *l = true;
        }
    }
    let mut blocks: Vec<Block> = Vec::new();
    for (i, inst) in code.iter().enumerate() {
        if leader[i] {
            blocks.push(Block {
                start: inst.addr,
                end: inst.addr + inst.size(),
                first: i,
                count: 1,
            });
        } else if let Some(b) = blocks.last_mut() {
            b.end = inst.addr + inst.size();
            b.count += 1;
        }
    }
    blocks.retain(|b| !b.instructions(kernel).iter().all(|i| i.op == Op::SCodeEnd));
    let reached = reachable(kernel, &blocks);
    blocks
        .into_iter()
        .zip(reached)
        .filter_map(|(b, r)| r.then_some(b))
        .collect()
}

/// For each of `blocks` (in address order), whether a path from the entry reaches it: the
/// immediate targets of branches and the fall-through of blocks that do not end the program or
/// jump unconditionally. All of them where the kernel holds an untyped instruction.
fn reachable(kernel: &Kernel, blocks: &[Block]) -> Vec<bool> {
    if !kernel.unknown.is_empty() {
        return vec![true; blocks.len()];
    }
    let mut reached = vec![false; blocks.len()];
    let mut work: Vec<usize> = if blocks.is_empty() { vec![] } else { vec![0] };
    while let Some(i) = work.pop() {
        if std::mem::replace(&mut reached[i], true) {
            continue;
        }
        let Some(last) = blocks[i].instructions(kernel).last() else {
            continue;
        };
        if let Some(t) = branch_target(last)
            && let Ok(j) = blocks.binary_search_by(|b| b.start.cmp(&t))
        {
            work.push(j);
        }
        let falls_through = !matches!(last.op, Op::SEndpgm | Op::SCodeEnd | Op::SBranch);
        if falls_through && i + 1 < blocks.len() {
            work.push(i + 1);
        }
    }
    reached
}

/// Which instructions of one kernel have run, over any number of recording launches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Executed {
    ran: Vec<bool>,
}

impl Executed {
    /// Nothing run yet, for `kernel`.
    pub fn new(kernel: &Kernel) -> Executed {
        Executed {
            ran: vec![false; kernel.code.len()],
        }
    }

    /// Marks the instruction at position `i` of the kernel's code.
    #[inline]
    pub fn mark(&mut self, i: usize) {
        if let Some(r) = self.ran.get_mut(i) {
            *r = true;
        }
    }

    /// Has the instruction at position `i` run?
    pub fn ran(&self, i: usize) -> bool {
        self.ran.get(i).copied().unwrap_or(false)
    }

    /// Adds what `other` (of the same kernel) recorded.
    pub fn merge(&mut self, other: &Executed) {
        for (a, b) in self.ran.iter_mut().zip(&other.ran) {
            *a |= *b;
        }
    }

    /// For each of `blocks`, whether it was executed.
    pub fn blocks(&self, blocks: &[Block]) -> Vec<bool> {
        blocks.iter().map(|b| self.ran(b.first)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inst::Gen;
    use crate::parse::parse_line;
    use crate::program::{KernelDescriptor, KernelMeta};

    fn kernel(lines: &[&str]) -> Kernel {
        let code = lines.iter().map(|l| parse_line(l).unwrap()).collect();
        Kernel::new(
            "k".into(),
            Gen::Gfx11,
            KernelDescriptor::default(),
            KernelMeta::default(),
            code,
            Default::default(),
        )
    }

    /// if (scc) { s1 = 1 } s_endpgm, then padding.
    pub(crate) const DIAMOND: [&str; 7] = [
        "\ts_cmp_eq_u32 s0, 0          // 000000001D00: BF068000",
        "\ts_cbranch_scc1 2            // 000000001D04: BFA20002",
        "\ts_mov_b32 s1, 1             // 000000001D08: BE810081",
        "\ts_mov_b32 s2, 1             // 000000001D0C: BE820081",
        "\ts_endpgm                    // 000000001D10: BFB00000",
        "\ts_code_end                  // 000000001D14: BF9F0000",
        "\ts_code_end                  // 000000001D18: BF9F0000",
    ];

    #[test]
    fn leaders_are_the_entry_branch_targets_and_what_follows_a_branch() {
        let k = kernel(&DIAMOND);
        let blocks = blocks_of(&k);
        let spans: Vec<(u64, u64, usize)> =
            blocks.iter().map(|b| (b.start, b.end, b.count)).collect();
        assert_eq!(
            spans,
            vec![
                (0x1d00, 0x1d08, 2),
                (0x1d08, 0x1d10, 2),
                (0x1d10, 0x1d14, 1)
            ]
        );
        assert_eq!(branch_target(&k.code[1]), Some(0x1d10));
        assert_eq!(branch_target(&k.code[0]), None);
        let mut run = Executed::new(&k);
        run.mark(0);
        run.mark(1);
        run.mark(4);
        assert_eq!(run.blocks(&blocks), vec![true, false, true]);
        let mut other = Executed::new(&k);
        other.mark(2);
        run.merge(&other);
        assert_eq!(run.blocks(&blocks), vec![true, true, true]);
    }

    /// A skip over one move, the end, then a branch and padding nothing reaches.
    const DEAD_TAIL: [&str; 9] = [
        "\ts_cmp_eq_u32 s0, 0          // 000000000000: BF068000",
        "\ts_cbranch_scc1 2            // 000000000004: BFA20002",
        "\ts_mov_b32 s1, 1             // 000000000008: BE810081",
        "\ts_branch 1                  // 00000000000C: BFA00001",
        "\ts_mov_b32 s2, 1             // 000000000010: BE820081",
        "\ts_endpgm                    // 000000000014: BFB00000",
        "\ts_branch 0                  // 000000000018: BFA00000",
        "\ts_nop 0                     // 00000000001C: BF800000",
        "\ts_nop 0                     // 000000000020: BF800000",
    ];

    #[test]
    fn code_no_path_from_the_entry_reaches_is_no_block() {
        let k = kernel(&DEAD_TAIL);
        let starts: Vec<u64> = blocks_of(&k).iter().map(|b| b.start).collect();
        // Both sides of the conditional branch and the unconditional branch's target; neither the
        // branch after s_endpgm nor the padding it would jump into.
        assert_eq!(starts, vec![0x00, 0x08, 0x10, 0x14]);
    }

    #[test]
    fn an_untyped_instruction_keeps_every_block() {
        let mut k = kernel(&DEAD_TAIL);
        k.unknown.insert(
            0x24,
            crate::parse::ParseError::UnknownInstruction {
                mnemonic: "s_setpc_b64".into(),
                addr: 0x24,
            },
        );
        let starts: Vec<u64> = blocks_of(&k).iter().map(|b| b.start).collect();
        assert_eq!(starts, vec![0x00, 0x08, 0x10, 0x14, 0x18, 0x1c]);
    }
}
