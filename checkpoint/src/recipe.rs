//! How a producer library computed the `y` of its oracle file (`w4a16-oracle.safetensors`), and
//! the bound its output is held to. Most producers' own GEMMs accumulate in fp32 (the default);
//! AutoAWQ's Triton GEMM (`awq_gemm_triton`) accumulates in the output dtype, fp16, and is held
//! to a bound derived from that order below (docs/check-model.md, "The oracle's y recipe").
//!
//! The oracle file says which recipe produced its y with the metadata keys `y_recipe`
//! (`fp32-accumulate` or `fp16-accumulate`) and `y_block_k` (the K tile of an fp16-accumulating
//! GEMM); without them the producer's default from [`default_recipe`] applies.

use crate::error::CheckpointError;
use crate::oracle::ORACLE_FILE;
use w4a16_reference::formats::Producer;
use w4a16_reference::{ActDtype, Activations};

pub const Y_RECIPE_KEY: &str = "y_recipe";
pub const Y_BLOCK_K_KEY: &str = "y_block_k";

/// The arithmetic a producer's GEMM used for the oracle's `y`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YRecipe {
    /// Products summed in fp32 (or wider), rounded once to the output dtype: the reference's
    /// own bound (`compare_library_output`).
    Fp32Accumulate,
    /// Per K tile of `block_k` a partial sum (fp32 inside the tile), rounded to fp16, then a
    /// running fp16 accumulator over the K / block_k tiles, each addition rounded to fp16.
    Fp16Accumulate { block_k: usize },
}

/// The one table of producers' default recipes: what their `y` is unless the oracle file says
/// otherwise. The committed fixtures' `y` is `torch.nn.functional.linear` (fp32 accumulation,
/// reduced-precision reductions off) for every producer; an AutoAWQ Triton output declares
/// `fp16-accumulate` in the file.
pub const DEFAULT_RECIPES: [(Producer, YRecipe); 5] = [
    (Producer::CompressedTensors, YRecipe::Fp32Accumulate),
    (Producer::GptqV1, YRecipe::Fp32Accumulate),
    (Producer::GptqV2, YRecipe::Fp32Accumulate),
    (Producer::Awq, YRecipe::Fp32Accumulate),
    (Producer::LegacyUnpackedZp, YRecipe::Fp32Accumulate),
];

/// `producer`'s row of [`DEFAULT_RECIPES`] (fp32 accumulation for one not listed).
pub fn default_recipe(producer: Producer) -> YRecipe {
    DEFAULT_RECIPES
        .iter()
        .find(|(p, _)| *p == producer)
        .map_or(YRecipe::Fp32Accumulate, |&(_, r)| r)
}

impl YRecipe {
    pub fn name(self) -> String {
        match self {
            YRecipe::Fp32Accumulate => "fp32-accumulate".into(),
            YRecipe::Fp16Accumulate { block_k } => format!("fp16-accumulate (block_k {block_k})"),
        }
    }

    /// The recipe the oracle file's metadata declares, `None` when it declares none.
    pub fn from_metadata(
        recipe: Option<&str>,
        block_k: Option<&str>,
    ) -> Result<Option<YRecipe>, CheckpointError> {
        let bad = |key: &str, got: &str, expected: &str| CheckpointError::OracleMetadata {
            file: ORACLE_FILE.into(),
            key: key.into(),
            got: got.into(),
            expected: expected.into(),
        };
        match recipe {
            None => Ok(None),
            Some("fp32-accumulate") => Ok(Some(YRecipe::Fp32Accumulate)),
            Some("fp16-accumulate") => {
                let text = block_k.unwrap_or("");
                match text.parse::<usize>() {
                    Ok(b) if b >= 1 => Ok(Some(YRecipe::Fp16Accumulate { block_k: b })),
                    _ => Err(bad(
                        Y_BLOCK_K_KEY,
                        text,
                        "the K tile of the fp16-accumulating GEMM, an integer ≥ 1",
                    )),
                }
            }
            Some(other) => Err(bad(
                Y_RECIPE_KEY,
                other,
                "\"fp32-accumulate\" or \"fp16-accumulate\"",
            )),
        }
    }
}

/// γ_n = n·u / (1 − n·u), the bound on n roundings' relative error (Higham, Lemma 3.1).
fn gamma(n: usize, u: f64) -> f64 {
    let nu = n as f64 * u;
    nu / (1.0 - nu)
}

