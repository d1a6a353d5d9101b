//! The device bitcode every kernel links (ockl and the oclc control constants), and the
//! `oclc_isa_version_*` modules Debian 12's ROCm 5.2 libraries lack for gfx11/gfx12, generated.

use super::builder::unique_tmp;
use super::{AmdBuildError, io_err, isa_version};
use crate::target::Target;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The device bitcode linked into every kernel: ockl (work-item queries) and the oclc control
/// constants hipcc would choose (no fast-math, IEEE denormals, correctly rounded sqrt).
pub(super) fn device_bitcode(
    bitcode_dir: &Path,
    target: Target,
    generated_dir: &Path,
) -> Vec<PathBuf> {
    let wave64 = if target.wave_size() == 64 {
        "on"
    } else {
        "off"
    };
    let mut out: Vec<PathBuf> = [
        "ockl.bc".to_owned(),
        "oclc_abi_version_500.bc".to_owned(),
        format!("oclc_wavefrontsize64_{wave64}.bc"),
        "oclc_daz_opt_off.bc".to_owned(),
        "oclc_finite_only_off.bc".to_owned(),
        "oclc_unsafe_math_off.bc".to_owned(),
        "oclc_correctly_rounded_sqrt_on.bc".to_owned(),
    ]
    .iter()
    .map(|f| bitcode_dir.join(f))
    .collect();
    out.push(isa_version_bitcode_path(bitcode_dir, target, generated_dir));
    out
}

fn isa_version_file(target: Target) -> String {
    format!(
        "oclc_isa_version_{}.bc",
        target.name().trim_start_matches("gfx")
    )
}

pub(super) fn isa_version_bitcode_path(
    bitcode_dir: &Path,
    target: Target,
    generated_dir: &Path,
) -> PathBuf {
    let installed = bitcode_dir.join(isa_version_file(target));
    if installed.is_file() {
        installed
    } else {
        generated_dir.join(isa_version_file(target))
    }
}

/// Writes the one-constant `oclc_isa_version` module the device libraries lack for `target`.
pub(super) fn generate_isa_version(
    clang: &Path,
    target: Target,
    out: &Path,
) -> Result<(), AmdBuildError> {
    let Some(version) = isa_version(target) else {
        return Err(AmdBuildError::ToolchainMissing {
            what: format!("an oclc_isa_version bitcode for {target}"),
            looked_in: vec![out.to_path_buf()],
        });
    };
    let dir = out.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_err(dir, "creating directory"))?;
    // Unique names: several test binaries may generate the same file at once.
    let ll = unique_tmp(&out.with_extension("ll"));
    let ir = format!(
        "target triple = \"amdgcn-amd-amdhsa\"\n\
         @__oclc_ISA_version = linkonce_odr protected local_unnamed_addr addrspace(4) constant i32 {version}, align 4\n"
    );
    std::fs::write(&ll, ir).map_err(io_err(&ll, "writing"))?;
    let tmp = unique_tmp(out);
    let res = Command::new(clang)
        .args([
            "-c",
            "-emit-llvm",
            "-nogpulib",
            "--target=amdgcn-amd-amdhsa",
            "-x",
            "ir",
        ])
        .arg(&ll)
        .arg("-o")
        .arg(&tmp)
        .output()
        .map_err(io_err(clang, "running"));
    let _ = std::fs::remove_file(&ll);
    let res = res?;
    if !res.status.success() {
        return Err(AmdBuildError::Compile {
            source_path: ll,
            target,
            status: res.status.to_string(),
            stderr: String::from_utf8_lossy(&res.stderr).into_owned(),
        });
    }
    std::fs::rename(&tmp, out).map_err(io_err(out, "renaming into place"))
}
