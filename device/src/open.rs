//! Opening a device: one [`open`] taking a [`DeviceRequest`] (which device, its ordinal, the
//! kernels' sources, how buffers are sized). Without the device asked for, the result is a loud
//! skip saying why (ARCHITECTURE.md rule 4), never a panic.

use w4a16_kernels::Target;
use w4a16_kernels::source::KernelSources;
use w4a16_require::{Requirement, Skip};

use crate::info::{Allocation, DeviceKind};
use crate::timing::DeviceBench;
use crate::{none, skip};

/// Which device a [`DeviceRequest`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The first GPU backend that opens: CUDA, then ROCm (feature `rocm`); without one, the
    /// reasons each gave.
    FirstGpu,
    /// One backend's device: what a test named for that backend (`…_cuda`, `…_rocm`) opens. A
    /// simulated device is the tests' own and the emulator needs a target: both are skips here.
    Kind(DeviceKind),
    /// The ISA emulator running this AMD target's real code objects (gfx11/gfx12) on the host.
    /// Its buffers are exact ([`Allocation::Exact`] is the emulator's own): every access
    /// outside a tensor faults.
    Emulator(Target),
    /// The CUDA device compiling and running the kernels in this AMD target's configuration
    /// (`gfx1151-emu`). Emulation needs an NVIDIA GPU; without one, a skip saying so.
    EmulatedOnCuda(Target),
}

/// What [`open`] opens: a device, its ordinal, where its kernels come from and how its
/// buffers are sized. `DeviceRequest::first_gpu()` is device 0 of the first backend, guarded,
/// with the embedded kernels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceRequest {
    pub choice: DeviceChoice,
    /// Device `ordinal` of the backend: a worker of a run over several GPUs
    /// (`w4a16 run --gpus`) opens the one it is bound to. The emulator has none.
    pub ordinal: usize,
    /// Where the kernels are built from.
    pub sources: KernelSources,
    /// Only the CUDA backend offers [`Allocation::Exact`] (sanitizer runs are NVIDIA's) and the
    /// emulator is always exact; check [`crate::DeviceInfo::allocation`] on what opened.
    pub allocation: Allocation,
    /// The ISA emulator records which blocks of the machine code run
    /// ([`crate::DeviceInfo::block_coverage`]); other devices ignore it.
    pub record_blocks: bool,
    /// The ISA emulator only: a sanitizer watching every launch (`run --sanitize` on a gfx
    /// target); other devices ignore it.
    pub emu_sanitizer: Option<crate::EmuSanitizer>,
}

impl Default for DeviceRequest {
    fn default() -> Self {
        DeviceRequest::first_gpu()
    }
}

impl DeviceRequest {
    fn of(choice: DeviceChoice) -> Self {
        DeviceRequest {
            choice,
            ordinal: 0,
            sources: KernelSources::Embedded,
            allocation: Allocation::Guarded,
            record_blocks: false,
            emu_sanitizer: None,
        }
    }

    /// [`DeviceChoice::FirstGpu`].
    pub fn first_gpu() -> Self {
        Self::of(DeviceChoice::FirstGpu)
    }

    /// [`DeviceChoice::Kind`].
    pub fn kind(kind: DeviceKind) -> Self {
        Self::of(DeviceChoice::Kind(kind))
    }

    /// [`DeviceChoice::Emulator`].
    pub fn emulator(target: Target) -> Self {
        Self::of(DeviceChoice::Emulator(target))
    }

    /// [`DeviceChoice::EmulatedOnCuda`].
    pub fn emulated_on_cuda(target: Target) -> Self {
        Self::of(DeviceChoice::EmulatedOnCuda(target))
    }

    /// Device `ordinal` instead of device 0.
    pub fn at(self, ordinal: usize) -> Self {
        DeviceRequest { ordinal, ..self }
    }

    /// The kernels built from `sources` instead of the embedded ones.
    pub fn with_sources(self, sources: KernelSources) -> Self {
        DeviceRequest { sources, ..self }
    }

