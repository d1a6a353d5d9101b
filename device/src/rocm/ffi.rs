//! The HIP runtime API the backend calls, declared here (hip-sys provides the types; these
//! prototypes follow hip_runtime_api.h).

use super::*;
pub type hipStream_t = *mut c_void;
pub type hipModule_t = *mut c_void;
pub type hipFunction_t = *mut c_void;
pub type hipEvent_t = *mut c_void;

pub const HIP_MEMCPY_HOST_TO_DEVICE: c_int = 1;
pub const HIP_MEMCPY_DEVICE_TO_HOST: c_int = 2;
pub const HIP_MEMCPY_DEVICE_TO_DEVICE: c_int = 3;
/// `HIP_LAUNCH_PARAM_*` of hip_runtime_api.h (macros, so not in the bindings).
pub const LAUNCH_PARAM_BUFFER_POINTER: usize = 0x01;
pub const LAUNCH_PARAM_BUFFER_SIZE: usize = 0x02;
pub const LAUNCH_PARAM_END: usize = 0x03;

unsafe extern "C" {
    pub fn hipGetDeviceCount(count: *mut c_int) -> c_int;
    pub fn hipGetDeviceProperties(prop: *mut c_void, device: c_int) -> c_int;
    pub fn hipSetDevice(device: c_int) -> c_int;
    pub fn hipStreamCreate(stream: *mut hipStream_t) -> c_int;
    pub fn hipStreamDestroy(stream: hipStream_t) -> c_int;
    pub fn hipMalloc(ptr: *mut *mut c_void, size: usize) -> c_int;
    pub fn hipFree(ptr: *mut c_void) -> c_int;
    pub fn hipMemcpy(dst: *mut c_void, src: *const c_void, bytes: usize, kind: c_int) -> c_int;
    pub fn hipMemcpyAsync(
        dst: *mut c_void,
        src: *const c_void,
        bytes: usize,
        kind: c_int,
        stream: hipStream_t,
    ) -> c_int;
    pub fn hipModuleLoadData(module: *mut hipModule_t, image: *const c_void) -> c_int;
    pub fn hipModuleUnload(module: hipModule_t) -> c_int;
    pub fn hipModuleGetFunction(
        f: *mut hipFunction_t,
        module: hipModule_t,
        name: *const c_char,
    ) -> c_int;
    #[allow(clippy::too_many_arguments)]
    pub fn hipModuleLaunchKernel(
        f: hipFunction_t,
        gx: c_uint,
        gy: c_uint,
        gz: c_uint,
        bx: c_uint,
        by: c_uint,
        bz: c_uint,
        shared: c_uint,
        stream: hipStream_t,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) -> c_int;
    pub fn hipGetLastError() -> c_int;
    pub fn hipEventCreate(event: *mut hipEvent_t) -> c_int;
    pub fn hipEventRecord(event: hipEvent_t, stream: hipStream_t) -> c_int;
    pub fn hipEventQuery(event: hipEvent_t) -> c_int;
    pub fn hipEventElapsedTime(ms: *mut f32, start: hipEvent_t, end: hipEvent_t) -> c_int;
    pub fn hipEventDestroy(event: hipEvent_t) -> c_int;
}
