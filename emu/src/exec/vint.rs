//! Semantics of the integer and bitwise vector ALU instructions, after the RDNA3 / RDNA4
//! pseudocode. Results land only in active lanes (EXEC); lane masks written by compares and
//! carry-outs have 0 for inactive lanes. Integer ops take no source modifiers, clamp or op_sel:
//! an instruction carrying one is a fault rather than a guess (`v_cndmask_b32` alone takes
//! neg/abs, as bit operations on the sign bit).

use super::operand::{Width, row, row64, scalar, set_row, set_scalar};
use super::{Ctx, Flow, arg, unknown};
use crate::fault::FaultKind;
use crate::inst::{Form, Inst, Op, Operand, SrcMods};
use crate::wave::{LANES, VRow, Wave, sreg};

pub fn exec(wave: &mut Wave, inst: &Inst, _ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    use Op::*;
    if !is_int(inst.op) {
        return Err(unknown(inst));
    }
    plain(inst)?;
    let exec = wave.exec();
    match inst.op {
        VMovB32 => map1(wave, inst, |a| a)?,
        VNotB32 => map1(wave, inst, |a| !a)?,
        VAndB32 => map2(wave, inst, |a, b| a & b)?,
        VOrB32 => map2(wave, inst, |a, b| a | b)?,
        VXorB32 => map2(wave, inst, |a, b| a ^ b)?,
        VAddNcU32 => map2(wave, inst, u32::wrapping_add)?,
        VSubNcU32 => map2(wave, inst, u32::wrapping_sub)?,
        VSubrevNcU32 => map2(wave, inst, |a, b| b.wrapping_sub(a))?,
        // The `rev` shifts take the amount first; amounts are masked to 5 bits.
        VLshlrevB32 => map2(wave, inst, |a, b| b << (a & 31))?,
        VLshrrevB32 => map2(wave, inst, |a, b| b >> (a & 31))?,
        VAshrrevI32 => map2(wave, inst, |a, b| ((b as i32) >> (a & 31)) as u32)?,
        VMaxI32 => map2(wave, inst, |a, b| (a as i32).max(b as i32) as u32)?,
        VMinI32 => map2(wave, inst, |a, b| (a as i32).min(b as i32) as u32)?,
        VMulLoU32 => map2(wave, inst, u32::wrapping_mul)?,
        VMulHiU32 => map2(wave, inst, |a, b| ((a as u64 * b as u64) >> 32) as u32)?,
        VMulU32U24 => map2(wave, inst, |a, b| {
            (a & 0xFF_FFFF).wrapping_mul(b & 0xFF_FFFF)
        })?,
        VMbcntLoU32B32 => {
            let (a, b) = (src(wave, inst, 1)?, src(wave, inst, 2)?);
            let d = std::array::from_fn(|l| (a[l] & ((1u32 << l) - 1)).count_ones() + b[l]);
            write(wave, inst, &d, exec)?;
        }
        VAdd3U32 => map3(wave, inst, |a, b, c| a.wrapping_add(b).wrapping_add(c))?,
        VAddLshlU32 => map3(wave, inst, |a, b, c| a.wrapping_add(b) << (c & 31))?,
        VLshlAddU32 => map3(wave, inst, |a, b, c| (a << (b & 31)).wrapping_add(c))?,
        VLshlOrB32 => map3(wave, inst, |a, b, c| (a << (b & 31)) | c)?,
        VAndOrB32 => map3(wave, inst, |a, b, c| (a & b) | c)?,
        VOr3B32 => map3(wave, inst, |a, b, c| a | b | c)?,
        VMadU32U24 => map3(wave, inst, |a, b, c| {
            (a & 0xFF_FFFF).wrapping_mul(b & 0xFF_FFFF).wrapping_add(c)
        })?,
        VMin3I32 => map3(wave, inst, |a, b, c| {
            (a as i32).min(b as i32).min(c as i32) as u32
        })?,
        VMed3I32 => map3(wave, inst, |a, b, c| {
            let (a, b, c) = (a as i32, b as i32, c as i32);
            a.max(b).min(a.min(b).max(c)) as u32
        })?,
        VBfeU32 => map3(wave, inst, |a, b, c| (a >> (b & 31)) & low_mask(c))?,
        VBfeI32 => map3(wave, inst, |a, b, c| {
            let width = c & 31;
            let field = ((a as i32) >> (b & 31)) as u32 & low_mask(c);
            if width == 0 {
                0
            } else {
                (((field << (32 - width)) as i32) >> (32 - width)) as u32
            }
        })?,
        VLshlrevB64 => {
            let amount = src(wave, inst, 1)?;
            let value = src64(wave, inst, 2)?;
            let d: [u64; LANES] = std::array::from_fn(|l| value[l] << (amount[l] & 63));
            write64(wave, inst, &d, exec)?;
        }
        VCndmaskB32 => {
            let a = cndmask_src(wave, inst, 1)?;
            let b = cndmask_src(wave, inst, 2)?;
            // VOPD's v_dual_cndmask_b32 reads VCC without printing it.
            let mask = match (inst.form, inst.operands.get(3)) {
                (Form::Dual, None) => wave.s(sreg::VCC_LO)?,
                _ => scalar(wave, arg(inst, 3)?, Width::B32)?,
            };
            let d = std::array::from_fn(|l| if mask >> l & 1 == 1 { b[l] } else { a[l] });
            write(wave, inst, &d, exec)?;
        }
        // Carry-outs go to operand 1 (vcc_lo for e32, an SGPR or null for e64).
        VAddCoU32 => {
            let (a, b) = (src(wave, inst, 2)?, src(wave, inst, 3)?);
            let sums: [u64; LANES] = std::array::from_fn(|l| a[l] as u64 + b[l] as u64);
            let d = std::array::from_fn(|l| sums[l] as u32);
            write(wave, inst, &d, exec)?;
            set_scalar(wave, arg(inst, 1)?, lane_mask(exec, |l| sums[l] >> 32 != 0))?;
        }
        VAddCoCiU32 => {
            let (a, b) = (src(wave, inst, 2)?, src(wave, inst, 3)?);
            let cin = scalar(wave, arg(inst, 4)?, Width::B32)?;
            let sums: [u64; LANES] =
                std::array::from_fn(|l| a[l] as u64 + b[l] as u64 + (cin >> l & 1) as u64);
            let d = std::array::from_fn(|l| sums[l] as u32);
            write(wave, inst, &d, exec)?;
            set_scalar(wave, arg(inst, 1)?, lane_mask(exec, |l| sums[l] >> 32 != 0))?;
        }
        // 64-bit multiply-adds: {D1, D0} is the 65-bit result; D1 (bit 64) goes to operand 1.
        VMadU64U32 | VMadCoU64U32 | VMadI64I32 | VMadCoI64I32 => {
            let (a, b) = (src(wave, inst, 2)?, src(wave, inst, 3)?);
            let c = src64(wave, inst, 4)?;
            let signed = matches!(inst.op, VMadI64I32 | VMadCoI64I32);
            let full: [i128; LANES] = std::array::from_fn(|l| {
                if signed {
                    a[l] as i32 as i128 * b[l] as i32 as i128 + c[l] as i64 as i128
                } else {
                    a[l] as i128 * b[l] as i128 + c[l] as i128
                }
            });
            let d = std::array::from_fn(|l| full[l] as u64);
            write64(wave, inst, &d, exec)?;
            set_scalar(
                wave,
                arg(inst, 1)?,
                lane_mask(exec, |l| full[l] >> 64 & 1 == 1),
            )?;
        }
        VReadfirstlaneB32 => {
            let a = src(wave, inst, 1)?;
            let lane = if exec == 0 {
                0
            } else {
                exec.trailing_zeros() as usize
            };
            set_scalar(wave, arg(inst, 0)?, a[lane])?;
        }
        VCmpEqU32 | VCmpNeU32 | VCmpGeU32 | VCmpGtU32 | VCmpLeU32 | VCmpLtU32 | VCmpGeI32
        | VCmpGtI32 | VCmpLeI32 | VCmpLtI32 => {
            let (a, b) = (src(wave, inst, 1)?, src(wave, inst, 2)?);
            let mask = lane_mask(exec, |l| compare(inst.op, a[l], b[l]));
            set_scalar(wave, arg(inst, 0)?, mask)?;
        }
        // cmpx (gfx11+) writes EXEC only: lanes already off stay off.
        VCmpxEqU32 | VCmpxGtI32 | VCmpxGtU32 | VCmpxLtI32 => {
            let (a, b) = (src(wave, inst, 0)?, src(wave, inst, 1)?);
            let mask = lane_mask(exec, |l| compare(inst.op, a[l], b[l]));
            wave.set_s(sreg::EXEC_LO, mask)?;
        }
        VCmpxNeU64 => {
            let (a, b) = (src64(wave, inst, 0)?, src64(wave, inst, 1)?);
            wave.set_s(sreg::EXEC_LO, lane_mask(exec, |l| a[l] != b[l]))?;
        }
        _ => return Err(unknown(inst)),
    }
    Ok(Flow::Next)
}

