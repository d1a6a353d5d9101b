#!/usr/bin/env bash
# Records sm_90 perf goldens for one batch of field cases on the H200 (`w4a16 perf
# --update-goldens`, docs/perf.md): the field is longer than one device call, so its goldens go in
# batches, each a --filter; the entries of other keys are kept. The updated perf/sm_90.json and
# perf/sm_90.moved.md come back under $OUT/perf/ (copy them into perf/ and commit with the batch).
#
# Here (Rust):   scripts/device-run.sh stage
# On the H200:   scripts/device-run.sh gpu bash scripts/perf-goldens-h200.sh 'field/gemma*/**'
#                (device tool: carry ["stage"]; perf/sm_90.json of the working tree is the start)
#
# Environment:
#   W4A16_GOLDEN_TIMEOUT  seconds (default 300); a batch the timeout stops writes nothing
#   W4A16_BIN             the CLI (default stage/bin/w4a16)
set -uo pipefail
cd "$(dirname "$0")/.."
filter="${1:?usage: perf-goldens-h200.sh CASE-GLOB}"
bin="${W4A16_BIN:-stage/bin/w4a16}"
dest="${OUT:-.}/perf"
work=/tmp/w4a16-goldens
mkdir -p "$dest"
rm -rf "$work" && mkdir -p "$work"
cp perf/sm_90.json "$work/"
start=$(date +%s)
set -f
timeout "${W4A16_GOLDEN_TIMEOUT:-300}" "$bin" perf --suite field --filter "$filter" \
  --goldens "$work" --update-goldens --report-dir "$work/report" \
  >"$dest/goldens.out" 2>"$dest/goldens.log"
rc=$?
set +f
echo "perf --update-goldens $filter rc=$rc wall=$(( $(date +%s) - start ))s"
cp "$work"/sm_90.json "$work"/sm_90.moved.md "$dest/" 2>/dev/null
python3 -c "import json; print(len(json.load(open('$dest/sm_90.json'))['entries']), 'golden entries')"
tail -3 "$dest/goldens.out"
exit "$rc"
