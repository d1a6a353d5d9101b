// skinny: the decode GEMM, 1 <= M <= 5.
//
//   y[m, n] = sum_g s[n, g] * sum_{k in g} (q[n, k] - z[n, g]) * x[m, k]   (+ bias[n]), one cast.
//
// Launch: 256 threads as block (32 * KS, RT): RT row tiles of 16 output rows (threadIdx.y) times
// KS = 8 / RT warps that split K (threadIdx.x / 32); grid.x = ceil(N / (16 * RT)). The launch
// geometry picks RT in {1, 2, 4, 8} (more K-splits when N is small) and the kernel reads it back
// from its block shape. Each warp walks its share of K in spans of 128; the K-splits are summed
// through shared memory in a fixed order (no atomics: every run is bit-identical). X is staged in
// shared memory up to SK_XCAP elements (the first Ks columns of every row); the columns beyond are
// read from global memory, so there is no limit on K*M. The scales and packed zero points of the
// block's rows are staged in shared memory too when they fit (SK_SCAP / SK_ZCAP), so that no span
// waits for a DRAM round trip on them; the first spans of weights are already in flight meanwhile.
//
// Inside a warp, lane (g = lane/4, t = lane%4) loads 16 bytes (32 k) of rows g and g+8 per span.
// Numerics (SPEC §4): nibble pairs become (offset + q) with one and-or, then (q - z) exactly in the
// activation dtype; products and sums are fp32; each group's partial dot is multiplied by its scale
// in fp32; bias is added in fp32 before the single rounding to the output dtype.
//
// Two inner engines with the same numerics contract:
//  - MMA (default on NVIDIA): the 4x4 words of a lane quad are transposed with shuffles so that
//    every 16-k step of mma.m16n8k16 lies inside one 32-k chunk (one group); A = exact (q - z),
//    B = x (columns = m), the group's fp32 result is scaled and accumulated. Cost per weight is
//    independent of M; weights are prefetched SK_DEPTH spans ahead.
//  - ALU (AMD, and NVIDIA with -DW4_SKINNY_MMA=0): per-lane fp32 dot products (v_dot2_f32_f16 on
//    AMD fp16), reduced across the lane quad with xor shuffles.
#include "compat.h"

using namespace w4;

#define SK_THREADS 256
#define SK_WARPS 8
#define SK_SPAN 128
#ifndef SK_XCAP
#define SK_XCAP 16384
#endif
#define SK_MMAX 5
#ifndef W4_SKINNY_MMA
#if W4_NV
#define W4_SKINNY_MMA 1
#else
#define W4_SKINNY_MMA 0
#endif
#endif

#ifndef SK_DEPTH
#define SK_DEPTH 3
#endif
// Static-slot weight ring (see mma_warp). Off by default until a GPU run has checked it.
#ifndef W4_SKINNY_RING_UNROLL
#define W4_SKINNY_RING_UNROLL 1
#endif
#if W4_SKINNY_MMA
#define SK_RING SK_DEPTH
#else
#define SK_RING 1
#endif
// Shared-memory capacity for the block's scales (entries) and packed zero-point words; with the
// X buffer and the reduction buffer the block stays under NVIDIA's 48 KiB of static shared memory.
#define SK_SCAP 4096
#define SK_ZCAP 512