/// The ops this module implements (the others go on to `vfloat`).
fn is_int(op: Op) -> bool {
    use Op::*;
    matches!(
        op,
        VAdd3U32
            | VAddCoCiU32
            | VAddCoU32
            | VAddLshlU32
            | VAddNcU32
            | VAndB32
            | VAndOrB32
            | VAshrrevI32
            | VBfeI32
            | VBfeU32
            | VCmpEqU32
            | VCmpGeI32
            | VCmpGeU32
            | VCmpGtI32
            | VCmpGtU32
            | VCmpLeI32
            | VCmpLeU32
            | VCmpLtI32
            | VCmpLtU32
            | VCmpNeU32
            | VCmpxEqU32
            | VCmpxGtI32
            | VCmpxGtU32
            | VCmpxLtI32
            | VCmpxNeU64
            | VCndmaskB32
            | VLshlAddU32
            | VLshlOrB32
            | VLshlrevB32
            | VLshlrevB64
            | VLshrrevB32
            | VMadCoI64I32
            | VMadCoU64U32
            | VMadI64I32
            | VMadU32U24
            | VMadU64U32
            | VMaxI32
            | VMbcntLoU32B32
            | VMed3I32
            | VMin3I32
            | VMinI32
            | VMovB32
            | VMulHiU32
            | VMulLoU32
            | VMulU32U24
            | VNotB32
            | VOr3B32
            | VOrB32
            | VReadfirstlaneB32
            | VSubNcU32
            | VSubrevNcU32
            | VXorB32
    )
}

