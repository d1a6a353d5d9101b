//! The MoE launch path, written once for every [`Runtime`]: the routing step `moe_align` and the
//! grouped GEMM `moe` on the align step's own device outputs (they never round-trip through the
//! host), with the dense path's conventions: inputs uploaded as their host buffers (at their
//! views' extent under [`Allocation::Exact`]), every output poisoned and inside guard bands, each
//! launch synchronised under the watchdog, the outputs downloaded and their guards checked.
//!
//! A [`MoeLaunch`] is the plain description (host slices, sizes, the tile); only its validation,
//! [`MoeInputs`], reaches a device: both launches checked against their declarations, plus the
//! data rules that need the host values (topk ids within the experts, the expert map a
//! numbering of the local experts).

use std::borrow::Cow;

use w4a16_kernels::decl::LaunchGeometry;
use w4a16_kernels::set::{self, MOE, MOE_ALIGN};
use w4a16_kernels::{KernelDecl, KernelId, TensorRole, Tile};
use w4a16_reference::ActDtype;

use super::{
    Allocation, DeviceFault, GemmOutput, GuardViolation, Health, OutputLayout, OutputReport,
    Runtime,
};
use crate::launch::{PackedArgs, pack_args};
use crate::tensor::{ElemType, LaunchInputs, MoeRouting, StackedSpec, TensorView, XBuffer, YSpec};
use crate::validate::{ContractError, ValidatedLaunch, validate};

/// One MoE layer launch as the host holds it: X, the stacked local experts (device layout:
/// weights `[E_local, N, K/8]` u32 with rows `w_row_stride_bytes` apart and experts N rows apart,
/// scales `[E_local, N, K/G]` with rows `scale_row_stride` apart, packed zero points
/// `[E_local, N/8, K/G]` or none), the router's output `[T, top_k]` (ids, and weights when the
/// routed-weight multiply is wanted), an optional expert map `[E]`, and the tile of `moe` (its BM
/// is the align step's `block_m`; [`MoeLaunch::default_tile`] gives the table's).
#[derive(Clone, Debug)]
pub struct MoeLaunch<'a> {
    pub x: XBuffer<'a>,
    pub weights: &'a [u32],
    pub scales: &'a [u16],
    pub zeros: Option<&'a [u32]>,
    pub w_row_stride_bytes: usize,
    pub scale_row_stride: usize,
    pub topk_ids: &'a [i32],
    pub topk_weights: Option<&'a [f32]>,
    pub expert_map: Option<&'a [i32]>,
    pub tokens: usize,
    pub top_k: usize,
    /// Global experts (the topk ids' range, the expert map's length).
    pub experts: usize,
    /// Experts the stacked tensors hold.
    pub experts_local: usize,
    pub n: usize,
    pub k: usize,
    pub group: usize,
    pub dtype: ActDtype,
    pub tile: Tile,
    /// Where C's rows sit in their buffer; `None`: compact (rows N apart, at the base).
    pub c_placement: Option<RowPlacement>,
}

/// Where the rows of an output sit in its buffer: `row_stride` elements apart (at least the row
/// length), the first `offset` elements after the buffer's base (a slice of a larger tensor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowPlacement {
    pub row_stride: usize,
    pub offset: usize,
}

/// What a MoE launch left on the device: the align step's outputs (whole capacity; entries past
/// the padded length are whatever the kernel left there: poison if it wrote nothing) and C.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeOutput {
    pub sorted_token_ids: Vec<i32>,
    pub expert_ids: Vec<i32>,
    pub num_tokens_post_padded: i32,
    /// C `[T·top_k, N]`, compact; `unwritten` counts the elements of slots in no block.
    pub c: GemmOutput,
    /// Writes into the guard bands of the align step's outputs.
    pub align_guard_violations: Vec<(TensorRole, GuardViolation)>,
    /// What the align outputs held before the step ran (entries it must not write keep it).
    pub align_poison: AlignPoison,
}

