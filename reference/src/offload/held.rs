//! The held path: the products formed and kept where the GEMM runs (the GPU's memory), judged
//! there, brought to the host only on demand.

use super::cross_check::cross_check;
use super::error::{GemmError, OffloadError};
use super::layer_weights::LayerWeights;
use super::operands::{ActivationOperand, RawLanes, WeightOperand};
use crate::ActDtype;
use crate::bound::BoundModel;
use crate::compare::{self, CompareMode, CompareReport, JudgeRequest, OutputBits};
use crate::gemm::{self, NonFiniteX, Reference, SpecialRows};
use crate::layer::{Activations, QuantizedLayer};
use crate::recipe::NumericRecipe;

/// A reference's products kept where they were formed (the GPU's memory) and judged there:
/// the M×N doubles per lane never cross to the host unless a case needs them (a special
/// element, a failure's artifact, the fallback's second opinion).
pub trait HeldProducts {
    /// The raw lanes `(y, a, a_offset or 0)` at element indices `m·N + n`.
    fn gather(&self, index: &[usize]) -> Result<Vec<[f64; 3]>, GemmError>;
    /// Every element of the raw lanes.
    fn download(&self) -> Result<RawLanes, GemmError>;
    /// [`compare::judge_plain`]'s report, formed next to the lanes; `None` when an element is
    /// not plain (the host then judges with its full rules).
    fn judge(&self, request: &JudgeRequest<'_>) -> Result<Option<CompareReport>, GemmError>;
    /// Overwrites whole rows of the `y` lane where they are held: X's special rows, whose IEEE
    /// values the host derives (`SpecialRows::value`) after the GEMM formed them from zeros.
    fn overwrite_y_rows(&mut self, rows: &[(usize, Vec<f64>)]) -> Result<(), GemmError>;
}

/// A GEMM whose products stay held where it formed them (`--reference gpu` on a device that can judge).
pub trait HeldGemm<'d> {
    /// `y = x·wᵀ`, `a = |x|·|w|ᵀ` and, with an offset, `|x|·w_offsetᵀ` (the offset rows are
    /// nonnegative), X widened and the weights decoded where the products are formed, and kept
    /// there; `w_key` names the weights for a layer's next batch size. `None`: this GEMM cannot
    /// keep them (the caller forms a host reference instead).
    fn products(
        &mut self,
        x: &ActivationOperand<'_>,
        weights: &WeightOperand<'_>,
        w_key: Option<u64>,
    ) -> Result<Option<Box<dyn HeldProducts + 'd>>, GemmError>;

    /// As [`F64Gemm::stands_in`](super::F64Gemm::stands_in): products nobody formed are not
    /// cross-checked.
    fn stands_in(&self) -> bool {
        false
    }
}

/// The full reference of one case with its lanes held on the device: judged where they are, brought to
/// the host only on demand ([`HeldReference::to_host`], the same [`Reference`] the host
/// path builds).
pub struct HeldReference<'d> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub dtype: ActDtype,
    /// `[N]` (zeros without a bias).
    pub bias: Vec<f64>,
    has_bias: bool,
    has_offset: bool,
    lanes: Box<dyn HeldProducts + 'd>,
}

impl HeldReference<'_> {
    /// Every element of `out` against its bound (or bit-exact, by `mode`), on the device where
    /// every element is plain, else on the host from the downloaded lanes: one report either way.
    pub fn compare(
        &self,
        model: &BoundModel,
        out: OutputBits<'_>,
        mode: CompareMode,
    ) -> Result<CompareReport, OffloadError> {
        compare::check_model(model, self.k, self.dtype, self.has_offset)?;
        out.validate(self.m, self.n)?;
        let request = JudgeRequest {
            out,
            model: *model,
            mode,
            bias: &self.bias,
            has_bias: self.has_bias,
        };
        let judged = self
            .lanes
            .judge(&request)
            .map_err(|error| OffloadError::Held {
                during: "judging the output",
                error,
            })?;
        if let Some(report) = judged {
            return Ok(report);
        }
        let host = self.to_host()?;
        Ok(match mode {
            CompareMode::Bound => compare::compare(&host, model, out)?,
            CompareMode::BitExact => compare::compare_bit_exact(&host, model, out)?,
        })
    }

    /// The lanes brought to the host, the bias added: the [`Reference`] the host path forms.
    pub fn to_host(&self) -> Result<Reference, OffloadError> {
        let (mut y, a, a_offset) = self.lanes.download().map_err(|error| OffloadError::Held {
            during: "downloading the lanes",
            error,
        })?;
        let expected = self.m * self.n;
        let lengths = [
            Some(y.len()),
            Some(a.len()),
            a_offset.as_ref().map(Vec::len),
        ];
        if let Some(got) = lengths.into_iter().flatten().find(|&l| l != expected) {
            return Err(OffloadError::Length {
                n0: 0,
                n1: self.n,
                expected,
                got,
            });
        }
        if self.has_bias && self.n > 0 {
            y.chunks_mut(self.n)
                .for_each(|row| row.iter_mut().zip(&self.bias).for_each(|(v, b)| *v += b));
        }
        Ok(Reference {
            m: self.m,
            n: self.n,
            k: self.k,
            dtype: self.dtype,
            y,
            a,
            a_offset,
            bias: self.bias.clone(),
        })
    }
}

