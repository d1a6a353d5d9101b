//! [`LaunchInputs`]: the views of one launch's tensors and its sizes, as the validator reads
//! them, built from a dense layer, a MoE layer or by hand.

use super::*;

/// The views of one launch plus its logical sizes. A `None` tensor is a null pointer.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchInputs {
    /// Rows of X (the tokens `T` of a MoE launch).
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub group: usize,
    pub dtype: ActDtype,
    pub x: Option<TensorView>,
    pub weights: Option<TensorView>,
    pub scales: Option<TensorView>,
    pub zeros: Option<TensorView>,
    pub bias: Option<TensorView>,
    pub y: Option<TensorView>,
    pub dense: Option<TensorView>,
    /// The asymmetric carrier (fused_carrier), in place of scales and zero points.
    pub carrier: Option<TensorView>,
    /// The symmetry of the quantized layer the launch reads, as its loader knows it (`None`: no
    /// quantized layer, the dense GEMM). A carrier launch carries no zero-point tensor to tell
    /// it by, and a carrier for a symmetric layer is refused.
    pub layer_symmetry: Option<Symmetry>,
    pub topk_ids: Option<TensorView>,
    pub topk_weights: Option<TensorView>,
    pub expert_map: Option<TensorView>,
    pub sorted_token_ids: Option<TensorView>,
    pub expert_ids: Option<TensorView>,
    pub tokens_post_padded: Option<TensorView>,
    /// `Some` for the MoE kernels: the routing sizes their tensors and scalars follow.
    pub routing: Option<MoeRouting>,
}

impl LaunchInputs {
    fn empty(m: usize, n: usize, k: usize, group: usize, dtype: ActDtype) -> Self {
        LaunchInputs {
            m,
            n,
            k,
            group,
            dtype,
            x: None,
            weights: None,
            scales: None,
            zeros: None,
            bias: None,
            y: None,
            dense: None,
            carrier: None,
            layer_symmetry: None,
            topk_ids: None,
            topk_weights: None,
            expert_map: None,
            sorted_token_ids: None,
            expert_ids: None,
            tokens_post_padded: None,
            routing: None,
        }
    }

    /// `Y = X·Wᵀ (+ bias)` reading the asymmetric carrier in place of scales and zero points
    /// (fused_carrier). `carrier` is `None` where the layer has none (a symmetric layer): the
    /// launch is then refused at validation, naming the layer's symmetry.
    pub fn gemm_carrier_view(
        layer: &ResidentLayer,
        carrier: Option<&Carrier>,
        x: TensorView,
        y: &YSpec,
    ) -> Self {
        let s = layer.shape;
        let m = x.shape.first().copied().unwrap_or(0);
        let mut li = Self::empty(m, s.n, s.k, s.group, layer.dtype);
        li.x = Some(x);
        li.y = Some(y.view());
        li.set_layer(layer);
        li.scales = None;
        li.zeros = None;
        li.carrier = carrier.map(carrier_view);
        li
    }

    /// The routing step: `tokens × top_k` topk ids (and an expert map when `expert_map`) to
    /// the sorted slots, the block experts and the padded length, each sized by
    /// [`MoeRouting::capacity`] (empty views when that overflows: validation names it).
    pub fn moe_align(
        tokens: usize,
        routing: MoeRouting,
        expert_map: bool,
        dtype: ActDtype,
    ) -> Self {
        let mut li = Self::empty(tokens, 0, 0, 0, dtype);
        li.routing = Some(routing);
        li.topk_ids = Some(routing_matrix(ElemType::I32, tokens, routing.top_k));
        li.expert_map = expert_map.then(|| int_vector(routing.experts));
        li.set_aligned(tokens, routing);
        li
    }