/// The align step's outputs alone ([`super::Device::run_moe_align`]).
#[derive(Clone, Debug, PartialEq)]
pub struct AlignOutput {
    pub sorted_token_ids: Vec<i32>,
    pub expert_ids: Vec<i32>,
    pub num_tokens_post_padded: i32,
    pub guard_violations: Vec<(TensorRole, GuardViolation)>,
}

/// The i32 `num_tokens_post_padded` starts as (negative: a `moe` that reads it unwritten runs no
/// block, and C shows every row unwritten).
pub const ALIGN_POISON: i32 = 0xBEEF_BEEF_u32 as i32;

/// The `expert_ids` poison: positive and past every expert, so a `moe` block that reads an entry
/// the align step did not write (a block at or past `num_tokens_post_padded / block_m`) offsets
/// its weights about 10¹³ bytes past the stacked tensor and faults, on every device and under
/// every memory check, instead of passing as an expert mapped away (a negative id would).
pub const EXPERT_ID_POISON: i32 = 0x4EEF_4EEF;

/// What each align output holds before `moe_align` runs: entries past `num_tokens_post_padded`
/// (and `expert_ids` past its last block) must still hold it afterwards
/// (docs/moe.md "The align outputs' tails").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlignPoison {
    /// Every `sorted_token_ids` entry: the last real slot `T·top_k − 1`, so a block that reads
    /// past the padded length computes a real row (it shows in C) instead of skipping padding.
    pub sorted_token_id: i32,
    /// Every `expert_ids` entry: [`EXPERT_ID_POISON`].
    pub expert_id: i32,
    /// `num_tokens_post_padded`: [`ALIGN_POISON`].
    pub tokens_post_padded: i32,
}

impl AlignPoison {
    /// The poison of a launch of `slots` slots (at least one: validation refuses none).
    pub fn for_slots(slots: usize) -> AlignPoison {
        AlignPoison {
            sorted_token_id: i32::try_from(slots.saturating_sub(1)).unwrap_or(i32::MAX),
            expert_id: EXPERT_ID_POISON,
            tokens_post_padded: ALIGN_POISON,
        }
    }

    fn of(&self, role: TensorRole) -> i32 {
        match role {
            TensorRole::SortedTokenIds => self.sorted_token_id,
            TensorRole::ExpertIds => self.expert_id,
            _ => self.tokens_post_padded,
        }
    }
}

