//! The exported hipBLAS functions of the stand-in (`blas.rs`), with hipblas.h's prototypes:
//! exactly the ones the rocm backend resolves (`device/src/hipblas/symbols.rs`), plus
//! `w4a16HipBlasStandIn`, by which the backend tells the stand-in from a real hipBLAS.
//!
//! They live in the runtime library itself, so the GEMM reads the very memory `hipMalloc` handed
//! out: CI links `libhipblas.so.2` to this file (a symlink, never a copy — a copy would be a
//! second object with its own statics, its own empty device memory), and the dynamic loader
//! maps a file it has already mapped once. Both `hipblasGemmEx_v2` (`hipDataType`) and the plain
//! `hipblasGemmEx` (hipBLAS 2.x's legacy `hipblasDatatype_t`) are exported, as hipBLAS 2.x does,
//! so the backend picks `_v2` by the same rule it applies to AMD's library (`choose_gemm`).

use std::ffi::{c_char, c_int, c_void};

use crate::blas::{self, BlasError, BlasResult, GemmArgs, STAND_IN_DESCRIPTION, TypeAbi};
use crate::hipStream_t;

/// `hipblasHandle_t`.
pub type hipblasHandle_t = *mut c_void;

/// The status of `r`; a failure is also logged on stderr (the backend sees only the number).
fn status(call: &str, r: BlasResult<()>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("w4a16-hip-emu: {call}: {e}");
            e.code()
        }
    }
}

/// What this library is: a NUL-terminated static string naming it a stand-in.
#[unsafe(no_mangle)]
pub extern "C" fn w4a16HipBlasStandIn() -> *const c_char {
    STAND_IN_DESCRIPTION.as_ptr()
}

/// # Safety
/// `handle` must be null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipblasCreate(handle: *mut hipblasHandle_t) -> c_int {
    if handle.is_null() {
        return status(
            "hipblasCreate",
            Err(BlasError::HandleIsNullptr(
                "the handle pointer is null".into(),
            )),
        );
    }
    let device = crate::runtime().map(drop);
    status(
        "hipblasCreate",
        blas::create(device).map(|raw| {
            // SAFETY: non-null out-parameter (the caller's storage for a handle).
            unsafe { handle.write(raw as hipblasHandle_t) }
        }),
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn hipblasDestroy(handle: hipblasHandle_t) -> c_int {
    status("hipblasDestroy", blas::destroy(handle as usize))
}

#[unsafe(no_mangle)]
pub extern "C" fn hipblasSetStream(handle: hipblasHandle_t, stream: hipStream_t) -> c_int {
    let r = match crate::runtime() {
        Ok(rt) => blas::set_stream(&rt, handle as usize, stream as usize),
        Err(e) => Err(BlasError::NotInitialized(format!("no device: {e}"))),
    };
    status("hipblasSetStream", r)
}

#[unsafe(no_mangle)]
pub extern "C" fn hipblasSetPointerMode(handle: hipblasHandle_t, mode: c_int) -> c_int {
    status(
        "hipblasSetPointerMode",
        blas::set_pointer_mode(handle as usize, mode),
    )
}

#[unsafe(no_mangle)]
pub extern "C" fn hipblasSetAtomicsMode(handle: hipblasHandle_t, mode: c_int) -> c_int {
    status(
        "hipblasSetAtomicsMode",
        blas::set_atomics_mode(handle as usize, mode),
    )
}

/// # Safety
/// In host pointer mode `args.alpha`/`args.beta` must be null or readable f32s.
unsafe fn gemm(call: &str, handle: hipblasHandle_t, args: &GemmArgs, abi: TypeAbi) -> c_int {
    let r = match crate::runtime() {
        // SAFETY: forwarded from the caller.
        Ok(mut rt) => unsafe { blas::gemm(&mut rt, handle as usize, args, abi) },
        Err(e) => Err(BlasError::NotInitialized(format!("no device: {e}"))),
    };
    status(call, r)
}

/// `hipblasGemmEx_v2` (hipBLAS 2.x; `hipblasGemmEx` from 3.0): `hipDataType` data types and a
/// `hipblasComputeType_t`.
///
/// # Safety
/// As hipBLAS: host scalars readable in host pointer mode; operands are device addresses.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn hipblasGemmEx_v2(
    handle: hipblasHandle_t,
    trans_a: c_int,
    trans_b: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const c_void,
    a: *const c_void,
    a_type: c_int,
    lda: c_int,
    b: *const c_void,
    b_type: c_int,
    ldb: c_int,
    beta: *const c_void,
    c: *mut c_void,
    c_type: c_int,
    ldc: c_int,
    compute_type: c_int,
    algo: c_int,
) -> c_int {
    let args = GemmArgs {
        trans_a,
        trans_b,
        m,
        n,
        k,
        alpha,
        a: a as u64,
        a_type,
        lda,
        b: b as u64,
        b_type,
        ldb,
        beta,
        c: c as u64,
        c_type,
        ldc,
        compute_type,
        algo,
    };
    // SAFETY: forwarded from the caller.
    unsafe { gemm("hipblasGemmEx_v2", handle, &args, TypeAbi::HipDataType) }
}

/// hipBLAS 2.x's plain `hipblasGemmEx`: the legacy `hipblasDatatype_t` for the data and the
/// compute type.
///
/// # Safety
/// As [`hipblasGemmEx_v2`].
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn hipblasGemmEx(
    handle: hipblasHandle_t,
    trans_a: c_int,
    trans_b: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: *const c_void,
    a: *const c_void,
    a_type: c_int,
    lda: c_int,
    b: *const c_void,
    b_type: c_int,
    ldb: c_int,
    beta: *const c_void,
    c: *mut c_void,
    c_type: c_int,
    ldc: c_int,
    compute_type: c_int,
    algo: c_int,
) -> c_int {
    let args = GemmArgs {
        trans_a,
        trans_b,
        m,
        n,
        k,
        alpha,
        a: a as u64,
        a_type,
        lda,
        b: b as u64,
        b_type,
        ldb,
        beta,
        c: c as u64,
        c_type,
        ldc,
        compute_type,
        algo,
    };
    // SAFETY: forwarded from the caller.
    unsafe { gemm("hipblasGemmEx", handle, &args, TypeAbi::Legacy) }
}
