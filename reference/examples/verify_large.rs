//! Measures the reference's throughput and the time to verify the M=4096, K=14336, N=28672 case.
//!
//! `cargo run --release -p w4a16-reference --example verify_large`
//!
//! The large case has realistic dense X, and weights that are random in the first 32 columns of
//! K and zero (q = z) elsewhere, so that its exact output is cheap to produce here; verification
//! does not look at values to decide how much work to do, so the timing is that of a dense case.
//! Times are printed as wall and process CPU seconds: on a shared machine the CPU seconds divided
//! by the cores are what an idle machine would take. `PHASES=1` times the standalone Freivalds
//! check and reference rows/columns instead (on a zero output, which fails).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;
use std::time::Instant;
use w4a16_reference::bound::BoundModel;
use w4a16_reference::compare::OutputBits;
use w4a16_reference::gemm::{reference, reference_cols, reference_rows};
use w4a16_reference::verify::freivalds::freivalds;
use w4a16_reference::verify::{VerifyBudget, verify_large};
use w4a16_reference::{ActDtype, Activations, LayerShape, NumericRecipe, QuantizedLayer};

fn activations(m: usize, k: usize, dtype: ActDtype, seed: u64) -> Activations {
    let mut data = vec![0u16; m * k];
    data.par_chunks_mut(k).enumerate().for_each(|(i, row)| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (i as u64) << 20);
        row.iter_mut().for_each(|v| {
            *v = dtype.from_f64(0.25 * Distribution::<f64>::sample(&StandardNormal, &mut rng))
        });
    });
    Activations {
        m,
        k,
        row_stride: k,
        dtype,
        data,
    }
}

/// Random codes in `k < live`, `q = z` beyond (zero weights).
fn layer(
    n: usize,
    k: usize,
    group: usize,
    live: usize,
    dtype: ActDtype,
    seed: u64,
) -> QuantizedLayer {
    let groups = k / group;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let zeros: Vec<u8> = (0..n * groups).map(|_| rng.random_range(0..=15)).collect();
    let scales = (0..n * groups)
        .map(|_| dtype.from_f64(0.05 * rng.random::<f64>()))
        .collect();
    let bias = Some(
        (0..n)
            .map(|_| dtype.from_f64(0.1 * Distribution::<f64>::sample(&StandardNormal, &mut rng)))
            .collect(),
    );
    let mut q = vec![0u8; n * k];
    q.par_chunks_mut(k).enumerate().for_each(|(j, row)| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (j as u64) << 24);
        for (kk, c) in row.iter_mut().enumerate() {
            *c = if kk < live {
                rng.random_range(0..=15)
            } else {
                zeros[j * groups + kk / group]
            };
        }
    });
    QuantizedLayer {
        shape: LayerShape::new(n, k, group),
        dtype,
        q,
        zeros: Some(zeros),
        scales,
        bias,
    }
}

/// Process CPU seconds (user + system), to separate our work from the machine's load.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: f64 = fields.get(11..13).map_or(0.0, |f| {
        f.iter().filter_map(|v| v.parse::<f64>().ok()).sum()
    });
    ticks / 100.0
}

