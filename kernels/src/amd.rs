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

use crate::decl::KernelId;
use crate::target::{Target, Vendor};
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Environment variable naming the AMD targets to build (comma separated).
pub const TARGETS_ENV: &str = "W4A16_AMD_TARGETS";
/// Environment variable overriding the code-object cache directory.
pub const CACHE_DIR_ENV: &str = "W4A16_CODEOBJECT_DIR";

/// Where the Debian packages put the HIP headers and the device bitcode.
const DEBIAN_INCLUDE_DIRS: [&str; 1] = ["/usr/include"];
const DEBIAN_BITCODE_DIRS: [&str; 2] = [
    "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
    "/usr/lib/amdgcn/bitcode",
];
const LLVM_19_BIN: &str = "/usr/lib/llvm-19/bin";

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

/// The device bitcode linked into every kernel: ockl (work-item queries) and the oclc control
/// constants hipcc would choose (no fast-math, IEEE denormals, correctly rounded sqrt).
fn device_bitcode(bitcode_dir: &Path, target: Target, generated_dir: &Path) -> Vec<PathBuf> {
    let wave64 = if target.wave_size() == 64 {
        "on"
    } else {
        "off"
    };
    let mut out: Vec<PathBuf> = [
        "ockl.bc".to_owned(),
        "oclc_abi_version_500.bc".to_owned(),
        format!("oclc_wavefrontsize64_{wave64}.bc"),
        "oclc_daz_opt_off.bc".to_owned(),
        "oclc_finite_only_off.bc".to_owned(),
        "oclc_unsafe_math_off.bc".to_owned(),
        "oclc_correctly_rounded_sqrt_on.bc".to_owned(),
    ]
    .iter()
    .map(|f| bitcode_dir.join(f))
    .collect();
    out.push(isa_version_bitcode_path(bitcode_dir, target, generated_dir));
    out
}

fn isa_version_file(target: Target) -> String {
    format!(
        "oclc_isa_version_{}.bc",
        target.name().trim_start_matches("gfx")
    )
}

fn isa_version_bitcode_path(bitcode_dir: &Path, target: Target, generated_dir: &Path) -> PathBuf {
    let installed = bitcode_dir.join(isa_version_file(target));
    if installed.is_file() {
        installed
    } else {
        generated_dir.join(isa_version_file(target))
    }
}

/// Writes the one-constant `oclc_isa_version` module the device libraries lack for `target`.
fn generate_isa_version(clang: &Path, target: Target, out: &Path) -> Result<(), AmdBuildError> {
    let Some(version) = isa_version(target) else {
        return Err(AmdBuildError::ToolchainMissing {
            what: format!("an oclc_isa_version bitcode for {target}"),
            looked_in: vec![out.to_path_buf()],
        });
    };
    let dir = out.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_err(dir, "creating directory"))?;
    // Unique names: several test binaries may generate the same file at once.
    let ll = unique_tmp(&out.with_extension("ll"));
    let ir = format!(
        "target triple = \"amdgcn-amd-amdhsa\"\n\
         @__oclc_ISA_version = linkonce_odr protected local_unnamed_addr addrspace(4) constant i32 {version}, align 4\n"
    );
    std::fs::write(&ll, ir).map_err(io_err(&ll, "writing"))?;
    let tmp = unique_tmp(out);
    let res = Command::new(clang)
        .args([
            "-c",
            "-emit-llvm",
            "-nogpulib",
            "--target=amdgcn-amd-amdhsa",
            "-x",
            "ir",
        ])
        .arg(&ll)
        .arg("-o")
        .arg(&tmp)
        .output()
        .map_err(io_err(clang, "running"));
    let _ = std::fs::remove_file(&ll);
    let res = res?;
    if !res.status.success() {
        return Err(AmdBuildError::Compile {
            source_path: ll,
            target,
            status: res.status.to_string(),
            stderr: String::from_utf8_lossy(&res.stderr).into_owned(),
        });
    }
    std::fs::rename(&tmp, out).map_err(io_err(out, "renaming into place"))
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

/// Builds code objects into a keyed cache.
#[derive(Clone, Debug)]
pub struct Builder {
    pub toolchain: Toolchain,
    pub cache_dir: PathBuf,
}

impl Builder {
    pub fn new(toolchain: Toolchain, cache_dir: PathBuf) -> Builder {
        Builder {
            toolchain,
            cache_dir,
        }
    }

    /// The discovered toolchain and the default cache directory.
    pub fn from_env() -> Result<Builder, AmdBuildError> {
        Ok(Builder::new(Toolchain::discover()?, default_cache_dir()))
    }

