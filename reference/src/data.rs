//! Seeded data keyed by the case id (ARCHITECTURE.md rule 10): the same id gives the same tensors on
//! every machine.
//!
//! - seed = FNV-1a 64 of the id's UTF-8 bytes (a fixed algorithm, unlike std's `DefaultHasher`).
//! - the ChaCha8 key is four SplitMix64 outputs of the seed; each tensor reads its own ChaCha
//!   stream, so W does not change with M and X does not change with N.
//! - samples use only the raw ChaCha words and IEEE `+`/`×`: uniforms are `(u64 >> 11)·2⁻⁵³`,
//!   a zero point is the top 4 bits of a u32, weight codes are the 16 nibbles of a u64 (low
//!   first), and "randn" is the Irwin–Hall sum of 12 uniforms minus 6 (mean 0, variance 1,
//!   |randn| ≤ 6), each uniform a 16-bit lane of a ChaCha word. No libm call (whose last bit
//!   may differ between platforms) and no library sampler (whose algorithm may change between
//!   versions). Three words per normal sample and one word per 16 codes keep a 4096 × 49152
//!   activation or a 43008 × 5376 layer a matter of seconds.

use crate::dtype::ActDtype;
use crate::gemm::NonFiniteX;
use crate::layer::{Activations, LayerShape, QuantizedLayer, SYMMETRIC_ZERO, Symmetry};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a, 64-bit.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(FNV_PRIME)
    })
}

/// The seed of a case: printed with every failure so the case can be rebuilt from it.
pub fn case_seed(case_id: &str) -> u64 {
    fnv1a64(case_id.as_bytes())
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One ChaCha stream per tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
enum Stream {
    Activations = 1,
    Codes = 2,
    Zeros = 3,
    Scales = 4,
    Bias = 5,
    /// Router logits of an MoE layer's tokens.
    Router = 6,
    /// The choices of the hand-made routings (which experts, which token).
    RoutingPicks = 7,
}

fn rng(seed: u64, stream: Stream) -> ChaCha8Rng {
    let key = StreamKey::new(seed, stream);
    let mut r = ChaCha8Rng::from_seed(key.key_bytes());
    r.set_stream(key.stream);
    r
}

/// One tensor's ChaCha8 stream as a generator outside this module needs it (a GPU's): word `i`
/// of the stream is word `i mod 16` of the ChaCha8 block numbered `i / 16`, the block's state
/// being the four constants, `key` (little-endian words), the 64-bit block number in words
/// 12–13 and `stream` in words 14–15 (rand_chacha's layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamKey {
    pub key: [u32; 8],
    pub stream: u64,
}

impl StreamKey {
    /// The stream of the activations of a case with `seed` ([`case_seed`]).
    pub fn activations(seed: u64) -> Self {
        Self::new(seed, Stream::Activations)
    }

    fn new(seed: u64, stream: Stream) -> Self {
        let mut state = seed;
        let mut key = [0u32; 8];
        for pair in key.chunks_exact_mut(2) {
            let word = splitmix64(&mut state);
            pair[0] = word as u32;
            pair[1] = (word >> 32) as u32;
        }
        StreamKey {
            key,
            stream: stream as u64,
        }
    }

    fn key_bytes(&self) -> [u8; 32] {
        let mut bytes = [0u8; 32];
        for (chunk, word) in bytes.chunks_exact_mut(4).zip(self.key) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        bytes
    }
}

/// A generator of realistic X faster than this CPU (a GPU, where X is most of a run's data
/// time): `count` values of `0.25·randn` in `dtype`, drawn from the start of `stream` as
/// [`generate_activations`] draws them (element `i` from the stream's u32 words `6i..6i+6`:
/// the sum `S` of their twelve 16-bit halves gives the f32 `(S − 393216)·2⁻¹⁸`, exact, rounded
/// once to nearest even into `dtype`). `Ok(None)` leaves them to the host.
pub trait RealisticSource {
    fn realistic(
        &self,
        stream: &StreamKey,
        dtype: ActDtype,
        count: usize,
    ) -> Result<Option<Vec<u16>>, GeneratorError>;
}

