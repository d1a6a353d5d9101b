//! Semantics of the floating-point vector ALU instructions (VOP1/VOP2/VOP3/VOPC/VOP3P and VOPD
//! halves), with the rounding rules of [`crate::num`]. Only the operand forms the kernel set's
//! code objects use are accepted; a modifier an op does not implement (clamp, an op_sel where the
//! kernels print none) is a fault, never a guess.

use super::operand::{Width, row, set_row, set_scalar};
use super::{Ctx, Flow, arg, unknown};
use crate::fault::FaultKind;
use crate::inst::{Const, Form, Inst, Op, Operand, SrcMods};
use crate::num;
use crate::wave::{LANES, VRow, Wave};

pub fn exec(wave: &mut Wave, inst: &Inst, _ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    use Op::*;
    if inst.mods.clamp {
        return Err(unsupported(inst, "clamp"));
    }
    match inst.op {
        VAddF32 => binary32(wave, inst, |a, b| a + b)?,
        VSubF32 => binary32(wave, inst, |a, b| a - b)?,
        VMulF32 => binary32(wave, inst, |a, b| a * b)?,
        VFmaF32 => {
            no_op_sel(inst)?;
            let (a, b, c) = (
                src32(wave, inst, 1)?,
                src32(wave, inst, 2)?,
                src32(wave, inst, 3)?,
            );
            let d = num::fused::lanes(&a, &b, &c, wave.exec());
            write32(wave, inst, |l| d[l])?
        }
        VFmacF32 => {
            no_op_sel(inst)?;
            let (a, b, d) = (
                src32(wave, inst, 1)?,
                src32(wave, inst, 2)?,
                src32(wave, inst, 0)?,
            );
            let d = num::fused::lanes(&a, &b, &d, wave.exec());
            write32(wave, inst, |l| d[l])?
        }
        VAddF16 => {
            let a = src16(wave, inst, 1, 0)?;
            let b = src16(wave, inst, 2, 1)?;
            write16(wave, inst, 2, |l| num::add_f16(a[l], b[l]))?
        }
        VCvtF16F32 => {
            let a = src32(wave, inst, 1)?;
            write16(wave, inst, 1, |l| num::f32_to_f16(a[l]))?
        }
        VCvtF32F16 => {
            let a = src16(wave, inst, 1, 0)?;
            no_dst_op_sel(inst, 1)?;
            write32(wave, inst, |l| num::f16_to_f32(a[l]))?
        }
        VCvtF32I32 => unary_bits(wave, inst, |x| num::cvt_f32_i32(x as i32).to_bits())?,
        VCvtF32U32 => unary_bits(wave, inst, |x| num::cvt_f32_u32(x).to_bits())?,
        VCvtU32F32 => unary_bits(wave, inst, |x| num::cvt_u32_f32(f32::from_bits(x)))?,
        VRcpIflagF32 => unary32(wave, inst, num::rcp_f32)?,
        VTruncF32 => unary32(wave, inst, num::trunc_f32)?,
        VCmpGeF32 => {
            no_op_sel(inst)?;
            let (a, b) = (src32(wave, inst, 1)?, src32(wave, inst, 2)?);
            let exec = wave.exec();
            // Inactive lanes' bits are written as 0.
            let bits = (0..LANES)
                .filter(|&l| exec >> l & 1 == 1 && num::ge_f32(a[l], b[l]))
                .fold(0u32, |m, l| m | 1 << l);
            set_scalar(wave, arg(inst, 0)?, bits)?
        }
        VPkAddF16 | VPkMulF16 | VPkFmaF16 => packed_f16(wave, inst)?,
        VDot2F32F16 => {
            let a = packed(wave, inst, 1)?;
            let b = packed(wave, inst, 2)?;
            let c = f32_operand_of_vop3p(wave, inst, 3)?;
            write32(wave, inst, |l| num::dot2_f32_f16(a[l], b[l], c[l]))?
        }
        VDot2accF32F16 => {
            no_op_sel(inst)?;
            let a = raw(wave, inst, 1, Width::B32)?;
            let b = raw(wave, inst, 2, Width::B32)?;
            let d = src32(wave, inst, 0)?;
            write32(wave, inst, |l| {
                num::dot2_f32_f16(halves(a[l]), halves(b[l]), d[l])
            })?
        }
        VFmaMixF32 => fma_mix(wave, inst)?,
        _ => return Err(unknown(inst)),
    }
    Ok(Flow::Next)
}