namespace {

struct SkArgs {
    const u16* x;
    const u32* w;
    const u16* s;
    const u32* z;
    const u16* bias;
    u16* y;
    int m, n, k, group, xrs, wrs, srs, yrs;
    int groups;    // K / G
    int ks_cols;   // columns of X held in shared memory (multiple of SK_SPAN)
    int pitch;     // shared row pitch of X (elements)
    bool x_vec16;  // X rows 16-byte aligned
    bool x_vec8;   // X rows 8-byte aligned
    // Scales and zero-point words of the block's rows, staged in shared memory when they fit
    // (every span then reads them at shared-memory latency instead of one DRAM round trip).
    bool meta_smem;
    int nbase;        // first row of the block
    const u16* ss;    // [rows][groups] scale bits
    const u32* zs;    // [rows / 8][groups] packed zero points
};

// Per-warp position.
struct SkLane {
    int lane, g, t, rt, ks;
    int nrt, nks;  // RT row tiles, KS K-splits (RT * KS = 8 warps)
    int rg, rh;  // the two rows of this lane
    bool vg, vh;
    const char* wg;
    const char* wh;
};

W4_DEV u32x4 zero4() {
    u32x4 r;
    r.x = r.y = r.z = r.w = 0u;
    return r;
}

// The 16 bytes (32 k) of row `valid ? row : -` at column kc, or zeros.
W4_DEV u32x4 load_w16(const char* row, bool valid, int kc, int k) {
    if (valid && kc < k) return ld_stream16(row + (kc >> 1));
    return zero4();
}

W4_DEV u32x2 load_x8(const SkArgs& a, const u16* xs, int m, int kx, bool in_smem) {
    if (in_smem) return *(const u32x2*)(xs + m * a.pitch + kx);
    const u16* p = a.x + (long long)m * a.xrs + kx;
    if (a.x_vec8) return ld8(p);
    u32x2 r;
    r.x = (u32)p[0] | ((u32)p[1] << 16);
    r.y = (u32)p[2] | ((u32)p[3] << 16);
    return r;
}

W4_DEV u32x4 load_x16(const SkArgs& a, const u16* xs, int m, int kx, bool in_smem) {
    if (in_smem) return *(const u32x4*)(xs + m * a.pitch + kx);
    const u16* p = a.x + (long long)m * a.xrs + kx;
    if (a.x_vec16) return ld16(p);
    u32x4 r;
    r.x = (u32)p[0] | ((u32)p[1] << 16);
    r.y = (u32)p[2] | ((u32)p[3] << 16);
    r.z = (u32)p[4] | ((u32)p[5] << 16);
    r.w = (u32)p[6] | ((u32)p[7] << 16);
    return r;
}

template <class T>
W4_DEV float scale_of(const SkArgs& a, int row, bool valid, int gi) {
    if (!valid) return 0.0f;
    if (a.meta_smem) return Act<T>::to_f32(a.ss[(row - a.nbase) * a.groups + gi]);
    return Act<T>::to_f32(a.s[(long long)row * a.srs + gi]);
}

// (offset + z) pair of `row` in group gi (z = 8 for symmetric layers and for rows past N).
template <class T>
W4_DEV u32 zero_of(const SkArgs& a, int row, bool valid, int gi) {
    if (!valid || a.z == nullptr) return offset_pair<T>(8u);
    if (a.meta_smem) return offset_pair<T>((a.zs[((row - a.nbase) >> 3) * a.groups + gi] >> ((row & 7) * 4)) & 15u);
    return offset_pair<T>(zero_point(a.z, row, gi, a.groups));
}

#if W4_SKINNY_MMA
// 4x4 transpose of words across the lane quad: before, lane t holds words 0..3 of chunk t; after,
// word t of chunks 0..3.
W4_DEV void transpose_quad(u32 (&v)[4], int t) {
#pragma unroll
    for (int s = 1; s <= 2; s <<= 1) {
        const bool hi = (t & s) != 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if ((j & s) != 0) continue;
            const u32 send = hi ? v[j] : v[j ^ s];
            const u32 recv = shfl_xor(send, s);
            if (hi)
                v[j] = recv;
            else
                v[j ^ s] = recv;
        }
    }
}

// Scales (fp32) and offset pairs (offset + z) of the NG groups a span touches, rows g and g+8.
template <int NG>
struct MmaMeta {
    float sg[NG], sh[NG];
    u32 zg[NG], zh[NG];
};

