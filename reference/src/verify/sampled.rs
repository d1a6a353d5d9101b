//! Stratified sampled verification: whole rows and whole columns of Y, each element checked
//! against its own bound with the exact reference for just those lines.
//!
//! Lines are chosen deterministically from the seed, by stratum: the first and last line always,
//! then round-robin over (lines around multiples of 128) (of 64) (of 32) (of 16) (uniformly
//! random), each stratum in a seeded order, until the FLOP budget is spent. "Around a multiple
//! B·j" means lines B·j − 1 and B·j: the last line of one tile and the first of the next, where
//! tiling, masking and split bugs show first.

use crate::bound::BoundModel;
use crate::compare::{CompareMode, CompareReport, OutputBits, check_model_for, compare_lines};
use crate::gemm::{
    InputError, Lines, NonFiniteX, SpecialRows, cols_unchecked, rows_unchecked, validate_with,
};
use crate::layer::{Activations, QuantizedLayer};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Tile sizes whose boundaries are strata, coarsest first.
pub const STRATA: [usize; 4] = [128, 64, 32, 16];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampledReport {
    pub rows: Vec<usize>,
    pub cols: Vec<usize>,
    /// Flops spent on the reference lines (`y`, `a` and, for offset recipes, `a_offset`).
    pub flops: f64,
    /// All checked elements (an element on a sampled row and column is checked twice).
    pub report: CompareReport,
    pub failed_rows: Vec<usize>,
    pub failed_cols: Vec<usize>,
}

impl SampledReport {
    pub fn passed(&self) -> bool {
        self.report.passed()
    }
}

/// `count` distinct lines out of `0..extent`, sorted, chosen by stratum (module docs). The first
/// and last lines are always included when `count ≥ 2`.
pub fn select_lines(extent: usize, count: usize, seed: u64) -> Vec<usize> {
    let count = count.min(extent);
    let mut taken = vec![false; extent];
    let mut chosen = Vec::with_capacity(count);
    // Returns whether `i` was new, so a stratum moves on to its next line only after a new one.
    let mut take = |i: usize, chosen: &mut Vec<usize>| -> bool {
        let new = chosen.len() < count && !taken[i];
        if new {
            taken[i] = true;
            chosen.push(i);
        }
        new
    };
    if extent > 0 {
        take(0, &mut chosen);
        take(extent - 1, &mut chosen);
    }
    let mut tiers: Vec<Vec<usize>> = STRATA
        .iter()
        .map(|&b| {
            (1..)
                .map(|j| j * b)
                .take_while(|&e| e - 1 < extent)
                .flat_map(|e| [e - 1, e])
                .filter(|&i| i < extent)
                .collect()
        })
        .collect();
    tiers.push((0..extent).collect());
    for (t, tier) in tiers.iter_mut().enumerate() {
        tier.shuffle(&mut ChaCha8Rng::seed_from_u64(
            seed ^ (0x9E37_79B9_7F4A_7C15u64.wrapping_mul(t as u64 + 1)),
        ));
        tier.reverse(); // pop() from the back takes the shuffled order front to back
    }
    while chosen.len() < count && tiers.iter().any(|t| !t.is_empty()) {
        for tier in tiers.iter_mut() {
            while let Some(i) = tier.pop() {
                if take(i, &mut chosen) {
                    break;
                }
            }
        }
    }
    chosen.sort_unstable();
    chosen
}

/// How many rows and columns a budget buys: half each, the remainder of one side to the other,
/// never fewer than two of each (first and last) when the output has them.
pub fn plan(m: usize, n: usize, k: usize, offset: bool, flops: f64) -> (usize, usize) {
    let products = if offset { 3.0 } else { 2.0 };
    let per_row = 2.0 * n as f64 * k as f64 * products;
    let per_col = 2.0 * m as f64 * k as f64 * products;
    let fit = |budget: f64, cost: f64, extent: usize| -> usize {
        let c = if cost > 0.0 {
            (budget.max(0.0) / cost).floor().min(extent as f64) as usize
        } else {
            extent
        };
        c.max(2.min(extent))
    };
    let rows = fit(flops / 2.0, per_row, m);
    let cols = fit(flops - rows as f64 * per_row, per_col, n);
    let rows = rows.max(fit(flops - cols as f64 * per_col, per_row, m).min(m));
    (rows, cols)
}

