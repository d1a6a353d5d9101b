//! A verdict's outcome: its name in snapshot rows and Markdown, its serde form in report.json.

use serde::{Deserialize, Serialize};

w4a16_reference::named_enum! {
    #[names_only]
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "kebab-case")]
    pub enum Outcome {
        /// Within the bound (or bit-exact where exactness is required).
        Pass = "pass",
        /// The case was meant to be refused and was, with a typed error before any launch.
        Refused = "refused",
        /// A known-bad case (data, ARCHITECTURE.md rule 5) that still fails, as recorded.
        ExpectedFail = "xfail",
        /// Wrong answer, unexpected refusal, guard/poison violation, nondeterminism.
        Fail = "FAIL",
        /// The device faulted or hung on this case.
        Fault = "FAULT",
        /// A known-bad case that now passes: the suppression must be removed.
        UnexpectedPass = "XPASS",
        /// A known-bad entry past its expiry date.
        Expired = "EXPIRED",
        /// Could not run here; `detail` says why.
        Skip = "skip",
    }
}

impl Outcome {
    /// Whether this outcome makes the run fail.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Outcome::Fail | Outcome::Fault | Outcome::UnexpectedPass | Outcome::Expired
        )
    }
}
