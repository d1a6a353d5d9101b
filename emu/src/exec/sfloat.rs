//! Semantics of the scalar floating-point instructions (gfx12's `s_*_f32`).

use super::{Ctx, Flow, unknown};
use crate::fault::FaultKind;
use crate::inst::Inst;
use crate::wave::Wave;

pub fn exec(_wave: &mut Wave, inst: &Inst, _ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    Err(unknown(inst))
}
