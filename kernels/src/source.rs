//! The HIP sources of the kernel set, embedded at build time so that a test binary carries the
//! exact sources it was built with (the GPU machine compiles them at run time with NVRTC), or
//! read at run time from a folder ([`KernelSources::Directory`], `w4a16 run --kernel-sources DIR`)
//! so that edited or deliberately mutated kernels can be checked without rebuilding.
//!
//! Every kernel file includes `compat.h` once, with the line `#include "compat.h"`, and `compat.h`
//! includes `amd_emulation.h` once (used only under `-DW4_EMULATE_AMD`, the emulated AMD
//! targets). The GEMMs built on the tile main loop (`fused.hip`, `moe.hip`) also include
//! `gemm_tile.h` once, after `compat.h` ([`SourceFile::headers`] lists which). For AMD the files
//! compile as they are (clang `-I kernels/hip`); for NVRTC, which has no file system include for
//! them, [`nvrtc_translation_unit`] splices the headers in place of their include lines.

use crate::decl::KernelId;
use std::borrow::Cow;
use std::path::{Path, PathBuf};

pub const COMPAT_H: &str = include_str!("../hip/compat.h");
pub const AMD_EMULATION_H: &str = include_str!("../hip/amd_emulation.h");
pub const SKINNY_HIP: &str = include_str!("../hip/skinny.hip");
pub const FUSED_HIP: &str = include_str!("../hip/fused.hip");
pub const DEQUANT_HIP: &str = include_str!("../hip/dequant.hip");
pub const FALLBACK_HIP: &str = include_str!("../hip/fallback.hip");
pub const GEMM_TILE_H: &str = include_str!("../hip/gemm_tile.h");
pub const MOE_ALIGN_HIP: &str = include_str!("../hip/moe_align.hip");
pub const MOE_HIP: &str = include_str!("../hip/moe.hip");

/// The include line every kernel file carries exactly once.
pub const COMPAT_INCLUDE: &str = "#include \"compat.h\"";
/// The include line `compat.h` carries exactly once (inside its `W4_EMULATE_AMD` branch).
pub const AMD_EMULATION_INCLUDE: &str = "#include \"amd_emulation.h\"";
/// The include line of the tile main loop, once in each file [`SourceFile::headers`] names it for.
pub const GEMM_TILE_INCLUDE: &str = "#include \"gemm_tile.h\"";

/// Which file holds each kernel's entry points (`dense` runs in the vendor BLAS, so it has none):
/// the one table [`WITH_SOURCE`], [`SourceFile::of_kernel`], [`file_name`], [`source`] and each
/// declaration's `source_file` are read from.
const KERNEL_FILES: [(KernelId, SourceFile); 7] = [
    (KernelId::Skinny, SourceFile::Skinny),
    (KernelId::Fused, SourceFile::Fused),
    (KernelId::Dequant, SourceFile::Dequant),
    (KernelId::Fallback, SourceFile::Fallback),
    (KernelId::MoeAlign, SourceFile::MoeAlign),
    (KernelId::Moe, SourceFile::Moe),
    (KernelId::FusedCarrier, SourceFile::Fused),
];

/// The kernels that have a HIP source, in [`KERNEL_FILES`] order.
pub const WITH_SOURCE: [KernelId; KERNEL_FILES.len()] = {
    let mut out = [KernelId::Dense; KERNEL_FILES.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = KERNEL_FILES[i].0;
        i += 1;
    }
    out
};

/// The preprocessor switches (`NAME=value`) a kernel's source is compiled with, by NVRTC and by
/// clang alike: `fused_carrier` is fused.hip with the carrier read and its entry points switched
/// on. Each kernel's translation unit (and code object) thus holds exactly its own entries.
pub fn defines(kernel: KernelId) -> &'static [&'static str] {
    match kernel {
        KernelId::FusedCarrier => &["W4_FUSED_CARRIER=1"],
        _ => &[],
    }
}

/// [`defines`] as compiler options (`-DNAME=value`).
pub fn define_options(kernel: KernelId) -> Vec<String> {
    defines(kernel).iter().map(|d| format!("-D{d}")).collect()
}

