//! The declaration types. Each kernel is declared once, in `set/` (`set/mod.rs`).

use crate::target::Target;
use w4a16_reference::{ActDtype, NumericRecipe};

w4a16_reference::named_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum KernelId {
        Skinny = "skinny",
        Fused = "fused",
        Dequant = "dequant",
        Dense = "dense",
        Fallback = "fallback",
        /// The routing step of `moe`: slots grouped by expert, padded to the block size.
        MoeAlign = "moe_align",
        /// The grouped (mixture-of-experts) GEMM on `moe_align`'s blocks.
        Moe = "moe",
        /// `fused` reading the asymmetric carrier in place of scales and zero points.
        FusedCarrier = "fused_carrier",
    }
}

impl KernelId {
    /// Splits an entry-point name `w4a16_<kernel>_<f16|bf16>[_<variant>]` into its kernel, dtype
    /// and tile variant. Kernel names may hold underscores (`moe_align`, `fused_carrier`), so
    /// every kernel name is tried as the prefix; only one followed by a dtype counts, and of
    /// those the longest name wins (`w4a16_moe_align_f16` is `moe_align`, not `moe`).
    pub fn split_entry(entry: &str) -> Option<(KernelId, ActDtype, Option<&str>)> {
        let rest = entry.strip_prefix("w4a16_")?;
        KernelId::ALL
            .into_iter()
            .filter_map(|kernel| {
                let after = rest.strip_prefix(kernel.name())?.strip_prefix('_')?;
                let (dtype, variant) = match after.split_once('_') {
                    Some((d, v)) => (d, Some(v)),
                    None => (after, None),
                };
                // The entry's spelling is the name, never an alias.
                let dtype = ActDtype::ALL.into_iter().find(|d| d.name() == dtype)?;
                Some((kernel, dtype, variant))
            })
            .max_by_key(|(kernel, _, _)| kernel.name().len())
    }
}

/// The tensors a kernel reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorRole {
    /// `X[M, K]`, activation dtype.
    X,
    /// Resident int4 weights `[N, K/8]` u32.
    Weights,
    /// `[N, K/G]`, activation dtype.
    Scales,
    /// Packed `[N/8, K/G]` u32 (`[ceil(N/8), K/G]` for N % 8 != 0, where the contract allows
    /// it); null for symmetric layers.
    Zeros,
    /// `[N]`, activation dtype; null when absent.
    Bias,
    /// `Y[M, N]`, activation dtype.
    Y,
    /// Dense dequantized copy `[N, K_pad]`, activation dtype.
    Dense,
    /// The router's choice per token, `[T, top_k]` i32 global expert ids.
    TopkIds,
    /// The router's weight per token and choice, `[T, top_k]` f32; null: no routed-weight multiply.
    TopkWeights,
    /// Local id of each global expert, `[E]` i32, −1 for experts not held here; null: all local.
    ExpertMap,
    /// Slots grouped by expert, each run padded with the sentinel `T·top_k`, `[capacity]` i32.
    SortedTokenIds,
    /// Local expert id of each block of `block_m` sorted slots (−1: not local), i32.
    ExpertIds,
    /// The padded length of the sorted slots, one i32.
    TokensPostPadded,
    /// The asymmetric carrier `[N, K/G]` u32 (fused_carrier): scale bits low, fp16 `bias_eff` or
    /// the raw z high; rows `K/G` words apart, never padded.
    Carrier,
}

impl TensorRole {
    pub fn name(self) -> &'static str {
        match self {
            TensorRole::X => "x",
            TensorRole::Weights => "weights",
            TensorRole::Scales => "scales",
            TensorRole::Zeros => "zero points",
            TensorRole::Bias => "bias",
            TensorRole::Y => "y",
            TensorRole::Dense => "dense weights",
            TensorRole::TopkIds => "topk ids",
            TensorRole::TopkWeights => "topk weights",
            TensorRole::ExpertMap => "expert map",
            TensorRole::SortedTokenIds => "sorted token ids",
            TensorRole::ExpertIds => "expert ids",
            TensorRole::TokensPostPadded => "num tokens post padded",
            TensorRole::Carrier => "carrier",
        }
    }
}

