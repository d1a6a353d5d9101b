//! The state of one wave32: scalar and vector register files, SCC, the program counter, and the
//! loads that have been issued but not yet waited for.
//!
//! Loads land in their destination registers only at the `s_waitcnt`/`s_wait_*` that covers them
//! (see [`Pending`]); until then those registers are marked pending, and reading or overwriting
//! one is a fault, which is what a missing wait on hardware turns into: a value that is sometimes
//! stale.

use crate::fault::FaultKind;

/// Lanes of a wave: the kernel set is compiled for wave32 on gfx11 and gfx12.
pub const LANES: usize = 32;

/// A vector register: one 32-bit value per lane.
pub type VRow = [u32; LANES];

/// What an unwritten register holds: a quiet-NaN pattern, so a read of it shows in results.
pub const POISON: u32 = 0x7FC0_DEAD;

/// Indices in [`Wave::sgpr`] of the registers that are not s0..s105 (their operand numbers).
pub mod sreg {
    pub const VCC_LO: usize = 106;
    pub const VCC_HI: usize = 107;
    /// ttmp0; ttmpN is `TTMP0 + N` (N < 16).
    pub const TTMP0: usize = 108;
    pub const NULL: usize = 124;
    pub const M0: usize = 125;
    pub const EXEC_LO: usize = 126;
    pub const EXEC_HI: usize = 127;
    /// Size of the scalar file as indexed here.
    pub const COUNT: usize = 128;
}

/// The counters a wait instruction names. gfx11 counts VMEM loads (`vmcnt`), VMEM stores
/// (`vscnt`) and LDS + scalar memory together (`lgkmcnt`); gfx12 splits them into `loadcnt`,
/// `storecnt`, `dscnt` (LDS) and `kmcnt` (scalar memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Counter {
    /// gfx11 `vmcnt`, gfx12 `loadcnt`.
    Load,
    /// gfx11 `vscnt`, gfx12 `storecnt`.
    Store,
    /// gfx11 `lgkmcnt` (LDS and scalar memory), gfx12 `dscnt` (LDS only).
    Lds,
    /// gfx12 `kmcnt`; on gfx11 scalar loads count in [`Counter::Lds`] (lgkmcnt).
    Scalar,
}

/// Where a pending load's data go when it lands.
#[derive(Clone, Debug, PartialEq)]
pub enum Landing {
    /// Consecutive VGPRs from `first`, written in the lanes of `lanes` only.
    Vgpr {
        first: u16,
        values: Vec<VRow>,
        lanes: u32,
    },
    /// Consecutive SGPRs from `first`.
    Sgpr { first: u16, values: Vec<u32> },
    /// A store: counted until waited for, writes nothing (its data went to memory at issue).
    Nothing,
}

/// One issued memory operation the wave has not waited for yet.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingOp {
    pub counter: Counter,
    /// Scalar loads may return out of order: they land only when their counter is waited to 0.
    pub out_of_order: bool,
    pub landing: Landing,
    /// Address of the issuing instruction (for messages).
    pub issued_at: u64,
}

/// The loads and stores in flight, oldest first, and how many each counter has: a wait on a
/// counter with nothing left to land (most waits) then scans nothing, however many stores are
/// still counted.
#[derive(Clone, Debug, Default)]
pub struct Pending {
    ops: Vec<PendingOp>,
    outstanding: [usize; 4],
}

impl Pending {
    pub fn ops(&self) -> &[PendingOp] {
        &self.ops
    }

    /// Operations of `counter` in flight.
    pub fn outstanding(&self, counter: Counter) -> usize {
        self.outstanding[counter as usize]
    }

    fn push(&mut self, op: PendingOp) {
        self.outstanding[op.counter as usize] += 1;
        self.ops.push(op);
    }

    fn remove(&mut self, pos: usize) -> PendingOp {
        let op = self.ops.remove(pos);
        self.outstanding[op.counter as usize] -= 1;
        op
    }

    /// Drops every operation (the wave ended: loads in flight land nowhere).
    pub fn clear(&mut self) {
        self.ops.clear();
        self.outstanding = [0; 4];
    }
}

