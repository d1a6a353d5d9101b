//! Planted bugs caught by the ISA emulator on every gfx target: the
//! real clang-built code objects of a kernel copy with a seeded bug, run on the host.
//!
//! - `compat-wmma-operands-swapped` (kernels/mutants/compat.toml): the v_wmma builtins of the AMD
//!   branches called with A and B in each other's roles. It compiles and runs; each tile of the
//!   product comes out transposed, so the fused check must FAIL on the output values.
//! - `fused-scale-row-past-n` (kernels/mutants/gemm_tile.toml): the tail mask off by one, so a
//!   ragged tile reads the scale (and zero point) of row N, one row past the tensors. The values
//!   never reach Y: only the emulator's exact-size allocations catch it, as a FAULT naming the
//!   kernel, the instruction, the lane and the address.
//!
//! The same case on the unmodified sources passes, on each of gfx1100, gfx1151 and gfx1201, so
//! every assertion here can fail. The case is one small ragged layer (M = 6, N = 8, asym) run as
//! the engine would (the selected path: fused only), so each plant builds one code object per
//! target. No AMD toolchain (clang-19, llvm-objdump-19) → a loud skip (a failure under
//! `W4A16_REQUIRE=amd-toolchain`).

use rstest::rstest;
use std::path::PathBuf;
use std::sync::OnceLock;
use w4a16_cases::CaseSet;
use w4a16_device::{Device, DeviceFault};
use w4a16_harness::require::{Requirement, Skip, skip_or_fail};
use w4a16_harness::runner::execute::{Mode, ReferenceChoice, RunContext, run_case};
use w4a16_harness::runner::{Cause, Check, Outcome, Verdict, cli_run, session};
use w4a16_kernels::amd::{AmdBuildError, Builder};
use w4a16_kernels::mutants::{Catalogue, catalogue_dir};
use w4a16_kernels::source::KernelSources;
use w4a16_kernels::{Execution, KernelId, Target};
use w4a16_select::config::KernelConfig;

/// A ragged N (8 rows in a wider tile, so rows past N exist in the tile), M above the skinny
/// threshold (the selection picks fused), asymmetric (zero points read too).
const CASE: &str = "edges/ragged.n8/M=6/f16/asym/g32/exact";
const WMMA_SWAP: &str = "compat-wmma-operands-swapped";
const OOB_READ: &str = "fused-scale-row-past-n";

fn case_set() -> &'static (PathBuf, CaseSet) {
    static SET: OnceLock<(PathBuf, CaseSet)> = OnceLock::new();
    SET.get_or_init(|| cli_run::load_with_dir(None).unwrap_or_else(|e| panic!("cases: {e}")))
}

/// `true` when the AMD toolchain is here; else a loud skip (or a failure when required).
fn toolchain_or_skip() -> bool {
    match Builder::from_env() {
        Ok(_) => true,
        Err(e @ AmdBuildError::ToolchainMissing { .. }) => {
            skip_or_fail(&Skip {
                requirement: Requirement::AmdToolchain,
                reason: format!("planted bugs on the ISA emulator: {e}"),
            });
            false
        }
        Err(e) => panic!("{e}"),
    }
}

/// The full source tree with catalogue mutant `id` applied, written once per test binary to a
/// fixed folder (its code objects then stay cached between runs).
fn planted(id: &'static str) -> KernelSources {
    static TREES: OnceLock<std::sync::Mutex<Vec<(&'static str, KernelSources)>>> = OnceLock::new();
    let trees = TREES.get_or_init(Default::default);
    let mut trees = trees.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, t)) = trees.iter().find(|(m, _)| *m == id) {
        return t.clone();
    }
    let cat = Catalogue::load(&catalogue_dir()).unwrap_or_else(|e| panic!("{e}"));
    let m = cat
        .mutant(id)
        .unwrap_or_else(|| panic!("mutant `{id}` is not in {}", catalogue_dir().display()));
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("emu-planted")
        .join(id);
    let tree = m
        .write_tree(&KernelSources::Embedded, &dir)
        .unwrap_or_else(|e| panic!("{e}"));
    trees.push((id, tree.clone()));
    tree
}

/// The case's verdicts on the ISA emulator for `target`, kernels built from `sources`.
fn run_on_emulator(target: Target, sources: &KernelSources) -> Vec<Verdict> {
    let (dir, set) = case_set();
    let case = set
        .cases()
        .find(|c| c.id == CASE)
        .unwrap_or_else(|| panic!("{CASE} is not in {}", dir.display()));
    let request = w4a16_device::DeviceRequest::emulator(target);
    let dev = match w4a16_device::open(request.with_sources(sources.clone())) {
        Ok(d) => d,
        Err(skip) => panic!(
            "the ISA emulator for {target} did not open: {}",
            skip.reason
        ),
    };
    let ctx = RunContext {
        target,
        execution: Execution::Native,
        device: Some(dev.as_ref() as &dyn Device),
        no_device: None,
        config: KernelConfig::default(),
        c_target: session::c_target(dir, target).expect("safety factors load"),
        // No suppression may hide a plant.
        known_bad: &[],
        today: w4a16_cases::Date::today_utc(),
        artifacts: None,
        full_reference_macs: 2.0e9,
        sample_flops: 2.0e9,
        reference: ReferenceChoice::Cpu,
    };
    // The engine's path only (fused here): one code object per plant and target.
    run_case(case, Mode::Selected, &ctx)
}

