//! The static cross-check of docs/contract.md §5: every kernel a selection would launch must accept, by its
//! declared contract, the tensors the layer really has on the device. A selection that would
//! fail at launch is found here, without a GPU.
//!
//! Selection does not restate any kernel's contract: it plans the launches (tensor shapes,
//! element types, strides and sizes, exactly as the loader lays them out) and hands each plan to
//! a [`ContractValidator`], which the launch-boundary validation implements from the kernel
//! declarations.

use std::fmt;

use serde::Serialize;
use w4a16_kernels::{KernelId, Target, TensorRole};
use w4a16_reference::ActDtype;
use w4a16_reference::layer::Symmetry;

use crate::{LayerRequest, Selection, Strides};
use w4a16_device::tensor::{ALLOCATION_ALIGN, ElemType, LaunchInputs, TensorView};
use w4a16_device::validate::ContractError;

/// Element type of a planned tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum TensorElem {
    Act(ActDtype),
    U8,
    U32,
}

impl TensorElem {
    pub fn size_bytes(self) -> usize {
        match self {
            TensorElem::Act(d) => d.size_bytes(),
            TensorElem::U8 => 1,
            TensorElem::U32 => 4,
        }
    }
}

/// One tensor of a planned launch: row-major, `strides` in elements, `bytes_available` behind
/// the base (the loader allocates `(rows − 1)·stride + cols` elements, nothing more).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedTensor {
    pub role: TensorRole,
    pub elem: TensorElem,
    pub shape: Vec<usize>,
    pub strides: Vec<usize>,
    pub bytes_available: usize,
}

impl PlannedTensor {
    fn matrix(
        role: TensorRole,
        elem: TensorElem,
        rows: usize,
        cols: usize,
        row_stride: usize,
    ) -> Self {
        let elems = if rows == 0 || cols == 0 {
            0
        } else {
            (rows - 1) * row_stride + cols
        };
        PlannedTensor {
            role,
            elem,
            shape: vec![rows, cols],
            strides: vec![row_stride, 1],
            bytes_available: elems * elem.size_bytes(),
        }
    }

    fn vector(role: TensorRole, elem: TensorElem, len: usize) -> Self {
        PlannedTensor {
            role,
            elem,
            shape: vec![len],
            strides: vec![1],
            bytes_available: len * elem.size_bytes(),
        }
    }
}

/// One launch a selection implies, with the tensors the layer has. `m` is 0 for the dequant
/// (a load-time launch with no M); `group` is K for the dense GEMM (no groups).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedLaunch {
    pub kernel: KernelId,
    pub target: Target,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub group: usize,
    pub dtype: ActDtype,
    pub tensors: Vec<PlannedTensor>,
    /// The layer's symmetry (`None` for the dense GEMM, which reads no quantized layer).
    pub layer_symmetry: Option<Symmetry>,
}

impl PlannedLaunch {
    pub fn tensor(&self, role: TensorRole) -> Option<&PlannedTensor> {
        self.tensors.iter().find(|t| t.role == role)
    }
}

/// Checks a planned launch against the kernel's declared contract. The launch-boundary
/// validation implements it; tests may pass a closure.
pub trait ContractValidator {
    /// What a refusal says: which tensor (or size), what the contract expects, what the launch
    /// had.
    type Refusal: fmt::Display + fmt::Debug;

    fn validate(&self, launch: &PlannedLaunch) -> Result<(), Self::Refusal>;
}

impl<F, E> ContractValidator for F
where
    F: Fn(&PlannedLaunch) -> Result<(), E>,
    E: fmt::Display + fmt::Debug,
{
    type Refusal = E;

    fn validate(&self, launch: &PlannedLaunch) -> Result<(), E> {
        self(launch)
    }
}

/// The kernel set's own declarations (`w4a16_kernels::set`), checked by the launch-boundary
/// validation: the validator the runner and the tests use.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeclaredContracts;

impl DeclaredContracts {
    /// The launch-boundary inputs a planned launch describes (views only; no data).
    pub fn launch_inputs(launch: &PlannedLaunch) -> LaunchInputs {
        let view = |role| {
            launch.tensor(role).map(|t| TensorView {
                elem: match t.elem {
                    TensorElem::Act(d) => ElemType::from(d),
                    TensorElem::U8 => ElemType::U8,
                    TensorElem::U32 => ElemType::U32,
                },
                shape: t.shape.clone(),
                strides: t.strides.clone(),
                byte_offset: 0,
                bytes_available: t.bytes_available,
                base_align: ALLOCATION_ALIGN,
            })
        };
        LaunchInputs {
            m: launch.m,
            n: launch.n,
            k: launch.k,
            group: launch.group,
            dtype: launch.dtype,
            x: view(TensorRole::X),
            weights: view(TensorRole::Weights),
            scales: view(TensorRole::Scales),
            zeros: view(TensorRole::Zeros),
            bias: view(TensorRole::Bias),
            y: view(TensorRole::Y),
            dense: view(TensorRole::Dense),
            carrier: view(TensorRole::Carrier),
            layer_symmetry: launch.layer_symmetry,
            topk_ids: None,
            topk_weights: None,
            expert_map: None,
            sorted_token_ids: None,
            expert_ids: None,
            tokens_post_padded: None,
            routing: None,
        }
    }
}

impl ContractValidator for DeclaredContracts {
    type Refusal = ContractError;

