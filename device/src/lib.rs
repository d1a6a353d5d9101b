//! Devices: one backend-neutral [`Device`] so the same test body runs on CUDA, ROCm or
//! nothing at all (a loud skip), with what a launch needs on the way in: typed tensors
//! ([`tensor`]), the contract check at the launch boundary ([`validate`]) and argument packing
//! from the declaration ([`launch`]).
//!
//! A backend implements the small [`Backend`] trait (memory, launch, vendor BLAS, events, a
//! watchdog-guarded synchronise); the launch flow that every backend must share (upload,
//! poison, guard bands, argument packing from the declaration, synchronise, download, guard
//! check) is written once, here, in the blanket `impl<B: Backend> Device for B`.
//!
//! To add a backend: implement [`Backend`] and an `open() -> Result<YourDevice, Skip>`, as
//! `cuda.rs` (cudarc, behind the default `cuda` feature) and `rocm.rs` (hip-sys, behind the
//! `rocm` feature) do, and try it in [`open_default`].

pub mod amd_code;
pub mod blas;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "emu")]
pub mod emu;
pub mod fault;
pub mod guard;
#[cfg(unix)]
pub mod hipblas;
pub mod launch;
pub mod moe;
pub mod none;
/// Host code following each kernel's contract, for the launch flow's tests here and the
/// runner's in the harness (feature `simulated`, a dev-dependency feature there).
pub mod resident;
#[cfg(feature = "rocm")]
pub mod rocm;
#[cfg(any(test, feature = "simulated"))]
pub mod simulated;
pub mod stand_in;
pub mod tensor;
pub mod validate;

use w4a16_kernels::decl::{LaunchGeometry, LaunchShape};
use w4a16_kernels::source::KernelSources;
use w4a16_kernels::{Execution, KernelDecl, RunTarget, ScalarArg, Target, TensorRole};
use w4a16_reference::ActDtype;
use w4a16_reference::compare::{CompareReport, JudgeRequest};
use w4a16_reference::data::StreamKey;
use w4a16_reference::offload::{ActivationOperand, RawLanes, WeightOperand};

use crate::launch::{DeviceInputs, PackedArgs, pack_args};
use w4a16_require::{Requirement, Skip};

pub use fault::{
    BadWatchdog, Capability, DeviceFault, FaultClass, Health, UnknownArch, watchdog_timeout,
};
pub use guard::{GUARD_BYTES, GuardSide, GuardViolation, OutputLayout, OutputReport};
pub use moe::{ALIGN_POISON, AlignOutput, MoeInputs, MoeLaunch, MoeOutput, MoeTiming};
pub use resident::ResidentLanes;

/// `Y[M, N]` as a GEMM launch left it.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmOutput {
    pub m: usize,
    pub n: usize,
    /// Compact `[M, N]` bits of the activation dtype.
    pub y_bits: Vec<u16>,
    pub guard_violations: Vec<GuardViolation>,
    /// Writes between Y's rows (row-stride padding) or past its last element.
    pub stray_writes: usize,
    /// Elements of `[M, N]` still holding the poison.
    pub unwritten: usize,
}

impl GemmOutput {
    fn from_report(m: usize, n: usize, r: OutputReport) -> Self {
        GemmOutput {
            m,
            n,
            y_bits: r.bits,
            guard_violations: r.guard_violations,
            stray_writes: r.stray_writes,
            unwritten: r.unwritten,
        }
    }

    /// Every element written and nothing written outside Y.
    pub fn clean(&self) -> bool {
        self.guard_violations.is_empty() && self.stray_writes == 0 && self.unwritten == 0
    }
}

/// The dense copy `[N, K]` (rows `row_stride` apart) as the dequant kernel left it.
#[derive(Clone, Debug, PartialEq)]
pub struct DequantOutput {
    pub n: usize,
    pub k: usize,
    pub row_stride: usize,
    /// Compact `[N, K]`.
    pub dense_bits: Vec<u16>,
    /// The buffer as written, padding included (feed it to `dense_gemm` unchanged).
    pub strided_bits: Vec<u16>,
    pub guard_violations: Vec<GuardViolation>,
    /// Writes into the row padding of the dense copy.
    pub stray_writes: usize,
    pub unwritten: usize,
}

/// Warm-up launches, then `iters` timed ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BenchPlan {
    pub warmup: usize,
    pub iters: usize,
}

impl Default for BenchPlan {
    fn default() -> Self {
        BenchPlan {
            warmup: 10,
            iters: 50,
        }
    }
}

/// Device-event timings of one operation, in microseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    pub median_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    pub samples: Vec<f64>,
}

impl Timing {
    /// `None` without samples.
    pub fn from_samples(mut samples: Vec<f64>) -> Option<Timing> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median_us = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        samples.shrink_to_fit();
        Some(Timing {
            median_us,
            min_us: sorted[0],
            max_us: sorted[n - 1],
            samples,
        })
    }
}

/// One vendor-BLAS GEMM: `Y[M,N] = X[M,K]·Denseᵀ` with row-major operands and explicit
/// leading dimensions (elements); `beta = 1` adds Y's prior contents (the bias prefill).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlasGemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub dtype: ActDtype,
    pub x_ld: usize,
    pub dense_ld: usize,
    pub y_ld: usize,
    /// Byte offsets of each operand inside its buffer.
    pub x_offset: usize,
    pub dense_offset: usize,
    pub y_offset: usize,
    pub beta: f32,
}

/// How a device sizes the buffers of a launch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Allocation {
    /// Inputs as their host buffers, the output inside `GUARD_BYTES` of guard band on each side:
    /// a stray write lands in a band and is seen on download.
    #[default]
    Guarded,
    /// Every tensor, the output included, at exactly its view's extent (`required_bytes`), no
    /// guard and no slack: an access past a view lands outside every allocation, where a
    /// sanitizer (compute-sanitizer's memcheck; the simulator in tests) reports it.
    Exact,
}

/// What executes a launch; says, e.g., whether NVIDIA's compute-sanitizer can watch it. Runs
/// record it (report.json's `device`, the verdict snapshots' header): an emulated verdict is
/// not a hardware one, and a reader must see which it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceKind {
    Cuda,
    Rocm,
    /// Host code standing in for a device (the test simulator, the CPU-side stand-in).
    Simulated,
    /// The ISA emulator running an AMD target's real code objects on the host.
    Emulator,
}

