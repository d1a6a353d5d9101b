//! JSON report files: pretty-printed serde_json, keys in the producer's field order.

use serde::Serialize;

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
