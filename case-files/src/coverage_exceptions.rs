//! The block-coverage exceptions file (`cases/exceptions/coverage.toml`): each `[[uncovered]]`
//! entry names machine-code blocks of one target's entries that no CI suite executes, and why.
//! Read with the case files' suppression schema (ARCHITECTURE.md rule 5: the shared keys
//! `target`, `reason`, `tracking`, `expires`, `mode` of `[[known_bad]]` and `[[exception]]`,
//! refused with the same messages); only the scope (entries, blocks) is coverage's.
//!
//! Entries group blocks by entry and reason, yet name each block (its byte offset from the
//! entry), so a block that becomes uncovered later is not hidden by an old entry; `blocks =
//! "all"` is only for an entry no CI suite launches on the target at all (and stops holding
//! once one does). The judging is the harness's (`w4a16_harness::block_coverage::judge`).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use w4a16_kernels::Target;

use super::glob::Glob;
use super::suppress::{Shared, Suppression, suppression_table};
use super::{CaseFileError, DataFile};

/// The blocks an entry names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlockList {
    /// Every block of each matching entry: the entry is never launched on the target.
    All,
    /// Blocks by byte offset from their entry (written `"+0x1a4"`).
    Offsets(Vec<u64>),
}

/// What one `[[uncovered]]` entry covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UncoveredScope {
    /// Glob on the entry name.
    pub entry: Glob,
    pub blocks: BlockList,
}

/// One `[[uncovered]]` entry.
pub type Uncovered = Suppression<UncoveredScope>;

/// `blocks` as written: `"all"` or a list of `"+0x…"` offsets.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum BlocksRaw {
    Word(String),
    List(Vec<String>),
}

suppression_table! {
    /// One `[[uncovered]]` table as written.
    struct UncoveredRaw {
        /// Glob on the entry name.
        entry: Glob,
        blocks: BlocksRaw,
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CoverageFile {
    #[serde(default)]
    uncovered: Vec<UncoveredRaw>,
}

/// The coverage exceptions file of the case folder `cases_dir`.
pub fn exceptions_path(cases_dir: &Path) -> PathBuf {
    cases_dir.join("exceptions").join("coverage.toml")
}

/// Reads and checks the file at `path`.
pub fn load(path: &Path) -> Result<Vec<Uncovered>, CaseFileError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CaseFileError::new(path, "", format!("cannot read: {e}")))?;
    parse(&text, path)
}

/// `+0x1a4` → 0x1a4.
pub fn parse_offset(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("+0x")?, 16).ok()
}

/// Reads the file through the shared suppression schema; beyond serde, `blocks` must be `"all"`
/// or a non-empty list of distinct `"+0x…"` offsets, and the target an AMD code-object target.
pub fn parse(text: &str, file: &Path) -> Result<Vec<Uncovered>, CaseFileError> {
    let (raw, data): (CoverageFile, _) = DataFile::parse(file, text)?;
    raw.uncovered
        .into_iter()
        .enumerate()
        .map(|(i, u)| check(&data, i, u))
        .collect()
}

fn check(data: &DataFile, i: usize, u: UncoveredRaw) -> Result<Uncovered, CaseFileError> {
    let key = format!("uncovered[{i}]");
    let shared: Shared = u.shared(data.file, key.clone());
    shared
        .check_target(&Target::AMD_CODE_OBJECT_TARGETS)
        .map_err(|m| data.at(format!("{key}.target"), m.to_string()))?;
    let bad = |m: String| data.at(format!("{key}.blocks"), m);
    let blocks = match u.blocks {
        BlocksRaw::Word(w) if w == "all" => BlockList::All,
        BlocksRaw::Word(w) => {
            return Err(bad(format!(
                "expected \"all\" or a list of offsets like \"+0x1a4\", got \"{w}\""
            )));
        }
        BlocksRaw::List(list) if list.is_empty() => {
            return Err(bad("an empty list covers nothing".into()));
        }
        BlocksRaw::List(list) => {
            let mut offsets = Vec::with_capacity(list.len());
            for s in &list {
                let o = parse_offset(s).ok_or_else(|| {
                    bad(format!("expected an offset like \"+0x1a4\", got \"{s}\""))
                })?;
                if offsets.contains(&o) {
                    return Err(bad(format!("\"{s}\" is listed twice")));
                }
                offsets.push(o);
            }
            BlockList::Offsets(offsets)
        }
    };
    Ok(Suppression {
        scope: UncoveredScope {
            entry: u.entry,
            blocks,
        },
        shared,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[uncovered]]
target = "gfx1201"
entry = "w4a16_fused_bf16*"
blocks = ["+0x1a4", "+0x2c0"]
reason = "bf16 paths only fp16 cases reach"
tracking = "issue 31"
expires = 2030-01-01
mode = "xfail-strict"
"#;

    #[test]
    fn uncovered_entries_read_the_shared_keys_and_name_their_blocks() {
        let u = &parse(FILE, Path::new("coverage.toml")).unwrap()[0];
        assert_eq!(u.key, "uncovered[0]");
        assert_eq!(u.target.as_str(), "gfx1201");
        assert_eq!(u.scope.entry.as_str(), "w4a16_fused_bf16*");
        assert_eq!(u.scope.blocks, BlockList::Offsets(vec![0x1a4, 0x2c0]));
        let all = parse(
            &FILE.replace("[\"+0x1a4\", \"+0x2c0\"]", "\"all\""),
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(all[0].scope.blocks, BlockList::All);
    }

    #[test]
    fn uncovered_entry_errors_name_file_key_and_line() {
        let refuse = |t: &str| parse(t, Path::new("x.toml")).unwrap_err().to_string();
        assert_eq!(
            refuse(&FILE.replace("\"+0x2c0\"", "\"0x2c0\"")),
            "x.toml: key \"uncovered[0].blocks\": expected an offset like \"+0x1a4\", got \"0x2c0\" (line 5)"
        );
        assert_eq!(
            refuse(&FILE.replace("\"+0x2c0\"", "\"+0x1a4\"")),
            "x.toml: key \"uncovered[0].blocks\": \"+0x1a4\" is listed twice (line 5)"
        );
        assert_eq!(
            refuse(&FILE.replace("[\"+0x1a4\", \"+0x2c0\"]", "\"some\"")),
            "x.toml: key \"uncovered[0].blocks\": expected \"all\" or a list of offsets like \"+0x1a4\", got \"some\" (line 5)"
        );
        assert_eq!(
            refuse(&FILE.replace("gfx1201", "sm_90")),
            "x.toml: key \"uncovered[0].target\": \"sm_90\" matches no target (gfx1100, gfx1151, gfx1201) (line 3)"
        );
        assert_eq!(
            refuse(&FILE.replace("reason = \"bf16 paths only fp16 cases reach\"\n", "")),
            "x.toml: key \"uncovered[0].reason\": required key is missing (line 2)"
        );
        assert!(parse("", Path::new("x.toml")).unwrap().is_empty());
    }
}
