//! The ROCm backend (cargo feature `rocm`) on `hip-sys`: the HIP runtime of an installed ROCm or
//! of Debian's `libamdhip64`.
//!
//! One device, one stream. Kernels are not compiled at run time: the code object for the
//! device's gfx target comes from the build cache of `w4a16_kernels::amd` (built on first use
//! when a toolchain is present), is checked against the Rust declaration with the same
//! launch-ABI check the CI runs, and is launched with the declaration-packed kernel-argument
//! buffer (`HIP_LAUNCH_PARAM_BUFFER_POINTER`). Every runtime call is checked and classified like
//! the CUDA backend's; a sticky fault or a watchdog timeout leaves the device lost. The dense
//! path runs in hipBLAS, loaded at run time (`hipblas.rs`): without it that path is a loud
//! `MissingCapability` (a SKIP) naming the library, and everything else works.
//!
//! The runtime functions are declared here with plain `int` status returns: hip-sys returns a
//! Rust enum generated from HIP 5.4, and a newer runtime's status code outside that list would
//! be undefined behaviour. hip-sys still provides the link to `libamdhip64` (its build script
//! looks under `$HIP_PATH`, `$ROCM_PATH`, `/opt/rocm`; Debian needs `HIP_PATH=/usr`) and the
//! `hipDeviceProp_t` layout.

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hip_sys::hiprt::hipDeviceProp_t;
use w4a16_kernels::decl::LaunchGeometry;
use w4a16_kernels::source::KernelSources;
use w4a16_kernels::{KernelDecl, KernelId, Target};

pub use super::amd_code::code_object_for;
use super::hipblas::{BlasHandle, HipBlas};
use super::{
    BlasGemm, DeviceFault, DeviceInfo, DeviceKind, FaultClass, Health, ReferenceOffload, Runtime,
    skip, watchdog_timeout,
};
use crate::fault::UnknownArch;
use crate::input_cache::{InputCache, MIN_CACHED_BYTES};
use crate::launch::PackedArgs;
use w4a16_codeobject::{self as codeobject, abi};
use w4a16_require::{Requirement, Skip};

#[allow(non_camel_case_types)]
mod ffi;

const HIP_SUCCESS: c_int = 0;
const HIP_ERROR_NOT_READY: c_int = 600;
const HIP_ERROR_NO_DEVICE: c_int = 100;

/// Status names, without asking the runtime (which may be absent or wedged).
const STATUS_NAMES: &[(c_int, &str)] = &[
    (0, "hipSuccess"),
    (1, "hipErrorInvalidValue"),
    (2, "hipErrorOutOfMemory"),
    (3, "hipErrorNotInitialized"),
    (4, "hipErrorDeinitialized"),
    (9, "hipErrorInvalidConfiguration"),
    (17, "hipErrorInvalidDevicePointer"),
    (35, "hipErrorInsufficientDriver"),
    (53, "hipErrorPriorLaunchFailure"),
    (98, "hipErrorInvalidDeviceFunction"),
    (100, "hipErrorNoDevice"),
    (101, "hipErrorInvalidDevice"),
    (200, "hipErrorInvalidImage"),
    (201, "hipErrorInvalidContext"),
    (209, "hipErrorNoBinaryForGpu"),
    (214, "hipErrorECCNotCorrectable"),
    (218, "hipErrorInvalidKernelFile"),
    (302, "hipErrorSharedObjectSymbolNotFound"),
    (400, "hipErrorInvalidHandle"),
    (500, "hipErrorNotFound"),
    (600, "hipErrorNotReady"),
    (700, "hipErrorIllegalAddress"),
    (701, "hipErrorLaunchOutOfResources"),
    (702, "hipErrorLaunchTimeOut"),
    (709, "hipErrorContextIsDestroyed"),
    (710, "hipErrorAssert"),
    (719, "hipErrorLaunchFailure"),
    (720, "hipErrorCooperativeLaunchTooLarge"),
    (801, "hipErrorNotSupported"),
    (999, "hipErrorUnknown"),
    (1052, "hipErrorRuntimeMemory"),
    (1053, "hipErrorRuntimeOther"),
];

pub fn code_name(code: c_int) -> String {
    STATUS_NAMES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or_else(|| format!("hipError({code})"), |(_, n)| (*n).to_string())
}