fn fused_verdict(verdicts: &[Verdict], what: &str) -> Verdict {
    let all = || {
        verdicts
            .iter()
            .map(|v| format!("  {} {} {}", v.check, v.outcome, v.detail))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        verdicts.iter().any(|v| v.check
            == Check::Selection(Some(w4a16_harness::runner::KernelPath::single(
                KernelId::Fused
            )))),
        "{what}: the selection did not pick fused for {CASE}; the plant is not reached:\n{}",
        all()
    );
    verdicts
        .iter()
        .find(|v| v.check == Check::kernel(KernelId::Fused))
        .cloned()
        .unwrap_or_else(|| panic!("{what}: no fused verdict:\n{}", all()))
}

#[rstest]
#[case::gfx1100(Target::Gfx1100)]
#[case::gfx1151(Target::Gfx1151)]
#[case::gfx1201(Target::Gfx1201)]
fn the_unmodified_sources_pass_the_planted_case(#[case] target: Target) {
    if !toolchain_or_skip() {
        return;
    }
    let verdicts = run_on_emulator(target, &KernelSources::Embedded);
    let fused = fused_verdict(&verdicts, "unmodified");
    assert_eq!(fused.outcome, Outcome::Pass, "{target}: {}", fused.detail);
    if let Some(v) = verdicts.iter().find(|v| v.outcome.is_failure()) {
        panic!("{target}: {} {}: {}", v.check, v.outcome, v.detail);
    }
}

#[rstest]
#[case::gfx1100(Target::Gfx1100)]
#[case::gfx1151(Target::Gfx1151)]
#[case::gfx1201(Target::Gfx1201)]
fn a_wmma_with_swapped_operands_fails_on_the_output_values(#[case] target: Target) {
    if !toolchain_or_skip() {
        return;
    }
    let verdicts = run_on_emulator(target, &planted(WMMA_SWAP));
    let fused = fused_verdict(&verdicts, WMMA_SWAP);
    assert_eq!(
        fused.outcome,
        Outcome::Fail,
        "{target}: {WMMA_SWAP} not caught: {}",
        fused.detail
    );
    eprintln!(
        "{target}: {WMMA_SWAP} caught: fused {}: {}",
        fused.outcome, fused.detail
    );
    assert!(
        matches!(fused.cause, Some(Cause::Mismatch(_))),
        "{target}: expected a failure on the output values, got {:?}: {}",
        fused.cause,
        fused.detail
    );
}

#[rstest]
#[case::gfx1100(Target::Gfx1100)]
#[case::gfx1151(Target::Gfx1151)]
#[case::gfx1201(Target::Gfx1201)]
fn a_read_past_the_scales_faults_naming_kernel_instruction_lane_and_address(
    #[case] target: Target,
) {
    if !toolchain_or_skip() {
        return;
    }
    let verdicts = run_on_emulator(target, &planted(OOB_READ));
    let fused = fused_verdict(&verdicts, OOB_READ);
    assert_eq!(
        fused.outcome,
        Outcome::Fault,
        "{target}: {OOB_READ} not caught: {}",
        fused.detail
    );
    eprintln!(
        "{target}: {OOB_READ} caught: fused {}: {}",
        fused.outcome, fused.detail
    );
    let Some(Cause::Device(DeviceFault::MachineCode {
        kernel,
        at,
        inst,
        detail,
    })) = &fused.cause
    else {
        panic!(
            "{target}: expected the emulator's machine-code fault, got {:?}: {}",
            fused.cause, fused.detail
        );
    };
    assert!(kernel.contains("fused"), "{target}: kernel {kernel}");
    assert!(*at > 0, "{target}: instruction address {at:#x}");
    assert!(
        inst.starts_with("global_load") || inst.starts_with("buffer_load"),
        "{target}: expected a vector load, got `{inst}`"
    );
    // FaultKind::OutOfBounds, rendered: access, address, lane, the allocation it missed.
    for part in [
        "Read of",
        " at 0x",
        " in lane ",
        "outside every Global allocation",
    ] {
        assert!(detail.contains(part), "{target}: {part:?} not in {detail}");
    }
    // The run's own text carries the same (kernel, instruction, lane, address).
    assert!(
        fused.detail.contains(kernel.as_str()) && fused.detail.contains(inst.as_str()),
        "{target}: {}",
        fused.detail
    );
}