    /// The builder for the sources of folder `dir` (`--kernel-sources`): a cache of its own
    /// under this one's, one per folder, so that trees built in turn or at once (a mutant and
    /// its base, two planted bugs) never replace each other's objects.
    pub fn for_source_dir(&self, dir: &Path) -> Builder {
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
        let mut h = Fnv1a::new();
        h.write(dir.as_os_str().as_encoded_bytes());
        let cache = self
            .cache_dir
            .join("from-kernel-sources")
            .join(format!("{:016x}", h.finish()));
        Builder::new(self.toolchain.clone(), cache)
    }

    fn generated_dir(&self) -> PathBuf {
        self.cache_dir.join("generated-bitcode")
    }

    /// The key of one build: compiler identity, arguments, the source and every header next to
    /// it, and the names and sizes of the linked bitcode.
    pub fn cache_key(
        &self,
        source: &KernelSource,
        target: Target,
    ) -> Result<String, AmdBuildError> {
        self.prepare(target)?;
        let mut h = Fnv1a::new();
        h.write_str("w4a16-amd-codeobject-v1");
        h.write_str(&self.toolchain.version);
        h.write_str(&self.toolchain.clang.display().to_string());
        for a in self.source_args(source, target) {
            h.write_str(&a.to_string_lossy());
            if let Some(meta) = Path::new(&a)
                .is_absolute()
                .then(|| std::fs::metadata(&a).ok())
                .flatten()
            {
                h.write(&meta.len().to_le_bytes());
            }
        }
        let text = std::fs::read(&source.path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                AmdBuildError::SourceMissing {
                    path: source.path.clone(),
                }
            } else {
                AmdBuildError::Io {
                    path: source.path.clone(),
                    what: "reading",
                    source: e,
                }
            }
        })?;
        h.write(&text);
        for header in headers_next_to(&source.path)? {
            h.write_str(&header.display().to_string());
            h.write(&std::fs::read(&header).map_err(io_err(&header, "reading"))?);
        }
        Ok(format!("{:016x}", h.finish()))
    }

    /// The compiler arguments for `source`: the toolchain's, plus the kernel's preprocessor
    /// switches (`source::defines`; none for the kernels that are a file of their own).
    fn source_args(&self, source: &KernelSource, target: Target) -> Vec<OsString> {
        let mut args = self
            .toolchain
            .compile_args(&source.path, target, &self.generated_dir());
        if let Some(kernel) = source.kernel {
            args.extend(
                crate::source::define_options(kernel)
                    .into_iter()
                    .map(OsString::from),
            );
        }
        args
    }

    /// Generates the control bitcode the installed device libraries lack for `target`.
    fn prepare(&self, target: Target) -> Result<(), AmdBuildError> {
        if let Flavor::Debian { bitcode_dir, .. } = &self.toolchain.flavor {
            let isa = isa_version_bitcode_path(bitcode_dir, target, &self.generated_dir());
            if !isa.is_file() {
                generate_isa_version(&self.toolchain.clang, target, &isa)?;
            }
        }
        Ok(())
    }

    /// Where the object of `source` for `target` lives in the cache.
    pub fn object_path(&self, source: &KernelSource, target: Target) -> PathBuf {
        self.cache_dir
            .join(target.name())
            .join(format!("{}.co", source.name))
    }

    /// Builds one code object, or returns the cached one when its key matches.
    pub fn build(
        &self,
        source: &KernelSource,
        target: Target,
    ) -> Result<CodeObject, AmdBuildError> {
        let key = self.cache_key(source, target)?;
        let path = self.object_path(source, target);
        let key_path = path.with_extension("co.key");
        let cached =
            path.is_file() && std::fs::read_to_string(&key_path).is_ok_and(|k| k.trim() == key);
        if cached {
            return Ok(CodeObject {
                source: source.clone(),
                target,
                path,
                key,
                cached,
                warnings: String::new(),
            });
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io_err(dir, "creating directory"))?;
        let tmp = unique_tmp(&path);
        let out = Command::new(&self.toolchain.clang)
            .args(self.source_args(source, target))
            .arg("-o")
            .arg(&tmp)
            .output()
            .map_err(io_err(&self.toolchain.clang, "running"))?;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            let _ = std::fs::remove_file(&tmp);
            return Err(AmdBuildError::Compile {
                source_path: source.path.clone(),
                target,
                status: out.status.to_string(),
                stderr,
            });
        }
        std::fs::rename(&tmp, &path).map_err(io_err(&path, "renaming into place"))?;
        let key_tmp = unique_tmp(&key_path);
        std::fs::write(&key_tmp, &key).map_err(io_err(&key_tmp, "writing"))?;
        std::fs::rename(&key_tmp, &key_path).map_err(io_err(&key_path, "renaming into place"))?;
        Ok(CodeObject {
            source: source.clone(),
            target,
            path,
            key,
            cached: false,
            warnings: stderr,
        })
    }

    /// Builds every source for every target, a few compiles at a time. Results come back in
    /// (target, source) order; the first error wins.
    pub fn build_all(
        &self,
        sources: &[KernelSource],
        targets: &[Target],
    ) -> Result<Vec<CodeObject>, AmdBuildError> {
        let jobs: Vec<(Target, &KernelSource)> = targets
            .iter()
            .flat_map(|t| sources.iter().map(move |s| (*t, s)))
            .collect();
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(jobs.len().max(1));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results: Vec<std::sync::Mutex<Option<Result<CodeObject, AmdBuildError>>>> =
            jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((target, source)) = jobs.get(i) else {
                            break;
                        };
                        let r = self.build(source, *target);
                        *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                    }
                });
            }
        });
        results
            .into_iter()
            .map(|m| {
                m.into_inner()
                    .unwrap_or_else(|p| p.into_inner())
                    .expect("every job ran")
            })
            .collect()
    }
}

