#!/usr/bin/env bash
# One device call in phases, each checking the time left (the device tool stops a call at 600 s
# and a machine may be lent for one call only): run it as
#   scripts/device-run.sh stage                                    # here
#   PHASES="checks other regret goldens" BUDGET=575 bash scripts/device-call.sh   # there
# (device tool: carry ["stage"]).
#
# Phases:
#   checks   kernels, then smoke + edges + checkpoints + selection + regressions, --snapshot check
#   other    other-shapes with --snapshot check (14 workers on an H200; elsewhere only with
#            FORCE_OTHER=1, at 8 workers: an 80 GB card ran out of memory at 14; OS_JOBS sets
#            another count), GPU sampled
#   regret   scripts/perf-regret-h200.sh in the time left, continuing the last call's report on a
#            warm machine (or stage/regret-resume.json)
#   goldens  scripts/perf-goldens-h200.sh in the time left (--missing-goldens --stop-after),
#            continuing the last call's goldens on a warm machine (or stage/goldens-start.json);
#            perf/sm_90.json of another card is set aside and the field recorded afresh
# Reports land under $OUT (bench/, perf/, other-shapes-*).
set -uo pipefail
cd "$(dirname "$0")/.."
PHASES="${PHASES:-checks}"
t0=$(date +%s)
budget=${BUDGET:-570}
left() { echo $(( budget - ($(date +%s) - t0) )); }
for packed in stage/bin/*.xz stage/tests/*.xz; do [ -f "$packed" ] && xz -d -f "$packed"; done
chmod +x stage/bin/*
export W4A16_CASES="$PWD/cases"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "device: $gpu; phases: $PHASES"
keep=/tmp/keep; mkdir -p "$keep" "$OUT"
source scripts/lib/timed-suite-run.sh
case "$gpu" in *H200*) os_jobs=14 ;; *) os_jobs=8 ;; esac
os_jobs=${OS_JOBS:-$os_jobs}
for phase in $PHASES; do
  echo "== $phase ($(left) s left)"
  case $phase in
  checks)
    timed_run kernels 90 --suite kernels --snapshot check
    timed_run rest 120 --suite smoke --suite edges --suite checkpoints --suite selection --suite regressions --snapshot check
    ;;
  other)
    case "$gpu" in *H200*) ;; *) [ -n "${FORCE_OTHER:-}" ] || { echo "other-shapes: not an H200, skipped"; continue; } ;; esac
    jobs=$os_jobs
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -lms 1000 > "$keep/gpu.csv" &
    smi=$!
    timed_run other-shapes 200 --suite other-shapes --snapshot check
    kill $smi
    awk -F', ' '{gsub(/ %/,"",$2); gsub(/ MiB/,"",$3); s+=$2; n++; if ($3>m) m=$3} END {printf "mean util %.1f %%, peak memory %d MiB, %d samples\n", s/n, m, n}' "$keep/gpu.csv"
    cp "$keep/r-other-shapes/report.json" "$OUT/other-shapes-report.json"
    cp "$keep/r-other-shapes/summary.md" "$OUT/other-shapes-summary.md"
    cp "$keep/other-shapes.out" "$keep/gpu.csv" "$OUT/" 2>/dev/null
    ;;
  regret)
    l=$(left)
    if [ "$l" -gt 150 ]; then
      resume=""; [ -f stage/regret-resume.json ] && resume=stage/regret-resume.json
      [ -f /tmp/regret-last.json ] && resume=/tmp/regret-last.json
      W4A16_REGRET_RESUME=$resume W4A16_REGRET_STOP_AFTER=$(( l - ${REGRET_TAIL:-80} )) \
        W4A16_REGRET_TIMEOUT=$(( l - 10 )) bash scripts/perf-regret-h200.sh | head -12
      grep -E "continuing|stop-after|timed" "$OUT/bench/regret-sm_90.log" | tail -3
      cp "$OUT/bench/regret-sm_90.json" /tmp/regret-last.json 2>/dev/null
    fi
    ;;
  goldens)
    l=$(left)
    if [ "$l" -gt 120 ]; then
      if [ -f /tmp/goldens-last.json ]; then cp /tmp/goldens-last.json perf/sm_90.json
      elif [ -f stage/goldens-start.json ]; then cp stage/goldens-start.json perf/sm_90.json
      fi
      # The committed goldens continue only on the card that recorded them; else afresh.
      python3 -c "import json,sys; sys.exit(0 if '$gpu' in json.load(open('perf/sm_90.json'))['device'] else 1)" \
        || { echo "goldens: perf/sm_90.json is another card's; recording afresh"; rm -f perf/sm_90.json; }
      W4A16_GOLDEN_STOP_AFTER=$(( l - ${GOLDEN_TAIL:-60} )) W4A16_GOLDEN_TIMEOUT=$(( l - 10 )) \
        bash scripts/perf-goldens-h200.sh ${GOLDEN_FILTER:-}
      cp "$OUT/perf/sm_90.json" /tmp/goldens-last.json 2>/dev/null
      tail -4 "$OUT/perf/goldens.log"
    fi
    ;;
  esac
done
echo "== done, $(left) s left of $budget"
