// compat.h: the one header every kernel includes, so that the same sources compile
//   (a) for AMD RDNA with clang `-x hip --offload-arch=gfx1100|gfx1151|gfx1201 --cuda-device-only`
//       against Debian's HIP headers, and
//   (b) for NVIDIA through NVRTC (`--gpu-architecture=sm_80` or newer), where this file is inlined
//       in place of its #include by kernels/src/source.rs, and
//   (c) in an AMD target's configuration for NVIDIA through NVRTC, `-DW4_EMULATE_AMD=1100|1151|1201`
//       (kernels/src/emulation.rs): the AMD branches below are compiled as they are, and only the
//       `w4::gcn` leaves (the AMD builtins, one line each) come from amd_emulation.h instead. The
//       macro implies the AMD code paths of the kernels (W4_SKINNY_MMA=0, software bf16,
//       synchronous copies, the target's WMMA layout); nothing else needs to be passed.
// It maps thread ids, shared memory, barriers, wave32 shuffles, the 16-bit activation types, the
// fast int4 dequantization tricks and one warp-level 16x16x16 matrix multiply (fp16/bf16 in, fp32
// accumulate): mma.sync on NVIDIA, v_wmma on gfx11 and gfx12.
//
// Activations are handled as raw 16-bit patterns (u16) everywhere in the kernels; every conversion
// goes through the Act<> traits below, so rounding is explicit and identical on both vendors.
#pragma once

#if defined(W4_EMULATE_AMD)
#if !defined(__CUDACC_RTC__) && !defined(__CUDACC__)
#error "compat.h: W4_EMULATE_AMD is for NVRTC/CUDA compiles of an AMD target's configuration"
#endif
#define W4_AMD 1
#define W4_EMU 1
#if W4_EMULATE_AMD == 1100 || W4_EMULATE_AMD == 1151
#define W4_GFX11 1
#elif W4_EMULATE_AMD == 1201
#define W4_GFX12 1
#else
#error "compat.h: W4_EMULATE_AMD must be 1100, 1151 or 1201"
#endif
#if defined(__CUDACC_RTC__)
typedef unsigned int uint32_t;
#endif
#include "amd_emulation.h"
#elif defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define W4_NV 1
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#if defined(__CUDACC_RTC__)
typedef unsigned int uint32_t;
#endif
#elif defined(__HIP__)
#define W4_AMD 1
#include <hip/hip_runtime.h>
#include <stdint.h>
#if defined(__gfx1100__) || defined(__gfx1101__) || defined(__gfx1102__) || defined(__gfx1103__) || \
    defined(__gfx1150__) || defined(__gfx1151__) || defined(__gfx1152__) || defined(__gfx1153__)
#define W4_GFX11 1
#elif defined(__gfx1200__) || defined(__gfx1201__)
#define W4_GFX12 1
#endif
#else
#error "compat.h: compile as HIP (clang -x hip) or CUDA (NVRTC)"
#endif

#define W4_DEV __device__ __forceinline__
#define W4_ALIGN16 __attribute__((aligned(16)))

