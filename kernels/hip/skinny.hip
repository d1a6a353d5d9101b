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
// Numerics (docs/contract.md §4): nibble pairs become (offset + q) with one and-or, then (q - z) exactly in the
// activation dtype; products and sums are fp32; each group's partial dot is multiplied by its scale
// in fp32; bias is added in fp32 before the single rounding to the output dtype.
//
// Two inner engines with the same numerics contract:
//  - MMA (default on NVIDIA): A = exact (q - z), B = x (columns = m) of mma.m16n8k16, the group's
//    fp32 result scaled and accumulated; cost per weight independent of M. Weights arrive through a
//    cp.async ring of SK_WST shared-memory stages per warp (whole 128-byte lines per row). With
//    G a multiple of 128 a lane's 32 k are one group and feed the mmas directly; with G = 32 / 64
//    the 4x4 words of a lane quad are transposed with shuffles so that every 16-k step lies
//    inside one 32-k chunk (one group).
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

// ALU engine: two static weight slots, the next span's load in flight during this span's math.
#ifndef W4_SKINNY_RING_UNROLL
#define W4_SKINNY_RING_UNROLL 1
#endif
#define SK_RING 1
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
    int group_shift;  // log2(G) when G is a power of two (group index by shift), else -1
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
        const int gi = ok ? (a.group_shift >= 0 ? kc >> a.group_shift : kc / a.group) : 0;
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

// G a multiple of 128 (CPG = 4): a lane's 16 bytes (32 k) lie in one group, and the order of k
// inside one mma is free as long as B follows A. So lane t's A slots {2t, 2t+1} / {2t+8, 2t+9} of
// mma (i, h) take the nibble pairs 2h / 2h+1 of its own word i (k = kc + 8i + 4h + 0..3, ExLlama
// order), and B's slots on lane t are X at those same k: 8 contiguous bytes. No shuffles, and one
// 16-byte X load feeds both mmas of a word.
template <class T>
W4_DEV void mma_span_direct(u32x4 wa, u32x4 wb, const MmaMeta<1>& d, const SkArgs& a, const SkLane& L,
                            const u16* xs, int k0, float (&acc)[4]) {
    const int kc = k0 + 32 * L.t;
    if (kc >= a.k) return;
    const bool in_smem = k0 + SK_SPAN <= a.ks_cols;
    const bool has_x = L.g < a.m;
    const u32 A[4] = {wa.x, wa.y, wa.z, wa.w};
    const u32 B[4] = {wb.x, wb.y, wb.z, wb.w};
    // One accumulator chain per word: the four chains of two mmas overlap instead of eight mmas
    // waiting on each other (fp32 sums either way; the order is fixed, so runs stay bit-identical).
    float D[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        D[i][0] = D[i][1] = D[i][2] = D[i][3] = 0.f;
        u32x4 xv = zero4();
        if (has_x) xv = in_smem ? *(const u32x4*)(xs + L.g * a.pitch + kc + 8 * i) : load_x16(a, xs, L.g, kc + 8 * i, false);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            u32 af[4];
            af[0] = Act<T>::sub2(nibble_pair<T>(A[i] >> (8 * h)), d.zg[0]);
            af[1] = Act<T>::sub2(nibble_pair<T>(B[i] >> (8 * h)), d.zh[0]);
            af[2] = Act<T>::sub2(nibble_pair<T>(A[i] >> (8 * h + 4)), d.zg[0]);
            af[3] = Act<T>::sub2(nibble_pair<T>(B[i] >> (8 * h + 4)), d.zh[0]);
            mma_m16n8k16<T>(D[i], af, h ? xv.z : xv.x, h ? xv.w : xv.y);
        }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float sum = (D[0][j] + D[1][j]) + (D[2][j] + D[3][j]);
        acc[j] = fma_f32(sum, j < 2 ? d.sg[0] : d.sh[0], acc[j]);
    }
}

// One span: the shuffle-free path where a lane's chunk is one group, the transposing one otherwise.
template <class T, int CPG>
W4_DEV void mma_any_span(u32x4 wa, u32x4 wb, const MmaMeta<4 / CPG>& d, const SkArgs& a, const SkLane& L,
                         const u16* xs, int k0, float (&acc)[4]) {
    if constexpr (CPG == 4)
        mma_span_direct<T>(wa, wb, d, a, L, xs, k0, acc);
    else
        mma_span<T, CPG>(wa, wb, d, a, L, xs, k0, acc);
}

