//! Runs a kernel over a grid: each workgroup in turn, its waves round-robin on the host, with
//! the initial register state of the AMDHSA ABI (LLVM AMDGPUUsage, "Initial Kernel Execution
//! State") and the workgroup's LDS and barrier.
//!
//! The schedule is deterministic and chosen per launch ([`Schedule`]): the workgroup order, and
//! how many instructions a wave runs (unless it ends or waits at a barrier) before the next
//! wave runs. Barriers follow gfx12's split form (a
//! signal, then a wait that passes once every wave still running has signalled); gfx11's
//! `s_barrier` is both at once. Waves that ended do not hold a barrier up, as on hardware.

use crate::blocks::Executed;
use crate::counters::Counters;
use crate::exec::{Ctx, Flow, step};
use crate::fault::{Fault, FaultKind};
use crate::inst::{Gen, Inst, Operand};
use crate::memory::{GlobalMemory, Lds};
use crate::parse::ParseError;
use crate::program::Kernel;
use crate::sanitize::{Clock, Finding, Sanitizer};
use crate::wave::{LANES, Wave, WaveState, sreg};

/// A launch's shape: workgroups per dimension, work-items per workgroup, and the dynamic LDS
/// bytes added to the kernel's static LDS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_lds: u32,
}

/// Bounds on a launch, and the schedule it runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A wave that executes more instructions than this is a hang.
    pub max_instructions_per_wave: u64,
    pub schedule: Schedule,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_instructions_per_wave: 50_000_000,
            schedule: Schedule::IN_ORDER,
        }
    }
}

/// The order a launch's work runs in. Hardware runs workgroups in any order and interleaves a
/// workgroup's waves at will, so a correct kernel's results depend on neither; running a kernel
/// again under another schedule (the harness's determinism check does) shows a result that does:
/// a missing barrier, a workgroup reading what another writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Workgroups from the last to the first, and each workgroup's waves from its last.
    pub reversed: bool,
    /// Instructions a wave runs before the next wave of its workgroup gets its turn.
    pub quantum: u64,
}

impl Schedule {
    /// Workgroups x fastest, then y, then z; waves in order, [`QUANTUM`] instructions a turn.
    pub const IN_ORDER: Schedule = Schedule {
        reversed: false,
        quantum: QUANTUM,
    };
    /// Workgroups and waves last to first, switching waves every few instructions.
    pub const INTERLEAVED: Schedule = Schedule {
        reversed: true,
        quantum: 3,
    };
}

/// What a launch did (for the wave-instructions-per-second figure).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaunchStats {
    pub workgroups: u64,
    pub waves: u64,
    pub wave_instructions: u64,
}

/// Instructions a wave runs before the next wave of its workgroup gets its turn.
pub const QUANTUM: u64 = 256;

/// Largest workgroup the hardware runs.
const MAX_BLOCK: u64 = 1024;

// kernel_code_properties bits (AMDGPUUsage "Kernel Descriptor").
const KCP_PRIVATE_SEGMENT_BUFFER: u16 = 1 << 0;
const KCP_DISPATCH_PTR: u16 = 1 << 1;
const KCP_QUEUE_PTR: u16 = 1 << 2;
const KCP_KERNARG_SEGMENT_PTR: u16 = 1 << 3;
const KCP_DISPATCH_ID: u16 = 1 << 4;
const KCP_FLAT_SCRATCH_INIT: u16 = 1 << 5;
const KCP_PRIVATE_SEGMENT_SIZE: u16 = 1 << 6;
const KCP_WAVEFRONT_SIZE32: u16 = 1 << 10;
const KCP_USES_DYNAMIC_STACK: u16 = 1 << 11;

// compute_pgm_rsrc2 bits.
const RSRC2_PRIVATE_SEGMENT: u32 = 1 << 0;
const RSRC2_WORKGROUP_ID_X: u32 = 1 << 7;
const RSRC2_WORKGROUP_INFO: u32 = 1 << 10;

fn abi(detail: impl Into<String>) -> FaultKind {
    FaultKind::Abi {
        detail: detail.into(),
    }
}

