//! The HIP sources of the kernel set, embedded at build time so that a test binary carries the
//! exact sources it was built with (the GPU machine compiles them at run time with NVRTC).
//!
//! Every kernel file includes `compat.h` once, with the line `#include "compat.h"`. For AMD the
//! files compile as they are (clang `-I kernels/hip`); for NVRTC, which has no file system
//! include for it, [`nvrtc_translation_unit`] splices the header in place of that line.

use crate::decl::KernelId;
use std::path::PathBuf;

pub const COMPAT_H: &str = include_str!("../hip/compat.h");
pub const SKINNY_HIP: &str = include_str!("../hip/skinny.hip");
pub const FUSED_HIP: &str = include_str!("../hip/fused.hip");
pub const DEQUANT_HIP: &str = include_str!("../hip/dequant.hip");
pub const FALLBACK_HIP: &str = include_str!("../hip/fallback.hip");

/// The include line every kernel file carries exactly once.
pub const COMPAT_INCLUDE: &str = "#include \"compat.h\"";

/// The kernels that have a HIP source (`dense` runs in the vendor BLAS).
pub const WITH_SOURCE: [KernelId; 4] = [
    KernelId::Skinny,
    KernelId::Fused,
    KernelId::Dequant,
    KernelId::Fallback,
];

/// File name under `kernels/hip/`.
pub fn file_name(kernel: KernelId) -> Option<&'static str> {
    match kernel {
        KernelId::Skinny => Some("skinny.hip"),
        KernelId::Fused => Some("fused.hip"),
        KernelId::Dequant => Some("dequant.hip"),
        KernelId::Fallback => Some("fallback.hip"),
        KernelId::Dense => None,
    }
}

/// The kernel's source text as embedded; `None` for `dense`.
pub fn source(kernel: KernelId) -> Option<&'static str> {
    match kernel {
        KernelId::Skinny => Some(SKINNY_HIP),
        KernelId::Fused => Some(FUSED_HIP),
        KernelId::Dequant => Some(DEQUANT_HIP),
        KernelId::Fallback => Some(FALLBACK_HIP),
        KernelId::Dense => None,
    }
}

/// The folder holding the sources on this checkout (for clang's `-I` and for tools that want
/// files rather than strings).
pub fn hip_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("hip")
}

/// A source without its single compat include, or with more than one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}: expected exactly one line `{COMPAT_INCLUDE}`, found {found}")]
pub struct IncludeError {
    pub file: &'static str,
    pub found: usize,
}

/// Splices `compat` in place of the include line of `src`.
pub fn splice_compat(file: &'static str, src: &str, compat: &str) -> Result<String, IncludeError> {
    let found = src.lines().filter(|l| l.trim() == COMPAT_INCLUDE).count();
    if found != 1 {
        return Err(IncludeError { file, found });
    }
    let mut out = String::with_capacity(src.len() + compat.len() + 128);
    for line in src.lines() {
        if line.trim() == COMPAT_INCLUDE {
            out.push_str("// ---- begin compat.h (inlined) ----\n");
            out.push_str(compat);
            if !compat.ends_with('\n') {
                out.push('\n');
            }
            out.push_str("// ---- end compat.h ----\n");
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(out)
}

/// The NVRTC-ready translation unit of `kernel`: its source with `compat.h` inlined. `None` for
/// `dense`.
pub fn nvrtc_translation_unit(kernel: KernelId) -> Option<Result<String, IncludeError>> {
    let file = file_name(kernel)?;
    let src = source(kernel)?;
    Some(splice_compat(file, src, COMPAT_H))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_inlines_to_one_unit_without_includes_of_its_own() {
        for kernel in WITH_SOURCE {
            let tu = nvrtc_translation_unit(kernel).unwrap().unwrap();
            assert!(!tu.contains(COMPAT_INCLUDE), "{kernel}");
            assert_eq!(tu.matches("#pragma once").count(), 1, "{kernel}");
            assert!(tu.contains("namespace w4"), "{kernel}");
            // Only the vendor headers remain as includes.
            for line in tu
                .lines()
                .filter(|l| l.trim_start().starts_with("#include"))
            {
                assert!(
                    [
                        "<cuda_fp16.h>",
                        "<cuda_bf16.h>",
                        "<hip/hip_runtime.h>",
                        "<stdint.h>"
                    ]
                    .iter()
                    .any(|h| line.contains(h)),
                    "{kernel}: unexpected include {line}"
                );
            }
        }
        assert!(nvrtc_translation_unit(KernelId::Dense).is_none());
    }

    #[test]
    fn a_missing_or_doubled_include_is_refused() {
        assert_eq!(
            splice_compat("x.hip", "int a;\n", "//c\n"),
            Err(IncludeError {
                file: "x.hip",
                found: 0
            })
        );
        let twice = format!("{COMPAT_INCLUDE}\n{COMPAT_INCLUDE}\n");
        assert_eq!(
            splice_compat("x.hip", &twice, "//c\n"),
            Err(IncludeError {
                file: "x.hip",
                found: 2
            })
        );
        assert_eq!(
            splice_compat("x.hip", &format!("a\n{COMPAT_INCLUDE}\nb\n"), "//c")
                .unwrap()
                .lines()
                .count(),
            5
        );
    }

    #[test]
    fn embedded_sources_are_the_files_on_disk() {
        for kernel in WITH_SOURCE {
            let path = hip_dir().join(file_name(kernel).unwrap());
            let on_disk = std::fs::read_to_string(&path).unwrap();
            assert_eq!(on_disk, source(kernel).unwrap(), "{}", path.display());
        }
    }
}
