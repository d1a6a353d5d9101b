//! Helpers shared by the workspace's tests, and only by them: every crate takes this one as a
//! dev-dependency, so proptest and insta stay out of the library crates' dependencies.
//!
//! - [`strategy`]: proptest strategies for layer shapes, requests and kernel cases.
//! - [`verdict_snapshots`] (feature `verdicts`): the insta assertion of a run's verdict
//!   snapshot (ARCHITECTURE.md rule 6).

pub mod strategy;
#[cfg(feature = "verdicts")]
pub mod verdict_snapshots;