impl DeviceKind {
    pub const ALL: [DeviceKind; 4] = [
        DeviceKind::Cuda,
        DeviceKind::Rocm,
        DeviceKind::Simulated,
        DeviceKind::Emulator,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Cuda => "CUDA",
            DeviceKind::Rocm => "ROCm",
            DeviceKind::Simulated => "a simulated device",
            DeviceKind::Emulator => "the ISA emulator",
        }
    }

    /// What ran the launches, as a verdict snapshot's header says it.
    pub fn recorded_by(self) -> &'static str {
        match self {
            DeviceKind::Cuda => "a CUDA GPU",
            DeviceKind::Rocm => "a ROCm GPU",
            DeviceKind::Simulated => {
                "a simulated device (host code following each kernel's contract)"
            }
            DeviceKind::Emulator => {
                "the ISA emulator (the target's code objects executed on the host; dense GEMM by a host stand-in for the vendor BLAS)"
            }
        }
    }
}

/// What a GPU backend provides. Every method checks its driver call and maps failures to
/// [`DeviceFault`] (classified: launch refused / sticky fault / other), never panics.
/// Work an emulating device has done since it opened (the ISA emulator's throughput figure),
/// in all and per kernel entry point (which kernel a slow emulated suite spends its time in).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct EmulatedWork {
    pub launches: u64,
    /// Instructions executed, counted once per wave (each runs for up to 32 lanes).
    pub wave_instructions: u64,
    /// Seconds spent inside the emulator's launches.
    pub seconds: f64,
    pub per_kernel: std::collections::BTreeMap<String, KernelWork>,
}

/// One kernel entry point's share of [`EmulatedWork`].
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct KernelWork {
    pub launches: u64,
    pub wave_instructions: u64,
    pub seconds: f64,
}

impl EmulatedWork {
    /// Counts one launch of `kernel`.
    pub fn add_launch(&mut self, kernel: &str, wave_instructions: u64, seconds: f64) {
        self.launches += 1;
        self.wave_instructions += wave_instructions;
        self.seconds += seconds;
        let k = self.per_kernel.entry(kernel.to_string()).or_default();
        k.launches += 1;
        k.wave_instructions += wave_instructions;
        k.seconds += seconds;
    }
}

pub trait Backend: Send + Sync {
    /// What this backend has emulated so far; `None` for hardware.
    fn emulated_work(&self) -> Option<EmulatedWork> {
        None
    }

    /// A device allocation; freed on drop.
    type Buffer: Send;
    /// A timing event on the backend's stream.
    type Event;

    /// The configuration the kernels are built in (an emulated AMD target on a CUDA device).
    fn target(&self) -> Target;
    /// Native unless the backend emulates an AMD target's configuration.
    fn execution(&self) -> Execution {
        Execution::Native
    }
    fn name(&self) -> String;
    fn health(&self) -> Health;
    /// By default the vendor's runtime of the target (NVIDIA: CUDA, AMD: ROCm).
    fn kind(&self) -> DeviceKind {
        match self.target().vendor() {
            w4a16_kernels::target::Vendor::Nvidia => DeviceKind::Cuda,
            w4a16_kernels::target::Vendor::Amd => DeviceKind::Rocm,
        }
    }
    /// How [`Device`]'s launch flow sizes buffers on this backend.
    fn allocation(&self) -> Allocation {
        Allocation::Guarded
    }

    fn alloc(&self, bytes: usize) -> Result<Self::Buffer, DeviceFault>;
    /// Device address of the first byte.
    fn address(&self, buf: &Self::Buffer) -> u64;
    /// Host to device, complete (or staged) when it returns; `src.len()` ≤ the buffer.
    fn upload(&self, dst: &mut Self::Buffer, src: &[u8]) -> Result<(), DeviceFault>;
    /// The whole buffer back to the host. Call after [`Backend::synchronize`].
    fn download(&self, src: &Self::Buffer) -> Result<Vec<u8>, DeviceFault>;
    /// Enqueues a device-to-device copy of `bytes`.
    fn copy(
        &self,
        dst: &mut Self::Buffer,
        src: &Self::Buffer,
        bytes: usize,
    ) -> Result<(), DeviceFault>;

    /// Enqueues `entry` of `kernel` (compiled/loaded on first use) with the packed arguments.
    fn launch(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        geometry: &LaunchGeometry,
        args: &PackedArgs,
    ) -> Result<(), DeviceFault>;
    /// Enqueues the vendor-BLAS GEMM.
    fn blas_gemm(
        &self,
        g: &BlasGemm,
        x: &Self::Buffer,
        dense: &Self::Buffer,
        y: &mut Self::Buffer,
    ) -> Result<(), DeviceFault>;

    fn record(&self) -> Result<Self::Event, DeviceFault>;
    /// Microseconds between two recorded events (both complete).
    fn elapsed_us(&self, start: &Self::Event, end: &Self::Event) -> Result<f64, DeviceFault>;
    /// Waits for all enqueued work under the watchdog ([`watchdog_timeout`]); a hang is
    /// [`DeviceFault::Timeout`] and leaves the device [`Health::Lost`].
    fn synchronize(&self, during: &str) -> Result<(), DeviceFault>;

    /// `(X·Wᵀ, |X|·|W|ᵀ)` in f64 by the vendor's DGEMM ([`Device::reference_gemm_f64`]);
    /// backends without one say so.
    fn reference_gemm_f64(
        &self,
        x: &[f64],
        w: &[f64],
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), DeviceFault> {
        let _ = (x, w, m, n, k);
        Err(no_f64_gemm(self.name()))
    }

    /// [`Device::reference_gemm_f64`] with `w_key` naming `w`'s content when the same `w` comes
    /// again (a layer's next batch size): a backend may keep `w` resident under it.
    fn reference_gemm_f64_keyed(
        &self,
        x: &[f64],
        w: &[f64],
        w_key: Option<u64>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), DeviceFault> {
        let _ = w_key;
        self.reference_gemm_f64(x, w, m, n, k)
    }

