//! An emulated HIP runtime: a `libamdhip64.so.5` in place of AMD's, whose one device is the ISA
//! emulator (`w4a16-emu`) running the real gfx code objects. With it on `LD_LIBRARY_PATH`, the
//! harness's `rocm` backend (`device/src/rocm.rs`) runs its whole host path — device discovery,
//! code-object loading, the launch ABI through `HIP_LAUNCH_PARAM_BUFFER_POINTER`, copies,
//! events, error mapping — on a machine without an AMD GPU, so CI exercises that code rather than
//! skipping it (docs/hip-emu.md).
//!
//! It exports exactly the HIP functions the backend calls, with their C prototypes and the
//! `hip_4.2` symbol version the real library gives them (`hip_4.2.map`, linked by `build.rs`
//! with the soname `libamdhip64.so.5`), following HIP's documented semantics: every misuse
//! returns HIP's status code and is remembered for `hipGetLastError`. It proves the host path,
//! not a GPU: real scheduling, caches and the driver are not exercised, and the clock events read
//! is a model (`runtime.rs`).
//!
//! It also exports a hipBLAS stand-in (`blas.rs`, `hipblas.rs`): the dense path's GEMM computed
//! on the host over this runtime's memory, found by the backend's hipBLAS search through a
//! `libhipblas.so.2` symlink to this file, and named a stand-in in every report.
//!
//! Inside, every operation returns `Result<_, HipError>` (`error.rs`); the exported functions
//! below only check pointers, take the lock, and turn the result into the status.

#![allow(non_snake_case, non_camel_case_types)]

pub mod blas;
pub mod error;
pub mod hipblas;
pub mod launch;
pub mod module;
pub mod props;
pub mod runtime;

use std::cell::Cell;
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::sync::{Mutex, MutexGuard, OnceLock};

use error::{HipError, HipResult};
use runtime::Runtime;

pub type hipStream_t = *mut c_void;
pub type hipModule_t = *mut c_void;
pub type hipFunction_t = *mut c_void;
pub type hipEvent_t = *mut c_void;

thread_local! {
    /// The last error a call of this thread returned (HIP keeps it per thread).
    static LAST: Cell<c_int> = const { Cell::new(0) };
}

static RUNTIME: OnceLock<Result<Mutex<Runtime>, HipError>> = OnceLock::new();

/// The one device, created on first use from the environment (`runtime::configured`).
pub(crate) fn runtime() -> HipResult<MutexGuard<'static, Runtime>> {
    let rt = RUNTIME.get_or_init(|| {
        runtime::configured().map(|(machine, bytes)| Mutex::new(Runtime::new(machine, bytes)))
    });
    match rt {
        Ok(m) => Ok(m.lock().unwrap_or_else(|p| p.into_inner())),
        Err(e) => Err(e.clone()),
    }
}

/// The status of `r`, remembered for `hipGetLastError` when it is an error.
fn status(r: HipResult<()>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            let code = e.code();
            LAST.with(|l| l.set(code));
            code
        }
    }
}

/// `out` must not be null; the value is written through it on success.
fn put<T>(out: *mut T, what: &str, value: impl FnOnce() -> HipResult<T>) -> c_int {
    if out.is_null() {
        return status(Err(HipError::InvalidValue(format!("{what} is null"))));
    }
    status(value().map(|v| {
        // SAFETY: non-null out-parameter (the caller's storage for a T, as HIP demands).
        unsafe { out.write(v) }
    }))
}

fn ordinal(device: c_int) -> HipResult<()> {
    if device == 0 {
        Ok(())
    } else {
        Err(HipError::InvalidDevice(format!(
            "device {device}: the emulated runtime has one device, 0"
        )))
    }
}

/// A description of this runtime (a NUL-terminated static string), exported so that a caller
/// can tell it from AMD's runtime: the rocm backend labels its reports with it.
#[unsafe(no_mangle)]
pub extern "C" fn w4a16HipEmuDescribe() -> *const c_char {
    c"w4a16 emulated HIP runtime over the ISA emulator".as_ptr()
}

#[unsafe(no_mangle)]
pub extern "C" fn hipGetDeviceCount(count: *mut c_int) -> c_int {
    put(count, "count", || runtime().map(|_| 1))
}

