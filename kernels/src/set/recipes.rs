//! The numeric recipe of each kernel: where it rounds, how it accumulates, where the bias goes
//! (docs/contract.md §4.1). The bound model of every check is derived from these.

use w4a16_reference::{ActDtype, BiasStage, NumericRecipe};

pub(super) fn exact_weights_recipe(dtype: ActDtype) -> NumericRecipe {
    NumericRecipe::fp32_exact_weights(dtype)
}

/// Weights rounded to the activation dtype before the matrix multiply, fp32 accumulation, one
/// cast, then the bias added in the activation dtype (the field's Triton prefill path).
pub(super) fn fused_recipe(dtype: ActDtype) -> NumericRecipe {
    NumericRecipe {
        rounds_dequantized_weight: true,
        offset_accumulation: None,
        bias: BiasStage::AfterCast,
        output: dtype,
        single_rounding: false,
        pre_rounded_bias: false,
    }
}

/// fused's recipe; on fp16 layers the weight is `q·s + bias_eff` with the bias pre-rounded in the
/// carrier (FMA or mul+add: the bound covers both). bf16 carriers hold the raw z, so bf16 is
/// fused's recipe exactly.
pub(super) fn fused_carrier_recipe(dtype: ActDtype) -> NumericRecipe {
    NumericRecipe {
        pre_rounded_bias: dtype == ActDtype::F16,
        ..fused_recipe(dtype)
    }
}

/// The dense copy holds round((q - z) * s): one rounding of an exact product.
pub(super) fn dequant_recipe(dtype: ActDtype) -> NumericRecipe {
    NumericRecipe {
        rounds_dequantized_weight: true,
        offset_accumulation: None,
        bias: BiasStage::BeforeCast,
        output: dtype,
        single_rounding: true,
        pre_rounded_bias: false,
    }
}

/// `moe_align` moves integers only: its outputs are exact and are checked entry by entry, never
/// against a bound (this recipe says so, for uniformity).
pub(super) fn moe_align_recipe(dtype: ActDtype) -> NumericRecipe {
    NumericRecipe {
        rounds_dequantized_weight: false,
        offset_accumulation: None,
        bias: BiasStage::BeforeCast,
        output: dtype,
        single_rounding: true,
        pre_rounded_bias: false,
    }
}

/// The vendor GEMM on the rounded copy with fp32 compute; the bias enters as `beta = 1` on an
/// output pre-filled with it. The vendor does not say where its epilogue rounds, and on sm_90
/// cuBLAS does both: the first H200 run had 40 exact-class bias cases that round the product
/// before adding C, and the GPU shape fuzzer then shrank to one (K = 2688, N = 24, M = 3, fp16,
/// `cases/regressions.toml`) that rounds once. Both hold with reduced-precision reduction
/// disallowed (checked on the H200: declaring `BeforeCast` fails those 40, `AfterCast` fails the
/// regression), so the bias stage is declared `Either`.
pub(super) fn dense_recipe(dtype: ActDtype) -> NumericRecipe {
    NumericRecipe {
        rounds_dequantized_weight: true,
        offset_accumulation: None,
        bias: BiasStage::Either,
        output: dtype,
        single_rounding: false,
        pre_rounded_bias: false,
    }
}
