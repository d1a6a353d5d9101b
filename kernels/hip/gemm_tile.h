// gemm_tile.h: the tile main loop of the prefill int4 GEMM, shared by fused.hip (rows of X in
// order) and moe.hip (rows gathered through the routing). Include it after compat.h; NVRTC gets
// it spliced in place of its include line (kernels/src/source.rs).
//
// Tiles of (BM, BN, BK = 32) with WM x WN warps, block (32 * WM * WN). Per K step, X (BM x 32) and
// the packed weights (BN x 16 bytes) are copied into 3-slot shared-memory rings (cp.async on
// NVIDIA, plain copies on AMD) two iterations ahead, the weights of the next step are dequantized
// into shared memory as round((q - z) * s) in the activation dtype (one scale and zero point per
// row per step: BK <= G), and the warps run the 16x16x16 matrix-core MMA of compat.h (mma.sync /
// v_wmma) with fp32 accumulation. One barrier per K step.
//
// The caller says which row of X each tile row reads (`x_row`, which also says whether the row
// exists: missing rows read as zeros) and what becomes of each fp32 accumulator (`store`, called
// once per accumulator with its row and column); the weights, scales and zero points are one
// layer's (or one expert's), already offset to it.
//
// CARRIER (fused_carrier only; false for fused and moe, whose code is unchanged by it): the scale
// and zero point of each (n, g) come from one word of the asymmetric carrier [N, K/G] u32 (docs/contract.md
// §2), rows `srs` words apart. Low half: the scale's bits. High half: fp16 layers, bias_eff =
// fl(-z*s), and the weight is formed as q*s + bias_eff (a rounded multiply and a rounded add; a
// compiler may contract them into one FMA: the recipe's pre-rounded-bias bound covers both, not
// bit-exact against round((q - z) * s)); bf16 layers, the raw z, and the weight is fused's.
#ifndef W4_GEMM_TILE_H
#define W4_GEMM_TILE_H

#if !defined(W4_HAS_MMA)
#error "the tile GEMM needs the matrix-core MMA of compat.h (NVIDIA sm_80+, gfx11, gfx12)"
#endif

#define FU_BK 32

