//! The argument lists of the kernel set: they ARE the launch ABI (ARCHITECTURE.md rule 1). The
//! HIP sources, launch packing, validation and the code-object checks all follow them.

use crate::decl::{ArgDecl, ArgKind, ScalarArg, TensorRole};

pub(super) const fn ptr(name: &'static str, role: TensorRole) -> ArgDecl {
    ArgDecl {
        name,
        kind: ArgKind::Pointer {
            role,
            writes: false,
            nullable: false,
        },
    }
}
const fn opt_ptr(name: &'static str, role: TensorRole) -> ArgDecl {
    ArgDecl {
        name,
        kind: ArgKind::Pointer {
            role,
            writes: false,
            nullable: true,
        },
    }
}
const fn out_ptr(name: &'static str, role: TensorRole) -> ArgDecl {
    ArgDecl {
        name,
        kind: ArgKind::Pointer {
            role,
            writes: true,
            nullable: false,
        },
    }
}
pub(super) const fn int(name: &'static str, s: ScalarArg) -> ArgDecl {
    ArgDecl {
        name,
        kind: ArgKind::I32(s),
    }
}

/// `skinny`, `fused` and `fallback` share one GEMM signature:
/// `(x, w, scales, zeros?, bias?, y, m, n, k, group, x_row_stride, w_row_stride_bytes,
///   scale_row_stride, y_row_stride)`; zero points are contiguous `[N/8, K/G]` (the fallback
///   also takes `[ceil(N/8), K/G]`, `ContractDecl::packed_zero_points_any_n`).
pub static GEMM_ARGS: [ArgDecl; 14] = [
    ptr("x", TensorRole::X),
    ptr("w", TensorRole::Weights),
    ptr("scales", TensorRole::Scales),
    opt_ptr("zeros", TensorRole::Zeros),
    opt_ptr("bias", TensorRole::Bias),
    out_ptr("y", TensorRole::Y),
    int("m", ScalarArg::M),
    int("n", ScalarArg::N),
    int("k", ScalarArg::K),
    int("group", ScalarArg::Group),
    int("x_row_stride", ScalarArg::XRowStride),
    int("w_row_stride_bytes", ScalarArg::WeightRowStrideBytes),
    int("scale_row_stride", ScalarArg::ScaleRowStride),
    int("y_row_stride", ScalarArg::YRowStride),
];

/// `fused_carrier`: GEMM_ARGS with the scales and zero points replaced by the carrier and its row
/// stride: `(x, w, carrier, bias?, y, m, n, k, group, x_row_stride, w_row_stride_bytes,
/// carrier_row_stride, y_row_stride)`; the carrier is `[N, K/G]` u32, rows exactly K/G apart.
pub static FUSED_CARRIER_ARGS: [ArgDecl; 13] = [
    ptr("x", TensorRole::X),
    ptr("w", TensorRole::Weights),
    ptr("carrier", TensorRole::Carrier),
    opt_ptr("bias", TensorRole::Bias),
    out_ptr("y", TensorRole::Y),
    int("m", ScalarArg::M),
    int("n", ScalarArg::N),
    int("k", ScalarArg::K),
    int("group", ScalarArg::Group),
    int("x_row_stride", ScalarArg::XRowStride),
    int("w_row_stride_bytes", ScalarArg::WeightRowStrideBytes),
    int("carrier_row_stride", ScalarArg::CarrierRowStride),
    int("y_row_stride", ScalarArg::YRowStride),
];

/// `dequant`: `(w, scales, zeros?, out, n, k, group, w_row_stride_bytes, scale_row_stride,
/// out_row_stride)`.
pub static DEQUANT_ARGS: [ArgDecl; 10] = [
    ptr("w", TensorRole::Weights),
    ptr("scales", TensorRole::Scales),
    opt_ptr("zeros", TensorRole::Zeros),
    out_ptr("out", TensorRole::Dense),
    int("n", ScalarArg::N),
    int("k", ScalarArg::K),
    int("group", ScalarArg::Group),
    int("w_row_stride_bytes", ScalarArg::WeightRowStrideBytes),
    int("scale_row_stride", ScalarArg::ScaleRowStride),
    int("out_row_stride", ScalarArg::DenseRowStride),
];

/// `dense` runs in the vendor BLAS: `Y = X · Denseᵀ` with a leading dimension per operand
/// (`ldb`, `lda`, `ldc` of the column-major call). Declared for validation only; it has no HIP
/// entry point.
pub static DENSE_ARGS: [ArgDecl; 10] = [
    ptr("x", TensorRole::X),
    ptr("dense", TensorRole::Dense),
    opt_ptr("bias", TensorRole::Bias),
    out_ptr("y", TensorRole::Y),
    int("m", ScalarArg::M),
    int("n", ScalarArg::N),
    int("k", ScalarArg::K),
    int("x_row_stride", ScalarArg::XRowStride),
    int("dense_row_stride", ScalarArg::DenseRowStride),
    int("y_row_stride", ScalarArg::YRowStride),
];

/// `moe_align`: `(topk_ids, expert_map?, sorted_token_ids, expert_ids, num_tokens_post_padded,
/// slots, experts, block_m, sorted_capacity)`. The outputs hold `sorted_capacity` and
/// `sorted_capacity / block_m` entries and one ([`moe_align_capacity`]).
pub static MOE_ALIGN_ARGS: [ArgDecl; 9] = [
    ptr("topk_ids", TensorRole::TopkIds),
    opt_ptr("expert_map", TensorRole::ExpertMap),
    out_ptr("sorted_token_ids", TensorRole::SortedTokenIds),
    out_ptr("expert_ids", TensorRole::ExpertIds),
    out_ptr("num_tokens_post_padded", TensorRole::TokensPostPadded),
    int("slots", ScalarArg::Slots),
    int("experts", ScalarArg::Experts),
    int("block_m", ScalarArg::BlockM),
    int("sorted_capacity", ScalarArg::SortedCapacity),
];

/// `moe`: `(x, w, scales, zeros?, topk_weights?, sorted_token_ids, expert_ids,
/// num_tokens_post_padded, y, slots, top_k, n, k, group, x_row_stride, w_row_stride_bytes,
/// scale_row_stride, y_row_stride)`. The weights, scales and zero points are stacked per local
/// expert, the expert strides derived from the row strides (N rows each; N/8·K/G words of zero
/// points); `y` is C `[slots, N]`; a null `topk_weights` skips the routed-weight multiply.
pub static MOE_ARGS: [ArgDecl; 18] = [
    ptr("x", TensorRole::X),
    ptr("w", TensorRole::Weights),
    ptr("scales", TensorRole::Scales),
    opt_ptr("zeros", TensorRole::Zeros),
    opt_ptr("topk_weights", TensorRole::TopkWeights),
    ptr("sorted_token_ids", TensorRole::SortedTokenIds),
    ptr("expert_ids", TensorRole::ExpertIds),
    ptr("num_tokens_post_padded", TensorRole::TokensPostPadded),
    out_ptr("y", TensorRole::Y),
    int("slots", ScalarArg::Slots),
    int("top_k", ScalarArg::TopK),
    int("n", ScalarArg::N),
    int("k", ScalarArg::K),
    int("group", ScalarArg::Group),
    int("x_row_stride", ScalarArg::XRowStride),
    int("w_row_stride_bytes", ScalarArg::WeightRowStrideBytes),
    int("scale_row_stride", ScalarArg::ScaleRowStride),
    int("y_row_stride", ScalarArg::YRowStride),
];
