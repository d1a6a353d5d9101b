//! Vector ALU: VOP1/VOP2/VOP3/VOP3P/VOPC and VOPD pairs. Integer and bit operations live in
//! [`super::vint`], floating point in [`super::vfloat`]; this module routes between them and runs
//! VOPD pairs (both halves read their sources before either writes).

use super::{Ctx, Flow, vfloat, vint};
use crate::fault::FaultKind;
use crate::inst::{Inst, Operand};
use crate::wave::Wave;

pub fn exec(wave: &mut Wave, inst: &Inst, ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    match &inst.dual {
        Some(y) => dual(wave, inst, y, ctx),
        None => single(wave, inst, ctx),
    }
}

/// A VOPD pair: X and Y both read their sources before either writes. X runs first; its
/// destination row is set aside and the old row put back while Y runs (so Y reads what X read),
/// then X's row is written. VOPD requires different destinations, and only the VGPR of
/// operand 0 is written by either half (`v_dual_cndmask_b32` reads VCC, writes no mask).
fn dual(wave: &mut Wave, x: &Inst, y: &Inst, ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    let dst = |inst: &Inst| match super::arg(inst, 0)? {
        Operand::Vgpr {
            first, count: 1, ..
        } => Ok(*first as usize),
        other => Err(FaultKind::Unsupported {
            what: format!("VOPD half `{}` writing {other:?}", inst.mnemonic()),
        }),
    };
    let (xd, yd) = (dst(x)?, dst(y)?);
    if xd == yd {
        return Err(FaultKind::Unsupported {
            what: format!("VOPD pair with both halves writing v{xd}"),
        });
    }
    let old = *wave.v(xd)?;
    single(wave, x, ctx)?;
    let x_row = *wave.v(xd)?;
    wave.set_v(xd, &old, u32::MAX)?;
    single(wave, y, ctx)?;
    wave.set_v(xd, &x_row, u32::MAX)?;
    Ok(Flow::Next)
}

/// One VALU instruction (or one VOPD half).
pub fn single(wave: &mut Wave, inst: &Inst, ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    super::first_known(wave, inst, ctx, &[vint::exec, vfloat::exec])
}
