#!/usr/bin/env bash
# Selection regret on the H200 (`w4a16 perf --regret`, docs/perf.md#regret-mode): every legal
# path of each case timed (skinny, each fused tile of the sm_90 table, dequant+dense, fallback),
# the selected path's time over the best, the prefill dequant option's value, the peers beside
# them. Writes bench/regret-sm_90.md, .json and .svg (under $OUT when the device tool runs it,
# to be committed from there).
#
# Here (Rust):   scripts/device-run.sh stage
# On the H200:   scripts/device-run.sh gpu bash scripts/perf-regret-h200.sh
#                (device tool: carry ["stage"], timeout 600)
#
# The default is the whole field: 2,128 cases (every field shape at all 14 batch sizes, fp16 and
# bf16, symmetric and asymmetric; 5-6 paths each, 9 launches per path, the fallback timed up to
# 2^30 MACs). That is longer than one device call, so a call starts no new case after
# W4A16_REGRET_STOP_AFTER seconds, times the peers of what it timed and writes a partial
# report; the next call continues it (W4A16_REGRET_RESUME=<that regret-sm_90.json>). The report
# is rewritten after every case, so even a call the timeout stops keeps the cases it finished.
#
# Environment:
#   W4A16_REGRET_FILTER   case-id glob (default 'field/**', the whole field)
#   W4A16_REGRET_ARGS     more flags for `w4a16 perf --regret`, e.g.
#                         "--kernel-config.rdna_hybrid_w4a16_prefill_dequant enable" (the regret
#                         under the option; its value is reported either way)
#   W4A16_REGRET_TIMEOUT  seconds (default 560: the device tool stops a call at 600)
#   W4A16_REGRET_FALLBACK_MAX_MACS  the fallback is timed up to this M·N·K (default 2^30)
#   W4A16_REGRET_STOP_AFTER  start no new case after this many seconds (default 420), so that
#                         --peers and the report fit the call; the rest waits for a resume
#   W4A16_REGRET_RESUME   a regret-sm_90.json of an earlier call (same settings) to continue:
#                         its rows are kept and only the cases it lacks are timed, so the whole
#                         field's 2,128 cases go in several calls (carry the file in stage/)
#   W4A16_BIN             the CLI (default stage/bin/w4a16)
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${W4A16_BIN:-stage/bin/w4a16}"
filter="${W4A16_REGRET_FILTER:-field/**}"
dest="${OUT:-.}/bench"
work=/tmp/w4a16-regret
mkdir -p "$dest"
rm -rf "$work"
start=$(date +%s)
set -f  # the filter is a glob for --filter, not for the shell
# shellcheck disable=SC2086
timeout "${W4A16_REGRET_TIMEOUT:-560}" "$bin" perf --regret \
  --suite field --filter "$filter" --reps 9 --warmup 3 --peers --report-dir "$work" \
  --regret-fallback-max-macs "${W4A16_REGRET_FALLBACK_MAX_MACS:-1073741824}" \
  --regret-stop-after "${W4A16_REGRET_STOP_AFTER:-420}" \
  ${W4A16_REGRET_RESUME:+--regret-resume "$W4A16_REGRET_RESUME"} \
  ${W4A16_REGRET_ARGS:-} >"$dest/regret-sm_90.out" 2>"$dest/regret-sm_90.log"
rc=$?
set +f
echo "perf --regret rc=$rc wall=$(( $(date +%s) - start ))s"
if [ -f "$work/regret.json" ]; then
  cp "$work/regret.json" "$dest/regret-sm_90.json"
  cp "$work/regret.svg" "$dest/regret-sm_90.svg"
  # The markdown links its plot by the name it was written under.
  sed 's/(regret\.svg)/(regret-sm_90.svg)/' "$work/regret.md" >"$dest/regret-sm_90.md"
  head -c 4000 "$dest/regret-sm_90.md"
else
  echo "no report written; the log's tail:" >&2
  tail -20 "$dest/regret-sm_90.log" >&2
fi
cat "$dest/regret-sm_90.out"
exit "$rc"
