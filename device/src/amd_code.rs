//! Where an AMD backend's code objects come from: the kernel crate's clang build (cached), or
//! a prebuilt object carried to a machine without a compiler. Shared by the ROCm device and the
//! ISA emulator, so both run the same machine code.

use std::path::PathBuf;

use w4a16_kernels::amd::{self, AmdBuildError, Builder, KernelSource};
use w4a16_kernels::source::KernelSources;
use w4a16_kernels::{KernelDecl, Target};

use crate::DeviceFault;

/// Where prebuilt code objects of `target` are looked for on a machine without a compiler.
pub fn prebuilt_dir(target: Target) -> PathBuf {
    amd::default_cache_dir().join(target.name())
}

/// The code object holding `kernel` for `target`: built (or found current) in the
/// `w4a16_kernels::amd` cache when a toolchain is present, else a prebuilt one from the cache
/// directory (carried to a runner without a compiler). Sources from a folder
/// (`--kernel-sources`) are built into a cache of their own and never fall back to a prebuilt
/// object, which was built from other sources.
pub fn code_object_for(
    kernel: &KernelDecl,
    target: Target,
    sources: &KernelSources,
) -> Result<PathBuf, DeviceFault> {
    let file = kernel.source_file.ok_or_else(|| DeviceFault::Unsupported {
        what: format!("a kernel launch of {} (it has no source file)", kernel.id),
        device: format!("{target}"),
    })?;
    let source = KernelSource {
        name: kernel.id.name().to_string(),
        kernel: Some(kernel.id),
        path: sources.dir().join(file),
    };
    let fail = |log: String| DeviceFault::Compile {
        source_file: file.to_string(),
        arch: target.name().to_string(),
        log,
    };
    let builder = Builder::from_env().map(|b| match sources {
        KernelSources::Embedded => b,
        KernelSources::Directory(dir) => b.for_source_dir(dir),
    });
    match builder {
        Ok(b) => b
            .build(&source, target)
            .map(|c| c.path)
            .map_err(|e| fail(e.to_string())),
        Err(e @ AmdBuildError::ToolchainMissing { .. })
            if matches!(sources, KernelSources::Directory(_)) =>
        {
            Err(fail(format!("{sources} need a compiler: {e}")))
        }
        Err(e @ AmdBuildError::ToolchainMissing { .. }) => {
            let prebuilt = prebuilt_dir(target).join(format!("{}.co", kernel.id.name()));
            if prebuilt.is_file() {
                Ok(prebuilt)
            } else {
                Err(fail(format!(
                    "no prebuilt code object at {} and {e}",
                    prebuilt.display()
                )))
            }
        }
        Err(e) => Err(fail(e.to_string())),
    }
}