fn unsupported(inst: &Inst, what: &str) -> FaultKind {
    FaultKind::Unsupported {
        what: format!("`{}` with {what}", inst.mnemonic()),
    }
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

/// VOP3 op_sel on an op that has no 16-bit operands means nothing the kernels use.
fn no_op_sel(inst: &Inst) -> Result<(), FaultKind> {
    if inst.mods.op_sel.unwrap_or(0) != 0 || inst.mods.op_sel_hi.is_some() {
        return Err(unsupported(inst, "op_sel"));
    }
    Ok(())
}

/// A 32-bit destination cannot take op_sel's destination bit (bit `sources`).
fn no_dst_op_sel(inst: &Inst, sources: usize) -> Result<(), FaultKind> {
    if inst.mods.op_sel.unwrap_or(0) >> sources != 0 {
        return Err(unsupported(inst, "op_sel on a 32-bit destination"));
    }
    Ok(())
}

/// Source `i`'s bits per lane before modifiers.
fn raw(wave: &Wave, inst: &Inst, i: usize, width: Width) -> Result<VRow, FaultKind> {
    row(wave, arg(inst, i)?, width)
}

/// An f32 source with its VOP3 modifiers applied.
fn src32(wave: &Wave, inst: &Inst, i: usize) -> Result<[f32; LANES], FaultKind> {
    let op = arg(inst, i)?;
    let m = mods_of(op);
    let r = row(wave, op, Width::B32)?;
    Ok(r.map(|b| f32::from_bits(num::mods32(b, m.abs, m.neg))))
}

/// An f16 source (VOP3 operand `sel` of op_sel picks the high half) with modifiers applied.
/// A VGPR above v127 in the 32-bit encodings would be a true16 high half, which the kernels'
/// fake16 code never uses: a fault.
fn src16(wave: &Wave, inst: &Inst, i: usize, sel: usize) -> Result<[u16; LANES], FaultKind> {
    let op = arg(inst, i)?;
    check_fake16(inst, op)?;
    let m = mods_of(op);
    let hi = inst.mods.op_sel.unwrap_or(0) >> sel & 1 == 1;
    let r = row(wave, op, Width::B16)?;
    Ok(r.map(|b| {
        let h = if hi { (b >> 16) as u16 } else { b as u16 };
        num::mods16(h, m.abs, m.neg)
    }))
}

fn check_fake16(inst: &Inst, op: &Operand) -> Result<(), FaultKind> {
    if matches!(inst.form, Form::E32 | Form::Dual)
        && matches!(*op, Operand::Vgpr { first, .. } if first >= 128)
    {
        return Err(unsupported(
            inst,
            "a 16-bit VGPR operand above v127 (a true16 high half)",
        ));
    }
    Ok(())
}

fn dst_first(inst: &Inst) -> Result<(&Operand, usize), FaultKind> {
    let op = arg(inst, 0)?;
    match *op {
        Operand::Vgpr { first, .. } => Ok((op, first as usize)),
        _ => Err(unsupported(inst, "a destination that is not a VGPR")),
    }
}

/// Writes an f32 result (NaN quieted) in the active lanes.
fn write32(wave: &mut Wave, inst: &Inst, f: impl Fn(usize) -> f32) -> Result<(), FaultKind> {
    let (dst, _) = dst_first(inst)?;
    let out: VRow = std::array::from_fn(|l| num::quiet(f(l)).to_bits());
    let exec = wave.exec();
    set_row(wave, dst, 0, &out, exec)
}

/// Writes a 16-bit result into the low half (or, with op_sel's destination bit `sources`, the
/// high half) of the destination; the other half keeps its bits (RDNA, unlike GFX9, does not
/// zero it).
fn write16(
    wave: &mut Wave,
    inst: &Inst,
    sources: usize,
    f: impl Fn(usize) -> u16,
) -> Result<(), FaultKind> {
    let (dst, first) = dst_first(inst)?;
    check_fake16(inst, dst)?;
    let hi = inst.mods.op_sel.unwrap_or(0) >> sources & 1 == 1;
    let old = *wave.v(first)?;
    let out: VRow = std::array::from_fn(|l| {
        let h = f(l) as u32;
        if hi {
            old[l] & 0xFFFF | h << 16
        } else {
            old[l] & 0xFFFF_0000 | h
        }
    });
    let exec = wave.exec();
    set_row(wave, dst, 0, &out, exec)
}

fn binary32(wave: &mut Wave, inst: &Inst, f: impl Fn(f32, f32) -> f32) -> Result<(), FaultKind> {
    no_op_sel(inst)?;
    let (a, b) = (src32(wave, inst, 1)?, src32(wave, inst, 2)?);
    write32(wave, inst, |l| f(a[l], b[l]))
}

fn unary32(wave: &mut Wave, inst: &Inst, f: impl Fn(f32) -> f32) -> Result<(), FaultKind> {
    no_op_sel(inst)?;
    let a = src32(wave, inst, 1)?;
    write32(wave, inst, |l| f(a[l]))
}

/// An op whose source or result is an integer: no float modifiers allowed on the integer side.
fn unary_bits(wave: &mut Wave, inst: &Inst, f: impl Fn(u32) -> u32) -> Result<(), FaultKind> {
    no_op_sel(inst)?;
    let op = arg(inst, 1)?;
    let m = mods_of(op);
    let r = row(wave, op, Width::B32)?;
    let int_source = matches!(inst.op, Op::VCvtF32I32 | Op::VCvtF32U32);
    if int_source && (m.abs || m.neg) {
        return Err(unsupported(inst, "a float modifier on an integer source"));
    }
    let (dst, _) = dst_first(inst)?;
    let out: VRow = r.map(|b| f(num::mods32(b, m.abs, m.neg)));
    let exec = wave.exec();
    set_row(wave, dst, 0, &out, exec)
}

fn halves(b: u32) -> [u16; 2] {
    [b as u16, (b >> 16) as u16]
}

/// A packed-f16 VOP3P source `i` (operand index; source number `i - 1`) as its (lo, hi) inputs:
/// op_sel bit picks the half the low lane reads, op_sel_hi bit (default 1) the half the high lane
/// reads, neg_lo / neg_hi negate them. A constant is one 32-bit value: a float inline constant is
/// its f16 bits in the low half (high half 0, so op_sel_hi 0 is how the compiler repeats it, as
/// in `v_pk_add_f16 v17, 0xe400, v12 op_sel_hi:[0,1]`); an integer or literal keeps its 32 bits.
fn packed(wave: &Wave, inst: &Inst, i: usize) -> Result<[[u16; 2]; LANES], FaultKind> {
    let op = arg(inst, i)?;
    let m = mods_of(op);
    if m.abs || m.neg {
        return Err(unsupported(inst, "a VOP3 modifier on a packed source"));
    }
    let width = match *op {
        Operand::Const {
            value: Const::Float(_),
            ..
        } => Width::B16,
        _ => Width::B32,
    };
    let s = i - 1;
    let lo_hi = inst.mods.op_sel.unwrap_or(0) >> s & 1 == 1;
    let hi_hi = inst.mods.op_sel_hi.unwrap_or(0b111) >> s & 1 == 1;
    let neg_lo = inst.mods.neg_lo >> s & 1 == 1;
    let neg_hi = inst.mods.neg_hi >> s & 1 == 1;
    let r = row(wave, op, width)?;
    Ok(r.map(|b| {
        let [lo, hi] = halves(b);
        let pick = |upper: bool| if upper { hi } else { lo };
        [
            num::mods16(pick(lo_hi), false, neg_lo),
            num::mods16(pick(hi_hi), false, neg_hi),
        ]
    }))
}

fn packed_f16(wave: &mut Wave, inst: &Inst) -> Result<(), FaultKind> {
    let sources = if inst.op == Op::VPkFmaF16 { 3 } else { 2 };
    if inst.mods.op_sel.unwrap_or(0) >> sources != 0 {
        return Err(unsupported(inst, "op_sel beyond its sources"));
    }
    let srcs = (1..=sources)
        .map(|i| packed(wave, inst, i))
        .collect::<Result<Vec<_>, _>>()?;
    let (dst, _) = dst_first(inst)?;
    let out: VRow = std::array::from_fn(|l| {
        let half = |h: usize| match inst.op {
            Op::VPkAddF16 => num::add_f16(srcs[0][l][h], srcs[1][l][h]),
            Op::VPkMulF16 => num::mul_f16(srcs[0][l][h], srcs[1][l][h]),
            _ => num::fma_f16(srcs[0][l][h], srcs[1][l][h], srcs[2][l][h]),
        };
        half(0) as u32 | (half(1) as u32) << 16
    });
    let exec = wave.exec();
    set_row(wave, dst, 0, &out, exec)
}

/// The f32 accumulator of `v_dot2_f32_f16` (operand 3): its op_sel bits do not apply, and the
/// kernels print no neg_lo/neg_hi on it, so those are a fault rather than a guess.
fn f32_operand_of_vop3p(wave: &Wave, inst: &Inst, i: usize) -> Result<[f32; LANES], FaultKind> {
    let s = i - 1;
    if (inst.mods.neg_lo | inst.mods.neg_hi) >> s & 1 == 1 {
        return Err(unsupported(inst, "neg_lo/neg_hi on the f32 accumulator"));
    }
    let op = arg(inst, i)?;
    if mods_of(op) != SrcMods::default() {
        return Err(unsupported(inst, "a VOP3 modifier on a VOP3P source"));
    }
    Ok(row(wave, op, Width::B32)?.map(f32::from_bits))
}

/// `v_fma_mix_f32`: source j is f32 when op_sel_hi bit j is 0 (the default), else the f16 half
/// op_sel bit j picks, converted exactly; neg_hi bit j is |x| and neg_lo bit j is −x (applied
/// after conversion); one fused f32 rounding.
fn fma_mix(wave: &mut Wave, inst: &Inst) -> Result<(), FaultKind> {
    let mut ins = [[0f32; LANES]; 3];
    for (j, slot) in ins.iter_mut().enumerate() {
        let op = arg(inst, j + 1)?;
        if mods_of(op) != SrcMods::default() {
            return Err(unsupported(inst, "a VOP3 modifier on a VOP3P source"));
        }
        let f16_in = inst.mods.op_sel_hi.unwrap_or(0) >> j & 1 == 1;
        let upper = inst.mods.op_sel.unwrap_or(0) >> j & 1 == 1;
        let abs = inst.mods.neg_hi >> j & 1 == 1;
        let neg = inst.mods.neg_lo >> j & 1 == 1;
        let width = match (*op, f16_in) {
            (
                Operand::Const {
                    value: Const::Float(_),
                    ..
                },
                true,
            ) => Width::B16,
            _ => Width::B32,
        };
        let r = row(wave, op, width)?;
        for (x, &b) in slot.iter_mut().zip(&r) {
            let v = if f16_in {
                num::f16_to_f32(if upper { (b >> 16) as u16 } else { b as u16 })
            } else {
                f32::from_bits(b)
            };
            *x = f32::from_bits(num::mods32(v.to_bits(), abs, neg));
        }
    }
    if inst.mods.op_sel.unwrap_or(0) >> 3 != 0 {
        return Err(unsupported(inst, "op_sel beyond its sources"));
    }
    let d = num::fused::lanes(&ins[0], &ins[1], &ins[2], wave.exec());
    write32(wave, inst, |l| d[l])
}

#[cfg(test)]
mod tests;