/// Why a generator elsewhere could not draw: its own error (a device's), carried as it is into
/// [`DataError::Generator`]'s message.
pub type GeneratorError = Box<dyn std::error::Error + Send + Sync>;

/// [`RealisticSource::realistic`] drawn here: what a generator elsewhere must return (a
/// simulated device draws this; a GPU test compares the device's draw with it).
pub fn realistic_on_host(stream: &StreamKey, dtype: ActDtype, count: usize) -> Vec<u16> {
    let mut r = ChaCha8Rng::from_seed(stream.key_bytes());
    r.set_stream(stream.stream);
    realistic_activations(&mut r, dtype, count)
}

/// Elements of an outside generator's X recomputed here, at seeded positions plus the first
/// and the last: a generator that is off anywhere systematic (a wrong key word, counter,
/// half or rounding) is caught on every case; its exactness everywhere is a GPU test's.
pub const SOURCE_SPOT_CHECKS: usize = 16;

/// `count` realistic values from `source` when it has them, spot-checked against the host
/// stream, with `r` moved past the words they used; else drawn here.
fn realistic_from(
    r: &mut ChaCha8Rng,
    key: &StreamKey,
    dtype: ActDtype,
    count: usize,
    source: Option<&dyn RealisticSource>,
) -> Result<Vec<u16>, DataError> {
    let from_source = match source {
        Some(s) => s
            .realistic(key, dtype, count)
            .map_err(|e| DataError::Generator {
                error: e.to_string(),
            })?,
        None => None,
    };
    let Some(values) = from_source else {
        return Ok(realistic_activations(r, dtype, count));
    };
    if values.len() != count {
        return Err(DataError::GeneratorLength {
            expected: count,
            got: values.len(),
        });
    }
    let start = r.get_word_pos();
    let mut picks = ChaCha8Rng::from_seed(key.key_bytes());
    picks.set_stream(u64::MAX - key.stream);
    let mut at: Vec<usize> = (0..SOURCE_SPOT_CHECKS.saturating_sub(2))
        .map(|_| (picks.next_u64() % count.max(1) as u64) as usize)
        .collect();
    at.extend([0, count.saturating_sub(1)]);
    for index in at.into_iter().filter(|&i| i < count) {
        r.set_word_pos(start + 6 * index as u128);
        let host = dtype.from_f32(realistic_value(lane_sum(r)));
        if values[index] != host {
            return Err(DataError::GeneratorDisagrees {
                index,
                generator: values[index],
                host,
            });
        }
    }
    r.set_word_pos(start + 6 * count as u128);
    Ok(values)
}

/// Uniform in (0, 1]: a scale drawn from it is never zero before rounding.
fn uniform_open0(r: &mut ChaCha8Rng) -> f64 {
    ((r.next_u64() >> 11) + 1) as f64 * 2f64.powi(-53)
}

/// Irwin–Hall approximation of a standard normal (see the module doc): twelve 16-bit uniforms
/// summed as integers, then one exact scaling.
fn randn(r: &mut ChaCha8Rng) -> f64 {
    randn_of(lane_sum(r))
}

/// The twelve 16-bit lanes of three ChaCha words, summed (`0 ≤ S ≤ 12·65535`).
fn lane_sum(r: &mut ChaCha8Rng) -> u64 {
    lanes(r.next_u64()) + lanes(r.next_u64()) + lanes(r.next_u64())
}

/// The four 16-bit lanes of a word, summed.
fn lanes(w: u64) -> u64 {
    (w & 0xffff) + ((w >> 16) & 0xffff) + ((w >> 32) & 0xffff) + (w >> 48)
}

