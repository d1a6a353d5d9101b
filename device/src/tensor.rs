//! Tensor descriptors at the launch boundary: what a pointer argument points at, as the host
//! believes it (element type, shape, strides, how many bytes really sit behind the base). The
//! validator compares these against a kernel's declaration; the devices upload exactly the
//! bytes a view claims.

use std::borrow::Cow;

use w4a16_kernels::set::{MoeAlignCapacity, moe_align_capacity};
use w4a16_kernels::{RoutedDims, TensorRole};
use w4a16_reference::formats::{Carrier, ResidentLayer, ResidentWeights, ZeroPoints};
use w4a16_reference::layer::Symmetry;
use w4a16_reference::{ActDtype, Activations};

mod launch_inputs;

pub use launch_inputs::{ALL_ROLES, LaunchInputs};

w4a16_reference::named_enum! {
    /// Element types a tensor handed to a kernel can have.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum ElemType {
        F16 = "f16",
        Bf16 = "bf16",
        U32 = "u32",
        I32 = "i32",
        U8 = "u8",
        /// The router's weights (`topk_weights`).
        F32 = "f32",
    }
}

impl ElemType {
    pub fn size_bytes(self) -> usize {
        match self {
            ElemType::F16 | ElemType::Bf16 => 2,
            ElemType::U32 | ElemType::I32 | ElemType::F32 => 4,
            ElemType::U8 => 1,
        }
    }

    /// The activation dtype this element type is, if it is one.
    pub fn act_dtype(self) -> Option<ActDtype> {
        match self {
            ElemType::F16 => Some(ActDtype::F16),
            ElemType::Bf16 => Some(ActDtype::Bf16),
            _ => None,
        }
    }
}

impl From<ActDtype> for ElemType {
    fn from(d: ActDtype) -> Self {
        match d {
            ActDtype::F16 => ElemType::F16,
            ActDtype::Bf16 => ElemType::Bf16,
        }
    }
}

/// Device allocations are at least this aligned (cudaMalloc and hipMalloc give 256 bytes).
pub const ALLOCATION_ALIGN: usize = 256;

/// One tensor as passed to a kernel: a base pointer plus `byte_offset`, read with `shape` and
/// `strides` (in elements), with `bytes_available` bytes behind the base.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorView {
    pub elem: ElemType,
    pub shape: Vec<usize>,
    /// Strides in elements, one per dimension.
    pub strides: Vec<usize>,
    /// Where the tensor starts, in bytes from the base.
    pub byte_offset: usize,
    /// Bytes that exist behind the base (the allocation size from the base on).
    pub bytes_available: usize,
    /// Alignment of the base address in bytes; a fresh device allocation has
    /// [`ALLOCATION_ALIGN`].
    pub base_align: usize,
}

impl TensorView {
    /// A row-major 2-D view `[rows, cols]` with `row_stride` elements between rows, over a
    /// buffer of `bytes_available` bytes.
    pub fn matrix(
        elem: ElemType,
        rows: usize,
        cols: usize,
        row_stride: usize,
        bytes_available: usize,
    ) -> Self {
        TensorView {
            elem,
            shape: vec![rows, cols],
            strides: vec![row_stride, 1],
            byte_offset: 0,
            bytes_available,
            base_align: ALLOCATION_ALIGN,
        }
    }

    /// A contiguous 1-D view.
    pub fn vector(elem: ElemType, len: usize, bytes_available: usize) -> Self {
        TensorView {
            elem,
            shape: vec![len],
            strides: vec![1],
            byte_offset: 0,
            bytes_available,
            base_align: ALLOCATION_ALIGN,
        }
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Bytes the view reads or writes from its first element to its last
    /// (`Σ (shape_i − 1)·stride_i + 1` elements); `None` on overflow, `Some(0)` when empty.
    pub fn extent_bytes(&self) -> Option<usize> {
        if self.shape.contains(&0) {
            return Some(0);
        }
        let mut last = 0usize;
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            last = last.checked_add((d - 1).checked_mul(s)?)?;
        }
        last.checked_add(1)?.checked_mul(self.elem.size_bytes())
    }