    /// `count` realistic activations drawn on the device from `stream` (the bits of
    /// `data::RealisticSource`), brought to the host; `None`: this device does not draw them,
    /// and the host does.
    fn draw_realistic(
        &self,
        stream: &StreamKey,
        dtype: ActDtype,
        count: usize,
    ) -> Result<Option<Vec<u16>>, DeviceFault> {
        let _ = (stream, dtype, count);
        Ok(None)
    }

    /// The GPU reference's products kept on the device (`--reference gpu`): X widened and the
    /// exact weights decoded there from `x` and `weights`, then `y = x·wᵀ`, `a = |x|·|w|ᵀ` and, with an offset,
    /// `|x|·w_offsetᵀ` (`[M, N]` each), judged there by [`Device::resident_judge`] so that only
    /// the report comes back. `None`: this device cannot keep them, and the caller forms the
    /// host reference instead.
    fn reference_products_resident(
        &self,
        x: &ActivationOperand<'_>,
        weights: &WeightOperand<'_>,
        w_key: Option<u64>,
    ) -> Result<Option<ResidentLanes>, DeviceFault> {
        let _ = (x, weights, w_key);
        Ok(None)
    }

    /// The raw lanes `(y, a, a_offset or 0)` at element indices `m·N + n`.
    fn resident_gather(
        &self,
        lanes: &ResidentLanes,
        index: &[usize],
    ) -> Result<Vec<[f64; 3]>, DeviceFault> {
        let _ = (lanes, index);
        Err(resident::no_resident_lanes(self.name()))
    }

    /// Every element of the raw lanes, on the host.
    fn resident_download(&self, lanes: &ResidentLanes) -> Result<RawLanes, DeviceFault> {
        let _ = lanes;
        Err(resident::no_resident_lanes(self.name()))
    }

    /// The output judged against the lanes where they are: the report of
    /// `compare::judge_plain`, or `None` when an element is not plain (the host judges then).
    fn resident_judge(
        &self,
        lanes: &ResidentLanes,
        request: &JudgeRequest<'_>,
    ) -> Result<Option<CompareReport>, DeviceFault> {
        let _ = (lanes, request);
        Err(resident::no_resident_lanes(self.name()))
    }
}

/// What the runner and the tests use: one object-safe interface over every backend.
pub trait Device: Send + Sync {
    fn target(&self) -> Target;
    fn execution(&self) -> Execution {
        Execution::Native
    }
    /// The target as a run names it (`sm_90`, `gfx1151-emu`).
    fn run_target(&self) -> RunTarget {
        RunTarget {
            target: self.target(),
            execution: self.execution(),
        }
    }
    fn name(&self) -> String;
    fn health(&self) -> Health;
    /// Devices built on a [`Backend`] say what they are; anything else is host code.
    fn kind(&self) -> DeviceKind {
        DeviceKind::Simulated
    }
    fn allocation(&self) -> Allocation {
        Allocation::Guarded
    }
    /// Whether this "device" is host code only, so several threads may share it (real devices
    /// get parallelism from worker processes instead).
    fn host_only(&self) -> bool {
        false
    }

    /// Whether every launch and product returns at once without computing (the CPU-side
    /// stand-in): its outputs are placeholders, and checks of them are not applied.
    fn computes_nothing(&self) -> bool {
        false
    }

    /// What this device has emulated so far; `None` for hardware and host stand-ins.
    fn emulated_work(&self) -> Option<EmulatedWork> {
        None
    }

    /// A GEMM kernel (skinny, fused, fallback) on validated inputs: uploads, poisons and guards
    /// Y, launches, synchronises under the watchdog, downloads and checks the guards.
    fn run_gemm(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        inputs: &DeviceInputs<'_>,
    ) -> Result<GemmOutput, DeviceFault>;
    /// The dequant kernel: the dense copy, poisoned and guarded like Y.
    fn dequant(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        inputs: &DeviceInputs<'_>,
    ) -> Result<DequantOutput, DeviceFault>;
    /// The dense path in the vendor BLAS (fp32 compute) on inputs validated for `kernel`.
    fn dense_gemm(
        &self,
        kernel: &KernelDecl,
        inputs: &DeviceInputs<'_>,
    ) -> Result<GemmOutput, DeviceFault>;

    /// The full-precision reference's products on the device (`--reference gpu`): row-major
    /// `x[M, K]` and `w[N, K]` in f64 in, `y = x·wᵀ` and the bound's magnitude term
    /// `a = |x|·|w|ᵀ` (both `[M, N]`, row-major) out, by the vendor's DGEMM. No code of the
    /// kernels under test is involved; the caller bounds `w`'s size (chunks along N).
    fn reference_gemm_f64(
        &self,
        x: &[f64],
        w: &[f64],
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), DeviceFault> {
        let _ = (x, w, m, n, k);
        Err(no_f64_gemm(self.name()))
    }

    /// [`Device::reference_gemm_f64`] with `w_key` naming `w`'s content when the same `w` comes
    /// again (a layer's next batch size): a backend may keep `w` resident under it.
    fn reference_gemm_f64_keyed(
        &self,
        x: &[f64],
        w: &[f64],
        w_key: Option<u64>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), DeviceFault> {
        let _ = w_key;
        self.reference_gemm_f64(x, w, m, n, k)
    }

    /// `count` realistic activations drawn on the device from `stream` (the bits of
    /// `data::RealisticSource`), brought to the host; `None`: this device does not draw them,
    /// and the host does.
    fn draw_realistic(
        &self,
        stream: &StreamKey,
        dtype: ActDtype,
        count: usize,
    ) -> Result<Option<Vec<u16>>, DeviceFault> {
        let _ = (stream, dtype, count);
        Ok(None)
    }

    /// The GPU reference's products kept on the device (`--reference gpu`): X widened and the
    /// exact weights decoded there from `x` and `weights`, then `y = x·wᵀ`, `a = |x|·|w|ᵀ` and, with an offset,
    /// `|x|·w_offsetᵀ` (`[M, N]` each), judged there by [`Device::resident_judge`] so that only
    /// the report comes back. `None`: this device cannot keep them, and the caller forms the
    /// host reference instead.
    fn reference_products_resident(
        &self,
        x: &ActivationOperand<'_>,
        weights: &WeightOperand<'_>,
        w_key: Option<u64>,
    ) -> Result<Option<ResidentLanes>, DeviceFault> {
        let _ = (x, weights, w_key);
        Ok(None)
    }