impl MoeLaunch<'_> {
    /// The tile `moe` takes on `target` for this launch's sizes (the tables of
    /// `w4a16_kernels::tiles::moe_tile`).
    pub fn default_tile(&self, target: w4a16_kernels::Target) -> Tile {
        w4a16_kernels::tiles::moe_tile(
            target,
            self.dtype,
            self.tokens,
            self.top_k,
            self.experts,
            self.n,
            self.k,
            self.group,
        )
    }

    pub fn routing(&self) -> MoeRouting {
        MoeRouting {
            top_k: self.top_k,
            experts: self.experts,
            experts_local: self.experts_local,
            block_m: self.tile.bm as usize,
        }
    }

    /// The stacked experts as views over the host slices.
    pub fn stacked(&self) -> StackedSpec {
        StackedSpec {
            experts_local: self.experts_local,
            n: self.n,
            k: self.k,
            group: self.group,
            dtype: self.dtype,
            w_row_stride_bytes: self.w_row_stride_bytes,
            scale_row_stride: self.scale_row_stride,
            weight_bytes: std::mem::size_of_val(self.weights),
            scale_bytes: std::mem::size_of_val(self.scales),
            zero_bytes: self.zeros.map(<[u32]>::len).map(|l| l * 4),
        }
    }

    /// C `[T·top_k, N]` where [`Self::c_placement`] puts it.
    pub fn c_spec(&self) -> YSpec {
        let slots = self.tokens.saturating_mul(self.top_k);
        match self.c_placement {
            None => YSpec::dense(slots, self.n, self.dtype),
            Some(p) => YSpec::strided(slots, self.n, p.row_stride, p.offset, self.dtype),
        }
    }

    /// What the align outputs start as.
    pub fn align_poison(&self) -> AlignPoison {
        AlignPoison::for_slots(self.tokens.saturating_mul(self.top_k))
    }

    /// The launch of `moe_align`, its routing tensors sized by the host slices.
    pub fn align_inputs(&self) -> LaunchInputs {
        let mut li = LaunchInputs::moe_align(
            self.tokens,
            self.routing(),
            self.expert_map.is_some(),
            self.dtype,
        );
        with_bytes(&mut li.topk_ids, std::mem::size_of_val(self.topk_ids));
        if let Some(m) = self.expert_map {
            with_bytes(&mut li.expert_map, std::mem::size_of_val(m));
        }
        li
    }

    /// The launch of `moe` (X as its buffer lays it out).
    pub fn moe_inputs(&self) -> LaunchInputs {
        let mut li = LaunchInputs::moe(
            self.x.view(),
            &self.stacked(),
            self.routing(),
            self.topk_weights.is_some(),
            &self.c_spec(),
        );
        if let Some(w) = self.topk_weights {
            with_bytes(&mut li.topk_weights, std::mem::size_of_val(w));
        }
        li
    }

    /// Both launches against their declarations, and the data rules: the tile one of `moe`'s
    /// compiled variants, X of `tokens` rows of K in the launch's dtype, every topk id a global
    /// expert, and the expert map (or its absence) numbering exactly the local experts.
    pub fn validate(&self) -> Result<MoeInputs<'_>, ContractError> {
        if !MOE.variants.contains(&self.tile) {
            let compiled: Vec<String> = MOE
                .variants
                .iter()
                .map(|t| format!("{}x{}x{}w{}", t.bm, t.bn, t.bk, t.warps))
                .collect();
            return Err(ContractError::TileNotCompiled {
                kernel: KernelId::Moe,
                tile: self.tile,
                compiled: compiled.join(", "),
            });
        }
        let x = TensorRole::X.name();
        if self.x.dtype != self.dtype {
            return Err(ContractError::Dtype {
                tensor: x,
                expected: format!("{} (the launch's dtype)", ElemType::from(self.dtype)),
                got: self.x.dtype.into(),
            });
        }
        if (self.x.m, self.x.k) != (self.tokens, self.k) {
            return Err(ContractError::Shape {
                tensor: x,
                formula: "[T, K]",
                expected: vec![self.tokens, self.k],
                got: vec![self.x.m, self.x.k],
            });
        }
        let align_inputs = self.align_inputs();
        let align = validate(&MOE_ALIGN, &align_inputs)?;
        let moe_inputs = self.moe_inputs();
        let moe = validate(&MOE, &moe_inputs)?;
        self.check_routing_data()?;
        Ok(MoeInputs {
            launch: self,
            align,
            align_inputs,
            moe,
            moe_inputs,
        })
    }

    /// The rules on values: the kernels index with them.
    fn check_routing_data(&self) -> Result<(), ContractError> {
        let slots = self.tokens * self.top_k;
        if let Some((index, &id)) = self.topk_ids[..slots]
            .iter()
            .enumerate()
            .find(|(_, id)| !(0..self.experts as i64).contains(&i64::from(**id)))
        {
            return Err(ContractError::TopkIdOutOfRange {
                index,
                id: i64::from(id),
                experts: self.experts,
            });
        }
        let local = self.experts_local;
        let Some(map) = self.expert_map else {
            // Without a map every global expert is held here.
            if local != self.experts {
                return Err(ContractError::ExpertMapCount {
                    mapped: self.experts,
                    local,
                });
            }
            return Ok(());
        };
        let mut seen = vec![false; local];
        for (index, &value) in map[..self.experts].iter().enumerate() {
            if value == -1 {
                continue;
            }
            let fresh = usize::try_from(value)
                .ok()
                .filter(|v| *v < local)
                .is_some_and(|v| !std::mem::replace(&mut seen[v], true));
            if !fresh {
                return Err(ContractError::ExpertMapEntry {
                    index,
                    value: i64::from(value),
                    local,
                });
            }
        }
        let mapped = seen.iter().filter(|s| **s).count();
        if mapped != local {
            return Err(ContractError::ExpertMapCount { mapped, local });
        }
        Ok(())
    }
}

