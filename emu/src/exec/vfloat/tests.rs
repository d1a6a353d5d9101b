use crate::exec::testing::Bench;
use crate::inst::Gen;
use crate::num::F32_QNAN;
use crate::wave::{LANES, POISON, sreg};

const NAN: u32 = 0x7FC0_0000;
const INF: u32 = 0x7F80_0000;
const NINF: u32 = 0xFF80_0000;
const NZERO: u32 = 0x8000_0000;
/// Smallest f32 denormal.
const DEN: u32 = 1;

fn bench() -> Bench {
    Bench::new(Gen::Gfx11)
}

/// Sets lane l of v`r` to `vals[l % vals.len()]`.
fn set(b: &mut Bench, r: usize, vals: &[u32]) {
    for l in 0..LANES {
        b.wave.vgpr[r][l] = vals[l % vals.len()];
    }
}

fn f(x: f32) -> u32 {
    x.to_bits()
}

fn lanes(b: &Bench, r: usize, n: usize) -> Vec<u32> {
    b.wave.vgpr[r][..n].to_vec()
}

/// Runs a two-source f32 op over `cases` (a, b, expected bits) in lanes 0.. of v2, v3 → v1.
fn check2(asm: &str, cases: &[(u32, u32, u32)], b: &mut Bench) {
    set(b, 2, &cases.iter().map(|c| c.0).collect::<Vec<_>>());
    set(b, 3, &cases.iter().map(|c| c.1).collect::<Vec<_>>());
    b.run_asm(asm).unwrap();
    for (l, c) in cases.iter().enumerate() {
        let got = b.wave.vgpr[1][l];
        if f32::from_bits(c.2).is_nan() {
            assert!(f32::from_bits(got).is_nan(), "{asm} lane {l}: {got:#x}");
            assert!(got & 0x0040_0000 != 0, "{asm} lane {l}: NaN not quiet");
        } else {
            assert_eq!(got, c.2, "{asm} lane {l} ({:#x}, {:#x})", c.0, c.1);
        }
    }
}

fn f32_edges() -> Vec<(u32, u32)> {
    vec![
        (f(1.5), f(2.25)),
        (0, NZERO),
        (NZERO, NZERO),
        (NAN, f(1.0)),
        (INF, NINF),
        (INF, f(2.0)),
        (DEN, DEN),
        (f(1.0), f(f32::EPSILON / 2.0)), // tie: 1 + 2^-24
        (f(1.0), f(f32::EPSILON * 0.75)),
        (f(f32::MAX), f(f32::MAX)),
        (0x7F80_0001, f(1.0)), // signaling NaN
        (f(3.0), DEN),
    ]
}

#[test]
fn add_sub_mul_f32_follow_ieee_with_denormals() {
    let mut b = bench();
    type Op = fn(f32, f32) -> f32;
    let ops: [(&str, Op); 3] = [
        ("v_add_f32_e32 v1, v2, v3", |a, b| a + b),
        ("v_sub_f32_e32 v1, v2, v3", |a, b| a - b),
        ("v_mul_f32_e32 v1, v2, v3", |a, b| a * b),
    ];
    for (asm, op) in ops {
        let cases: Vec<_> = f32_edges()
            .into_iter()
            .map(|(x, y)| (x, y, op(f32::from_bits(x), f32::from_bits(y)).to_bits()))
            .collect();
        check2(asm, &cases, &mut b);
    }
    // Spot values that do not lean on the host: denormal sum, −0 + −0, tie to even.
    let mut b = bench();
    check2(
        "v_add_f32_e32 v1, v2, v3",
        &[
            (DEN, DEN, 2),
            (NZERO, NZERO, NZERO),
            (0, NZERO, 0),
            (f(1.0), f(f32::EPSILON / 2.0), f(1.0)),
            (f(1.0), f(f32::EPSILON * 1.5), f(1.0) + 2),
            (INF, NINF, NAN),
            (f(f32::MAX), f(f32::MAX), INF),
        ],
        &mut b,
    );
    check2(
        "v_sub_f32_e32 v1, v2, v3",
        &[
            (0, 0, 0),
            (NZERO, 0, NZERO),
            (INF, INF, NAN),
            (DEN, 2, DEN | NZERO),
        ],
        &mut b,
    );
    set(&mut b, 2, &[f(1.0), NZERO]);
    set(&mut b, 3, &[f(0.75), NZERO]);
    b.run_asm("v_sub_f32_e32 v1, v2, v3").unwrap();
    assert_eq!(lanes(&b, 1, 2), [f(0.25), 0], "−0 − −0 = +0");
    check2(
        "v_mul_f32_e32 v1, v2, v3",
        &[
            (0, INF, NAN),
            (NZERO, f(1.0), NZERO),
            (f(0.5), DEN, 0),                          // 2^-150: tie to even → 0
            (f(0.5), 3, 2),                            // 1.5 ulp → 2 (even)
            (f(2f32.powi(-126)), f(0.5), 0x0040_0000), // normal → denormal
        ],
        &mut b,
    );
}