    /// The grouped GEMM on the align step's outputs: X `[T, K]` (a view: strided, offset), the
    /// stacked experts, topk weights `[T, top_k]` f32 when `topk_weights`, C `[T·top_k, N]`.
    pub fn moe(
        x: TensorView,
        experts: &StackedSpec,
        routing: MoeRouting,
        topk_weights: bool,
        c: &YSpec,
    ) -> Self {
        let tokens = x.shape.first().copied().unwrap_or(0);
        let mut li = Self::empty(tokens, experts.n, experts.k, experts.group, experts.dtype);
        li.routing = Some(routing);
        li.x = Some(x);
        li.weights = Some(experts.weights_view());
        li.scales = Some(experts.scales_view());
        li.zeros = experts.zeros_view();
        li.topk_weights =
            topk_weights.then(|| routing_matrix(ElemType::F32, tokens, routing.top_k));
        li.set_aligned(tokens, routing);
        li.y = Some(c.view());
        li
    }

    fn set_aligned(&mut self, tokens: usize, routing: MoeRouting) {
        let cap = routing.capacity(tokens).unwrap_or(MoeAlignCapacity {
            sorted: 0,
            blocks: 0,
        });
        self.sorted_token_ids = Some(int_vector(cap.sorted));
        self.expert_ids = Some(int_vector(cap.blocks));
        self.tokens_post_padded = Some(int_vector(1));
    }
    /// `Y = X·Wᵀ (+ bias)` on a resident layer (skinny, fused, fallback).
    pub fn gemm(layer: &ResidentLayer, x: &Activations, y: &YSpec) -> Self {
        Self::gemm_view(layer, activations_view(x), y)
    }

    /// As [`Self::gemm`] with X given as a view (strided, offset: an [`XBuffer`]'s).
    pub fn gemm_view(layer: &ResidentLayer, x: TensorView, y: &YSpec) -> Self {
        let s = layer.shape;
        let m = x.shape.first().copied().unwrap_or(0);
        let mut li = Self::empty(m, s.n, s.k, s.group, layer.dtype);
        li.x = Some(x);
        li.y = Some(y.view());
        li.set_layer(layer);
        li
    }

    /// Resident layer to the dense copy (dequant). M is not a launch argument; it is 0 here.
    pub fn dequant(layer: &ResidentLayer, dense: &DenseSpec) -> Self {
        let s = layer.shape;
        let mut li = Self::empty(0, s.n, s.k, s.group, layer.dtype);
        li.weights = Some(weights_view(&layer.weights));
        li.scales = Some(scales_view(layer));
        li.zeros = layer.zeros.as_ref().map(zero_points_view);
        li.dense = Some(dense.view());
        li.layer_symmetry = Some(layer_symmetry(layer));
        li
    }

    /// `Y = X·Denseᵀ (+ bias)` in the vendor BLAS. `group` is not a launch argument; K stands in.
    pub fn dense(x: &Activations, dense: &DenseSpec, bias: Option<&[u16]>, y: &YSpec) -> Self {
        Self::dense_view(activations_view(x), dense, bias, y)
    }

    /// As [`Self::dense`] with X given as a view.
    pub fn dense_view(x: TensorView, dense: &DenseSpec, bias: Option<&[u16]>, y: &YSpec) -> Self {
        let m = x.shape.first().copied().unwrap_or(0);
        let mut li = Self::empty(m, dense.n, dense.k, dense.k, dense.dtype);
        li.x = Some(x);
        li.dense = Some(dense.view());
        li.bias = bias.map(|b| TensorView::vector(dense.dtype.into(), b.len(), b.len() * 2));
        li.y = Some(y.view());
        li
    }

    fn set_layer(&mut self, layer: &ResidentLayer) {
        self.weights = Some(weights_view(&layer.weights));
        self.scales = Some(scales_view(layer));
        self.zeros = layer.zeros.as_ref().map(zero_points_view);
        self.bias = layer
            .bias
            .as_ref()
            .map(|b| TensorView::vector(layer.dtype.into(), b.len(), b.len() * 2));
        self.layer_symmetry = Some(layer_symmetry(layer));
    }

    /// Whether the launch carries zero points or a carrier (an asymmetric layer).
    pub fn asymmetric(&self) -> bool {
        self.zeros.is_some() || self.carrier.is_some()
    }

    pub fn view(&self, role: TensorRole) -> Option<&TensorView> {
        self.slot(role).as_ref()
    }