fn randn_of(sum: u64) -> f64 {
    sum as f64 * 2f64.powi(-16) - 6.0
}

/// `count` values of `0.25·randn` rounded to `dtype`, in blocks. The value is
/// `(S − 393216)·2⁻¹⁸` for the integer lane sum `S < 2²⁰` of [`randn`]: exact in f32, so its
/// rounding is one f32 → dtype conversion (the bits of `dtype.from_f64(0.25·randn)`, see the
/// test) done a block at a time (F16C converts eight at once). Most of X in every run is drawn
/// here: this is the CPU's largest share of data generation.
fn realistic_activations(r: &mut ChaCha8Rng, dtype: ActDtype, count: usize) -> Vec<u16> {
    const BLOCK: usize = 512;
    let mut out = vec![0u16; count];
    let mut values = [0f32; BLOCK];
    let mut words = [0u64; 3 * BLOCK];
    for chunk in out.chunks_mut(BLOCK) {
        let (values, words) = (&mut values[..chunk.len()], &mut words[..3 * chunk.len()]);
        // The stream's next words in bulk: the same words, in order, as `next_u64` one by one.
        r.fill(words);
        for (v, w) in values.iter_mut().zip(words.chunks_exact(3)) {
            *v = realistic_value(lanes(w[0]) + lanes(w[1]) + lanes(w[2]));
        }
        dtype.from_f32_slice(values, chunk);
    }
    out
}

/// `0.25·randn` for the lane sum `sum`, exactly, in f32.
fn realistic_value(sum: u64) -> f32 {
    (sum as i32 - 393_216) as f32 * (1.0 / 262_144.0)
}

fn code(r: &mut ChaCha8Rng) -> u8 {
    (r.next_u32() >> 28) as u8
}

/// Integer in `0..count` (multiply-shift; the bias of at most count/2³² does not matter here).
fn below(r: &mut ChaCha8Rng, count: u32) -> u32 {
    ((u64::from(r.next_u32()) * u64::from(count)) >> 32) as u32
}

/// Router logits `[tokens, experts]` (row-major) in eighths of ln 2: the logit is `j·ln2/8`
/// for the integer `j = round(16·randn)` (|j| ≤ 96). `exp(logit) = 2^(j/8)` is then a power of
/// two times one of eight constants, so the softmax needs no libm call (see the module doc) and
/// ties between experts are common enough that the tie rule is exercised.
pub fn router_logits(seed: u64, tokens: usize, experts: usize) -> Vec<i32> {
    let mut r = rng(seed, Stream::Router);
    (0..tokens * experts)
        .map(|_| (16.0 * randn(&mut r)).round() as i32)
        .collect()
}

/// Seeded integer draws for the hand-made routings, on their own stream so that they do not
/// move the logits.
pub struct RoutingPicks(ChaCha8Rng);

impl RoutingPicks {
    pub fn new(seed: u64) -> Self {
        RoutingPicks(rng(seed, Stream::RoutingPicks))
    }

    /// An integer in `0..count` (`count ≥ 1`).
    pub fn below(&mut self, count: u32) -> u32 {
        below(&mut self.0, count)
    }
}

/// The layer seed of expert `expert` of an MoE layer: FNV-1a over the layer seed and the index
/// (little-endian bytes), so each expert reads its own streams.
pub fn expert_seed(layer_seed: u64, expert: usize) -> u64 {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&layer_seed.to_le_bytes());
    bytes[8..].copy_from_slice(&(expert as u64).to_le_bytes());
    fnv1a64(&bytes)
}

