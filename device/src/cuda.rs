//! The CUDA backend on `cudarc` (driver API, NVRTC, cuBLAS), loaded at run time so that
//! everything builds and the GPU tests skip loudly on machines without CUDA.
//!
//! One primary context on the chosen device and one stream. Kernels are compiled by NVRTC at
//! first use, once per source file, for the device's architecture, and cached with their
//! functions. Every driver call is checked; a fault is classified (launch refused / sticky /
//! other) and a sticky fault or a watchdog timeout leaves the device [`Health::Lost`]: later
//! calls refuse at once, and on drop the context is leaked rather than torn down (tearing down
//! a context with a hung kernel can block).

mod reference_judge;
mod runtime;
mod seeded_activations;

use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cudarc::cublas::CudaBlas;
use cudarc::driver::sys::{CUevent_flags, CUfunction_attribute, CUresult};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr,
    DriverError, LaunchConfig, PushKernelArg,
};
use w4a16_kernels::decl::LaunchGeometry;
use w4a16_kernels::emulation::{self, NotEmulable};
use w4a16_kernels::nvrtc::{self, NvrtcError};
use w4a16_kernels::source::KernelSources;
use w4a16_kernels::{Execution, KernelDecl, KernelId, Target};
use w4a16_reference::ActDtype;
use w4a16_reference::compare::{CompareReport, JudgeRequest};
use w4a16_reference::data::StreamKey;
use w4a16_reference::offload::{ActivationOperand, RawLanes, WeightOperand};

use super::blas::BlasOp;
use super::{
    Allocation, BlasGemm, Capability, DeviceFault, DeviceInfo, DeviceKind, FaultClass, Health,
    ReferenceOffload, Runtime, skip, watchdog_timeout,
};
use crate::fault::UnknownArch;
use crate::held::HeldLanes;
use crate::input_cache::{InputCache, MIN_CACHED_BYTES};
use crate::launch::{PackedArgs, RawArg};
use w4a16_require::{Requirement, Skip};

/// What a CUDA driver status means for the case and the context.
pub fn classify(code: CUresult) -> FaultClass {
    use CUresult::*;
    match code {
        CUDA_ERROR_ILLEGAL_ADDRESS
        | CUDA_ERROR_LAUNCH_TIMEOUT
        | CUDA_ERROR_ASSERT
        | CUDA_ERROR_HARDWARE_STACK_ERROR
        | CUDA_ERROR_ILLEGAL_INSTRUCTION
        | CUDA_ERROR_MISALIGNED_ADDRESS
        | CUDA_ERROR_INVALID_ADDRESS_SPACE
        | CUDA_ERROR_INVALID_PC
        | CUDA_ERROR_LAUNCH_FAILED
        | CUDA_ERROR_TENSOR_MEMORY_LEAK
        | CUDA_ERROR_CONTAINED => FaultClass::Sticky,
        CUDA_ERROR_NOT_INITIALIZED
        | CUDA_ERROR_DEINITIALIZED
        | CUDA_ERROR_NO_DEVICE
        | CUDA_ERROR_INVALID_DEVICE
        | CUDA_ERROR_DEVICE_UNAVAILABLE
        | CUDA_ERROR_ECC_UNCORRECTABLE
        | CUDA_ERROR_NVLINK_UNCORRECTABLE
        | CUDA_ERROR_CONTEXT_IS_DESTROYED
        | CUDA_ERROR_INVALID_CONTEXT
        | CUDA_ERROR_SYSTEM_NOT_READY
        | CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
        | CUDA_ERROR_EXTERNAL_DEVICE
        | CUDA_ERROR_UNKNOWN => FaultClass::Fatal,
        CUDA_ERROR_INVALID_VALUE
        | CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
        | CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING
        | CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
        | CUDA_ERROR_INVALID_CLUSTER_SIZE
        | CUDA_ERROR_INVALID_HANDLE
        | CUDA_ERROR_NOT_FOUND
        | CUDA_ERROR_FUNCTION_NOT_LOADED
        | CUDA_ERROR_INVALID_IMAGE
        | CUDA_ERROR_INVALID_PTX
        | CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        | CUDA_ERROR_NO_BINARY_FOR_GPU
        | CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND => FaultClass::Launch,
        CUDA_ERROR_OUT_OF_MEMORY => FaultClass::OutOfMemory,
        _ => FaultClass::Call,
    }
}

