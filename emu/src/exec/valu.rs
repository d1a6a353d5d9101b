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

#[cfg(test)]
mod tests {
    use crate::exec::testing::Bench;
    use crate::inst::Gen;
    use crate::wave::{LANES, POISON, sreg};

    fn bench() -> Bench {
        let mut t = Bench::new(Gen::Gfx11);
        for r in 0..8 {
            t.wave.vgpr[r] = std::array::from_fn(|l| (r * 100 + l) as u32);
        }
        t
    }

    #[test]
    fn vopd_y_reads_x_destination_before_x_writes() {
        let mut t = bench();
        t.run_asm("v_dual_mov_b32 v1, 7 :: v_dual_add_nc_u32 v2, v1, v3")
            .unwrap();
        assert_eq!(t.wave.vgpr[1], [7; LANES]);
        assert_eq!(t.wave.vgpr[2][5], 105 + 305, "Y read v1 before X wrote it");
        // And the other way round: X reads Y's destination.
        let mut t = bench();
        t.run_asm("v_dual_lshlrev_b32 v4, 1, v5 :: v_dual_mov_b32 v5, v6")
            .unwrap();
        assert_eq!(t.wave.vgpr[4][3], 503 << 1);
        assert_eq!(t.wave.vgpr[5][3], 603);
    }

    #[test]
    fn vopd_swap_and_inactive_lanes() {
        let mut t = bench();
        t.wave.sgpr[sreg::EXEC_LO] = 0b01;
        t.wave.vgpr[3] = [POISON; LANES];
        t.run_asm("v_dual_mov_b32 v1, v2 :: v_dual_mov_b32 v2, v1")
            .unwrap();
        assert_eq!(&t.wave.vgpr[1][..2], &[200, 101]);
        assert_eq!(&t.wave.vgpr[2][..2], &[100, 201]);
        t.wave.sgpr[sreg::EXEC_LO] = u32::MAX;
        t.wave.sgpr[sreg::VCC_LO] = 0b10;
        t.run_asm("v_dual_cndmask_b32 v3, v1, v2 :: v_dual_and_b32 v1, 15, v4")
            .unwrap();
        assert_eq!(
            &t.wave.vgpr[3][..2],
            &[200, 201],
            "lane 0 takes v1, lane 1 v2"
        );
        assert_eq!(&t.wave.vgpr[1][..2], &[400 & 15, 401 & 15]);
    }

    #[test]
    fn vopd_with_one_destination_is_a_fault() {
        let mut t = bench();
        assert!(
            t.run_asm("v_dual_mov_b32 v1, 0 :: v_dual_mov_b32 v1, 1")
                .is_err()
        );
    }
}
