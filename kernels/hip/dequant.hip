// dequant: int4 resident weights -> dense [N, K_pad] copy in the activation dtype.
//
//   out[n, k] = round((q[n, k] - z[n, k / G]) * s[n, k / G])
//
// (q - z) is exact (fp16/bf16 magic-offset trick, docs/contract.md §4), the product with the scale is exact in
// fp32, and the only rounding is the final one: bit-exact against the reference. Only the logical
// [N, K] part is written; padding columns are left untouched.
// Launch: grid (N, ceil(K / 8 / 256)), block 256; one thread per packed word (8 values).
// Contract: K % 8 == 0, G a multiple of 8 dividing K (channelwise included).
#include "compat.h"

using namespace w4;

#define DQ_THREADS 256

namespace {

template <class T>
W4_DEV void dequant(const uint32_t* w, const T* scales, const uint32_t* zeros, T* out, int n, int k, int group,
                    int w_row_stride_bytes, int scale_row_stride, int out_row_stride) {
    const int row = bid_x();
    const int j = bid_y() * DQ_THREADS + tid_x();
    if (row >= n || group <= 0 || j >= k / 8) return;
    const int gi = (j * 8) / group;
    const u32 wq = *(const u32*)((const char*)w + (long long)row * w_row_stride_bytes + 4 * j);
    const float s = Act<T>::to_f32(((const u16*)scales)[(long long)row * scale_row_stride + gi]);
    const u32 zz = offset_pair<T>(zero_point(zeros, row, gi, k / group));
    u32 o[4];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
        // Elements 2p and 2p+1: exact (q - z) pair, then fp32 products and one rounding each.
        const u32 d = Act<T>::sub2(nibble_pair<T>(wq >> (4 * p)), zz);
        float lo, hi;
        Act<T>::pair_to_f32(d, lo, hi);
        o[p] = (u32)Act<T>::from_f32(lo * s) | ((u32)Act<T>::from_f32(hi * s) << 16);
    }
    u16* dst = (u16*)out + (long long)row * out_row_stride + 8 * j;
    if ((((u64)(void*)dst) & 15u) == 0) {
        u32x4 v;
        v.x = o[0];
        v.y = o[1];
        v.z = o[2];
        v.w = o[3];
        *(u32x4*)dst = v;
    } else {
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            dst[2 * p] = (u16)(o[p] & 0xffffu);
            dst[2 * p + 1] = (u16)(o[p] >> 16);
        }
    }
}

}  // namespace

#define W4_DEQUANT_ENTRY(NAME, T)                                                                                  \
    extern "C" __global__ __launch_bounds__(DQ_THREADS) void NAME(const uint32_t* w, const T* scales,             \
                                                                  const uint32_t* zeros, T* out, int n, int k,    \
                                                                  int group, int w_row_stride_bytes,              \
                                                                  int scale_row_stride, int out_row_stride) {     \
        dequant<T>(w, scales, zeros, out, n, k, group, w_row_stride_bytes, scale_row_stride, out_row_stride);      \
    }

W4_DEQUANT_ENTRY(w4a16_dequant_f16, f16_t)
W4_DEQUANT_ENTRY(w4a16_dequant_bf16, bf16_t)
