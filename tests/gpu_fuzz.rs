//! Shape fuzzing for the kernels (issue 5): proptest cases valid by construction — K = groups·G,
//! N a multiple of 8 unless symmetric, M across the dispatch thresholds, every producer — each
//! run through the whole pipeline (producer → converter → selection and static cross-check →
//! every kernel that takes it → f64 reference and bound, determinism, padding identity and the
//! fallback's second opinion).
//!
//! On a GPU every kernel launches. Without one, the same body still checks data, conversion
//! and the static selection, and the launches are reported as a loud skip
//! (`W4A16_REQUIRE=gpu` makes that a failure).
//!
//! A failure shrinks, persists to `proptest-regressions/gpu_fuzz.txt`, and its message prints
//! the `[[case]]` block to paste into `cases/regressions.toml`: the promoted case keeps the id,
//! hence the seeded data, and runs in every `w4a16 run` from then on.
//! `W4A16_FUZZ_CASES` sets the number of cases (default 24 without a GPU, 256 with one).

use std::path::PathBuf;
use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use w4a16_harness::cases::{self, Case, strategy};
use w4a16_harness::config::KernelConfig;
use w4a16_harness::require::skip_or_fail;
use w4a16_harness::runner::execute::{Mode, RunContext, run_case};
use w4a16_harness::runner::session::{self, Backend};
use w4a16_harness::runner::{Outcome, Verdict};
use w4a16_kernels::RunTarget;

/// `W4A16_CASES` where the binary runs away from its checkout (the staged GPU run).
fn cases_dir() -> PathBuf {
    w4a16_harness::cases::locate(None).expect("the cases folder")
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

/// One backend for the whole fuzz run (opening a device and compiling the kernels is slow).
fn backend() -> &'static (RunTarget, Backend) {
    static BACKEND: OnceLock<(RunTarget, Backend)> = OnceLock::new();
    BACKEND.get_or_init(|| {
        let (target, backend) = session::open_backend(fuzz_target());
        if let Backend::None(skip) = &backend {
            skip_or_fail(skip);
        }
        (target, backend)
    })
}

fn fuzz_cases() -> u32 {
    let default = match backend().1 {
        Backend::Device(_) => 256,
        Backend::None(_) => 24,
    };
    std::env::var("W4A16_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run(case: &Case) -> Vec<Verdict> {
    let (target, backend) = backend();
    let (device, no_device) = match backend {
        Backend::Device(d) => (Some(d.as_ref()), None),
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
        today: cases::Date::today_utc(),
        artifacts: Some(std::env::temp_dir().join("w4a16-gpu-fuzz-artifacts")),
        full_reference_macs: 2.0e9,
        sample_flops: 2.0e9,
    };
    run_case(case, Mode::Differential, &ctx)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: fuzz_cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/gpu_fuzz.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn fuzzed_cases_pass_every_kernel_that_takes_them(case in strategy::kernel_case(48, 2048)) {
        let verdicts = run(&case);
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
        // Without a GPU the launches skip, but never the CPU-side checks.
        if matches!(backend().1, Backend::None(_)) {
            prop_assert!(
                verdicts.iter().any(|v| v.outcome != Outcome::Skip),
                "{}: every check skipped",
                case.id
            );
        }
    }
}
