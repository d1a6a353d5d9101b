//! The full reference with its products from an outside f64 GEMM (the GPU's DGEMM): the
//! exact weights `(q − z)·s` and X are built here in f64 by the CPU reference's own decoding
//! ([`gemm::weight_rows`], [`gemm::activation_rows`]), handed to the GEMM in column chunks
//! (so that W in f64 stays within a memory budget), and the results assembled into the same
//! [`Reference`] the CPU computes: bias added, special rows patched, every element present, so
//! the comparison judges every element of every shape (no sampling).
//!
//! The GEMM is not trusted: a seeded sample of elements is recomputed on the CPU from the same
//! decoded rows and must agree within [`cross_check_tolerance`] ([`OffloadError::Disagrees`],
//! a fault of the reference, not of the kernel under test).

use crate::ActDtype;
use crate::bound::BoundModel;
use crate::compare::{self, CompareMode, CompareReport, JudgeRequest, OutputBits};
use crate::gemm::{
    self, InputError, LineAxis, Lines, NonFiniteX, Reference, SpecialRows, activation_rows,
    bits_to_f64, weight_rows, weight_rows_into,
};
use crate::layer::{Activations, LayerShape, QuantizedLayer, SYMMETRIC_ZERO};
use crate::recipe::NumericRecipe;
use crate::scratch::{self, Role};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::borrow::Cow;

/// Elements recomputed on the CPU per reference (the cross-check sample).
pub const CROSS_CHECK_SAMPLES: usize = 32;

/// W in f64 per GEMM call is kept under this many bytes (chunks along N).
pub const DEFAULT_W_BUDGET_BYTES: usize = 4 << 30;

/// The decoded weights of one layer are kept for the next reference of the same layer up to
/// this many bytes (per thread): a layer's batch sizes run one after another in a worker.
pub const WEIGHT_CACHE_BYTES: usize = 8 << 30;

/// One column chunk of exact weights: `w` `[c, K]`, `wa` the abs (and offset) lanes.
struct WeightChunk {
    n0: usize,
    n1: usize,
    w: Vec<f64>,
    wa: Vec<f64>,
}

/// The last layer's decoded weight chunks, keyed by the layer's content (not its address: a
/// new layer of the same shape may live where the last one did).
#[derive(Default)]
struct WeightCache {
    key: Option<u64>,
    chunks: Vec<WeightChunk>,
}

thread_local! {
    static WEIGHTS: std::cell::RefCell<WeightCache> = std::cell::RefCell::default();
}

/// A fingerprint of everything the decoded weights depend on: XXH3 over the codes, zero
/// points, scales and the shape (each case of a layer hashes its weights again: tens of GB/s,
/// where a word-at-a-time hash was 5 % of the CPU side).
fn weight_key(layer: &QuantizedLayer, offset: Option<f64>, chunk: usize) -> u64 {
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
fn take_weights(
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
fn keep_weights(mut cache: WeightCache, key: Option<u64>) {
    if key.is_some() {
        cache.key = key;
        WEIGHTS.with(|c| *c.borrow_mut() = cache);
    }
}

/// What the outside GEMM failed at, as its own error.
pub type GemmError = Box<dyn std::error::Error + Send + Sync>;

/// `(y, a)` for `x[M, K]` and `w[N, K]` row-major: `y = x·wᵀ`, `a = |x|·|w|ᵀ`, both `[M, N]`.
pub trait F64Gemm {
    fn gemm(
        &mut self,
        x: &[f64],
        w: &[f64],
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), GemmError>;

    /// [`F64Gemm::gemm`] with `w_key` naming `w`'s content when the caller will hand the same
    /// `w` again (a layer's next batch size): a device GEMM may keep `w` resident under it
    /// instead of sending it again. A wrong key cannot pass unseen: the cross-check recomputes
    /// sampled elements from the layer itself.
    fn gemm_keyed(
        &mut self,
        x: &[f64],
        w: &[f64],
        w_key: Option<u64>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), GemmError> {
        let _ = w_key;
        self.gemm(x, w, m, n, k)
    }

    /// A GEMM that computes nothing (`bench --cpu-side`'s stand-in, timing the CPU's share):
    /// the cross-check still recomputes its sampled elements on the CPU (that cost is the
    /// CPU's), but its comparison is not applied to products nobody formed.
    fn stands_in(&self) -> bool {
        false
    }
}

impl<F> F64Gemm for F
where
    F: FnMut(&[f64], &[f64], usize, usize, usize) -> Result<(Vec<f64>, Vec<f64>), GemmError>,
{
    fn gemm(
        &mut self,
        x: &[f64],
        w: &[f64],
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), GemmError> {
        self(x, w, m, n, k)
    }
}

/// Which product an element belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// `Σ x·w`.
    Signed,
    /// `Σ |x|·|w|`.
    Abs,
    /// `Σ |x|·|s|·(2·offset + q + z)`.
    Offset,
}

#[derive(Debug, thiserror::Error)]
pub enum OffloadError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("the f64 GEMM failed on columns {n0}..{n1}: {error}")]
    Gemm {
        n0: usize,
        n1: usize,
        error: GemmError,
    },
    #[error(
        "the f64 GEMM returned {got} values for columns {n0}..{n1} (expected {expected} = M·columns)"
    )]
    Length {
        n0: usize,
        n1: usize,
        expected: usize,
        got: usize,
    },
    #[error("the resident f64 reference failed {during}: {error}")]
    Resident {
        during: &'static str,
        error: GemmError,
    },
    #[error(
        "the f64 GEMM and the CPU reference disagree at (m, n) = ({m}, {n}) in {lane:?}: \
         {gemm:e} vs {cpu:e} (tolerance {tolerance:e})"
    )]
    Disagrees {
        m: usize,
        n: usize,
        lane: Lane,
        gemm: f64,
        cpu: f64,
        tolerance: f64,
    },
}

/// How far two f64 evaluations of one length-`k` dot product may lie apart. Each is within
/// `γ_k·a` of the exact sum (`γ_k = k·u/(1 − k·u)`, `u = 2⁻⁵³`, whatever the summation order,
/// blocking or FMA use of the DGEMM), so they differ by at most `2·γ_k·a ≤ 1.01·k·ε·a`
/// (`ε = 2u`, `k·u < 0.01`); adding the bias rounds once more, `u·|y|` each. Anything wider is a
/// wrong product (a wrong element, index or chunk), not rounding.
pub fn cross_check_tolerance(k: usize, a: f64, y_gemm: f64, y_cpu: f64) -> f64 {
    1.01 * k as f64 * f64::EPSILON * a + 0.5 * f64::EPSILON * (y_gemm.abs() + y_cpu.abs())
}