namespace w4 {

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

template <class A, class B>
struct same_type {
    static constexpr bool value = false;
};
template <class A>
struct same_type<A, A> {
    static constexpr bool value = true;
};

// ---------------------------------------------------------------------------------------------
// The leaves of the AMD branch: every AMD builtin (and clang-only type) that the AMD code below
// uses, one line each. Under W4_EMULATE_AMD they come from amd_emulation.h, with the same names
// and signatures; everything else of the AMD branch is compiled as it is in both configurations
// (tests/emulation_coverage.rs checks that from the preprocessed sources).
#if W4_AMD && !W4_EMU
// W4-GCN-LEAVES-BEGIN
namespace gcn {
typedef _Float16 f16;
typedef _Float16 h2 __attribute__((ext_vector_type(2)));
typedef u32 v4u __attribute__((ext_vector_type(4)));
typedef u32 v2u __attribute__((ext_vector_type(2)));
typedef float v8f __attribute__((ext_vector_type(8)));
typedef u32 v8u __attribute__((ext_vector_type(8)));
typedef _Float16 v16h __attribute__((ext_vector_type(16)));
typedef short v16s __attribute__((ext_vector_type(16)));
typedef _Float16 v8h __attribute__((ext_vector_type(8)));
typedef short v8s __attribute__((ext_vector_type(8)));
W4_DEV u32 workitem_id_x() { return __builtin_amdgcn_workitem_id_x(); }
W4_DEV u32 workitem_id_y() { return __builtin_amdgcn_workitem_id_y(); }
W4_DEV u32 workgroup_size_x() { return __builtin_amdgcn_workgroup_size_x(); }
W4_DEV u32 workgroup_size_y() { return __builtin_amdgcn_workgroup_size_y(); }
W4_DEV u32 workgroup_id_x() { return __builtin_amdgcn_workgroup_id_x(); }
W4_DEV u32 workgroup_id_y() { return __builtin_amdgcn_workgroup_id_y(); }
W4_DEV u32 mbcnt_lo(u32 mask, u32 acc) { return __builtin_amdgcn_mbcnt_lo(mask, acc); }
W4_DEV int ds_bpermute(int addr, int data) { return __builtin_amdgcn_ds_bpermute(addr, data); }
W4_DEV void fence_release_workgroup() { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); }
W4_DEV void s_barrier() { __builtin_amdgcn_s_barrier(); }
W4_DEV void fence_acquire_workgroup() { __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); }
W4_DEV void load_nt_b128(const void* p, u32 (&r)[4]) { const v4u v = __builtin_nontemporal_load((const v4u*)p); r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w; }
W4_DEV void load_b128(const void* p, u32 (&r)[4]) { const v4u v = *(const v4u*)p; r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w; }
W4_DEV void load_b64(const void* p, u32 (&r)[2]) { const v2u v = *(const v2u*)p; r[0] = v.x; r[1] = v.y; }
W4_DEV u32 keep_in_vgpr(u32 v) { asm("" : "+v"(v)); return v; }
W4_DEV float fma_f32(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
W4_DEV float cvt_f32_f16(u16 b) { return (float)__builtin_bit_cast(_Float16, b); }
W4_DEV u16 cvt_f16_f32(float f) { return __builtin_bit_cast(u16, (_Float16)f); }
W4_DEV void cvt_f32_f16x2(u32 p, float& lo, float& hi) { const h2 v = __builtin_bit_cast(h2, p); lo = (float)v.x; hi = (float)v.y; }
W4_DEV u32 pk_sub_f16(u32 a, u32 b) { return __builtin_bit_cast(u32, __builtin_bit_cast(h2, a) - __builtin_bit_cast(h2, b)); }
W4_DEV u32 pk_mul_f16(u32 a, u32 b) { return __builtin_bit_cast(u32, __builtin_bit_cast(h2, a) * __builtin_bit_cast(h2, b)); }
W4_DEV float fdot2_f32_f16(u32 a, u32 b, float c) { return __builtin_amdgcn_fdot2(__builtin_bit_cast(h2, a), __builtin_bit_cast(h2, b), c, false); }
W4_DEV v8f v8f_of(const float (&c)[8]) { return v8f{c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]}; }
W4_DEV void v8f_to(float (&c)[8], v8f v) { c[0] = v[0]; c[1] = v[1]; c[2] = v[2]; c[3] = v[3]; c[4] = v[4]; c[5] = v[5]; c[6] = v[6]; c[7] = v[7]; }
W4_DEV v8u v8u_of(const u32 (&r)[8]) { return v8u{r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]}; }
W4_DEV v4u v4u_of(const u32 (&r)[4]) { return v4u{r[0], r[1], r[2], r[3]}; }
W4_DEV void wmma_f32_16x16x16_f16_w32(float (&d)[8], const u32 (&a)[8], const u32 (&b)[8]) { v8f_to(d, __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(__builtin_bit_cast(v16h, v8u_of(a)), __builtin_bit_cast(v16h, v8u_of(b)), v8f_of(d))); }
W4_DEV void wmma_f32_16x16x16_bf16_w32(float (&d)[8], const u32 (&a)[8], const u32 (&b)[8]) { v8f_to(d, __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(__builtin_bit_cast(v16s, v8u_of(a)), __builtin_bit_cast(v16s, v8u_of(b)), v8f_of(d))); }
W4_DEV void wmma_f32_16x16x16_f16_w32_gfx12(float (&d)[8], const u32 (&a)[4], const u32 (&b)[4]) { v8f_to(d, __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(__builtin_bit_cast(v8h, v4u_of(a)), __builtin_bit_cast(v8h, v4u_of(b)), v8f_of(d))); }
W4_DEV void wmma_f32_16x16x16_bf16_w32_gfx12(float (&d)[8], const u32 (&a)[4], const u32 (&b)[4]) { v8f_to(d, __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32_gfx12(__builtin_bit_cast(v8s, v4u_of(a)), __builtin_bit_cast(v8s, v4u_of(b)), v8f_of(d))); }
}  // namespace gcn
// W4-GCN-LEAVES-END
#endif

