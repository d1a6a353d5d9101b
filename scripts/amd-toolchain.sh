#!/usr/bin/env bash
# Installs the AMD device-code toolchain the code-object tests use (Debian 12 packages; see
# ARCHITECTURE.md, "Where things run"): clang-19 + lld-19 compile HIP to gfx code objects, llvm-19 gives
# llvm-objdump-19, libamdhip64-dev the HIP headers (and libamdhip64 for `--features rocm`),
# rocm-device-libs the device bitcode. Skipped when everything is already there.
#
# `cargo build --features rocm` against Debian's libamdhip64 also needs HIP_PATH=/usr (hip-sys
# looks for $HIP_PATH/include/hip/hip_runtime_api.h, defaulting to /opt/rocm).
set -euo pipefail

have_all() {
  command -v clang++-19 >/dev/null && command -v ld.lld-19 >/dev/null &&
    command -v llvm-objdump-19 >/dev/null && [ -f /usr/include/hip/hip_runtime.h ] &&
    [ -f /usr/lib/x86_64-linux-gnu/amdgcn/bitcode/ockl.bc ] &&
    [ -e /usr/lib/x86_64-linux-gnu/libamdhip64.so ]
}

if have_all; then
  echo "amd-toolchain: already installed ($(clang++-19 --version | head -n1))"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends clang-19 lld-19 llvm-19 libamdhip64-dev rocm-device-libs

have_all || { echo "amd-toolchain: packages installed but a tool is still missing" >&2; exit 1; }
echo "amd-toolchain: $(clang++-19 --version | head -n1)"
