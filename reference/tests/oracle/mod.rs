//! Test data and oracles generated locally (independent of the crate's data module).
#![allow(dead_code)]

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use w4a16_reference::{
    ActDtype, Activations, BiasStage, LayerShape, NumericRecipe, QuantizedLayer,
};

pub struct Case {
    pub x: Activations,
    pub layer: QuantizedLayer,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Data {
    /// x = 0.25·randn, q, z uniform, s = 0.05·U(0,1), bias = 0.1·randn.
    Realistic,
    /// Small integers, power-of-two scales, integer bias: every fp32 sum is exact.
    Exact,
    /// x = 64·randn: stresses the (128 + z)·Σx cancellation.
    LargeActivation,
    /// x and s around 1e-3: outputs near and below the fp16 smallest normal.
    Tiny,
}

#[allow(clippy::too_many_arguments)]
pub fn case(
    m: usize,
    n: usize,
    k: usize,
    group: usize,
    dtype: ActDtype,
    asym: bool,
    bias: bool,
    data: Data,
    seed: u64,
) -> Case {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let groups = k / group;
    let normal = |rng: &mut ChaCha8Rng| -> f64 { StandardNormal.sample(rng) };
    let xv: Vec<u16> = (0..m * k)
        .map(|_| {
            let v = match data {
                Data::Realistic => 0.25 * normal(&mut rng),
                Data::Exact => f64::from(rng.random_range(-3i32..=3)),
                Data::LargeActivation => 64.0 * normal(&mut rng),
                Data::Tiny => 1e-3 * normal(&mut rng),
            };
            dtype.from_f64(v)
        })
        .collect();
    let q: Vec<u8> = (0..n * k).map(|_| rng.random_range(0..=15u8)).collect();
    let zeros = asym.then(|| {
        (0..n * groups)
            .map(|_| rng.random_range(0..=15u8))
            .collect()
    });
    let scales = (0..n * groups)
        .map(|_| {
            let s = match data {
                Data::Exact => 2f64.powi(-rng.random_range(0..=4)),
                Data::Tiny => 1e-3 * rng.random::<f64>(),
                _ => 0.05 * rng.random::<f64>(),
            };
            dtype.from_f64(s)
        })
        .collect();
    let bias = bias.then(|| {
        (0..n)
            .map(|_| {
                let b = match data {
                    Data::Exact => f64::from(rng.random_range(-4i32..=4)),
                    Data::Tiny => 1e-4 * normal(&mut rng),
                    _ => 0.1 * normal(&mut rng),
                };
                dtype.from_f64(b)
            })
            .collect()
    });
    Case {
        x: Activations {
            m,
            k,
            row_stride: k,
            dtype,
            data: xv,
        },
        layer: QuantizedLayer {
            shape: LayerShape::new(n, k, group),
            dtype,
            q,
            zeros,
            scales,
            bias,
        },
    }
}

/// The oracle: a plain triple loop over the layer's own `weight(n, k)`.
pub fn naive(x: &Activations, layer: &QuantizedLayer) -> (Vec<f64>, Vec<f64>) {
    let n = layer.shape.n;
    let mut y = vec![0.0; x.m * n];
    let mut a = vec![0.0; x.m * n];
    for m in 0..x.m {
        for j in 0..n {
            let (mut s, mut t) = (layer.bias_value(j), 0.0);
            for k in 0..x.k {
                let w = layer.weight(j, k);
                s += x.get(m, k) * w;
                t += x.get(m, k).abs() * w.abs();
            }
            y[m * n + j] = s;
            a[m * n + j] = t;
        }
    }
    (y, a)
}

pub fn recipe(
    dtype: ActDtype,
    rounds: bool,
    bias: BiasStage,
    offset: Option<f64>,
) -> NumericRecipe {
    NumericRecipe {
        rounds_dequantized_weight: rounds,
        offset_accumulation: offset,
        bias,
        output: dtype,
        single_rounding: false,
        pre_rounded_bias: false,
    }
}

/// A kernel emulated on the CPU: fp32 products and recursive fp32 sums over K in a random order
/// per element (or per-group offset sums for offset recipes), then the recipe's bias and casts.
pub fn emulate(
    x: &Activations,
    layer: &QuantizedLayer,
    recipe: &NumericRecipe,
    seed: u64,
) -> Vec<u16> {
    let (n, k, group) = (layer.shape.n, layer.shape.k, layer.shape.group);
    let dtype = recipe.output;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..k).collect();
    let mut out = vec![0u16; x.m * n];
    for m in 0..x.m {
        for j in 0..n {
            let acc = if let Some(off) = recipe.offset_accumulation {
                let off = off as f32;
                let mut groups: Vec<usize> = (0..k / group).collect();
                groups.shuffle(&mut rng);
                let mut acc = 0f32;
                for g in groups {
                    let (mut dot, mut sum) = (0f32, 0f32);
                    for kk in g * group..(g + 1) * group {
                        let xv = x.get(m, kk) as f32;
                        dot += xv * (off + f32::from(layer.code(j, kk)));
                        sum += xv;
                    }
                    let zb = off + f32::from(layer.zero(j, g));
                    acc += (dot - zb * sum) * layer.scale(j, g) as f32;
                }
                acc
            } else {
                order.shuffle(&mut rng);
                let mut acc = 0f32;
                for &kk in &order {
                    let w = layer.weight(j, kk);
                    let w = if recipe.rounds_dequantized_weight {
                        dtype.to_f32(dtype.from_f64(w))
                    } else {
                        w as f32
                    };
                    acc += x.get(m, kk) as f32 * w;
                }
                acc
            };
            let b = layer.bias_value(j) as f32;
            out[m * n + j] = match (layer.bias.is_some(), recipe.bias) {
                (false, _) => dtype.from_f32(acc),
                (true, BiasStage::BeforeCast) => dtype.from_f32(acc + b),
                (true, BiasStage::AfterCast | BiasStage::Either) => {
                    dtype.from_f32(dtype.to_f32(dtype.from_f32(acc)) + b)
                }
            };
        }
    }
    out
}

/// The correctly rounded reference as output bits.
pub fn rounded(reference: &w4a16_reference::gemm::Reference) -> Vec<u16> {
    reference
        .y
        .iter()
        .map(|&v| reference.dtype.from_f64(v))
        .collect()
}
