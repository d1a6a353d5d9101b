use crate::exec::Flow;
use crate::exec::testing::Bench;
use crate::fault::FaultKind;
use crate::inst::Gen;
use crate::wave::sreg;

/// One instruction run on a bench (a closure around a `run_asm("…")` literal, which is
/// what the coverage table counts).
type Run = fn(&mut Bench) -> Result<Flow, FaultKind>;

fn bench() -> Bench {
    Bench::new(Gen::Gfx11)
}

/// Runs `run` with s1 = a, s2 = b and SCC = scc_in; returns (s0, SCC).
fn run2(run: Run, a: u32, b: u32, scc_in: bool) -> (u32, bool) {
    let mut t = bench();
    t.wave.sgpr[1] = a;
    t.wave.sgpr[2] = b;
    t.wave.scc = scc_in;
    run(&mut t).unwrap();
    (t.wave.sgpr[0], t.wave.scc)
}

#[test]
fn adds_set_carry_or_overflow() {
    assert_eq!(
        run2(|t| t.run_asm("s_add_u32 s0, s1, s2"), u32::MAX, 1, false),
        (0, true)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_add_u32 s0, s1, s2"), 7, 8, true),
        (15, false)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_addc_u32 s0, s1, s2"), u32::MAX, 0, true),
        (0, true)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_addc_u32 s0, s1, s2"), 1, 2, true),
        (4, false)
    );
    assert_eq!(
        run2(
            |t| t.run_asm("s_add_co_ci_u32 s0, s1, s2"),
            u32::MAX,
            u32::MAX,
            true
        ),
        (u32::MAX, true)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_add_co_ci_u32 s0, s1, s2"), 5, 0, false),
        (5, false)
    );
    // Signed overflow, not carry: 0xFFFFFFFF + 1 = 0 is -1 + 1, no overflow.
    assert_eq!(
        run2(|t| t.run_asm("s_add_i32 s0, s1, s2"), u32::MAX, 1, true),
        (0, false)
    );
    assert_eq!(
        run2(
            |t| t.run_asm("s_add_i32 s0, s1, s2"),
            i32::MAX as u32,
            1,
            false
        ),
        (0x8000_0000, true)
    );
    assert_eq!(
        run2(
            |t| t.run_asm("s_add_co_i32 s0, s1, s2"),
            0x8000_0000,
            u32::MAX,
            false
        ),
        (i32::MAX as u32, true)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_add_co_i32 s0, s1, s2"), 2, 3, true),
        (5, false)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_sub_i32 s0, s1, s2"), 0, 1, true),
        (u32::MAX, false)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_sub_i32 s0, s1, s2"), 0x8000_0000, 1, false),
        (i32::MAX as u32, true)
    );
    assert_eq!(
        run2(
            |t| t.run_asm("s_sub_co_i32 s0, s1, s2"),
            0,
            0x8000_0000,
            false
        ),
        (0x8000_0000, true)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_sub_co_i32 s0, s1, s2"), 9, 4, true),
        (5, false)
    );
    // Constant sources.
    assert_eq!(
        run2(|t| t.run_asm("s_sub_i32 s0, 0, s2"), 0, 5, false),
        (5u32.wrapping_neg(), false)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_add_i32 s0, s1, -16"), 16, 0, true),
        (0, false)
    );
}

#[test]
fn addk_sign_extends_and_sets_overflow() {
    let mut t = bench();
    t.wave.sgpr[5] = 10;
    t.run_asm("s_addk_i32 s5, 0xfff0").unwrap();
    assert_eq!((t.wave.sgpr[5], t.wave.scc), (u32::MAX - 5, false));
    t.wave.sgpr[5] = i32::MAX as u32;
    t.run_asm("s_addk_co_i32 s5, 0x60").unwrap();
    assert_eq!((t.wave.sgpr[5], t.wave.scc), (0x8000_005F, true));
    t.run_asm("s_addk_co_i32 s5, -1").unwrap();
    assert_eq!((t.wave.sgpr[5], t.wave.scc), (0x8000_005E, false));
}

