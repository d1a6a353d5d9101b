// Breaks the static gates on purpose: named like the fp16 dequant entry but without the packed
// v_and_or_b32 form, and with a dynamically indexed private array that lives in scratch. The
// gate tests build it to show each gate fails on real compiler output; it is never launched.
#include <hip/hip_runtime.h>
#include <stdint.h>

extern "C" __global__ void __launch_bounds__(64) w4a16_dequant_f16(const uint32_t* w, const uint16_t* scales,
                                                                    const uint32_t* zeros, uint16_t* out, int n,
                                                                    int k, int group, int w_row_stride_bytes,
                                                                    int scale_row_stride, int out_row_stride) {
  volatile float lane_table[256];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int j = 0; j < 256; ++j) lane_table[(j * 37 + i) & 255] = (float)(w[(j + i) % (n + 1)] & 0xF);
  if (i < n) out[i] = (uint16_t)lane_table[(i * k) & 255];
}
