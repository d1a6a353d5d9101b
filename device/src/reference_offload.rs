//! The full-precision reference's work a device may take over (`--reference gpu`): the f64
//! products by the vendor's DGEMM, realistic activations drawn on the device, and the lanes
//! kept and judged there (`held.rs`). Every method has a default saying the device does
//! not do it, so the caller forms the host reference instead.

use w4a16_reference::ActDtype;
use w4a16_reference::compare::{CompareReport, JudgeRequest};
use w4a16_reference::data::StreamKey;
use w4a16_reference::offload::{ActivationOperand, RawLanes, WeightOperand};

use crate::fault::{Capability, DeviceFault};
use crate::held::{self, HeldLanes};
use crate::info::DeviceInfo;

/// The reference's lanes on a device, declared once for [`crate::Runtime`] and
/// [`crate::Device`]: a runtime implements what it can, and the [`crate::Device`] over it
/// offers the same.
pub trait ReferenceOffload: DeviceInfo {
    /// The full-precision reference's products on the device (`--reference gpu`): row-major
    /// `x[M, K]` and `w[N, K]` in f64 in, `y = x·wᵀ` and the bound's magnitude term
    /// `a = |x|·|w|ᵀ` (both `[M, N]`, row-major) out, by the vendor's DGEMM. No code of the
    /// kernels under test is involved; the caller bounds `w`'s size (chunks along N).
    fn reference_gemm_f64(
        &self,
        x: &[f64],
        w: &[f64],
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), DeviceFault> {
        let _ = (x, w, m, n, k);
        Err(no_f64_gemm(self.name()))
    }

    /// [`ReferenceOffload::reference_gemm_f64`] with `w_key` naming `w`'s content when the same `w` comes
    /// again (a layer's next batch size): a backend may hold `w` under it.
    fn reference_gemm_f64_keyed(
        &self,
        x: &[f64],
        w: &[f64],
        w_key: Option<u64>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), DeviceFault> {
        let _ = w_key;
        self.reference_gemm_f64(x, w, m, n, k)
    }

    /// `count` realistic activations drawn on the device from `stream` (the bits of
    /// `data::RealisticSource`), brought to the host; `None`: this device does not draw them,
    /// and the host does.
    fn draw_realistic(
        &self,
        stream: &StreamKey,
        dtype: ActDtype,
        count: usize,
    ) -> Result<Option<Vec<u16>>, DeviceFault> {
        let _ = (stream, dtype, count);
        Ok(None)
    }

    /// The GPU reference's products kept on the device (`--reference gpu`): X widened and the
    /// exact weights decoded there from `x` and `weights`, then `y = x·wᵀ`, `a = |x|·|w|ᵀ` and, with an offset,
    /// `|x|·w_offsetᵀ` (`[M, N]` each), judged there by [`ReferenceOffload::held_judge`] so that only
    /// the report comes back. `None`: this device cannot keep them, and the caller forms the
    /// host reference instead.
    fn reference_products_held(
        &self,
        x: &ActivationOperand<'_>,
        weights: &WeightOperand<'_>,
        w_key: Option<u64>,
    ) -> Result<Option<HeldLanes>, DeviceFault> {
        let _ = (x, weights, w_key);
        Ok(None)
    }

    /// The raw lanes `(y, a, a_offset or 0)` at element indices `m·N + n`.
    fn held_gather(
        &self,
        lanes: &HeldLanes,
        index: &[usize],
    ) -> Result<Vec<[f64; 3]>, DeviceFault> {
        let _ = (lanes, index);
        Err(held::no_held_lanes(self.name()))
    }

    /// Every element of the raw lanes, on the host.
    fn held_download(&self, lanes: &HeldLanes) -> Result<RawLanes, DeviceFault> {
        let _ = lanes;
        Err(held::no_held_lanes(self.name()))
    }

    /// Overwrites whole rows of the held `y` lane (X's special rows, their IEEE values derived
    /// on the host).
    fn held_overwrite_y_rows(
        &self,
        lanes: &mut HeldLanes,
        rows: &[(usize, Vec<f64>)],
    ) -> Result<(), DeviceFault> {
        let _ = (lanes, rows);
        Err(held::no_held_lanes(self.name()))
    }

    /// The output judged against the lanes where they are: the report of
    /// `compare::judge_plain`, or `None` when an element is not plain (the host judges then).
    fn held_judge(
        &self,
        lanes: &HeldLanes,
        request: &JudgeRequest<'_>,
    ) -> Result<Option<CompareReport>, DeviceFault> {
        let _ = (lanes, request);
        Err(held::no_held_lanes(self.name()))
    }
}

/// A device without the vendor's f64 GEMM: the run uses the CPU reference (`--reference cpu`).
fn no_f64_gemm(device: String) -> DeviceFault {
    DeviceFault::MissingCapability {
        capability: Capability::F64Gemm,
        device,
        why: "no vendor f64 GEMM on this backend".into(),
    }
}
