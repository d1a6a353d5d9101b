//! Which cases of a suite perf times: the dense ones, one per (provider, shape, M) key, as the
//! selection takes them; the rest listed with why not.

use w4a16_kernels::decl::LaunchShape;
use w4a16_kernels::set::decl;
use w4a16_kernels::{KernelDecl, KernelId, Target};
use w4a16_reference::formats;
use w4a16_reference::layer::Symmetry;
use w4a16_reference::{ActDtype, LayerShape};

use crate::bench::Traffic;
use crate::perf::key::{ControlKind, KernelLabel, PerfKey};
use w4a16_cases::{Provider, RowPadding, Suite};
use w4a16_device::tensor::DenseSpec;
use w4a16_select::config::KernelConfig;
use w4a16_select::{LayerRequest, padding};

/// One dense case to time: the first case of the suite with its key, as the selection takes it
/// on `target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfCase {
    pub key: PerfKey,
    pub case_id: String,
    pub shape: LayerShape,
    pub m: usize,
    pub dtype: ActDtype,
    pub symmetry: Symmetry,
    /// The target the selection ran for (both devices must be it).
    pub target: Target,
    /// The case's row padding (the target's rule decides what it pads).
    pub padding: RowPadding,
    /// The kernels the selection runs per call: `[skinny]`, `[fused]`, `[dequant, dense]` or
    /// `[fallback]` (never empty: a case without a path is not timed).
    pub path: Vec<KernelId>,
}

impl PerfCase {
    pub(crate) fn launch_shape(&self) -> LaunchShape {
        LaunchShape {
            m: self.m,
            n: self.shape.n,
            k: self.shape.k,
            group: self.shape.group,
            dtype: self.dtype,
            asymmetric: self.symmetry == Symmetry::Asym,
            routing: None,
        }
    }

    /// The entry point `kernel` launches for this case.
    pub(crate) fn entry(&self, kernel: &KernelDecl) -> String {
        kernel.launch_entry(&self.launch_shape(), self.target)
    }

    /// `<kernel>:<entry>` per kernel of the path, joined by `+`; the vendor BLAS is `dense:blas`.
    pub fn label(&self) -> KernelLabel {
        let parts: Vec<String> = self
            .path
            .iter()
            .map(|&k| match k {
                KernelId::Dense => "dense:blas".to_string(),
                k => format!("{}:{}", k.name(), self.entry(decl(k))),
            })
            .collect();
        KernelLabel(parts.join("+"))
    }

    pub fn control(&self) -> ControlKind {
        ControlKind::for_m(self.m)
    }

    /// Logical bytes of one call (`bench::Traffic`: weights, scales, zero points, X, Y).
    pub fn traffic_bytes(&self) -> u64 {
        Traffic::gemm(self.shape, self.m, self.symmetry).total()
    }

    pub fn flops(&self) -> u64 {
        2 * self.m as u64 * self.shape.n as u64 * self.shape.k as u64
    }

    pub(super) fn padding_rule(&self) -> formats::PaddingRule {
        padding::padding_rule(self.target, self.padding)
    }

    pub(crate) fn dense_spec(&self) -> DenseSpec {
        DenseSpec {
            n: self.shape.n,
            k: self.shape.k,
            row_stride: padding::dense_row_stride(
                self.target,
                self.shape.k,
                self.dtype,
                self.padding,
            ),
            dtype: self.dtype,
        }
    }
}

/// Why a case was not timed: MoE layers are `w4a16 bench --moe`'s.
pub const MOE_NOT_TIMED: &str = "a MoE case: `w4a16 bench --moe` times MoE layers";

/// The dense cases of `suite` keyed (provider, shape, M), the first case of each key, as the
/// selection takes them on `target` with `config`, sorted by shape, provider and M (each layer
/// is then generated once); and every case not timed with why (MoE, no provider for its dtype
/// and symmetry, no kernel takes it, or timed under an earlier case of the same key).
pub fn perf_cases(
    suite: &Suite,
    providers: &[Provider],
    target: Target,
    config: &KernelConfig,
) -> (Vec<PerfCase>, Vec<(String, String)>) {
    let mut timed: Vec<PerfCase> = Vec::new();
    let mut not_timed = Vec::new();
    let mut first_of: std::collections::HashMap<PerfKey, String> = Default::default();
    for case in &suite.cases {
        if case.moe.is_some() {
            not_timed.push((case.id.clone(), MOE_NOT_TIMED.to_string()));
            continue;
        }
        let Some(provider) = providers
            .iter()
            .find(|p| p.dtype == case.dtype && p.symmetry == case.symmetry)
        else {
            not_timed.push((
                case.id.clone(),
                format!(
                    "no provider for {}/{} (cases/models.toml [[provider]])",
                    case.dtype.name(),
                    case.symmetry.name()
                ),
            ));
            continue;
        };
        let key = PerfKey {
            provider: provider.name.clone(),
            shape: case.shape_name.clone(),
            m: case.m,
        };
        if let Some(first) = first_of.get(&key) {
            not_timed.push((
                case.id.clone(),
                format!("same key {key} as {first}, timed once"),
            ));
            continue;
        }
        // The plain layer (see the module doc): no bias; act-order stays, as no kernel takes it.
        let mut req = LayerRequest::from_case_under(case, config);
        req.bias = false;
        let sel = w4a16_select::select(target, &req, config);
        if sel.path.is_empty() {
            not_timed.push((
                case.id.clone(),
                format!("no kernel takes the layer: {}", sel.rejection_list()),
            ));
            continue;
        }
        first_of.insert(key.clone(), case.id.clone());
        timed.push(PerfCase {
            key,
            case_id: case.id.clone(),
            shape: case.shape,
            m: case.m,
            dtype: case.dtype,
            symmetry: case.symmetry,
            target,
            padding: case.padding,
            path: sel.path,
        });
    }
    timed.sort_by(|a, b| {
        (&a.key.shape, &a.key.provider, a.key.m).cmp(&(&b.key.shape, &b.key.provider, b.key.m))
    });
    (timed, not_timed)
}
