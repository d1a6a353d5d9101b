//! Case-file errors name the file and the key, so a person can fix the file without reading
//! the loader. serde only reports a byte span; the key is recovered from the document's spans.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml_edit::{ImDocument, Item, Table, Value};

/// A case file the loader refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseFileError {
    /// The file, as the loader was given it (relative paths stay relative).
    pub file: PathBuf,
    /// Dotted key path, with array indices: `sweep[1].m`, `model[0].layer[2].k`; empty for
    /// errors about the whole file (I/O, syntax before any key).
    pub key: String,
    /// 1-based line of the key or value, when known.
    pub line: Option<usize>,
    pub message: String,
}

impl CaseFileError {
    pub fn new(file: &Path, key: impl Into<String>, message: impl Into<String>) -> Self {
        CaseFileError {
            file: file.to_path_buf(),
            key: key.into(),
            line: None,
            message: message.into(),
        }
    }

    pub fn with_line(mut self, line: Option<usize>) -> Self {
        self.line = line;
        self
    }
}

impl fmt::Display for CaseFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if !self.key.is_empty() {
            write!(f, ": key \"{}\"", self.key)?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}

impl std::error::Error for CaseFileError {}

/// One TOML data file beside the case files (the gate exceptions), read with serde and refused
/// in the case-file style. `at` names a key for checks serde cannot make, with its line.
pub struct DataFile<'a> {
    pub file: &'a Path,
    index: Option<SpanIndex>,
}

impl<'a> DataFile<'a> {
    pub fn parse<T: serde::de::DeserializeOwned>(
        file: &'a Path,
        text: &'a str,
    ) -> Result<(T, DataFile<'a>), CaseFileError> {
        let value = toml::from_str(text).map_err(|e| from_toml_error(file, text, &e))?;
        let index = SpanIndex::new(text);
        Ok((value, DataFile { file, index }))
    }

    /// An error at `key`, on the line where the key (or its nearest written parent) stands.
    pub fn at(&self, key: impl Into<String>, message: impl Into<String>) -> CaseFileError {
        let key = key.into();
        let line = self.index.as_ref().and_then(|ix| ix.line_of_key(&key));
        CaseFileError::new(self.file, key, message).with_line(line)
    }
}

/// One segment of a key path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

fn render(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Every key, value and table header of a parsed document with its span, so that a serde
/// error's byte span maps back to the key a person wrote, and a key path maps to a line.
pub(crate) struct SpanIndex {
    entries: Vec<(String, Range<usize>)>,
    line_starts: Vec<usize>,
}

impl SpanIndex {
    pub(crate) fn new(text: &str) -> Option<SpanIndex> {
        let doc = ImDocument::parse(text).ok()?;
        let mut entries = Vec::new();
        walk_table(doc.as_table(), &mut Vec::new(), &mut entries);
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Some(SpanIndex {
            entries,
            line_starts,
        })
    }

    /// The most specific key path whose key or value span contains `span.start`.
    pub(crate) fn key_at(&self, span: &Range<usize>) -> Option<String> {
        self.entries
            .iter()
            .filter(|(_, r)| r.start <= span.start && span.start < r.end.max(r.start + 1))
            .min_by_key(|(p, r)| (r.end - r.start, usize::MAX - p.len()))
            .map(|(p, _)| p.clone())
    }

    /// The line where `key` was written (its first span); for a key that is missing, the line
    /// of its nearest written ancestor (`sweep[0]` for a missing `sweep[0].m`).
    pub(crate) fn line_of_key(&self, key: &str) -> Option<usize> {
        let mut key = key;
        loop {
            if let Some(start) = self
                .entries
                .iter()
                .filter(|(p, _)| p == key)
                .map(|(_, r)| r.start)
                .min()
            {
                return Some(self.line_of(start));
            }
            key = &key[..key.rfind(['.', '['])?];
        }
    }

    pub(crate) fn line_of(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&s| s <= offset)
    }
}

fn push(entries: &mut Vec<(String, Range<usize>)>, path: &[Seg], span: Option<Range<usize>>) {
    if let Some(r) = span {
        entries.push((render(path), r));
    }
}

fn walk_table(table: &Table, path: &mut Vec<Seg>, entries: &mut Vec<(String, Range<usize>)>) {
    for (k, item) in table.iter() {
        path.push(Seg::Key(k.to_owned()));
        push(entries, path, table.key(k).and_then(|key| key.span()));
        walk_item(item, path, entries);
        path.pop();
    }
}

fn walk_item(item: &Item, path: &mut Vec<Seg>, entries: &mut Vec<(String, Range<usize>)>) {
    match item {
        Item::None => {}
        Item::Value(v) => walk_value(v, path, entries),
        Item::Table(t) => {
            push(entries, path, t.span());
            walk_table(t, path, entries);
        }
        Item::ArrayOfTables(a) => {
            for (i, t) in a.iter().enumerate() {
                path.push(Seg::Index(i));
                push(entries, path, t.span());
                walk_table(t, path, entries);
                path.pop();
            }
        }
    }
}

