//! `hipModuleLaunchKernel`: the kernel's arguments gathered from `extra`
//! (`HIP_LAUNCH_PARAM_BUFFER_POINTER` / `_SIZE` / `_END`) or from `kernelParams`, the grid and
//! block checked against the device's limits and the kernel's descriptor and metadata, and the
//! explicit-argument bytes checked against the code object's kernarg segment, all before the
//! emulator runs a single instruction: a launch the hardware would refuse is refused with HIP's
//! status, not run.

use std::ffi::c_void;

use w4a16_codeobject::KernelInfo;
use w4a16_emu::counters::TargetLimits;
use w4a16_emu::dispatch::Dims;
use w4a16_emu::program::Kernel;

use crate::error::{HipError, HipResult};
use crate::props::{LDS_PER_BLOCK, MAX_GRID, MAX_THREADS_PER_BLOCK};

/// `HIP_LAUNCH_PARAM_*` of hip_runtime_api.h (`((void*)0x01)` …).
pub const PARAM_BUFFER_POINTER: usize = 0x01;
pub const PARAM_BUFFER_SIZE: usize = 0x02;
pub const PARAM_END: usize = 0x03;
/// At most this many `extra` entries are read before an `_END` must come.
const MAX_EXTRA: usize = 64;

/// The explicit arguments' bytes: where they end (the last explicit argument's end) and how far
/// the caller's buffer may reach (the first hidden argument, or the segment's end).
fn explicit_span(info: &KernelInfo) -> (usize, usize) {
    let end = info
        .args
        .iter()
        .map(|a| (a.offset + a.size) as usize)
        .max()
        .unwrap_or(0);
    let room = info
        .hidden_args
        .iter()
        .map(|a| a.offset as usize)
        .min()
        .unwrap_or(info.kernarg_segment_size as usize);
    (end, room)
}