crate::named_enum! {
    /// What the tensors of a case look like.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum DataClass {
        /// x ∈ {−2..2}, scales 2^-e with e ∈ {7..10}, bias i·2⁻⁷ with |i| ≤ 64: every fp32 partial
        /// sum, in any order and any split, is exact (see [`EXACT_MAX_K`]).
        Exact = "exact",
        /// x = 0.25·randn, q and z uniform 0..15, s = 0.05·U(0,1], bias = 0.1·randn.
        Realistic = "realistic",
        /// As realistic but x = (64 + 64·randn)·2^−p (−320·2^−p ≤ x ≤ 448·2^−p): the positive mean
        /// makes each group's Σx about 64·G·2^−p, so the bf16 form that subtracts (128 + z)·Σx after
        /// the dot cancels two large terms (a relative hazard, unchanged by the power of two). The
        /// shift `p` ([`large_activation_shift`]) is chosen per layer from K and the dtype so that
        /// the true |y| provably stays below a quarter of the dtype's largest value: magnitude
        /// stress without overflow (bf16 never needs a shift; saturation is its own class).
        LargeActivation = "large-activation",
        /// x = 1 and every dequantized weight = 1 (s = 1, q = z + 1); bias = 1.
        Ones = "ones",
        /// Realistic values, but X is zero except its last row (m = M−1) and W is zero (q = z)
        /// except its last row (n = N−1): only Y[M−1, N−1] (plus bias) is non-zero, so M and N
        /// tails that read or write the wrong row show.
        LastRow = "last-row",
        /// Realistic values, but X is zero except its last column (k = K−1): the reduction tail,
        /// the last group and the last nibble of the last word decide the whole result.
        LastCol = "last-col",
        /// True outputs that cross the dtype's overflow threshold in a known share of elements (docs/contract.md
        /// §6 "The range edge"; ±Inf is the correct result there). x = μ·(1 + randn/24) ∈
        /// [0.75μ, 1.25μ] and every weight of column n has the same sign (q − z = ±d, d ∈ 1..8; the
        /// sign flips every 4 columns), so no sum anywhere (fp32 accumulators, split-K partials,
        /// the offset forms) mixes signs, and an fp32 intermediate overflows only where the true
        /// result already lies beyond the threshold: never Inf − Inf. Scales are set per column so
        /// that `Σ_k |w_nk| = ρ_n·threshold/μ` (up to the scales' rounding), with ρ by column
        /// n mod 4 = 2, 1, 1/2, 1/4 ([`SATURATING_RATIOS`]):
        /// - n ≡ 0: every |y| ≥ 1.5·(1 − 2⁻⁸)·threshold: ±Inf expected in a quarter of the elements;
        /// - n ≡ 1: |y| straddles the threshold (about half beyond it, many within a bound of it);
        /// - n ≡ 2, 3: every |y| ≤ 0.63·threshold: finite.
        ///
        /// μ = max(1, 128/K) (a power of two) keeps every |(q − z)·s| ≤ threshold/4, finite in the
        /// activation dtype for the recipes that round dequantized weights.
        Saturating = "saturating",
        /// Realistic values, then IEEE special values in X at seeded positions: +0, −0 and two
        /// subnormals in every row, and NaN or ±Inf in about one row of eight (at least one): +Inf,
        /// NaN, −Inf, or +Inf and −Inf together, by row. The reference follows IEEE rules
        /// ([`crate::gemm::NonFiniteX::Ieee`]); NaN and Inf positions must match exactly.
        SpecialValues = "special-values",
    }
}

/// Σ|w| of column n over the threshold, by n mod 4, for [`DataClass::Saturating`].
pub const SATURATING_RATIOS: [f64; 4] = [2.0, 1.0, 0.5, 0.25];

/// Rows with NaN/Inf in the special-values class: one in this many (at least one per X).
pub const SPECIAL_ROW_PERIOD: usize = 8;

impl DataClass {
    /// Whether X of this class may hold NaN/±Inf, and so how the reference must treat it.
    pub fn non_finite_x(self) -> NonFiniteX {
        match self {
            DataClass::SpecialValues => NonFiniteX::Ieee,
            _ => NonFiniteX::Refuse,
        }
    }
}

