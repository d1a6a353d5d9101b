//! Reading AMDGPU code objects without a GPU: the kernel metadata note (register counts, LDS,
//! scratch, spills, the kernel-argument layout), the disassembly's instruction families, the
//! static gates built on both, and the launch-ABI check against the Rust declarations.

pub mod abi;
pub mod disasm;
pub mod gates;
pub mod snapshot;

use object::read::elf::{ElfFile64, FileHeader, SectionHeader};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// ELF note type of the msgpack kernel metadata (code object v3 and later).
pub const NT_AMDGPU_METADATA: u32 = 32;

#[derive(Debug, thiserror::Error)]
pub enum CodeObjectError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("not an ELF64 file: {0}")]
    Elf(#[from] object::read::Error),
    #[error("ELF machine {machine} is not AMDGPU ({})", object::elf::EM_AMDGPU)]
    NotAmdgpu { machine: u16 },
    #[error(
        "no NT_AMDGPU_METADATA note (type {NT_AMDGPU_METADATA}, owner \"AMDGPU\") in the code object"
    )]
    NoMetadata,
    #[error("the AMDGPU metadata note is not the expected msgpack map: {0}")]
    Metadata(#[from] rmp_serde::decode::Error),
    #[error("kernel {kernel:?}: metadata field {field} is missing")]
    MissingField { kernel: String, field: &'static str },
    #[error("running {tool}: {detail}")]
    Tool { tool: String, detail: String },
}

/// One kernel-argument slot as the code object records it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct KernelArg {
    /// Parameter name (present when built with `-fhip-kernel-arg-name`).
    pub name: Option<String>,
    pub offset: u32,
    pub size: u32,
    /// `global_buffer`, `by_value`, `hidden_block_count_x`, ...
    pub value_kind: String,
    pub address_space: Option<String>,
    /// What the compiler proved about the pointee: `read_only`, `write_only`, `read_write`.
    pub actual_access: Option<String>,
}

impl KernelArg {
    pub fn is_hidden(&self) -> bool {
        self.value_kind.starts_with("hidden_")
    }
    pub fn is_global_buffer(&self) -> bool {
        self.value_kind == "global_buffer"
    }
    pub fn is_by_value(&self) -> bool {
        self.value_kind == "by_value"
    }
}

/// Resource usage and ABI of one kernel entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelInfo {
    pub name: String,
    pub symbol: String,
    pub vgpr_count: u32,
    pub sgpr_count: u32,
    pub agpr_count: Option<u32>,
    pub vgpr_spill_count: u32,
    pub sgpr_spill_count: u32,
    /// LDS bytes (`.group_segment_fixed_size`).
    pub lds_bytes: u32,
    /// Scratch bytes per work-item (`.private_segment_fixed_size`).
    pub scratch_bytes: u32,
    pub uses_dynamic_stack: bool,
    pub wavefront_size: u32,
    pub max_flat_workgroup_size: u32,
    pub kernarg_segment_size: u32,
    /// Explicit arguments, in order.
    pub args: Vec<KernelArg>,
    /// Implicit arguments the runtime fills (`hidden_*`), kept apart from the declared ABI.
    pub hidden_args: Vec<KernelArg>,
}

/// Everything the metadata note says about one code object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeObjectInfo {
    /// `amdhsa.target`, e.g. `amdgcn-amd-amdhsa--gfx1151`.
    pub target: String,
    pub kernels: Vec<KernelInfo>,
}

impl CodeObjectInfo {
    /// The processor part of the target triple: `gfx1151` (target features stripped).
    pub fn gfx(&self) -> &str {
        let proc_ = self
            .target
            .split_once("--")
            .map_or(self.target.as_str(), |(_, p)| p);
        proc_.split(':').next().unwrap_or(proc_)
    }

    pub fn kernel(&self, name: &str) -> Option<&KernelInfo> {
        self.kernels.iter().find(|k| k.name == name)
    }
}

#[derive(Deserialize)]
struct RawMetadata {
    #[serde(rename = "amdhsa.target", default)]
    target: String,
    #[serde(rename = "amdhsa.kernels", default)]
    kernels: Vec<RawKernel>,
}

