//! Shape fuzzing for the kernels: proptest cases valid by construction — K = groups·G,
//! N a multiple of 8 unless symmetric, M across the dispatch thresholds, every producer — each
//! run through the whole pipeline (producer → converter → selection and static cross-check →
//! every kernel that takes it → f64 reference and bound, determinism, padding identity and the
//! fallback's second opinion).
//!
//! A case per backend (`…::case_1_cuda`, `…::case_2_rocm`) launches every kernel on that
//! backend's GPU; a backend whose device does not open is a loud skip (a failure under
//! `W4A16_REQUIRE=gpu` when no GPU backend opened: tests/common). The data, conversion and
//! static-selection checks of the same body also run without any device, in
//! `fuzzed_cases_pass_the_checks_that_need_no_device`.
//!
//! A failure shrinks, persists to `proptest-regressions/gpu_fuzz.txt`, and its message prints
//! the `[[case]]` block to paste into `cases/regressions.toml`: the promoted case keeps the id,
//! hence the seeded data, and runs in every `w4a16 run` from then on.
//! `W4A16_FUZZ_CASES` sets the number of cases (default 24 without a GPU, 256 with one).

mod common;

use common::{backends, emulated_targets};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestError, TestRunner};
use rstest_reuse::apply;
use std::path::PathBuf;
use w4a16_cases::Case;
use w4a16_device::{Device, DeviceBench, DeviceKind, DeviceRequest};
use w4a16_harness::require::{Requirement, Skip};
use w4a16_harness::runner::execute::{Mode, RunContext, run_case};
use w4a16_harness::runner::session::{self, Backend};
use w4a16_harness::runner::{Outcome, Verdict};
use w4a16_kernels::RunTarget;
use w4a16_select::config::KernelConfig;
use w4a16_testkit::strategy;

/// `W4A16_CASES` where the binary runs away from its checkout (the staged GPU run).
fn cases_dir() -> PathBuf {
    w4a16_cases::locate(None).expect("the cases folder")
}

/// The target to fuzz: `W4A16_FUZZ_TARGET` (e.g. `gfx1151-emu`, the AMD configuration emulated
/// on an NVIDIA GPU), else the GPU found here.
fn fuzz_target() -> Option<RunTarget> {
    let name = std::env::var("W4A16_FUZZ_TARGET").ok()?;
    let t = RunTarget::parse(&name);
    assert!(
        t.is_some(),
        "W4A16_FUZZ_TARGET: expected one of {}, got {name:?}",
        RunTarget::known_names().join(", ")
    );
    t
}

/// This backend's device for the fuzz target; an emulated target runs on the CUDA backend.
fn open(kind: DeviceKind) -> Result<(RunTarget, Box<dyn DeviceBench>), Skip> {
    let gpu_skip = |reason: String| Skip {
        requirement: Requirement::Gpu,
        reason,
    };
    match fuzz_target() {
        Some(want) if want.is_emulated() => {
            if kind != DeviceKind::Cuda {
                return Err(gpu_skip(format!(
                    "{} is emulated on the CUDA backend",
                    want.name()
                )));
            }
            let d = w4a16_device::open(DeviceRequest::emulated_on_cuda(want.target))?;
            Ok((want, d))
        }
        want => {
            let d = w4a16_device::open(DeviceRequest::kind(kind))?;
            let here = d.run_target();
            match want {
                Some(want) if want != here => Err(gpu_skip(format!(
                    "the GPU here is {}, not {}",
                    here.name(),
                    want.name()
                ))),
                _ => Ok((here, d)),
            }
        }
    }
}