/// `count` seeded positions `(m, n)` in `[M, N]` (repeats possible on tiny outputs).
pub fn sample_positions(m: usize, n: usize, count: usize, seed: u64) -> Vec<(usize, usize)> {
    if m == 0 || n == 0 {
        return Vec::new();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|_| (rng.random_range(0..m), rng.random_range(0..n)))
        .collect()
}

/// [`gemm::reference_with`] with its products from `g`, W built and multiplied in column chunks
/// of at most `w_budget_bytes` of f64, then cross-checked at [`CROSS_CHECK_SAMPLES`] positions
/// drawn from `seed`.
pub fn reference_offloaded(
    x: &Activations,
    layer: &QuantizedLayer,
    recipe: &NumericRecipe,
    non_finite_x: NonFiniteX,
    g: &mut dyn F64Gemm,
    w_budget_bytes: usize,
    seed: u64,
) -> Result<Reference, OffloadError> {
    gemm::validate_with(x, layer, recipe, non_finite_x)?;
    let (xz, special) = SpecialRows::prepare(x, non_finite_x);
    let (m, n, k) = (x.m, layer.shape.n, layer.shape.k);
    let offset = recipe.magnitude_offset();
    let rows: Vec<usize> = (0..m).collect();
    // X, and |X| where an offset lane multiplies it (the device forms |X| for the abs lane),
    // in this thread's kept buffers.
    let mut lx = scratch::take(Role::XSigned, m * k);
    let mut la = offset.map(|_| scratch::take(Role::XAbs, m * k));
    activations_into(&xz, &mut lx, la.as_deref_mut());
    let chunk = (w_budget_bytes / (8 * k.max(1))).clamp(1, n.max(1));
    // One chunk (W within the budget, every field layer): the GEMM's outputs are the products
    // as they are, with no [M, N] buffers zeroed and copied into (most of the host's share).
    let whole = chunk >= n;
    let full = |len: usize| if whole { Vec::new() } else { vec![0.0; len] };
    let mut y = full(m * n);
    let mut a = full(m * n);
    let mut a_off = offset.map(|_| full(m * n));
    let (mut cache, key, mut spare) = take_weights(layer, offset, chunk);
    let fresh = cache.chunks.is_empty();
    let mut n0 = 0;
    let mut index = 0;
    while n0 < n {
        let n1 = (n0 + chunk).min(n);
        let c = n1 - n0;
        if fresh {
            let (mut w, mut wa) = spare
                .pop()
                .map_or_else(Default::default, |s: WeightChunk| (s.w, s.wa));
            weight_rows_into(layer, offset, n0..n1, &mut w, &mut wa);
            cache.chunks.push(WeightChunk { n0, n1, w, wa });
        }
        let WeightChunk { w, wa, .. } = &cache.chunks[index];
        debug_assert_eq!((cache.chunks[index].n0, cache.chunks[index].n1), (n0, n1));
        index += 1;
        let chunk_key = key.map(|key| key ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let call = |g: &mut dyn F64Gemm, x: &[f64], w: &[f64], w_key: Option<u64>| {
            let (cy, ca) = g
                .gemm_keyed(x, w, w_key, m, c, k)
                .map_err(|error| OffloadError::Gemm { n0, n1, error })?;
            for got in [cy.len(), ca.len()] {
                if got != m * c {
                    let expected = m * c;
                    return Err(OffloadError::Length {
                        n0,
                        n1,
                        expected,
                        got,
                    });
                }
            }
            Ok((cy, ca))
        };
        let (cy, ca) = call(g, &lx, w, chunk_key)?;
        if whole {
            (y, a) = (cy, ca);
        } else {
            scatter(&mut y, &cy, n, n0, c);
            scatter(&mut a, &ca, n, n0, c);
        }
        if let (Some(dst), Some(la)) = (a_off.as_mut(), la.as_ref()) {
            // |x|·woffᵀ: woff ≥ 0, so the signed product of |X| and the offset rows is the lane.
            let (co, _) = call(g, la, &wa[c * k..], None)?;
            if whole {
                *dst = co;
            } else {
                scatter(dst, &co, n, n0, c);
            }
        }
        n0 = n1;
    }
    scratch::give(Role::XSigned, lx);
    if let Some(la) = la {
        scratch::give(Role::XAbs, la);
    }
    keep_weights(cache, key);
    let raw = |index: &[usize]| {
        let at = |i: usize| (y[i], a[i], a_off.as_ref().map(|o| o[i]));
        Ok(index.iter().map(|&i| at(i)).collect())
    };
    let checked = cross_check(&xz, layer, offset, &special, raw, seed);
    if !g.stands_in() {
        checked?;
    }
    let bias = gemm::bias_values(layer);
    if layer.bias.is_some() && n > 0 {
        y.chunks_mut(n)
            .for_each(|row| row.iter_mut().zip(&bias).for_each(|(v, b)| *v += b));
    }
    let mut lines = Lines {
        axis: LineAxis::Rows,
        index: rows,
        len: n,
        y,
        a,
        a_offset: a_off,
        bias,
    };
    special.patch(&mut lines, layer, recipe.offset_accumulation);
    Ok(Reference {
        m,
        n,
        k,
        dtype: layer.dtype,
        y: lines.y,
        a: lines.a,
        a_offset: lines.a_offset,
        bias: lines.bias,
    })
}

/// The raw lanes of the products, `[M, N]` each: `y` before the bias, `a`, and `a_offset`.
pub type RawLanes = (Vec<f64>, Vec<f64>, Option<Vec<f64>>);

/// A reference's products kept where they were formed (the GPU's memory) and judged there:
/// the M×N doubles per lane never cross to the host unless a case needs them (a special
/// element, a failure's artifact, the fallback's second opinion).
pub trait ResidentProducts {
    /// The raw lanes `(y, a, a_offset or 0)` at element indices `m·N + n`.
    fn gather(&self, index: &[usize]) -> Result<Vec<[f64; 3]>, GemmError>;
    /// Every element of the raw lanes.
    fn download(&self) -> Result<RawLanes, GemmError>;
    /// [`compare::judge_plain`]'s report, formed next to the lanes; `None` when an element is
    /// not plain (the host then judges with its full rules).
    fn judge(&self, request: &JudgeRequest<'_>) -> Result<Option<CompareReport>, GemmError>;
}

/// The layer as a device decodes it next to its DGEMM: the codes `[N, K]` (one per byte) and,
/// per `(n, group)`, the scale and the zero point in f64. The exact weights are
/// `w = (q − z)·s`, their magnitudes `|w|`, and with an offset lane `|s|·(2·offset + z + q)`:
/// every one a small integer times a 16-bit float, exact in f64, so a device's decode gives the
/// host's bits (and the cross-check decodes its sampled columns on the host, independently).
pub struct WeightOperand<'a> {
    pub n: usize,
    pub k: usize,
    pub group: usize,
    pub codes: &'a [u8],
    /// `[N, groups]`.
    pub scales: Cow<'a, [f64]>,
    /// `[N, groups]`.
    pub zeros: Cow<'a, [f64]>,
    /// The offset lane's offset, for offset-accumulating recipes.
    pub offset: Option<f64>,
}

impl<'a> WeightOperand<'a> {
    /// The operand of `layer`, its per-group values decoded here (see [`LayerWeights`] for
    /// decoding them once per layer).
    pub fn new(layer: &'a QuantizedLayer, offset: Option<f64>) -> Self {
        let (scales, zeros) = per_group_values(layer);
        WeightOperand {
            n: layer.shape.n,
            k: layer.shape.k,
            group: layer.shape.group,
            codes: &layer.q,
            scales: Cow::Owned(scales),
            zeros: Cow::Owned(zeros),
            offset,
        }
    }

    /// `(w, |w|, offset rows)` `[N, K]` each, decoded on the host (a device in host code).
    pub fn decode(&self) -> RawLanes {
        let groups = self.k.div_ceil(self.group.max(1));
        let at = |i: usize| {
            let (r, c) = (i / self.k.max(1), i % self.k.max(1));
            let g = r * groups + c / self.group.max(1);
            (f64::from(self.codes[i] & 15), self.scales[g], self.zeros[g])
        };
        let len = self.n * self.k;
        let w: Vec<f64> = (0..len)
            .map(|i| {
                let (q, s, z) = at(i);
                (q - z) * s
            })
            .collect();
        let wa = w.iter().map(|v| v.abs()).collect();
        let off = self.offset.map(|o| {
            (0..len)
                .map(|i| {
                    let (q, s, z) = at(i);
                    s.abs() * (2.0 * o + z + q)
                })
                .collect()
        });
        (w, wa, off)
    }
}

/// X as a device widens it next to its DGEMM: the activation bits `[M, K]` (rows packed), 2
/// bytes per element where f64 would be 8. Every 16-bit float is exact in f64.
pub struct ActivationOperand<'a> {
    pub m: usize,
    pub k: usize,
    pub dtype: ActDtype,
    pub bits: std::borrow::Cow<'a, [u16]>,
}

