//! Freivalds and sampled verification: pass the correctly rounded result, catch a corrupted
//! element, row, column and 16×16 tile in a 512×1024 output with K = 1024.
mod oracle;

use oracle::{Data, case, emulate, recipe, rounded};
use std::sync::OnceLock;
use w4a16_reference::bound::BoundModel;
use w4a16_reference::compare::OutputBits;
use w4a16_reference::data::{DataClass, DataSpec, generate};
use w4a16_reference::gemm::NonFiniteX;
use w4a16_reference::gemm::reference;
use w4a16_reference::layer::{LayerShape, Symmetry};
use w4a16_reference::verify::sampled::{STRATA, plan};
use w4a16_reference::verify::{
    VerifyBudget, freivalds, sampled, select_lines, verify_large, verify_large_with,
};
use w4a16_reference::{ActDtype, BiasStage, NumericRecipe};

const M: usize = 512;
const K: usize = 1024;
const N: usize = 1024;
const FLOPS: f64 = 2.0e8;

struct Fixture {
    c: oracle::Case,
    rec: NumericRecipe,
    model: BoundModel,
    y: Vec<u16>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dtype = ActDtype::F16;
        let c = case(M, N, K, 128, dtype, true, true, Data::Realistic, 2024);
        let rec = NumericRecipe::fp32_exact_weights(dtype);
        let y = rounded(&reference(&c.x, &c.layer, &rec).unwrap());
        let model = BoundModel::new(&rec, K, 1.0).unwrap();
        Fixture { c, rec, model, y }
    })
}

fn value(f: &Fixture, i: usize) -> f64 {
    f.rec.output.to_f64(f.y[i])
}

fn set(y: &mut [u16], f: &Fixture, i: usize, v: f64) {
    y[i] = f.rec.output.from_f64(v);
}

fn run_freivalds(f: &Fixture, y: &[u16]) -> freivalds::FreivaldsReport {
    freivalds::freivalds(&f.c.x, &f.c.layer, &f.model, OutputBits::new(y, N), 77).unwrap()
}

fn run_sampled(f: &Fixture, y: &[u16]) -> sampled::SampledReport {
    sampled::sampled(
        &f.c.x,
        &f.c.layer,
        &f.model,
        OutputBits::new(y, N),
        FLOPS,
        78,
    )
    .unwrap()
}

#[test]
fn both_pass_the_correctly_rounded_result() {
    let f = fixture();
    let fr = run_freivalds(f, &f.y);
    assert!(fr.passed(), "{fr:?}");
    assert!(
        fr.worst_ratio > 0.0 && fr.worst_ratio < 0.5,
        "{}",
        fr.worst_ratio
    );
    let sr = run_sampled(f, &f.y);
    assert!(sr.passed(), "{:?}", sr.report);
    assert_eq!(sr.report.checked, sr.rows.len() * N + sr.cols.len() * M);
    assert!(
        sr.rows.len() >= 8 && sr.cols.len() >= 8,
        "{} rows, {} cols",
        sr.rows.len(),
        sr.cols.len()
    );
    assert!(sr.flops <= FLOPS);
}

#[test]
fn a_single_grossly_corrupted_element_is_caught_by_freivalds_anywhere() {
    let f = fixture();
    let (m, n) = (301, 655); // on no stratum of 16
    let mut y = f.y.clone();
    set(&mut y, f, m * N + n, value(f, m * N + n) + 16.0);
    let fr = run_freivalds(f, &y);
    assert!(!fr.passed());
    assert_eq!(
        (fr.failed_rows.as_slice(), fr.failed_cols.as_slice()),
        (&[m][..], &[n][..])
    );
}

