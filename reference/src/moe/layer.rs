//! An MoE layer: `E_local` experts of one shape, each a resident layer, and their stacked device
//! form (docs/contract.md §4 item 5): weights `[E, N, K/8]` u32 with a row stride in bytes and an expert
//! stride of `N` rows, scales `[E, N, K/G]` with a row stride in elements, packed zero points
//! `[E, N/8, K/G]` contiguous.

use crate::data::{DataClass, DataError, DataSpec, expert_seed, generate_layer};
use crate::dtype::ActDtype;
use crate::formats::layout::{LayoutError, RowPadding, WEIGHT_PAD_BYTE};
use crate::formats::nibble::EXLLAMA_SHIFTS;
use crate::formats::resident::{ResidentLayer, ZeroPoints};
use crate::layer::{LayerShape, QuantizedLayer, Symmetry};

/// What an MoE layer of a case looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MoeSpec {
    pub class: DataClass,
    /// One expert's `[N, K]` shape and group.
    pub shape: LayerShape,
    pub dtype: ActDtype,
    pub symmetry: Symmetry,
    /// `E_local`: the experts held (the local ones under an expert map).
    pub experts: usize,
    /// Each expert drawn from its own seed ([`expert_seed`] of the layer seed and its index), so
    /// a slot computed with another expert's weights fails the comparison. Without it every
    /// expert is the same draw: cheaper, but a wrong expert id or a wrong expert stride is then
    /// invisible in C (only the align check sees routing).
    pub distinguishable: bool,
}

impl MoeSpec {
    /// The data spec of X for `tokens` tokens (MoE layers have no bias).
    pub fn data_spec(&self, tokens: usize) -> DataSpec {
        DataSpec {
            class: self.class,
            m: tokens,
            shape: self.shape,
            dtype: self.dtype,
            symmetry: self.symmetry,
            with_bias: false,
        }
    }
}

/// An MoE layer that cannot be built or stacked.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum MoeLayerError {
    #[error("MoE layer: expected at least one expert, got 0")]
    NoExperts,
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(
        "MoE layer: data class {class} gives every expert the same weights, so experts cannot be distinguishable"
    )]
    NotDistinguishable { class: DataClass },
    #[error("expert {expert}: {source}")]
    Layout {
        expert: usize,
        #[source]
        source: LayoutError,
    },
    #[error("expert {expert}: expected shape {expected:?} like expert 0, got {got:?}")]
    ShapeMismatch {
        expert: usize,
        expected: LayerShape,
        got: LayerShape,
    },
    #[error("expert {expert}: expected dtype {expected} like expert 0, got {got}")]
    DtypeMismatch {
        expert: usize,
        expected: ActDtype,
        got: ActDtype,
    },
    #[error("expert {expert}: expected {} like expert 0, got {}", expected.name(), got.name())]
    SymmetryMismatch {
        expert: usize,
        expected: Symmetry,
        got: Symmetry,
    },
    #[error("expert {expert}: the moe GEMM has no bias, expected none")]
    BiasNotSupported { expert: usize },
    #[error(
        "expert {expert}: unpacked (legacy) zero points; the stacked layout takes packed [N/8, K/G] zero points only"
    )]
    UnpackedZeroPoints { expert: usize },
    #[error(
        "weights: the stacked row stride K/2 + {extra} = {stride} B must be a multiple of 4 (rows of u32 words)"
    )]
    WeightStrideAlignment { extra: usize, stride: usize },
}

/// `E_local` experts of one shape, dtype and symmetry, each as a loader leaves it on the device
/// (with its logical form kept for the reference).
#[derive(Clone, Debug, PartialEq)]
pub struct MoeLayer {
    pub shape: LayerShape,
    pub dtype: ActDtype,
    pub symmetry: Symmetry,
    pub experts: Vec<ResidentLayer>,
    logical: Vec<QuantizedLayer>,
}

