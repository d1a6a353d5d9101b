#!/usr/bin/env bash
# `w4a16 check-model` on every committed checkpoint fixture (cases/checkpoints/*/), each with its
# reports under $OUT/check-model/<name>/ (or target/w4a16-model/<name>/), and the GPTQ v1
# overflow fixtures once more under --strict, where they must be refused. Prints one line per
# run and exits non-zero when a fixture's result is not the expected one.
#
#   scripts/check-models.sh [W4A16_BIN] [extra check-model args...]
set -u -o pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/release/w4a16}"; shift || true
out="${OUT:-target}/check-model"
mkdir -p "$out"
status=0
printf '%-58s %-8s %s\n' fixture expected result
for dir in cases/checkpoints/*/; do
  name=$(basename "$dir")
  for mode in plain strict; do
    args=()
    expect=0
    if [ "$mode" = strict ]; then
      case "$name" in *overflow*) args=(--strict); expect=1 ;; *) continue ;; esac
    fi
    log="$out/$name${args:+-strict}.log"
    "$bin" check-model "$dir" "${args[@]}" --report-dir "$out/$name${args:+-strict}" "$@" >"$log" 2>&1
    rc=$?
    result=$(grep -m1 '^Result:' "$log" | cut -c1-60)
    mark=ok; [ "$rc" -eq "$expect" ] || { mark="UNEXPECTED (exit $rc)"; status=1; }
    printf '%-58s %-8s %s %s\n' "$name${args:+ --strict}" "exit $expect" "$mark" "$result"
  done
done
exit $status
