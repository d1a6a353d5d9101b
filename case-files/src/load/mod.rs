//! Loading: parse every file (serde, unknown keys refused), merge the shared sections, expand
//! each suite's sweeps into cases, check known-bad entries and model descriptions against the
//! result. Every refusal names the file and the key.
//!
//! One step per submodule, in the order [`build`] runs them: [`shapes`] (the sections all files
//! share: batch sizes, providers, models, shapes), [`suite`] (each suite's cases, from its
//! [`sweep`]s, [`moe_sweep`]s and `[[case]]` entries, all through [`point`]), [`cross_check`]
//! (known-bad entries and model descriptions against the cases). [`rules`] holds the format
//! rules they share.

mod cross_check;
mod moe_sweep;
mod point;
mod rules;
mod shapes;
mod suite;
mod sweep;

use std::path::{Path, PathBuf};

use super::CaseSet;
use super::error::{CaseFileError, SpanIndex, from_toml_error};
use super::model::ModelDescription;
use super::schema::CaseFile;

/// Loads `dir/*.toml` and `dir/sweeps/*.toml` as case files and `dir/models/*.toml` as model
/// descriptions. Other folders (`invalid/`, `exceptions/`) are not case files.
pub fn load_all(dir: &Path) -> Result<CaseSet, CaseFileError> {
    if !dir.is_dir() {
        return Err(CaseFileError::new(dir, "", "not a folder of case files"));
    }
    let files = case_files(dir)?;
    let mut models = Vec::new();
    for path in toml_files(&dir.join("models"))? {
        models.push(ModelDescription::load(&path)?);
    }
    let sources = read_all(&files)?;
    build(&sources, models)
}

/// The case files `load_all` reads: `dir/*.toml`, then `dir/sweeps/*.toml`, each sorted.
pub fn case_files(dir: &Path) -> Result<Vec<PathBuf>, CaseFileError> {
    let mut files = toml_files(dir)?;
    files.extend(toml_files(&dir.join("sweeps"))?);
    Ok(files)
}

/// Loads exactly these case files (no model descriptions), in this order.
pub fn load_files(files: &[PathBuf]) -> Result<CaseSet, CaseFileError> {
    build(&read_all(files)?, Vec::new())
}

/// Loads case files from memory: `(path for messages, text)`.
pub fn load_sources(sources: &[(PathBuf, String)]) -> Result<CaseSet, CaseFileError> {
    build(sources, Vec::new())
}

fn toml_files(dir: &Path) -> Result<Vec<PathBuf>, CaseFileError> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let entries = std::fs::read_dir(dir)
        .map_err(|e| CaseFileError::new(dir, "", format!("cannot list: {e}")))?;
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
        .collect();
    out.sort();
    Ok(out)
}

fn read_all(files: &[PathBuf]) -> Result<Vec<(PathBuf, String)>, CaseFileError> {
    files
        .iter()
        .map(|p| {
            std::fs::read_to_string(p)
                .map(|t| (p.clone(), t))
                .map_err(|e| CaseFileError::new(p, "", format!("cannot read: {e}")))
        })
        .collect()
}

/// One case file, parsed, with the spans that turn a key into a line for messages.
struct Parsed<'a> {
    path: &'a Path,
    raw: CaseFile,
    index: Option<SpanIndex>,
}

impl Parsed<'_> {
    fn err(&self, key: impl Into<String>, message: impl Into<String>) -> CaseFileError {
        let key = key.into();
        let line = self.index.as_ref().and_then(|ix| ix.line_of_key(&key));
        CaseFileError::new(self.path, key, message).with_line(line)
    }
}

/// Where a name was first defined, for "defined twice" messages.
fn origin(path: &Path, key: &str) -> String {
    format!("{} (key \"{key}\")", path.display())
}

/// A name as case ids carry it: lowercase ASCII, digits, `-`, `_`, and `.` where `dots`.
fn valid_name(name: &str, dots: bool) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| {
            c.is_ascii_lowercase()
                || c.is_ascii_digit()
                || c == '-'
                || c == '_'
                || (dots && c == '.')
        })
}

/// Every source through serde (unknown keys refused), in order.
fn parse_all(sources: &[(PathBuf, String)]) -> Result<Vec<Parsed<'_>>, CaseFileError> {
    sources
        .iter()
        .map(|(path, text)| {
            let raw: CaseFile =
                toml::from_str(text).map_err(|e| from_toml_error(path, text, &e))?;
            Ok(Parsed {
                path,
                raw,
                index: SpanIndex::new(text),
            })
        })
        .collect()
}

/// The whole load, one step after another: each step reads what the ones before it built.
fn build(
    sources: &[(PathBuf, String)],
    models: Vec<ModelDescription>,
) -> Result<CaseSet, CaseFileError> {
    let parsed = parse_all(sources)?;
    let mut set = CaseSet::default();
    shapes::read_shared_sections(&parsed, &mut set)?;
    suite::add_suites(&parsed, &mut set)?;
    for f in &parsed {
        for (i, kb) in f.raw.known_bad.iter().enumerate() {
            set.known_bad
                .push(cross_check::check_known_bad(f, i, kb, &set)?);
        }
    }
    cross_check::check_descriptions(&models, &set)?;
    set.models = models;
    Ok(set)
}
