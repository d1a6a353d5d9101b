//! The static-gate exceptions file (`cases/exceptions/static-gates.toml`), read here with the
//! case files' suppression schema (ARCHITECTURE.md rule 5) and handed to the code-object gates
//! as plain [`GateException`] values: the shared keys are the ones `[[known_bad]]` entries
//! have, refused with the same messages; only the scope (gate, entries) is the gates'.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer};
use w4a16_codeobject::gates::{EntryMatch, ExceptionSet, Gate, GateException};
use w4a16_kernels::{KernelId, Target};

use super::glob::Glob;
use super::suppress::suppression_table;
use super::{CaseFileError, DataFile};

fn kernel_name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<KernelId>, D::Error> {
    KernelId::deserialize(d).map(Some)
}

suppression_table! {
    /// One `[[exception]]` table as written: the shared suppression keys plus the gate and the
    /// entries it covers.
    struct ExceptionRaw {
        /// Glob on the entry name; exclusive with `kernel`.
        #[serde(default)]
        entry: Option<Glob>,
        /// Every entry of one kernel; exclusive with `entry`.
        #[serde(default, deserialize_with = "kernel_name")]
        kernel: Option<KernelId>,
        gate: Gate,
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExceptionFile {
    #[serde(default)]
    exception: Vec<ExceptionRaw>,
}

/// The static-gate exceptions file of the case folder `cases_dir` (see [`crate::locate`]).
pub fn exceptions_path(cases_dir: &Path) -> PathBuf {
    cases_dir.join("exceptions").join("static-gates.toml")
}

/// Reads and checks the exceptions file at `path`.
pub fn load(path: &Path) -> Result<ExceptionSet, CaseFileError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CaseFileError::new(path, "", format!("cannot read: {e}")))?;
    parse(&text, path)
}

/// Reads the file through the shared suppression schema; beyond serde, an entry needs exactly
/// one of `entry` and `kernel`, and its target must name an AMD code-object target.
pub fn parse(text: &str, file: &Path) -> Result<ExceptionSet, CaseFileError> {
    let (raw, data): (ExceptionFile, _) = DataFile::parse(file, text)?;
    let exceptions = raw
        .exception
        .into_iter()
        .enumerate()
        .map(|(i, e)| check(&data, i, e))
        .collect::<Result<_, _>>()?;
    Ok(ExceptionSet {
        file: file.to_path_buf(),
        exceptions,
    })
}

/// One table, checked beyond serde.
fn check(data: &DataFile, i: usize, e: ExceptionRaw) -> Result<GateException, CaseFileError> {
    let key = format!("exception[{i}]");
    let entries = match (&e.entry, e.kernel) {
        (Some(g), None) => EntryMatch::Entry(g.clone()),
        (None, Some(k)) => EntryMatch::Kernel(k),
        _ => {
            return Err(data.at(key, "needs exactly one of `entry` (a glob) or `kernel`"));
        }
    };
    let shared = e.shared(data.file, key.clone());
    shared
        .check_target(&Target::AMD_CODE_OBJECT_TARGETS)
        .map_err(|m| data.at(format!("{key}.target"), m.to_string()))?;
    Ok(GateException {
        entries,
        gate: e.gate,
        target: shared.target,
        reason: shared.reason,
        tracking: shared.tracking,
        expires: shared.expires,
        mode: shared.mode,
        file: shared.file,
        key: shared.key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Date;

    fn date(s: &str) -> Date {
        Date::parse(s).unwrap()
    }

    const FILE: &str = r#"
[[exception]]
target = "gfx12*"
kernel = "fused"
gate = "fused-wmma"
reason = "gfx12 WMMA layout not done"
tracking = "issue 4"
expires = 2030-01-01
mode = "xfail-strict"
"#;

    fn set(text: &str) -> ExceptionSet {
        parse(text, Path::new("static-gates.toml")).unwrap()
    }

    #[test]
    fn exception_file_errors_name_file_key_and_line() {
        let refuse = |t: &str| parse(t, Path::new("x.toml")).unwrap_err().to_string();
        assert_eq!(
            refuse(&FILE.replace("fused-wmma", "fused-mma")),
            "x.toml: key \"exception[0].gate\": unknown value `fused-mma`; expected one of `no-scratch`, `no-spill`, `fp16-v_and_or_b32`, `fused-wmma` (line 5)"
        );
        assert!(
            refuse(&FILE.replace("\"fused\"", "\"fuse\"")).starts_with(
                "x.toml: key \"exception[0].kernel\": unknown value `fuse`; expected one of `skinny`, `fused`,"
            )
        );
        assert_eq!(
            refuse(&FILE.replace("2030-01-01", "\"2030-01-01\"")),
            "x.toml: key \"exception[0].expires\": expected an unquoted date such as 2026-06-30, got \"2030-01-01\" (line 8)"
        );
        assert_eq!(
            refuse(&FILE.replace("reason = \"gfx12 WMMA layout not done\"\n", "")),
            "x.toml: key \"exception[0].reason\": required key is missing (line 2)"
        );
        assert_eq!(
            refuse(&FILE.replace("tracking = \"issue 4\"", "tracking = \" \"")),
            "x.toml: key \"exception[0].tracking\": must not be empty (line 7)"
        );
        assert_eq!(
            refuse(&FILE.replace(
                "kernel = \"fused\"",
                "kernel = \"fused\"\nentry = \"w4a16_fused_*\""
            )),
            "x.toml: key \"exception[0]\": needs exactly one of `entry` (a glob) or `kernel` (line 2)"
        );
        assert_eq!(
            refuse(&FILE.replace("gfx12*", "sm_90")),
            "x.toml: key \"exception[0].target\": \"sm_90\" matches no target (gfx1100, gfx1151, gfx1201) (line 3)"
        );
        assert!(
            refuse(&FILE.replace("tracking", "trackin"))
                .starts_with("x.toml: key \"exception[0].trackin\": unknown key; expected one of")
        );
        let m = refuse(&FILE.replace("mode = \"xfail-strict\"", "mode = \"skip\""));
        assert!(
            m.starts_with(
                "x.toml: key \"exception[0].mode\": unknown value `skip`; expected `xfail-strict`"
            ),
            "{m}"
        );
        assert!(refuse("[[exception]\n").starts_with("x.toml: "));
        assert_eq!(set("").exceptions.len(), 0);
    }

    #[test]
    fn exceptions_read_the_shared_keys_like_known_bad_entries() {
        let e = &set(FILE).exceptions[0];
        assert_eq!(e.key, "exception[0]");
        assert_eq!(e.target.as_str(), "gfx12*");
        assert_eq!(e.expires, date("2030-01-01"));
        assert_eq!(e.tracking, "issue 4");
        assert_eq!(e.entries, EntryMatch::Kernel(KernelId::Fused));
        assert_eq!(e.gate, Gate::FusedWmma);
    }
}