    /// The ISA emulator recording the blocks each launch runs (block coverage).
    pub fn recording_blocks(self) -> Self {
        DeviceRequest {
            record_blocks: true,
            ..self
        }
    }

    /// Buffers sized by `allocation` instead of guarded.
    pub fn with_allocation(self, allocation: Allocation) -> Self {
        DeviceRequest { allocation, ..self }
    }

    /// The ISA emulator's `tool` watching every launch (ignored by other devices).
    pub fn with_emu_sanitizer(self, tool: Option<crate::EmuSanitizer>) -> Self {
        DeviceRequest {
            emu_sanitizer: tool,
            ..self
        }
    }
}

/// The device `request` asks for, or the loud skip saying why there is none.
pub fn open(request: DeviceRequest) -> Result<Box<dyn DeviceBench>, Skip> {
    let DeviceRequest {
        choice,
        ordinal,
        sources,
        allocation,
        record_blocks,
        emu_sanitizer,
    } = request;
    match choice {
        DeviceChoice::FirstGpu => open_first_gpu(ordinal, sources, allocation),
        DeviceChoice::Kind(kind) => open_kind(kind, ordinal, sources, allocation),
        DeviceChoice::Emulator(target) => {
            open_emulator(target, sources, record_blocks, emu_sanitizer)
        }
        DeviceChoice::EmulatedOnCuda(target) => {
            open_emulated_on_cuda(target, ordinal, sources, allocation)
        }
    }
}

fn open_first_gpu(
    ordinal: usize,
    sources: KernelSources,
    allocation: Allocation,
) -> Result<Box<dyn DeviceBench>, Skip> {
    let mut reasons = Vec::new();
    #[cfg(feature = "cuda")]
    match crate::cuda::CudaDevice::open_with(ordinal, sources.clone()) {
        Ok(d) => return Ok(Box::new(d.with_allocation(allocation))),
        Err(skip) => reasons.push(format!("cuda: {}", skip.reason)),
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = allocation;
        reasons.push("cuda: not built (cargo feature `cuda`)".to_string());
    }
    #[cfg(feature = "rocm")]
    match crate::rocm::RocmDevice::open_with(ordinal, sources) {
        Ok(d) => return Ok(Box::new(d)),
        Err(skip) => reasons.push(format!("rocm: {}", skip.reason)),
    }
    #[cfg(not(feature = "rocm"))]
    {
        let _ = (ordinal, sources);
        reasons.push("rocm: not built (cargo feature `rocm`)".to_string());
    }
    Err(none::open_with(&reasons))
}

/// One backend's device. ROCm without the `rocm` feature is a skip saying so.
fn open_kind(
    kind: DeviceKind,
    ordinal: usize,
    sources: KernelSources,
    allocation: Allocation,
) -> Result<Box<dyn DeviceBench>, Skip> {
    let _ = (ordinal, &sources, allocation);
    match kind {
        #[cfg(feature = "cuda")]
        DeviceKind::Cuda => Ok(Box::new(
            crate::cuda::CudaDevice::open_with(ordinal, sources)?.with_allocation(allocation),
        )),
        #[cfg(not(feature = "cuda"))]
        DeviceKind::Cuda => Err(cuda_not_built()),
        #[cfg(feature = "rocm")]
        DeviceKind::Rocm => Ok(Box::new(crate::rocm::RocmDevice::open_with(
            ordinal, sources,
        )?)),
        #[cfg(not(feature = "rocm"))]
        DeviceKind::Rocm => Err(rocm_not_built()),
        DeviceKind::Simulated => Err(skip(
            Requirement::Gpu,
            "a simulated device is not opened by kind (the harness's unit tests build their own)",
        )),
        DeviceKind::Emulator => Err(skip(
            Requirement::AmdToolchain,
            "the ISA emulator runs one AMD target's code objects: ask for `DeviceRequest::emulator(target)`",
        )),
    }
}

