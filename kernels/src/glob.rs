//! The one pattern language of case files and suppressions: `*` matches within one
//! `/`-separated segment, `**` matches across segments, `?` matches one character other than
//! `/`. Case ids, shape names, target names and code-object entry names all use it. It lives
//! below the case files so the code-object gates match with it without reading case files
//! (`w4a16_cases::glob` re-exports it).

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer};

/// A pattern as written in a data file: not empty, no whitespace (a space in an id or a target
/// name is always a typo, and such a pattern would quietly match nothing).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Glob(String);

impl Glob {
    /// A pattern from code (tests, CLI filters); files go through `Deserialize`.
    pub fn new(pattern: impl Into<String>) -> Glob {
        Glob(pattern.into())
    }

    pub fn matches(&self, text: &str) -> bool {
        glob_match(&self.0, text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Glob {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Glob, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() || s.contains(char::is_whitespace) {
            return Err(de::Error::custom(format!(
                "expected a glob pattern without spaces, got \"{s}\""
            )));
        }
        Ok(Glob(s))
    }
}

/// Whether `text` matches `pattern`.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    matches(&p, &t)
}

/// Whether `pattern` has any wildcard (a plain name must then match exactly).
pub fn is_pattern(pattern: &str) -> bool {
    pattern.contains(['*', '?'])
}

fn matches(p: &[char], t: &[char]) -> bool {
    // Dynamic programming over (pattern index, text index): no exponential backtracking on
    // long ids with many stars.
    let (np, nt) = (p.len(), t.len());
    let mut dp = vec![vec![false; nt + 1]; np + 1];
    dp[np][nt] = true;
    for i in (0..np).rev() {
        let double = p[i] == '*' && p.get(i + 1) == Some(&'*');
        for j in (0..=nt).rev() {
            dp[i][j] = if double {
                // `**` consumes any run, `/` included; skip both stars.
                dp[i + 2][j] || (j < nt && dp[i][j + 1])
            } else if p[i] == '*' {
                if i > 0 && p[i - 1] == '*' {
                    // Second star of a `**` pair; reached only through `i + 2` above.
                    dp[i + 1][j]
                } else {
                    dp[i + 1][j] || (j < nt && t[j] != '/' && dp[i][j + 1])
                }
            } else if p[i] == '?' {
                j < nt && t[j] != '/' && dp[i + 1][j + 1]
            } else {
                j < nt && t[j] == p[i] && dp[i + 1][j + 1]
            };
        }
    }
    dp[0][0]
}

#[cfg(test)]
mod tests {
    use super::{Glob, glob_match};

    #[test]
    fn star_stays_in_a_segment_and_double_star_crosses() {
        let id = "field/qwen3-8b.down/M=4/bf16/asym/g128/realistic";
        assert!(glob_match("field/qwen3-8b.*/M=4/*/asym/*/*", id));
        assert!(!glob_match("field/*/asym/**", id));
        assert!(glob_match("field/**/asym/**", id));
        assert!(glob_match("**", id));
        assert!(!glob_match("field/*", id));
        assert!(glob_match("gfx11*", "gfx1151"));
        assert!(!glob_match("gfx11*", "gfx1201"));
        assert!(glob_match("gfx1?51", "gfx1151"));
        assert!(glob_match("qwen3-8b.*", "qwen3-8b.down"));
        assert!(!glob_match("qwen3-8b.*", "qwen3-4b.down"));
        assert!(glob_match("a**b", "a/x/b"));
        assert!(glob_match("", ""));
        assert!(!glob_match("", "x"));
        // Entry and target names have no `/`: there `*` spans any run, as gate exceptions need.
        assert!(glob_match("w4a16_*_f16*", "w4a16_fused_f16_64x64x32w4"));
        assert!(glob_match("*", "gfx1100"));
        assert!(!glob_match("gfx1100", "gfx11000"));
    }

    #[test]
    fn globs_from_files_refuse_blanks() {
        #[derive(Debug, serde::Deserialize)]
        struct T {
            g: Glob,
        }
        let read = |v: &str| toml::from_str::<T>(&format!("g = {v}")).map(|t| t.g);
        assert_eq!(read("\"gfx11*\"").unwrap(), Glob::new("gfx11*"));
        assert!(read("\"gfx11*\"").unwrap().matches("gfx1151"));
        for bad in ["\"\"", "\"gfx 11\""] {
            let e = read(bad).unwrap_err();
            assert!(
                e.message()
                    .starts_with("expected a glob pattern without spaces"),
                "{e}"
            );
        }
    }
}