/// `W4A16_FUZZ_CASES`, else `default`.
fn fuzz_cases(default: u32) -> u32 {
    std::env::var("W4A16_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run(case: &Case, target: RunTarget, backend: &Backend) -> Vec<Verdict> {
    let (device, no_device) = match backend {
        Backend::Device(d) => (Some(d.as_ref() as &dyn Device), None),
        Backend::None(s) => (None, Some(s.clone())),
    };
    let ctx = RunContext {
        target: target.target,
        execution: target.execution,
        device,
        no_device,
        config: KernelConfig::default(),
        c_target: session::c_target(&cases_dir(), target.target).expect("safety factors load"),
        known_bad: &[],
        today: w4a16_cases::Date::today_utc(),
        artifacts: Some(std::env::temp_dir().join("w4a16-gpu-fuzz-artifacts")),
        full_reference_macs: 2.0e9,
        sample_flops: 2.0e9,
        reference: w4a16_harness::runner::execute::ReferenceChoice::Cpu,
    };
    run_case(case, Mode::Differential, &ctx)
}

/// `cases` fuzzed cases through the pipeline on `backend`; a failure shrinks and persists.
fn fuzz(target: RunTarget, backend: &Backend, cases: u32) {
    fuzz_within(target, backend, cases, (48, 2048));
}

/// As [`fuzz`], with shapes of at most `max_groups` groups along K and `max_n` columns.
fn fuzz_within(
    target: RunTarget,
    backend: &Backend,
    cases: u32,
    (max_groups, max_n): (usize, usize),
) {
    let mut runner = TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/gpu_fuzz.txt",
        ))),
        source_file: Some(file!()),
        ..ProptestConfig::default()
    });
    let result = runner.run(&strategy::kernel_case(max_groups, max_n), |case| {
        let verdicts = run(&case, target, backend);
        prop_assert!(!verdicts.is_empty(), "{}: no verdicts", case.id);
        let failing: Vec<String> = verdicts
            .iter()
            .filter(|v| v.outcome.is_failure())
            .map(|v| format!("  [{}] {}: {}", v.check, v.outcome, v.detail))
            .collect();
        prop_assert!(
            failing.is_empty(),
            "{}:\n{}\npromote it into cases/regressions.toml:\n{}",
            case.id,
            failing.join("\n"),
            strategy::regression_entry(&case, "proptest gpu_fuzz, shrunk")
        );
        // Without a device the launches skip, but never the CPU-side checks.
        if matches!(backend, Backend::None(_)) {
            prop_assert!(
                verdicts.iter().any(|v| v.outcome != Outcome::Skip),
                "{}: every check skipped",
                case.id
            );
        }
        Ok(())
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, case)) => {
            panic!("{why}\nminimal failing case: {}", case.id)
        }
        Err(e) => panic!("{e}"),
    }
}

#[apply(backends)]
fn fuzzed_cases_pass_every_kernel_that_takes_them(kind: DeviceKind) {
    match open(kind) {
        Ok((target, device)) => fuzz(target, &Backend::Device(device), fuzz_cases(256)),
        Err(skip) => common::skip_or_fail(kind, &skip),
    }
}

/// Data, conversion, selection and the reference on every fuzzed case, on any machine: the
/// launches are left to the per-backend cases above.
/// The fuzzer on the ISA emulator, a case per gfx target: the targets' real code objects meet
/// shapes no case file holds, every access bounds-checked. Smaller shapes (≤ 8 groups, N ≤ 256)
/// and fewer cases than on a GPU (`W4A16_EMU_FUZZ_CASES`, default 6): the emulator runs about
/// 10 M wave-instructions per second on one core.
#[apply(emulated_targets)]
fn isa_emulator_fuzzed_cases_pass_every_kernel_that_takes_them(target: w4a16_kernels::Target) {
    let Some(device) = common::emulator(target) else {
        return;
    };
    let cases = std::env::var("W4A16_EMU_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    fuzz_within(
        RunTarget::native(target),
        &Backend::Device(device),
        cases,
        (8, 256),
    );
}

#[test]
fn fuzzed_cases_pass_the_checks_that_need_no_device() {
    let target = fuzz_target().unwrap_or(RunTarget::native(w4a16_kernels::Target::Gfx1151));
    let no_device = Backend::None(Skip {
        requirement: Requirement::Gpu,
        reason: "the launches run in fuzzed_cases_pass_every_kernel_that_takes_them".into(),
    });
    fuzz(target, &no_device, fuzz_cases(24));
}
