//! The kernel-set suites on a real GPU, a case per backend (`gpu_smoke_suite::case_1_cuda`, …),
//! recorded as verdict snapshots per target. A backend whose device does not open skips loudly
//! (`W4A16_REQUIRE=gpu` makes that a failure when no GPU backend opened: tests/common); what
//! still runs here is the
//! check that every committed verdict snapshot is current (its rows are exactly the suite's
//! checks for today's case files) and that none of its verdicts fails.

mod common;

use common::{backends, emulated_targets};
use rstest_reuse::apply;
use std::collections::BTreeSet;
use std::path::Path;
use w4a16_device::DeviceKind;
use w4a16_harness::runner::budget::CaseBudget;
use w4a16_harness::runner::session::{self, Backend, SessionOptions};
use w4a16_harness::runner::snapshot::{LeftOut, SnapshotFile};
use w4a16_harness::runner::{Outcome, snapshot};
use w4a16_testkit::verdict_snapshots::assert_verdicts_of;

fn cases_dir() -> std::path::PathBuf {
    w4a16_cases::locate(None).expect("the cases folder")
}

fn run_suite(suite: &str, kind: DeviceKind) {
    if let Some(device) = common::device(kind) {
        run_suite_on(suite, device);
    }
}

/// Runs `suite` on `device`, compares its verdicts with the committed snapshot of the device's
/// target, and fails on any failing check.
fn run_suite_on(suite: &str, device: Box<dyn w4a16_device::DeviceBench>) {
    let kind = device.kind();
    let target = device.run_target();
    let backend = Backend::Device(device);
    let set = w4a16_cases::load_all(&cases_dir()).unwrap();
    let budget = CaseBudget::of(target, Some(kind), set.suite(suite));
    let suite_cases = &set.suite(suite).unwrap().cases;
    let chosen: Vec<&w4a16_cases::Case> = suite_cases.iter().filter(|c| budget.admits(c)).collect();
    if chosen.len() < suite_cases.len() {
        eprintln!(
            "{suite}: {} of {} cases above {budget} not run on {target}",
            suite_cases.len() - chosen.len(),
            suite_cases.len()
        );
    }
    let opts = SessionOptions::new(cases_dir(), target);
    let verdicts = session::run_in_process(&set, &chosen, &backend, &opts, &|_| {})
        .unwrap()
        .verdicts;
    let failing: Vec<String> = verdicts
        .iter()
        .filter(|v| v.outcome.is_failure())
        .map(|v| format!("{} [{}] {}: {}", v.case_id, v.check, v.outcome, v.detail))
        .collect();
    let file = SnapshotFile::new(suite, &target.name(), None)
        .recorded_by(Some(kind))
        .left_out(LeftOut::of(budget, suite, suite_cases));
    assert_verdicts_of(file, &verdicts);
    assert!(
        failing.is_empty(),
        "{} failing checks:\n{}",
        failing.len(),
        failing[..failing.len().min(30)].join("\n")
    );
}

#[apply(backends)]
fn gpu_smoke_suite(kind: DeviceKind) {
    run_suite("smoke", kind);
}

#[apply(backends)]
fn gpu_kernels_suite(kind: DeviceKind) {
    run_suite("kernels", kind);
}

#[apply(backends)]
fn gpu_checkpoints_suite(kind: DeviceKind) {
    run_suite("checkpoints", kind);
}

#[apply(backends)]
fn gpu_edges_suite(kind: DeviceKind) {
    run_suite("edges", kind);
}

#[apply(backends)]
fn gpu_regressions_suite(kind: DeviceKind) {
    run_suite("regressions", kind);
}

#[apply(backends)]
fn gpu_moe_suite(kind: DeviceKind) {
    run_suite("moe", kind);
}

#[apply(backends)]
fn gpu_carrier_suite(kind: DeviceKind) {
    run_suite("carrier", kind);
}

