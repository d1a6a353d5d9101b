//! What an offloaded or device-held reference fails at: bad input, the outside GEMM, or a
//! disagreement with the CPU's cross-check (a fault of the reference, not of the kernel).

use crate::gemm::InputError;

/// What the outside GEMM failed at, as its own error.
pub type GemmError = Box<dyn std::error::Error + Send + Sync>;

/// Which product an element belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// `Σ x·w`.
    Signed,
    /// `Σ |x|·|w|`.
    Abs,
    /// `Σ |x|·|s|·(2·offset + q + z)`.
    Offset,
}

#[derive(Debug, thiserror::Error)]
pub enum OffloadError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("the f64 GEMM failed on columns {n0}..{n1}: {error}")]
    Gemm {
        n0: usize,
        n1: usize,
        error: GemmError,
    },
    #[error(
        "the f64 GEMM returned {got} values for columns {n0}..{n1} (expected {expected} = M·columns)"
    )]
    Length {
        n0: usize,
        n1: usize,
        expected: usize,
        got: usize,
    },
    #[error("the device-held f64 reference failed {during}: {error}")]
    Held {
        during: &'static str,
        error: GemmError,
    },
    #[error(
        "the f64 GEMM and the CPU reference disagree at (m, n) = ({m}, {n}) in {lane:?}: \
         {gemm:e} vs {cpu:e} (tolerance {tolerance:e})"
    )]
    Disagrees {
        m: usize,
        n: usize,
        lane: Lane,
        gemm: f64,
        cpu: f64,
        tolerance: f64,
    },
}