// Weights reach the MMA engine through a ring of SK_WST shared-memory stages per warp, filled with
// cp.async: a stage is the warp's 16 rows x 128 bytes (a chunk of 256 k, two spans), copied as 4 rows
// x 128 contiguous bytes per instruction. Whole 128-byte lines per row are the read pattern that
// gets near copy bandwidth on the H200 (8 rows x 64 bytes per instruction, the direct fragment
// loads, measured 30-40 % slower in isolation), and SK_WST - 1 stages stay in flight without holding
// registers. Two stages measured faster than three or four on the H200 (22.8 / 24.9 us at M = 1).
// Lanes then read their fragments (rows g and g+8, 32 k at t) from the stage: the same words the
// direct loads gave. Odd rows keep their line with the halves swapped, so that the two rows of one
// 8-lane phase of a 16-byte shared read fall in different banks. Warp ks takes chunks ks, ks + KS...
#ifndef SK_WST
#define SK_WST 2
#endif
#define SK_WROW 128
#define SK_WSTAGE (16 * SK_WROW)

struct SkStages {
    unsigned char* base;  // this warp's SK_WST stages
    int cnt;              // chunks this warp takes
};

W4_DEV int stage_piece(int r, int p) { return p ^ ((r & 1) << 2); }

// Copies chunk i of this warp into its slot and commits the group (an empty group past the end keeps
// the wait counts uniform).
W4_DEV void stage_issue(const SkArgs& a, const SkLane& L, const SkStages& S, int i) {
    if (i < S.cnt) {
        const int ch = L.ks + i * L.nks;
        unsigned char* dst = S.base + (i % SK_WST) * SK_WSTAGE;
        const int p = L.lane & 7;
        const int kb = ch * SK_WROW + p * 16;
        const bool kin = kb < a.k / 2;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int r = 4 * j + (L.lane >> 3);
            const int row = a.nbase + L.rt * 16 + r;
            const bool ok = kin && row < a.n;
            const char* src = (const char*)a.w + (ok ? (long long)row * a.wrs + kb : 0);
            cp_async16(dst + r * SK_WROW + stage_piece(r, p) * 16, src, ok);
        }
    }
    cp_async_commit();
}

W4_DEV void stage_prologue(const SkArgs& a, const SkLane& L, const SkStages& S) {
#pragma unroll
    for (int i = 0; i < SK_WST - 1; ++i) stage_issue(a, L, S, i);
}

template <class T, int CPG>
W4_DEV void staged_warp(const SkArgs& a, const SkLane& L, const SkStages& S, const u16* xs, float* red) {
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int i = 0; i < S.cnt; ++i) {
        cp_async_wait<SK_WST - 2>();
        __syncwarp();
        stage_issue(a, L, S, i + SK_WST - 1);
        const unsigned char* st = S.base + (i % SK_WST) * SK_WSTAGE;
        const int ch = L.ks + i * L.nks;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int k0 = (2 * ch + h) * SK_SPAN;
            if (k0 < a.k) {
                const int p = 4 * h + L.t;
                const u32x4 wa = *(const u32x4*)(st + L.g * SK_WROW + stage_piece(L.g, p) * 16);
                const u32x4 wb = *(const u32x4*)(st + (L.g + 8) * SK_WROW + stage_piece(L.g + 8, p) * 16);
                MmaMeta<4 / CPG> m;
                mma_meta<T, CPG>(m, a, L, k0);
                mma_any_span<T, CPG>(wa, wb, m, a, L, xs, k0, acc);
            }
        }
    }
    // acc: (row g, m 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1); only m < 8 exist.
    float* r = red + (L.ks * L.nrt * 16 + L.rt * 16) * 8;
    r[L.g * 8 + 2 * L.t] = acc[0];
    r[L.g * 8 + 2 * L.t + 1] = acc[1];
    r[(L.g + 8) * 8 + 2 * L.t] = acc[2];
    r[(L.g + 8) * 8 + 2 * L.t + 1] = acc[3];
}