/// Whether `a op b` holds for a (non-x or x) compare.
fn compare(op: Op, a: u32, b: u32) -> bool {
    use Op::*;
    let (sa, sb) = (a as i32, b as i32);
    match op {
        VCmpEqU32 | VCmpxEqU32 => a == b,
        VCmpNeU32 => a != b,
        VCmpGeU32 => a >= b,
        VCmpGtU32 | VCmpxGtU32 => a > b,
        VCmpLeU32 => a <= b,
        VCmpLtU32 => a < b,
        VCmpGeI32 => sa >= sb,
        VCmpGtI32 | VCmpxGtI32 => sa > sb,
        VCmpLeI32 => sa <= sb,
        _ => sa < sb,
    }
}

/// The low `c[4:0]` bits set (a bitfield width).
fn low_mask(c: u32) -> u32 {
    (1u32 << (c & 31)) - 1
}

/// The lane mask of `f` over the active lanes.
fn lane_mask(exec: u32, f: impl Fn(usize) -> bool) -> u32 {
    (0..LANES)
        .filter(|&l| exec >> l & 1 == 1 && f(l))
        .fold(0, |m, l| m | 1 << l)
}

/// Faults on modifiers an integer op does not have.
fn plain(inst: &Inst) -> Result<(), FaultKind> {
    let m = &inst.mods;
    if m.clamp || m.op_sel.is_some() || m.op_sel_hi.is_some() || m.neg_lo != 0 || m.neg_hi != 0 {
        return Err(FaultKind::Unsupported {
            what: format!("`{}` with clamp/op_sel/neg modifiers", inst.mnemonic()),
        });
    }
    Ok(())
}

fn mods_of(op: &Operand) -> SrcMods {
    match *op {
        Operand::Sgpr { mods, .. }
        | Operand::Vgpr { mods, .. }
        | Operand::Special { mods, .. }
        | Operand::Const { mods, .. } => mods,
        Operand::Off => SrcMods::default(),
    }
}

fn no_src_mods(inst: &Inst, op: &Operand) -> Result<(), FaultKind> {
    if mods_of(op) != SrcMods::default() {
        return Err(FaultKind::Unsupported {
            what: format!("`{}` with a neg/abs source modifier", inst.mnemonic()),
        });
    }
    Ok(())
}

/// 32-bit source `i` for every lane.
fn src(wave: &Wave, inst: &Inst, i: usize) -> Result<VRow, FaultKind> {
    let op = arg(inst, i)?;
    no_src_mods(inst, op)?;
    row(wave, op, Width::B32)
}

/// 64-bit source `i` for every lane (VGPR pair, SGPR pair or constant).
fn src64(wave: &Wave, inst: &Inst, i: usize) -> Result<[u64; LANES], FaultKind> {
    let op = arg(inst, i)?;
    no_src_mods(inst, op)?;
    row64(wave, op)
}

/// A `v_cndmask_b32` source: neg/abs act on bit 31 (abs first).
fn cndmask_src(wave: &Wave, inst: &Inst, i: usize) -> Result<VRow, FaultKind> {
    let op = arg(inst, i)?;
    let m = mods_of(op);
    let mut r = row(wave, op, Width::B32)?;
    for v in &mut r {
        if m.abs {
            *v &= !0x8000_0000;
        }
        if m.neg {
            *v ^= 0x8000_0000;
        }
    }
    Ok(r)
}

fn write(wave: &mut Wave, inst: &Inst, value: &VRow, exec: u32) -> Result<(), FaultKind> {
    set_row(wave, arg(inst, 0)?, 0, value, exec)
}

/// Writes a 64-bit result to the VGPR pair of operand 0.
fn write64(wave: &mut Wave, inst: &Inst, d: &[u64; LANES], exec: u32) -> Result<(), FaultKind> {
    let dst = arg(inst, 0)?;
    let lo = std::array::from_fn(|l| d[l] as u32);
    let hi = std::array::from_fn(|l| (d[l] >> 32) as u32);
    set_row(wave, dst, 0, &lo, exec)?;
    set_row(wave, dst, 1, &hi, exec)
}

fn map1(wave: &mut Wave, inst: &Inst, f: impl Fn(u32) -> u32) -> Result<(), FaultKind> {
    let a = src(wave, inst, 1)?;
    let exec = wave.exec();
    write(wave, inst, &a.map(f), exec)
}

