//! Finding an AMD toolchain: an installed ROCm (its clang links the device libraries itself),
//! else Debian's clang-19 with the HIP headers and the `rocm-device-libs` bitcode.

use super::device_libs::device_bitcode;
use super::{AmdBuildError, io_err};
use crate::target::Target;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the Debian packages put the HIP headers and the device bitcode.
const DEBIAN_INCLUDE_DIRS: [&str; 1] = ["/usr/include"];
const DEBIAN_BITCODE_DIRS: [&str; 2] = [
    "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
    "/usr/lib/amdgcn/bitcode",
];
const LLVM_19_BIN: &str = "/usr/lib/llvm-19/bin";

/// Where discovery looks; `from_env` fills it from the environment, tests point it elsewhere.
#[derive(Clone, Debug, Default)]
pub struct ToolchainSearch {
    /// ROCm installs to try first (`$ROCM_PATH`, `$HIP_PATH`, `/opt/rocm`).
    pub rocm_roots: Vec<PathBuf>,
    /// Directories searched for `clang++-19` and `llvm-objdump-19` (`$PATH`, then LLVM 19's bin).
    pub bin_dirs: Vec<PathBuf>,
    /// Directories holding `hip/hip_runtime.h`.
    pub include_dirs: Vec<PathBuf>,
    /// Directories holding `ockl.bc` and the `oclc_*.bc` control files.
    pub bitcode_dirs: Vec<PathBuf>,
}