/// Whether a wave can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaveState {
    Running,
    /// Stopped at `s_barrier` (gfx11) / `s_barrier_wait` (gfx12) until every wave of the
    /// workgroup arrives.
    AtBarrier,
    Done,
}

/// One wave.
#[derive(Clone, Debug)]
pub struct Wave {
    /// Index of the wave in its workgroup.
    pub id: usize,
    pub sgpr: [u32; sreg::COUNT],
    pub vgpr: Vec<VRow>,
    pub scc: bool,
    /// Byte address of the next instruction.
    pub pc: u64,
    pub state: WaveState,
    pub pending: Pending,
    /// Pending landings per VGPR / SGPR (reads and writes of a pending register fault).
    pub pending_v: Vec<u8>,
    pub pending_s: [u8; sreg::COUNT],
    /// Instructions executed (the hang guard and the throughput figure count these).
    pub executed: u64,
}

impl Wave {
    /// A wave with `vgprs` vector registers, every register poisoned, EXEC all ones for the
    /// lanes that exist (`lanes` ≤ 32 work-items), starting at `pc`.
    pub fn new(id: usize, vgprs: usize, lanes: usize, pc: u64) -> Wave {
        let mut sgpr = [POISON; sreg::COUNT];
        sgpr[sreg::NULL] = 0;
        sgpr[sreg::EXEC_LO] = if lanes >= LANES {
            u32::MAX
        } else {
            (1u32 << lanes) - 1
        };
        sgpr[sreg::EXEC_HI] = 0;
        Wave {
            id,
            sgpr,
            vgpr: vec![[POISON; LANES]; vgprs],
            scc: false,
            pc,
            state: WaveState::Running,
            pending: Pending::default(),
            pending_v: vec![0; vgprs],
            pending_s: [0; sreg::COUNT],
            executed: 0,
        }
    }

    #[inline]
    pub fn exec(&self) -> u32 {
        self.sgpr[sreg::EXEC_LO]
    }

    #[inline]
    pub fn vcc(&self) -> u32 {
        self.sgpr[sreg::VCC_LO]
    }

    /// Reads SGPR `i` (s0..s105 or a [`sreg`] index), faulting on a pending one.
    #[inline]
    pub fn s(&self, i: usize) -> Result<u32, FaultKind> {
        if self.pending_s.get(i).copied().unwrap_or(0) > 0 {
            return Err(FaultKind::ReadBeforeWait {
                register: format!("s{i}"),
            });
        }
        self.sgpr
            .get(i)
            .copied()
            .ok_or_else(|| FaultKind::BadRegister {
                register: format!("s{i}"),
            })
    }

    /// Writes SGPR `i`; writes to `null` are dropped.
    #[inline]
    pub fn set_s(&mut self, i: usize, value: u32) -> Result<(), FaultKind> {
        if i == sreg::NULL {
            return Ok(());
        }
        if self.pending_s.get(i).copied().unwrap_or(0) > 0 {
            return Err(FaultKind::WriteBeforeWait {
                register: format!("s{i}"),
            });
        }
        match self.sgpr.get_mut(i) {
            Some(r) => {
                *r = value;
                Ok(())
            }
            None => Err(FaultKind::BadRegister {
                register: format!("s{i}"),
            }),
        }
    }

    /// VGPR `i`'s row, faulting on a pending one or one beyond the wave's allocation.
    #[inline]
    pub fn v(&self, i: usize) -> Result<&VRow, FaultKind> {
        if self.pending_v.get(i).copied().unwrap_or(0) > 0 {
            return Err(FaultKind::ReadBeforeWait {
                register: format!("v{i}"),
            });
        }
        self.vgpr.get(i).ok_or_else(|| FaultKind::BadRegister {
            register: format!("v{i} (the kernel has {} VGPRs)", self.vgpr.len()),
        })
    }

    /// Writes `row` into VGPR `i` in the lanes of `mask` (normally EXEC).
    #[inline]
    pub fn set_v(&mut self, i: usize, row: &VRow, mask: u32) -> Result<(), FaultKind> {
        if self.pending_v.get(i).copied().unwrap_or(0) > 0 {
            return Err(FaultKind::WriteBeforeWait {
                register: format!("v{i}"),
            });
        }
        self.write_v(i, row, mask)
    }