fn map2(wave: &mut Wave, inst: &Inst, f: impl Fn(u32, u32) -> u32) -> Result<(), FaultKind> {
    let (a, b) = (src(wave, inst, 1)?, src(wave, inst, 2)?);
    let exec = wave.exec();
    write(wave, inst, &std::array::from_fn(|l| f(a[l], b[l])), exec)
}

fn map3(wave: &mut Wave, inst: &Inst, f: impl Fn(u32, u32, u32) -> u32) -> Result<(), FaultKind> {
    let (a, b, c) = (
        src(wave, inst, 1)?,
        src(wave, inst, 2)?,
        src(wave, inst, 3)?,
    );
    let exec = wave.exec();
    write(
        wave,
        inst,
        &std::array::from_fn(|l| f(a[l], b[l], c[l])),
        exec,
    )
}

#[cfg(test)]
mod tests {
    use crate::exec::Flow;
    use crate::exec::testing::Bench;
    use crate::fault::FaultKind;
    use crate::inst::Gen;
    use crate::wave::{LANES, POISON, VRow, sreg};

    /// One instruction run on a bench (a closure around a `run_asm("…")` literal, which is
    /// what the coverage table counts).
    type Run = fn(&mut Bench) -> Result<Flow, FaultKind>;

    /// A bench with v1 = `a`, v2 = `b`, v3 = `c` in lanes 0..n and EXEC = `exec`.
    fn bench(rows: &[&[u32]], exec: u32) -> Bench {
        let mut t = Bench::new(Gen::Gfx11);
        for (k, vals) in rows.iter().enumerate() {
            t.wave.vgpr[1 + k] = std::array::from_fn(|l| vals.get(l).copied().unwrap_or(0));
        }
        t.wave.sgpr[sreg::EXEC_LO] = exec;
        t
    }

    fn lanes(r: &VRow, n: usize) -> Vec<u32> {
        r[..n].to_vec()
    }

    /// Runs a 2-source op over lane pairs, all lanes active; returns v0's lanes.
    fn bin(run: Run, pairs: &[(u32, u32)]) -> Vec<u32> {
        let a: Vec<u32> = pairs.iter().map(|p| p.0).collect();
        let b: Vec<u32> = pairs.iter().map(|p| p.1).collect();
        let mut t = bench(&[&a, &b], u32::MAX);
        run(&mut t).unwrap();
        lanes(&t.wave.vgpr[0], pairs.len())
    }

    fn tri(run: Run, triples: &[(u32, u32, u32)]) -> Vec<u32> {
        let a: Vec<u32> = triples.iter().map(|p| p.0).collect();
        let b: Vec<u32> = triples.iter().map(|p| p.1).collect();
        let c: Vec<u32> = triples.iter().map(|p| p.2).collect();
        let mut t = bench(&[&a, &b, &c], u32::MAX);
        run(&mut t).unwrap();
        lanes(&t.wave.vgpr[0], triples.len())
    }

    const M: u32 = u32::MAX;
    const MIN: u32 = 0x8000_0000;

