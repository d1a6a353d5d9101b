#!/usr/bin/env bash
# Regenerate cases/checkpoints/ with the real producer libraries.
#
# Runs on the GPU machine (python 3.12, torch, transformers, safetensors, numpy already there; no
# network), from the repository root, with the wheels of what is missing in .whl/ (git-ignored;
# see cases/checkpoints/README.md for the list and how to download them):
#
#   device run, carry [".whl"]:  bash scripts/checkpoint-fixtures.sh
#
# The device sends back at most 8 files from $OUT, so the fixture tree comes back as one
# tarball: $OUT/checkpoints.tar.gz (unpack with `tar -xzf checkpoints.tar.gz -C cases/`), beside
# $OUT/checkpoint-fixtures.log.  Without $OUT (a local run) everything lands in ./checkpoints-out/.
set -u -o pipefail

OUTDIR=${OUT:-$PWD/checkpoints-out}
mkdir -p "$OUTDIR"
WORK=$(mktemp -d /tmp/ckpt-fixtures.XXXXXX)

if ! ls .whl/*.whl >/dev/null 2>&1; then
    echo "no wheels in .whl/: download them first (cases/checkpoints/README.md) and carry .whl" >&2
    exit 2
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || {
    echo "installing the wheels from .whl/ into /tmp/site failed" >&2
    exit 2
}
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1

echo "python: $(python3 --version 2>&1)"
python3 - <<'EOF'
import importlib.metadata as md
for n in ["torch", "transformers", "safetensors", "huggingface_hub", "numpy", "compressed-tensors",
          "pydantic", "pydantic_core", "loguru", "auto_gptq", "autoawq", "accelerate", "triton"]:
    try:
        v = md.version(n)
    except md.PackageNotFoundError:
        v = "not installed"
    print(f"version {n}: {v}")
try:
    import torch
    print("cuda:", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
except Exception as e:
    print("torch import failed:", e)
EOF

python3 scripts/checkpoint-fixtures.py --out "$WORK/checkpoints" "$@" 2>&1 | tee "$OUTDIR/checkpoint-fixtures.log"
rc=${PIPESTATUS[0]}

if [ -d "$WORK/checkpoints" ]; then
    tar -C "$WORK" -czf "$OUTDIR/checkpoints.tar.gz" checkpoints
    echo "wrote $OUTDIR/checkpoints.tar.gz ($(du -k "$OUTDIR/checkpoints.tar.gz" | cut -f1) KiB); unpack: tar -xzf checkpoints.tar.gz -C cases/"
    (cd "$WORK" && find checkpoints -type f -printf '%8s  %p\n' | sort -k2)
fi
exit "$rc"