w4a16_reference::named_enum! {
    /// One file of the kernel set's sources under `kernels/hip/` (the shared header included).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum SourceFile {
        Compat = "compat.h",
        AmdEmulation = "amd_emulation.h",
        GemmTile = "gemm_tile.h",
        Skinny = "skinny.hip",
        Fused = "fused.hip",
        Dequant = "dequant.hip",
        Fallback = "fallback.hip",
        MoeAlign = "moe_align.hip",
        Moe = "moe.hip",
    }
}

impl SourceFile {
    /// The text compiled into this binary.
    pub fn embedded(self) -> &'static str {
        match self {
            SourceFile::Compat => COMPAT_H,
            SourceFile::AmdEmulation => AMD_EMULATION_H,
            SourceFile::GemmTile => GEMM_TILE_H,
            SourceFile::Skinny => SKINNY_HIP,
            SourceFile::Fused => FUSED_HIP,
            SourceFile::Dequant => DEQUANT_HIP,
            SourceFile::Fallback => FALLBACK_HIP,
            SourceFile::MoeAlign => MOE_ALIGN_HIP,
            SourceFile::Moe => MOE_HIP,
        }
    }

    /// The file holding `kernel`'s entry points; `None` for `dense`.
    pub const fn of_kernel(kernel: KernelId) -> Option<SourceFile> {
        let mut i = 0;
        while i < KERNEL_FILES.len() {
            if KERNEL_FILES[i].0 as u8 == kernel as u8 {
                return Some(KERNEL_FILES[i].1);
            }
            i += 1;
        }
        None
    }

    /// Whether this is a header every translation unit contains (`compat.h`, `amd_emulation.h`).
    pub fn is_shared_header(self) -> bool {
        matches!(self, SourceFile::Compat | SourceFile::AmdEmulation)
    }

    /// The headers beyond `compat.h` this kernel file includes, each once, in splice order: the
    /// tile main loop for the GEMMs built on it.
    pub fn headers(self) -> &'static [SourceFile] {
        match self {
            SourceFile::Fused | SourceFile::Moe => &[SourceFile::GemmTile],
            _ => &[],
        }
    }

    /// The kernels whose translation unit contains this file (the shared headers: all of them).
    pub fn kernels(self) -> Vec<KernelId> {
        WITH_SOURCE
            .into_iter()
            .filter(|k| {
                let file = SourceFile::of_kernel(*k);
                self.is_shared_header()
                    || file == Some(self)
                    || file.is_some_and(|f| f.headers().contains(&self))
            })
            .collect()
    }
}

/// Where a run takes the kernel sources from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum KernelSources {
    /// The copies compiled into this binary (`include_str!`), identical to `kernels/hip/` of the
    /// checkout it was built from.
    #[default]
    Embedded,
    /// A folder holding every [`SourceFile`], read when a kernel is compiled.
    Directory(PathBuf),
}

/// Sources that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error(
        "kernel sources {}: {file} cannot be read ({reason}); the folder must hold {}",
        dir.display(),
        SourceFile::ALL.map(SourceFile::name).join(", ")
    )]
    Missing {
        dir: PathBuf,
        file: SourceFile,
        reason: String,
    },
    #[error("kernel sources {}: not a directory", dir.display())]
    NotADirectory { dir: PathBuf },
    #[error(transparent)]
    Include(#[from] IncludeError),
}

impl KernelSources {
    /// Sources read from `dir`; every file of the set must be there and readable (checked now,
    /// so that a missing file is named before any case runs).
    pub fn directory(dir: impl Into<PathBuf>) -> Result<KernelSources, SourceError> {
        let dir = dir.into();
        if !dir.is_dir() {
            return Err(SourceError::NotADirectory { dir });
        }
        let sources = KernelSources::Directory(dir);
        for file in SourceFile::ALL {
            sources.read(file)?;
        }
        Ok(sources)
    }

    /// A digest of every file of the set as this run reads it: two runs with the same digest
    /// compiled the same kernel text, so their timings may go into one report.
    pub fn digest(&self) -> Result<String, SourceError> {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for file in SourceFile::ALL {
            for part in [
                file.name().as_bytes(),
                b"\0",
                self.read(file)?.as_bytes(),
                b"\0",
            ] {
                h.update(part);
            }
        }
        Ok(format!("xxh3:{:016x}", h.digest()))
    }

