//! `hipModuleLoadData`: a code object handed over as a pointer to its bytes, read the way the
//! runtime reads it (the ELF header says how long the image is), checked against the emulated
//! device's target, then loaded into the ISA emulator as `device/src/emu.rs` loads it: the
//! metadata note parsed once (`w4a16-codeobject`), the machine code through LLVM's disassembler.

use std::io::Write;

use w4a16_codeobject::{self as codeobject, CodeObjectInfo};
use w4a16_emu::program::{KernelMeta, LoadError, Program};

use crate::error::{HipError, HipResult};

/// What the emulator needs to run a module's kernels, and what launches are checked against.
pub struct Module {
    pub program: Program,
    pub info: CodeObjectInfo,
}

const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];
/// An ELF64 header.
const EHDR_BYTES: usize = 64;
/// Refuse images claiming more than this (no code object of the kernel set comes near it).
const MAX_IMAGE_BYTES: u64 = 1 << 30;

fn u16_at(b: &[u8], o: usize) -> u64 {
    u64::from(u16::from_le_bytes([b[o], b[o + 1]]))
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(v)
}

/// The length of the ELF64 image at `image`: the end of its section header table or of its
/// program header table, whichever is further (clang puts the section headers last).
///
/// # Safety
/// `image` must point to readable memory holding a whole ELF image (what HIP demands of
/// hipModuleLoadData's argument); only its header is read before its length is known.
pub unsafe fn image_len(image: *const u8) -> HipResult<usize> {
    // SAFETY: the caller promises an ELF image, which is at least its 64-byte header long;
    // the magic is checked first so a short non-ELF buffer is only read 4 bytes into.
    let magic = unsafe { std::slice::from_raw_parts(image, 4) };
    if magic != ELF_MAGIC {
        return Err(HipError::InvalidImage(format!(
            "the image starts with {magic:02x?}, not an ELF header (clang offload bundles are not read by this runtime)"
        )));
    }
    // SAFETY: as above: an ELF file holds its whole header.
    let h = unsafe { std::slice::from_raw_parts(image, EHDR_BYTES) };
    if h[4] != 2 || h[5] != 1 {
        return Err(HipError::InvalidImage(
            "not a 64-bit little-endian ELF image".into(),
        ));
    }
    let sh_end = u64_at(h, 0x28) + u16_at(h, 0x3a) * u16_at(h, 0x3c);
    let ph_end = u64_at(h, 0x20) + u16_at(h, 0x36) * u16_at(h, 0x38);
    let len = sh_end.max(ph_end).max(EHDR_BYTES as u64);
    if len > MAX_IMAGE_BYTES {
        return Err(HipError::InvalidImage(format!(
            "the ELF header describes a {len}-byte image"
        )));
    }
    Ok(len as usize)
}

/// Loads `bytes` for the emulated `gfx`: not a code object is `InvalidImage`, another target's
/// is `NoBinaryForGpu`, no disassembler is `NotSupported` (the runtime cannot read machine code).
pub fn load(bytes: &[u8], gfx: &str) -> HipResult<Module> {
    let info = codeobject::parse(bytes)
        .map_err(|e| HipError::InvalidImage(format!("not an AMDGPU code object: {e}")))?;
    if info.gfx() != gfx {
        return Err(HipError::NoBinaryForGpu(format!(
            "the code object is for {} (`{}`), the device is {gfx}",
            info.gfx(),
            info.target
        )));
    }
    // The emulator disassembles a file: the image goes to a temporary one, removed on return.
    let mut file = tempfile::Builder::new()
        .prefix("w4a16-hip-emu-")
        .suffix(".co")
        .tempfile()
        .map_err(|e| HipError::NotSupported(format!("a temporary file for the image: {e}")))?;
    file.write_all(bytes)
        .and_then(|()| file.flush())
        .map_err(|e| HipError::NotSupported(format!("writing the image: {e}")))?;
    let program = Program::load(file.path(), gfx, |name| KernelMeta::of(&info, name)).map_err(
        |e| match e {
            LoadError::Toolchain { .. } => HipError::NotSupported(e.to_string()),
            other => HipError::InvalidImage(other.to_string()),
        },
    )?;
    Ok(Module { program, info })
}