// The CI suites in full on every gfx target's ISA emulator: the real code objects' verdicts,
// checked against `verdicts-<suite>@<gfx>.snap` (whose header names the emulator). About 14
// CPU-minutes over the three targets, so they run on a schedule
// (`cargo test --test gpu_verdicts -- --ignored isa_emulator`, examples/ci/) and on AMD
// runners; `cargo test` runs each target's CI share instead (tests/block_coverage.rs), which
// executes every block these do. `w4a16 run --suite <any> --target <gfx>` runs any suite there.
#[apply(emulated_targets)]
#[ignore = "the full ISA-emulator suites run on a schedule; cargo test runs the CI share (tests/block_coverage.rs)"]
fn isa_emulator_smoke_suite(target: w4a16_kernels::Target) {
    if let Some(device) = common::emulator(target) {
        run_suite_on("smoke", device);
    }
}

#[apply(emulated_targets)]
#[ignore = "the full ISA-emulator suites run on a schedule; cargo test runs the CI share (tests/block_coverage.rs)"]
fn isa_emulator_checkpoints_suite(target: w4a16_kernels::Target) {
    if let Some(device) = common::emulator(target) {
        run_suite_on("checkpoints", device);
    }
}

/// `kernels` at its small shapes (the suite's `isa_emulator_max_macs`).
#[apply(emulated_targets)]
#[ignore = "the full ISA-emulator suites run on a schedule; cargo test runs the CI share (tests/block_coverage.rs)"]
fn isa_emulator_kernels_suite(target: w4a16_kernels::Target) {
    if let Some(device) = common::emulator(target) {
        run_suite_on("kernels", device);
    }
}

/// `edges` up to its ISA-emulator budget: every skinny capacity edge, below, at and past.
#[apply(emulated_targets)]
#[ignore = "the full ISA-emulator suites run on a schedule; cargo test runs the CI share (tests/block_coverage.rs)"]
fn isa_emulator_edges_suite(target: w4a16_kernels::Target) {
    if let Some(device) = common::emulator(target) {
        run_suite_on("edges", device);
    }
}

/// `selection`'s boundaries up to its ISA-emulator budget.
#[apply(emulated_targets)]
#[ignore = "the full ISA-emulator suites run on a schedule; cargo test runs the CI share (tests/block_coverage.rs)"]
fn isa_emulator_selection_suite(target: w4a16_kernels::Target) {
    if let Some(device) = common::emulator(target) {
        run_suite_on("selection", device);
    }
}

/// The suites the ISA emulator runs in CI for each native gfx target (the tests above).
const ISA_EMULATOR_SUITES: [&str; 5] = w4a16_harness::block_coverage::ISA_EMULATOR_SUITES;

/// Each native gfx target has a committed verdict snapshot per suite the ISA emulator runs in
/// CI (recorded with `w4a16 run --suite <s> --target <gfx> --snapshot update` on a machine
/// without that GPU, or on the GPU itself); the test below checks they are current and passing.
#[test]
fn every_native_gfx_target_has_the_isa_emulators_snapshots() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let missing: Vec<String> = ["gfx1100", "gfx1151", "gfx1201"]
        .iter()
        .flat_map(|t| ISA_EMULATOR_SUITES.map(|s| (s, *t)))
        .filter(|(s, t)| !snapshot::committed_path(dir, s, t).is_file())
        .map(|(s, t)| format!("{}@{t}.snap", snapshot::snapshot_name(s)))
        .collect();
    assert!(
        missing.is_empty(),
        "ISA-emulator verdict snapshots missing: {missing:?}; record them with `w4a16 run --suite <suite> --target <gfx> --snapshot update`"
    );
}

/// The suites every emulated AMD target (`gfx1100-emu`, `gfx1151-emu`, `gfx1201-emu`) records:
/// all of them, so the AMD code paths meet every case the NVIDIA ones do.
const EMULATED_SUITES: [&str; 8] = [
    "smoke",
    "kernels",
    "checkpoints",
    "edges",
    "regressions",
    "field",
    "moe",
    "carrier",
];