#[test]
fn literal_and_inline_constants_and_vopd_halves() {
    let mut b = bench();
    set(&mut b, 1, &[f(3.0)]);
    b.run_asm("v_mul_f32_e32 v2, 0x4f7ffffe, v1").unwrap();
    assert_eq!(b.wave.vgpr[2][0], f(3.0 * f32::from_bits(0x4f7ffffe)));
    b.run_asm("v_mul_f32_e32 v2, 0.5, v1").unwrap();
    assert_eq!(b.wave.vgpr[2][0], f(1.5));
    b.run_asm("v_add_f32_e32 v2, -4.0, v1").unwrap();
    assert_eq!(b.wave.vgpr[2][0], f(-1.0));
    b.run_asm("v_dual_mul_f32 v2, 0x4f7ffffe, v1").unwrap();
    assert_eq!(b.wave.vgpr[2][0], f(3.0 * f32::from_bits(0x4f7ffffe)));
    set(&mut b, 3, &[f(2.0)]);
    b.run_asm("v_dual_add_f32 v4, v1, v3").unwrap();
    b.run_asm("v_dual_sub_f32 v5, v1, v3").unwrap();
    assert_eq!((b.wave.vgpr[4][7], b.wave.vgpr[5][7]), (f(5.0), f(1.0)));
    set(&mut b, 6, &[f(1.0)]);
    b.run_asm("v_dual_fmac_f32 v6, v1, v3").unwrap();
    assert_eq!(b.wave.vgpr[6][0], f(7.0));
}

#[test]
fn inactive_lanes_keep_their_bits() {
    let mut b = bench();
    b.wave.sgpr[sreg::EXEC_LO] = 0x0000_00F0;
    set(&mut b, 2, &[f(1.0)]);
    set(&mut b, 3, &[f(2.0)]);
    b.run_asm("v_add_f32_e32 v1, v2, v3").unwrap();
    b.run_asm("v_cvt_f16_f32_e32 v4, v2").unwrap();
    b.run_asm("v_pk_mul_f16 v5, v2, v3").unwrap();
    b.run_asm("v_dot2_f32_f16 v6, v2, v3, 0").unwrap();
    for r in [1, 4, 5, 6] {
        assert_eq!(b.wave.vgpr[r][0], POISON, "v{r} lane 0");
        assert_eq!(b.wave.vgpr[r][31], POISON, "v{r} lane 31");
        assert_ne!(b.wave.vgpr[r][4], POISON, "v{r} lane 4");
    }
    assert_eq!(b.wave.vgpr[1][5], f(3.0));
    b.run_asm("v_cmp_ge_f32_e64 s3, |v2|, v2").unwrap();
    assert_eq!(
        b.wave.sgpr[3], 0x0000_00F0,
        "inactive lanes' compare bits are 0"
    );
}

