#!/usr/bin/env python3
"""The peers of `w4a16 perf`, timed on the perf cases with the harness's cold-input method.

Usage: perf-peers.py REQUEST.json OUTPUT.json      (run on the GPU machine, needs PyTorch + CUDA)
       perf-peers.py --self-test                   (the pure parts; needs no torch)

Peers, per case (provider, shape, M):
  torch-int4  torch.ops.aten._weight_int4pack_mm in bf16 (the activation dtype it supports),
              same N, K, group; the case's zero points folded into its scale_and_zeros tensor
              (tinygemm dequantizes (q - 8)·s + zero, so zero = (8 - z)·s; symmetric: z = 8).
              Its output is checked once per weights against the dequantized weights (a wrong
              packing is reported as a skip, never timed).
  dense-fp16  torch.mm on fp16 X [M, K] and fp16 W [N, K] (cuBLAS), the same for every provider
              of one (N, K, M), so it is timed once per (N, K, M).

Method (the harness's, device/src/lib.rs `bench_*`): one checked launch, then `warmup`
launches left queued, then `reps` launches each between two CUDA events; launch i reads copy
i % `copies` of all its inputs (weights, scales, X), each separately allocated, so that the L2
cannot hold them; the time is the median of the per-launch intervals. Python enqueues slower than
the Rust harness, so the launches are queued behind a spin kernel long enough to cover the
enqueue, and the run checks that the device was still busy when the last one was queued.

Request: {"copies": 8, "reps": 15, "warmup": 5, "cases": [{"provider", "shape", "m", "n", "k",
          "group", "dtype": "f16"|"bf16", "symmetry": "sym"|"asym"}]}
Output:  {"device", "torch", "torch_int4_dtype", "notes": [str], "rows": [{"provider", "shape",
          "m", "torch_int4_us": float|null, "dense_fp16_us": float|null, "skipped": [str]}]}
A peer that cannot run on a case is null there and named in "skipped" as "<peer>: <Exception>: msg".

Exit status (read by harness/src/perf/peers.rs): 0 output written; 2 bad request or arguments;
3 torch cannot be imported; 4 torch sees no CUDA device; anything else: the script failed.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

EXIT_BAD_REQUEST = 2
EXIT_NO_TORCH = 3
EXIT_NO_CUDA = 4

PEER_TORCH_INT4 = "torch-int4"
PEER_DENSE = "dense-fp16"
TORCH_INT4_DTYPE = "bf16"
DTYPES = ("f16", "bf16")
SYMMETRIES = ("sym", "asym")
# Longest skip reason kept (a torch message can hold a whole C++ backtrace).
REASON_CHARS = 300
# Host time budgeted per queued launch (launch + two events from Python), µs; doubled on retry.
HOST_US_PER_LAUNCH = 150.0
QUEUE_ATTEMPTS = 3


class RequestError(ValueError):
    """The request names the field that is wrong and what was expected."""


def _int_field(obj, field, where, minimum):
    value = obj.get(field) if isinstance(obj, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RequestError(f"{where}: `{field}` = {value!r}, expected an integer >= {minimum}")
    return value


def _str_field(obj, field, where, allowed=None):
    value = obj.get(field)
    if not isinstance(value, str) or not value or (allowed is not None and value not in allowed):
        expected = " or ".join(repr(a) for a in allowed) if allowed else "a non-empty string"
        raise RequestError(f"{where}: `{field}` = {value!r}, expected {expected}")
    return value


def parse_request(obj):
    """A checked request: a dict with copies, reps, warmup and a list of case dicts."""
    if not isinstance(obj, dict):
        raise RequestError(f"request: expected a JSON object, got {type(obj).__name__}")
    plan = {
        "copies": _int_field(obj, "copies", "request", 1),
        "reps": _int_field(obj, "reps", "request", 1),
        "warmup": _int_field(obj, "warmup", "request", 0),
    }
    raw_cases = obj.get("cases")
    if not isinstance(raw_cases, list):
        raise RequestError(f"request: `cases` = {raw_cases!r}, expected a list")
    cases, seen = [], set()
    for i, raw in enumerate(raw_cases):
        where = f"case {i}"
        if not isinstance(raw, dict):
            raise RequestError(f"{where}: expected an object, got {type(raw).__name__}")
        case = {
            "provider": _str_field(raw, "provider", where),
            "shape": _str_field(raw, "shape", where),
            "m": _int_field(raw, "m", where, 1),
            "n": _int_field(raw, "n", where, 1),
            "k": _int_field(raw, "k", where, 1),
            "group": _int_field(raw, "group", where, 1),
            "dtype": _str_field(raw, "dtype", where, DTYPES),
            "symmetry": _str_field(raw, "symmetry", where, SYMMETRIES),
        }
        key = row_key(case)
        if key in seen:
            raise RequestError(f"{where}: {key} appears twice")
        seen.add(key)
        cases.append(case)
    return plan, cases


def row_key(case):
    return (case["provider"], case["shape"], case["m"])


def dense_key(case):
    """Dense fp16 depends on (N, K, M) only: one timing serves every provider of a shape."""
    return (case["n"], case["k"], case["m"])


def int4_weights_key(case):
    """The torch int4 weights (and their copies) depend on (N, K, group, symmetry), not M."""
    return (case["n"], case["k"], case["group"], case["symmetry"])


def skip_reason(peer, exc):
    """`<peer>: <Exception>: msg` on one line, at most REASON_CHARS characters of message."""
    message = " ".join(str(exc).split())
    if len(message) > REASON_CHARS:
        message = message[: REASON_CHARS - 1] + "…"
    return f"{peer}: {type(exc).__name__}: {message}"


def inner_k_tiles(k):
    """The largest tinygemm inner K tiling (8, 4 or 2 tiles of 16) that divides K, or None."""
    for tiles in (8, 4, 2):
        if k % (16 * tiles) == 0:
            return tiles
    return None


def torch_int4_precheck(case):
    """A reason torch int4 cannot represent the case's layout, before any tensor is made."""
    if case["k"] % case["group"] != 0:
        return ValueError(f"K = {case['k']} is not a multiple of the group {case['group']}; "
                          "tinygemm's scale_and_zeros has exactly K / group rows")
    if inner_k_tiles(case["k"]) is None:
        return ValueError(f"K = {case['k']} is not a multiple of 32 (tinygemm packs K in tiles of 16 × 2..8)")
    return None