// ---------------------------------------------------------------------------------------------
// Activation types as they appear in the entry points' parameter lists.
#if W4_NV
typedef __half f16_t;
typedef __nv_bfloat16 bf16_t;
#else
// _Float16 on AMD (a leaf below); under emulation, where NVRTC has no _Float16, a 2-byte struct
// like bf16_t (the kernels only pass pointers to it).
typedef gcn::f16 f16_t;
struct __attribute__((aligned(2))) bf16_t {
    u16 bits;
};
#endif


// ---------------------------------------------------------------------------------------------
// Thread and block ids. On AMD the clang builtins are used directly so that no device library
// (ockl) is needed to link the code objects.
#if W4_NV
W4_DEV int tid_x() { return (int)threadIdx.x; }
W4_DEV int tid_y() { return (int)threadIdx.y; }
W4_DEV int block_dim_x() { return (int)blockDim.x; }
W4_DEV int block_dim_y() { return (int)blockDim.y; }
W4_DEV int bid_x() { return (int)blockIdx.x; }
W4_DEV int bid_y() { return (int)blockIdx.y; }
W4_DEV int lane_id() { return (int)(threadIdx.x & 31u); }
W4_DEV void sync_block() { __syncthreads(); }
W4_DEV u32 shfl_xor(u32 v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
W4_DEV float shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
#else
W4_DEV int tid_x() { return (int)gcn::workitem_id_x(); }
W4_DEV int tid_y() { return (int)gcn::workitem_id_y(); }
W4_DEV int block_dim_x() { return (int)gcn::workgroup_size_x(); }
W4_DEV int block_dim_y() { return (int)gcn::workgroup_size_y(); }
W4_DEV int bid_x() { return (int)gcn::workgroup_id_x(); }
W4_DEV int bid_y() { return (int)gcn::workgroup_id_y(); }
// All kernels of the set are wave32 (gfx11/gfx12 are compiled with wavefrontsize32).
W4_DEV int lane_id() { return (int)gcn::mbcnt_lo(~0u, 0u); }
W4_DEV void sync_block() {
    gcn::fence_release_workgroup();
    gcn::s_barrier();
    gcn::fence_acquire_workgroup();
}
W4_DEV u32 shfl_xor(u32 v, int mask) {
    int src = lane_id() ^ mask;
    return (u32)gcn::ds_bpermute(src << 2, (int)v);
}
W4_DEV float shfl_xor(float v, int mask) { return __builtin_bit_cast(float, shfl_xor(__builtin_bit_cast(u32, v), mask)); }
#endif

W4_DEV float u32_as_f32(u32 v) {
#if W4_NV
    return __uint_as_float(v);
#else
    return __builtin_bit_cast(float, v);
#endif
}
W4_DEV u32 f32_as_u32(float v) {
#if W4_NV
    return __float_as_uint(v);
#else
    return __builtin_bit_cast(u32, v);
#endif
}
W4_DEV float fma_f32(float a, float b, float c) {
#if W4_NV
    return __fmaf_rn(a, b, c);
#else
    return gcn::fma_f32(a, b, c);
#endif
}

// Keeps the optimizer from seeing through a bit pattern: clang's InstCombine otherwise folds
// `bitcast((w & 0xF) | 0x6400) - 1024` back into an integer-to-float conversion and the
// single v_and_or_b32 of the fast path disappears (docs/field.md §4 pitfall).
W4_DEV u32 opaque(u32 v) {
#if W4_NV
    asm("" : "+r"(v));
#else
    v = gcn::keep_in_vgpr(v);
#endif
    return v;
}

// ---------------------------------------------------------------------------------------------
// 16-byte vector, global loads and stores.
struct alignas(16) u32x4 {
    u32 x, y, z, w;
};
struct alignas(8) u32x2 {
    u32 x, y;
};

// Streaming 16-byte load of weights that are read once (non-temporal on AMD, L1 no-allocate on
// NVIDIA).
W4_DEV u32x4 ld_stream16(const void* p) {
    u32x4 r;
#if W4_NV
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
#else
    u32 v[4];
    gcn::load_nt_b128(p, v);
    r.x = v[0]; r.y = v[1]; r.z = v[2]; r.w = v[3];
#endif
    return r;
}
W4_DEV u32x4 ld16(const void* p) {
#if W4_NV
    u32x4 r;
    asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
#else
    u32 v[4];
    gcn::load_b128(p, v);
    u32x4 r;
    r.x = v[0]; r.y = v[1]; r.z = v[2]; r.w = v[3];
    return r;
#endif
}
W4_DEV u32x2 ld8(const void* p) {
#if W4_NV
    u32x2 r;
    asm volatile("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
    return r;
#else
    u32 v[2];
    gcn::load_b64(p, v);
    u32x2 r;
    r.x = v[0]; r.y = v[1];
    return r;
#endif
}

// ---------------------------------------------------------------------------------------------
// Asynchronous global -> shared copies of 16 bytes (cp.async on NVIDIA; a plain synchronous copy
// on AMD, where the same pipeline code then simply has no overlap). `valid == false` writes zeros.
// Test switches for running AMD code paths on NVIDIA: W4_SYNC_COPY (plain copies), W4_SOFT_BF16
// (bf16 arithmetic through fp32 bit operations, as on AMD).
W4_DEV void cp_async16(void* smem, const void* gmem, bool valid) {
#if W4_NV && !defined(W4_SYNC_COPY)
    unsigned saddr = (unsigned)__cvta_generic_to_shared(smem);
    int bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(saddr), "l"(gmem), "r"(bytes));
#else
    u32x4 v;
    v.x = v.y = v.z = v.w = 0u;
    if (valid) v = *(const u32x4*)gmem;
    *(u32x4*)smem = v;
#endif
}
W4_DEV void cp_async_commit() {
#if W4_NV && !defined(W4_SYNC_COPY)
    asm volatile("cp.async.commit_group;");
#endif
}
template <int N>
W4_DEV void cp_async_wait() {
#if W4_NV && !defined(W4_SYNC_COPY)
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
#endif
}

// ---------------------------------------------------------------------------------------------
// Activation dtype traits. Pairs of 16-bit values live in one u32: element 2p+0 in the low half,
// 2p+1 in the high half, matching the ExLlama nibble order.
template <class T>
struct Act;

template <>
struct Act<f16_t> {
    // (w & 0x000F000F) | MAGIC2 = two halves 1024 + q, exactly.
    static constexpr u32 MAGIC2 = 0x64006400u;
    // bits of (1024 + z) = BASE + z for z in 0..15
    static constexpr u32 BASE = 0x6400u;
    static W4_DEV float to_f32(u16 b) {
#if W4_NV
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(b));
        return f;
#else
        return gcn::cvt_f32_f16(b);
#endif
    }
    // Round to nearest even.
    static W4_DEV u16 from_f32(float f) {
#if W4_NV
        u16 b;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(f));
        return b;
#else
        return gcn::cvt_f16_f32(f);
#endif
    }
    static W4_DEV void pair_to_f32(u32 p, float& lo, float& hi) {
#if W4_NV
        asm("{ .reg .b16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h; }"
            : "=f"(lo), "=f"(hi)
            : "r"(p));
#else
        gcn::cvt_f32_f16x2(p, lo, hi);
#endif
    }
    // a - b per half; exact whenever the true difference is representable (small integers).
    static W4_DEV u32 sub2(u32 a, u32 b) {
#if W4_NV
        u32 r;
        asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
        return r;
#else
        return gcn::pk_sub_f16(a, b);
#endif
    }
    // a * b per half, rounded once to nearest even.
    static W4_DEV u32 mul2(u32 a, u32 b) {
#if W4_NV
        u32 r;
        asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
        return r;
#else
        return gcn::pk_mul_f16(a, b);
#endif
    }
};

