//! The few statistics perf judging needs: medians and quartiles of a sample set, and the
//! Mann–Whitney U test that tells a shift from noise without assuming the times are normal.

use serde::{Deserialize, Serialize};

/// Median and quartiles of a sample set (linear interpolation between order statistics, as
/// numpy's default `percentile`), so the spread can be judged beside the centre.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub median: f64,
    pub q1: f64,
    pub q3: f64,
}

impl Summary {
    /// `None` for an empty set or one holding a NaN or an infinity: such a set has no centre.
    pub fn of(xs: &[f64]) -> Option<Summary> {
        if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let mut sorted = xs.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(Summary {
            median: quantile(&sorted, 0.5),
            q1: quantile(&sorted, 0.25),
            q3: quantile(&sorted, 0.75),
        })
    }

    /// Interquartile range over the median: the spread as a fraction of the value, comparable
    /// across cases of any size. Infinite when the median is not positive (nothing to divide by).
    pub fn iqr_rel(&self) -> f64 {
        if self.median > 0.0 {
            (self.q3 - self.q1) / self.median
        } else {
            f64::INFINITY
        }
    }
}

/// The `q`-quantile of an ascending, non-empty slice, interpolating linearly between neighbours.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Median of a sample set, `None` where [`Summary::of`] is.
pub fn median(xs: &[f64]) -> Option<f64> {
    Summary::of(xs).map(|s| s.median)
}

/// Result of a two-sided Mann–Whitney U test of `a` against `b`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MannWhitney {
    /// U of `a`: the number of (a, b) pairs with a > b, ties counting one half (scipy's statistic).
    pub u: f64,
    /// Standard score of `u` with continuity and tie correction; positive when `a` tends larger.
    pub z: f64,
    /// Two-sided p-value from the normal approximation.
    pub p_two_sided: f64,
}

/// Two-sided Mann–Whitney U test, normal approximation with continuity and tie correction (what
/// `scipy.stats.mannwhitneyu(a, b, method="asymptotic")` computes). `None` if either side is
/// empty or holds a NaN. When every value is tied there is no evidence of a shift: z = 0, p = 1.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    if a.is_empty() || b.is_empty() || a.iter().chain(b).any(|x| x.is_nan()) {
        return None;
    }
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    let n = n1 + n2;
    // Pool both sides, remembering which side each value came from, and rank with ties averaged.
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < pooled.len() {
        let mut j = i;
        while j + 1 < pooled.len() && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        let avg_rank = (i + j) as f64 / 2.0 + 1.0;
        let tied = (j - i + 1) as f64;
        tie_term += tied * tied * tied - tied;
        rank_sum_a += avg_rank * pooled[i..=j].iter().filter(|p| p.1).count() as f64;
        i = j + 1;
    }
    let u = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let var = n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    let (z, p) = if var > 0.0 {
        let d = u - mean;
        let z = d.signum() * (d.abs() - 0.5).max(0.0) / var.sqrt();
        (z, erfc(z.abs() / std::f64::consts::SQRT_2).min(1.0))
    } else {
        (0.0, 1.0)
    };
    Some(MannWhitney {
        u,
        z,
        p_two_sided: p,
    })
}