#[test]
fn a_slightly_corrupted_element_on_a_sampled_line_is_caught_exactly() {
    let f = fixture();
    let clean = run_sampled(f, &f.y);
    let m = clean.rows[clean.rows.len() / 2];
    let n = 333;
    let mut y = f.y.clone();
    // Far below any line tolerance of Freivalds, far above the element's own bound.
    set(&mut y, f, m * N + n, value(f, m * N + n) + 0.05);
    let sr = run_sampled(f, &y);
    assert!(!sr.passed());
    assert_eq!(sr.failed_rows, vec![m]);
    assert_eq!(sr.report.worst_at, Some((m, n)));
    assert!(
        run_freivalds(f, &y).passed(),
        "the line tolerance hides a 0.05 error"
    );
}

#[test]
fn a_corrupted_row_is_caught_by_both() {
    let f = fixture();
    let m = 200;
    let mut y = f.y.clone();
    // The classic wrong-row bug: row m holds row m + 1.
    let src: Vec<u16> = y[(m + 1) * N..(m + 2) * N].to_vec();
    y[m * N..(m + 1) * N].copy_from_slice(&src);
    let fr = run_freivalds(f, &y);
    assert_eq!(fr.failed_rows, vec![m]);
    let sr = run_sampled(f, &y);
    assert!(
        !sr.passed() && sr.report.worst_at.unwrap().0 == m,
        "{:?}",
        sr.report
    );
    assert!(
        !sr.failed_cols.is_empty(),
        "every sampled column crosses the row"
    );
}

#[test]
fn a_corrupted_column_is_caught_by_both() {
    let f = fixture();
    let n = 517;
    let mut y = f.y.clone();
    for m in 0..M {
        y[m * N + n] = y[m * N + n + 1];
    }
    let fr = run_freivalds(f, &y);
    assert_eq!(fr.failed_cols, vec![n]);
    let sr = run_sampled(f, &y);
    assert!(!sr.passed() && sr.report.worst_at.unwrap().1 == n);
    assert!(!sr.failed_rows.is_empty());
}

fn zero_tile(y: &mut [u16], m0: usize, n0: usize) {
    for m in m0..m0 + 16 {
        y[m * N + n0..m * N + n0 + 16].fill(0);
    }
}

#[test]
fn a_corrupted_interior_tile_is_caught_by_freivalds() {
    let f = fixture();
    let (m0, n0) = (272, 688);
    let mut y = f.y.clone();
    zero_tile(&mut y, m0, n0);
    let fr = run_freivalds(f, &y);
    assert!(!fr.passed());
    // Rows (tolerance summed over N = 1024) or columns (over M = 512) see it; nothing outside.
    assert!(fr.failed_rows.len() + fr.failed_cols.len() > 0, "{fr:?}");
    assert!(
        fr.failed_rows.iter().all(|m| (m0..m0 + 16).contains(m)),
        "{fr:?}"
    );
    assert!(
        fr.failed_cols.iter().all(|n| (n0..n0 + 16).contains(n)),
        "{fr:?}"
    );
}

#[test]
fn corrupted_tiles_on_strata_are_caught_by_sampling() {
    let f = fixture();
    let clean = run_sampled(f, &f.y);
    // The tail tile (last row and column are always sampled) and a tile starting on a sampled
    // boundary row.
    let m_on = *clean
        .rows
        .iter()
        .find(|&&m| m > 0 && m % 16 == 0 && m + 16 <= M)
        .unwrap();
    for (m0, n0) in [(M - 16, N - 16), (m_on, 160)] {
        let mut y = f.y.clone();
        zero_tile(&mut y, m0, n0);
        let sr = run_sampled(f, &y);
        assert!(!sr.passed(), "tile at ({m0}, {n0})");
        let (wm, wn) = sr.report.worst_at.unwrap();
        assert!((m0..m0 + 16).contains(&wm) && (n0..n0 + 16).contains(&wn));
    }
}

#[test]
fn poison_left_in_the_output_fails_both() {
    let f = fixture();
    let mut y = f.y.clone();
    y[(M - 1) * N + 3] = f.rec.output.poison_bits();
    let fr = run_freivalds(f, &y);
    assert_eq!(
        (
            fr.poison_left,
            fr.failed_rows.clone(),
            fr.failed_cols.clone()
        ),
        (1, vec![M - 1], vec![3])
    );
    assert_eq!(run_sampled(f, &y).report.poison_left, 1);
}

