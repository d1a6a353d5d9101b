#!/usr/bin/env bash
# One device call (scripts/device-run.sh gpu bash scripts/device-batch-moe-mutants.sh): the
# initcheck diagnosis, the MoE mutants on sm_90 over the moe suite, and the moe read-past mutants
# with the moe suite's memcheck share. At most 8 files land in $OUT (the device's limit).
set -uo pipefail
: "${OUT:?}"
export W4A16_CASES="$PWD/cases"
jobs=$(( $(nproc) - 2 ))
w=stage/bin/w4a16
{
  echo "== initcheck over smoke, reference on the CPU"
  timeout 120 $w run --suite smoke --sanitize initcheck --reference cpu --jobs "$jobs" \
    --case-timeout 600 --report-dir /tmp/ic-cpu 2>&1 | grep -E "checks:|wall time"
  python3 - <<'PY'
import json, collections
r = json.load(open("/tmp/ic-cpu/report.json"))
bad = [v for v in r["verdicts"] if v["outcome"] == "fail"]
print("initcheck --reference cpu failures:", len(bad))
for v in bad[:2]: print(v["case_id"], v["detail"][:400])
PY
} >"$OUT/initcheck.txt" 2>&1
cat "$OUT/initcheck.txt"
start=$(date +%s)
timeout 330 $w mutants --suite moe --only 'moe-*' --jobs "$jobs" --out "$OUT/mutants-moe-sm_90.md" \
  --work-dir /tmp/mut-moe >/tmp/mut-moe.out 2>"$OUT/mutants-moe.log"
echo "moe mutants rc=$? wall=$(( $(date +%s) - start ))s"; grep -E "kill rate|^\| moe " "$OUT/mutants-moe-sm_90.md"
start=$(date +%s)
timeout 220 $w mutants --suite moe --only 'readpast-moe*' --sanitize memcheck --sanitize-suite moe --jobs "$jobs" \
  --out "$OUT/mutants-readpast-moe-sm_90.md" --work-dir /tmp/mut-rp >/tmp/mut-rp.out 2>"$OUT/mutants-readpast-moe.log"
echo "readpast-moe mutants rc=$? wall=$(( $(date +%s) - start ))s"; grep -E "kill rate|^\| " "$OUT/mutants-readpast-moe-sm_90.md" | head -12
