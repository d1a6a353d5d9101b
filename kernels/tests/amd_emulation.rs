//! The emulations of the AMD builtins (`kernels/hip/amd_emulation.h`) checked on the CPU: the
//! header is plain host C++ too, so a small driver (`tests/amd_emulation/driver.cpp`) runs the very
//! code that NVRTC compiles for the emulated targets, with the 32 lanes' registers as arrays
//! instead of warp shuffles. Every expected value is computed here, independently: fp16 through
//! the `half` crate, fdot2 from the exact sum in integers, WMMA from a plain f64 matmul with the
//! register layouts written out from the ISA documents in this file (not taken from the header or
//! the kernels).
//!
//! Needs a host C++ compiler (`c++`, else clang++-19 of the AMD toolchain): without one this is a
//! loud skip, a failure under `W4A16_REQUIRE=amd-toolchain`.

use half::{bf16, f16};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Loud skip, or a failure when `W4A16_REQUIRE` names `amd-toolchain`.
fn skip_or_fail(reason: &str) {
    w4a16_require::skip_or_fail(&w4a16_require::Skip {
        requirement: w4a16_require::Requirement::AmdToolchain,
        reason: reason.to_owned(),
    });
}

/// The compiled driver, once per test binary; `Err` is the reason to skip.
fn driver() -> &'static Result<PathBuf, String> {
    static DRIVER: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DRIVER.get_or_init(|| {
        let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let src = here.join("tests/amd_emulation/driver.cpp");
        let out = std::env::temp_dir().join(format!("w4a16-amd-emulation-{}", std::process::id()));
        let mut tried = Vec::new();
        for cxx in ["c++", "clang++-19", "/usr/lib/llvm-19/bin/clang++"] {
            let res = Command::new(cxx)
                .args(["-std=c++17", "-O1", "-ffp-contract=off", "-Wall", "-Werror"])
                .arg("-Wno-unknown-pragmas")
                .arg(format!("-I{}", here.join("hip").display()))
                .arg(&src)
                .arg("-o")
                .arg(&out)
                .output();
            match res {
                Ok(o) if o.status.success() => return Ok(out),
                // A compiler that runs and rejects the code is a failure, not a skip.
                Ok(o) => panic!(
                    "{cxx} could not compile {}:\n{}",
                    src.display(),
                    String::from_utf8_lossy(&o.stderr)
                ),
                Err(e) => tried.push(format!("{cxx}: {e}")),
            }
        }
        Err(format!("no host C++ compiler ({})", tried.join("; ")))
    })
}

/// Runs the driver over `commands` (one per line); one output line per command.
fn run(commands: &[String]) -> Option<Vec<String>> {
    let exe = match driver() {
        Ok(p) => p,
        Err(reason) => {
            skip_or_fail(reason);
            return None;
        }
    };
    let mut child = Command::new(exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running the emulation driver");
    let input = commands.join("\n") + "\n";
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(
        out.status.success(),
        "driver failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), commands.len());
    Some(lines)
}

fn words(line: &str) -> Vec<u32> {
    line.split_whitespace()
        .map(|w| u32::from_str_radix(w, 16).unwrap())
        .collect()
}

/// splitmix64: deterministic test data.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn u32(&mut self) -> u32 {
        self.next() as u32
    }
    /// A finite fp16 bit pattern (subnormals and zeros included).
    fn finite_f16(&mut self) -> u16 {
        loop {
            let h = self.next() as u16;
            if h & 0x7c00 != 0x7c00 {
                return h;
            }
        }
    }
}

fn f16_is_nan(h: u16) -> bool {
    h & 0x7fff > 0x7c00
}

// ---------------------------------------------------------------------------------------------
// Conversions and packed fp16 arithmetic.

