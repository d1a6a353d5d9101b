//! Semantics of the scalar program-control instructions: branches, waits, barriers, end of
//! program and hints.
//!
//! Waits land pending loads (see [`crate::wave::Wave::wait`]); barriers are only announced here
//! ([`Flow::Barrier`], [`Flow::BarrierSignal`], [`Flow::BarrierWait`]) and kept by the dispatcher,
//! which sees every wave of the workgroup. An instruction of the other generation (a gfx12
//! `s_wait_*` in a gfx11 kernel) is a fault: the disassembly was made for the wrong target.

use super::{Ctx, Flow, arg, unknown};
use crate::fault::FaultKind;
use crate::inst::{Const, Gen, Inst, Op, Operand, Special};
use crate::wave::{Counter, Wave, sreg};

pub fn exec(wave: &mut Wave, inst: &Inst, ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    let generation = ctx.generation;
    let only = |g: Gen| -> Result<(), FaultKind> {
        if g == generation {
            Ok(())
        } else {
            Err(FaultKind::Unsupported {
                what: format!(
                    "`{}` is a {g:?} instruction, the kernel is {generation:?}",
                    inst.mnemonic()
                ),
            })
        }
    };
    match inst.op {
        Op::SBranch => branch(inst, true),
        Op::SCbranchScc0 => branch(inst, !wave.scc),
        Op::SCbranchScc1 => branch(inst, wave.scc),
        // wave32: VCCZ and EXECZ look at the low halves only.
        Op::SCbranchVccz => branch(inst, wave.s(sreg::VCC_LO)? == 0),
        Op::SCbranchVccnz => branch(inst, wave.s(sreg::VCC_LO)? != 0),
        Op::SCbranchExecz => branch(inst, wave.s(sreg::EXEC_LO)? == 0),
        Op::SCbranchExecnz => branch(inst, wave.s(sreg::EXEC_LO)? != 0),
        Op::SEndpgm => Ok(Flow::End),
        Op::SCodeEnd => Err(FaultKind::CodeEnd),
        Op::SBarrier => {
            only(Gen::Gfx11)?;
            Ok(Flow::Barrier)
        }
        Op::SBarrierSignal => {
            only(Gen::Gfx12)?;
            workgroup_barrier(inst)?;
            Ok(Flow::BarrierSignal)
        }
        Op::SBarrierWait => {
            only(Gen::Gfx12)?;
            workgroup_barrier(inst)?;
            Ok(Flow::BarrierWait)
        }
        Op::SWaitcnt => {
            only(Gen::Gfx11)?;
            waitcnt(wave, inst)?;
            Ok(Flow::Next)
        }
        Op::SWaitcntVscnt => {
            only(Gen::Gfx11)?;
            match arg(inst, 0)? {
                Operand::Special {
                    reg: Special::Null, ..
                } => {}
                other => {
                    return Err(FaultKind::Unsupported {
                        what: format!("`s_waitcnt_vscnt` with a register count {other:?}"),
                    });
                }
            }
            let n = imm(inst, 1)?;
            wave.wait(Counter::Store, count(n, 0, 6))?;
            Ok(Flow::Next)
        }
        Op::SWaitLoadcnt
        | Op::SWaitStorecnt
        | Op::SWaitDscnt
        | Op::SWaitKmcnt
        | Op::SWaitLoadcntDscnt
        | Op::SWaitStorecntDscnt
        | Op::SWaitSamplecnt
        | Op::SWaitBvhcnt => {
            only(Gen::Gfx12)?;
            let n = imm(inst, 0)?;
            match inst.op {
                Op::SWaitLoadcnt => wave.wait(Counter::Load, count(n, 0, 6))?,
                Op::SWaitStorecnt => wave.wait(Counter::Store, count(n, 0, 6))?,
                Op::SWaitDscnt => wave.wait(Counter::Lds, count(n, 0, 6))?,
                Op::SWaitKmcnt => wave.wait(Counter::Scalar, count(n, 0, 5))?,
                // The combined forms: the first counter in bits 13:8, dscnt in bits 5:0.
                Op::SWaitLoadcntDscnt => {
                    wave.wait(Counter::Load, count(n, 8, 6))?;
                    wave.wait(Counter::Lds, count(n, 0, 6))?;
                }
                Op::SWaitStorecntDscnt => {
                    wave.wait(Counter::Store, count(n, 8, 6))?;
                    wave.wait(Counter::Lds, count(n, 0, 6))?;
                }
                // No image sampling or BVH instruction issues anything here.
                _ => {}
            }
            Ok(Flow::Next)
        }
        Op::SSendmsg => {
            // The only message the kernels send: VGPRs may be released before `s_endpgm`.
            if inst
                .mods
                .verbatim
                .iter()
                .any(|m| m == "sendmsg(MSG_DEALLOC_VGPRS)")
            {
                Ok(Flow::Next)
            } else {
                Err(FaultKind::Unsupported {
                    what: format!("`s_sendmsg {}`", inst.mods.verbatim.join(" ")),
                })
            }
        }
        // Scheduling hints: no effect on results.
        Op::SNop
        | Op::SDelayAlu
        | Op::SClause
        | Op::SWaitcntDepctr
        | Op::SSetInstPrefetchDistance => Ok(Flow::Next),
        _ => Err(unknown(inst)),
    }
}

