//! Shared by the kernels crate's integration tests.

use w4a16_require::{Requirement, Skip};

/// Loud skip of an NVRTC check, or a failure when `W4A16_REQUIRE` names `nvrtc`.
pub fn skip_or_fail(reason: &str) {
    w4a16_require::skip_or_fail(&Skip {
        requirement: Requirement::Nvrtc,
        reason: reason.to_owned(),
    });
}
