// A small stand-in with the frozen GEMM signature (kernels/src/set/args.rs, GEMM_ARGS). The code-object
// tests build it to exercise the build cache, metadata parsing and the launch-ABI check
// independently of the real kernels; it is never launched.
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <stdint.h>

template <typename T>
__device__ inline float to_f32(T v);
template <>
__device__ inline float to_f32<uint16_t>(uint16_t v) {
  return __half2float(__ushort_as_half(v));
}

template <bool kBf16>
__device__ inline void probe_body(const uint16_t* __restrict__ x, const uint32_t* __restrict__ w,
                                  const uint16_t* __restrict__ scales,
                                  const uint32_t* __restrict__ zeros,
                                  const uint16_t* __restrict__ bias, uint16_t* __restrict__ y,
                                  int m, int n, int k, int group, int x_row_stride,
                                  int w_row_stride_bytes, int scale_row_stride, int y_row_stride) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y;
  if (col >= n || row >= m) return;
  const uint32_t* wrow = reinterpret_cast<const uint32_t*>(
      reinterpret_cast<const char*>(w) + (size_t)col * w_row_stride_bytes);
  float acc = 0.f;
  for (int kk = 0; kk < k; kk += 8) {
    const uint32_t q = wrow[kk / 8];
    const int g = kk / group;
    const float s = to_f32<uint16_t>(scales[(size_t)col * scale_row_stride + g]);
    const uint32_t z =
        zeros ? (zeros[(size_t)(col / 8) * (k / group) + g] >> (4 * (col % 8))) & 0xF : 8u;
    for (int j = 0; j < 4; ++j) {
      // Two nibbles at once: (q & 0x000F000F) | 0x64006400 = two halves 1024 + q.
      const uint32_t pair = ((q >> (4 * j)) & 0x000F000Fu) | 0x64006400u;
      const __half2 h = *reinterpret_cast<const __half2*>(&pair);
      const float lo = __half2float(h.x) - (1024.f + (float)z);
      const float hi = __half2float(h.y) - (1024.f + (float)z);
      acc += lo * s * to_f32<uint16_t>(x[(size_t)row * x_row_stride + kk + j]);
      acc += hi * s * to_f32<uint16_t>(x[(size_t)row * x_row_stride + kk + j + 4]);
    }
  }
  if (bias) acc += to_f32<uint16_t>(bias[col]);
  y[(size_t)row * y_row_stride + col] = __half_as_ushort(__float2half(acc));
}

#define PROBE_ARGS                                                                            \
  const uint16_t *__restrict__ x, const uint32_t *__restrict__ w,                              \
      const uint16_t *__restrict__ scales, const uint32_t *__restrict__ zeros,                 \
      const uint16_t *__restrict__ bias, uint16_t *__restrict__ y, int m, int n, int k,        \
      int group, int x_row_stride, int w_row_stride_bytes, int scale_row_stride,               \
      int y_row_stride

#define PROBE_PASS \
  x, w, scales, zeros, bias, y, m, n, k, group, x_row_stride, w_row_stride_bytes, scale_row_stride, \
      y_row_stride

extern "C" __global__ void __launch_bounds__(256) w4a16_probe_f16(PROBE_ARGS) {
  probe_body<false>(PROBE_PASS);
}
extern "C" __global__ void __launch_bounds__(256) w4a16_probe_bf16(PROBE_ARGS) {
  probe_body<true>(PROBE_PASS);
}
