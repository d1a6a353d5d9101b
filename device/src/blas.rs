//! The one operand layout of the dense path, shared by every vendor BLAS (cuBLAS on CUDA,
//! hipBLAS on ROCm): both take column-major operands, and the harness's tensors are row-major.
//!
//! Row-major `Y[M,N] = X[M,K]·Denseᵀ` is column-major `Yᵀ[N,M] = Dense·Xᵀ`: the row-major dense
//! copy `[N, K]` with row stride `dense_ld` (the padded `K_pad`) *is* a column-major `[K, N]`
//! matrix with leading dimension `dense_ld`, so it enters as `A` with `op(A) = T`; row-major
//! `X[M, K]` (row stride `x_ld`) is column-major `[K, M]`, entering as `B` with `op(B) = N`;
//! row-major `Y[M, N]` (row stride `y_ld`) is column-major `[N, M]`, the `C` of the call. So the
//! call is `gemm(T, N, m = N, n = M, k = K, A = dense, lda = dense_ld, B = x, ldb = x_ld,
//! C = y, ldc = y_ld)`, padded strides passed through unchanged.

use super::BlasGemm;

pub use w4a16_reference::blas::{
    BlasOp, BlasOperand, ColumnMajorGemm, HostBlasOutOfBounds, host_gemm_ex,
};

/// A [`BlasGemm`] the 32-bit BLAS interface cannot express, or whose leading dimension is
/// shorter than the row it must hold (the BLAS would refuse it with an opaque status).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlasLayoutError {
    #[error("{what} = {value} exceeds the BLAS's 32-bit int")]
    TooLarge { what: &'static str, value: usize },
    #[error(
        "the leading dimension of {operand:?} is {ld}, shorter than its rows of {row} elements"
    )]
    ShortLeadingDimension {
        operand: BlasOperand,
        ld: usize,
        row: usize,
    },
}

impl BlasGemm {
    /// The column-major call (see the module doc). Leading dimensions must hold a row:
    /// `dense_ld ≥ K`, `x_ld ≥ K`, `y_ld ≥ N` (and ≥ 1, as the BLAS requires even when empty).
    pub fn column_major(&self) -> Result<ColumnMajorGemm, BlasLayoutError> {
        for (operand, ld, row) in [
            (BlasOperand::Dense, self.dense_ld, self.k),
            (BlasOperand::X, self.x_ld, self.k),
            (BlasOperand::Y, self.y_ld, self.n),
        ] {
            if ld < row.max(1) {
                return Err(BlasLayoutError::ShortLeadingDimension {
                    operand,
                    ld,
                    row: row.max(1),
                });
            }
        }
        let int = |what: &'static str, value: usize| {
            i32::try_from(value).map_err(|_| BlasLayoutError::TooLarge { what, value })
        };
        Ok(ColumnMajorGemm {
            op_a: BlasOp::T,
            op_b: BlasOp::N,
            m: int("N", self.n)?,
            n: int("M", self.m)?,
            k: int("K", self.k)?,
            lda: int("the dense copy's row stride", self.dense_ld)?,
            ldb: int("x's row stride", self.x_ld)?,
            ldc: int("y's row stride", self.y_ld)?,
        })
    }
}

