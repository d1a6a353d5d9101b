#!/usr/bin/env bash
# What runs on the GPU machine (via scripts/device-run.sh gpu): the GPU smoke tests, the shape
# fuzzer, the differential suites and the field matrix (each with its sm_90 verdict snapshot
# and its time split), and optionally the benchmark.
#
# Usage: scripts/gpu-job.sh [smoke] [fuzz] [suites] [field] [field-twice] [gpus] [moe] [emulated | emulated:gfxNNNN] [bench]
#                          [bench-moe] [perf] [check-models] [memory]
#                          [sanitize | sanitize:TOOL] [mutants]
#        (default: smoke fuzz suites field memory check-models)
# `memory` is the default job's memory check, after the main run: `run --sanitize memcheck` over
# smoke + kernels + moe (reads and writes past a tensor, which no output check sees: exact-size
# allocations put them outside every allocation) and `--sanitize initcheck` over smoke; each
# prints its wall time (docs/sanitize.md).
# `emulated` runs every suite (field included) on the emulated AMD targets gfx1100-emu,
# gfx1151-emu and gfx1201-emu: each target's AMD configuration (selection, tiles, padding, the
# wave32 ALU skinny engine, its WMMA fragment layout, software bf16, synchronous copies) compiled
# by NVRTC with the AMD builtins emulated, recording verdicts-<suite>@gfxNNNN-emu.snap.
# `emulated:gfx1151` runs one target's share, W4A16_EMU_SUITES="field" one suite's, to split the
# step across device calls.
# `perf` times the field suite against perf/sm_90.json (`w4a16 perf`) and copies its reports
# (summary.md, JSON, JUnit, plot) to $OUT/perf/; W4A16_PERF_ARGS adds flags (e.g. "--control
# /path/to/base --peers", "--only field/qwen3-8b*/**", "--update-goldens": then the new goldens
# perf/sm_90.json and perf/sm_90.moved.md are copied to $OUT/perf/ too, to commit), and
# W4A16_PERF_TIMEOUT bounds it (seconds, default 570).
# `mutants` writes the mutation table mutants-sm_90.{md,json} (commit it as bench/) and takes
# W4A16_MUTANTS_ARGS (e.g. "--only fused-*"; "--sanitize memcheck" adds the `memory` step's
# memcheck share after the suites, its kills counted apart) and W4A16_MUTANTS_TIMEOUT (seconds,
# default 570).
# `check-models` runs `w4a16 check-model` on every committed checkpoint fixture
# (scripts/check-models.sh) and returns the reports as check-model.tgz.
# Logs, reports (report-*.json carry the phase timing) and snapshots land in $OUT.
#
# `sanitize` runs the suites under compute-sanitizer with exact-size allocations (`run
# --sanitize`), recording verdicts-<suite>.sanitize-<tool>@sm_90.snap (expected clean):
#   memcheck  over smoke, kernels, edges: out-of-bounds reads and writes are what the guard bands
#             cannot see (reads) and what ragged tiles and tails cause (edges, kernels);
#   synccheck over smoke, edges: a barrier in divergent code shows up where tiles are ragged;
#   racecheck over smoke: shared-memory races do not depend on ragged shapes, and racecheck is
#             the slowest tool (per-access shared-memory tracking);
#   initcheck over smoke: every input and output buffer is uploaded whole, so uninitialised reads
#             could only come from the kernels' own scratch; smoke launches every kernel.
# `sanitize:memcheck` (etc.) runs one tool's share, to split the step across device calls.
set -uo pipefail
: "${OUT:?}"
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=(smoke fuzz suites field memory check-models)
# Instrumented kernels run 10-100x slower: a longer watchdog per case, a longer run.
sanitize_args=(-- --case-timeout "${W4A16_SANITIZE_CASE_TIMEOUT:-600}")
jobs=$(( $(nproc) - 2 ))
export W4A16_CASES="$PWD/cases"

run_suites() { # NAME SUITE... [-- EXTRA RUN ARGS...]
  local name=$1; shift
  local args=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do args+=(--suite "$1"); shift; done
  [ "${1:-}" = "--" ] && shift
  local start; start=$(date +%s)
  timeout "${W4A16_RUN_TIMEOUT:-300}" stage/bin/w4a16 run "${args[@]}" "$@" --snapshot update \
    --jobs "$jobs" --report-dir "/tmp/w4a16-$name" >"$OUT/run-$name.log" 2>&1
  echo "run $name rc=$? wall=$(( $(date +%s) - start ))s"
  cp "/tmp/w4a16-$name/summary.md" "$OUT/summary-$name.md" 2>/dev/null
  cp "/tmp/w4a16-$name/report.json" "$OUT/report-$name.json" 2>/dev/null
  tail -9 "$OUT/run-$name.log"
}

