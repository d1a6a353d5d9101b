// fallback: the plain, obviously correct dequant GEMM; the second opinion for every fast kernel
// and the selection's last resort. Accepts every shape the formats allow: any G that divides K
// (channelwise G = K and G = 256 included), any M, runtime strides.
//
//   y[m, n] = round( sum_k x[m, k] * ((q[n, k] - z) * s)  (+ bias[n]) )
//
// One thread per output column and up to FB_ROWS rows of X (a ragged M's last block takes the
// rows that are left in at most three passes, of 4, 2 and 1 rows): in a pass each weight
// (q - z) * s, exact in fp32, is decoded once and feeds the sums of its column's rows. Each sum
// runs in k order with one fp32 fused multiply-add per element, as if the thread had only that
// output, so the bits do not depend on how many rows share a pass; bias is added in fp32 before
// the single cast.
// Why rows per thread: one row per thread decoded every weight M times, and the differential
// suites on large layers spent most of their device time here. Why 4 + 2 + 1: a short block's
// rows one at a time made M below FB_ROWS a serial loop (M = 4 took four times M = 1's time on
// the H100); three widths are reached by every suite's M % 8 (a width of its own for each of
// 1..7 would leave 7 to cases above the ISA emulator's budget).
// Launch: grid (ceil(M / FB_ROWS) * ceil(N / 128)), block 128.
#include "compat.h"

using namespace w4;

#define FB_THREADS 128
#define FB_ROWS 8

namespace {

// The R sums of column `col` against R rows of X (the first at `xr`, `xs` elements apart), each in
// k order with one fp32 fused multiply-add per element; every weight is decoded once for all R.
template <class T, int R>
W4_DEV void column_sums(const u16* xr, long long xs, const u32* wr, const T* scales, const uint32_t* zeros, int col,
                        int k, int group, int scale_row_stride, float (&acc)[R]) {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.f;
    const int groups = k / group;
    for (int g = 0; g < groups; ++g) {
        const float s = Act<T>::to_f32(((const u16*)scales)[(long long)col * scale_row_stride + g]);
        const float z = (float)zero_point(zeros, col, g, groups);
        for (int kk = g * group; kk < (g + 1) * group; ++kk) {
            const int e = kk & 7;
            const u32 q = (wr[kk >> 3] >> ((e & 1) * 16 + (e >> 1) * 4)) & 15u;
            const float wv = ((float)q - z) * s;
#pragma unroll
            for (int r = 0; r < R; ++r) acc[r] = fma_f32(Act<T>::to_f32(xr[r * xs + kk]), wv, acc[r]);
        }
    }
}

// One pass over K for R rows from row0 (R a compile-time width: no per-row branch inside the k
// loop, no sums for rows that do not exist), each sum to `store`.
template <class T, int R, class Store>
W4_DEV void block_rows(const u16* xr, long long xs, const u32* wr, const T* scales, const uint32_t* zeros, int col,
                       int k, int group, int scale_row_stride, int row0, Store store) {
    float acc[R];
    column_sums<T, R>(xr, xs, wr, scales, zeros, col, k, group, scale_row_stride, acc);
#pragma unroll
    for (int r = 0; r < R; ++r) store(row0 + r, acc[r]);
}

template <class T>
W4_DEV void fallback(const T* x, const uint32_t* w, const T* scales, const uint32_t* zeros, const T* bias, T* y, int m,
                     int n, int k, int group, int x_row_stride, int w_row_stride_bytes, int scale_row_stride,
                     int y_row_stride) {
    if (m <= 0 || n <= 0 || group <= 0) return;
    const int nblocks = (n + FB_THREADS - 1) / FB_THREADS;
    const int row0 = (bid_x() / nblocks) * FB_ROWS;
    const int col = (bid_x() % nblocks) * FB_THREADS + tid_x();
    if (row0 >= m || col >= n) return;
    const long long xs = x_row_stride;  // elements from one row of X to the next
    const u16* xr = (const u16*)x + row0 * xs;
    const u32* wr = (const u32*)((const char*)w + (long long)col * w_row_stride_bytes);
    // One cast of each sum after the bias (added in fp32, only where there is one).
    auto store = [&](int row, float acc) {
        if (bias != nullptr) acc += Act<T>::to_f32(((const u16*)bias)[col]);
        ((u16*)y)[(long long)row * y_row_stride + col] = Act<T>::from_f32(acc);
    };
    // The block's rows: FB_ROWS in one pass; what is left of a ragged M (1 to 7 rows) in passes
    // of 4, 2 and 1 rows, at most three.
    static_assert(FB_ROWS == 8, "a ragged block's rows are taken as 4 + 2 + 1");
    int left = m - row0;
    if (left >= FB_ROWS) {
        block_rows<T, FB_ROWS>(xr, xs, wr, scales, zeros, col, k, group, scale_row_stride, row0, store);
        return;
    }
    int row = row0;
    if (left >= 4) {
        block_rows<T, 4>(xr, xs, wr, scales, zeros, col, k, group, scale_row_stride, row, store);
        row += 4;
        left -= 4;
    }
    if (left >= 2) {
        block_rows<T, 2>(xr + (row - row0) * xs, xs, wr, scales, zeros, col, k, group, scale_row_stride, row, store);
        row += 2;
        left -= 2;
    }
    if (left >= 1) {
        block_rows<T, 1>(xr + (row - row0) * xs, xs, wr, scales, zeros, col, k, group, scale_row_stride, row, store);
    }
}

}  // namespace

#define W4_FALLBACK_ENTRY(NAME, T)                                                                                \
    extern "C" __global__ __launch_bounds__(FB_THREADS) void NAME(                                              \
        const T* x, const uint32_t* w, const T* scales, const uint32_t* zeros, const T* bias, T* y, int m, int n,    \
        int k, int group, int x_row_stride, int w_row_stride_bytes, int scale_row_stride, int y_row_stride) {        \
        fallback<T>(x, w, scales, zeros, bias, y, m, n, k, group, x_row_stride, w_row_stride_bytes, scale_row_stride, \
                    y_row_stride);                                                                               \
    }

W4_FALLBACK_ENTRY(w4a16_fallback_f16, f16_t)
W4_FALLBACK_ENTRY(w4a16_fallback_bf16, bf16_t)
