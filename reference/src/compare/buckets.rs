//! The snapshot buckets of the error/bound ratio, and the bucket of a ratio found without
//! dividing.

/// Bucket labels for snapshots, in order. Edges are powers of two (1/64, 1/16, 1/4, 1/2, 1):
/// coarse enough that a run-to-run change of a few ulps never moves a snapshot, fine enough
/// that drift toward the bound shows long before a failure.
pub const RATIO_BUCKETS: [&str; 7] = ["0", "<1/64", "<1/16", "<1/4", "<1/2", "<1", ">=1"];

/// Index into [`RATIO_BUCKETS`]; NaN goes to the last bucket.
#[inline]
pub fn bucket_index(ratio: f64) -> usize {
    const EDGES: [f64; 5] = [1.0 / 64.0, 1.0 / 16.0, 0.25, 0.5, 1.0];
    if ratio == 0.0 {
        0
    } else if ratio.is_nan() {
        RATIO_BUCKETS.len() - 1
    } else {
        // Counted, not searched: ratios spread over the buckets, and a branch per edge is
        // mispredicted per element.
        1 + EDGES
            .iter()
            .map(|&e| usize::from(ratio >= e))
            .sum::<usize>()
    }
}

/// Relative width of the band below the worst ratio so far inside which the comparison forms
/// the quotient itself: far wider than the rounding of `worst·bound` (2⁻⁵³).
pub(super) const RATIO_HAIR: f64 = 1.0 / (1u64 << 40) as f64;

/// Bounds from here up keep `edge·bound` a normal number for every bucket edge (the smallest
/// is 2⁻⁶), so the products [`ratio_class`] compares against are exact.
pub(super) const SMALLEST_CLASSIFIED_BOUND: f64 = f64::MIN_POSITIVE * 64.0;

/// The bucket of `fl(err / bound)` for an error `err ≥ 0` and a finite bound of at least
/// [`SMALLEST_CLASSIFIED_BOUND`], without dividing. The edges are powers of two, so
/// `P = edge·bound` is exact. `err ≥ P` means the quotient, and so its rounding, is at least
/// the edge. `err < P` means `err` is at most P's predecessor, `P·(1 − 2⁻⁵³)` or lower, so the
/// quotient is at most `edge·(1 − 2⁻⁵³)`, the edge's own predecessor: its rounding stays below
/// the edge. The same argument at the edge 1 makes `err > bound` the test `fl(err/bound) > 1`.
#[inline]
pub(super) fn ratio_class(err: f64, bound: f64) -> usize {
    const EDGES: [f64; 5] = [1.0 / 64.0, 1.0 / 16.0, 0.25, 0.5, 1.0];
    if err == 0.0 {
        return 0;
    }
    1 + EDGES
        .iter()
        .map(|&edge| usize::from(err >= edge * bound))
        .sum::<usize>()
}

/// The snapshot label of a ratio.
pub fn bucket(ratio: f64) -> &'static str {
    RATIO_BUCKETS[bucket_index(ratio)]
}