/// # Safety
/// `prop` must point to writable storage of at least `hipDeviceProp_t`'s 792 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipGetDeviceProperties(prop: *mut c_void, device: c_int) -> c_int {
    put(prop.cast::<props::DeviceProp>(), "prop", || {
        ordinal(device)?;
        let rt = runtime()?;
        Ok(props::describe(rt.machine, rt.memory_bytes))
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipSetDevice(device: c_int) -> c_int {
    status(runtime().and_then(|_| ordinal(device)))
}

/// # Safety
/// `stream` must be null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamCreate(stream: *mut hipStream_t) -> c_int {
    put(stream, "stream", || {
        runtime()?.stream_create().map(|h| h as hipStream_t)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipStreamDestroy(stream: hipStream_t) -> c_int {
    status(runtime().and_then(|mut rt| rt.stream_destroy(stream as usize)))
}

/// # Safety
/// `ptr` must be null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipMalloc(ptr: *mut *mut c_void, size: usize) -> c_int {
    put(ptr, "ptr", || {
        runtime()?.malloc(size).map(|a| a as *mut c_void)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipFree(ptr: *mut c_void) -> c_int {
    status(runtime().and_then(|mut rt| rt.free(ptr as u64)))
}

/// # Safety
/// The host side(s) of the copy must be valid for `bytes` (HIP's own requirement).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipMemcpy(
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: c_int,
) -> c_int {
    // SAFETY: forwarded from the caller.
    status(runtime().and_then(|mut rt| unsafe { rt.memcpy(dst as u64, src as u64, bytes, kind) }))
}

/// # Safety
/// As [`hipMemcpy`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: c_int,
    stream: hipStream_t,
) -> c_int {
    status(runtime().and_then(|mut rt| {
        // SAFETY: forwarded from the caller.
        unsafe { rt.memcpy_async(dst as u64, src as u64, bytes, kind, stream as usize) }
    }))
}

/// # Safety
/// `image` must point to a whole code object (HIP reads its length from its ELF header).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipModuleLoadData(
    module: *mut hipModule_t,
    image: *const c_void,
) -> c_int {
    put(module, "module", || {
        if image.is_null() {
            return Err(HipError::InvalidValue("image is null".into()));
        }
        // SAFETY: an ELF image (caller); its length comes from its header.
        let len = unsafe { module::image_len(image.cast()) }?;
        // SAFETY: the image is `len` bytes long (its header says so).
        let bytes = unsafe { std::slice::from_raw_parts(image.cast::<u8>(), len) };
        runtime()?.module_load(bytes).map(|h| h as hipModule_t)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipModuleUnload(module: hipModule_t) -> c_int {
    status(runtime().and_then(|mut rt| rt.module_unload(module as usize)))
}

/// # Safety
/// `name` must be null or a NUL-terminated string; `f` null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipModuleGetFunction(
    f: *mut hipFunction_t,
    module: hipModule_t,
    name: *const c_char,
) -> c_int {
    put(f, "function", || {
        if name.is_null() {
            return Err(HipError::InvalidValue("kernel name is null".into()));
        }
        // SAFETY: NUL-terminated (caller).
        let name = unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned();
        runtime()?
            .module_function(module as usize, &name)
            .map(|h| h as hipFunction_t)
    })
}

/// # Safety
/// `kernel_params` / `extra` as HIP demands (`launch::arguments`).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn hipModuleLaunchKernel(
    f: hipFunction_t,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    shared: c_uint,
    stream: hipStream_t,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> c_int {
    let dims = w4a16_emu::dispatch::Dims {
        grid: [gx, gy, gz],
        block: [bx, by, bz],
        dynamic_lds: shared,
    };
    status(runtime().and_then(|mut rt| {
        rt.launch(f as usize, &dims, stream as usize, |info| {
            // SAFETY: forwarded from the caller.
            unsafe { launch::arguments(info, kernel_params, extra) }
        })
    }))
}

/// The last error of this thread's calls, reset to `hipSuccess` by reading it.
#[unsafe(no_mangle)]
pub extern "C" fn hipGetLastError() -> c_int {
    LAST.with(|l| l.replace(0))
}

/// # Safety
/// `event` must be null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipEventCreate(event: *mut hipEvent_t) -> c_int {
    put(event, "event", || {
        runtime()?.event_create().map(|h| h as hipEvent_t)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipEventRecord(event: hipEvent_t, stream: hipStream_t) -> c_int {
    status(runtime().and_then(|mut rt| rt.event_record(event as usize, stream as usize)))
}

#[unsafe(no_mangle)]
pub extern "C" fn hipEventQuery(event: hipEvent_t) -> c_int {
    status(runtime().and_then(|rt| rt.event_query(event as usize)))
}

/// # Safety
/// `ms` must be null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipEventElapsedTime(
    ms: *mut f32,
    start: hipEvent_t,
    end: hipEvent_t,
) -> c_int {
    put(ms, "ms", || {
        runtime()?.event_elapsed(start as usize, end as usize)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn hipEventDestroy(event: hipEvent_t) -> c_int {
    status(runtime().and_then(|mut rt| rt.event_destroy(event as usize)))
}
