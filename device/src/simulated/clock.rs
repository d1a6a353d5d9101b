//! A simulated device's clock: by default every launch takes 10 µs and nothing else takes time
//! (what the runner's tests were written against); with [`SimCosts`] each launch, vendor-BLAS
//! call and copy takes the time the test's cost model gives it, so that a perf test can make one
//! path of the set faster than another and check that the report says so.

use w4a16_kernels::KernelId;
use w4a16_kernels::decl::LaunchGeometry;

/// One timed operation of a simulated device, as a cost model sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SimOp<'a> {
    /// A kernel launch: the declaration it is for, the entry point and its geometry (a fused
    /// variant shows in both).
    Launch {
        kernel: KernelId,
        entry: &'a str,
        geometry: &'a LaunchGeometry,
    },
    /// A vendor-BLAS GEMM of M×K by K×N.
    Blas { m: usize, n: usize, k: usize },
    /// A device-to-device copy.
    Copy { bytes: usize },
}

/// A test's cost model: the device time of each operation, µs (finite, ≥ 0).
#[derive(Clone, Copy, Debug)]
pub struct SimCosts {
    pub cost_us: fn(&SimOp<'_>) -> f64,
}

/// Nanoseconds of simulated device time so far (events are readings of it).
#[derive(Debug, Default)]
pub(super) struct Clock {
    ns: std::sync::Mutex<u64>,
}

impl Clock {
    /// Advances the clock by `op`'s cost under `costs` (by the default costs without them).
    pub(super) fn tick(&self, costs: Option<&SimCosts>, op: &SimOp<'_>) {
        let us = match costs {
            Some(c) => (c.cost_us)(op),
            None => match op {
                SimOp::Launch { .. } => 10.0,
                SimOp::Blas { .. } | SimOp::Copy { .. } => 0.0,
            },
        };
        let ns = (us.max(0.0) * 1000.0).round() as u64;
        *self.ns.lock().unwrap() += ns;
    }

    pub(super) fn now(&self) -> u64 {
        *self.ns.lock().unwrap()
    }
}

/// Microseconds between two readings of a [`Clock`].
pub(super) fn elapsed_us(start: u64, end: u64) -> f64 {
    end.saturating_sub(start) as f64 / 1000.0
}