fn with_bytes(view: &mut Option<TensorView>, bytes: usize) {
    if let Some(v) = view {
        v.bytes_available = bytes;
    }
}

/// A [`MoeLaunch`] that passed validation: the only thing [`super::Device::run_moe`] takes.
#[derive(Clone, Debug)]
pub struct MoeInputs<'a> {
    launch: &'a MoeLaunch<'a>,
    align: ValidatedLaunch,
    align_inputs: LaunchInputs,
    moe: ValidatedLaunch,
    moe_inputs: LaunchInputs,
}

impl<'a> MoeInputs<'a> {
    pub fn launch(&self) -> &MoeLaunch<'a> {
        self.launch
    }

    pub fn align(&self) -> &ValidatedLaunch {
        &self.align
    }

    pub fn moe(&self) -> &ValidatedLaunch {
        &self.moe
    }

    /// The entry of `moe` this launch runs: its tile's variant.
    pub fn moe_entry(&self) -> String {
        MOE.variant_entry(self.launch.dtype, self.launch.tile)
    }

    /// `moe`'s grid for its tile (blocks past the padded length exit at once).
    pub fn moe_geometry(&self) -> LaunchGeometry {
        set::moe_geometry_for(&self.moe.shape, self.launch.tile)
    }

    /// Host bytes of every input tensor of both launches, little-endian.
    fn host_inputs(&self) -> Vec<(TensorRole, Cow<'a, [u8]>)> {
        let l = self.launch;
        let u32s = |v: &[u32]| v.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
        let i32s = |v: &[i32]| v.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
        let mut out = vec![
            (TensorRole::TopkIds, Cow::Owned(i32s(l.topk_ids))),
            (
                TensorRole::X,
                Cow::Owned(l.x.host.iter().flat_map(|h| h.to_le_bytes()).collect()),
            ),
            (TensorRole::Weights, Cow::Owned(u32s(l.weights))),
            (
                TensorRole::Scales,
                Cow::Owned(l.scales.iter().flat_map(|h| h.to_le_bytes()).collect()),
            ),
        ];
        if let Some(m) = l.expert_map {
            out.push((TensorRole::ExpertMap, Cow::Owned(i32s(m))));
        }
        if let Some(z) = l.zeros {
            out.push((TensorRole::Zeros, Cow::Owned(u32s(z))));
        }
        if let Some(w) = l.topk_weights {
            out.push((
                TensorRole::TopkWeights,
                Cow::Owned(w.iter().flat_map(|f| f.to_le_bytes()).collect()),
            ));
        }
        out
    }

    /// The view of `role` in whichever launch has it.
    fn view(&self, role: TensorRole) -> Option<&TensorView> {
        self.align_inputs
            .view(role)
            .or_else(|| self.moe_inputs.view(role))
    }
}

/// The align step's three outputs.
const ALIGN_OUTPUTS: [TensorRole; 3] = [
    TensorRole::SortedTokenIds,
    TensorRole::ExpertIds,
    TensorRole::TokensPostPadded,
];

/// One poisoned, guarded output buffer and where its tensor sits in it.
struct Output<R: Runtime> {
    role: TensorRole,
    buffer: R::Buffer,
    layout: OutputLayout,
}

/// The layout of an i32 vector output: as u16 pairs, every one logical.
fn int_layout(view: &TensorView, allocation: Allocation) -> OutputLayout {
    let halves = view.shape.first().copied().unwrap_or(0) * 2;
    let as_u16 = TensorView::matrix(ElemType::F16, 1, halves, halves, view.bytes_available);
    // The u16 poison only marks the payload's padding; the i32 poison fills every entry.
    let poison = ALIGN_POISON as u32 as u16;
    match allocation {
        Allocation::Guarded => OutputLayout::for_view(&as_u16, poison),
        Allocation::Exact => OutputLayout::exact_for_view(&as_u16, poison),
    }
}

