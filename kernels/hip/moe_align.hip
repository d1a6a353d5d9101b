// moe_align: the routing step of moe. Groups the slots s = t·top_k + j (topk_ids[s] is their
// global expert) by expert, experts ascending and slots ascending within each expert's run, and
// pads each run with the sentinel `slots` to a multiple of block_m:
//   sorted_token_ids[...]     the runs, one after the other (entries past the padded length: not
//                             written),
//   expert_ids[b]             the expert of block b (expert_map[e] when a map is given: −1 for an
//                             expert held elsewhere),
//   num_tokens_post_padded[0] the padded length.
// Experts without slots get no block; ids outside [0, experts) are in no block (validation refuses
// them). Nothing is written at or past `sorted_capacity` (or its blocks).
//
// One block of MA_THREADS threads, no atomics: every run writes the same bits. The experts are
// taken in windows of MA_WINDOW (any number of experts: one pass over the slots per window). Per
// window: (1) each thread counts the slots of one expert, a chunk of MA_THREADS slots at a time
// staged in shared memory; (2) an exclusive scan of the padded counts gives each expert its first
// entry, and the expert's thread writes its blocks' expert ids and its padding; (3) the slots are
// placed chunk by chunk, each at its expert's next free entry plus its rank among the chunk's
// earlier slots of that expert (stable), and each expert's thread then advances that entry by the
// chunk's slots of its expert. The dtype of the entry names is not used (kept uniform).
#include "compat.h"

using namespace w4;

#define MA_THREADS 256
#define MA_WINDOW 256

namespace {

static_assert(MA_WINDOW == MA_THREADS, "one expert of the window per thread");

W4_DEV void moe_align(const int* topk_ids, const int* expert_map, int* sorted_token_ids, int* expert_ids,
                      int* num_tokens_post_padded, int slots, int experts, int block_m, int sorted_capacity) {
    // Per expert of the window: its slot count, then its next free entry.
    __shared__ int next_entry[MA_WINDOW];
    // The window-relative expert of each slot of the chunk (−1: an expert of another window).
    __shared__ int chunk[MA_THREADS];
    // Padded length of the windows so far (thread 0's).
    __shared__ int total;

    if (slots < 0 || experts <= 0 || block_m <= 0 || sorted_capacity < 0) return;
    const int tid = tid_x();
    const int blocks_capacity = sorted_capacity / block_m;
    if (tid == 0) total = 0;

    for (int e0 = 0; e0 < experts; e0 += MA_WINDOW) {
        const int width = experts - e0 < MA_WINDOW ? experts - e0 : MA_WINDOW;
        // Stages the window-relative experts of slots [c0, c0 + MA_THREADS) in `chunk`.
        auto stage = [&](int c0) {
            sync_block();
            const int s = c0 + tid;
            int e = -1;
            if (s < slots) {
                const int id = topk_ids[s];
                if (id >= e0 && id < e0 + width) e = id - e0;
            }
            chunk[tid] = e;
            sync_block();
        };

        // (1) The slots of expert e0 + tid.
        int mine = 0;
        for (int c0 = 0; c0 < slots; c0 += MA_THREADS) {
            stage(c0);
            const int len = slots - c0 < MA_THREADS ? slots - c0 : MA_THREADS;
            for (int j = 0; j < len; ++j) mine += chunk[j] == tid;
        }

        // (2) First entries: an exclusive scan of the padded counts, after the earlier windows.
        const int padded = (mine + block_m - 1) / block_m * block_m;
        next_entry[tid] = padded;
        sync_block();
        if (tid == 0) {
            int run = total;
            for (int t = 0; t < MA_WINDOW; ++t) {
                const int p = next_entry[t];
                next_entry[t] = run;
                run += p;
            }
            total = run;
        }
        sync_block();
        if (mine > 0) {
            const int first = next_entry[tid];
            const int e = e0 + tid;
            const int id = expert_map != nullptr ? expert_map[e] : e;
            for (int b = first / block_m; b < (first + padded) / block_m && b < blocks_capacity; ++b) expert_ids[b] = id;
            for (int p = first + mine; p < first + padded && p < sorted_capacity; ++p) sorted_token_ids[p] = slots;
        }

        // (3) The slots, stably: entry = next free entry of the expert + rank in the chunk.
        for (int c0 = 0; c0 < slots; c0 += MA_THREADS) {
            stage(c0);
            const int len = slots - c0 < MA_THREADS ? slots - c0 : MA_THREADS;
            const int e = chunk[tid];
            int rank = 0;
            int here = 0;
            for (int j = 0; j < len; ++j) {
                const int ej = chunk[j];
                rank += j < tid && ej == e;
                here += ej == tid;
            }
            if (e >= 0) {
                const int p = next_entry[e] + rank;
                if (p < sorted_capacity) sorted_token_ids[p] = c0 + tid;
            }
            sync_block();
            next_entry[tid] += here;
        }
        sync_block();
    }
    if (tid == 0) num_tokens_post_padded[0] = total;
}

}  // namespace

#define W4_MOE_ALIGN_ENTRY(NAME, T)                                                                             \
    extern "C" __global__ __launch_bounds__(MA_THREADS) void NAME(                                              \
        const int* topk_ids, const int* expert_map, int* sorted_token_ids, int* expert_ids,                     \
        int* num_tokens_post_padded, int slots, int experts, int block_m, int sorted_capacity) {                \
        moe_align(topk_ids, expert_map, sorted_token_ids, expert_ids, num_tokens_post_padded, slots, experts,   \
                  block_m, sorted_capacity);                                                                     \
    }

// One body; the activation dtype only names the entries (the set's uniform naming).
W4_MOE_ALIGN_ENTRY(w4a16_moe_align_f16, f16_t)
W4_MOE_ALIGN_ENTRY(w4a16_moe_align_bf16, bf16_t)
