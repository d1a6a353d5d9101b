//! `--reference gpu`: the full-precision reference with its products by the device's f64 GEMM
//! (`Device::reference_gemm_f64`, cuBLAS DGEMM on CUDA), so every element of every shape is
//! judged against the derived bound, large layers included. X and the exact weights are built
//! on the host by the CPU reference's own decoding (`w4a16_reference::offload`); the kernels
//! under test share nothing with it beyond the resident tensors. Each reference is
//! cross-checked against the CPU f64 reference on a seeded sample of elements. Where the device
//! can, the products stay there and the output is judged there ([`held_reference_on`]):
//! only the report comes back.

use w4a16_device::Device;
use w4a16_device::held::DeviceHeldGemm;
use w4a16_reference::NumericRecipe;
use w4a16_reference::gemm::{NonFiniteX, Reference};
use w4a16_reference::layer::{Activations, QuantizedLayer};
use w4a16_reference::offload::{
    self, DEFAULT_W_MAX_BYTES, F64Gemm, GemmError, HeldReference, LayerWeights, OffloadError,
};

w4a16_reference::named_enum! {
    /// Where the reference's products are formed (`--reference`, recorded in report.json).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum ReferenceChoice {
        /// The device's f64 GEMM: every element judged, no sampling.
        Gpu = "gpu",
        /// The f64 CPU reference; Freivalds plus sampled lines above the full-reference size.
        Cpu = "cpu",
    }
}

/// Why `--reference` cannot be honoured here.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// `gpu` was asked for; `opened` says what is open instead of a CUDA device.
    #[error("--reference gpu needs a CUDA device for its f64 GEMM; {opened}")]
    GpuWithoutCuda { opened: String },
}

impl ReferenceChoice {
    /// What a run asks for under `sanitizer`: `requested`, else the CPU reference under initcheck.
    /// initcheck reports host reads of unwritten device memory in the GPU reference's f64 GEMM
    /// path (the harness's oracle, not a kernel under test; docs/sanitize.md), so the kernels are
    /// judged against the CPU reference there unless `--reference` says otherwise.
    pub fn requested_under(
        requested: Option<ReferenceChoice>,
        sanitizer: Option<crate::runner::verdict::SanitizerTool>,
    ) -> Option<ReferenceChoice> {
        use crate::runner::verdict::SanitizerTool;
        requested.or(match sanitizer {
            Some(SanitizerTool::Initcheck) => Some(ReferenceChoice::Cpu),
            _ => None,
        })
    }

    /// `requested`, or by default `gpu` where a CUDA device is open and `cpu` otherwise.
    /// Asking for `gpu` without a CUDA device is an error naming what is there.
    pub fn resolve(
        requested: Option<ReferenceChoice>,
        device: Option<&dyn Device>,
    ) -> Result<ReferenceChoice, ReferenceError> {
        let cuda = device.filter(|d| d.kind() == w4a16_device::DeviceKind::Cuda);
        match (requested, cuda) {
            (Some(ReferenceChoice::Gpu), None) => Err(ReferenceError::GpuWithoutCuda {
                opened: device.map_or("no device is open".to_string(), |d| {
                    format!("{} is {}", d.name(), d.kind().name())
                }),
            }),
            (Some(choice), _) => Ok(choice),
            (None, Some(_)) => Ok(ReferenceChoice::Gpu),
            (None, None) => Ok(ReferenceChoice::Cpu),
        }
    }
}

/// A device as the offloaded reference's GEMM.
struct DeviceGemm<'d>(&'d dyn Device);

impl F64Gemm for DeviceGemm<'_> {
    fn gemm(
        &mut self,
        x: &[f64],
        w: &[f64],
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), GemmError> {
        self.0
            .reference_gemm_f64(x, w, m, n, k)
            .map_err(|e| Box::new(e) as GemmError)
    }

    fn gemm_keyed(
        &mut self,
        x: &[f64],
        w: &[f64],
        w_key: Option<u64>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), GemmError> {
        self.0
            .reference_gemm_f64_keyed(x, w, w_key, m, n, k)
            .map_err(|e| Box::new(e) as GemmError)
    }

    fn stands_in(&self) -> bool {
        self.0.computes_nothing()
    }
}

/// The full reference of one case with its products on `device`, cross-checked at elements
/// drawn from `seed` (the case id's).
pub fn reference_on(
    device: &dyn Device,
    x: &Activations,
    layer: &QuantizedLayer,
    recipe: &NumericRecipe,
    non_finite_x: NonFiniteX,
    seed: u64,
) -> Result<Reference, OffloadError> {
    offload::reference_offloaded(
        x,
        layer,
        recipe,
        non_finite_x,
        &mut DeviceGemm(device),
        DEFAULT_W_MAX_BYTES,
        seed,
    )
}

/// [`reference_on`] with the lanes left on `device` and judged there; `None` where the device
/// cannot keep them or the case needs the host reference (special rows, W over `DEFAULT_W_MAX_BYTES`).
pub fn held_reference_on<'d>(
    device: &'d dyn Device,
    x: &Activations,
    layer: &QuantizedLayer,
    weights: &LayerWeights,
    recipe: &NumericRecipe,
    non_finite_x: NonFiniteX,
    seed: u64,
) -> Result<Option<HeldReference<'d>>, OffloadError> {
    offload::reference_held(
        x,
        layer,
        weights,
        recipe,
        non_finite_x,
        &mut DeviceHeldGemm(device),
        DEFAULT_W_MAX_BYTES,
        seed,
    )
}