#[test]
fn verify_large_combines_both_and_is_deterministic() {
    let f = fixture();
    let budget = VerifyBudget {
        sample_flops: FLOPS,
        seed: 5,
    };
    let out = OutputBits::new(&f.y, N);
    let a = verify_large(&f.c.x, &f.c.layer, &f.rec, out, 1.0, &budget).unwrap();
    let b = verify_large(&f.c.x, &f.c.layer, &f.rec, out, 1.0, &budget).unwrap();
    assert!(a.passed());
    assert_eq!(a, b);
    // The fused lines (riding the Freivalds passes) are the standalone sampled check's lines.
    let alone = sampled::sampled(&f.c.x, &f.c.layer, &f.model, out, FLOPS, 5).unwrap();
    assert_eq!(
        (&a.sampled.rows, &a.sampled.cols),
        (&alone.rows, &alone.cols)
    );
    assert_eq!(
        (a.sampled.report.checked, a.sampled.report.buckets),
        (alone.report.checked, alone.report.buckets)
    );
    assert!(
        (a.sampled.report.worst_ratio - alone.report.worst_ratio).abs()
            <= 1e-9 * alone.report.worst_ratio
    );
    let mut y = f.y.clone();
    zero_tile(&mut y, 96, 96);
    let bad = verify_large(
        &f.c.x,
        &f.c.layer,
        &f.rec,
        OutputBits::new(&y, N),
        1.0,
        &budget,
    )
    .unwrap();
    assert!(!bad.passed());
    let short = verify_large(
        &f.c.x,
        &f.c.layer,
        &f.rec,
        OutputBits::new(&y[..N], N),
        1.0,
        &budget,
    );
    assert!(short.is_err());
}

#[test]
fn verification_passes_emulated_kernels_of_every_recipe() {
    // Smaller shape: the fp32 emulation is a plain loop.
    for (dtype, rec, data) in [
        (
            ActDtype::F16,
            recipe(ActDtype::F16, true, BiasStage::AfterCast, None),
            Data::Realistic,
        ),
        (
            ActDtype::Bf16,
            recipe(ActDtype::Bf16, false, BiasStage::BeforeCast, Some(128.0)),
            Data::LargeActivation,
        ),
        (
            ActDtype::Bf16,
            recipe(ActDtype::Bf16, true, BiasStage::BeforeCast, None),
            Data::Realistic,
        ),
    ] {
        let c = case(32, 64, 512, 64, dtype, true, true, data, 99);
        let y = emulate(&c.x, &c.layer, &rec, 1);
        let budget = VerifyBudget {
            sample_flops: 1e7,
            seed: 1,
        };
        let rep =
            verify_large(&c.x, &c.layer, &rec, OutputBits::new(&y, 64), 1.0, &budget).unwrap();
        assert!(
            rep.passed(),
            "{rec:?}: {:?} {:?}",
            rep.freivalds,
            rep.sampled.report
        );
    }
}

#[test]
fn line_selection_is_stratified_deterministic_and_budgeted() {
    let lines = select_lines(4096, 40, 9);
    assert_eq!(lines.len(), 40);
    assert!(lines.windows(2).all(|w| w[0] < w[1]));
    assert!(lines.contains(&0) && lines.contains(&4095));
    for b in STRATA {
        let near = lines
            .iter()
            .filter(|&&i| i > 0 && i < 4095 && (i % b == 0 || i % b == b - 1))
            .count();
        assert!(near >= 4, "only {near} lines around multiples of {b}");
    }
    let off_strata = lines
        .iter()
        .filter(|&&i| i % 16 != 0 && i % 16 != 15)
        .count();
    assert!(off_strata >= 4, "random stratum missing: {lines:?}");
    assert_eq!(lines, select_lines(4096, 40, 9));
    assert_ne!(lines, select_lines(4096, 40, 10));
    assert_eq!(select_lines(5, 100, 1), vec![0, 1, 2, 3, 4]);
    assert_eq!(select_lines(1, 2, 1), vec![0]);
    assert!(select_lines(0, 2, 1).is_empty());

    let (rows, cols) = plan(4096, 28672, 14336, false, 16e9);
    let cost = 4.0 * 14336.0 * (rows as f64 * 28672.0 + cols as f64 * 4096.0);
    assert!(
        cost <= 16e9 && rows >= 2 && cols >= 2,
        "{rows} rows, {cols} cols"
    );
    assert_eq!(plan(4096, 28672, 14336, false, 0.0), (2, 2));
}