/// Units of the exact class: every term x·(q−z)·s is an integer multiple of 2⁻¹⁰.
pub const EXACT_UNIT_EXP: i32 = -10;
/// Largest K of the exact class. A term is at most |x|·|q−z|·s = 2·15·2⁻⁷ = 240 units, the bias
/// at most 64·2⁻⁷ = 512 units, so any partial sum is an integer of at most 240·K + 512 units:
/// exact in fp32 while that stays below 2²⁴. The largest |y| is then below 2²⁴·2⁻¹⁰ = 16384,
/// finite in f16, and every non-zero |y| ≥ 2⁻¹⁰ is normal in f16 and bf16. Each dequantized
/// weight (q−z)·2^-e is exact in f16 and bf16. The offset forms stay exact per group while
/// 2·(1024+15)·G < 2²⁴ (fp16 `0x6400`, G ≤ 8072) and 2·(128+15)·G < 2²⁴ (bf16 `0x4300`).
/// The rounded output is *not* always exactly representable in f16/bf16 (a dense sum can need
/// more than 11 or 8 significant bits, whatever the power-of-two scaling); the final cast of an
/// exact fp32 value is deterministic, so comparisons stay bit-exact against the recipe.
pub const EXACT_MAX_K: usize = ((1 << 24) - 512 - 1) / 240;

/// Everything about a case's data except its identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DataSpec {
    pub class: DataClass,
    pub m: usize,
    pub shape: LayerShape,
    pub dtype: ActDtype,
    pub symmetry: Symmetry,
    pub with_bias: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Generated {
    /// The activations' seed. Print it with `layer_seed`: [`generate_seeded`] rebuilds the
    /// case from the two.
    pub seed: u64,
    /// The layer's seed (weights, zero points, scales, bias).
    pub layer_seed: u64,
    pub x: Activations,
    pub layer: QuantizedLayer,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DataError {
    #[error("group_size: expected a positive group, got 0")]
    ZeroGroup,
    #[error(
        "exact data class: expected K ≤ {max} so that fp32 partial sums stay exact, got K = {k}"
    )]
    ExactTooLarge { k: usize, max: usize },
    #[error("the device's X generator failed: {error}")]
    Generator { error: String },
    #[error("the device's X generator returned {got} values, expected {expected}")]
    GeneratorLength { expected: usize, got: usize },
    #[error(
        "the device's X generator disagrees with the host stream at element {index}: \
         {generator:#06x}, expected {host:#06x}"
    )]
    GeneratorDisagrees {
        index: usize,
        generator: u16,
        host: u16,
    },
}

/// A case id without its batch segment (`M=…`): the cases of one layer at every batch size
/// share it.
pub fn layer_key(case_id: &str) -> String {
    case_id
        .split('/')
        .filter(|seg| !seg.starts_with("M="))
        .collect::<Vec<_>>()
        .join("/")
}

/// The tensors of case `case_id`: the activations seeded by the whole id ([`case_seed`]), the
/// layer by its [`layer_key`]. Every batch size of a layer sees the same weights, as in an
/// engine, so a runner converts each layer once and reuses it across M.
pub fn generate(case_id: &str, spec: &DataSpec) -> Result<Generated, DataError> {
    generate_seeded(case_seed(case_id), case_seed(&layer_key(case_id)), spec)
}

/// The tensors for printed seeds.
pub fn generate_seeded(
    seed: u64,
    layer_seed: u64,
    spec: &DataSpec,
) -> Result<Generated, DataError> {
    let layer = generate_layer(layer_seed, spec)?;
    let x = generate_activations(seed, spec)?;
    Ok(Generated {
        seed,
        layer_seed,
        x,
        layer,
    })
}

fn check_spec(spec: &DataSpec) -> Result<(), DataError> {
    if spec.shape.group == 0 {
        return Err(DataError::ZeroGroup);
    }
    if spec.class == DataClass::Exact && spec.shape.k > EXACT_MAX_K {
        return Err(DataError::ExactTooLarge {
            k: spec.shape.k,
            max: EXACT_MAX_K,
        });
    }
    Ok(())
}

