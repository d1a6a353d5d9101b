#!/usr/bin/env bash
# One device call (scripts/device-run.sh gpu bash scripts/device-launch-spans.sh): where a
# suite's device time goes, launch by launch (`W4A16_LAUNCH_SPANS`): one worker on four cases
# of one large layer, then every core but two on the strided-X cases of other-shapes, each
# summed by part (staging, enqueue, kernel, download, guard inspection).
set -uo pipefail
export W4A16_CASES="$PWD/cases" W4A16_LAUNCH_SPANS=1
w=stage/bin/w4a16
jobs=$(( $(nproc) - 2 ))
agg() { awk '/launch-spans/ { for (i=4;i<=NF;i+=2) { k=$i; v=$(i+1); gsub(",","",v); s[k]+=v } n++ } END { printf "launches %d:", n; for (k in s) printf " %s %.0f ms", k, s[k]; print "" }' "$1"; }
timeout 120 $w run --reference gpu --jobs 1 --suite other-shapes --filter "${1:-other-shapes/gemma-7b.gate_up_proj/M=33/**/x-odd-stride}" --report-dir /tmp/r1 > /tmp/one.out 2>&1
echo "one worker: rc=$?"; grep -E "wall time|device \(" /tmp/one.out; agg /tmp/one.out
grep launch-spans /tmp/one.out | grep dequant | head -4
timeout 200 $w run --reference gpu --jobs "$jobs" --suite other-shapes --filter "${2:-other-shapes/*/M=33/**/x-odd-stride}" --report-dir /tmp/r2 > /tmp/many.out 2>&1
echo "$jobs workers: rc=$?"; grep -E "wall time|device \(|verification" /tmp/many.out; agg /tmp/many.out
