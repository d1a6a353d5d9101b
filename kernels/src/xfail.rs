//! The strict expected-failure rule (ARCHITECTURE.md rule 5) and the date it expires on, shared
//! by known-bad cases and code-object gate exceptions. Plain values, no file format: the case
//! files read them (`w4a16_cases::suppress`), the code-object gates judge with them.

use std::fmt;

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
            .map_or(0, |d| d.as_secs());
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

w4a16_reference::named_enum! {
    /// How a suppression is treated. Only strict expected failure exists: a suppression that
    /// cannot notice its own fix rots (docs/field.md §5).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Mode {
        XfailStrict = "xfail-strict",
    }
}

/// What a strict expected failure makes of an observation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Xfail {
    /// It failed, as the entry says: not held against the run (XFAIL).
    Caught,
    /// Nothing failed: the entry is stale and fails the run until it is removed (XPASS).
    UnexpectedPass,
    /// The entry's last day has passed: the run fails whatever was observed (EXPIRED).
    Expired,
}

/// The one strict-xfail rule, for known-bad cases and gate exceptions alike: past `expires`
/// the entry fails the run; before it, a failure is caught and a pass is an unexpected pass.
pub fn strict_xfail(mode: Mode, failed: bool, expires: Date, today: Date) -> Xfail {
    match mode {
        Mode::XfailStrict if today > expires => Xfail::Expired,
        Mode::XfailStrict if failed => Xfail::Caught,
        Mode::XfailStrict => Xfail::UnexpectedPass,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(s: &str) -> Date {
        Date::parse(s).unwrap()
    }

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
        assert_eq!(Date::from_days_since_epoch(0), date("1970-01-01"));
        assert_eq!(Date::from_days_since_epoch(19_782), date("2024-02-29"));
        assert_eq!(Date::from_days_since_epoch(20_000), date("2024-10-04"));
        assert_eq!(Date::from_days_since_epoch(20_454), date("2026-01-01"));
        assert!(date("2025-01-31") < date("2025-02-01"));
        assert!(Date::today_utc() > date("2025-01-01"));
    }

    #[test]
    fn strict_xfail_catches_failures_flags_passes_and_expires() {
        let (exp, before, on, after) = (
            date("2026-06-30"),
            date("2026-01-01"),
            date("2026-06-30"),
            date("2026-07-01"),
        );
        let x = |failed, today| strict_xfail(Mode::XfailStrict, failed, exp, today);
        assert_eq!(x(true, before), Xfail::Caught);
        assert_eq!(x(true, on), Xfail::Caught);
        assert_eq!(x(false, before), Xfail::UnexpectedPass);
        assert_eq!(x(false, on), Xfail::UnexpectedPass);
        assert_eq!(x(true, after), Xfail::Expired);
        assert_eq!(x(false, after), Xfail::Expired);
    }
}
