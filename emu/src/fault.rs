//! Why a launch on the emulator stopped. Every fault names the kernel, the instruction (address and
//! text) and what went wrong, so a verdict can point at the machine code.

use std::fmt;

/// The address space of a faulting access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    Global,
    Lds,
    Kernarg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// What went wrong, without where (see [`Fault`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FaultKind {
    #[error("{access:?} of {bytes} B at {address:#x} in lane {lane} is outside every {space:?} allocation{near}", near = nearest.as_deref().map(|n| format!(" ({n})")).unwrap_or_default())]
    OutOfBounds {
        space: Space,
        access: Access,
        address: u64,
        bytes: u32,
        lane: u8,
        /// The closest allocation and how far off the access is, when there is one.
        nearest: Option<String>,
    },
    #[error("{register} is read before the wait for the load that writes it")]
    ReadBeforeWait { register: String },
    #[error("{register} is overwritten before the wait for the load that writes it")]
    WriteBeforeWait { register: String },
    #[error("register {register} does not exist")]
    BadRegister { register: String },
    #[error("instruction `{mnemonic}` is not implemented by the emulator")]
    UnknownInstruction { mnemonic: String },
    #[error("operand form not implemented: {what}")]
    Unsupported { what: String },
    #[error("branch to {target:#x}, which is not an instruction of the kernel")]
    BadBranch { target: u64 },
    #[error("the wave ran {executed} instructions without ending (a hang)")]
    Hang { executed: u64 },
    #[error("waves of the workgroup wait at different barriers or some ended: {detail}")]
    Barrier { detail: String },
    /// The kernel asks for launch state the emulator does not set up (scratch, a queue), or its
    /// descriptor contradicts itself (user SGPR count vs the enabled user SGPRs).
    #[error("launch ABI: {detail}")]
    Abi { detail: String },
    /// `s_code_end` is padding after the last kernel: executing it means control ran off the end.
    #[error("`s_code_end` executed: control ran past the end of the kernel's code")]
    CodeEnd,
}

/// A fault with its place.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    pub kernel: String,
    /// Byte address of the instruction.
    pub at: u64,
    /// The instruction as disassembled.
    pub inst: String,
    /// Workgroup id (x, y, z) and wave index in it.
    pub workgroup: [u32; 3],
    pub wave: usize,
    pub kind: FaultKind,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at {:#x} `{}` (workgroup {:?}, wave {}): {}",
            self.kernel, self.at, self.inst, self.workgroup, self.wave, self.kind
        )
    }
}

impl std::error::Error for Fault {}