#[test]
fn k_moves_multiplies_and_compares() {
    let mut t = bench();
    t.wave.scc = true;
    t.run_asm("s_movk_i32 s7, 0x8000").unwrap();
    assert_eq!(t.wave.sgpr[7], 0xFFFF_8000);
    t.run_asm("s_movk_i32 s7, 0x60").unwrap();
    assert_eq!(t.wave.sgpr[7], 0x60);
    t.run_asm("s_mulk_i32 s7, 0xfffe").unwrap();
    assert_eq!(t.wave.sgpr[7], (-0xC0i32) as u32);
    assert!(t.wave.scc, "s_movk/s_mulk leave SCC");
    t.wave.sgpr[3] = 0xFFFF_FFFF;
    t.run_asm("s_cmpk_eq_i32 s3, 0xffff").unwrap();
    assert!(t.wave.scc, "simm16 0xffff is -1 for the i32 compare");
    t.run_asm("s_cmpk_gt_u32 s3, 0xffff").unwrap();
    assert!(t.wave.scc, "simm16 0xffff is 65535 for the u32 compare");
    t.run_asm("s_cmpk_lt_u32 s3, 0x1001").unwrap();
    assert!(!t.wave.scc);
    t.wave.sgpr[3] = 0x1000;
    t.run_asm("s_cmpk_lt_u32 s3, 0x1001").unwrap();
    assert!(t.wave.scc);
    t.run_asm("s_cmpk_gt_u32 s3, 0x1000").unwrap();
    assert!(!t.wave.scc);
    t.run_asm("s_cmpk_eq_i32 s3, 0x1000").unwrap();
    assert!(t.wave.scc);
}

/// The bit tests a compiler emits for `if (x & 4)`: SCC from one bit, its index taken modulo
/// the operand's width.
#[test]
fn bit_tests_set_scc_from_one_bit() {
    let cases: &[(Run, u32, bool)] = &[
        (|t| t.run_asm("s_bitcmp1_b32 s1, s2"), 2, true),
        (|t| t.run_asm("s_bitcmp1_b32 s1, s2"), 1, false),
        (|t| t.run_asm("s_bitcmp1_b32 s1, s2"), 34, true),
        (|t| t.run_asm("s_bitcmp0_b32 s1, s2"), 2, false),
        (|t| t.run_asm("s_bitcmp0_b32 s1, s2"), 1, true),
        // s[4:5] = 1 << 40; the index keeps 6 bits.
        (|t| t.run_asm("s_bitcmp1_b64 s[4:5], s2"), 40, true),
        (|t| t.run_asm("s_bitcmp1_b64 s[4:5], s2"), 104, true),
        (|t| t.run_asm("s_bitcmp0_b64 s[4:5], s2"), 40, false),
        (|t| t.run_asm("s_bitcmp0_b64 s[4:5], s2"), 8, true),
    ];
    for (i, &(run, bit, want)) in cases.iter().enumerate() {
        let mut t = bench();
        t.wave.sgpr[1] = 0b0100;
        t.wave.sgpr[4] = 0;
        t.wave.sgpr[5] = 1 << 8;
        t.wave.sgpr[2] = bit;
        t.wave.scc = !want;
        run(&mut t).unwrap();
        assert_eq!(t.wave.scc, want, "case {i}: bit {bit}");
    }
}