/// Complementary error function, Chebyshev fit with fractional error below 1.2e-7 everywhere
/// (Numerical Recipes `erfcc`): plenty for p-values compared against 0.05.
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(f64::MIN_POSITIVE)
    }

    #[test]
    fn erfc_matches_known_values() {
        // Reference: Python's math.erfc (correctly rounded libm values).
        for (x, want) in [
            (0.0, 1.0),
            (0.5, 0.479_500_122_186_953_5),
            (1.0, 0.157_299_207_050_285_13),
            (2.0, 0.004_677_734_981_047_265),
            (3.0, 2.209_049_699_858_543_8e-5),
            (5.0, 1.537_459_794_428_035e-12),
            (-1.0, 1.842_700_792_949_715),
        ] {
            let got = erfc(x);
            assert!(close(got, want, 2e-7), "erfc({x}) = {got}, want {want}");
        }
    }

    #[test]
    fn summary_interpolates_quartiles_like_numpy() {
        // numpy.percentile([1, 2, 3, 4], [25, 50, 75]) = [1.75, 2.5, 3.25].
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.q1, s.median, s.q3), (1.75, 2.5, 3.25));
        assert!(close(s.iqr_rel(), 1.5 / 2.5, 1e-12));
        // Odd count: the middle element is the median.
        let s = Summary::of(&[10.0, 30.0, 20.0, 50.0, 40.0]).unwrap();
        assert_eq!((s.q1, s.median, s.q3), (20.0, 30.0, 40.0));
        let one = Summary::of(&[7.0]).unwrap();
        assert_eq!(
            (one.q1, one.median, one.q3, one.iqr_rel()),
            (7.0, 7.0, 7.0, 0.0)
        );
    }

    #[test]
    fn summary_refuses_empty_and_non_finite_sets() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
        assert_eq!(Summary::of(&[1.0, f64::INFINITY]), None);
        assert_eq!(median(&[]), None);
        let zero = Summary::of(&[0.0, 0.0]).unwrap();
        assert_eq!(zero.iqr_rel(), f64::INFINITY);
    }

    // Reference values for the tests below: the formula of
    // scipy.stats.mannwhitneyu(a, b, method="asymptotic") (continuity and tie corrected),
    // evaluated in Python with math.erfc; p for a = 1..=10, b = 11..=20 is scipy's 0.000182671791.

    #[test]
    fn mann_whitney_fully_separated_sets() {
        let a: Vec<f64> = (1..=10).map(f64::from).collect();
        let b: Vec<f64> = (11..=20).map(f64::from).collect();
        let r = mann_whitney(&a, &b).unwrap();
        assert_eq!(r.u, 0.0);
        assert!(close(r.z, -3.741_848_282_791_349_5, 1e-9), "{r:?}");
        assert!(
            close(r.p_two_sided, 1.826_717_911_095_504e-4, 1e-6),
            "{r:?}"
        );
        // Swapping the sides mirrors U and z and keeps p.
        let s = mann_whitney(&b, &a).unwrap();
        assert_eq!(s.u, 100.0);
        assert!(close(s.z, -r.z, 1e-12));
        assert!(close(s.p_two_sided, r.p_two_sided, 1e-12));
    }

    #[test]
    fn mann_whitney_with_ties() {
        // Ties across the sides (2 and 3 appear in both): U = 6, z = -1.58089020, p = 0.11390314.
        let r = mann_whitney(&[1.0, 2.0, 2.0, 3.0, 4.0], &[2.0, 3.0, 3.0, 5.0, 6.0, 7.0]).unwrap();
        assert_eq!(r.u, 6.0);
        assert!(close(r.z, -1.580_890_203_802_271_4, 1e-9), "{r:?}");
        assert!(
            close(r.p_two_sided, 0.113_903_144_588_530_65, 1e-6),
            "{r:?}"
        );
    }

    #[test]
    fn mann_whitney_cannot_make_two_samples_significant() {
        // Two samples a side, fully separated by 20 %: U = 4, p = 0.2453 > 0.05. The smallest
        // two-sided p at 2 vs 2 is this one, which is why judging needs ~9 samples a side.
        let r = mann_whitney(&[1.2, 1.2001], &[1.0, 1.0001]).unwrap();
        assert_eq!(r.u, 4.0);
        assert!(
            close(r.p_two_sided, 0.245_278_116_806_772_86, 1e-6),
            "{r:?}"
        );
    }

    #[test]
    fn mann_whitney_all_tied_and_empty() {
        let r = mann_whitney(&[5.0; 3], &[5.0; 3]).unwrap();
        assert_eq!((r.u, r.z, r.p_two_sided), (4.5, 0.0, 1.0));
        assert_eq!(mann_whitney(&[], &[1.0]), None);
        assert_eq!(mann_whitney(&[1.0], &[]), None);
        assert_eq!(mann_whitney(&[f64::NAN], &[1.0]), None);
    }
}
