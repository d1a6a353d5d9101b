//! The ISA emulator's own racecheck and initcheck (`w4a16 run --sanitize racecheck|initcheck
//! --target gfx…`, docs/sanitize.md), kept cheap for CI:
//!
//! - the committed `verdicts-smoke.sanitize-<tool>@gfx1100.snap` rows are what a sanitized run
//!   gives today, for a spread of smoke's cases (the whole suite takes minutes here; every
//!   committed snapshot's case list and outcomes are checked by `gpu_verdicts`);
//! - the two seeded bugs of `kernels/mutants/emu_sanitize.toml` pass the output checks on the
//!   emulator and are caught by the sanitizer: a missing barrier by racecheck, LDS rows past M
//!   left unwritten by initcheck; the unmodified sources are clean under both.
//!
//! No AMD toolchain → a loud skip (a failure under `W4A16_REQUIRE=amd-toolchain`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use w4a16_cases::{Case, CaseSet};
use w4a16_device::{Device, DeviceBench, DeviceRequest, EmuSanitizer};
use w4a16_harness::require::{Requirement, Skip, skip_or_fail};
use w4a16_harness::runner::execute::{Mode, ReferenceChoice, RunContext, run_case};
use w4a16_harness::runner::sanitize::emulated;
use w4a16_harness::runner::session::{self, Backend, SessionOptions};
use w4a16_harness::runner::snapshot;
use w4a16_harness::runner::verdict::{SanitizerTool, SnapshotRow};
use w4a16_harness::runner::{Check, KernelPath, Outcome, Verdict, cli_run};
use w4a16_kernels::amd::{AmdBuildError, Builder};
use w4a16_kernels::mutants::{Catalogue, catalogue_dir};
use w4a16_kernels::source::KernelSources;
use w4a16_kernels::{Execution, KernelId, RunTarget, Target};
use w4a16_select::config::KernelConfig;

/// Ragged M (6 rows of a 32-row tile) and N, above the skinny threshold: fused is selected.
const CASE: &str = "edges/ragged.n8/M=6/f16/asym/g32/exact";
const RACE: &str = "sanitize-tile-no-barrier-before-first-dequant";
const UNINIT: &str = "sanitize-tile-x-rows-past-m-not-zeroed";
/// Every how-many-th smoke case the snapshot check runs.
const SMOKE_STRIDE: usize = 8;

fn case_set() -> &'static (PathBuf, CaseSet) {
    static SET: OnceLock<(PathBuf, CaseSet)> = OnceLock::new();
    SET.get_or_init(|| cli_run::load_with_dir(None).unwrap_or_else(|e| panic!("cases: {e}")))
}

fn toolchain_or_skip() -> bool {
    match Builder::from_env() {
        Ok(_) => true,
        Err(e @ AmdBuildError::ToolchainMissing { .. }) => {
            skip_or_fail(&Skip {
                requirement: Requirement::AmdToolchain,
                reason: format!("the ISA emulator's sanitizers: {e}"),
            });
            false
        }
        Err(e) => panic!("{e}"),
    }
}

fn emulator(target: Target, sources: &KernelSources, tool: EmuSanitizer) -> Box<dyn DeviceBench> {
    let request = DeviceRequest::emulator(target)
        .with_sources(sources.clone())
        .with_emu_sanitizer(Some(tool));
    w4a16_device::open(request)
        .unwrap_or_else(|s| panic!("the ISA emulator for {target} did not open: {}", s.reason))
}

fn harness_tool(tool: EmuSanitizer) -> SanitizerTool {
    match tool {
        EmuSanitizer::Racecheck => SanitizerTool::Racecheck,
        EmuSanitizer::Initcheck => SanitizerTool::Initcheck,
    }
}

/// `case`'s verdicts on `device`, its sanitizer verdicts after them (as a sanitized run's
/// parent forms them).
fn sanitized_verdicts(
    case: &Case,
    device: &dyn DeviceBench,
    run: impl FnOnce(&Case) -> Vec<Verdict>,
    target: Target,
) -> Vec<Verdict> {
    let tool = device.emu_sanitizer().expect("opened with a sanitizer");
    let mut verdicts = run(case);
    let reports = device.take_sanitizer_reports();
    let native = RunTarget::native(target);
    verdicts.extend(emulated::case_verdicts(
        &case.id,
        &verdicts,
        &reports,
        harness_tool(tool),
        native,
    ));
    verdicts
}

