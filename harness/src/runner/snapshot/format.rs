//! Insta's snapshot file format, written and read without insta: a YAML header (`source`,
//! `description`), `---`, then the sorted rows. The CLI writes it so that `cargo insta review`
//! accepts its `.snap.new` files and an unchanged run leaves the committed files byte-identical.

use super::SOURCE;
use super::file::SnapshotFile;
use crate::runner::verdict::{SnapshotRow, Verdict};

/// Stable text: one row per check, sorted by case id then check.
pub fn render(verdicts: &[Verdict]) -> String {
    render_rows(verdicts.iter().map(SnapshotRow::from))
}

/// The body of a snapshot: the rows' lines, sorted and deduplicated, each ending in `\n`.
pub fn render_rows(rows: impl IntoIterator<Item = SnapshotRow>) -> String {
    let mut lines: Vec<String> = rows.into_iter().map(|r| r.line()).collect();
    lines.sort();
    lines.dedup();
    let mut out = String::with_capacity(lines.len() * 80);
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// The whole file as insta writes it: a YAML header (`source`, `description`), `---`, the body
/// without trailing blank lines, one final newline.
pub fn render_file(key: &SnapshotFile, body: &str) -> String {
    format!(
        "---\nsource: {}\ndescription: {}\n---\n{}\n",
        yaml_scalar(SOURCE),
        yaml_scalar(&key.description()),
        body.trim_end()
    )
}

/// A YAML scalar as insta's emitter writes it: plain unless it needs quotes, else double-quoted
/// with the emitter's escapes (the rules are those of insta's vendored yaml-rust emitter).
pub(super) fn yaml_scalar(s: &str) -> String {
    let special_start = |c: char| {
        matches!(
            c,
            '&' | '*' | '?' | '|' | '-' | '<' | '>' | '=' | '!' | '%' | '@' | '.'
        )
    };
    let special = |c: char| {
        matches!(
            c,
            ':' | '{' | '}' | '[' | ']' | ',' | '#' | '`' | '"' | '\'' | '\\'
        ) || (c.is_ascii_control()
            && c != '\x07'
            && c != '\x08'
            && c != '\x0b'
            && c != '\x0c'
            && c != '\x1b'
            && c != '\x7f')
    };
    let reserved = [
        "yes", "Yes", "YES", "no", "No", "NO", "True", "TRUE", "true", "False", "FALSE", "false",
        "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL", "~",
    ];
    let quote = s.is_empty()
        || s.starts_with(' ')
        || s.ends_with(' ')
        || s.starts_with(special_start)
        || s.contains(special)
        || reserved.contains(&s)
        || s.starts_with("0x")
        || s.parse::<i64>().is_ok()
        || s.parse::<f64>().is_ok();
    if !quote {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x08' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\x0c' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if c.is_ascii_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The body of an insta snapshot file (what follows its `---` header); the whole text when it
/// has no header.
pub fn body_of(text: &str) -> &str {
    match text.strip_prefix("---") {
        Some(rest) => rest.split_once("\n---\n").map(|(_, b)| b).unwrap_or(""),
        None => text,
    }
}

/// Reads the rows of an insta snapshot file (skipping its `---` header).
pub fn parse_rows(text: &str) -> Vec<SnapshotRow> {
    body_of(text)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(SnapshotRow::parse)
        .collect()
}

/// The first line of a snapshot file that is not what the format expects (1-based, counted in
/// the whole file), as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct MalformedLine {
    pub line: usize,
    pub text: String,
}

/// Reads a snapshot file strictly: its header and every body line must parse; the error names
/// the first line that does not.
pub(super) fn parse_file_strict(text: &str) -> Result<Vec<SnapshotRow>, MalformedLine> {
    let malformed = |line: usize, text: &str| MalformedLine {
        line,
        text: text.to_string(),
    };
    let Some(rest) = text.strip_prefix("---\n") else {
        return Err(malformed(1, text.lines().next().unwrap_or("")));
    };
    let Some((header, body)) = rest.split_once("\n---\n") else {
        return Err(malformed(1, "(no closing `---` of the header)"));
    };
    let first_body_line = header.lines().count() + 3;
    body.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| SnapshotRow::parse(l).ok_or_else(|| malformed(first_body_line + i, l)))
        .collect()
}
