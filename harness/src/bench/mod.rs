//! The speed benchmark: `skinny` against the device's own copy bandwidth, `fused`
//! against the vendor BLAS on the dequantized copy, all in one run on one device.
//!
//! Conventions (also written into every report, so a table never travels without them):
//! - the copy ceiling counts read + write bytes: a copy of B bytes moves 2·B through memory;
//! - a GEMM's traffic is the logical bytes it must touch once: int4 weights N·K/2, scales
//!   N·(K/G)·2, packed zero points (N/8)·(K/G)·4 (asymmetric only), X M·K·2 and Y M·N·2; row
//!   padding is not counted;
//! - TFLOP/s = 2·M·N·K / t, for the fused kernel and the BLAS alike (dequantization not counted);
//! - times are medians of per-launch device-event intervals, with warm-up launches left queued
//!   so that each interval holds device time, not the host's enqueue latency;
//! - the int4 weights (~29 MB here) would fit in the H200's L2, so `skinny` and `fused` rotate
//!   through [`BenchSuite::weight_copies`] separately allocated copies of all their inputs:
//!   each launch reads buffers that several launches' worth of other data have passed through
//!   the cache since (cold reads, as a decode step sees its weights). The dense copy (N·K·2
//!   bytes, ~117 MB) is larger than L2 on its own and is not rotated.
//!
//! Layout: `suite` (what to measure), `measure` (timing it on a device), `report` (rates,
//! ratios and targets from the timings), `table` (markdown rendering), `cli` (the `w4a16
//! bench` command) and `error`; [`moe`] is the MoE benchmark beside it. Every public item is
//! re-exported here, so `bench::X` paths stay as they were.

mod cli;
mod error;
mod measure;
pub mod moe;
mod report;
mod suite;
mod table;
#[cfg(test)]
mod tests;

pub use cli::{CLI_PLAN, cli};
pub use error::BenchError;
pub use measure::{FusedTiming, RunInfo, SkinnyTiming, run_benchmarks, run_suite};
pub use report::{
    BenchReport, CopyResult, FUSED_OVER_DENSE_TARGET, FusedResult, SKINNY_M5_OVER_M1_TARGET,
    SKINNY_OF_COPY_TARGET, SkinnyResult, TargetCheck, TimeUs, Traffic, build_report, conventions,
    copy_gb_per_s, gb_per_s, tflop_per_s,
};
pub use suite::{BenchSuite, FusedCase, SkinnyCase};
pub use table::render_table;

// Shared with the MoE benchmark (`moe.rs` reaches them as `super::…`).
use cli::device_or_exit;
use error::dev;
use measure::progress;
