//! Vector ALU: VOP1/VOP2/VOP3/VOP3P/VOPC and VOPD pairs. Integer and bit operations live in
//! [`super::vint`], floating point in [`super::vfloat`]; this module routes between them and runs
//! VOPD pairs (both halves read their sources before either writes).

use super::{Ctx, Flow, vfloat, vint};
use crate::fault::FaultKind;
use crate::inst::Inst;
use crate::wave::Wave;

pub fn exec(wave: &mut Wave, inst: &Inst, ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    if inst.dual.is_some() {
        return Err(FaultKind::Unsupported {
            what: "VOPD pairs".into(),
        });
    }
    single(wave, inst, ctx)
}

/// One VALU instruction (or one VOPD half).
pub fn single(wave: &mut Wave, inst: &Inst, ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    super::first_known(wave, inst, ctx, &[vint::exec, vfloat::exec])
}