/// [`reference_offloaded`](super::reference_offloaded) with the weights decoded and the lanes
/// left held in `g`, cross-checked the same way (the sampled elements gathered from the device, against the host's
/// own decoding of their columns). X's special rows (NaN/±Inf) are formed from zeros and their
/// `y` rows overwritten where they are held with the IEEE values the host derives, as the host
/// path patches them. `None` where a held reference does not apply and the caller forms the
/// host one: W over `w_max_bytes` (chunked), or a GEMM that cannot keep them.
#[allow(clippy::too_many_arguments)]
pub fn reference_held<'d>(
    x: &Activations,
    layer: &QuantizedLayer,
    weights: &LayerWeights,
    recipe: &NumericRecipe,
    non_finite_x: NonFiniteX,
    g: &mut dyn HeldGemm<'d>,
    w_max_bytes: usize,
    seed: u64,
) -> Result<Option<HeldReference<'d>>, OffloadError> {
    if !weights.describes(layer) {
        return Err(OffloadError::Input(gemm::mismatch(
            "the layer's weights (LayerWeights)",
            format!("{:?} {}", layer.shape, layer.dtype),
            format!("{:?} {}", weights.shape, weights.dtype),
        )));
    }
    gemm::validate_against_layer(x, layer, recipe, non_finite_x)?;
    let (xz, special) = SpecialRows::prepare(x, non_finite_x);
    let (m, n, k) = (x.m, layer.shape.n, layer.shape.k);
    let chunk = (w_max_bytes / (8 * k.max(1))).clamp(1, n.max(1));
    if chunk < n {
        return Ok(None);
    }
    let offset = recipe.magnitude_offset();
    // X is widened and the weights decoded on the device: only the activation bits, the codes
    // and the per-group scales and zero points go there, the weights once per layer (the key
    // names them, with the offset).
    let w_key = Some(weights.key(offset));
    let weights = weights.operand(layer, offset);
    let products = g.products(&ActivationOperand::new(&xz), &weights, w_key);
    let mut lanes = match products {
        Ok(Some(lanes)) => lanes,
        Ok(None) => return Ok(None),
        Err(error) => {
            return Err(OffloadError::Gemm {
                n0: 0,
                n1: n,
                error,
            });
        }
    };
    let raw = |index: &[usize]| {
        let got = lanes.gather(index).map_err(|error| OffloadError::Held {
            during: "gathering the cross-check's elements",
            error,
        })?;
        if got.len() != index.len() {
            return Err(OffloadError::Length {
                n0: 0,
                n1: n,
                expected: index.len(),
                got: got.len(),
            });
        }
        let with_offset = offset.is_some();
        Ok(got
            .into_iter()
            .map(|[y, a, o]| (y, a, with_offset.then_some(o)))
            .collect())
    };
    let checked = cross_check(&xz, layer, offset, &special, raw, seed);
    if !g.stands_in() {
        checked?;
    }
    if !special.is_empty() {
        let ieee = recipe.offset_accumulation;
        let rows: Vec<(usize, Vec<f64>)> = special
            .rows
            .iter()
            .map(|r| {
                let values = (0..n)
                    .map(|col| special.value(layer, ieee, r.m, col).unwrap_or(f64::NAN))
                    .collect();
                (r.m, values)
            })
            .collect();
        lanes
            .overwrite_y_rows(&rows)
            .map_err(|error| OffloadError::Held {
                during: "writing the special rows' IEEE values",
                error,
            })?;
    }
    Ok(Some(HeldReference {
        m,
        n,
        k,
        dtype: layer.dtype,
        bias: gemm::bias_values(layer),
        has_bias: layer.bias.is_some(),
        has_offset: offset.is_some(),
        lanes,
    }))
}
