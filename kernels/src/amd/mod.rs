//! Building AMDGPU code objects for every kernel source and target, without an AMD GPU.
//!
//! Two toolchains are accepted: an installed ROCm (its clang links the device libraries itself)
//! or Debian's `clang++-19` with `/usr/include/hip` and the `rocm-device-libs` bitcode, linked
//! explicitly (ARCHITECTURE.md, "Where things run"). Debian 12 ships device libraries from ROCm 5.2, which
//! lack the `oclc_isa_version_*` control files for gfx11/gfx12; those one-constant modules are
//! generated here. Results are cached under `target/w4a16-codeobjects/<target>/<kernel>.co`,
//! keyed by a hash of everything that goes into the compile, so test runs only rebuild what
//! changed.
//!
//! Environment: `W4A16_AMD_TARGETS` (comma list, default gfx1100,gfx1151,gfx1201),
//! `W4A16_CODEOBJECT_DIR` (cache; default `$CARGO_TARGET_DIR` or the workspace `target/`),
//! `ROCM_PATH`/`HIP_PATH` (an installed ROCm, tried before `/opt/rocm` and Debian clang-19).
//!
//! `toolchain` finds the compiler and the device libraries, `device_libs` picks (and, where
//! Debian lacks them, generates) the bitcode each target links, `builder` compiles into the
//! keyed cache.

mod builder;
mod device_libs;
mod fnv;
#[cfg(test)]
mod tests;
mod toolchain;

use crate::decl::KernelId;
use crate::target::{Target, Vendor};
use std::fmt;
use std::path::{Path, PathBuf};

pub use builder::Builder;
pub(crate) use fnv::Fnv1a;
pub use toolchain::{Flavor, Toolchain, ToolchainSearch};

/// Environment variable naming the AMD targets to build (comma separated).
pub const TARGETS_ENV: &str = "W4A16_AMD_TARGETS";
/// Environment variable overriding the code-object cache directory.
pub const CACHE_DIR_ENV: &str = "W4A16_CODEOBJECT_DIR";

#[derive(Debug, thiserror::Error)]
pub enum AmdBuildError {
    #[error(
        "AMD toolchain missing: {what} (looked in: {})",
        display_paths(looked_in)
    )]
    ToolchainMissing {
        what: String,
        looked_in: Vec<PathBuf>,
    },
    #[error("{var}={value:?}: {entry:?} is not an AMD target; expected a comma list of {expected}")]
    BadTargets {
        var: &'static str,
        value: String,
        entry: String,
        expected: String,
    },
    #[error("kernel source {} does not exist", path.display())]
    SourceMissing { path: PathBuf },
    #[error("{}: {what}: {source}", path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("compiling {} for {target} failed ({status}):\n{stderr}", source_path.display())]
    Compile {
        source_path: PathBuf,
        target: Target,
        status: String,
        stderr: String,
    },
}

fn display_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn io_err<'a>(
    path: &'a Path,
    what: &'static str,
) -> impl FnOnce(std::io::Error) -> AmdBuildError + 'a {
    move |source| AmdBuildError::Io {
        path: path.to_path_buf(),
        what,
        source,
    }
}

/// The targets to build: `W4A16_AMD_TARGETS`, or gfx1100, gfx1151 and gfx1201.
pub fn targets_from_env() -> Result<Vec<Target>, AmdBuildError> {
    match std::env::var(TARGETS_ENV) {
        Ok(v) if !v.trim().is_empty() => parse_targets(&v),
        _ => Ok(Target::AMD_CODE_OBJECT_TARGETS.to_vec()),
    }
}

/// Parses a comma list of AMD targets (duplicates dropped, order kept).
pub fn parse_targets(value: &str) -> Result<Vec<Target>, AmdBuildError> {
    let mut out = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        match Target::parse(entry) {
            Some(t) if t.vendor() == Vendor::Amd => {
                if !out.contains(&t) {
                    out.push(t);
                }
            }
            _ => {
                let expected = Target::ALL
                    .iter()
                    .filter(|t| t.vendor() == Vendor::Amd)
                    .map(|t| t.name())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(AmdBuildError::BadTargets {
                    var: TARGETS_ENV,
                    value: value.to_owned(),
                    entry: entry.to_owned(),
                    expected,
                });
            }
        }
    }
    Ok(out)
}

/// The `oclc_isa_version` constant of a gfx target: gfx1151 → 11501, gfx942 → 9402.
pub fn isa_version(target: Target) -> Option<u32> {
    let digits = target.name().strip_prefix("gfx")?;
    if digits.len() < 3 {
        return None;
    }
    let (major, rest) = digits.split_at(digits.len() - 2);
    let major: u32 = major.parse().ok()?;
    let minor = u32::from_str_radix(&rest[..1], 16).ok()?;
    let stepping = u32::from_str_radix(&rest[1..], 16).ok()?;
    Some(major * 1000 + minor * 100 + stepping)
}

/// One HIP source file of the kernel set (or a test source).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSource {
    /// The code-object file stem: `skinny` → `<target>/skinny.co`; the kernel's name for the
    /// kernel set (`fused_carrier` is fused.hip compiled with its switch).
    pub name: String,
    pub kernel: Option<KernelId>,
    pub path: PathBuf,
}

/// `kernels/hip/` of this checkout.
pub fn hip_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("hip")
}

/// The HIP source of each declared kernel that has one (`dense` runs in the vendor BLAS).
pub fn kernel_sources() -> Vec<KernelSource> {
    kernel_sources_in(&crate::source::KernelSources::Embedded)
}

/// As [`kernel_sources`], with the files taken from `sources`' folder (clang reads them there and
/// finds `compat.h` next to them).
pub fn kernel_sources_in(sources: &crate::source::KernelSources) -> Vec<KernelSource> {
    let dir = sources.dir();
    crate::set::all()
        .into_iter()
        .filter_map(|d| {
            let file = d.source_file?;
            Some(KernelSource {
                name: d.id.name().to_owned(),
                kernel: Some(d.id),
                path: dir.join(file),
            })
        })
        .collect()
}

/// `$W4A16_CODEOBJECT_DIR`, else `$CARGO_TARGET_DIR/w4a16-codeobjects`, else the workspace's
/// `target/w4a16-codeobjects`.
pub fn default_cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(CACHE_DIR_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("w4a16-codeobjects");
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."));
    workspace.join("target/w4a16-codeobjects")
}

/// A built code object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeObject {
    pub source: KernelSource,
    pub target: Target,
    pub path: PathBuf,
    /// The cache key (hex); stored next to the object as `<name>.co.key`.
    pub key: String,
    /// Taken from the cache, not compiled in this call.
    pub cached: bool,
    /// Compiler diagnostics of a fresh build (empty when cached).
    pub warnings: String,
}

impl fmt::Display for CodeObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}@{} ({})",
            self.source.name,
            self.target,
            self.path.display()
        )
    }
}
