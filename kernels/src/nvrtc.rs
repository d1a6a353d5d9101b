//! NVIDIA build: each kernel's translation unit compiled to PTX by NVRTC (loaded at run time
//! through `cudarc`, so this builds without CUDA), the CUDA include directory found without
//! configuration, and the `.entry` parameter lists of the PTX read back to check them against the
//! Rust declarations.
//!
//! A machine without NVRTC or the CUDA headers gets [`NvrtcError::Unavailable`]; tests turn that
//! into a loud skip (or a failure under `W4A16_REQUIRE=nvrtc`).

use crate::decl::{ArgDecl, ArgKind, KernelDecl, KernelId};
use crate::source::{self, KernelSources};
use std::path::{Path, PathBuf};

/// Why NVRTC cannot run here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvrtcUnavailable {
    pub reason: String,
}

impl std::fmt::Display for NvrtcUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NvrtcError {
    #[error("NVRTC unavailable: {0}")]
    Unavailable(NvrtcUnavailable),
    #[error("kernel `{0}` has no HIP source (it runs in the vendor BLAS)")]
    NoSource(KernelId),
    #[error(transparent)]
    Source(#[from] source::SourceError),
    #[error("NVRTC failed to compile {kernel} for {arch} with {options:?}:\n{log}")]
    Compile {
        kernel: KernelId,
        arch: String,
        options: Vec<String>,
        log: String,
    },
    #[error("NVRTC call failed for {kernel}: {what}")]
    Call { kernel: KernelId, what: String },
}

/// Environment variable naming the CUDA include directory explicitly.
pub const INCLUDE_ENV: &str = "W4A16_CUDA_INCLUDE";

/// The header whose presence marks a usable include directory.
const MARKER: &str = "cuda_fp16.h";

/// Candidate include directories, in the order they are tried: `$W4A16_CUDA_INCLUDE`,
/// `$CUDA_HOME/include`, `$CUDA_PATH/include`, `/usr/local/cuda/include`, the `include/` next to
/// every `lib/` on `LD_LIBRARY_PATH` (the pip wheel layouts `nvidia/cu13/{lib,include}` and
/// `nvidia/cuda_runtime/{lib,include}`), then the wheels installed into this checkout's
/// `.nvrtc/` by `scripts/nvrtc-env.sh`.
pub fn include_candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(p) = std::env::var(INCLUDE_ENV) {
        out.push(PathBuf::from(p));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Ok(p) = std::env::var(var) {
            out.push(Path::new(&p).join("include"));
        }
    }
    out.push(PathBuf::from("/usr/local/cuda/include"));
    if let Ok(paths) = std::env::var("LD_LIBRARY_PATH") {
        for lib in std::env::split_paths(&paths) {
            if let Some(parent) = lib.parent() {
                out.push(parent.join("include"));
                // nvidia/cuda_nvrtc/lib next to nvidia/cuda_runtime/include (CUDA 12 wheels)
                if let Some(nvidia) = parent.parent() {
                    out.push(nvidia.join("cuda_runtime").join("include"));
                }
            }
        }
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(".nvrtc")
        .join("nvidia");
    out.push(local.join("cu13").join("include"));
    out.push(local.join("cuda_runtime").join("include"));
    out
}

/// The first candidate that holds `cuda_fp16.h`.
pub fn find_cuda_include() -> Result<PathBuf, NvrtcUnavailable> {
    let candidates = include_candidates();
    candidates.iter().find(|d| d.join(MARKER).is_file()).cloned().ok_or_else(|| NvrtcUnavailable {
        reason: format!(
            "no CUDA include directory with {MARKER}; set {INCLUDE_ENV} or source scripts/nvrtc-env.sh (looked in: {})",
            candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        ),
    })
}

/// Whether the NVRTC shared library can be loaded (cudarc would panic on first use otherwise).
pub fn nvrtc_loadable() -> Result<(), NvrtcUnavailable> {
    // SAFETY: only tries to dlopen the candidate library names; no NVRTC function is called.
    let present = unsafe { cudarc::nvrtc::sys::is_culib_present() };
    if present {
        Ok(())
    } else {
        Err(NvrtcUnavailable {
            reason: "libnvrtc could not be loaded; put the nvidia-cuda-nvrtc wheel's lib/ (or a CUDA toolkit's lib64/) on LD_LIBRARY_PATH, e.g. `source scripts/nvrtc-env.sh`".into(),
        })
    }
}

/// The NVRTC options every kernel is compiled with.
pub fn compile_options(arch: &str, include: &Path) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "-std=c++17".into(),
        format!("--include-path={}", include.display()),
        // The kernels rely on IEEE fp32 (fused multiply-adds are explicit where wanted).
        "--ftz=false".into(),
        "--prec-div=true".into(),
        "--prec-sqrt=true".into(),
    ]
}

