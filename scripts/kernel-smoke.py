#!/usr/bin/env python3
"""GPU smoke check of the HIP kernel set through NVRTC (CuPy), before the Rust CUDA backend exists.

Runs on a machine with an NVIDIA GPU, python3, numpy, cupy (and torch for the baselines):

    OUT=/some/dir python3 scripts/kernel-smoke.py [--quick]

It builds each kernel's NVRTC translation unit exactly as kernels/src/source.rs does (compat.h
inlined in place of its #include), compiles it with CuPy's NVRTC, launches every kernel on small
edge shapes (ragged N, M in 1..257, G 32/64/128 (and 256 / channelwise for dequant and fallback),
sym/asym, fp16/bf16, with and without bias, padded and unaligned strides) and compares against a
float64 reference with the SPEC §6 bound (c = 2), or bit for bit on small-integer data. Every
launch runs twice (determinism), outputs are poisoned with NaN before and their row padding and a
guard band after them must stay poisoned. AMD code paths are exercised on NVIDIA too: the ALU
skinny engine, the gfx11 and gfx12 WMMA fragment layouts (-DW4_EMULATE_WMMA=11/12), synchronous
copies and software bf16. Then it times skinny (M = 1..5, K = 4096, N = 14336, G = 128) against the
measured copy bandwidth and fused at M = 2048 against torch.matmul (cuBLAS), plus torch's int4
kernel. Output: a table on stdout and $OUT/smoke.log, results in $OUT/smoke.json.
"""
import json
import math
import multiprocessing as mp
import os
import sys
import time
import traceback

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HIP = os.path.join(ROOT, "kernels", "hip")
OUT = os.environ.get("OUT") or os.path.join(ROOT, ".device-out")
os.makedirs(OUT, exist_ok=True)
QUICK = "--quick" in sys.argv

# (module key, file, defines)
MODULES = [
    ("skinny", "skinny", ()),
    ("skinny_alu", "skinny", ("-DW4_SKINNY_MMA=0", "-DW4_SOFT_BF16")),
    ("skinny_d4", "skinny", ("-DSK_DEPTH=4",)),
    # The static-slot weight ring (W4_SKINNY_RING_UNROLL), not yet the default: checked and timed
    # here so that one run decides whether to flip it.
    ("skinny_ur", "skinny", ("-DW4_SKINNY_RING_UNROLL=1",)),
    ("skinny_ur_d4", "skinny", ("-DW4_SKINNY_RING_UNROLL=1", "-DSK_DEPTH=4")),
    ("skinny_alu_ur", "skinny", ("-DW4_SKINNY_MMA=0", "-DW4_SOFT_BF16", "-DW4_SKINNY_RING_UNROLL=1")),
    ("fused", "fused", ()),
    ("fused_w11", "fused", ("-DW4_EMULATE_WMMA=11", "-DW4_SYNC_COPY", "-DW4_SOFT_BF16")),
    ("fused_w12", "fused", ("-DW4_EMULATE_WMMA=12", "-DW4_SYNC_COPY")),
    ("dequant", "dequant", ()),
    ("dequant_soft", "dequant", ("-DW4_SOFT_BF16",)),
    ("fallback", "fallback", ()),
]

_LOG = None


def log(*a):
    global _LOG
    if _LOG is None:
        _LOG = open(os.path.join(OUT, "smoke.log"), "w")
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    _LOG.write(s + "\n")
    _LOG.flush()


def translation_unit(name):
    compat = open(os.path.join(HIP, "compat.h")).read()
    src = open(os.path.join(HIP, name + ".hip")).read()
    inc = '#include "compat.h"'
    assert sum(1 for l in src.splitlines() if l.strip() == inc) == 1, name
    return "\n".join(compat if l.strip() == inc else l for l in src.splitlines()) + "\n"