/// Saturating data (a quarter of the outputs ±Inf, a quarter straddling the threshold) and an
/// emulated fp32 kernel's output.
fn saturating(
    dtype: ActDtype,
    m: usize,
    n: usize,
    k: usize,
) -> (oracle::Case, NumericRecipe, Vec<u16>) {
    let spec = DataSpec {
        class: DataClass::Saturating,
        m,
        shape: LayerShape::new(n, k, 128),
        dtype,
        symmetry: Symmetry::Asym,
        with_bias: true,
    };
    let g = generate("verify/saturating", &spec).unwrap();
    let rec = NumericRecipe::fp32_exact_weights(dtype);
    let y = emulate(&g.x, &g.layer, &rec, 7);
    (
        oracle::Case {
            x: g.x,
            layer: g.layer,
        },
        rec,
        y,
    )
}

/// Legitimate infinities pass Freivalds and sampling (checked one by one, out of the
/// projections), and a corrupted finite tile in the same output is still caught and localized.
#[test]
fn legitimate_infinities_pass_and_a_corrupted_finite_tile_is_still_caught() {
    for dtype in ActDtype::ALL {
        let (m, n, k) = (64, 96, 512);
        let (c, rec, y) = saturating(dtype, m, n, k);
        let model = BoundModel::new(&rec, k, 1.0).unwrap();
        let infs = y
            .iter()
            .filter(|&&b| rec.output.to_f64(b).is_infinite())
            .count();
        assert!(infs >= m * n / 4, "{dtype}: {infs}");
        let budget = VerifyBudget {
            sample_flops: 2e7,
            seed: 3,
        };
        let ok = verify_large(&c.x, &c.layer, &rec, OutputBits::new(&y, n), 1.0, &budget).unwrap();
        assert!(
            ok.passed(),
            "{dtype}: {:?} {:?}",
            ok.freivalds,
            ok.sampled.report
        );
        assert_eq!(ok.freivalds.checked_one_by_one, infs, "{dtype}");
        // A tile of finite columns (n ≡ 2, 3 mod 4) zeroed: rows 16..24, columns 34, 35, 38, 39.
        let mut bad = y.clone();
        let (rows, cols) = (16..24, [34, 35, 38, 39]);
        for mi in rows.clone() {
            for &ni in &cols {
                assert!(rec.output.to_f64(bad[mi * n + ni]).is_finite());
                bad[mi * n + ni] = 0;
            }
        }
        let fr =
            freivalds::freivalds(&c.x, &c.layer, &model, OutputBits::new(&bad, n), 11).unwrap();
        assert!(!fr.passed(), "{dtype}: {fr:?}");
        assert!(
            fr.failed_rows.iter().all(|r| rows.contains(r)),
            "{dtype}: {fr:?}"
        );
        assert!(
            fr.failed_cols.iter().all(|c| cols.contains(c)),
            "{dtype}: {fr:?}"
        );
        assert_eq!(fr.nonfinite, 0);
        // A wrong Inf in a finite column and a NaN: failed with their positions.
        let mut bad = y.clone();
        let inf = rec.output.from_f64(f64::INFINITY);
        bad[5 * n + 3] = inf; // column 3: |y| ≤ 0.63·threshold
        bad[40 * n + 1] = rec.output.from_f64(f64::NAN);
        let fr =
            freivalds::freivalds(&c.x, &c.layer, &model, OutputBits::new(&bad, n), 11).unwrap();
        assert_eq!(fr.nonfinite, 2, "{dtype}: {fr:?}");
        assert_eq!(fr.nonfinite_at, vec![(40, 1), (5, 3)], "{dtype}");
        assert_eq!(
            (fr.failed_rows.clone(), fr.failed_cols.clone()),
            (vec![5, 40], vec![1, 3])
        );
        // The opposite infinity where +Inf is right fails too.
        let i = (0..m * n)
            .find(|&i| bad[i] == inf && i % n % 4 == 0)
            .unwrap();
        let mut flip = y.clone();
        flip[i] ^= 0x8000;
        let fr =
            freivalds::freivalds(&c.x, &c.layer, &model, OutputBits::new(&flip, n), 11).unwrap();
        assert_eq!(fr.nonfinite_at, vec![(i / n, i % n)], "{dtype}");
    }
}