#[test]
fn fma_and_fmac_f32_are_fused() {
    let mut b = bench();
    // (1 + 2^-23)(1 − 2^-23) − 1 = −2^-46 only when fused.
    let p = f(1.0) + 1;
    let q = f(1.0 - f32::EPSILON);
    set(&mut b, 2, &[p, 0, INF, f(2.0)]);
    set(&mut b, 3, &[q, NZERO, 0, f(3.0)]);
    set(&mut b, 4, &[f(-1.0), NZERO, f(1.0), f(1.0)]);
    b.run_asm("v_fma_f32 v1, v2, v3, v4").unwrap();
    assert_eq!(b.wave.vgpr[1][0], f(-(2f32.powi(-46))));
    assert_eq!(b.wave.vgpr[1][1], NZERO); // +0·−0 + −0 = −0
    assert!(f32::from_bits(b.wave.vgpr[1][2]).is_nan());
    assert_eq!(b.wave.vgpr[1][3], f(7.0));
    // The kernels' forms: a negated source and a literal, an inline 0 accumulator.
    set(&mut b, 9, &[f(2.0)]);
    set(&mut b, 8, &[f(3.0)]);
    b.run_asm("v_fma_f32 v10, -v9, v8, 0x46800000").unwrap();
    assert_eq!(b.wave.vgpr[10][0], f(16384.0 - 6.0));
    b.run_asm("v_fma_f32 v10, v9, v8, 0").unwrap();
    assert_eq!(b.wave.vgpr[10][0], f(6.0));
    set(&mut b, 1, &[f(-1.0), NAN]);
    b.run_asm("v_fmac_f32_e32 v1, v2, v3").unwrap();
    assert_eq!(b.wave.vgpr[1][0], f(-(2f32.powi(-46))));
    assert!(f32::from_bits(b.wave.vgpr[1][1]).is_nan());
    set(&mut b, 1, &[f(1.0)]);
    b.wave.sgpr[5] = f(4.0);
    b.run_asm("v_fmac_f32_e32 v1, s5, v8").unwrap();
    assert_eq!(b.wave.vgpr[1][0], f(13.0));
}

#[test]
fn add_f16_rounds_once_and_keeps_the_high_half() {
    let mut b = bench();
    // (a, b, expected f16)
    let cases: [(u16, u16, u16); 9] = [
        (0x3C00, 0x3C00, 0x4000), // 1 + 1
        (0x3C00, 0x1000, 0x3C00), // 1 + 2^-11: tie → even (1)
        (0x3C01, 0x1000, 0x3C02), // (1 + 2^-10) + 2^-11: tie → even (up)
        (0x8000, 0x8000, 0x8000), // −0 + −0
        (0x0000, 0x8000, 0x0000), // +0 + −0
        (0x0001, 0x0001, 0x0002), // subnormals kept
        (0x7BFF, 0x7BFF, 0x7C00), // overflow → inf
        (0x7C00, 0xFC00, 0x7E00), // inf − inf → NaN
        (0x7E00, 0x3C00, 0x7E00), // NaN
    ];
    set(&mut b, 2, &cases.map(|c| 0xABCD_0000 | c.0 as u32));
    set(&mut b, 3, &cases.map(|c| 0x1234_0000 | c.1 as u32));
    set(&mut b, 1, &[0x5555_5555]);
    b.run_asm("v_add_f16_e32 v1, v2, v3").unwrap();
    for (l, c) in cases.iter().enumerate() {
        let got = b.wave.vgpr[1][l];
        assert_eq!(got >> 16, 0x5555, "lane {l}: high half kept");
        let h = got as u16;
        if c.2 == 0x7E00 {
            assert!(h & 0x7C00 == 0x7C00 && h & 0x3FF != 0 && h & 0x200 != 0);
        } else {
            assert_eq!(h, c.2, "lane {l}");
        }
    }
    assert!(
        b.run_asm("v_add_f16_e32 v1, v2, v130").is_err(),
        "a true16 high half is not guessed"
    );
}

