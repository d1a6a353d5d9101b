#!/usr/bin/env bash
# NVRTC for the sm_90 compile checks, without a CUDA toolkit: installs the PyPI wheels
# nvidia-cuda-nvrtc and nvidia-cuda-runtime (13.0 series) into <repo>/.nvrtc once, then exports
# LD_LIBRARY_PATH (libnvrtc.so.13, libnvrtc-builtins) and W4A16_CUDA_INCLUDE (cuda_fp16.h, ...).
#
#   source scripts/nvrtc-env.sh          # CI: install if needed, export into this shell
#   eval "$(scripts/nvrtc-env.sh)"       # same, from a subshell; the export lines go to stdout
#
# Idempotent: a second run finds the wheels and only prints the exports.

w4a16_nvrtc_env() {
    local root dir lib inc
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)" || return 1
    dir="$root/.nvrtc"
    lib="$dir/nvidia/cu13/lib"
    inc="$dir/nvidia/cu13/include"
    if [ ! -f "$lib/libnvrtc.so.13" ] || [ ! -f "$inc/cuda_fp16.h" ]; then
        echo "nvrtc-env: installing nvidia-cuda-nvrtc and nvidia-cuda-runtime 13.0.* into $dir" >&2
        python3 -m pip install --quiet --disable-pip-version-check --target "$dir" \
            "nvidia-cuda-nvrtc==13.0.*" "nvidia-cuda-runtime==13.0.*" >&2 || return 1
    fi
    if [ ! -f "$lib/libnvrtc.so.13" ] || [ ! -f "$inc/cuda_fp16.h" ]; then
        echo "nvrtc-env: the wheels did not provide $lib/libnvrtc.so.13 and $inc/cuda_fp16.h" >&2
        return 1
    fi
    case ":${LD_LIBRARY_PATH:-}:" in
        *":$lib:"*) ;;
        *) LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
    esac
    export LD_LIBRARY_PATH
    export W4A16_CUDA_INCLUDE="$inc"
    echo "export LD_LIBRARY_PATH=\"$LD_LIBRARY_PATH\""
    echo "export W4A16_CUDA_INCLUDE=\"$inc\""
}

w4a16_nvrtc_env
