//! What one perf measurement is about and what it measured: the types every stage shares.

use serde::{Deserialize, Serialize};

/// One perf case within a target's golden file: the field's (provider, shape, M). The target is
/// the file (`perf/<target>.json`); the kernel label is compared, not keyed, so that a different
/// kernel on the same case is reported as such instead of as a missing golden.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PerfKey {
    /// The provider's name from `cases/models.toml` (`hybrid-w4a16-zp-bf16`).
    pub provider: String,
    /// The shape's name (`qwen3-8b.mlp_down`).
    pub shape: String,
    pub m: usize,
}

impl std::fmt::Display for PerfKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/M={}", self.provider, self.shape, self.m)
    }
}

/// The kernels that ran per call, as launched: `skinny:w4a16_skinny_f16`,
/// `fused:w4a16_fused_f16_t128x128`, `dense:blas`, `fallback:w4a16_fallback_bf16`, joined by
/// `+`. Written into every golden and compared on every run (the field logs the kernel selected).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KernelLabel(pub String);

impl std::fmt::Display for KernelLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The measurement each case's time is divided by, taken beside it in the same run so that
/// clock and load changes cancel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ControlKind {
    /// A device-to-device copy of the case's logical traffic (decode, M ≤ 5: bandwidth bound).
    CopyCeiling,
    /// The vendor BLAS on the dequantized weights, same M, N, K (M > 5: compute bound).
    VendorBlas,
}

impl ControlKind {
    /// Largest M whose control is the copy ceiling.
    pub const COPY_MAX_M: usize = 5;

    pub fn for_m(m: usize) -> Self {
        if m <= Self::COPY_MAX_M {
            ControlKind::CopyCeiling
        } else {
            ControlKind::VendorBlas
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ControlKind::CopyCeiling => "copy ceiling",
            ControlKind::VendorBlas => "vendor BLAS",
        }
    }
}

/// One side's timings of one case: per-launch device times of the selected path, each launch
/// on a cold copy of the inputs, and the control's, interleaved with them in the same run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub key: PerfKey,
    pub kernel: KernelLabel,
    /// Per-launch times of the selected path, µs (9–30 of them).
    pub times_us: Vec<f64>,
    pub control: ControlKind,
    /// Per-launch times of the control, µs.
    pub control_us: Vec<f64>,
    /// Logical bytes one call moves (weights, scales, zero points, X, Y), for GB/s columns.
    pub traffic_bytes: u64,
    /// 2·M·N·K, for TFLOP/s columns.
    pub flops: u64,
}
