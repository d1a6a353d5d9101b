//! Suppressions as data (DESIGN rule 5). A known-bad entry never hides a case: the runner still
//! runs it, fails the run when it passes (strict expected failure) and when the entry's date has
//! passed. This module parses and matches; the runner enforces.

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;

use super::glob::glob_match;

/// A calendar date (UTC), enough for expiry checks without a date-time dependency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    pub year: u16,
    pub month: u8,
    pub day: u8,
}

impl Date {
    /// A valid calendar date, or `None`.
    pub fn new(year: u16, month: u8, day: u8) -> Option<Date> {
        let leap =
            (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400);
        let days = match month {
            1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            2 if leap => 29,
            2 => 28,
            _ => return None,
        };
        (1..=days)
            .contains(&day)
            .then_some(Date { year, month, day })
    }

    /// `YYYY-MM-DD`.
    pub fn parse(s: &str) -> Option<Date> {
        let mut it = s.splitn(3, '-');
        let (y, m, d) = (it.next()?, it.next()?, it.next()?);
        if y.len() != 4 || m.len() != 2 || d.len() != 2 {
            return None;
        }
        Date::new(y.parse().ok()?, m.parse().ok()?, d.parse().ok()?)
    }

    /// Today in UTC, from the system clock.
    pub fn today_utc() -> Date {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Date::from_days_since_epoch((secs / 86_400) as i64)
    }

    /// Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    pub fn from_days_since_epoch(days: i64) -> Date {
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
        let year = (yoe + era * 400 + i64::from(month <= 2)) as u16;
        Date { year, month, day }
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// How a known-bad case is treated. Only strict expected failure exists: a suppression that
/// cannot notice its own fix rots (ANCHORS §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum KnownBadMode {
    #[serde(rename = "xfail-strict")]
    XfailStrict,
}

impl KnownBadMode {
    pub fn name(self) -> &'static str {
        match self {
            KnownBadMode::XfailStrict => "xfail-strict",
        }
    }
}

/// One `[[known_bad]]` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownBad {
    /// Glob over case ids (`*` within a segment, `**` across).
    pub id: String,
    /// Glob over target names (`gfx11*`, `sm_90`, `*`).
    pub target: String,
    pub reason: String,
    /// Issue or ticket that tracks the fix.
    pub tracking: String,
    /// Last day the entry is valid; from the next day the run fails.
    pub expires: Date,
    pub mode: KnownBadMode,
    /// Where it was written, for messages: `cases/known_bad.toml`, `known_bad[2]`.
    pub file: PathBuf,
    pub key: String,
}

impl KnownBad {
    pub fn matches(&self, case_id: &str, target: &str) -> bool {
        glob_match(&self.target, target) && glob_match(&self.id, case_id)
    }

    pub fn is_expired(&self, today: Date) -> bool {
        today > self.expires
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_parse_validate_and_come_from_epoch_days() {
        assert_eq!(Date::parse("2026-02-28"), Date::new(2026, 2, 28));
        assert_eq!(Date::parse("2026-02-29"), None);
        assert_eq!(
            Date::parse("2024-02-29").map(|d| d.to_string()).as_deref(),
            Some("2024-02-29")
        );
        assert_eq!(Date::parse("2026-13-01"), None);
        assert_eq!(Date::parse("26-01-01"), None);
        assert_eq!(
            Date::from_days_since_epoch(0),
            Date::new(1970, 1, 1).unwrap()
        );
        assert_eq!(
            Date::from_days_since_epoch(19_782),
            Date::new(2024, 2, 29).unwrap()
        );
        assert_eq!(
            Date::from_days_since_epoch(20_454),
            Date::new(2026, 1, 1).unwrap()
        );
        assert!(Date::today_utc() > Date::new(2025, 1, 1).unwrap());
    }
}
