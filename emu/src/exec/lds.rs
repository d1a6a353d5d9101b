//! LDS instructions (`ds_*`): the workgroup's shared memory, and `ds_bpermute_b32`, which uses
//! the LDS crossbar to move data between lanes without touching memory.
//!
//! All of them count in [`Counter::Lds`] (gfx11 `lgkmcnt`, gfx12 `dscnt`), in order: loads read
//! LDS at issue and land at the wait; stores write at issue and are counted until waited for.
//! Addresses are byte offsets into the workgroup's LDS (VGPR + `offset:`; the `2addr` forms'
//! `offset0`/`offset1` count 4-byte elements).

use super::operand::{Width, row, row_at};
use super::{Ctx, Flow, arg, unknown};
use crate::fault::FaultKind;
use crate::inst::{Inst, Op, Operand};
use crate::sanitize::Kind;
use crate::wave::{Counter, LANES, Landing, PendingOp, VRow, Wave};

pub fn exec(wave: &mut Wave, inst: &Inst, ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    match inst.op {
        Op::DsLoadB32 => load(wave, inst, ctx, &[0], 1),
        Op::DsLoadB128 => load(wave, inst, ctx, &[0], 4),
        Op::DsLoad2addrB32 => {
            let (o0, o1) = (inst.mods.offset0 as u32 * 4, inst.mods.offset1 as u32 * 4);
            load(wave, inst, ctx, &[o0, o1], 1)
        }
        Op::DsStoreB16 => store(wave, inst, ctx, 2),
        Op::DsStoreB32 => store(wave, inst, ctx, 4),
        Op::DsStoreB64 => store(wave, inst, ctx, 8),
        Op::DsStoreB96 => store(wave, inst, ctx, 12),
        Op::DsStoreB128 => store(wave, inst, ctx, 16),
        Op::DsBpermuteB32 => bpermute(wave, inst),
        _ => Err(unknown(inst)),
    }
}

/// Per-lane LDS byte addresses: the address VGPR plus the unsigned `offset:`.
pub(crate) fn addresses(wave: &Wave, inst: &Inst, vaddr: usize) -> Result<VRow, FaultKind> {
    let a = row(wave, arg(inst, vaddr)?, Width::B32)?;
    let offset = inst.mods.offset as u32;
    Ok(a.map(|a| a.wrapping_add(offset)))
}

fn destination(inst: &Inst, dwords: usize) -> Result<u16, FaultKind> {
    match *arg(inst, 0)? {
        Operand::Vgpr { first, count, .. } if count as usize == dwords => Ok(first),
        ref other => Err(FaultKind::Unsupported {
            what: format!("`{}` destination {other:?}", inst.mnemonic()),
        }),
    }
}

fn queue(wave: &mut Wave, inst: &Inst, landing: Landing) {
    wave.issue(PendingOp {
        counter: Counter::Lds,
        out_of_order: false,
        landing,
        issued_at: inst.addr,
    });
}

/// Reads `dwords` consecutive dwords at each of `parts` (byte offsets from the address), into
/// consecutive destination registers.
fn load(
    wave: &mut Wave,
    inst: &Inst,
    ctx: &mut Ctx<'_>,
    parts: &[u32],
    dwords: usize,
) -> Result<Flow, FaultKind> {
    let first = destination(inst, parts.len() * dwords)?;
    let addrs = addresses(wave, inst, 1)?;
    let exec = wave.exec();
    let mut values: Vec<VRow> = vec![[0; LANES]; parts.len() * dwords];
    for (lane, &address) in addrs.iter().enumerate() {
        if exec >> lane & 1 == 0 {
            continue;
        }
        for (p, &part) in parts.iter().enumerate() {
            if let Some(s) = ctx.sanitizer.as_deref_mut() {
                let at = address.wrapping_add(part);
                s.lds(Kind::Read, inst.addr, lane as u8, at, 4 * dwords);
            }
            for k in 0..dwords {
                let mut b = [0u8; 4];
                let at = address.wrapping_add(part).wrapping_add(4 * k as u32);
                ctx.lds.read(at, &mut b, lane as u8)?;
                values[p * dwords + k][lane] = u32::from_le_bytes(b);
            }
        }
    }
    queue(
        wave,
        inst,
        Landing::Vgpr {
            first,
            values,
            lanes: exec,
        },
    );
    Ok(Flow::Next)
}

