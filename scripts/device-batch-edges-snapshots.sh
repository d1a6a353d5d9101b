#!/usr/bin/env bash
# One device call (scripts/device-run.sh gpu bash scripts/device-batch-edges-snapshots.sh PART):
# records the edges suite's verdict snapshots after cases were added to it, and brings the .snap
# files back as $OUT/edges-snapshots-PART.tar.gz (the device tool returns no file named with `@`).
#   PART=sm_90 (default): sm_90 and its memcheck snapshot;
#   PART=emu:             the three emulated gfx targets.
# Each run's one-line summary is printed.
set -uo pipefail
: "${OUT:?}"
export W4A16_CASES="$PWD/cases"
jobs=$(( $(nproc) - 2 ))
w=stage/bin/w4a16
record() { # name, then run args
  local name=$1; shift
  local start; start=$(date +%s)
  timeout 300 $w run --suite edges --jobs "$jobs" --report-dir "/tmp/r-$name" --snapshot update "$@" \
    >"/tmp/$name.out" 2>&1
  echo "$name rc=$? wall=$(( $(date +%s) - start ))s $(grep -E 'checks:' "/tmp/$name.out" | tail -1)"
}
case ${1:-sm_90} in
sm_90)
  record sm_90 --target sm_90
  record memcheck --target sm_90 --sanitize memcheck --case-timeout 600
  tar czf "$OUT/edges-snapshots-sm_90.tar.gz" snapshots/verdicts-edges@sm_90.snap \
    snapshots/verdicts-edges.sanitize-memcheck@sm_90.snap ;;
emu)
  for t in gfx1100-emu gfx1151-emu gfx1201-emu; do record "$t" --target "$t"; done
  tar czf "$OUT/edges-snapshots-emu.tar.gz" snapshots/verdicts-edges@gfx1*-emu.snap ;;
esac
tail -n 5 /tmp/*.out > "$OUT/edges-runs.log"