/// The status name, without asking the driver (which may be absent or wedged).
pub fn code_name(code: CUresult) -> String {
    format!("{code:?}")
}

/// The harness target for a compute capability. Only the architectures we have snapshots and
/// tile tables for are accepted; anything else is named in the error.
pub fn target_for_compute_capability(major: i32, minor: i32) -> Result<Target, UnknownArch> {
    match (major, minor) {
        (9, 0) => Ok(Target::Sm90),
        _ => Err(UnknownArch::ComputeCapability { major, minor }),
    }
}

/// A device allocation.
pub struct CudaBuffer {
    memory: Memory,
}

enum Memory {
    /// From the stream-ordered pool (`cuMemAllocAsync`): neighbours may sit back to back.
    Pooled(CudaSlice<u8>),
    /// Its own `cuMemAlloc` of exactly the requested size ([`Allocation::Exact`]), which
    /// compute-sanitizer's memcheck tracks and pads (`--padding`), so that an access past the
    /// end is reported instead of landing in the next buffer.
    Exact(ExactAllocation),
}

struct ExactAllocation {
    ptr: cudarc::driver::sys::CUdeviceptr,
    len: usize,
    stream: Arc<CudaStream>,
}

impl Drop for ExactAllocation {
    fn drop(&mut self) {
        // Work on the stream may still read it; a failure here is the context's, already seen.
        let _ = self.stream.context().bind_to_thread();
        let _ = self.stream.synchronize();
        // SAFETY: `ptr` came from cuMemAlloc in `alloc` and is freed exactly once, here.
        let _ = unsafe { cudarc::driver::result::free_sync(self.ptr) };
    }
}

impl CudaBuffer {
    fn len(&self) -> usize {
        match &self.memory {
            Memory::Pooled(s) => s.len(),
            Memory::Exact(e) => e.len,
        }
    }
}

impl std::fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBuffer({} bytes)", self.len())
    }
}

/// One CUDA device with its context, stream, compiled modules and (lazily) cuBLAS.
pub struct CudaDevice {
    ordinal: usize,
    name: String,
    target: Target,
    compute_capability: (i32, i32),
    watchdog: Duration,
    ctx: ManuallyDrop<Arc<CudaContext>>,
    stream: ManuallyDrop<Arc<CudaStream>>,
    modules: ManuallyDrop<Mutex<HashMap<KernelId, Arc<CudaModule>>>>,
    functions: ManuallyDrop<Mutex<HashMap<String, CudaFunction>>>,
    blas: ManuallyDrop<Mutex<Option<CudaBlas>>>,
    /// The GPU reference's last keyed W and |W| (a layer's batch sizes come one after another):
    /// sent once per layer, not per case.
    held_w: ManuallyDrop<Mutex<Option<HeldW>>>,
    /// The held reference's keyed W, |W| and offset rows (`reference_judge`).
    held_lanes_w: ManuallyDrop<Mutex<Option<reference_judge::HeldLanesW>>>,
    /// The reference judge's entries, compiled on first use.
    judge: ManuallyDrop<Mutex<reference_judge::JudgeCache>>,
    /// Pristine copies of launch inputs by content (`input_cache.rs`); off under `Exact`
    /// allocation (the sanitizer runs), where every input is uploaded as it was.
    inputs: ManuallyDrop<Mutex<InputCache<CudaBuffer>>>,
    lost: Mutex<Option<String>>,
    allocation: Allocation,
    /// Where NVRTC takes the kernel sources from.
    sources: KernelSources,
    /// An AMD target whose configuration the kernels are compiled in (`gfx1151-emu`): the
    /// NVRTC options of `w4a16_kernels::emulation`, and `target()` answers this target.
    emulating: Option<Target>,
}