fn store(wave: &mut Wave, inst: &Inst, ctx: &mut Ctx<'_>, bytes: usize) -> Result<Flow, FaultKind> {
    let dwords = bytes.div_ceil(4);
    let data_op = arg(inst, 1)?;
    let data: Vec<VRow> = match *data_op {
        Operand::Vgpr { count, .. } if count as usize == dwords => (0..dwords)
            .map(|k| row_at(wave, data_op, k))
            .collect::<Result<_, _>>()?,
        ref other => {
            return Err(FaultKind::Unsupported {
                what: format!("`{}` data {other:?}", inst.mnemonic()),
            });
        }
    };
    let addrs = addresses(wave, inst, 0)?;
    let exec = wave.exec();
    for (lane, &address) in addrs.iter().enumerate() {
        if exec >> lane & 1 == 0 {
            continue;
        }
        let mut buf = [0u8; 16];
        for (k, row) in data.iter().enumerate() {
            buf[4 * k..4 * k + 4].copy_from_slice(&row[lane].to_le_bytes());
        }
        ctx.lds.write(address, &buf[..bytes], lane as u8)?;
        if let Some(s) = ctx.sanitizer.as_deref_mut() {
            s.lds(Kind::Write, inst.addr, lane as u8, address, bytes);
        }
    }
    queue(wave, inst, Landing::Nothing);
    Ok(Flow::Next)
}

/// `ds_bpermute_b32 vdst, vaddr, vdata`: lane i reads `vdata` of lane `(vaddr[i] + offset) / 4
/// mod 32` (address bits 6:2); a source lane outside EXEC gives 0; only EXEC lanes are written.
fn bpermute(wave: &mut Wave, inst: &Inst) -> Result<Flow, FaultKind> {
    let first = destination(inst, 1)?;
    let addrs = addresses(wave, inst, 1)?;
    let data = row(wave, arg(inst, 2)?, Width::B32)?;
    let exec = wave.exec();
    let out: VRow = std::array::from_fn(|i| {
        let src = (addrs[i] >> 2) as usize % LANES;
        if exec >> src & 1 == 1 { data[src] } else { 0 }
    });
    queue(
        wave,
        inst,
        Landing::Vgpr {
            first,
            values: vec![out],
            lanes: exec,
        },
    );
    Ok(Flow::Next)
}

#[cfg(test)]
mod tests {
    use super::super::testing::Bench;
    use super::*;
    use crate::inst::Gen;
    use crate::wave::{POISON, sreg};

    fn lanes(f: impl Fn(u32) -> u32) -> VRow {
        std::array::from_fn(|l| f(l as u32))
    }

    #[test]
    fn stores_then_loads_round_trip_with_byte_offsets() {
        let mut b = Bench::new(Gen::Gfx11);
        b.wave.set_v(1, &lanes(|l| 16 * l), u32::MAX).unwrap();
        for k in 0..4 {
            b.wave
                .set_v(2 + k, &lanes(|l| 100 * l + k as u32), u32::MAX)
                .unwrap();
        }
        b.run_asm("ds_store_b128 v1, v[2:5] offset:16").unwrap();
        b.run_asm("ds_load_b32 v10, v1 offset:20").unwrap();
        b.run_asm("ds_load_b128 v[12:15], v1 offset:16").unwrap();
        assert!(matches!(
            b.wave.v(10),
            Err(FaultKind::ReadBeforeWait { .. })
        ));
        // In order: lgkmcnt(1) lands the store and the first load only.
        b.run_asm("s_waitcnt lgkmcnt(1)").unwrap();
        assert_eq!(b.wave.v(10).unwrap()[3], 301);
        assert!(b.wave.v(12).is_err());
        b.run_asm("s_waitcnt lgkmcnt(0)").unwrap();
        for k in 0..4 {
            assert_eq!(b.wave.v(12 + k).unwrap()[7], 700 + k as u32);
        }
    }