/// IEEE special values in X through Freivalds and sampling: rows with NaN/±Inf are checked
/// against their IEEE values, the rest through the projections.
#[test]
fn special_values_verify_by_position() {
    for dtype in ActDtype::ALL {
        let (m, n, k) = (48, 64, 256);
        let spec = DataSpec {
            class: DataClass::SpecialValues,
            m,
            shape: LayerShape::new(n, k, 64),
            dtype,
            symmetry: Symmetry::Sym,
            with_bias: true,
        };
        let g = generate("verify/special", &spec).unwrap();
        let rec = recipe(dtype, true, BiasStage::AfterCast, None);
        let y = emulate(&g.x, &g.layer, &rec, 5);
        let budget = VerifyBudget {
            sample_flops: 1e7,
            seed: 9,
        };
        let run = |y: &[u16]| {
            verify_large_with(
                &g.x,
                &g.layer,
                &rec,
                OutputBits::new(y, n),
                1.0,
                &budget,
                NonFiniteX::Ieee,
            )
            .unwrap()
        };
        assert!(verify_large(&g.x, &g.layer, &rec, OutputBits::new(&y, n), 1.0, &budget).is_err());
        let ok = run(&y);
        assert!(
            ok.passed(),
            "{dtype}: {:?} {:?}",
            ok.freivalds,
            ok.sampled.report
        );
        assert!(ok.freivalds.checked_one_by_one >= n, "{dtype}");
        // A finite value where the reference is NaN/Inf.
        let i = (0..m * n)
            .find(|&i| !dtype.to_f64(y[i]).is_finite())
            .unwrap();
        let mut bad = y.clone();
        bad[i] = dtype.from_f64(1.0);
        let fr = run(&bad).freivalds;
        assert_eq!(fr.nonfinite_at, vec![(i / n, i % n)], "{dtype}");
        // A corrupted finite element on a clean row is still seen by the projections.
        let j = (0..m * n)
            .find(|&j| j / n != i / n && dtype.to_f64(y[j]).is_finite() && j % n == 17)
            .unwrap();
        let mut bad = y.clone();
        bad[j] = dtype.from_f64(dtype.to_f64(y[j]) + 64.0);
        let fr = run(&bad).freivalds;
        assert!(
            fr.failed_rows.contains(&(j / n)) && fr.failed_cols.contains(&(j % n)),
            "{dtype}: {fr:?}"
        );
    }
}

