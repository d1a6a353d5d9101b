// The GPU reference's judge: the kernel output against the f64 reference lanes that stay on the
// device, so the M×N doubles never cross to the host. Harness code, not a kernel under test: it
// shares no source with the kernels and is compiled on its own (NVRTC, `--fmad=false`, so every
// product and sum rounds once, as on the host).
//
// `judge` is the device twin of the host comparison of one row (`CompareReport::record_row` in
// `reference/src/compare.rs`) for the plain element: a finite result that is not the poison, a
// finite reference value and a bound that is finite and at least 64 × the smallest normal f64.
// Any other element is counted as `special` and not judged here: the host then judges the whole
// output itself (the rules for NaN, ±Inf, poison and the range edge live only there). Each
// block writes its counts and its worst (ratio, index); the host sums them and keeps the largest
// ratio, the smallest index among equals, as the host comparison does.

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;

// One block's share of the report (13 words; the host reads them in this order).
struct JudgeBlock {
    u64 checked;
    u64 special;
    u64 mismatches;
    u64 over;
    u64 buckets[7];
    double worst;   // -1 when the block judged nothing
    u64 worst_at;   // element index m·N + n
};

// `ActDtype::from_f64` for a value that is not NaN: rounded to f32 toward zero with the sticky
// bit (round to odd), then one round to nearest even into the 16-bit format.
__device__ __forceinline__ float f32_to_odd(double v) {
    float nearest = __double2float_rn(v);
    double back = (double)nearest;
    u32 bits = __float_as_uint(nearest) - (fabs(back) > fabs(v) ? 1u : 0u);
    return __uint_as_float(bits | (back != v ? 1u : 0u));
}

__device__ __forceinline__ u16 from_f64(int bf16, double v) {
    float odd = f32_to_odd(v);
    if (bf16) {
        u32 b = __float_as_uint(odd);
        return (u16)((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
    }
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(odd));
    return h;
}

__device__ __forceinline__ double to_f64(int bf16, u16 bits) {
    if (bf16) {
        return (double)__uint_as_float(((u32)bits) << 16);
    }
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
    return (double)f;
}

__device__ __forceinline__ int same_bits(u16 a, u16 b) {
    return a == b || ((a & 0x7FFF) == 0 && (b & 0x7FFF) == 0);
}

// Bias stages, as `BiasStage`'s order: BeforeCast, AfterCast, Either.
#define STAGE_AFTER_CAST 1
#define STAGE_EITHER 2

#define JUDGE_THREADS 256

// terms[0..5]: the bound's coefficients with a nonzero bias (accumulation, weight, y,
// y_pre_bias, floor); terms[5..10]: without.
extern "C" __global__ void judge(const u16* __restrict__ bits, u64 row_stride,
                                 const double* __restrict__ y_raw, const double* __restrict__ a,
                                 const double* __restrict__ acc,
                                 const double* __restrict__ bias, int has_bias,
                                 u64 m, u64 n, int bf16, int stage, u16 poison,
                                 const double* __restrict__ terms,
                                 JudgeBlock* __restrict__ blocks) {
    const double smallest_bound = 2.2250738585072014e-308 * 64.0;
    const u16 exp_mask = bf16 ? 0x7F80 : 0x7C00;
    u64 checked = 0, special = 0, mismatches = 0, over = 0;
    u64 buckets[7] = {0, 0, 0, 0, 0, 0, 0};
    double worst = -1.0;
    u64 worst_at = ~0ull;
    const u64 total = m * n;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        const u64 row = e / n, col = e - row * n;
        const u16 b = bits[row * row_stride + col];
        const double bb = bias[col];
        // The host adds the bias to the products only when the layer has one.
        const double y = has_bias ? y_raw[e] + bb : y_raw[e];
        const int nz = bb != 0.0;
        const double* t = nz ? terms : terms + 5;
        const double bound =
            t[0] * acc[e] + t[1] * a[e] + t[2] * fabs(y) + t[3] * fabs(y - bb) + t[4];
        const int plain = isfinite(bound) && bound >= smallest_bound;
        if (b == poison || (b & exp_mask) == exp_mask || !isfinite(y) || !plain) {
            special += 1;
            continue;
        }
        checked += 1;
        const double err = fabs(to_f64(bf16, b) - y);
        int matched;
        if (stage == STAGE_AFTER_CAST && nz) {
            const u16 after = from_f64(bf16, to_f64(bf16, from_f64(bf16, y - bb)) + bb);
            matched = same_bits(b, after);
        } else if (stage == STAGE_EITHER && nz) {
            const u16 after = from_f64(bf16, to_f64(bf16, from_f64(bf16, y - bb)) + bb);
            matched = same_bits(b, from_f64(bf16, y)) || same_bits(b, after);
        } else {
            matched = same_bits(b, from_f64(bf16, y));
        }
        mismatches += matched ? 0 : 1;
        // The bucket by exact comparisons with the power-of-two edges (`ratio_class`).
        int bucket = 0;
        if (err != 0.0) {
            bucket = 1 + (err >= bound * (1.0 / 64.0)) + (err >= bound * (1.0 / 16.0)) +
                     (err >= bound * 0.25) + (err >= bound * 0.5) + (err >= bound);
        }
        buckets[bucket] += 1;
        over += err > bound ? 1 : 0;
        const double ratio = err / bound;
        // Indices grow along the loop: a tie keeps the earlier element.
        if (ratio > worst) {
            worst = ratio;
            worst_at = e;
        }
    }

    __shared__ u64 counts[11][JUDGE_THREADS];
    __shared__ double worsts[JUDGE_THREADS];
    __shared__ u64 worst_ats[JUDGE_THREADS];
    const int tid = threadIdx.x;
    counts[0][tid] = checked;
    counts[1][tid] = special;
    counts[2][tid] = mismatches;
    counts[3][tid] = over;
    for (int i = 0; i < 7; ++i) counts[4 + i][tid] = buckets[i];
    worsts[tid] = worst;
    worst_ats[tid] = worst_at;
    __syncthreads();
    for (int half = JUDGE_THREADS / 2; half > 0; half >>= 1) {
        if (tid < half) {
            for (int i = 0; i < 11; ++i) counts[i][tid] += counts[i][tid + half];
            const double w = worsts[tid + half];
            const u64 at = worst_ats[tid + half];
            if (w > worsts[tid] || (w == worsts[tid] && at < worst_ats[tid])) {
                worsts[tid] = w;
                worst_ats[tid] = at;
            }
        }
        __syncthreads();
    }
    if (tid == 0) {
        JudgeBlock* out = blocks + blockIdx.x;
        out->checked = counts[0][0];
        out->special = counts[1][0];
        out->mismatches = counts[2][0];
        out->over = counts[3][0];
        for (int i = 0; i < 7; ++i) out->buckets[i] = counts[4 + i][0];
        out->worst = worsts[0];
        out->worst_at = worst_ats[0];
    }
}