/// Compiles `kernel` for `arch` (e.g. `sm_90`) to PTX text.
pub fn compile_ptx(kernel: KernelId, arch: &str) -> Result<String, NvrtcError> {
    compile_ptx_with(kernel, arch, &[])
}

/// As [`compile_ptx`], with extra options (e.g. `-DW4_SKINNY_MMA=0`).
pub fn compile_ptx_with(
    kernel: KernelId,
    arch: &str,
    extra: &[&str],
) -> Result<String, NvrtcError> {
    compile_ptx_from(&KernelSources::Embedded, kernel, arch, extra)
}

/// As [`compile_ptx_with`], from `sources` (the embedded copies or a folder read now).
pub fn compile_ptx_from(
    sources: &KernelSources,
    kernel: KernelId,
    arch: &str,
    extra: &[&str],
) -> Result<String, NvrtcError> {
    let (tu, options) = unit_and_options(sources, kernel, arch, extra)?;
    let cache = PtxCache::from_env();
    let key = cache.as_ref().map(|_| cache_key(&tu, &options));
    if let Some(ptx) = cache
        .as_ref()
        .zip(key.as_ref())
        .and_then(|(c, k)| c.get(kernel, k))
    {
        return Ok(ptx);
    }
    let ptx = compile_tu(kernel, arch, tu, options)?;
    if let (Some(c), Some(key)) = (&cache, &key) {
        c.put(kernel, key, &ptx);
    }
    Ok(ptx)
}

/// The translation unit of `kernel` and the options it compiles with (the common ones, its
/// defines, then `extra`); NVRTC and the CUDA headers must be there.
fn unit_and_options(
    sources: &KernelSources,
    kernel: KernelId,
    arch: &str,
    extra: &[&str],
) -> Result<(String, Vec<String>), NvrtcError> {
    let tu = sources
        .translation_unit(kernel)
        .ok_or(NvrtcError::NoSource(kernel))??;
    let include = find_cuda_include().map_err(NvrtcError::Unavailable)?;
    nvrtc_loadable().map_err(NvrtcError::Unavailable)?;
    let mut options = compile_options(arch, &include);
    options.extend(source::define_options(kernel));
    options.extend(extra.iter().map(|s| (*s).to_owned()));
    Ok((tu, options))
}

/// NVRTC's fastest optimisation level. The PTX keeps the source's entry points and every code
/// path the preprocessor chose, so checks that read the ABI or which paths were compiled can use
/// it (about 4× faster than the default); what runs on a GPU is always compiled without it.
pub const FAST_COMPILE: &str = "-Ofc=max";

/// Runs only NVRTC's front end on `kernel` from `sources`: parsing, types and template
/// instantiation, the stage where a source that does not compile is refused, about 30× faster
/// than producing PTX. No PTX comes back and nothing is cached.
pub fn check_front_end(
    sources: &KernelSources,
    kernel: KernelId,
    arch: &str,
    extra: &[&str],
) -> Result<(), NvrtcError> {
    let (tu, mut options) = unit_and_options(sources, kernel, arch, extra)?;
    options.push("--fdevice-syntax-only".into());
    compile_tu(kernel, arch, tu, options).map(|_| ())
}

