//! Semantics of the scalar floating-point instructions (the SALU floats of gfx1151 and gfx12),
//! with the same rounding rules as the vector ones ([`crate::num`]). SALU floats take no source
//! modifiers.

use super::operand::{Width, scalar, set_scalar};
use super::{Ctx, Flow, arg, unknown};
use crate::fault::FaultKind;
use crate::inst::{Inst, Op};
use crate::num;
use crate::wave::Wave;

pub fn exec(wave: &mut Wave, inst: &Inst, _ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    let s = |i: usize| -> Result<u32, FaultKind> { scalar(wave, arg(inst, i)?, Width::B32) };
    let fl = |i: usize| -> Result<f32, FaultKind> { Ok(f32::from_bits(s(i)?)) };
    let result = match inst.op {
        Op::SCvtF32U32 => num::cvt_f32_u32(s(1)?).to_bits(),
        Op::SCvtU32F32 => num::cvt_u32_f32(fl(1)?),
        Op::SMulF32 => num::quiet(fl(1)? * fl(2)?).to_bits(),
        // D = S0 · S1 + K, fused.
        Op::SFmaakF32 => num::quiet(f32::mul_add(fl(1)?, fl(2)?, fl(3)?)).to_bits(),
        Op::STruncF32 => num::trunc_f32(fl(1)?).to_bits(),
        Op::SCmpGeF32 => {
            wave.scc = num::ge_f32(fl(0)?, fl(1)?);
            return Ok(Flow::Next);
        }
        _ => return Err(unknown(inst)),
    };
    set_scalar(wave, arg(inst, 0)?, result)?;
    Ok(Flow::Next)
}

#[cfg(test)]
mod tests {
    use crate::exec::testing::Bench;
    use crate::inst::Gen;

    const NAN: u32 = 0x7FC0_0000;
    const INF: u32 = 0x7F80_0000;
    const NZERO: u32 = 0x8000_0000;

    fn f(x: f32) -> u32 {
        x.to_bits()
    }

    /// A gfx12 bench with s4 = `a`, s3 = `b`, s5 poisoned.
    fn with(a: u32, b: u32) -> Bench {
        let mut bench = Bench::new(Gen::Gfx12);
        bench.wave.sgpr[4] = a;
        bench.wave.sgpr[3] = b;
        bench
    }

    /// Runs the instruction (an expression using `run_asm` on the bench `$b`) and gives s5.
    macro_rules! s5 {
        ($a:expr, $b:expr, |$bench:ident| $run:expr) => {{
            let mut $bench = with($a, $b);
            $run.unwrap();
            $bench.wave.sgpr[5]
        }};
    }

    #[test]
    fn conversions_round_and_clamp() {
        let cvt = |x| s5!(x, 0, |bn| bn.run_asm("s_cvt_f32_u32 s5, s4"));
        assert_eq!(cvt(0), 0);
        assert_eq!(cvt(16_777_217), f(16_777_216.0)); // tie → even
        assert_eq!(cvt(16_777_219), f(16_777_220.0));
        assert_eq!(cvt(u32::MAX), f(4_294_967_296.0));
        let cvt = |x| s5!(x, 0, |bn| bn.run_asm("s_cvt_u32_f32 s5, s4"));
        assert_eq!(cvt(f(3.99)), 3);
        assert_eq!(cvt(f(-1.0)), 0);
        assert_eq!(cvt(NZERO), 0);
        assert_eq!(cvt(NAN), 0);
        assert_eq!(cvt(INF), u32::MAX);
        assert_eq!(cvt(f(5e9)), u32::MAX);
        assert_eq!(cvt(1), 0); // denormal
    }

    #[test]
    fn mul_fmaak_trunc() {
        let k = f32::from_bits(0x4f7ffffe);
        assert_eq!(
            s5!(f(3.0), 0, |bn| bn.run_asm("s_mul_f32 s5, s4, 0x4f7ffffe")),
            f(3.0 * k)
        );
        assert_eq!(
            s5!(NZERO, 0, |bn| bn.run_asm("s_mul_f32 s5, s4, 0x46800000")),
            NZERO
        );
        assert_eq!(
            s5!(0, INF, |bn| bn.run_asm("s_mul_f32 s5, s4, s3")) & NAN,
            NAN
        );
        assert_eq!(s5!(1, f(0.5), |bn| bn.run_asm("s_mul_f32 s5, s4, s3")), 0); // 2^-150 ties to 0
        // (1 + 2^-23)(1 − 2^-23) + 16384 … fused: the product's low bits survive only when fused.
        let p = f(1.0) + 1;
        let q = f(1.0 - f32::EPSILON);
        let mut bench = Bench::new(Gen::Gfx12);
        bench.wave.sgpr[5] = p;
        bench.wave.sgpr[3] = q;
        bench.run_asm("s_fmaak_f32 s5, s5, s3, 0xbf800000").unwrap();
        assert_eq!(bench.wave.sgpr[5], f(-(2f32.powi(-46))));
        bench.wave.sgpr[5] = f(2.0);
        bench.wave.sgpr[3] = f(3.0);
        bench.run_asm("s_fmaak_f32 s5, s5, s3, 0x46800000").unwrap();
        assert_eq!(bench.wave.sgpr[5], f(16390.0));
        let t = |x| s5!(x, 0, |bn| bn.run_asm("s_trunc_f32 s5, s4"));
        assert_eq!(t(f(-2.7)), f(-2.0));
        assert_eq!(t(f(-0.2)), NZERO);
        assert_eq!(t(INF), INF);
        assert_eq!(t(1), 0);
        assert_eq!(t(0x7F80_0001) & NAN, NAN, "quiet NaN");
    }

    #[test]
    fn cmp_ge_sets_scc_ordered() {
        let cmp = |a, b| {
            let mut bench = Bench::new(Gen::Gfx12);
            bench.wave.sgpr[5] = a;
            bench.wave.sgpr[3] = b;
            bench.wave.scc = true;
            bench.run_asm("s_cmp_ge_f32 s5, s3").unwrap();
            bench.wave.scc
        };
        assert!(cmp(f(2.0), f(2.0)));
        assert!(!cmp(f(1.0), f(2.0)));
        assert!(cmp(NZERO, 0));
        assert!(!cmp(NAN, NAN));
        assert!(!cmp(f(1.0), NAN));
        assert!(cmp(INF, f(f32::MAX)));
        assert!(cmp(1, 0)); // denormal > 0
    }
}