    pub fn view_mut(&mut self, role: TensorRole) -> Option<&mut TensorView> {
        self.slot_mut(role).as_mut()
    }

    /// Replaces (or removes, with `None`) the tensor for `role`.
    pub fn set(&mut self, role: TensorRole, view: Option<TensorView>) {
        *self.slot_mut(role) = view;
    }

    fn slot(&self, role: TensorRole) -> &Option<TensorView> {
        match role {
            TensorRole::X => &self.x,
            TensorRole::Weights => &self.weights,
            TensorRole::Scales => &self.scales,
            TensorRole::Zeros => &self.zeros,
            TensorRole::Bias => &self.bias,
            TensorRole::Y => &self.y,
            TensorRole::Dense => &self.dense,
            TensorRole::Carrier => &self.carrier,
            TensorRole::TopkIds => &self.topk_ids,
            TensorRole::TopkWeights => &self.topk_weights,
            TensorRole::ExpertMap => &self.expert_map,
            TensorRole::SortedTokenIds => &self.sorted_token_ids,
            TensorRole::ExpertIds => &self.expert_ids,
            TensorRole::TokensPostPadded => &self.tokens_post_padded,
        }
    }

    fn slot_mut(&mut self, role: TensorRole) -> &mut Option<TensorView> {
        match role {
            TensorRole::X => &mut self.x,
            TensorRole::Weights => &mut self.weights,
            TensorRole::Scales => &mut self.scales,
            TensorRole::Zeros => &mut self.zeros,
            TensorRole::Bias => &mut self.bias,
            TensorRole::Y => &mut self.y,
            TensorRole::Dense => &mut self.dense,
            TensorRole::Carrier => &mut self.carrier,
            TensorRole::TopkIds => &mut self.topk_ids,
            TensorRole::TopkWeights => &mut self.topk_weights,
            TensorRole::ExpertMap => &mut self.expert_map,
            TensorRole::SortedTokenIds => &mut self.sorted_token_ids,
            TensorRole::ExpertIds => &mut self.expert_ids,
            TensorRole::TokensPostPadded => &mut self.tokens_post_padded,
        }
    }

    /// Every role that has a tensor, in a fixed order.
    pub fn present_roles(&self) -> Vec<TensorRole> {
        ALL_ROLES
            .into_iter()
            .filter(|r| self.view(*r).is_some())
            .collect()
    }
}

/// Every tensor role, in the order reports list them.
pub const ALL_ROLES: [TensorRole; 14] = [
    TensorRole::X,
    TensorRole::Weights,
    TensorRole::Scales,
    TensorRole::Zeros,
    TensorRole::Bias,
    TensorRole::Y,
    TensorRole::Dense,
    TensorRole::TopkIds,
    TensorRole::TopkWeights,
    TensorRole::ExpertMap,
    TensorRole::SortedTokenIds,
    TensorRole::ExpertIds,
    TensorRole::TokensPostPadded,
    TensorRole::Carrier,
];

/// A resident layer's symmetry: asymmetric when it carries zero points (packed or legacy).
fn layer_symmetry(layer: &ResidentLayer) -> Symmetry {
    if layer.zeros.is_some() {
        Symmetry::Asym
    } else {
        Symmetry::Sym
    }
}

/// A contiguous `[T, top_k]` routing tensor (the topk ids or weights).
fn routing_matrix(elem: ElemType, tokens: usize, top_k: usize) -> TensorView {
    let bytes = tokens
        .saturating_mul(top_k)
        .saturating_mul(elem.size_bytes());
    TensorView::matrix(elem, tokens, top_k, top_k, bytes)
}

/// A contiguous i32 vector of `len` elements.
fn int_vector(len: usize) -> TensorView {
    TensorView::vector(ElemType::I32, len, len.saturating_mul(4))
}

fn scales_view(layer: &ResidentLayer) -> TensorView {
    let s = &layer.scales;
    TensorView::matrix(
        s.dtype.into(),
        s.n,
        s.groups,
        s.row_stride,
        s.bits.len() * 2,
    )
}
