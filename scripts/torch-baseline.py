#!/usr/bin/env python3
"""Side-by-side baselines for the skinny/fused benchmark, run on the GPU machine.

PyTorch's int4 kernel (torch.ops.aten._weight_int4pack_mm, bf16, G=128), a dense fp16
torch.matmul of the same shape, and a device-to-device copy (the bandwidth ceiling).
Medians of CUDA-event timings over many back-to-back launches. Prints JSON on stdout.
"""
import json, statistics, sys
import torch

K, N, G = 4096, 14336, 128
dev = "cuda"


def median_us(fn, iters=200, warmup=20, reps=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(iters):
            fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1000.0 / iters)
    return statistics.median(times)


out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "K": K, "N": N, "G": G, "rows": []}

# Copy ceiling: 1 GiB read + 1 GiB written.
src = torch.empty(1 << 29, dtype=torch.float16, device=dev)
dst = torch.empty_like(src)
t = median_us(lambda: dst.copy_(src), iters=20)
out["copy_GBps"] = 2 * src.numel() * 2 / (t * 1e-6) / 1e9

for M in (1, 2, 3, 4, 5, 2048):
    row = {"M": M}
    x16 = torch.randn(M, K, dtype=torch.float16, device=dev)
    w16 = torch.randn(N, K, dtype=torch.float16, device=dev)
    row["dense_fp16_us"] = median_us(lambda: torch.matmul(x16, w16.t()), iters=50 if M > 5 else 200)
    try:
        xb = x16.to(torch.bfloat16)
        wq = torch.randint(0, 16, (N, K), dtype=torch.int32, device=dev)
        packed_u8 = (wq[:, ::2] << 4 | wq[:, 1::2]).to(torch.uint8)
        wp = torch.ops.aten._convert_weight_to_int4pack(packed_u8, 8)
        sz = torch.rand(K // G, N, 2, dtype=torch.bfloat16, device=dev)
        row["torch_int4_bf16_us"] = median_us(lambda: torch.ops.aten._weight_int4pack_mm(xb, wp, G, sz), iters=50 if M > 5 else 200)
    except Exception as e:  # report, never hide
        row["torch_int4_error"] = f"{type(e).__name__}: {e}"[:300]
    out["rows"].append(row)

json.dump(out, sys.stdout, indent=1)
print()
