#!/usr/bin/env bash
# The perf gate's own check: a copy of the kernel sources whose `skinny` makes one extra pass over
# its weight rows, timed by `w4a16 perf` against the committed goldens. Every skinny case of the
# filter must come back as an out-of-band regression labelled `skinny:...` (exit status 1).
#
#   scripts/perf-slowed.sh [w4a16 perf args...]      # default: --filter 'field/qwen3-8b*/M=1/**'
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${W4A16_BIN:-stage/bin/w4a16}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp -r kernels/hip/. "$dir/" || exit 2
python3 - "$dir/skinny.hip" <<'PY'
import sys
path = sys.argv[1]
src = open(path).read()
anchor = ("W4_DEV void staged_warp(const SkArgs& a, const SkLane& L, const SkStages& S, const u16* xs, float* red) {\n"
          "    float acc[4] = {0.f, 0.f, 0.f, 0.f};\n")
if src.count(anchor) != 1:
    sys.exit(f"perf-slowed: the anchor in {path} moved (found {src.count(anchor)} times); update this script")
extra = """    // DELIBERATELY SLOWED (perf gate check): one extra pass over this warp's weight rows.
    u32 extra = 0;
    for (int sp = L.ks; sp * SK_SPAN < a.k; sp += L.nks) {
        const u32x4 v = load_w16(L.wg, L.vg, sp * SK_SPAN + 32 * L.t, a.k);
        const u32x4 u = load_w16(L.wh, L.vh, sp * SK_SPAN + 32 * L.t, a.k);
        extra ^= v.x ^ v.y ^ v.z ^ v.w ^ u.x ^ u.y ^ u.z ^ u.w;
    }
    if (extra == 0x9e3779b9u) acc[0] += 1e-30f;
"""
open(path, "w").write(src.replace(anchor, anchor + extra))
PY
[ $? -eq 0 ] || exit 2
if [ $# -eq 0 ]; then set -- --filter 'field/qwen3-8b*/M=1/**'; fi
"$bin" perf --suite field --kernel-sources "$dir" "$@"
