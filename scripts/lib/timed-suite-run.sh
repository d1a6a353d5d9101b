# Sourced by the device batch scripts: `timed_run NAME SECONDS RUN-ARGS…` runs
# `w4a16 run --reference gpu` on every core but two into $keep/r-NAME, prints its wall time and
# checks line, what failed, and its cost per suite and per group. Needs $keep set.
export W4A16_CASES="$PWD/cases"
jobs=$(( $(nproc) - 2 ))
w=stage/bin/w4a16
timed_run() {
  local name=$1 limit=$2; shift 2
  local start; start=$(date +%s)
  mkdir -p "$keep"
  timeout "$limit" $w run --reference gpu --jobs "$jobs" --report-dir "$keep/r-$name" "$@" >"$keep/$name.out" 2>&1
  echo "$name rc=$? wall=$(( $(date +%s) - start ))s $(grep -E 'checks:' "$keep/$name.out" | tail -1)"
  grep -iE 'FAILED [^0]|[1-9][0-9]* faults|differ' "$keep/$name.out" | head -5
  sed -n '/Cost per suite/,/<\/details>/p' "$keep/r-$name/summary.md" | grep '^|' | cut -c1-200
  sed -n '/Cost per group/,/<\/details>/p' "$keep/r-$name/summary.md" | grep '^|' | tail -n +3 | cut -c1-200
}
