//! Scalar memory loads (`s_load_*`): read global memory (the kernarg segment, mostly) into SGPRs.
//!
//! The data are read at issue and land at the wait (gfx11 `lgkmcnt`, counted with LDS in
//! [`Counter::Lds`]; gfx12 `kmcnt`, [`Counter::Scalar`]). Scalar loads may return out of order,
//! so they land only when their counter is waited to 0.

use super::operand::{Width, scalar, scalar64};
use super::{Ctx, Flow, arg, unknown};
use crate::fault::FaultKind;
use crate::inst::{Gen, Inst, Op, Operand};
use crate::wave::{Counter, Landing, PendingOp, Wave};

pub fn exec(wave: &mut Wave, inst: &Inst, ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    let dwords = match inst.op {
        Op::SLoadB32 | Op::SLoadU16 => 1,
        Op::SLoadB64 => 2,
        Op::SLoadB128 => 4,
        Op::SLoadB256 => 8,
        Op::SLoadB512 => 16,
        _ => return Err(unknown(inst)),
    };
    let first = match *arg(inst, 0)? {
        Operand::Sgpr { first, count, .. } if count as usize == dwords => first,
        // `vcc_lo`, `vcc`, `m0`, `ttmpN`: SDATA may name any scalar register.
        Operand::Special { reg, .. }
            if reg.count() as usize == dwords && reg.sgpr_index().is_some() =>
        {
            reg.sgpr_index().unwrap_or(0) as u16
        }
        ref other => {
            return Err(FaultKind::Unsupported {
                what: format!("`{}` destination {other:?}", inst.mnemonic()),
            });
        }
    };
    let base = scalar64(wave, arg(inst, 1)?)?;
    // The third operand is the immediate offset, or an SGPR / `null` soffset (then `offset:`).
    let soffset = match arg(inst, 2)? {
        Operand::Const { value, .. } => value.bits64() as i64,
        other => scalar(wave, other, Width::B32)? as i64,
    };
    let address = base
        .wrapping_add(soffset as u64)
        .wrapping_add(inst.mods.offset as i64 as u64);
    let values = if inst.op == Op::SLoadU16 {
        // The hardware ignores the lowest address bit of a 16-bit load.
        let mut bytes = [0u8; 2];
        ctx.global.read(address & !1, &mut bytes, 0)?;
        vec![u16::from_le_bytes(bytes) as u32]
    } else {
        // The hardware ignores the two lowest address bits of dword loads.
        let mut bytes = vec![0u8; 4 * dwords];
        ctx.global.read(address & !3, &mut bytes, 0)?;
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    wave.issue(PendingOp {
        counter: match ctx.generation {
            Gen::Gfx11 => Counter::Lds,
            Gen::Gfx12 => Counter::Scalar,
        },
        out_of_order: true,
        landing: Landing::Sgpr { first, values },
        issued_at: inst.addr,
    });
    Ok(Flow::Next)
}

#[cfg(test)]
mod tests {
    use super::super::testing::Bench;
    use super::*;

    fn bench(generation: Gen) -> (Bench, u64) {
        let mut b = Bench::new(generation);
        let a = b.global.alloc(128, "kernarg");
        let bytes: Vec<u8> = (0..128u8).collect();
        b.global.write(a, &bytes, 0).unwrap();
        b.wave.sgpr[0] = a as u32;
        b.wave.sgpr[1] = (a >> 32) as u32;
        (b, a)
    }

    fn word(i: u32) -> u32 {
        u32::from_le_bytes([i as u8, i as u8 + 1, i as u8 + 2, i as u8 + 3])
    }

    #[test]
    fn scalar_loads_land_at_lgkmcnt_zero_on_gfx11() {
        let (mut b, _) = bench(Gen::Gfx11);
        b.run_asm("s_load_b32 s4, s[0:1], 0x8").unwrap();
        b.run_asm("s_load_b64 s[6:7], s[0:1], 0x10").unwrap();
        assert!(matches!(b.wave.s(4), Err(FaultKind::ReadBeforeWait { .. })));
        // Out of order: a nonzero count lands nothing.
        b.run_asm("s_waitcnt lgkmcnt(1)").unwrap();
        assert!(b.wave.s(6).is_err());
        b.run_asm("s_waitcnt lgkmcnt(0)").unwrap();
        assert_eq!(b.wave.s(4).unwrap(), word(8));
        assert_eq!(
            (b.wave.s(6).unwrap(), b.wave.s(7).unwrap()),
            (word(16), word(20))
        );
    }

    #[test]
    fn wide_loads_fill_every_register_and_gfx12_counts_in_kmcnt() {
        let (mut b, _) = bench(Gen::Gfx12);
        b.run_asm("s_load_b128 s[8:11], s[0:1], 0x20").unwrap();
        b.run_asm("s_load_b256 s[12:19], s[0:1], null").unwrap();
        b.run_asm("s_load_b512 s[20:35], s[0:1], 0x40").unwrap();
        b.run_asm("s_wait_dscnt 0x0").unwrap();
        assert!(b.wave.s(8).is_err());
        b.run_asm("s_wait_kmcnt 0x0").unwrap();
        for k in 0..4 {
            assert_eq!(b.wave.s(8 + k).unwrap(), word(0x20 + 4 * k as u32));
        }
        for k in 0..8 {
            assert_eq!(b.wave.s(12 + k).unwrap(), word(4 * k as u32));
        }
        for k in 0..16 {
            assert_eq!(b.wave.s(20 + k).unwrap(), word(0x40 + 4 * k as u32));
        }
    }

    #[test]
    fn u16_loads_zero_extend_and_soffset_registers_add() {
        let (mut b, _) = bench(Gen::Gfx12);
        b.run_asm("s_load_u16 s4, s[0:1], 0x7f").unwrap();
        b.wave.sgpr[2] = 12;
        b.run_asm("s_load_b32 s5, s[0:1], s2").unwrap();
        b.run_asm("s_wait_kmcnt 0x0").unwrap();
        assert_eq!(b.wave.s(4).unwrap(), 0x7f7e);
        assert_eq!(b.wave.s(5).unwrap(), word(12));
    }

    #[test]
    fn a_load_past_the_allocation_faults_naming_it() {
        let (mut b, _) = bench(Gen::Gfx11);
        let err = b.run_asm("s_load_b256 s[4:11], s[0:1], 0x70").unwrap_err();
        assert!(matches!(err, FaultKind::OutOfBounds { .. }), "{err}");
        assert!(err.to_string().contains("`kernarg`"), "{err}");
    }
}
