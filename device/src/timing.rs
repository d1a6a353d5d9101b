//! Device-event timing: the plan, the timings, [`DeviceBench`] and its one implementation for
//! every [`Runtime`].

use w4a16_kernels::KernelDecl;
use w4a16_kernels::decl::LaunchGeometry;

use crate::device::{Device, no_moe_path};
use crate::fault::{DeviceFault, Health};
use crate::input_cache::HashedSlices;
use crate::launch::DeviceInputs;
use crate::moe::{self, MoeInputs, MoeTiming};
use crate::outputs::BlasGemm;
use crate::runtime::Runtime;
use crate::staging::{
    blas_operands, check_ready, geometry_for, packed_for, run_blas, stage, stage_hashed,
    with_guard_offset,
};

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

/// Device-event timing, apart from [`Device`] so that a correctness run needs none of it;
/// bench and perf take a `&dyn DeviceBench` (it upcasts to `&dyn Device` for their checked
/// launches). Every [`Runtime`] times through one implementation here; host code standing in
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
    /// As [`DeviceBench::bench_kernel_rotating`], launched with `geometry` instead of the one the
    /// declaration picks for the shape: perf's regret mode times every tile variant of `fused`
    /// on one case, each with the grid and block its own tile needs. Host code standing in for
    /// a device refuses it.
    fn bench_kernel_rotating_at(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        geometry: &LaunchGeometry,
        copies: &[DeviceInputs<'_>],
        plan: BenchPlan,
    ) -> Result<Timing, DeviceFault> {
        let _ = (kernel, entry, geometry, copies, plan);
        Err(DeviceFault::Unsupported {
            what: "timing a launch at a chosen geometry".into(),
            device: self.name(),
        })
    }
    /// One launch of `entry` at `geometry`, synchronised, its output not read back: how perf's
    /// regret mode counts a fused tile variant on the ISA emulator (the launch's counters are
    /// the result; nothing is timed). Host code standing in for a device refuses it.
    fn launch_once_at(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        geometry: &LaunchGeometry,
        inputs: &DeviceInputs<'_>,
    ) -> Result<(), DeviceFault> {
        let _ = (kernel, entry, geometry, inputs);
        Err(DeviceFault::Unsupported {
            what: "a launch at a chosen geometry".into(),
            device: self.name(),
        })
    }
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

/// One checked run first (compiles, loads, surfaces errors), then the warm-up launches left
/// queued so that the timed ones start with the device busy: a timed window then holds device
/// time only, not the host's enqueue latency.
pub(crate) fn bench<R: Runtime>(
    b: &R,
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

impl<R: Runtime> DeviceBench for R {
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
        let shape = copies.first().map(|c| c.validated().shape).ok_or_else(|| {
            DeviceFault::Unsupported {
                what: "a benchmark over no input copies".into(),
                device: self.name(),
            }
        })?;
        let geometry = geometry_for(self, kernel, &shape);
        self.bench_kernel_rotating_at(kernel, entry, &geometry, copies, plan)
    }

    fn launch_once_at(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        geometry: &LaunchGeometry,
        inputs: &DeviceInputs<'_>,
    ) -> Result<(), DeviceFault> {
        check_ready(self, kernel, inputs)?;
        let staged = stage(self, inputs, None)?;
        let args = packed_for(self, kernel, inputs, &staged)?;
        self.launch(kernel, entry, geometry, &args)?;
        self.synchronize(&format!("the launch of {entry}"))
    }

    fn bench_kernel_rotating_at(
        &self,
        kernel: &KernelDecl,
        entry: &str,
        geometry: &LaunchGeometry,
        copies: &[DeviceInputs<'_>],
        plan: BenchPlan,
    ) -> Result<Timing, DeviceFault> {
        let first = copies.first().ok_or_else(|| DeviceFault::Unsupported {
            what: "a benchmark over no input copies".into(),
            device: self.name(),
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
                    device: self.name(),
                });
            }
        }
        // Staged buffers live until the timing is read: every copy stays allocated.
        let mut staged = Vec::with_capacity(copies.len());
        let mut args = Vec::with_capacity(copies.len());
        let mut hashed = HashedSlices::default();
        for c in copies {
            let s = stage_hashed(self, c, None, &mut hashed)?;
            args.push(packed_for(self, kernel, c, &s)?);
            staged.push(s);
        }
        bench(self, plan, &format!("benchmark of {entry}"), &mut |i| {
            self.launch(kernel, entry, geometry, &args[i % args.len()])
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
        let mut hashed = HashedSlices::default();
        for group in groups {
            let mut launches = Vec::with_capacity(group.len());
            for l in group {
                check_ready(self, kernel, l)?;
                let s = stage_hashed(self, l, None, &mut hashed)?;
                let shape = l.validated().shape;
                launches.push((
                    kernel.launch_entry(&shape, self.target()),
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
                device: self.name(),
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
        if let Health::Lost { cause } = self.health() {
            return Err(DeviceFault::ContextLost { cause });
        }
        if copies == 0 {
            return Err(DeviceFault::Unsupported {
                what: "a rotating copy benchmark over no buffer pairs".into(),
                device: self.name(),
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
                device: self.name(),
            });
        }
        let mut runs = Vec::with_capacity(copies.len());
        let mut hashed = HashedSlices::default();
        for c in copies {
            let (staged, g) = run_blas(self, kernel, c, &mut hashed)?;
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
