//! A device that computes nothing: every launch returns at once with an all-zero output of the
//! right shape. It exists to time the CPU side of a run (data, conversion, reference and
//! verification) on a machine without a GPU — the cost a small CI runner pays for checking a
//! GPU's answers. Its verdicts are meaningless and the CLI never reports them.
//!
//! The verification work does not depend on the output's values: the full comparison visits
//! every element, and Freivalds plus the sampled lines do the same passes whether they pass or
//! fail, so zeros cost what a real output costs.

use w4a16_kernels::{KernelDecl, Target};
use w4a16_reference::compare::{CompareReport, JudgeRequest};
use w4a16_reference::offload::{ActivationOperand, RawLanes, WeightOperand};

use super::*;
use crate::launch::DeviceInputs;

pub struct StandInDevice {
    target: Target,
}

impl StandInDevice {
    /// Stands in for a device of `target` (selection and padding follow that target).
    pub fn new(target: Target) -> Self {
        StandInDevice { target }
    }

    fn unsupported(&self, what: &str) -> DeviceFault {
        DeviceFault::Unsupported {
            what: what.to_string(),
            device: self.name(),
        }
    }
}

fn zeros_like_y(inputs: &DeviceInputs<'_>) -> GemmOutput {
    let l = inputs.launch();
    GemmOutput {
        m: l.m,
        n: l.n,
        y_bits: vec![0; l.m * l.n],
        guard_violations: Vec::new(),
        stray_writes: 0,
        unwritten: 0,
    }
}

impl DeviceInfo for StandInDevice {
    fn target(&self) -> Target {
        self.target
    }

    fn name(&self) -> String {
        format!("stand-in for {} (computes nothing)", self.target)
    }

    fn health(&self) -> Health {
        Health::Ok
    }

    fn kind(&self) -> DeviceKind {
        DeviceKind::Simulated
    }

    fn allocation(&self) -> Allocation {
        Allocation::Guarded
    }
}

impl ReferenceOffload for StandInDevice {
    /// The GPU reference's products, not formed: with `--reference gpu` the CPU side is the
    /// exact f64 operands, the seeded cross-check's CPU elements and the verification.
    fn reference_gemm_f64(
        &self,
        _x: &[f64],
        _w: &[f64],
        m: usize,
        n: usize,
        _k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), DeviceFault> {
        Ok((vec![0.0; m * n], vec![0.0; m * n]))
    }

    /// The held lanes, not formed either: on a device that judges next to its lanes, the
    /// comparison is the device's, so the CPU side is the operands and the cross-check.
    fn reference_products_held(
        &self,
        x: &ActivationOperand<'_>,
        weights: &WeightOperand<'_>,
        _w_key: Option<u64>,
    ) -> Result<Option<HeldLanes>, DeviceFault> {
        Ok(Some(HeldLanes {
            m: x.m,
            n: weights.n,
            has_offset: weights.offset.is_some(),
            inner: Box::new(()),
        }))
    }

    fn held_gather(
        &self,
        _lanes: &HeldLanes,
        index: &[usize],
    ) -> Result<Vec<[f64; 3]>, DeviceFault> {
        Ok(vec![[0.0; 3]; index.len()])
    }

    fn held_overwrite_y_rows(
        &self,
        _lanes: &mut HeldLanes,
        _rows: &[(usize, Vec<f64>)],
    ) -> Result<(), DeviceFault> {
        Ok(())
    }

    fn held_download(&self, lanes: &HeldLanes) -> Result<RawLanes, DeviceFault> {
        let zeros = || vec![0.0; lanes.m * lanes.n];
        Ok((zeros(), zeros(), lanes.has_offset.then(zeros)))
    }

    fn held_judge(
        &self,
        _lanes: &HeldLanes,
        request: &JudgeRequest<'_>,
    ) -> Result<Option<CompareReport>, DeviceFault> {
        Ok(Some(CompareReport::new(request.mode)))
    }
}

impl Device for StandInDevice {
    fn host_only(&self) -> bool {
        true
    }

    fn computes_nothing(&self) -> bool {
        true
    }

    fn run_gemm(
        &self,
        _kernel: &KernelDecl,
        _entry: &str,
        inputs: &DeviceInputs<'_>,
    ) -> Result<GemmOutput, DeviceFault> {
        Ok(zeros_like_y(inputs))
    }

    fn dequant(
        &self,
        _kernel: &KernelDecl,
        _entry: &str,
        inputs: &DeviceInputs<'_>,
    ) -> Result<DequantOutput, DeviceFault> {
        let l = inputs.launch();
        let row_stride = l
            .dense
            .as_ref()
            .and_then(|d| d.strides.first().copied())
            .unwrap_or(l.k);
        Ok(DequantOutput {
            n: l.n,
            k: l.k,
            row_stride,
            dense_bits: vec![0; l.n * l.k],
            strided_bits: vec![0; l.n * row_stride],
            guard_violations: Vec::new(),
            stray_writes: 0,
            unwritten: 0,
        })
    }

    fn dense_gemm(
        &self,
        _kernel: &KernelDecl,
        inputs: &DeviceInputs<'_>,
    ) -> Result<GemmOutput, DeviceFault> {
        Ok(zeros_like_y(inputs))
    }
}

/// Nothing to time: every benchmark is refused, naming what was asked for.
impl DeviceBench for StandInDevice {
    fn bench_kernel(
        &self,
        _kernel: &KernelDecl,
        _entry: &str,
        _inputs: &DeviceInputs<'_>,
        _plan: BenchPlan,
    ) -> Result<Timing, DeviceFault> {
        Err(self.unsupported("kernel timing"))
    }

    fn bench_kernel_rotating(
        &self,
        _kernel: &KernelDecl,
        _entry: &str,
        _copies: &[DeviceInputs<'_>],
        _plan: BenchPlan,
    ) -> Result<Timing, DeviceFault> {
        Err(self.unsupported("kernel timing"))
    }

    fn bench_sequence(
        &self,
        _kernel: &KernelDecl,
        _groups: &[Vec<DeviceInputs<'_>>],
        _plan: BenchPlan,
    ) -> Result<Timing, DeviceFault> {
        Err(self.unsupported("launch-sequence timing"))
    }

    fn bench_copy(&self, _bytes: usize, _plan: BenchPlan) -> Result<Timing, DeviceFault> {
        Err(self.unsupported("copy timing"))
    }

    fn bench_dense_gemm(
        &self,
        _kernel: &KernelDecl,
        _copies: &[DeviceInputs<'_>],
        _plan: BenchPlan,
    ) -> Result<Timing, DeviceFault> {
        Err(self.unsupported("dense timing"))
    }
}
