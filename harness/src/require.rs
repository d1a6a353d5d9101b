//! Loud skips (DESIGN rule 4): a check that cannot run here says why, and
//! `W4A16_REQUIRE=gpu,amd-toolchain,nvrtc` turns that skip into a failure.

use std::fmt;

/// Something a check needs from the machine it runs on.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Requirement {
    /// A usable GPU (CUDA or ROCm device).
    Gpu,
    /// clang-19 (or ROCm clang) with the HIP headers and AMD device bitcode.
    AmdToolchain,
    /// NVRTC and the CUDA headers (PyPI wheels or a toolkit).
    Nvrtc,
}

impl Requirement {
    pub const ALL: [Requirement; 3] = [
        Requirement::Gpu,
        Requirement::AmdToolchain,
        Requirement::Nvrtc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Requirement::Gpu => "gpu",
            Requirement::AmdToolchain => "amd-toolchain",
            Requirement::Nvrtc => "nvrtc",
        }
    }

    /// Whether `W4A16_REQUIRE` names this requirement (comma separated; `all` names every one).
    pub fn is_required(self) -> bool {
        required_from(std::env::var("W4A16_REQUIRE").ok().as_deref()).contains(&self)
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a `W4A16_REQUIRE` value. Unknown names are kept out (and reported by `check_env`).
pub fn required_from(value: Option<&str>) -> Vec<Requirement> {
    let Some(v) = value else { return Vec::new() };
    let mut out = Vec::new();
    for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if part == "all" {
            return Requirement::ALL.to_vec();
        }
        if let Some(r) = Requirement::ALL.into_iter().find(|r| r.name() == part) {
            out.push(r);
        }
    }
    out
}

/// Names in `W4A16_REQUIRE` that mean nothing (a typo must not silently require nothing).
pub fn unknown_required(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|p| {
            !p.is_empty() && *p != "all" && !Requirement::ALL.iter().any(|r| r.name() == *p)
        })
        .map(str::to_owned)
        .collect()
}

/// A check that did not run, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Skip {
    pub requirement: Requirement,
    pub reason: String,
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "skipped (needs {}): {}", self.requirement, self.reason)
    }
}

/// For tests: print a loud skip line, or panic when the requirement is demanded.
/// libtest has no runtime skip, so the line goes to stderr with a fixed prefix that the
/// README's test command surfaces (`--nocapture` is not needed: stderr of passing tests is shown
/// by `cargo test -- --show-output`).
pub fn skip_or_fail(skip: &Skip) {
    if skip.requirement.is_required() {
        panic!("W4A16_REQUIRE={} but {}", skip.requirement, skip);
    }
    eprintln!("W4A16-SKIP [{}] {}", skip.requirement, skip.reason);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_require_lists() {
        assert_eq!(
            required_from(Some("gpu, nvrtc")),
            vec![Requirement::Gpu, Requirement::Nvrtc]
        );
        assert_eq!(required_from(Some("all")).len(), 3);
        assert!(required_from(None).is_empty());
        assert_eq!(unknown_required("gpu,gpus"), vec!["gpus".to_string()]);
    }
}
