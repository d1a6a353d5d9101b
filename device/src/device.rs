//! [`Device`]: what the runner and the tests launch through, one object-safe interface over
//! every runtime. The checked launch flow every runtime must share (upload, poison, guard
//! bands, argument packing from the declaration, synchronise, download, guard check) is written
//! once, in the blanket `impl<R: Runtime> Device for R` here (its steps in `staging.rs`); host
//! code standing in for a device (`stand_in.rs`) implements [`Device`] directly.

use w4a16_kernels::KernelDecl;

use crate::fault::{Capability, DeviceFault};
use crate::input_cache::HashedSlices;
use crate::launch::DeviceInputs;
use crate::moe::{self, AlignOutput, MoeInputs, MoeOutput};
use crate::outputs::{DequantCheck, DequantOutput, GemmOutput};
use crate::reference_offload::ReferenceOffload;
use crate::runtime::Runtime;
use crate::staging::{
    Staged, blas_operands, download_inspect, launch_synchronized, output_is, run_blas, run_kernel,
    with_guard_offset,
};

/// What the runner and the tests use: checked launches on validated inputs, on any runtime.
/// What the device says about itself and the reference's work it takes over come from the
/// supertraits ([`crate::DeviceInfo`], [`ReferenceOffload`]).
pub trait Device: ReferenceOffload {
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
    /// Whether [`Device::dequant_against`] compares on the device (then the caller forms the
    /// expected payload; elsewhere the output comes back and is compared on the host, and the
    /// payload would be work for nothing).
    fn compares_on_device(&self) -> bool {
        false
    }
    /// [`Device::dequant`] checked against `expected_payload`, the payload a correct kernel
    /// leaves (`OutputLayout::payload_of` the expected `[N, K]` copy): where the runtime
    /// compares on the device, an identical buffer never comes back
    /// ([`DequantCheck::AsExpected`]); otherwise the output, as [`Device::dequant`] gives it.
    fn dequant_against(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        inputs: &DeviceInputs<'_>,
        expected_payload: &[u16],
    ) -> Result<DequantCheck, DeviceFault> {
        let _ = expected_payload;
        self.dequant(kernel, entry, inputs)
            .map(DequantCheck::Output)
    }
    /// The dense path in the vendor BLAS (fp32 compute) on inputs validated for `kernel`.
    fn dense_gemm(
        &self,
        kernel: &KernelDecl,
        inputs: &DeviceInputs<'_>,
    ) -> Result<GemmOutput, DeviceFault>;

    /// A MoE layer: `moe_align`, then `moe` on the align step's device outputs; the align
    /// outputs and C come back through their guards (`moe.rs`, one implementation for every
    /// [`Runtime`]). Host code standing in for a device has no MoE path: it says so as a missing
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

pub(crate) fn no_moe_path(device: String) -> DeviceFault {
    DeviceFault::MissingCapability {
        capability: Capability::MoeLaunch,
        device,
        why: "it launches no kernels (host code standing in for a device)".into(),
    }
}

impl<R: Runtime> Device for R {
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
        let (staged, mut spans) = launch_synchronized(self, kernel, entry, inputs)?;
        let r = download_inspect(self, &staged, &mut spans)?;
        spans.print(entry);
        Ok(dequant_output(inputs, r))
    }

    fn compares_on_device(&self) -> bool {
        <R as Runtime>::compares_on_device(self)
    }

    fn dequant_against(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        inputs: &DeviceInputs<'_>,
        expected_payload: &[u16],
    ) -> Result<DequantCheck, DeviceFault> {
        let (staged, mut spans) = launch_synchronized(self, kernel, entry, inputs)?;
        if output_is(self, &staged, expected_payload)? == Some(true) {
            spans.mark("compare");
            spans.print(entry);
            return Ok(DequantCheck::AsExpected);
        }
        let r = download_inspect(self, &staged, &mut spans)?;
        spans.print(entry);
        Ok(DequantCheck::Output(dequant_output(inputs, r)))
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
        ) = run_blas(self, kernel, inputs, &mut HashedSlices::default())?;
        let g = with_guard_offset(&g, &layout);
        let (x, dense) = blas_operands(&staged, self)?;
        self.blas_gemm(&g, x, dense, &mut output)?;
        self.synchronize(&format!("dense GEMM ({})", kernel.id))?;
        let bytes = self.download(&output)?;
        Ok(GemmOutput::from_report(g.m, g.n, layout.inspect(&bytes)))
    }

    fn run_moe(&self, inputs: &MoeInputs<'_>) -> Result<MoeOutput, DeviceFault> {
        moe::run_moe(self, inputs)
    }

    fn run_moe_align(&self, inputs: &MoeInputs<'_>) -> Result<AlignOutput, DeviceFault> {
        moe::run_moe_align(self, inputs)
    }
}

/// The dequant kernel's output as [`Device::dequant`] returns it: an exact-size copy ends at
/// the last row's last element; the dense launch that reads it checks the host buffer against
/// the view's full `bytes_available`, so the (never read) tail of the last row is filled with
/// poison.
fn dequant_output(inputs: &DeviceInputs<'_>, r: crate::guard::OutputReport) -> DequantOutput {
    let li = inputs.launch();
    let row_stride = li
        .dense
        .as_ref()
        .and_then(|d| d.strides.first().copied())
        .unwrap_or(li.k);
    let mut strided = r.strided;
    if let Some(v) = li.dense.as_ref() {
        let whole = v.bytes_available.div_ceil(2);
        if strided.len() < whole {
            strided.resize(whole, li.dtype.poison_bits());
        }
    }
    DequantOutput {
        n: li.n,
        k: li.k,
        row_stride,
        dense_bits: r.bits,
        strided_bits: strided,
        guard_violations: r.guard_violations,
        stray_writes: r.stray_writes,
        unwritten: r.unwritten,
    }
}