// CPG = 32-k chunks per group inside a 128-aligned span: 1 (G = 32 or any multiple of 32: groups
// are looked up per chunk), 2 (G = 64), 4 (G a multiple of 128).
template <class T, int CPG>
W4_DEV void mma_meta(MmaMeta<4 / CPG>& d, const SkArgs& a, const SkLane& L, int k0) {
#pragma unroll
    for (int i = 0; i < 4 / CPG; ++i) {
        const int kc = k0 + 32 * CPG * i;
        const bool ok = kc < a.k;
        const int gi = ok ? kc / a.group : 0;
        d.sg[i] = ok ? scale_of<T>(a, L.rg, L.vg, gi) : 0.0f;
        d.sh[i] = ok ? scale_of<T>(a, L.rh, L.vh, gi) : 0.0f;
        d.zg[i] = zero_of<T>(a, L.rg, L.vg && ok, gi);
        d.zh[i] = zero_of<T>(a, L.rh, L.vh && ok, gi);
    }
}

template <class T, int CPG>
W4_DEV void mma_span(u32x4 wa, u32x4 wb, const MmaMeta<4 / CPG>& d, const SkArgs& a, const SkLane& L, const u16* xs,
                     int k0, float (&acc)[4]) {
    u32 A[4] = {wa.x, wa.y, wa.z, wa.w};
    u32 B[4] = {wb.x, wb.y, wb.z, wb.w};
    transpose_quad(A, L.t);
    transpose_quad(B, L.t);
    const bool in_smem = k0 + SK_SPAN <= a.ks_cols;
    const bool has_x = L.g < a.m;
    float D[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        const int kc = k0 + 32 * c;
        if (kc >= a.k) break;
        const int i = c / CPG;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            // a0a1 / a4a5: row g, k = kc + 8t + 4h + {0,1} / {2,3}; a2a3 / a6a7: row g+8.
            u32 af[4];
            af[0] = Act<T>::sub2(nibble_pair<T>(A[c] >> (8 * h)), d.zg[i]);
            af[1] = Act<T>::sub2(nibble_pair<T>(B[c] >> (8 * h)), d.zh[i]);
            af[2] = Act<T>::sub2(nibble_pair<T>(A[c] >> (8 * h + 4)), d.zg[i]);
            af[3] = Act<T>::sub2(nibble_pair<T>(B[c] >> (8 * h + 4)), d.zh[i]);
            // b0b1 / b2b3: column m = g, the same four k.
            u32x2 xb;
            xb.x = xb.y = 0u;
            if (has_x) xb = load_x8(a, xs, L.g, kc + 8 * L.t + 4 * h, in_smem);
            mma_m16n8k16<T>(D, af, xb.x, xb.y);
        }
        // A group ends at the end of its chunks, of the span, or of K.
        bool flush;
        if (CPG == 1)
            flush = (c == 3) || (kc + 32 >= a.k) || ((kc + 32) / a.group != kc / a.group);
        else
            flush = ((c + 1) % CPG == 0) || (kc + 32 >= a.k);
        if (flush) {
            acc[0] = fma_f32(D[0], d.sg[i], acc[0]);
            acc[1] = fma_f32(D[1], d.sg[i], acc[1]);
            acc[2] = fma_f32(D[2], d.sh[i], acc[2]);
            acc[3] = fma_f32(D[3], d.sh[i], acc[3]);
            D[0] = D[1] = D[2] = D[3] = 0.f;
        }
    }
}

// The first SK_DEPTH spans of this lane's weights (issued before X and the scales are staged).
W4_DEV void ring_prologue(const SkArgs& a, const SkLane& L, u32x4 (&wa)[SK_RING], u32x4 (&wb)[SK_RING]) {
    const int nspan = (a.k + SK_SPAN - 1) / SK_SPAN;
    const int cnt = L.ks < nspan ? (nspan - L.ks + L.nks - 1) / L.nks : 0;
#pragma unroll
    for (int d = 0; d < SK_DEPTH; ++d) {
        const int kc = (L.ks + d * L.nks) * SK_SPAN + 32 * L.t;
        wa[d] = d < cnt ? load_w16(L.wg, L.vg, kc, a.k) : zero4();
        wb[d] = d < cnt ? load_w16(L.wh, L.vh, kc, a.k) : zero4();
    }
}

