//! What hipBLAS is called through: its C constants, status codes, the table of entry points
//! (each with its prototype from the header) and which `hipblasGemmEx` ABI a library has.

use super::*;

/// `hipblasHandle_t`.
pub type RawHandle = *mut c_void;

/// The C constants passed to hipBLAS, each from the header named.
pub mod abi {
    use std::ffi::c_int;

    /// `hipblasOperation_t` (hipblas-common.h; hipblas.h before 2.2).
    pub const HIPBLAS_OP_N: c_int = 111;
    pub const HIPBLAS_OP_T: c_int = 112;
    /// `hipblasGemmAlgo_t` (hipblas.h).
    pub const HIPBLAS_GEMM_DEFAULT: c_int = 160;
    /// `hipblasPointerMode_t` (hipblas.h): alpha and beta are host scalars.
    pub const HIPBLAS_POINTER_MODE_HOST: c_int = 0;
    /// `hipblasAtomicsMode_t` (hipblas.h).
    pub const HIPBLAS_ATOMICS_NOT_ALLOWED: c_int = 0;

    /// `hipDataType` (hip/library_types.h), the data types of hipBLAS ≥ 2 with `HIPBLAS_V2`.
    pub const HIP_R_32F: c_int = 0;
    pub const HIP_R_16F: c_int = 2;
    pub const HIP_R_16BF: c_int = 14;
    /// `hipblasComputeType_t` (hipblas-common.h; hipblas.h in 2.0/2.1).
    pub const HIPBLAS_COMPUTE_32F: c_int = 2;

    /// The legacy `hipblasDatatype_t` (hipblas.h before 3.0, without `HIPBLAS_V2`), used for
    /// the data types *and* the compute type.
    pub const HIPBLAS_R_16F: c_int = 150;
    pub const HIPBLAS_R_32F: c_int = 151;
    pub const HIPBLAS_R_16B: c_int = 168;
}

// ---------------------------------------------------------------------------------------------
// Status codes

/// `hipblasStatus_t` (hipblas-common.h; the same values since hipBLAS 0.x).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Success,
    /// The handle is not a live library context.
    NotInitialized,
    /// A workspace allocation failed.
    AllocFailed,
    /// An argument (size, leading dimension, pointer) was refused.
    InvalidValue,
    /// Access to device memory failed.
    MappingError,
    /// The GPU program failed to execute.
    ExecutionFailed,
    InternalError,
    /// The function or this type combination is not implemented (for this device).
    NotSupported,
    /// The device's architecture is not supported by this build of the library.
    ArchMismatch,
    HandleIsNullptr,
    /// An enum argument had a value the library does not know.
    InvalidEnum,
    /// The backend returned a status hipBLAS could not convert.
    Unknown,
    /// A number outside the header (a newer library).
    Unrecognised(c_int),
}

/// What a status means for the case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusMeaning {
    Success,
    /// The device or library lacks the capability: a skip
    /// ([`DeviceFault::MissingCapability`]), never a fault.
    Unsupported,
    /// A failed call of this class (a refusal is [`FaultClass::Launch`]: nothing ran and the
    /// context is usable). hipBLAS never reports a sticky fault itself; the synchronisation
    /// after the call does.
    Fault(FaultClass),
}

impl Status {
    /// Every named status, in header order (values 0..=11).
    pub const KNOWN: [Status; 12] = [
        Status::Success,
        Status::NotInitialized,
        Status::AllocFailed,
        Status::InvalidValue,
        Status::MappingError,
        Status::ExecutionFailed,
        Status::InternalError,
        Status::NotSupported,
        Status::ArchMismatch,
        Status::HandleIsNullptr,
        Status::InvalidEnum,
        Status::Unknown,
    ];

    pub fn from_raw(raw: c_int) -> Status {
        usize::try_from(raw)
            .ok()
            .and_then(|i| Status::KNOWN.get(i).copied())
            .unwrap_or(Status::Unrecognised(raw))
    }

    pub fn raw(self) -> c_int {
        match self {
            Status::Unrecognised(raw) => raw,
            known => Status::KNOWN.iter().position(|s| *s == known).unwrap_or(0) as c_int,
        }
    }

    /// The header's name, or the number for one outside it.
    pub fn name(self) -> String {
        let n = match self {
            Status::Success => "HIPBLAS_STATUS_SUCCESS",
            Status::NotInitialized => "HIPBLAS_STATUS_NOT_INITIALIZED",
            Status::AllocFailed => "HIPBLAS_STATUS_ALLOC_FAILED",
            Status::InvalidValue => "HIPBLAS_STATUS_INVALID_VALUE",
            Status::MappingError => "HIPBLAS_STATUS_MAPPING_ERROR",
            Status::ExecutionFailed => "HIPBLAS_STATUS_EXECUTION_FAILED",
            Status::InternalError => "HIPBLAS_STATUS_INTERNAL_ERROR",
            Status::NotSupported => "HIPBLAS_STATUS_NOT_SUPPORTED",
            Status::ArchMismatch => "HIPBLAS_STATUS_ARCH_MISMATCH",
            Status::HandleIsNullptr => "HIPBLAS_STATUS_HANDLE_IS_NULLPTR",
            Status::InvalidEnum => "HIPBLAS_STATUS_INVALID_ENUM",
            Status::Unknown => "HIPBLAS_STATUS_UNKNOWN",
            Status::Unrecognised(raw) => return format!("hipblasStatus({raw})"),
        };
        n.to_string()
    }