/// Integer immediate operand `i`.
fn imm(inst: &Inst, i: usize) -> Result<i64, FaultKind> {
    match arg(inst, i)? {
        Operand::Const {
            value: Const::Int(v),
            ..
        } => Ok(*v),
        other => Err(FaultKind::Unsupported {
            what: format!(
                "`{}` operand {i} is {other:?}, not an immediate",
                inst.mnemonic()
            ),
        }),
    }
}

/// The counter field of `bits` bits at `shift` in a wait immediate.
fn count(imm: i64, shift: u32, bits: u32) -> usize {
    ((imm as u64 >> shift) & ((1 << bits) - 1)) as usize
}

/// A SOPP branch: `PC + 4 + simm16 * 4` when taken (the disassembler prints simm16 unsigned).
fn branch(inst: &Inst, taken: bool) -> Result<Flow, FaultKind> {
    if !taken {
        return Ok(Flow::Next);
    }
    let simm16 = imm(inst, 0)? as u16 as i16;
    let target = (inst.addr as i64)
        .checked_add(4 + 4 * simm16 as i64)
        .filter(|t| *t >= 0);
    match target {
        Some(t) => Ok(Flow::Jump(t as u64)),
        None => Err(FaultKind::BadBranch {
            target: (inst.addr as i64).wrapping_add(4 + 4 * simm16 as i64) as u64,
        }),
    }
}

/// gfx12 barriers: only the workgroup barrier (-1) is used by the kernels; named barriers
/// (M0, positive ids) and the trap barrier are not implemented.
fn workgroup_barrier(inst: &Inst) -> Result<(), FaultKind> {
    let id = imm(inst, 0)?;
    if id as u16 as i16 == -1 {
        Ok(())
    } else {
        Err(FaultKind::Unsupported {
            what: format!(
                "`{}` of barrier {id} (only -1, the workgroup's)",
                inst.mnemonic()
            ),
        })
    }
}

