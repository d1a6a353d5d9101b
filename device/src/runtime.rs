//! What a runtime gives the launch flow: device memory, kernel launches, the vendor BLAS,
//! timing events and a watchdog-guarded synchronise. CUDA (`cuda.rs`), HIP (`rocm.rs`), the
//! ISA emulator (`emu.rs`) and the test simulator (`simulated.rs`) each implement it once;
//! the checked launch flow over it ([`crate::Device`]) and its timing
//! ([`crate::DeviceBench`]) are written once for all of them (`checked_launch.rs`,
//! `timing.rs`).

use w4a16_kernels::KernelDecl;
use w4a16_kernels::decl::LaunchGeometry;

use crate::fault::DeviceFault;
use crate::input_cache::InputCache;
use crate::launch::PackedArgs;
use crate::outputs::BlasGemm;
use crate::reference_offload::ReferenceOffload;

/// The primitives of a GPU runtime (or of host code standing in for one). Every method checks
/// its driver call and maps failures to [`DeviceFault`] (classified: launch refused / sticky
/// fault / other), never panics. What the device says about itself and the reference's work it
/// can take over come from the supertraits ([`crate::DeviceInfo`], [`ReferenceOffload`]).
pub trait Runtime: ReferenceOffload {
    /// A device allocation; freed on drop.
    type Buffer: Send;
    /// A timing event on the runtime's stream.
    type Event;

    fn alloc(&self, bytes: usize) -> Result<Self::Buffer, DeviceFault>;
    /// Device address of the first byte.
    fn address(&self, buf: &Self::Buffer) -> u64;
    /// Host to device, complete (or staged) when it returns; `src.len()` ≤ the buffer.
    fn upload(&self, dst: &mut Self::Buffer, src: &[u8]) -> Result<(), DeviceFault>;
    /// As [`Runtime::upload`], for an output's poison and guard bands: bytes a kernel must not
    /// read before writing them. The ISA emulator's initcheck keeps them uninitialised; every
    /// other runtime uploads them as any bytes.
    fn upload_poison(&self, dst: &mut Self::Buffer, src: &[u8]) -> Result<(), DeviceFault> {
        self.upload(dst, src)
    }
    /// The whole buffer back to the host. Call after [`Runtime::synchronize`].
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
    /// [`DeviceFault::Timeout`] and leaves the device [`crate::Health::Lost`].
    fn synchronize(&self, during: &str) -> Result<(), DeviceFault>;

    /// Whether [`Runtime::same_bytes`] compares on the device; where not, a caller downloads.
    fn compares_on_device(&self) -> bool {
        false
    }

    /// Whether the first `bytes` bytes of two buffers are equal, compared on the device (no
    /// download); called only where [`Runtime::compares_on_device`].
    fn same_bytes(
        &self,
        a: &Self::Buffer,
        b: &Self::Buffer,
        bytes: usize,
    ) -> Result<bool, DeviceFault> {
        let _ = (a, b, bytes);
        Err(DeviceFault::Unsupported {
            what: "comparing buffers on the device".into(),
            device: self.name(),
        })
    }

    /// Pristine device copies of inputs by content ([`crate::input_cache`]); `None`: every
    /// input of every launch is uploaded from the host.
    fn input_cache(&self) -> Option<&std::sync::Mutex<InputCache<Self::Buffer>>> {
        None
    }
}