/// The CUDA devices the driver sees (`CUDA_VISIBLE_DEVICES` applied); no driver is a skip.
pub fn device_count() -> Result<usize, Skip> {
    // SAFETY: probing only tries to dlopen the library; no symbol is called.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(skip(
            Requirement::Gpu,
            "libcuda.so not found (no NVIDIA driver on this machine)",
        ));
    }
    let count = CudaContext::device_count().map_err(|e| {
        skip(
            Requirement::Gpu,
            format!("no CUDA device: the driver reports {}", code_name(e.0)),
        )
    })?;
    Ok(usize::try_from(count).unwrap_or(0))
}

impl CudaDevice {
    /// Device `ordinal`, compiling its kernels from `sources` (`crate::open` is the way in).
    pub(crate) fn open_with(ordinal: usize, sources: KernelSources) -> Result<CudaDevice, Skip> {
        let count = device_count()?;
        if count == 0 {
            return Err(skip(Requirement::Gpu, "no CUDA device"));
        }
        if ordinal >= count {
            return Err(skip(
                Requirement::Gpu,
                format!("no CUDA device {ordinal} ({count} present)"),
            ));
        }
        // The kernels are compiled at run time: no NVRTC or no CUDA headers, no kernels.
        nvrtc::nvrtc_loadable().map_err(|u| skip(Requirement::Nvrtc, u.reason))?;
        nvrtc::find_cuda_include().map_err(|u| skip(Requirement::Nvrtc, u.reason))?;
        let fail = |what: &str, e: DriverError| {
            skip(
                Requirement::Gpu,
                format!(
                    "CUDA device {ordinal}: {what} failed with {}",
                    code_name(e.0)
                ),
            )
        };
        let ctx = CudaContext::new(ordinal).map_err(|e| fail("context creation", e))?;
        let name = ctx.name().map_err(|e| fail("reading the device name", e))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| fail("reading the compute capability", e))?;
        let target = target_for_compute_capability(major, minor).map_err(|why| {
            skip(
                Requirement::Gpu,
                format!("CUDA device {ordinal} ({name}): {why}"),
            )
        })?;
        // SAFETY: the device uses a single stream, so cross-stream event tracking is not needed.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(|e| fail("stream creation", e))?;
        Ok(CudaDevice {
            ordinal,
            name,
            target,
            compute_capability: (major, minor),
            watchdog: watchdog_timeout(),
            ctx: ManuallyDrop::new(ctx),
            stream: ManuallyDrop::new(stream),
            modules: ManuallyDrop::new(Mutex::new(HashMap::new())),
            functions: ManuallyDrop::new(Mutex::new(HashMap::new())),
            blas: ManuallyDrop::new(Mutex::new(None)),
            held_w: ManuallyDrop::new(Mutex::new(None)),
            held_lanes_w: ManuallyDrop::new(Mutex::new(None)),
            judge: ManuallyDrop::new(Mutex::new(None)),
            inputs: ManuallyDrop::new(Mutex::new(InputCache::new(
                CUDA_INPUT_CACHE_BYTES,
                MIN_CACHED_BYTES,
            ))),
            lost: Mutex::new(None),
            allocation: Allocation::Guarded,
            sources,
            emulating: None,
        })
    }

    /// Compiles and runs the kernels in `target`'s AMD configuration from now on (before any
    /// kernel is loaded: modules are cached per kernel).
    pub fn emulating(mut self, target: Target) -> Result<Self, NotEmulable> {
        emulation::gfx_number(target)?;
        lock(&self.modules).clear();
        lock(&self.functions).clear();
        self.emulating = Some(target);
        Ok(self)
    }

    /// The NVRTC options beyond the architecture: the emulated target's macros, if any.
    pub fn nvrtc_extra_options(&self) -> Vec<String> {
        self.emulating
            .map(|t| emulation::nvrtc_options(t).expect("checked by `emulating`"))
            .unwrap_or_default()
    }

    /// Sizes later launches' buffers by `allocation` ([`Allocation::Exact`] for sanitizer runs).
    pub fn with_allocation(mut self, allocation: Allocation) -> Self {
        self.allocation = allocation;
        self
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    pub fn compute_capability(&self) -> (i32, i32) {
        self.compute_capability
    }

    /// NVRTC's `--gpu-architecture` for this device.
    pub fn nvrtc_arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }

    fn mark_lost(&self, cause: String) {
        let mut lost = self.lost.lock().unwrap_or_else(|p| p.into_inner());
        lost.get_or_insert(cause);
    }

    fn ensure_healthy(&self) -> Result<(), DeviceFault> {
        match self.health() {
            Health::Ok => Ok(()),
            Health::Lost { cause } => Err(DeviceFault::ContextLost { cause }),
        }
    }

    /// The fault for a failed driver call; sticky and fatal ones take the device down.
    fn fault(&self, e: DriverError, during: &str) -> DeviceFault {
        let class = classify(e.0);
        let code = code_name(e.0);
        if matches!(class, FaultClass::Sticky | FaultClass::Fatal) {
            self.mark_lost(format!("{code} during {during}"));
        }
        DeviceFault::from_status(class, during, &code)
    }

    fn bind(&self, during: &str) -> Result<(), DeviceFault> {
        self.ensure_healthy()?;
        self.ctx.bind_to_thread().map_err(|e| self.fault(e, during))
    }

    /// The function `entry` of `kernel`, compiling and loading its module on first use.
    fn function(&self, kernel: &KernelDecl, entry: &str) -> Result<CudaFunction, DeviceFault> {
        if let Some(f) = lock(&self.functions).get(entry) {
            return Ok(f.clone());
        }
        let module = self.module(kernel)?;
        let file = kernel.source_file.unwrap_or("?");
        let f = module.load_function(entry).map_err(|e| {
            match self.fault(e, &format!("loading `{entry}` from {file}")) {
                DeviceFault::Launch { code, .. } => DeviceFault::Launch {
                    kernel: entry.to_string(),
                    code,
                    detail: format!("entry point not found in {file}"),
                },
                other => other,
            }
        })?;
        lock(&self.functions).insert(entry.to_string(), f.clone());
        Ok(f)
    }

    /// One module per source file, compiled by NVRTC for this device's architecture from the
    /// device's [`KernelSources`].
    fn module(&self, kernel: &KernelDecl) -> Result<Arc<CudaModule>, DeviceFault> {
        if let Some(m) = lock(&self.modules).get(&kernel.id) {
            return Ok(m.clone());
        }
        let arch = self.nvrtc_arch();
        let file = kernel.source_file.unwrap_or("(no source)").to_string();
        let extra = self.nvrtc_extra_options();
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let ptx = nvrtc::compile_ptx_from(&self.sources, kernel.id, &arch, &extra).map_err(
            |e| match e {
                NvrtcError::NoSource(_) => DeviceFault::Unsupported {
                    what: format!(
                        "a kernel launch of {} (it runs in the vendor BLAS)",
                        kernel.id
                    ),
                    device: self.name.clone(),
                },
                NvrtcError::Compile { log, .. } => DeviceFault::Compile {
                    source_file: file.clone(),
                    arch: arch.clone(),
                    log,
                },
                other => DeviceFault::Compile {
                    source_file: file.clone(),
                    arch: arch.clone(),
                    log: other.to_string(),
                },
            },
        )?;
        self.bind(&format!("loading {file}"))?;
        let module = self
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
            .map_err(|e| match classify(e.0) {
                FaultClass::Launch | FaultClass::Call => DeviceFault::Compile {
                    source_file: file.clone(),
                    arch: arch.clone(),
                    log: format!("the driver refused the PTX: {}", code_name(e.0)),
                },
                _ => self.fault(e, &format!("loading {file}")),
            })?;
        lock(&self.modules).insert(kernel.id, module.clone());
        Ok(module)
    }

    fn blas_handle(&self) -> Result<std::sync::MutexGuard<'_, Option<CudaBlas>>, DeviceFault> {
        let mut guard = lock(&self.blas);
        if guard.is_none() {
            // SAFETY: a dlopen probe.
            if !unsafe { cudarc::cublas::sys::is_culib_present() } {
                return Err(DeviceFault::MissingCapability {
                    capability: Capability::VendorBlas,
                    device: self.name.clone(),
                    why: "cuBLAS (libcublas.so) could not be loaded".into(),
                });
            }
            let blas = CudaBlas::new(Arc::clone(&self.stream)).map_err(|e| DeviceFault::Call {
                during: "creating the cuBLAS handle".into(),
                code: format!("{:?}", e.0),
            })?;
            // The dense recipe promises fp32 accumulation. cuBLAS's default lets split-K reduce
            // fp16/bf16 partials in the output type; the GPU shape fuzzer caught it on sm_90
            // (`cases/regressions.toml`: K = 576, N = 1226, M = 3, bf16, 1044 exact-class
            // elements off). Forbid it, as PyTorch does when its reduced-precision flag is off.
            use cudarc::cublas::sys::{cublasMath_t, cublasSetMathMode, cublasStatus_t};
            // SAFETY: a live handle created just above; the call only sets a mode on it.
            let status = unsafe {
                cublasSetMathMode(
                    *blas.handle(),
                    cublasMath_t::CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION,
                )
            };
            if status != cublasStatus_t::CUBLAS_STATUS_SUCCESS {
                return Err(DeviceFault::Call {
                    during: "cublasSetMathMode(DISALLOW_REDUCED_PRECISION_REDUCTION)".into(),
                    code: format!("{status:?}"),
                });
            }
            *guard = Some(blas);
        }
        Ok(guard)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        if self.lost.get_mut().map(|l| l.is_some()).unwrap_or(true) {
            // A wedged context: leak it (the worker process is about to be replaced).
            return;
        }
        // SAFETY: each field is dropped exactly once, here, dependents before the context.
        unsafe {
            ManuallyDrop::drop(&mut self.inputs);
            ManuallyDrop::drop(&mut self.held_w);
            ManuallyDrop::drop(&mut self.held_lanes_w);
            ManuallyDrop::drop(&mut self.judge);
            ManuallyDrop::drop(&mut self.blas);
            ManuallyDrop::drop(&mut self.functions);
            ManuallyDrop::drop(&mut self.modules);
            ManuallyDrop::drop(&mut self.stream);
            ManuallyDrop::drop(&mut self.ctx);
        }
    }
}

/// A worker's pristine input copies: a 70B-class layer's packed weights, its dense copy as
/// input, the dequant output's bands and its expected buffer, and the largest X (about 1.7 GB)
/// fit beside the held reference's W, for 14 workers on one 141 GB device.
const CUDA_INPUT_CACHE_BYTES: usize = 3 << 30;

/// W and |W| of the GPU reference on the device, under the content key the caller gave.
struct HeldW {
    key: u64,
    w: CudaSlice<f64>,
    w_abs: CudaSlice<f64>,
}

/// Keyed W is kept up to this size (W and |W| together) per device handle: 14 workers of the
/// largest field layer stay within the H200's memory.
const HELD_W_BYTES: usize = 4 << 30;

fn addr(b: &CudaBuffer, stream: &CudaStream) -> u64 {
    match &b.memory {
        Memory::Pooled(s) => {
            let (p, _sync) = s.device_ptr(stream);
            p
        }
        Memory::Exact(e) => e.ptr,
    }
}

#[cfg(test)]
mod tests;
