use crate::exec::Flow;
use crate::exec::testing::Bench;
use crate::fault::FaultKind;
use crate::inst::Gen;
use crate::wave::{LANES, POISON, VRow, sreg};

/// One instruction run on a bench (a closure around a `run_asm("…")` literal, which is
/// what the coverage table counts).
type Run = fn(&mut Bench) -> Result<Flow, FaultKind>;

/// A bench with v1 = `a`, v2 = `b`, v3 = `c` in lanes 0..n and EXEC = `exec`.
fn bench(rows: &[&[u32]], exec: u32) -> Bench {
    let mut t = Bench::new(Gen::Gfx11);
    for (k, vals) in rows.iter().enumerate() {
        t.wave.vgpr[1 + k] = std::array::from_fn(|l| vals.get(l).copied().unwrap_or(0));
    }
    t.wave.sgpr[sreg::EXEC_LO] = exec;
    t
}

fn lanes(r: &VRow, n: usize) -> Vec<u32> {
    r[..n].to_vec()
}

/// Runs a 2-source op over lane pairs, all lanes active; returns v0's lanes.
fn bin(run: Run, pairs: &[(u32, u32)]) -> Vec<u32> {
    let a: Vec<u32> = pairs.iter().map(|p| p.0).collect();
    let b: Vec<u32> = pairs.iter().map(|p| p.1).collect();
    let mut t = bench(&[&a, &b], u32::MAX);
    run(&mut t).unwrap();
    lanes(&t.wave.vgpr[0], pairs.len())
}

fn tri(run: Run, triples: &[(u32, u32, u32)]) -> Vec<u32> {
    let a: Vec<u32> = triples.iter().map(|p| p.0).collect();
    let b: Vec<u32> = triples.iter().map(|p| p.1).collect();
    let c: Vec<u32> = triples.iter().map(|p| p.2).collect();
    let mut t = bench(&[&a, &b, &c], u32::MAX);
    run(&mut t).unwrap();
    lanes(&t.wave.vgpr[0], triples.len())
}

const M: u32 = u32::MAX;
const MIN: u32 = 0x8000_0000;

#[test]
fn inactive_lanes_keep_their_values() {
    let mut t = bench(&[&[5; 32]], 0b0101);
    t.run_asm("v_mov_b32_e32 v0, v1").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[0], 4), vec![5, POISON, 5, POISON]);
    t.run_asm("v_not_b32_e32 v0, v1").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[0], 4), vec![!5, POISON, !5, POISON]);
    t.run_asm("v_mov_b32_e32 v0, 0x64086408").unwrap();
    assert_eq!(t.wave.vgpr[0][2], 0x6408_6408);
    t.wave.sgpr[7] = 9;
    t.run_asm("v_mov_b32_e32 v0, s7").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[0], 2), vec![9, POISON]);
}

#[test]
fn bitwise() {
    let p = [(0xF0F0, 0xFF00), (M, 0), (0, 0)];
    assert_eq!(
        bin(|t| t.run_asm("v_and_b32_e32 v0, v1, v2"), &p),
        vec![0xF000, 0, 0]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_or_b32_e32 v0, v1, v2"), &p),
        vec![0xFFF0, M, 0]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_xor_b32_e32 v0, v1, v2"), &p),
        vec![0x0FF0, M, 0]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_and_b32_e32 v0, 0xffff0000, v1"), &p),
        vec![0, 0xFFFF_0000, 0]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_or_b32_e64 v0, v1, 16"), &p),
        vec![0xF0F0, M, 16]
    );
    let t3 = [(0xF0, 0x3C, 0x1), (M, 0, 0x100)];
    assert_eq!(
        tri(|t| t.run_asm("v_and_or_b32 v0, v1, v2, v3"), &t3),
        vec![0x31, 0x100]
    );
    assert_eq!(
        tri(|t| t.run_asm("v_or3_b32 v0, v1, v2, v3"), &t3),
        vec![0xFD, M]
    );
    assert_eq!(
        tri(|t| t.run_asm("v_or3_b32 v0, v1, v2, 16"), &t3),
        vec![0xFC, M]
    );
}