#[derive(Deserialize)]
struct RawKernel {
    #[serde(rename = ".name")]
    name: Option<String>,
    #[serde(rename = ".symbol")]
    symbol: Option<String>,
    #[serde(rename = ".vgpr_count")]
    vgpr_count: Option<u32>,
    #[serde(rename = ".sgpr_count")]
    sgpr_count: Option<u32>,
    #[serde(rename = ".agpr_count")]
    agpr_count: Option<u32>,
    #[serde(rename = ".vgpr_spill_count")]
    vgpr_spill_count: Option<u32>,
    #[serde(rename = ".sgpr_spill_count")]
    sgpr_spill_count: Option<u32>,
    #[serde(rename = ".group_segment_fixed_size")]
    group_segment_fixed_size: Option<u32>,
    #[serde(rename = ".private_segment_fixed_size")]
    private_segment_fixed_size: Option<u32>,
    #[serde(rename = ".uses_dynamic_stack")]
    uses_dynamic_stack: Option<bool>,
    #[serde(rename = ".wavefront_size")]
    wavefront_size: Option<u32>,
    #[serde(rename = ".max_flat_workgroup_size")]
    max_flat_workgroup_size: Option<u32>,
    #[serde(rename = ".kernarg_segment_size")]
    kernarg_segment_size: Option<u32>,
    #[serde(rename = ".args", default)]
    args: Vec<RawArg>,
}

#[derive(Deserialize)]
struct RawArg {
    #[serde(rename = ".name")]
    name: Option<String>,
    #[serde(rename = ".offset")]
    offset: u32,
    #[serde(rename = ".size")]
    size: u32,
    #[serde(rename = ".value_kind")]
    value_kind: String,
    #[serde(rename = ".address_space")]
    address_space: Option<String>,
    #[serde(rename = ".actual_access")]
    actual_access: Option<String>,
}

impl RawKernel {
    fn into_info(self) -> Result<KernelInfo, CodeObjectError> {
        let kernel = self.name.clone().unwrap_or_else(|| "<unnamed>".to_owned());
        let need = |v: Option<u32>, field: &'static str| {
            v.ok_or_else(|| CodeObjectError::MissingField {
                kernel: kernel.clone(),
                field,
            })
        };
        let (hidden_args, args): (Vec<KernelArg>, Vec<KernelArg>) = self
            .args
            .into_iter()
            .map(|a| KernelArg {
                name: a.name,
                offset: a.offset,
                size: a.size,
                value_kind: a.value_kind,
                address_space: a.address_space,
                actual_access: a.actual_access,
            })
            .partition(KernelArg::is_hidden);
        Ok(KernelInfo {
            name: self
                .name
                .clone()
                .ok_or_else(|| CodeObjectError::MissingField {
                    kernel: kernel.clone(),
                    field: ".name",
                })?,
            symbol: self.symbol.unwrap_or_default(),
            vgpr_count: need(self.vgpr_count, ".vgpr_count")?,
            sgpr_count: need(self.sgpr_count, ".sgpr_count")?,
            agpr_count: self.agpr_count,
            vgpr_spill_count: need(self.vgpr_spill_count, ".vgpr_spill_count")?,
            sgpr_spill_count: need(self.sgpr_spill_count, ".sgpr_spill_count")?,
            lds_bytes: need(self.group_segment_fixed_size, ".group_segment_fixed_size")?,
            scratch_bytes: need(
                self.private_segment_fixed_size,
                ".private_segment_fixed_size",
            )?,
            uses_dynamic_stack: self.uses_dynamic_stack.unwrap_or(false),
            wavefront_size: need(self.wavefront_size, ".wavefront_size")?,
            max_flat_workgroup_size: need(
                self.max_flat_workgroup_size,
                ".max_flat_workgroup_size",
            )?,
            kernarg_segment_size: need(self.kernarg_segment_size, ".kernarg_segment_size")?,
            args,
            hidden_args,
        })
    }
}

/// Parses the metadata note of an AMDGPU ELF code object.
pub fn parse(bytes: &[u8]) -> Result<CodeObjectInfo, CodeObjectError> {
    let elf = ElfFile64::<object::Endianness>::parse(bytes)?;
    let endian = elf.endian();
    let machine = elf.elf_header().e_machine(endian);
    if machine != object::elf::EM_AMDGPU {
        return Err(CodeObjectError::NotAmdgpu { machine });
    }
    for section in elf.elf_section_table().iter() {
        let Some(mut notes) = section.notes(endian, bytes)? else {
            continue;
        };
        while let Some(note) = notes.next()? {
            if note.name() == b"AMDGPU" && note.n_type(endian) == NT_AMDGPU_METADATA {
                let raw: RawMetadata = rmp_serde::from_slice(note.desc())?;
                let mut kernels = raw
                    .kernels
                    .into_iter()
                    .map(RawKernel::into_info)
                    .collect::<Result<Vec<_>, _>>()?;
                kernels.sort_by(|a, b| a.name.cmp(&b.name));
                return Ok(CodeObjectInfo {
                    target: raw.target,
                    kernels,
                });
            }
        }
    }
    Err(CodeObjectError::NoMetadata)
}