/// The emulation budget leaves out no case of the differential suites (they are what exercise
/// every AMD code path); it only trims the field matrix's largest prefill shapes, and never all
/// of a layer's batch sizes.
#[test]
fn the_emulation_budget_keeps_every_differential_case() {
    let set = w4a16_cases::load_all(&cases_dir()).unwrap();
    let emu = CaseBudget::of(
        w4a16_kernels::RunTarget::parse("gfx1151-emu").unwrap(),
        Some(DeviceKind::Cuda),
        None,
    );
    for suite in EMULATED_SUITES {
        let cases = &set.suite(suite).unwrap().cases;
        let out: Vec<&str> = cases
            .iter()
            .filter(|c| !emu.admits(c))
            .map(|c| c.id.as_str())
            .collect();
        if suite == "field" {
            eprintln!(
                "field: {} of {} cases above the emulation budget",
                out.len(),
                cases.len()
            );
            let layers_in: BTreeSet<&str> = cases
                .iter()
                .filter(|c| emu.admits(c))
                .map(|c| c.shape_name.as_str())
                .collect();
            let layers: BTreeSet<&str> = cases.iter().map(|c| c.shape_name.as_str()).collect();
            assert_eq!(layers_in, layers, "a field layer lost every batch size");
        } else {
            assert!(
                out.is_empty(),
                "{suite}: {out:?} above the emulation budget"
            );
        }
    }
}

/// Each emulated target has a committed verdict snapshot per suite (recorded on the H200 with
/// `scripts/gpu-job.sh emulated`); the test above checks they are current and passing.
#[test]
fn every_emulated_target_has_its_verdict_snapshots() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let missing: Vec<String> = w4a16_kernels::RunTarget::all_emulated()
        .iter()
        .flat_map(|t| EMULATED_SUITES.map(|s| (s, t.name())))
        .filter(|(s, t)| !snapshot::committed_path(dir, s, t).is_file())
        .map(|(s, t)| format!("{}@{t}.snap", snapshot::snapshot_name(s)))
        .collect();
    assert!(
        missing.is_empty(),
        "emulated-target verdict snapshots missing: {missing:?}; record them on an NVIDIA GPU with `scripts/device-run.sh gpu scripts/gpu-job.sh emulated`"
    );
}

