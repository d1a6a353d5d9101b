//! The MoE pipeline on any [`Backend`]: `moe_align` then `moe` on the device's own alignment
//! (the align outputs stay in device memory and feed the GEMM, as in the engine), with C
//! poisoned and guarded like every other output. Both launches are validated against their one
//! declaration before anything is allocated.

use super::{Backend, BenchPlan, DeviceFault, GemmOutput, Health, OutputLayout, Timing, bench};
use crate::launch::{DeviceInputs, HostBytes, pack_args};
use crate::tensor::{LaunchInputs, MoeRouting, StackedSpec, XBuffer, YSpec};
use crate::validate::ContractError;
use w4a16_kernels::decl::Tile;
use w4a16_kernels::{KernelDecl, KernelId, TensorRole, set};
use w4a16_reference::moe::StackedExperts;

/// What `moe_align` outputs start as: never a slot, a block expert or a length the kernel can
/// write, so an entry it skipped reads as wrong, not as plausible.
pub const ALIGN_POISON: i32 = i32::MIN;

/// One MoE layer call: X, the stacked local experts, the router's output and the tile (whose BM
/// is `block_m`).
#[derive(Clone, Debug)]
pub struct MoeLaunch<'a> {
    pub x: XBuffer<'a>,
    pub stacked: &'a StackedExperts,
    /// `[T, top_k]` global expert ids.
    pub topk_ids: &'a [i32],
    /// `[T, top_k]`; `None`: no routed-weight multiply.
    pub topk_weights: Option<&'a [f32]>,
    /// `[E]` local id per global expert (−1: not local); `None`: every expert local.
    pub expert_map: Option<&'a [i32]>,
    pub tokens: usize,
    pub top_k: usize,
    /// Global experts.
    pub experts: usize,
    pub tile: Tile,
}

/// What the pipeline left on the device.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeOutput {
    /// `moe_align`'s outputs over their whole capacity (entries it need not write hold
    /// [`ALIGN_POISON`] when it did not).
    pub sorted_token_ids: Vec<i32>,
    pub expert_ids: Vec<i32>,
    pub num_tokens_post_padded: i32,
    /// C `[T·top_k, N]`.
    pub c: GemmOutput,
}

/// Device times of the pipeline, each the median of its own timed launches.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeTiming {
    pub align: Timing,
    pub gemm: Timing,
    /// Both launches back to back, as the engine issues them.
    pub pipeline: Timing,
}

/// Why the pipeline did not run: a contract refusal (before any allocation) or the device.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum MoeRunError {
    #[error("{kernel}: {error}")]
    Contract {
        kernel: KernelId,
        error: ContractError,
    },
    #[error(transparent)]
    Device(#[from] DeviceFault),
}

/// Host buffers the launches borrow, converted once.
struct MoeHost {
    topk_ids: Vec<u32>,
    expert_map: Option<Vec<u32>>,
    topk_weights: Option<Vec<u32>>,
    sorted: Vec<u32>,
    expert_ids: Vec<u32>,
    ntpp: Vec<u32>,
}

fn bits_i32(v: &[i32]) -> Vec<u32> {
    v.iter().map(|&x| x as u32).collect()
}

/// Validates both launches (`moe_align`, then `moe` reading the align outputs).
fn validated<'a>(
    l: &'a MoeLaunch<'a>,
    host: &'a MoeHost,
) -> Result<(DeviceInputs<'a>, DeviceInputs<'a>, MoeRouting), MoeRunError> {
    let s = l.stacked;
    let routing = MoeRouting {
        top_k: l.top_k,
        experts: l.experts,
        experts_local: s.experts,
        block_m: l.tile.bm as usize,
    };
    let dtype = s.dtype;
    let align_li = LaunchInputs::moe_align(l.tokens, routing, l.expert_map.is_some(), dtype);
    let mut align_host = vec![(TensorRole::TopkIds, HostBytes::U32(&host.topk_ids))];
    if let Some(m) = &host.expert_map {
        align_host.push((TensorRole::ExpertMap, HostBytes::U32(m)));
    }
    let align = DeviceInputs::new(&set::MOE_ALIGN, align_li, align_host).map_err(|error| {
        MoeRunError::Contract {
            kernel: KernelId::MoeAlign,
            error,
        }
    })?;
    let spec = StackedSpec {
        experts_local: s.experts,
        n: s.shape.n,
        k: s.shape.k,
        group: s.shape.group,
        dtype,
        w_row_stride_bytes: s.w_row_stride_bytes,
        scale_row_stride: s.scale_row_stride,
        weight_bytes: s.weights.len() * 4,
        scale_bytes: s.scales.len() * 2,
        zero_bytes: s.zeros.as_ref().map(|z| z.len() * 4),
    };
    let slots = l.tokens * l.top_k;
    let c = YSpec::dense(slots, s.shape.n, dtype);
    let moe_li = LaunchInputs::moe(l.x.view(), &spec, routing, l.topk_weights.is_some(), &c);
    let mut moe_host = vec![
        (TensorRole::X, HostBytes::U16(&l.x.host)),
        (TensorRole::Weights, HostBytes::U32(&s.weights)),
        (TensorRole::Scales, HostBytes::U16(&s.scales)),
        (TensorRole::SortedTokenIds, HostBytes::U32(&host.sorted)),
        (TensorRole::ExpertIds, HostBytes::U32(&host.expert_ids)),
        (TensorRole::TokensPostPadded, HostBytes::U32(&host.ntpp)),
    ];
    if let Some(z) = &s.zeros {
        moe_host.push((TensorRole::Zeros, HostBytes::U32(z)));
    }
    if let Some(w) = &host.topk_weights {
        moe_host.push((TensorRole::TopkWeights, HostBytes::U32(w)));
    }
    let moe =
        DeviceInputs::new(&set::MOE, moe_li, moe_host).map_err(|error| MoeRunError::Contract {
            kernel: KernelId::Moe,
            error,
        })?;
    Ok((align, moe, routing))
}

