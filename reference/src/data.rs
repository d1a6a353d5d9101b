//! Seeded data keyed by the case id (DESIGN rule 10): the same id gives the same tensors on
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
use crate::layer::{Activations, LayerShape, QuantizedLayer, SYMMETRIC_ZERO, Symmetry};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};
use std::fmt;

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
}

fn rng(seed: u64, stream: Stream) -> ChaCha8Rng {
    let mut state = seed;
    let mut key = [0u8; 32];
    for chunk in key.chunks_exact_mut(8) {
        chunk.copy_from_slice(&splitmix64(&mut state).to_le_bytes());
    }
    let mut r = ChaCha8Rng::from_seed(key);
    r.set_stream(stream as u64);
    r
}

/// Uniform in (0, 1]: a scale drawn from it is never zero before rounding.
fn uniform_open0(r: &mut ChaCha8Rng) -> f64 {
    ((r.next_u64() >> 11) + 1) as f64 * 2f64.powi(-53)
}

/// Irwin–Hall approximation of a standard normal (see the module doc): twelve 16-bit uniforms
/// summed as integers, then one exact scaling.
fn randn(r: &mut ChaCha8Rng) -> f64 {
    let lanes = |w: u64| (w & 0xffff) + ((w >> 16) & 0xffff) + ((w >> 32) & 0xffff) + (w >> 48);
    let sum = lanes(r.next_u64()) + lanes(r.next_u64()) + lanes(r.next_u64());
    sum as f64 * 2f64.powi(-16) - 6.0
}

fn code(r: &mut ChaCha8Rng) -> u8 {
    (r.next_u32() >> 28) as u8
}

/// Integer in `0..count` (multiply-shift; the bias of at most count/2³² does not matter here).
fn below(r: &mut ChaCha8Rng, count: u32) -> u32 {
    ((u64::from(r.next_u32()) * u64::from(count)) >> 32) as u32
}

/// What the tensors of a case look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataClass {
    /// x ∈ {−2..2}, scales 2^-e with e ∈ {7..10}, bias i·2⁻⁷ with |i| ≤ 64: every fp32 partial
    /// sum, in any order and any split, is exact (see [`EXACT_MAX_K`]).
    Exact,
    /// x = 0.25·randn, q and z uniform 0..15, s = 0.05·U(0,1], bias = 0.1·randn.
    Realistic,
    /// As realistic but x = 64 + 64·randn (|x| ≤ 448): the positive mean makes each group's Σx
    /// about 64·G, so the bf16 form that subtracts (128 + z)·Σx after the dot cancels two
    /// large terms.
    LargeActivation,
    /// x = 1 and every dequantized weight = 1 (s = 1, q = z + 1); bias = 1.
    Ones,
    /// Realistic values, but X is zero except its last row (m = M−1) and W is zero (q = z)
    /// except its last row (n = N−1): only Y[M−1, N−1] (plus bias) is non-zero, so M and N
    /// tails that read or write the wrong row show.
    LastRow,
    /// Realistic values, but X is zero except its last column (k = K−1): the reduction tail,
    /// the last group and the last nibble of the last word decide the whole result.
    LastCol,
}

impl DataClass {
    pub const ALL: [DataClass; 6] = [
        DataClass::Exact,
        DataClass::Realistic,
        DataClass::LargeActivation,
        DataClass::Ones,
        DataClass::LastRow,
        DataClass::LastCol,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DataClass::Exact => "exact",
            DataClass::Realistic => "realistic",
            DataClass::LargeActivation => "large-activation",
            DataClass::Ones => "ones",
            DataClass::LastRow => "last-row",
            DataClass::LastCol => "last-col",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        DataClass::ALL.into_iter().find(|c| c.name() == s)
    }
}

impl fmt::Display for DataClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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
    let mut rx = rng(seed, Stream::Activations);
    let mut x: Vec<u16> = (0..m * k)
        .map(|_| match class {
            DataClass::Exact => bits(f64::from(below(&mut rx, 5)) - 2.0),
            DataClass::LargeActivation => bits(64.0 + 64.0 * randn(&mut rx)),
            DataClass::Ones => bits(1.0),
            _ => bits(0.25 * randn(&mut rx)),
        })
        .collect();
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
