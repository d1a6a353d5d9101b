// amd_emulation.h: portable emulations of the AMD builtins that compat.h's AMD branch is written
// in (its `w4::gcn` leaves), so that an AMD target's configuration of the kernels can be compiled
// by NVRTC and run on an NVIDIA GPU (`-DW4_EMULATE_AMD=1100|1151|1201`, see compat.h and
// kernels/src/emulation.rs). Everything outside the leaves is the kernels' own AMD code.
//
// This file is also plain host C++ (no CUDA): the semantics live in `w4::emu` and the wave-level
// operations are written against an exchange policy (`ShflWave` below on the GPU: one call per
// lane, registers of other lanes read with __shfl_sync; `HostWave` on the CPU: the 32 lanes'
// registers as arrays), so that kernels/tests/amd_emulation.rs checks the very same code on the
// CPU. Emulation checks the AMD algorithms and layouts, not the AMD hardware.
//
// Sources of the semantics (public): the RDNA3 ISA reference guide (gfx11: V_DOT2_F32_F16,
// V_PK_ADD/MUL_F16, V_CVT_*, DS_BPERMUTE_B32, V_MBCNT_LO_U32_B32, V_WMMA_F32_16X16X16_F16/BF16 and
// its wave32 VGPR layout, also described in AMD GPUOpen's "How to accelerate AI applications on
// RDNA 3 using WMMA"), the RDNA4 ISA reference guide and GPUOpen's "Using the matrix cores of AMD
// RDNA 4 architecture GPUs" (gfx12 WMMA layout, changed from gfx11), LLVM's AMDGPUUsage (default
// float modes of HIP kernels: round to nearest even, fp16/fp32 denormals not flushed, IEEE mode)
// and LLVM's SIISelLowering.cpp / review D49146 on v_dot2_f32_f16 (one rounding; fp32 denormal
// operand and result flushed regardless of the mode). Where the documents leave a point open, the
// comment of the emulation says so and what the emulation chooses.
#ifndef W4_AMD_EMULATION_H
#define W4_AMD_EMULATION_H

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define W4E_GPU 1
#define W4E_FN __device__ __forceinline__
// The long emulations are real calls on the GPU: inlined at every use they make NVRTC take
// minutes per kernel.
#define W4E_CALL __device__ __noinline__
#else
#include <cstring>
#define W4E_FN inline
#define W4E_CALL inline
#endif