#[test]
fn compares_signed_unsigned_and_64_bit() {
    let cases: &[(Run, u32, u32, bool)] = &[
        (|t| t.run_asm("s_cmp_eq_u32 s1, s2"), 3, 3, true),
        (|t| t.run_asm("s_cmp_eq_u32 s1, s2"), 3, 4, false),
        (|t| t.run_asm("s_cmp_lg_u32 s1, s2"), 3, 4, true),
        (|t| t.run_asm("s_cmp_lg_u32 s1, s2"), 4, 4, false),
        (|t| t.run_asm("s_cmp_ge_u32 s1, s2"), u32::MAX, 0, true),
        (|t| t.run_asm("s_cmp_ge_u32 s1, s2"), 0, 1, false),
        (|t| t.run_asm("s_cmp_ge_u32 s1, s2"), 1, 1, true),
        (|t| t.run_asm("s_cmp_gt_u32 s1, s2"), u32::MAX, 1, true),
        (|t| t.run_asm("s_cmp_gt_u32 s1, s2"), 1, 1, false),
        (|t| t.run_asm("s_cmp_le_u32 s1, s2"), 1, 1, true),
        (|t| t.run_asm("s_cmp_le_u32 s1, s2"), u32::MAX, 1, false),
        (|t| t.run_asm("s_cmp_lt_u32 s1, s2"), 0, u32::MAX, true),
        (|t| t.run_asm("s_cmp_lt_u32 s1, s2"), 1, 1, false),
        (|t| t.run_asm("s_cmp_ge_i32 s1, s2"), u32::MAX, 0, false),
        (|t| t.run_asm("s_cmp_ge_i32 s1, s2"), 0, u32::MAX, true),
        (|t| t.run_asm("s_cmp_ge_i32 s1, s2"), 5, 5, true),
        (|t| t.run_asm("s_cmp_gt_i32 s1, s2"), 0, 0x8000_0000, true),
        (|t| t.run_asm("s_cmp_gt_i32 s1, s2"), 0x8000_0000, 0, false),
        (|t| t.run_asm("s_cmp_lt_i32 s1, s2"), u32::MAX, 0, true),
        (|t| t.run_asm("s_cmp_lt_i32 s1, s2"), 0, 0, false),
    ];
    for (i, &(run, a, b, want)) in cases.iter().enumerate() {
        assert_eq!(run2(run, a, b, !want).1, want, "case {i}: {a:#x}, {b:#x}");
    }
    let mut t = bench();
    t.wave.sgpr[4] = 0;
    t.wave.sgpr[5] = 1;
    t.run_asm("s_cmp_eq_u64 s[4:5], 0").unwrap();
    assert!(!t.wave.scc, "the high word counts");
    t.run_asm("s_cmp_lg_u64 s[4:5], 0").unwrap();
    assert!(t.wave.scc);
    t.wave.sgpr[5] = 0;
    t.run_asm("s_cmp_eq_u64 s[4:5], 0").unwrap();
    assert!(t.wave.scc);
    t.run_asm("s_cmp_lg_u64 s[4:5], 0").unwrap();
    assert!(!t.wave.scc);
    t.wave.sgpr[2] = 7;
    t.wave.sgpr[sreg::TTMP0 + 7] = 3;
    t.run_asm("s_cmp_ge_i32 ttmp7, s2").unwrap();
    assert!(!t.wave.scc);
}

#[test]
fn bitwise_ops_set_scc_on_nonzero() {
    assert_eq!(
        run2(|t| t.run_asm("s_and_b32 s0, s1, s2"), 0xF0, 0x0F, true),
        (0, false)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_and_b32 s0, s1, s2"), 0xF0, 0x30, false),
        (0x30, true)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_or_b32 s0, s1, s2"), 0, 0, true),
        (0, false)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_or_b32 s0, s1, s2"), 1, 2, false),
        (3, true)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_xor_b32 s0, s1, s2"), 5, 5, true),
        (0, false)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_xor_b32 s0, s1, -1"), 5, 0, false),
        (!5, true)
    );
    assert_eq!(
        run2(
            |t| t.run_asm("s_and_not1_b32 s0, s1, s2"),
            0xFF,
            0x0F,
            false
        ),
        (0xF0, true)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_and_not1_b32 s0, s1, s2"), 0xFF, 0xFF, true),
        (0, false)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_not_b32 s0, s1"), u32::MAX, 0, true),
        (0, false)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_not_b32 s0, s1"), 0, 0, false),
        (u32::MAX, true)
    );
}

