//! f32 fused multiply-add over whole rows and tiles, through the CPU's FMA instruction when it
//! has one.
//!
//! The build has no `target-feature=+fma`, so `f32::mul_add` is a call per lane into a routine
//! that picks an implementation at run time; the emulator's hot loops (`v_fma*`, WMMA's 4096
//! FMAs per instruction) instead run in functions compiled with FMA enabled, chosen by one CPU
//! check. IEEE fusedMultiplyAdd has exactly one result for every operation whose result is not
//! NaN (one rounding of the exact value; the sign of an exact zero is fixed too), so both paths
//! give the same bits. Which NaN comes out (payload, sign) is the implementation's choice: a NaN
//! result is recomputed with `f32::mul_add`, so it is the bits it always was.

/// `a[l]·b[l] + c[l]` per lane, one rounding each. Only the lanes of `used` (the ones the caller
/// writes, normally EXEC) are exact to the bit; inactive lanes often hold the NaN poison, and
/// recomputing their NaNs would cost more than the FMAs.
pub fn lanes<const N: usize>(a: &[f32; N], b: &[f32; N], c: &[f32; N], used: u32) -> [f32; N] {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has FMA, the one feature `lanes_fma` is compiled for.
        let mut d = unsafe { lanes_fma(a, b, c) };
        for (l, x) in d.iter_mut().enumerate() {
            if x.is_nan() && used.checked_shr(l as u32).unwrap_or(0) & 1 == 1 {
                *x = a[l].mul_add(b[l], c[l]);
            }
        }
        return d;
    }
    lanes_body(a, b, c)
}

#[inline(always)]
fn lanes_body<const N: usize>(a: &[f32; N], b: &[f32; N], c: &[f32; N]) -> [f32; N] {
    let mut d = [0f32; N];
    for (((d, a), b), c) in d.iter_mut().zip(a).zip(b).zip(c) {
        *d = a.mul_add(*b, *c);
    }
    d
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn lanes_fma<const N: usize>(a: &[f32; N], b: &[f32; N], c: &[f32; N]) -> [f32; N] {
    lanes_body(a, b, c)
}

/// A 16×16×16 tile product: `d[m][n]` = `c[m][n]` plus the products `a[m][k]·b[n][k]` added
/// by sequential FMAs in k order 0..15 (see [`crate::exec::wmma`] for why that order).
pub fn tile(a: &[[f32; 16]; 16], b: &[[f32; 16]; 16], c: &[[f32; 16]; 16]) -> [[f32; 16]; 16] {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has FMA, the one feature `tile_fma` is compiled for.
        let mut d = unsafe { tile_fma(a, b, c) };
        for (m, row) in d.iter_mut().enumerate() {
            for (n, x) in row.iter_mut().enumerate() {
                if x.is_nan() {
                    *x = (0..16).fold(c[m][n], |s, k| a[m][k].mul_add(b[n][k], s));
                }
            }
        }
        return d;
    }
    tile_body(a, b, c)
}

/// The tile product with the columns innermost (each element's own chain still runs in k
/// order), so the compiler can run 16 columns' FMAs side by side.
#[inline(always)]
fn tile_body(a: &[[f32; 16]; 16], b: &[[f32; 16]; 16], c: &[[f32; 16]; 16]) -> [[f32; 16]; 16] {
    let bt: [[f32; 16]; 16] = std::array::from_fn(|k| std::array::from_fn(|n| b[n][k]));
    let mut d = *c;
    for (row, am) in d.iter_mut().zip(a) {
        for (&x, bk) in am.iter().zip(&bt) {
            for (s, &y) in row.iter_mut().zip(bk) {
                *s = x.mul_add(y, *s);
            }
        }
    }
    d
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn tile_fma(a: &[[f32; 16]; 16], b: &[[f32; 16]; 16], c: &[[f32; 16]; 16]) -> [[f32; 16]; 16] {
    tile_body(a, b, c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values whose products and sums round, overflow, underflow into denormals, cancel to ±0,
    /// and make NaN (from NaN inputs and from 0·inf, inf − inf).
    fn edges() -> Vec<f32> {
        let mut v: Vec<f32> = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            1.0 + f32::EPSILON,
            3.0e38,
            -3.0e38,
            1.0e-38,
            f32::from_bits(1),
            f32::from_bits(0x8000_0001),
            f32::from_bits(0x007F_FFFF),
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::from_bits(0x7FC0_0001),
            f32::from_bits(0xFFA0_0002),
            0.1,
            -7.5e-20,
        ]
        .to_vec();
        v.extend((0..16).map(|i| (i as f32 * 0.37).sin() * 1.0e3));
        v
    }

    #[test]
    fn lanes_match_mul_add_bit_for_bit() {
        let e = edges();
        for &x in &e {
            for &y in &e {
                let a = [x; 32];
                let b: [f32; 32] = std::array::from_fn(|l| if l % 2 == 0 { y } else { -y });
                let c: [f32; 32] = std::array::from_fn(|l| e[l % e.len()]);
                let d = lanes(&a, &b, &c, u32::MAX);
                for l in 0..32 {
                    assert_eq!(
                        d[l].to_bits(),
                        a[l].mul_add(b[l], c[l]).to_bits(),
                        "{:?}·{:?} + {:?}",
                        a[l],
                        b[l],
                        c[l]
                    );
                }
            }
        }
    }

    #[test]
    fn tile_matches_sequential_mul_add_chains_bit_for_bit() {
        let e = edges();
        let at = |i: usize| e[i % e.len()];
        for shift in 0..e.len() {
            let a: [[f32; 16]; 16] =
                std::array::from_fn(|m| std::array::from_fn(|k| at(m * 16 + k + shift)));
            let b: [[f32; 16]; 16] =
                std::array::from_fn(|n| std::array::from_fn(|k| at(n * 7 + k * 3 + shift)));
            let c: [[f32; 16]; 16] =
                std::array::from_fn(|m| std::array::from_fn(|n| at(m + n * 5)));
            let d = tile(&a, &b, &c);
            for m in 0..16 {
                for n in 0..16 {
                    let want = (0..16).fold(c[m][n], |s, k| a[m][k].mul_add(b[n][k], s));
                    assert_eq!(
                        d[m][n].to_bits(),
                        want.to_bits(),
                        "shift {shift} d[{m}][{n}]"
                    );
                }
            }
        }
    }
}