    #[test]
    fn narrow_and_odd_width_stores_write_only_their_bytes() {
        let mut b = Bench::new(Gen::Gfx12);
        b.wave.set_v(1, &[0; 32], u32::MAX).unwrap();
        b.wave.set_v(2, &[0x1111_2222; 32], u32::MAX).unwrap();
        b.wave.set_v(3, &[0x3333_4444; 32], u32::MAX).unwrap();
        b.wave.set_v(4, &[0x5555_6666; 32], u32::MAX).unwrap();
        b.wave.sgpr[sreg::EXEC_LO] = 1;
        b.run_asm("ds_store_b16 v1, v2").unwrap();
        let mut out = [0u8; 4];
        b.lds.read(0, &mut out, 0).unwrap();
        assert_eq!(u32::from_le_bytes(out), (POISON & 0xFFFF_0000) | 0x2222);
        b.run_asm("ds_store_b32 v1, v3 offset:4").unwrap();
        b.run_asm("ds_store_b64 v1, v[2:3] offset:8").unwrap();
        b.run_asm("ds_store_b96 v1, v[2:4] offset:16").unwrap();
        let mut w = [0u8; 32];
        b.lds.read(0, &mut w, 0).unwrap();
        let word =
            |i: usize| u32::from_le_bytes([w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]]);
        assert_eq!(
            (
                word(1),
                word(2),
                word(3),
                word(4),
                word(5),
                word(6),
                word(7)
            ),
            (
                0x3333_4444,
                0x1111_2222,
                0x3333_4444,
                0x1111_2222,
                0x3333_4444,
                0x5555_6666,
                POISON
            )
        );
        assert_eq!(b.wave.pending.ops().len(), 4);
        b.run_asm("s_wait_dscnt 0x0").unwrap();
        assert!(b.wave.pending.ops().is_empty());
    }

    #[test]
    fn two_address_loads_scale_their_offsets_by_four() {
        let mut b = Bench::new(Gen::Gfx11);
        for i in 0..16u32 {
            b.lds.write(4 * i, &(1000 + i).to_le_bytes(), 0).unwrap();
        }
        b.wave.set_v(6, &[8; 32], u32::MAX).unwrap();
        b.run_asm("ds_load_2addr_b32 v[15:16], v6 offset0:2 offset1:3")
            .unwrap();
        b.run_asm("ds_load_2addr_b32 v[17:18], v6 offset1:7")
            .unwrap();
        b.run_asm("s_waitcnt lgkmcnt(0)").unwrap();
        assert_eq!(b.wave.v(15).unwrap()[0], 1004);
        assert_eq!(b.wave.v(16).unwrap()[0], 1005);
        assert_eq!(b.wave.v(17).unwrap()[0], 1002);
        assert_eq!(b.wave.v(18).unwrap()[0], 1009);
    }

    #[test]
    fn lds_accesses_past_the_workgroup_size_fault_naming_the_lane() {
        let mut b = Bench::new(Gen::Gfx11);
        b.wave.set_v(1, &lanes(|l| 2048 * l), u32::MAX).unwrap();
        b.run_asm("ds_load_b32 v2, v1").unwrap();
        // 64 KiB of LDS: lane 31 at 63488 + 2048 is the first byte past the end.
        let err = b.run_asm("ds_store_b32 v1, v1 offset:2048").unwrap_err();
        assert!(
            matches!(
                err,
                FaultKind::OutOfBounds {
                    lane: 31,
                    space: crate::fault::Space::Lds,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn bpermute_reads_the_addressed_lane_and_inactive_sources_give_zero() {
        let mut b = Bench::new(Gen::Gfx11);
        b.wave.set_v(2, &lanes(|l| 500 + l), u32::MAX).unwrap();
        // Lane i reads lane 31 - i; address bits above 6 are ignored (lane 0 asks for 31 + 32).
        b.wave
            .set_v(
                1,
                &lanes(|l| if l == 0 { 4 * 63 } else { 4 * (31 - l) }),
                u32::MAX,
            )
            .unwrap();
        b.wave.set_v(3, &[7; 32], u32::MAX).unwrap();
        b.wave.sgpr[sreg::EXEC_LO] = 0x0000_FFFF;
        b.run_asm("ds_bpermute_b32 v3, v1, v2").unwrap();
        b.run_asm("s_waitcnt lgkmcnt(0)").unwrap();
        let v3 = *b.wave.v(3).unwrap();
        // Lanes 0..16 read lanes 31..16, all inactive: 0.
        assert_eq!(v3[0], 0);
        assert_eq!(v3[5], 0);
        // Inactive destination lanes keep their value.
        assert_eq!(v3[20], 7);
        b.wave.sgpr[sreg::EXEC_LO] = u32::MAX;
        b.run_asm("ds_bpermute_b32 v4, v1, v2 offset:4").unwrap();
        b.run_asm("s_waitcnt lgkmcnt(0)").unwrap();
        let v4 = *b.wave.v(4).unwrap();
        assert_eq!(v4[0], 500); // (252 + 4) / 4 = 64 → lane 0
        assert_eq!(v4[1], 500 + 31);
        assert_eq!(v4[31], 501);
    }
}
