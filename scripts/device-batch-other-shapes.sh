#!/usr/bin/env bash
# One device call (scripts/device-run.sh gpu bash scripts/device-batch-other-shapes.sh): the
# on-request other-shapes suite against its snapshot and the field beside it, both with
# `--reference gpu` on every core but two, each run's cost per suite and per group printed last.
# Reports come back in $OUT/other-shapes-batch.tar.gz (the device tool returns no `@` names).
set -uo pipefail
: "${OUT:?}"
export W4A16_CASES="$PWD/cases"
jobs=$(( $(nproc) - 2 ))
w=stage/bin/w4a16
keep=/tmp/other-shapes-batch
mkdir -p "$keep"
run() { # name, seconds, then run args
  local name=$1 limit=$2; shift 2
  local start; start=$(date +%s)
  timeout "$limit" $w run --reference gpu --jobs "$jobs" --report-dir "$keep/r-$name" "$@" >"$keep/$name.out" 2>&1
  echo "$name rc=$? wall=$(( $(date +%s) - start ))s $(grep -E 'checks:' "$keep/$name.out" | tail -1)"
  grep -iE 'FAILED|FAULT|differ' "$keep/$name.out" | head -5
  sed -n '/Cost per group/,/<\/details>/p' "$keep/r-$name/summary.md" | grep '^|' | cut -c1-200
}
run other-shapes "${W4A16_OTHER_TIMEOUT:-240}" --suite other-shapes --snapshot check
run field 60 --suite field
cp snapshots/*other-shapes*.snap.new "$keep/" 2>/dev/null
tar czf "$OUT/other-shapes-batch.tar.gz" -C /tmp other-shapes-batch
