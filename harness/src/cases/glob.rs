//! The one pattern language of case files: `*` matches within one `/`-separated segment, `**`
//! matches across segments, `?` matches one character other than `/`. Case ids, shape names
//! and target names all use it.

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
    use super::glob_match;

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
    }
}
