//! Every element of an output judged against a reference: the whole reference, its raw lanes
//! (the on-device judge's host twin), a library's output, or sampled lines.

use super::output::{OutputBits, check_model};
use super::report::{CompareMode, CompareReport};
use crate::bound::BoundModel;
use crate::dtype::ActDtype;
use crate::gemm::{
    InputError, Lines, NonFiniteX, Reference, WeightRounding, reference_with_rounding,
};
use crate::layer::{Activations, QuantizedLayer};
use crate::recipe::NumericRecipe;
use rayon::prelude::*;

/// Every element against its bound.
pub fn compare(
    reference: &Reference,
    model: &BoundModel,
    out: OutputBits<'_>,
) -> Result<CompareReport, InputError> {
    compare_mode(reference, model, out, CompareMode::Bound)
}

/// Every element against the correctly rounded reference, bit for bit (ratios still reported).
pub fn compare_bit_exact(
    reference: &Reference,
    model: &BoundModel,
    out: OutputBits<'_>,
) -> Result<CompareReport, InputError> {
    compare_mode(reference, model, out, CompareMode::BitExact)
}

pub(super) fn compare_mode(
    reference: &Reference,
    model: &BoundModel,
    out: OutputBits<'_>,
    mode: CompareMode,
) -> Result<CompareReport, InputError> {
    check_model(
        model,
        reference.k,
        reference.dtype,
        reference.a_offset.is_some(),
    )?;
    out.validate(reference.m, reference.n)?;
    let (n, dtype) = (reference.n, reference.dtype);
    let report = (0..reference.m)
        .into_par_iter()
        .fold(
            || CompareReport::new(mode),
            |mut rep, m| {
                let row = m * n..(m + 1) * n;
                let (y, a) = (&reference.y[row.clone()], &reference.a[row.clone()]);
                let acc = reference.a_offset.as_ref().map_or(a, |o| &o[row]);
                let bits = &out.bits[m * out.row_stride..m * out.row_stride + n];
                rep.record_row(m, bits, dtype, y, a, acc, &reference.bias, model);
                rep
            },
        )
        .reduce(
            || CompareReport::new(mode),
            |mut a, b| {
                a.merge(&b);
                a
            },
        );
    Ok(report)
}

/// What a judge next to the reference's lanes needs (the GPU reference judges on the device,
/// `offload::HeldReference`): the output, the bound, and the bias the raw products get
/// before they are compared.
#[derive(Clone, Copy, Debug)]
pub struct JudgeRequest<'a> {
    pub out: OutputBits<'a>,
    /// Its recipe's output dtype and bias stage, and its coefficients with and without a bias
    /// ([`BoundModel::terms`]), are all a judge reads.
    pub model: BoundModel,
    pub mode: CompareMode,
    /// `[N]`; added to the raw products only where the layer has a bias (`has_bias`), as the
    /// host reference does.
    pub bias: &'a [f64],
    pub has_bias: bool,
}

/// The host twin of the on-device judge: the report of `[M, N]` raw lanes (`y` before the
/// bias, `a`, and `acc` = `a_offset` where the recipe has one) against `request.out`, or `None`
/// when any element is not plain (poison, a non-finite result or reference, a bound out of
/// range), which only the host's full rules judge. A device's judge must return exactly this;
/// it is the oracle of that test, and the judge of host-held lanes.
pub fn judge_plain(
    request: &JudgeRequest<'_>,
    m: usize,
    n: usize,
    y: &[f64],
    a: &[f64],
    acc: Option<&[f64]>,
) -> Option<CompareReport> {
    let mut report = CompareReport::new(request.mode);
    let mut row_y = vec![0.0; n];
    for r in 0..m {
        let row = r * n..(r + 1) * n;
        row_y.copy_from_slice(&y[row.clone()]);
        if request.has_bias {
            row_y
                .iter_mut()
                .zip(request.bias)
                .for_each(|(v, b)| *v += b);
        }
        let bits = &request.out.bits[r * request.out.row_stride..][..n];
        let acc = acc.map_or(&a[row.clone()], |o| &o[row.clone()]);
        let special = report.record_row(
            r,
            bits,
            request.model.recipe.output,
            &row_y,
            &a[row],
            acc,
            request.bias,
            &request.model,
        );
        if special > 0 {
            return None;
        }
    }
    Some(report)
}

/// Judges a dequantize-then-matmul library's output `[M, N]` (bits of the activation dtype,
/// e.g. torch's `F.linear(x, w)` on compressed-tensors' decompressed `w`): against the reference
/// on the weights rounded to the activation dtype ([`WeightRounding::ToActivationDtype`]), every
/// element within `c_target·γ_K·a + u_out·|y|` (plus the small terms of [`BoundModel`]), the bias
/// added before or after the cast ([`NumericRecipe::dequantize_then_matmul`]). The bound assumes
/// fp32 accumulation: torch's reduced-precision reductions (the `allow_*_reduced_precision_
/// reduction` switches) are outside it.
pub fn compare_library_output(
    x: &Activations,
    layer: &QuantizedLayer,
    out: OutputBits<'_>,
    c_target: f64,
) -> Result<CompareReport, InputError> {
    let recipe = NumericRecipe::dequantize_then_matmul(layer.dtype);
    let model = BoundModel::new(&recipe, layer.shape.k, c_target)?;
    let reference = reference_with_rounding(
        x,
        layer,
        &recipe,
        NonFiniteX::Refuse,
        WeightRounding::ToActivationDtype,
    )?;
    compare(&reference, &model, out)
}

/// Reference lines against the output, one report per line (sampled verification).
pub(crate) fn compare_lines(
    lines: &Lines,
    model: &BoundModel,
    dtype: ActDtype,
    out: OutputBits<'_>,
) -> Vec<CompareReport> {
    (0..lines.index.len())
        .into_par_iter()
        .map(|i| {
            let mut rep = CompareReport::new(CompareMode::Bound);
            for j in 0..lines.len {
                let e = i * lines.len + j;
                let (m, n) = lines.coords(i, j);
                let a = lines.a[e];
                let acc = lines.a_offset.as_ref().map_or(a, |o| o[e]);
                rep.record(
                    (m, n),
                    out.get(m, n),
                    dtype,
                    lines.y[e],
                    a,
                    acc,
                    lines.bias[n],
                    model,
                );
            }
            rep
        })
        .collect()
}
