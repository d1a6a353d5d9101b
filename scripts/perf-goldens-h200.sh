#!/usr/bin/env bash
# Records sm_90 perf goldens on the H200 (`w4a16 perf --update-goldens`, docs/perf.md): the
# field is longer than one device call, so each call times only the cases without a golden
# (`--missing-goldens`) and starts no new case after W4A16_GOLDEN_STOP_AFTER seconds
# (`--stop-after`), recording what it timed and keeping every other entry. Run it again (with the
# last call's perf/sm_90.json in perf/) until it says nothing is left. The updated perf/sm_90.json
# and perf/sm_90.moved.md come back under $OUT/perf/ (copy them into perf/ and commit).
#
# Here (Rust):   scripts/device-run.sh stage
# On the H200:   scripts/device-run.sh gpu bash scripts/perf-goldens-h200.sh ['field/gemma*/**']
#                (device tool: carry ["stage"]; perf/sm_90.json of the working tree is the start)
#
# A filter (case-id glob; default the whole field) narrows a call. A goldens file recorded on
# another device is refused before anything is timed: move it aside to record the field afresh.
#
# Environment:
#   W4A16_GOLDEN_STOP_AFTER  seconds before no new case starts (default 480)
#   W4A16_GOLDEN_TIMEOUT     seconds before the call is killed, losing its batch (default 570)
#   W4A16_BIN                the CLI (default stage/bin/w4a16)
set -uo pipefail
cd "$(dirname "$0")/.."
filter="${1:-field/**}"
bin="${W4A16_BIN:-stage/bin/w4a16}"
dest="${OUT:-.}/perf"
work=/tmp/w4a16-goldens
mkdir -p "$dest"
rm -rf "$work" && mkdir -p "$work"
[ -f perf/sm_90.json ] && cp perf/sm_90.json "$work/"
start=$(date +%s)
set -f
timeout "${W4A16_GOLDEN_TIMEOUT:-570}" "$bin" perf --suite field --filter "$filter" \
  --goldens "$work" --update-goldens --missing-goldens \
  --stop-after "${W4A16_GOLDEN_STOP_AFTER:-480}" --report-dir "$work/report" \
  >"$dest/goldens.out" 2>"$dest/goldens.log"
rc=$?
set +f
echo "perf --update-goldens --missing-goldens $filter rc=$rc wall=$(( $(date +%s) - start ))s"
grep -E "missing-goldens:|stop-after reached" "$dest/goldens.log"
cp "$work"/sm_90.json "$work"/sm_90.moved.md "$dest/" 2>/dev/null
python3 -c "import json; print(len(json.load(open('$dest/sm_90.json'))['entries']), 'golden entries')"
tail -3 "$dest/goldens.out"
exit "$rc"