template <class T>
W4_DEV void staged_skinny_warp(const SkArgs& a, const SkLane& L, const SkStages& S, const u16* xs, float* red) {
    if (a.group == 64)
        staged_warp<T, 2>(a, L, S, xs, red);
    else if (a.group % 128 == 0)
        staged_warp<T, 4>(a, L, S, xs, red);
    else
        staged_warp<T, 1>(a, L, S, xs, red);
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
    a.group_shift = -1;
    for (int sh = 0; sh < 31; ++sh)
        if ((1 << sh) == group) a.group_shift = sh;
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

    // MMA: this warp's ring of weight stages (queued right after the staging copies below). ALU:
    // this lane's first span of weights, in flight while X and the scales are staged.
#if W4_SKINNY_MMA
    extern __shared__ W4_ALIGN16 unsigned char sk_wbuf[];
    SkStages S;
    S.base = sk_wbuf + (L.rt * nks + L.ks) * (SK_WST * SK_WSTAGE);
    {
        const int nch = (k + 2 * SK_SPAN - 1) / (2 * SK_SPAN);
        S.cnt = L.ks < nch ? (nch - L.ks + nks - 1) / nks : 0;
    }
#else
    u32x4 wa[SK_RING], wb[SK_RING];
    ring_prologue(a, L, wa, wb);
#endif

    // Scales, zero points and X go to shared memory with cp.async where their rows allow 16-byte
    // copies: every copy of the stage is in flight at once (one DRAM round trip before the first
    // span, not one per strided 2-byte load), and the weights' first stages are already queued.
    if (a.meta_smem) {
        const bool s_vec = a.groups % 8 == 0 && scale_row_stride % 8 == 0 && ((u64)(const void*)scales & 15u) == 0;
        if (s_vec) {
            const int per_row = a.groups / 8;
            for (int idx = tid; idx < rows * per_row; idx += SK_THREADS) {
                const int r = idx / per_row;
                const int c = (idx - r * per_row) * 8;
                const int nn = nbase + r;
                cp_async16(ss + r * a.groups + c, a.s + (long long)(nn < n ? nn : 0) * scale_row_stride + c, nn < n);
            }
        } else {
            for (int idx = tid; idx < rows * a.groups; idx += SK_THREADS) {
                const int r = idx / a.groups;
                const int gi = idx - r * a.groups;
                const int nn = nbase + r;
                ss[idx] = nn < n ? a.s[(long long)nn * scale_row_stride + gi] : (u16)0;
            }
        }
        if (zeros != nullptr) {
            // Words of rows past N are never read (zero_of answers 8 for them).
            const bool z_vec = a.groups % 4 == 0 && ((u64)(const void*)zeros & 15u) == 0;
            if (z_vec) {
                const int per_row = a.groups / 4;
                for (int idx = tid; idx < (rows / 8) * per_row; idx += SK_THREADS) {
                    const int rw = idx / per_row;
                    const int c = (idx - rw * per_row) * 4;
                    const int nw = (nbase >> 3) + rw;
                    cp_async16(zs + rw * a.groups + c, zeros + (long long)(nw * 8 < n ? nw : 0) * a.groups + c, nw * 8 < n);
                }
            } else {
                for (int idx = tid; idx < (rows / 8) * a.groups; idx += SK_THREADS) {
                    const int rw = idx / a.groups;
                    const int gi = idx - rw * a.groups;
                    const int nw = (nbase >> 3) + rw;
                    zs[idx] = nw * 8 < n ? zeros[(long long)nw * a.groups + gi] : 0x88888888u;
                }
            }
        }
    }
    const int chunks = a.ks_cols / 8;
    for (int idx = tid; idx < m * chunks; idx += SK_THREADS) {
        const int mm = idx / chunks;
        const int kk = (idx - mm * chunks) * 8;
        u16* dst = xs + mm * a.pitch + kk;
        if (a.x_vec16) {
            cp_async16(dst, a.x + (long long)mm * a.xrs + (kk < k ? kk : 0), kk < k);
        } else {
            u32x4 v = zero4();
            if (kk < k) v = load_x16(a, xs, mm, kk, false);
            *(u32x4*)dst = v;
        }
    }
    cp_async_commit();
    // That group is the oldest: the weights' first SK_WST - 1 stages queue behind it and may stay
    // in flight through the barrier.
#if W4_SKINNY_MMA
    stage_prologue(a, L, S);
    cp_async_wait<SK_WST - 1>();
#else
    cp_async_wait<0>();
#endif
    sync_block();

#if W4_SKINNY_MMA
    staged_skinny_warp<T>(a, L, S, xs, red);
#else
    skinny_warp<T>(a, L, xs, red, wa, wb);
#endif
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