/// Compiles every kernel of `kernels` from `sources` at once, one thread each, so that the PTX
/// cache is warm before worker processes start (each would otherwise compile the set itself).
pub fn compile_all(
    sources: &KernelSources,
    kernels: &[KernelId],
    arch: &str,
    extra: &[String],
) -> Vec<(KernelId, Result<(), NvrtcError>)> {
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let extra = extra.as_slice();
    std::thread::scope(|s| {
        let handles: Vec<_> = kernels
            .iter()
            .map(|&k| s.spawn(move || (k, compile_ptx_from(sources, k, arch, extra).map(|_| ()))))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("an NVRTC compile thread panicked"))
            .collect()
    })
}

/// Environment variable naming the PTX cache folder; `off` disables the cache.
pub const PTX_CACHE_ENV: &str = "W4A16_PTX_CACHE";

/// Compiled PTX on disk, keyed by a hash of the translation unit, the options (the CUDA include
/// folder among them) and the NVRTC version. Every worker process of a run compiles the kernel
/// set at first use; with the cache, the first compile of a text serves all of them (and every
/// later run, and every mutant that leaves that kernel's text unchanged).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxCache {
    pub dir: PathBuf,
}

impl PtxCache {
    /// `$W4A16_PTX_CACHE` (`off`: none), else `$CARGO_TARGET_DIR/w4a16-ptx`, else
    /// `<temp>/w4a16-ptx`.
    pub fn from_env() -> Option<PtxCache> {
        let dir = match std::env::var_os(PTX_CACHE_ENV).filter(|d| !d.is_empty()) {
            Some(d) if d == "off" => return None,
            Some(d) => PathBuf::from(d),
            None => match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
                Some(t) => PathBuf::from(t).join("w4a16-ptx"),
                None => std::env::temp_dir().join("w4a16-ptx"),
            },
        };
        Some(PtxCache { dir })
    }

    fn path(&self, kernel: KernelId, key: &str) -> PathBuf {
        self.dir.join(format!("{}-{key}.ptx", kernel.name()))
    }

    /// The cached PTX, if a complete entry is there.
    pub fn get(&self, kernel: KernelId, key: &str) -> Option<String> {
        std::fs::read_to_string(self.path(kernel, key))
            .ok()
            .filter(|p| p.contains(".entry"))
    }

    /// Stores `ptx` (written aside and renamed, so a reader never sees half a file). A cache
    /// that cannot be written only costs a compile next time.
    pub fn put(&self, kernel: KernelId, key: &str, ptx: &str) {
        let path = self.path(kernel, key);
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let ok = std::fs::create_dir_all(&self.dir).is_ok() && std::fs::write(&tmp, ptx).is_ok();
        if !(ok && std::fs::rename(&tmp, &path).is_ok()) {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// The cache key of one compile: the unit's text, the options and the NVRTC version.
pub fn cache_key(tu: &str, options: &[String]) -> String {
    let mut h = crate::amd::Fnv1a::new();
    h.write_str("w4a16-ptx-v1");
    h.write_str(&nvrtc_version());
    h.write_str(tu);
    for o in options {
        h.write_str(o);
    }
    format!("{:016x}", h.finish())
}

fn nvrtc_version() -> String {
    if nvrtc_loadable().is_err() {
        return "no NVRTC".into();
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is loadable (checked above); two out-parameters.
    let rc = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    format!("{rc:?} {major}.{minor}")
}

fn compile_tu(
    kernel: KernelId,
    arch: &str,
    tu: String,
    options: Vec<String>,
) -> Result<String, NvrtcError> {
    let opts = cudarc::nvrtc::CompileOptions {
        options: options.clone(),
        name: Some(format!("{}.cu", kernel.name())),
        ..Default::default()
    };
    match cudarc::nvrtc::compile_ptx_with_opts(tu, opts) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(cudarc::nvrtc::CompileError::CompileError { log, .. }) => Err(NvrtcError::Compile {
            kernel,
            arch: arch.to_owned(),
            options,
            log: log.to_string_lossy().into_owned(),
        }),
        Err(e) => Err(NvrtcError::Call {
            kernel,
            what: e.to_string(),
        }),
    }
}

/// One `.entry` of a PTX module: its name and the PTX types of its parameters, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxEntry {
    pub name: String,
    pub params: Vec<String>,
}

/// The `.entry` declarations of a PTX module (`.visible .entry name(.param .u64 a, ...)`).
pub fn ptx_entries(ptx: &str) -> Vec<PtxEntry> {
    let mut out = Vec::new();
    let mut rest = ptx;
    while let Some(at) = rest.find(".entry ") {
        rest = &rest[at + ".entry ".len()..];
        let Some(open) = rest.find('(') else { break };
        let name = rest[..open].trim().to_owned();
        let Some(close) = rest[open..].find(')') else {
            break;
        };
        let params = rest[open + 1..open + close]
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .filter_map(|p| {
                p.split_whitespace()
                    .find(|t| t.starts_with('.') && *t != ".param" && !t.starts_with(".align"))
                    .map(str::to_owned)
            })
            .collect();
        out.push(PtxEntry { name, params });
        rest = &rest[open + close..];
    }
    out
}

/// A PTX entry whose parameters disagree with the declaration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AbiMismatch {
    #[error("entry point {0} is missing from the PTX")]
    MissingEntry(String),
    #[error("{entry}: {got} parameters in the PTX, {want} declared")]
    Count {
        entry: String,
        got: usize,
        want: usize,
    },
    #[error("{entry}: parameter {index} (`{name}`) is {got} in the PTX, expected {want}")]
    Type {
        entry: String,
        index: usize,
        name: &'static str,
        got: String,
        want: &'static str,
    },
}

