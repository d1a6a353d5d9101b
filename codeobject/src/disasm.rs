//! Disassembly with `llvm-objdump -d --mcpu=<gfx>` reduced to counts of the instruction
//! families the gates and snapshots care about. Counts are static (instructions in the code, not
//! executed), which is what a code-generation ratchet needs.

use super::CodeObjectError;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// A named group of mnemonics.
#[derive(Clone, Copy, Debug)]
pub struct Family {
    pub name: &'static str,
    pub matches: fn(&str) -> bool,
}

/// The families we track. Mnemonics carry encoding suffixes (`_e32`, `_e64`, `_dpp`), so most
/// rules are prefixes.
pub const FAMILIES: &[Family] = &[
    // The fp16 dequant trick: (w & 0x000F000F) | 0x64006400 in one instruction.
    Family {
        name: "v_and_or_b32",
        matches: |m| m == "v_and_or_b32" || m.starts_with("v_and_or_b32_"),
    },
    Family {
        name: "v_wmma",
        matches: |m| m.starts_with("v_wmma") || m.starts_with("v_swmmac"),
    },
    Family {
        name: "v_mfma",
        matches: |m| m.starts_with("v_mfma"),
    },
    Family {
        name: "v_dot2",
        matches: |m| m.starts_with("v_dot2"),
    },
    Family {
        name: "v_pk_fma",
        matches: |m| m.starts_with("v_pk_fma"),
    },
    Family {
        name: "v_fma_mix",
        matches: |m| m.starts_with("v_fma_mix"),
    },
    Family {
        name: "global_load_b128",
        matches: |m| m == "global_load_b128" || m == "global_load_dwordx4",
    },
    Family {
        name: "global_load",
        matches: |m| m.starts_with("global_load"),
    },
    Family {
        name: "global_store",
        matches: |m| m.starts_with("global_store"),
    },
    Family {
        name: "ds_load",
        matches: |m| m.starts_with("ds_load") || m.starts_with("ds_read"),
    },
    Family {
        name: "ds_store",
        matches: |m| m.starts_with("ds_store") || m.starts_with("ds_write"),
    },
    // Wave-level reductions: DPP, swizzles, lane permutes.
    Family {
        name: "cross_lane",
        matches: |m| {
            m.contains("_dpp")
                || m.starts_with("ds_swizzle")
                || m.starts_with("ds_bpermute")
                || m.starts_with("ds_permute")
                || m.starts_with("v_permlane")
        },
    },
    Family {
        name: "s_barrier",
        matches: |m| m.starts_with("s_barrier"),
    },
    // Private memory: flat-scratch instructions, and MUBUF loads/stores, which these kernels only
    // use for scratch. (gfx11's `buffer_gl0_inv`/`buffer_gl1_inv` are cache invalidations for
    // fences, not memory accesses.)
    Family {
        name: "scratch",
        matches: |m| m.starts_with("scratch_"),
    },
    Family {
        name: "buffer_mem",
        matches: |m| {
            m.starts_with("buffer_load")
                || m.starts_with("buffer_store")
                || m.starts_with("buffer_atomic")
        },
    },
];

/// Mnemonics of each function in the `.text` section, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Disassembly {
    pub functions: BTreeMap<String, Vec<String>>,
}

impl Disassembly {
    /// Family counts of one function (every family present, zeros included, so the shape of a
    /// snapshot does not depend on what the compiler happened to emit).
    pub fn family_counts(&self, function: &str) -> Option<BTreeMap<&'static str, u32>> {
        self.functions.get(function).map(|m| family_counts(m))
    }
}

pub fn family_counts(mnemonics: &[String]) -> BTreeMap<&'static str, u32> {
    FAMILIES
        .iter()
        .map(|f| {
            (
                f.name,
                mnemonics.iter().filter(|m| (f.matches)(m)).count() as u32,
            )
        })
        .collect()
}

