//! Semantics of the scalar program-control instructions: branches, waits, barriers, end of program and hints.

use super::{Ctx, Flow, unknown};
use crate::fault::FaultKind;
use crate::inst::Inst;
use crate::wave::Wave;

pub fn exec(_wave: &mut Wave, inst: &Inst, _ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    Err(unknown(inst))
}