fn host_for(l: &MoeLaunch<'_>) -> MoeHost {
    let routing = MoeRouting {
        top_k: l.top_k,
        experts: l.experts,
        experts_local: l.stacked.experts,
        block_m: l.tile.bm as usize,
    };
    let cap = routing.capacity(l.tokens);
    let (sorted, blocks) = cap.map_or((0, 0), |c| (c.sorted, c.blocks));
    let poison = ALIGN_POISON as u32;
    MoeHost {
        topk_ids: bits_i32(l.topk_ids),
        expert_map: l.expert_map.map(bits_i32),
        topk_weights: l
            .topk_weights
            .map(|w| w.iter().map(|x| x.to_bits()).collect()),
        sorted: vec![poison; sorted],
        expert_ids: vec![poison; blocks],
        ntpp: vec![poison; 1],
    }
}

/// Both launches staged: every input uploaded once, the align outputs (poisoned) shared by the
/// two, C poisoned and guarded.
struct Staged<B: Backend> {
    buffers: Vec<(TensorRole, B::Buffer)>,
    c: B::Buffer,
    layout: OutputLayout,
    align_args: crate::launch::PackedArgs,
    moe_args: crate::launch::PackedArgs,
    align_entry: String,
    moe_entry: String,
    align_geometry: w4a16_kernels::decl::LaunchGeometry,
    moe_geometry: w4a16_kernels::decl::LaunchGeometry,
}

fn stage<B: Backend>(
    b: &B,
    align: &DeviceInputs<'_>,
    moe: &DeviceInputs<'_>,
    tile: Tile,
) -> Result<Staged<B>, DeviceFault> {
    if let Health::Lost { cause } = b.health() {
        return Err(DeviceFault::ContextLost { cause });
    }
    let mut buffers: Vec<(TensorRole, B::Buffer)> = Vec::new();
    let mut upload = |role: TensorRole, host: HostBytes<'_>| -> Result<(), DeviceFault> {
        let bytes = host.le_bytes();
        let mut buf = b.alloc(bytes.len().max(1))?;
        b.upload(&mut buf, &bytes)?;
        buffers.push((role, buf));
        Ok(())
    };
    for role in [TensorRole::TopkIds, TensorRole::ExpertMap] {
        if let Some(h) = align.host(role) {
            upload(role, h)?;
        }
    }
    // The align outputs are the GEMM's inputs: staged once, from the GEMM's poisoned host copy.
    for role in moe.launch().present_roles() {
        if role == TensorRole::Y {
            continue;
        }
        if let Some(h) = moe.host(role) {
            upload(role, h)?;
        }
    }
    let view = moe
        .launch()
        .view(TensorRole::Y)
        .ok_or_else(|| DeviceFault::Unsupported {
            what: "a moe launch without C".into(),
            device: b.name(),
        })?;
    let layout = OutputLayout::for_view(view, moe.launch().dtype.poison_bits());
    let init = layout.initial_bytes();
    let mut c = b.alloc(init.len().max(1))?;
    b.upload(&mut c, &init)?;

    let target = b.target();
    let address = |role: TensorRole| -> u64 {
        if role == TensorRole::Y {
            return b.address(&c) + layout.base_offset() as u64;
        }
        buffers
            .iter()
            .find(|(r, _)| *r == role)
            .map_or(0, |(_, buf)| b.address(buf))
    };
    let wrong = |d: &KernelDecl, inputs: &DeviceInputs<'_>| DeviceFault::WrongKernel {
        kernel: d.id,
        validated: inputs.kernel(),
    };
    let align_args = pack_args(&set::MOE_ALIGN, align.validated(), &address)
        .map_err(|_| wrong(&set::MOE_ALIGN, align))?;
    let moe_args =
        pack_args(&set::MOE, moe.validated(), &address).map_err(|_| wrong(&set::MOE, moe))?;
    let align_shape = align.validated().shape;
    let moe_shape = moe.validated().shape;
    Ok(Staged {
        align_entry: set::MOE_ALIGN.launch_entry(&align_shape, target),
        align_geometry: (set::MOE_ALIGN.geometry)(&align_shape, target),
        moe_entry: set::MOE.variant_entry(moe_shape.dtype, tile),
        moe_geometry: set::moe_geometry_for(&moe_shape, tile),
        buffers,
        c,
        layout,
        align_args,
        moe_args,
    })
}