#[test]
fn cvt_f16_f32_rounds_to_nearest_even() {
    let mut b = bench();
    let cases: [(u32, u16); 12] = [
        (f(1.0), 0x3C00),
        (f(1.0 + 2f32.powi(-11)), 0x3C00),       // tie → even
        (f(1.0 + 3.0 * 2f32.powi(-11)), 0x3C02), // tie → even (up)
        (f(1.0 + 2f32.powi(-11) + 2f32.powi(-20)), 0x3C01),
        (f(65520.0), 0x7C00), // rounds to inf
        (f(65519.0), 0x7BFF),
        (NZERO, 0x8000),
        (INF, 0x7C00),
        (NINF, 0xFC00),
        (f(2f32.powi(-24)), 0x0001), // f16 subnormal
        (f(2f32.powi(-25)), 0x0000), // tie → 0
        (DEN, 0x0000),               // f32 denormal → +0
    ];
    set(&mut b, 2, &cases.map(|c| c.0));
    set(&mut b, 1, &[0xFFFF_FFFF]);
    b.run_asm("v_cvt_f16_f32_e32 v1, v2").unwrap();
    for (l, c) in cases.iter().enumerate() {
        assert_eq!(b.wave.vgpr[1][l], 0xFFFF_0000 | c.1 as u32, "lane {l}");
    }
    set(&mut b, 2, &[NAN | 0x1234]);
    b.run_asm("v_cvt_f16_f32_e32 v1, v2").unwrap();
    let h = b.wave.vgpr[1][0] as u16;
    assert!(h & 0x7C00 == 0x7C00 && h & 0x200 != 0, "quiet NaN: {h:#x}");
}

#[test]
fn cvt_f32_f16_is_exact_with_modifiers() {
    let mut b = bench();
    let cases: [(u16, u32); 7] = [
        (0x3C00, f(1.0)),
        (0x8000, NZERO),
        (0x0001, f(2f32.powi(-24))),
        (0x7BFF, f(65504.0)),
        (0xFC00, NINF),
        (0xC000, f(-2.0)),
        (0x7E00, NAN),
    ];
    set(&mut b, 25, &cases.map(|c| 0xDEAD_0000 | c.0 as u32));
    b.run_asm("v_cvt_f32_f16_e32 v1, v25").unwrap();
    assert_eq!(lanes(&b, 1, 7), cases.map(|c| c.1).to_vec());
    b.run_asm("v_cvt_f32_f16_e64 v144, v25").unwrap();
    assert_eq!(lanes(&b, 144, 7), cases.map(|c| c.1).to_vec());
    b.run_asm("v_cvt_f32_f16_e64 v144, -|v25|").unwrap();
    assert_eq!(b.wave.vgpr[144][5], f(-2.0));
    assert_eq!(b.wave.vgpr[144][0], f(-1.0));
    assert_eq!(b.wave.vgpr[144][1], NZERO);
}

#[test]
fn integer_conversions_round_and_clamp() {
    let mut b = bench();
    let u: [(u32, f32); 5] = [
        (0, 0.0),
        (16_777_217, 16_777_216.0), // tie → even
        (16_777_219, 16_777_220.0), // tie → even (up)
        (u32::MAX, 4_294_967_296.0),
        (7, 7.0),
    ];
    b.wave.sgpr[4] = 16_777_219;
    b.run_asm("v_cvt_f32_u32_e32 v1, s4").unwrap();
    assert_eq!(b.wave.vgpr[1][0], f(16_777_220.0));
    set(&mut b, 2, &u.map(|c| c.0));
    b.run_asm("v_cvt_f32_u32_e32 v1, v2").unwrap();
    assert_eq!(lanes(&b, 1, 5), u.map(|c| f(c.1)).to_vec());
    let i: [(i32, f32); 4] = [
        (-1, -1.0),
        (i32::MIN, -2_147_483_648.0),
        (-16_777_217, -16_777_216.0),
        (i32::MAX, 2_147_483_648.0),
    ];
    set(&mut b, 2, &i.map(|c| c.0 as u32));
    b.run_asm("v_cvt_f32_i32_e32 v1, v2").unwrap();
    assert_eq!(lanes(&b, 1, 4), i.map(|c| f(c.1)).to_vec());
    let c: [(u32, u32); 10] = [
        (f(3.99), 3),
        (f(-0.5), 0),
        (f(-7.0), 0),
        (NZERO, 0),
        (NAN, 0),
        (INF, u32::MAX),
        (NINF, 0),
        (f(4_294_967_296.0), u32::MAX),
        (f(4_294_967_040.0), 4_294_967_040),
        (DEN, 0),
    ];
    set(&mut b, 2, &c.map(|c| c.0));
    b.run_asm("v_cvt_u32_f32_e32 v1, v2").unwrap();
    assert_eq!(lanes(&b, 1, 10), c.map(|c| c.1).to_vec());
}