/// A spread of smoke's cases under racecheck on gfx1100, every row as the committed snapshot
/// has it.
#[test]
fn the_committed_racecheck_snapshot_of_smoke_is_current_on_gfx1100() {
    if !toolchain_or_skip() {
        return;
    }
    let (dir, set) = case_set();
    let target = Target::Gfx1100;
    let name = format!(
        "{}@{}.snap",
        snapshot::snapshot_name_of("smoke", Some(SanitizerTool::Racecheck)),
        target.name()
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("snapshots")
        .join(&name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let committed = snapshot::parse_rows(&text);
    let chosen: Vec<&Case> = set
        .suite("smoke")
        .expect("smoke")
        .cases
        .iter()
        .step_by(SMOKE_STRIDE)
        .collect();
    let device = emulator(target, &KernelSources::Embedded, EmuSanitizer::Racecheck);
    let native = RunTarget::native(target);
    let mut opts = SessionOptions::new(dir.clone(), native);
    opts.reference = ReferenceChoice::Cpu;
    let backend = Backend::Device(device);
    let Backend::Device(d) = &backend else {
        unreachable!()
    };
    for case in chosen {
        let run = |c: &Case| {
            session::run_in_process(set, &[c], &backend, &opts, &|_| {})
                .unwrap_or_else(|e| panic!("{}: {e}", c.id))
                .verdicts
        };
        let mut got: Vec<String> = sanitized_verdicts(case, d.as_ref(), run, target)
            .iter()
            .map(|v| SnapshotRow::from(v).line())
            .collect();
        let mut want: Vec<String> = committed
            .iter()
            .filter(|r| r.case_id == case.id)
            .map(SnapshotRow::line)
            .collect();
        got.sort();
        want.sort();
        assert_eq!(
            got, want,
            "{name} is stale for {}: rerun `w4a16 run --sanitize racecheck --suite smoke --target gfx1100 --snapshot update`",
            case.id
        );
    }
}

/// Catalogue mutant `id` written once per test binary to a fixed folder (code objects cached).
fn planted(id: &str) -> KernelSources {
    let cat = Catalogue::load(&catalogue_dir()).unwrap_or_else(|e| panic!("{e}"));
    let m = cat
        .mutant(id)
        .unwrap_or_else(|| panic!("mutant `{id}` is not in {}", catalogue_dir().display()));
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("emu-sanitize")
        .join(id);
    m.write_tree(&KernelSources::Embedded, &dir)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// [`CASE`] as the engine runs it (fused only) under `tool`, kernels from `sources`.
fn ragged_case(sources: &KernelSources, tool: EmuSanitizer) -> Vec<Verdict> {
    let (dir, set) = case_set();
    let case = set
        .cases()
        .find(|c| c.id == CASE)
        .unwrap_or_else(|| panic!("{CASE} is not in {}", dir.display()));
    let target = Target::Gfx1100;
    let dev = emulator(target, sources, tool);
    let run = |c: &Case| {
        let ctx = RunContext {
            target,
            execution: Execution::Native,
            device: Some(dev.as_ref() as &dyn Device),
            no_device: None,
            config: KernelConfig::default(),
            c_target: session::c_target(dir, target).expect("safety factors load"),
            known_bad: &[],
            today: w4a16_cases::Date::today_utc(),
            artifacts: None,
            full_reference_macs: 2.0e9,
            sample_flops: 2.0e9,
            reference: ReferenceChoice::Cpu,
        };
        run_case(c, Mode::Selected, &ctx)
    };
    sanitized_verdicts(case, dev.as_ref(), run, target)
}

fn outcome_of(verdicts: &[Verdict], check: &Check) -> (Outcome, String) {
    let all = || {
        verdicts
            .iter()
            .map(|v| format!("  {} {} {}", v.check, v.outcome, v.detail))
            .collect::<Vec<_>>()
            .join("\n")
    };
    verdicts
        .iter()
        .find(|v| &v.check == check)
        .map(|v| (v.outcome, v.detail.clone()))
        .unwrap_or_else(|| panic!("no {check} verdict:\n{}", all()))
}

#[test]
fn both_seeded_bugs_pass_the_output_checks_and_are_caught_by_their_sanitizer() {
    if !toolchain_or_skip() {
        return;
    }
    let fused = Check::Path(KernelPath::single(KernelId::Fused));
    for tool in [EmuSanitizer::Racecheck, EmuSanitizer::Initcheck] {
        let check = harness_tool(tool).check_of(
            w4a16_harness::runner::verdict::SanitizeScope::Kernel(KernelId::Fused),
        );
        let clean = ragged_case(&KernelSources::Embedded, tool);
        assert_eq!(outcome_of(&clean, &fused).0, Outcome::Pass, "{tool}");
        let (o, detail) = outcome_of(&clean, &check);
        assert_eq!(
            o,
            Outcome::Pass,
            "{tool} on the unmodified sources: {detail}"
        );
    }
    for (id, tool) in [
        (RACE, EmuSanitizer::Racecheck),
        (UNINIT, EmuSanitizer::Initcheck),
    ] {
        let verdicts = ragged_case(&planted(id), tool);
        let (o, detail) = outcome_of(&verdicts, &fused);
        assert_eq!(
            o,
            Outcome::Pass,
            "{id}: the output check should pass: {detail}"
        );
        let check = harness_tool(tool).check_of(
            w4a16_harness::runner::verdict::SanitizeScope::Kernel(KernelId::Fused),
        );
        let (o, detail) = outcome_of(&verdicts, &check);
        assert_eq!(o, Outcome::Fail, "{id}: {tool} did not catch it: {detail}");
        eprintln!("{id}: caught by {tool}: {detail}");
    }
}