    #[test]
    fn inactive_lanes_keep_their_values() {
        let mut t = bench(&[&[5; 32]], 0b0101);
        t.run_asm("v_mov_b32_e32 v0, v1").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[0], 4), vec![5, POISON, 5, POISON]);
        t.run_asm("v_not_b32_e32 v0, v1").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[0], 4), vec![!5, POISON, !5, POISON]);
        t.run_asm("v_mov_b32_e32 v0, 0x64086408").unwrap();
        assert_eq!(t.wave.vgpr[0][2], 0x6408_6408);
        t.wave.sgpr[7] = 9;
        t.run_asm("v_mov_b32_e32 v0, s7").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[0], 2), vec![9, POISON]);
    }

    #[test]
    fn bitwise() {
        let p = [(0xF0F0, 0xFF00), (M, 0), (0, 0)];
        assert_eq!(
            bin(|t| t.run_asm("v_and_b32_e32 v0, v1, v2"), &p),
            vec![0xF000, 0, 0]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_or_b32_e32 v0, v1, v2"), &p),
            vec![0xFFF0, M, 0]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_xor_b32_e32 v0, v1, v2"), &p),
            vec![0x0FF0, M, 0]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_and_b32_e32 v0, 0xffff0000, v1"), &p),
            vec![0, 0xFFFF_0000, 0]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_or_b32_e64 v0, v1, 16"), &p),
            vec![0xF0F0, M, 16]
        );
        let t3 = [(0xF0, 0x3C, 0x1), (M, 0, 0x100)];
        assert_eq!(
            tri(|t| t.run_asm("v_and_or_b32 v0, v1, v2, v3"), &t3),
            vec![0x31, 0x100]
        );
        assert_eq!(
            tri(|t| t.run_asm("v_or3_b32 v0, v1, v2, v3"), &t3),
            vec![0xFD, M]
        );
        assert_eq!(
            tri(|t| t.run_asm("v_or3_b32 v0, v1, v2, 16"), &t3),
            vec![0xFC, M]
        );
    }

    #[test]
    fn adds_and_subs_wrap() {
        let p = [(M, 1), (0, 1), (MIN, MIN)];
        assert_eq!(
            bin(|t| t.run_asm("v_add_nc_u32_e32 v0, v1, v2"), &p),
            vec![0, 1, 0]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_sub_nc_u32_e32 v0, v1, v2"), &p),
            vec![M - 1, M, 0]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_sub_nc_u32_e64 v0, v1, v2"), &p),
            vec![M - 1, M, 0]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_subrev_nc_u32_e32 v0, v1, v2"), &p),
            vec![2, 1, 0]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_add_nc_u32_e32 v0, -1, v1"), &p),
            vec![M - 1, M, 0x7FFF_FFFF]
        );
        let t3 = [(M, 1, 1), (1, 2, 3)];
        assert_eq!(
            tri(|t| t.run_asm("v_add3_u32 v0, v1, v2, v3"), &t3),
            vec![1, 6]
        );
        assert_eq!(
            tri(|t| t.run_asm("v_add3_u32 v0, v1, v2, 0x7fff"), &t3),
            vec![0x7FFF, 0x8002]
        );
    }

    #[test]
    fn carries_go_to_the_mask_operand() {
        let mut t = bench(&[&[M, 1, M, 5], &[1, 1, 1, 0]], 0b0111);
        t.wave.sgpr[sreg::VCC_LO] = POISON;
        t.run_asm("v_add_co_u32 v0, vcc_lo, v1, v2").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[0], 4), vec![0, 2, 0, POISON]);
        assert_eq!(
            t.wave.vcc(),
            0b0101,
            "carry in lanes 0 and 2, inactive lane 3 is 0"
        );
        t.wave.sgpr[12] = M;
        t.run_asm("v_add_co_u32 v0, s2, s12, v2").unwrap();
        assert_eq!(t.wave.sgpr[2], 0b0111);
        assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![0, 0, 0]);
        // Carry-in from vcc_lo: lanes 0 and 2 add 1.
        t.wave.vgpr[2] = [0; LANES];
        t.run_asm("v_add_co_ci_u32_e32 v0, vcc_lo, v1, v2, vcc_lo")
            .unwrap();
        assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![0, 1, 0]);
        assert_eq!(t.wave.vcc(), 0b0101);
        t.wave.sgpr[3] = 0b0010;
        t.run_asm("v_add_co_ci_u32_e64 v0, s3, 0, v1, s3").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![M, 2, M]);
        assert_eq!(t.wave.sgpr[3], 0);
        t.wave.sgpr[3] = M;
        t.run_asm("v_add_co_ci_u32_e64 v0, s3, 0, v1, s3").unwrap();
        assert_eq!(t.wave.sgpr[3], 0b0101);
        t.run_asm("v_add_co_u32 v0, null, v1, 4").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![3, 5, 3]);
    }

    #[test]
    fn shifts_mask_the_amount() {
        let p = [(1, 3), (33, 3), (31, MIN), (32, MIN)];
        assert_eq!(
            bin(|t| t.run_asm("v_lshlrev_b32_e32 v0, v1, v2"), &p),
            vec![6, 6, 0, MIN]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_lshrrev_b32_e32 v0, v1, v2"), &p),
            vec![1, 1, 1, MIN]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_ashrrev_i32_e32 v0, v1, v2"), &p),
            vec![1, 1, M, MIN]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_ashrrev_i32_e32 v0, 31, v2"), &p),
            vec![0, 0, M, M]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_lshlrev_b32_e32 v0, 3, v1"), &p),
            vec![8, 264, 248, 256]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_lshrrev_b32_e32 v0, 4, v2"), &p),
            vec![0, 0, 0x0800_0000, 0x0800_0000]
        );
        let t3 = [(M, 1, 1), (1, 1, 33), (1, 2, 0)];
        assert_eq!(
            tri(|t| t.run_asm("v_add_lshl_u32 v0, v1, v2, v3"), &t3),
            vec![0, 4, 3]
        );
        assert_eq!(
            tri(|t| t.run_asm("v_lshl_add_u32 v0, v1, v2, v3"), &t3),
            vec![M, 35, 4]
        );
        assert_eq!(
            tri(|t| t.run_asm("v_lshl_or_b32 v0, v1, v2, v3"), &t3),
            vec![M, 35, 4]
        );
        assert_eq!(
            tri(|t| t.run_asm("v_lshl_or_b32 v0, v1, 33, 0x3000"), &t3),
            vec![0x3000 | !1, 0x3002, 0x3002]
        );
        assert_eq!(
            tri(|t| t.run_asm("v_lshl_add_u32 v0, v1, 1, 0x8050"), &t3),
            vec![0x804E, 0x8052, 0x8052]
        );
    }

    #[test]
    fn lshlrev_b64() {
        let mut t = bench(&[&[0x8000_0001, 1, 5], &[1, 0x8000_0000, 0]], 0b011);
        t.wave.vgpr[4] = [1, 64 + 1, 2]
            .iter()
            .copied()
            .chain([0; 29])
            .collect::<Vec<_>>()
            .try_into()
            .unwrap();
        t.run_asm("v_lshlrev_b64 v[6:7], 1, v[1:2]").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[6], 3), vec![2, 2, POISON]);
        assert_eq!(lanes(&t.wave.vgpr[7], 3), vec![3, 0, POISON]);
        t.run_asm("v_lshlrev_b64_e32 v[6:7], v4, v[1:2]").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[6], 2), vec![2, 2]);
        assert_eq!(
            lanes(&t.wave.vgpr[7], 2),
            vec![3, 0],
            "amount 65 masks to 1"
        );
        t.wave.sgpr[sreg::EXEC_LO] = M;
        t.run_asm("v_lshlrev_b64 v[6:7], 63, v[1:2]").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[7], 3), vec![MIN, MIN, MIN]);
        assert_eq!(lanes(&t.wave.vgpr[6], 3), vec![0, 0, 0]);
    }

    #[test]
    fn min_max_med3_signed() {
        let p = [(M, 1), (MIN, 0x7FFF_FFFF), (3, 3)];
        assert_eq!(
            bin(|t| t.run_asm("v_max_i32_e32 v0, v1, v2"), &p),
            vec![1, 0x7FFF_FFFF, 3]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_min_i32_e32 v0, v1, v2"), &p),
            vec![M, MIN, 3]
        );
        let t3 = [(M, 1, MIN), (5, 1, 3), (3, 5, 1), (1, 3, 5), (7, 7, 0)];
        assert_eq!(
            tri(|t| t.run_asm("v_min3_i32 v0, v1, v2, v3"), &t3),
            vec![MIN, 1, 1, 1, 0]
        );
        assert_eq!(
            tri(|t| t.run_asm("v_med3_i32 v0, v1, v2, v3"), &t3),
            vec![M, 3, 3, 3, 7]
        );
        let mut t = bench(&[&[0, 0x200, 50]], M);
        t.wave.sgpr[25] = 0;
        t.run_asm("v_med3_i32 v0, v1, 1, 0x100").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![1, 0x100, 50]);
        t.run_asm("v_min_i32_e32 v0, s25, v1").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![0, 0, 0]);
    }

    #[test]
    fn bitfield_extract() {
        let t3 = [
            (0xABCD_1234, 16, 8),
            (0x8000_0000, 31, 1),
            (M, 0, 0),
            (0xF0, 4, 36),
            (0x70, 4, 3),
        ];
        assert_eq!(
            tri(|t| t.run_asm("v_bfe_u32 v0, v1, v2, v3"), &t3),
            vec![0xCD, 1, 0, 0xF, 7]
        );
        assert_eq!(
            tri(|t| t.run_asm("v_bfe_i32 v0, v1, v2, v3"), &t3),
            vec![0xFFFF_FFCD, M, 0, M, M]
        );
        assert_eq!(
            tri(|t| t.run_asm("v_bfe_u32 v0, v1, 16, 1"), &t3),
            vec![1, 0, 1, 0, 0]
        );
        assert_eq!(
            tri(|t| t.run_asm("v_bfe_i32 v0, v1, 28, 1"), &t3),
            vec![0, 0, M, 0, 0]
        );
    }

    #[test]
    fn multiplies() {
        let p = [(M, M), (0x1_0000, 0x1_0000), (3, 5)];
        assert_eq!(
            bin(|t| t.run_asm("v_mul_lo_u32 v0, v1, v2"), &p),
            vec![1, 0, 15]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_mul_hi_u32 v0, v1, v2"), &p),
            vec![M - 1, 1, 0]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_mul_u32_u24_e32 v0, v1, v2"), &p),
            vec![0xFE00_0001, 0, 15]
        );
        assert_eq!(
            bin(|t| t.run_asm("v_mul_u32_u24_e32 v0, 0x10001, v1"), &p),
            vec![0x00FE_FFFF, 0x1_0000, 0x30003]
        );
        let t3 = [(M, M, 1), (0x0100_0002, 3, M)];
        assert_eq!(
            tri(|t| t.run_asm("v_mad_u32_u24 v0, v1, v2, v3"), &t3),
            vec![0xFE00_0002, 5]
        );
    }

    #[test]
    fn mad_64() {
        let mut t = bench(&[&[M, 2, M], &[M, 3, 1]], 0b011);
        t.wave.sgpr[10] = M;
        t.wave.sgpr[18] = 1;
        t.wave.sgpr[19] = 0;
        // u64: 0xFFFFFFFF * 0xFFFFFFFF + 0 = 0xFFFFFFFE_00000001
        t.run_asm("v_mad_u64_u32 v[5:6], null, v1, s10, 0").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[5], 3), vec![1, 0xFFFF_FFFE, POISON]);
        assert_eq!(lanes(&t.wave.vgpr[6], 3), vec![0xFFFF_FFFE, 1, POISON]);
        // u64 carry-out: (2^32-1)^2 + (2^64 - 1) overflows 64 bits.
        t.wave.vgpr[8] = [M; LANES];
        t.wave.vgpr[9] = [M; LANES];
        t.wave.sgpr[4] = POISON;
        t.run_asm("v_mad_co_u64_u32 v[10:11], s4, v1, s10, v[8:9]")
            .unwrap();
        assert_eq!(
            t.wave.sgpr[4], 0b11,
            "both active lanes overflow; lane 2 is off"
        );
        assert_eq!(t.wave.vgpr[10][0], 0);
        assert_eq!(t.wave.vgpr[11][0], 0xFFFF_FFFE);
        // i64: -1 * -1 + 1 = 2;  2 * -1 + 1 = -1.
        t.run_asm("v_mad_i64_i32 v[5:6], null, v1, s10, s[18:19]")
            .unwrap();
        assert_eq!(lanes(&t.wave.vgpr[5], 2), vec![2, M]);
        assert_eq!(lanes(&t.wave.vgpr[6], 2), vec![0, M]);
        t.run_asm("v_mad_co_i64_i32 v[5:6], s4, s10, v2, 0")
            .unwrap();
        assert_eq!(lanes(&t.wave.vgpr[5], 2), vec![1, 0xFFFF_FFFD]);
        assert_eq!(lanes(&t.wave.vgpr[6], 2), vec![0, M]);
        assert_eq!(
            t.wave.sgpr[4], 0b10,
            "bit 64 of the 65-bit signed result: the sign"
        );
        t.run_asm("v_mad_co_u64_u32 v[5:6], null, 0xffffd000, s10, v[8:9]")
            .unwrap();
        assert_eq!(t.wave.vgpr[5][0], 0x2FFF);
        assert_eq!(t.wave.vgpr[6][0], 0xFFFF_CFFF);
    }

    #[test]
    fn mbcnt_counts_lanes_below() {
        let mut t = bench(&[], M);
        t.run_asm("v_mbcnt_lo_u32_b32 v0, -1, 0").unwrap();
        assert_eq!(t.wave.vgpr[0], std::array::from_fn(|l| l as u32));
        t.wave.sgpr[3] = 0b1010;
        t.run_asm("v_mbcnt_lo_u32_b32 v0, s3, 10").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[0], 5), vec![10, 10, 11, 11, 12]);
    }

    #[test]
    fn readfirstlane() {
        let mut t = bench(
            &[&std::array::from_fn::<u32, 32, _>(|l| 100 + l as u32)],
            0b1100,
        );
        t.run_asm("v_readfirstlane_b32 s16, v1").unwrap();
        assert_eq!(t.wave.sgpr[16], 102);
        t.wave.sgpr[sreg::EXEC_LO] = 0;
        t.run_asm("v_readfirstlane_b32 s16, v1").unwrap();
        assert_eq!(t.wave.sgpr[16], 100, "lane 0 when EXEC is 0");
    }

    #[test]
    fn compares_write_masks_with_inactive_lanes_zero() {
        let a = [0, 1, M, 5, 5];
        let b = [0, 2, 1, 5, 4];
        let cases: &[(Run, u32)] = &[
            (|t| t.run_asm("v_cmp_eq_u32_e32 vcc_lo, v1, v2"), 0b01001),
            (|t| t.run_asm("v_cmp_ne_u32_e32 vcc_lo, v1, v2"), 0b10110),
            (|t| t.run_asm("v_cmp_ge_u32_e64 s0, v1, v2"), 0b11101),
            (|t| t.run_asm("v_cmp_gt_u32_e32 vcc_lo, v1, v2"), 0b10100),
            (|t| t.run_asm("v_cmp_gt_u32_e64 s0, v1, v2"), 0b10100),
            (|t| t.run_asm("v_cmp_le_u32_e32 vcc_lo, v1, v2"), 0b01011),
            (|t| t.run_asm("v_cmp_le_u32_e64 s0, v1, v2"), 0b01011),
            (|t| t.run_asm("v_cmp_lt_u32_e32 vcc_lo, v1, v2"), 0b00010),
            (|t| t.run_asm("v_cmp_lt_u32_e64 s0, v1, v2"), 0b00010),
            (|t| t.run_asm("v_cmp_ge_i32_e32 vcc_lo, v1, v2"), 0b11001),
            (|t| t.run_asm("v_cmp_gt_i32_e32 vcc_lo, v1, v2"), 0b10000),
            (|t| t.run_asm("v_cmp_gt_i32_e64 s0, v1, v2"), 0b10000),
            (|t| t.run_asm("v_cmp_le_i32_e32 vcc_lo, v1, v2"), 0b01111),
            (|t| t.run_asm("v_cmp_le_i32_e64 s0, v1, v2"), 0b01111),
            (|t| t.run_asm("v_cmp_lt_i32_e32 vcc_lo, v1, v2"), 0b00110),
            (|t| t.run_asm("v_cmp_lt_i32_e64 s0, v1, v2"), 0b00110),
            (|t| t.run_asm("v_cmp_eq_u32_e64 s0, v1, v2"), 0b01001),
        ];
        // e32 forms write vcc_lo, e64 forms s0; the other one keeps its poison.
        let mask = |t: &Bench| {
            if t.wave.vcc() != POISON {
                t.wave.vcc()
            } else {
                t.wave.sgpr[0]
            }
        };
        for (i, &(run, want)) in cases.iter().enumerate() {
            let mut t = bench(&[&a, &b], 0b11111);
            run(&mut t).unwrap();
            assert_eq!(mask(&t), want, "case {i}");
            // The same with lanes 0 and 4 off: their bits are 0.
            let mut t = bench(&[&a, &b], 0b01110);
            run(&mut t).unwrap();
            assert_eq!(mask(&t), want & 0b01110, "case {i} with lanes off");
        }
        let mut t = bench(&[&[0, 1, 2]], 0b111);
        t.run_asm("v_cmp_eq_u32_e32 vcc_lo, 0, v1").unwrap();
        assert_eq!(t.wave.vcc(), 0b001);
        t.wave.sgpr[4] = 1;
        t.run_asm("v_cmp_gt_i32_e32 vcc_lo, s4, v1").unwrap();
        assert_eq!(t.wave.vcc(), 0b001);
        t.run_asm("v_cmp_lt_i32_e64 s1, -1, v1").unwrap();
        assert_eq!(t.wave.sgpr[1], 0b111);
    }

    #[test]
    fn cmpx_writes_exec_only() {
        let a = [0, 1, M, 5];
        let mut t = bench(&[&a], 0b1110);
        t.wave.sgpr[sreg::VCC_LO] = 0x55;
        t.run_asm("v_cmpx_gt_u32_e32 6, v1").unwrap();
        assert_eq!(
            (t.wave.exec(), t.wave.vcc()),
            (0b1010, 0x55),
            "lane 0 was off and stays off"
        );
        t.wave.sgpr[sreg::EXEC_LO] = 0b1111;
        t.run_asm("v_cmpx_eq_u32_e32 0, v1").unwrap();
        assert_eq!(t.wave.exec(), 0b0001);
        t.wave.sgpr[sreg::EXEC_LO] = 0b1111;
        t.run_asm("v_cmpx_lt_i32_e32 0, v1").unwrap();
        assert_eq!(t.wave.exec(), 0b1010);
        t.wave.sgpr[sreg::EXEC_LO] = 0b1111;
        t.run_asm("v_cmpx_lt_i32_e64 v1, 1").unwrap();
        assert_eq!(t.wave.exec(), 0b0101);
        t.wave.sgpr[sreg::EXEC_LO] = 0b1111;
        t.wave.sgpr[17] = 1;
        t.run_asm("v_cmpx_gt_i32_e64 s17, v1").unwrap();
        assert_eq!(t.wave.exec(), 0b0101);
        t.wave.sgpr[sreg::EXEC_LO] = 0b1111;
        t.run_asm("v_cmpx_gt_u32_e64 s17, v1").unwrap();
        assert_eq!(t.wave.exec(), 0b0001);
        let mut t = bench(&[&[0, 1, 0, 0], &[0, 0, 1, 0]], 0b1111);
        t.run_asm("v_cmpx_ne_u64_e32 0, v[1:2]").unwrap();
        assert_eq!(t.wave.exec(), 0b0110, "the high word counts");
    }

    #[test]
    fn cndmask_forms() {
        let mut t = bench(&[&[1, 1, 1, 1], &[2, 2, 2, 2]], 0b0111);
        t.wave.sgpr[sreg::VCC_LO] = 0b1010;
        t.run_asm("v_cndmask_b32_e32 v0, v1, v2, vcc_lo").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[0], 4), vec![1, 2, 1, POISON]);
        t.wave.sgpr[1] = 0b0001;
        t.run_asm("v_cndmask_b32_e64 v0, 0, v1, s1").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[0], 4), vec![1, 0, 0, POISON]);
        t.run_asm("v_cndmask_b32_e64 v0, 0, 1, s1").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![1, 0, 0]);
        t.run_asm("v_cndmask_b32_e32 v0, 0x64086408, v2, vcc_lo")
            .unwrap();
        assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![0x6408_6408, 2, 0x6408_6408]);
        // neg/abs act on the sign bit: -|v| sets it, -v flips it.
        t.wave.vgpr[3] = [0x8000_0001; LANES];
        t.run_asm("v_cndmask_b32_e64 v0, -|v3|, -v3, s1").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![1, 0x8000_0001, 0x8000_0001]);
        t.run_asm("v_cndmask_b32_e64 v0, |v3|, v3, s1").unwrap();
        assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![0x8000_0001, 1, 1]);
    }

    #[test]
    fn modifiers_an_integer_op_lacks_are_faults() {
        let mut t = bench(&[&[1], &[2]], M);
        assert!(t.run_asm("v_add_nc_u32_e64 v0, -v1, v2").is_err());
        assert!(t.run_asm("v_add3_u32 v0, v1, v2, v1 clamp").is_err());
        assert!(
            t.run_asm("v_add_co_u32 v0, vcc_lo, v1").is_err(),
            "a missing operand"
        );
    }
}
