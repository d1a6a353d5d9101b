//! A loaded code object: each kernel's descriptor (read from its `.kd` symbol) and its machine
//! code as typed instructions (LLVM's disassembly, parsed). The metadata note's view of a kernel
//! (VGPR count, kernarg layout, hidden arguments) comes from the caller as [`KernelMeta`], read
//! by the code-object inspection crate, so it is parsed in one place only.

use crate::inst::{Gen, Inst};
use crate::parse::{ParseError, parse_line};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The AMDHSA kernel descriptor (64 bytes at the `<kernel>.kd` symbol), the fields the
/// emulator reads. Layout per LLVM's AMDGPUUsage "Kernel Descriptor".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelDescriptor {
    pub group_segment_fixed_size: u32,
    pub private_segment_fixed_size: u32,
    pub kernarg_size: u32,
    /// Byte address of the first instruction (descriptor address + entry byte offset).
    pub entry: u64,
    pub compute_pgm_rsrc3: u32,
    pub compute_pgm_rsrc1: u32,
    pub compute_pgm_rsrc2: u32,
    pub kernel_code_properties: u16,
}

/// Size of a kernel descriptor in bytes.
pub const DESCRIPTOR_BYTES: usize = 64;

impl KernelDescriptor {
    /// Reads the descriptor stored at byte address `address`: byte offsets 0/4/8 (segment and
    /// kernarg sizes), 16 (i64 entry offset, relative to the descriptor), 44/48/52
    /// (`compute_pgm_rsrc3/1/2`) and 56 (u16 `kernel_code_properties`).
    /// `None` when `bytes` is not 64 long or the entry offset leaves the address space.
    pub fn read(bytes: &[u8], address: u64) -> Option<KernelDescriptor> {
        let bytes: &[u8; DESCRIPTOR_BYTES] = bytes.try_into().ok()?;
        let u32_at =
            |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
        let mut offset = [0u8; 8];
        offset.copy_from_slice(&bytes[16..24]);
        let offset = i64::from_le_bytes(offset);
        Some(KernelDescriptor {
            group_segment_fixed_size: u32_at(0),
            private_segment_fixed_size: u32_at(4),
            kernarg_size: u32_at(8),
            entry: address.checked_add_signed(offset)?,
            compute_pgm_rsrc3: u32_at(44),
            compute_pgm_rsrc1: u32_at(48),
            compute_pgm_rsrc2: u32_at(52),
            kernel_code_properties: u16::from_le_bytes([bytes[56], bytes[57]]),
        })
    }
}

/// What the metadata note says about a kernel that the launch needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelMeta {
    pub vgpr_count: u32,
    pub sgpr_count: u32,
    pub wavefront_size: u32,
    pub kernarg_segment_size: u32,
    /// Implicit arguments the runtime fills: (offset, size, value kind such as
    /// `hidden_block_count_x`).
    pub hidden_args: Vec<(u32, u32, String)>,
}

impl KernelMeta {
    /// The view of kernel `name` of a code object's metadata note: the emulated device and
    /// the emulated HIP runtime load code objects through it alike.
    pub fn of(info: &w4a16_codeobject::CodeObjectInfo, name: &str) -> Option<KernelMeta> {
        info.kernel(name).map(|k| KernelMeta {
            vgpr_count: k.vgpr_count,
            sgpr_count: k.sgpr_count,
            wavefront_size: k.wavefront_size,
            kernarg_segment_size: k.kernarg_segment_size,
            hidden_args: k
                .hidden_args
                .iter()
                .map(|a| (a.offset, a.size, a.value_kind.clone()))
                .collect(),
        })
    }
}

/// One kernel, ready to run.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub name: String,
    pub generation: Gen,
    pub descriptor: KernelDescriptor,
    pub meta: KernelMeta,
    /// Instructions in address order.
    pub code: Vec<Inst>,
    /// Lines of the kernel the parser could not type (an unknown instruction), by address:
    /// reaching one stops the launch with its name and address.
    pub unknown: HashMap<u64, ParseError>,
    /// Address of the first instruction, and for each 4-byte word from there the position in
    /// `code` + 1 of the instruction starting at it (0: none). Dense, because the emulator looks
    /// up the pc of every instruction it runs.
    base: u64,
    index: Vec<u32>,
}