#[test]
fn adds_and_subs_wrap() {
    let p = [(M, 1), (0, 1), (MIN, MIN)];
    assert_eq!(
        bin(|t| t.run_asm("v_add_nc_u32_e32 v0, v1, v2"), &p),
        vec![0, 1, 0]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_sub_nc_u32_e32 v0, v1, v2"), &p),
        vec![M - 1, M, 0]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_sub_nc_u32_e64 v0, v1, v2"), &p),
        vec![M - 1, M, 0]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_subrev_nc_u32_e32 v0, v1, v2"), &p),
        vec![2, 1, 0]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_add_nc_u32_e32 v0, -1, v1"), &p),
        vec![M - 1, M, 0x7FFF_FFFF]
    );
    let t3 = [(M, 1, 1), (1, 2, 3)];
    assert_eq!(
        tri(|t| t.run_asm("v_add3_u32 v0, v1, v2, v3"), &t3),
        vec![1, 6]
    );
    assert_eq!(
        tri(|t| t.run_asm("v_add3_u32 v0, v1, v2, 0x7fff"), &t3),
        vec![0x7FFF, 0x8002]
    );
}

#[test]
fn carries_go_to_the_mask_operand() {
    let mut t = bench(&[&[M, 1, M, 5], &[1, 1, 1, 0]], 0b0111);
    t.wave.sgpr[sreg::VCC_LO] = POISON;
    t.run_asm("v_add_co_u32 v0, vcc_lo, v1, v2").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[0], 4), vec![0, 2, 0, POISON]);
    assert_eq!(
        t.wave.vcc(),
        0b0101,
        "carry in lanes 0 and 2, inactive lane 3 is 0"
    );
    t.wave.sgpr[12] = M;
    t.run_asm("v_add_co_u32 v0, s2, s12, v2").unwrap();
    assert_eq!(t.wave.sgpr[2], 0b0111);
    assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![0, 0, 0]);
    // Carry-in from vcc_lo: lanes 0 and 2 add 1.
    t.wave.vgpr[2] = [0; LANES];
    t.run_asm("v_add_co_ci_u32_e32 v0, vcc_lo, v1, v2, vcc_lo")
        .unwrap();
    assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![0, 1, 0]);
    assert_eq!(t.wave.vcc(), 0b0101);
    t.wave.sgpr[3] = 0b0010;
    t.run_asm("v_add_co_ci_u32_e64 v0, s3, 0, v1, s3").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![M, 2, M]);
    assert_eq!(t.wave.sgpr[3], 0);
    t.wave.sgpr[3] = M;
    t.run_asm("v_add_co_ci_u32_e64 v0, s3, 0, v1, s3").unwrap();
    assert_eq!(t.wave.sgpr[3], 0b0101);
    t.run_asm("v_add_co_u32 v0, null, v1, 4").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![3, 5, 3]);
}

#[test]
fn shifts_mask_the_amount() {
    let p = [(1, 3), (33, 3), (31, MIN), (32, MIN)];
    assert_eq!(
        bin(|t| t.run_asm("v_lshlrev_b32_e32 v0, v1, v2"), &p),
        vec![6, 6, 0, MIN]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_lshrrev_b32_e32 v0, v1, v2"), &p),
        vec![1, 1, 1, MIN]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_ashrrev_i32_e32 v0, v1, v2"), &p),
        vec![1, 1, M, MIN]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_ashrrev_i32_e32 v0, 31, v2"), &p),
        vec![0, 0, M, M]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_lshlrev_b32_e32 v0, 3, v1"), &p),
        vec![8, 264, 248, 256]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_lshrrev_b32_e32 v0, 4, v2"), &p),
        vec![0, 0, 0x0800_0000, 0x0800_0000]
    );
    let t3 = [(M, 1, 1), (1, 1, 33), (1, 2, 0)];
    assert_eq!(
        tri(|t| t.run_asm("v_add_lshl_u32 v0, v1, v2, v3"), &t3),
        vec![0, 4, 3]
    );
    assert_eq!(
        tri(|t| t.run_asm("v_lshl_add_u32 v0, v1, v2, v3"), &t3),
        vec![M, 35, 4]
    );
    assert_eq!(
        tri(|t| t.run_asm("v_lshl_or_b32 v0, v1, v2, v3"), &t3),
        vec![M, 35, 4]
    );
    assert_eq!(
        tri(|t| t.run_asm("v_lshl_or_b32 v0, v1, 33, 0x3000"), &t3),
        vec![0x3000 | !1, 0x3002, 0x3002]
    );
    assert_eq!(
        tri(|t| t.run_asm("v_lshl_add_u32 v0, v1, 1, 0x8050"), &t3),
        vec![0x804E, 0x8052, 0x8052]
    );
}