/// The argument bytes of a launch, from `extra` or from `kernel_params` (exactly one of the two).
///
/// # Safety
/// `extra`, when not null, must be a `HIP_LAUNCH_PARAM_END`-terminated list whose buffer pointer
/// holds at least the size its size pointer says; `kernel_params`, when not null, must hold one
/// pointer per explicit argument, each to that argument's bytes. (HIP demands the same.)
pub unsafe fn arguments(
    info: &KernelInfo,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> HipResult<Vec<u8>> {
    let (end, room) = explicit_span(info);
    match (kernel_params.is_null(), extra.is_null()) {
        (false, false) => Err(HipError::InvalidValue(
            "both kernelParams and extra given; HIP takes one".into(),
        )),
        (true, true) if end > 0 => Err(HipError::InvalidValue(format!(
            "{} takes {end} bytes of arguments and neither kernelParams nor extra was given",
            info.name
        ))),
        (true, true) => Ok(Vec::new()),
        // SAFETY: forwarded from the caller.
        (true, false) => unsafe { from_extra(info, extra, end, room) },
        // SAFETY: forwarded from the caller.
        (false, true) => unsafe { from_params(info, kernel_params, end) },
    }
}

/// # Safety
/// As [`arguments`] for `extra`.
unsafe fn from_extra(
    info: &KernelInfo,
    extra: *mut *mut c_void,
    end: usize,
    room: usize,
) -> HipResult<Vec<u8>> {
    let (mut buffer, mut size): (*const u8, Option<usize>) = (std::ptr::null(), None);
    let mut i = 0;
    loop {
        if i >= MAX_EXTRA {
            return Err(HipError::InvalidValue(format!(
                "extra has no HIP_LAUNCH_PARAM_END within {MAX_EXTRA} entries"
            )));
        }
        // SAFETY: the list is END-terminated (caller); each key before END has a value after it.
        let key = unsafe { *extra.add(i) } as usize;
        match key {
            PARAM_END => break,
            PARAM_BUFFER_POINTER => buffer = unsafe { *extra.add(i + 1) } as *const u8,
            PARAM_BUFFER_SIZE => {
                let p = unsafe { *extra.add(i + 1) } as *const usize;
                if p.is_null() {
                    return Err(HipError::InvalidValue(
                        "HIP_LAUNCH_PARAM_BUFFER_SIZE points nowhere".into(),
                    ));
                }
                // SAFETY: a non-null size pointer (caller).
                size = Some(unsafe { *p });
            }
            other => {
                return Err(HipError::InvalidValue(format!(
                    "extra[{i}] = {other:#x} is no HIP_LAUNCH_PARAM_* key"
                )));
            }
        }
        i += 2;
    }
    let size = size
        .ok_or_else(|| HipError::InvalidValue("extra lacks HIP_LAUNCH_PARAM_BUFFER_SIZE".into()))?;
    if buffer.is_null() && size > 0 {
        return Err(HipError::InvalidValue(
            "extra lacks HIP_LAUNCH_PARAM_BUFFER_POINTER".into(),
        ));
    }
    if size < end || size > room {
        return Err(HipError::InvalidValue(format!(
            "{size} bytes of kernel arguments for {}, whose explicit arguments take {end} (kernarg segment {} B, hidden arguments from byte {room})",
            info.name, info.kernarg_segment_size
        )));
    }
    if size == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the buffer holds `size` bytes (caller).
    Ok(unsafe { std::slice::from_raw_parts(buffer, size) }.to_vec())
}

/// # Safety
/// As [`arguments`] for `kernel_params`.
unsafe fn from_params(
    info: &KernelInfo,
    params: *mut *mut c_void,
    end: usize,
) -> HipResult<Vec<u8>> {
    let mut bytes = vec![0u8; end];
    for (i, arg) in info.args.iter().enumerate() {
        // SAFETY: one pointer per explicit argument (caller).
        let p = unsafe { *params.add(i) } as *const u8;
        if p.is_null() {
            return Err(HipError::InvalidValue(format!("kernelParams[{i}] is null")));
        }
        let (at, len) = (arg.offset as usize, arg.size as usize);
        // SAFETY: points to the argument's `size` bytes (caller).
        bytes[at..at + len].copy_from_slice(unsafe { std::slice::from_raw_parts(p, len) });
    }
    Ok(bytes)
}

/// The device's and the kernel's limits on a launch, checked as the runtime checks them: a zero
/// or oversized dimension is `InvalidConfiguration`; more work-items than the kernel was built
/// for, more LDS than a workgroup has, or more VGPRs than a WGP holds is `LaunchOutOfResources`.
pub fn check_geometry(kernel: &Kernel, info: &KernelInfo, gfx: &str, dims: &Dims) -> HipResult<()> {
    let name = &info.name;
    if dims.grid.contains(&0) || dims.block.contains(&0) {
        return Err(HipError::InvalidConfiguration(format!(
            "{name}: grid {:?}, block {:?} has a zero dimension",
            dims.grid, dims.block
        )));
    }
    if dims.grid.iter().zip(MAX_GRID).any(|(g, m)| *g > m)
        || dims.block.iter().any(|b| *b > MAX_THREADS_PER_BLOCK)
    {
        return Err(HipError::InvalidConfiguration(format!(
            "{name}: grid {:?} or block {:?} past the device's {MAX_GRID:?} / {MAX_THREADS_PER_BLOCK}",
            dims.grid, dims.block
        )));
    }
    let threads: u64 = dims.block.iter().map(|&b| u64::from(b)).product();
    let max_flat = u64::from(info.max_flat_workgroup_size).clamp(1, MAX_THREADS_PER_BLOCK.into());
    if threads > max_flat {
        return Err(HipError::LaunchOutOfResources(format!(
            "{name}: a block of {threads} work-items, the kernel is built for at most {max_flat} (max_flat_workgroup_size)"
        )));
    }
    let lds = u64::from(kernel.descriptor.group_segment_fixed_size) + u64::from(dims.dynamic_lds);
    if lds > u64::from(LDS_PER_BLOCK) {
        return Err(HipError::LaunchOutOfResources(format!(
            "{name}: {} B static + {} B dynamic LDS, a workgroup has {LDS_PER_BLOCK} B",
            kernel.descriptor.group_segment_fixed_size, dims.dynamic_lds
        )));
    }
    if let Some(t) = TargetLimits::of(gfx) {
        let waves = threads.div_ceil(32);
        let alloc = u64::from(info.vgpr_count.max(1)).div_ceil(t.vgpr_granule) * t.vgpr_granule;
        // One workgroup must fit on one WGP: its waves spread over the WGP's SIMDs.
        if waves.div_ceil(t.simds_per_wgp) * alloc > t.vgprs_per_simd {
            return Err(HipError::LaunchOutOfResources(format!(
                "{name}: {waves} waves of {alloc} VGPRs do not fit one WGP's {} SIMDs of {} VGPRs",
                t.simds_per_wgp, t.vgprs_per_simd
            )));
        }
    }
    Ok(())
}