fn ptx_type_fits(arg: &ArgDecl, ty: &str) -> bool {
    match arg.kind {
        ArgKind::Pointer { .. } => ty == ".u64" || ty == ".b64",
        ArgKind::I32(_) => ty == ".u32" || ty == ".s32" || ty == ".b32",
    }
}

/// Checks one entry's parameter list against `args`: count, order, and `.u64` for pointers,
/// `.u32`/`.s32` for ints.
pub fn check_entry(entries: &[PtxEntry], name: &str, args: &[ArgDecl]) -> Result<(), AbiMismatch> {
    let e = entries
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| AbiMismatch::MissingEntry(name.to_owned()))?;
    if e.params.len() != args.len() {
        return Err(AbiMismatch::Count {
            entry: name.to_owned(),
            got: e.params.len(),
            want: args.len(),
        });
    }
    for (index, (ty, arg)) in e.params.iter().zip(args).enumerate() {
        if !ptx_type_fits(arg, ty) {
            let want = if arg.is_pointer() {
                ".u64"
            } else {
                ".u32 or .s32"
            };
            return Err(AbiMismatch::Type {
                entry: name.to_owned(),
                index,
                name: arg.name,
                got: ty.clone(),
                want,
            });
        }
    }
    Ok(())
}

/// Checks every entry point `decl` defines (both dtypes, every variant) in `ptx`.
pub fn check_decl(ptx: &str, decl: &KernelDecl) -> Result<(), AbiMismatch> {
    let entries = ptx_entries(ptx);
    for dtype in w4a16_reference::ActDtype::ALL {
        for name in decl.entries(dtype) {
            check_entry(&entries, &name, decl.args)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::set::{DEQUANT_ARGS, GEMM_ARGS};

    const SAMPLE: &str = r#"
.version 9.0
.target sm_90
.address_size 64

	// .globl	w4a16_dequant_f16
.visible .entry w4a16_dequant_f16(
	.param .u64 .ptr .align 1 w4a16_dequant_f16_param_0,
	.param .u64 w4a16_dequant_f16_param_1,
	.param .u64 w4a16_dequant_f16_param_2,
	.param .u64 w4a16_dequant_f16_param_3,
	.param .u32 w4a16_dequant_f16_param_4,
	.param .u32 w4a16_dequant_f16_param_5,
	.param .u32 w4a16_dequant_f16_param_6,
	.param .u32 w4a16_dequant_f16_param_7,
	.param .u32 w4a16_dequant_f16_param_8,
	.param .u32 w4a16_dequant_f16_param_9
)
.maxntid 256, 1, 1
{
	ret;
}
.visible .entry empty()
{
	ret;
}
"#;

    #[test]
    fn the_parser_reads_names_and_types() {
        let e = ptx_entries(SAMPLE);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].name, "w4a16_dequant_f16");
        assert_eq!(e[0].params.len(), 10);
        assert_eq!(e[0].params[0], ".u64");
        assert_eq!(e[0].params[9], ".u32");
        assert_eq!(
            e[1],
            PtxEntry {
                name: "empty".into(),
                params: vec![]
            }
        );
    }

    #[test]
    fn a_matching_declaration_passes_and_wrong_ones_fail() {
        let e = ptx_entries(SAMPLE);
        assert_eq!(check_entry(&e, "w4a16_dequant_f16", &DEQUANT_ARGS), Ok(()));
        assert!(matches!(
            check_entry(&e, "w4a16_dequant_f16", &GEMM_ARGS),
            Err(AbiMismatch::Count { .. })
        ));
        let mut swapped = DEQUANT_ARGS;
        swapped.swap(3, 4);
        assert!(matches!(
            check_entry(&e, "w4a16_dequant_f16", &swapped),
            Err(AbiMismatch::Type { index: 3, .. })
        ));
        assert!(matches!(
            check_entry(&e, "w4a16_dequant_bf16", &DEQUANT_ARGS),
            Err(AbiMismatch::MissingEntry(_))
        ));
    }

    #[test]
    fn options_name_the_arch_and_the_include_dir() {
        let o = compile_options("sm_90", Path::new("/x/include"));
        assert!(o.contains(&"--gpu-architecture=sm_90".to_owned()));
        assert!(o.contains(&"--include-path=/x/include".to_owned()));
    }

    #[test]
    fn candidates_start_with_the_explicit_variable_when_set() {
        // Reading only: the list always ends with the checkout-local wheel folders.
        let c = include_candidates();
        assert!(c.iter().any(|p| p.ends_with("cu13/include")));
        assert!(c.contains(&PathBuf::from("/usr/local/cuda/include")));
    }

    #[test]
    fn the_ptx_cache_returns_what_was_put_under_its_key_only() {
        let dir = std::env::temp_dir().join(format!("w4a16-ptx-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = PtxCache { dir: dir.clone() };
        let k = format!("{:016x}", 0x1234u64);
        assert_eq!(cache.get(KernelId::Fused, &k), None);
        cache.put(KernelId::Fused, &k, SAMPLE);
        assert_eq!(cache.get(KernelId::Fused, &k).as_deref(), Some(SAMPLE));
        assert_eq!(cache.get(KernelId::Skinny, &k), None);
        assert_eq!(cache.get(KernelId::Fused, "other"), None);
        // A truncated entry (no .entry) is not served.
        std::fs::write(cache.path(KernelId::Dequant, &k), ".version 9.0\n").unwrap();
        assert_eq!(cache.get(KernelId::Dequant, &k), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_cache_key_changes_with_the_text_and_the_options() {
        let o = vec!["--gpu-architecture=sm_90".to_string()];
        let base = cache_key("int a;", &o);
        assert_eq!(base, cache_key("int a;", &o));
        assert_ne!(base, cache_key("int b;", &o));
        assert_ne!(
            base,
            cache_key("int a;", &["-DW4_SKINNY_MMA=0".to_string()])
        );
        assert_ne!(base, cache_key("int a;", &[]));
    }
}