/// X of `spec`; the batch size is the only part of the spec the layer does not depend on.
pub fn generate_activations(seed: u64, spec: &DataSpec) -> Result<Activations, DataError> {
    generate_activations_from(seed, spec, None)
}

/// [`generate_activations`] with its realistic values from `source` where it has them (the same
/// bits, spot-checked: [`SOURCE_SPOT_CHECKS`]); the classes' own draws and patterns stay here.
pub fn generate_activations_from(
    seed: u64,
    spec: &DataSpec,
    source: Option<&dyn RealisticSource>,
) -> Result<Activations, DataError> {
    check_spec(spec)?;
    let DataSpec {
        class,
        m,
        shape,
        dtype,
        ..
    } = *spec;
    let k = shape.k;
    let bits = |v: f64| dtype.from_f64(v);
    let key = StreamKey::new(seed, Stream::Activations);
    let mut rx = rng(seed, Stream::Activations);
    let large = 2f64.powi(-large_activation_shift(k, dtype));
    let mu = saturating_mean(k);
    let mut x: Vec<u16> = match class {
        DataClass::Exact => (0..m * k)
            .map(|_| bits(f64::from(below(&mut rx, 5)) - 2.0))
            .collect(),
        DataClass::LargeActivation => (0..m * k)
            .map(|_| bits((64.0 + 64.0 * randn(&mut rx)) * large))
            .collect(),
        DataClass::Ones => vec![bits(1.0); m * k],
        DataClass::Saturating => (0..m * k)
            .map(|_| bits(mu * (1.0 + randn(&mut rx) / 24.0)))
            .collect(),
        _ => realistic_from(&mut rx, &key, dtype, m * k, source)?,
    };
    if class == DataClass::SpecialValues {
        place_special_values(&mut x, m, k, dtype, &mut rx);
    }
    // Patterns draw the realistic values first and then zero parts of them, so the live values
    // are the realistic ones for the same seed.
    let zero = bits(0.0);
    match class {
        DataClass::LastRow => {
            for (i, v) in x.iter_mut().enumerate() {
                if i / k.max(1) + 1 != m {
                    *v = zero;
                }
            }
        }
        DataClass::LastCol => {
            for (i, v) in x.iter_mut().enumerate() {
                if i % k + 1 != k {
                    *v = zero;
                }
            }
        }
        _ => {}
    }
    Ok(Activations {
        m,
        k,
        row_stride: k,
        dtype,
        data: x,
    })
}

/// Largest realistic scale and bias after rounding to the dtype (rounding is monotone, so no drawn
/// value exceeds these): 0.05 and 6·0.1 (|randn| ≤ 6).
fn realistic_limits(dtype: ActDtype) -> (f64, f64) {
    let up = |v: f64| dtype.to_f64(dtype.from_f64(v));
    (up(0.05), up(0.6))
}

/// The power-of-two shift `p` of [`DataClass::LargeActivation`]: the smallest `p ≥ 0` with
/// `K·448·2^−p·15·s_max + |b|_max ≤ max/4`, so that the true |y| (at most Σ|x||w| + |b|) stays
/// below a quarter of the dtype's largest finite value for any data the class can draw.
pub fn large_activation_shift(k: usize, dtype: ActDtype) -> i32 {
    let (s_max, b_max) = realistic_limits(dtype);
    let room = dtype.max_finite() / 4.0 - b_max;
    let worst = k as f64 * 448.0 * 15.0 * s_max;
    let mut p = 0;
    while worst * 2f64.powi(-p) > room {
        p += 1;
    }
    p
}

/// μ of [`DataClass::Saturating`]: a power of two with μ·K ≥ 128.
pub fn saturating_mean(k: usize) -> f64 {
    let mut mu = 1.0;
    while mu * (k as f64) < 128.0 {
        mu *= 2.0;
    }
    mu
}

