#!/usr/bin/env bash
# check-model at model scale on the H200 (docs/check-model.md#at-model-scale): writes a
# Llama-3-70B-shaped synthetic model (`w4a16 make-synthetic-model --shape llama-70b`) into /tmp
# and checks it with `w4a16 check-model` (every GPU check on the H200), printing the wall time
# and peak memory (RSS, from /usr/bin/time -v) of both steps. Logs go under $OUT/check-model-70b/.
#
# Here (Rust):   scripts/device-run.sh stage
# On the H200:   scripts/device-run.sh gpu bash scripts/check-model-70b-h200.sh [LAYERS]
#                (device tool: carry ["stage"], timeout 600)
#
# LAYERS (default 80) decoder layers of 424 MiB each: 80 are 33 GiB of /tmp (the machine has
# 64 GiB of disk). The model stays in /tmp while the machine is warm, and a call that finds it
# complete there (its index is written last) skips the generation: when generating 80 layers
# leaves too little of one call's 600 s for the check, a first call generates and a second
# checks. A check stopped by its timeout has written no report; check.log then has one line per
# decoder layer it finished, with its ETA for the rest.
#
# Environment:
#   W4A16_CHECK_TIMEOUT  seconds for check-model (default 540: the device tool stops a call at 600)
#   W4A16_GEN_TIMEOUT    seconds for the generation (default 540)
#   W4A16_MODEL_DIR      where the model goes (default /tmp/w4a16-llama-70b-<LAYERS>)
#   W4A16_CHECK_ARGS     more flags for check-model, e.g. "--m 1,256"
#   W4A16_BIN            the CLI (default stage/bin/w4a16)
set -uo pipefail
cd "$(dirname "$0")/.."
layers="${1:-80}"
case "$layers" in
  '' | *[!0-9]* | 0)
    echo "usage: $0 [LAYERS]: expected a number of decoder layers of 1 or more, got '$layers'" >&2
    exit 2
    ;;
esac
bin="${W4A16_BIN:-stage/bin/w4a16}"
model="${W4A16_MODEL_DIR:-/tmp/w4a16-llama-70b-$layers}"
dest="${OUT:-.}/check-model-70b"
mkdir -p "$dest"

# timed NAME CMD...: CMD under /usr/bin/time -v, its output in $dest/NAME.log and its times in
# $dest/NAME.time (the device tool brings back 8 files: these 4 and the 3 reports); prints its
# exit status, wall time and peak RSS.
timed() {
  local name=$1
  shift
  /usr/bin/time -v -o "$dest/$name.time" "$@" >"$dest/$name.log" 2>&1
  local rc=$?
  local wall rss
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$dest/$name.time")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$dest/$name.time")
  echo "$name: rc=$rc wall=$wall peak_rss=$((${rss:-0} / 1024)) MiB"
  return "$rc"
}

if [ -f "$model/model.safetensors.index.json" ]; then
  echo "reusing $model"
else
  rm -rf "$model"
  df -h /tmp | tail -1
  if ! timed generate timeout "${W4A16_GEN_TIMEOUT:-540}" \
    "$bin" make-synthetic-model "$model" --shape llama-70b --layers "$layers"; then
    tail -5 "$dest/generate.log"
    echo "generation did not finish: removing $model (try fewer layers: $0 LAYERS)" >&2
    rm -rf "$model"
    exit 1
  fi
  tail -1 "$dest/generate.log"
fi
du -sh "$model"
# shellcheck disable=SC2086
timed check timeout "${W4A16_CHECK_TIMEOUT:-540}" \
  "$bin" check-model "$model" --report-dir "$dest/report" ${W4A16_CHECK_ARGS:-}
rc=$?
if [ "$rc" = 124 ]; then
  echo "check-model stopped by the timeout; decoder layers finished:"
  grep -c ': done' "$dest/check.log"
  tail -3 "$dest/check.log"
fi
# The summary's header, result and time line.
grep -E '^(# w4a16 check-model|Result:)' "$dest/check.log"
grep -A2 '^## Time' "$dest/check.log"
exit "$rc"