#[test]
fn lshlrev_b64() {
    let mut t = bench(&[&[0x8000_0001, 1, 5], &[1, 0x8000_0000, 0]], 0b011);
    t.wave.vgpr[4] = [1, 64 + 1, 2]
        .iter()
        .copied()
        .chain([0; 29])
        .collect::<Vec<_>>()
        .try_into()
        .unwrap();
    t.run_asm("v_lshlrev_b64 v[6:7], 1, v[1:2]").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[6], 3), vec![2, 2, POISON]);
    assert_eq!(lanes(&t.wave.vgpr[7], 3), vec![3, 0, POISON]);
    t.run_asm("v_lshlrev_b64_e32 v[6:7], v4, v[1:2]").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[6], 2), vec![2, 2]);
    assert_eq!(
        lanes(&t.wave.vgpr[7], 2),
        vec![3, 0],
        "amount 65 masks to 1"
    );
    t.wave.sgpr[sreg::EXEC_LO] = M;
    t.run_asm("v_lshlrev_b64 v[6:7], 63, v[1:2]").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[7], 3), vec![MIN, MIN, MIN]);
    assert_eq!(lanes(&t.wave.vgpr[6], 3), vec![0, 0, 0]);
}

#[test]
fn min_max_med3_signed() {
    let p = [(M, 1), (MIN, 0x7FFF_FFFF), (3, 3)];
    assert_eq!(
        bin(|t| t.run_asm("v_max_i32_e32 v0, v1, v2"), &p),
        vec![1, 0x7FFF_FFFF, 3]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_min_i32_e32 v0, v1, v2"), &p),
        vec![M, MIN, 3]
    );
    let t3 = [(M, 1, MIN), (5, 1, 3), (3, 5, 1), (1, 3, 5), (7, 7, 0)];
    assert_eq!(
        tri(|t| t.run_asm("v_min3_i32 v0, v1, v2, v3"), &t3),
        vec![MIN, 1, 1, 1, 0]
    );
    assert_eq!(
        tri(|t| t.run_asm("v_med3_i32 v0, v1, v2, v3"), &t3),
        vec![M, 3, 3, 3, 7]
    );
    let mut t = bench(&[&[0, 0x200, 50]], M);
    t.wave.sgpr[25] = 0;
    t.run_asm("v_med3_i32 v0, v1, 1, 0x100").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![1, 0x100, 50]);
    t.run_asm("v_min_i32_e32 v0, s25, v1").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![0, 0, 0]);
}

#[test]
fn bitfield_extract() {
    let t3 = [
        (0xABCD_1234, 16, 8),
        (0x8000_0000, 31, 1),
        (M, 0, 0),
        (0xF0, 4, 36),
        (0x70, 4, 3),
    ];
    assert_eq!(
        tri(|t| t.run_asm("v_bfe_u32 v0, v1, v2, v3"), &t3),
        vec![0xCD, 1, 0, 0xF, 7]
    );
    assert_eq!(
        tri(|t| t.run_asm("v_bfe_i32 v0, v1, v2, v3"), &t3),
        vec![0xFFFF_FFCD, M, 0, M, M]
    );
    assert_eq!(
        tri(|t| t.run_asm("v_bfe_u32 v0, v1, 16, 1"), &t3),
        vec![1, 0, 1, 0, 0]
    );
    assert_eq!(
        tri(|t| t.run_asm("v_bfe_i32 v0, v1, 28, 1"), &t3),
        vec![0, 0, M, 0, 0]
    );
}

