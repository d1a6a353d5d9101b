#!/usr/bin/env bash
# One device call (scripts/device-run.sh gpu bash scripts/device-batch-cost.sh): what a run costs
# per suite on the H200 (`--reference gpu`, every core but two as workers), and the regret under
# the prefill dequant option at two mid-M batch sizes.
#   1. moe against its committed snapshot (its experts are now made once per layer);
#   2. the on-request other-shapes suite, recording its first snapshot;
#   3. field, the baseline of cost per GFLOP checked;
#   4. perf --regret with the option enabled, field fp16 symmetric at M = 8 and M = 64.
# Everything comes back in $OUT/cost-batch.tar.gz (the device tool returns no file named with `@`).
set -uo pipefail
: "${OUT:?}"
keep=/tmp/cost-batch
. scripts/lib/timed-suite-run.sh
timed_run moe 110 --suite moe --snapshot check
timed_run other-shapes 230 --suite other-shapes --snapshot update
timed_run field 60 --suite field
cp snapshots/verdicts-other-shapes@sm_90.snap "$keep/" 2>/dev/null
for m in 8 64; do
  OUT="$keep/regret-m$m" W4A16_REGRET_FILTER="field/*/M=$m/f16/sym/**" W4A16_REGRET_TIMEOUT=70 \
    W4A16_REGRET_ARGS="--kernel-config.rdna_hybrid_w4a16_prefill_dequant enable" \
    bash scripts/perf-regret-h200.sh | grep -E "rc=|cases timed|regret"| head -4
done
tar czf "$OUT/cost-batch.tar.gz" -C /tmp cost-batch