// The raw lanes at `count` element indices (the cross-check's sample): out[3·i + lane], the
// third lane 0 where there is no offset lane.
extern "C" __global__ void gather_lanes(const double* __restrict__ y, const double* __restrict__ a,
                                        const double* __restrict__ offset, int has_offset,
                                        const u64* __restrict__ index, u64 count,
                                        double* __restrict__ out) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) {
        const u64 e = index[i];
        out[3 * i] = y[e];
        out[3 * i + 1] = a[e];
        out[3 * i + 2] = has_offset ? offset[e] : 0.0;
    }
}

// The exact weights from the codes (one per byte, [N, K]) and the per-(n, group) scales and
// zero points in f64: w = (q − z)·s, |w|, and with an offset lane |s|·(2·offset + z + q). Each
// is a small integer times a 16-bit float, exact in f64: the host's decoding, bit for bit.
extern "C" __global__ void decode_weights(const unsigned char* __restrict__ codes,
                                          const double* __restrict__ scales,
                                          const double* __restrict__ zeros, u64 n, u64 k,
                                          u64 group, int has_offset, double offset,
                                          double* __restrict__ w, double* __restrict__ w_abs,
                                          double* __restrict__ w_offset) {
    const u64 groups = (k + group - 1) / group;
    const u64 total = n * k;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        const u64 row = i / k, col = i - row * k;
        const u64 g = row * groups + col / group;
        const double q = (double)(codes[i] & 15), s = scales[g], z = zeros[g];
        const double v = (q - z) * s;
        w[i] = v;
        w_abs[i] = fabs(v);
        if (has_offset) {
            w_offset[i] = fabs(s) * (2.0 * offset + z + q);
        }
    }
}

// X and |X| in f64 from the activation bits (every f16 and bf16 value is exact in f64).
extern "C" __global__ void widen_activations(const u16* __restrict__ bits, int bf16,
                                             double* __restrict__ x, double* __restrict__ x_abs,
                                             u64 count) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        const double v = to_f64(bf16, bits[i]);
        x[i] = v;
        x_abs[i] = fabs(v);
    }
}

// How many of the first `bytes` bytes of two device buffers differ (added to *out): a launch's
// output against the buffer a correct kernel leaves, compared where both lie.
extern "C" __global__ void count_differences(const unsigned char* __restrict__ a,
                                             const unsigned char* __restrict__ b, u64 bytes,
                                             u64* __restrict__ out) {
    u64 differ = 0;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < bytes; i += stride) {
        differ += a[i] != b[i] ? 1 : 0;
    }
    if (differ != 0) atomicAdd(out, differ);
}
