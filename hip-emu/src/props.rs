//! `hipGetDeviceProperties`: the emulated device described with `hipDeviceProp_t`'s layout and
//! the chosen target's published limits, so the backend reads the same fields it reads from a
//! real runtime (`name`, `gcnArchName`, …) at the same offsets.
//!
//! The layout is hip-sys 0.1's `hipDeviceProp_t` (HIP 5.4 headers, 792 bytes, `gcnArchName` at
//! 396), field for field; `hipDeviceArch_t`, a 4-byte bitfield there, is a `u32` here. Both this
//! crate's tests and the rocm backend's (`device/src/rocm/tests.rs`) pin those offsets, so a
//! change on either side shows.

use std::ffi::{c_char, c_int, c_uint};

use w4a16_emu::machine::Machine;

/// `hipDeviceProp_t` of HIP 5.4 (hip_runtime_api.h), as hip-sys binds it.
#[repr(C)]
#[allow(non_snake_case)]
pub struct DeviceProp {
    pub name: [c_char; 256],
    pub totalGlobalMem: usize,
    pub sharedMemPerBlock: usize,
    pub regsPerBlock: c_int,
    pub warpSize: c_int,
    pub maxThreadsPerBlock: c_int,
    pub maxThreadsDim: [c_int; 3],
    pub maxGridSize: [c_int; 3],
    pub clockRate: c_int,
    pub memoryClockRate: c_int,
    pub memoryBusWidth: c_int,
    pub totalConstMem: usize,
    pub major: c_int,
    pub minor: c_int,
    pub multiProcessorCount: c_int,
    pub l2CacheSize: c_int,
    pub maxThreadsPerMultiProcessor: c_int,
    pub computeMode: c_int,
    pub clockInstructionRate: c_int,
    pub arch: u32,
    pub concurrentKernels: c_int,
    pub pciDomainID: c_int,
    pub pciBusID: c_int,
    pub pciDeviceID: c_int,
    pub maxSharedMemoryPerMultiProcessor: usize,
    pub isMultiGpuBoard: c_int,
    pub canMapHostMemory: c_int,
    pub gcnArch: c_int,
    pub gcnArchName: [c_char; 256],
    pub integrated: c_int,
    pub cooperativeLaunch: c_int,
    pub cooperativeMultiDeviceLaunch: c_int,
    pub maxTexture1DLinear: c_int,
    pub maxTexture1D: c_int,
    pub maxTexture2D: [c_int; 2],
    pub maxTexture3D: [c_int; 3],
    pub hdpMemFlushCntl: *mut c_uint,
    pub hdpRegFlushCntl: *mut c_uint,
    pub memPitch: usize,
    pub textureAlignment: usize,
    pub texturePitchAlignment: usize,
    pub kernelExecTimeoutEnabled: c_int,
    pub ECCEnabled: c_int,
    pub tccDriver: c_int,
    pub cooperativeMultiDeviceUnmatchedFunc: c_int,
    pub cooperativeMultiDeviceUnmatchedGridDim: c_int,
    pub cooperativeMultiDeviceUnmatchedBlockDim: c_int,
    pub cooperativeMultiDeviceUnmatchedSharedMem: c_int,
    pub isLargeBar: c_int,
    pub asicRevision: c_int,
    pub managedMemory: c_int,
    pub directManagedMemAccessFromHost: c_int,
    pub concurrentManagedAccess: c_int,
    pub pageableMemoryAccess: c_int,
    pub pageableMemoryAccessUsesHostPageTables: c_int,
}

/// Bytes of [`DeviceProp`], and where the backend reads its two strings.
pub const PROP_BYTES: usize = 792;
pub const NAME_OFFSET: usize = 0;
pub const GCN_ARCH_NAME_OFFSET: usize = 396;

const _: () = assert!(std::mem::size_of::<DeviceProp>() == PROP_BYTES);
const _: () = assert!(std::mem::offset_of!(DeviceProp, name) == NAME_OFFSET);
const _: () = assert!(std::mem::offset_of!(DeviceProp, gcnArchName) == GCN_ARCH_NAME_OFFSET);

/// Largest workgroup on every RDNA3/RDNA4 target (the ISA's 1024 work-items).
pub const MAX_THREADS_PER_BLOCK: u32 = 1024;
/// LDS one workgroup may hold: 64 KiB on gfx11/gfx12 (RDNA3/RDNA4 ISA guides).
pub const LDS_PER_BLOCK: u32 = 64 << 10;
/// Grid limits HIP reports for gfx11/gfx12 (x up to 2^31 - 1, y and z up to 65535).
pub const MAX_GRID: [u32; 3] = [i32::MAX as u32, 65535, 65535];

/// The device name, which says what this is: the backend puts it into every device name it
/// prints, so no log mistakes the emulated runtime for a GPU.
pub fn device_name(machine: &Machine) -> String {
    format!(
        "w4a16 emulated HIP runtime (ISA emulator as {}, {})",
        machine.gfx, machine.product
    )
}

fn copy_str(dst: &mut [c_char; 256], s: &str) {
    for (d, b) in dst.iter_mut().zip(s.bytes().take(255)) {
        *d = b as c_char;
    }
}

/// The properties of the emulated `machine`, its memory bound `memory_bytes`.
pub fn describe(machine: &Machine, memory_bytes: usize) -> DeviceProp {
    // SAFETY: every field is an integer, an array of integers or a raw pointer: all-zero is a
    // valid value of each.
    let mut p: DeviceProp = unsafe { std::mem::zeroed() };
    copy_str(&mut p.name, &device_name(machine));
    copy_str(&mut p.gcnArchName, machine.gfx);
    let number: c_int = machine.gfx.trim_start_matches("gfx").parse().unwrap_or(0);
    p.gcnArch = number;
    p.major = number / 100;
    // gfx1151: 11.5; the last digit is the stepping, which HIP does not report here.
    p.minor = number % 100 / 10;
    p.totalGlobalMem = memory_bytes;
    p.sharedMemPerBlock = LDS_PER_BLOCK as usize;
    p.maxSharedMemoryPerMultiProcessor = LDS_PER_BLOCK as usize;
    p.regsPerBlock = 65536;
    p.warpSize = 32;
    p.maxThreadsPerBlock = MAX_THREADS_PER_BLOCK as c_int;
    p.maxThreadsDim = [MAX_THREADS_PER_BLOCK as c_int; 3];
    p.maxGridSize = MAX_GRID.map(|g| g as c_int);
    p.clockRate = (machine.clock_mhz.value * 1000.0) as c_int;
    p.clockInstructionRate = p.clockRate;
    p.multiProcessorCount = machine.compute_units.value as c_int;
    p.maxThreadsPerMultiProcessor = 2048;
    p.totalConstMem = memory_bytes;
    p.concurrentKernels = 1;
    p.integrated = c_int::from(machine.gfx == "gfx1151");
    p.canMapHostMemory = 1;
    p.memPitch = memory_bytes;
    p.textureAlignment = 256;
    p
}