template <class T, int CPG>
W4_DEV void mma_warp(const SkArgs& a, const SkLane& L, const u16* xs, float* red, u32x4 (&wa)[SK_RING],
                     u32x4 (&wb)[SK_RING]) {
    const int nspan = (a.k + SK_SPAN - 1) / SK_SPAN;
    const int cnt = L.ks < nspan ? (nspan - L.ks + L.nks - 1) / L.nks : 0;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#if W4_SKINNY_RING_UNROLL
    // Ring of SK_DEPTH spans of weights in flight with static slots: span i lives in slot
    // i % SK_DEPTH, and the load of span i + SK_DEPTH goes straight into that slot once span i is
    // consumed, so no register copy ever waits on a load in flight.
    for (int i0 = 0; i0 < cnt; i0 += SK_DEPTH) {
#pragma unroll
        for (int d = 0; d < SK_DEPTH; ++d) {
            const int i = i0 + d;
            if (i < cnt) {
                const int sp = L.ks + i * L.nks;
                MmaMeta<4 / CPG> m;
                mma_meta<T, CPG>(m, a, L, sp * SK_SPAN);
                mma_span<T, CPG>(wa[d], wb[d], m, a, L, xs, sp * SK_SPAN, acc);
                if (i + SK_DEPTH < cnt) {
                    const int kc = (sp + SK_DEPTH * L.nks) * SK_SPAN + 32 * L.t;
                    wa[d] = load_w16(L.wg, L.vg, kc, a.k);
                    wb[d] = load_w16(L.wh, L.vh, kc, a.k);
                }
            }
        }
    }
#else
    // Ring of SK_DEPTH spans of weights in flight; meta one span ahead. (The rotation at the end
    // of each iteration copies the newest load, which makes the warp wait for it: in effect one
    // span of prefetch. Verified on the H200; W4_SKINNY_RING_UNROLL is the fix, not yet run.)
    MmaMeta<4 / CPG> mc;
    mma_meta<T, CPG>(mc, a, L, L.ks * SK_SPAN);
    for (int i = 0; i < cnt; ++i) {
        const int sp = L.ks + i * L.nks;
        u32x4 na = zero4(), nb = zero4();
        if (i + SK_DEPTH < cnt) {
            const int kc = (sp + SK_DEPTH * L.nks) * SK_SPAN + 32 * L.t;
            na = load_w16(L.wg, L.vg, kc, a.k);
            nb = load_w16(L.wh, L.vh, kc, a.k);
        }
        MmaMeta<4 / CPG> mn = mc;
        if (i + 1 < cnt) mma_meta<T, CPG>(mn, a, L, (sp + L.nks) * SK_SPAN);
        mma_span<T, CPG>(wa[0], wb[0], mc, a, L, xs, sp * SK_SPAN, acc);
#pragma unroll
        for (int d = 0; d + 1 < SK_DEPTH; ++d) {
            wa[d] = wa[d + 1];
            wb[d] = wb[d + 1];
        }
        wa[SK_DEPTH - 1] = na;
        wb[SK_DEPTH - 1] = nb;
        mc = mn;
    }
#endif
    // acc: (row g, m 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1); only m < 8 exist.
    float* r = red + (L.ks * L.nrt * 16 + L.rt * 16) * 8;
    r[L.g * 8 + 2 * L.t] = acc[0];
    r[L.g * 8 + 2 * L.t + 1] = acc[1];
    r[(L.g + 8) * 8 + 2 * L.t] = acc[2];
    r[(L.g + 8) * 8 + 2 * L.t + 1] = acc[3];
}