#[test]
fn shifts_mask_the_amount() {
    assert_eq!(
        run2(|t| t.run_asm("s_lshl_b32 s0, s1, s2"), 3, 33, false),
        (6, true)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_lshl_b32 s0, s1, s2"), 0x8000_0000, 1, true),
        (0, false)
    );
    assert_eq!(
        run2(
            |t| t.run_asm("s_lshr_b32 s0, s1, s2"),
            0x8000_0000,
            63,
            false
        ),
        (1, true)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_lshr_b32 s0, s1, s2"), 1, 1, true),
        (0, false)
    );
    assert_eq!(
        run2(
            |t| t.run_asm("s_ashr_i32 s0, s1, s2"),
            0x8000_0000,
            31,
            false
        ),
        (u32::MAX, true)
    );
    assert_eq!(
        run2(
            |t| t.run_asm("s_ashr_i32 s0, s1, s2"),
            0x4000_0000,
            32,
            false
        ),
        (0x4000_0000, true)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_ashr_i32 s0, s1, 31"), 5, 0, true),
        (0, false)
    );
    let mut t = bench();
    t.wave.sgpr[18] = 0x8000_0001;
    t.wave.sgpr[19] = 0x1;
    t.run_asm("s_lshl_b64 s[0:1], s[18:19], 1").unwrap();
    assert_eq!((t.wave.sgpr[0], t.wave.sgpr[1], t.wave.scc), (2, 3, true));
    t.wave.sgpr[2] = 64 + 63;
    t.run_asm("s_lshl_b64 s[0:1], s[18:19], s2").unwrap();
    assert_eq!(
        (t.wave.sgpr[0], t.wave.sgpr[1], t.wave.scc),
        (0, 0x8000_0000, true)
    );
    t.wave.sgpr[18] = 0;
    t.wave.sgpr[19] = 0x8000_0000;
    t.run_asm("s_lshl_b64 s[0:1], s[18:19], 1").unwrap();
    assert_eq!((t.wave.sgpr[0], t.wave.sgpr[1], t.wave.scc), (0, 0, false));
}

#[test]
fn bfe_bitset_abs() {
    // offset 5, width 11
    assert_eq!(
        run2(
            |t| t.run_asm("s_bfe_u32 s0, s1, 0xb0005"),
            0xFFFF_FFFF,
            0,
            false
        ),
        (0x7FF, true)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_bfe_u32 s0, s1, 0xb0005"), 0x1F, 0, true),
        (0, false)
    );
    assert_eq!(
        run2(
            |t| t.run_asm("s_bfe_u32 s0, s1, s2"),
            0xABCD_0000,
            0x0020_0010,
            false
        ),
        (0xABCD, true)
    );
    assert_eq!(
        run2(
            |t| t.run_asm("s_bfe_u32 s0, s1, s2"),
            0xABCD_0000,
            0x0000_0010,
            true
        ),
        (0, false)
    );
    let mut t = bench();
    t.wave.sgpr[5] = u32::MAX;
    t.wave.scc = true;
    t.run_asm("s_bitset0_b32 s5, 31").unwrap();
    assert_eq!(t.wave.sgpr[5], 0x7FFF_FFFF);
    t.run_asm("s_bitset0_b32 s5, 32").unwrap();
    assert_eq!(t.wave.sgpr[5], 0x7FFF_FFFE, "bit index masked to 5 bits");
    assert!(t.wave.scc);
    assert_eq!(
        run2(|t| t.run_asm("s_abs_i32 s0, s1"), (-5i32) as u32, 0, false),
        (5, true)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_abs_i32 s0, s1"), 0, 0, true),
        (0, false)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_abs_i32 s0, s1"), 0x8000_0000, 0, false),
        (0x8000_0000, true)
    );
}

