//! Semantics of the integer and bitwise [`Class::Salu`](super::Class) instructions, after the
//! RDNA3 / RDNA4 pseudocode: each op's SCC rule (carry, signed overflow, nonzero result,
//! comparison) is spelled out where the op is, since they differ op by op.

use super::operand::{Width, scalar, scalar64, set_scalar, set_scalar64};
use super::{Ctx, Flow, arg, unknown};
use crate::fault::FaultKind;
use crate::inst::{Const, Inst, Op, Operand};
use crate::wave::{Wave, sreg};

pub fn exec(wave: &mut Wave, inst: &Inst, _ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    use Op::*;
    let s = |wave: &Wave, i: usize| scalar(wave, arg(inst, i)?, Width::B32);
    let s64 = |wave: &Wave, i: usize| scalar64(wave, arg(inst, i)?);
    match inst.op {
        // Moves and selects: SCC untouched (s_cselect reads it).
        SMovB32 => {
            let v = s(wave, 1)?;
            set(wave, inst, v)?;
        }
        SMovB64 => {
            let v = s64(wave, 1)?;
            set_scalar64(wave, arg(inst, 0)?, v)?;
        }
        SMovkI32 => {
            let k = simm16(inst, 1)? as i16 as u32;
            set(wave, inst, k)?;
        }
        SCselectB32 => {
            let (a, b) = (s(wave, 1)?, s(wave, 2)?);
            set(wave, inst, if wave.scc { a } else { b })?;
        }
        // Adds and subtracts: SCC is the unsigned carry (`_u32`) or the signed overflow (`_i32`);
        // gfx12's `_co_` names are gfx11's ops renamed, `s_add_nc_u64` leaves SCC alone.
        SAddU32 => {
            let (d, c) = s(wave, 1)?.overflowing_add(s(wave, 2)?);
            set_scc(wave, inst, d, c)?;
        }
        SAddcU32 | SAddCoCiU32 => {
            let sum = s(wave, 1)? as u64 + s(wave, 2)? as u64 + wave.scc as u64;
            set_scc(wave, inst, sum as u32, sum >> 32 != 0)?;
        }
        SAddI32 | SAddCoI32 => {
            let (d, o) = (s(wave, 1)? as i32).overflowing_add(s(wave, 2)? as i32);
            set_scc(wave, inst, d as u32, o)?;
        }
        SSubI32 | SSubCoI32 => {
            let (d, o) = (s(wave, 1)? as i32).overflowing_sub(s(wave, 2)? as i32);
            set_scc(wave, inst, d as u32, o)?;
        }
        SAddkI32 | SAddkCoI32 => {
            let k = simm16(inst, 1)? as i16 as i32;
            let (d, o) = (s(wave, 0)? as i32).overflowing_add(k);
            set_scc(wave, inst, d as u32, o)?;
        }
        SAddNcU64 => {
            let d = s64(wave, 1)?.wrapping_add(s64(wave, 2)?);
            set_scalar64(wave, arg(inst, 0)?, d)?;
        }
        SAbsI32 => {
            let d = (s(wave, 1)? as i32).wrapping_abs() as u32;
            set_scc(wave, inst, d, d != 0)?;
        }
        // Multiplies: SCC untouched.
        SMulI32 => {
            let d = s(wave, 1)?.wrapping_mul(s(wave, 2)?);
            set(wave, inst, d)?;
        }
        SMulkI32 => {
            let k = simm16(inst, 1)? as i16 as i32 as u32;
            let d = s(wave, 0)?.wrapping_mul(k);
            set(wave, inst, d)?;
        }
        SMulHiU32 => {
            let p = s(wave, 1)? as u64 * s(wave, 2)? as u64;
            set(wave, inst, (p >> 32) as u32)?;
        }
        SMulHiI32 => {
            let p = s(wave, 1)? as i32 as i64 * s(wave, 2)? as i32 as i64;
            set(wave, inst, (p >> 32) as u32)?;
        }
        SMulU64 => {
            let d = s64(wave, 1)?.wrapping_mul(s64(wave, 2)?);
            set_scalar64(wave, arg(inst, 0)?, d)?;
        }
        // Min: SCC says whether S0 was chosen (S0 < S1).
        SMinI32 => {
            let (a, b) = (s(wave, 1)?, s(wave, 2)?);
            let lt = (a as i32) < (b as i32);
            set_scc(wave, inst, if lt { a } else { b }, lt)?;
        }
        SMinU32 => {
            let (a, b) = (s(wave, 1)?, s(wave, 2)?);
            set_scc(wave, inst, a.min(b), a < b)?;
        }
        // Bitwise ops and shifts: SCC = result != 0; shift amounts are masked to 5 (6) bits.
        SAndB32 | SOrB32 | SXorB32 | SAndNot1B32 | SLshlB32 | SLshrB32 | SAshrI32 | SBfeU32 => {
            let d = bitwise32(inst.op, s(wave, 1)?, s(wave, 2)?);
            set_scc(wave, inst, d, d != 0)?;
        }
        SNotB32 => {
            let d = !s(wave, 1)?;
            set_scc(wave, inst, d, d != 0)?;
        }
        SLshlB64 => {
            let d = s64(wave, 1)? << (s(wave, 2)? & 63);
            set_scalar64(wave, arg(inst, 0)?, d)?;
            wave.scc = d != 0;
        }
        SBitset0B32 => {
            let bit = s(wave, 1)? & 31;
            let d = s(wave, 0)? & !(1u32 << bit);
            set(wave, inst, d)?;
        }
        // Saveexec: sdst = old EXEC, EXEC = op(S0, EXEC), SCC = EXEC != 0 (wave32: EXEC_LO).
        SAndSaveexecB32 | SAndNot1SaveexecB32 | SOrSaveexecB32 => saveexec(wave, inst)?,
        // Compares: SCC only.
        SCmpEqU32 | SCmpLgU32 | SCmpGeU32 | SCmpGtU32 | SCmpLeU32 | SCmpLtU32 => {
            let (a, b) = (s(wave, 0)?, s(wave, 1)?);
            wave.scc = compare(inst.op, a.cmp(&b));
        }
        // Bit tests: SCC = whether bit S1 of S0 is 0 (bitcmp0) or 1 (bitcmp1); the bit index is
        // S1's low 5 bits (b32) or 6 bits (b64).
        SBitcmp0B32 | SBitcmp1B32 => {
            let bit = (s(wave, 0)? >> (s(wave, 1)? & 31)) & 1;
            wave.scc = bit == u32::from(inst.op == SBitcmp1B32);
        }
        SBitcmp0B64 | SBitcmp1B64 => {
            let bit = (s64(wave, 0)? >> (s(wave, 1)? & 63)) & 1;
            wave.scc = bit == u64::from(inst.op == SBitcmp1B64);
        }
        SCmpGeI32 | SCmpGtI32 | SCmpLtI32 => {
            let (a, b) = (s(wave, 0)? as i32, s(wave, 1)? as i32);
            wave.scc = compare(inst.op, a.cmp(&b));
        }
        SCmpEqU64 | SCmpLgU64 => {
            let (a, b) = (s64(wave, 0)?, s64(wave, 1)?);
            wave.scc = compare(inst.op, a.cmp(&b));
        }
        // The k compares: simm16 sign-extended for `_i32`, zero-extended for `_u32`.
        SCmpkEqI32 => {
            let k = simm16(inst, 1)? as i16 as i32;
            wave.scc = s(wave, 0)? as i32 == k;
        }
        SCmpkGtU32 | SCmpkLtU32 => {
            let (a, k) = (s(wave, 0)?, simm16(inst, 1)? as u32);
            wave.scc = compare(inst.op, a.cmp(&k));
        }
        _ => return Err(unknown(inst)),
    }
    Ok(Flow::Next)
}

