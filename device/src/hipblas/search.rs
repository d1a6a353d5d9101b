//! Finding hipBLAS: the directories and file names tried, the HIP runtime it must share with
//! the harness, and why a library was not usable ([`LoadError`]).

use super::*;

/// File names tried in each directory, newest ABI first: ROCm 7, 6, 5, then the dev symlink.
pub const LIBRARY_NAMES: [&str; 4] = [
    "libhipblas.so.3",
    "libhipblas.so.2",
    "libhipblas.so.1",
    "libhipblas.so",
];

/// Where to look for the library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Candidate {
    /// A file at this path.
    File(PathBuf),
    /// A bare name for the dynamic loader's own search (`LD_LIBRARY_PATH`, ld.so.cache, the
    /// system directories).
    System(&'static str),
}

impl std::fmt::Display for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Candidate::File(p) => write!(f, "{}", p.display()),
            Candidate::System(n) => write!(f, "{n} (system search)"),
        }
    }
}

/// Directories in order: the one holding the HIP runtime the harness is linked to (its
/// hipBLAS runs on that same runtime), `$ROCM_PATH/lib`, `$HIP_PATH/lib`, `/opt/rocm/lib`;
/// each once.
pub fn search_dirs(
    runtime_dir: Option<&Path>,
    rocm_path: Option<&OsStr>,
    hip_path: Option<&OsStr>,
) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let env_lib = |v: Option<&OsStr>| {
        v.filter(|v| !v.is_empty())
            .map(|v| Path::new(v).join("lib"))
    };
    for d in [
        runtime_dir.map(Path::to_path_buf),
        env_lib(rocm_path),
        env_lib(hip_path),
        Some(PathBuf::from("/opt/rocm/lib")),
    ]
    .into_iter()
    .flatten()
    {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}

/// Every name in every directory (directory by directory, so one ROCm installation is
/// preferred whole), then the names for the system search.
pub fn candidates(dirs: &[PathBuf]) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = dirs
        .iter()
        .flat_map(|d| LIBRARY_NAMES.iter().map(|n| Candidate::File(d.join(n))))
        .collect();
    out.extend(LIBRARY_NAMES.iter().map(|n| Candidate::System(n)));
    out
}

/// The candidates of this process: [`search_dirs`] from the linked runtime and the
/// environment, then the system search.
pub fn default_candidates() -> Vec<Candidate> {
    let runtime = loaded_hip_runtime();
    candidates(&search_dirs(
        runtime.as_deref().and_then(Path::parent),
        std::env::var_os("ROCM_PATH").as_deref(),
        std::env::var_os("HIP_PATH").as_deref(),
    ))
}

/// The file that defines `address`, if a loaded object does.
pub(super) fn object_of(address: *const c_void) -> Option<PathBuf> {
    if address.is_null() {
        return None;
    }
    // SAFETY: dladdr only reads the loader's tables; `info` is a plain out-parameter.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    if unsafe { libc::dladdr(address, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr filled a NUL-terminated path owned by the loader.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    let path = PathBuf::from(name.to_string_lossy().into_owned());
    Some(std::fs::canonicalize(&path).unwrap_or(path))
}

/// The HIP runtime (`libamdhip64`) in the process's global scope, i.e. the one the harness is
/// linked to (`None` without the `rocm` feature).
pub fn loaded_hip_runtime() -> Option<PathBuf> {
    let this = Library::this();
    // SAFETY: the symbol is only used as an address, never called.
    let f = unsafe { this.get::<*const c_void>(b"hipGetDeviceCount\0") }.ok()?;
    object_of(f.into_raw() as *const c_void)
}

/// One candidate that did not give a usable library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub candidate: Candidate,
    /// "absent" or the loader's message.
    pub outcome: String,
}

impl std::fmt::Display for Attempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.candidate, self.outcome)
    }
}

fn list(attempts: &[Attempt]) -> String {
    attempts
        .iter()
        .map(Attempt::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why hipBLAS is not usable in this process.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error(
        "hipBLAS (libhipblas.so.3/.2/.1, the vendor BLAS of the dense path) not found; tried {}",
        list(.tried)
    )]
    NotFound { tried: Vec<Attempt> },
    #[error("hipBLAS at {} lacks `{symbol}` ({detail})", .path.display())]
    MissingSymbol {
        path: PathBuf,
        symbol: &'static str,
        detail: String,
    },
    #[error(
        "hipBLAS at {}: cannot tell which hipblasGemmEx ABI it has (no hipblasGemmEx_v2, major \
         version {major:?}); known: 0.x/1.x legacy, 2.x with _v2, 3.x and later",
        .path.display()
    )]
    UnknownAbi { path: PathBuf, major: Option<u32> },
    #[error(
        "hipBLAS at {} runs on the HIP runtime {theirs}, but the harness is linked to {ours}; \
         one process cannot mix two runtimes (build with HIP_PATH/ROCM_PATH of the ROCm that \
         holds this hipBLAS, or install the hipBLAS of the harness's ROCm)",
        .path.display()
    )]
    ForeignRuntime {
        path: PathBuf,
        ours: String,
        theirs: String,
    },
}

impl LoadError {
    /// The loud skip of a check that needs the dense path.
    pub fn skip(&self) -> Skip {
        Skip {
            requirement: Requirement::Gpu,
            reason: self.to_string(),
        }
    }

    /// The fault of a dense launch on `device`: a capability the machine lacks.
    pub fn fault(&self, device: String) -> DeviceFault {
        DeviceFault::MissingCapability {
            capability: Capability::VendorBlas,
            device,
            why: self.to_string(),
        }
    }
}
