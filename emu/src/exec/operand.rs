//! Reading and writing operands: the one place that knows how SGPRs, VGPRs, specials and
//! constants become values. Source modifiers (neg/abs) are left to the op, which knows the type.

use crate::fault::FaultKind;
use crate::inst::{Const, Operand, Special};
use crate::wave::{LANES, VRow, Wave};

/// The width an op reads a constant at (a float constant's bits depend on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// 16-bit operand: float constants in f16, integers' low 16 bits, zero-extended.
    B16,
    B32,
}

#[inline]
fn const32(value: Const, width: Width) -> u32 {
    match width {
        Width::B16 => value.bits16() as u32,
        Width::B32 => value.bits32(),
    }
}

fn unsupported(what: &str, op: &Operand) -> FaultKind {
    FaultKind::Unsupported {
        what: format!("{what}: {op:?}"),
    }
}

/// A uniform (scalar) 32-bit source: SGPR, special register or constant.
#[inline]
pub fn scalar(wave: &Wave, op: &Operand, width: Width) -> Result<u32, FaultKind> {
    match *op {
        Operand::Sgpr { first, .. } => wave.s(first as usize),
        Operand::Special {
            reg: Special::Scc, ..
        } => Ok(wave.scc as u32),
        Operand::Special { reg, .. } => match reg.sgpr_index() {
            Some(i) => wave.s(i),
            None => Err(unsupported("a 32-bit scalar source", op)),
        },
        Operand::Const { value, .. } => Ok(const32(value, width)),
        _ => Err(unsupported("a scalar source", op)),
    }
}

/// A uniform 64-bit source: an SGPR pair, `vcc`/`exec`, or a constant (sign-extended integer,
/// f64 float).
#[inline]
pub fn scalar64(wave: &Wave, op: &Operand) -> Result<u64, FaultKind> {
    match *op {
        Operand::Sgpr { first, .. } => {
            let i = first as usize;
            Ok(wave.s(i)? as u64 | (wave.s(i + 1)? as u64) << 32)
        }
        Operand::Special {
            reg: reg @ (Special::Vcc | Special::Exec | Special::Null),
            ..
        } => {
            let i = reg.sgpr_index().unwrap_or(0);
            if reg == Special::Null {
                return Ok(0);
            }
            Ok(wave.s(i)? as u64 | (wave.s(i + 1)? as u64) << 32)
        }
        Operand::Const { value, .. } => Ok(value.bits64()),
        Operand::Special {
            reg: Special::SrcSharedBase,
            ..
        } => Ok(crate::memory::SHARED_APERTURE),
        _ => Err(unsupported("a 64-bit scalar source", op)),
    }
}

/// A 32-bit source for every lane (a VGPR's row, or a scalar broadcast).
#[inline]
pub fn row(wave: &Wave, op: &Operand, width: Width) -> Result<VRow, FaultKind> {
    match *op {
        Operand::Vgpr { first, .. } => Ok(*wave.v(first as usize)?),
        _ => Ok([scalar(wave, op, width)?; LANES]),
    }
}

/// Register `k` (0-based) of a multi-register VGPR operand (`v[4:7]`, k < 4).
#[inline]
pub fn row_at(wave: &Wave, op: &Operand, k: usize) -> Result<VRow, FaultKind> {
    match *op {
        Operand::Vgpr { first, count, .. } if k < count as usize => {
            Ok(*wave.v(first as usize + k)?)
        }
        _ => Err(unsupported("a multi-register VGPR source", op)),
    }
}

/// A 64-bit source per lane: a VGPR pair, or a uniform 64-bit scalar broadcast.
#[inline]
pub fn row64(wave: &Wave, op: &Operand) -> Result<[u64; LANES], FaultKind> {
    match *op {
        Operand::Vgpr { first, .. } => {
            let lo = wave.v(first as usize)?;
            let hi = wave.v(first as usize + 1)?;
            Ok(std::array::from_fn(|l| lo[l] as u64 | (hi[l] as u64) << 32))
        }
        _ => Ok([scalar64(wave, op)?; LANES]),
    }
}

/// Writes a 32-bit scalar destination (SGPR or special; SCC takes bit 0).
#[inline]
pub fn set_scalar(wave: &mut Wave, op: &Operand, value: u32) -> Result<(), FaultKind> {
    match *op {
        Operand::Sgpr { first, .. } => wave.set_s(first as usize, value),
        Operand::Special {
            reg: Special::Scc, ..
        } => {
            wave.scc = value & 1 == 1;
            Ok(())
        }
        Operand::Special { reg, .. } => match reg.sgpr_index() {
            Some(i) => wave.set_s(i, value),
            None => Err(unsupported("a scalar destination", op)),
        },
        _ => Err(unsupported("a scalar destination", op)),
    }
}

/// Writes a 64-bit scalar destination (SGPR pair, `vcc`, `exec`, `null`).
pub fn set_scalar64(wave: &mut Wave, op: &Operand, value: u64) -> Result<(), FaultKind> {
    let first = match *op {
        Operand::Sgpr { first, .. } => first as usize,
        Operand::Special {
            reg: Special::Null, ..
        } => return Ok(()),
        Operand::Special {
            reg: reg @ (Special::Vcc | Special::Exec),
            ..
        } => reg.sgpr_index().unwrap_or(0),
        _ => return Err(unsupported("a 64-bit scalar destination", op)),
    };
    wave.set_s(first, value as u32)?;
    wave.set_s(first + 1, (value >> 32) as u32)
}

/// Writes a VGPR destination's row in the lanes of `mask`.
#[inline]
pub fn set_row(
    wave: &mut Wave,
    op: &Operand,
    k: usize,
    value: &VRow,
    mask: u32,
) -> Result<(), FaultKind> {
    match *op {
        Operand::Vgpr { first, count, .. } if k < count as usize => {
            wave.set_v(first as usize + k, value, mask)
        }
        _ => Err(unsupported("a VGPR destination", op)),
    }
}
