//! Row padding against the cache cliff (docs/contract.md §5).

use w4a16_reference::formats::{
    PaddingRule, RowPadding, dense_row_stride_elems, weight_row_stride_bytes,
};

/// The row sizes of the upstream pad-rule tests (docs/field.md §3.4): padded iff K/2 B is a multiple of
/// 1024.
#[test]
fn weight_rows_pad_on_multiples_of_1024_bytes() {
    for row in [1024usize, 2048, 4096, 5120, 6144, 7168, 8192] {
        assert_eq!(
            weight_row_stride_bytes(2 * row, PaddingRule::CacheCliff),
            row + 128,
            "K/2 = {row}"
        );
    }
    for row in [1280usize, 1536, 2560, 4864, 9472, 12800, 256, 512] {
        assert_eq!(
            weight_row_stride_bytes(2 * row, PaddingRule::CacheCliff),
            row,
            "K/2 = {row}"
        );
    }
    // Stored strides of the upstream process-weights test.
    assert_eq!(weight_row_stride_bytes(512, PaddingRule::CacheCliff), 256);
    assert_eq!(
        weight_row_stride_bytes(8192, PaddingRule::CacheCliff),
        4096 + 128
    );
    for k in [512usize, 2048, 8192, 14336] {
        assert_eq!(weight_row_stride_bytes(k, PaddingRule::None), k / 2);
        let forced = PaddingRule::Forced {
            weight_extra_bytes: 64,
            dense_extra_elems: 8,
        };
        assert_eq!(weight_row_stride_bytes(k, forced), k / 2 + 64);
        assert_eq!(
            RowPadding::from_rule(k, forced),
            RowPadding {
                weight_extra_bytes: 64,
                scale_extra_elems: 0
            }
        );
    }
    assert_eq!(
        RowPadding::from_rule(4096, PaddingRule::CacheCliff).weight_extra_bytes,
        128
    );
    assert_eq!(
        RowPadding::from_rule(4864 * 2, PaddingRule::CacheCliff),
        RowPadding::NONE
    );
}

/// Dense cache rows: +128 B (64 two-byte elements) when K·2 B is a multiple of 2048.
#[test]
fn dense_rows_pad_on_multiples_of_2048_bytes() {
    for k in [1024usize, 2048, 3072, 4096, 14336] {
        assert_eq!(
            dense_row_stride_elems(k, PaddingRule::CacheCliff),
            k + 64,
            "K = {k}"
        );
    }
    for k in [512usize, 1536, 2560, 4864, 9728] {
        assert_eq!(
            dense_row_stride_elems(k, PaddingRule::CacheCliff),
            k,
            "K = {k}"
        );
    }
    let forced = PaddingRule::Forced {
        weight_extra_bytes: 0,
        dense_extra_elems: 8,
    };
    assert_eq!(dense_row_stride_elems(1536, forced), 1544);
    assert_eq!(dense_row_stride_elems(4096, PaddingRule::None), 4096);
}