/// What a HIP status means for the case and the device (same classes as the CUDA backend).
pub fn classify(code: c_int) -> FaultClass {
    match code {
        // illegal address, assert, launch failure (a device trap), and ROCm 6's
        // illegal-instruction / misaligned / address-space / pc codes (715..718)
        700 | 702 | 710 | 714..=719 => FaultClass::Sticky,
        3 | 4 | 35 | 100 | 101 | 201 | 214 | 709 | 999 => FaultClass::Fatal,
        1 | 9 | 98 | 200 | 209 | 218 | 302 | 400 | 500 | 701 | 720 => FaultClass::Launch,
        2 => FaultClass::OutOfMemory,
        _ => FaultClass::Call,
    }
}

/// The harness target of a `gcnArchName` such as `gfx1151:sramecc-:xnack-`.
pub fn target_for_arch(gcn_arch_name: &str) -> Result<Target, UnknownArch> {
    let gfx = gcn_arch_name.split(':').next().unwrap_or("").trim();
    match Target::parse(gfx) {
        Some(t) if t.vendor() == w4a16_kernels::target::Vendor::Amd => Ok(t),
        _ => {
            let known: Vec<&str> = Target::ALL
                .iter()
                .filter(|t| t.vendor() == w4a16_kernels::target::Vendor::Amd)
                .map(|t| t.name())
                .collect();
            Err(UnknownArch::GcnArch {
                gcn_arch_name: gcn_arch_name.to_string(),
                known: known.join(", "),
            })
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

type Lost = Arc<Mutex<Option<String>>>;

/// A device allocation; freed on drop unless the device was lost.
pub struct RocmBuffer {
    ptr: *mut c_void,
    bytes: usize,
    lost: Lost,
}

// SAFETY: a device address is not tied to the allocating thread; HIP frees from any thread.
unsafe impl Send for RocmBuffer {}

impl std::fmt::Debug for RocmBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RocmBuffer({} bytes)", self.bytes)
    }
}

impl Drop for RocmBuffer {
    fn drop(&mut self) {
        if lock(&self.lost).is_none() && !self.ptr.is_null() {
            // SAFETY: `ptr` came from hipMalloc and is freed once.
            unsafe { ffi::hipFree(self.ptr) };
        }
    }
}

/// A timing event on the device's stream.
pub struct RocmEvent {
    ev: ffi::hipEvent_t,
}

impl Drop for RocmEvent {
    fn drop(&mut self) {
        // SAFETY: created by hipEventCreate, destroyed once.
        unsafe { ffi::hipEventDestroy(self.ev) };
    }
}

struct Module {
    handle: ffi::hipModule_t,
    info: codeobject::CodeObjectInfo,
    path: PathBuf,
    /// Kept alive for the module's lifetime (the runtime may read the image lazily).
    _image: Vec<u8>,
}

/// One AMD GPU with its stream and loaded code objects.
pub struct RocmDevice {
    ordinal: c_int,
    name: String,
    arch_name: String,
    target: Target,
    watchdog: Duration,
    stream: ffi::hipStream_t,
    /// Loaded modules by kernel, not by source file: `fused` and `fused_carrier` are one source
    /// built twice (with and without its switch), two code objects.
    modules: Mutex<HashMap<KernelId, Module>>,
    functions: Mutex<HashMap<String, usize>>,
    /// The hipBLAS handle on `stream`, created on the first dense GEMM.
    blas: Mutex<Option<BlasHandle>>,
    lost: Lost,
    /// Where the code objects' sources come from.
    sources: KernelSources,
    /// Pristine copies of launch inputs by content (`input_cache.rs`).
    inputs: Mutex<InputCache<RocmBuffer>>,
}

/// A worker's pristine input copies on an AMD GPU: small, since a gfx1201 card has 16 GB for
/// every worker; a field layer's packed weights (≤ 75 MB) and X fit.
const ROCM_INPUT_CACHE_BYTES: usize = 512 << 20;

// SAFETY: HIP runtime handles (stream, modules, functions) may be used from any thread; the
// current device is set per call (`bind`), and the maps are behind mutexes.
unsafe impl Send for RocmDevice {}
// SAFETY: as above.
unsafe impl Sync for RocmDevice {}

/// Reads `gcnArchName` through an oversized buffer, so a runtime whose `hipDeviceProp_t` grew
/// past the bindings' layout cannot write out of bounds.
fn device_names(ordinal: c_int) -> Result<(String, String), c_int> {
    #[repr(C, align(16))]
    struct Props([u8; 16384]);
    const _: () = assert!(std::mem::size_of::<hipDeviceProp_t>() <= 16384);
    let mut props = Box::new(Props([0; 16384]));
    // SAFETY: the buffer is larger than any hipDeviceProp_t and suitably aligned.
    let rc = unsafe { ffi::hipGetDeviceProperties(props.0.as_mut_ptr().cast(), ordinal) };
    if rc != HIP_SUCCESS {
        return Err(rc);
    }
    let cstr_at = |off: usize| -> String {
        let bytes = &props.0[off..(off + 256).min(props.0.len())];
        CStr::from_bytes_until_nul(bytes)
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let name = cstr_at(std::mem::offset_of!(hipDeviceProp_t, name));
    let mut arch = cstr_at(std::mem::offset_of!(hipDeviceProp_t, gcnArchName));
    if !arch.starts_with("gfx") {
        // A runtime with another layout: find the arch string itself.
        arch = props
            .0
            .windows(3)
            .position(|w| w == b"gfx")
            .map(cstr_at)
            .unwrap_or_default();
    }
    Ok((name, arch))
}

/// Whether the HIP runtime in this process is the harness's emulated one (`hip-emu/`, found by
/// the symbol only it exports), so reports can say the verdicts came from the rocm backend on an
/// emulated runtime rather than from an AMD GPU.
pub fn on_emulated_runtime() -> bool {
    let this = libloading::os::unix::Library::this();
    // SAFETY: only the symbol's presence is asked; it is never called here.
    unsafe { this.get::<*const c_void>(b"w4a16HipEmuDescribe\0") }.is_ok()
}

/// The AMD devices the HIP runtime sees (`HIP_VISIBLE_DEVICES` applied); none is `Ok(0)`, a
/// failing runtime a skip naming its status.
pub fn device_count() -> Result<usize, Skip> {
    let mut count: c_int = 0;
    // SAFETY: plain out-parameter call.
    let rc = unsafe { ffi::hipGetDeviceCount(&mut count) };
    if rc == HIP_ERROR_NO_DEVICE {
        return Ok(0);
    }
    if rc != HIP_SUCCESS {
        return Err(skip(
            Requirement::Gpu,
            format!(
                "no AMD device: hipGetDeviceCount failed with {}",
                code_name(rc)
            ),
        ));
    }
    Ok(usize::try_from(count).unwrap_or(0))
}

impl RocmDevice {
    /// Device `ordinal` with the embedded kernels, as its concrete type: for this backend's own
    /// tests (its loader, its hipBLAS path); everything else opens through `crate::open`.
    pub fn open(ordinal: usize) -> Result<RocmDevice, Skip> {
        RocmDevice::open_with(ordinal, KernelSources::Embedded)
    }

    /// Device `ordinal`, building its code objects from `sources`.
    pub(crate) fn open_with(ordinal: usize, sources: KernelSources) -> Result<RocmDevice, Skip> {
        let count = device_count()?;
        if count == 0 {
            return Err(skip(
                Requirement::Gpu,
                "no AMD device (the HIP runtime reports none)",
            ));
        }
        if ordinal >= count {
            return Err(skip(
                Requirement::Gpu,
                format!("no AMD device {ordinal} ({count} present)"),
            ));
        }
        let ord = ordinal as c_int;
        let fail = |what: &str, rc: c_int| {
            skip(
                Requirement::Gpu,
                format!("AMD device {ordinal}: {what} failed with {}", code_name(rc)),
            )
        };
        let (name, arch_name) =
            device_names(ord).map_err(|rc| fail("hipGetDeviceProperties", rc))?;
        let target = target_for_arch(&arch_name).map_err(|why| {
            skip(
                Requirement::Gpu,
                format!("AMD device {ordinal} ({name}): {why}"),
            )
        })?;
        // SAFETY: valid ordinal (checked above).
        let rc = unsafe { ffi::hipSetDevice(ord) };
        if rc != HIP_SUCCESS {
            return Err(fail("hipSetDevice", rc));
        }
        let mut stream: ffi::hipStream_t = std::ptr::null_mut();
        // SAFETY: out-parameter; the stream is destroyed in Drop.
        let rc = unsafe { ffi::hipStreamCreate(&mut stream) };
        if rc != HIP_SUCCESS {
            return Err(fail("hipStreamCreate", rc));
        }
        Ok(RocmDevice {
            ordinal: ord,
            name,
            arch_name,
            target,
            watchdog: watchdog_timeout(),
            stream,
            modules: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
            blas: Mutex::new(None),
            lost: Arc::new(Mutex::new(None)),
            sources,
            inputs: Mutex::new(InputCache::new(ROCM_INPUT_CACHE_BYTES, MIN_CACHED_BYTES)),
        })
    }

    /// The runtime's full architecture name, target features included.
    pub fn arch_name(&self) -> &str {
        &self.arch_name
    }

    /// Loads `entry`'s code object and checks its argument metadata against the declaration,
    /// without launching (what a runner does up front to fail fast on a wrong build).
    pub fn load(&self, kernel: &KernelDecl, entry: &str) -> Result<(), DeviceFault> {
        self.bind(&format!("loading {entry}"))?;
        self.function(kernel, entry).map(|_| ())
    }

    fn mark_lost(&self, cause: String) {
        lock(&self.lost).get_or_insert(cause);
    }

    /// The fault for a failed call; sticky and fatal ones take the device down.
    fn fault(&self, rc: c_int, during: &str) -> DeviceFault {
        let class = classify(rc);
        let code = code_name(rc);
        if matches!(class, FaultClass::Sticky | FaultClass::Fatal) {
            self.mark_lost(format!("{code} during {during}"));
        }
        DeviceFault::from_status(class, during, &code)
    }

    fn check(&self, rc: c_int, during: &str) -> Result<(), DeviceFault> {
        if rc == HIP_SUCCESS {
            Ok(())
        } else {
            Err(self.fault(rc, during))
        }
    }

    /// Refuses work on a lost device and makes this device current for the calling thread.
    fn bind(&self, during: &str) -> Result<(), DeviceFault> {
        if let Health::Lost { cause } = self.health() {
            return Err(DeviceFault::ContextLost { cause });
        }
        // SAFETY: ordinal validated at open.
        self.check(unsafe { ffi::hipSetDevice(self.ordinal) }, during)
    }

    /// The function `entry` of `kernel`, loading its code object on first use and refusing
    /// entries whose argument metadata disagrees with the declaration.
    fn function(
        &self,
        kernel: &KernelDecl,
        entry: &str,
    ) -> Result<ffi::hipFunction_t, DeviceFault> {
        if let Some(f) = lock(&self.functions).get(entry) {
            return Ok(*f as ffi::hipFunction_t);
        }
        let file = kernel.source_file.ok_or_else(|| DeviceFault::Unsupported {
            what: format!("a kernel launch of {} (it has no source file)", kernel.id),
            device: self.name(),
        })?;
        let mut modules = lock(&self.modules);
        if let std::collections::hash_map::Entry::Vacant(slot) = modules.entry(kernel.id) {
            slot.insert(self.load_module(kernel, file)?);
        }
        let m = &modules[&kernel.id];
        let refused = |code: String, detail: String| DeviceFault::Launch {
            kernel: entry.to_string(),
            code,
            detail,
        };
        let info = m.info.kernel(entry).ok_or_else(|| {
            refused(
                "entry point not found".into(),
                format!("{} has no kernel {entry}", m.path.display()),
            )
        })?;
        abi::check(entry, self.target.name(), kernel.args, info)
            .map_err(|e| refused("launch ABI mismatch".into(), e.to_string()))?;
        let cname = std::ffi::CString::new(entry)
            .map_err(|_| refused("invalid entry name".into(), String::new()))?;
        let mut f: ffi::hipFunction_t = std::ptr::null_mut();
        // SAFETY: live module, NUL-terminated name, out-parameter.
        let rc = unsafe { ffi::hipModuleGetFunction(&mut f, m.handle, cname.as_ptr()) };
        if rc != HIP_SUCCESS {
            return Err(
                match self.fault(rc, &format!("loading `{entry}` from {file}")) {
                    DeviceFault::Launch { code, .. } => refused(
                        code,
                        format!("hipModuleGetFunction in {}", m.path.display()),
                    ),
                    other => other,
                },
            );
        }
        lock(&self.functions).insert(entry.to_string(), f as usize);
        Ok(f)
    }

    fn load_module(&self, kernel: &KernelDecl, file: &'static str) -> Result<Module, DeviceFault> {
        let path = code_object_for(kernel, self.target, &self.sources)?;
        let compile_fault = |log: String| DeviceFault::Compile {
            source_file: file.to_string(),
            arch: self.target.name().to_string(),
            log,
        };
        let image = std::fs::read(&path)
            .map_err(|e| compile_fault(format!("reading {}: {e}", path.display())))?;
        let info = codeobject::parse(&image)
            .map_err(|e| compile_fault(format!("{}: {e}", path.display())))?;
        if info.gfx() != self.target.name() {
            return Err(compile_fault(format!(
                "{} is for {}, the device is {}",
                path.display(),
                info.gfx(),
                self.target
            )));
        }
        self.bind(&format!("loading {}", path.display()))?;
        let mut handle: ffi::hipModule_t = std::ptr::null_mut();
        // SAFETY: `image` is a complete code object and outlives the module (kept in Module).
        let rc = unsafe { ffi::hipModuleLoadData(&mut handle, image.as_ptr().cast()) };
        if rc != HIP_SUCCESS {
            return Err(match classify(rc) {
                FaultClass::Launch | FaultClass::Call => compile_fault(format!(
                    "the runtime refused {}: {}",
                    path.display(),
                    code_name(rc)
                )),
                _ => self.fault(rc, &format!("loading {}", path.display())),
            });
        }
        Ok(Module {
            handle,
            info,
            path,
            _image: image,
        })
    }

    fn sized(&self, buf: &RocmBuffer, bytes: usize, during: &str) -> Result<(), DeviceFault> {
        if bytes > buf.bytes {
            return Err(DeviceFault::Call {
                during: during.to_string(),
                code: format!("buffer holds only {} bytes", buf.bytes),
            });
        }
        Ok(())
    }
}

impl Drop for RocmDevice {
    fn drop(&mut self) {
        if lock(&self.lost).is_some() {
            // A wedged device: leak (the worker process is about to be replaced).
            std::mem::forget(lock(&self.blas).take());
            return;
        }
        // SAFETY: handles created by this device, released once, modules before the stream.
        unsafe {
            ffi::hipSetDevice(self.ordinal);
            // The BLAS handle enqueues on the stream: destroyed first.
            drop(lock(&self.blas).take());
            for m in lock(&self.modules).values() {
                ffi::hipModuleUnload(m.handle);
            }
            ffi::hipStreamDestroy(self.stream);
        }
    }
}

impl DeviceInfo for RocmDevice {
    fn target(&self) -> Target {
        self.target
    }

    fn name(&self) -> String {
        // Said in every report and log line, so no verdict of the emulated runtime passes for a
        // GPU's, nor its hipBLAS stand-in's GEMM for rocBLAS's (docs/hip-emu.md). Only there is
        // hipBLAS looked up here: the stand-in lives in the runtime's own file, so it is cheap.
        let on = if on_emulated_runtime() {
            match HipBlas::get().ok().and_then(HipBlas::stand_in) {
                Some(blas) => format!("rocm backend on an emulated HIP runtime, with the {blas}: "),
                None => "rocm backend on an emulated HIP runtime: ".to_string(),
            }
        } else {
            String::new()
        };
        format!(
            "{on}{} (AMD device {}, {})",
            self.name, self.ordinal, self.arch_name
        )
    }

    fn health(&self) -> Health {
        Health::from_lost(&self.lost)
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Rocm
    }
}

impl ReferenceOffload for RocmDevice {}

impl Runtime for RocmDevice {
    type Buffer = RocmBuffer;

    type Event = RocmEvent;

    fn input_cache(&self) -> Option<&Mutex<InputCache<RocmBuffer>>> {
        Some(&self.inputs)
    }

    fn alloc(&self, bytes: usize) -> Result<RocmBuffer, DeviceFault> {
        let during = format!("allocating {bytes} bytes");
        self.bind(&during)?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: out-parameter; freed by RocmBuffer's Drop.
        self.check(unsafe { ffi::hipMalloc(&mut ptr, bytes.max(1)) }, &during)?;
        Ok(RocmBuffer {
            ptr,
            bytes: bytes.max(1),
            lost: Arc::clone(&self.lost),
        })
    }

    fn address(&self, buf: &RocmBuffer) -> u64 {
        buf.ptr as u64
    }

    fn upload(&self, dst: &mut RocmBuffer, src: &[u8]) -> Result<(), DeviceFault> {
        let during = format!("uploading {} bytes", src.len());
        self.bind(&during)?;
        self.sized(dst, src.len(), &during)?;
        // SAFETY: `dst` holds at least `src.len()` bytes; the copy completes before returning.
        let rc = unsafe {
            ffi::hipMemcpy(
                dst.ptr,
                src.as_ptr().cast(),
                src.len(),
                ffi::HIP_MEMCPY_HOST_TO_DEVICE,
            )
        };
        self.check(rc, &during)
    }

    fn download(&self, src: &RocmBuffer) -> Result<Vec<u8>, DeviceFault> {
        let during = format!("downloading {} bytes", src.bytes);
        self.bind(&during)?;
        let mut out = vec![0u8; src.bytes];
        // SAFETY: `out` holds exactly the buffer's bytes.
        let rc = unsafe {
            ffi::hipMemcpy(
                out.as_mut_ptr().cast(),
                src.ptr,
                src.bytes,
                ffi::HIP_MEMCPY_DEVICE_TO_HOST,
            )
        };
        self.check(rc, &during)?;
        Ok(out)
    }

    fn copy(
        &self,
        dst: &mut RocmBuffer,
        src: &RocmBuffer,
        bytes: usize,
    ) -> Result<(), DeviceFault> {
        let during = format!("copying {bytes} bytes on the device");
        self.bind(&during)?;
        self.sized(src, bytes, &during)?;
        self.sized(dst, bytes, &during)?;
        // SAFETY: both buffers hold at least `bytes`; ordered on the device's stream.
        let rc = unsafe {
            ffi::hipMemcpyAsync(
                dst.ptr,
                src.ptr,
                bytes,
                ffi::HIP_MEMCPY_DEVICE_TO_DEVICE,
                self.stream,
            )
        };
        self.check(rc, &during)
    }

    fn launch(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        geometry: &LaunchGeometry,
        args: &PackedArgs,
    ) -> Result<(), DeviceFault> {
        self.bind(&format!("launching {entry}"))?;
        let func = self.function(kernel, entry)?;
        let (_, declared_bytes) = w4a16_kernels::decl::arg_offsets(kernel.args);
        let detail = format!(
            "grid {:?}, block {:?}, {} B LDS",
            geometry.grid, geometry.block, geometry.shared_mem_bytes
        );
        if args.bytes.len() != declared_bytes || args.values(kernel).is_none() {
            return Err(DeviceFault::Launch {
                kernel: entry.to_string(),
                code: "argument buffer does not match the declaration".into(),
                detail,
            });
        }
        let mut buffer = args.bytes.clone();
        let mut size: usize = buffer.len();
        let mut extra: [*mut c_void; 5] = [
            ffi::LAUNCH_PARAM_BUFFER_POINTER as *mut c_void,
            buffer.as_mut_ptr().cast(),
            ffi::LAUNCH_PARAM_BUFFER_SIZE as *mut c_void,
            (&mut size as *mut usize).cast(),
            ffi::LAUNCH_PARAM_END as *mut c_void,
        ];
        let refused = |rc: c_int| match self.fault(rc, &format!("launching {entry}")) {
            DeviceFault::Launch { code, .. } => DeviceFault::Launch {
                kernel: entry.to_string(),
                code,
                detail: detail.clone(),
            },
            other => other,
        };
        // SAFETY: the buffer is laid out by `arg_offsets` of the declaration, which the code
        // object's metadata was checked against in `function`; every pointer in it is a live
        // buffer of this device of at least the validated size. `buffer` and `size` outlive the
        // call (the runtime copies the arguments before returning).
        let rc = unsafe {
            ffi::hipModuleLaunchKernel(
                func,
                geometry.grid[0],
                geometry.grid[1],
                geometry.grid[2],
                geometry.block[0],
                geometry.block[1],
                geometry.block[2],
                geometry.shared_mem_bytes,
                self.stream,
                std::ptr::null_mut(),
                extra.as_mut_ptr(),
            )
        };
        if rc != HIP_SUCCESS {
            return Err(refused(rc));
        }
        // SAFETY: no arguments; reads and clears the thread's last error.
        let last = unsafe { ffi::hipGetLastError() };
        if last != HIP_SUCCESS {
            return Err(refused(last));
        }
        Ok(())
    }

    fn blas_gemm(
        &self,
        g: &BlasGemm,
        x: &RocmBuffer,
        dense: &RocmBuffer,
        y: &mut RocmBuffer,
    ) -> Result<(), DeviceFault> {
        let during = format!("hipBLAS GEMM M={} N={} K={}", g.m, g.n, g.k);
        self.bind(&during)?;
        // The same column-major call as cuBLAS on CUDA (`blas.rs`): op(A) = T on the dense
        // copy with its padded row stride, fp32 compute, beta = 1 onto the bias prefill.
        let call = g.column_major().map_err(|e| DeviceFault::Call {
            during: during.clone(),
            code: e.to_string(),
        })?;
        for ((operand, needed), buf) in g.operand_extents().into_iter().zip([dense, x, &*y]) {
            self.sized(buf, needed, &format!("{during}: {operand:?}"))?;
        }
        let lib = HipBlas::get().map_err(|e| e.fault(self.name()))?;
        let mut blas = lock(&self.blas);
        let handle = match blas.take() {
            Some(h) => h,
            // SAFETY: the device is current (`bind`) and `stream` is its live stream, of the
            // runtime hipBLAS was checked to share (`HipBlas::get`).
            None => unsafe { lib.create_handle(self.stream) }.map_err(|(step, status)| {
                status
                    .check(&format!("{step} ({})", lib.path().display()), &self.name())
                    .err()
                    .unwrap_or_else(|| DeviceFault::Call {
                        during: step.to_string(),
                        code: status.name(),
                    })
            })?,
        };
        let at = |buf: &RocmBuffer, offset: usize| buf.ptr.cast::<u8>().wrapping_add(offset);
        // SAFETY: the operands were validated against the dense declaration and each buffer
        // holds its operand's extent (checked above); the handle enqueues on this device's
        // stream, which the following synchronisation waits for.
        let status = unsafe {
            handle.gemm(
                &call,
                g.dtype,
                1.0,
                g.beta,
                at(dense, g.dense_offset).cast::<c_void>(),
                at(x, g.x_offset).cast::<c_void>(),
                at(y, g.y_offset).cast::<c_void>(),
            )
        };
        *blas = Some(handle);
        let during = format!("{during} ({}, {})", lib.gemm_symbol(), lib.path().display());
        status.check(&during, &self.name())
    }

    fn record(&self) -> Result<RocmEvent, DeviceFault> {
        self.bind("recording an event")?;
        let mut ev: ffi::hipEvent_t = std::ptr::null_mut();
        // SAFETY: out-parameter; destroyed by RocmEvent's Drop.
        self.check(unsafe { ffi::hipEventCreate(&mut ev) }, "creating an event")?;
        let ev = RocmEvent { ev };
        // SAFETY: live event and stream.
        self.check(
            unsafe { ffi::hipEventRecord(ev.ev, self.stream) },
            "recording an event",
        )?;
        Ok(ev)
    }

    fn elapsed_us(&self, start: &RocmEvent, end: &RocmEvent) -> Result<f64, DeviceFault> {
        self.bind("reading event times")?;
        let mut ms = 0f32;
        // SAFETY: two recorded, live events.
        self.check(
            unsafe { ffi::hipEventElapsedTime(&mut ms, start.ev, end.ev) },
            "reading event times",
        )?;
        Ok(f64::from(ms) * 1000.0)
    }

    fn synchronize(&self, during: &str) -> Result<(), DeviceFault> {
        let done = self.record()?;
        let deadline = Instant::now() + self.watchdog;
        let mut pause = Duration::from_micros(10);
        loop {
            // SAFETY: live event.
            match unsafe { ffi::hipEventQuery(done.ev) } {
                HIP_SUCCESS => break,
                HIP_ERROR_NOT_READY => {}
                rc => return Err(self.fault(rc, during)),
            }
            if Instant::now() >= deadline {
                self.mark_lost(format!(
                    "{during} hung past the {:.1} s watchdog",
                    self.watchdog.as_secs_f64()
                ));
                // The event cannot be destroyed safely while the queue is wedged.
                std::mem::forget(done);
                return Err(DeviceFault::Timeout {
                    during: during.to_string(),
                    after: self.watchdog,
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
        // SAFETY: reads and clears the thread's last error (faults of frees and async work).
        let last = unsafe { ffi::hipGetLastError() };
        self.check(last, during)
    }
}

#[cfg(test)]
mod tests;