    pub fn meaning(self) -> StatusMeaning {
        match self {
            Status::Success => StatusMeaning::Success,
            Status::NotSupported | Status::ArchMismatch => StatusMeaning::Unsupported,
            Status::InvalidValue | Status::InvalidEnum | Status::HandleIsNullptr => {
                StatusMeaning::Fault(FaultClass::Launch)
            }
            Status::AllocFailed => StatusMeaning::Fault(FaultClass::OutOfMemory),
            Status::NotInitialized
            | Status::MappingError
            | Status::ExecutionFailed
            | Status::InternalError
            | Status::Unknown
            | Status::Unrecognised(_) => StatusMeaning::Fault(FaultClass::Call),
        }
    }

    /// `Ok` on success, else the typed fault of a call made `during` something on `device`.
    pub fn check(self, during: &str, device: &str) -> Result<(), DeviceFault> {
        match self.meaning() {
            StatusMeaning::Success => Ok(()),
            StatusMeaning::Unsupported => Err(DeviceFault::MissingCapability {
                capability: Capability::VendorBlas,
                device: device.to_string(),
                why: format!("{during}: hipBLAS answered {}", self.name()),
            }),
            StatusMeaning::Fault(class) => {
                Err(DeviceFault::from_status(class, during, &self.name()))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The symbol table

/// The C function types, all returning `hipblasStatus_t` (a C `int`). Enum arguments are C
/// `int`s; handles, streams and data are pointers.
pub type CreateFn = unsafe extern "C" fn(*mut RawHandle) -> c_int;
pub type DestroyFn = unsafe extern "C" fn(RawHandle) -> c_int;
pub type SetStreamFn = unsafe extern "C" fn(RawHandle, *mut c_void) -> c_int;
pub type SetModeFn = unsafe extern "C" fn(RawHandle, c_int) -> c_int;
pub type GemmExFn = unsafe extern "C" fn(
    RawHandle,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const c_void,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    *mut c_void,
    c_int,
    c_int,
    c_int,
    c_int,
) -> c_int;

/// The sizes of a C function type's parameters, to check a Rust type against its prototype.
pub trait FnParams {
    const PARAM_SIZES: &'static [usize];
}

macro_rules! fn_params {
    ($($p:ident),*) => {
        impl<R, $($p),*> FnParams for unsafe extern "C" fn($($p),*) -> R {
            const PARAM_SIZES: &'static [usize] = &[$(std::mem::size_of::<$p>()),*];
        }
    };
}
fn_params!(A);
fn_params!(A, B);
fn_params!(A, B, C, D, E, F, G, H, I, J, K, L, M, N, O, P, Q, S, T);

/// One entry of the symbol table: the exported name, its prototype as the header declares it,
/// and the parameter sizes of the Rust type it is loaded as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: &'static str,
    pub prototype: &'static str,
    pub param_sizes: &'static [usize],
    /// Whether every supported hipBLAS exports it (the two GEMM names are alternatives).
    pub required: bool,
}

const fn sym<F: FnParams>(name: &'static str, prototype: &'static str, required: bool) -> Symbol {
    Symbol {
        name,
        prototype,
        param_sizes: F::PARAM_SIZES,
        required,
    }
}

pub const CREATE: Symbol = sym::<CreateFn>(
    "hipblasCreate",
    "hipblasStatus_t hipblasCreate(hipblasHandle_t* handle)",
    true,
);
pub const DESTROY: Symbol = sym::<DestroyFn>(
    "hipblasDestroy",
    "hipblasStatus_t hipblasDestroy(hipblasHandle_t handle)",
    true,
);
pub const SET_STREAM: Symbol = sym::<SetStreamFn>(
    "hipblasSetStream",
    "hipblasStatus_t hipblasSetStream(hipblasHandle_t handle, hipStream_t streamId)",
    true,
);
pub const SET_POINTER_MODE: Symbol = sym::<SetModeFn>(
    "hipblasSetPointerMode",
    "hipblasStatus_t hipblasSetPointerMode(hipblasHandle_t handle, hipblasPointerMode_t mode)",
    true,
);
pub const SET_ATOMICS_MODE: Symbol = sym::<SetModeFn>(
    "hipblasSetAtomicsMode",
    "hipblasStatus_t hipblasSetAtomicsMode(hipblasHandle_t handle, hipblasAtomicsMode_t atomics_mode)",
    true,
);
/// hipBLAS 2.x's GEMM with `hipDataType`/`hipblasComputeType_t` (`HIPBLAS_V2`).
pub const GEMM_EX_V2: Symbol = sym::<GemmExFn>(
    "hipblasGemmEx_v2",
    "hipblasStatus_t hipblasGemmEx_v2(hipblasHandle_t handle, hipblasOperation_t transA, \
     hipblasOperation_t transB, int m, int n, int k, const void* alpha, const void* A, \
     hipDataType aType, int lda, const void* B, hipDataType bType, int ldb, const void* beta, \
     void* C, hipDataType cType, int ldc, hipblasComputeType_t computeType, \
     hipblasGemmAlgo_t algo)",
    false,
);
/// The plain name, prototype as of hipBLAS 3 (the `GEMM_EX_V2` signature); before 3.0 the
/// legacy one, every type a `hipblasDatatype_t` (a C enum too, so the same Rust type).
pub const GEMM_EX: Symbol = sym::<GemmExFn>(
    "hipblasGemmEx",
    "hipblasStatus_t hipblasGemmEx(hipblasHandle_t handle, hipblasOperation_t transA, \
     hipblasOperation_t transB, int m, int n, int k, const void* alpha, const void* A, \
     hipDataType aType, int lda, const void* B, hipDataType bType, int ldb, const void* beta, \
     void* C, hipDataType cType, int ldc, hipblasComputeType_t computeType, \
     hipblasGemmAlgo_t algo)",
    false,
);

/// Everything the binding loads.
pub const SYMBOLS: [Symbol; 7] = [
    CREATE,
    DESTROY,
    SET_STREAM,
    SET_POINTER_MODE,
    SET_ATOMICS_MODE,
    GEMM_EX_V2,
    GEMM_EX,
];

/// The resolved entry points (valid while the library stays loaded: it is never unloaded).
#[derive(Clone, Copy)]
pub(super) struct Api {
    pub(super) create: CreateFn,
    pub(super) destroy: DestroyFn,
    pub(super) set_stream: SetStreamFn,
    pub(super) set_pointer_mode: SetModeFn,
    pub(super) set_atomics_mode: SetModeFn,
    pub(super) gemm_ex: GemmExFn,
}

// ---------------------------------------------------------------------------------------------
// Which GEMM ABI

/// The types `hipblasGemmEx` takes for its data and compute type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmAbi {
    /// `hipDataType` data, `hipblasComputeType_t` compute (hipBLAS ≥ 2 `_v2`, ≥ 3 plain).
    HipDataType,
    /// `hipblasDatatype_t` for both (hipBLAS before 2.0; 2.x's plain name).
    Legacy,
}

/// The (data type, compute type) codes of one activation dtype with fp32 compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmTypes {
    pub data: c_int,
    pub compute: c_int,
}

impl GemmAbi {
    pub fn types(self, dtype: ActDtype) -> GemmTypes {
        match (self, dtype) {
            (GemmAbi::HipDataType, ActDtype::F16) => GemmTypes {
                data: abi::HIP_R_16F,
                compute: abi::HIPBLAS_COMPUTE_32F,
            },
            (GemmAbi::HipDataType, ActDtype::Bf16) => GemmTypes {
                data: abi::HIP_R_16BF,
                compute: abi::HIPBLAS_COMPUTE_32F,
            },
            (GemmAbi::Legacy, ActDtype::F16) => GemmTypes {
                data: abi::HIPBLAS_R_16F,
                compute: abi::HIPBLAS_R_32F,
            },
            (GemmAbi::Legacy, ActDtype::Bf16) => GemmTypes {
                data: abi::HIPBLAS_R_16B,
                compute: abi::HIPBLAS_R_32F,
            },
        }
    }
}

/// The GEMM symbol and its ABI for a library that does (or does not) export
/// `hipblasGemmEx_v2` and whose file is version `major` (`None`: unknown).
pub fn choose_gemm(has_v2: bool, major: Option<u32>) -> Option<(Symbol, GemmAbi)> {
    match (has_v2, major) {
        (true, _) => Some((GEMM_EX_V2, GemmAbi::HipDataType)),
        (false, Some(m)) if m >= 3 => Some((GEMM_EX, GemmAbi::HipDataType)),
        (false, Some(0 | 1)) => Some((GEMM_EX, GemmAbi::Legacy)),
        // 2.x always exports `_v2`; one that does not, or an unknown version, is not placed.
        _ => None,
    }
}

/// The major version of `libhipblas.so.<major>[.…]` (the real file, symlinks resolved).
pub fn soname_major(file: &Path) -> Option<u32> {
    let name = file.file_name()?.to_str()?;
    let rest = name.strip_prefix("libhipblas.so.")?;
    rest.split('.').next()?.parse().ok()
}