impl Kernel {
    pub fn new(
        name: String,
        generation: Gen,
        descriptor: KernelDescriptor,
        meta: KernelMeta,
        code: Vec<Inst>,
        unknown: HashMap<u64, ParseError>,
    ) -> Kernel {
        let base = code.first().map_or(0, |c| c.addr);
        let end = code.last().map_or(base, |c| c.addr + c.size().max(4));
        let mut index = vec![0u32; ((end - base) / 4) as usize];
        for (i, c) in code.iter().enumerate() {
            if let Some(slot) = index.get_mut(((c.addr - base) / 4) as usize) {
                *slot = i as u32 + 1;
            }
        }
        Kernel {
            name,
            generation,
            descriptor,
            meta,
            code,
            unknown,
            base,
            index,
        }
    }

    /// Position in [`Kernel::code`] of the instruction at byte address `addr`.
    pub fn index_of(&self, addr: u64) -> Option<usize> {
        if addr < self.base || !addr.is_multiple_of(4) {
            return None;
        }
        let slot = *self.index.get(((addr - self.base) / 4) as usize)?;
        slot.checked_sub(1).map(|i| i as usize)
    }
}

/// Why a code object could not be loaded. Each names the file and what was wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No disassembler: the caller turns this into a loud skip (`amd-toolchain`).
    #[error("{tool}: {detail}")]
    Toolchain { tool: String, detail: String },
    #[error(
        "{path}: target `{gfx}` is not one the emulator runs (gfx1100/1101/1102/1150/1151/1200/1201)"
    )]
    UnsupportedTarget { path: PathBuf, gfx: String },
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a readable ELF code object: {detail}")]
    Elf { path: PathBuf, detail: String },
    #[error("{path}: kernel `{kernel}` has no `{kernel}.kd` descriptor symbol")]
    MissingDescriptor { path: PathBuf, kernel: String },
    #[error("{path}: descriptor `{kernel}.kd` is unreadable: {detail}")]
    BadDescriptor {
        path: PathBuf,
        kernel: String,
        detail: String,
    },
    #[error("{path}: no metadata for kernel `{kernel}`")]
    MissingMeta { path: PathBuf, kernel: String },
    #[error("{path}: `{tool}` failed ({status}): {stderr}")]
    Objdump {
        path: PathBuf,
        tool: String,
        status: String,
        stderr: String,
    },
    #[error("{path}: kernel `{kernel}` has no instructions in the disassembly")]
    NoCode { path: PathBuf, kernel: String },
    #[error("{path}: kernel `{kernel}`: {source}")]
    Parse {
        path: PathBuf,
        kernel: String,
        source: ParseError,
    },
    #[error(
        "{path}: kernel `{kernel}`: instruction at {found:#x} where the previous one ends at {expected:#x}"
    )]
    NotContiguous {
        path: PathBuf,
        kernel: String,
        expected: u64,
        found: u64,
    },
    #[error(
        "{path}: kernel `{kernel}`: the descriptor's entry is {entry:#x} but the first instruction is at {first:#x}"
    )]
    EntryMismatch {
        path: PathBuf,
        kernel: String,
        entry: u64,
        first: u64,
    },
}

/// Every kernel of one code object.
#[derive(Clone, Debug)]
pub struct Program {
    pub path: PathBuf,
    pub gfx: String,
    /// In symbol-table order.
    pub kernels: Vec<Kernel>,
}

/// The environment variable naming the disassembler to use.
pub const OBJDUMP_ENV: &str = "W4A16_LLVM_OBJDUMP";

/// The disassembler: `$W4A16_LLVM_OBJDUMP`, else `llvm-objdump-19`, else `llvm-objdump` on `$PATH`.
pub fn objdump_tool() -> Result<PathBuf, LoadError> {
    resolve_objdump(std::env::var_os(OBJDUMP_ENV), std::env::var_os("PATH"))
}

/// [`objdump_tool`] with the environment given (so tests need not change the process's).
pub fn resolve_objdump(
    env: Option<OsString>,
    path: Option<OsString>,
) -> Result<PathBuf, LoadError> {
    if let Some(tool) = env.filter(|t| !t.is_empty()) {
        return Ok(PathBuf::from(tool));
    }
    let dirs: Vec<PathBuf> = path
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    for name in ["llvm-objdump-19", "llvm-objdump"] {
        if let Some(found) = dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()) {
            return Ok(found);
        }
    }
    Err(LoadError::Toolchain {
        tool: "llvm-objdump".to_string(),
        detail: format!(
            "neither ${OBJDUMP_ENV}, llvm-objdump-19 nor llvm-objdump on $PATH; install LLVM 19 or set ${OBJDUMP_ENV}"
        ),
    })
}

/// A kernel's symbol and descriptor, from the ELF.
struct ElfKernel {
    name: String,
    address: u64,
    descriptor: KernelDescriptor,
}

