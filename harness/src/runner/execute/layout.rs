//! X/Y/dense geometry: the stride and offset of X for a kernel (the case's view, or the
//! target's activation-row padding for a kernel that gets the engine's copy), Y's placement
//! in its buffer and the dense copy's row stride. Views only; no launch here.

use super::CaseRun;
use w4a16_cases::ViewLayout;
use w4a16_device::tensor::{DenseSpec, TensorView, XBuffer, YSpec};
use w4a16_kernels::KernelId;
use w4a16_reference::formats::ResidentLayer;
use w4a16_reference::layer::Activations;

impl<'c, 'a> CaseRun<'c, 'a> {
    /// X's row stride and offset (elements) for `kernel`: the layout's, except that the
    /// default layout on a kernel that gets the engine's per-call copy of X (fused) follows
    /// the target's activation-row padding rule (docs/contract.md §5).
    fn x_geometry(&self, kernel: KernelId, k: usize, layout: ViewLayout) -> (usize, usize) {
        if layout.is_default() && w4a16_select::padding::copies_x(kernel) {
            let stride = w4a16_select::padding::activation_row_stride(
                self.ctx.target,
                k,
                self.case.dtype,
                self.case.padding,
            );
            (stride, 0)
        } else {
            (layout.row_stride(k), layout.offset())
        }
    }

    /// The view of X a launch of `kernel` gets, without building its buffer.
    pub(super) fn x_view(
        &self,
        kernel: KernelId,
        x: &Activations,
        layout: ViewLayout,
    ) -> TensorView {
        let (stride, offset) = self.x_geometry(kernel, x.k, layout);
        XBuffer::planned_view(x.m, x.k, stride, offset, x.dtype)
    }

    /// X laid out as the case asks for `kernel` (borrowed when that is `x`'s own layout).
    pub(super) fn x_buffer<'x>(&self, kernel: KernelId, x: &'x Activations) -> XBuffer<'x> {
        let (stride, offset) = self.x_geometry(kernel, x.k, self.case.x_layout);
        // Every layout's stride is at least K, so this never falls back.
        XBuffer::new(x, stride, offset).unwrap_or_else(|| XBuffer::as_laid_out(x))
    }

    /// Y `[m, N]` as `layout` places it in its buffer.
    pub(super) fn y_spec(&self, m: usize, layout: ViewLayout) -> YSpec {
        let n = self.case.shape.n;
        YSpec::strided(m, n, layout.row_stride(n), layout.offset(), self.case.dtype)
    }

    pub(super) fn dense_spec(&self, resident: &ResidentLayer) -> DenseSpec {
        let stride = w4a16_select::padding::dense_row_stride(
            self.ctx.target,
            resident.shape.k,
            resident.dtype,
            self.case.padding,
        );
        DenseSpec {
            n: resident.shape.n,
            k: resident.shape.k,
            row_stride: stride,
            dtype: resident.dtype,
        }
    }
}
