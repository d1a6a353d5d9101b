#!/usr/bin/env bash
# The counter gate's own check: the kernel sources with the mutant `skinny-extra-weight-pass`
# (kernels/mutants/skinny.toml, class `slowdown`: skinny reads its weights twice, the output is
# unchanged) counted on the ISA emulator by `w4a16 perf --target <gfx>` against the committed
# perf/<gfx>.counters.json. Every counted skinny case must come back `moved` on every target;
# prints, per target and case, the counters that moved (name, golden, now, delta).
#
#   scripts/perf-slowed-counters.sh [gfx...]     # default: gfx1100 gfx1151 gfx1201
#   W4A16_BIN (default target/release/w4a16), W4A16_PERF_FILTER (default: qwen3-8b at M = 1)
# Exit: 0 every skinny case flagged on every target, 1 one was not, 2 setup error.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${W4A16_BIN:-target/release/w4a16}
filter=${W4A16_PERF_FILTER:-field/qwen3-8b*/M=1/**}
[ $# -eq 0 ] && set -- gfx1100 gfx1151 gfx1201
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/hip" && cp -r kernels/hip/. "$dir/hip/" || exit 2
python3 - "$dir/hip" <<'PY' || exit 2
import sys, tomllib
cat = tomllib.load(open("kernels/mutants/skinny.toml", "rb"))
m = next(x for x in cat["mutant"] if x["id"] == "skinny-extra-weight-pass")
path = f"{sys.argv[1]}/{m['file']}"
src = open(path).read()
if src.count(m["pattern"]) != 1:
    sys.exit(f"perf-slowed-counters: the mutant's pattern occurs {src.count(m['pattern'])} times in {m['file']}")
open(path, "w").write(src.replace(m["pattern"], m["replacement"]))
PY
status=0
for gfx in "$@"; do
  out="$dir/report-$gfx"
  "$bin" perf --suite field --target "$gfx" --kernel-sources "$dir/hip" --filter "$filter" \
    --report-dir "$out" > "$dir/$gfx.log" 2>&1
  rc=$?
  echo "## $gfx (w4a16 perf exit $rc)"
  if [ ! -f "$out/counters.json" ]; then
    tail -n 5 "$dir/$gfx.log"
    status=2
    continue
  fi
  python3 - "$out/counters.json" <<'PY' || status=1
import json, sys
run = json.load(open(sys.argv[1]))
missed = 0
for o in run["outcomes"]:
    j = o["candidate_judgement"]
    label = o["candidate"]["kernel"]
    key = o["key"]
    name = f'{key["provider"]}/{key["shape"]}/M={key["m"]}'
    if j["judgement"] != "moved":
        print(f"- {name} {label}: {j['judgement']}")
        if label.startswith("skinny:"):
            missed += 1
        continue
    moved = ", ".join(f'{m["counter"]} {m["golden"]}→{m["now"]} ({m["now"] - m["golden"]:+})' for m in j["moves"])
    print(f"- {name} {label}: moved: {moved}")
print(f"{len(run['outcomes'])} counted, {len(run['left_out'])} left out by the MAC budget; skinny cases not flagged: {missed}")
sys.exit(1 if missed or not run["outcomes"] else 0)
PY
  [ $rc -eq 1 ] || status=1
done
exit $status