/// Reads and parses a code object file.
pub fn read(path: &Path) -> Result<CodeObjectInfo, CodeObjectError> {
    let bytes = std::fs::read(path).map_err(|source| CodeObjectError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_non_elf_and_foreign_elf() {
        assert!(matches!(
            parse(b"not an elf at all"),
            Err(CodeObjectError::Elf(_))
        ));
        // The test binary itself is an x86-64 ELF: right container, wrong machine.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        match parse(&me) {
            Err(CodeObjectError::NotAmdgpu { machine }) => {
                assert_eq!(machine, object::elf::EM_X86_64)
            }
            other => panic!("expected NotAmdgpu, got {other:?}"),
        }
    }

    #[test]
    fn missing_required_field_is_named() {
        let raw = RawKernel {
            name: Some("k".into()),
            symbol: None,
            vgpr_count: Some(8),
            sgpr_count: None,
            agpr_count: None,
            vgpr_spill_count: Some(0),
            sgpr_spill_count: Some(0),
            group_segment_fixed_size: Some(0),
            private_segment_fixed_size: Some(0),
            uses_dynamic_stack: None,
            wavefront_size: Some(32),
            max_flat_workgroup_size: Some(256),
            kernarg_segment_size: Some(64),
            args: vec![],
        };
        let err = raw.into_info().unwrap_err().to_string();
        assert_eq!(err, "kernel \"k\": metadata field .sgpr_count is missing");
    }

    #[test]
    fn msgpack_metadata_round_trips_hidden_args_apart() {
        use rmpv::Value;
        let arg = |kind: &str, off: u64, size: u64| {
            Value::Map(vec![
                (".value_kind".into(), kind.into()),
                (".offset".into(), off.into()),
                (".size".into(), size.into()),
            ])
        };
        let kernel = Value::Map(vec![
            (".name".into(), "w4a16_x_f16".into()),
            (".symbol".into(), "w4a16_x_f16.kd".into()),
            (".vgpr_count".into(), 40u64.into()),
            (".sgpr_count".into(), 20u64.into()),
            (".vgpr_spill_count".into(), 0u64.into()),
            (".sgpr_spill_count".into(), 0u64.into()),
            (".group_segment_fixed_size".into(), 4096u64.into()),
            (".private_segment_fixed_size".into(), 0u64.into()),
            (".wavefront_size".into(), 32u64.into()),
            (".max_flat_workgroup_size".into(), 256u64.into()),
            (".kernarg_segment_size".into(), 280u64.into()),
            (
                ".args".into(),
                Value::Array(vec![
                    arg("global_buffer", 0, 8),
                    arg("by_value", 8, 4),
                    arg("hidden_block_count_x", 16, 4),
                ]),
            ),
        ]);
        let root = Value::Map(vec![
            ("amdhsa.target".into(), "amdgcn-amd-amdhsa--gfx1151".into()),
            ("amdhsa.kernels".into(), Value::Array(vec![kernel])),
        ]);
        let mut buf = Vec::new();
        rmpv::encode::write_value(&mut buf, &root).unwrap();
        let raw: RawMetadata = rmp_serde::from_slice(&buf).unwrap();
        let info = CodeObjectInfo {
            target: raw.target,
            kernels: raw
                .kernels
                .into_iter()
                .map(|k| k.into_info().unwrap())
                .collect(),
        };
        assert_eq!(info.gfx(), "gfx1151");
        let featured = CodeObjectInfo {
            target: "amdgcn-amd-amdhsa--gfx90a:sramecc-:xnack-".into(),
            kernels: vec![],
        };
        assert_eq!(featured.gfx(), "gfx90a");
        let k = info.kernel("w4a16_x_f16").unwrap();
        assert_eq!((k.vgpr_count, k.lds_bytes, k.agpr_count), (40, 4096, None));
        assert_eq!(k.args.len(), 2);
        assert!(k.args[0].is_global_buffer() && k.args[1].is_by_value());
        assert_eq!(k.hidden_args.len(), 1);
        assert_eq!(k.hidden_args[0].value_kind, "hidden_block_count_x");
    }
}

#[cfg(test)]
mod named_tests {
    w4a16_reference::named_enum_tests! {
        gate: crate::gates::Gate,
    }
}