def cuda_include_options():
    """An explicit -I for cuda_fp16.h in case CuPy's own include path lacks it."""
    cands = [os.environ.get("CUDA_PATH", ""), os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    cands = [os.path.join(c, "include") for c in cands if c]
    for p in sys.path:
        cands += [os.path.join(p, "nvidia", "cu13", "include"), os.path.join(p, "nvidia", "cuda_runtime", "include")]
    for c in cands:
        if os.path.isfile(os.path.join(c, "cuda_fp16.h")):
            return ("-I" + c,)
    return ()


def module_options(defines):
    return tuple(defines) + cuda_include_options()


def _compile(job):
    key, name, defines = job
    import cupy as cp

    t0 = time.time()
    try:
        m = cp.RawModule(code=translation_unit(name), options=module_options(defines))
        m.compile()
        return key, time.time() - t0, None
    except Exception as e:  # the log comes back to the parent
        return key, time.time() - t0, f"{type(e).__name__}: {e}"


def compile_all():
    """Compiles every module in parallel processes (filling CuPy's kernel cache), then loads them."""
    import cupy as cp

    ctx = mp.get_context("spawn")
    with ctx.Pool(len(MODULES)) as pool:
        results = pool.map(_compile, MODULES)
    mods = {}
    for (key, name, defines), (_, secs, err) in zip(MODULES, results):
        if err:
            log(f"COMPILE FAIL {key}: {err[:4000]}")
            continue
        mods[key] = cp.RawModule(code=translation_unit(name), options=module_options(defines))
        mods[key].compile()
        log(f"compiled {key:13s} {' '.join(defines):60s} {secs:6.1f}s")
    return mods


# ------------------------------------------------------------------------------------------------
# dtypes as bit patterns

POISON = {"f16": 0x7E01, "bf16": 0x7FC1}
UNIT = {"f16": 2.0**-11, "bf16": 2.0**-8}
TINY = {"f16": 2.0**-24, "bf16": 2.0**-133}


def to_bits(v, dt):
    v32 = np.asarray(v, dtype=np.float64).astype(np.float32)
    if dt == "f16":
        return v32.astype(np.float16).view(np.uint16)
    u = v32.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def from_bits(b, dt):
    b = np.asarray(b, dtype=np.uint16)
    if dt == "f16":
        return b.view(np.float16).astype(np.float64)
    return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


# ------------------------------------------------------------------------------------------------
# layers in the resident layout


def pack_weights(q, pad_bytes):
    n, k = q.shape
    e = np.arange(8, dtype=np.uint32)
    shift = (e & 1) * 16 + (e >> 1) * 4
    w = (q.reshape(n, k // 8, 8).astype(np.uint32) << shift).sum(axis=2, dtype=np.uint32)
    row_words = k // 8 + pad_bytes // 4
    buf = np.zeros((n, row_words), np.uint32)
    buf[:, : k // 8] = w
    return buf, row_words * 4


def pack_zeros(z):
    n, gc = z.shape
    zz = z.reshape(n // 8, 8, gc).astype(np.uint32)
    return (zz << (4 * np.arange(8, dtype=np.uint32))[None, :, None]).sum(axis=1, dtype=np.uint32)


class Case:
    def __init__(self, rng, m, n, k, g, dt, asym, bias, cls="random", pad=False, x_unaligned=False):
        self.m, self.n, self.k, self.g, self.dt, self.asym = m, n, k, g, dt, asym
        self.cls = cls
        gc = k // g
        self.q = rng.integers(0, 16, (n, k), dtype=np.uint8)
        self.z = rng.integers(0, 16, (n, gc)) if asym else np.full((n, gc), 8)
        if cls == "exact":
            s = 2.0 ** rng.integers(-3, 0, (n, gc)).astype(np.float64)
            x = rng.integers(-4, 5, (m, k)).astype(np.float64)
            b = rng.integers(-16, 17, n).astype(np.float64) / 8
        else:
            s = 0.05 * rng.random((n, gc)) + 1e-3
            x = 0.25 * rng.standard_normal((m, k))
            if cls == "large":
                x = x * 256.0
            b = 0.1 * rng.standard_normal(n)
        self.s_bits = to_bits(s, dt)
        self.s = from_bits(self.s_bits, dt)
        self.x_bits = to_bits(x, dt)
        self.x = from_bits(self.x_bits, dt)
        self.b_bits = to_bits(b, dt) if bias else None
        self.b = from_bits(self.b_bits, dt) if bias else np.zeros(n)
        self.xrs = k + (3 if x_unaligned else (8 if pad else 0))
        self.wpad = 128 if pad else 0
        self.srs = gc + (3 if pad else 0)
        self.yrs = n + (5 if pad else 0)
        self.desc = (
            f"M={m} N={n} K={k} G={g} {dt} {'asym' if asym else 'sym'} {cls}"
            f"{' bias' if bias else ''}{' pad' if pad else ''}{' xunal' if x_unaligned else ''}"
        )

    def weights(self):
        return (self.q.astype(np.float64) - np.repeat(self.z, self.g, axis=1)) * np.repeat(self.s, self.g, axis=1)

    def device(self, cp):
        m, n, k, g = self.m, self.n, self.k, self.g
        xb = np.zeros((m, self.xrs), np.uint16)
        xb[:, :k] = self.x_bits
        w, wrs = pack_weights(self.q, self.wpad)
        self.wrs = wrs
        sb = np.zeros((n, self.srs), np.uint16)
        sb[:, : k // g] = self.s_bits
        d = {"x": cp.asarray(xb), "w": cp.asarray(w), "s": cp.asarray(sb)}
        d["z"] = cp.asarray(pack_zeros(self.z)) if self.asym else None
        d["b"] = cp.asarray(self.b_bits) if self.b_bits is not None else None
        return d


def nullable(a):
    return a if a is not None else np.uint64(0)


def poisoned(cp, rows, stride, dt, guard=64):
    return cp.full(rows * stride + guard, POISON[dt], dtype=cp.uint16)


def check_output(y, c, rows, cols, stride, guard=64):
    """Row padding and the guard band must still hold the poison."""
    dt = c.dt
    full = y.get()
    body = full[: rows * stride].reshape(rows, stride)
    pad_ok = bool(np.all(body[:, cols:] == POISON[dt])) and bool(np.all(full[rows * stride :] == POISON[dt]))
    return body[:, :cols].copy(), pad_ok


# ------------------------------------------------------------------------------------------------
# geometry (mirrors kernels/src/set.rs and tiles.rs for sm_90)

CUS = 132
TILES = {"16x64x32w4": (16, 64, 4), "64x64x32w4": (64, 64, 4), "128x128x32w8": (128, 128, 8), "": (64, 64, 4)}


SCALE_CAP = 4096


def skinny_rt(n, k=4096, g=128):
    groups = k // g
    fills = lambda rt: math.ceil(n / (16 * rt)) >= CUS or rt == 1
    fits = lambda rt: 16 * rt * groups <= SCALE_CAP
    for rt in (8, 4, 2, 1):
        if fills(rt) and fits(rt):
            return rt
    for rt in (8, 4, 2, 1):
        if fills(rt):
            return rt
    return 1


def skinny_geom(n, rt=None, k=4096, g=128):
    rt = rt or skinny_rt(n, k, g)
    return (math.ceil(n / (16 * rt)), 1, 1), (256 // rt, rt, 1)


def fused_geom(m, n, tile):
    bm, bn, w = TILES[tile]
    return (math.ceil(n / bn), math.ceil(m / bm), 1), (32 * w, 1, 1)


# ------------------------------------------------------------------------------------------------
# correctness

RESULTS = []


def record(kernel, module, c, ok, ratio, note=""):
    RESULTS.append({"kernel": kernel, "module": module, "case": c.desc, "ok": ok, "ratio": ratio, "note": note})
    if not ok:
        log(f"  FAIL {kernel:8s} {module:12s} {c.desc:70s} ratio={ratio:.3g} {note}")


def gemm_launch(cp, fn, grid, block, c, d):
    y = poisoned(cp, c.m, c.yrs, c.dt)
    args = (d["x"], d["w"], d["s"], nullable(d["z"]), nullable(d["b"]), y, np.int32(c.m), np.int32(c.n),
            np.int32(c.k), np.int32(c.g), np.int32(c.xrs), np.int32(c.wrs), np.int32(c.srs), np.int32(c.yrs))
    fn(grid, block, args)
    cp.cuda.runtime.deviceSynchronize()
    return y


def check_gemm(cp, kernel, module, fn, grid, block, c, recipe):
    if time.time() > DEADLINE[0]:
        return None
    try:
        return _check_gemm(cp, kernel, module, fn, grid, block, c, recipe)
    except Exception as e:
        record(kernel, module, c, False, float("inf"), f"crashed: {type(e).__name__}: {str(e)[:300]}")
        return False


def _check_gemm(cp, kernel, module, fn, grid, block, c, recipe):
    d = c.device(cp)
    y1 = gemm_launch(cp, fn, grid, block, c, d)
    y2 = gemm_launch(cp, fn, grid, block, c, d)
    out1, pad_ok = check_output(y1, c, c.m, c.n, c.yrs)
    out2, _ = check_output(y2, c, c.m, c.n, c.yrs)
    same = bool(np.array_equal(out1, out2))
    yv = from_bits(out1, c.dt)
    w = c.weights()
    if recipe == "fused":
        wr = from_bits(to_bits(w, c.dt), c.dt)  # exact (q-z)*s fits fp32, so one rounding
    else:
        wr = w
    acc = c.x @ wr.T
    exact_y = c.x @ w.T + c.b[None, :]
    a = np.abs(c.x) @ np.abs(w).T
    kk = c.k * 2.0**-24
    gamma = kk / (1 - kk)
    u = UNIT[c.dt]
    if recipe == "fused":
        bound = 2 * (gamma + u) * a + 2 * u * (np.abs(exact_y) + np.abs(c.b)[None, :]) + TINY[c.dt]
    else:
        bound = 2 * gamma * a + u * np.abs(exact_y) + TINY[c.dt]
    finite = bool(np.all(np.isfinite(yv)))
    err = np.abs(yv - exact_y)
    ratio = float(np.max(err / bound)) if finite else float("inf")
    ok = finite and pad_ok and same and ratio <= 1.0
    note = []
    if c.cls == "exact":
        if recipe == "fused":
            r1 = from_bits(to_bits(acc, c.dt), c.dt)
            want = to_bits(r1 + c.b[None, :], c.dt)
        else:
            want = to_bits(acc + c.b[None, :], c.dt)
        if not np.array_equal(out1, want):
            ok = False
            note.append(f"not bit-exact ({int(np.sum(out1 != want))} differ)")
    if not pad_ok:
        note.append("wrote outside the output")
    if not same:
        note.append("nondeterministic")
    if not finite:
        note.append("non-finite")
    record(kernel, module, c, ok, ratio, " ".join(note))
    return ok


def check_dequant(cp, module, fn, c, out_pad):
    if time.time() > DEADLINE[0]:
        return None
    try:
        return _check_dequant(cp, module, fn, c, out_pad)
    except Exception as e:
        record("dequant", module, c, False, float("inf"), f"crashed: {type(e).__name__}: {str(e)[:300]}")
        return False


def _check_dequant(cp, module, fn, c, out_pad):
    d = c.device(cp)
    ors = c.k + out_pad
    outs = []
    for _ in range(2):
        o = poisoned(cp, c.n, ors, c.dt)
        fn((c.n, math.ceil(c.k / 8 / 256), 1), (256, 1, 1),
           (d["w"], d["s"], nullable(d["z"]), o, np.int32(c.n), np.int32(c.k), np.int32(c.g), np.int32(c.wrs),
            np.int32(c.srs), np.int32(ors)))
        cp.cuda.runtime.deviceSynchronize()
        outs.append(check_output(o, c, c.n, c.k, ors))
    (o1, pad_ok), (o2, _) = outs
    want = to_bits(c.weights(), c.dt)
    ok = pad_ok and np.array_equal(o1, want) and np.array_equal(o1, o2)
    note = "" if ok else f"{int(np.sum(o1 != want))} differ, pad_ok={pad_ok}"
    record("dequant", module, c, ok, 0.0 if ok else 1e9, note)


DEADLINE = [float("inf")]


def correctness(cp, mods, which):
    """Runs the checks of the modules in `which` (a subset of MODULES' keys)."""
    rng = np.random.default_rng(20240607)
    dts = ("f16", "bf16")
    mods = {k: v for k, v in mods.items() if k in which}

    # skinny, both engines
    for module in ("skinny", "skinny_ur", "skinny_d4", "skinny_ur_d4", "skinny_alu", "skinny_alu_ur"):
        if module not in mods:
            continue
        fns = {dt: mods[module].get_function(f"w4a16_skinny_{dt}") for dt in dts}
        i = 0
        full = module in ("skinny", "skinny_ur")
        groups = (32, 64, 128) if full else (32, 128)
        ms = (1, 2, 3, 4, 5) if full else (1, 5)
        for dt in dts:
            for asym in (False, True):
                for g in groups:
                    for m in ms:
                        i += 1
                        n = 200 if asym else 77
                        c = Case(rng, m, n, 1024, g, dt, asym, bias=i % 2 == 0, pad=i % 3 == 1, x_unaligned=i % 3 == 2)
                        check_gemm(cp, "skinny", module, fns[dt], *skinny_geom(n, None, 1024, g), c, "exact-weights")
        # K*M around the staging capacity and the field's 32768 / 39321 limits; a K tail that is
        # not a multiple of the 128-wide span; row tiles 1..8; exact and large-activation data.
        edge = [(4, 8192, 128), (4, 9728, 128), (4, 9856, 128), (5, 6528, 128), (3, 13184, 128), (2, 16384, 64),
                (5, 3200, 32), (5, 3328, 64), (1, 4096, 128), (2, 416, 32), (3, 96, 32)]
        for dt in dts:
            for (m, k, g) in edge:
                c = Case(rng, m, 64, k, g, dt, asym=True, bias=True, pad=True)
                check_gemm(cp, "skinny", module, fns[dt], *skinny_geom(64, None, k, g), c, "exact-weights")
            # Scales that do not fit the shared-memory stage (read from global memory per span).
            for rt in (1, 8):
                c = Case(rng, 2, 136, 32768 // rt, 32, dt, True, bias=True, pad=True)
                check_gemm(cp, "skinny", module + f"/nosmem-rt{rt}", fns[dt], *skinny_geom(136, rt), c, "exact-weights")
            for rt in (1, 2, 4, 8):
                c = Case(rng, 3, 200, 1024, 64, dt, True, bias=False)
                check_gemm(cp, "skinny", module + f"/rt{rt}", fns[dt], *skinny_geom(200, rt), c, "exact-weights")
            for m in (1, 5):
                c = Case(rng, m, 72, 512, 32, dt, True, bias=True, cls="exact")
                check_gemm(cp, "skinny", module, fns[dt], *skinny_geom(72), c, "exact-weights")
            c = Case(rng, 4, 64, 2048, 128, dt, True, bias=False, cls="large")
            check_gemm(cp, "skinny", module, fns[dt], *skinny_geom(64), c, "exact-weights")

    # fused: native, and the gfx11 / gfx12 layouts emulated
    for module in ("fused", "fused_w11", "fused_w12"):
        if module not in mods:
            continue
        native = module == "fused"
        for tile in TILES:
            for dt in dts:
                name = f"w4a16_fused_{dt}" + (f"_{tile}" if tile else "")
                fn = mods[module].get_function(name)
                ms = (1, 17, 64, 255, 257) if native else (17, 257)
                gs = (32, 64, 128) if native else (32, 128)
                i = 0
                for asym in (False, True):
                    for g in gs:
                        for m in ms:
                            i += 1
                            if not native and (i % 2 == 0):
                                continue
                            n = 200 if asym else 77
                            c = Case(rng, m, n, 512, g, dt, asym, bias=i % 2 == 1, pad=i % 3 == 1, x_unaligned=i % 3 == 2)
                            check_gemm(cp, "fused", f"{module}/{tile or 'plain'}", fn, *fused_geom(m, n, tile), c, "fused")
                c = Case(rng, 70, 136, 256, 32, dt, True, bias=True, cls="exact")
                check_gemm(cp, "fused", f"{module}/{tile or 'plain'}", fn, *fused_geom(70, 136, tile), c, "fused")

    # dequant: every G dividing K, channelwise included; aligned and unaligned output rows
    for module in ("dequant", "dequant_soft"):
        if module not in mods:
            continue
        for dt in dts:
            fn = mods[module].get_function(f"w4a16_dequant_{dt}")
            for asym in (False, True):
                for g in (32, 64, 128, 256, 1024):
                    for out_pad in (8, 3):
                        n = 200 if asym else 77
                        c = Case(rng, 1, n, 1024, g, dt, asym, bias=False, pad=out_pad == 8)
                        check_dequant(cp, module, fn, c, out_pad)

    # fallback: any G dividing K
    if "fallback" in mods:
        for dt in dts:
            fn = mods["fallback"].get_function(f"w4a16_fallback_{dt}")
            i = 0
            for asym in (False, True):
                for g in (32, 128, 256, 768):
                    for m in (1, 17):
                        i += 1
                        n = 200 if asym else 77
                        c = Case(rng, m, n, 768, g, dt, asym, bias=i % 2 == 0, pad=i % 3 == 1, x_unaligned=i % 3 == 2)
                        grid = (m * math.ceil(n / 128), 1, 1)
                        check_gemm(cp, "fallback", "fallback", fn, grid, (128, 1, 1), c, "exact-weights")
            c = Case(rng, 5, 72, 512, 256, dt, True, bias=True, cls="exact")
            check_gemm(cp, "fallback", "fallback", fn, (5 * 1, 1, 1), (128, 1, 1), c, "exact-weights")



def summary():
    table = {}
    for r in RESULTS:
        key = (r["kernel"], r["module"].split("/")[0])
        t = table.setdefault(key, [0, 0, 0.0])
        t[0] += 1
        t[1] += 1 if r["ok"] else 0
        if math.isfinite(r["ratio"]):
            t[2] = max(t[2], r["ratio"])
    log("\ncorrectness: kernel/module  cases  passed  max(err/bound)")
    for (k, mname), (nc, npass, mr) in sorted(table.items()):
        log(f"  {k:9s} {mname:13s} {nc:5d} {npass:7d}   {mr:.3g}")


# ------------------------------------------------------------------------------------------------
# timing


def time_launches(cp, launch, iters, warm=10):
    """Seconds per launch, from a CUDA graph of `iters` back-to-back launches (so that Python's
    launch overhead does not hide short kernels); per-launch event pairs if capture fails."""
    stream = cp.cuda.Stream(non_blocking=True)
    s, e = cp.cuda.Event(), cp.cuda.Event()
    with stream:
        for i in range(warm):
            launch(i)
        stream.synchronize()
        try:
            stream.begin_capture()
            for i in range(iters):
                launch(i)
            graph = stream.end_capture()
            graph.launch(stream)
            stream.synchronize()
            s.record(stream)
            graph.launch(stream)
            e.record(stream)
            e.synchronize()
            return cp.cuda.get_elapsed_time(s, e) / iters * 1e-3
        except Exception as ex:
            log(f"  (graph capture failed: {type(ex).__name__}: {str(ex)[:120]}; timing launch by launch)")
            total = 0.0
            for i in range(iters):
                s.record(stream)
                launch(i)
                e.record(stream)
                e.synchronize()
                total += cp.cuda.get_elapsed_time(s, e)
            return total / iters * 1e-3


def time_torch(torch, fn, iters, warm=5):
    """Seconds per call of a torch op, replayed from a torch CUDA graph."""
    st = torch.cuda.Stream()
    st.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(st):
        for i in range(warm):
            fn(i)
    torch.cuda.current_stream().wait_stream(st)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(iters):
            fn(i)
    g.replay()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    g.replay()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / iters * 1e-3


def timings(cp, mods):
    import torch

    out = {}
    dev = cp.cuda.Device()
    log(f"\ndevice: {cp.cuda.runtime.getDeviceProperties(dev.id)['name'].decode()}  SMs={dev.attributes['MultiProcessorCount']}")
    # copy ceiling: bytes read + written
    nbytes = 1 << 30
    src = cp.ones(nbytes // 4, cp.float32)
    dst = cp.empty_like(src)
    rt_ = cp.cuda.runtime

    def copy(i):
        rt_.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, rt_.memcpyDeviceToDevice, cp.cuda.get_current_stream().ptr)

    t_memcpy = time_launches(cp, copy, 20, 3)
    t_kernel = time_launches(cp, lambda i: cp.copyto(dst, src), 20, 3)
    log(f"copy: cudaMemcpy {2 * nbytes / t_memcpy / 1e12:.3f} TB/s, copy kernel {2 * nbytes / t_kernel / 1e12:.3f} TB/s")
    t = min(t_memcpy, t_kernel)
    copy_bw = 2 * nbytes / t
    del src, dst
    log(f"copy ceiling: {copy_bw / 1e12:.3f} TB/s (1 GiB device-to-device)")
    out["copy_tbs"] = copy_bw / 1e12

    K, N, G = 4096, 14336, 128
    rng = np.random.default_rng(7)
    copies = 16  # ~470 MB of weights rotated, far beyond the L2
    bits = lambda shape: cp.random.randint(0, 2**31 - 1, size=shape, dtype=cp.int64).astype(cp.uint32) * 2 + 1
    wq = [bits((N, K // 8)) for _ in range(copies)]
    zq = [bits((N // 8, K // G)) for _ in range(copies)]
    sc = {dt: [cp.asarray(to_bits(0.01 + 0.01 * rng.random((N, K // G)), dt)) for _ in range(copies)] for dt in ("f16", "bf16")}

    def skinny_time(module, dt, m, asym=True, rt=None, g=G):
        fn = mods[module].get_function(f"w4a16_skinny_{dt}")
        x = cp.asarray(to_bits(0.25 * rng.standard_normal((m, K)), dt))
        y = cp.zeros((m, N), cp.uint16)
        grid, block = skinny_geom(N, rt, K, g)
        scales = sc[dt] if g == G else sc32[dt]
        zer = zq if g == G else zq32

        def launch(i):
            j = i % copies
            fn(grid, block, (x, wq[j], scales[j], zer[j] if asym else np.uint64(0), np.uint64(0), y, np.int32(m),
                             np.int32(N), np.int32(K), np.int32(g), np.int32(K), np.int32(K // 2), np.int32(K // g),
                             np.int32(N)))

        t = time_launches(cp, launch, 200)
        byts = N * K // 2 + N * (K // g) * 2 + (N // 8 * (K // g) * 4 if asym else 0) + m * K * 2 + m * N * 2
        return t, byts / t, block[1]

    sc32 = {dt: [cp.asarray(to_bits(0.01 + 0.01 * rng.random((N, K // 32)), dt)) for _ in range(copies)] for dt in ("f16", "bf16")}
    zq32 = [bits((N // 8, K // 32)) for _ in range(copies)]
    log("\nskinny K=4096 N=14336 G=128 (weights rotated through 16 copies):")
    log("  module        dtype zp    M   G  rt     us     TB/s  of-copy")
    sk = []
    configs = [("f16", True, m, None, G) for m in (1, 2, 3, 4, 5)] + [
        ("f16", False, 1, None, G), ("bf16", True, 1, None, G), ("bf16", True, 5, None, G),
        ("f16", True, 1, 1, G), ("f16", True, 1, 2, G), ("f16", True, 1, 8, G), ("f16", True, 5, 2, G),
        ("f16", True, 1, None, 32), ("f16", True, 1, 4, 32), ("f16", True, 5, None, 32)]
    for module in ("skinny", "skinny_ur", "skinny_d4", "skinny_ur_d4", "skinny_alu", "skinny_alu_ur"):
        if module not in mods:
            continue
        for dt, asym, m, rt, g in configs:
            if module.startswith("skinny_alu") and (m != 1 or rt is not None or dt != "f16" or not asym or g != G):
                continue
            if module.endswith("d4") and (rt is not None or not asym or dt != "f16"):
                continue
            t, bw, rt_used = skinny_time(module, dt, m, asym, rt, g)
            row = {"module": module, "dtype": dt, "asym": asym, "m": m, "g": g, "rt": rt_used, "us": t * 1e6,
                   "tbs": bw / 1e12, "of_copy": bw / copy_bw}
            sk.append(row)
            log(f"  {module:12s} {dt:5s} {'asym' if asym else 'sym ':4s} {m:2d} {g:3d} {rt_used:3d} {t * 1e6:7.2f} "
                f"{bw / 1e12:8.3f} {bw / copy_bw:7.1%}")
    out["skinny"] = sk
    del sc32, zq32

    # torch baselines at M = 1: int4 (bf16, G = 128) and dense fp16
    try:
        xt = torch.randn(1, K, dtype=torch.bfloat16, device="cuda")
        wint = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8, device="cuda")
        packed = torch.ops.aten._convert_weight_to_int4pack(wint, 8)
        sz = torch.rand(K // G, N, 2, dtype=torch.bfloat16, device="cuda")
        t = time_torch(torch, lambda i: torch.ops.aten._weight_int4pack_mm(xt, packed, G, sz), 200)
        log(f"  torch _weight_int4pack_mm bf16 M=1: {t * 1e6:.2f} us")
        out["torch_int4_us"] = t * 1e6
    except Exception as e:
        log(f"  torch int4 baseline unavailable: {type(e).__name__}: {str(e)[:200]}")
    try:
        xd = torch.randn(1, K, dtype=torch.float16, device="cuda")
        wd = [torch.randn(K, N, dtype=torch.float16, device="cuda") for _ in range(4)]
        t = time_torch(torch, lambda i: torch.matmul(xd, wd[i % 4]), 200)
        log(f"  torch.matmul fp16 dense M=1: {t * 1e6:.2f} us")
        out["torch_dense_m1_us"] = t * 1e6
        del wd
    except Exception as e:
        log(f"  dense baseline failed: {e}")

    del wq, zq, sc
    # fused at M = 2048
    M = 2048
    flops = 2.0 * M * N * K
    log("\nfused M=2048 K=4096 N=14336 G=128 fp16 asym:")
    try:
        xd = torch.randn(M, K, dtype=torch.float16, device="cuda")
        wd = torch.randn(N, K, dtype=torch.float16, device="cuda")
        t = time_torch(torch, lambda i: torch.matmul(xd, wd.t()), 20, 3)
        dense_tf = flops / t / 1e12
        log(f"  torch.matmul fp16 (cuBLAS): {t * 1e3:.3f} ms  {dense_tf:.1f} TFLOP/s")
        out["cublas_tflops"] = dense_tf
        del xd, wd
    except Exception as e:
        dense_tf = float("nan")
        log(f"  cuBLAS baseline failed: {e}")
    x = cp.asarray(to_bits(0.25 * rng.standard_normal((M, K)), "f16"))
    w = bits((N, K // 8))
    z = bits((N // 8, K // G))
    s = cp.asarray(to_bits(0.01 + 0.01 * rng.random((N, K // G)), "f16"))
    y = cp.zeros((M, N), cp.uint16)
    fu = []
    sb = cp.asarray(to_bits(0.01 + 0.01 * rng.random((N, K // G)), "bf16"))
    xb = cp.asarray(to_bits(0.25 * rng.standard_normal((M, K)), "bf16"))
    for tile, dt, mm in [("16x64x32w4", "f16", M), ("64x64x32w4", "f16", M), ("128x128x32w8", "f16", M),
                         ("128x128x32w8", "bf16", M), ("64x64x32w4", "f16", 256), ("128x128x32w8", "f16", 256)]:
        fn = mods["fused"].get_function(f"w4a16_fused_{dt}_{tile}")
        grid, block = fused_geom(mm, N, tile)
        args = (x if dt == "f16" else xb, w, s if dt == "f16" else sb, z, np.uint64(0), y, np.int32(mm), np.int32(N),
                np.int32(K), np.int32(G), np.int32(K), np.int32(K // 2), np.int32(K // G), np.int32(N))
        t = time_launches(cp, lambda i: fn(grid, block, args), 10, 2)
        fl = 2.0 * mm * N * K
        tf = fl / t / 1e12
        fu.append({"tile": tile, "dtype": dt, "m": mm, "ms": t * 1e3, "tflops": tf, "of_cublas": tf / dense_tf})
        log(f"  {tile:14s} {dt:5s} M={mm:5d} {t * 1e3:7.3f} ms  {tf:6.1f} TFLOP/s  {tf / dense_tf:6.1%} of cuBLAS(M=2048)")
    out["fused"] = fu
    return out


def main():
    t0 = time.time()
    import cupy as cp

    ver = open(os.path.join(ROOT, "VERSION")).read().strip() if os.path.exists(os.path.join(ROOT, "VERSION")) else "?"
    log(f"kernel smoke: {ROOT} ({ver})  cupy {cp.__version__}  numpy {np.__version__}")
    mods = compile_all()
    t1 = time.time()
    # Checks of the NVIDIA paths first, then the timings, then the AMD paths run on NVIDIA
    # (slower), each part stopping at its deadline so that the whole run fits one device call.
    budget = float(os.environ.get("SMOKE_BUDGET_S", "270"))
    DEADLINE[0] = t0 + budget * 0.55
    try:
        correctness(cp, mods, {"skinny", "skinny_ur", "skinny_d4", "skinny_ur_d4", "fused", "dequant", "fallback"})
    except Exception:
        log("correctness crashed:\n" + traceback.format_exc())
    t2 = time.time()
    perf = {}
    if not QUICK:
        try:
            perf = timings(cp, mods)
        except Exception:
            log("timings crashed:\n" + traceback.format_exc())
    t3 = time.time()
    DEADLINE[0] = t0 + budget
    try:
        correctness(cp, mods, {"skinny_alu", "skinny_alu_ur", "fused_w11", "fused_w12", "dequant_soft"})
    except Exception:
        log("AMD-path correctness crashed:\n" + traceback.format_exc())
    t4 = time.time()
    summary()
    failed = [r for r in RESULTS if not r["ok"]]
    log(f"\n{len(RESULTS)} cases, {len(failed)} failed; compile {t1 - t0:.0f}s, checks {t2 - t1:.0f}s + {t4 - t3:.0f}s, "
        f"timing {t3 - t2:.0f}s{'; stopped at the deadline' if time.time() > DEADLINE[0] else ''}")
    with open(os.path.join(OUT, "smoke.json"), "w") as f:
        json.dump({"results": RESULTS, "perf": perf}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