/// +e, −e, −e, +e on a 2×2 submatrix leaves every row and column sum unchanged: an all-ones
/// projection cannot see it, Freivalds' random signs must. Several positions, shapes and dtypes.
#[test]
fn freivalds_catches_an_error_that_keeps_every_line_sum() {
    let small = |dtype| {
        let c = case(64, 96, 256, 64, dtype, true, true, Data::Realistic, 5);
        let rec = NumericRecipe::fp32_exact_weights(dtype);
        let y = rounded(&reference(&c.x, &c.layer, &rec).unwrap());
        (c, rec, y, 96)
    };
    let f = fixture();
    let mut setups = vec![(f.c.x.clone(), f.c.layer.clone(), f.rec, f.y.clone(), N)];
    for dtype in ActDtype::ALL {
        let (c, rec, y, n) = small(dtype);
        setups.push((c.x, c.layer, rec, y, n));
    }
    let mut caught = 0;
    for (x, layer, rec, y, n) in &setups {
        let (n, m) = (*n, x.m);
        let dtype = rec.output;
        let model = BoundModel::new(rec, layer.shape.k, 1.0).unwrap();
        for (m1, m2, n1, n2, seed) in [
            (3, 40, 5, 77, 1u64),
            (0, m - 1, 0, n - 1, 2),
            (17, 18, 33, 34, 3),
        ] {
            let e = if m == M { 16.0 } else { 8.0 };
            let mut bad = y.clone();
            let mut add = |mi: usize, ni: usize, d: f64| {
                let i = mi * n + ni;
                bad[i] = dtype.from_f64(dtype.to_f64(y[i]) + d);
            };
            add(m1, n1, e);
            add(m1, n2, -e);
            add(m2, n1, -e);
            add(m2, n2, e);
            // The line sums move by rounding only, far inside any line tolerance.
            let sum =
                |v: &[u16], mi: usize| (0..n).map(|j| dtype.to_f64(v[mi * n + j])).sum::<f64>();
            approx::assert_abs_diff_eq!(sum(&bad, m1), sum(y, m1), epsilon = 0.1);
            let fr =
                freivalds::freivalds(x, layer, &model, OutputBits::new(&bad, n), seed).unwrap();
            assert!(!fr.passed(), "{dtype} {m}×{n} at ({m1},{m2})×({n1},{n2})");
            assert!(fr.failed_rows.iter().all(|&r| r == m1 || r == m2), "{fr:?}");
            assert!(fr.failed_cols.iter().all(|&c| c == n1 || c == n2), "{fr:?}");
            caught += 1;
        }
    }
    assert_eq!(caught, 9);
}

/// Sampling always keeps the first and last row and column, whatever the extent, count and seed,
/// so a corrupted element on a boundary line is caught even by the smallest budget.
#[test]
fn sampling_keeps_the_boundary_lines() {
    for extent in [2, 3, 17, 128, 129, 1000, 4097] {
        for count in [2, 3, 10, 64] {
            for seed in 0..8 {
                let lines = select_lines(extent, count, seed);
                assert_eq!(lines.len(), count.min(extent));
                assert!(
                    lines.contains(&0) && lines.contains(&(extent - 1)),
                    "{extent} {count} {seed}"
                );
            }
        }
    }
    for (dtype, m, n, k) in [(ActDtype::F16, 37, 72, 256), (ActDtype::Bf16, 9, 200, 128)] {
        let c = case(m, n, k, 64, dtype, true, false, Data::Realistic, 8);
        let rec = NumericRecipe::fp32_exact_weights(dtype);
        let model = BoundModel::new(&rec, k, 1.0).unwrap();
        let y = rounded(&reference(&c.x, &c.layer, &rec).unwrap());
        // A zero budget buys two rows and two columns: exactly the boundary lines.
        let clean =
            sampled::sampled(&c.x, &c.layer, &model, OutputBits::new(&y, n), 0.0, 4).unwrap();
        assert!(clean.passed());
        assert_eq!(
            (clean.rows.clone(), clean.cols.clone()),
            (vec![0, m - 1], vec![0, n - 1])
        );
        for (mi, ni) in [(0, n / 2 + 1), (m - 1, 3), (m / 2, 0), (m / 2 + 1, n - 1)] {
            let mut bad = y.clone();
            let i = mi * n + ni;
            bad[i] = dtype.from_f64(dtype.to_f64(y[i]) + 0.5);
            let sr =
                sampled::sampled(&c.x, &c.layer, &model, OutputBits::new(&bad, n), 0.0, 4).unwrap();
            assert!(!sr.passed(), "{dtype} ({mi}, {ni})");
            assert_eq!(sr.report.worst_at, Some((mi, ni)));
        }
    }
}