impl<'a> ActivationOperand<'a> {
    pub fn new(x: &'a Activations) -> Self {
        let (m, k) = (x.m, x.k);
        let bits = if x.row_stride == k || m == 0 {
            std::borrow::Cow::Borrowed(&x.data[..m * k])
        } else {
            let rows = (0..m).flat_map(|r| &x.data[r * x.row_stride..r * x.row_stride + k]);
            std::borrow::Cow::Owned(rows.copied().collect())
        };
        ActivationOperand {
            m,
            k,
            dtype: x.dtype,
            bits,
        }
    }

    /// X in f64 on the host (a device in host code).
    pub fn to_f64(&self) -> Vec<f64> {
        let mut out = vec![0.0; self.bits.len()];
        bits_to_f64(self.dtype, &self.bits, &mut out);
        out
    }
}

/// The scales and zero points `[N, groups]` of `layer` in f64.
fn per_group_values(layer: &QuantizedLayer) -> (Vec<f64>, Vec<f64>) {
    let dtype = layer.dtype;
    let scales = layer.scales.iter().map(|&b| dtype.to_f64(b)).collect();
    let zeros = match &layer.zeros {
        Some(z) => z.iter().map(|&q| f64::from(q)).collect(),
        None => vec![f64::from(SYMMETRIC_ZERO); layer.scales.len()],
    };
    (scales, zeros)
}

/// The half of a resident reference that depends on the layer alone, formed once for all of its
/// batch sizes (a worker runs a layer's cases one after another): the layer's own tensors
/// checked ([`gemm::validate_layer`]), its per-group scales and zero points in f64 and its
/// content key. Per case these were a fifth of the CPU side of a field run.
pub struct LayerWeights {
    shape: LayerShape,
    dtype: ActDtype,
    /// [`weight_key`] without the offset lane's offset.
    key: u64,
    scales: Vec<f64>,
    zeros: Vec<f64>,
}

impl LayerWeights {
    pub fn new(layer: &QuantizedLayer) -> Result<Self, InputError> {
        gemm::validate_layer(layer)?;
        let (scales, zeros) = per_group_values(layer);
        Ok(LayerWeights {
            shape: layer.shape,
            dtype: layer.dtype,
            key: weight_key(layer, None, layer.shape.n),
            scales,
            zeros,
        })
    }

    /// Whether these were formed from a layer of `layer`'s shape and dtype. A same-shaped
    /// stranger is not caught here: its weights would meet the cross-check, which decodes the
    /// sampled columns from `layer` itself.
    fn describes(&self, layer: &QuantizedLayer) -> bool {
        self.shape == layer.shape && self.dtype == layer.dtype
    }

    /// The key of the decoded weights with `offset`'s lane (the device keeps them under it).
    fn key(&self, offset: Option<f64>) -> u64 {
        let offset = offset.map_or(u64::MAX, f64::to_bits);
        xxhash_rust::xxh3::xxh3_64_with_seed(&offset.to_le_bytes(), self.key)
            ^ 0x5245_5349_4445_4E54
    }

    fn operand<'a>(&'a self, layer: &'a QuantizedLayer, offset: Option<f64>) -> WeightOperand<'a> {
        WeightOperand {
            n: self.shape.n,
            k: self.shape.k,
            group: self.shape.group,
            codes: &layer.q,
            scales: Cow::Borrowed(&self.scales),
            zeros: Cow::Borrowed(&self.zeros),
            offset,
        }
    }
}