template <>
struct Act<bf16_t> {
    // (w & 0x000F000F) | MAGIC2 = two bf16 128 + q, exactly.
    static constexpr u32 MAGIC2 = 0x43004300u;
    static constexpr u32 BASE = 0x4300u;
    static W4_DEV float to_f32(u16 b) { return u32_as_f32((u32)b << 16); }
    static W4_DEV u16 from_f32(float f) {
#if W4_NV && !defined(W4_SOFT_BF16)
        u16 b;
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
        return b;
#else
        u32 u = f32_as_u32(f);
        if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x0040u);  // quiet NaN
        u += 0x7fffu + ((u >> 16) & 1u);
        return (u16)(u >> 16);
#endif
    }
    static W4_DEV void pair_to_f32(u32 p, float& lo, float& hi) {
        lo = u32_as_f32(p << 16);
        hi = u32_as_f32(p & 0xffff0000u);
    }
    static W4_DEV u32 sub2(u32 a, u32 b) {
#if W4_NV && __CUDA_ARCH__ >= 900 && !defined(W4_SOFT_BF16)
        u32 r;
        asm("sub.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
        return r;
#else
        // Small-integer differences are exact in fp32 and in bf16: truncation is exact here.
        float al, ah, bl, bh;
        pair_to_f32(a, al, ah);
        pair_to_f32(b, bl, bh);
        return (f32_as_u32(al - bl) >> 16) | (f32_as_u32(ah - bh) & 0xffff0000u);
#endif
    }
    static W4_DEV u32 mul2(u32 a, u32 b) {
#if W4_NV && __CUDA_ARCH__ >= 900 && !defined(W4_SOFT_BF16)
        u32 r;
        asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
        return r;
#else
        // The product of two bf16 is exact in fp32; one rounding to bf16 follows.
        float al, ah, bl, bh;
        pair_to_f32(a, al, ah);
        pair_to_f32(b, bl, bh);
        return (u32)from_f32(al * bl) | ((u32)from_f32(ah * bh) << 16);
#endif
    }
};