/// The bytes an i32 output starts as: guards, and `value` in every entry.
fn int_initial_bytes(layout: &OutputLayout, value: i32) -> Vec<u8> {
    let [lo, hi] = [value as u32 as u16, (value as u32 >> 16) as u16];
    layout.initial_bytes_with(|_, c| Some(if c % 2 == 0 { lo } else { hi }))
}

/// The i32 values of an int output, read back from its report.
fn ints(report: &OutputReport) -> Vec<i32> {
    report
        .bits
        .chunks_exact(2)
        .map(|p| (u32::from(p[0]) | (u32::from(p[1]) << 16)) as i32)
        .collect()
}

fn output<R: Runtime>(
    b: &R,
    role: TensorRole,
    layout: OutputLayout,
) -> Result<Output<R>, DeviceFault> {
    let init = layout.initial_bytes();
    output_from(b, role, layout, &init)
}

fn output_from<R: Runtime>(
    b: &R,
    role: TensorRole,
    layout: OutputLayout,
    init: &[u8],
) -> Result<Output<R>, DeviceFault> {
    let mut buffer = b.alloc(init.len().max(1))?;
    b.upload_poison(&mut buffer, init)?;
    Ok(Output {
        role,
        buffer,
        layout,
    })
}

/// Everything staged on the device for one MoE launch.
struct Staged<R: Runtime> {
    inputs: Vec<(TensorRole, R::Buffer)>,
    align: Vec<Output<R>>,
}

impl<R: Runtime> Staged<R> {
    /// The device address of `role`'s tensor: an uploaded input, or an align output past its
    /// guard band.
    fn address(&self, b: &R, role: TensorRole) -> Option<u64> {
        self.inputs
            .iter()
            .find(|(r, _)| *r == role)
            .map(|(_, buf)| b.address(buf))
            .or_else(|| {
                self.align
                    .iter()
                    .find(|o| o.role == role)
                    .map(|o| b.address(&o.buffer) + o.layout.base_offset() as u64)
            })
    }
}

fn check_ready<R: Runtime>(b: &R) -> Result<(), DeviceFault> {
    if let Health::Lost { cause } = b.health() {
        return Err(DeviceFault::ContextLost { cause });
    }
    Ok(())
}

/// Uploads the inputs of both launches and the poisoned align outputs.
fn stage<R: Runtime>(b: &R, inputs: &MoeInputs<'_>) -> Result<Staged<R>, DeviceFault> {
    let allocation = b.allocation();
    let mut staged = Vec::new();
    for (role, bytes) in inputs.host_inputs() {
        let len = match allocation {
            Allocation::Guarded => bytes.len(),
            Allocation::Exact => inputs
                .view(role)
                .and_then(TensorView::required_bytes)
                .map_or(bytes.len(), |r| r.min(bytes.len())),
        };
        let mut buf = b.alloc(len.max(1))?;
        b.upload(&mut buf, &bytes[..len])?;
        staged.push((role, buf));
    }
    let mut align = Vec::new();
    for role in ALIGN_OUTPUTS {
        let view = inputs
            .align_inputs
            .view(role)
            .ok_or_else(|| DeviceFault::Unsupported {
                what: format!("a moe_align launch without {}", role.name()),
                device: b.name(),
            })?;
        let layout = int_layout(view, allocation);
        let init = int_initial_bytes(&layout, inputs.launch.align_poison().of(role));
        align.push(output_from(b, role, layout, &init)?);
    }
    Ok(Staged {
        inputs: staged,
        align,
    })
}

fn packed<R: Runtime>(
    b: &R,
    kernel: &KernelDecl,
    validated: &ValidatedLaunch,
    address: &dyn Fn(TensorRole) -> Option<u64>,
) -> Result<PackedArgs, DeviceFault> {
    let missing = std::cell::Cell::new(None);
    let args = pack_args(kernel, validated, &|role| {
        address(role).unwrap_or_else(|| {
            missing.set(Some(role));
            0
        })
    })
    .map_err(|_| DeviceFault::WrongKernel {
        kernel: kernel.id,
        validated: validated.kernel,
    })?;
    match missing.get() {
        Some(role) => Err(DeviceFault::Unsupported {
            what: format!("a {} launch without a staged {}", kernel.id, role.name()),
            device: b.name(),
        }),
        None => Ok(args),
    }
}