/// A GEMM whose products stay resident (`--reference gpu` on a device that can judge).
pub trait ResidentGemm<'d> {
    /// `y = x·wᵀ`, `a = |x|·|w|ᵀ` and, with an offset, `|x|·w_offsetᵀ` (the offset rows are
    /// nonnegative), X widened and the weights decoded where the products are formed, and kept
    /// there; `w_key` names the weights for a layer's next batch size. `None`: this GEMM cannot
    /// keep them (the caller forms a host reference instead).
    fn products(
        &mut self,
        x: &ActivationOperand<'_>,
        weights: &WeightOperand<'_>,
        w_key: Option<u64>,
    ) -> Result<Option<Box<dyn ResidentProducts + 'd>>, GemmError>;

    /// As [`F64Gemm::stands_in`]: products nobody formed are not cross-checked.
    fn stands_in(&self) -> bool {
        false
    }
}

/// The full reference of one case with its lanes resident: judged where they are, brought to
/// the host only on demand ([`ResidentReference::to_host`], the same [`Reference`] the host
/// path builds).
pub struct ResidentReference<'d> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub dtype: ActDtype,
    /// `[N]` (zeros without a bias).
    pub bias: Vec<f64>,
    has_bias: bool,
    has_offset: bool,
    lanes: Box<dyn ResidentProducts + 'd>,
}

impl ResidentReference<'_> {
    /// Every element of `out` against its bound (or bit-exact, by `mode`), on the device where
    /// every element is plain, else on the host from the downloaded lanes: one report either way.
    pub fn compare(
        &self,
        model: &BoundModel,
        out: OutputBits<'_>,
        mode: CompareMode,
    ) -> Result<CompareReport, OffloadError> {
        compare::check_model(model, self.k, self.dtype, self.has_offset)?;
        out.validate(self.m, self.n)?;
        let request = JudgeRequest {
            out,
            model: *model,
            mode,
            bias: &self.bias,
            has_bias: self.has_bias,
        };
        let judged = self
            .lanes
            .judge(&request)
            .map_err(|error| OffloadError::Resident {
                during: "judging the output",
                error,
            })?;
        if let Some(report) = judged {
            return Ok(report);
        }
        let host = self.to_host()?;
        Ok(match mode {
            CompareMode::Bound => compare::compare(&host, model, out)?,
            CompareMode::BitExact => compare::compare_bit_exact(&host, model, out)?,
        })
    }

    /// The lanes brought to the host, the bias added: the [`Reference`] the host path forms.
    pub fn to_host(&self) -> Result<Reference, OffloadError> {
        let (mut y, a, a_offset) =
            self.lanes
                .download()
                .map_err(|error| OffloadError::Resident {
                    during: "downloading the lanes",
                    error,
                })?;
        let expected = self.m * self.n;
        let lengths = [
            Some(y.len()),
            Some(a.len()),
            a_offset.as_ref().map(Vec::len),
        ];
        if let Some(got) = lengths.into_iter().flatten().find(|&l| l != expected) {
            return Err(OffloadError::Length {
                n0: 0,
                n1: self.n,
                expected,
                got,
            });
        }
        if self.has_bias && self.n > 0 {
            y.chunks_mut(self.n)
                .for_each(|row| row.iter_mut().zip(&self.bias).for_each(|(v, b)| *v += b));
        }
        Ok(Reference {
            m: self.m,
            n: self.n,
            k: self.k,
            dtype: self.dtype,
            y,
            a,
            a_offset,
            bias: self.bias.clone(),
        })
    }
}

/// [`reference_offloaded`] with the weights decoded and the lanes left resident in `g`,
/// cross-checked the same way (the sampled elements gathered from the device, against the host's
/// own decoding of their columns). `None` where a resident reference does not apply and the
/// caller forms the host one: X with special rows (their IEEE values are patched on the host),
/// W over `w_budget_bytes` (chunked), or a GEMM that cannot keep them.
#[allow(clippy::too_many_arguments)]
pub fn reference_resident<'d>(
    x: &Activations,
    layer: &QuantizedLayer,
    weights: &LayerWeights,
    recipe: &NumericRecipe,
    non_finite_x: NonFiniteX,
    g: &mut dyn ResidentGemm<'d>,
    w_budget_bytes: usize,
    seed: u64,
) -> Result<Option<ResidentReference<'d>>, OffloadError> {
    if !weights.describes(layer) {
        return Err(OffloadError::Input(gemm::mismatch(
            "the layer's weights (LayerWeights)",
            format!("{:?} {}", layer.shape, layer.dtype),
            format!("{:?} {}", weights.shape, weights.dtype),
        )));
    }
    gemm::validate_against_layer(x, layer, recipe, non_finite_x)?;
    let (xz, special) = SpecialRows::prepare(x, non_finite_x);
    let (m, n, k) = (x.m, layer.shape.n, layer.shape.k);
    let chunk = (w_budget_bytes / (8 * k.max(1))).clamp(1, n.max(1));
    if !special.rows.is_empty() || chunk < n {
        return Ok(None);
    }
    let offset = recipe.magnitude_offset();
    // X is widened and the weights decoded on the device: only the activation bits, the codes
    // and the per-group scales and zero points go there, the weights once per layer (the key
    // names them, with the offset).
    let w_key = Some(weights.key(offset));
    let weights = weights.operand(layer, offset);
    let products = g.products(&ActivationOperand::new(&xz), &weights, w_key);
    let lanes = match products {
        Ok(Some(lanes)) => lanes,
        Ok(None) => return Ok(None),
        Err(error) => {
            return Err(OffloadError::Gemm {
                n0: 0,
                n1: n,
                error,
            });
        }
    };
    let raw = |index: &[usize]| {
        let got = lanes
            .gather(index)
            .map_err(|error| OffloadError::Resident {
                during: "gathering the cross-check's elements",
                error,
            })?;
        if got.len() != index.len() {
            return Err(OffloadError::Length {
                n0: 0,
                n1: n,
                expected: index.len(),
                got: got.len(),
            });
        }
        let with_offset = offset.is_some();
        Ok(got
            .into_iter()
            .map(|[y, a, o]| (y, a, with_offset.then_some(o)))
            .collect())
    };
    let checked = cross_check(&xz, layer, offset, &special, raw, seed);
    if !g.stands_in() {
        checked?;
    }
    Ok(Some(ResidentReference {
        m,
        n,
        k,
        dtype: layer.dtype,
        bias: gemm::bias_values(layer),
        has_bias: layer.bias.is_some(),
        has_offset: offset.is_some(),
        lanes,
    }))
}