// Two activation-dtype values (1024 + q) or (128 + q) for the nibble pair at bits 4p and 16+4p of
// `w >> shift` (ExLlama order: elements 2p and 2p+1). One v_and_or_b32 / lop3.
template <class T>
W4_DEV u32 nibble_pair(u32 w_shifted) {
    return opaque((w_shifted & 0x000F000Fu) | Act<T>::MAGIC2);
}
// acc + w.lo*x.lo + w.hi*x.hi with fp32 products and sums. The products of two 16-bit values
// are exact in fp32. On AMD fp16 this is one v_dot2_f32_f16 (as in the field's decode kernel).
template <class T>
W4_DEV float dot2(u32 w, u32 x, float acc) {
#if W4_AMD
    if constexpr (same_type<T, f16_t>::value) return gcn::fdot2_f32_f16(w, x, acc);
#endif
    float wl, wh, xl, xh;
    Act<T>::pair_to_f32(w, wl, wh);
    Act<T>::pair_to_f32(x, xl, xh);
    return fma_f32(wh, xh, fma_f32(wl, xl, acc));
}
// Pair of (offset + z) for the subtraction that leaves exactly q - z.
template <class T>
W4_DEV u32 offset_pair(u32 z) {
    return (Act<T>::BASE + z) * 0x00010001u;
}
// Zero point of row n in group g: packed [N/8, groups] u32, row n at bits 4*(n%8) of word n/8.
W4_DEV u32 zero_point(const u32* zeros, int n, int g, int groups) {
    if (zeros == nullptr) return 8u;
    return (zeros[(long long)(n >> 3) * groups + g] >> ((n & 7) * 4)) & 15u;
}

// ---------------------------------------------------------------------------------------------
// Warp-level 16x16x16 MMA, fp16/bf16 inputs, fp32 accumulate: D[16x16] += A[16x16] * B^T where
// A is given as 16 rows (m) of 16 k-contiguous elements and B as 16 rows (n) of 16 k-contiguous
// elements, both in shared memory. The caller passes `at(row, chunk)`, the address of element
// (row, 8*chunk) of the 16x16 block (chunk 0 or 1; 16 bytes per chunk, 16-byte aligned), so that
// any swizzle stays in the kernel. Accumulator element e (0..7) of this lane sits at
// (mma_c_row(e), mma_c_col(e)).
// Which fragment layout the MMA uses: the native mma.sync one on NVIDIA, the WMMA ones on gfx11
// and gfx12 (also when emulated: amd_emulation.h defines those layouts on its own, from the ISA).
#if W4_GFX11
#define W4_WMMA 11
#elif W4_GFX12
#define W4_WMMA 12
#endif