    /// Bytes needed behind the base: offset plus extent.
    pub fn required_bytes(&self) -> Option<usize> {
        self.byte_offset.checked_add(self.extent_bytes()?)
    }

    /// The largest power of two that divides the address of the first element.
    pub fn address_align(&self) -> usize {
        let base = self.base_align.max(1);
        if self.byte_offset == 0 {
            base
        } else {
            base.min(1usize << self.byte_offset.trailing_zeros())
        }
    }

    /// Row stride in bytes of a 2-D view.
    pub fn row_stride_bytes(&self) -> Option<usize> {
        self.strides.first().map(|s| s * self.elem.size_bytes())
    }

    pub fn is_contiguous(&self) -> bool {
        let mut expect = 1usize;
        for (&d, &s) in self.shape.iter().zip(&self.strides).rev() {
            if d > 1 && s != expect {
                return false;
            }
            expect = expect.saturating_mul(d);
        }
        true
    }

    /// `dtype [a, b]`, the form error messages use.
    pub fn describe(&self) -> String {
        format!("{} {}", self.elem, fmt_shape(&self.shape))
    }
}

/// `[a, b, c]`.
pub fn fmt_shape(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

/// The output `Y[M, N]` a GEMM launch writes: rows `row_stride` elements apart, the first
/// `offset` elements after the buffer's base (a slice of a larger tensor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct YSpec {
    pub m: usize,
    pub n: usize,
    pub row_stride: usize,
    /// Elements between the buffer's base and `Y[0, 0]`.
    pub offset: usize,
    pub dtype: ActDtype,
}

impl YSpec {
    /// Unpadded `[M, N]` at the start of its buffer.
    pub fn dense(m: usize, n: usize, dtype: ActDtype) -> Self {
        YSpec {
            m,
            n,
            row_stride: n,
            offset: 0,
            dtype,
        }
    }

    /// `[M, N]` with rows `row_stride` apart, starting `offset` elements into its buffer.
    pub fn strided(m: usize, n: usize, row_stride: usize, offset: usize, dtype: ActDtype) -> Self {
        YSpec {
            m,
            n,
            row_stride,
            offset,
            dtype,
        }
    }

    /// Bytes of the smallest buffer that holds this Y, leading offset included.
    pub fn bytes(&self) -> usize {
        self.offset * 2 + strided_bytes(self.m, self.n, self.row_stride, 2)
    }

    pub fn view(&self) -> TensorView {
        TensorView {
            byte_offset: self.offset * 2,
            ..TensorView::matrix(
                self.dtype.into(),
                self.m,
                self.n,
                self.row_stride,
                self.bytes(),
            )
        }
    }
}

/// X as a launch hands it over: the activations' rows `row_stride` elements apart, starting
/// `offset` elements into a host buffer. The leading offset and the gaps between rows hold the
/// dtype's NaN poison, so a kernel that reads outside `[M, K]` poisons its own output. Borrows
/// the activations when they are already laid out that way.
#[derive(Clone, Debug, PartialEq)]
pub struct XBuffer<'a> {
    pub m: usize,
    pub k: usize,
    pub row_stride: usize,
    /// Elements between the buffer's base and `X[0, 0]`.
    pub offset: usize,
    pub dtype: ActDtype,
    /// The whole buffer from its base: `offset + (M−1)·row_stride + K` elements.
    pub host: Cow<'a, [u16]>,
}

impl<'a> XBuffer<'a> {
    /// `x`'s values laid out with `row_stride` (≥ K) and `offset`; `None` when the stride is
    /// shorter than a row.
    pub fn new(x: &'a Activations, row_stride: usize, offset: usize) -> Option<Self> {
        if row_stride < x.k {
            return None;
        }
        if row_stride == x.row_stride && offset == 0 {
            return Some(Self::as_laid_out(x));
        }
        let len = offset + strided_bytes(x.m, x.k, row_stride, 1);
        let mut host = vec![x.dtype.poison_bits(); len];
        for m in 0..x.m {
            let src = &x.data[m * x.row_stride..m * x.row_stride + x.k];
            let at = offset + m * row_stride;
            host[at..at + x.k].copy_from_slice(src);
        }
        Some(XBuffer {
            m: x.m,
            k: x.k,
            row_stride,
            offset,
            dtype: x.dtype,
            host: Cow::Owned(host),
        })
    }

