//! A loaded code object: each kernel's descriptor (read from its `.kd` symbol) and its machine
//! code as typed instructions (LLVM's disassembly, parsed). The metadata note's view of a kernel
//! (VGPR count, kernarg layout, hidden arguments) comes from the caller as [`KernelMeta`], read
//! by the code-object inspection crate, so it is parsed in one place only.

use crate::inst::{Gen, Inst};
use crate::parse::ParseError;
use std::collections::HashMap;

/// The AMDHSA kernel descriptor (64 bytes at the `<kernel>.kd` symbol), the fields the
/// emulator reads. Layout per LLVM's AMDGPUUsage "Kernel Descriptor".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelDescriptor {
    pub group_segment_fixed_size: u32,
    pub private_segment_fixed_size: u32,
    pub kernarg_size: u32,
    /// Byte address of the first instruction (descriptor address + entry byte offset).
    pub entry: u64,
    pub compute_pgm_rsrc3: u32,
    pub compute_pgm_rsrc1: u32,
    pub compute_pgm_rsrc2: u32,
    pub kernel_code_properties: u16,
}

/// What the metadata note says about a kernel that the launch needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelMeta {
    pub vgpr_count: u32,
    pub sgpr_count: u32,
    pub wavefront_size: u32,
    pub kernarg_segment_size: u32,
    /// Implicit arguments the runtime fills: (offset, size, value kind such as
    /// `hidden_block_count_x`).
    pub hidden_args: Vec<(u32, u32, String)>,
}

/// One kernel, ready to run.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub name: String,
    pub generation: Gen,
    pub descriptor: KernelDescriptor,
    pub meta: KernelMeta,
    /// Instructions in address order.
    pub code: Vec<Inst>,
    /// Lines of the kernel the parser could not type (an unknown instruction), by address:
    /// reaching one stops the launch with its name and address.
    pub unknown: HashMap<u64, ParseError>,
    index: HashMap<u64, usize>,
}

impl Kernel {
    pub fn new(
        name: String,
        generation: Gen,
        descriptor: KernelDescriptor,
        meta: KernelMeta,
        code: Vec<Inst>,
        unknown: HashMap<u64, ParseError>,
    ) -> Kernel {
        let index = code.iter().enumerate().map(|(i, c)| (c.addr, i)).collect();
        Kernel {
            name,
            generation,
            descriptor,
            meta,
            code,
            unknown,
            index,
        }
    }

    /// Position in [`Kernel::code`] of the instruction at byte address `addr`.
    pub fn index_of(&self, addr: u64) -> Option<usize> {
        self.index.get(&addr).copied()
    }
}
