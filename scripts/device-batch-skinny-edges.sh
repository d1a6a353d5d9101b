#!/usr/bin/env bash
# One device call (scripts/device-run.sh gpu bash scripts/device-batch-skinny-edges.sh [PART]):
# the kernels and edges suites after skinny's edges gained ragged scale edges and an offset X.
#   PART=sm_90 (default): the suites on sm_90, their memcheck share, and the skinny read-past
#                         mutants under the GPU job's memcheck share;
#   PART=emu:             the suites on the three emulated gfx targets.
# Reports come back gzipped (at most 8 files land in $OUT, the device's limit).
set -uo pipefail
: "${OUT:?}"
export W4A16_CASES="$PWD/cases"
jobs=$(( $(nproc) - 2 ))
w=stage/bin/w4a16
part=${1:-sm_90}
suites=(--suite kernels --suite edges)
record() { # name, then run args
  local name=$1; shift
  local start; start=$(date +%s)
  timeout 400 $w run "${suites[@]}" --jobs "$jobs" --report-dir "/tmp/r-$name" "$@" >"/tmp/$name.out" 2>&1
  echo "$name rc=$? wall=$(( $(date +%s) - start ))s $(grep -E 'checks:' "/tmp/$name.out" | tail -1)"
  gzip -c "/tmp/r-$name/report.json" >"$OUT/report-$name.json.gz"
}
case $part in
sm_90)
  record sm_90 --target sm_90
  record memcheck --target sm_90 --sanitize memcheck --case-timeout 600
  start=$(date +%s)
  timeout 300 $w mutants --suite smoke --only skinny-row-h-valid-off-by-one --only skinny-x-staging-past-k \
    --sanitize memcheck --sanitize-suite kernels --jobs "$jobs" --out "$OUT/mutants-skinny-oob-sm_90.md" \
    --work-dir /tmp/mut >/tmp/mut.out 2>"$OUT/mutants.log"
  echo "mutants rc=$? wall=$(( $(date +%s) - start ))s"
  grep -E "kill rate|^\| " "$OUT/mutants-skinny-oob-sm_90.md" | head -12 ;;
emu)
  for t in gfx1100-emu gfx1151-emu gfx1201-emu; do record "$t" --target "$t"; done ;;
esac