    /// `x` exactly as it is laid out (its own row stride, no offset), borrowed.
    pub fn as_laid_out(x: &'a Activations) -> Self {
        XBuffer {
            m: x.m,
            k: x.k,
            row_stride: x.row_stride,
            offset: 0,
            dtype: x.dtype,
            host: Cow::Borrowed(&x.data),
        }
    }

    pub fn view(&self) -> TensorView {
        Self::planned_view(self.m, self.k, self.row_stride, self.offset, self.dtype)
    }

    /// The view an `XBuffer` of this layout would have, without building it (static checks).
    pub fn planned_view(
        m: usize,
        k: usize,
        row_stride: usize,
        offset: usize,
        dtype: ActDtype,
    ) -> TensorView {
        TensorView {
            byte_offset: offset * 2,
            ..TensorView::matrix(
                dtype.into(),
                m,
                k,
                row_stride,
                (offset + strided_bytes(m, k, row_stride, 1)) * 2,
            )
        }
    }

    /// Element `(m, k)` as stored.
    pub fn get_bits(&self, m: usize, k: usize) -> u16 {
        self.host[self.offset + m * self.row_stride + k]
    }
}

/// The dense dequantized copy `[N, K]` with rows `row_stride` (K_pad) elements apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DenseSpec {
    pub n: usize,
    pub k: usize,
    pub row_stride: usize,
    pub dtype: ActDtype,
}

impl DenseSpec {
    pub fn unpadded(n: usize, k: usize, dtype: ActDtype) -> Self {
        DenseSpec {
            n,
            k,
            row_stride: k,
            dtype,
        }
    }

    /// The cache-cliff padding of docs/contract.md §5: `+128 B` when `K·2` bytes is a multiple of 2048.
    /// The rule is the reference layout's, which the loader lays the cache out by.
    pub fn cache_cliff_padded(n: usize, k: usize, dtype: ActDtype) -> Self {
        debug_assert_eq!(
            dtype.size_bytes(),
            2,
            "the dense cache holds 2-byte elements"
        );
        DenseSpec {
            n,
            k,
            row_stride: w4a16_reference::formats::dense_row_stride_elems(
                k,
                w4a16_reference::formats::PaddingRule::CacheCliff,
            ),
            dtype,
        }
    }

    pub fn bytes(&self) -> usize {
        strided_bytes(self.n, self.k, self.row_stride, 2)
    }

    pub fn view(&self) -> TensorView {
        TensorView::matrix(
            self.dtype.into(),
            self.n,
            self.k,
            self.row_stride,
            self.bytes(),
        )
    }
}

/// `(rows − 1)·stride + cols` elements of `elem_bytes`, 0 when empty.
fn strided_bytes(rows: usize, cols: usize, stride: usize, elem_bytes: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        ((rows - 1) * stride + cols) * elem_bytes
    }
}

/// X from the shared `Activations`.
pub fn activations_view(x: &Activations) -> TensorView {
    TensorView::matrix(x.dtype.into(), x.m, x.k, x.row_stride, x.data.len() * 2)
}

/// The resident int4 weights: `u32 [N, K/8]` when the row stride is whole words, else the same
/// bytes as `u8 [N, K/2]` (a byte stride that u32 strides cannot express).
pub fn weights_view(w: &ResidentWeights) -> TensorView {
    if w.row_stride_bytes.is_multiple_of(4) {
        TensorView::matrix(
            ElemType::U32,
            w.n,
            w.k / 8,
            w.row_stride_bytes / 4,
            w.bytes.len(),
        )
    } else {
        TensorView::matrix(
            ElemType::U8,
            w.n,
            w.k / 2,
            w.row_stride_bytes,
            w.bytes.len(),
        )
    }
}