/// X `[M, K]` (rows packed, the row stride dropped) in f64 into `lx`, and |X| into `la`.
fn activations_into(x: &Activations, lx: &mut [f64], la: Option<&mut [f64]>) {
    let k = x.k;
    if k == 0 {
        return;
    }
    for (m, dst) in lx.chunks_exact_mut(k).enumerate() {
        bits_to_f64(
            x.dtype,
            &x.data[m * x.row_stride..m * x.row_stride + k],
            dst,
        );
    }
    if let Some(la) = la {
        la.iter_mut().zip(lx.iter()).for_each(|(a, v)| *a = v.abs());
    }
}

/// Columns `n0..n0+c` of `[M, N]` from a compact `[M, c]` chunk.
fn scatter(dst: &mut [f64], chunk: &[f64], n: usize, n0: usize, c: usize) {
    for (row, src) in dst.chunks_mut(n).zip(chunk.chunks(c)) {
        row[n0..n0 + c].copy_from_slice(src);
    }
}

/// The GEMM's raw products (before bias and special rows) at element indices `m·N + n`:
/// `(y, a, a_offset)`.
type RawAt = (f64, f64, Option<f64>);

/// The sampled elements recomputed from the CPU reference's decoded rows, summed in order,
/// against the products `raw` returns for their indices. Special rows are zeroed in `xz` and
/// overwritten afterwards: their products are skipped.
fn cross_check(
    xz: &Activations,
    layer: &QuantizedLayer,
    offset: Option<f64>,
    special: &SpecialRows,
    raw: impl FnOnce(&[usize]) -> Result<Vec<RawAt>, OffloadError>,
    seed: u64,
) -> Result<(), OffloadError> {
    let (m, n, k) = (xz.m, layer.shape.n, layer.shape.k);
    let positions: Vec<(usize, usize)> = sample_positions(m, n, CROSS_CHECK_SAMPLES, seed)
        .into_iter()
        .filter(|&(r, _)| special.row(r).is_none())
        .collect();
    if positions.is_empty() {
        return Ok(());
    }
    let rows: Vec<usize> = positions.iter().map(|p| p.0).collect();
    let cols: Vec<usize> = positions.iter().map(|p| p.1).collect();
    let index: Vec<usize> = positions.iter().map(|&(r, col)| r * n + col).collect();
    let products = raw(&index)?;
    let (lx, la) = activation_rows(xz, &rows);
    let (w, wa) = weight_rows(layer, offset, &cols);
    let c = cols.len();
    for (i, &(r, col)) in positions.iter().enumerate() {
        let (xr, ar) = (lx.row(i), la.row(i));
        let dot = |p: ndarray::ArrayView1<'_, f64>, q: ndarray::ArrayView1<'_, f64>| {
            p.iter().zip(q.iter()).fold(0.0, |s, (u, v)| u * v + s)
        };
        let y_cpu = dot(xr, w.row(i));
        let a_cpu = dot(ar, wa.row(i));
        let (y_gemm, a_gemm, o_gemm) = products[i];
        let mut lanes = vec![(Lane::Signed, y_gemm, y_cpu, a_cpu)];
        lanes.push((Lane::Abs, a_gemm, a_cpu, a_cpu));
        if let Some(o) = o_gemm {
            let o_cpu = dot(ar, wa.row(c + i));
            lanes.push((Lane::Offset, o, o_cpu, o_cpu));
        }
        for (lane, gemm, cpu, mag) in lanes {
            let tolerance = cross_check_tolerance(k, mag, gemm, cpu);
            // NaN on either side is a disagreement: the products of finite X and W are finite.
            let agree = (gemm - cpu).abs() <= tolerance;
            if !agree {
                return Err(OffloadError::Disagrees {
                    m: r,
                    n: col,
                    lane,
                    gemm,
                    cpu,
                    tolerance,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ActDtype;
    use crate::data::{self, DataClass, DataSpec};
    use crate::layer::{LayerShape, Symmetry};
    use crate::recipe::BiasStage;

    /// The device's DGEMM on the host: each element summed in order, independently.
    fn host_gemm(
        x: &[f64],
        w: &[f64],
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), GemmError> {
        let mut y = vec![0.0; m * n];
        let mut a = vec![0.0; m * n];
        for r in 0..m {
            for c in 0..n {
                let (xr, wr) = (&x[r * k..(r + 1) * k], &w[c * k..(c + 1) * k]);
                // Reverse order: a different summation order than the cross-check's.
                y[r * n + c] = xr.iter().zip(wr).rev().map(|(p, q)| p * q).sum();
                a[r * n + c] = xr.iter().zip(wr).rev().map(|(p, q)| (p * q).abs()).sum();
            }
        }
        Ok((y, a))
    }

    fn case(m: usize, n: usize, k: usize, with_bias: bool) -> (Activations, QuantizedLayer) {
        let spec = DataSpec {
            class: DataClass::Realistic,
            m,
            shape: LayerShape::new(n, k, 32),
            dtype: ActDtype::Bf16,
            symmetry: Symmetry::Asym,
            with_bias,
        };
        let g = data::generate_seeded(7, 11, &spec).unwrap();
        (g.x, g.layer)
    }

    fn assert_close(cpu: &Reference, off: &Reference) {
        assert_eq!((cpu.m, cpu.n, cpu.k), (off.m, off.n, off.k));
        assert_eq!(cpu.bias, off.bias);
        for i in 0..cpu.y.len() {
            let tol = cross_check_tolerance(cpu.k, cpu.a[i], cpu.y[i], off.y[i]);
            assert!((cpu.y[i] - off.y[i]).abs() <= tol, "y at {i}");
            assert!((cpu.a[i] - off.a[i]).abs() <= tol, "a at {i}");
        }
        match (&cpu.a_offset, &off.a_offset) {
            (Some(c), Some(o)) => {
                for i in 0..c.len() {
                    let tol = cross_check_tolerance(cpu.k, c[i], c[i], o[i]);
                    assert!((c[i] - o[i]).abs() <= tol, "a_offset at {i}");
                }
            }
            (None, None) => {}
            _ => panic!("a_offset present on one side only"),
        }
    }

    /// The offloaded reference of one case (host GEMM, one chunk) against the CPU reference.
    fn assert_matches_cpu(x: &Activations, layer: &QuantizedLayer, recipe: &NumericRecipe) {
        let cpu = gemm::reference_with(x, layer, recipe, NonFiniteX::Refuse).unwrap();
        let off = reference_offloaded(
            x,
            layer,
            recipe,
            NonFiniteX::Refuse,
            &mut host_gemm,
            DEFAULT_W_BUDGET_BYTES,
            3,
        )
        .unwrap();
        assert_close(&cpu, &off);
    }

    #[test]
    fn offloaded_reference_matches_the_cpu_reference() {
        let (x, layer) = case(5, 37, 96, true);
        for recipe in [
            NumericRecipe::fp32_exact_weights(ActDtype::Bf16),
            NumericRecipe {
                offset_accumulation: Some(128.0),
                ..NumericRecipe::fp32_exact_weights(ActDtype::Bf16)
            },
        ] {
            assert_matches_cpu(&x, &layer, &recipe);
        }
    }

    /// The decoded weights are reused for the same layer only: a second layer of the same shape
    /// (other codes, same place in memory or not) gets its own weights, and a layer seen again
    /// gives the same reference as the first time.
    #[test]
    fn the_weight_cache_is_keyed_by_the_layers_content() {
        let (x, layer) = case(3, 24, 64, true);
        let recipe = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
        let run = |l: &QuantizedLayer| {
            reference_offloaded(
                &x,
                l,
                &recipe,
                NonFiniteX::Refuse,
                &mut host_gemm,
                DEFAULT_W_BUDGET_BYTES,
                3,
            )
            .unwrap()
        };
        let first = run(&layer);
        let mut other = layer.clone();
        other.q.iter_mut().for_each(|q| *q = 15 - *q);
        let changed = run(&other);
        let cpu = gemm::reference_with(&x, &other, &recipe, NonFiniteX::Refuse).unwrap();
        assert_close(&cpu, &changed);
        assert_ne!(first.y, changed.y);
        assert_eq!(run(&layer), first);
        assert_eq!(run(&layer), first, "from the cache");
    }

    /// The buffers of one layer serve the next, larger or smaller, with or without an offset
    /// lane: stale values never reach a reference.
    #[test]
    fn reused_buffers_give_each_layer_its_own_reference() {
        let exact = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
        let offset = NumericRecipe {
            offset_accumulation: Some(128.0),
            ..exact
        };
        for (m, n, k, recipe) in [
            (6, 40, 128, offset),
            (2, 9, 64, exact),
            (3, 24, 96, offset),
            (7, 48, 160, exact),
        ] {
            let (x, layer) = case(m, n, k, true);
            assert_matches_cpu(&x, &layer, &recipe);
        }
    }

    #[test]
    fn chunks_along_n_within_the_budget() {
        let (x, layer) = case(3, 41, 64, true);
        let recipe = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
        let whole = reference_offloaded(
            &x,
            &layer,
            &recipe,
            NonFiniteX::Refuse,
            &mut host_gemm,
            DEFAULT_W_BUDGET_BYTES,
            3,
        )
        .unwrap();
        // 5 rows of W per call: 9 calls, the last one of a single row.
        let mut calls = Vec::new();
        let mut counting = |x: &[f64], w: &[f64], m: usize, n: usize, k: usize| {
            assert!(w.len() * 8 <= 5 * 64 * 8);
            calls.push(n);
            host_gemm(x, w, m, n, k)
        };
        let chunked = reference_offloaded(
            &x,
            &layer,
            &recipe,
            NonFiniteX::Refuse,
            &mut counting,
            5 * 64 * 8,
            3,
        )
        .unwrap();
        assert_eq!(calls, [5, 5, 5, 5, 5, 5, 5, 5, 1]);
        assert_eq!(whole, chunked);
    }

    #[test]
    fn a_wrong_product_is_caught_by_the_cross_check() {
        let (x, layer) = case(4, 16, 64, false);
        let recipe = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
        let seed = 9;
        // Every sampled position is planted in turn; each must be named.
        for &(pm, pn) in sample_positions(4, 16, CROSS_CHECK_SAMPLES, seed)
            .iter()
            .take(4)
        {
            let mut planted = |x: &[f64], w: &[f64], m: usize, n: usize, k: usize| {
                let (mut y, a) = host_gemm(x, w, m, n, k)?;
                y[pm * n + pn] += 1e-9 * (1.0 + a[pm * n + pn]);
                Ok((y, a))
            };
            let err = reference_offloaded(
                &x,
                &layer,
                &recipe,
                NonFiniteX::Refuse,
                &mut planted,
                DEFAULT_W_BUDGET_BYTES,
                seed,
            )
            .unwrap_err();
            assert!(
                matches!(
                    err,
                    OffloadError::Disagrees { m, n, lane: Lane::Signed, .. } if (m, n) == (pm, pn)
                ),
                "{err}"
            );
        }
        // A GEMM that gives back the wrong number of values is its own error.
        let mut short = |x: &[f64], w: &[f64], m: usize, n: usize, k: usize| {
            let (mut y, a) = host_gemm(x, w, m, n, k)?;
            y.pop();
            Ok((y, a))
        };
        let err = reference_offloaded(
            &x,
            &layer,
            &recipe,
            NonFiniteX::Refuse,
            &mut short,
            DEFAULT_W_BUDGET_BYTES,
            seed,
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                OffloadError::Length {
                    expected: 64,
                    got: 63,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn special_rows_are_patched_as_on_the_cpu() {
        let (mut x, layer) = case(3, 8, 32, true);
        x.data[x.row_stride + 5] = ActDtype::Bf16.from_f64(f64::INFINITY);
        let recipe = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
        let cpu = gemm::reference_with(&x, &layer, &recipe, NonFiniteX::Ieee).unwrap();
        let off = reference_offloaded(
            &x,
            &layer,
            &recipe,
            NonFiniteX::Ieee,
            &mut host_gemm,
            DEFAULT_W_BUDGET_BYTES,
            1,
        )
        .unwrap();
        for c in 0..8 {
            let (p, q) = (cpu.y_at(1, c), off.y_at(1, c));
            assert!(
                p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()),
                "col {c}"
            );
        }
        assert!(!off.y_at(1, 0).is_finite());
    }

    /// Host lanes standing in for a device's: the products of `host_gemm` (optionally off by
    /// a little in every `y`), judged by the host twin; `judged` counts the reports it gave and
    /// `declined` the outputs it left to the host.
    struct HostLanes {
        lanes: RawLanes,
        m: usize,
        n: usize,
        judged: std::rc::Rc<std::cell::Cell<usize>>,
        declined: std::rc::Rc<std::cell::Cell<usize>>,
    }

    impl ResidentProducts for HostLanes {
        fn gather(&self, index: &[usize]) -> Result<Vec<[f64; 3]>, GemmError> {
            let (y, a, o) = &self.lanes;
            Ok(index
                .iter()
                .map(|&i| [y[i], a[i], o.as_ref().map_or(0.0, |o| o[i])])
                .collect())
        }

        fn download(&self) -> Result<RawLanes, GemmError> {
            Ok(self.lanes.clone())
        }

        fn judge(&self, request: &JudgeRequest<'_>) -> Result<Option<CompareReport>, GemmError> {
            let (y, a, o) = &self.lanes;
            let report = compare::judge_plain(request, self.m, self.n, y, a, o.as_deref());
            let counter = if report.is_some() {
                &self.judged
            } else {
                &self.declined
            };
            counter.set(counter.get() + 1);
            Ok(report)
        }
    }

    #[derive(Default)]
    struct HostResidentGemm {
        wrong: bool,
        judged: std::rc::Rc<std::cell::Cell<usize>>,
        declined: std::rc::Rc<std::cell::Cell<usize>>,
    }

    impl ResidentGemm<'static> for HostResidentGemm {
        fn products(
            &mut self,
            x: &ActivationOperand<'_>,
            weights: &WeightOperand<'_>,
            _w_key: Option<u64>,
        ) -> Result<Option<Box<dyn ResidentProducts>>, GemmError> {
            let (m, n, k) = (x.m, weights.n, weights.k);
            let x = &x.to_f64();
            let (w, _, w_offset) = weights.decode();
            let w_offset = w_offset.as_deref();
            let (mut y, a) = host_gemm(x, &w, m, n, k)?;
            if self.wrong {
                y.iter_mut()
                    .zip(&a)
                    .for_each(|(v, t)| *v += 1e-6 * (1.0 + t));
            }
            let xa: Vec<f64> = x.iter().map(|v| v.abs()).collect();
            let offset = w_offset.map(|o| host_gemm(&xa, o, m, n, k).map(|p| p.0));
            Ok(Some(Box::new(HostLanes {
                lanes: (y, a, offset.transpose()?),
                m,
                n,
                judged: self.judged.clone(),
                declined: self.declined.clone(),
            })))
        }
    }

    /// The resident reference is the host one (same products, brought back with the bias
    /// added), and its judge's report is the host comparison's for every kind of output: every
    /// element plain (judged next to the lanes), and with a poisoned, a NaN or an infinite
    /// element (left to the host, whose rules for them are the only ones). Both dtypes, every
    /// bias stage, with and without bias and offset lane, bound and bit-exact mode.
    #[test]
    fn a_resident_reference_judges_as_the_host_reference() {
        let mut g = HostResidentGemm::default();
        for dtype in [ActDtype::F16, ActDtype::Bf16] {
            for with_bias in [false, true] {
                let spec = DataSpec {
                    class: DataClass::Realistic,
                    m: 6,
                    shape: LayerShape::new(40, 96, 32),
                    dtype,
                    symmetry: Symmetry::Asym,
                    with_bias,
                };
                let generated = data::generate_seeded(5, 13, &spec).unwrap();
                let (x, layer) = (generated.x, generated.layer);
                for (bias, offset) in [
                    (BiasStage::BeforeCast, None),
                    (BiasStage::AfterCast, None),
                    (BiasStage::Either, Some(128.0)),
                ] {
                    let recipe = NumericRecipe {
                        bias,
                        offset_accumulation: offset,
                        ..NumericRecipe::fp32_exact_weights(dtype)
                    };
                    let host = reference_offloaded(
                        &x,
                        &layer,
                        &recipe,
                        NonFiniteX::Refuse,
                        &mut host_gemm,
                        DEFAULT_W_BUDGET_BYTES,
                        3,
                    )
                    .unwrap();
                    let resident = reference_resident(
                        &x,
                        &layer,
                        &LayerWeights::new(&layer).unwrap(),
                        &recipe,
                        NonFiniteX::Refuse,
                        &mut g,
                        DEFAULT_W_BUDGET_BYTES,
                        3,
                    )
                    .unwrap()
                    .expect("host lanes are always kept");
                    assert_eq!(resident.to_host().unwrap(), host);
                    let model = BoundModel::new(&recipe, layer.shape.k, 1.0).unwrap();
                    let rounded: Vec<u16> = (0..host.m * host.n)
                        .map(|i| host.rounded_bits(i / host.n, i % host.n))
                        .collect();
                    // Off by a growing number of ulps: every bucket, some over the bound.
                    let off: Vec<u16> = rounded
                        .iter()
                        .enumerate()
                        .map(|(i, &b)| b.wrapping_add((i % 7) as u16 * (i % 3) as u16))
                        .collect();
                    let with = |i: usize, v: u16| {
                        let mut o = off.clone();
                        o[i] = v;
                        o
                    };
                    let outputs = [
                        (rounded.clone(), true),
                        (off.clone(), true),
                        (with(17, dtype.poison_bits()), false),
                        (with(3, dtype.from_f64(f64::NAN)), false),
                        (with(40, dtype.from_f64(f64::INFINITY)), false),
                    ];
                    for (out, plain) in outputs {
                        let bits = OutputBits::new(&out, host.n);
                        for mode in [CompareMode::Bound, CompareMode::BitExact] {
                            let (judged, declined) = (g.judged.get(), g.declined.get());
                            let expected = match mode {
                                CompareMode::Bound => compare::compare(&host, &model, bits),
                                CompareMode::BitExact => {
                                    compare::compare_bit_exact(&host, &model, bits)
                                }
                            }
                            .unwrap();
                            let got = resident.compare(&model, bits, mode).unwrap();
                            assert_eq!(got, expected, "{dtype:?} {bias:?} {offset:?} {mode:?}");
                            assert_eq!(g.judged.get(), judged + usize::from(plain));
                            assert_eq!(g.declined.get(), declined + usize::from(!plain));
                        }
                    }
                }
            }
        }
    }

    /// Products that are off are caught by the cross-check on the gathered elements, a fault
    /// of the reference.
    #[test]
    fn a_wrong_resident_product_is_caught_by_the_cross_check() {
        let (x, layer) = case(5, 37, 96, true);
        let recipe = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
        let mut g = HostResidentGemm {
            wrong: true,
            ..HostResidentGemm::default()
        };
        let got = reference_resident(
            &x,
            &layer,
            &LayerWeights::new(&layer).unwrap(),
            &recipe,
            NonFiniteX::Refuse,
            &mut g,
            DEFAULT_W_BUDGET_BYTES,
            3,
        );
        assert!(
            matches!(got, Err(OffloadError::Disagrees { .. })),
            "{:?}",
            got.map(|r| r.is_some())
        );
    }

    /// One layer's weights serve every batch size: the same operand as decoding per case, a key
    /// that names the content and the offset lane, the layer's own checks done once, and weights
    /// of another layer refused by shape or caught by the cross-check.
    #[test]
    fn layer_weights_are_the_per_case_operand_formed_once() {
        let (x, layer) = case(5, 37, 96, true);
        let weights = LayerWeights::new(&layer).unwrap();
        for offset in [None, Some(128.0)] {
            let once = weights.operand(&layer, offset);
            let per_case = WeightOperand::new(&layer, offset);
            assert_eq!(once.scales, per_case.scales);
            assert_eq!(once.zeros, per_case.zeros);
            assert_eq!(
                (once.n, once.k, once.group),
                (per_case.n, per_case.k, per_case.group)
            );
            assert_eq!(once.offset, per_case.offset);
        }
        assert_ne!(weights.key(None), weights.key(Some(128.0)));
        assert_eq!(
            weights.key(None),
            LayerWeights::new(&layer).unwrap().key(None)
        );
        let mut other = layer.clone();
        other.q[0] ^= 1;
        let stranger = LayerWeights::new(&other).unwrap();
        assert_ne!(stranger.key(None), weights.key(None));
        let mut bad = layer.clone();
        bad.q[9] = 16;
        assert!(matches!(
            LayerWeights::new(&bad),
            Err(InputError::CodeOutOfRange { index: 9, .. })
        ));

        let recipe = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
        let mut g = HostResidentGemm::default();
        let resident = |w: &LayerWeights, g: &mut HostResidentGemm| {
            reference_resident(
                &x,
                &layer,
                w,
                &recipe,
                NonFiniteX::Refuse,
                g,
                DEFAULT_W_BUDGET_BYTES,
                3,
            )
            .map(|r| r.is_some())
        };
        assert!(matches!(resident(&weights, &mut g), Ok(true)));
        // Another layer of the same shape: its products disagree with this layer's columns.
        let spec = DataSpec {
            class: DataClass::Realistic,
            m: 5,
            shape: layer.shape,
            dtype: layer.dtype,
            symmetry: Symmetry::Asym,
            with_bias: true,
        };
        let unrelated = data::generate_seeded(8, 12, &spec).unwrap().layer;
        let unrelated = LayerWeights::new(&unrelated).unwrap();
        assert!(matches!(
            resident(&unrelated, &mut g),
            Err(OffloadError::Disagrees { .. })
        ));
        let (_, narrow) = case(5, 36, 96, true);
        assert!(matches!(
            resident(&LayerWeights::new(&narrow).unwrap(), &mut g),
            Err(OffloadError::Input(_))
        ));
    }

    /// Where the host must form the reference there is no resident one: W over the budget
    /// (chunks), and X with a non-finite row (its IEEE values are patched on the host). The
    /// same layer and X with finite rows within the budget get one.
    #[test]
    fn the_host_forms_what_a_resident_reference_cannot_hold() {
        let (x, layer) = case(3, 24, 64, false);
        let recipe = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
        let mut g = HostResidentGemm::default();
        let mut resident = |x: &Activations, budget: usize| {
            reference_resident(
                x,
                &layer,
                &LayerWeights::new(&layer).unwrap(),
                &recipe,
                NonFiniteX::Ieee,
                &mut g,
                budget,
                3,
            )
            .unwrap()
            .is_some()
        };
        assert!(resident(&x, DEFAULT_W_BUDGET_BYTES));
        assert!(!resident(&x, 8 * 64 * 10), "chunked W");
        let mut special = x.clone();
        special.data[special.row_stride + 5] = ActDtype::Bf16.from_f64(f64::NAN);
        assert!(
            !resident(&special, DEFAULT_W_BUDGET_BYTES),
            "a non-finite row"
        );
    }

    /// The operand a device decodes gives the CPU reference's exact weights, magnitudes and
    /// offset rows, bit for bit (both asymmetric and symmetric layers).
    #[test]
    fn the_weight_operand_decodes_as_the_reference_does() {
        for symmetry in [Symmetry::Asym, Symmetry::Sym] {
            let spec = DataSpec {
                class: DataClass::Realistic,
                m: 1,
                shape: LayerShape::new(24, 96, 32),
                dtype: ActDtype::F16,
                symmetry,
                with_bias: false,
            };
            let layer = data::generate_seeded(1, 2, &spec).unwrap().layer;
            let (n, k) = (layer.shape.n, layer.shape.k);
            let (w, wa, off) = WeightOperand::new(&layer, Some(128.0)).decode();
            let (mut hw, mut hwa) = (Vec::new(), Vec::new());
            weight_rows_into(&layer, Some(128.0), 0..n, &mut hw, &mut hwa);
            assert_eq!(w, hw);
            assert_eq!(wa, hwa[..n * k]);
            assert_eq!(off.expect("an offset lane"), hwa[n * k..]);
            assert_eq!(WeightOperand::new(&layer, None).decode().2, None);
        }
    }

    /// X goes to the device as its bits with the rows packed (a padded row stride dropped),
    /// and widens to the values the host reads.
    #[test]
    fn the_activation_operand_packs_the_rows() {
        let x = Activations {
            m: 3,
            k: 4,
            row_stride: 6,
            dtype: ActDtype::Bf16,
            data: (0..18u16).map(|i| 0x3F80 + i).collect(),
        };
        let op = ActivationOperand::new(&x);
        assert_eq!((op.m, op.k, op.bits.len()), (3, 4, 12));
        let want: Vec<f64> = (0..12).map(|i| x.get(i / 4, i % 4)).collect();
        assert_eq!(op.to_f64(), want);
        let packed = Activations {
            row_stride: 4,
            data: op.bits.to_vec(),
            ..x.clone()
        };
        assert!(matches!(
            ActivationOperand::new(&packed).bits,
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
