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
pub use w4a16_kernels::xfail::{Date, Mode, Xfail, strict_xfail};

/// A TOML local date (`expires = 2026-06-30`, unquoted); a date-time or an impossible day is
/// refused at the key. A function, not a `Deserialize` impl: [`Date`] is the kernels crate's,
/// which reads no file format.
pub fn toml_date<'de, D: Deserializer<'de>>(d: D) -> Result<Date, D::Error> {
    let dt = toml::value::Datetime::deserialize(d)?;
    match (dt.date, dt.time, dt.offset) {
        (Some(x), None, None) => Date::new(x.year, x.month, x.day),
        _ => None,
    }
    .ok_or_else(|| de::Error::custom(format!("expected a date like 2026-06-30, got {dt}")))
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

/// Declares the serde table of one kind of suppression: its scope keys, then the shared keys,
/// each with its one type. Every kind is an expansion of this, so the shared keys cannot drift.
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
            #[serde(deserialize_with = "crate::suppress::toml_date")]
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
pub(crate) use suppression_table;

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
    pub fn check_target(&self, targets: &[Target]) -> Result<(), SuppressionError> {
        if targets.iter().any(|t| self.target.matches(t.name())) {
            return Ok(());
        }
        Err(SuppressionError::TargetMatchesNothing {
            pattern: self.target.clone(),
            expected: targets.to_vec(),
        })
    }
}

/// A suppression the schema accepted but that cannot mean what it says.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SuppressionError {
    /// The target pattern names none of the targets this file's entries may cover.
    #[error("\"{pattern}\" matches no target ({})", names(expected))]
    TargetMatchesNothing {
        pattern: Glob,
        /// The targets it was expected to match one of.
        expected: Vec<Target>,
    },
}

fn names(targets: &[Target]) -> String {
    let names: Vec<&str> = targets.iter().map(|t| t.name()).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(s: &str) -> Date {
        Date::parse(s).unwrap()
    }

    #[derive(Debug, Deserialize)]
    struct D {
        #[serde(deserialize_with = "toml_date")]
        expires: Date,
    }

    /// The date, or serde's message for it.
    fn read(v: &str) -> Result<Date, toml::de::Error> {
        toml::from_str::<D>(&format!("expires = {v}")).map(|d| d.expires)
    }

    fn message(v: &str) -> String {
        read(v).unwrap_err().message().to_owned()
    }

    #[test]
    fn dates_read_from_toml_are_local_dates() {
        assert_eq!(read("2026-06-30").unwrap(), date("2026-06-30"));
        assert!(message("\"2026-06-30\"").contains("expected a TOML datetime"));
        assert_eq!(
            message("2026-06-30T12:00:00"),
            "expected a date like 2026-06-30, got 2026-06-30T12:00:00"
        );
        assert_eq!(
            message("2026-06-30T12:00:00Z"),
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
                .unwrap_err()
                .to_string(),
            "\"gfx11*\" matches no target (gfx1201, gfx942)"
        );
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