namespace w4 {
namespace emu {

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

// ---------------------------------------------------------------------------------------------
// Bit patterns.
W4E_FN u32 f32_bits(float f) {
#if W4E_GPU
    return __float_as_uint(f);
#else
    u32 u;
    std::memcpy(&u, &f, 4);
    return u;
#endif
}
W4E_FN float bits_f32(u32 u) {
#if W4E_GPU
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}
W4E_FN u64 f64_bits(double d) {
#if W4E_GPU
    return (u64)__double_as_longlong(d);
#else
    u64 u;
    std::memcpy(&u, &d, 8);
    return u;
#endif
}
W4E_FN double bits_f64(u64 u) {
#if W4E_GPU
    return __longlong_as_double((long long)u);
#else
    double d;
    std::memcpy(&d, &u, 8);
    return d;
#endif
}
W4E_FN float fma_rn(float a, float b, float c) {
#if W4E_GPU
    return __fmaf_rn(a, b, c);
#else
    return __builtin_fmaf(a, b, c);
#endif
}
W4E_FN u32 popcount(u32 v) {
#if W4E_GPU
    return (u32)__popc(v);
#else
    return (u32)__builtin_popcount(v);
#endif
}
// Leading zeros of a nonzero word.
W4E_FN int clz(u32 v) {
#if W4E_GPU
    return __clz((int)v);
#else
    return __builtin_clz(v);
#endif
}

W4E_FN bool f16_is_nan(u16 h) { return (h & 0x7fffu) > 0x7c00u; }
W4E_FN bool f32_is_nan(float f) { return (f32_bits(f) & 0x7fffffffu) > 0x7f800000u; }
W4E_FN bool f32_is_inf(float f) { return (f32_bits(f) & 0x7fffffffu) == 0x7f800000u; }
W4E_FN bool f64_is_nan(double d) { return (f64_bits(d) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull; }
W4E_FN bool f64_is_inf(double d) { return (f64_bits(d) & 0x7fffffffffffffffull) == 0x7ff0000000000000ull; }
// The default quiet NaNs the emulation returns where an operation creates a NaN.
constexpr u16 F16_QNAN = 0x7e00u;
constexpr u32 F32_QNAN = 0x7fc00000u;

// ---------------------------------------------------------------------------------------------
// V_CVT_F32_F16: exact (every fp16 value, subnormals included, is an fp32 normal). The fp16
// denormal mode of HIP kernels is "not flushed" (FP_DENORM 16/64 = 3), so subnormal inputs are
// kept. NaN: IEEE mode quiets a signalling NaN; which payload the result carries is not specified
// by the ISA — the emulation keeps the fp16 payload in the top mantissa bits and sets the quiet
// bit. ±0 and ±Inf map to ±0 and ±Inf.
W4E_FN float f16_to_f32(u16 h) {
    const u32 sign = (u32)(h & 0x8000u) << 16;
    const u32 e = (h >> 10) & 0x1fu;
    u32 m = h & 0x3ffu;
    if (e == 0x1fu) return bits_f32(sign | 0x7f800000u | (m << 13) | (m != 0u ? 0x00400000u : 0u));
    if (e == 0u) {
        if (m == 0u) return bits_f32(sign);
        // m * 2^-24: shift the leading one up to bit 10; 113 is the fp32 biased exponent of 2^-14.
        const int sh = clz(m) - 21;
        return bits_f32(sign | ((u32)(113 - sh) << 23) | (((m << sh) & 0x3ffu) << 13));
    }
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

// Rounds a finite, non-NaN double to fp16, to nearest even (the MODE register's default round
// mode), with fp16 subnormal results kept (not flushed) and overflow to ±Inf.
W4E_FN u16 f64_to_f16_rne(double x) {
    const u64 b = f64_bits(x);
    const u16 sign = (u16)((b >> 48) & 0x8000u);
    const int e = (int)((b >> 52) & 0x7ffu);
    if (e == 0x7ff) return (u16)(sign | 0x7c00u);  // ±Inf (NaN is handled by the callers)
    if (e == 0) return sign;                        // double subnormals are far below fp16's range
    const int E = e - 1023;
    if (E > 15) return (u16)(sign | 0x7c00u);
    const u64 full = (b & 0xfffffffffffffull) | (1ull << 52);  // value = full * 2^(E - 52)
    const int q = E >= -14 ? E - 10 : -24;                       // the fp16 quantum at this size
    const int s = 52 + q - E;                                    // >= 42
    if (s >= 64) return sign;
    u64 n = full >> s;
    const u64 rem = full & ((1ull << s) - 1ull);
    const u64 half = 1ull << (s - 1);
    if (rem > half || (rem == half && (n & 1ull) != 0ull)) ++n;
    // A carry out of the significand moves into the exponent field (up to Inf) by itself.
    const u32 out = E >= -14 ? (((u32)(E + 15) << 10) + (u32)n - 0x400u) : (u32)n;
    return (u16)(sign | out);
}

// V_CVT_F16_F32: round to nearest even, fp16 subnormal results kept, overflow to ±Inf. NaN: the
// ISA leaves the payload open; the emulation keeps the top 9 payload bits and sets the quiet bit.
W4E_CALL u16 f32_to_f16(float f) {
    const u32 u = f32_bits(f);
    if (f32_is_nan(f)) return (u16)(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x1ffu));
    return f64_to_f16_rne((double)f);
}

// One half of V_PK_ADD_F16 with a negated second operand (v_pk_add_f16 neg_lo/neg_hi, what
// clang emits for a packed fp16 subtraction) or of V_PK_MUL_F16: the exact result (an fp16
// difference or product is exact in double) rounded once to nearest even; subnormals kept.
// NaN: a NaN operand gives that NaN quieted (the first one if both are NaN; the ISA does not
// say which payload survives), an invalid operation (Inf - Inf, 0 * Inf) the default NaN 0x7E00.
// Zeros follow IEEE 754: x - x = +0, (-0) - (+0) = -0, the sign of a zero product is the xor.
W4E_FN u16 f16_sub_rne(u16 a, u16 b) {
    if (f16_is_nan(a)) return (u16)(a | 0x0200u);
    if (f16_is_nan(b)) return (u16)(b | 0x0200u);
    const double r = (double)f16_to_f32(a) - (double)f16_to_f32(b);
    if (f64_is_nan(r)) return F16_QNAN;
    return f64_to_f16_rne(r);
}
W4E_FN u16 f16_mul_rne(u16 a, u16 b) {
    if (f16_is_nan(a)) return (u16)(a | 0x0200u);
    if (f16_is_nan(b)) return (u16)(b | 0x0200u);
    const double r = (double)f16_to_f32(a) * (double)f16_to_f32(b);
    if (f64_is_nan(r)) return F16_QNAN;
    return f64_to_f16_rne(r);
}
// Packed: element 0 in bits 0-15, element 1 in bits 16-31, each half independent.
W4E_CALL u32 pk_sub_f16(u32 a, u32 b) {
    return (u32)f16_sub_rne((u16)(a & 0xffffu), (u16)(b & 0xffffu)) |
           ((u32)f16_sub_rne((u16)(a >> 16), (u16)(b >> 16)) << 16);
}
W4E_CALL u32 pk_mul_f16(u32 a, u32 b) {
    return (u32)f16_mul_rne((u16)(a & 0xffffu), (u16)(b & 0xffffu)) |
           ((u32)f16_mul_rne((u16)(a >> 16), (u16)(b >> 16)) << 16);
}

// Flush of an fp32 denormal to a zero of the same sign.
W4E_FN float flush_f32_denormal(float f) {
    const u32 u = f32_bits(f);
    return (u & 0x7f800000u) == 0u ? bits_f32(u & 0x80000000u) : f;
}

// Knuth's TwoSum: s + e == a + b exactly (no overflow in our ranges).
W4E_FN void two_sum(double a, double b, double& s, double& e) {
    s = a + b;
    const double bb = s - a;
    e = (a - (s - bb)) + (b - bb);
}

// V_DOT2_F32_F16 (__builtin_amdgcn_fdot2 with clamp = false):
//   D = A.lo * B.lo + A.hi * B.hi + C
// Products: exact (an fp16 product is exact in fp32). Summation: one rounding of the exact
// three-term sum, to nearest even (LLVM D49146: "This operation only rounds a single time"; the
// ISA gives no order because there is no intermediate rounding). Denormals: the fp32 C operand and
// an fp32 denormal result are flushed to zero of the same sign regardless of the mode register
// (LLVM SIISelLowering.cpp: "fdot2_f32_f16 always flushes fp32 denormal operand and output to
// zero, regardless of the denorm mode setting"); fp16 subnormal inputs are honoured (their
// products are fp32 normals). NaN: any NaN operand, 0 * Inf, or Inf - Inf gives NaN; the ISA
// does not say which, the emulation returns the default quiet NaN 0x7FC00000. ±Inf otherwise
// propagate; an exact sum beyond the fp32 range rounds to ±Inf. Zeros: the exact sum zero is +0
// unless every term is -0 (IEEE 754 sum rule), a product's zero sign is the xor of its operands'.
// Implementation: the exact sum is held as doubles through TwoSum, rounded to double by
// round-to-odd, then to fp32 by round to nearest even — with 53 >= 24 + 2 bits this equals one
// rounding of the exact sum (Boldo & Melquiond, "When double rounding is odd").
W4E_CALL float fdot2_f32_f16(u32 a, u32 b, float c) {
    const u16 a0 = (u16)(a & 0xffffu), a1 = (u16)(a >> 16), b0 = (u16)(b & 0xffffu), b1 = (u16)(b >> 16);
    if (f16_is_nan(a0) || f16_is_nan(a1) || f16_is_nan(b0) || f16_is_nan(b1) || f32_is_nan(c))
        return bits_f32(F32_QNAN);
    const float cf = flush_f32_denormal(c);
    const double p0 = (double)f16_to_f32(a0) * (double)f16_to_f32(b0);
    const double p1 = (double)f16_to_f32(a1) * (double)f16_to_f32(b1);
    const double cd = (double)cf;
    if (f64_is_nan(p0) || f64_is_nan(p1)) return bits_f32(F32_QNAN);  // 0 * Inf
    if (f64_is_inf(p0) || f64_is_inf(p1) || f32_is_inf(cf)) {
        const double s = p0 + p1 + cd;
        return f64_is_nan(s) ? bits_f32(F32_QNAN) : (float)s;
    }
    if (p0 == 0.0 && p1 == 0.0 && cd == 0.0) {
        const bool all_negative = (f64_bits(p0) >> 63) != 0ull && (f64_bits(p1) >> 63) != 0ull && (f32_bits(cf) >> 31) != 0u;
        return bits_f32(all_negative ? 0x80000000u : 0u);
    }
    double s, e, t, f, g, h, v, w;
    two_sum(p0, p1, s, e);  // p0 + p1 = s + e
    two_sum(s, cd, t, f);   // s + c = t + f
    two_sum(f, e, g, h);    // f + e = g + h
    two_sum(t, g, v, w);    // exact sum X = v + w + h, v = RN(t + g)
    const double r = w + h; // its sign and zeroness are those of X - v
    double y = v;
    if (r != 0.0) {
        if (v == 0.0) {
            y = r;
        } else if ((f64_bits(v) & 1ull) == 0ull) {
            // Round to odd: X lies strictly between v and its neighbour on r's side.
            const u64 vb = f64_bits(v);
            y = bits_f64(((r > 0.0) == (v > 0.0)) ? vb + 1ull : vb - 1ull);
        }
    }
    if (y == 0.0) return 0.0f;  // an exact cancellation of nonzero terms: +0
    return flush_f32_denormal((float)y);
}

// V_MBCNT_LO_U32_B32: the number of set bits of `mask` in the lanes below this one (bits
// 0 .. lane-1 of the low 32 bits), plus `acc`. Wave32: every lane is in the low half.
W4E_FN u32 mbcnt_lo(u32 mask, u32 acc, int lane) {
    return popcount(mask & ((1u << lane) - 1u)) + acc;
}

// ---------------------------------------------------------------------------------------------
// Wave-level operations, written once per lane against an exchange policy X:
//   x.lane()            this lane (0..31)
//   x.get(f, j, src)    register j of fragment f as held by lane `src` (all lanes active)
//   x.read(v, src)      a one-register value of lane `src` (may run with lanes inactive)
//   x.active(src)       whether lane `src` is active (EXEC bit)
//   x.any(pred)         whether pred(lane) holds for any active lane (a wave-wide vote)

// DS_BPERMUTE_B32 (offset 0): this lane reads `data` of lane (addr / 4) mod 32 ("backward"
// permute: the address names the source). Wave32: only bits 6:2 of the address count. A source
// lane that is inactive yields 0 (EXEC applies to the read of the source as well).
template <class X, class V>
W4E_FN int ds_bpermute(const X& x, int addr, const V& data) {
    const int src = (int)(((u32)addr >> 2) & 31u);
    const u32 v = x.read(data, src);
    return x.active(src) ? (int)v : 0;
}

// WMMA element of a packed register: half 0 (bits 0-15) or half 1, as fp32 (exact).
template <bool BF16>
W4E_FN float wmma_elem(u32 pair, int half) {
    const u16 h = (u16)(half != 0 ? pair >> 16 : pair & 0xffffu);
    return BF16 ? bits_f32((u32)h << 16) : f16_to_f32(h);
}

// The numerics of both WMMA emulations (the ISA fixes the operand layouts, not the arithmetic):
// D[m][n] = C[m][n] + sum_k A[m][k] * B[k][n], fp32 accumulate. Products: exact for fp16 inputs;
// bf16 products may fall below the fp32 range, so each step is a fused multiply-add. Summation
// order: not specified by the ISA (the hardware adds in its own tree); the emulation adds in k
// order 0..15 starting from C, one rounding to nearest even per step. Denormals: fp16/bf16
// subnormal inputs and fp32 denormal C/D are kept (the HIP default float mode flushes nothing).
// NaN/Inf: IEEE propagation through the multiply-adds (the payload of a NaN result is not
// specified). EXEC must be all ones (the emulation shuffles over the full wave).

// gfx11, wave32, V_WMMA_F32_16X16X16_{F16,BF16} (RDNA3 ISA, "Wave Matrix Multiply Accumulate"):
//   A (16x16, m x k): lane l holds row m = l % 16 in 8 VGPRs, VGPR j = k 2j (bits 0-15) and
//     k 2j+1 (bits 16-31); lanes 16-31 MUST hold the same values as lanes 0-15.
//   B (16x16, k x n): lane l holds column n = l % 16, VGPR j = k 2j and 2j+1; lanes 16-31 MUST
//     replicate lanes 0-15.
//   C, D (fp32): VGPR r of lane l holds element (m = 2r + l / 16, n = l % 16).
// The ISA makes the result undefined when lanes 16-31 do not replicate lanes 0-15; the emulation
// makes it fail loudly: the whole wave's D becomes NaN (it never reads lanes 0-15 only).
template <bool BF16, class X, class F>
W4E_FN void wmma_gfx11(const X& x, const F& a, const F& b, float (&d)[8]) {
    const int l = x.lane();
    const int n = l & 15;
    const int half = l >> 4;
    const bool unreplicated = x.any([&](int ln) {
        bool differs = false;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            differs |= x.get(a, j, ln) != x.get(a, j, ln ^ 16);
            differs |= x.get(b, j, ln) != x.get(b, j, ln ^ 16);
        }
        return differs;
    });
    u32 bcol[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) bcol[j] = x.get(b, j, n);
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        const int m = 2 * r + half;
        float s = d[r];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const u32 ap = x.get(a, j, m);
            s = fma_rn(wmma_elem<BF16>(ap, 0), wmma_elem<BF16>(bcol[j], 0), s);
            s = fma_rn(wmma_elem<BF16>(ap, 1), wmma_elem<BF16>(bcol[j], 1), s);
        }
        d[r] = unreplicated ? bits_f32(F32_QNAN) : s;
    }
}

