// fused: the prefill int4 GEMM for any M.
//
// Tiles of (BM, BN, BK = 32) with WM x WN warps; grid (ceil(N / BN), ceil(M / BM)), block
// (32 * WM * WN). The tile main loop (3-slot shared-memory rings, dequantization into shared
// memory, the 16x16x16 matrix-core MMA with fp32 accumulation) is gemm_tile.h's, shared with moe;
// here tile row r is X row m0 + r, and the epilogue stores Y.
//
// Numerics: dequantized weights rounded once to the activation dtype (exact (q - z), then one
// rounded multiply), fp32 accumulation, one cast of the accumulator to the activation dtype, then
// the bias added in the activation dtype (AfterCast, as the field's Triton path does).
// Contract: G a multiple of 32 dividing K (so K % 32 == 0), weight rows 16-byte aligned. Ragged M
// and N are masked; X rows that are not 16-byte aligned take a synchronous element-wise path.
//
// fused_carrier (this file compiled with -DW4_FUSED_CARRIER=1; kernels/src/source.rs declares the
// switch): the same tiles, with the scale and zero point of each (n, g) read from one word of the
// asymmetric carrier [N, K/G] u32 (docs/contract.md §2), rows carrier_row_stride words apart (K/G: the carrier
// is never padded); gemm_tile.h's CARRIER parameter says how the word becomes the weights.
#include "compat.h"
#include "gemm_tile.h"

using namespace w4;
using namespace w4::tile;

namespace {

template <class T, int BM, int BN, int WM, int WN, int STAGES, bool CARRIER>
W4_DEV void fused(const T* x, const uint32_t* w, const T* scales, const uint32_t* zeros, const uint32_t* carrier,
                  const T* bias, T* y, int m, int n, int k, int group, int x_row_stride, int w_row_stride_bytes,
                  int scale_row_stride, int y_row_stride) {
    if (m <= 0 || n <= 0 || k <= 0 || group <= 0) return;
    FuArgs a;
    a.x = (const u16*)x;
    a.w = w;
    a.s = (const u16*)scales;
    a.z = zeros;
    a.c = carrier;
    a.bias = (const u16*)bias;
    a.y = (u16*)y;
    a.m = m;
    a.n = n;
    a.k = k;
    a.group = group;
    a.xrs = x_row_stride;
    a.wrs = w_row_stride_bytes;
    a.srs = scale_row_stride;
    a.yrs = y_row_stride;
    a.groups = k / group;
    a.x_vec = (((u64)(const void*)x) & 15u) == 0 && (x_row_stride & 7) == 0;

    const int n0 = bid_x() * BN;
    const int m0 = bid_y() * BM;
    tile_gemm<T, BM, BN, WM, WN, STAGES, CARRIER>(
        a, m0, n0,
        [&](int r, bool& valid) {
            const int gm = m0 + r;
            valid = gm < a.m;
            return gm;
        },
        // Epilogue: one cast of the fp32 accumulator, then bias in the activation dtype.
        [&](int row, int col, float v) {
            if (row < a.m && col < a.n) {
                u16 o = Act<T>::from_f32(v);
                if (a.bias != nullptr) o = Act<T>::from_f32(Act<T>::to_f32(o) + Act<T>::to_f32(a.bias[col]));
                a.y[(long long)row * a.yrs + col] = o;
            }
        });
}

}  // namespace

#define W4_FUSED_ENTRY(NAME, T, BM, BN, WM, WN, STAGES)                                                          \
    extern "C" __global__ __launch_bounds__(WM * WN * 32) void NAME(                                            \
        const T* x, const uint32_t* w, const T* scales, const uint32_t* zeros, const T* bias, T* y, int m, int n,    \
        int k, int group, int x_row_stride, int w_row_stride_bytes, int scale_row_stride, int y_row_stride) {        \
        fused<T, BM, BN, WM, WN, STAGES, false>(x, w, scales, zeros, nullptr, bias, y, m, n, k, group,             \
                                                x_row_stride, w_row_stride_bytes, scale_row_stride, y_row_stride);  \
    }

#define W4_FUSED_CARRIER_ENTRY(NAME, T, BM, BN, WM, WN, STAGES)                                                  \
    extern "C" __global__ __launch_bounds__(WM * WN * 32) void NAME(                                            \
        const T* x, const uint32_t* w, const uint32_t* carrier, const T* bias, T* y, int m, int n, int k,          \
        int group, int x_row_stride, int w_row_stride_bytes, int carrier_row_stride, int y_row_stride) {           \
        fused<T, BM, BN, WM, WN, STAGES, true>(x, w, nullptr, nullptr, carrier, bias, y, m, n, k, group,           \
                                               x_row_stride, w_row_stride_bytes, carrier_row_stride, y_row_stride); \
    }