impl<B: Backend> Staged<B> {
    fn buffer(&self, role: TensorRole) -> Option<&B::Buffer> {
        self.buffers
            .iter()
            .find(|(r, _)| *r == role)
            .map(|(_, b)| b)
    }

    fn launch_align(&self, b: &B) -> Result<(), DeviceFault> {
        b.launch(
            &set::MOE_ALIGN,
            &self.align_entry,
            &self.align_geometry,
            &self.align_args,
        )
    }

    fn launch_gemm(&self, b: &B) -> Result<(), DeviceFault> {
        b.launch(
            &set::MOE,
            &self.moe_entry,
            &self.moe_geometry,
            &self.moe_args,
        )
    }

    fn download_i32(&self, b: &B, role: TensorRole) -> Result<Vec<i32>, DeviceFault> {
        let buf = self.buffer(role).ok_or_else(|| DeviceFault::Unsupported {
            what: format!("moe_align without its {} buffer", role.name()),
            device: b.name(),
        })?;
        Ok(b.download(buf)?
            .chunks_exact(4)
            .map(|w| i32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect())
    }
}

/// Runs `moe_align` then `moe` once and reads everything back.
pub(super) fn run<B: Backend>(b: &B, l: &MoeLaunch<'_>) -> Result<MoeOutput, MoeRunError> {
    let host = host_for(l);
    let (align, moe, _) = validated(l, &host)?;
    let s = stage(b, &align, &moe, l.tile)?;
    s.launch_align(b)?;
    s.launch_gemm(b)?;
    b.synchronize(&format!("{} then {}", s.align_entry, s.moe_entry))?;
    let sorted_token_ids = s.download_i32(b, TensorRole::SortedTokenIds)?;
    let expert_ids = s.download_i32(b, TensorRole::ExpertIds)?;
    let ntpp = s.download_i32(b, TensorRole::TokensPostPadded)?;
    let bytes = b.download(&s.c)?;
    let report = s.layout.inspect(&bytes);
    Ok(MoeOutput {
        sorted_token_ids,
        expert_ids,
        num_tokens_post_padded: ntpp.first().copied().unwrap_or(ALIGN_POISON),
        c: GemmOutput::from_report(l.tokens * l.top_k, l.stacked.shape.n, report),
    })
}

/// Times `moe_align`, `moe` and the two back to back (inputs staged once; the align outputs the
/// GEMM reads are the ones the align step rewrites each time).
pub(super) fn time<B: Backend>(
    b: &B,
    l: &MoeLaunch<'_>,
    plan: BenchPlan,
) -> Result<MoeTiming, MoeRunError> {
    let host = host_for(l);
    let (align, moe, _) = validated(l, &host)?;
    let s = stage(b, &align, &moe, l.tile)?;
    let align_t = bench(
        b,
        plan,
        &format!("benchmark of {}", s.align_entry),
        &mut |_| s.launch_align(b),
    )?;
    let gemm_t = bench(
        b,
        plan,
        &format!("benchmark of {}", s.moe_entry),
        &mut |_| s.launch_gemm(b),
    )?;
    let pipeline = bench(
        b,
        plan,
        &format!("benchmark of {} + {}", s.align_entry, s.moe_entry),
        &mut |_| {
            s.launch_align(b)?;
            s.launch_gemm(b)
        },
    )?;
    Ok(MoeTiming {
        align: align_t,
        gemm: gemm_t,
        pipeline,
    })
}
