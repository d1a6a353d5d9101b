// block.h: one GPU block as host threads, for running kernels/hip/moe_align.hip's own text on the
// CPU (kernels/tests/moe_align_host.rs splices this file in place of its `#include "compat.h"`).
// Each thread of the block is a std::thread with its id in `tid_x()`; `__shared__` variables are
// function statics (one copy for all threads of the block, as on the GPU); `sync_block()` is a
// barrier of all of them. Only what moe_align.hip uses is here.
#ifndef W4_MOE_ALIGN_HOST_BLOCK_H
#define W4_MOE_ALIGN_HOST_BLOCK_H
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#define W4_DEV inline
#define __global__
#define __launch_bounds__(n)
#define __shared__ static

namespace w4 {
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;
struct f16_t {
    u16 bits;
};
struct bf16_t {
    u16 bits;
};

namespace host {
inline thread_local int thread_id = 0;

// A reusable barrier of `count` threads.
struct Barrier {
    std::mutex m;
    std::condition_variable cv;
    int count = 0;
    int waiting = 0;
    unsigned generation = 0;
    void wait() {
        std::unique_lock<std::mutex> lock(m);
        const unsigned gen = generation;
        if (++waiting == count) {
            waiting = 0;
            ++generation;
            cv.notify_all();
        } else {
            cv.wait(lock, [&] { return generation != gen; });
        }
    }
};
inline Barrier barrier;

// Runs `body` as one block of `threads` threads.
template <class F>
void launch_block(int threads, F body) {
    barrier.count = threads;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([t, &body] {
            thread_id = t;
            body();
        });
    }
    for (auto& th : pool) th.join();
}
}  // namespace host

W4_DEV int tid_x() { return host::thread_id; }
W4_DEV void sync_block() { host::barrier.wait(); }
}  // namespace w4
#endif  // W4_MOE_ALIGN_HOST_BLOCK_H