/// Launches `moe_align` on staged inputs, synchronises and reads its outputs back.
fn align_on_device<R: Runtime>(
    b: &R,
    inputs: &MoeInputs<'_>,
    s: &Staged<R>,
) -> Result<AlignOutput, DeviceFault> {
    let args = packed(b, &MOE_ALIGN, &inputs.align, &|role| s.address(b, role))?;
    let shape = &inputs.align.shape;
    let entry = MOE_ALIGN.launch_entry(shape, b.target());
    b.launch(
        &MOE_ALIGN,
        &entry,
        &(MOE_ALIGN.geometry)(shape, b.target()),
        &args,
    )?;
    b.synchronize(&format!("{entry} ({})", KernelId::MoeAlign))?;
    let mut values = Vec::new();
    let mut guard_violations = Vec::new();
    for o in &s.align {
        let report = o.layout.inspect(&b.download(&o.buffer)?);
        guard_violations.extend(report.guard_violations.iter().map(|g| (o.role, *g)));
        values.push(ints(&report));
    }
    let ntpp = values[2].first().copied().unwrap_or(ALIGN_POISON);
    let expert_ids = values.remove(1);
    Ok(AlignOutput {
        sorted_token_ids: values.remove(0),
        expert_ids,
        num_tokens_post_padded: ntpp,
        guard_violations,
    })
}

/// [`super::Device::run_moe_align`] for every backend.
pub(crate) fn run_moe_align<R: Runtime>(
    b: &R,
    inputs: &MoeInputs<'_>,
) -> Result<AlignOutput, DeviceFault> {
    check_ready(b)?;
    let staged = stage(b, inputs)?;
    align_on_device(b, inputs, &staged)
}

/// [`super::Device::run_moe`] for every backend: align, then `moe` on the align step's device
/// buffers, then C read back through its guards.
pub(crate) fn run_moe<R: Runtime>(b: &R, inputs: &MoeInputs<'_>) -> Result<MoeOutput, DeviceFault> {
    check_ready(b)?;
    let staged = stage(b, inputs)?;
    let aligned = align_on_device(b, inputs, &staged)?;

    let c_view = inputs
        .moe_inputs
        .view(TensorRole::Y)
        .ok_or_else(|| DeviceFault::Unsupported {
            what: "a moe launch without C".into(),
            device: b.name(),
        })?;
    let poison = inputs.launch.dtype.poison_bits();
    let layout = match b.allocation() {
        Allocation::Guarded => OutputLayout::for_view(c_view, poison),
        Allocation::Exact => OutputLayout::exact_for_view(c_view, poison),
    };
    let c = output(b, TensorRole::Y, layout)?;
    let c_base = b.address(&c.buffer) + c.layout.base_offset() as u64;
    let args = packed(b, &MOE, &inputs.moe, &|role| {
        if role == TensorRole::Y {
            Some(c_base)
        } else {
            staged.address(b, role)
        }
    })?;
    let entry = inputs.moe_entry();
    b.launch(&MOE, &entry, &inputs.moe_geometry(), &args)?;
    b.synchronize(&format!("{entry} ({})", KernelId::Moe))?;
    let report = c.layout.inspect(&b.download(&c.buffer)?);
    let slots = inputs.launch.tokens * inputs.launch.top_k;
    Ok(MoeOutput {
        sorted_token_ids: aligned.sorted_token_ids,
        expert_ids: aligned.expert_ids,
        num_tokens_post_padded: aligned.num_tokens_post_padded,
        c: GemmOutput::from_report(slots, inputs.launch.n, report),
        align_guard_violations: aligned.guard_violations,
        align_poison: inputs.launch.align_poison(),
    })
}

/// Device times of the MoE pipeline, each the median of its own timed launches.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeTiming {
    pub align: super::Timing,
    pub gemm: super::Timing,
    /// Both launches back to back, as the engine issues them.
    pub pipeline: super::Timing,
}