impl Program {
    /// Loads the code object at `path` for target `gfx` (one `llvm-objdump` run), taking each
    /// kernel's metadata from `meta`.
    pub fn load(
        path: &Path,
        gfx: &str,
        meta: impl Fn(&str) -> Option<KernelMeta>,
    ) -> Result<Program, LoadError> {
        let tool = objdump_tool()?;
        Program::load_with(path, gfx, meta, &tool)
    }

    /// As [`Program::load`] with the disassembler given.
    pub fn load_with(
        path: &Path,
        gfx: &str,
        meta: impl Fn(&str) -> Option<KernelMeta>,
        objdump: &Path,
    ) -> Result<Program, LoadError> {
        let elf = std::fs::read(path).map_err(|source| LoadError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        // Read the ELF first: a broken file is named as such, not as a disassembler failure.
        let _ = elf_kernels(path, &elf)?;
        let out = Command::new(objdump)
            .arg("-d")
            .arg(format!("--mcpu={gfx}"))
            .arg(path)
            .output()
            .map_err(|e| LoadError::Toolchain {
                tool: objdump.display().to_string(),
                detail: format!("cannot run: {e}"),
            })?;
        if !out.status.success() {
            return Err(LoadError::Objdump {
                path: path.to_path_buf(),
                tool: objdump.display().to_string(),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Program::from_parts(path, gfx, &elf, &String::from_utf8_lossy(&out.stdout), meta)
    }

    /// A program from the code object's bytes and its `llvm-objdump -d` output.
    pub fn from_parts(
        path: &Path,
        gfx: &str,
        elf: &[u8],
        disassembly: &str,
        meta: impl Fn(&str) -> Option<KernelMeta>,
    ) -> Result<Program, LoadError> {
        let generation = Gen::of_target(gfx).ok_or_else(|| LoadError::UnsupportedTarget {
            path: path.to_path_buf(),
            gfx: gfx.to_string(),
        })?;
        let found = elf_kernels(path, elf)?;
        let mut blocks = split_disassembly(disassembly);
        let mut kernels = Vec::with_capacity(found.len());
        for k in found {
            let lines = blocks.remove(k.name.as_str()).unwrap_or_default();
            let kernel_meta = meta(&k.name).ok_or_else(|| LoadError::MissingMeta {
                path: path.to_path_buf(),
                kernel: k.name.clone(),
            })?;
            let (code, unknown) = typed_code(path, &k.name, &lines)?;
            let first = code
                .first()
                .map(|i| i.addr)
                .into_iter()
                .chain(unknown.keys().copied())
                .min()
                .ok_or_else(|| LoadError::NoCode {
                    path: path.to_path_buf(),
                    kernel: k.name.clone(),
                })?;
            if first != k.descriptor.entry || first != k.address {
                return Err(LoadError::EntryMismatch {
                    path: path.to_path_buf(),
                    kernel: k.name,
                    entry: k.descriptor.entry,
                    first,
                });
            }
            kernels.push(Kernel::new(
                k.name,
                generation,
                k.descriptor,
                kernel_meta,
                code,
                unknown,
            ));
        }
        Ok(Program {
            path: path.to_path_buf(),
            gfx: gfx.to_string(),
            kernels,
        })
    }

    /// The kernel named `name` (its symbol, e.g. `w4a16_dequant_f16`).
    pub fn kernel(&self, name: &str) -> Option<&Kernel> {
        self.kernels.iter().find(|k| k.name == name)
    }
}

/// Global function symbols (the kernels) with their `.kd` descriptors.
fn elf_kernels(path: &Path, elf: &[u8]) -> Result<Vec<ElfKernel>, LoadError> {
    let file = object::File::parse(elf).map_err(|e| LoadError::Elf {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    let bad = |kernel: &str, detail: String| LoadError::BadDescriptor {
        path: path.to_path_buf(),
        kernel: kernel.to_string(),
        detail,
    };
    let mut names = Vec::new();
    let mut descriptors = HashMap::new();
    for sym in file.symbols() {
        let Ok(name) = sym.name() else { continue };
        if sym.kind() == SymbolKind::Text && sym.is_global() && sym.is_definition() {
            names.push((name.to_string(), sym.address()));
        } else if let Some(kernel) = name.strip_suffix(".kd") {
            descriptors.insert(kernel.to_string(), sym);
        }
    }
    let mut out = Vec::with_capacity(names.len());
    for (name, address) in names {
        let sym = descriptors
            .get(&name)
            .ok_or_else(|| LoadError::MissingDescriptor {
                path: path.to_path_buf(),
                kernel: name.clone(),
            })?;
        if sym.size() != DESCRIPTOR_BYTES as u64 {
            return Err(bad(&name, format!("{} bytes, expected 64", sym.size())));
        }
        let section = sym
            .section_index()
            .and_then(|i| file.section_by_index(i).ok())
            .ok_or_else(|| bad(&name, "not in a section".to_string()))?;
        let data = section
            .data_range(sym.address(), DESCRIPTOR_BYTES as u64)
            .map_err(|e| bad(&name, e.to_string()))?
            .ok_or_else(|| {
                bad(
                    &name,
                    format!(
                        "64 bytes at {:#x} are outside its section `{}`",
                        sym.address(),
                        section.name().unwrap_or("?")
                    ),
                )
            })?;
        let descriptor = KernelDescriptor::read(data, sym.address())
            .ok_or_else(|| bad(&name, "entry offset leaves the address space".to_string()))?;
        out.push(ElfKernel {
            name,
            address,
            descriptor,
        });
    }
    Ok(out)
}

/// The instruction lines of each `<symbol>:` block of `llvm-objdump -d` output.
pub fn split_disassembly(text: &str) -> HashMap<&str, Vec<&str>> {
    let mut blocks: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut current: Option<&str> = None;
    for line in text.lines() {
        if let Some(name) = header(line) {
            current = Some(name);
            blocks.entry(name).or_default();
        } else if line.starts_with(char::is_whitespace)
            && !line.trim().is_empty()
            && let Some(name) = current
        {
            blocks.entry(name).or_default().push(line);
        } else if !line.trim().is_empty() {
            // "Disassembly of section …" and the file line end a block.
            current = None;
        }
    }
    blocks
}

/// `0000000000001d00 <w4a16_dequant_f16>:` → the symbol name.
fn header(line: &str) -> Option<&str> {
    let (addr, rest) = line.split_once(' ')?;
    if addr.is_empty() || !addr.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    rest.strip_prefix('<')?.strip_suffix(">:")
}

type Code = (Vec<Inst>, HashMap<u64, ParseError>);

/// Parses a kernel's lines: unknown mnemonics are kept aside by address, any other failure is
/// a load error; addresses must follow each other without gaps.
fn typed_code(path: &Path, kernel: &str, lines: &[&str]) -> Result<Code, LoadError> {
    let mut code = Vec::with_capacity(lines.len());
    let mut unknown = HashMap::new();
    let mut next: Option<u64> = None;
    for line in lines {
        let (addr, size) = match parse_line(line) {
            Ok(inst) => {
                let at = (inst.addr, inst.size());
                code.push(inst);
                at
            }
            Err(e @ ParseError::UnknownInstruction { .. }) => {
                let (addr, size) = encoding_of(line).ok_or_else(|| LoadError::Parse {
                    path: path.to_path_buf(),
                    kernel: kernel.to_string(),
                    source: ParseError::NoEncoding {
                        line: line.trim().to_string(),
                    },
                })?;
                unknown.insert(addr, e);
                (addr, size)
            }
            Err(source) => {
                return Err(LoadError::Parse {
                    path: path.to_path_buf(),
                    kernel: kernel.to_string(),
                    source,
                });
            }
        };
        if let Some(expected) = next
            && expected != addr
        {
            return Err(LoadError::NotContiguous {
                path: path.to_path_buf(),
                kernel: kernel.to_string(),
                expected,
                found: addr,
            });
        }
        next = addr.checked_add(size);
    }
    Ok((code, unknown))
}

/// Address and byte size from a line's `// ADDRESS: WORDS` comment.
fn encoding_of(line: &str) -> Option<(u64, u64)> {
    let (_, comment) = line.split_once("//")?;
    let (addr, words) = comment.trim().split_once(':')?;
    let addr = u64::from_str_radix(addr.trim(), 16).ok()?;
    let n = words
        .split_whitespace()
        .take_while(|w| !w.starts_with('<'))
        .count() as u64;
    Some((addr, 4 * n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inst::Op;

    fn meta(_: &str) -> Option<KernelMeta> {
        Some(KernelMeta::default())
    }

    #[test]
    fn a_truncated_elf_is_a_load_error_naming_the_file() {
        let path = Path::new("cut.co");
        let err =
            Program::from_parts(path, "gfx1100", b"\x7fELF\x02\x01\x01\x00", "", meta).unwrap_err();
        assert!(matches!(err, LoadError::Elf { .. }), "{err:?}");
        assert!(
            err.to_string().starts_with("cut.co: not a readable ELF"),
            "{err}"
        );
        let err = Program::from_parts(path, "gfx90a", b"", "", meta).unwrap_err();
        assert!(
            matches!(err, LoadError::UnsupportedTarget { .. }),
            "{err:?}"
        );
    }

    #[test]
    fn no_disassembler_is_a_toolchain_error() {
        let empty = tempfile::tempdir().unwrap();
        let err = resolve_objdump(None, Some(empty.path().as_os_str().to_owned())).unwrap_err();
        assert!(matches!(err, LoadError::Toolchain { .. }), "{err:?}");
        assert!(err.to_string().contains(OBJDUMP_ENV), "{err}");
        let chosen = resolve_objdump(Some("/opt/x/llvm-objdump".into()), None).unwrap();
        assert_eq!(chosen, PathBuf::from("/opt/x/llvm-objdump"));
        let err = Program::load_with(
            Path::new("/nonexistent/k.co"),
            "gfx1100",
            meta,
            Path::new("/nonexistent/llvm-objdump"),
        )
        .unwrap_err();
        assert!(matches!(err, LoadError::Io { .. }), "{err:?}");
    }

    #[test]
    fn the_descriptor_fields_sit_at_their_amdgpuusage_offsets() {
        let mut kd = [0u8; 64];
        kd[0..4].copy_from_slice(&1024u32.to_le_bytes());
        kd[4..8].copy_from_slice(&16u32.to_le_bytes());
        kd[8..12].copy_from_slice(&288u32.to_le_bytes());
        kd[16..24].copy_from_slice(&0x1100i64.to_le_bytes());
        kd[44..48].copy_from_slice(&3u32.to_le_bytes());
        kd[48..52].copy_from_slice(&0x60af_0042u32.to_le_bytes());
        kd[52..56].copy_from_slice(&0x1384u32.to_le_bytes());
        kd[56..58].copy_from_slice(&0x0408u16.to_le_bytes());
        let d = KernelDescriptor::read(&kd, 0xc00).unwrap();
        assert_eq!(
            d,
            KernelDescriptor {
                group_segment_fixed_size: 1024,
                private_segment_fixed_size: 16,
                kernarg_size: 288,
                entry: 0x1d00,
                compute_pgm_rsrc3: 3,
                compute_pgm_rsrc1: 0x60af_0042,
                compute_pgm_rsrc2: 0x1384,
                kernel_code_properties: 0x0408,
            }
        );
        kd[16..24].copy_from_slice(&(-0x1000i64).to_le_bytes());
        assert_eq!(KernelDescriptor::read(&kd, 0xc00), None);
        assert_eq!(KernelDescriptor::read(&kd[..63], 0xc00), None);
    }

    const DISASSEMBLY: &str = "
/x/k.co:\tfile format elf64-amdgpu

Disassembly of section .text:

0000000000001d00 <k>:
\ts_mov_b32 s17, 0                                           // 000000001D00: BE910080
\tv_frobnicate v1, v2                                        // 000000001D04: D6560001 04011073
\ts_endpgm                                                   // 000000001D0C: BFB00000

0000000000001e00 <other>:
\ts_nop 0                                                    // 000000001E00: BF800000
";

    #[test]
    fn objdump_output_splits_per_symbol_and_unknown_mnemonics_are_kept_aside() {
        let blocks = split_disassembly(DISASSEMBLY);
        assert_eq!(blocks["k"].len(), 3);
        assert_eq!(blocks["other"].len(), 1);
        let (code, unknown) = typed_code(Path::new("k.co"), "k", &blocks["k"]).unwrap();
        assert_eq!(
            code.iter().map(|i| (i.op, i.addr)).collect::<Vec<_>>(),
            vec![(Op::SMovB32, 0x1d00), (Op::SEndpgm, 0x1d0c)]
        );
        assert!(matches!(
            unknown.get(&0x1d04),
            Some(ParseError::UnknownInstruction { mnemonic, .. }) if mnemonic == "v_frobnicate"
        ));
    }

    #[test]
    fn gaps_and_unreadable_lines_are_load_errors() {
        let gap = [
            "\ts_mov_b32 s17, 0   // 000000001D00: BE910080",
            "\ts_endpgm           // 000000001D08: BFB00000",
        ];
        let err = typed_code(Path::new("k.co"), "k", &gap).unwrap_err();
        assert!(
            matches!(
                err,
                LoadError::NotContiguous {
                    expected: 0x1d04,
                    found: 0x1d08,
                    ..
                }
            ),
            "{err:?}"
        );
        let bad = ["\tv_mov_b32_e32 v1, q7   // 000000001D00: 7E020280"];
        let err = typed_code(Path::new("k.co"), "k", &bad).unwrap_err();
        assert!(matches!(err, LoadError::Parse { .. }), "{err:?}");
        assert!(err.to_string().contains("k.co: kernel `k`"), "{err}");
    }
}