// gfx12, wave32, V_WMMA_F32_16X16X16_{F16,BF16} (RDNA4 ISA; the layout changed from gfx11):
//   A (m x k): lane l holds row m = l % 16 in 4 VGPRs with k = 8 * (l / 16) + 2j (bits 0-15) and
//     + 2j + 1 (bits 16-31) in VGPR j: each half-wave holds its own half of k, no replication.
//   B (k x n): lane l holds column n = l % 16, the same k split.
//   C, D (fp32): VGPR r of lane l holds element (m = r + 8 * (l / 16), n = l % 16).
template <bool BF16, class X, class F>
W4E_FN void wmma_gfx12(const X& x, const F& a, const F& b, float (&d)[8]) {
    const int l = x.lane();
    const int n = l & 15;
    const int half = l >> 4;
    u32 bcol[8];  // k pairs 0..7 of column n
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        bcol[j] = x.get(b, j, n);
        bcol[4 + j] = x.get(b, j, n + 16);
    }
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        const int m = r + 8 * half;
        float s = d[r];
#pragma unroll
        for (int p = 0; p < 8; ++p) {
            const u32 ap = x.get(a, p & 3, p < 4 ? m : m + 16);
            s = fma_rn(wmma_elem<BF16>(ap, 0), wmma_elem<BF16>(bcol[p], 0), s);
            s = fma_rn(wmma_elem<BF16>(ap, 1), wmma_elem<BF16>(bcol[p], 1), s);
        }
        d[r] = s;
    }
}