for step in "${steps[@]}"; do
  case "$step" in
  smoke)
    timeout 120 stage/tests/gpu_smoke --test-threads=1 >"$OUT/gpu_smoke.log" 2>&1
    echo "gpu_smoke rc=$?"; grep "test result" "$OUT/gpu_smoke.log" ;;
  fuzz)
    start=$(date +%s)
    W4A16_FUZZ_CASES="${W4A16_FUZZ_CASES:-160}" timeout "${W4A16_FUZZ_TIMEOUT:-180}" \
      stage/tests/gpu_fuzz --nocapture >"$OUT/gpu_fuzz.log" 2>&1
    echo "gpu_fuzz rc=$? wall=$(( $(date +%s) - start ))s"; grep "test result" "$OUT/gpu_fuzz.log"
    [ -d proptest-regressions ] && cp -r proptest-regressions "$OUT/" ;;
  suites) run_suites suites smoke kernels checkpoints edges regressions moe carrier ;;
  field) run_suites field field ;;
  field-twice)
    # The field's wall time on this GPU (bench/run-field-sm_90-gpu-reference.json): a first run
    # on a fresh machine (cold PTX and driver caches), then a second; each with its per-case
    # times (W4A16_CASE_TIMES, what session::case_cost is fitted to) and the sm_90 snapshot.
    for i in 1 2; do
      start=$(date +%s.%N)
      W4A16_CASE_TIMES="$OUT/case-times-field-$i.txt" timeout "${W4A16_RUN_TIMEOUT:-300}" \
        stage/bin/w4a16 run --suite field --gpus all --jobs "$jobs" --snapshot check \
        --report-dir "/tmp/w4a16-field-$i" >"$OUT/run-field-$i.log" 2>&1
      echo "field run $i rc=$? wall=$(python3 -c "import time; print(round(time.time() - $start, 1))")s"
      cp "/tmp/w4a16-field-$i/report.json" "$OUT/report-field-$i.json" 2>/dev/null
      grep -A6 "time per phase" "$OUT/run-field-$i.log"
    done ;;
  gpus)
    # The field matrix on GPU 0 alone, then on every GPU of the host (the speed-up,
    # and reports that do not depend on the number of GPUs). Both check the sm_90 snapshot.
    # 14 workers per GPU, as on the one-GPU machine (16 cores), so the two runs differ in GPUs.
    n=$(nvidia-smi -L | wc -l); per=${W4A16_JOBS_PER_GPU:-14}
    for run in "one 0 $per" "all all $(( per * n ))"; do
      set -- $run
      start=$(date +%s)
      timeout "${W4A16_RUN_TIMEOUT:-300}" stage/bin/w4a16 run --suite field --gpus "$2" --jobs "$3" \
        --snapshot check --report-dir "/tmp/w4a16-gpus-$1" >"$OUT/run-gpus-$1.log" 2>&1
      echo "field --gpus $2 --jobs $3: rc=$? wall=$(( $(date +%s) - start ))s"
      tail -9 "$OUT/run-gpus-$1.log"
      cp "/tmp/w4a16-gpus-$1/report.json" "$OUT/report-gpus-$1.json" 2>/dev/null
    done
    python3 - "/tmp/w4a16-gpus-one/report.json" "/tmp/w4a16-gpus-all/report.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
wall = [r["timing"]["wall_s"] for r in (a, b)]
for r in (a, b):
    r.pop("timing", None)
