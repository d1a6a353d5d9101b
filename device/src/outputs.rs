//! What a launch hands back: the output as the kernel left it, with what the guard bands and
//! the poison say about writes outside it, and the vendor-BLAS call the dense path makes.

use w4a16_reference::ActDtype;

use crate::guard::{GuardViolation, OutputReport};

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
    pub(crate) fn from_report(m: usize, n: usize, r: OutputReport) -> Self {
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

/// The dequant kernel checked against the copy it must write ([`crate::Device::dequant_against`]).
#[derive(Clone, Debug, PartialEq)]
pub enum DequantCheck {
    /// The output buffer was compared where it lies with the one a correct kernel leaves
    /// (guard bands, the expected copy, the poison in every gap) and is identical: bit-exact,
    /// confined and complete; nothing came back.
    AsExpected,
    /// The buffer as [`crate::Device::dequant`] returns it (it differs from the expected one, or
    /// this runtime cannot compare on the device): the caller inspects it.
    Output(DequantOutput),
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