#[test]
fn f16_to_f32_is_exact_on_every_pattern_and_quiets_nan() {
    let cmds: Vec<String> = (0..=u16::MAX)
        .map(|h| format!("f16_to_f32 {h:x}"))
        .collect();
    let Some(out) = run(&cmds) else { return };
    for (h, line) in (0..=u16::MAX).zip(out) {
        let got = words(&line)[0];
        if f16_is_nan(h) {
            let f = f32::from_bits(got);
            assert!(f.is_nan(), "{h:04x} -> {got:08x}");
            assert_eq!(got & 0x0040_0000, 0x0040_0000, "{h:04x}: not quiet");
            assert_eq!(got >> 31, u32::from(h >> 15), "{h:04x}: sign");
        } else {
            assert_eq!(got, f16::from_bits(h).to_f32().to_bits(), "{h:04x}");
        }
    }
}

#[test]
fn f32_to_f16_rounds_to_nearest_even_keeps_subnormals_and_quiets_nan() {
    let mut rng = Rng(1);
    let mut inputs: Vec<u32> = (0..200_000).map(|_| rng.u32()).collect();
    // Ties and near-ties at fp16 normal and subnormal spacing, overflow edge, zeros, infinities.
    for v in [
        1.0f32 + 2f32.powi(-11),               // tie, even below: 1.0
        1.0 + 3.0 * 2f32.powi(-11),            // tie, odd below: up
        1.0 + 2f32.powi(-11) + 2f32.powi(-20), // above the tie
        65504.0,
        65519.99,
        65520.0,              // tie to 2^16: Inf
        2f32.powi(-25),       // half the smallest subnormal: tie to 0
        3.0 * 2f32.powi(-25), // 1.5 ulp: up to 2 ulp
        2f32.powi(-24),
        6.0e-8,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE,
        1.0e-40, // fp32 denormal
    ] {
        inputs.push(v.to_bits());
        inputs.push((-v).to_bits());
    }
    inputs.extend([0x7f80_0001, 0xffc0_1234, 0x7fbf_ffff]); // NaNs, signalling and quiet
    let cmds: Vec<String> = inputs.iter().map(|u| format!("f32_to_f16 {u:x}")).collect();
    let Some(out) = run(&cmds) else { return };
    for (u, line) in inputs.iter().zip(out) {
        let got = words(&line)[0] as u16;
        let f = f32::from_bits(*u);
        if f.is_nan() {
            assert!(f16_is_nan(got) && got & 0x0200 != 0, "{u:08x} -> {got:04x}");
            assert_eq!(got >> 15, (*u >> 31) as u16, "{u:08x}: sign");
        } else {
            assert_eq!(got, f16::from_f32(f).to_bits(), "{f:e} ({u:08x})");
        }
    }
}

/// One rounding of the exact f64 result to fp16 (the f16 difference or product is exact in f64).
fn f16_op_reference(a: u16, b: u16, mul: bool) -> Option<u16> {
    let (x, y) = (f16::from_bits(a).to_f64(), f16::from_bits(b).to_f64());
    let r = if mul { x * y } else { x - y };
    (!r.is_nan()).then(|| f16::from_f64(r).to_bits())
}