/// Where each piece of the initial state goes, decided once per launch from the descriptor.
#[derive(Clone, Debug)]
struct Layout {
    /// User SGPR values (same for every wave of the launch), from s0.
    user: Vec<u32>,
    /// The first system SGPR (after the user SGPRs and any padding).
    system_base: usize,
    /// Workgroup id dimensions placed in system SGPRs (gfx11), in order x, y, z.
    wgid_sgprs: [bool; 3],
    /// gfx12: workgroup ids in ttmp9 (x) and ttmp7 (y low, z high).
    architected: bool,
    /// Work-item id dimensions packed into v0 (x 9:0, y 19:10, z 29:20).
    workitem_dims: usize,
    vgprs: usize,
    lds_bytes: usize,
}

/// VGPRs the code names (one past the highest), so a kernel whose metadata undercounts still
/// gets registers for every instruction.
fn vgprs_in_code(kernel: &Kernel) -> usize {
    fn of(inst: &Inst) -> usize {
        let own = inst
            .operands
            .iter()
            .map(|o| match *o {
                Operand::Vgpr { first, count, .. } => first as usize + count as usize,
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        own.max(inst.dual.as_deref().map(of).unwrap_or(0))
    }
    kernel.code.iter().map(of).max().unwrap_or(0)
}

/// Reads the descriptor: which user and system SGPRs the kernel expects, and refuses what the
/// emulator does not set up (scratch, the queue) with the field that asks for it.
fn layout(
    kernel: &Kernel,
    dims: &Dims,
    dispatch_packet: Option<u64>,
    kernarg: u64,
) -> Result<Layout, FaultKind> {
    let d = &kernel.descriptor;
    let kcp = d.kernel_code_properties;
    let rsrc2 = d.compute_pgm_rsrc2;
    if kcp & KCP_WAVEFRONT_SIZE32 == 0 || kernel.meta.wavefront_size.max(32) != 32 {
        return Err(abi(
            "the kernel is built for wave64; the emulator runs wave32",
        ));
    }
    for (bit, what) in [
        (
            KCP_PRIVATE_SEGMENT_BUFFER,
            "a private segment buffer (scratch)",
        ),
        (KCP_QUEUE_PTR, "the queue pointer"),
        (KCP_FLAT_SCRATCH_INIT, "flat scratch initialisation"),
        (KCP_USES_DYNAMIC_STACK, "a dynamic stack"),
    ] {
        if kcp & bit != 0 {
            return Err(abi(format!(
                "the kernel asks for {what}, which the emulator does not provide"
            )));
        }
    }
    if rsrc2 & RSRC2_PRIVATE_SEGMENT != 0 || d.private_segment_fixed_size != 0 {
        return Err(abi(format!(
            "the kernel uses scratch ({} B per work-item), which the emulator does not provide",
            d.private_segment_fixed_size
        )));
    }
    if rsrc2 & RSRC2_WORKGROUP_INFO != 0 {
        return Err(abi(
            "the kernel asks for the workgroup-info SGPR, which the emulator does not set",
        ));
    }
    let mut user = Vec::new();
    if kcp & KCP_DISPATCH_PTR != 0 {
        let p = dispatch_packet.unwrap_or(0);
        user.extend([p as u32, (p >> 32) as u32]);
    }
    if kcp & KCP_KERNARG_SEGMENT_PTR != 0 {
        user.extend([kernarg as u32, (kernarg >> 32) as u32]);
    }
    if kcp & KCP_DISPATCH_ID != 0 {
        user.extend([0, 0]);
    }
    if kcp & KCP_PRIVATE_SEGMENT_SIZE != 0 {
        user.push(d.private_segment_fixed_size);
    }
    let architected = kernel.generation == Gen::Gfx12;
    let wgid_enabled: [bool; 3] = std::array::from_fn(|i| rsrc2 & (RSRC2_WORKGROUP_ID_X << i) != 0);
    // gfx12 has architected SGPRs: the workgroup ids are in ttmp7/ttmp9, not system SGPRs.
    let wgid_sgprs = if architected {
        [false; 3]
    } else {
        wgid_enabled
    };
    let system = wgid_sgprs.iter().filter(|e| **e).count();
    let count = ((rsrc2 >> 1) & 0x1F) as usize;
    // gfx11 compilers pad the user SGPRs so that user + system SGPRs reach 16 (LLVM's
    // user-SGPR-init-16 workaround); the padding holds nothing.
    let padded = kernel.generation == Gen::Gfx11 && count > user.len() && count + system == 16;
    if count != user.len() && !padded {
        return Err(abi(format!(
            "USER_SGPR_COUNT is {count}, but the enabled user SGPRs take {}",
            user.len()
        )));
    }
    let workitem_dims = ((rsrc2 >> 11) & 3) as usize + 1;
    if workitem_dims > 3 {
        return Err(abi("ENABLE_VGPR_WORKITEM_ID is 3 (reserved)"));
    }
    let vgprs = (kernel.meta.vgpr_count as usize)
        .max(vgprs_in_code(kernel))
        .max(1)
        .div_ceil(8)
        * 8;
    let lds_bytes = d.group_segment_fixed_size as usize + dims.dynamic_lds as usize;
    Ok(Layout {
        user,
        system_base: count,
        wgid_sgprs,
        architected,
        workitem_dims,
        vgprs,
        lds_bytes,
    })
}

/// The waves of workgroup `wg`, in their initial state.
fn waves_of(kernel: &Kernel, layout: &Layout, dims: &Dims, wg: [u32; 3]) -> Vec<Wave> {
    let [bx, by, bz] = dims.block;
    let threads = (bx * by * bz) as usize;
    let entry = kernel.descriptor.entry;
    (0..threads.div_ceil(LANES))
        .map(|w| {
            let lanes = (threads - w * LANES).min(LANES);
            let mut wave = Wave::new(w, layout.vgprs, lanes, entry);
            for (i, v) in layout.user.iter().enumerate() {
                wave.sgpr[i] = *v;
            }
            let mut s = layout.system_base;
            for (i, on) in layout.wgid_sgprs.iter().enumerate() {
                if *on {
                    wave.sgpr[s] = wg[i];
                    s += 1;
                }
            }
            if layout.architected {
                wave.sgpr[sreg::TTMP0 + 9] = wg[0];
                wave.sgpr[sreg::TTMP0 + 7] = (wg[1] & 0xFFFF) | (wg[2] & 0xFFFF) << 16;
            }
            let mut v0 = wave.vgpr[0];
            for (lane, slot) in v0.iter_mut().enumerate().take(lanes) {
                let t = (w * LANES + lane) as u32;
                let ids = [t % bx, t / bx % by, t / (bx * by)];
                *slot = ids
                    .iter()
                    .take(layout.workitem_dims)
                    .enumerate()
                    .fold(0, |acc, (i, id)| acc | (id & 0x3FF) << (10 * i));
            }
            wave.vgpr[0] = v0;
            wave
        })
        .collect()
}

/// Builds an `hsa_kernel_dispatch_packet_t` (64 B) for kernels that read the dispatch pointer.
fn dispatch_packet(
    global: &mut GlobalMemory,
    kernel: &Kernel,
    dims: &Dims,
    kernarg: u64,
) -> Result<u64, FaultKind> {
    let mut p = [0u8; 64];
    let put =
        |p: &mut [u8; 64], at: usize, bytes: &[u8]| p[at..at + bytes.len()].copy_from_slice(bytes);
    put(&mut p, 0, &2u16.to_le_bytes()); // HSA_PACKET_TYPE_KERNEL_DISPATCH
    put(&mut p, 2, &3u16.to_le_bytes()); // dimensions
    for i in 0..3 {
        let size = u16::try_from(dims.block[i]).map_err(|_| abi("workgroup size beyond u16"))?;
        put(&mut p, 4 + 2 * i, &size.to_le_bytes());
        let grid = dims.grid[i]
            .checked_mul(dims.block[i])
            .ok_or_else(|| abi("grid size in work-items beyond u32"))?;
        put(&mut p, 12 + 4 * i, &grid.to_le_bytes());
    }
    put(
        &mut p,
        24,
        &kernel.descriptor.private_segment_fixed_size.to_le_bytes(),
    );
    let lds = kernel.descriptor.group_segment_fixed_size + dims.dynamic_lds;
    put(&mut p, 28, &lds.to_le_bytes());
    put(&mut p, 40, &kernarg.to_le_bytes());
    let at = global.alloc(64, format!("dispatch packet of {}", kernel.name));
    global.write(at, &p, 0)?;
    Ok(at)
}

/// Runs `kernel` over `dims` with its kernarg segment at `kernarg` (see [`crate::kernarg`]).
pub fn launch(
    kernel: &Kernel,
    dims: &Dims,
    kernarg: u64,
    global: &mut GlobalMemory,
    limits: &Limits,
) -> Result<LaunchStats, Fault> {
    launch_with(kernel, dims, kernarg, global, limits, Watch::default())
}

/// [`launch`], marking in `executed` (made for `kernel`) every instruction that runs, a
/// faulting launch's included (see [`crate::blocks`]).
pub fn launch_recording(
    kernel: &Kernel,
    dims: &Dims,
    kernarg: u64,
    global: &mut GlobalMemory,
    limits: &Limits,
    executed: &mut Executed,
) -> Result<LaunchStats, Fault> {
    let watch = Watch {
        executed: Some(executed),
        ..Watch::default()
    };
    launch_with(kernel, dims, kernarg, global, limits, watch)
}

/// [`launch`] watched by `sanitizer` ([`crate::sanitize`]): the launch runs as without it and
/// also returns the sanitizer's findings (a finding does not stop it). Initcheck wants `global`
/// to track initialisation from before the inputs are uploaded
/// ([`GlobalMemory::track_initialisation`]).
pub fn launch_sanitized(
    kernel: &Kernel,
    dims: &Dims,
    kernarg: u64,
    global: &mut GlobalMemory,
    limits: &Limits,
    sanitizer: &mut Sanitizer,
) -> Result<(LaunchStats, Vec<Finding>), Fault> {
    let watch = Watch {
        sanitizer: Some(&mut *sanitizer),
        ..Watch::default()
    };
    let stats = launch_with(kernel, dims, kernarg, global, limits, watch);
    let findings = sanitizer.finish(kernel);
    stats.map(|s| (s, findings))
}

/// As [`launch`], counting every instruction into `counters` when given ([`Counters`]; its
/// `waves` too; occupancy is the caller's, who knows the target). Without a sink the loop pays
/// one untaken branch per instruction.
pub fn launch_counted(
    kernel: &Kernel,
    dims: &Dims,
    kernarg: u64,
    global: &mut GlobalMemory,
    limits: &Limits,
    counters: Option<&mut Counters>,
) -> Result<LaunchStats, Fault> {
    let watch = Watch {
        counters,
        ..Watch::default()
    };
    launch_with(kernel, dims, kernarg, global, limits, watch)
}

/// What a launch may watch as it runs, each `None` when off (one untaken branch per
/// instruction): the blocks executed, the counters, and a sanitizer's shadow state.
#[derive(Default)]
pub struct Watch<'w> {
    pub executed: Option<&'w mut Executed>,
    pub counters: Option<&'w mut Counters>,
    pub sanitizer: Option<&'w mut Sanitizer>,
}

/// [`launch`] with what `watch` asks for.
pub fn launch_with(
    kernel: &Kernel,
    dims: &Dims,
    kernarg: u64,
    global: &mut GlobalMemory,
    limits: &Limits,
    mut watch: Watch<'_>,
) -> Result<LaunchStats, Fault> {
    let at_launch = |kind: FaultKind| Fault {
        kernel: kernel.name.clone(),
        at: kernel.descriptor.entry,
        inst: "(launch)".into(),
        workgroup: [0; 3],
        wave: 0,
        kind,
    };
    let threads: u64 = dims.block.iter().map(|b| *b as u64).product();
    if threads == 0 || threads > MAX_BLOCK {
        return Err(at_launch(abi(format!(
            "workgroup of {:?} = {threads} work-items (1..={MAX_BLOCK})",
            dims.block
        ))));
    }
    let packet = if kernel.descriptor.kernel_code_properties & KCP_DISPATCH_PTR != 0 {
        Some(dispatch_packet(global, kernel, dims, kernarg).map_err(at_launch)?)
    } else {
        None
    };
    let result = layout(kernel, dims, packet, kernarg)
        .map_err(at_launch)
        .and_then(|layout| {
            let mut stats = LaunchStats::default();
            let [gx, gy, gz] = dims.grid.map(u64::from);
            let count = gx * gy * gz;
            for i in 0..count {
                let i = if limits.schedule.reversed {
                    count - 1 - i
                } else {
                    i
                };
                let wg = [i % gx, i / gx % gy, i / (gx * gy)].map(|d| d as u32);
                let run = Run {
                    kernel,
                    layout: &layout,
                    dims,
                    limits,
                };
                run.workgroup(wg, global, &mut stats, &mut watch)?;
            }
            if let Some(c) = watch.counters {
                c.waves += stats.waves;
            }
            Ok(stats)
        });
    if let Some(p) = packet {
        global.free(p);
    }
    result
}

/// Barrier bookkeeping of one wave: signals made and waits passed.
#[derive(Clone, Copy, Default)]
struct Arrivals {
    signals: u64,
    waits: u64,
}

/// What every workgroup of a launch shares.
struct Run<'a> {
    kernel: &'a Kernel,
    layout: &'a Layout,
    dims: &'a Dims,
    limits: &'a Limits,
}