fn main() {
    let dtype = ActDtype::F16;
    let recipe = NumericRecipe::fp32_exact_weights(dtype);
    let phases = std::env::var_os("PHASES").is_some();
    println!("rayon threads: {}", rayon::current_num_threads());

    if !phases {
        // Reference throughput: y and a, counted as 2 products of 2·M·N·K flops.
        let (m, k, n) = (256, 4096, 4096);
        let x = activations(m, k, dtype, 1);
        let l = layer(n, k, 128, k, dtype, 2);
        let _ = reference(&x, &l, &recipe).unwrap();
        let (mut best, mut cpu) = (f64::INFINITY, 0.0);
        for _ in 0..3 {
            let (t, c) = (Instant::now(), cpu_seconds());
            let r = reference(&x, &l, &recipe).unwrap();
            if t.elapsed().as_secs_f64() < best {
                best = t.elapsed().as_secs_f64();
                cpu = cpu_seconds() - c;
            }
            std::hint::black_box(&r.y);
        }
        let flops = 4.0 * (m * n * k) as f64;
        println!(
            "reference M={m} K={k} N={n}: {best:.3} s wall, {cpu:.2} CPU-s; {:.1} GFLOP/s wall, {:.1} GFLOP/s per CPU-s (y + a)",
            flops / best / 1e9,
            flops / cpu / 1e9
        );
    }

    // The large case.
    let (m, k, n, live) = (4096, 14336, 28672, 32);
    let t = Instant::now();
    let x = activations(m, k, dtype, 3);
    let big = layer(n, k, 128, live, dtype, 4);
    // Exact output from the live columns only: one group of `live` columns.
    let small = QuantizedLayer {
        shape: LayerShape::new(n, live, live),
        dtype,
        q: big
            .q
            .par_chunks(k)
            .flat_map_iter(|row| row[..live].to_vec())
            .collect(),
        zeros: big
            .zeros
            .as_ref()
            .map(|z| z.chunks(k / 128).map(|g| g[0]).collect()),
        scales: big.scales.chunks(k / 128).map(|g| g[0]).collect(),
        bias: big.bias.clone(),
    };
    let mut y = vec![0u16; m * n];
    for (b, chunk) in y.chunks_mut(256 * n).enumerate().filter(|_| !phases) {
        let rows = chunk.len() / n;
        let xs = Activations {
            m: rows,
            k: live,
            row_stride: live,
            dtype,
            data: (b * 256..b * 256 + rows)
                .flat_map(|i| x.data[i * k..i * k + live].to_vec())
                .collect(),
        };
        let r = reference(&xs, &small, &recipe).unwrap();
        chunk
            .par_iter_mut()
            .zip(&r.y)
            .for_each(|(o, v)| *o = dtype.from_f64(*v));
    }
    println!(
        "setup (data + exact output): {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let out = OutputBits::new(&y, n);
    let timed = |what: &str, f: &mut dyn FnMut() -> String| {
        let (t, c) = (Instant::now(), cpu_seconds());
        let note = f();
        println!(
            "{what}: {:.2} s wall, {:.2} CPU-s {note}",
            t.elapsed().as_secs_f64(),
            cpu_seconds() - c
        );
    };

    if phases {
        let model = BoundModel::new(&recipe, k, 1.0).unwrap();
        timed("  freivalds", &mut || {
            format!(
                "passed={}",
                freivalds(&x, &big, &model, out, 1).unwrap().passed()
            )
        });
        timed("  4 reference rows", &mut || {
            reference_rows(&x, &big, &recipe, &[0, 1000, 2000, 4095])
                .map(|_| String::new())
                .unwrap()
        });
        let cols: Vec<usize> = (0..40).map(|i| i * 701).collect();
        timed("  40 reference cols", &mut || {
            reference_cols(&x, &big, &recipe, &cols)
                .map(|_| String::new())
                .unwrap()
        });
        return;
    }

    let budget = VerifyBudget::new(42);
    for run in 0..2 {
        timed(
            &format!("verify_large M={m} K={k} N={n} run {run}"),
            &mut || {
                let rep = verify_large(&x, &big, &recipe, out, 1.0, &budget).unwrap();
                format!(
                    "passed={} (freivalds worst {:.3e}; {} rows + {} cols sampled, {:.1} GFLOP, worst {:.3e})",
                    rep.passed(),
                    rep.freivalds.worst_ratio,
                    rep.sampled.rows.len(),
                    rep.sampled.cols.len(),
                    rep.sampled.flops / 1e9,
                    rep.sampled.report.worst_ratio,
                )
            },
        );
    }
    // A zeroed 16×16 tile somewhere inside must fail.
    let (m0, n0) = (1040, 20000);
    let mut bad = y.clone();
    for i in m0..m0 + 16 {
        bad[i * n + n0..i * n + n0 + 16].fill(0);
    }
    timed("corrupted tile", &mut || {
        let rep = verify_large(&x, &big, &recipe, OutputBits::new(&bad, n), 1.0, &budget).unwrap();
        format!(
            "passed={} (freivalds rows {:?} cols {:?}; sampled rows {:?} cols {:?})",
            rep.passed(),
            rep.freivalds.failed_rows,
            rep.freivalds.failed_cols,
            rep.sampled.failed_rows,
            rep.sampled.failed_cols
        )
    });
}