    /// The text of `file`.
    pub fn read(&self, file: SourceFile) -> Result<Cow<'static, str>, SourceError> {
        match self {
            KernelSources::Embedded => Ok(Cow::Borrowed(file.embedded())),
            KernelSources::Directory(dir) => std::fs::read_to_string(dir.join(file.name()))
                .map(Cow::Owned)
                .map_err(|e| SourceError::Missing {
                    dir: dir.clone(),
                    file,
                    reason: e.to_string(),
                }),
        }
    }

    /// The folder the files are in on disk: `kernels/hip/` of this checkout for the embedded
    /// copies (for clang's `-I` and tools that want files).
    pub fn dir(&self) -> PathBuf {
        match self {
            KernelSources::Embedded => hip_dir(),
            KernelSources::Directory(d) => d.clone(),
        }
    }

    /// The path of `file` (see [`KernelSources::dir`]).
    pub fn path(&self, file: SourceFile) -> PathBuf {
        self.dir().join(file.name())
    }

    /// The NVRTC-ready translation unit of `kernel`: its source with `compat.h` (and the
    /// emulation header inside it) inlined. `None` for `dense`.
    pub fn translation_unit(&self, kernel: KernelId) -> Option<Result<String, SourceError>> {
        let file = SourceFile::of_kernel(kernel)?;
        Some((|| {
            let mut src = self.read(file)?.into_owned();
            for header in file.headers() {
                let text = self.read(*header)?;
                src = splice_header(file, &src, *header, &text)?;
            }
            let compat = self.read(SourceFile::Compat)?;
            let emulation = self.read(SourceFile::AmdEmulation)?;
            Ok(splice_headers(file.name(), &src, &compat, &emulation)?)
        })())
    }

    /// The command-line spelling: `None` for the embedded copies, the folder otherwise.
    pub fn as_dir_arg(&self) -> Option<&Path> {
        match self {
            KernelSources::Embedded => None,
            KernelSources::Directory(d) => Some(d),
        }
    }
}

impl std::fmt::Display for KernelSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelSources::Embedded => f.write_str("embedded kernel sources"),
            KernelSources::Directory(d) => write!(f, "kernel sources from {}", d.display()),
        }
    }
}

/// File name under `kernels/hip/` of `kernel`'s source; `None` for `dense`. A `const fn`, so
/// that each declaration's `source_file` is this, not a second spelling.
pub const fn file_name(kernel: KernelId) -> Option<&'static str> {
    match SourceFile::of_kernel(kernel) {
        Some(file) => Some(file.name()),
        None => None,
    }
}

/// The kernel's source text as embedded; `None` for `dense`.
pub fn source(kernel: KernelId) -> Option<&'static str> {
    SourceFile::of_kernel(kernel).map(SourceFile::embedded)
}

/// The folder holding the sources on this checkout (for clang's `-I` and for tools that want
/// files rather than strings).
pub fn hip_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("hip")
}

/// A source without its single include line of a header, or with more than one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}: expected exactly one line `{include}`, found {found}")]
pub struct IncludeError {
    pub file: &'static str,
    pub include: &'static str,
    pub found: usize,
}