#if !W4E_GPU
// The CPU exchange: the wave's registers as arrays, regs[lane * nregs + j].
struct HostFrag {
    const u32* regs;
    int nregs;
};
struct HostWave {
    int l;
    u32 exec;
    int lane() const { return l; }
    u32 get(const HostFrag& f, int j, int src) const { return f.regs[src * f.nregs + j]; }
    u32 read(const HostFrag& f, int src) const { return f.regs[src * f.nregs]; }
    bool active(int src) const { return ((exec >> src) & 1u) != 0u; }
    template <class P>
    bool any(P pred) const {
        for (int ln = 0; ln < 32; ++ln)
            if (active(ln) && pred(ln)) return true;
        return false;
    }
};
#endif

}  // namespace emu

#if W4E_GPU
namespace emu {
// The GPU exchange: one call per lane, other lanes' registers through warp shuffles. An NVIDIA
// warp is 32 consecutive linear thread ids, as an AMD wave32 is.
struct ShflWave {
    W4E_FN int lane() const {
        u32 l;
        asm("mov.u32 %0, %%laneid;" : "=r"(l));
        return (int)l;
    }
    template <int N>
    W4E_FN u32 get(const u32 (&f)[N], int j, int src) const {
        return __shfl_sync(0xffffffffu, f[j], src);
    }
    W4E_FN u32 read(u32 v, int src) const { return __shfl_sync(__activemask(), v, src); }
    W4E_FN bool active(int src) const { return ((__activemask() >> src) & 1u) != 0u; }
    template <class P>
    W4E_FN bool any(P pred) const {
        return __any_sync(0xffffffffu, pred(lane())) != 0;
    }
};
}  // namespace emu

