//! `v_wmma_f32_16x16x16_{f16,bf16}` in wave32: D = A·B + C on 16×16 tiles, A and B f16/bf16,
//! C and D f32, in the VGPR layouts of each generation (the functions below map a register slot
//! to its matrix element).
//!
//! Accumulation: the products of f16/bf16 values are exact in f32; each element of D is C plus
//! the 16 products added by sequential f32 FMAs in k order 0..15, each rounded to nearest even
//! (denormals kept) — the order of the kernels' own AMD emulation (kernels/hip/amd_emulation.h,
//! `wmma_gfx11`/`wmma_gfx12`), so that the two agree bit for bit. The hardware's internal order
//! and rounding are not public: for inexact data the claim is the reference's error bound, not
//! bit-exactness with the hardware. For exact-class data (every partial sum exact in f32) any
//! order gives the same bits.
//!
//! The ISA requires EXEC all ones (anything else faults here), and on gfx11 lanes 16–31 of A
//! and B to replicate lanes 0–15 (the result is undefined otherwise: a fault here).

use super::operand::{row_at, set_row};
use super::{Ctx, Flow, arg, unknown};
use crate::fault::FaultKind;
use crate::inst::{Gen, Inst, Op, Operand};
use crate::num;
use crate::wave::{VRow, Wave};

/// gfx11 A/B slot → matrix index: lane `l`, VGPR `r` (0..8) of the operand, 16-bit half `h`
/// (0 = bits 0–15) hold the element of row/column `l % 16` (A's row m, B's column n) at
/// k = 2r + h. Lanes 16–31 replicate lanes 0–15 (RDNA3 ISA §7.9; GPUOpen, "How to accelerate AI
/// applications on RDNA 3 using WMMA"). Returns (m or n, k).
pub fn ab_gfx11(lane: usize, reg: usize, half: usize) -> (usize, usize) {
    (lane % 16, 2 * reg + half)
}

/// gfx12 A/B slot → matrix index: lane `l`, VGPR `r` (0..4), half `h` hold row/column `l % 16`
/// at k = 8·(l / 16) + 2r + h: each half-wave holds its own half of k, no replication (RDNA4
/// ISA WMMA section; GPUOpen, "Using the matrix cores of AMD RDNA 4 architecture GPUs"; the
/// kernels' `mma_load_a` in kernels/hip/compat.h loads it so). A layout that permutes k the same
/// way in A and B (tinygrad's emulator swaps k bits 2 and 3) computes the same product; it
/// differs only in accumulation order.
pub fn ab_gfx12(lane: usize, reg: usize, half: usize) -> (usize, usize) {
    (lane % 16, 8 * (lane / 16) + 2 * reg + half)
}

/// gfx11 C/D slot → (row m, column n): VGPR `r` (0..8) of lane `l` holds (2r + l / 16, l % 16).
pub fn cd_gfx11(lane: usize, reg: usize) -> (usize, usize) {
    (2 * reg + lane / 16, lane % 16)
}

/// gfx12 C/D slot → (row m, column n): VGPR `r` (0..8) of lane `l` holds (r + 8·(l / 16), l % 16).
pub fn cd_gfx12(lane: usize, reg: usize) -> (usize, usize) {
    (reg + 8 * (lane / 16), lane % 16)
}

/// VGPRs of an A or B operand.
fn ab_regs(generation: Gen) -> usize {
    match generation {
        Gen::Gfx11 => 8,
        Gen::Gfx12 => 4,
    }
}

/// The A/B layout as a function of the generation (the tests lay data out through it).
#[cfg(test)]
fn ab_map(generation: Gen) -> fn(usize, usize, usize) -> (usize, usize) {
    match generation {
        Gen::Gfx11 => ab_gfx11,
        Gen::Gfx12 => ab_gfx12,
    }
}

/// The C/D layout as a function of the generation (the tests lay data out through it).
#[cfg(test)]
fn cd_map(generation: Gen) -> fn(usize, usize) -> (usize, usize) {
    match generation {
        Gen::Gfx11 => cd_gfx11,
        Gen::Gfx12 => cd_gfx12,
    }
}

