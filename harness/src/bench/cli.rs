//! `w4a16 bench`: the plan the CLI uses, the device or a loud skip, the table on stdout and
//! the JSON report where asked.

use super::{render_table, run_benchmarks};
use std::path::Path;
use std::process::ExitCode;

use w4a16_device::{BenchPlan, DeviceBench, DeviceRequest, open};
use w4a16_kernels::source::KernelSources;

/// The plan `w4a16 bench` uses. The warm-up launches stay queued ahead of the timed ones, so
/// they must outlast the host: 200 `skinny` launches (~1.5 ms of device work) keep the queue
/// full through 100 timed launches even if each costs the host a few microseconds more to
/// enqueue (launch + two events) than the device takes to run it.
pub const CLI_PLAN: BenchPlan = BenchPlan {
    warmup: 200,
    iters: 100,
};

/// The device a benchmark runs on, or how the command ends without one: a loud skip, a failure
/// under `W4A16_REQUIRE=gpu`.
pub(super) fn device_or_exit(sources: &KernelSources) -> Result<Box<dyn DeviceBench>, ExitCode> {
    open(DeviceRequest::first_gpu().with_sources(sources.clone())).map_err(|skip| {
        if skip.requirement.is_required() {
            eprintln!("W4A16_REQUIRE={} but {skip}", skip.requirement);
            ExitCode::FAILURE
        } else {
            eprintln!("W4A16-SKIP [{}] {}", skip.requirement, skip.reason);
            ExitCode::SUCCESS
        }
    })
}

/// `w4a16 bench [--json PATH]`: the speed benchmark's suite on the first device that opens, the table on
/// stdout. Without a GPU, a loud skip (a failure under `W4A16_REQUIRE=gpu`).
pub fn cli(json: Option<&Path>, sources: &KernelSources) -> ExitCode {
    let device = match device_or_exit(sources) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let report = match run_benchmarks(device.as_ref(), CLI_PLAN) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bench failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    print!("{}", render_table(&report));
    if let Some(path) = json {
        let text = crate::report::json::pretty_line(&report, "a bench report");
        if let Err(e) = crate::report::write_atomic(path, text.as_bytes()) {
            eprintln!("bench: writing {}: {}", path.display(), e.source);
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