impl Run<'_> {
    fn workgroup(
        &self,
        wg: [u32; 3],
        global: &mut GlobalMemory,
        stats: &mut LaunchStats,
        watch: &mut Watch<'_>,
    ) -> Result<(), Fault> {
        let Run {
            kernel,
            layout,
            dims,
            limits,
        } = *self;
        let Watch {
            executed,
            counters,
            sanitizer,
        } = watch;
        if let Some(s) = sanitizer.as_deref_mut() {
            s.begin_workgroup(wg, layout.lds_bytes);
        }
        let mut waves = waves_of(kernel, layout, dims, wg);
        let mut arrivals = vec![Arrivals::default(); waves.len()];
        let mut lds = Lds::new(layout.lds_bytes);
        // Barriers completed by the workgroup.
        let mut completed = 0u64;
        loop {
            let mut ran = false;
            for turn in 0..waves.len() {
                let w = if limits.schedule.reversed {
                    waves.len() - 1 - turn
                } else {
                    turn
                };
                let wave = &mut waves[w];
                match wave.state {
                    WaveState::Done => continue,
                    WaveState::AtBarrier if completed >= arrivals[w].waits => {
                        wave.state = WaveState::Running
                    }
                    WaveState::AtBarrier => continue,
                    WaveState::Running => {}
                }
                ran = true;
                let mut ctx = Ctx {
                    generation: kernel.generation,
                    global,
                    lds: &mut lds,
                    sanitizer: sanitizer.as_deref_mut(),
                };
                let fault = |wave: &Wave, at: u64, inst: String, kind| Fault {
                    kernel: kernel.name.clone(),
                    at,
                    inst,
                    workgroup: wg,
                    wave: wave.id,
                    kind,
                };
                let sinks = Sinks {
                    executed: executed.as_deref_mut(),
                    counters: counters.as_deref_mut(),
                };
                run_quantum(kernel, wave, &mut arrivals[w], &mut ctx, limits, sinks)
                    .map_err(|(at, inst, kind)| fault(wave, at, inst, kind))?;
                // A barrier completes once every wave still running has signalled it.
                loop {
                    let mut live = waves
                        .iter()
                        .zip(&arrivals)
                        .filter(|(v, _)| v.state != WaveState::Done)
                        .peekable();
                    if live.peek().is_none() || !live.all(|(_, a)| a.signals > completed) {
                        break;
                    }
                    completed += 1;
                }
            }
            if waves.iter().all(|v| v.state == WaveState::Done) {
                break;
            }
            if !ran {
                let first = &waves[0];
                return Err(Fault {
                    kernel: kernel.name.clone(),
                    at: first.pc,
                    inst: "(barrier)".into(),
                    workgroup: wg,
                    wave: 0,
                    kind: FaultKind::Barrier {
                        detail: "every wave waits and none can proceed".into(),
                    },
                });
            }
        }
        stats.workgroups += 1;
        stats.waves += waves.len() as u64;
        stats.wave_instructions += waves.iter().map(|v| v.executed).sum::<u64>();
        Ok(())
    }
}