    fn validate(&self, launch: &PlannedLaunch) -> Result<(), ContractError> {
        let decl = w4a16_kernels::set::decl(launch.kernel);
        w4a16_device::validate::validate(decl, &Self::launch_inputs(launch)).map(|_| ())
    }
}

/// A selection whose kernel's contract refuses the layer: a failed case, found statically.
/// `refusal` is the validator's own (the declared contracts' [`ContractError`] by default).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "selection on {target} picks {kernel} for {}, but its contract refuses the layer: {refusal}",
    LayerLabel(request)
)]
pub struct CrossCheckError<R = ContractError> {
    pub target: Target,
    pub kernel: KernelId,
    /// The layer call the selection was made for.
    pub request: LayerRequest,
    pub refusal: R,
}

/// `M=.. N=.. K=.. G=.. dtype symmetry`: the layer a cross-check error names.
struct LayerLabel<'a>(&'a LayerRequest);

impl fmt::Display for LayerLabel<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.0;
        write!(
            f,
            "M={} N={} K={} G={} {} {}",
            r.m,
            r.shape.n,
            r.shape.k,
            r.shape.group,
            r.dtype.name(),
            r.symmetry.name()
        )
    }
}

/// The launches a selection implies, each with the layer's resident tensors as laid out on the
/// selection's target.
pub fn plan_launches(sel: &Selection) -> Vec<PlannedLaunch> {
    let r = &sel.request;
    let (n, k, group) = (r.shape.n, r.shape.k, r.shape.group);
    let act = TensorElem::Act(r.dtype);
    let st: &Strides = &sel.strides;
    let groups = r.shape.groups();

    let x = PlannedTensor::matrix(TensorRole::X, act, r.m, k, st.x_row_stride);
    let weights = if st.weight_row_stride_bytes.is_multiple_of(4) {
        PlannedTensor::matrix(
            TensorRole::Weights,
            TensorElem::U32,
            n,
            k / 8,
            st.weight_row_stride_bytes / 4,
        )
    } else {
        PlannedTensor::matrix(
            TensorRole::Weights,
            TensorElem::U8,
            n,
            k / 2,
            st.weight_row_stride_bytes,
        )
    };
    let scales = PlannedTensor::matrix(TensorRole::Scales, act, n, groups, st.scale_row_stride);
    let zeros = r.asymmetric().then(|| {
        PlannedTensor::matrix(
            TensorRole::Zeros,
            TensorElem::U32,
            n.div_ceil(8),
            groups,
            groups,
        )
    });
    let bias = r
        .bias
        .then(|| PlannedTensor::vector(TensorRole::Bias, act, n));
    let y = PlannedTensor::matrix(TensorRole::Y, act, r.m, n, st.y_row_stride);
    let dense = st
        .dense_row_stride
        .map(|s| PlannedTensor::matrix(TensorRole::Dense, act, n, k, s));
    // The carrier a loader builds for an asymmetric layer: u32 [N, K/G], rows K/G apart.
    let carrier = r
        .asymmetric()
        .then(|| PlannedTensor::matrix(TensorRole::Carrier, TensorElem::U32, n, groups, groups));

    let launch = |kernel, m, group, tensors: Vec<Option<PlannedTensor>>| PlannedLaunch {
        kernel,
        target: sel.target,
        m,
        n,
        k,
        group,
        dtype: r.dtype,
        tensors: tensors.into_iter().flatten().collect(),
        layer_symmetry: (kernel != KernelId::Dense).then_some(r.symmetry),
    };
    sel.path
        .iter()
        .map(|&kernel| match kernel {
            KernelId::Skinny | KernelId::Fused | KernelId::Fallback => launch(
                kernel,
                r.m,
                group,
                vec![
                    Some(x.clone()),
                    Some(weights.clone()),
                    Some(scales.clone()),
                    zeros.clone(),
                    bias.clone(),
                    Some(y.clone()),
                ],
            ),
            KernelId::Dequant => launch(
                kernel,
                0,
                group,
                vec![
                    Some(weights.clone()),
                    Some(scales.clone()),
                    zeros.clone(),
                    dense.clone(),
                ],
            ),
            KernelId::FusedCarrier => launch(
                kernel,
                r.m,
                group,
                vec![
                    Some(x.clone()),
                    Some(weights.clone()),
                    carrier.clone(),
                    bias.clone(),
                    Some(y.clone()),
                ],
            ),
            KernelId::Dense => launch(
                kernel,
                r.m,
                k,
                vec![
                    Some(x.clone()),
                    dense.clone(),
                    bias.clone(),
                    Some(y.clone()),
                ],
            ),
            // A dense layer's selection never routes to the MoE kernels; planned without
            // tensors, such a launch is refused by the contract check.
            KernelId::MoeAlign | KernelId::Moe => launch(kernel, r.m, group, vec![]),
        })
        .collect()
}

/// Runs every planned launch of `sel` through `validator`; the first refusal is the error.
pub fn cross_check<V: ContractValidator + ?Sized>(
    sel: &Selection,
    validator: &V,
) -> Result<(), CrossCheckError<V::Refusal>> {
    for launch in plan_launches(sel) {
        if let Err(refusal) = validator.validate(&launch) {
            return Err(CrossCheckError {
                target: sel.target,
                kernel: launch.kernel,
                request: sel.request,
                refusal,
            });
        }
    }
    Ok(())
}