// The leaves of compat.h's AMD branch (same names and signatures as the builtin versions there).
namespace gcn {
typedef unsigned int u32;
typedef unsigned short u16;
// The fp16 activation type of the kernels' entry points (_Float16 on AMD, absent from NVRTC).
struct __attribute__((aligned(2))) f16 {
    u16 bits;
};
W4E_FN u32 workitem_id_x() { return threadIdx.x; }
W4E_FN u32 workitem_id_y() { return threadIdx.y; }
W4E_FN u32 workgroup_size_x() { return blockDim.x; }
W4E_FN u32 workgroup_size_y() { return blockDim.y; }
W4E_FN u32 workgroup_id_x() { return blockIdx.x; }
W4E_FN u32 workgroup_id_y() { return blockIdx.y; }
W4E_FN u32 mbcnt_lo(u32 mask, u32 acc) { return emu::mbcnt_lo(mask, acc, emu::ShflWave().lane()); }
W4E_FN int ds_bpermute(int addr, int data) { return emu::ds_bpermute(emu::ShflWave(), addr, (u32)data); }
// S_BARRIER between workgroup-scope release and acquire fences: __syncthreads orders shared and
// global memory for the block, the fences are kept as block-scope fences.
W4E_FN void fence_release_workgroup() { __threadfence_block(); }
W4E_FN void s_barrier() { __syncthreads(); }
W4E_FN void fence_acquire_workgroup() { __threadfence_block(); }
// Global loads. Non-temporal is a cache hint on AMD: the loaded values are the same as a plain
// load's, so the emulation loads plainly.
struct alignas(16) B128 {
    u32 v[4];
};
struct alignas(8) B64 {
    u32 v[2];
};
W4E_FN void load_nt_b128(const void* p, u32 (&r)[4]) {
    const B128 t = *(const B128*)p;
    r[0] = t.v[0]; r[1] = t.v[1]; r[2] = t.v[2]; r[3] = t.v[3];
}
W4E_FN void load_b128(const void* p, u32 (&r)[4]) {
    const B128 t = *(const B128*)p;
    r[0] = t.v[0]; r[1] = t.v[1]; r[2] = t.v[2]; r[3] = t.v[3];
}
W4E_FN void load_b64(const void* p, u32 (&r)[2]) {
    const B64 t = *(const B64*)p;
    r[0] = t.v[0]; r[1] = t.v[1];
}
// The empty asm that hides a value from the optimizer (a register constraint instead of VGPR).
W4E_FN u32 keep_in_vgpr(u32 v) {
    asm("" : "+r"(v));
    return v;
}
W4E_FN float fma_f32(float a, float b, float c) { return __fmaf_rn(a, b, c); }
W4E_FN float cvt_f32_f16(u16 b) { return emu::f16_to_f32(b); }
W4E_FN u16 cvt_f16_f32(float f) { return emu::f32_to_f16(f); }
W4E_FN void cvt_f32_f16x2(u32 p, float& lo, float& hi) {
    lo = emu::f16_to_f32((u16)(p & 0xffffu));
    hi = emu::f16_to_f32((u16)(p >> 16));
}
W4E_FN u32 pk_sub_f16(u32 a, u32 b) { return emu::pk_sub_f16(a, b); }
W4E_FN u32 pk_mul_f16(u32 a, u32 b) { return emu::pk_mul_f16(a, b); }
W4E_FN float fdot2_f32_f16(u32 a, u32 b, float c) { return emu::fdot2_f32_f16(a, b, c); }
// The WMMA emulations are calls (see W4E_CALL) with the registers passed by value, so that the
// caller's accumulators stay in registers.
template <int N>
struct Regs {
    u32 r[N];
};
struct Acc {
    float d[8];
};
template <bool BF16, int N>
W4E_CALL Acc wmma_call(Acc c, Regs<N> a, Regs<N> b) {
    if constexpr (N == 8)
        emu::wmma_gfx11<BF16>(emu::ShflWave(), a.r, b.r, c.d);
    else
        emu::wmma_gfx12<BF16>(emu::ShflWave(), a.r, b.r, c.d);
    return c;
}
template <bool BF16, int N>
W4E_FN void wmma(float (&d)[8], const u32 (&a)[N], const u32 (&b)[N]) {
    Acc c;
    Regs<N> ra, rb;
#pragma unroll
    for (int i = 0; i < 8; ++i) c.d[i] = d[i];
#pragma unroll
    for (int i = 0; i < N; ++i) {
        ra.r[i] = a[i];
        rb.r[i] = b[i];
    }
    c = wmma_call<BF16, N>(c, ra, rb);
#pragma unroll
    for (int i = 0; i < 8; ++i) d[i] = c.d[i];
}
W4E_FN void wmma_f32_16x16x16_f16_w32(float (&d)[8], const u32 (&a)[8], const u32 (&b)[8]) { wmma<false, 8>(d, a, b); }
W4E_FN void wmma_f32_16x16x16_bf16_w32(float (&d)[8], const u32 (&a)[8], const u32 (&b)[8]) { wmma<true, 8>(d, a, b); }
W4E_FN void wmma_f32_16x16x16_f16_w32_gfx12(float (&d)[8], const u32 (&a)[4], const u32 (&b)[4]) { wmma<false, 4>(d, a, b); }
W4E_FN void wmma_f32_16x16x16_bf16_w32_gfx12(float (&d)[8], const u32 (&a)[4], const u32 (&b)[4]) { wmma<true, 4>(d, a, b); }
}  // namespace gcn
#endif

}  // namespace w4

#endif  // W4_AMD_EMULATION_H
