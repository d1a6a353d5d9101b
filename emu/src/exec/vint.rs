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
mod tests;
