//! Row strides of the resident weights, the dense cache and the activation rows the fused path
//! copies (docs/contract.md §5, cache-cliff padding). Padding changes strides, never logical shapes.

use w4a16_kernels::{KernelId, Target};
use w4a16_reference::ActDtype;
use w4a16_reference::formats::{
    PaddingRule, dense_row_stride_elems, layout::CACHE_CLIFF_PAD_BYTES,
};

use w4a16_cases::RowPadding;

/// The reference layout's rule for a case's padding on a target: the case files say "the
/// target's default", the layout needs the concrete rule. Forced padding adds the cliff pad to
/// every weight row and every dense row (2-byte elements).
pub fn padding_rule(target: Target, padding: RowPadding) -> PaddingRule {
    match padding {
        RowPadding::None => PaddingRule::None,
        RowPadding::CacheCliff if target.pads_cache_cliff() => PaddingRule::CacheCliff,
        RowPadding::CacheCliff => PaddingRule::None,
        RowPadding::Forced => PaddingRule::Forced {
            weight_extra_bytes: CACHE_CLIFF_PAD_BYTES,
            dense_extra_elems: CACHE_CLIFF_PAD_BYTES / 2,
        },
    }
}

/// Bytes between rows of the int4 weights `[N, K/2]` (u8 view).
pub fn weight_row_stride_bytes(target: Target, k: usize, padding: RowPadding) -> usize {
    w4a16_reference::formats::weight_row_stride_bytes(k, padding_rule(target, padding))
}

/// Elements between rows of the dense cache `[N, K_pad]` in the activation dtype (both dtypes
/// are 2 bytes wide, which the reference's rule assumes).
pub fn dense_row_stride(target: Target, k: usize, dtype: ActDtype, padding: RowPadding) -> usize {
    debug_assert_eq!(dtype.size_bytes(), 2);
    dense_row_stride_elems(k, padding_rule(target, padding))
}

/// Elements between rows of X where the engine copies X per call (the fused path,
/// docs/contract.md §5). X rows are 2-byte elements like the dense cache's, so the copy is padded
/// by the same rule: `+128 B` when the row `K·2` bytes is a multiple of 2048 on the gfx11 cache
/// cliff; forced padding adds the same to every row on every target.
pub fn activation_row_stride(
    target: Target,
    k: usize,
    dtype: ActDtype,
    padding: RowPadding,
) -> usize {
    dense_row_stride(target, k, dtype, padding)
}

/// Whether a kernel gets X as the engine's per-call copy (laid out by
/// [`activation_row_stride`]) rather than as the caller's tensor: the fused kernel (and
/// fused_carrier, the same kernel on the carrier).
pub fn copies_x(kernel: KernelId) -> bool {
    matches!(kernel, KernelId::Fused | KernelId::FusedCarrier)
}