#[test]
fn min_sets_scc_when_s0_chosen() {
    assert_eq!(
        run2(|t| t.run_asm("s_min_i32 s0, s1, s2"), u32::MAX, 1, false),
        (u32::MAX, true)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_min_i32 s0, s1, s2"), 3, 3, true),
        (3, false)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_min_i32 s0, s1, 0x100"), 0x200, 0, true),
        (0x100, false)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_min_u32 s0, s1, s2"), u32::MAX, 1, true),
        (1, false)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_min_u32 s0, s1, s2"), 0, 1, false),
        (0, true)
    );
}

#[test]
fn multiplies() {
    assert_eq!(
        run2(|t| t.run_asm("s_mul_i32 s0, s1, s2"), u32::MAX, 3, true),
        ((-3i32) as u32, true)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_mul_i32 s0, s1, 0xffffe800"), 2, 0, false),
        (0xFFFF_D000, false)
    );
    assert_eq!(
        run2(
            |t| t.run_asm("s_mul_hi_u32 s0, s1, s2"),
            u32::MAX,
            u32::MAX,
            false
        ),
        (0xFFFF_FFFE, false)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_mul_hi_u32 s0, s1, 0xaaaaaaab"), 6, 0, true),
        (4, true)
    );
    assert_eq!(
        run2(
            |t| t.run_asm("s_mul_hi_i32 s0, s1, s2"),
            u32::MAX,
            u32::MAX,
            false
        ),
        (0, false)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_mul_hi_i32 s0, s1, s2"), u32::MAX, 2, false),
        (u32::MAX, false)
    );
    assert_eq!(
        run2(
            |t| t.run_asm("s_mul_hi_i32 s0, s1, 6"),
            0x8000_0000,
            0,
            false
        ),
        (u32::MAX - 2, false)
    );
    let mut t = bench();
    t.wave.sgpr[2] = u32::MAX;
    t.wave.sgpr[3] = 1;
    t.wave.sgpr[20] = 3;
    t.wave.sgpr[21] = 0;
    t.run_asm("s_mul_u64 s[20:21], s[20:21], s[2:3]").unwrap();
    assert_eq!((t.wave.sgpr[20], t.wave.sgpr[21]), (0xFFFF_FFFD, 5));
    t.run_asm("s_mul_u64 s[28:29], s[2:3], 6").unwrap();
    assert_eq!((t.wave.sgpr[28], t.wave.sgpr[29]), (0xFFFF_FFFA, 0xB));
}

#[test]
fn sixty_four_bit_add_and_moves() {
    let mut t = bench();
    t.wave.sgpr[4] = u32::MAX;
    t.wave.sgpr[5] = 7;
    t.wave.sgpr[20] = 1;
    t.wave.sgpr[21] = 0;
    t.wave.scc = true;
    t.run_asm("s_add_nc_u64 s[4:5], s[4:5], s[20:21]").unwrap();
    assert_eq!((t.wave.sgpr[4], t.wave.sgpr[5], t.wave.scc), (0, 8, true));
    t.run_asm("s_add_nc_u64 s[4:5], s[4:5], -1").unwrap();
    assert_eq!((t.wave.sgpr[4], t.wave.sgpr[5]), (u32::MAX, 7));
    t.run_asm("s_mov_b64 s[8:9], -1").unwrap();
    assert_eq!((t.wave.sgpr[8], t.wave.sgpr[9]), (u32::MAX, u32::MAX));
    t.run_asm("s_mov_b64 s[8:9], s[4:5]").unwrap();
    assert_eq!((t.wave.sgpr[8], t.wave.sgpr[9]), (u32::MAX, 7));
    t.run_asm("s_mov_b32 s0, 0x10001").unwrap();
    assert_eq!(t.wave.sgpr[0], 0x10001);
    t.run_asm("s_mov_b32 s1, exec_lo").unwrap();
    assert_eq!(t.wave.sgpr[1], u32::MAX);
    t.run_asm("s_mov_b32 s2, s0").unwrap();
    assert_eq!(t.wave.sgpr[2], 0x10001);
    assert!(t.wave.scc, "moves leave SCC");
}