// The compiled tile variants (kernels/src/tiles.rs lists the same set, and its tables say which
// field rung each stands for; BK is 32 in all). WM x WN is tiles::warp_grid's. The plain name
// is the 64x64x32w4 variant. fused_carrier has the same set.
#if !defined(W4_FUSED_CARRIER)
W4_FUSED_ENTRY(w4a16_fused_f16_16x64x32w4, f16_t, 16, 64, 1, 4, 3)
W4_FUSED_ENTRY(w4a16_fused_f16_32x32x32w4, f16_t, 32, 32, 2, 2, 3)
W4_FUSED_ENTRY(w4a16_fused_f16_32x64x32w4, f16_t, 32, 64, 1, 4, 3)
W4_FUSED_ENTRY(w4a16_fused_f16_32x128x32w4, f16_t, 32, 128, 1, 4, 3)
W4_FUSED_ENTRY(w4a16_fused_f16_64x16x32w1, f16_t, 64, 16, 1, 1, 3)
W4_FUSED_ENTRY(w4a16_fused_f16_64x32x32w4, f16_t, 64, 32, 2, 2, 3)
W4_FUSED_ENTRY(w4a16_fused_f16_64x64x32w4, f16_t, 64, 64, 2, 2, 3)
W4_FUSED_ENTRY(w4a16_fused_f16_64x128x32w8, f16_t, 64, 128, 2, 4, 3)
W4_FUSED_ENTRY(w4a16_fused_f16_128x32x32w4, f16_t, 128, 32, 4, 1, 3)
W4_FUSED_ENTRY(w4a16_fused_f16_128x64x32w8, f16_t, 128, 64, 4, 2, 3)
W4_FUSED_ENTRY(w4a16_fused_f16_128x128x32w8, f16_t, 128, 128, 2, 4, 3)
W4_FUSED_ENTRY(w4a16_fused_f16, f16_t, 64, 64, 2, 2, 3)
W4_FUSED_ENTRY(w4a16_fused_bf16_16x64x32w4, bf16_t, 16, 64, 1, 4, 3)
W4_FUSED_ENTRY(w4a16_fused_bf16_32x32x32w4, bf16_t, 32, 32, 2, 2, 3)
W4_FUSED_ENTRY(w4a16_fused_bf16_32x64x32w4, bf16_t, 32, 64, 1, 4, 3)
W4_FUSED_ENTRY(w4a16_fused_bf16_32x128x32w4, bf16_t, 32, 128, 1, 4, 3)
W4_FUSED_ENTRY(w4a16_fused_bf16_64x16x32w1, bf16_t, 64, 16, 1, 1, 3)
W4_FUSED_ENTRY(w4a16_fused_bf16_64x32x32w4, bf16_t, 64, 32, 2, 2, 3)
W4_FUSED_ENTRY(w4a16_fused_bf16_64x64x32w4, bf16_t, 64, 64, 2, 2, 3)
W4_FUSED_ENTRY(w4a16_fused_bf16_64x128x32w8, bf16_t, 64, 128, 2, 4, 3)
W4_FUSED_ENTRY(w4a16_fused_bf16_128x32x32w4, bf16_t, 128, 32, 4, 1, 3)
W4_FUSED_ENTRY(w4a16_fused_bf16_128x64x32w8, bf16_t, 128, 64, 4, 2, 3)
W4_FUSED_ENTRY(w4a16_fused_bf16_128x128x32w8, bf16_t, 128, 128, 2, 4, 3)
W4_FUSED_ENTRY(w4a16_fused_bf16, bf16_t, 64, 64, 2, 2, 3)
#else
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_f16_16x64x32w4, f16_t, 16, 64, 1, 4, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_f16_32x32x32w4, f16_t, 32, 32, 2, 2, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_f16_32x64x32w4, f16_t, 32, 64, 1, 4, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_f16_32x128x32w4, f16_t, 32, 128, 1, 4, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_f16_64x16x32w1, f16_t, 64, 16, 1, 1, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_f16_64x32x32w4, f16_t, 64, 32, 2, 2, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_f16_64x64x32w4, f16_t, 64, 64, 2, 2, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_f16_64x128x32w8, f16_t, 64, 128, 2, 4, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_f16_128x32x32w4, f16_t, 128, 32, 4, 1, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_f16_128x64x32w8, f16_t, 128, 64, 4, 2, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_f16_128x128x32w8, f16_t, 128, 128, 2, 4, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_f16, f16_t, 64, 64, 2, 2, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_bf16_16x64x32w4, bf16_t, 16, 64, 1, 4, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_bf16_32x32x32w4, bf16_t, 32, 32, 2, 2, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_bf16_32x64x32w4, bf16_t, 32, 64, 1, 4, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_bf16_32x128x32w4, bf16_t, 32, 128, 1, 4, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_bf16_64x16x32w1, bf16_t, 64, 16, 1, 1, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_bf16_64x32x32w4, bf16_t, 64, 32, 2, 2, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_bf16_64x64x32w4, bf16_t, 64, 64, 2, 2, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_bf16_64x128x32w8, bf16_t, 64, 128, 2, 4, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_bf16_128x32x32w4, bf16_t, 128, 32, 4, 1, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_bf16_128x64x32w8, bf16_t, 128, 64, 4, 2, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_bf16_128x128x32w8, bf16_t, 128, 128, 2, 4, 3)
W4_FUSED_CARRIER_ENTRY(w4a16_fused_carrier_bf16, bf16_t, 64, 64, 2, 2, 3)
#endif
