//! Compiling kernel sources into the code-object cache, keyed by a hash of everything that goes
//! into the compile, so that only what changed is rebuilt.

use super::device_libs::{generate_isa_version, isa_version_bitcode_path};
use super::{
    AmdBuildError, CodeObject, Flavor, Fnv1a, KernelSource, Toolchain, default_cache_dir, io_err,
};
use crate::target::Target;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

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

pub(super) fn unique_tmp(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().map(OsString::from).unwrap_or_default();
    name.push(format!(".tmp.{}.{n}", std::process::id()));
    path.with_file_name(name)
}