/// The bitwise ops and shifts on S0 and S1 (`s_and_b32` … `s_bfe_u32`): shift amounts masked
/// to 5 bits. A step of [`exec`]'s arm, inlined there: no extra dispatch.
#[inline(always)]
fn bitwise32(op: Op, a: u32, b: u32) -> u32 {
    use Op::*;
    match op {
        SAndB32 => a & b,
        SOrB32 => a | b,
        SXorB32 => a ^ b,
        SAndNot1B32 => a & !b,
        SLshlB32 => a << (b & 31),
        SLshrB32 => a >> (b & 31),
        SAshrI32 => ((a as i32) >> (b & 31)) as u32,
        _ => bfe_u32(a, b),
    }
}

/// The saveexec ops: sdst = old EXEC, EXEC = op(S0, EXEC), SCC = EXEC != 0 (wave32: EXEC_LO).
/// A step of [`exec`]'s arm, inlined there: no extra dispatch.
#[inline(always)]
fn saveexec(wave: &mut Wave, inst: &Inst) -> Result<(), FaultKind> {
    let old = wave.s(sreg::EXEC_LO)?;
    let a = scalar(wave, arg(inst, 1)?, Width::B32)?;
    let exec = match inst.op {
        Op::SAndSaveexecB32 => a & old,
        Op::SAndNot1SaveexecB32 => a & !old,
        _ => a | old,
    };
    wave.set_s(sreg::EXEC_LO, exec)?;
    set(wave, inst, old)?;
    wave.scc = exec != 0;
    Ok(())
}

/// Whether the ordering of S0 against S1 satisfies the compare `op`.
fn compare(op: Op, ord: std::cmp::Ordering) -> bool {
    use Op::*;
    use std::cmp::Ordering::*;
    match op {
        SCmpEqU32 | SCmpEqU64 => ord == Equal,
        SCmpLgU32 | SCmpLgU64 => ord != Equal,
        SCmpGeU32 | SCmpGeI32 => ord != Less,
        SCmpGtU32 | SCmpGtI32 | SCmpkGtU32 => ord == Greater,
        SCmpLeU32 => ord != Greater,
        _ => ord == Less,
    }
}

/// `s_bfe_u32`: offset in S1[4:0], width in S1[22:16] (a width of 32 or more keeps every bit
/// above the offset).
fn bfe_u32(a: u32, b: u32) -> u32 {
    let width = (b >> 16) & 0x7f;
    let mask = if width >= 32 {
        u32::MAX
    } else {
        (1u32 << width) - 1
    };
    (a >> (b & 31)) & mask
}

/// Writes operand 0.
fn set(wave: &mut Wave, inst: &Inst, value: u32) -> Result<(), FaultKind> {
    set_scalar(wave, arg(inst, 0)?, value)
}

/// Writes operand 0 and SCC.
fn set_scc(wave: &mut Wave, inst: &Inst, value: u32, scc: bool) -> Result<(), FaultKind> {
    set(wave, inst, value)?;
    wave.scc = scc;
    Ok(())
}

/// The 16-bit immediate of a SOPK instruction (the disassembler may print it signed or as its
/// 16-bit pattern; both give the same bits here).
fn simm16(inst: &Inst, i: usize) -> Result<u16, FaultKind> {
    match *arg(inst, i)? {
        Operand::Const {
            value: v @ Const::Int(n),
            ..
        } if (-0x8000..=0xffff).contains(&n) => Ok(v.bits16()),
        ref op => Err(FaultKind::Unsupported {
            what: format!("`{}` needs a 16-bit immediate, not {op:?}", inst.mnemonic()),
        }),
    }
}

#[cfg(test)]
mod tests;
