//! Instruction semantics: [`step`] runs one instruction of one wave. Each class of instructions
//! lives in its own module and answers [`FaultKind::UnknownInstruction`] for an op it does not
//! implement, so an instruction the emulator does not know stops the case instead of guessing.
//!
//! Semantics follow AMD's RDNA3 / RDNA4 ISA reference pseudocode.

pub mod control;
pub mod lds;
pub mod operand;
pub mod salu;
pub mod sfloat;
pub mod smem;
#[cfg(test)]
pub mod testing;
pub mod valu;
pub mod vfloat;
pub mod vint;
pub mod vmem;
pub mod wmma;

use crate::fault::FaultKind;
use crate::inst::{Gen, Inst, Op};
use crate::memory::{GlobalMemory, Lds};
use crate::wave::Wave;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU8, Ordering};

/// What the wave does after an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// The next instruction in memory.
    Next,
    /// A taken branch to this byte address.
    Jump(u64),
    /// Wait here until every wave of the workgroup arrives (then continue with the next): gfx11
    /// `s_barrier`, a signal and a wait in one.
    Barrier,
    /// gfx12 `s_barrier_signal -1`: this wave has arrived at the workgroup barrier and runs on.
    BarrierSignal,
    /// gfx12 `s_barrier_wait`: wait until every wave has signalled the barrier this wave signalled.
    BarrierWait,
    /// `s_endpgm`.
    End,
}

/// What an instruction can touch besides its wave.
pub struct Ctx<'a> {
    pub generation: Gen,
    pub global: &'a mut GlobalMemory,
    pub lds: &'a mut Lds,
    /// The launch's sanitizer, if one watches it (`None`: no shadow, no cost beyond the test).
    pub sanitizer: Option<&'a mut crate::sanitize::Sanitizer>,
}

/// Instruction classes, by mnemonic family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// Scalar ALU, branches, waits, barriers, hints (`s_*` except loads).
    Salu,
    /// Scalar memory (`s_load_*`).
    Smem,
    /// Vector ALU (VOP1/2/3/3P/C, VOPD halves).
    Valu,
    /// `v_wmma_*`.
    Wmma,
    /// Global and flat memory, cache control (`global_*`, `flat_*`, `buffer_gl0_inv`).
    Vmem,
    /// LDS (`ds_*`).
    Lds,
}

impl Op {
    /// The op's class (computed once per op: this runs for every instruction executed).
    #[inline]
    pub fn class(self) -> Class {
        static CLASSES: LazyLock<Vec<Class>> =
            LazyLock::new(|| Op::ALL.iter().map(|op| op.class_by_name()).collect());
        CLASSES[self as usize]
    }

    fn class_by_name(self) -> Class {
        let name = self.name();
        if name.starts_with("s_load") {
            Class::Smem
        } else if name.starts_with("s_") {
            Class::Salu
        } else if name.starts_with("v_wmma") {
            Class::Wmma
        } else if name.starts_with("v_") {
            Class::Valu
        } else if name.starts_with("ds_") {
            Class::Lds
        } else {
            Class::Vmem
        }
    }
}

/// Runs `inst` on `wave`. The caller advances the pc on [`Flow::Next`].
pub fn step(wave: &mut Wave, inst: &Inst, ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    match inst.op.class() {
        Class::Salu => first_known(wave, inst, ctx, &[control::exec, salu::exec, sfloat::exec]),
        Class::Smem => smem::exec(wave, inst, ctx),
        Class::Valu => valu::exec(wave, inst, ctx),
        Class::Wmma => wmma::exec(wave, inst, ctx),
        Class::Vmem => vmem::exec(wave, inst, ctx),
        Class::Lds => lds::exec(wave, inst, ctx),
    }
}

type Semantics = fn(&mut Wave, &Inst, &mut Ctx<'_>) -> Result<Flow, FaultKind>;

/// Which of a class's modules runs each (op, form), once found: 0 = not yet known, k + 1 =
/// module k. Ops belong to one class, so one table serves every module list.
static RESOLVED: LazyLock<Vec<AtomicU8>> =
    LazyLock::new(|| (0..Op::ALL.len() * 4).map(|_| AtomicU8::new(0)).collect());

/// Tries each module in turn; the first that knows the op runs it (and runs it directly from
/// then on).
fn first_known(
    wave: &mut Wave,
    inst: &Inst,
    ctx: &mut Ctx<'_>,
    modules: &[Semantics],
) -> Result<Flow, FaultKind> {
    let slot = &RESOLVED[inst.op as usize * 4 + inst.form as usize];
    let known = slot.load(Ordering::Relaxed) as usize;
    if let Some(exec) = known.checked_sub(1).and_then(|k| modules.get(k)) {
        return exec(wave, inst, ctx);
    }
    for (k, exec) in modules.iter().enumerate() {
        match exec(wave, inst, ctx) {
            Err(FaultKind::UnknownInstruction { .. }) => continue,
            other => {
                slot.store(k as u8 + 1, Ordering::Relaxed);
                return other;
            }
        }
    }
    Err(unknown(inst))
}

/// Operand `i` of `inst` (semantics never index operands directly: a malformed instruction is a
/// fault, not a panic).
#[inline]
pub fn arg(inst: &Inst, i: usize) -> Result<&crate::inst::Operand, FaultKind> {
    inst.operands.get(i).ok_or_else(|| FaultKind::Unsupported {
        what: format!("`{}` has no operand {i}", inst.mnemonic()),
    })
}

/// The fault of an op a class module does not implement.
pub fn unknown(inst: &Inst) -> FaultKind {
    FaultKind::UnknownInstruction {
        mnemonic: inst.mnemonic(),
    }
}