/// Zero points as the layer carries them: packed `u32 [N/8, K/G]` or the legacy unpacked
/// `[N, K/G]` in the activation dtype.
pub fn zero_points_view(z: &ZeroPoints) -> TensorView {
    match z {
        ZeroPoints::Packed(p) => {
            let rows = p.words.len().checked_div(p.groups).unwrap_or(0);
            TensorView::matrix(ElemType::U32, rows, p.groups, p.groups, p.words.len() * 4)
        }
        ZeroPoints::UnpackedLegacy(u) => {
            TensorView::matrix(u.dtype.into(), u.n, u.groups, u.groups, u.bits.len() * 2)
        }
    }
}

/// The asymmetric carrier `u32 [N, K/G]`, rows K/G words apart (it is never padded).
pub fn carrier_view(c: &Carrier) -> TensorView {
    TensorView::matrix(ElemType::U32, c.n, c.groups, c.groups, c.words.len() * 4)
}

/// The routing sizes of a MoE launch (`moe_align`, `moe`); `LaunchInputs::m` is the tokens `T`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MoeRouting {
    pub top_k: usize,
    /// Global experts: the range of the topk ids and the length of the expert map.
    pub experts: usize,
    /// Experts the stacked weights hold (all of them without an expert map).
    pub experts_local: usize,
    /// Sorted slots per block: `moe_align`'s `block_m`, `moe`'s tile BM.
    pub block_m: usize,
}

impl MoeRouting {
    /// `T·top_k`; `None` on overflow.
    pub fn slots(&self, tokens: usize) -> Option<usize> {
        tokens.checked_mul(self.top_k)
    }

    /// What `moe_align` may write for `tokens` tokens; `None` on overflow or `block_m = 0`.
    pub fn capacity(&self, tokens: usize) -> Option<MoeAlignCapacity> {
        moe_align_capacity(self.slots(tokens)?, self.experts, self.block_m)
    }

    /// The kernels' view of the routing.
    pub fn dims(&self) -> RoutedDims {
        RoutedDims {
            top_k: self.top_k,
            experts: self.experts,
        }
    }
}

/// The stacked expert tensors of a MoE launch as the device holds them (docs/contract.md §4 item 5):
/// weights `[E_local, N, K/8]` u32 with rows `w_row_stride_bytes` apart and experts
/// `N·w_row_stride_bytes` apart, scales `[E_local, N, K/G]` with rows `scale_row_stride` apart and
/// experts `N·scale_row_stride` apart, packed zero points `[E_local, N/8, K/G]` contiguous.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackedSpec {
    pub experts_local: usize,
    pub n: usize,
    pub k: usize,
    pub group: usize,
    pub dtype: ActDtype,
    pub w_row_stride_bytes: usize,
    pub scale_row_stride: usize,
    /// Bytes behind each base (the host buffers' sizes).
    pub weight_bytes: usize,
    pub scale_bytes: usize,
    /// `None`: symmetric (a null zero-point pointer).
    pub zero_bytes: Option<usize>,
}

impl StackedSpec {
    fn groups(&self) -> usize {
        self.k / self.group.max(1)
    }

    /// `u32 [E_local, N, K/8]` when the row stride is whole words, else the same bytes as
    /// `u8 [E_local, N, K/2]`; the expert stride is always N rows.
    pub fn weights_view(&self) -> TensorView {
        let (elem, cols, row) = if self.w_row_stride_bytes.is_multiple_of(4) {
            (ElemType::U32, self.k / 8, self.w_row_stride_bytes / 4)
        } else {
            (ElemType::U8, self.k / 2, self.w_row_stride_bytes)
        };
        stacked(
            elem,
            [self.experts_local, self.n, cols],
            row,
            self.n,
            self.weight_bytes,
        )
    }

    pub fn scales_view(&self) -> TensorView {
        stacked(
            self.dtype.into(),
            [self.experts_local, self.n, self.groups()],
            self.scale_row_stride,
            self.n,
            self.scale_bytes,
        )
    }

    pub fn zeros_view(&self) -> Option<TensorView> {
        let rows = self.n.div_ceil(8);
        self.zero_bytes.map(|bytes| {
            stacked(
                ElemType::U32,
                [self.experts_local, rows, self.groups()],
                self.groups(),
                rows,
                bytes,
            )
        })
    }
}