    /// [`Wave::set_v`] without the pending check (a landing load superseded in order).
    #[inline]
    fn write_v(&mut self, i: usize, row: &VRow, mask: u32) -> Result<(), FaultKind> {
        let n = self.vgpr.len();
        let dst = self.vgpr.get_mut(i).ok_or_else(|| FaultKind::BadRegister {
            register: format!("v{i} (the kernel has {n} VGPRs)"),
        })?;
        if mask == u32::MAX {
            *dst = *row;
        } else {
            for (lane, (d, s)) in dst.iter_mut().zip(row).enumerate() {
                if mask >> lane & 1 == 1 {
                    *d = *s;
                }
            }
        }
        Ok(())
    }

    /// Queues a memory operation; its destination registers become pending.
    pub fn issue(&mut self, op: PendingOp) {
        match &op.landing {
            Landing::Vgpr { first, values, .. } => {
                for r in *first as usize..*first as usize + values.len() {
                    if let Some(p) = self.pending_v.get_mut(r) {
                        *p += 1;
                    }
                }
            }
            Landing::Sgpr { first, values } => {
                for r in *first as usize..*first as usize + values.len() {
                    if let Some(p) = self.pending_s.get_mut(r) {
                        *p += 1;
                    }
                }
            }
            Landing::Nothing => {}
        }
        self.pending.push(op);
    }

    /// Lands the oldest operations of `counter` until at most `allowed` remain outstanding
    /// (what a wait instruction guarantees). Out-of-order (scalar) loads land only at 0.
    pub fn wait(&mut self, counter: Counter, allowed: usize) -> Result<(), FaultKind> {
        while self.pending.outstanding(counter) > allowed {
            let pos = self
                .pending
                .ops
                .iter()
                .position(|p| p.counter == counter && (!p.out_of_order || allowed == 0));
            let Some(pos) = pos else {
                return Ok(());
            };
            let op = self.pending.remove(pos);
            self.land(op)?;
        }
        Ok(())
    }

    /// Whether a register that `landed` (just removed from the queue) writes, and that is
    /// still pending, is only pending for younger loads that return after it: loads of one
    /// in-order counter land in issue order (VMEM loads on gfx11/gfx12), so the younger write
    /// wins, as on the hardware. Any other overlap (another counter, or out-of-order scalar
    /// loads) has no defined order and stays a fault.
    fn superseded_in_order(&self, landed: &PendingOp, writes: impl Fn(&Landing) -> bool) -> bool {
        !landed.out_of_order
            && self
                .pending
                .ops
                .iter()
                .filter(|p| writes(&p.landing))
                .all(|p| p.counter == landed.counter && !p.out_of_order)
    }

    fn land(&mut self, op: PendingOp) -> Result<(), FaultKind> {
        match &op.landing {
            Landing::Vgpr {
                first,
                values,
                lanes,
            } => {
                for (k, row) in values.iter().enumerate() {
                    let r = *first as usize + k;
                    if let Some(p) = self.pending_v.get_mut(r) {
                        *p -= 1;
                    }
                    let still = self.pending_v.get(r).copied().unwrap_or(0) > 0;
                    let covers = |l: &Landing| {
                        matches!(l, Landing::Vgpr { first, values, .. }
                            if (*first as usize..*first as usize + values.len()).contains(&r))
                    };
                    if still && self.superseded_in_order(&op, covers) {
                        self.write_v(r, row, *lanes)?;
                    } else {
                        self.set_v(r, row, *lanes)?;
                    }
                }
            }
            Landing::Sgpr { first, values } => {
                for (k, v) in values.iter().enumerate() {
                    let r = *first as usize + k;
                    if let Some(p) = self.pending_s.get_mut(r) {
                        *p -= 1;
                    }
                    self.set_s(r, *v)?;
                }
            }
            Landing::Nothing => {}
        }
        Ok(())
    }
}
