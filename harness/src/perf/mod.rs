//! Perf mode: the selected path of every case of a suite timed with cold inputs,
//! judged against per-target goldens (`perf/<target>.json`) through a ratio to a control
//! measured beside it in the same run, optionally beside a control build and the peers.
//!
//! Pipeline: [`measure`] (device timings) → [`judge`] (against [`golden`], with [`stats`]) →
//! [`report`] (markdown, JSON, JUnit, plot) and, only on request, [`update`] (new goldens).

pub mod counters;
pub mod golden;
pub mod judge;
pub mod key;
pub mod measure;
pub mod peers;
pub mod plot;
pub mod regret;
pub mod report;
pub mod stats;
pub mod update;

pub use measure::PerfError;