/// A `[E, rows, cols]` view whose rows are `row_stride` elements apart and whose experts are
/// `expert_rows` rows apart.
fn stacked(
    elem: ElemType,
    shape: [usize; 3],
    row_stride: usize,
    expert_rows: usize,
    bytes_available: usize,
) -> TensorView {
    TensorView {
        elem,
        shape: shape.to_vec(),
        strides: vec![expert_rows.saturating_mul(row_stride), row_stride, 1],
        byte_offset: 0,
        bytes_available,
        base_align: ALLOCATION_ALIGN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extent_counts_strided_rows() {
        let v = TensorView::matrix(ElemType::F16, 3, 10, 16, 1000);
        assert_eq!(v.extent_bytes(), Some((2 * 16 + 10) * 2));
        let empty = TensorView::matrix(ElemType::F16, 0, 10, 16, 0);
        assert_eq!(empty.extent_bytes(), Some(0));
        let huge = TensorView::matrix(ElemType::U32, usize::MAX / 2, 2, usize::MAX / 2, 0);
        assert_eq!(huge.extent_bytes(), None);
    }

    #[test]
    fn address_alignment_follows_offset() {
        let mut v = TensorView::vector(ElemType::U32, 4, 16);
        assert_eq!(v.address_align(), ALLOCATION_ALIGN);
        v.byte_offset = 12;
        assert_eq!(v.address_align(), 4);
        v.byte_offset = 2;
        assert_eq!(v.address_align(), 2);
    }

    #[test]
    fn contiguity() {
        assert!(TensorView::matrix(ElemType::U32, 4, 8, 8, 128).is_contiguous());
        assert!(!TensorView::matrix(ElemType::U32, 4, 8, 9, 140).is_contiguous());
        // a single row is contiguous whatever its row stride says
        assert!(TensorView::matrix(ElemType::U32, 1, 8, 100, 32).is_contiguous());
    }

    #[test]
    fn x_buffer_puts_rows_at_stride_and_offset_with_poisoned_gaps() {
        let x = Activations {
            m: 3,
            k: 4,
            row_stride: 4,
            dtype: ActDtype::F16,
            data: (1..=12).collect(),
        };
        let b = XBuffer::new(&x, 7, 1).unwrap();
        let p = ActDtype::F16.poison_bits();
        assert_eq!(b.host.len(), 1 + 2 * 7 + 4);
        assert_eq!(
            b.host,
            vec![p, 1, 2, 3, 4, p, p, p, 5, 6, 7, 8, p, p, p, 9, 10, 11, 12]
        );
        assert_eq!(b.get_bits(2, 3), 12);
        let v = b.view();
        assert_eq!((v.byte_offset, v.strides[0], v.address_align()), (2, 7, 2));
        assert_eq!(v.required_bytes(), Some(b.host.len() * 2));
        assert!(XBuffer::new(&x, 3, 0).is_none(), "a stride shorter than K");
        let same = XBuffer::new(&x, 4, 0).unwrap();
        assert!(
            matches!(same.host, Cow::Borrowed(_)),
            "no copy when laid out as asked"
        );
        assert_eq!(same.view(), activations_view(&x));
    }

    #[test]
    fn y_spec_offset_moves_the_base_and_the_bytes() {
        let y = YSpec::strided(2, 5, 9, 3, ActDtype::Bf16);
        assert_eq!(y.bytes(), (3 + 9 + 5) * 2);
        let v = y.view();
        assert_eq!((v.byte_offset, v.bytes_available), (6, 34));
        assert_eq!(v.required_bytes(), Some(34));
        assert_eq!(YSpec::dense(2, 5, ActDtype::F16).view().byte_offset, 0);
    }

    #[test]
    fn dense_padding_rule() {
        assert_eq!(
            DenseSpec::cache_cliff_padded(8, 1024, ActDtype::F16).row_stride,
            1024 + 64
        );
        assert_eq!(
            DenseSpec::cache_cliff_padded(8, 1040, ActDtype::F16).row_stride,
            1040
        );
    }
}