#[test]
fn packed_f16_sub_and_mul_round_each_half_once() {
    let mut rng = Rng(2);
    let mut pairs: Vec<(u32, u32)> = (0..100_000).map(|_| (rng.u32(), rng.u32())).collect();
    let specials: [u16; 10] = [
        0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7d00, 0x0001, 0x83ff, 0x7bff, 0x3c00,
    ];
    for &x in &specials {
        for &y in &specials {
            pairs.push((
                u32::from(x) | u32::from(y) << 16,
                u32::from(y) | u32::from(x) << 16,
            ));
        }
    }
    let mut cmds = Vec::new();
    for (a, b) in &pairs {
        cmds.push(format!("pk_sub {a:x} {b:x}"));
        cmds.push(format!("pk_mul {a:x} {b:x}"));
    }
    let Some(out) = run(&cmds) else { return };
    for (i, (a, b)) in pairs.iter().enumerate() {
        for (mul, line) in [(false, &out[2 * i]), (true, &out[2 * i + 1])] {
            let got = words(line)[0];
            for half in 0..2 {
                let (x, y) = ((a >> (16 * half)) as u16, (b >> (16 * half)) as u16);
                let g = (got >> (16 * half)) as u16;
                let what = if mul { "mul" } else { "sub" };
                match f16_op_reference(x, y, mul) {
                    Some(r) if !f16_is_nan(x) && !f16_is_nan(y) => {
                        assert_eq!(g, r, "{what} {x:04x} {y:04x}")
                    }
                    _ => {
                        assert!(
                            f16_is_nan(g) && g & 0x0200 != 0,
                            "{what} {x:04x} {y:04x} -> {g:04x}"
                        );
                        // A NaN operand comes back quieted (the first one).
                        let first = if f16_is_nan(x) {
                            Some(x)
                        } else if f16_is_nan(y) {
                            Some(y)
                        } else {
                            None
                        };
                        if let Some(n) = first {
                            assert_eq!(g, n | 0x0200, "{what} {x:04x} {y:04x}");
                        }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// v_dot2_f32_f16

/// An exact binary value: sign, integer significand, exponent (value = ±m · 2^e).
fn exact(x: f64) -> (bool, u64, i32) {
    if x == 0.0 {
        return (x.is_sign_negative(), 0, 0);
    }
    let b = x.to_bits();
    let e = ((b >> 52) & 0x7ff) as i32;
    let m = b & ((1 << 52) - 1);
    let (m, e) = if e == 0 {
        (m, -1074)
    } else {
        (m | 1 << 52, e - 1075)
    };
    (x < 0.0, m, e)
}

/// Rounds ±n · 2^e (n exact, any size) to fp32 to nearest even; fp32 subnormal results are
/// flushed to zero of the result's sign (the documented fdot2 behaviour).
fn round_to_f32_flushed(neg: bool, n: u128, e: i32) -> f32 {
    let sign = if neg { -1.0f64 } else { 1.0 };
    if n == 0 {
        return 0.0;
    }
    let len = 128 - n.leading_zeros() as i32;
    // The quantum of the result: 24 significant bits, but not below 2^-149.
    let top = e + len - 1;
    let q = (top - 23).max(-149);
    let shift = q - e;
    let (mut m, exp) = if shift <= 0 {
        (n << (-shift) as u32, q)
    } else {
        let m = n >> shift as u32;
        let rem = n & ((1u128 << shift as u32) - 1);
        let half = 1u128 << (shift - 1) as u32;
        let up = rem > half || (rem == half && m & 1 == 1);
        (m + u128::from(up), q)
    };
    if m == 0 {
        return (sign * 0.0) as f32;
    }
    if m >= 1 << 24 {
        m >>= 1;
        return finish(sign, m, exp + 1);
    }
    finish(sign, m, exp)
}

fn finish(sign: f64, m: u128, exp: i32) -> f32 {
    let v = sign * (m as f64) * 2f64.powi(exp);
    let f = v as f32; // exact: m has at most 24 bits
    assert_eq!(f as f64, v);
    if f != 0.0 && f.abs() < f32::MIN_POSITIVE {
        return if f < 0.0 { -0.0 } else { 0.0 };
    }
    f
}

/// fdot2's documented semantics computed from the exact sum in integers (None: outside the range
/// this reference handles exactly, the caller skips such data).
fn fdot2_reference(a: u32, b: u32, c: f32) -> Option<f32> {
    let h = |x: u32, i: u32| f16::from_bits((x >> (16 * i)) as u16).to_f64();
    let c = if c.is_subnormal() {
        if c < 0.0 { -0.0 } else { 0.0 }
    } else {
        c
    };
    let terms = [h(a, 0) * h(b, 0), h(a, 1) * h(b, 1), c as f64];
    if terms.iter().any(|t| t.is_nan()) || c.is_nan() {
        return Some(f32::NAN);
    }
    if terms.iter().any(|t| t.is_infinite()) {
        let s: f64 = terms.iter().sum();
        return Some(if s.is_nan() { f32::NAN } else { s as f32 });
    }
    if terms.iter().all(|t| *t == 0.0) {
        let all_neg = terms.iter().all(|t| t.is_sign_negative());
        return Some(if all_neg { -0.0 } else { 0.0 });
    }
    let ex: Vec<(bool, u64, i32)> = terms.iter().map(|&t| exact(t)).collect();
    let emin = ex.iter().filter(|t| t.1 != 0).map(|t| t.2).min().unwrap();
    let mut sum: i128 = 0;
    for (neg, m, e) in ex {
        if m == 0 {
            continue;
        }
        let sh = e - emin;
        if sh + 54 > 125 {
            return None;
        }
        let v = (m as i128) << sh;
        sum += if neg { -v } else { v };
    }
    if sum == 0 {
        return Some(0.0); // an exact cancellation: +0
    }
    Some(round_to_f32_flushed(sum < 0, sum.unsigned_abs(), emin))
}

#[test]
fn fdot2_rounds_the_exact_sum_once_and_handles_special_values() {
    let mut rng = Rng(3);
    let mut cases: Vec<(u32, u32, u32)> = Vec::new();
    for _ in 0..100_000 {
        let a = u32::from(rng.finite_f16()) | u32::from(rng.finite_f16()) << 16;
        let b = u32::from(rng.finite_f16()) | u32::from(rng.finite_f16()) << 16;
        // C from 2^-40 to 2^40 (and zero), so the exact sum fits the integer reference.
        let c = if rng.next().is_multiple_of(8) {
            0
        } else {
            let e = (rng.next() % 81) as u32 + 127 - 40;
            (rng.u32() & 0x807f_ffff) | e << 23
        };
        cases.push((a, b, c));
    }
    let one = 0x3c00u32;
    let tiny = 0x0001u32; // 2^-24
    let f = |x: f32| x.to_bits();
    cases.extend([
        // 1 + 2^-24 is a tie at 1.0's spacing: even, 1.0 ...
        (one, tiny, f(1.0)),
        // ... but 2^-48 more breaks the tie upwards: only one rounding of the whole sum sees it
        // (two roundings in sequence would give 1.0).
        (one | tiny << 16, tiny | tiny << 16, f(1.0)),
        // cancellation to an exact zero of nonzero terms: +0
        (one | one << 16, one | 0xbc00 << 16, f(0.0)),
        (one, 0xbc00, f(1.0)),
        // zeros: every term -0 gives -0, otherwise +0
        (0x8000 | 0x8000 << 16, 0x0000, f(-0.0)),
        (0x8000 | 0x8000 << 16, 0x0000, f(0.0)),
        (0x0000, 0x0000, f(-0.0)),
        // fp32 denormal C is flushed (keeping its sign), products stay
        (0, 0, 0x0000_0001),
        (0x8000, 0, 0x8000_0001),
        (tiny, tiny, 0x0000_0001),
        // a result in the fp32 denormal range is flushed: 2^-48 - 2^-48·(1 - 2^-23) ...
        // (products cannot be that small; C near the bottom of the normals can)
        (tiny, 0x8001, f32::MIN_POSITIVE.to_bits()),
        // fp16 subnormal operands are honoured
        (0x03ff | 0x0200 << 16, 0x3c00 | 0x0200 << 16, f(0.5)),
        // infinities and NaN
        (0x7c00, one, f(1.0)),
        (0x7c00 | 0x7c00 << 16, one | 0xbc00 << 16, f(0.0)),
        (0x7c00, 0x0000, f(1.0)),
        (one, one, f(f32::INFINITY)),
        (0x7c00, one, f(f32::NEG_INFINITY)),
        (0x7e00, one, f(1.0)),
        (one, one, 0x7fa0_0000),
        // the largest products with a huge C: no overflow, C's spacing swallows them
        (0x7bff | 0x7bff << 16, 0x7bff | 0x7bff << 16, f(f32::MAX)),
        (0x7bff, 0x7bff, f(-f32::MAX)),
    ]);
    let cmds: Vec<String> = cases
        .iter()
        .map(|(a, b, c)| format!("fdot2 {a:x} {b:x} {c:x}"))
        .collect();
    let Some(out) = run(&cmds) else { return };
    let mut checked = 0;
    for ((a, b, c), line) in cases.iter().zip(out) {
        let got = f32::from_bits(words(&line)[0]);
        let want = match fdot2_reference(*a, *b, f32::from_bits(*c)) {
            Some(w) => w,
            None if f32::from_bits(*c).abs() >= 2f32.powi(100) => {
                // C's spacing dwarfs the products (at most 2^33 together): the sum is C.
                f32::from_bits(*c)
            }
            None => continue,
        };
        checked += 1;
        let ctx = format!("fdot2({a:08x}, {b:08x}, {c:08x})");
        if want.is_nan() {
            assert!(got.is_nan(), "{ctx}: {got:e}, want NaN");
        } else {
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{ctx}: {got:e}, want {want:e}"
            );
        }
    }
    assert!(checked > 100_000, "{checked} cases checked");
    // The two rounding cases above are what sets one rounding apart from an fma chain.
    assert_eq!(
        fdot2_reference(one | tiny << 16, tiny | tiny << 16, 1.0),
        Some(1.0 + f32::EPSILON)
    );
}

// ---------------------------------------------------------------------------------------------
// Lane operations

#[test]
fn mbcnt_lo_counts_the_mask_bits_below_each_lane() {
    let mut rng = Rng(4);
    let mut cases = vec![
        (u32::MAX, 0u32),
        (0, 7),
        (0x8000_0001, 0),
        (0x5555_5555, 100),
    ];
    cases.extend((0..50).map(|_| (rng.u32(), rng.u32() % 64)));
    let mut cmds = Vec::new();
    for (mask, acc) in &cases {
        for lane in 0..32 {
            cmds.push(format!("mbcnt {mask:x} {acc:x} {lane:x}"));
        }
    }
    let Some(out) = run(&cmds) else { return };
    for (i, (mask, acc)) in cases.iter().enumerate() {
        for lane in 0..32u64 {
            let below = (u64::from(*mask) & ((1u64 << lane) - 1)).count_ones();
            assert_eq!(
                words(&out[i * 32 + lane as usize])[0],
                below + acc,
                "{mask:08x} lane {lane}"
            );
        }
    }
    // lane_id() = mbcnt_lo(~0, 0) is the lane itself.
    for (lane, line) in out.iter().take(32).enumerate() {
        assert_eq!(words(line)[0], lane as u32);
    }
}

#[test]
fn ds_bpermute_reads_the_lane_the_address_names_and_zero_from_inactive_lanes() {
    let mut rng = Rng(5);
    let mut cases: Vec<(u32, Vec<u32>)> = Vec::new();
    // The xor butterflies of the skinny reduction, all lanes active.
    for mask in [1u32, 2, 16] {
        cases.push((u32::MAX, (0..32).map(|l| (l ^ mask) << 2).collect()));
    }
    // Random addresses (bits above 6 and below 2 must not matter), random EXEC.
    for _ in 0..40 {
        let exec = if rng.next().is_multiple_of(2) {
            u32::MAX
        } else {
            rng.u32()
        };
        cases.push((exec, (0..32).map(|_| rng.u32()).collect()));
    }
    let data: Vec<u32> = (0..32).map(|l| 0xd000_0000 | (l * 3 + 1)).collect();
    let cmds: Vec<String> = cases
        .iter()
        .map(|(exec, addr)| {
            let a: Vec<String> = addr.iter().map(|v| format!("{v:x}")).collect();
            let d: Vec<String> = data.iter().map(|v| format!("{v:x}")).collect();
            format!("bpermute {exec:x} {} {}", a.join(" "), d.join(" "))
        })
        .collect();
    let Some(out) = run(&cmds) else { return };
    for ((exec, addr), line) in cases.iter().zip(out) {
        let got = words(&line);
        for lane in 0..32 {
            if exec >> lane & 1 == 0 {
                continue; // an inactive lane writes nothing
            }
            let src = ((addr[lane] >> 2) & 31) as usize;
            let want = if exec >> src & 1 == 1 { data[src] } else { 0 };
            assert_eq!(
                got[lane], want,
                "exec {exec:08x} lane {lane} addr {:08x}",
                addr[lane]
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// WMMA 16x16x16, wave32. The register layouts, written out here from the ISA documents:
//  gfx11 (RDNA3 ISA; GPUOpen "How to accelerate AI applications on RDNA 3 using WMMA"):
//   A: lane l, VGPR j = A[l%16][2j] | A[l%16][2j+1] << 16 (lanes 16-31 replicate 0-15)
//   B: lane l, VGPR j = B[2j][l%16] | B[2j+1][l%16] << 16 (replicated likewise)
//   C/D: lane l, VGPR r = element (2r + l/16, l%16)
//  gfx12 (RDNA4 ISA; GPUOpen "Using the matrix cores of AMD RDNA 4 architecture GPUs"):
//   A: lane l, VGPR j = A[l%16][8(l/16)+2j] | A[l%16][8(l/16)+2j+1] << 16
//   B: lane l, VGPR j = B[8(l/16)+2j][l%16] | ... << 16
//   C/D: lane l, VGPR r = element (r + 8(l/16), l%16)

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Gfx {
    G11,
    G12,
}

impl Gfx {
    fn regs(self) -> usize {
        match self {
            Gfx::G11 => 8,
            Gfx::G12 => 4,
        }
    }
    fn number(self) -> u32 {
        match self {
            Gfx::G11 => 11,
            Gfx::G12 => 12,
        }
    }
    /// (m, k) of the two halves of A's VGPR j in lane l (B: (n, k) with B[k][n]).
    fn ab_at(self, lane: usize, j: usize) -> (usize, usize) {
        match self {
            Gfx::G11 => (lane % 16, 2 * j),
            Gfx::G12 => (lane % 16, 8 * (lane / 16) + 2 * j),
        }
    }
    /// (m, n) of accumulator VGPR r in lane l.
    fn cd_at(self, lane: usize, r: usize) -> (usize, usize) {
        match self {
            Gfx::G11 => (2 * r + lane / 16, lane % 16),
            Gfx::G12 => (r + 8 * (lane / 16), lane % 16),
        }
    }
}

type Mat = [[f64; 16]; 16];

fn bits16(v: f64, bf: bool) -> u32 {
    u32::from(if bf {
        bf16::from_f64(v).to_bits()
    } else {
        f16::from_f64(v).to_bits()
    })
}

/// A as m x k, B as k x n, C as m x n, packed for `gfx`.
fn pack(gfx: Gfx, bf: bool, a: &Mat, b: &Mat, c: &Mat) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let r = gfx.regs();
    let (mut fa, mut fb, mut fc) = (vec![0; 32 * r], vec![0; 32 * r], vec![0; 32 * 8]);
    for lane in 0..32 {
        for j in 0..r {
            let (row, k) = gfx.ab_at(lane, j);
            fa[lane * r + j] = bits16(a[row][k], bf) | bits16(a[row][k + 1], bf) << 16;
            fb[lane * r + j] = bits16(b[k][row], bf) | bits16(b[k + 1][row], bf) << 16;
        }
        for v in 0..8 {
            let (m, n) = gfx.cd_at(lane, v);
            fc[lane * 8 + v] = (c[m][n] as f32).to_bits();
        }
    }
    (fa, fb, fc)
}

fn wmma_cmd(gfx: Gfx, bf: bool, fa: &[u32], fb: &[u32], fc: &[u32]) -> String {
    let hex = |v: &[u32]| {
        v.iter()
            .map(|x| format!("{x:x}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        "wmma {:x} {} {} {} {}",
        gfx.number(),
        u32::from(bf),
        hex(fa),
        hex(fb),
        hex(fc)
    )
}

/// D read back through `layout` (the layout the caller believes in).
fn unpack_d(layout: Gfx, line: &str) -> [[f32; 16]; 16] {
    let w = words(line);
    assert_eq!(w.len(), 256);
    let mut d = [[f32::NAN; 16]; 16];
    for lane in 0..32 {
        for r in 0..8 {
            let (m, n) = layout.cd_at(lane, r);
            d[m][n] = f32::from_bits(w[lane * 8 + r]);
        }
    }
    d
}

fn matmul(a: &Mat, b: &Mat, c: &Mat) -> Mat {
    let mut d = *c;
    for m in 0..16 {
        for n in 0..16 {
            for k in 0..16 {
                d[m][n] += a[m][k] * b[k][n];
            }
        }
    }
    d
}

/// Small integers (exact in fp16, bf16 and every fp32 partial sum) or realistic reals.
fn matrices(rng: &mut Rng, integers: bool, bf: bool) -> (Mat, Mat, Mat) {
    let mut matrix = |scale: f64| {
        let mut m = [[0.0; 16]; 16];
        for row in m.iter_mut() {
            for v in row.iter_mut() {
                let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
                *v = if integers {
                    (u * 8.0).round()
                } else {
                    u * scale
                };
                // representable in the input type
                *v = if bf {
                    bf16::from_f64(*v).to_f64()
                } else {
                    f16::from_f64(*v).to_f64()
                };
            }
        }
        m
    };
    let (a, b) = (matrix(2.0), matrix(2.0));
    let mut c = matrix(30.0);
    for row in c.iter_mut() {
        for v in row.iter_mut() {
            *v = (*v as f32) as f64;
        }
    }
    (a, b, c)
}

#[test]
fn wmma_gfx11_and_gfx12_compute_the_matmul_in_their_own_layouts() {
    let mut rng = Rng(6);
    let mut cases = Vec::new();
    for gfx in [Gfx::G11, Gfx::G12] {
        for bf in [false, true] {
            for integers in [true, false] {
                for _ in 0..4 {
                    cases.push((gfx, bf, integers, matrices(&mut rng, integers, bf)));
                }
            }
        }
    }
    let cmds: Vec<String> = cases
        .iter()
        .map(|(gfx, bf, _, (a, b, c))| {
            let (fa, fb, fc) = pack(*gfx, *bf, a, b, c);
            wmma_cmd(*gfx, *bf, &fa, &fb, &fc)
        })
        .collect();
    let Some(out) = run(&cmds) else { return };
    for ((gfx, bf, integers, (a, b, c)), line) in cases.iter().zip(out) {
        let d = unpack_d(*gfx, &line);
        let want = matmul(a, b, c);
        for m in 0..16 {
            for n in 0..16 {
                let ctx = format!("{gfx:?} bf16={bf} integers={integers} D[{m}][{n}]");
                if *integers {
                    assert_eq!(d[m][n] as f64, want[m][n], "{ctx}");
                } else {
                    // 16 fp32 roundings of partial sums bounded by sum |terms|.
                    let mag: f64 =
                        c[m][n].abs() + (0..16).map(|k| (a[m][k] * b[k][n]).abs()).sum::<f64>();
                    let bound = 17.0 * f32::EPSILON as f64 / 2.0 * mag;
                    assert!(
                        (d[m][n] as f64 - want[m][n]).abs() <= bound,
                        "{ctx}: {} vs {}",
                        d[m][n],
                        want[m][n]
                    );
                }
            }
        }
    }
}

#[test]
fn wmma_gfx11_poisons_the_wave_when_lanes_16_to_31_do_not_replicate() {
    let mut rng = Rng(7);
    let (a, b, c) = matrices(&mut rng, true, false);
    let (fa, fb, fc) = pack(Gfx::G11, false, &a, &b, &c);
    let mut cmds = vec![wmma_cmd(Gfx::G11, false, &fa, &fb, &fc)];
    // One differing register in one upper lane, of A and then of B; and lanes 16-31 zeroed, the
    // way a kernel that loads only lanes 0-15 would leave them.
    let mut bad_a = fa.clone();
    bad_a[20 * 8 + 3] ^= 0x0001;
    cmds.push(wmma_cmd(Gfx::G11, false, &bad_a, &fb, &fc));
    let mut bad_b = fb.clone();
    bad_b[31 * 8 + 7] ^= 0x8000_0000;
    cmds.push(wmma_cmd(Gfx::G11, false, &fa, &bad_b, &fc));
    let mut half_a = fa.clone();
    half_a[16 * 8..].fill(0);
    cmds.push(wmma_cmd(Gfx::G11, true, &half_a, &fb, &fc));
    let Some(out) = run(&cmds) else { return };
    let good = unpack_d(Gfx::G11, &out[0]);
    assert!(good.iter().flatten().all(|v| v.is_finite()));
    for (i, line) in out.iter().enumerate().skip(1) {
        let w = words(line);
        assert!(
            w.iter().all(|&x| f32::from_bits(x).is_nan()),
            "case {i}: every lane's D must be NaN"
        );
    }
}

#[test]
fn the_gfx11_and_gfx12_layouts_are_not_interchangeable() {
    let mut rng = Rng(8);
    let (a, b, c) = matrices(&mut rng, true, false);
    let want = matmul(&a, &b, &c);
    let differs =
        |d: &[[f32; 16]; 16]| (0..256).any(|i| d[i / 16][i % 16] as f64 != want[i / 16][i % 16]);
    let (a11, b11, c11) = pack(Gfx::G11, false, &a, &b, &c);
    let (a12, b12, c12) = pack(Gfx::G12, false, &a, &b, &c);
    // gfx12 fragments (4 VGPRs, k split over the half-waves) widened to gfx11's 8 VGPRs.
    let widen = |f: &[u32]| -> Vec<u32> {
        (0..32)
            .flat_map(|l| (0..8).map(move |j| if j < 4 { f[l * 4 + j] } else { 0 }))
            .collect()
    };
    // gfx11 fragments cut to gfx12's 4 VGPRs (the upper half-wave then repeats k 0..7).
    let cut = |f: &[u32]| -> Vec<u32> {
        (0..32)
            .flat_map(|l| (0..4).map(move |j| f[l * 8 + j]))
            .collect()
    };
    let cmds = vec![
        wmma_cmd(Gfx::G11, false, &widen(&a12), &widen(&b12), &c11),
        wmma_cmd(Gfx::G12, false, &cut(&a11), &cut(&b11), &c12),
        wmma_cmd(Gfx::G11, false, &a11, &b11, &c11),
        wmma_cmd(Gfx::G12, false, &a12, &b12, &c12),
    ];
    let Some(out) = run(&cmds) else { return };
    assert!(
        differs(&unpack_d(Gfx::G11, &out[0])),
        "gfx12 fragments passed the gfx11 emulation"
    );
    assert!(
        differs(&unpack_d(Gfx::G12, &out[1])),
        "gfx11 fragments passed the gfx12 emulation"
    );
    // Right fragments, but the accumulators read with the other target's layout: wrong.
    assert!(!differs(&unpack_d(Gfx::G11, &out[2])));
    assert!(!differs(&unpack_d(Gfx::G12, &out[3])));
    assert!(
        differs(&unpack_d(Gfx::G12, &out[2])),
        "gfx11 D read as gfx12"
    );
    assert!(
        differs(&unpack_d(Gfx::G11, &out[3])),
        "gfx12 D read as gfx11"
    );
    // And C given in the other layout is not what the emulation adds.
    let swapped_c = wmma_cmd(Gfx::G11, false, &a11, &b11, &c12);
    let Some(out) = run(&[swapped_c]) else { return };
    assert!(differs(&unpack_d(Gfx::G11, &out[0])));
}