/// X's row stride on a selected path: the activation-row rule where the path copies X, the
/// caller's unpadded rows otherwise.
pub fn x_row_stride_on_path(
    target: Target,
    path: &[KernelId],
    k: usize,
    dtype: ActDtype,
    padding: RowPadding,
) -> usize {
    if path.iter().any(|&kernel| copies_x(kernel)) {
        activation_row_stride(target, k, dtype, padding)
    } else {
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfx1151_pads_activation_rows_on_2048_byte_multiples() {
        // K·2 = 2048 and 8192 B: +128 B = +64 elements; K·2 = 2560 B: no pad.
        for dtype in ActDtype::ALL {
            let s = |k| activation_row_stride(Target::Gfx1151, k, dtype, RowPadding::CacheCliff);
            assert_eq!(s(1024), 1024 + 64, "{dtype:?}");
            assert_eq!(s(4096), 4096 + 64, "{dtype:?}");
            assert_eq!(s(1280), 1280, "{dtype:?}");
            assert_eq!(s(1536), 1536, "{dtype:?}");
            assert_eq!(s(9728), 9728, "{dtype:?}");
        }
        // Other targets pad nothing by default; forced pads everywhere; none never.
        for t in [Target::Sm90, Target::Gfx1201, Target::Gfx942] {
            assert_eq!(
                activation_row_stride(t, 4096, ActDtype::F16, RowPadding::CacheCliff),
                4096,
                "{t}"
            );
        }
        assert_eq!(
            activation_row_stride(Target::Sm90, 1280, ActDtype::Bf16, RowPadding::Forced),
            1280 + 64
        );
        assert_eq!(
            activation_row_stride(Target::Gfx1151, 4096, ActDtype::F16, RowPadding::None),
            4096
        );
    }

    #[test]
    fn only_the_fused_path_copies_x() {
        let on = |path: &[KernelId]| {
            x_row_stride_on_path(
                Target::Gfx1151,
                path,
                4096,
                ActDtype::F16,
                RowPadding::CacheCliff,
            )
        };
        assert_eq!(on(&[KernelId::Fused]), 4096 + 64);
        assert_eq!(on(&[KernelId::Skinny]), 4096);
        assert_eq!(on(&[KernelId::Dequant, KernelId::Dense]), 4096);
        assert_eq!(on(&[KernelId::Fallback]), 4096);
    }

    #[test]
    fn gfx1151_pads_weight_rows_on_1024_byte_multiples_only() {
        // docs/field.md §3.4: row bytes 1024, 2048, 4096, 5120, 6144, 7168, 8192 pad; 1280, 1536, 2560,
        // 4864, 9472, 12800 do not.
        for bytes in [1024, 2048, 4096, 5120, 6144, 7168, 8192] {
            let s = weight_row_stride_bytes(Target::Gfx1151, bytes * 2, RowPadding::CacheCliff);
            assert_eq!(s, bytes + 128, "{bytes} B rows");
        }
        for bytes in [1280, 1536, 2560, 4864, 9472, 12800] {
            let s = weight_row_stride_bytes(Target::Gfx1151, bytes * 2, RowPadding::CacheCliff);
            assert_eq!(s, bytes, "{bytes} B rows");
        }
        // K = 512 → 256 B; K = 8192 → 4096 + 128 B (docs/field.md §5, stored stride test).
        assert_eq!(
            weight_row_stride_bytes(Target::Gfx1151, 512, RowPadding::CacheCliff),
            256
        );
        assert_eq!(
            weight_row_stride_bytes(Target::Gfx1151, 8192, RowPadding::CacheCliff),
            4096 + 128
        );
    }

    #[test]
    fn only_gfx11_pads_by_default_but_forced_pads_everywhere() {
        for t in Target::ALL {
            let cliff = weight_row_stride_bytes(t, 4096, RowPadding::CacheCliff);
            assert_eq!(cliff, if t.is_gfx11() { 2048 + 128 } else { 2048 }, "{t}");
            assert_eq!(
                weight_row_stride_bytes(t, 4096, RowPadding::Forced),
                2048 + 128,
                "{t}"
            );
            assert_eq!(
                weight_row_stride_bytes(t, 4096, RowPadding::None),
                2048,
                "{t}"
            );
        }
    }

    #[test]
    fn dense_rows_pad_on_2048_byte_multiples() {
        // K = 1024 → 2048 B rows: +128 B = +64 elements on gfx11.
        assert_eq!(
            dense_row_stride(Target::Gfx1100, 1024, ActDtype::F16, RowPadding::CacheCliff),
            1024 + 64
        );
        assert_eq!(
            dense_row_stride(
                Target::Gfx1100,
                1536,
                ActDtype::Bf16,
                RowPadding::CacheCliff
            ),
            1536
        );
        assert_eq!(
            dense_row_stride(Target::Gfx1201, 1024, ActDtype::F16, RowPadding::CacheCliff),
            1024
        );
        assert_eq!(
            dense_row_stride(Target::Sm90, 1024, ActDtype::F16, RowPadding::Forced),
            1024 + 64
        );
    }
}