#[test]
fn cselect_reads_scc() {
    assert_eq!(
        run2(|t| t.run_asm("s_cselect_b32 s0, s1, s2"), 1, 2, true),
        (1, true)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_cselect_b32 s0, s1, s2"), 1, 2, false),
        (2, false)
    );
    assert_eq!(
        run2(|t| t.run_asm("s_cselect_b32 s0, -1, 0"), 0, 0, true),
        (u32::MAX, true)
    );
}

#[test]
fn saveexec_forms() {
    let mut t = bench();
    t.wave.sgpr[sreg::EXEC_LO] = 0b1100;
    t.wave.sgpr[2] = 0b1010;
    t.run_asm("s_and_saveexec_b32 s3, s2").unwrap();
    assert_eq!(
        (t.wave.sgpr[3], t.wave.exec(), t.wave.scc),
        (0b1100, 0b1000, true)
    );
    t.wave.sgpr[2] = 0b0111;
    t.run_asm("s_and_saveexec_b32 s3, s2").unwrap();
    assert_eq!(
        (t.wave.sgpr[3], t.wave.exec(), t.wave.scc),
        (0b1000, 0, false)
    );
    // S0 and sdst the same register: S0 is read before sdst is written.
    t.wave.sgpr[sreg::EXEC_LO] = 0b0011;
    t.wave.sgpr[0] = 0b1111;
    t.run_asm("s_and_not1_saveexec_b32 s0, s0").unwrap();
    assert_eq!(
        (t.wave.sgpr[0], t.wave.exec(), t.wave.scc),
        (0b0011, 0b1100, true)
    );
    t.wave.sgpr[0] = 0b1100;
    t.run_asm("s_and_not1_saveexec_b32 s1, s0").unwrap();
    assert_eq!(
        (t.wave.sgpr[1], t.wave.exec(), t.wave.scc),
        (0b1100, 0, false)
    );
    t.wave.sgpr[34] = 0b0101;
    t.run_asm("s_or_saveexec_b32 s34, s34").unwrap();
    assert_eq!(
        (t.wave.sgpr[34], t.wave.exec(), t.wave.scc),
        (0, 0b0101, true)
    );
    t.wave.sgpr[34] = 0;
    t.wave.sgpr[sreg::EXEC_LO] = 0;
    t.run_asm("s_or_saveexec_b32 s35, s34").unwrap();
    assert_eq!((t.wave.sgpr[35], t.wave.exec(), t.wave.scc), (0, 0, false));
    t.wave.sgpr[sreg::VCC_LO] = 0b110;
    t.wave.sgpr[sreg::EXEC_LO] = 0b011;
    t.run_asm("s_and_saveexec_b32 s0, vcc_lo").unwrap();
    assert_eq!((t.wave.sgpr[0], t.wave.exec()), (0b011, 0b010));
}

#[test]
fn exec_and_vcc_as_operands() {
    let mut t = bench();
    t.wave.sgpr[sreg::EXEC_LO] = 0xF0F0;
    t.wave.sgpr[15] = 0xFF00;
    t.run_asm("s_and_b32 vcc_lo, exec_lo, s15").unwrap();
    assert_eq!(t.wave.vcc(), 0xF000);
    t.run_asm("s_and_not1_b32 exec_lo, exec_lo, s15").unwrap();
    assert_eq!(t.wave.exec(), 0x00F0);
    t.wave.sgpr[0] = 0x0F00;
    t.run_asm("s_or_b32 exec_lo, exec_lo, s0").unwrap();
    assert_eq!(t.wave.exec(), 0x0FF0);
    t.run_asm("s_xor_b32 s0, exec_lo, s0").unwrap();
    assert_eq!(t.wave.sgpr[0], 0x00F0);
}

#[test]
fn bad_simm16_is_a_fault_not_a_panic() {
    let mut t = bench();
    t.wave.sgpr[5] = 0;
    assert!(t.run_asm("s_addk_i32 s5, 0x10000").is_err());
    assert!(t.run_asm("s_movk_i32 s5, s6").is_err());
}