/// 32-bit integer launch arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarArg {
    M,
    N,
    K,
    Group,
    /// Elements between rows of X.
    XRowStride,
    /// Bytes between rows of the int4 weights.
    WeightRowStrideBytes,
    /// Elements between rows of the scales.
    ScaleRowStride,
    /// Elements between rows of Y.
    YRowStride,
    /// Elements between rows of the dense copy.
    DenseRowStride,
    /// `T·top_k`: the slots of a MoE launch (`num_valid_tokens`); also the padding sentinel.
    Slots,
    /// Experts each token is routed to.
    TopK,
    /// Global experts (the length of the expert map, the range of the topk ids).
    Experts,
    /// Sorted slots per block of `moe` (its tile's BM).
    BlockM,
    /// Entries of `sorted_token_ids` the launch may write (`moe_align_capacity`).
    SortedCapacity,
    /// Words between rows of the carrier (always K/G).
    CarrierRowStride,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgKind {
    /// A device pointer (8 bytes).
    Pointer {
        role: TensorRole,
        writes: bool,
        nullable: bool,
    },
    /// A 32-bit signed integer.
    I32(ScalarArg),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArgDecl {
    /// The parameter name in the HIP source.
    pub name: &'static str,
    pub kind: ArgKind,
}

impl ArgDecl {
    pub fn size(&self) -> usize {
        match self.kind {
            ArgKind::Pointer { .. } => 8,
            ArgKind::I32(_) => 4,
        }
    }

    pub fn is_pointer(&self) -> bool {
        matches!(self.kind, ArgKind::Pointer { .. })
    }
}

/// Byte offsets of each argument in the kernel-argument buffer (natural alignment, as clang and
/// nvcc lay out `__global__` parameters).
pub fn arg_offsets(args: &[ArgDecl]) -> (Vec<usize>, usize) {
    let mut off = 0usize;
    let mut out = Vec::with_capacity(args.len());
    for a in args {
        let sz = a.size();
        off = off.next_multiple_of(sz);
        out.push(off);
        off += sz;
    }
    (out, off)
}

/// Which group sizes a kernel accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupRule {
    /// Exactly these sizes (the fast path: 32, 64, 128).
    OneOf(&'static [usize]),
    /// Any G with K % G == 0 and G % 8 == 0, channelwise (G = K) included.
    AnyDividingK,
}

/// The row layouts of an activation-dtype matrix (X or Y) a kernel accepts: every row must
/// start at an address aligned to `base_align_bytes`, which holds for every row when the first
/// row is aligned and the row stride is a multiple of `row_stride_multiple` elements. Kernels
/// that pick vector loads at run time and fall back to element accesses accept any element
/// alignment (`ELEMENT`); a kernel that vectorises unconditionally must declare the alignment
/// its vectors need, and validation then refuses the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowLayoutRule {
    /// The row stride must be a multiple of this many elements.
    pub row_stride_multiple: usize,
    /// The first element must sit at an address aligned to this many bytes.
    pub base_align_bytes: usize,
}

impl RowLayoutRule {
    /// Any row stride (≥ the row length) and any base the 2-byte element type allows.
    pub const ELEMENT: RowLayoutRule = RowLayoutRule {
        row_stride_multiple: 1,
        base_align_bytes: 2,
    };

    /// Whether rows `row_stride` elements apart, the first `offset` elements after a base
    /// aligned to at least `base_align_bytes`, meet this rule (2-byte elements): what launch
    /// validation checks on the real addresses, decidable before any buffer exists.
    pub fn admits(self, rows: usize, row_stride: usize, offset: usize) -> bool {
        let stride_ok = rows <= 1 || row_stride.is_multiple_of(self.row_stride_multiple.max(1));
        stride_ok && (offset * 2).is_multiple_of(self.base_align_bytes.max(2))
    }
}