/// gfx11 `s_waitcnt`: vmcnt counts VMEM loads, lgkmcnt LDS and scalar loads (both in
/// [`Counter::Lds`] here), expcnt exports (none are issued). The printed form names the counters;
/// a bare immediate is decoded (expcnt 2:0, lgkmcnt 9:4, vmcnt 15:10; all ones = no wait).
fn waitcnt(wave: &mut Wave, inst: &Inst) -> Result<(), FaultKind> {
    let (vm, lgkm) = match (inst.mods.waitcnt, inst.operands.first()) {
        (Some(w), None) => (w.vmcnt.map(usize::from), w.lgkmcnt.map(usize::from)),
        (None, Some(_)) => {
            let n = imm(inst, 0)?;
            let vm = count(n, 10, 6);
            let lgkm = count(n, 4, 6);
            ((vm < 63).then_some(vm), (lgkm < 63).then_some(lgkm))
        }
        _ => {
            return Err(FaultKind::Unsupported {
                what: "`s_waitcnt` without counters".into(),
            });
        }
    };
    if let Some(n) = vm {
        wave.wait(Counter::Load, n)?;
    }
    if let Some(n) = lgkm {
        wave.wait(Counter::Lds, n)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::Bench;
    use super::*;
    use crate::wave::{Landing, PendingOp};

    fn load(b: &mut Bench, counter: Counter, reg: u16, value: u32) {
        b.wave.issue(PendingOp {
            counter,
            out_of_order: false,
            landing: Landing::Vgpr {
                first: reg,
                values: vec![[value; 32]],
                lanes: u32::MAX,
            },
            issued_at: 0,
        });
    }

    #[test]
    fn branches_jump_relative_to_the_next_instruction_with_a_signed_offset() {
        let mut b = Bench::new(Gen::Gfx11);
        assert_eq!(b.run_asm("s_branch 3"), Ok(Flow::Jump(16)));
        // 65535 is -1: the branch itself.
        assert_eq!(b.run_asm("s_branch 65535"), Ok(Flow::Jump(0)));
        assert!(matches!(
            b.run_asm("s_branch 65534"),
            Err(FaultKind::BadBranch { .. })
        ));
        b.wave.scc = true;
        assert_eq!(b.run_asm("s_cbranch_scc1 2"), Ok(Flow::Jump(12)));
        assert_eq!(b.run_asm("s_cbranch_scc0 2"), Ok(Flow::Next));
        b.wave.scc = false;
        assert_eq!(b.run_asm("s_cbranch_scc0 2"), Ok(Flow::Jump(12)));
        assert_eq!(b.run_asm("s_cbranch_scc1 2"), Ok(Flow::Next));
    }

    #[test]
    fn vcc_and_exec_branches_test_the_low_half_in_wave32() {
        let mut b = Bench::new(Gen::Gfx11);
        b.wave.sgpr[sreg::VCC_LO] = 0;
        b.wave.sgpr[sreg::VCC_HI] = 1;
        assert_eq!(b.run_asm("s_cbranch_vccz 1"), Ok(Flow::Jump(8)));
        assert_eq!(b.run_asm("s_cbranch_vccnz 1"), Ok(Flow::Next));
        b.wave.sgpr[sreg::VCC_LO] = 0x8000_0000;
        assert_eq!(b.run_asm("s_cbranch_vccz 1"), Ok(Flow::Next));
        assert_eq!(b.run_asm("s_cbranch_vccnz 1"), Ok(Flow::Jump(8)));
        assert_eq!(b.run_asm("s_cbranch_execz 1"), Ok(Flow::Next));
        assert_eq!(b.run_asm("s_cbranch_execnz 1"), Ok(Flow::Jump(8)));
        b.wave.sgpr[sreg::EXEC_LO] = 0;
        b.wave.sgpr[sreg::EXEC_HI] = 1;
        assert_eq!(b.run_asm("s_cbranch_execz 1"), Ok(Flow::Jump(8)));
        assert_eq!(b.run_asm("s_cbranch_execnz 1"), Ok(Flow::Next));
    }

    #[test]
    fn endpgm_ends_code_end_faults_and_hints_do_nothing() {
        let mut b = Bench::new(Gen::Gfx11);
        assert_eq!(b.run_asm("s_endpgm"), Ok(Flow::End));
        assert_eq!(b.run_asm("s_code_end"), Err(FaultKind::CodeEnd));
        // Hints change nothing a later instruction can observe.
        let (sgpr, vgpr, scc) = (b.wave.sgpr, b.wave.vgpr.clone(), b.wave.scc);
        assert_eq!(b.run_asm("s_nop 0"), Ok(Flow::Next));
        assert_eq!(
            b.run_asm("s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_1)"),
            Ok(Flow::Next)
        );
        assert_eq!(b.run_asm("s_clause 0x1"), Ok(Flow::Next));
        assert_eq!(b.run_asm("s_waitcnt_depctr 0xfff"), Ok(Flow::Next));
        assert_eq!(
            b.run_asm("s_set_inst_prefetch_distance 0x1"),
            Ok(Flow::Next)
        );
        assert_eq!(
            b.run_asm("s_sendmsg sendmsg(MSG_DEALLOC_VGPRS)"),
            Ok(Flow::Next)
        );
        assert_eq!((b.wave.sgpr, &b.wave.vgpr, b.wave.scc), (sgpr, &vgpr, scc));
        assert!(matches!(
            b.run_asm("s_sendmsg sendmsg(MSG_INTERRUPT)"),
            Err(FaultKind::Unsupported { .. })
        ));
    }

    #[test]
    fn barriers_are_announced_per_generation() {
        let mut b = Bench::new(Gen::Gfx11);
        assert_eq!(b.run_asm("s_barrier"), Ok(Flow::Barrier));
        assert!(b.run_asm("s_barrier_signal -1").is_err());
        let mut b = Bench::new(Gen::Gfx12);
        assert_eq!(b.run_asm("s_barrier_signal -1"), Ok(Flow::BarrierSignal));
        assert_eq!(b.run_asm("s_barrier_wait 0xffff"), Ok(Flow::BarrierWait));
        assert!(matches!(
            b.run_asm("s_barrier_signal 1"),
            Err(FaultKind::Unsupported { .. })
        ));
        assert!(b.run_asm("s_barrier").is_err());
    }

    #[test]
    fn gfx11_waitcnt_lands_loads_oldest_first_down_to_the_count() {
        let mut b = Bench::new(Gen::Gfx11);
        load(&mut b, Counter::Load, 1, 10);
        load(&mut b, Counter::Load, 2, 20);
        load(&mut b, Counter::Lds, 3, 30);
        assert_eq!(b.run_asm("s_waitcnt vmcnt(1)"), Ok(Flow::Next));
        assert_eq!(b.wave.v(1).unwrap()[0], 10);
        assert!(matches!(b.wave.v(2), Err(FaultKind::ReadBeforeWait { .. })));
        assert!(b.wave.v(3).is_err());
        assert_eq!(b.run_asm("s_waitcnt lgkmcnt(0)"), Ok(Flow::Next));
        assert_eq!(b.wave.v(3).unwrap()[0], 30);
        assert!(b.wave.v(2).is_err());
        assert_eq!(b.run_asm("s_waitcnt vmcnt(0) lgkmcnt(0)"), Ok(Flow::Next));
        assert_eq!(b.wave.v(2).unwrap()[0], 20);
        // A bare immediate: vmcnt 0 (bits 15:10), lgkmcnt and expcnt all ones (no wait).
        load(&mut b, Counter::Load, 4, 40);
        load(&mut b, Counter::Lds, 5, 50);
        assert_eq!(b.run_asm("s_waitcnt 0x3f7"), Ok(Flow::Next));
        assert_eq!(b.wave.v(4).unwrap()[0], 40);
        assert!(b.wave.v(5).is_err());
        load(&mut b, Counter::Store, 6, 60);
        assert_eq!(b.run_asm("s_waitcnt_vscnt null, 0x1"), Ok(Flow::Next));
        assert!(b.wave.v(6).is_err());
        assert_eq!(b.run_asm("s_waitcnt_vscnt null, 0x0"), Ok(Flow::Next));
        assert_eq!(b.wave.v(6).unwrap()[0], 60);
        assert!(b.run_asm("s_wait_loadcnt 0x0").is_err());
    }

    #[test]
    fn gfx12_waits_name_one_counter_each_or_two_in_the_combined_forms() {
        let mut b = Bench::new(Gen::Gfx12);
        load(&mut b, Counter::Load, 1, 1);
        load(&mut b, Counter::Store, 2, 2);
        load(&mut b, Counter::Lds, 3, 3);
        load(&mut b, Counter::Scalar, 4, 4);
        b.run_asm("s_wait_samplecnt 0x0").unwrap();
        b.run_asm("s_wait_bvhcnt 0x0").unwrap();
        b.run_asm("s_wait_dscnt 0x1").unwrap();
        assert!(b.wave.v(3).is_err());
        b.run_asm("s_wait_kmcnt 0x0").unwrap();
        assert_eq!(b.wave.v(4).unwrap()[0], 4);
        b.run_asm("s_wait_loadcnt 0x0").unwrap();
        assert_eq!(b.wave.v(1).unwrap()[0], 1);
        b.run_asm("s_wait_storecnt 0x0").unwrap();
        assert_eq!(b.wave.v(2).unwrap()[0], 2);
        b.run_asm("s_wait_dscnt 0x0").unwrap();
        assert_eq!(b.wave.v(3).unwrap()[0], 3);
        // loadcnt in bits 13:8, dscnt in 5:0.
        load(&mut b, Counter::Load, 5, 5);
        load(&mut b, Counter::Lds, 6, 6);
        b.run_asm("s_wait_loadcnt_dscnt 0x100").unwrap();
        assert!(b.wave.v(5).is_err());
        assert_eq!(b.wave.v(6).unwrap()[0], 6);
        b.run_asm("s_wait_loadcnt_dscnt 0x0").unwrap();
        assert_eq!(b.wave.v(5).unwrap()[0], 5);
        load(&mut b, Counter::Store, 7, 7);
        load(&mut b, Counter::Lds, 8, 8);
        b.run_asm("s_wait_storecnt_dscnt 0x1").unwrap();
        assert_eq!(b.wave.v(7).unwrap()[0], 7);
        assert!(b.wave.v(8).is_err());
        b.run_asm("s_wait_storecnt_dscnt 0x0").unwrap();
        assert_eq!(b.wave.v(8).unwrap()[0], 8);
        assert!(b.run_asm("s_waitcnt vmcnt(0)").is_err());
    }
}
