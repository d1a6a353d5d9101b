// driver.cpp: appended to moe_align.hip (with block.h for compat.h) by
// kernels/tests/moe_align_host.rs. Reads cases from stdin, one per line:
//   slots experts block_m capacity guard has_map  topk_ids[slots]  [expert_map[experts]]
// launches w4a16_moe_align_f16 as one block of MA_THREADS host threads on output buffers filled
// with a poison value and `guard` extra poisoned entries past the capacity, and prints
//   ntpp | sorted_token_ids[capacity + guard] | expert_ids[capacity / block_m + guard]
#include <cstdio>

int main() {
    const int POISON = -559038737;  // 0xDEADBEEF
    int slots, experts, block_m, capacity, guard, has_map;
    while (std::scanf("%d %d %d %d %d %d", &slots, &experts, &block_m, &capacity, &guard, &has_map) == 6) {
        std::vector<int> ids(slots), map(has_map ? experts : 0);
        for (int& v : ids) std::scanf("%d", &v);
        for (int& v : map) std::scanf("%d", &v);
        std::vector<int> sorted(capacity + guard, POISON), blocks(capacity / block_m + guard, POISON);
        int ntpp = POISON;
        w4::host::launch_block(MA_THREADS, [&] {
            w4a16_moe_align_f16(ids.data(), has_map ? map.data() : nullptr, sorted.data(), blocks.data(), &ntpp, slots,
                                experts, block_m, capacity);
        });
        std::printf("%d |", ntpp);
        for (int v : sorted) std::printf(" %d", v);
        std::printf(" |");
        for (int v : blocks) std::printf(" %d", v);
        std::printf("\n");
        std::fflush(stdout);
    }
    return 0;
}