#[cfg(feature = "emu")]
fn open_emulator(
    target: Target,
    sources: KernelSources,
    record_blocks: bool,
    sanitizer: Option<crate::EmuSanitizer>,
) -> Result<Box<dyn DeviceBench>, Skip> {
    Ok(Box::new(crate::emu::open_with(
        target,
        sources,
        record_blocks,
        sanitizer,
    )?))
}

/// Without the `emu` feature the emulator is a skip saying so.
#[cfg(not(feature = "emu"))]
fn open_emulator(
    target: Target,
    _sources: KernelSources,
    _record_blocks: bool,
    _sanitizer: Option<crate::EmuSanitizer>,
) -> Result<Box<dyn DeviceBench>, Skip> {
    Err(skip(
        Requirement::AmdToolchain,
        format!("{target} on the ISA emulator needs the cargo feature `emu`"),
    ))
}

fn open_emulated_on_cuda(
    target: Target,
    ordinal: usize,
    sources: KernelSources,
    allocation: Allocation,
) -> Result<Box<dyn DeviceBench>, Skip> {
    #[cfg(feature = "cuda")]
    {
        let d = crate::cuda::CudaDevice::open_with(ordinal, sources).map_err(|s| Skip {
            requirement: s.requirement,
            reason: format!(
                "{target}{} runs on an NVIDIA GPU (CUDA): {}",
                w4a16_kernels::target::EMULATED_SUFFIX,
                s.reason
            ),
        })?;
        let d = d
            .emulating(target)
            .map_err(|e| skip(Requirement::Gpu, e.to_string()))?;
        Ok(Box::new(d.with_allocation(allocation)))
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (ordinal, sources, allocation);
        Err(skip(
            Requirement::Gpu,
            format!(
                "{target}{} runs on an NVIDIA GPU (CUDA), and this build has no CUDA backend \
                 (cargo feature `cuda`)",
                w4a16_kernels::target::EMULATED_SUFFIX
            ),
        ))
    }
}

/// How many devices `kind`'s runtime sees (after `CUDA_VISIBLE_DEVICES` /
/// `HIP_VISIBLE_DEVICES`): what `w4a16 run --gpus all` spreads its workers over. A backend
/// that is not built, or whose runtime is missing, is a skip saying so; a simulated device is
/// the tests' own and has no count here, and the ISA emulator runs on this host's CPU: it has
/// no GPUs to spread over (`--gpus` says so loudly, or refuses a list of ordinals).
pub fn device_count(kind: DeviceKind) -> Result<usize, Skip> {
    match kind {
        #[cfg(feature = "cuda")]
        DeviceKind::Cuda => crate::cuda::device_count(),
        #[cfg(not(feature = "cuda"))]
        DeviceKind::Cuda => Err(cuda_not_built()),
        #[cfg(feature = "rocm")]
        DeviceKind::Rocm => crate::rocm::device_count(),
        #[cfg(not(feature = "rocm"))]
        DeviceKind::Rocm => Err(rocm_not_built()),
        DeviceKind::Simulated => Err(skip(
            Requirement::Gpu,
            "a simulated device has no runtime to count devices (the tests build their own)",
        )),
        DeviceKind::Emulator => Err(skip(
            Requirement::Gpu,
            "the ISA emulator runs on this host's CPU and has no GPUs to bind",
        )),
    }
}

/// The ROCm backend asked for in a build without it.
#[cfg(not(feature = "rocm"))]
fn rocm_not_built() -> Skip {
    skip(
        Requirement::Gpu,
        "the ROCm backend is not built (cargo feature `rocm`)",
    )
}

/// The CUDA backend asked for in a build without it.
#[cfg(not(feature = "cuda"))]
fn cuda_not_built() -> Skip {
    skip(
        Requirement::Gpu,
        "the CUDA backend is not built (cargo feature `cuda`)",
    )
}
