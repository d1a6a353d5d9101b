#!/usr/bin/env bash
# One device call (scripts/device-run.sh gpu bash scripts/device-batch-other-shapes.sh): the
# on-request other-shapes suite against its snapshot and the field beside it, both with
# `--reference gpu` on every core but two, each run's cost per suite and per group printed last.
# Reports come back in $OUT/other-shapes-batch.tar.gz (the device tool returns no `@` names).
set -uo pipefail
: "${OUT:?}"
keep=/tmp/other-shapes-batch
. scripts/lib/timed-suite-run.sh
timed_run other-shapes "${W4A16_OTHER_TIMEOUT:-240}" --suite other-shapes --snapshot check
timed_run field 60 --suite field
cp snapshots/*other-shapes*.snap.new "$keep/" 2>/dev/null
tar czf "$OUT/other-shapes-batch.tar.gz" -C /tmp other-shapes-batch