#[test]
fn multiplies() {
    let p = [(M, M), (0x1_0000, 0x1_0000), (3, 5)];
    assert_eq!(
        bin(|t| t.run_asm("v_mul_lo_u32 v0, v1, v2"), &p),
        vec![1, 0, 15]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_mul_hi_u32 v0, v1, v2"), &p),
        vec![M - 1, 1, 0]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_mul_u32_u24_e32 v0, v1, v2"), &p),
        vec![0xFE00_0001, 0, 15]
    );
    assert_eq!(
        bin(|t| t.run_asm("v_mul_u32_u24_e32 v0, 0x10001, v1"), &p),
        vec![0x00FE_FFFF, 0x1_0000, 0x30003]
    );
    let t3 = [(M, M, 1), (0x0100_0002, 3, M)];
    assert_eq!(
        tri(|t| t.run_asm("v_mad_u32_u24 v0, v1, v2, v3"), &t3),
        vec![0xFE00_0002, 5]
    );
}

#[test]
fn mad_64() {
    let mut t = bench(&[&[M, 2, M], &[M, 3, 1]], 0b011);
    t.wave.sgpr[10] = M;
    t.wave.sgpr[18] = 1;
    t.wave.sgpr[19] = 0;
    // u64: 0xFFFFFFFF * 0xFFFFFFFF + 0 = 0xFFFFFFFE_00000001
    t.run_asm("v_mad_u64_u32 v[5:6], null, v1, s10, 0").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[5], 3), vec![1, 0xFFFF_FFFE, POISON]);
    assert_eq!(lanes(&t.wave.vgpr[6], 3), vec![0xFFFF_FFFE, 1, POISON]);
    // u64 carry-out: (2^32-1)^2 + (2^64 - 1) overflows 64 bits.
    t.wave.vgpr[8] = [M; LANES];
    t.wave.vgpr[9] = [M; LANES];
    t.wave.sgpr[4] = POISON;
    t.run_asm("v_mad_co_u64_u32 v[10:11], s4, v1, s10, v[8:9]")
        .unwrap();
    assert_eq!(
        t.wave.sgpr[4], 0b11,
        "both active lanes overflow; lane 2 is off"
    );
    assert_eq!(t.wave.vgpr[10][0], 0);
    assert_eq!(t.wave.vgpr[11][0], 0xFFFF_FFFE);
    // i64: -1 * -1 + 1 = 2;  2 * -1 + 1 = -1.
    t.run_asm("v_mad_i64_i32 v[5:6], null, v1, s10, s[18:19]")
        .unwrap();
    assert_eq!(lanes(&t.wave.vgpr[5], 2), vec![2, M]);
    assert_eq!(lanes(&t.wave.vgpr[6], 2), vec![0, M]);
    t.run_asm("v_mad_co_i64_i32 v[5:6], s4, s10, v2, 0")
        .unwrap();
    assert_eq!(lanes(&t.wave.vgpr[5], 2), vec![1, 0xFFFF_FFFD]);
    assert_eq!(lanes(&t.wave.vgpr[6], 2), vec![0, M]);
    assert_eq!(
        t.wave.sgpr[4], 0b10,
        "bit 64 of the 65-bit signed result: the sign"
    );
    t.run_asm("v_mad_co_u64_u32 v[5:6], null, 0xffffd000, s10, v[8:9]")
        .unwrap();
    assert_eq!(t.wave.vgpr[5][0], 0x2FFF);
    assert_eq!(t.wave.vgpr[6][0], 0xFFFF_CFFF);
}

#[test]
fn mbcnt_counts_lanes_below() {
    let mut t = bench(&[], M);
    t.run_asm("v_mbcnt_lo_u32_b32 v0, -1, 0").unwrap();
    assert_eq!(t.wave.vgpr[0], std::array::from_fn(|l| l as u32));
    t.wave.sgpr[3] = 0b1010;
    t.run_asm("v_mbcnt_lo_u32_b32 v0, s3, 10").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[0], 5), vec![10, 10, 11, 11, 12]);
}

