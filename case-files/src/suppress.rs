//! The one suppression mechanism (ARCHITECTURE.md rule 5), shared by known-bad cases
//! (`[[known_bad]]` in case files) and code-object gate exceptions
//! (`[[exception]]` in `cases/exceptions/static-gates.toml`).
//!
//! Both are a [`Suppression`]: a scope (which cases, which gate results) plus the same shared
//! keys (`target`, `reason`, `tracking`, `expires`, `mode`), read by serde with the same field
//! types, so both files refuse the same mistakes with the same messages (file, key, line). A
//! suppression never hides anything: what it covers still runs and [`strict_xfail`] turns the
//! observation into a caught failure, a stale entry (XPASS) or an expired one.

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use serde::de::{self, Deserializer};
use w4a16_kernels::Target;

use super::glob::Glob;

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

/// A TOML local date (`expires = 2026-06-30`, unquoted); a date-time or an impossible day is
/// refused at the key.
impl<'de> Deserialize<'de> for Date {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Date, D::Error> {
        let dt = toml::value::Datetime::deserialize(d)?;
        match (dt.date, dt.time, dt.offset) {
            (Some(x), None, None) => Date::new(x.year, x.month, x.day),
            _ => None,
        }
        .ok_or_else(|| de::Error::custom(format!("expected a date like 2026-06-30, got {dt}")))
    }
}

/// Free text that must say something (`reason`, `tracking`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim().is_empty() {
            return Err(de::Error::custom("must not be empty"));
        }
        Ok(Text(s))
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
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

/// Declares the serde table of one kind of suppression: its scope keys, then the shared keys,
/// each with its one type. Every kind is an expansion of this, so the shared keys cannot drift.
/// Exported for the code-object crate's gate exceptions.
#[macro_export]
macro_rules! suppression_table {
    ($(#[$meta:meta])* $vis:vis struct $name:ident { $($(#[$fmeta:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        $vis struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
            /// Glob over target names (`gfx11*`, `sm_90`, `*`).
            pub target: $crate::glob::Glob,
            pub reason: $crate::suppress::Text,
            /// Issue or ticket that tracks the fix.
            pub tracking: $crate::suppress::Text,
            /// Last day the entry is valid; from the next day the run fails.
            pub expires: $crate::suppress::Date,
            pub mode: $crate::suppress::Mode,
        }

        impl $name {
            /// The shared keys, and where they were written.
            pub(crate) fn shared(
                &self,
                file: &std::path::Path,
                key: String,
            ) -> $crate::suppress::Shared {
                $crate::suppress::Shared {
                    target: self.target.clone(),
                    reason: self.reason.0.clone(),
                    tracking: self.tracking.0.clone(),
                    expires: self.expires,
                    mode: self.mode,
                    file: file.to_path_buf(),
                    key,
                }
            }
        }
    };
}
pub use crate::suppression_table;

/// The keys every suppression has, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shared {
    /// Glob over target names.
    pub target: Glob,
    pub reason: String,
    pub tracking: String,
    pub expires: Date,
    pub mode: Mode,
    /// Where it was written, for messages: `cases/known_bad.toml`, `known_bad[2]`.
    pub file: PathBuf,
    pub key: String,
}

/// One suppression: what it covers (`S`) and the shared keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Suppression<S> {
    pub scope: S,
    pub shared: Shared,
}

impl<S> std::ops::Deref for Suppression<S> {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.shared
    }
}

impl<S> Suppression<S> {
    pub fn is_expired(&self, today: Date) -> bool {
        today > self.expires
    }

    /// [`strict_xfail`] with this entry's expiry.
    pub fn judge(&self, failed: bool, today: Date) -> Xfail {
        strict_xfail(self.mode, failed, self.expires, today)
    }
}

impl Shared {
    /// Refuses a target pattern that matches none of `targets`: a typo would suppress nothing.
    pub fn check_target(&self, targets: &[Target]) -> Result<(), String> {
        if targets.iter().any(|t| self.target.matches(t.name())) {
            return Ok(());
        }
        let names: Vec<&str> = targets.iter().map(|t| t.name()).collect();
        Err(format!(
            "\"{}\" matches no target ({})",
            self.target,
            names.join(", ")
        ))
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

    #[derive(Debug, Deserialize)]
    struct D {
        expires: Date,
    }

    fn read(v: &str) -> Result<Date, String> {
        toml::from_str::<D>(&format!("expires = {v}"))
            .map(|d| d.expires)
            .map_err(|e| e.message().to_owned())
    }

    #[test]
    fn dates_read_from_toml_are_local_dates() {
        assert_eq!(read("2026-06-30"), Ok(date("2026-06-30")));
        assert!(
            read("\"2026-06-30\"")
                .unwrap_err()
                .contains("expected a TOML datetime")
        );
        assert_eq!(
            read("2026-06-30T12:00:00").unwrap_err(),
            "expected a date like 2026-06-30, got 2026-06-30T12:00:00"
        );
        assert_eq!(
            read("2026-06-30T12:00:00Z").unwrap_err(),
            "expected a date like 2026-06-30, got 2026-06-30T12:00:00Z"
        );
    }

    #[test]
    fn expiry_counts_the_last_day_as_valid() {
        let s = Suppression {
            scope: (),
            shared: Shared {
                target: Glob::new("gfx11*"),
                reason: "r".into(),
                tracking: "t".into(),
                expires: date("2026-03-31"),
                mode: Mode::XfailStrict,
                file: "f.toml".into(),
                key: "k[0]".into(),
            },
        };
        assert!(!s.is_expired(date("2026-03-31")));
        assert!(s.is_expired(date("2026-04-01")));
        assert_eq!(s.judge(true, date("2026-03-31")), Xfail::Caught);
        assert_eq!(s.judge(true, date("2026-04-01")), Xfail::Expired);
        assert!(s.check_target(&[Target::Gfx1151]).is_ok());
        assert_eq!(
            s.check_target(&[Target::Gfx1201, Target::Gfx942])
                .unwrap_err(),
            "\"gfx11*\" matches no target (gfx1201, gfx942)"
        );
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

    #[test]
    fn names_are_read_from_a_closed_list() {
        #[derive(Debug, Deserialize)]
        struct K {
            kernel: w4a16_kernels::KernelId,
        }
        let k: K = toml::from_str("kernel = \"fused\"").unwrap();
        assert_eq!(k.kernel, w4a16_kernels::KernelId::Fused);
        let e = toml::from_str::<K>("kernel = \"fuse\"").unwrap_err();
        assert!(
            e.message()
                .starts_with("unknown variant `fuse`, expected one of `skinny`, `fused`,"),
            "{e}"
        );
    }
}