#[test]
fn rcp_iflag_and_trunc() {
    let mut b = bench();
    let r: [(u32, u32); 7] = [
        (f(2.0), f(0.5)),
        (f(3.0), f(1.0 / 3.0)),
        (0, INF),
        (NZERO, NINF),
        (INF, 0),
        (NINF, NZERO),
        (f(2f32.powi(-128)), INF), // 1/denormal overflows
    ];
    set(&mut b, 2, &r.map(|c| c.0));
    b.run_asm("v_rcp_iflag_f32_e32 v1, v2").unwrap();
    assert_eq!(
        lanes(&b, 1, 6),
        r[..6].iter().map(|c| c.1).collect::<Vec<_>>()
    );
    assert_eq!(b.wave.vgpr[1][6], INF);
    b.wave.sgpr[7] = f(4.0);
    b.run_asm("v_rcp_iflag_f32_e32 v1, s7").unwrap();
    assert_eq!(b.wave.vgpr[1][0], f(0.25));
    set(&mut b, 2, &[NAN]);
    b.run_asm("v_rcp_iflag_f32_e32 v1, v2").unwrap();
    assert!(f32::from_bits(b.wave.vgpr[1][0]).is_nan());

    let t: [(u32, u32); 8] = [
        (f(2.7), f(2.0)),
        (f(-2.7), f(-2.0)),
        (f(-0.3), NZERO),
        (DEN, 0),
        (INF, INF),
        (NINF, NINF),
        (f(16_777_215.0), f(16_777_215.0)),
        (NAN, NAN),
    ];
    set(&mut b, 9, &t.map(|c| c.0));
    b.run_asm("v_trunc_f32_e32 v9, v9").unwrap();
    assert_eq!(lanes(&b, 9, 8), t.map(|c| c.1).to_vec());
}

#[test]
fn cmp_ge_f32_is_ordered_and_takes_abs() {
    let mut b = bench();
    let c: [(u32, u32, bool); 8] = [
        (f(1.0), f(1.0), true),
        (f(-3.0), f(2.0), true), // |−3| ≥ 2
        (f(1.0), f(2.0), false),
        (NZERO, 0, true),
        (NAN, f(1.0), false),
        (f(1.0), NAN, false),
        (NINF, INF, true),
        (DEN, 0, true),
    ];
    set(&mut b, 10, &c.map(|c| c.0));
    set(&mut b, 8, &c.map(|c| c.1));
    b.wave.sgpr[sreg::EXEC_LO] = 0xFF;
    b.run_asm("v_cmp_ge_f32_e64 s3, |v10|, v8").unwrap();
    let want = c
        .iter()
        .enumerate()
        .fold(0u32, |m, (l, c)| m | (c.2 as u32) << l);
    assert_eq!(b.wave.sgpr[3], want);
    b.run_asm("v_cmp_ge_f32_e32 vcc_lo, v10, v8").unwrap();
    assert_eq!(
        b.wave.sgpr[sreg::VCC_LO] & 0b10,
        0,
        "−3 ≥ 2 is false without |·|"
    );
}

