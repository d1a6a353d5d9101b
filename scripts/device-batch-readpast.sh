#!/usr/bin/env bash
# One device call (scripts/device-run.sh gpu bash scripts/device-batch-readpast.sh): the read-past
# mutants of the dense kernels with smoke as the suites and the default GPU job's memcheck share
# (smoke, kernels, moe, carrier), then moe_align's over the moe suite and its memcheck share. At most
# 8 files land in $OUT (the device's limit).
set -uo pipefail
: "${OUT:?}"
export W4A16_CASES="$PWD/cases"
jobs=$(( $(nproc) - 2 ))
w=stage/bin/w4a16
only=()
for id in skinny-scale-rows-past-n fused-x-rows-past-m tile-meta-prefetch-past-k carrier-rows-past-n \
          dequant-mask-at-store fallback-x-prefetch; do only+=(--only "readpast-$id"); done
start=$(date +%s)
timeout 390 $w mutants --suite smoke "${only[@]}" --sanitize memcheck --jobs "$jobs" \
  --out "$OUT/mutants-readpast-sm_90.md" --work-dir /tmp/mut-rp >/tmp/rp.out 2>"$OUT/mutants-readpast.log"
echo "readpast mutants rc=$? wall=$(( $(date +%s) - start ))s"
grep -E "kill rate|^\| (the |smoke|memcheck)" "$OUT/mutants-readpast-sm_90.md"
start=$(date +%s)
timeout 180 $w mutants --suite moe --only 'readpast-moe-align*' --sanitize memcheck --sanitize-suite moe \
  --jobs "$jobs" --out "$OUT/mutants-readpast-moe-align-sm_90.md" --work-dir /tmp/mut-rpa >/tmp/rpa.out \
  2>"$OUT/mutants-readpast-moe-align.log"
echo "readpast moe_align rc=$? wall=$(( $(date +%s) - start ))s"
grep -E "kill rate|^\| (the |moe|memcheck)" "$OUT/mutants-readpast-moe-align-sm_90.md"