template <class T>
W4_DEV void skinny_warp(const SkArgs& a, const SkLane& L, const u16* xs, float* red, u32x4 (&wa)[SK_RING],
                        u32x4 (&wb)[SK_RING]) {
    if (a.group == 64)
        mma_warp<T, 2>(a, L, xs, red, wa, wb);
    else if (a.group % 128 == 0)
        mma_warp<T, 4>(a, L, xs, red, wa, wb);
    else
        mma_warp<T, 1>(a, L, xs, red, wa, wb);
}

#else  // ALU engine

template <class T, int MT>
W4_DEV void alu_span(const SkArgs& a, const SkLane& L, const u16* xs, int k0, u32x4 wa, u32x4 wb, float (&accg)[MT],
                     float (&acch)[MT]) {
    const int kc = k0 + 32 * L.t;
    if (kc >= a.k) return;
    const int gi = kc / a.group;
    const float sg = scale_of<T>(a, L.rg, L.vg, gi);
    const float sh = scale_of<T>(a, L.rh, L.vh, gi);
    const u32 zg = zero_of<T>(a, L.rg, L.vg, gi);
    const u32 zh = zero_of<T>(a, L.rh, L.vh, gi);
    const bool in_smem = k0 + SK_SPAN <= a.ks_cols;
    const u32 WA[4] = {wa.x, wa.y, wa.z, wa.w};
    const u32 WB[4] = {wb.x, wb.y, wb.z, wb.w};
    float dg[MT], dh[MT];
#pragma unroll
    for (int m = 0; m < MT; ++m) dg[m] = dh[m] = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        u32 xv[MT][4];
#pragma unroll
        for (int m = 0; m < MT; ++m) {
            const u32x4 v = load_x16(a, xs, m, kc + 8 * j, in_smem);
            xv[m][0] = v.x;
            xv[m][1] = v.y;
            xv[m][2] = v.z;
            xv[m][3] = v.w;
        }
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const u32 qg = Act<T>::sub2(nibble_pair<T>(WA[j] >> (4 * p)), zg);
            const u32 qh = Act<T>::sub2(nibble_pair<T>(WB[j] >> (4 * p)), zh);
#pragma unroll
            for (int m = 0; m < MT; ++m) {
                dg[m] = dot2<T>(qg, xv[m][p], dg[m]);
                dh[m] = dot2<T>(qh, xv[m][p], dh[m]);
            }
        }
    }
#pragma unroll
    for (int m = 0; m < MT; ++m) {
        accg[m] = fma_f32(dg[m], sg, accg[m]);
        acch[m] = fma_f32(dh[m], sh, acch[m]);
    }
}

template <class T, int MT>
W4_DEV void skinny_warp_m(const SkArgs& a, const SkLane& L, const u16* xs, float* red, u32x4 wa, u32x4 wb) {
    const int nspan = (a.k + SK_SPAN - 1) / SK_SPAN;
    float accg[MT], acch[MT];
#pragma unroll
    for (int m = 0; m < MT; ++m) accg[m] = acch[m] = 0.f;
#if W4_SKINNY_RING_UNROLL
    // Two static slots: the next span's load is issued before this span's math and lands in the
    // other slot; no register copy waits on a load in flight.
    u32x4 slot_a[2] = {wa, zero4()}, slot_b[2] = {wb, zero4()};
    for (int sp0 = L.ks; sp0 < nspan; sp0 += 2 * L.nks) {
#pragma unroll
        for (int d = 0; d < 2; ++d) {
            const int sp = sp0 + d * L.nks;
            if (sp < nspan) {
                const int spn = sp + L.nks;
                if (spn < nspan) {
                    const int kc = spn * SK_SPAN + 32 * L.t;
                    slot_a[d ^ 1] = load_w16(L.wg, L.vg, kc, a.k);
                    slot_b[d ^ 1] = load_w16(L.wh, L.vh, kc, a.k);
                }
                alu_span<T, MT>(a, L, xs, sp * SK_SPAN, slot_a[d], slot_b[d], accg, acch);
            }
        }
    }
#else
    for (int sp = L.ks; sp < nspan; sp += L.nks) {
        const int spn = sp + L.nks;
        u32x4 na = zero4(), nb = zero4();
        if (spn < nspan) {
            const int kc = spn * SK_SPAN + 32 * L.t;
            na = load_w16(L.wg, L.vg, kc, a.k);
            nb = load_w16(L.wh, L.vh, kc, a.k);
        }
        alu_span<T, MT>(a, L, xs, sp * SK_SPAN, wa, wb, accg, acch);
        wa = na;
        wb = nb;
    }
#endif
    // Sum over the lane quad (t); commutative adds give every lane the same bits.
#pragma unroll
    for (int m = 0; m < MT; ++m) {
        accg[m] += shfl_xor(accg[m], 1);
        accg[m] += shfl_xor(accg[m], 2);
        acch[m] += shfl_xor(acch[m], 1);
        acch[m] += shfl_xor(acch[m], 2);
    }
    if (L.t == 0) {
        float* r = red + (L.ks * L.nrt * 16 + L.rt * 16) * 8;
#pragma unroll
        for (int m = 0; m < MT; ++m) {
            r[L.g * 8 + m] = accg[m];
            r[(L.g + 8) * 8 + m] = acch[m];
        }
    }
}

