//! The kernel set, one declaration per kernel. The argument lists below ARE the launch ABI:
//! the HIP sources, launch packing, validation and the code-object checks all follow them.

use crate::decl::{ArgDecl, ArgKind, ScalarArg, TensorRole};

const fn ptr(name: &'static str, role: TensorRole) -> ArgDecl {
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
const fn int(name: &'static str, s: ScalarArg) -> ArgDecl {
    ArgDecl {
        name,
        kind: ArgKind::I32(s),
    }
}

/// `skinny`, `fused` and `fallback` share one GEMM signature:
/// `(x, w, scales, zeros?, bias?, y, m, n, k, group, x_row_stride, w_row_stride_bytes,
///   scale_row_stride, y_row_stride)`; zero points are contiguous `[N/8, K/G]`.
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

/// `dense` runs in the vendor BLAS: `Y = X · Denseᵀ` with a padded leading dimension. Declared
/// for validation only; it has no HIP entry point.
pub static DENSE_ARGS: [ArgDecl; 7] = [
    ptr("x", TensorRole::X),
    ptr("dense", TensorRole::Dense),
    out_ptr("y", TensorRole::Y),
    int("m", ScalarArg::M),
    int("n", ScalarArg::N),
    int("k", ScalarArg::K),
    int("dense_row_stride", ScalarArg::DenseRowStride),
];

/// Entry-point names: `w4a16_<kernel>_<f16|bf16>`, `extern "C"` in the HIP sources.
pub fn entry_name(kernel: crate::KernelId, dtype: w4a16_reference::ActDtype) -> String {
    format!("w4a16_{}_{}", kernel.name(), dtype.name())
}