#[test]
fn readfirstlane() {
    let mut t = bench(
        &[&std::array::from_fn::<u32, 32, _>(|l| 100 + l as u32)],
        0b1100,
    );
    t.run_asm("v_readfirstlane_b32 s16, v1").unwrap();
    assert_eq!(t.wave.sgpr[16], 102);
    t.wave.sgpr[sreg::EXEC_LO] = 0;
    t.run_asm("v_readfirstlane_b32 s16, v1").unwrap();
    assert_eq!(t.wave.sgpr[16], 100, "lane 0 when EXEC is 0");
}

#[test]
fn compares_write_masks_with_inactive_lanes_zero() {
    let a = [0, 1, M, 5, 5];
    let b = [0, 2, 1, 5, 4];
    let cases: &[(Run, u32)] = &[
        (|t| t.run_asm("v_cmp_eq_u32_e32 vcc_lo, v1, v2"), 0b01001),
        (|t| t.run_asm("v_cmp_ne_u32_e32 vcc_lo, v1, v2"), 0b10110),
        (|t| t.run_asm("v_cmp_ge_u32_e64 s0, v1, v2"), 0b11101),
        (|t| t.run_asm("v_cmp_gt_u32_e32 vcc_lo, v1, v2"), 0b10100),
        (|t| t.run_asm("v_cmp_gt_u32_e64 s0, v1, v2"), 0b10100),
        (|t| t.run_asm("v_cmp_le_u32_e32 vcc_lo, v1, v2"), 0b01011),
        (|t| t.run_asm("v_cmp_le_u32_e64 s0, v1, v2"), 0b01011),
        (|t| t.run_asm("v_cmp_lt_u32_e32 vcc_lo, v1, v2"), 0b00010),
        (|t| t.run_asm("v_cmp_lt_u32_e64 s0, v1, v2"), 0b00010),
        (|t| t.run_asm("v_cmp_ge_i32_e32 vcc_lo, v1, v2"), 0b11001),
        (|t| t.run_asm("v_cmp_gt_i32_e32 vcc_lo, v1, v2"), 0b10000),
        (|t| t.run_asm("v_cmp_gt_i32_e64 s0, v1, v2"), 0b10000),
        (|t| t.run_asm("v_cmp_le_i32_e32 vcc_lo, v1, v2"), 0b01111),
        (|t| t.run_asm("v_cmp_le_i32_e64 s0, v1, v2"), 0b01111),
        (|t| t.run_asm("v_cmp_lt_i32_e32 vcc_lo, v1, v2"), 0b00110),
        (|t| t.run_asm("v_cmp_lt_i32_e64 s0, v1, v2"), 0b00110),
        (|t| t.run_asm("v_cmp_eq_u32_e64 s0, v1, v2"), 0b01001),
    ];
    // e32 forms write vcc_lo, e64 forms s0; the other one keeps its poison.
    let mask = |t: &Bench| {
        if t.wave.vcc() != POISON {
            t.wave.vcc()
        } else {
            t.wave.sgpr[0]
        }
    };
    for (i, &(run, want)) in cases.iter().enumerate() {
        let mut t = bench(&[&a, &b], 0b11111);
        run(&mut t).unwrap();
        assert_eq!(mask(&t), want, "case {i}");
        // The same with lanes 0 and 4 off: their bits are 0.
        let mut t = bench(&[&a, &b], 0b01110);
        run(&mut t).unwrap();
        assert_eq!(mask(&t), want & 0b01110, "case {i} with lanes off");
    }
    let mut t = bench(&[&[0, 1, 2]], 0b111);
    t.run_asm("v_cmp_eq_u32_e32 vcc_lo, 0, v1").unwrap();
    assert_eq!(t.wave.vcc(), 0b001);
    t.wave.sgpr[4] = 1;
    t.run_asm("v_cmp_gt_i32_e32 vcc_lo, s4, v1").unwrap();
    assert_eq!(t.wave.vcc(), 0b001);
    t.run_asm("v_cmp_lt_i32_e64 s1, -1, v1").unwrap();
    assert_eq!(t.wave.sgpr[1], 0b111);
}