/// Samples lines within `flops` and checks them exactly against the bound.
pub fn sampled(
    x: &Activations,
    layer: &QuantizedLayer,
    model: &BoundModel,
    out: OutputBits<'_>,
    flops: f64,
    seed: u64,
) -> Result<SampledReport, InputError> {
    sampled_with(x, layer, model, out, flops, seed, NonFiniteX::Refuse)
}

/// [`sampled`], with the policy for non-finite X.
pub fn sampled_with(
    x: &Activations,
    layer: &QuantizedLayer,
    model: &BoundModel,
    out: OutputBits<'_>,
    flops: f64,
    seed: u64,
    non_finite_x: NonFiniteX,
) -> Result<SampledReport, InputError> {
    validate_with(x, layer, &model.recipe, non_finite_x)?;
    check_model_for(model, layer.shape.k, layer.dtype)?;
    out.validate(x.m, layer.shape.n)?;
    let (xz, special) = SpecialRows::prepare(x, non_finite_x);
    Ok(run(&xz, &special, layer, model, out, flops, seed))
}

/// The lines a budget buys for this case (rows first, then columns), from the seed.
pub(crate) fn choose(
    m: usize,
    n: usize,
    k: usize,
    offset: bool,
    flops: f64,
    seed: u64,
) -> (Vec<usize>, Vec<usize>) {
    let (nr, nc) = plan(m, n, k, offset, flops);
    (
        select_lines(m, nr, seed),
        select_lines(n, nc, seed.rotate_left(32) ^ 0xC01),
    )
}

/// `x` has the rows in `special` zeroed ([`SpecialRows::prepare`]).
pub(crate) fn run(
    x: &Activations,
    special: &SpecialRows,
    layer: &QuantizedLayer,
    model: &BoundModel,
    out: OutputBits<'_>,
    flops: f64,
    seed: u64,
) -> SampledReport {
    let offset = model.recipe.magnitude_offset();
    let special_offset = model.recipe.offset_accumulation;
    let (rows, cols) = choose(
        x.m,
        layer.shape.n,
        layer.shape.k,
        offset.is_some(),
        flops,
        seed,
    );
    let mut row_lines = rows_unchecked(x, layer, offset, &rows);
    let mut col_lines = cols_unchecked(x, layer, offset, &cols);
    special.patch(&mut row_lines, layer, special_offset);
    special.patch(&mut col_lines, layer, special_offset);
    from_lines(&row_lines, &col_lines, model, out)
}

/// Checks reference lines (computed here or inside the Freivalds passes) against the output.
pub(crate) fn from_lines(
    row_lines: &Lines,
    col_lines: &Lines,
    model: &BoundModel,
    out: OutputBits<'_>,
) -> SampledReport {
    let k = model.k as f64;
    let products = if model.uses_offset() { 3.0 } else { 2.0 };
    let (rows, cols) = (row_lines.index.clone(), col_lines.index.clone());
    let spent = 2.0
        * k
        * products
        * (rows.len() as f64 * row_lines.len as f64 + cols.len() as f64 * col_lines.len as f64);
    let mut report = CompareReport::new(CompareMode::Bound);
    let mut failed = |lines: &Lines| -> Vec<usize> {
        let reps = compare_lines(lines, model, model.recipe.output, out);
        let mut bad = Vec::new();
        for (rep, &i) in reps.iter().zip(&lines.index) {
            report.merge(rep);
            if !rep.passed() {
                bad.push(i);
            }
        }
        bad
    };
    let failed_rows = failed(row_lines);
    let failed_cols = failed(col_lines);
    SampledReport {
        rows,
        cols,
        flops: spent,
        report,
        failed_rows,
        failed_cols,
    }
}