print(f"reports minus timing identical: {a == b}; wall {wall[0]:.1f} s -> {wall[1]:.1f} s, speed-up {wall[0] / wall[1]:.2f}x")
PY
    ;;
  emulated|emulated:*)
    only=${step#emulated}; only=${only#:}
    for t in gfx1100 gfx1151 gfx1201; do
      [ -z "$only" ] || [ "$only" = "$t" ] || continue
      # shellcheck disable=SC2086
      run_suites "emu-$t" ${W4A16_EMU_SUITES:-smoke kernels checkpoints edges regressions field moe carrier} \
        -- --target "$t-emu"
    done ;;
  bench) stage/bin/w4a16 bench --json "$OUT/bench.json" | tee "$OUT/bench.md" ;;
  bench-moe) stage/bin/w4a16 bench --moe --json "$OUT/bench-moe.json" | tee "$OUT/bench-moe.md" ;;
  moe) run_suites moe moe ;;
  check-models)
    # `w4a16 check-model` on every committed checkpoint (and --strict on the GPTQ overflow ones);
    # the reports come back as one tarball.
    start=$(date +%s)
    OUT="$OUT" scripts/check-models.sh stage/bin/w4a16 | tee "$OUT/check-models.txt"
    echo "check-models rc=${PIPESTATUS[0]} wall=$(( $(date +%s) - start ))s"
    (cd "$OUT" && tar czf check-model.tgz check-model && rm -rf check-model) ;;
  perf)
    start=$(date +%s)
    mkdir -p "$OUT/perf"
    set -f  # W4A16_PERF_ARGS is split into flags, its globs are for --only
    # shellcheck disable=SC2086
    timeout "${W4A16_PERF_TIMEOUT:-570}" stage/bin/w4a16 perf --report-dir /tmp/w4a16-perf \
      ${W4A16_PERF_ARGS:-} >"$OUT/perf/perf.out" 2>"$OUT/perf/perf.log"
    rc=$?; set +f
    echo "perf rc=$rc wall=$(( $(date +%s) - start ))s"
    cp -r /tmp/w4a16-perf/. "$OUT/perf/" 2>/dev/null
    case " ${W4A16_PERF_ARGS:-} " in
      *" --update-goldens "*) cp perf/sm_90.json perf/sm_90.moved.md "$OUT/perf/" 2>/dev/null ;;
    esac
    cat "$OUT/perf/perf.out"; tail -3 "$OUT/perf/perf.log" ;;
  memory)
    W4A16_RUN_TIMEOUT="${W4A16_SANITIZE_TIMEOUT:-540}" \
      run_suites memory-memcheck smoke kernels moe carrier "${sanitize_args[@]}" --sanitize memcheck
    W4A16_RUN_TIMEOUT="${W4A16_SANITIZE_TIMEOUT:-540}" \
      run_suites memory-initcheck smoke "${sanitize_args[@]}" --sanitize initcheck ;;
  sanitize|sanitize:*)
    tool=${step#sanitize}; tool=${tool#:}
    for t in memcheck synccheck racecheck initcheck; do
      [ -z "$tool" ] || [ "$tool" = "$t" ] || continue
      case "$t" in
        memcheck) suites=(smoke kernels edges) ;;
        synccheck) suites=(smoke edges) ;;
        *) suites=(smoke) ;;
      esac
      W4A16_RUN_TIMEOUT="${W4A16_SANITIZE_TIMEOUT:-540}" \
        run_suites "sanitize-$t" "${suites[@]}" "${sanitize_args[@]}" --sanitize "$t"
    done ;;
  mutants)
    start=$(date +%s)
    set -f  # W4A16_MUTANTS_ARGS is split into flags, its globs are for --only
    # shellcheck disable=SC2086
    timeout "${W4A16_MUTANTS_TIMEOUT:-570}" stage/bin/w4a16 mutants --jobs "$jobs" \
      --out "$OUT/mutants-sm_90.md" --work-dir /tmp/w4a16-mutants ${W4A16_MUTANTS_ARGS:-} \
      >"$OUT/mutants.out" 2>"$OUT/mutants.log"
    rc=$?; set +f
    echo "mutants rc=$rc wall=$(( $(date +%s) - start ))s"
    grep -E "kill rate|^\| (the suites|the GPU job|(memcheck:)?(smoke|kernels|edges|moe)) " "$OUT/mutants-sm_90.md" 2>/dev/null \
      || tail -5 "$OUT/mutants.log" ;;
  *) echo "unknown step $step" >&2 ;;
  esac
done
# verdicts-<suite>@sm_90.snap, the sanitizer runs' verdicts-<suite>.sanitize-<tool>@sm_90.snap and
# the emulated targets' verdicts-<suite>@gfxNNNN-emu.snap
tar cf "$OUT/snapshots.tar" snapshots/verdicts-*@sm_90.snap* snapshots/verdicts-*-emu.snap* 2>/dev/null