namespace w4 {
namespace tile {

// Element offset of (row, 16-byte chunk) in a tile of rows of 32 elements; the xor swizzle keeps
// the eight rows read by one ldmatrix phase (and the 16 rows of a WMMA fragment) on distinct banks.
W4_DEV int swz(int r, int c) { return r * FU_BK + ((c ^ ((r >> 1) & 3)) << 3); }

template <class T, int BM, int BN, int WM, int WN, int STAGES>
struct FusedTile {
    static constexpr int NT = WM * WN * 32;
    static constexpr int TM = BM / WM;
    static constexpr int TN = BN / WN;
    static constexpr int FM = TM / 16;
    static constexpr int FN = TN / 16;
    static constexpr int WPT = BN * 4 / NT;  // packed words dequantized per thread and step
    static_assert(TM % 16 == 0 && TN % 16 == 0, "warp tile must be made of 16x16 fragments");
    static_assert(WPT == 1 || WPT == 2 || WPT == 4, "dequant split");
    static_assert(STAGES >= 3, "the pipeline waits for the step after the current one");
};

struct FuArgs {
    const u16* x;
    const u32* w;
    const u16* s;
    const u32* z;
    const u32* c;  // the carrier (CARRIER only; s and z are unused then)
    const u16* bias;
    u16* y;
    int m, n, k, group, xrs, wrs, srs, yrs, groups;
    bool x_vec;
};

// The high half of a carrier word as the pair the dequantization subtracts: fp16, -bias_eff
// (sign flipped, exact) for q*s - (-bias_eff); bf16, (offset + z) as fused subtracts it.
template <class T>
W4_DEV u32 carrier_high_pair(u32 hi) {
    if constexpr (same_type<T, f16_t>::value) return (hi ^ 0x8000u) * 0x00010001u;
    return offset_pair<T>(hi);
}
// Two fp16 weights q*s + bias_eff from the nibble pair of `w_shifted`: q exactly (1024 + q - 1024),
// a rounded multiply, then a rounded add (the subtraction of -bias_eff).
W4_DEV u32 carrier_weight_pair_f16(u32 w_shifted, u32 ss, u32 nb) {
    const u32 q = Act<f16_t>::sub2(nibble_pair<f16_t>(w_shifted), Act<f16_t>::MAGIC2);
    return Act<f16_t>::sub2(Act<f16_t>::mul2(q, ss), nb);
}

// One (BM x BN) tile at (m0, n0): tile row r is X row `x_row(r, valid)` (read as zeros when
// `valid` comes back false); every fp32 accumulator goes to `store(m0 + r, n0 + c, value)`.
template <class T, int BM, int BN, int WM, int WN, int STAGES, bool CARRIER = false, class XRow, class Store>
W4_DEV void tile_gemm(const FuArgs& a, int m0, int n0, XRow x_row, Store store) {
    typedef FusedTile<T, BM, BN, WM, WN, STAGES> FT;
    __shared__ W4_ALIGN16 u16 As[STAGES * BM * FU_BK];
    __shared__ W4_ALIGN16 u32 Bq[STAGES * BN * (FU_BK / 8)];
    __shared__ W4_ALIGN16 u16 Bs[2 * BN * FU_BK];

    const int tid = tid_x();
    const int warp = tid >> 5;
    const int wm = warp / WN;
    const int wn = warp % WN;
    const int nk = a.k / FU_BK;

    // Global -> shared copies of step kt into ring slot `slot`: X, and the packed weights.
    auto load_stage_a = [&](int kt, int slot) {
        const int k0 = kt * FU_BK;
        u16* as = As + slot * BM * FU_BK;
        for (int i = tid; i < BM * 4; i += FT::NT) {
            const int r = i >> 2, c = i & 3;
            bool valid;
            const int gm = x_row(r, valid);
            const u16* src = a.x + (long long)(valid ? gm : 0) * a.xrs + k0 + 8 * c;
            u16* dst = as + swz(r, c);
            if (a.x_vec) {
                cp_async16(dst, src, valid);
            } else {
                u32 v[4] = {0u, 0u, 0u, 0u};
                if (valid) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) v[e] = (u32)src[2 * e] | ((u32)src[2 * e + 1] << 16);
                }
                u32x4 o;
                o.x = v[0];
                o.y = v[1];
                o.z = v[2];
                o.w = v[3];
                *(u32x4*)dst = o;
            }
        }
    };
    auto load_stage_b = [&](int kt, int slot) {
        const int k0 = kt * FU_BK;
        u32* bq = Bq + slot * BN * 4;
        for (int i = tid; i < BN; i += FT::NT) {
            const int gn = n0 + i;
            const bool valid = gn < a.n;
            const char* src = (const char*)a.w + (long long)(valid ? gn : 0) * a.wrs + (k0 >> 1);
            cp_async16(bq + i * 4, src, valid);
        }
    };

    // This thread dequantizes words [dw, dw + WPT) of weight row dr of each step.
    const int dr = (tid * FT::WPT) >> 2;
    const int dw = (tid * FT::WPT) & 3;
    const int dn = n0 + dr;
    const bool dvalid = dn < a.n;
    // Scale pair and (offset + z) pair of row dn for step kt (carrier: the scale pair and the
    // pair of carrier_high_pair, from one word; rows past N read nothing).
    auto load_meta = [&](int kt, u32& ss, u32& zz) {
        const int gi = (kt * FU_BK) / a.group;
        if constexpr (CARRIER) {
            const u32 cw = dvalid ? a.c[(long long)dn * a.srs + gi] : 0u;
            ss = (cw & 0xffffu) * 0x00010001u;
            zz = carrier_high_pair<T>(cw >> 16);
        } else {
            const u32 sb = dvalid ? (u32)a.s[(long long)dn * a.srs + gi] : 0u;
            ss = sb * 0x00010001u;
            zz = offset_pair<T>(dvalid ? zero_point(a.z, dn, gi, a.groups) : 8u);
        }
    };
    auto dequant = [&](int slot, int buf, u32 ss, u32 zz) {
        const u32* q = Bq + slot * BN * 4 + dr * 4 + dw;
        u16* bs = Bs + buf * BN * FU_BK;
#pragma unroll
        for (int j = 0; j < FT::WPT; ++j) {
            const u32 wq = q[j];
            u32x4 o;
            if constexpr (CARRIER && same_type<T, f16_t>::value) {
                o.x = carrier_weight_pair_f16(wq, ss, zz);
                o.y = carrier_weight_pair_f16(wq >> 4, ss, zz);
                o.z = carrier_weight_pair_f16(wq >> 8, ss, zz);
                o.w = carrier_weight_pair_f16(wq >> 12, ss, zz);
            } else {
                o.x = Act<T>::mul2(Act<T>::sub2(nibble_pair<T>(wq), zz), ss);
                o.y = Act<T>::mul2(Act<T>::sub2(nibble_pair<T>(wq >> 4), zz), ss);
                o.z = Act<T>::mul2(Act<T>::sub2(nibble_pair<T>(wq >> 8), zz), ss);
                o.w = Act<T>::mul2(Act<T>::sub2(nibble_pair<T>(wq >> 12), zz), ss);
            }
            *(u32x4*)(bs + swz(dr, dw + j)) = o;
        }
    };