fn headers_next_to(source: &Path) -> Result<Vec<PathBuf>, AmdBuildError> {
    let dir = source.parent().unwrap_or(Path::new("."));
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io_err(dir, "listing"))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "h" || e == "hpp" || e == "cuh")
        })
        .collect();
    out.sort();
    Ok(out)
}

fn unique_tmp(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().map(OsString::from).unwrap_or_default();
    name.push(format!(".tmp.{}.{n}", std::process::id()));
    path.with_file_name(name)
}

/// FNV-1a, 64 bit: stable across Rust versions and machines, unlike `DefaultHasher`.
pub(crate) struct Fnv1a(u64);

impl Fnv1a {
    pub(crate) fn new() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Length-delimit fields so ("ab","c") and ("a","bc") differ.
        self.0 ^= bytes.len() as u64;
        self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
    }
    pub(crate) fn write_str(&mut self, s: &str) {
        self.write(s.as_bytes());
    }
    pub(crate) fn finish(&self) -> u64 {
        self.0
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isa_versions_follow_major_minor_stepping() {
        assert_eq!(isa_version(Target::Gfx1100), Some(11000));
        assert_eq!(isa_version(Target::Gfx1151), Some(11501));
        assert_eq!(isa_version(Target::Gfx1201), Some(12001));
        assert_eq!(isa_version(Target::Gfx942), Some(9402));
        assert_eq!(isa_version(Target::Sm90), None);
    }

    #[test]
    fn target_lists_parse_and_reject_non_amd() {
        assert_eq!(
            parse_targets("gfx1151, gfx1100,gfx1151").unwrap(),
            vec![Target::Gfx1151, Target::Gfx1100]
        );
        let err = parse_targets("gfx1100,sm_90").unwrap_err().to_string();
        assert!(
            err.contains("\"sm_90\"") && err.contains("gfx1201"),
            "{err}"
        );
        assert!(
            matches!(parse_targets("gfx9000"), Err(AmdBuildError::BadTargets { entry, .. }) if entry == "gfx9000")
        );
    }

    #[test]
    fn missing_toolchain_names_what_and_where() {
        let empty = std::env::temp_dir().join(format!("w4a16-no-toolchain-{}", std::process::id()));
        let search = ToolchainSearch {
            rocm_roots: vec![empty.join("rocm")],
            bin_dirs: vec![empty.join("bin")],
            include_dirs: vec![empty.join("include")],
            bitcode_dirs: vec![empty.join("bitcode")],
        };
        match Toolchain::discover_in(&search) {
            Err(AmdBuildError::ToolchainMissing { what, looked_in }) => {
                assert!(what.contains("clang++-19"), "{what}");
                assert_eq!(looked_in, vec![empty.join("rocm"), empty.join("bin")]);
            }
            other => panic!("expected ToolchainMissing, got {other:?}"),
        }
    }

    #[test]
    fn each_source_folder_builds_into_a_cache_of_its_own() {
        let b = Builder::new(
            Toolchain {
                flavor: Flavor::Rocm {
                    root: PathBuf::from("/opt/rocm"),
                },
                clang: PathBuf::from("/opt/rocm/llvm/bin/clang"),
                objdump: PathBuf::from("/opt/rocm/llvm/bin/llvm-objdump"),
                version: "clang 19".into(),
            },
            PathBuf::from("/cache"),
        );
        let a = b.for_source_dir(Path::new("/work/mutant-a/src")).cache_dir;
        let a2 = b.for_source_dir(Path::new("/work/mutant-a/src")).cache_dir;
        let other = b.for_source_dir(Path::new("/work/mutant-b/src")).cache_dir;
        assert_eq!(a, a2);
        assert_ne!(a, other);
        assert!(
            a.starts_with("/cache/from-kernel-sources"),
            "{}",
            a.display()
        );
    }

    #[test]
    fn fnv_is_length_delimited() {
        let mut a = Fnv1a::new();
        a.write_str("ab");
        a.write_str("c");
        let mut b = Fnv1a::new();
        b.write_str("a");
        b.write_str("bc");
        assert_ne!(a.finish(), b.finish());
    }
}