#[test]
fn packed_f16_ops_follow_op_sel_and_neg() {
    let mut b = bench();
    // v2 = (lo 1.0, hi 2.0), v3 = (lo 3.0, hi 0.5)
    set(&mut b, 2, &[0x4000_3C00]);
    set(&mut b, 3, &[0x3800_4200]);
    b.run_asm("v_pk_add_f16 v1, v2, v3").unwrap();
    assert_eq!(b.wave.vgpr[1][0], 0x4100_4400); // (4.0, 2.5)
    b.run_asm("v_pk_add_f16 v1, v2, v3 neg_lo:[0,1] neg_hi:[0,1]")
        .unwrap();
    assert_eq!(b.wave.vgpr[1][0], 0x3E00_C000); // (1 − 3, 2 − 0.5) = (−2, 1.5)
    // The literal fills the low half; op_sel_hi 0 makes the high lane read it too.
    b.run_asm("v_pk_add_f16 v1, 0xe400, v2 op_sel_hi:[0,1]")
        .unwrap();
    assert_eq!(b.wave.vgpr[1][0], 0xE3FC_E3FE); // (−1023, −1022)
    b.run_asm("v_pk_mul_f16 v1, v2, v3").unwrap();
    assert_eq!(b.wave.vgpr[1][0], 0x3C00_4200); // (3.0, 1.0)
    b.run_asm("v_pk_mul_f16 v1, v2, v3 op_sel_hi:[0,1]")
        .unwrap();
    assert_eq!(b.wave.vgpr[1][0], 0x3800_4200); // hi lane: 1.0 · 0.5
    // Inline float constant in a packed op: f16 bits in the low half, high half 0.
    b.run_asm("v_pk_mul_f16 v1, 2.0, v2").unwrap();
    assert_eq!(b.wave.vgpr[1][0], 0x0000_4000);
    b.run_asm("v_pk_mul_f16 v1, 2.0, v2 op_sel_hi:[0,1]")
        .unwrap();
    assert_eq!(b.wave.vgpr[1][0], 0x4400_4000);
    set(&mut b, 4, &[0x3C00_3C00]);
    b.run_asm("v_pk_fma_f16 v1, v2, v3, v4 neg_lo:[0,0,1] neg_hi:[0,0,1]")
        .unwrap();
    assert_eq!(b.wave.vgpr[1][0], 0x0000_4000); // (1·3 − 1, 2·0.5 − 1) = (2, 0)
    b.run_asm("v_pk_fma_f16 v1, v2, v3, v4").unwrap();
    assert_eq!(b.wave.vgpr[1][0], 0x4000_4400); // (4, 2)
    // Edges per half: overflow, NaN, −0, subnormal, single rounding of the fma.
    set(&mut b, 2, &[0x7BFF_8000, 0x3C01_0001]);
    set(&mut b, 3, &[0x4000_8000, 0x3C01_3C00]);
    set(&mut b, 4, &[0x7E00_8000, 0x0000_0001]);
    b.run_asm("v_pk_mul_f16 v1, v2, v3").unwrap();
    assert_eq!(b.wave.vgpr[1][0], 0x7C00_0000); // 65504·2 → inf; −0·−0 = +0
    assert_eq!(b.wave.vgpr[1][1], 0x3C02_0001); // (1+2^-10)^2 → 1+2^-9; subnormal kept
    b.run_asm("v_pk_add_f16 v1, v2, v3").unwrap();
    assert_eq!(b.wave.vgpr[1][0] as u16, 0x8000); // −0 + −0
    b.run_asm("v_pk_fma_f16 v1, v2, v3, v4").unwrap();
    assert_eq!(b.wave.vgpr[1][0] >> 16 & 0x7E00, 0x7E00, "NaN accumulator");
    assert_eq!(b.wave.vgpr[1][0] as u16, 0x0000, "−0·−0 + −0 = +0");
    assert_eq!(b.wave.vgpr[1][1] as u16, 0x0002); // 2^-24 + 2^-24
}

