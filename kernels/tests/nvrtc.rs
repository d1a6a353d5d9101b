//! Every kernel compiles for sm_90 through NVRTC, and the PTX entry points carry exactly the
//! parameter lists declared in Rust. Without NVRTC this is a loud skip; `W4A16_REQUIRE=nvrtc`
//! makes it a failure.

use w4a16_kernels::nvrtc::{self, NvrtcError};
use w4a16_kernels::{set, source};

const ARCH: &str = "sm_90";

mod common;
use common::skip_or_fail;

#[test]
fn every_kernel_compiles_for_sm90_and_matches_its_declared_abi() {
    for kernel in source::WITH_SOURCE {
        let decl = set::decl(kernel);
        let ptx = match nvrtc::compile_ptx(kernel, ARCH) {
            Ok(p) => p,
            Err(NvrtcError::Unavailable(u)) => return skip_or_fail(&u.reason),
            Err(e) => panic!("{e}"),
        };
        assert_declared_abi(&kernel.to_string(), decl, &ptx);
    }
}

/// The module's entry points match `decl` (ABI), and every .entry in it is a declared entry
/// point (nothing extra, nothing renamed); `what` names the module in failures.
fn assert_declared_abi(what: &str, decl: &w4a16_kernels::KernelDecl, ptx: &str) {
    if let Err(e) = nvrtc::check_decl(ptx, decl) {
        panic!("{what}: {e}");
    }
    let declared: Vec<String> = w4a16_reference::ActDtype::ALL
        .into_iter()
        .flat_map(|d| decl.entries(d))
        .collect();
    for e in nvrtc::ptx_entries(ptx) {
        assert!(
            declared.contains(&e.name),
            "{what}: undeclared entry {}",
            e.name
        );
    }
}

#[test]
fn a_wrong_declaration_is_caught_on_real_ptx() {
    let ptx = match nvrtc::compile_ptx(w4a16_kernels::KernelId::Dequant, ARCH) {
        Ok(p) => p,
        Err(NvrtcError::Unavailable(u)) => return skip_or_fail(&u.reason),
        Err(e) => panic!("{e}"),
    };
    let entries = nvrtc::ptx_entries(&ptx);
    let mut wrong = set::DEQUANT_ARGS.to_vec();
    wrong.swap(2, 4); // a pointer where an int is
    assert!(nvrtc::check_entry(&entries, "w4a16_dequant_f16", &wrong).is_err());
    assert!(nvrtc::check_entry(&entries, "w4a16_dequant_f16", &set::GEMM_ARGS).is_err());
}

#[test]
fn the_mma_and_alu_skinny_engines_both_compile() {
    match nvrtc::compile_ptx_with(
        w4a16_kernels::KernelId::Skinny,
        ARCH,
        &["-DW4_SKINNY_MMA=0"],
    ) {
        Ok(ptx) => {
            assert!(
                !ptx.contains("mma.sync"),
                "the ALU engine must not use mma.sync"
            );
            nvrtc::check_decl(&ptx, &set::SKINNY).unwrap();
        }
        Err(NvrtcError::Unavailable(u)) => skip_or_fail(&u.reason),
        Err(e) => panic!("{e}"),
    }
}

/// Every kernel compiles for sm_90 in each emulated AMD target's configuration
/// (`emulation::nvrtc_options`, nothing else; at NVRTC's fastest level, which keeps the entry
/// points and the preprocessor's paths), with the declared entry points, and takes the AMD
/// code paths: no mma.sync (the ALU skinny engine, the emulated WMMA), no cp.async (synchronous
/// copies), no hardware bf16 conversion (software rounding, as on AMD).
#[test]
fn every_kernel_compiles_in_each_emulated_amd_configuration() {
    use w4a16_kernels::{Target, emulation};
    for target in Target::AMD_CODE_OBJECT_TARGETS {
        let options = emulation::nvrtc_options(target).unwrap();
        let options: Vec<&str> = options
            .iter()
            .map(String::as_str)
            .chain([nvrtc::FAST_COMPILE])
            .collect();
        for kernel in source::WITH_SOURCE {
            let decl = set::decl(kernel);
            let ptx = match nvrtc::compile_ptx_with(kernel, ARCH, &options) {
                Ok(p) => p,
                Err(NvrtcError::Unavailable(u)) => return skip_or_fail(&u.reason),
                Err(e) => panic!("{target} emulated: {e}"),
            };
            assert_declared_abi(&format!("{target} emulated, {kernel}"), decl, &ptx);
            for native in ["mma.sync", "cp.async", "ldmatrix", "cvt.rn.bf16", "bf16x2"] {
                assert!(
                    !ptx.contains(native),
                    "{target} emulated, {kernel}: the NVIDIA path `{native}` is compiled"
                );
            }
            if matches!(
                kernel,
                w4a16_kernels::KernelId::Fused | w4a16_kernels::KernelId::Moe
            ) {
                // The WMMA emulation gathers its operands with warp shuffles; only gfx11's
                // replication check votes across the wave.
                assert!(
                    ptx.contains("shfl.sync"),
                    "{target}: no shuffles in {kernel}"
                );
                assert_eq!(
                    ptx.contains("vote.sync.any"),
                    target.is_gfx11(),
                    "{target}: the gfx11 replication check"
                );
            }
        }
    }
}

/// Without the emulation macro, sm_90 still compiles the NVIDIA branches (mma.sync, the tile
/// main loop's cp.async in fused and moe).
#[test]
fn the_plain_sm90_build_keeps_the_nvidia_paths() {
    use w4a16_kernels::KernelId;
    for kernel in [KernelId::Fused, KernelId::Skinny, KernelId::Moe] {
        let ptx = match nvrtc::compile_ptx(kernel, ARCH) {
            Ok(p) => p,
            Err(NvrtcError::Unavailable(u)) => return skip_or_fail(&u.reason),
            Err(e) => panic!("{e}"),
        };
        assert!(ptx.contains("mma.sync"), "{kernel}: no mma.sync on sm_90");
        if kernel != KernelId::Skinny {
            assert!(ptx.contains("cp.async"), "{kernel}: no cp.async on sm_90");
        }
    }
}
