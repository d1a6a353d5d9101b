//! Where a kernel rounds: the reference reads this to derive each kernel's bound (docs/contract.md §6).

use crate::dtype::ActDtype;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BiasStage {
    /// Bias added to the fp32 accumulator, then a single cast (HIP skinny path).
    BeforeCast,
    /// Accumulator cast first, bias added in the activation dtype (Triton-style fused path).
    AfterCast,
    /// Either of the two, chosen by the implementation per call: a vendor BLAS's epilogue
    /// (`beta = 1` on an output pre-filled with the bias) is not specified, and cuBLAS on sm_90
    /// does both, depending on the shape. The bound takes the looser of the two per term;
    /// bit-exact checks accept either result.
    Either,
}

/// A kernel's numeric recipe. Declared once per kernel; the bound follows from it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct NumericRecipe {
    /// Dequantized weights `(q − z)·s` are rounded to the activation dtype before the multiply
    /// (matrix-core paths). Adds `u_w · a` to the bound.
    pub rounds_dequantized_weight: bool,
    /// The kernel accumulates `Σ x·(offset + q)` and subtracts `(offset + z)·Σ x` afterwards (the
    /// bf16 `0x4300` variant, offset 128). The bound then uses the offset magnitude
    /// `Σ |x|·|s|·(2·offset + q + z)` in place of `a` for the accumulation term.
    pub offset_accumulation: Option<f64>,
    pub bias: BiasStage,
    /// The output dtype (the activation dtype of the case).
    pub output: ActDtype,
    /// The kernel's result is exact by construction when the data are (the dequant kernel).
    pub single_rounding: bool,
    /// The dequantized weight is formed as `q·s + bias_eff` with `bias_eff = −z·s` rounded to
    /// the activation dtype beforehand (the fp16 asymmetric carrier, docs/field.md §6 item 9), then
    /// rounded again, by one FMA or by a rounded multiply and a rounded add (the bound covers
    /// both). Not bit-exact against `(q − z)·s`: the bound then needs the carrier magnitude
    /// `Σ|x|·|s|·(q + z)` (the offset magnitude at offset 0) in place of `a` for `A`.
    /// Requires `rounds_dequantized_weight`, excludes `offset_accumulation`, and takes finite X
    /// only (under an FMA, w = 0 becomes a rounding residue, so `Inf·ŵ` has no single value).
    #[serde(default)]
    pub pre_rounded_bias: bool,
}

impl NumericRecipe {
    /// fp32 accumulation of exact dequantized weights, bias in fp32, one cast: the tightest
    /// recipe, used by skinny and fallback.
    pub fn fp32_exact_weights(output: ActDtype) -> Self {
        NumericRecipe {
            rounds_dequantized_weight: false,
            offset_accumulation: None,
            bias: BiasStage::BeforeCast,
            output,
            single_rounding: false,
            pre_rounded_bias: false,
        }
    }

    /// A dequantize-then-matmul library (compressed-tensors `decompress`, then torch's
    /// `F.linear`): the weights are already rounded to the activation dtype, which the
    /// reference models ([`crate::gemm::WeightRounding::ToActivationDtype`]), so the bound is
    /// fp32 accumulation `γ_K·a` plus one output rounding `u_out·|y|`; where the library adds the
    /// bias (fp32 epilogue or after the cast) is its BLAS's choice, so either.
    pub fn dequantize_then_matmul(output: ActDtype) -> Self {
        NumericRecipe {
            rounds_dequantized_weight: false,
            offset_accumulation: None,
            bias: BiasStage::Either,
            output,
            single_rounding: false,
            pre_rounded_bias: false,
        }
    }

    /// The offset of the extra magnitude lane the reference computes for this recipe
    /// (`Σ|x|·|s|·(2·offset + q + z)`): the accumulation offset, or 0 for the pre-rounded bias
    /// (`Σ|x|·|s|·(q + z)`); `None` when the bound needs only `a`.
    pub fn magnitude_offset(&self) -> Option<f64> {
        self.offset_accumulation
            .or(self.pre_rounded_bias.then_some(0.0))
    }
}
