#!/bin/bash
# Builds every kernel source for gfx1100/gfx1151/gfx1201 with and without -gline-tables-only
# (Debian clang-19 flavour, as kernels/src/amd/toolchain.rs does) and compares the .text bytes.
# Run in an empty scratch folder: it writes the code objects there.
set -e
BC=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode
HIP="$(cd "$(dirname "$0")/../kernels/hip" && pwd)"
declare -A ISA=([gfx1100]=1100 [gfx1151]=1151 [gfx1201]=1201)
for t in gfx1100 gfx1151 gfx1201; do
  v=${ISA[$t]}
  printf 'target triple = "amdgcn-amd-amdhsa"\n@__oclc_ISA_version = linkonce_odr protected local_unnamed_addr addrspace(4) constant i32 %s, align 4\n' $v > isa$v.ll
  clang-19 -c -emit-llvm -nogpulib --target=amdgcn-amd-amdhsa -x ir isa$v.ll -o isa$v.bc
  for src in skinny fused dequant fallback moe_align moe carrier; do
    f=$src; defs=""
    if [ $src = carrier ]; then f=fused; defs=-DW4_FUSED_CARRIER=1; fi
    for g in "" "-gline-tables-only"; do
      out=$t-$src${g:+-g}.co
      clang-19 -x hip -std=c++17 --cuda-device-only --no-gpu-bundle-output -O3 -fhip-kernel-arg-name --offload-arch=$t -I$HIP -nogpulib -I/usr/include \
        $(for b in ockl.bc oclc_abi_version_500.bc oclc_wavefrontsize64_off.bc oclc_daz_opt_off.bc oclc_finite_only_off.bc oclc_unsafe_math_off.bc oclc_correctly_rounded_sqrt_on.bc; do echo -Xclang -mlink-builtin-bitcode -Xclang $BC/$b; done) \
        -Xclang -mlink-builtin-bitcode -Xclang isa$v.bc $g $HIP/$f.hip $defs -o $out
    done
    llvm-objcopy-19 -O binary --only-section=.text $t-$src.co a.bin
    llvm-objcopy-19 -O binary --only-section=.text $t-$src-g.co b.bin
    if cmp -s a.bin b.bin; then echo "$t $src identical $(stat -c %s a.bin) B"; else echo "$t $src DIFFER"; fi
  done
done