impl BlasGemm {
    /// Bytes from the start of each operand's buffer through the last element the BLAS
    /// touches (`offset + ((rows − 1)·ld + row)·size`; the offset alone when empty), so a
    /// backend can refuse a buffer too small before the vendor reads past it.
    pub fn operand_extents(&self) -> [(BlasOperand, usize); 3] {
        let size = self.dtype.size_bytes();
        let extent = |offset: usize, rows: usize, ld: usize, row: usize| {
            if rows == 0 || row == 0 {
                offset
            } else {
                offset + ((rows - 1) * ld + row) * size
            }
        };
        [
            (
                BlasOperand::Dense,
                extent(self.dense_offset, self.n, self.dense_ld, self.k),
            ),
            (
                BlasOperand::X,
                extent(self.x_offset, self.m, self.x_ld, self.k),
            ),
            (
                BlasOperand::Y,
                extent(self.y_offset, self.m, self.y_ld, self.n),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use w4a16_reference::ActDtype;

    fn gemm(m: usize, n: usize, k: usize, x_ld: usize, dense_ld: usize, y_ld: usize) -> BlasGemm {
        BlasGemm {
            m,
            n,
            k,
            dtype: ActDtype::F16,
            x_ld,
            dense_ld,
            y_ld,
            x_offset: 0,
            dense_offset: 0,
            y_offset: 0,
            beta: 0.0,
        }
    }

    /// Multiplies through the column-major call exactly as a BLAS reads its operands
    /// (`A[i + j·lda]` etc.), on row-major buffers with the given strides.
    fn run_column_major(c: &ColumnMajorGemm, a: &[f64], b: &[f64], out: &mut [f64]) {
        let (m, n, k) = (c.m as usize, c.n as usize, c.k as usize);
        let (lda, ldb, ldc) = (c.lda as usize, c.ldb as usize, c.ldc as usize);
        let op_a = |i: usize, p: usize| match c.op_a {
            BlasOp::N => a[i + p * lda],
            BlasOp::T => a[p + i * lda],
        };
        let op_b = |p: usize, j: usize| match c.op_b {
            BlasOp::N => b[p + j * ldb],
            BlasOp::T => b[j + p * ldb],
        };
        for j in 0..n {
            for i in 0..m {
                out[i + j * ldc] = (0..k).map(|p| op_a(i, p) * op_b(p, j)).sum();
            }
        }
    }

    /// Row-major Y = X·Denseᵀ through the column-major call equals the direct product, with
    /// unpadded and padded strides, and leaves the row padding of Y untouched.
    #[test]
    fn the_column_major_call_computes_the_row_major_product() {
        let (m, n, k) = (3usize, 5usize, 4usize);
        for (x_ld, dense_ld, y_ld) in [(k, k, n), (k + 3, k + 12, n + 2), (k, k + 4, n)] {
            let g = gemm(m, n, k, x_ld, dense_ld, y_ld);
            let c = g.column_major().unwrap();
            assert_eq!((c.op_a, c.op_b), (BlasOp::T, BlasOp::N));
            assert_eq!((c.m, c.n, c.k), (n as i32, m as i32, k as i32));
            assert_eq!(
                (c.lda, c.ldb, c.ldc),
                (dense_ld as i32, x_ld as i32, y_ld as i32)
            );
            let pad = -7.0;
            let mut x = vec![pad; m * x_ld];
            let mut d = vec![pad; n * dense_ld];
            for r in 0..m {
                for p in 0..k {
                    x[r * x_ld + p] = (1 + r * 7 + p * 3) as f64;
                }
            }
            for col in 0..n {
                for p in 0..k {
                    d[col * dense_ld + p] = (2 + col * 5 + p) as f64 * 0.5;
                }
            }
            let mut y = vec![pad; m * y_ld];
            run_column_major(&c, &d, &x, &mut y);
            for r in 0..m {
                for col in 0..y_ld {
                    let got = y[r * y_ld + col];
                    if col < n {
                        let want: f64 = (0..k)
                            .map(|p| x[r * x_ld + p] * d[col * dense_ld + p])
                            .sum();
                        assert_eq!(got, want, "y[{r},{col}] with lds {x_ld},{dense_ld},{y_ld}");
                    } else {
                        assert_eq!(got, pad, "row padding y[{r},{col}] written");
                    }
                }
            }
        }
    }

    /// The host stand-in computes the row-major product through the column-major call (small
    /// integers: exact in f16 and bf16), adds β·Y, ignores Y when β = 0 (NaN there stays
    /// unread), leaves Y's row padding alone, and names an operand it would read past.
    #[test]
    fn the_host_stand_in_computes_the_call_as_a_blas_reads_it() {
        let (m, n, k) = (3usize, 5usize, 4usize);
        for dtype in [ActDtype::F16, ActDtype::Bf16] {
            for (x_ld, dense_ld, y_ld, beta) in [(k, k, n, 0.0), (k + 3, k + 12, n + 2, 1.0)] {
                let mut g = gemm(m, n, k, x_ld, dense_ld, y_ld);
                g.dtype = dtype;
                let call = g.column_major().unwrap();
                let pad = dtype.from_f32(-7.0);
                let mut x = vec![pad; m * x_ld];
                let mut d = vec![pad; n * dense_ld];
                for r in 0..m {
                    for p in 0..k {
                        x[r * x_ld + p] = dtype.from_f32((1 + r * 7 + p * 3) as f32 - 9.0);
                    }
                }
                for col in 0..n {
                    for p in 0..k {
                        d[col * dense_ld + p] = dtype.from_f32((2 + col * 5 + p) as f32 * 0.5);
                    }
                }
                let prior = |r: usize, col: usize| (r + col) as f32;
                let mut y = vec![pad; m * y_ld];
                for r in 0..m {
                    for col in 0..n {
                        y[r * y_ld + col] = if beta == 0.0 {
                            dtype.from_f32(f32::NAN)
                        } else {
                            dtype.from_f32(prior(r, col))
                        };
                    }
                }
                host_gemm_ex(&call, dtype, 1.0, beta, &d, &x, &mut y).unwrap();
                for r in 0..m {
                    for col in 0..y_ld {
                        let got = y[r * y_ld + col];
                        if col >= n {
                            assert_eq!(got, pad, "{dtype:?}: row padding y[{r},{col}] written");
                            continue;
                        }
                        let dot: f32 = (0..k)
                            .map(|p| {
                                dtype.to_f32(x[r * x_ld + p]) * dtype.to_f32(d[col * dense_ld + p])
                            })
                            .sum();
                        let want = dtype.to_f32(dtype.from_f32(dot + beta * prior(r, col)));
                        assert_eq!(dtype.to_f32(got), want, "{dtype:?} y[{r},{col}] β={beta}");
                    }
                }
                let short = &d[..d.len() - 1 - (dense_ld - k)];
                let e = host_gemm_ex(&call, dtype, 1.0, beta, short, &x, &mut y).unwrap_err();
                assert_eq!(e.operand, BlasOperand::Dense, "{e}");
                assert!(e.to_string().contains("past its"), "{e}");
            }
        }
    }

    #[test]
    fn short_leading_dimensions_and_overflow_are_refused_by_name() {
        let e = gemm(2, 8, 16, 16, 15, 8).column_major().unwrap_err();
        assert_eq!(
            e,
            BlasLayoutError::ShortLeadingDimension {
                operand: BlasOperand::Dense,
                ld: 15,
                row: 16
            }
        );
        let e = gemm(2, 8, 16, 12, 16, 8).column_major().unwrap_err();
        assert!(matches!(
            e,
            BlasLayoutError::ShortLeadingDimension {
                operand: BlasOperand::X,
                ..
            }
        ));
        let e = gemm(2, 8, 16, 16, 16, 7).column_major().unwrap_err();
        assert!(matches!(
            e,
            BlasLayoutError::ShortLeadingDimension {
                operand: BlasOperand::Y,
                ..
            }
        ));
        let big = i32::MAX as usize + 1;
        let e = gemm(big, 8, 16, 16, 16, 8).column_major().unwrap_err();
        assert_eq!(
            e,
            BlasLayoutError::TooLarge {
                what: "M",
                value: big
            }
        );
        assert!(e.to_string().contains("32-bit"), "{e}");
        // Empty operands still need a leading dimension of at least 1.
        assert!(gemm(0, 0, 0, 0, 1, 1).column_major().is_err());
        assert!(gemm(0, 0, 0, 1, 1, 1).column_major().is_ok());
    }

    #[test]
    fn operand_extents_end_at_the_last_element_read_or_written() {
        let mut g = gemm(3, 5, 4, 6, 16, 7);
        g.x_offset = 2;
        g.dense_offset = 0;
        g.y_offset = 4096;
        assert_eq!(
            g.operand_extents(),
            [
                (BlasOperand::Dense, (4 * 16 + 4) * 2),
                (BlasOperand::X, 2 + (2 * 6 + 4) * 2),
                (BlasOperand::Y, 4096 + (2 * 7 + 5) * 2),
            ]
        );
        let empty = gemm(0, 5, 4, 4, 4, 5);
        assert_eq!(empty.operand_extents()[1], (BlasOperand::X, 0));
        assert_eq!(empty.operand_extents()[2], (BlasOperand::Y, 0));
    }
}