/// The special values of [`DataClass::SpecialValues`], in place over realistic X (see there).
fn place_special_values(x: &mut [u16], m: usize, k: usize, dtype: ActDtype, rx: &mut ChaCha8Rng) {
    if m == 0 || k == 0 {
        return;
    }
    let (mantissa, inf, nan): (u32, u16, u16) = match dtype {
        ActDtype::F16 => (0x3FF, 0x7C00, 0x7E00),
        ActDtype::Bf16 => (0x7F, 0x7F80, 0x7FC0),
    };
    for row in x.chunks_mut(k) {
        let sub = |r: &mut ChaCha8Rng| (1 + below(r, mantissa)) as u16;
        let finite = [0x0000, 0x8000, sub(rx), 0x8000 | sub(rx)];
        for v in finite {
            row[below(rx, k as u32) as usize] = v;
        }
    }
    let first = below(rx, m.min(SPECIAL_ROW_PERIOD) as u32) as usize;
    let kind0 = below(rx, 4) as usize;
    for (i, mi) in (first..m).step_by(SPECIAL_ROW_PERIOD).enumerate() {
        let row = &mut x[mi * k..(mi + 1) * k];
        let at = |r: &mut ChaCha8Rng| below(r, k as u32) as usize;
        match (kind0 + i) % 4 {
            0 => row[at(rx)] = inf,
            1 => row[at(rx)] = nan,
            2 => row[at(rx)] = 0x8000 | inf,
            _ => {
                let (a, b) = (at(rx), at(rx));
                row[a] = inf;
                if b != a {
                    row[b] = 0x8000 | inf;
                }
            }
        }
    }
}

/// The quantized layer of `spec` (independent of `spec.m`).
pub fn generate_layer(seed: u64, spec: &DataSpec) -> Result<QuantizedLayer, DataError> {
    check_spec(spec)?;
    let DataSpec {
        class,
        shape,
        dtype,
        symmetry,
        with_bias,
        ..
    } = *spec;
    let LayerShape { n, k, group } = shape;
    let groups = shape.groups();
    let bits = |v: f64| dtype.from_f64(v);

    let mut rz = rng(seed, Stream::Zeros);
    let zeros: Vec<u8> = (0..n * groups)
        .map(|_| match (symmetry, class) {
            (Symmetry::Sym, _) => SYMMETRIC_ZERO,
            (Symmetry::Asym, DataClass::Ones) => below(&mut rz, 15) as u8,
            (Symmetry::Asym, _) => code(&mut rz),
        })
        .collect();

    let mut q: Vec<u8> = vec![0; n * k];
    if class == DataClass::Saturating {
        return Ok(saturating_layer(seed, spec));
    }
    if class == DataClass::Ones {
        for (i, c) in q.iter_mut().enumerate() {
            *c = zeros[(i / k) * groups + (i % k) / group] + 1;
        }
    } else {
        let mut rq = rng(seed, Stream::Codes);
        for chunk in q.chunks_mut(16) {
            let w = rq.next_u64();
            for (j, c) in chunk.iter_mut().enumerate() {
                *c = ((w >> (4 * j)) & 0xf) as u8;
            }
        }
    }

    let mut rs = rng(seed, Stream::Scales);
    let scales: Vec<u16> = (0..n * groups)
        .map(|_| match class {
            DataClass::Exact => bits(2f64.powi(-7 - below(&mut rs, 4) as i32)),
            DataClass::Ones => bits(1.0),
            _ => bits(0.05 * uniform_open0(&mut rs)),
        })
        .collect();

    let mut rb = rng(seed, Stream::Bias);
    let bias = with_bias.then(|| {
        (0..n)
            .map(|_| match class {
                DataClass::Exact => bits((f64::from(below(&mut rb, 129)) - 64.0) * 2f64.powi(-7)),
                DataClass::Ones => bits(1.0),
                _ => bits(0.1 * randn(&mut rb)),
            })
            .collect()
    });

    // LastRow: W is zero (q = z) except its last row.
    if class == DataClass::LastRow {
        for (i, c) in q.iter_mut().enumerate() {
            let (r, col) = (i / k, i % k);
            if r + 1 != n {
                *c = zeros[r * groups + col / group];
            }
        }
    }

    Ok(QuantizedLayer {
        shape,
        dtype,
        q,
        zeros: (symmetry == Symmetry::Asym).then_some(zeros),
        scales,
        bias,
    })
}

