//! The column-major `gemm_ex` call of the vendor BLASes (cuBLAS, hipBLAS) and its host
//! interpretation: the stand-in for the vendor BLAS wherever a device has none — the ISA
//! emulator device, and the emulated HIP runtime's hipBLAS (`hip-emu/`), so both compute the
//! dense GEMM with one piece of code, read as the library reads its operands.
//!
//! It lives here, below every device crate, because the emulated runtime is a cdylib that must
//! not link the device crate (whose `rocm` feature links the real HIP runtime).

/// The transpose flag of one column-major operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlasOp {
    /// The operand as stored.
    N,
    /// Its transpose.
    T,
}

/// The column-major `C = α·op(A)·op(B) + β·C` call (the dense path's `BlasGemm` becomes one in
/// the device crate), in the 32-bit integers of the BLAS `gemm_ex` interfaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnMajorGemm {
    pub op_a: BlasOp,
    pub op_b: BlasOp,
    /// Rows of `op(A)` and `C`: the row-major output's N.
    pub m: i32,
    /// Columns of `op(B)` and `C`: the row-major output's M.
    pub n: i32,
    pub k: i32,
    /// Leading dimension of `A` = the dense copy's row stride (padding included).
    pub lda: i32,
    /// Leading dimension of `B` = X's row stride.
    pub ldb: i32,
    /// Leading dimension of `C` = Y's row stride.
    pub ldc: i32,
}

/// Which operand `A`, `B`, `C` of the column-major call each tensor is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlasOperand {
    /// `A`: the dense copy.
    Dense,
    /// `B`: the activations.
    X,
    /// `C`: the output.
    Y,
}

/// Where a host-interpreted `gemm_ex` would read or write outside its operand.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the BLAS call reads {operand:?} element {index}, past its {len} elements")]
pub struct HostBlasOutOfBounds {
    pub operand: BlasOperand,
    pub index: usize,
    pub len: usize,
}

/// `C = α·op(A)·op(B) + β·C` on the host, reading the operands exactly as a column-major BLAS
/// does (`A[i + p·lda]`, …), in the 16-bit `dtype` with f32 accumulation in `p` order and one
/// rounding of each output, as `gemm_ex` with `COMPUTE_32F` promises (its summation order is
/// the library's; any order meets the same bound). With `β = 0`, `C` is not read (BLAS rule).
///
/// The stand-in for the vendor BLAS where there is none (the ISA emulator device, the emulated
/// HIP runtime's hipBLAS): it exercises the harness's call (operand order, transposes, leading
/// dimensions, offsets, β) the way the library would, so a wrong call gives a wrong answer here
/// too.
#[allow(clippy::too_many_arguments)]
pub fn host_gemm_ex(
    call: &ColumnMajorGemm,
    dtype: crate::ActDtype,
    alpha: f32,
    beta: f32,
    a: &[u16],
    b: &[u16],
    c: &mut [u16],
) -> Result<(), HostBlasOutOfBounds> {
    let (m, n, k) = (call.m as usize, call.n as usize, call.k as usize);
    let (lda, ldb, ldc) = (call.lda as usize, call.ldb as usize, call.ldc as usize);
    let at = |operand: BlasOperand, data: &[u16], index: usize| {
        data.get(index)
            .map(|&bits| dtype.to_f32(bits))
            .ok_or(HostBlasOutOfBounds {
                operand,
                index,
                len: data.len(),
            })
    };
    for j in 0..n {
        for i in 0..m {
            let mut acc = 0.0f32;
            for p in 0..k {
                let ai = match call.op_a {
                    BlasOp::N => i + p * lda,
                    BlasOp::T => p + i * lda,
                };
                let bi = match call.op_b {
                    BlasOp::N => p + j * ldb,
                    BlasOp::T => j + p * ldb,
                };
                acc = at(BlasOperand::Dense, a, ai)?.mul_add(at(BlasOperand::X, b, bi)?, acc);
            }
            let ci = i + j * ldc;
            let prior = if beta == 0.0 {
                0.0
            } else {
                beta * at(BlasOperand::Y, c, ci)?
            };
            let len = c.len();
            let out = c.get_mut(ci).ok_or(HostBlasOutOfBounds {
                operand: BlasOperand::Y,
                index: ci,
                len,
            })?;
            *out = dtype.from_f32(alpha.mul_add(acc, prior));
        }
    }
    Ok(())
}
