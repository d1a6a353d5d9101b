//! A tiny test kernel compiled for each target at test time, so the runtime is tested on real
//! code objects without the kernel set's argument lists: `add_one(in, out, k)` writes
//! `out[i] = in[i] + k` for `i = workgroup * 64 + lane`, with no bounds check (a grid past the
//! buffers reads past `in`), built for at most 256 work-items per block.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use w4a16_kernels::amd::Toolchain;
use w4a16_require::{Requirement, Skip, skip_or_fail};

pub const SOURCE: &str = r#"
extern "C" __attribute__((global, amdgpu_flat_work_group_size(1, 256)))
void add_one(const float* in, float* out, float k) {
  unsigned i = __builtin_amdgcn_workgroup_id_x() * 64u + __builtin_amdgcn_workitem_id_x();
  out[i] = in[i] + k;
}
"#;

/// Bytes of `add_one`'s explicit arguments: two pointers and a float.
pub const ARG_BYTES: usize = 20;

/// The test kernel's code object for `gfx`; `None` after a loud skip without a toolchain.
pub fn add_one(gfx: &str) -> Option<Vec<u8>> {
    let toolchain = match Toolchain::discover() {
        Ok(t) => t,
        Err(e) => {
            skip_or_fail(&Skip {
                requirement: Requirement::AmdToolchain,
                reason: format!("compiling the hip-emu test kernel: {e}"),
            });
            return None;
        }
    };
    if let Err(e) = w4a16_emu::program::objdump_tool() {
        skip_or_fail(&Skip {
            requirement: Requirement::AmdToolchain,
            reason: format!("the emulated runtime disassembles code objects: {e}"),
        });
        return None;
    }
    let dir = tempfile::tempdir().expect("a temporary folder");
    let src = dir.path().join("add_one.hip");
    let out: PathBuf = dir.path().join(format!("add_one-{gfx}.co"));
    std::fs::write(&src, SOURCE).expect("writing the test kernel");
    let status = Command::new(&toolchain.clang)
        .args([
            "-x",
            "hip",
            "--cuda-device-only",
            "--no-gpu-bundle-output",
            "-O3",
        ])
        .args(["-nogpulib", "-nogpuinc"])
        .arg(format!("--offload-arch={gfx}"))
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .output()
        .expect("running clang");
    assert!(
        status.status.success(),
        "clang: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    Some(std::fs::read(&out).expect("the built code object"))
}

/// `add_one`'s argument buffer.
pub fn args(input: u64, output: u64, k: f32) -> Vec<u8> {
    let mut b = Vec::with_capacity(ARG_BYTES);
    b.extend_from_slice(&input.to_le_bytes());
    b.extend_from_slice(&output.to_le_bytes());
    b.extend_from_slice(&k.to_le_bytes());
    b
}