    /// The raw lanes `(y, a, a_offset or 0)` at element indices `m·N + n`.
    fn resident_gather(
        &self,
        lanes: &ResidentLanes,
        index: &[usize],
    ) -> Result<Vec<[f64; 3]>, DeviceFault> {
        let _ = (lanes, index);
        Err(resident::no_resident_lanes(self.name()))
    }

    /// Every element of the raw lanes, on the host.
    fn resident_download(&self, lanes: &ResidentLanes) -> Result<RawLanes, DeviceFault> {
        let _ = lanes;
        Err(resident::no_resident_lanes(self.name()))
    }

    /// The output judged against the lanes where they are: the report of
    /// `compare::judge_plain`, or `None` when an element is not plain (the host judges then).
    fn resident_judge(
        &self,
        lanes: &ResidentLanes,
        request: &JudgeRequest<'_>,
    ) -> Result<Option<CompareReport>, DeviceFault> {
        let _ = (lanes, request);
        Err(resident::no_resident_lanes(self.name()))
    }

    /// A MoE layer: `moe_align`, then `moe` on the align step's device outputs; the align
    /// outputs and C come back through their guards (`moe.rs`, one implementation for every
    /// [`Backend`]). Host code standing in for a device has no MoE path: it says so as a missing
    /// capability (a skip), as without the vendor BLAS.
    fn run_moe(&self, inputs: &MoeInputs<'_>) -> Result<MoeOutput, DeviceFault> {
        let _ = inputs;
        Err(no_moe_path(self.name()))
    }

    /// The align step alone.
    fn run_moe_align(&self, inputs: &MoeInputs<'_>) -> Result<AlignOutput, DeviceFault> {
        let _ = inputs;
        Err(no_moe_path(self.name()))
    }
}

