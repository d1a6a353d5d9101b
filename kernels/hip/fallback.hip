// fallback: the plain, obviously correct dequant GEMM; the second opinion for every fast kernel
// and the selection's last resort. Accepts every shape the formats allow: any G that divides K
// (channelwise G = K and G = 256 included), any M, runtime strides.
//
//   y[m, n] = round( sum_k x[m, k] * ((q[n, k] - z) * s)  (+ bias[n]) )
//
// One thread per output column and FB_ROWS rows of X: each weight (q - z) * s, exact in fp32, is
// decoded once and feeds the FB_ROWS sums of its column (the rows past M are skipped). Each sum
// runs in k order with one fp32 fused multiply-add per element, as if the thread had only that
// output, so the bits do not depend on FB_ROWS; bias is added in fp32 before the single cast.
// Why rows per thread: one row per thread decoded every weight M times, and the differential
// suites on large layers spent most of their device time here.
// Launch: grid (ceil(M / FB_ROWS) * ceil(N / 128)), block 128.
#include "compat.h"

using namespace w4;

#define FB_THREADS 128
#define FB_ROWS 8

namespace {

template <class T>
W4_DEV void fallback(const T* x, const uint32_t* w, const T* scales, const uint32_t* zeros, const T* bias, T* y, int m,
                     int n, int k, int group, int x_row_stride, int w_row_stride_bytes, int scale_row_stride,
                     int y_row_stride) {
    if (m <= 0 || n <= 0 || group <= 0) return;
    const int nblocks = (n + FB_THREADS - 1) / FB_THREADS;
    const int row0 = (bid_x() / nblocks) * FB_ROWS;
    const int col = (bid_x() % nblocks) * FB_THREADS + tid_x();
    if (row0 >= m || col >= n) return;
    const int rows = m - row0 < FB_ROWS ? m - row0 : FB_ROWS;
    const long long xs = x_row_stride;  // elements from one row of X to the next
    const u16* xr = (const u16*)x + row0 * xs;
    const u32* wr = (const u32*)((const char*)w + (long long)col * w_row_stride_bytes);
    const int groups = k / group;
    float acc[FB_ROWS];
#pragma unroll
    for (int r = 0; r < FB_ROWS; ++r) acc[r] = 0.f;
    for (int g = 0; g < groups; ++g) {
        const float s = Act<T>::to_f32(((const u16*)scales)[(long long)col * scale_row_stride + g]);
        const float z = (float)zero_point(zeros, col, g, groups);
        for (int kk = g * group; kk < (g + 1) * group; ++kk) {
            const int e = kk & 7;
            const u32 q = (wr[kk >> 3] >> ((e & 1) * 16 + (e >> 1) * 4)) & 15u;
            const float wv = ((float)q - z) * s;
#pragma unroll
            for (int r = 0; r < FB_ROWS; ++r) {
                if (r < rows) acc[r] = fma_f32(Act<T>::to_f32(xr[r * xs + kk]), wv, acc[r]);
            }
        }
    }
    const float b = bias != nullptr ? Act<T>::to_f32(((const u16*)bias)[col]) : 0.f;
#pragma unroll
    for (int r = 0; r < FB_ROWS; ++r) {
        if (r < rows) {
            const float v = bias != nullptr ? acc[r] + b : acc[r];
            ((u16*)y)[(long long)(row0 + r) * y_row_stride + col] = Act<T>::from_f32(v);
        }
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