impl ToolchainSearch {
    pub fn from_env() -> Self {
        let mut rocm_roots = Vec::new();
        for var in ["ROCM_PATH", "HIP_PATH"] {
            if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
                rocm_roots.push(PathBuf::from(v));
            }
        }
        rocm_roots.push(PathBuf::from("/opt/rocm"));
        let mut bin_dirs: Vec<PathBuf> = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        bin_dirs.push(PathBuf::from(LLVM_19_BIN));
        ToolchainSearch {
            rocm_roots,
            bin_dirs,
            include_dirs: DEBIAN_INCLUDE_DIRS.iter().map(PathBuf::from).collect(),
            bitcode_dirs: DEBIAN_BITCODE_DIRS.iter().map(PathBuf::from).collect(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// An installed ROCm: its clang finds the headers and device libraries from `--rocm-path`.
    Rocm { root: PathBuf },
    /// Debian clang-19: HIP headers and device bitcode passed explicitly.
    Debian {
        include_dir: PathBuf,
        bitcode_dir: PathBuf,
    },
}

/// A usable AMD device-code toolchain.
#[derive(Clone, Debug)]
pub struct Toolchain {
    pub flavor: Flavor,
    pub clang: PathBuf,
    pub objdump: PathBuf,
    /// First line of `clang --version`; part of the cache key, never of a snapshot.
    pub version: String,
}

impl Toolchain {
    /// Finds a toolchain from the environment (see [`ToolchainSearch::from_env`]).
    pub fn discover() -> Result<Toolchain, AmdBuildError> {
        Toolchain::discover_in(&ToolchainSearch::from_env())
    }

    pub fn discover_in(search: &ToolchainSearch) -> Result<Toolchain, AmdBuildError> {
        if let Some(tc) = search.rocm_roots.iter().find_map(|r| rocm_toolchain(r)) {
            return tc.with_version();
        }
        let mut looked_in: Vec<PathBuf> = search.rocm_roots.clone();
        looked_in.extend(search.bin_dirs.iter().cloned());
        let Some(clang) = find_in(&search.bin_dirs, &["clang++-19"]) else {
            return Err(AmdBuildError::ToolchainMissing {
                what: "clang++-19 (Debian clang-19) or a ROCm install with llvm/bin/clang++".into(),
                looked_in,
            });
        };
        // clang drives ld.lld from its own directory for the amdgcn link step.
        let clang_dir = std::fs::canonicalize(&clang)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| PathBuf::from(LLVM_19_BIN));
        if !clang_dir.join("ld.lld").is_file()
            && find_in(&search.bin_dirs, &["ld.lld-19", "ld.lld"]).is_none()
        {
            return Err(AmdBuildError::ToolchainMissing {
                what: "ld.lld (Debian lld-19)".into(),
                looked_in: vec![clang_dir],
            });
        }
        let Some(objdump) = find_in(&search.bin_dirs, &["llvm-objdump-19"]) else {
            return Err(AmdBuildError::ToolchainMissing {
                what: "llvm-objdump-19 (Debian llvm-19)".into(),
                looked_in: search.bin_dirs.clone(),
            });
        };
        let Some(include_dir) = search
            .include_dirs
            .iter()
            .find(|d| d.join("hip/hip_runtime.h").is_file())
            .cloned()
        else {
            return Err(AmdBuildError::ToolchainMissing {
                what: "HIP headers hip/hip_runtime.h (Debian libamdhip64-dev)".into(),
                looked_in: search.include_dirs.clone(),
            });
        };
        let Some(bitcode_dir) = search
            .bitcode_dirs
            .iter()
            .find(|d| d.join("ockl.bc").is_file())
            .cloned()
        else {
            return Err(AmdBuildError::ToolchainMissing {
                what: "AMD device bitcode ockl.bc (Debian rocm-device-libs)".into(),
                looked_in: search.bitcode_dirs.clone(),
            });
        };
        Toolchain {
            flavor: Flavor::Debian {
                include_dir,
                bitcode_dir,
            },
            clang,
            objdump,
            version: String::new(),
        }
        .with_version()
    }

    fn with_version(mut self) -> Result<Toolchain, AmdBuildError> {
        let out = Command::new(&self.clang)
            .arg("--version")
            .output()
            .map_err(io_err(&self.clang, "running --version"))?;
        if !out.status.success() {
            return Err(AmdBuildError::ToolchainMissing {
                what: format!(
                    "a working {} (--version failed: {})",
                    self.clang.display(),
                    out.status
                ),
                looked_in: vec![self.clang.clone()],
            });
        }
        self.version = String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_owned();
        Ok(self)
    }

    /// The compiler arguments for one source and target, without the output path. Bitcode
    /// control files that the installed device libraries lack are taken from `generated_dir`.
    ///
    /// `-gline-tables-only` adds a DWARF line table (block coverage maps each never-executed
    /// block to its source line through it, `docs/block-coverage.md`) and leaves the machine
    /// code as it is: with clang 19 on Debian 12, every code object of the kernel set (skinny,
    /// fused, fused_carrier, dequant, fallback, moe_align, moe) for gfx1100, gfx1151 and
    /// gfx1201 has byte-identical `.text`, `.rodata` (kernel descriptors) and `.note`
    /// (metadata) sections with and without it (`scripts/compare-line-tables.sh`).
    pub fn compile_args(
        &self,
        source: &Path,
        target: Target,
        generated_dir: &Path,
    ) -> Vec<OsString> {
        let mut args: Vec<OsString> = [
            "-x",
            "hip",
            "-std=c++17",
            "--cuda-device-only",
            "--no-gpu-bundle-output",
            "-O3",
            "-gline-tables-only",
            "-fhip-kernel-arg-name",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        args.push(format!("--offload-arch={}", target.name()).into());
        if let Some(dir) = source.parent() {
            args.push(format!("-I{}", dir.display()).into());
        }
        match &self.flavor {
            Flavor::Rocm { root } => args.push(format!("--rocm-path={}", root.display()).into()),
            Flavor::Debian {
                include_dir,
                bitcode_dir,
            } => {
                args.push("-nogpulib".into());
                args.push(format!("-I{}", include_dir.display()).into());
                for bc in device_bitcode(bitcode_dir, target, generated_dir) {
                    args.push("-Xclang".into());
                    args.push("-mlink-builtin-bitcode".into());
                    args.push("-Xclang".into());
                    args.push(bc.into_os_string());
                }
            }
        }
        args.push(source.as_os_str().to_owned());
        args
    }
}

fn rocm_toolchain(root: &Path) -> Option<Toolchain> {
    let clang = ["llvm/bin/clang++", "lib/llvm/bin/clang++"]
        .iter()
        .map(|p| root.join(p))
        .find(|p| p.is_file())?;
    let objdump = clang.with_file_name("llvm-objdump");
    let has_bitcode = root.join("amdgcn/bitcode/ockl.bc").is_file() || clang_resource_bitcode(root);
    (objdump.is_file() && has_bitcode && root.join("include/hip/hip_runtime.h").is_file()).then(
        || Toolchain {
            flavor: Flavor::Rocm {
                root: root.to_path_buf(),
            },
            clang,
            objdump,
            version: String::new(),
        },
    )
}

/// ROCm 6+ keeps the device libraries in clang's resource directory.
fn clang_resource_bitcode(root: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(root.join("lib/llvm/lib/clang")) else {
        return false;
    };
    entries
        .flatten()
        .any(|e| e.path().join("lib/amdgcn/bitcode/ockl.bc").is_file())
}

fn find_in(dirs: &[PathBuf], names: &[&str]) -> Option<PathBuf> {
    names
        .iter()
        .find_map(|n| dirs.iter().map(|d| d.join(n)).find(|p| p.is_file()))
}
