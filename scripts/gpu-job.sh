#!/usr/bin/env bash
# What runs on the GPU machine (via scripts/device-run.sh gpu): the GPU smoke tests, the
# differential suites with their sm_90 verdict snapshots, the field matrix, and the benchmark.
# Usage: scripts/gpu-job.sh [suites...]   (default: smoke kernels checkpoints edges)
set -uo pipefail
: "${OUT:?}"
suites=("$@"); [ ${#suites[@]} -gt 0 ] || suites=(smoke kernels checkpoints edges)
args=(); for s in "${suites[@]}"; do args+=(--suite "$s"); done
jobs=$(( $(nproc) - 2 ))

if [ -x stage/tests/gpu_smoke ]; then
  timeout 120 stage/tests/gpu_smoke --test-threads=1 >"$OUT/gpu_smoke.log" 2>&1; echo "gpu_smoke rc=$?"
fi
start=$(date +%s)
timeout ${W4A16_RUN_TIMEOUT:-420} stage/bin/w4a16 run "${args[@]}" --snapshot update --jobs "$jobs" --report-dir /tmp/w4a16-report >"$OUT/run.log" 2>&1
echo "run rc=$? wall=$(( $(date +%s) - start ))s"
cp /tmp/w4a16-report/summary.md /tmp/w4a16-report/report.json "$OUT/" 2>/dev/null
tar cf "$OUT/snapshots.tar" snapshots/verdicts-*@sm_90.snap* 2>/dev/null
tail -5 "$OUT/run.log"