#[test]
fn cmpx_writes_exec_only() {
    let a = [0, 1, M, 5];
    let mut t = bench(&[&a], 0b1110);
    t.wave.sgpr[sreg::VCC_LO] = 0x55;
    t.run_asm("v_cmpx_gt_u32_e32 6, v1").unwrap();
    assert_eq!(
        (t.wave.exec(), t.wave.vcc()),
        (0b1010, 0x55),
        "lane 0 was off and stays off"
    );
    t.wave.sgpr[sreg::EXEC_LO] = 0b1111;
    t.run_asm("v_cmpx_eq_u32_e32 0, v1").unwrap();
    assert_eq!(t.wave.exec(), 0b0001);
    t.wave.sgpr[sreg::EXEC_LO] = 0b1111;
    t.run_asm("v_cmpx_lt_i32_e32 0, v1").unwrap();
    assert_eq!(t.wave.exec(), 0b1010);
    t.wave.sgpr[sreg::EXEC_LO] = 0b1111;
    t.run_asm("v_cmpx_lt_i32_e64 v1, 1").unwrap();
    assert_eq!(t.wave.exec(), 0b0101);
    t.wave.sgpr[sreg::EXEC_LO] = 0b1111;
    t.wave.sgpr[17] = 1;
    t.run_asm("v_cmpx_gt_i32_e64 s17, v1").unwrap();
    assert_eq!(t.wave.exec(), 0b0101);
    t.wave.sgpr[sreg::EXEC_LO] = 0b1111;
    t.run_asm("v_cmpx_gt_u32_e64 s17, v1").unwrap();
    assert_eq!(t.wave.exec(), 0b0001);
    let mut t = bench(&[&[0, 1, 0, 0], &[0, 0, 1, 0]], 0b1111);
    t.run_asm("v_cmpx_ne_u64_e32 0, v[1:2]").unwrap();
    assert_eq!(t.wave.exec(), 0b0110, "the high word counts");
}

#[test]
fn cndmask_forms() {
    let mut t = bench(&[&[1, 1, 1, 1], &[2, 2, 2, 2]], 0b0111);
    t.wave.sgpr[sreg::VCC_LO] = 0b1010;
    t.run_asm("v_cndmask_b32_e32 v0, v1, v2, vcc_lo").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[0], 4), vec![1, 2, 1, POISON]);
    t.wave.sgpr[1] = 0b0001;
    t.run_asm("v_cndmask_b32_e64 v0, 0, v1, s1").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[0], 4), vec![1, 0, 0, POISON]);
    t.run_asm("v_cndmask_b32_e64 v0, 0, 1, s1").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![1, 0, 0]);
    t.run_asm("v_cndmask_b32_e32 v0, 0x64086408, v2, vcc_lo")
        .unwrap();
    assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![0x6408_6408, 2, 0x6408_6408]);
    // neg/abs act on the sign bit: -|v| sets it, -v flips it.
    t.wave.vgpr[3] = [0x8000_0001; LANES];
    t.run_asm("v_cndmask_b32_e64 v0, -|v3|, -v3, s1").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![1, 0x8000_0001, 0x8000_0001]);
    t.run_asm("v_cndmask_b32_e64 v0, |v3|, v3, s1").unwrap();
    assert_eq!(lanes(&t.wave.vgpr[0], 3), vec![0x8000_0001, 1, 1]);
}

#[test]
fn modifiers_an_integer_op_lacks_are_faults() {
    let mut t = bench(&[&[1], &[2]], M);
    assert!(t.run_asm("v_add_nc_u32_e64 v0, -v1, v2").is_err());
    assert!(t.run_asm("v_add3_u32 v0, v1, v2, v1 clamp").is_err());
    assert!(
        t.run_asm("v_add_co_u32 v0, vcc_lo, v1").is_err(),
        "a missing operand"
    );
}