/// Every committed `verdicts-<suite>@<target>.snap` (and `verdicts-<suite>.sanitize-<tool>@…`,
/// a sanitizer run's) belongs to a known suite and target, lists
/// exactly that suite's case ids, and holds no failing verdict (ARCHITECTURE.md rule 6: CI refuses stale
/// and unreferenced snapshots even where the target's GPU is absent).
#[test]
fn committed_verdict_snapshots_are_current_and_passing() {
    let set = w4a16_cases::load_all(&cases_dir()).unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.starts_with("verdicts-") {
            continue;
        }
        assert!(
            !name.ends_with(".snap.new"),
            "pending snapshot {name}: review it with `cargo insta review`"
        );
        let file = snapshot::parse_file_name(&name).unwrap_or_else(|| {
            panic!("{name}: expected verdicts-<suite>[.sanitize-<tool>]@<target>.snap")
        });
        let (suite, target) = (file.suite.as_str(), file.target.as_str());
        assert!(
            w4a16_kernels::RunTarget::parse(target).is_some(),
            "{name}: unknown target {target}"
        );
        let suite_cases = set
            .suite(suite)
            .unwrap_or_else(|| panic!("{name}: unreferenced snapshot: no suite {suite:?}"));
        let text = std::fs::read_to_string(&path).unwrap();
        let rows = snapshot::parse_rows(&text);
        // A native AMD target's verdicts come from its GPU or from the ISA emulator, and the
        // header must say which: a verdict of the ISA emulator is not a hardware one.
        let run = w4a16_kernels::RunTarget::parse(target).expect("checked above");
        if run.target.vendor() == w4a16_kernels::target::Vendor::Amd && !run.is_emulated() {
            assert!(
                matches!(
                    snapshot::recorded_by_in(&text),
                    Some(DeviceKind::Emulator | DeviceKind::Rocm)
                ),
                "{name}: the header does not name what ran it (the ISA emulator or a ROCm GPU)"
            );
        }
        let in_snapshot: BTreeSet<&str> = rows.iter().map(|r| r.case_id.as_str()).collect();
        // A budgeted recording (the CUDA emulation of an AMD target, the ISA emulator) lists
        // the cases within its budget, says in its header how many it left out, and holds rows
        // for those either all (kept from a GPU's recording) or none.
        let budget = CaseBudget::of(run, snapshot::recorded_by_in(&text), Some(suite_cases));
        let (admitted, left_out): (Vec<&w4a16_cases::Case>, Vec<&w4a16_cases::Case>) =
            suite_cases.cases.iter().partition(|c| budget.admits(c));
        let left_out: BTreeSet<&str> = left_out.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            snapshot::left_out_in(&text),
            (!left_out.is_empty()).then_some(left_out.len()),
            "{name}: its header must say how many cases {budget} leaves out"
        );
        let kept = !left_out.is_empty() && left_out.iter().all(|id| in_snapshot.contains(id));
        let mut expected: BTreeSet<&str> = admitted.iter().map(|c| c.id.as_str()).collect();
        if kept {
            expected.extend(&left_out);
        }
        let missing: Vec<_> = expected.difference(&in_snapshot).take(5).collect();
        let stale: Vec<_> = in_snapshot.difference(&expected).take(5).collect();
        assert!(
            missing.is_empty() && stale.is_empty(),
            "{name} is stale: missing {missing:?}, no longer cases {stale:?}; rerun the suite on {target} (scripts/device-run.sh)"
        );
        let failing: Vec<String> = rows
            .iter()
            .filter(|r| {
                [
                    Outcome::Fail,
                    Outcome::Fault,
                    Outcome::UnexpectedPass,
                    Outcome::Expired,
                ]
                .iter()
                .any(|o| o.name() == r.outcome)
            })
            .map(|r| format!("{} [{}] {}", r.case_id, r.check, r.outcome))
            .collect();
        assert!(
            failing.is_empty(),
            "{name} records failing verdicts:\n{}",
            failing.join("\n")
        );
        assert!(
            !rows.iter().any(|r| r.outcome == "skip"),
            "{name}: a GPU snapshot must not hold skipped checks"
        );
        checked += 1;
    }
    eprintln!("{checked} committed verdict snapshots checked");
}

/// `fused_carrier` is `fused.hip` built with its switch: two code objects from one source. A
/// carrier case launches `fused`, then `fused_carrier`, on one device; each must run its own
/// code object (a cache keyed by source file once handed the carrier launch fused's, and every
/// carrier case on the ISA emulator ended "entry point not found").
#[test]
fn the_isa_emulator_runs_fused_and_its_carrier_build_each_from_its_own_code_object() {
    let Some(device) = common::emulator(w4a16_kernels::Target::Gfx1100) else {
        return;
    };
    let set = w4a16_cases::load_all(&cases_dir()).unwrap();
    let case = set
        .case("carrier/kern.k128-n72/M=1/bf16/asym/g32/realistic/carrier")
        .expect("the carrier suite's smallest asymmetric case");
    let opts = SessionOptions::new(cases_dir(), device.run_target());
    let verdicts = session::run_in_process(&set, &[case], &Backend::Device(device), &opts, &|_| {})
        .unwrap()
        .verdicts;
    for kernel in ["fused", "fused_carrier"] {
        let v = verdicts
            .iter()
            .find(|v| v.check == kernel)
            .unwrap_or_else(|| panic!("no {kernel} verdict: {verdicts:#?}"));
        assert_eq!(v.outcome, Outcome::Pass, "{v:#?}");
    }
}
