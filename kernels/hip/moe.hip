// moe: the grouped int4 GEMM of a mixture-of-experts layer, on the blocks moe_align made.
//
// Block (bx, b) computes columns [bx·BN, bx·BN + BN) of the BM sorted slots of block b
// (sorted_token_ids[b·BM ..]) with the weights of expert expert_ids[b]: the tile main loop of
// gemm_tile.h (fused's) with tile row r reading X row slot / top_k, and the weights, scales and
// zero points offset to the expert (expert strides N·row stride; N/8·K/G words of zero points).
// Grid (ceil(N / BN), the blocks moe_align may write); blocks at or past
// num_tokens_post_padded / BM exit at once. Block (32 * WM * WN).
//
// Rows: a slot ≥ `slots` is padding (the sentinel): read as zeros, never stored. Blocks of expert
// −1 (not local under an expert map) store +0 in their slots' rows and read no weights.
// Numerics: fused's (weights rounded once to the activation dtype, fp32 accumulation), then the
// accumulator times topk_weights[slot] in fp32 when topk_weights is not null, then one cast. No
// bias. Contract: fused's (G a multiple of 32 dividing K, weight rows 16-byte aligned), BM of the
// launched tile = moe_align's block_m.
#include "compat.h"
#include "gemm_tile.h"

using namespace w4;
using namespace w4::tile;

namespace {

template <class T, int BM, int BN, int WM, int WN, int STAGES>
W4_DEV void moe(const T* x, const uint32_t* w, const T* scales, const uint32_t* zeros, const float* topk_weights,
                const int* sorted_token_ids, const int* expert_ids, const int* num_tokens_post_padded, T* y,
                int slots, int top_k, int n, int k, int group, int x_row_stride, int w_row_stride_bytes,
                int scale_row_stride, int y_row_stride) {
    typedef FusedTile<T, BM, BN, WM, WN, STAGES> FT;
    // The slot of each row of this block and the X row it reads (−1: padding), read once.
    __shared__ int row_slot[BM];
    __shared__ int row_x[BM];

    if (slots <= 0 || top_k <= 0 || n <= 0 || k <= 0 || group <= 0) return;
    const int b = bid_y();
    if (b >= num_tokens_post_padded[0] / BM) return;
    const int expert = expert_ids[b];
    const int tid = tid_x();
    auto slot_valid = [&](int slot) { return slot >= 0 && slot < slots; };
    for (int r = tid; r < BM; r += FT::NT) {
        const int slot = sorted_token_ids[(long long)b * BM + r];
        row_slot[r] = slot;
        row_x[r] = slot_valid(slot) ? slot / top_k : -1;
    }
    sync_block();

    const int n0 = bid_x() * BN;
    if (expert < 0) {
        for (int i = tid; i < BM * BN; i += FT::NT) {
            const int slot = row_slot[i / BN];
            const int col = n0 + i % BN;
            if (slot_valid(slot) && col < n) ((u16*)y)[(long long)slot * y_row_stride + col] = 0u;
        }
        return;
    }

    FuArgs a;
    const int groups = k / group;
    const long long e = expert;
    a.x = (const u16*)x;
    a.w = (const u32*)((const char*)w + e * n * w_row_stride_bytes);
    a.s = (const u16*)scales + e * n * scale_row_stride;
    a.z = zeros == nullptr ? nullptr : zeros + e * (n >> 3) * groups;
    a.bias = nullptr;
    a.y = (u16*)y;
    a.m = slots;
    a.n = n;
    a.k = k;
    a.group = group;
    a.xrs = x_row_stride;
    a.wrs = w_row_stride_bytes;
    a.srs = scale_row_stride;
    a.yrs = y_row_stride;
    a.groups = groups;
    a.x_vec = (((u64)(const void*)x) & 15u) == 0 && (x_row_stride & 7) == 0;

    tile_gemm<T, BM, BN, WM, WN, STAGES>(
        a, 0, n0,
        // Tile row r is slot row_slot[r], which reads X row slot / top_k.
        [&](int r, bool& valid) {
            const int xr = row_x[r];
            valid = xr >= 0;
            return xr;
        },
        // Epilogue: the routed weight in fp32, then one cast; C rows by slot.
        [&](int r, int col, float v) {
            const int slot = row_slot[r];
            if (slot_valid(slot) && col < a.n) {
                if (topk_weights != nullptr) v *= topk_weights[slot];
                a.y[(long long)slot * a.yrs + col] = Act<T>::from_f32(v);
            }
        });
}

}  // namespace

#define W4_MOE_ENTRY(NAME, T, BM, BN, WM, WN, STAGES)                                                           \
    extern "C" __global__ __launch_bounds__(WM * WN * 32) void NAME(                                            \
        const T* x, const uint32_t* w, const T* scales, const uint32_t* zeros, const float* topk_weights,         \
        const int* sorted_token_ids, const int* expert_ids, const int* num_tokens_post_padded, T* y, int slots,  \
        int top_k, int n, int k, int group, int x_row_stride, int w_row_stride_bytes, int scale_row_stride,      \
        int y_row_stride) {                                                                                       \
        moe<T, BM, BN, WM, WN, STAGES>(x, w, scales, zeros, topk_weights, sorted_token_ids, expert_ids,          \
                                       num_tokens_post_padded, y, slots, top_k, n, k, group, x_row_stride,        \
                                       w_row_stride_bytes, scale_row_stride, y_row_stride);                       \
    }

// The compiled tile variants (kernels/src/tiles/moe.rs lists the same set and the tables that pick
// them; BK is 32 in all, WM x WN is tiles::warp_grid's). The plain name is the 32x64x32w4 variant.
W4_MOE_ENTRY(w4a16_moe_f16_16x64x32w4, f16_t, 16, 64, 1, 4, 3)
W4_MOE_ENTRY(w4a16_moe_f16_16x128x32w4, f16_t, 16, 128, 1, 4, 3)
W4_MOE_ENTRY(w4a16_moe_f16_32x64x32w4, f16_t, 32, 64, 1, 4, 3)
W4_MOE_ENTRY(w4a16_moe_f16_32x128x32w4, f16_t, 32, 128, 1, 4, 3)
W4_MOE_ENTRY(w4a16_moe_f16_64x64x32w4, f16_t, 64, 64, 2, 2, 3)
W4_MOE_ENTRY(w4a16_moe_f16_64x128x32w8, f16_t, 64, 128, 2, 4, 3)
W4_MOE_ENTRY(w4a16_moe_f16, f16_t, 32, 64, 1, 4, 3)
W4_MOE_ENTRY(w4a16_moe_bf16_16x64x32w4, bf16_t, 16, 64, 1, 4, 3)
W4_MOE_ENTRY(w4a16_moe_bf16_16x128x32w4, bf16_t, 16, 128, 1, 4, 3)
W4_MOE_ENTRY(w4a16_moe_bf16_32x64x32w4, bf16_t, 32, 64, 1, 4, 3)
W4_MOE_ENTRY(w4a16_moe_bf16_32x128x32w4, bf16_t, 32, 128, 1, 4, 3)
W4_MOE_ENTRY(w4a16_moe_bf16_64x64x32w4, bf16_t, 64, 64, 2, 2, 3)
W4_MOE_ENTRY(w4a16_moe_bf16_64x128x32w8, bf16_t, 64, 128, 2, 4, 3)
W4_MOE_ENTRY(w4a16_moe_bf16, bf16_t, 32, 64, 1, 4, 3)