/// One copy of a MoE launch staged for timing: its buffers (alive while the timing runs), the
/// packed arguments of both launches and where they go.
struct TimedCopy<R: Runtime> {
    _staged: Staged<R>,
    _c: Output<R>,
    align_args: PackedArgs,
    moe_args: PackedArgs,
    align_entry: String,
    align_geometry: LaunchGeometry,
    moe_entry: String,
    moe_geometry: LaunchGeometry,
}

fn timed_copy<R: Runtime>(b: &R, inputs: &MoeInputs<'_>) -> Result<TimedCopy<R>, DeviceFault> {
    let staged = stage(b, inputs)?;
    // One checked run first: a pipeline that faults is not timed.
    align_on_device(b, inputs, &staged)?;
    let c_view = inputs
        .moe_inputs
        .view(TensorRole::Y)
        .ok_or_else(|| DeviceFault::Unsupported {
            what: "a moe launch without C".into(),
            device: b.name(),
        })?;
    let layout = OutputLayout::for_view(c_view, inputs.launch.dtype.poison_bits());
    let c = output(b, TensorRole::Y, layout)?;
    let c_base = b.address(&c.buffer) + c.layout.base_offset() as u64;
    let moe_args = packed(b, &MOE, &inputs.moe, &|role| {
        if role == TensorRole::Y {
            Some(c_base)
        } else {
            staged.address(b, role)
        }
    })?;
    let align_args = packed(b, &MOE_ALIGN, &inputs.align, &|role| {
        staged.address(b, role)
    })?;
    let shape = &inputs.align.shape;
    Ok(TimedCopy {
        align_entry: MOE_ALIGN.launch_entry(shape, b.target()),
        align_geometry: (MOE_ALIGN.geometry)(shape, b.target()),
        moe_entry: inputs.moe_entry(),
        moe_geometry: inputs.moe_geometry(),
        _staged: staged,
        _c: c,
        align_args,
        moe_args,
    })
}

impl<R: Runtime> TimedCopy<R> {
    fn align(&self, b: &R) -> Result<(), DeviceFault> {
        b.launch(
            &MOE_ALIGN,
            &self.align_entry,
            &self.align_geometry,
            &self.align_args,
        )
    }

    fn gemm(&self, b: &R) -> Result<(), DeviceFault> {
        b.launch(&MOE, &self.moe_entry, &self.moe_geometry, &self.moe_args)
    }
}

/// [`super::DeviceBench::bench_moe`] for every backend: every copy staged once; sample `i` runs copy
/// `i % copies.len()`, whose `moe` reads the align outputs its own align step rewrites (the
/// same each time: the step is deterministic).
pub(crate) fn time_moe<R: Runtime>(
    b: &R,
    copies: &[MoeInputs<'_>],
    plan: super::BenchPlan,
) -> Result<MoeTiming, DeviceFault> {
    check_ready(b)?;
    let timed = copies
        .iter()
        .map(|c| timed_copy(b, c))
        .collect::<Result<Vec<_>, _>>()?;
    let first = timed.first().ok_or_else(|| DeviceFault::Unsupported {
        what: "a MoE benchmark over no copies".into(),
        device: b.name(),
    })?;
    let pick = |i: usize| &timed[i % timed.len()];
    let what = |s: &str| format!("benchmark of {s}");
    Ok(MoeTiming {
        align: crate::timing::bench(b, plan, &what(&first.align_entry), &mut |i| {
            pick(i).align(b)
        })?,
        gemm: crate::timing::bench(b, plan, &what(&first.moe_entry), &mut |i| pick(i).gemm(b))?,
        pipeline: crate::timing::bench(
            b,
            plan,
            &what(&format!("{} + {}", first.align_entry, first.moe_entry)),
            &mut |i| {
                pick(i).align(b)?;
                pick(i).gemm(b)
            },
        )?,
    })
}

#[cfg(test)]
pub(crate) mod fixture;

#[cfg(test)]
mod tests;