/// The error bound of one output element of an fp16-accumulating GEMM over K = `k`, tile
/// `block_k`, where `a = Σ_k |x_k·w_k|` (weights as the library read them, in fp16).
///
/// Derivation, with T = ⌈K / block_k⌉ tiles, u16 = 2⁻¹¹ and u32 = 2⁻²⁴:
/// - tile t's partial sum P̃_t is summed in fp32 in any order: |P̃_t − P_t| ≤ γ_{block_k}(u32)·A_t,
///   A_t = Σ_{k ∈ t} |x_k w_k| (the fp16 products are exact in fp32);
/// - P̂_t = fl16(P̃_t) = P̃_t(1 + δ_t), |δ_t| ≤ u16; S_1 = P̂_1 and S_t = fl16(S_{t−1} + P̂_t),
///   one more factor (1 + η_t) per addition. P̂_1 carries T − 1 addition factors and its own δ,
///   P̂_t (t ≥ 2) T − t + 1 and δ_t: at most T factors each, so
///   |S_T − Σ_t P̃_t| ≤ γ_T(u16)·Σ_t |P̃_t| ≤ γ_T(u16)·(1 + γ_{block_k}(u32))·A;
/// - the relative model fails only where a rounding lands in fp16's subnormal range (an
///   addition whose result is subnormal is exact; a tile's rounding to fp16 is off by at most
///   half the subnormal spacing, 2⁻²⁵): at most T·2⁻²⁵ more.
///
/// Total: |y − Σ_k x_k w_k| ≤ (γ_T(u16)(1 + γ_{block_k}(u32)) + γ_{block_k}(u32))·A + T·2⁻²⁵.
/// The last accumulator is the output, so there is no separate output rounding.
pub fn fp16_accumulation_bound(a: f64, k: usize, block_k: usize) -> f64 {
    let tiles = k.div_ceil(block_k.max(1));
    let (u16_, u32_) = (2f64.powi(-11), 2f64.powi(-24));
    let tile = gamma(block_k, u32_);
    (gamma(tiles, u16_) * (1.0 + tile) + tile) * a + tiles as f64 * 2f64.powi(-25)
}

/// How an output held to [`fp16_accumulation_bound`] fared.
#[derive(Clone, Debug, PartialEq)]
pub struct AccumulationReport {
    pub elements: usize,
    pub over_bound: usize,
    /// max |y − exact| / bound, and where (m, n).
    pub worst_ratio: f64,
    pub worst_at: (usize, usize),
}

impl AccumulationReport {
    pub fn passed(&self) -> bool {
        self.over_bound == 0
    }
}

/// `y [M, N]` (fp16 bits) against the exact `x · wᵀ` (f64, on the fp16 weights `w [N, K]` as the
/// library read them), each element within [`fp16_accumulation_bound`]. A non-finite output is
/// over the bound.
pub fn judge_fp16_accumulated(
    x: &Activations,
    w: &[u16],
    y: &[u16],
    n: usize,
    block_k: usize,
) -> AccumulationReport {
    let k = x.k;
    let f16 = ActDtype::F16;
    let w: Vec<f64> = w.iter().map(|&b| f16.to_f64(b)).collect();
    let mut r = AccumulationReport {
        elements: x.m * n,
        over_bound: 0,
        worst_ratio: 0.0,
        worst_at: (0, 0),
    };
    for m in 0..x.m {
        let xs: Vec<f64> = (0..k).map(|c| x.get(m, c)).collect();
        for j in 0..n {
            let row = &w[j * k..(j + 1) * k];
            let exact: f64 = xs.iter().zip(row).map(|(a, b)| a * b).sum();
            let a: f64 = xs.iter().zip(row).map(|(a, b)| (a * b).abs()).sum();
            let got = f16.to_f64(y[m * n + j]);
            let ratio = (got - exact).abs() / fp16_accumulation_bound(a, k, block_k);
            let ratio = if ratio.is_nan() { f64::INFINITY } else { ratio };
            if ratio > 1.0 {
                r.over_bound += 1;
            }
            if ratio > r.worst_ratio {
                r.worst_ratio = ratio;
                r.worst_at = (m, j);
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_names_the_recipe_or_is_refused_by_key() {
        assert_eq!(YRecipe::from_metadata(None, None).unwrap(), None);
        assert_eq!(
            YRecipe::from_metadata(Some("fp16-accumulate"), Some("32")).unwrap(),
            Some(YRecipe::Fp16Accumulate { block_k: 32 })
        );
        let e = YRecipe::from_metadata(Some("fp16-accumulate"), None).unwrap_err();
        assert!(e.to_string().contains(Y_BLOCK_K_KEY), "{e}");
        let e = YRecipe::from_metadata(Some("tf32"), None).unwrap_err();
        assert!(e.to_string().contains("tf32"), "{e}");
    }

    #[test]
    fn the_bound_grows_with_the_number_of_fp16_additions() {
        // One tile: one rounding to fp16 (γ_1(u16) ≈ 2⁻¹¹) plus the fp32 tile term.
        let one = fp16_accumulation_bound(1.0, 32, 32);
        assert!(
            one > 2f64.powi(-11)
                && one < 1.01 * 2f64.powi(-11) + 32.0 * 2f64.powi(-24) * 1.01 + 2f64.powi(-25)
        );
        let eight = fp16_accumulation_bound(1.0, 256, 32);
        assert!(eight > 8.0 * 2f64.powi(-11), "{eight}");
    }
}