fn unsupported(inst: &Inst, what: String) -> FaultKind {
    FaultKind::Unsupported {
        what: format!("`{}`: {what}", inst.mnemonic()),
    }
}

pub fn exec(wave: &mut Wave, inst: &Inst, ctx: &mut Ctx<'_>) -> Result<Flow, FaultKind> {
    let bf16 = match inst.op {
        Op::VWmmaF3216x16x16F16 => false,
        Op::VWmmaF3216x16x16Bf16 => true,
        _ => return Err(unknown(inst)),
    };
    let m = &inst.mods;
    if m.clamp || m.op_sel.unwrap_or(0) != 0 || m.op_sel_hi.is_some() || m.neg_lo | m.neg_hi != 0 {
        return Err(unsupported(inst, "modifiers the kernels do not use".into()));
    }
    let generation = ctx.generation;
    let n_ab = ab_regs(generation);
    let (d, a, b, c) = (arg(inst, 0)?, arg(inst, 1)?, arg(inst, 2)?, arg(inst, 3)?);
    for (name, op, want) in [("D", d, 8), ("A", a, n_ab), ("B", b, n_ab), ("C", c, 8)] {
        match *op {
            Operand::Vgpr { count, mods, .. }
                if count as usize == want && !mods.abs && !mods.neg => {}
            _ => {
                return Err(unsupported(
                    inst,
                    format!("{name} must be {want} VGPRs on {generation:?}, got {op:?}"),
                ));
            }
        }
    }
    if wave.exec() != u32::MAX {
        return Err(unsupported(
            inst,
            format!(
                "EXEC {:#010x}: the ISA requires all 32 lanes on",
                wave.exec()
            ),
        ));
    }
    let elem = |bits: u16| {
        if bf16 {
            num::bf16_to_f32(bits)
        } else {
            num::f16_to_f32(bits)
        }
    };
    // Matches rather than `ab_map`'s fn pointer: an indirect call per element is not inlined.
    let ab = |lane, reg, half| match generation {
        Gen::Gfx11 => ab_gfx11(lane, reg, half),
        Gen::Gfx12 => ab_gfx12(lane, reg, half),
    };
    // am[m][k], bm[n][k].
    let mut mats = [[[0f32; 16]; 16]; 2];
    for (which, (op, mat)) in [a, b].into_iter().zip(mats.iter_mut()).enumerate() {
        for reg in 0..n_ab {
            let r = row_at(wave, op, reg)?;
            for (lane, &bits) in r.iter().enumerate() {
                if generation == Gen::Gfx11 && lane >= 16 && bits != r[lane - 16] {
                    return Err(unsupported(
                        inst,
                        format!(
                            "{} VGPR {reg} lane {lane} differs from lane {} (gfx11 needs lanes \
                             16–31 to replicate lanes 0–15; the result is undefined otherwise)",
                            ["A", "B"][which],
                            lane - 16
                        ),
                    ));
                }
                for half in 0..2 {
                    let (mn, k) = ab(lane, reg, half);
                    mat[mn][k] = elem((bits >> (16 * half)) as u16);
                }
            }
        }
    }
    let [am, bm] = mats;
    let cd = |lane, reg| match generation {
        Gen::Gfx11 => cd_gfx11(lane, reg),
        Gen::Gfx12 => cd_gfx12(lane, reg),
    };
    // The C/D layout maps the 8 VGPRs × 32 lanes onto the 16×16 tile one to one.
    let mut cm = [[0f32; 16]; 16];
    for reg in 0..8 {
        for (lane, &bits) in row_at(wave, c, reg)?.iter().enumerate() {
            let (mi, ni) = cd(lane, reg);
            cm[mi][ni] = f32::from_bits(bits);
        }
    }
    let dm = num::fused::tile(&am, &bm, &cm);
    let out: [VRow; 8] = std::array::from_fn(|reg| {
        std::array::from_fn(|lane| {
            let (mi, ni) = cd(lane, reg);
            num::quiet(dm[mi][ni]).to_bits()
        })
    });
    for (reg, out_row) in out.iter().enumerate() {
        set_row(wave, d, reg, out_row, u32::MAX)?;
    }
    Ok(Flow::Next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::testing::Bench;
    use crate::fault::FaultKind;
    use crate::wave::{LANES, sreg};

    fn a_at(m: usize, k: usize) -> f32 {
        ((m * 3 + k * 5) % 11) as f32 - 5.0
    }
    fn b_at(k: usize, n: usize) -> f32 {
        ((k * 7 + n * 2) % 9) as f32 - 4.0
    }
    fn c_at(m: usize, n: usize) -> f32 {
        (m as f32) * 0.5 - n as f32
    }

    fn to16(x: f32, bf16: bool) -> u16 {
        if bf16 {
            (x.to_bits() >> 16) as u16 // exact for these small integers
        } else {
            num::f32_to_f16(x)
        }
    }

    /// Loads A (rows × k), B (k × columns) and C into v[20..], v[40..], v[60..] the way a kernel
    /// would for `generation`, through the layout functions.
    fn load(bench: &mut Bench, generation: Gen, bf16: bool) {
        let (ab, cd, n) = (ab_map(generation), cd_map(generation), ab_regs(generation));
        for lane in 0..32 {
            for reg in 0..n {
                let (mut wa, mut wb) = (0u32, 0u32);
                for half in 0..2 {
                    let (mn, k) = ab(lane, reg, half);
                    wa |= (to16(a_at(mn, k), bf16) as u32) << (16 * half);
                    wb |= (to16(b_at(k, mn), bf16) as u32) << (16 * half);
                }
                bench.wave.vgpr[20 + reg][lane] = wa;
                bench.wave.vgpr[40 + reg][lane] = wb;
            }
            for reg in 0..8 {
                let (m, nn) = cd(lane, reg);
                bench.wave.vgpr[60 + reg][lane] = c_at(m, nn).to_bits();
            }
        }
    }

    fn expected(m: usize, n: usize) -> f32 {
        // Small integers and halves: every partial sum is exact in f32, any order agrees.
        let mut s = c_at(m, n) as f64;
        for k in 0..16 {
            s += a_at(m, k) as f64 * b_at(k, n) as f64;
        }
        s as f32
    }

    #[test]
    fn layouts_cover_every_element_and_round_trip() {
        for generation in [Gen::Gfx11, Gen::Gfx12] {
            let (ab, cd, n) = (ab_map(generation), cd_map(generation), ab_regs(generation));
            let mut seen = [[0u32; 16]; 16];
            for lane in 0..32 {
                for reg in 0..n {
                    for half in 0..2 {
                        let (mn, k) = ab(lane, reg, half);
                        seen[mn][k] += 1;
                    }
                }
            }
            let copies = if generation == Gen::Gfx11 { 2 } else { 1 };
            assert!(
                seen.iter().flatten().all(|&c| c == copies),
                "{generation:?} A/B"
            );
            let mut seen = [[0u32; 16]; 16];
            for lane in 0..32 {
                for reg in 0..8 {
                    let (m, nn) = cd(lane, reg);
                    seen[m][nn] += 1;
                }
            }
            assert!(seen.iter().flatten().all(|&c| c == 1), "{generation:?} C/D");
        }
        // Spot slots, written out from the ISA documents' tables rather than the functions.
        assert_eq!(ab_gfx11(5, 3, 0), (5, 6));
        assert_eq!(ab_gfx11(21, 3, 1), (5, 7));
        assert_eq!(cd_gfx11(17, 2), (5, 1));
        assert_eq!(ab_gfx12(20, 1, 0), (4, 10));
        assert_eq!(ab_gfx12(4, 3, 1), (4, 7));
        assert_eq!(cd_gfx12(18, 3), (11, 2));
        assert_eq!(cd_gfx12(2, 7), (7, 2));
    }

    fn run(generation: Gen, asm: &str, bf16: bool) -> Bench {
        let mut bench = Bench::new(generation);
        load(&mut bench, generation, bf16);
        bench.run_asm(asm).unwrap();
        bench
    }

    fn check(bench: &Bench, generation: Gen, first: usize) {
        let cd = cd_map(generation);
        for lane in 0..32 {
            for reg in 0..8 {
                let (m, n) = cd(lane, reg);
                assert_eq!(
                    f32::from_bits(bench.wave.vgpr[first + reg][lane]),
                    expected(m, n),
                    "{generation:?} D[{m}][{n}] (v{} lane {lane})",
                    first + reg
                );
            }
        }
    }

    #[test]
    fn gfx11_computes_a_known_product() {
        let b = run(
            Gen::Gfx11,
            "v_wmma_f32_16x16x16_f16 v[0:7], v[20:27], v[40:47], v[60:67]",
            false,
        );
        check(&b, Gen::Gfx11, 0);
        let b = run(
            Gen::Gfx11,
            "v_wmma_f32_16x16x16_bf16 v[0:7], v[20:27], v[40:47], v[60:67]",
            true,
        );
        check(&b, Gen::Gfx11, 0);
        // D = C in place, as the kernels write it.
        let b = run(
            Gen::Gfx11,
            "v_wmma_f32_16x16x16_f16 v[60:67], v[20:27], v[40:47], v[60:67]",
            false,
        );
        check(&b, Gen::Gfx11, 60);
    }

    #[test]
    fn gfx12_computes_a_known_product() {
        let b = run(
            Gen::Gfx12,
            "v_wmma_f32_16x16x16_f16 v[0:7], v[20:23], v[40:43], v[60:67]",
            false,
        );
        check(&b, Gen::Gfx12, 0);
        let b = run(
            Gen::Gfx12,
            "v_wmma_f32_16x16x16_bf16 v[60:67], v[20:23], v[40:43], v[60:67]",
            true,
        );
        check(&b, Gen::Gfx12, 60);
    }

    #[test]
    fn accumulation_is_sequential_f32_fma_in_k_order() {
        // C = 1, A row 0 = (2^24, −2^24, 1, 0, …), B column 0 all ones. In k order:
        // 1 + 2^24 → 2^24 (tie to even), − 2^24 → 0, + 1 → 1. Exact: 2.
        let mut bench = Bench::new(Gen::Gfx11);
        for r in 0..8 {
            bench.wave.vgpr[20 + r] = [0; LANES];
            bench.wave.vgpr[40 + r] = [0x3F80_3F80; LANES]; // bf16 ones
            bench.wave.vgpr[60 + r] = [1f32.to_bits(); LANES];
        }
        let big = (2f32.powi(24).to_bits() >> 16) as u16;
        let row0 = (big as u32) | ((big | 0x8000) as u32) << 16;
        bench.wave.vgpr[20][0] = row0;
        bench.wave.vgpr[20][16] = row0;
        bench.wave.vgpr[21][0] = 0x3F80;
        bench.wave.vgpr[21][16] = 0x3F80;
        bench
            .run_asm("v_wmma_f32_16x16x16_bf16 v[0:7], v[20:27], v[40:47], v[60:67]")
            .unwrap();
        assert_eq!(f32::from_bits(bench.wave.vgpr[0][0]), 1.0);
        assert_eq!(
            f32::from_bits(bench.wave.vgpr[0][1]),
            1.0,
            "row 0, n = 1: C only"
        );
    }

    #[test]
    fn undefined_inputs_fault() {
        let mut bench = Bench::new(Gen::Gfx11);
        load(&mut bench, Gen::Gfx11, false);
        bench.wave.vgpr[23][20] ^= 1;
        let err = bench
            .run_asm("v_wmma_f32_16x16x16_f16 v[0:7], v[20:27], v[40:47], v[60:67]")
            .unwrap_err();
        assert!(matches!(err, FaultKind::Unsupported { .. }), "{err:?}");
        let mut bench = Bench::new(Gen::Gfx12);
        load(&mut bench, Gen::Gfx12, false);
        bench.wave.sgpr[sreg::EXEC_LO] = 0xFFFF;
        let err = bench
            .run_asm("v_wmma_f32_16x16x16_f16 v[0:7], v[20:23], v[40:43], v[60:67]")
            .unwrap_err();
        assert!(matches!(err, FaultKind::Unsupported { .. }), "{err:?}");
        // gfx11's 8-register A on gfx12 is the wrong shape.
        bench.wave.sgpr[sreg::EXEC_LO] = u32::MAX;
        assert!(
            bench
                .run_asm("v_wmma_f32_16x16x16_f16 v[0:7], v[20:27], v[40:47], v[60:67]")
                .is_err()
        );
    }
}