impl MoeLayer {
    /// The experts of `spec` from the layer seed (see [`MoeSpec::distinguishable`]).
    pub fn generate(layer_seed: u64, spec: &MoeSpec) -> Result<Self, MoeLayerError> {
        if spec.experts == 0 {
            return Err(MoeLayerError::NoExperts);
        }
        if spec.distinguishable && spec.class == DataClass::Ones {
            return Err(MoeLayerError::NotDistinguishable { class: spec.class });
        }
        let data = spec.data_spec(0);
        let draws = if spec.distinguishable {
            spec.experts
        } else {
            1
        };
        let mut logical = (0..draws)
            .map(|e| generate_layer(expert_seed(layer_seed, e), &data))
            .collect::<Result<Vec<_>, _>>()?;
        if !spec.distinguishable {
            logical = vec![logical.remove(0); spec.experts];
        }
        let experts = logical
            .iter()
            .enumerate()
            .map(|(expert, l)| {
                ResidentLayer::from_logical(l, RowPadding::NONE)
                    .map_err(|source| MoeLayerError::Layout { expert, source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_experts(experts)
    }

    /// Experts as given, checked to share shape, dtype and symmetry and to have no bias. Legacy
    /// unpacked zero points are accepted here (the reference reads them) and refused by
    /// [`MoeLayer::stack`].
    pub fn from_experts(experts: Vec<ResidentLayer>) -> Result<Self, MoeLayerError> {
        let first = experts.first().ok_or(MoeLayerError::NoExperts)?;
        let (shape, dtype) = (first.shape, first.dtype);
        let symmetry = symmetry_of(first);
        let mut logical = Vec::with_capacity(experts.len());
        for (expert, l) in experts.iter().enumerate() {
            if l.shape != shape {
                return Err(MoeLayerError::ShapeMismatch {
                    expert,
                    expected: shape,
                    got: l.shape,
                });
            }
            if l.dtype != dtype {
                return Err(MoeLayerError::DtypeMismatch {
                    expert,
                    expected: dtype,
                    got: l.dtype,
                });
            }
            if symmetry_of(l) != symmetry {
                return Err(MoeLayerError::SymmetryMismatch {
                    expert,
                    expected: symmetry,
                    got: symmetry_of(l),
                });
            }
            if l.bias.is_some() {
                return Err(MoeLayerError::BiasNotSupported { expert });
            }
            logical.push(
                l.to_logical()
                    .map_err(|source| MoeLayerError::Layout { expert, source })?,
            );
        }
        Ok(MoeLayer {
            shape,
            dtype,
            symmetry,
            experts,
            logical,
        })
    }

    /// `E_local`.
    pub fn local_experts(&self) -> usize {
        self.experts.len()
    }

    /// Expert `local` in logical form (what the reference multiplies).
    pub fn expert(&self, local: usize) -> Option<&QuantizedLayer> {
        self.logical.get(local)
    }

    /// Every expert in logical form, by local id.
    pub(crate) fn logical(&self) -> &[QuantizedLayer] {
        &self.logical
    }

    /// The stacked device form with `padding` on every weight and scale row.
    pub fn stack(&self, padding: RowPadding) -> Result<StackedExperts, MoeLayerError> {
        let LayerShape { n, k, .. } = self.shape;
        let groups = self.shape.groups();
        let stride = k / 2 + padding.weight_extra_bytes;
        if !stride.is_multiple_of(4) {
            return Err(MoeLayerError::WeightStrideAlignment {
                extra: padding.weight_extra_bytes,
                stride,
            });
        }
        let (row_words, data_words) = (stride / 4, k / 8);
        let scale_stride = groups + padding.scale_extra_elems;
        let e_local = self.local_experts();
        let mut weights = vec![u32::from_le_bytes([WEIGHT_PAD_BYTE; 4]); e_local * n * row_words];
        let mut scales = vec![self.dtype.poison_bits(); e_local * n * scale_stride];
        let mut zeros = (self.symmetry == Symmetry::Asym).then(Vec::new);
        for (e, l) in self.experts.iter().enumerate() {
            for r in 0..n {
                let w0 = (e * n + r) * row_words;
                for (j, w) in weights[w0..w0 + data_words].iter_mut().enumerate() {
                    *w = l.weights.word(r, j);
                }
                let s0 = (e * n + r) * scale_stride;
                for (g, s) in scales[s0..s0 + groups].iter_mut().enumerate() {
                    *s = l.scales.get(r, g);
                }
            }
            match (&l.zeros, zeros.as_mut()) {
                (Some(ZeroPoints::Packed(z)), Some(all)) => all.extend_from_slice(&z.words),
                (Some(ZeroPoints::UnpackedLegacy(_)), _) => {
                    return Err(MoeLayerError::UnpackedZeroPoints { expert: e });
                }
                _ => {}
            }
        }
        Ok(StackedExperts {
            experts: e_local,
            shape: self.shape,
            dtype: self.dtype,
            w_row_stride_bytes: stride,
            weights,
            scale_row_stride: scale_stride,
            scales,
            zeros,
        })
    }
}

fn symmetry_of(l: &ResidentLayer) -> Symmetry {
    if l.zeros.is_some() {
        Symmetry::Asym
    } else {
        Symmetry::Sym
    }
}

/// The experts as the `moe` kernel reads them (docs/contract.md §4 item 5). Weight padding words hold
/// [`WEIGHT_PAD_BYTE`] and scale padding the dtype's NaN poison, as in the resident layout, so a
/// kernel that reads padding shows up.
#[derive(Clone, Debug, PartialEq)]
pub struct StackedExperts {
    pub experts: usize,
    pub shape: LayerShape,
    pub dtype: ActDtype,
    /// Bytes between weight rows (≥ K/2, a multiple of 4); expert stride `N·w_row_stride_bytes`.
    pub w_row_stride_bytes: usize,
    /// `[E, N, w_row_stride_bytes/4]` words, ExLlama order.
    pub weights: Vec<u32>,
    /// Elements between scale rows (≥ K/G); expert stride `N·scale_row_stride`.
    pub scale_row_stride: usize,
    /// `[E, N, scale_row_stride]` bits of the activation dtype.
    pub scales: Vec<u16>,
    /// `[E, N/8, K/G]` packed zero points, contiguous; `None` for symmetric layers.
    pub zeros: Option<Vec<u32>>,
}

impl StackedExperts {
    /// The row padding this layout was stacked with.
    pub fn padding(&self) -> RowPadding {
        RowPadding {
            weight_extra_bytes: self.w_row_stride_bytes - self.shape.k / 2,
            scale_extra_elems: self.scale_row_stride - self.shape.groups(),
        }
    }

    pub fn expert_weight_stride_bytes(&self) -> usize {
        self.shape.n * self.w_row_stride_bytes
    }

    pub fn expert_scale_stride(&self) -> usize {
        self.shape.n * self.scale_row_stride
    }

    /// Words between experts' zero points: `ceil(N/8)·(K/G)`.
    pub fn expert_zero_stride_words(&self) -> usize {
        self.shape.n.div_ceil(8) * self.shape.groups()
    }

    /// The weights as little-endian bytes (for an upload that takes bytes).
    pub fn weight_bytes(&self) -> Vec<u8> {
        self.weights.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// The code at `(n, k)` of expert `e`, read through the strides.
    pub fn code(&self, e: usize, n: usize, k: usize) -> u8 {
        let word = self.weights[(e * self.shape.n + n) * (self.w_row_stride_bytes / 4) + k / 8];
        ((word >> EXLLAMA_SHIFTS[k % 8]) & 0xF) as u8
    }

    pub fn scale_bits(&self, e: usize, n: usize, g: usize) -> u16 {
        self.scales[e * self.expert_scale_stride() + n * self.scale_row_stride + g]
    }

    pub fn zero(&self, e: usize, n: usize, g: usize) -> Option<u8> {
        let z = self.zeros.as_ref()?;
        let groups = self.shape.groups();
        let word = z[e * self.expert_zero_stride_words() + (n / 8) * groups + g];
        Some(((word >> (4 * (n % 8))) & 0xF) as u8)
    }

    /// Expert `e` read back through the strides into logical form.
    pub fn expert_logical(&self, e: usize) -> QuantizedLayer {
        let LayerShape { n, k, .. } = self.shape;
        let groups = self.shape.groups();
        let q = (0..n * k).map(|i| self.code(e, i / k, i % k)).collect();
        let scales = (0..n * groups)
            .map(|i| self.scale_bits(e, i / groups, i % groups))
            .collect();
        let zeros = self.zeros.as_ref().map(|_| {
            (0..n * groups)
                .map(|i| self.zero(e, i / groups, i % groups).unwrap_or(0))
                .collect()
        });
        QuantizedLayer {
            shape: self.shape,
            dtype: self.dtype,
            q,
            zeros,
            scales,
            bias: None,
        }
    }
}