fn walk_value(v: &Value, path: &mut Vec<Seg>, entries: &mut Vec<(String, Range<usize>)>) {
    push(entries, path, v.span());
    match v {
        Value::Array(a) => {
            for (i, e) in a.iter().enumerate() {
                path.push(Seg::Index(i));
                walk_value(e, path, entries);
                path.pop();
            }
        }
        Value::InlineTable(t) => {
            for (k, e) in t.iter() {
                path.push(Seg::Key(k.to_owned()));
                push(entries, path, t.key(k).and_then(|key| key.span()));
                walk_value(e, path, entries);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Rewrites serde's `invalid type: X, expected Y` into the loader's `expected Y, got X`, and
/// moves a missing or unknown field's name into the key path.
pub(crate) fn from_toml_error(file: &Path, text: &str, err: &toml::de::Error) -> CaseFileError {
    let index = SpanIndex::new(text);
    let message = err.message().trim().to_owned();
    let mut key = match (&index, err.span()) {
        (Some(ix), Some(span)) => ix.key_at(&span).unwrap_or_default(),
        _ => String::new(),
    };
    let line = match (&index, err.span()) {
        (Some(ix), Some(span)) => Some(ix.line_of(span.start)),
        (None, Some(span)) => Some(text[..span.start.min(text.len())].matches('\n').count() + 1),
        _ => None,
    };
    let message = if let Some(field) = between(&message, "missing field `", "`") {
        key = join_key(&key, field);
        "required key is missing".to_owned()
    } else if let Some(field) = between(&message, "unknown field `", "`") {
        // The span already points at the unknown key; keep the list of known ones.
        if !key.ends_with(field) {
            key = join_key(&key, field);
        }
        let expected = message
            .split_once(", expected ")
            .map(|(_, e)| e)
            .unwrap_or("");
        format!("unknown key; expected {expected}")
    } else if let Some(rest) = message.strip_prefix("invalid type: ") {
        match rest.split_once(", expected ") {
            Some((got, expected)) => {
                let expected =
                    expected.replace("a TOML datetime", "an unquoted date such as 2026-06-30");
                format!("expected {expected}, got {}", strip_kind(got))
            }
            None => message.clone(),
        }
    } else if let Some(rest) = message.strip_prefix("invalid value: ") {
        match rest.split_once(", expected ") {
            Some((got, expected)) => format!("expected {expected}, got {}", strip_kind(got)),
            None => message.clone(),
        }
    } else if let Some(rest) = message.strip_prefix("unknown variant ") {
        match rest.split_once(", expected ") {
            Some((got, expected)) => format!("unknown value {got}; expected {expected}"),
            None => message.clone(),
        }
    } else {
        message.clone()
    };
    CaseFileError {
        file: file.to_path_buf(),
        key,
        line,
        message,
    }
}

/// `string "x"` → `"x"`, `integer \`-1\`` → `-1`.
fn strip_kind(got: &str) -> String {
    let got = got.trim();
    for prefix in ["string ", "integer ", "floating point ", "boolean "] {
        if let Some(v) = got.strip_prefix(prefix) {
            return v.trim_matches('`').to_owned();
        }
    }
    got.to_owned()
}

fn between<'a>(s: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = s.find(open)? + open.len();
    let len = s[start..].find(close)?;
    Some(&s[start..start + len])
}

fn join_key(base: &str, field: &str) -> String {
    if base.is_empty() {
        field.to_owned()
    } else {
        format!("{base}.{field}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_paths_follow_tables_arrays_and_inline_tables() {
        let text = "a = 1\n[suite]\nm = [1, 2]\n[[sweep]]\nx = 1\n[[sweep]]\ny = { z = 3 }\n";
        let ix = SpanIndex::new(text).unwrap();
        let at = |needle: &str| {
            let start = text.find(needle).unwrap();
            ix.key_at(&(start..start + needle.len())).unwrap()
        };
        assert_eq!(at("2]"), "suite.m[1]");
        assert_eq!(at("x = 1"), "sweep[0].x");
        assert_eq!(at("3 }"), "sweep[1].y.z");
        assert_eq!(ix.line_of_key("sweep[1].y"), Some(7));
        assert_eq!(ix.line_of_key("sweep[1].missing"), Some(6));
    }

    #[test]
    fn display_names_file_key_and_line() {
        let e = CaseFileError::new(
            Path::new("cases/sweeps/decode.toml"),
            "suite.m",
            "expected a list",
        )
        .with_line(Some(3));
        assert_eq!(
            e.to_string(),
            "cases/sweeps/decode.toml: key \"suite.m\": expected a list (line 3)"
        );
    }
}