    float acc[FT::FM][FT::FN][8];
#pragma unroll
    for (int i = 0; i < FT::FM; ++i)
#pragma unroll
        for (int j = 0; j < FT::FN; ++j)
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[i][j][e] = 0.f;

    // Schedule (STAGES = 3 slots for X and for the packed weights): iteration kt multiplies step kt,
    // dequantizes step kt+1 and issues the copies of X for kt+2 and of the packed weights for kt+3,
    // so every copy has two iterations to land. Copies issued together form one commit group;
    // the group of iteration kt-2 is the one iteration kt waits for.
    static_assert(STAGES == 3, "the schedule below is written for three slots");
    auto load_a = [&](int kt) {
        if (kt < nk) load_stage_a(kt, kt % STAGES);
    };
    auto load_b = [&](int kt) {
        if (kt < nk) load_stage_b(kt, kt % STAGES);
    };
    load_a(0);
    load_b(0);
    load_b(1);
    cp_async_commit();
    load_a(1);
    load_b(2);
    cp_async_commit();
    u32 ss0, zz0, ss1, zz1, ss2, zz2;
    load_meta(0, ss0, zz0);
    load_meta(nk > 1 ? 1 : 0, ss1, zz1);
    load_meta(nk > 2 ? 2 : 0, ss2, zz2);
    cp_async_wait<1>();
    sync_block();
    dequant(0, 0, ss0, zz0);

    for (int kt = 0; kt < nk; ++kt) {
        // The group of iteration kt-2 (X of step kt, packed weights of step kt+1) has landed for
        // this thread; the barrier makes everyone's copies visible and ends iteration kt-1 for all.
        cp_async_wait<1>();
        sync_block();
        load_a(kt + 2);
        load_b(kt + 3);
        cp_async_commit();
        if (kt + 1 < nk) dequant((kt + 1) % STAGES, (kt + 1) & 1, ss1, zz1);
        ss1 = ss2;
        zz1 = zz2;
        if (kt + 3 < nk) load_meta(kt + 3, ss2, zz2);

        const u16* as = As + (kt % STAGES) * BM * FU_BK;
        const u16* bs = Bs + (kt & 1) * BN * FU_BK;
#pragma unroll
        for (int kk = 0; kk < FU_BK / 16; ++kk) {
            MmaFrag fa[FT::FM], fb[FT::FN];
#pragma unroll
            for (int i = 0; i < FT::FM; ++i) {
                const int r0 = wm * FT::TM + 16 * i;
                mma_load_a(fa[i], [&](int r, int c) { return as + swz(r0 + r, 2 * kk + c); });
            }
#pragma unroll
            for (int j = 0; j < FT::FN; ++j) {
                const int c0 = wn * FT::TN + 16 * j;
                mma_load_b(fb[j], [&](int r, int c) { return bs + swz(c0 + r, 2 * kk + c); });
            }
#pragma unroll
            for (int i = 0; i < FT::FM; ++i)
#pragma unroll
                for (int j = 0; j < FT::FN; ++j) mma_16x16x16<T>(acc[i][j], fa[i], fb[j]);
        }
    }

    // Epilogue: every accumulator to the caller's store.
#pragma unroll
    for (int i = 0; i < FT::FM; ++i)
#pragma unroll
        for (int j = 0; j < FT::FN; ++j)
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const int row = m0 + wm * FT::TM + 16 * i + mma_c_row(e);
                const int col = n0 + wn * FT::TN + 16 * j + mma_c_col(e);
                store(row, col, acc[i][j][e]);
            }
}

}  // namespace tile
}  // namespace w4

#endif  // W4_GEMM_TILE_H
