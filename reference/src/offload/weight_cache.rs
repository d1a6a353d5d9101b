//! The last layer's decoded weight chunks, kept per thread for the layer's next batch size (a
//! worker runs a layer's cases one after another).

use crate::layer::QuantizedLayer;

/// The decoded weights of one layer are kept for the next reference of the same layer up to
/// this many bytes (per thread): a layer's batch sizes run one after another in a worker.
pub const WEIGHT_CACHE_BYTES: usize = 8 << 30;

/// One column chunk of exact weights: `w` `[c, K]`, `wa` the abs (and offset) lanes.
pub(super) struct WeightChunk {
    pub(super) n0: usize,
    pub(super) n1: usize,
    pub(super) w: Vec<f64>,
    pub(super) wa: Vec<f64>,
}

/// The last layer's decoded weight chunks, keyed by the layer's content (not its address: a
/// new layer of the same shape may live where the last one did).
#[derive(Default)]
pub(super) struct WeightCache {
    pub(super) key: Option<u64>,
    pub(super) chunks: Vec<WeightChunk>,
}

thread_local! {
    static WEIGHTS: std::cell::RefCell<WeightCache> = std::cell::RefCell::default();
}

/// A fingerprint of everything the decoded weights depend on: XXH3 over the codes, zero
/// points, scales and the shape (each case of a layer hashes its weights again: tens of GB/s,
/// where a word-at-a-time hash was 5 % of the CPU side).
pub(super) fn weight_key(layer: &QuantizedLayer, offset: Option<f64>, chunk: usize) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for v in [
        layer.shape.n,
        layer.shape.k,
        layer.shape.group,
        chunk,
        layer.dtype as usize,
    ] {
        h.update(&(v as u64).to_le_bytes());
    }
    h.update(&offset.map_or(u64::MAX, f64::to_bits).to_le_bytes());
    // Each tensor with its length first, so that bytes cannot move from one to the next.
    let zeros = layer.zeros.as_deref().unwrap_or(&[]);
    let scales: Vec<u8> = layer.scales.iter().flat_map(|x| x.to_le_bytes()).collect();
    for bytes in [&layer.q[..], zeros, &scales] {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    h.digest()
}

/// This thread's decoded weights for `layer` in chunks of `chunk` columns, with their key
/// (`None` above [`WEIGHT_CACHE_BYTES`]): the kept chunks when the key matches (then `spare` is
/// empty), else an empty cache and the old chunks as `spare` buffers to refill.
pub(super) fn take_weights(
    layer: &QuantizedLayer,
    offset: Option<f64>,
    chunk: usize,
) -> (WeightCache, Option<u64>, Vec<WeightChunk>) {
    let (n, k) = (layer.shape.n, layer.shape.k);
    let lanes = 2 + usize::from(offset.is_some());
    let cacheable = n.saturating_mul(k).saturating_mul(8 * lanes) <= WEIGHT_CACHE_BYTES;
    let key = cacheable.then(|| weight_key(layer, offset, chunk));
    let mut cache = WEIGHTS.with(|c| std::mem::take(&mut *c.borrow_mut()));
    // Another layer's chunks: their buffers are refilled, not freed and allocated anew.
    let mut spare = Vec::new();
    if key.is_none() || cache.key != key {
        spare = std::mem::take(&mut cache.chunks);
        cache.key = None;
    }
    (cache, key, spare)
}

/// Keeps `cache` for this thread's next reference when it has a key.
pub(super) fn keep_weights(mut cache: WeightCache, key: Option<u64>) {
    if key.is_some() {
        cache.key = key;
        WEIGHTS.with(|c| *c.borrow_mut() = cache);
    }
}