def median(xs):
    return statistics.median(xs) if xs else None


def finite_time(us):
    """A positive finite time, else None (JSON has no NaN; a zero time is a broken measurement)."""
    return us if us is not None and math.isfinite(us) and us > 0 else None


def output_row(case, torch_int4_us, dense_fp16_us, skipped):
    return {
        "provider": case["provider"],
        "shape": case["shape"],
        "m": case["m"],
        "torch_int4_us": finite_time(torch_int4_us),
        "dense_fp16_us": finite_time(dense_fp16_us),
        "skipped": list(skipped),
    }


def write_json(path, obj):
    """Written whole or not at all: a reader never sees half a file."""
    tmp = f"{path}.partial"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- GPU part (needs torch)


class Timer:
    """The harness's per-launch event timing on the current CUDA stream."""

    def __init__(self, torch, plan):
        self.torch = torch
        self.plan = plan
        self.cycles_per_us = self._calibrate_sleep()

    def _calibrate_sleep(self):
        torch = self.torch
        if not hasattr(torch.cuda, "_sleep"):
            return None
        cycles = 20_000_000
        torch.cuda._sleep(1000)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        torch.cuda.synchronize()
        us = start.elapsed_time(end) * 1000.0
        return cycles / us if us > 0 else None

    def method_note(self):
        p = self.plan
        held = ("queued behind a spin kernel (torch.cuda._sleep) that outlasts the host's enqueue, "
                "checked to be still running when the last timed launch was queued"
                if self.cycles_per_us else "torch.cuda._sleep missing: queued without a spin kernel")
        return (f"method: per-launch CUDA-event times, median of {p['reps']}; {p['warmup']} warm-up "
                f"launches left queued; launches rotate over {p['copies']} separately allocated "
                f"copies of all inputs (weights, scales, X); {held}")

    def median_us(self, launch):
        """Median per-launch µs of `launch(copy_index)`; raises if the queue ran dry every time."""
        torch, plan = self.torch, self.plan
        copies, warmup, reps = plan["copies"], plan["warmup"], plan["reps"]
        launch(0)  # the checked run: first-call setup and errors surface here, untimed
        torch.cuda.synchronize()
        host_us = HOST_US_PER_LAUNCH
        for _ in range(QUEUE_ATTEMPTS):
            busy = None
            if self.cycles_per_us:
                torch.cuda._sleep(int((warmup + reps) * host_us * self.cycles_per_us) + 1)
                busy = torch.cuda.Event()
                busy.record()
            for i in range(warmup):
                launch((1 + i) % copies)
            events = []
            for i in range(reps):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                launch((1 + warmup + i) % copies)
                end.record()
                events.append((start, end))
            queued_in_time = busy is None or not busy.query()
            torch.cuda.synchronize()
            if queued_in_time:
                return median([s.elapsed_time(e) * 1000.0 for s, e in events])
            host_us *= 2
        raise RuntimeError(f"the host could not queue {warmup + reps} launches within "
                           f"{host_us / 2:.0f} µs each; times would include host gaps")


