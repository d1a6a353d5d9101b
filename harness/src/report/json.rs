//! JSON report files: serde_json, keys in the producer's field order.
//!
//! Two layouts. [`pretty`] indents every level (the run, perf and model reports). [`records`]
//! indents the top two levels and writes each deeper value on one line: a report made of
//! thousands of rows (the regret table) stays a third of the size, still reads in a pager, and a
//! re-recorded row shows in a diff as one changed line. Every file the repository keeps counts
//! toward what travels to the GPU machine, so the bulky records use the second.

use std::io;

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};

/// `value` pretty-printed, without a trailing newline (as `report.json`, `perf.json` and
/// `model-report.json` have always been written).
///
/// The report types hold only string-keyed maps and plain values, which always serialize; a
/// failure is a bug in a report type, so it panics naming `what`.
pub fn pretty<T: Serialize + ?Sized>(value: &T, what: &str) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|e| panic!("{what} serializes: {e}"))
}

/// As [`pretty`], ending in a newline (the bench and mutants tables' JSON twins end in one).
pub fn pretty_line<T: Serialize + ?Sized>(value: &T, what: &str) -> String {
    pretty(value, what) + "\n"
}

/// `value` with its top two levels indented and each deeper value on one line (for a top-level
/// object holding a list of rows: one row per line), ending in a newline. Reads back with any
/// JSON reader; panics as [`pretty`] does.
pub fn records<T: Serialize + ?Sized>(value: &T, what: &str) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, RecordsFormatter::new(2));
    value
        .serialize(&mut ser)
        .unwrap_or_else(|e| panic!("{what} serializes: {e}"));
    out.push(b'\n');
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// Pretty (serde_json's own [`PrettyFormatter`]) for containers up to `pretty_depth` deep,
/// compact inside anything deeper.
struct RecordsFormatter {
    pretty: PrettyFormatter<'static>,
    compact: CompactFormatter,
    /// How many containers are open around the current token.
    depth: usize,
    pretty_depth: usize,
}

impl RecordsFormatter {
    fn new(pretty_depth: usize) -> Self {
        RecordsFormatter {
            pretty: PrettyFormatter::new(),
            compact: CompactFormatter,
            depth: 0,
            pretty_depth,
        }
    }

    /// Whether the innermost open container is laid out pretty.
    fn inside_pretty(&self) -> bool {
        self.depth <= self.pretty_depth
    }
}

/// Each structural token goes to the formatter of the container it belongs to.
macro_rules! by_depth {
    ($self:ident . $method:ident ( $($arg:expr),* )) => {
        if $self.inside_pretty() {
            $self.pretty.$method($($arg),*)
        } else {
            $self.compact.$method($($arg),*)
        }
    };
}

impl Formatter for RecordsFormatter {
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        by_depth!(self.begin_array(w))
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        let r = by_depth!(self.end_array(w));
        self.depth -= 1;
        r
    }
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        by_depth!(self.begin_array_value(w, first))
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        by_depth!(self.end_array_value(w))
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        by_depth!(self.begin_object(w))
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        let r = by_depth!(self.end_object(w));
        self.depth -= 1;
        r
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        by_depth!(self.begin_object_key(w, first))
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        by_depth!(self.begin_object_value(w))
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        by_depth!(self.end_object_value(w))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn records_indents_two_levels_and_keeps_rows_on_one_line() {
        let v = json!({
            "target": "sm_90",
            "plan": {"reps": 9},
            "empty": [],
            "rows": [{"key": {"m": 1}, "t": [1.5, 2.0]}, {"key": {"m": 2}, "t": []}],
        });
        let text = records(&v, "a test value");
        let want = "{\n  \"empty\": [],\n  \"plan\": {\n    \"reps\": 9\n  },\n  \"rows\": [\n    \
                    {\"key\":{\"m\":1},\"t\":[1.5,2.0]},\n    {\"key\":{\"m\":2},\"t\":[]}\n  ],\n  \
                    \"target\": \"sm_90\"\n}\n";
        assert_eq!(text, want);
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn records_of_a_shallow_value_equals_pretty() {
        let v = json!({"a": [1, 2], "b": {"c": null}});
        assert_eq!(records(&v, "a test value"), pretty_line(&v, "a test value"));
    }
}