/// Where a fault happened: instruction address, its text, and what.
type Stop = (u64, String, FaultKind);

/// Runs `wave` for up to the schedule's quantum of instructions, until it ends or waits at a
/// barrier.
fn run_quantum(
    kernel: &Kernel,
    wave: &mut Wave,
    arrivals: &mut Arrivals,
    ctx: &mut Ctx<'_>,
    limits: &Limits,
    mut sinks: Sinks<'_>,
) -> Result<(), Stop> {
    clock(ctx, wave, arrivals);
    for _ in 0..limits.schedule.quantum.max(1) {
        let pc = wave.pc;
        let (at, inst) = fetch(kernel, pc)?;
        if let Some(e) = sinks.executed.as_deref_mut() {
            e.mark(at);
        }
        let stop = |kind| (pc, inst.to_string(), kind);
        if wave.executed >= limits.max_instructions_per_wave {
            return Err(stop(FaultKind::Hang {
                executed: wave.executed,
            }));
        }
        wave.executed += 1;
        if let Some(c) = sinks.counters.as_deref_mut() {
            c.record(wave, inst);
        }
        let flow = step(wave, inst, ctx).map_err(stop)?;
        let next = || {
            let size = inst.size();
            if size == 0 {
                Err(stop(FaultKind::Unsupported {
                    what: "an instruction without encoding words (its size is unknown)".into(),
                }))
            } else {
                Ok(pc + size)
            }
        };
        match flow {
            Flow::Next => wave.pc = next()?,
            Flow::Jump(target) => {
                if kernel.index_of(target).is_none() && !kernel.unknown.contains_key(&target) {
                    return Err(stop(FaultKind::BadBranch { target }));
                }
                wave.pc = target;
            }
            Flow::End => {
                // Stores went to memory at issue; loads still in flight land nowhere.
                wave.pending.clear();
                wave.pending_v.iter_mut().for_each(|p| *p = 0);
                wave.pending_s = [0; sreg::COUNT];
                wave.state = WaveState::Done;
                return Ok(());
            }
            Flow::Barrier => {
                if arrivals.signals != arrivals.waits {
                    return Err(stop(FaultKind::Barrier {
                        detail: "s_barrier while an s_barrier_signal has no wait".into(),
                    }));
                }
                signal(ctx, wave, pc);
                arrivals.signals += 1;
                arrivals.waits += 1;
                wave.pc = next()?;
                wave.state = WaveState::AtBarrier;
                return Ok(());
            }
            Flow::BarrierSignal => {
                if arrivals.signals != arrivals.waits {
                    return Err(stop(FaultKind::Barrier {
                        detail: "signalled twice without waiting in between".into(),
                    }));
                }
                signal(ctx, wave, pc);
                arrivals.signals += 1;
                clock(ctx, wave, arrivals);
                wave.pc = next()?;
            }
            Flow::BarrierWait => {
                if arrivals.signals != arrivals.waits + 1 {
                    return Err(stop(FaultKind::Barrier {
                        detail: "s_barrier_wait without an s_barrier_signal before it".into(),
                    }));
                }
                arrivals.waits += 1;
                wave.pc = next()?;
                wave.state = WaveState::AtBarrier;
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The per-instruction sinks of [`Watch`] a quantum writes to (the sanitizer rides in [`Ctx`]).
struct Sinks<'w> {
    executed: Option<&'w mut Executed>,
    counters: Option<&'w mut Counters>,
}

/// Tells the sanitizer, if one watches, which wave runs and its barrier counts.
#[inline]
fn clock(ctx: &mut Ctx<'_>, wave: &Wave, arrivals: &Arrivals) {
    if let Some(s) = ctx.sanitizer.as_deref_mut() {
        s.set_clock(Clock {
            wave: wave.id,
            signals: arrivals.signals as u32,
            waits: arrivals.waits as u32,
        });
    }
}

/// Tells the sanitizer, if one watches, that `wave` signals the barrier at `pc`.
#[inline]
fn signal(ctx: &mut Ctx<'_>, wave: &Wave, pc: u64) {
    if let Some(s) = ctx.sanitizer.as_deref_mut() {
        s.barrier_signal(wave, pc);
    }
}

/// The instruction at `pc`, or the fault of an address that holds no instruction the emulator
/// can run (an unknown one names itself).
fn fetch(kernel: &Kernel, pc: u64) -> Result<(usize, &Inst), Stop> {
    if let Some(i) = kernel.index_of(pc)
        && let Some(inst) = kernel.code.get(i)
    {
        return Ok((i, inst));
    }
    match kernel.unknown.get(&pc) {
        Some(e @ ParseError::UnknownInstruction { mnemonic, .. }) => Err((
            pc,
            e.to_string(),
            FaultKind::UnknownInstruction {
                mnemonic: mnemonic.clone(),
            },
        )),
        Some(e) => Err((
            pc,
            e.to_string(),
            FaultKind::Unsupported {
                what: e.to_string(),
            },
        )),
        None => Err((
            pc,
            "(no instruction)".into(),
            FaultKind::BadBranch { target: pc },
        )),
    }
}

#[cfg(test)]
mod tests;