#if W4_NV || defined(W4_WMMA)
#define W4_HAS_MMA 1
#endif

#if defined(W4_WMMA) && W4_WMMA == 11
#define W4_MMA_REGS 8
#else
#define W4_MMA_REGS 4
#endif

struct MmaFrag {
    u32 r[W4_MMA_REGS];
};

#if W4_NV
W4_DEV void ldmatrix_x4(MmaFrag& f, const void* p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3])
                 : "r"(a));
}
#endif

// A operand (rows = m).
//  NVIDIA: ldmatrix.x4, matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
//          (rows 8-15, k 8-15) = a0a1, a2a3, a4a5, a6a7 of mma.m16n8k16.
//  gfx11:  lane l holds row l%16, k 0..15 (lanes 16-31 repeat lanes 0-15).
//  gfx12:  lane l holds row l%16, k 8*(l/16) .. +7.
template <class F>
W4_DEV void mma_load_a(MmaFrag& f, F at) {
    const int l = lane_id();
#if !defined(W4_WMMA)
    ldmatrix_x4(f, at((l & 7) + ((l >> 3) & 1) * 8, l >> 4));
#elif W4_WMMA == 11
    const u32x4 a = *(const u32x4*)at(l & 15, 0);
    const u32x4 b = *(const u32x4*)at(l & 15, 1);
    f.r[0] = a.x; f.r[1] = a.y; f.r[2] = a.z; f.r[3] = a.w;
    f.r[4] = b.x; f.r[5] = b.y; f.r[6] = b.z; f.r[7] = b.w;
#else
    const u32x4 a = *(const u32x4*)at(l & 15, l >> 4);
    f.r[0] = a.x; f.r[1] = a.y; f.r[2] = a.z; f.r[3] = a.w;
#endif
}

// B operand (rows = n, k contiguous: B^T row-major, the "col" operand of mma.sync).
//  NVIDIA: ldmatrix.x4 matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15)
//          = b0b1, b2b3 of the first n8 half, then of the second.
//  AMD:    the same lane layout as A, with n in place of m.
template <class F>
W4_DEV void mma_load_b(MmaFrag& f, F at) {
#if !defined(W4_WMMA)
    const int l = lane_id();
    ldmatrix_x4(f, at((l & 7) + (l >> 4) * 8, (l >> 3) & 1));
#else
    mma_load_a(f, at);
#endif
}

#if W4_NV
template <class T>
W4_DEV void mma_m16n8k16(float* c, const u32* a, u32 b0, u32 b1);
template <>
W4_DEV void mma_m16n8k16<f16_t>(float* c, const u32* a, u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
W4_DEV void mma_m16n8k16<bf16_t>(float* c, const u32* a, u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

// Position of accumulator element e of this lane in the 16x16 tile.
W4_DEV int mma_c_row(int e) {
    const int l = lane_id();
#if !defined(W4_WMMA)
    return (l >> 2) + ((e >> 1) & 1) * 8;
#elif W4_WMMA == 11
    return 2 * e + (l >> 4);
#else
    return 8 * (l >> 4) + e;
#endif
}
W4_DEV int mma_c_col(int e) {
    const int l = lane_id();
#if !defined(W4_WMMA)
    return (e >> 2) * 8 + (l & 3) * 2 + (e & 1);
#else
    (void)e;
    return l & 15;
#endif
}

template <class T>
W4_DEV void mma_16x16x16(float (&c)[8], const MmaFrag& a, const MmaFrag& b) {
#if W4_NV
    mma_m16n8k16<T>(c, a.r, b.r[0], b.r[1]);
    mma_m16n8k16<T>(c + 4, a.r, b.r[2], b.r[3]);
#elif W4_WMMA == 11
    if constexpr (same_type<T, f16_t>::value)
        gcn::wmma_f32_16x16x16_f16_w32(c, a.r, b.r);
    else
        gcn::wmma_f32_16x16x16_bf16_w32(c, a.r, b.r);
#else
    if constexpr (same_type<T, f16_t>::value)
        gcn::wmma_f32_16x16x16_f16_w32_gfx12(c, a.r, b.r);
    else
        gcn::wmma_f32_16x16x16_bf16_w32_gfx12(c, a.r, b.r);
#endif
}

}  // namespace w4