#[test]
fn dot2_forms_round_once() {
    let mut b = bench();
    // a = (1.0, 2.0), b = (3.0, 0.5): 3 + 1 = 4 plus the accumulator.
    set(&mut b, 2, &[0x4000_3C00]);
    set(&mut b, 3, &[0x3800_4200]);
    set(&mut b, 4, &[f(0.25), DEN, NAN, INF]);
    b.run_asm("v_dot2_f32_f16 v1, v2, v3, v4").unwrap();
    assert_eq!(b.wave.vgpr[1][0], f(4.25));
    assert_eq!(
        b.wave.vgpr[1][1],
        f(4.0),
        "f32 denormal accumulator flushed"
    );
    assert_eq!(b.wave.vgpr[1][2], F32_QNAN);
    assert_eq!(b.wave.vgpr[1][3], INF);
    b.run_asm("v_dot2_f32_f16 v1, v2, v3, 0").unwrap();
    assert_eq!(b.wave.vgpr[1][0], f(4.0));
    // One rounding of the exact sum: 1·1 + 2^-24·2^-24 − 1 = 2^-48 (rounding 1 + 2^-48 to
    // f32 first, as the pseudocode's two steps would, gives 0).
    set(&mut b, 5, &[0x0001_3C00]);
    set(&mut b, 6, &[f(-1.0)]);
    b.run_asm("v_dot2_f32_f16 v1, v5, v5, v6").unwrap();
    assert_eq!(b.wave.vgpr[1][0], f(2f32.powi(-48)));
    set(&mut b, 1, &[f(-1.0), f(0.25)]);
    b.run_asm("v_dot2acc_f32_f16 v1, v5, v5").unwrap();
    assert_eq!(b.wave.vgpr[1][0], f(2f32.powi(-48)));
    assert_eq!(b.wave.vgpr[1][1], f(1.25));
    // 4 + 2^-48 rounds to 4.
    b.run_asm("v_dual_dot2acc_f32_f16 v1, v2, v3").unwrap();
    assert_eq!(b.wave.vgpr[1][0], f(4.0));
    assert_eq!(b.wave.vgpr[1][1], f(5.25));
    // A negative denormal accumulator is flushed to −0; with +0 products the sum is +0.
    set(&mut b, 9, &[0]);
    set(&mut b, 1, &[DEN | NZERO]);
    b.run_asm("v_dot2acc_f32_f16 v1, v9, v9").unwrap();
    assert_eq!(b.wave.vgpr[1][0], 0);
    // 0 · inf → NaN.
    set(&mut b, 10, &[0x0000_7C00]);
    b.run_asm("v_dot2_f32_f16 v1, v10, v9, 0").unwrap();
    assert_eq!(b.wave.vgpr[1][0], F32_QNAN);
}

#[test]
fn fma_mix_takes_f16_where_op_sel_hi_says() {
    let mut b = bench();
    set(&mut b, 14, &[0x1234_4200, 0x0000_0001]); // lo f16 3.0; lo f16 2^-24
    set(&mut b, 13, &[f(0.5), f(2f32.powi(-100))]);
    set(&mut b, 5, &[f(1.0), NZERO]);
    b.run_asm("v_fma_mix_f32 v5, v14, v13, v5 op_sel_hi:[1,0,0]")
        .unwrap();
    assert_eq!(b.wave.vgpr[5][0], f(2.5));
    assert_eq!(b.wave.vgpr[5][1], f(2f32.powi(-124)));
    set(&mut b, 14, &[0x4400_3C00]); // hi f16 4.0
    set(&mut b, 5, &[f(1.0)]);
    b.run_asm("v_fma_mix_f32 v5, v14, v13, v5 op_sel:[1,0,0] op_sel_hi:[1,0,0]")
        .unwrap();
    assert_eq!(b.wave.vgpr[5][0], f(3.0));
}

#[test]
fn unimplemented_modifiers_fault() {
    let mut b = bench();
    set(&mut b, 2, &[0]);
    for asm in [
        "v_add_f32_e64 v1, v2, v2 clamp",
        "v_cvt_f32_f16_e64 v1, v2 op_sel:[0,1]",
        "v_dot2_f32_f16 v1, v2, v2, v2 neg_lo:[0,0,1]",
    ] {
        let err = b.run_asm(asm).unwrap_err();
        assert!(
            matches!(err, crate::fault::FaultKind::Unsupported { .. }),
            "{asm}: {err:?}"
        );
    }
}