/// The layer of [`DataClass::Saturating`] (see there): one sign per column, |q − z| = d ∈ 1..8,
/// relative scales in (1/2, 1] stretched per column to the column's share of the threshold.
fn saturating_layer(seed: u64, spec: &DataSpec) -> QuantizedLayer {
    let DataSpec {
        shape,
        dtype,
        symmetry,
        with_bias,
        ..
    } = *spec;
    let LayerShape { n, k, group } = shape;
    let groups = shape.groups();
    let mut rz = rng(seed, Stream::Zeros);
    let mut rq = rng(seed, Stream::Codes);
    let mut rs = rng(seed, Stream::Scales);
    let mut rb = rng(seed, Stream::Bias);
    let mu = saturating_mean(k);
    let mut q = vec![0u8; n * k];
    let mut zeros = vec![SYMMETRIC_ZERO; n * groups];
    let mut scales = vec![0u16; n * groups];
    for col in 0..n {
        let positive = (col / 4) % 2 == 0;
        let mut rel = vec![0.0; groups];
        let mut total = 0.0;
        for g in 0..groups {
            let z = match (symmetry, positive) {
                (Symmetry::Sym, _) => SYMMETRIC_ZERO,
                (Symmetry::Asym, true) => code(&mut rz) >> 1,
                (Symmetry::Asym, false) => 8 + (code(&mut rz) >> 1),
            };
            zeros[col * groups + g] = z;
            rel[g] = 0.5 + 0.5 * uniform_open0(&mut rs);
            let mut d_sum = 0u64;
            for kk in g * group..((g + 1) * group).min(k) {
                let nib = code(&mut rq);
                let c = match (symmetry, positive) {
                    (Symmetry::Sym, true) => 9 + nib % 7,
                    (Symmetry::Asym, true) => z + 1 + (nib & 7),
                    (_, false) => z - 1 - (nib & 7),
                };
                d_sum += u64::from(c.abs_diff(z));
                q[col * k + kk] = c;
            }
            total += rel[g] * d_sum as f64;
        }
        let target = SATURATING_RATIOS[col % 4] * dtype.overflow_threshold() / mu;
        let lambda = target / total;
        for g in 0..groups {
            scales[col * groups + g] = dtype.from_f64(lambda * rel[g]);
        }
    }
    let bias = with_bias.then(|| {
        (0..n)
            .map(|_| dtype.from_f64(0.1 * randn(&mut rb)))
            .collect()
    });
    QuantizedLayer {
        shape,
        dtype,
        q,
        zeros: (symmetry == Symmetry::Asym).then_some(zeros),
        scales,
        bias,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every lane sum: the f32 shortcut is `0.25·randn` exactly, so its bits are those of the
    /// general rounding from f64.
    #[test]
    fn the_realistic_shortcut_gives_the_bits_of_the_general_rounding() {
        for sum in 0..=12 * 0xffff_u64 {
            let v = 0.25 * randn_of(sum);
            assert_eq!(f64::from(realistic_value(sum)), v, "sum {sum}");
            for d in ActDtype::ALL {
                assert_eq!(
                    d.from_f32(realistic_value(sum)),
                    d.from_f64(v),
                    "{d} sum {sum}"
                );
            }
        }
    }
}
