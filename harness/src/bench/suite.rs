//! What to measure: the shape, the copy-ceiling size, the rotated input copies and the
//! `skinny`/`fused` cases (the speed benchmark's suite).

use w4a16_reference::layer::Symmetry;
use w4a16_reference::{ActDtype, LayerShape};

/// One `skinny` measurement to take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SkinnyCase {
    pub m: usize,
    pub dtype: ActDtype,
    pub symmetry: Symmetry,
}

/// One `fused` measurement, with the dense path of the same problem beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FusedCase {
    pub m: usize,
    pub dtype: ActDtype,
}

/// What to measure.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchSuite {
    pub shape: LayerShape,
    /// Bytes of the device-to-device copy that sets the bandwidth ceiling.
    pub copy_bytes: usize,
    /// Separately allocated copies of each GEMM's inputs, launched in turn.
    pub weight_copies: usize,
    pub skinny: Vec<SkinnyCase>,
    pub fused: Vec<FusedCase>,
}

impl BenchSuite {
    /// The benchmark shape: K = 4096, N = 14336, G = 128; a 1 GiB copy; `skinny` at M = 1..5 in fp16 and
    /// bf16 (symmetric) plus M = 1 asymmetric; `fused` at M = 2048 in fp16 and bf16. Eight
    /// rotated copies put ~240 MB of weights between two reads of the same buffer.
    pub fn standard() -> Self {
        let mut skinny = Vec::new();
        for dtype in [ActDtype::F16, ActDtype::Bf16] {
            for m in 1..=5 {
                skinny.push(SkinnyCase {
                    m,
                    dtype,
                    symmetry: Symmetry::Sym,
                });
            }
            skinny.push(SkinnyCase {
                m: 1,
                dtype,
                symmetry: Symmetry::Asym,
            });
        }
        BenchSuite {
            shape: LayerShape::new(14336, 4096, 128),
            copy_bytes: 1 << 30,
            weight_copies: 8,
            skinny,
            fused: vec![
                FusedCase {
                    m: 2048,
                    dtype: ActDtype::F16,
                },
                FusedCase {
                    m: 2048,
                    dtype: ActDtype::Bf16,
                },
            ],
        }
    }
}
