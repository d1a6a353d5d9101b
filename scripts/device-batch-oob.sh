#!/usr/bin/env bash
# One device call (scripts/device-run.sh gpu bash scripts/device-batch-oob.sh): the catalogue's
# older unused-oob-read mutants (those the suites let through) under the default GPU job's
# memcheck share. At most 8 files land in $OUT (the device's limit).
set -uo pipefail
: "${OUT:?}"
export W4A16_CASES="$PWD/cases"
jobs=$(( $(nproc) - 2 ))
only=()
for id in skinny-row-h-valid-off-by-one skinny-weights-past-k skinny-x-staging-past-k \
          fused-weight-rows-past-n fused-scale-row-past-n; do only+=(--only "$id"); done
start=$(date +%s)
timeout 420 stage/bin/w4a16 mutants --suite smoke "${only[@]}" --sanitize memcheck \
  --sanitize-suite smoke --sanitize-suite kernels --jobs "$jobs" --out "$OUT/mutants-oob-sm_90.md" \
  --work-dir /tmp/mut-oob >/tmp/oob.out 2>"$OUT/mutants-oob.log"
echo "oob mutants rc=$? wall=$(( $(date +%s) - start ))s"
grep -E "kill rate|^\| (the |smoke|memcheck|kernels)" "$OUT/mutants-oob-sm_90.md"
grep "^\[" "$OUT/mutants-oob.log"
