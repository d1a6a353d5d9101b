//! Known-bad cases: the [`Suppression`] whose scope is a glob over case ids. A known-bad entry
//! never hides a case: the runner still runs it and applies [`strict_xfail`]. This module parses
//! and matches; the runner enforces.
//!
//! [`strict_xfail`]: super::suppress::strict_xfail

use super::glob::Glob;
use super::suppress::{Suppression, suppression_table};

suppression_table! {
    /// One `[[known_bad]]` table as written.
    pub(crate) struct KnownBadRaw {
        /// Glob over case ids (`*` within a segment, `**` across).
        id: Glob,
    }
}

/// What a known-bad entry covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseIds {
    /// Glob over case ids (`*` within a segment, `**` across).
    pub id: Glob,
}

/// One `[[known_bad]]` entry, checked.
pub type KnownBad = Suppression<CaseIds>;

impl KnownBad {
    pub fn matches(&self, case_id: &str, target: &str) -> bool {
        self.target.matches(target) && self.scope.id.matches(case_id)
    }
}

/// The first entry (in file order) that covers this case on this target.
pub fn known_bad_for<'a>(
    entries: &'a [KnownBad],
    case_id: &str,
    target: &str,
) -> Option<&'a KnownBad> {
    entries.iter().find(|e| e.matches(case_id, target))
}
