#!/usr/bin/env bash
# Build here, stage for the GPU machine, and (on the GPU machine) run.
#
#   scripts/device-run.sh stage            # here: release CLI + test binaries into stage/
#   scripts/device-run.sh gpu [ARGS...]    # there (repo root, $OUT set): run suites, snapshots, benches
#
# The GPU machine has no Rust toolchain: binaries built here with cudarc's dynamic loading run
# there unchanged. `stage/` is git-ignored and travels with the device tool's `carry`.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-stage}"; shift || true

case "$mode" in
stage)
  rm -rf stage && mkdir -p stage/tests stage/bin
  cargo build --release --bin w4a16
  cp target/release/w4a16 stage/bin/
  # Release test binaries of the root package (tests/*.rs) that touch the GPU.
  cargo test --release --no-run --message-format=json 2>/dev/null \
    | python3 -c '
import json, sys, shutil
for line in sys.stdin:
    try: m = json.loads(line)
    except Exception: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        name = m["target"]["name"]
        if name.startswith("gpu"):
            shutil.copy(m["executable"], "stage/tests/" + name)
            print("staged test", name)
'
  # Symbols off and xz on: the carry limit is 64 MiB for the whole working tree (the tracked
  # files alone are about 57 MB), and the stripped binaries are 26 MB; compressed, about 7.
  # `gpu` below unpacks them before it runs anything.
  strip stage/bin/* stage/tests/*
  xz -T0 -6 stage/bin/* stage/tests/*
  du -sh stage
  ;;
gpu)
  : "${OUT:?OUT must be set (device tool)}"
  for packed in stage/bin/*.xz stage/tests/*.xz; do
    [ -f "$packed" ] && xz -dkf "$packed" && chmod +x "${packed%.xz}"
  done
  export INSTA_WORKSPACE_ROOT="$PWD" W4A16_REQUIRE="${W4A16_REQUIRE:-gpu}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt" || true
  # Make NVRTC / cuBLAS from the toolkit visible to cudarc's dynamic loading.
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
  done
  export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
  "$@"
  ;;
*)
  echo "usage: $0 stage | gpu CMD..." >&2; exit 2 ;;
esac