/// Parses `llvm-objdump -d` text: `<addr> <name>:` opens a function, tab-indented lines are
/// instructions whose first token is the mnemonic.
pub fn parse_objdump(text: &str) -> Disassembly {
    let mut functions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(name) = function_header(line) {
            functions.entry(name.to_owned()).or_default();
            current = Some(name.to_owned());
        } else if line.starts_with('\t') || line.starts_with("  ") {
            let Some(f) = &current else { continue };
            let Some(m) = line.split_whitespace().next() else {
                continue;
            };
            if m.starts_with("//") || m.ends_with(':') {
                continue;
            }
            functions.entry(f.clone()).or_default().push(m.to_owned());
        } else if line.starts_with("Disassembly of section") {
            current = None;
        }
    }
    Disassembly { functions }
}

fn function_header(line: &str) -> Option<&str> {
    let (addr, rest) = line.split_once(' ')?;
    if addr.is_empty() || !addr.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    rest.strip_prefix('<')?.strip_suffix(">:")
}

/// Runs `objdump -d --mcpu=<gfx>` on a code object and parses the result.
pub fn disassemble(
    objdump: &Path,
    gfx: &str,
    code_object: &Path,
) -> Result<Disassembly, CodeObjectError> {
    let out = Command::new(objdump)
        .arg("-d")
        .arg(format!("--mcpu={gfx}"))
        .arg(code_object)
        .output()
        .map_err(|e| CodeObjectError::Tool {
            tool: objdump.display().to_string(),
            detail: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(CodeObjectError::Tool {
            tool: objdump.display().to_string(),
            detail: format!(
                "{} on {}: {}",
                out.status,
                code_object.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let dis = parse_objdump(&text);
    if dis.functions.is_empty() {
        return Err(CodeObjectError::Tool {
            tool: objdump.display().to_string(),
            detail: format!(
                "no functions in the disassembly of {}",
                code_object.display()
            ),
        });
    }
    Ok(dis)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "
t.co:\tfile format elf64-amdgpu

Disassembly of section .text:

0000000000001b00 <w4a16_a_f16>:
\ts_load_b32 s3, s[0:1], 0x5c                                // 000000001B04: F40000C0 F800005C
\tv_and_or_b32 v6, v6, s2, 0x64006400                        // 000000001BF0: 360C0C8F
\tv_wmma_f32_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[0:7] // 000000001BF8: 00000000
\tv_add_f32_dpp v1, v1, v1 row_shr:1 row_mask:0xf bank_mask:0xf // 0
\tscratch_store_b32 off, v3, s0                             // 0
\tglobal_load_b128 v[0:3], v[4:5], off                      // 0
\tglobal_load_u16 v7, v4, s[4:5]                            // 0

0000000000001c00 <w4a16_b_f16>:
\tv_dot2_f32_f16 v0, v1, v2, v0                              // 0
\tbuffer_gl0_inv                                             // 0
\tbuffer_store_dword v1, off, s[0:3], 0 offset:4            // 0
";

    #[test]
    fn objdump_text_splits_into_functions_and_families() {
        let d = parse_objdump(SAMPLE);
        assert_eq!(
            d.functions.keys().collect::<Vec<_>>(),
            ["w4a16_a_f16", "w4a16_b_f16"]
        );
        let a = d.family_counts("w4a16_a_f16").unwrap();
        assert_eq!(a["v_and_or_b32"], 1);
        assert_eq!(a["v_wmma"], 1);
        assert_eq!(a["cross_lane"], 1);
        assert_eq!(a["scratch"], 1);
        assert_eq!(a["global_load_b128"], 1);
        assert_eq!(a["global_load"], 2);
        assert_eq!(a["v_dot2"], 0);
        let b = d.family_counts("w4a16_b_f16").unwrap();
        assert_eq!((b["v_dot2"], b["buffer_mem"], b["v_wmma"]), (1, 1, 0));
        assert_eq!(b.len(), FAMILIES.len());
        assert!(d.family_counts("w4a16_c_f16").is_none());
    }

    #[test]
    fn family_names_are_unique() {
        let mut names: Vec<_> = FAMILIES.iter().map(|f| f.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), FAMILIES.len());
    }
}