def time_dense(torch, timer, case):
    m, n, k, copies = case["m"], case["n"], case["k"], timer.plan["copies"]
    xs = [torch.randn(m, k, dtype=torch.float16, device="cuda") for _ in range(copies)]
    ws = [torch.randn(n, k, dtype=torch.float16, device="cuda") for _ in range(copies)]
    ys = [torch.empty(m, n, dtype=torch.float16, device="cuda") for _ in range(copies)]
    try:
        return timer.median_us(lambda i: torch.mm(xs[i], ws[i].t(), out=ys[i]))
    finally:
        del xs, ws, ys


class Int4Weights:
    """`copies` separately allocated tinygemm weights of one (N, K, group, symmetry)."""

    def __init__(self, torch, case, copies):
        n, k, g = case["n"], case["k"], case["group"]
        self.case = case
        gen = torch.Generator(device="cuda").manual_seed(0x4A16)
        q = torch.randint(0, 16, (n, k), dtype=torch.int32, device="cuda", generator=gen)
        scale = torch.rand(n, k // g, device="cuda", generator=gen) * 0.01 + 0.005
        if case["symmetry"] == "asym":
            z = torch.randint(0, 16, (n, k // g), device="cuda", generator=gen).float()
        else:
            z = torch.full((n, k // g), 8.0, device="cuda")
        scale = scale.to(torch.bfloat16)
        zero = ((8.0 - z) * scale.float()).to(torch.bfloat16)  # (q - z)·s = (q - 8)·s + (8 - z)·s
        # [K / group, N, 2]: (scale, zero) per group and column, as tinygemm reads them.
        sz = torch.stack([scale, zero], dim=2).transpose(0, 1).contiguous()
        packed = self._pack(torch, q, inner_k_tiles(k))
        self.packed = [packed] + [packed.clone() for _ in range(copies - 1)]
        self.sz = [sz] + [sz.clone() for _ in range(copies - 1)]
        self._check(torch, q, scale, zero)

    @staticmethod
    def _pack(torch, q, tiles):
        try:  # torch >= 2.5: uint8 [N, K / 2], two nibbles per byte, even k in the high nibble
            u8 = (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)
            return torch.ops.aten._convert_weight_to_int4pack(u8, tiles)
        except RuntimeError:  # older torch: int32 [N, K], one value per element
            return torch.ops.aten._convert_weight_to_int4pack(q, tiles)

    def _check(self, torch, q, scale, zero):
        """tinygemm's output against the dequantized weights: a wrong packing is never timed."""
        g = self.case["group"]
        dequant = ((q.float() - 8.0) * scale.float().repeat_interleave(g, dim=1)
                   + zero.float().repeat_interleave(g, dim=1))
        x = torch.randn(8, self.case["k"], dtype=torch.bfloat16, device="cuda")
        got = torch.ops.aten._weight_int4pack_mm(x, self.packed[0], g, self.sz[0]).float()
        want = x.float() @ dequant.t()
        err = (got - want).abs().max().item()
        y_max = want.abs().max().item()
        if not err <= 0.02 * y_max + 1e-3:
            raise AssertionError(f"output differs from its dequantized weights: max |err| {err:.4g} "
                                 f"against max |y| {y_max:.4g}; packing or zero folding is wrong")


def time_torch_int4(torch, timer, weights, case):
    m, k, g, copies = case["m"], case["k"], case["group"], timer.plan["copies"]
    xs = [torch.randn(m, k, dtype=torch.bfloat16, device="cuda") for _ in range(copies)]
    try:
        mm = torch.ops.aten._weight_int4pack_mm
        return timer.median_us(lambda i: mm(xs[i], weights.packed[i], g, weights.sz[i]))
    finally:
        del xs


def free_cuda(torch):
    import gc

    gc.collect()
    torch.cuda.empty_cache()


def run_cases(torch, plan, cases):
    timer = Timer(torch, plan)
    dense_cache = {}  # dense_key → (µs or None, reason or None)
    int4_cache = {}  # (int4_weights_key, m) → (µs or None, reason or None)
    # One set of weights lives at a time: cases grouped by weights, rows kept in request order.
    order = sorted(range(len(cases)), key=lambda i: (int4_weights_key(cases[i]), cases[i]["m"]))
    weights = None
    weights_failed = {}  # int4_weights_key → reason: packing or the check failed, for every M
    for n_done, i in enumerate(order, 1):
        case = cases[i]
        log(f"[{n_done}/{len(cases)}] {case['provider']}/{case['shape']}/M={case['m']}")
        wkey = int4_weights_key(case)
        key = (wkey, case["m"])
        if key not in int4_cache:
            reason = torch_int4_precheck(case)
            if reason is not None:
                weights_failed.setdefault(wkey, skip_reason(PEER_TORCH_INT4, reason))
            if weights is None or int4_weights_key(weights.case) != wkey:
                weights = None
                free_cuda(torch)
                if wkey not in weights_failed:
                    try:
                        weights = Int4Weights(torch, case, plan["copies"])
                    except Exception as exc:  # recorded for every M of these weights, never fatal
                        weights_failed[wkey] = skip_reason(PEER_TORCH_INT4, exc)
                        free_cuda(torch)
            if wkey in weights_failed:
                int4_cache[key] = (None, weights_failed[wkey])
            else:
                try:
                    int4_cache[key] = (time_torch_int4(torch, timer, weights, case), None)
                except Exception as exc:  # recorded per case, never fatal
                    int4_cache[key] = (None, skip_reason(PEER_TORCH_INT4, exc))
                    free_cuda(torch)
        if dense_key(case) not in dense_cache:
            try:
                dense_cache[dense_key(case)] = (time_dense(torch, timer, case), None)
            except Exception as exc:
                dense_cache[dense_key(case)] = (None, skip_reason(PEER_DENSE, exc))
                free_cuda(torch)
    rows = []
    for case in cases:
        int4_us, int4_skip = int4_cache[(int4_weights_key(case), case["m"])]
        dense_us, dense_skip = dense_cache[dense_key(case)]
        rows.append(output_row(case, int4_us, dense_us, [r for r in (int4_skip, dense_skip) if r]))
    notes = [
        f"torch int4 (torch.ops.aten._weight_int4pack_mm) runs in {TORCH_INT4_DTYPE} whatever the "
        "case's dtype; zero points folded into scale_and_zeros as (8 - z)·s",
        "dense fp16: torch.mm, fp16 X and W, timed once per (N, K, M)",
        timer.method_note(),
    ]
    return rows, notes


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("request", nargs="?", help="the request JSON written by `w4a16 perf --peers`")
    parser.add_argument("output", nargs="?", help="where the output JSON goes")
    parser.add_argument("--self-test", action="store_true", help="test the pure parts (no torch)")
    args = parser.parse_args(argv)
    if args.self_test:
        return self_test()
    if not args.request or not args.output:
        log("perf-peers: usage: perf-peers.py REQUEST.json OUTPUT.json (or --self-test)")
        return EXIT_BAD_REQUEST
    try:
        with open(args.request) as f:
            plan, cases = parse_request(json.load(f))
    except (OSError, ValueError) as exc:  # json.JSONDecodeError and RequestError are ValueErrors
        log(f"perf-peers: bad request {args.request}: {exc}")
        return EXIT_BAD_REQUEST
    try:
        import torch
    except Exception as exc:
        log(f"perf-peers: cannot import torch with {sys.executable}: {type(exc).__name__}: {exc}; "
            "the peers need PyTorch with CUDA (set W4A16_PYTHON to a python that has it)")
        return EXIT_NO_TORCH
    if not torch.cuda.is_available():
        log(f"perf-peers: torch {torch.__version__} sees no CUDA device "
            f"(built for CUDA {torch.version.cuda}); the peers need a GPU")
        return EXIT_NO_CUDA
    started = time.monotonic()
    rows, notes = run_cases(torch, plan, cases)
    write_json(args.output, {
        "device": torch.cuda.get_device_name(0),
        "torch": f"{torch.__version__} (CUDA {torch.version.cuda})",
        "torch_int4_dtype": TORCH_INT4_DTYPE,
        "notes": notes,
        "rows": rows,
    })
    log(f"perf-peers: {len(rows)} rows in {time.monotonic() - started:.1f} s → {args.output}")
    return 0


# ---------------------------------------------------------------- self-test (no torch)


def self_test():
    case = {"provider": "p", "shape": "s", "m": 1, "n": 64, "k": 256, "group": 128,
            "dtype": "f16", "symmetry": "asym"}
    plan, cases = parse_request({"copies": 8, "reps": 15, "warmup": 5, "cases": [case]})
    assert plan == {"copies": 8, "reps": 15, "warmup": 5}, plan
    assert cases == [case], cases

    def refused(obj, needle):
        try:
            parse_request(obj)
        except RequestError as exc:
            assert needle in str(exc), (needle, str(exc))
            return
        raise AssertionError(f"accepted {obj!r}")

    good = {"copies": 8, "reps": 15, "warmup": 5, "cases": [case]}
    refused([], "expected a JSON object")
    refused({**good, "copies": 0}, "`copies` = 0")
    refused({**good, "reps": True}, "`reps` = True")
    refused({**good, "cases": {}}, "`cases`")
    refused({**good, "cases": [{**case, "dtype": "f32"}]}, "case 0: `dtype` = 'f32'")
    refused({**good, "cases": [{**case, "symmetry": None}]}, "`symmetry` = None")
    refused({**good, "cases": [{**case, "m": 0}]}, "case 0: `m` = 0")
    refused({**good, "cases": [case, dict(case)]}, "case 1: ('p', 's', 1) appears twice")

    # Dense is shared across providers and dtypes of one (N, K, M); int4 weights across M.
    other = {**case, "provider": "q", "dtype": "bf16", "symmetry": "sym"}
    assert dense_key(case) == dense_key(other)
    assert dense_key(case) != dense_key({**case, "m": 2})
    assert int4_weights_key(case) == int4_weights_key({**case, "m": 2048})
    assert int4_weights_key(case) != int4_weights_key(other)

    assert inner_k_tiles(4096) == 8 and inner_k_tiles(64) == 4 and inner_k_tiles(32) == 2
    assert inner_k_tiles(48) is None
    assert torch_int4_precheck(case) is None
    assert "not a multiple of the group" in str(torch_int4_precheck({**case, "k": 200, "group": 128}))
    assert "multiple of 32" in str(torch_int4_precheck({**case, "k": 48, "group": 16}))

    reason = skip_reason(PEER_TORCH_INT4, RuntimeError("qGroupSize must be\n 32, 64, 128 or 256"))
    assert reason == "torch-int4: RuntimeError: qGroupSize must be 32, 64, 128 or 256", reason
    long = skip_reason(PEER_DENSE, MemoryError("x" * 1000))
    assert long.startswith("dense-fp16: MemoryError: x") and len(long) < REASON_CHARS + 40, long

    row = output_row(case, 20.25, float("nan"), ["dense-fp16: E: m"])
    assert row == {"provider": "p", "shape": "s", "m": 1, "torch_int4_us": 20.25,
                   "dense_fp16_us": None, "skipped": ["dense-fp16: E: m"]}, row
    assert finite_time(0.0) is None and finite_time(float("inf")) is None and finite_time(3.0) == 3.0
    assert median([3.0, 1.0, 2.0]) == 2.0 and median([]) is None

    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "out.json")
        write_json(path, {"rows": [row]})
        with open(path) as f:
            assert json.load(f) == {"rows": [row]}
        assert not os.path.exists(f"{path}.partial")
        try:
            write_json(path, {"t": float("nan")})
            raise AssertionError("NaN written")
        except ValueError:
            pass
        bad = os.path.join(d, "bad.json")
        with open(bad, "w") as f:
            f.write("{not json")
        assert main([bad, path]) == EXIT_BAD_REQUEST
        assert main([path]) == EXIT_BAD_REQUEST
    log("perf-peers self-test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