// The first span of this lane's weights (issued before X and the scales are staged).
W4_DEV void ring_prologue(const SkArgs& a, const SkLane& L, u32x4 (&wa)[1], u32x4 (&wb)[1]) {
    const int kc0 = L.ks * SK_SPAN + 32 * L.t;
    wa[0] = load_w16(L.wg, L.vg, kc0, a.k);
    wb[0] = load_w16(L.wh, L.vh, kc0, a.k);
}

template <class T>
W4_DEV void skinny_warp(const SkArgs& a, const SkLane& L, const u16* xs, float* red, u32x4 (&wa)[1], u32x4 (&wb)[1]) {
    switch (a.m) {
        case 1: skinny_warp_m<T, 1>(a, L, xs, red, wa[0], wb[0]); break;
        case 2: skinny_warp_m<T, 2>(a, L, xs, red, wa[0], wb[0]); break;
        case 3: skinny_warp_m<T, 3>(a, L, xs, red, wa[0], wb[0]); break;
        case 4: skinny_warp_m<T, 4>(a, L, xs, red, wa[0], wb[0]); break;
        default: skinny_warp_m<T, 5>(a, L, xs, red, wa[0], wb[0]); break;
    }
}
#endif

template <class T>
W4_DEV void skinny(const T* x, const uint32_t* w, const T* scales, const uint32_t* zeros, const T* bias, T* y, int m, int n,
                   int k, int group, int x_row_stride, int w_row_stride_bytes, int scale_row_stride, int y_row_stride) {
    __shared__ W4_ALIGN16 u16 xs[SK_XCAP + 8 * SK_MMAX];
    __shared__ W4_ALIGN16 float red[SK_WARPS * 16 * 8];
    __shared__ W4_ALIGN16 u16 ss[SK_SCAP];
    __shared__ W4_ALIGN16 u32 zs[SK_ZCAP];
    const int nrt = block_dim_y();
    const int nks = block_dim_x() / 32;
    if (m < 1 || m > SK_MMAX || group <= 0 || k <= 0 || nrt * nks != SK_WARPS) return;

    SkArgs a;
    a.x = (const u16*)x;
    a.w = w;
    a.s = (const u16*)scales;
    a.z = zeros;
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
    const int kround = (k + SK_SPAN - 1) / SK_SPAN * SK_SPAN;
    const int cap = (SK_XCAP / m) / SK_SPAN * SK_SPAN;
    a.ks_cols = kround < cap ? kround : cap;
    a.pitch = a.ks_cols + 8;
    const u64 xaddr = (u64)(const void*)x;
    a.x_vec16 = (xaddr & 15u) == 0 && (x_row_stride & 7) == 0;
    a.x_vec8 = (xaddr & 7u) == 0 && (x_row_stride & 3) == 0;

    const int tid = tid_y() * block_dim_x() + tid_x();
    SkLane L;
    L.nrt = nrt;
    L.nks = nks;
    L.lane = lane_id();
    L.g = L.lane >> 2;
    L.t = L.lane & 3;
    L.rt = tid_y();
    L.ks = tid_x() >> 5;
    const int rows = 16 * nrt;
    const int nbase = bid_x() * rows;
    a.nbase = nbase;
    a.ss = ss;
    a.zs = zs;
    a.meta_smem = rows * a.groups <= SK_SCAP && (rows / 8) * a.groups <= SK_ZCAP;
    L.rg = nbase + L.rt * 16 + L.g;
    L.rh = L.rg + 8;
    L.vg = L.rg < n;
    L.vh = L.rh < n;
    L.wg = (const char*)w + (long long)(L.vg ? L.rg : 0) * w_row_stride_bytes;
    L.wh = (const char*)w + (long long)(L.vh ? L.rh : 0) * w_row_stride_bytes;

    // This lane's first spans of weights are in flight while X and the scales are staged.
    u32x4 wa[SK_RING], wb[SK_RING];
    ring_prologue(a, L, wa, wb);

    if (a.meta_smem) {
        for (int idx = tid; idx < rows * a.groups; idx += SK_THREADS) {
            const int r = idx / a.groups;
            const int gi = idx - r * a.groups;
            const int nn = nbase + r;
            ss[idx] = nn < n ? a.s[(long long)nn * scale_row_stride + gi] : (u16)0;
        }
        if (zeros != nullptr) {
            for (int idx = tid; idx < (rows / 8) * a.groups; idx += SK_THREADS) {
                const int rw = idx / a.groups;
                const int gi = idx - rw * a.groups;
                const int nw = (nbase >> 3) + rw;
                zs[idx] = nw * 8 < n ? zeros[(long long)nw * a.groups + gi] : 0x88888888u;
            }
        }
    }
    const int chunks = a.ks_cols / 8;
    for (int idx = tid; idx < m * chunks; idx += SK_THREADS) {
        const int mm = idx / chunks;
        const int kk = (idx - mm * chunks) * 8;
        u32x4 v = zero4();
        if (kk < k) v = load_x16(a, xs, mm, kk, false);
        *(u32x4*)(xs + mm * a.pitch + kk) = v;
    }
    sync_block();

    skinny_warp<T>(a, L, xs, red, wa, wb);
    sync_block();

    for (int idx = tid; idx < rows * m; idx += SK_THREADS) {
        const int mm = idx / rows;
        const int r = idx - mm * rows;
        const int nn = nbase + r;
        if (nn >= n) continue;
        float v = red[r * 8 + mm];
        for (int s = 1; s < nks; ++s) v += red[(s * rows + r) * 8 + mm];
        if (a.bias != nullptr) v += Act<T>::to_f32(a.bias[nn]);
        a.y[(long long)mm * y_row_stride + nn] = Act<T>::from_f32(v);
    }
}

}  // namespace

#define W4_SKINNY_ENTRY(NAME, T)                                                                              \
    extern "C" __global__ __launch_bounds__(SK_THREADS) void NAME(                                           \
        const T* x, const uint32_t* w, const T* scales, const uint32_t* zeros, const T* bias, T* y, int m, int n, \
        int k, int group, int x_row_stride, int w_row_stride_bytes, int scale_row_stride, int y_row_stride) {     \
        skinny<T>(x, w, scales, zeros, bias, y, m, n, k, group, x_row_stride, w_row_stride_bytes, scale_row_stride, \
                  y_row_stride);                                                                              \
    }

W4_SKINNY_ENTRY(w4a16_skinny_f16, f16_t)
W4_SKINNY_ENTRY(w4a16_skinny_bf16, bf16_t)
