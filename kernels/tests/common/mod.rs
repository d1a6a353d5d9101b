//! Shared by the kernels crate's integration tests.

/// Loud skip of an NVRTC check, or a failure when `W4A16_REQUIRE` names `nvrtc` (the kernels
/// crate cannot depend on the harness, so this mirrors its format).
pub fn skip_or_fail(reason: &str) {
    let required = std::env::var("W4A16_REQUIRE")
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .any(|p| p == "nvrtc" || p == "all")
        })
        .unwrap_or(false);
    if required {
        panic!("W4A16_REQUIRE names nvrtc, but: {reason}");
    }
    eprintln!("W4A16-SKIP [nvrtc] {reason}");
}