/// The tensor contract a kernel declares; validation at the launch boundary reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContractDecl {
    pub groups: GroupRule,
    /// Smallest and largest M (inclusive); `None` = unbounded.
    pub m_min: usize,
    pub m_max: Option<usize>,
    /// K must be a multiple of this.
    pub k_multiple: usize,
    /// Weight row stride must be a multiple of this many bytes.
    pub weight_row_align_bytes: usize,
    /// Zero points must be packed u32 `[N/8, K/G]` (all kernels of the set).
    pub packed_zero_points: bool,
    /// Packed zero points may have a partial last word: N % 8 != 0, `[ceil(N/8), K/G]` (how
    /// compressed-tensors stores them). Only a kernel that reads row n's zero point from word
    /// `(n/8)·(K/G) + g` for n < N alone, whatever its tiles, declares this; the others refuse
    /// N % 8 != 0 when zero points are packed.
    pub packed_zero_points_any_n: bool,
    /// Device pointers of every tensor but X and Y must be aligned to this many bytes.
    pub pointer_align_bytes: usize,
    /// Row layouts of X the kernel accepts (`None`: it takes no X).
    pub x_rows: Option<RowLayoutRule>,
    /// Row layouts of Y the kernel accepts (`None`: it writes no Y).
    pub y_rows: Option<RowLayoutRule>,
}

impl ContractDecl {
    /// The declared row layout rule of X or Y; `None` for other tensors and absent ones.
    pub fn row_layout(&self, role: TensorRole) -> Option<RowLayoutRule> {
        match role {
            TensorRole::X => self.x_rows,
            TensorRole::Y => self.y_rows,
            _ => None,
        }
    }
}

/// Grid and block of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LaunchGeometry {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem_bytes: u32,
}

/// The routing of a MoE launch: `m` tokens, each sent to `top_k` of `experts` (global) experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RoutedDims {
    pub top_k: usize,
    pub experts: usize,
}

/// The problem a launch is for (logical sizes and run-time strides).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    /// Rows of X (tokens `T` for the MoE kernels).
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub group: usize,
    pub dtype: ActDtype,
    pub asymmetric: bool,
    /// `Some` for `moe_align` and `moe`; `None` for every dense-layer kernel.
    pub routing: Option<RoutedDims>,
}

/// One tile of the fused kernel: (BM, BN, BK) and the number of warps/waves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Tile {
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    pub warps: u32,
}

/// One kernel, declared once.
#[derive(Clone, Copy)]
pub struct KernelDecl {
    pub id: KernelId,
    /// File under `kernels/hip/`; `None` for the vendor-BLAS `dense` path.
    pub source_file: Option<&'static str>,
    /// `extern "C"` entry point per activation dtype.
    pub entry_point: fn(ActDtype) -> &'static str,
    pub args: &'static [ArgDecl],
    pub contract: ContractDecl,
    pub recipe: fn(ActDtype) -> NumericRecipe,
    pub geometry: fn(&LaunchShape, Target) -> LaunchGeometry,
    /// Tile variants compiled as separate entry points (`fused`); empty for single-entry kernels.
    pub variants: &'static [Tile],
    /// The variant a launch uses; `geometry` follows the same choice. `None` for single-entry
    /// kernels.
    pub tile: Option<fn(&LaunchShape, Target) -> Tile>,
}

impl KernelDecl {
    /// Entry point of one compiled tile variant: `w4a16_<kernel>_<dtype>_<BM>x<BN>x<BK>w<warps>`.
    pub fn variant_entry(&self, dtype: ActDtype, tile: Tile) -> String {
        format!(
            "{}_{}x{}x{}w{}",
            (self.entry_point)(dtype),
            tile.bm,
            tile.bn,
            tile.bk,
            tile.warps
        )
    }

    /// Every entry point the source defines for `dtype`: the plain one, then one per variant.
    pub fn entries(&self, dtype: ActDtype) -> Vec<String> {
        let mut out = vec![(self.entry_point)(dtype).to_owned()];
        out.extend(self.variants.iter().map(|t| self.variant_entry(dtype, *t)));
        out
    }

    /// The entry point to launch for `shape` on `target` (the chosen variant where there are
    /// variants); launch it with `(self.geometry)(shape, target)`.
    pub fn launch_entry(&self, shape: &LaunchShape, target: Target) -> String {
        match self.tile {
            Some(pick) => self.variant_entry(shape.dtype, pick(shape, target)),
            None => (self.entry_point)(shape.dtype).to_owned(),
        }
    }
}

impl std::fmt::Debug for KernelDecl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelDecl")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