/// Device-event timing, apart from [`Device`] so that a correctness run needs none of it;
/// bench and perf take a `&dyn DeviceBench` (it upcasts to `&dyn Device` for their checked
/// launches). Every [`Backend`] times through one implementation here; host code standing in
/// for a device implements it by refusing ([`DeviceFault::Unsupported`]).
pub trait DeviceBench: Device {
    /// Median device time of one launch of `entry`.
    fn bench_kernel(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        inputs: &DeviceInputs<'_>,
        plan: BenchPlan,
    ) -> Result<Timing, DeviceFault>;
    /// As [`DeviceBench::bench_kernel`], but launch `i` reads copy `i % copies.len()`: each copy is
    /// staged in its own buffers, so rotating through enough of them keeps the inputs out of
    /// the last-level cache (cold reads, as a decode step sees its weights). Every copy must
    /// have the launch shape of the first.
    fn bench_kernel_rotating(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        copies: &[DeviceInputs<'_>],
        plan: BenchPlan,
    ) -> Result<Timing, DeviceFault>;
    /// Median device time of one group of launches issued back to back as one sample, sample
    /// `i` issuing group `i % groups.len()` (the MoE benchmark's baseline: one `fused` launch per
    /// expert, groups for different routings so the weights they read rotate out of the cache).
    /// Each launch keeps its own staged buffers, as the engine's experts do.
    fn bench_sequence(
        &self,
        kernel: &KernelDecl,
        groups: &[Vec<DeviceInputs<'_>>],
        plan: BenchPlan,
    ) -> Result<Timing, DeviceFault>;
    /// Median device time of a device-to-device copy of `bytes` (the bandwidth ceiling).
    fn bench_copy(&self, bytes: usize, plan: BenchPlan) -> Result<Timing, DeviceFault>;
    /// As [`DeviceBench::bench_copy`], but sample `i` copies between pair `i % copies` of
    /// separately allocated source and destination buffers: with enough pairs neither side is
    /// still in the last-level cache (the cold copy ceiling perf mode divides decode times by).
    /// Host code standing in for a device has no copy engine to time.
    fn bench_copy_rotating(
        &self,
        bytes: usize,
        copies: usize,
        plan: BenchPlan,
    ) -> Result<Timing, DeviceFault> {
        let _ = (bytes, copies, plan);
        Err(DeviceFault::Unsupported {
            what: "rotating copy timing".into(),
            device: self.name(),
        })
    }
    /// Median device time of the vendor-BLAS GEMM, launch `i` on `copies[i % len]` (separately
    /// staged copies, so that a dense copy smaller than the cache is still read cold).
    fn bench_dense_gemm(
        &self,
        kernel: &KernelDecl,
        copies: &[DeviceInputs<'_>],
        plan: BenchPlan,
    ) -> Result<Timing, DeviceFault>;

    /// Median device times of `moe_align`, `moe` and the two back to back (the benchmark),
    /// sample `i` running copy `i % copies.len()` (each staged in its own buffers).
    fn bench_moe(
        &self,
        copies: &[MoeInputs<'_>],
        plan: BenchPlan,
    ) -> Result<MoeTiming, DeviceFault> {
        let _ = (copies, plan);
        Err(no_moe_path(self.name()))
    }
}

/// A device without the vendor's f64 GEMM: the run uses the CPU reference (`--reference cpu`).
fn no_f64_gemm(device: String) -> DeviceFault {
    DeviceFault::MissingCapability {
        capability: Capability::F64Gemm,
        device,
        why: "no vendor f64 GEMM on this backend".into(),
    }
}

fn no_moe_path(device: String) -> DeviceFault {
    DeviceFault::MissingCapability {
        capability: Capability::MoeLaunch,
        device,
        why: "it launches no kernels (host code standing in for a device)".into(),
    }
}

/// Uploaded inputs of one launch and the guarded output buffer.
struct Staged<B: Backend> {
    inputs: Vec<(TensorRole, B::Buffer)>,
    output: B::Buffer,
    layout: OutputLayout,
}

impl<B: Backend> Staged<B> {
    fn buffer(&self, role: TensorRole) -> Option<&B::Buffer> {
        self.inputs.iter().find(|(r, _)| *r == role).map(|(_, b)| b)
    }
}

fn check_ready<B: Backend + ?Sized>(
    b: &B,
    kernel: &KernelDecl,
    inputs: &DeviceInputs<'_>,
) -> Result<(), DeviceFault> {
    if let Health::Lost { cause } = b.health() {
        return Err(DeviceFault::ContextLost { cause });
    }
    if inputs.kernel() != kernel.id {
        return Err(DeviceFault::WrongKernel {
            kernel: kernel.id,
            validated: inputs.kernel(),
        });
    }
    Ok(())
}

/// Uploads every input and builds the poisoned, guarded output. `prefill` puts values into
/// logical output elements instead of the poison (bias for `beta = 1`).
fn stage<B: Backend>(
    b: &B,
    inputs: &DeviceInputs<'_>,
    prefill: Option<&dyn Fn(usize, usize) -> Option<u16>>,
) -> Result<Staged<B>, DeviceFault> {
    let allocation = b.allocation();
    let mut staged = Vec::new();
    for role in inputs.launch().present_roles() {
        if role == inputs.output_role() {
            continue;
        }
        let Some(host) = inputs.host(role) else {
            continue;
        };
        let bytes = host.le_bytes();
        // Exact: the view's extent only (validation proved the host buffer holds it).
        let len = match allocation {
            Allocation::Guarded => bytes.len(),
            Allocation::Exact => inputs
                .launch()
                .view(role)
                .and_then(|v| v.required_bytes())
                .map_or(bytes.len(), |r| r.min(bytes.len())),
        };
        let mut buf = b.alloc(len.max(1))?;
        b.upload(&mut buf, &bytes[..len])?;
        staged.push((role, buf));
    }
    let view =
        inputs
            .launch()
            .view(inputs.output_role())
            .ok_or_else(|| DeviceFault::Unsupported {
                what: "a launch without an output tensor".into(),
                device: b.name(),
            })?;
    let poison = inputs.launch().dtype.poison_bits();
    let layout = match allocation {
        Allocation::Guarded => OutputLayout::for_view(view, poison),
        Allocation::Exact => OutputLayout::exact_for_view(view, poison),
    };
    let init = match prefill {
        Some(f) => layout.initial_bytes_with(f),
        None => layout.initial_bytes(),
    };
    let mut output = b.alloc(init.len().max(1))?;
    b.upload(&mut output, &init)?;
    Ok(Staged {
        inputs: staged,
        output,
        layout,
    })
}

fn packed_for<B: Backend>(
    b: &B,
    kernel: &KernelDecl,
    inputs: &DeviceInputs<'_>,
    s: &Staged<B>,
) -> Result<PackedArgs, DeviceFault> {
    let out_role = inputs.output_role();
    let out_base = b.address(&s.output) + s.layout.base_offset() as u64;
    let address = |role: TensorRole| -> u64 {
        if role == out_role {
            out_base
        } else {
            s.buffer(role).map_or(0, |buf| b.address(buf))
        }
    };
    pack_args(kernel, inputs.validated(), &address).map_err(|_| DeviceFault::WrongKernel {
        kernel: kernel.id,
        validated: inputs.kernel(),
    })
}

fn geometry_for<B: Backend>(b: &B, kernel: &KernelDecl, shape: &LaunchShape) -> LaunchGeometry {
    (kernel.geometry)(shape, b.target())
}

fn run_kernel<B: Backend>(
    b: &B,
    kernel: &KernelDecl,
    entry: &str,
    inputs: &DeviceInputs<'_>,
) -> Result<OutputReport, DeviceFault> {
    check_ready(b, kernel, inputs)?;
    if kernel.source_file.is_none() {
        return Err(DeviceFault::Unsupported {
            what: format!(
                "{} as a kernel launch (it runs in the vendor BLAS)",
                kernel.id
            ),
            device: b.name(),
        });
    }
    let staged = stage(b, inputs, None)?;
    let args = packed_for(b, kernel, inputs, &staged)?;
    let geometry = geometry_for(b, kernel, &inputs.validated().shape);
    b.launch(kernel, entry, &geometry, &args)?;
    b.synchronize(&format!("{entry} ({})", kernel.id))?;
    let bytes = b.download(&staged.output)?;
    Ok(staged.layout.inspect(&bytes))
}

/// The BLAS call for a launch validated against the dense declaration.
fn blas_for(inputs: &DeviceInputs<'_>) -> Result<BlasGemm, DeviceFault> {
    let li = inputs.launch();
    let v = inputs.validated();
    let lead = |role: TensorRole| li.view(role).and_then(|t| t.strides.first().copied());
    let missing = |what: &str| DeviceFault::Unsupported {
        what: format!("a dense GEMM without {what}"),
        device: "any device".into(),
    };
    let offset = |role: TensorRole| li.view(role).map_or(0, |t| t.byte_offset);
    // The validated stride arguments are the leading dimensions; the views only back them up.
    let ld =
        |scalar: ScalarArg, role: TensorRole| v.scalar(scalar).map(|s| s as usize).or(lead(role));
    Ok(BlasGemm {
        m: li.m,
        n: li.n,
        k: li.k,
        dtype: li.dtype,
        x_ld: ld(ScalarArg::XRowStride, TensorRole::X).ok_or_else(|| missing("x"))?,
        dense_ld: ld(ScalarArg::DenseRowStride, TensorRole::Dense)
            .ok_or_else(|| missing("the dense copy"))?,
        y_ld: ld(ScalarArg::YRowStride, TensorRole::Y).ok_or_else(|| missing("y"))?,
        x_offset: offset(TensorRole::X),
        dense_offset: offset(TensorRole::Dense),
        y_offset: offset(TensorRole::Y),
        beta: if li.bias.is_some() { 1.0 } else { 0.0 },
    })
}

/// Y prefilled with the broadcast bias, so that `beta = 1` adds it inside the BLAS epilogue.
/// Where that epilogue rounds is the vendor's choice (before or after adding C), so the dense
/// path declares `BiasStage::Either` (`dense_recipe` in kernels/src/set.rs says why).
fn bias_prefill<'a>(
    inputs: &'a DeviceInputs<'_>,
) -> Option<impl Fn(usize, usize) -> Option<u16> + 'a> {
    let bias = inputs.host(TensorRole::Bias)?;
    let bytes = bias.le_bytes().into_owned();
    Some(move |_r: usize, c: usize| {
        bytes
            .get(2 * c..2 * c + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    })
}

fn run_blas<B: Backend>(
    b: &B,
    kernel: &KernelDecl,
    inputs: &DeviceInputs<'_>,
) -> Result<(Staged<B>, BlasGemm), DeviceFault> {
    check_ready(b, kernel, inputs)?;
    let g = blas_for(inputs)?;
    let prefill = bias_prefill(inputs);
    let staged = stage(
        b,
        inputs,
        prefill
            .as_ref()
            .map(|f| f as &dyn Fn(usize, usize) -> Option<u16>),
    )?;
    Ok((staged, g))
}

fn blas_operands<'s, B: Backend>(
    inputs: &'s [(TensorRole, B::Buffer)],
    b: &B,
) -> Result<(&'s B::Buffer, &'s B::Buffer), DeviceFault> {
    let find = |role: TensorRole| inputs.iter().find(|(r, _)| *r == role).map(|(_, buf)| buf);
    let missing = |what: &str| DeviceFault::Unsupported {
        what: format!("a dense GEMM without {what}"),
        device: b.name(),
    };
    Ok((
        find(TensorRole::X).ok_or_else(|| missing("x"))?,
        find(TensorRole::Dense).ok_or_else(|| missing("the dense copy"))?,
    ))
}

/// The output offset inside the guarded buffer is added to Y's own view offset.
fn with_guard_offset(g: &BlasGemm, layout: &OutputLayout) -> BlasGemm {
    BlasGemm {
        y_offset: layout.base_offset() + g.y_offset,
        ..*g
    }
}

/// One checked run first (compiles, loads, surfaces errors), then the warm-up launches left
/// queued so that the timed ones start with the device busy: a timed window then holds device
/// time only, not the host's enqueue latency.
fn bench<B: Backend>(
    b: &B,
    plan: BenchPlan,
    during: &str,
    enqueue: &mut dyn FnMut(usize) -> Result<(), DeviceFault>,
) -> Result<Timing, DeviceFault> {
    enqueue(0)?;
    b.synchronize(during)?;
    for i in 0..plan.warmup {
        enqueue(1 + i)?;
    }
    let mut events = Vec::with_capacity(plan.iters);
    for i in 0..plan.iters.max(1) {
        let start = b.record()?;
        enqueue(1 + plan.warmup + i)?;
        let end = b.record()?;
        events.push((start, end));
    }
    b.synchronize(during)?;
    let samples = events
        .iter()
        .map(|(s, e)| b.elapsed_us(s, e))
        .collect::<Result<Vec<f64>, _>>()?;
    Timing::from_samples(samples).ok_or_else(|| DeviceFault::Unsupported {
        what: "a benchmark without iterations".into(),
        device: b.name(),
    })
}

impl<B: Backend> Device for B {
    fn target(&self) -> Target {
        Backend::target(self)
    }

    fn emulated_work(&self) -> Option<EmulatedWork> {
        Backend::emulated_work(self)
    }

    fn execution(&self) -> Execution {
        Backend::execution(self)
    }

    fn name(&self) -> String {
        Backend::name(self)
    }

    fn health(&self) -> Health {
        Backend::health(self)
    }

    fn kind(&self) -> DeviceKind {
        Backend::kind(self)
    }

    fn allocation(&self) -> Allocation {
        Backend::allocation(self)
    }

    fn run_gemm(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        inputs: &DeviceInputs<'_>,
    ) -> Result<GemmOutput, DeviceFault> {
        let li = inputs.launch();
        let (m, n) = (li.m, li.n);
        run_kernel(self, kernel, entry, inputs).map(|r| GemmOutput::from_report(m, n, r))
    }

    fn dequant(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        inputs: &DeviceInputs<'_>,
    ) -> Result<DequantOutput, DeviceFault> {
        let li = inputs.launch();
        let row_stride = li
            .dense
            .as_ref()
            .and_then(|d| d.strides.first().copied())
            .unwrap_or(li.k);
        let r = run_kernel(self, kernel, entry, inputs)?;
        // An exact-size copy ends at the last row's last element; the dense launch that reads it
        // checks the host buffer against the view's full `bytes_available`, so the (never read)
        // tail of the last row is filled with poison.
        let mut strided = r.strided;
        if let Some(v) = li.dense.as_ref() {
            let whole = v.bytes_available.div_ceil(2);
            if strided.len() < whole {
                strided.resize(whole, li.dtype.poison_bits());
            }
        }
        Ok(DequantOutput {
            n: li.n,
            k: li.k,
            row_stride,
            dense_bits: r.bits,
            strided_bits: strided,
            guard_violations: r.guard_violations,
            stray_writes: r.stray_writes,
            unwritten: r.unwritten,
        })
    }

    fn dense_gemm(
        &self,
        kernel: &KernelDecl,
        inputs: &DeviceInputs<'_>,
    ) -> Result<GemmOutput, DeviceFault> {
        let (
            Staged {
                inputs: staged,
                mut output,
                layout,
            },
            g,
        ) = run_blas(self, kernel, inputs)?;
        let g = with_guard_offset(&g, &layout);
        let (x, dense) = blas_operands(&staged, self)?;
        self.blas_gemm(&g, x, dense, &mut output)?;
        self.synchronize(&format!("dense GEMM ({})", kernel.id))?;
        let bytes = self.download(&output)?;
        Ok(GemmOutput::from_report(g.m, g.n, layout.inspect(&bytes)))
    }

    fn reference_gemm_f64(
        &self,
        x: &[f64],
        w: &[f64],
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), DeviceFault> {
        Backend::reference_gemm_f64(self, x, w, m, n, k)
    }

    fn reference_gemm_f64_keyed(
        &self,
        x: &[f64],
        w: &[f64],
        w_key: Option<u64>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), DeviceFault> {
        Backend::reference_gemm_f64_keyed(self, x, w, w_key, m, n, k)
    }

    fn draw_realistic(
        &self,
        stream: &StreamKey,
        dtype: ActDtype,
        count: usize,
    ) -> Result<Option<Vec<u16>>, DeviceFault> {
        Backend::draw_realistic(self, stream, dtype, count)
    }

    fn reference_products_resident(
        &self,
        x: &ActivationOperand<'_>,
        weights: &WeightOperand<'_>,
        w_key: Option<u64>,
    ) -> Result<Option<ResidentLanes>, DeviceFault> {
        Backend::reference_products_resident(self, x, weights, w_key)
    }

    fn resident_gather(
        &self,
        lanes: &ResidentLanes,
        index: &[usize],
    ) -> Result<Vec<[f64; 3]>, DeviceFault> {
        Backend::resident_gather(self, lanes, index)
    }

    fn resident_download(&self, lanes: &ResidentLanes) -> Result<RawLanes, DeviceFault> {
        Backend::resident_download(self, lanes)
    }

    fn resident_judge(
        &self,
        lanes: &ResidentLanes,
        request: &JudgeRequest<'_>,
    ) -> Result<Option<CompareReport>, DeviceFault> {
        Backend::resident_judge(self, lanes, request)
    }

    fn run_moe(&self, inputs: &MoeInputs<'_>) -> Result<MoeOutput, DeviceFault> {
        moe::run_moe(self, inputs)
    }

    fn run_moe_align(&self, inputs: &MoeInputs<'_>) -> Result<AlignOutput, DeviceFault> {
        moe::run_moe_align(self, inputs)
    }
}

impl<B: Backend> DeviceBench for B {
    fn bench_kernel(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        inputs: &DeviceInputs<'_>,
        plan: BenchPlan,
    ) -> Result<Timing, DeviceFault> {
        self.bench_kernel_rotating(kernel, entry, std::slice::from_ref(inputs), plan)
    }

    fn bench_kernel_rotating(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        copies: &[DeviceInputs<'_>],
        plan: BenchPlan,
    ) -> Result<Timing, DeviceFault> {
        let first = copies.first().ok_or_else(|| DeviceFault::Unsupported {
            what: "a benchmark over no input copies".into(),
            device: Backend::name(self),
        })?;
        let shape = &first.validated().shape;
        for c in copies {
            check_ready(self, kernel, c)?;
            if c.validated().shape != *shape {
                return Err(DeviceFault::Unsupported {
                    what: format!(
                        "a rotating benchmark over copies of different shapes ({:?} and {:?})",
                        shape,
                        c.validated().shape
                    ),
                    device: Backend::name(self),
                });
            }
        }
        // Staged buffers live until the timing is read: every copy stays resident.
        let mut staged = Vec::with_capacity(copies.len());
        let mut args = Vec::with_capacity(copies.len());
        for c in copies {
            let s = stage(self, c, None)?;
            args.push(packed_for(self, kernel, c, &s)?);
            staged.push(s);
        }
        let geometry = geometry_for(self, kernel, shape);
        bench(self, plan, &format!("benchmark of {entry}"), &mut |i| {
            self.launch(kernel, entry, &geometry, &args[i % args.len()])
        })
    }

    fn bench_sequence(
        &self,
        kernel: &KernelDecl,
        groups: &[Vec<DeviceInputs<'_>>],
        plan: BenchPlan,
    ) -> Result<Timing, DeviceFault> {
        let mut staged = Vec::new();
        let mut prepared = Vec::with_capacity(groups.len());
        for group in groups {
            let mut launches = Vec::with_capacity(group.len());
            for l in group {
                check_ready(self, kernel, l)?;
                let s = stage(self, l, None)?;
                let shape = l.validated().shape;
                launches.push((
                    kernel.launch_entry(&shape, Backend::target(self)),
                    geometry_for(self, kernel, &shape),
                    packed_for(self, kernel, l, &s)?,
                ));
                staged.push(s);
            }
            prepared.push(launches);
        }
        if prepared.is_empty() {
            return Err(DeviceFault::Unsupported {
                what: "a benchmark over no launch groups".into(),
                device: Backend::name(self),
            });
        }
        let during = format!("benchmark of launch groups of {}", kernel.id);
        bench(self, plan, &during, &mut |i| {
            prepared[i % prepared.len()]
                .iter()
                .try_for_each(|(entry, geometry, args)| self.launch(kernel, entry, geometry, args))
        })
    }

    fn bench_copy(&self, bytes: usize, plan: BenchPlan) -> Result<Timing, DeviceFault> {
        self.bench_copy_rotating(bytes, 1, plan)
    }

    fn bench_copy_rotating(
        &self,
        bytes: usize,
        copies: usize,
        plan: BenchPlan,
    ) -> Result<Timing, DeviceFault> {
        if let Health::Lost { cause } = Backend::health(self) {
            return Err(DeviceFault::ContextLost { cause });
        }
        if copies == 0 {
            return Err(DeviceFault::Unsupported {
                what: "a rotating copy benchmark over no buffer pairs".into(),
                device: Backend::name(self),
            });
        }
        let mut pairs = Vec::with_capacity(copies);
        for _ in 0..copies {
            pairs.push((self.alloc(bytes.max(1))?, self.alloc(bytes.max(1))?));
        }
        let during = format!("benchmark of a {bytes}-byte copy over {copies} buffer pairs");
        bench(self, plan, &during, &mut |i| {
            let (src, dst) = &mut pairs[i % copies];
            self.copy(dst, src, bytes)
        })
    }

    fn bench_dense_gemm(
        &self,
        kernel: &KernelDecl,
        copies: &[DeviceInputs<'_>],
        plan: BenchPlan,
    ) -> Result<Timing, DeviceFault> {
        if copies.is_empty() {
            return Err(DeviceFault::Unsupported {
                what: "a dense benchmark over no input copies".into(),
                device: Backend::name(self),
            });
        }
        let mut runs = Vec::with_capacity(copies.len());
        for c in copies {
            let (staged, g) = run_blas(self, kernel, c)?;
            // beta = 1 would accumulate across iterations; timing is the same GEMM with beta = 0
            let g = BlasGemm {
                beta: 0.0,
                ..with_guard_offset(&g, &staged.layout)
            };
            runs.push((staged, g));
        }
        bench(self, plan, "benchmark of the dense GEMM", &mut |i| {
            let n = runs.len();
            let (staged, g) = &mut runs[i % n];
            let (x, dense) = blas_operands(&staged.inputs, self)?;
            self.blas_gemm(g, x, dense, &mut staged.output)
        })
    }

    fn bench_moe(
        &self,
        copies: &[MoeInputs<'_>],
        plan: BenchPlan,
    ) -> Result<MoeTiming, DeviceFault> {
        moe::time_moe(self, copies, plan)
    }
}

/// The first device that opens: CUDA, then ROCm (feature `rocm`). Without one, the reasons
/// each backend gave, as a loud skip.
pub fn open_default() -> Result<Box<dyn DeviceBench>, Skip> {
    open_default_with(&KernelSources::Embedded, Allocation::Guarded)
}

/// As [`open_default`], with the kernels built from `sources` and buffers sized by
/// `allocation`. Only the CUDA backend offers [`Allocation::Exact`] (sanitizer runs are
/// NVIDIA's); check [`Device::allocation`].
pub fn open_default_with(
    sources: &KernelSources,
    allocation: Allocation,
) -> Result<Box<dyn DeviceBench>, Skip> {
    open_at(0, sources, allocation)
}

/// As [`open_default_with`], device `ordinal` of the first backend that has devices: a worker
/// of a run over several GPUs (`w4a16 run --gpus`) opens the one it is bound to.
pub fn open_at(
    ordinal: usize,
    sources: &KernelSources,
    allocation: Allocation,
) -> Result<Box<dyn DeviceBench>, Skip> {
    let mut reasons = Vec::new();
    #[cfg(feature = "cuda")]
    match cuda::CudaDevice::open_with(ordinal, sources.clone()) {
        Ok(d) => return Ok(Box::new(d.with_allocation(allocation))),
        Err(skip) => reasons.push(format!("cuda: {}", skip.reason)),
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (sources, allocation);
        reasons.push("cuda: not built (cargo feature `cuda`)".to_string());
    }
    #[cfg(feature = "rocm")]
    match rocm::RocmDevice::open_with(ordinal, sources.clone()) {
        Ok(d) => return Ok(Box::new(d)),
        Err(skip) => reasons.push(format!("rocm: {}", skip.reason)),
    }
    #[cfg(not(feature = "rocm"))]
    reasons.push("rocm: not built (cargo feature `rocm`)".to_string());
    Err(none::open_with(&reasons))
}

/// How many devices `kind`'s runtime sees (after `CUDA_VISIBLE_DEVICES` /
/// `HIP_VISIBLE_DEVICES`): what `w4a16 run --gpus all` spreads its workers over. A backend
/// that is not built, or whose runtime is missing, is a skip saying so; a simulated device is
/// the tests' own and has no count here, and the ISA emulator runs on this host's CPU: it has
/// no GPUs to spread over (`--gpus` says so loudly, or refuses a list of ordinals).
pub fn device_count(kind: DeviceKind) -> Result<usize, Skip> {
    match kind {
        #[cfg(feature = "cuda")]
        DeviceKind::Cuda => cuda::device_count(),
        #[cfg(not(feature = "cuda"))]
        DeviceKind::Cuda => Err(skip(
            Requirement::Gpu,
            "the CUDA backend is not built (cargo feature `cuda`)",
        )),
        #[cfg(feature = "rocm")]
        DeviceKind::Rocm => rocm::device_count(),
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

/// Device 0 of one backend, guarded, with the embedded kernels: what a test named for that
/// backend (`…_cuda`, `…_rocm`) opens. ROCm without the `rocm` feature is a skip saying so; a
/// simulated device is the harness's own unit tests' and is not opened here.
pub fn open_kind(kind: DeviceKind) -> Result<Box<dyn DeviceBench>, Skip> {
    match kind {
        DeviceKind::Cuda => Ok(Box::new(cuda::open()?)),
        #[cfg(feature = "rocm")]
        DeviceKind::Rocm => Ok(Box::new(rocm::open()?)),
        #[cfg(not(feature = "rocm"))]
        DeviceKind::Rocm => Err(rocm_not_built()),
        DeviceKind::Simulated => Err(skip(
            Requirement::Gpu,
            "a simulated device is not opened by kind (the harness's unit tests build their own)",
        )),
        DeviceKind::Emulator => Err(skip(
            Requirement::AmdToolchain,
            "the ISA emulator runs one AMD target's code objects: open it with `open_emu`",
        )),
    }
}

/// The ISA emulator running `target`'s real code objects (gfx11/gfx12) on the host. Buffers are
/// exact (`Allocation::Exact` is the emulator's own): every access outside a tensor faults.
#[cfg(feature = "emu")]
pub fn open_emu(target: Target, sources: &KernelSources) -> Result<Box<dyn DeviceBench>, Skip> {
    Ok(Box::new(emu::open_with(target, sources.clone())?))
}

/// Without the `emu` feature the emulator is a skip saying so.
#[cfg(not(feature = "emu"))]
pub fn open_emu(target: Target, _sources: &KernelSources) -> Result<Box<dyn DeviceBench>, Skip> {
    Err(skip(
        Requirement::AmdToolchain,
        format!("{target} on the ISA emulator needs the cargo feature `emu`"),
    ))
}

/// The CUDA device compiling and running the kernels in `target`'s AMD configuration
/// (`gfx1151-emu`). Emulation needs an NVIDIA GPU; without one this is the skip saying so.
pub fn open_emulated_with(
    target: Target,
    sources: &KernelSources,
    allocation: Allocation,
) -> Result<Box<dyn DeviceBench>, Skip> {
    open_emulated_at(0, target, sources, allocation)
}

/// As [`open_emulated_with`], on CUDA device `ordinal`.
pub fn open_emulated_at(
    ordinal: usize,
    target: Target,
    sources: &KernelSources,
    allocation: Allocation,
) -> Result<Box<dyn DeviceBench>, Skip> {
    #[cfg(feature = "cuda")]
    {
        let d = cuda::CudaDevice::open_with(ordinal, sources.clone()).map_err(|s| Skip {
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

/// Skip for a requirement other than a GPU (e.g. NVRTC missing on a machine with a GPU).
pub(crate) fn skip(requirement: Requirement, reason: impl Into<String>) -> Skip {
    Skip {
        requirement,
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_samples() {
        let t = Timing::from_samples(vec![5.0, 1.0, 3.0]).unwrap();
        assert_eq!((t.median_us, t.min_us, t.max_us), (3.0, 1.0, 5.0));
        let t = Timing::from_samples(vec![4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(t.median_us, 2.5);
        assert!(Timing::from_samples(vec![]).is_none());
    }
}

#[cfg(test)]
mod named_tests {
    w4a16_reference::named_enum_tests! {
        elem_type: crate::tensor::ElemType,
    }
}
