//! The per-target snapshot digest of a kernel set: resources, argument layout and instruction
//! families per entry. Only facts about the code go in: no paths, no compiler version, no
//! addresses, so a diff always means the code changed.

use super::disasm::Disassembly;
use super::{CodeObjectInfo, KernelArg};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EntryDigest {
    pub entry: String,
    pub vgprs: u32,
    pub sgprs: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agprs: Option<u32>,
    pub lds_bytes: u32,
    pub scratch_bytes: u32,
    pub vgpr_spills: u32,
    pub sgpr_spills: u32,
    pub wavefront_size: u32,
    pub max_workgroup_size: u32,
    /// `offset+size kind name`, one per explicit argument.
    pub args: Vec<String>,
    pub instructions: BTreeMap<&'static str, u32>,
}

fn arg_line(a: &KernelArg) -> String {
    format!(
        "{}+{} {} {}",
        a.offset,
        a.size,
        a.value_kind,
        a.name.as_deref().unwrap_or("?")
    )
}

/// Digests of every kernel in the given code objects, sorted by entry name.
pub fn digest<'a>(
    objects: impl IntoIterator<Item = (&'a CodeObjectInfo, &'a Disassembly)>,
) -> Vec<EntryDigest> {
    let mut out: Vec<EntryDigest> = objects
        .into_iter()
        .flat_map(|(info, dis)| {
            info.kernels.iter().map(move |k| EntryDigest {
                entry: k.name.clone(),
                vgprs: k.vgpr_count,
                sgprs: k.sgpr_count,
                agprs: k.agpr_count,
                lds_bytes: k.lds_bytes,
                scratch_bytes: k.scratch_bytes,
                vgpr_spills: k.vgpr_spill_count,
                sgpr_spills: k.sgpr_spill_count,
                wavefront_size: k.wavefront_size,
                max_workgroup_size: k.max_flat_workgroup_size,
                args: k.args.iter().map(arg_line).collect(),
                instructions: dis.family_counts(&k.name).unwrap_or_default(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.entry.cmp(&b.entry));
    out
}