/// Splices `header` (named `header_name`) in place of the one line `include` of `src`.
fn splice_one(
    file: &'static str,
    src: &str,
    include: &'static str,
    header_name: &str,
    header: &str,
) -> Result<String, IncludeError> {
    let found = src.lines().filter(|l| l.trim() == include).count();
    if found != 1 {
        return Err(IncludeError {
            file,
            include,
            found,
        });
    }
    let mut out = String::with_capacity(src.len() + header.len() + 128);
    for line in src.lines() {
        if line.trim() == include {
            out.push_str(&format!("// ---- begin {header_name} (inlined) ----\n"));
            out.push_str(header);
            if !header.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&format!("// ---- end {header_name} ----\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(out)
}

/// Splices `compat` in place of the include line of `src`.
pub fn splice_compat(file: &'static str, src: &str, compat: &str) -> Result<String, IncludeError> {
    splice_one(file, src, COMPAT_INCLUDE, "compat.h", compat)
}

/// Splices `emulation` into `compat` in place of its include line, then the result into `src`.
pub fn splice_headers(
    file: &'static str,
    src: &str,
    compat: &str,
    emulation: &str,
) -> Result<String, IncludeError> {
    let compat = splice_one(
        SourceFile::Compat.name(),
        compat,
        AMD_EMULATION_INCLUDE,
        SourceFile::AmdEmulation.name(),
        emulation,
    )?;
    splice_compat(file, src, &compat)
}

/// Splices `text`, the header `header` (one of `file.headers()`), in place of its one include
/// line in `src`.
fn splice_header(
    file: SourceFile,
    src: &str,
    header: SourceFile,
    text: &str,
) -> Result<String, IncludeError> {
    let include = match header {
        SourceFile::Compat => COMPAT_INCLUDE,
        SourceFile::AmdEmulation => AMD_EMULATION_INCLUDE,
        _ => GEMM_TILE_INCLUDE,
    };
    splice_one(file.name(), src, include, header.name(), text)
}

/// The NVRTC-ready translation unit of `kernel` from the embedded sources. `None` for `dense`.
pub fn nvrtc_translation_unit(kernel: KernelId) -> Option<Result<String, IncludeError>> {
    let file = SourceFile::of_kernel(kernel)?;
    let mut src = file.embedded().to_owned();
    for header in file.headers() {
        src = match splice_header(file, &src, *header, header.embedded()) {
            Ok(s) => s,
            Err(e) => return Some(Err(e)),
        };
    }
    Some(splice_headers(file.name(), &src, COMPAT_H, AMD_EMULATION_H))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_inlines_to_one_unit_without_includes_of_its_own() {
        for kernel in WITH_SOURCE {
            let tu = nvrtc_translation_unit(kernel).unwrap().unwrap();
            assert!(!tu.contains(COMPAT_INCLUDE), "{kernel}");
            assert!(!tu.contains(AMD_EMULATION_INCLUDE), "{kernel}");
            assert!(tu.contains("namespace gcn"), "{kernel}");
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
                        "<stdint.h>",
                        // amd_emulation.h as host C++ (its CPU tests), never under NVRTC
                        "<cstring>"
                    ]
                    .iter()
                    .any(|h| line.contains(h)),
                    "{kernel}: unexpected include {line}"
                );
            }
        }
        assert!(nvrtc_translation_unit(KernelId::Dense).is_none());
    }

    /// The digest follows the text: the embedded copies and a folder holding the same files
    /// agree, and one changed byte in one file changes it.
    #[test]
    fn the_digest_is_the_text_of_every_file() {
        let dir = tempfile::tempdir().unwrap();
        for file in SourceFile::ALL {
            std::fs::write(dir.path().join(file.name()), file.embedded()).unwrap();
        }
        let copy = KernelSources::directory(dir.path()).unwrap();
        let embedded = KernelSources::Embedded.digest().unwrap();
        assert_eq!(copy.digest().unwrap(), embedded);
        let fallback = dir.path().join(SourceFile::Fallback.name());
        let text = SourceFile::Fallback.embedded().replacen("0", "1", 1);
        std::fs::write(&fallback, text).unwrap();
        assert_ne!(copy.digest().unwrap(), embedded);
    }

    /// The header list is the include lines: a kernel file includes `gemm_tile.h` exactly when
    /// `headers` says so (a stray include would fail NVRTC, a missing one the splice).
    #[test]
    fn kernel_headers_are_the_files_include_lines() {
        for file in SourceFile::ALL {
            let includes = file
                .embedded()
                .lines()
                .filter(|l| l.trim() == GEMM_TILE_INCLUDE)
                .count();
            let listed = usize::from(file.headers().contains(&SourceFile::GemmTile));
            assert_eq!(includes, listed, "{file}");
        }
        let tu = nvrtc_translation_unit(KernelId::Moe).unwrap().unwrap();
        assert_eq!(tu.matches("#define W4_GEMM_TILE_H").count(), 1);
        assert!(tu.find("namespace w4 {") < tu.find("namespace tile {"));
    }

    #[test]
    fn a_missing_or_doubled_include_is_refused() {
        assert_eq!(
            splice_compat("x.hip", "int a;\n", "//c\n"),
            Err(IncludeError {
                file: "x.hip",
                include: COMPAT_INCLUDE,
                found: 0
            })
        );
        let twice = format!("{COMPAT_INCLUDE}\n{COMPAT_INCLUDE}\n");
        assert_eq!(
            splice_compat("x.hip", &twice, "//c\n"),
            Err(IncludeError {
                file: "x.hip",
                include: COMPAT_INCLUDE,
                found: 2
            })
        );
        // compat.h without its emulation include is refused, naming compat.h and the line.
        let e = splice_headers("x.hip", &format!("{COMPAT_INCLUDE}\n"), "//c\n", "//e\n");
        assert_eq!(
            e,
            Err(IncludeError {
                file: "compat.h",
                include: AMD_EMULATION_INCLUDE,
                found: 0
            })
        );
        let tu = splice_headers(
            "x.hip",
            &format!("a\n{COMPAT_INCLUDE}\nb\n"),
            &format!("c0\n{AMD_EMULATION_INCLUDE}\nc1\n"),
            "e\n",
        )
        .unwrap();
        assert_eq!(
            tu.lines()
                .filter(|l| !l.starts_with("// ----"))
                .collect::<Vec<_>>(),
            ["a", "c0", "e", "c1", "b"]
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
        for file in SourceFile::ALL {
            let path = hip_dir().join(file.name());
            let on_disk = std::fs::read_to_string(&path).unwrap();
            assert_eq!(on_disk, file.embedded(), "{}", path.display());
        }
    }

    #[test]
    fn a_directory_reads_its_own_files_and_names_a_missing_one() {
        let dir = std::env::temp_dir().join(format!("w4a16-sources-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for file in SourceFile::ALL {
            std::fs::write(dir.join(file.name()), file.embedded()).unwrap();
        }
        let edited = format!("{SKINNY_HIP}// edited\n");
        std::fs::write(dir.join("skinny.hip"), &edited).unwrap();
        let sources = KernelSources::directory(&dir).unwrap();
        assert_eq!(sources.read(SourceFile::Skinny).unwrap(), edited);
        let tu = sources.translation_unit(KernelId::Skinny).unwrap().unwrap();
        assert!(tu.ends_with("// edited\n") && tu.contains("namespace w4"));
        assert_eq!(
            sources.translation_unit(KernelId::Fused).unwrap().unwrap(),
            nvrtc_translation_unit(KernelId::Fused).unwrap().unwrap()
        );
        assert_eq!(sources.path(SourceFile::Fused), dir.join("fused.hip"));

        std::fs::remove_file(dir.join("dequant.hip")).unwrap();
        match KernelSources::directory(&dir) {
            Err(SourceError::Missing { file, dir: d, .. }) => {
                assert_eq!((file, d), (SourceFile::Dequant, dir.clone()));
            }
            other => panic!("expected a missing dequant.hip, got {other:?}"),
        }
        // A source that disappears after the check is named when it is read.
        assert!(matches!(
            sources.translation_unit(KernelId::Dequant),
            Some(Err(SourceError::Missing {
                file: SourceFile::Dequant,
                ..
            }))
        ));
        let msg = KernelSources::directory(&dir).unwrap_err().to_string();
        assert!(
            msg.contains("dequant.hip") && msg.contains(&dir.display().to_string()),
            "{msg}"
        );
        assert!(matches!(
            KernelSources::directory(dir.join("nope")),
            Err(SourceError::NotADirectory { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn source_files_round_trip_their_names() {
        for f in SourceFile::ALL {
            assert_eq!(SourceFile::parse(f.name()), Some(f));
        }
        assert_eq!(SourceFile::Compat.kernels(), WITH_SOURCE.to_vec());
        assert_eq!(SourceFile::AmdEmulation.kernels(), WITH_SOURCE.to_vec());
        assert_eq!(
            SourceFile::Fused.kernels(),
            vec![KernelId::Fused, KernelId::FusedCarrier]
        );
        assert_eq!(
            SourceFile::GemmTile.kernels(),
            vec![KernelId::Fused, KernelId::Moe, KernelId::FusedCarrier]
        );
        assert_eq!(SourceFile::MoeAlign.kernels(), vec![KernelId::MoeAlign]);
        assert_eq!(SourceFile::Skinny.kernels(), vec![KernelId::Skinny]);
        // The carrier's switch is in its source, and only the carrier compiles with it.
        assert!(FUSED_HIP.contains("#if !defined(W4_FUSED_CARRIER)"));
        assert_eq!(
            define_options(KernelId::FusedCarrier),
            vec!["-DW4_FUSED_CARRIER=1".to_string()]
        );
        assert!(
            WITH_SOURCE
                .iter()
                .filter(|k| **k != KernelId::FusedCarrier)
                .all(|k| defines(*k).is_empty())
        );
        assert_eq!(KernelSources::default(), KernelSources::Embedded);
        assert_eq!(KernelSources::Embedded.dir(), hip_dir());
    }
}
