//! Typed outcomes end to end on the simulated device: what the device lacks is a SKIP with
//! its reason, what it does wrong is a FAULT, and a contract refusal keeps its typed error.

use super::*;
use crate::require::Requirement;
use crate::runner::session::{Backend, SessionOptions, run_in_process};
use crate::runner::verdict::{Summary, apply_required};
use w4a16_device::{Capability, simulated};

/// A small differential case whose dense path runs (the smoke suite's `dequant+dense`).
const DENSE_CASE: &str = "smoke/op.k1024-n128/M=1/f16/asym/g128/exact/bias";
/// A legacy checkpoint: every packed-zero-point kernel refuses its zero points.
const LEGACY_CASE: &str = "checkpoints/ckpt.k256-n128/M=1/bf16/asym/g128/exact/legacy-unpacked-zp";

fn run_on(case_id: &str, backend: Backend) -> Vec<Verdict> {
    let dir = w4a16_cases::locate(None).expect("the committed cases are found");
    let set = w4a16_cases::load_all(&dir).expect("the committed cases load");
    let case = set.case(case_id).expect("the case exists");
    let opts = SessionOptions::new(dir.clone(), Target::Sm90);
    run_in_process(&set, &[case], &backend, &opts, &|_| {})
        .expect("the session runs")
        .verdicts
}

fn find<'v>(verdicts: &'v [Verdict], check: &str) -> &'v Verdict {
    verdicts
        .iter()
        .find(|v| v.check == check)
        .unwrap_or_else(|| panic!("no {check} verdict in {verdicts:#?}"))
}

#[test]
fn a_device_without_the_vendor_blas_skips_the_dense_path_with_the_reason() {
    let mut vs = run_on(DENSE_CASE, Backend::Device(simulated::device(false, false)));
    // The dequant kernel ran (its own check has a verdict); the BLAS stage could not.
    assert_ne!(find(&vs, "dequant").outcome, Outcome::Skip);
    let dense = find(&vs, "dequant+dense");
    assert_eq!(dense.outcome, Outcome::Skip, "{dense:#?}");
    let fault = dense.cause.as_ref().and_then(Cause::device_fault);
    assert!(
        matches!(
            fault,
            Some(DeviceFault::MissingCapability {
                capability: Capability::VendorBlas,
                ..
            })
        ),
        "{dense:#?}"
    );
    assert!(
        dense
            .detail
            .contains("the vendor BLAS is not available on simulated"),
        "{}",
        dense.detail
    );
    assert_eq!(dense.skip_requirement(), Some(Requirement::Gpu));
    assert!(
        vs.iter().all(|v| v.outcome != Outcome::Fault),
        "a missing library is no device fault: {vs:#?}"
    );

    // Counted and shown with its reason.
    let s = Summary::of(&vs);
    assert_eq!(s.faults, 0);
    assert_eq!(s.skip_reasons.get(&dense.detail), Some(&1));
    assert_eq!(s.skips_needing.get(&Requirement::Gpu), Some(&1));
    assert!(s.to_string().contains(&dense.detail), "{s}");

    // Not demanded: the skip stands. `W4A16_REQUIRE=gpu`: it fails the run.
    let before = s.failures();
    assert_eq!(apply_required(&mut vs, &[Requirement::Nvrtc]), 0);
    assert_eq!(Summary::of(&vs).failures(), before);
    assert_eq!(apply_required(&mut vs, &[Requirement::Gpu]), 1);
    let dense = find(&vs, "dequant+dense");
    assert_eq!(dense.outcome, Outcome::Fail);
    assert!(
        dense
            .detail
            .starts_with("W4A16_REQUIRE=gpu but the check was skipped: the vendor BLAS"),
        "{}",
        dense.detail
    );
    assert!(dense.cause.as_ref().and_then(Cause::device_fault).is_some());
    let s = Summary::of(&vs);
    assert_eq!((s.failures(), s.skipped), (before + 1, 0));
}

#[test]
fn with_the_vendor_blas_the_dense_path_runs_and_is_judged() {
    let vs = run_on(DENSE_CASE, Backend::Device(simulated::device(false, true)));
    let dense = find(&vs, "dequant+dense");
    assert_ne!(dense.outcome, Outcome::Skip, "{dense:#?}");
    assert!(vs.iter().all(|v| v.outcome != Outcome::Skip), "{vs:#?}");
}

/// The dequant copy is judged on the device where the runtime compares there (the expected
/// payload formed for it) and on the host elsewhere (no payload formed): the same verdict. The
/// simulated dequant writes no real copy, so both fail it, naming the same elements.
#[test]
fn the_dequant_copy_is_judged_alike_wherever_the_runtime_compares() {
    let on_device = run_on(DENSE_CASE, Backend::Device(simulated::device(false, true)));
    let on_host = run_on(
        DENSE_CASE,
        Backend::Device(simulated::device_comparing_on_host()),
    );
    let (d, h) = (find(&on_device, "dequant"), find(&on_host, "dequant"));
    assert_eq!(d.outcome, Outcome::Fail, "{d:#?}");
    assert_eq!((d.outcome, &d.detail), (h.outcome, &h.detail));
    assert!(
        d.detail.contains("differ from (q−z)·s rounded once"),
        "{d:#?}"
    );
}

#[test]
fn a_sticky_device_fault_stays_a_fault() {
    let vs = run_on(DENSE_CASE, Backend::Device(simulated::device(true, true)));
    let faults: Vec<&DeviceFault> = vs
        .iter()
        .filter_map(|v| v.cause.as_ref().and_then(Cause::device_fault))
        .collect();
    assert!(
        faults
            .iter()
            .any(|f| matches!(f, DeviceFault::Sticky { .. })),
        "{vs:#?}"
    );
    for v in vs
        .iter()
        .filter(|v| v.cause.as_ref().and_then(Cause::device_fault).is_some())
    {
        assert_eq!(v.outcome, Outcome::Fault, "{v:#?}");
        assert_eq!(v.skip_requirement(), None);
    }
    assert!(Summary::of(&vs).faults > 0);
}

#[test]
fn a_contract_refusal_is_typed_into_the_verdict_naming_the_tensor() {
    let none = Skip {
        requirement: Requirement::Gpu,
        reason: "no GPU in this test".into(),
    };
    let vs = run_on(LEGACY_CASE, Backend::None(none));
    let sel = vs
        .iter()
        .find(|v| matches!(v.check, Check::Selection(Some(_))))
        .expect("a selection verdict");
    assert_eq!(sel.outcome, Outcome::Refused, "{sel:#?}");
    let (kernel, error) = sel
        .cause
        .as_ref()
        .and_then(Cause::contract)
        .unwrap_or_else(|| panic!("no contract cause: {sel:#?}"));
    let Check::Selection(Some(path)) = &sel.check else {
        unreachable!()
    };
    assert_eq!(kernel, path.kernels()[0], "the selected kernel refused");
    assert!(
        matches!(error, ContractError::ZeroPointLayout { .. }),
        "{error:?}"
    );
    assert_eq!(error.tensor(), Some("zero points"));
    assert!(sel.detail.contains(&error.to_string()), "{}", sel.detail);

    // Through the worker pipe (JSON) the cause comes back equal, still typed.
    let json = serde_json::to_string(sel).unwrap();
    let back: Verdict = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, sel);
}

/// A carrier case with padded scale rows (asymmetric) and a symmetric one.
const REALISTIC_CASE: &str = "edges/op.k1024-n128/M=6/bf16/asym/g128/realistic/bias";
const CARRIER_CASE: &str = "carrier/kern.k128-n72/M=5/f16/asym/g32/realistic/carrier-padded-scales";
const CARRIER_SYM_CASE: &str = "carrier/kern.k384-n200/M=1/bf16/sym/g64/realistic/carrier";

/// Without a device: the carrier is built and reads back (`carrier`), the carrier handed
/// over with the scales' padded stride is refused, typed (`carrier-stride-trap`), and the
/// fused_carrier launch itself is a loud skip.
#[test]
fn a_carrier_case_checks_its_carrier_and_the_stride_trap_without_a_device() {
    let none = Skip {
        requirement: Requirement::Gpu,
        reason: "no GPU in this test".into(),
    };
    let vs = run_on(CARRIER_CASE, Backend::None(none));
    let built = find(&vs, "carrier");
    assert_eq!(built.outcome, Outcome::Pass, "{built:#?}");
    assert!(
        built
            .detail
            .contains("u32 [72, 4], row stride K/G = 4 (scales row stride 12)"),
        "{}",
        built.detail
    );
    let trap = find(&vs, "carrier-stride-trap");
    assert_eq!(trap.outcome, Outcome::Refused, "{trap:#?}");
    let (kernel, error) = trap.cause.as_ref().and_then(Cause::contract).unwrap();
    assert_eq!(kernel, KernelId::FusedCarrier);
    assert_eq!(
        *error,
        ContractError::CarrierRowStride {
            expected: 4,
            got: 12
        }
    );
    assert_eq!(error.tensor(), Some("carrier"));
    let run = find(&vs, "fused_carrier");
    assert_eq!(run.outcome, Outcome::Skip, "{run:#?}");
    // The other kernels of the differential matrix still run beside it.
    for k in ["skinny", "fused", "fallback"] {
        assert_eq!(find(&vs, k).outcome, Outcome::Skip);
    }
}

/// A symmetric layer has no carrier: its fused_carrier launch ends as the typed refusal,
/// before any device work, on a device too.
#[test]
fn a_symmetric_carrier_case_ends_as_the_typed_refusal() {
    let backends = [
        Backend::None(Skip {
            requirement: Requirement::Gpu,
            reason: "no GPU in this test".into(),
        }),
        Backend::Device(simulated::device(false, true)),
    ];
    for backend in backends {
        let vs = run_on(CARRIER_SYM_CASE, backend);
        let run = find(&vs, "fused_carrier");
        assert_eq!(run.outcome, Outcome::Refused, "{run:#?}");
        let (kernel, error) = run.cause.as_ref().and_then(Cause::contract).unwrap();
        assert_eq!(kernel, KernelId::FusedCarrier);
        assert!(
            matches!(
                error,
                ContractError::CarrierForSymmetricLayer {
                    layer: Some(w4a16_reference::layer::Symmetry::Sym),
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(
            run.detail
                .contains("symmetric layers read their scales directly")
        );
        assert!(
            vs.iter()
                .all(|v| v.check != "carrier" && v.check != "carrier-stride-trap"),
            "{vs:#?}"
        );
        assert!(
            vs.iter().all(|v| v.check != "determinism:fused_carrier"),
            "a refused launch was launched: {vs:#?}"
        );
    }
}

/// On a device, fused_carrier is launched on the carrier (the simulated device computes no
/// GEMM, so only the launch flow is checked: determinism, the padded-scales identity, a
/// judged path verdict and the second opinion).
#[test]
fn a_carrier_case_launches_fused_carrier_on_a_device() {
    let vs = run_on(
        CARRIER_CASE,
        Backend::Device(simulated::device(false, true)),
    );
    assert_eq!(find(&vs, "carrier").outcome, Outcome::Pass);
    assert_eq!(find(&vs, "carrier-stride-trap").outcome, Outcome::Refused);
    assert_eq!(
        find(&vs, "determinism:fused_carrier").outcome,
        Outcome::Pass
    );
    assert_eq!(find(&vs, "padding:fused_carrier").outcome, Outcome::Pass);
    let run = find(&vs, "fused_carrier");
    assert!(
        !matches!(
            run.outcome,
            Outcome::Skip | Outcome::Refused | Outcome::Fault
        ),
        "{run:#?}"
    );
    find(&vs, "second-opinion:fused_carrier");
}

#[test]
fn without_a_device_gpu_checks_skip_with_the_reason_and_need_the_gpu() {
    let none = Skip {
        requirement: Requirement::Gpu,
        reason: "no GPU in this test".into(),
    };
    let vs = run_on(DENSE_CASE, Backend::None(none.clone()));
    let skips: Vec<&Verdict> = vs.iter().filter(|v| v.outcome == Outcome::Skip).collect();
    assert!(!skips.is_empty(), "{vs:#?}");
    for v in skips {
        assert_eq!(v.cause, Some(Cause::NotHere(none.clone())), "{v:#?}");
        assert_eq!(v.detail, "needs a GPU: no GPU in this test");
        assert_eq!(v.skip_requirement(), Some(Requirement::Gpu));
    }
}

/// The runner applies the shared strict-xfail rule: a failure is caught (the pass beside it
/// stays a pass), nothing failing is XPASS, and past the date every verdict is EXPIRED.
#[test]
fn known_bad_entries_apply_the_shared_strict_xfail_rule() {
    use w4a16_cases::glob::Glob;
    use w4a16_cases::known_bad::CaseIds;
    use w4a16_cases::suppress::{Mode, Shared};
    let kb = KnownBad {
        scope: CaseIds {
            id: Glob::new("**"),
        },
        shared: Shared {
            target: Glob::new("*"),
            reason: "bf16 tail".into(),
            tracking: "issue #0".into(),
            expires: w4a16_cases::Date::new(2026, 6, 30).unwrap(),
            mode: Mode::XfailStrict,
            file: "known_bad.toml".into(),
            key: "known_bad[0]".into(),
        },
    };
    let v = |o| Verdict::new("c", "skinny".parse().unwrap(), o);
    let (on, after) = (
        w4a16_cases::Date::new(2026, 6, 30).unwrap(),
        w4a16_cases::Date::new(2026, 7, 1).unwrap(),
    );
    let outcomes = |mut vs: Vec<Verdict>, today| {
        apply_known_bad(&mut vs, &kb, today);
        vs.into_iter().map(|v| v.outcome).collect::<Vec<_>>()
    };
    assert_eq!(
        outcomes(
            vec![v(Outcome::Fail), v(Outcome::Pass), v(Outcome::Fault)],
            on
        ),
        [Outcome::ExpectedFail, Outcome::Pass, Outcome::ExpectedFail]
    );
    assert_eq!(
        outcomes(vec![v(Outcome::Pass), v(Outcome::Skip)], on),
        [Outcome::UnexpectedPass, Outcome::Skip]
    );
    assert_eq!(
        outcomes(vec![v(Outcome::Fail), v(Outcome::Pass)], after),
        [Outcome::Expired, Outcome::Expired]
    );
}

/// Each verdict's check, outcome and detail: what two runs that should agree are compared by.
fn outcomes(vs: &[Verdict]) -> Vec<(String, Outcome, String)> {
    vs.iter()
        .map(|v| (v.check.to_string(), v.outcome, v.detail.clone()))
        .collect()
}

fn run_with_reference(
    case_id: &str,
    backend: Backend,
    reference: ReferenceChoice,
    full_reference_macs: f64,
) -> Vec<Verdict> {
    let dir = w4a16_cases::locate(None).expect("the committed cases are found");
    let set = w4a16_cases::load_all(&dir).expect("the committed cases load");
    let case = set.case(case_id).expect("the case exists");
    let mut opts = SessionOptions::new(dir.clone(), Target::Sm90);
    opts.reference = reference;
    opts.full_reference_macs = full_reference_macs;
    run_in_process(&set, &[case], &backend, &opts, &|_| {})
        .expect("the session runs")
        .verdicts
}

/// The GPU reference (here the simulated device's host f64 GEMM) judges as the CPU one does,
/// and above the full-reference size it still judges every element instead of sampling.
#[test]
fn the_gpu_reference_judges_every_element_as_the_cpu_reference_does() {
    let paths = |vs: &[Verdict]| -> Vec<(String, Outcome, String)> {
        let judged: Vec<Verdict> = vs
            .iter()
            .filter(|v| matches!(v.check, Check::Path(_)))
            .cloned()
            .collect();
        outcomes(&judged)
    };
    let cpu = run_with_reference(
        DENSE_CASE,
        Backend::Device(simulated::device_with_f64_gemm(false)),
        ReferenceChoice::Cpu,
        2.0e9,
    );
    let gpu = run_with_reference(
        DENSE_CASE,
        Backend::Device(simulated::device_with_f64_gemm(false)),
        ReferenceChoice::Gpu,
        2.0e9,
    );
    assert_eq!(outcomes(&cpu), outcomes(&gpu));
    // The simulated kernels do not follow the recipes, so their paths fail: the same elements
    // over bound, the same worst ratio at the same position, under either reference.
    assert!(
        gpu.iter().any(|v| v.detail.contains("over bound")),
        "{gpu:#?}"
    );
    // Everything above 0 MACs is "large": the CPU reference samples, the GPU one does not.
    let sampled = run_with_reference(
        DENSE_CASE,
        Backend::Device(simulated::device_with_f64_gemm(false)),
        ReferenceChoice::Cpu,
        0.0,
    );
    assert!(sampled.iter().any(|v| v.detail.contains("Freivalds")));
    let full = run_with_reference(
        DENSE_CASE,
        Backend::Device(simulated::device_with_f64_gemm(false)),
        ReferenceChoice::Gpu,
        0.0,
    );
    assert!(
        full.iter().all(|v| !v.detail.contains("Freivalds")),
        "{full:#?}"
    );
    // The second opinion stays off above the full-reference size; the paths judge alike.
    assert_eq!(paths(&full), paths(&gpu));
}

/// A GEMM that gets the products wrong is caught by the CPU cross-check and blamed on the
/// reference (a FAULT with the cross-check stage), never on the kernel.
#[test]
fn a_wrong_gpu_reference_is_a_fault_of_the_reference() {
    let vs = run_with_reference(
        DENSE_CASE,
        Backend::Device(simulated::device_with_f64_gemm(true)),
        ReferenceChoice::Gpu,
        2.0e9,
    );
    let faulted: Vec<&Verdict> = vs.iter().filter(|v| v.check == Check::Reference).collect();
    assert!(!faulted.is_empty(), "{vs:#?}");
    for v in &faulted {
        assert_eq!(v.outcome, Outcome::Fault, "{v:#?}");
        assert!(
            matches!(
                &v.cause,
                Some(Cause::Reference {
                    stage: ReferenceStage::CrossCheck,
                    ..
                })
            ),
            "{v:#?}"
        );
        assert!(v.detail.contains("disagree"), "{}", v.detail);
    }
    // No kernel is judged wrong on a broken reference: its checks are unjudged FAULTs (the
    // simulated dequant's bit-exact check needs no reference and fails as it always does).
    assert!(
        vs.iter()
            .filter(|v| v.outcome == Outcome::Fail)
            .all(|v| !v.detail.contains("over bound")),
        "{vs:#?}"
    );
    assert!(
        vs.iter().any(|v| v.detail.starts_with("not judged")),
        "{vs:#?}"
    );
}

/// The held GPU reference (lanes kept on the simulated device and judged there by the
/// host twin of the CUDA judge) gives the verdicts the host-lanes GPU reference gives, failures
/// (whose artifacts bring the lanes back) included; products that are off are a FAULT of the
/// reference, found by the cross-check on the gathered elements.
#[test]
fn the_held_gpu_reference_judges_as_the_host_lanes_one() {
    for macs in [2.0e9, 0.0] {
        let host = run_with_reference(
            DENSE_CASE,
            Backend::Device(simulated::device_with_f64_gemm(false)),
            ReferenceChoice::Gpu,
            macs,
        );
        let before = simulated::held_judgements();
        let drawn = simulated::drawn_activations();
        let held = run_with_reference(
            DENSE_CASE,
            Backend::Device(simulated::device_with_held_f64_gemm(false)),
            ReferenceChoice::Gpu,
            macs,
        );
        assert!(simulated::held_judgements() > before, "the held path ran");
        assert_eq!(outcomes(&host), outcomes(&held));
        // The exact class draws its own X on the host.
        assert_eq!(simulated::drawn_activations(), drawn);
    }
    let wrong = run_with_reference(
        DENSE_CASE,
        Backend::Device(simulated::device_with_held_f64_gemm(true)),
        ReferenceChoice::Gpu,
        2.0e9,
    );
    let faulted: Vec<&Verdict> = wrong
        .iter()
        .filter(|v| v.check == Check::Reference)
        .collect();
    assert!(!faulted.is_empty(), "{wrong:#?}");
    assert!(
        faulted.iter().all(|v| v.outcome == Outcome::Fault
            && matches!(
                &v.cause,
                Some(Cause::Reference {
                    stage: ReferenceStage::CrossCheck,
                    ..
                })
            )),
        "{faulted:#?}"
    );
}

/// A device that draws realistic X (as a CUDA device does) gives the verdicts of one that
/// leaves X to the host, for a plain and a carrier case; a device whose draw is off fails the
/// case's data check with the element it got wrong, and nothing is launched on that X.
#[test]
fn x_drawn_on_the_device_gives_the_host_verdicts_or_fails_the_data_check() {
    for case in [REALISTIC_CASE, CARRIER_SYM_CASE] {
        let host = run_with_reference(
            case,
            Backend::Device(simulated::device_with_f64_gemm(false)),
            ReferenceChoice::Gpu,
            0.0,
        );
        let drawn = simulated::drawn_activations();
        let device = run_with_reference(
            case,
            Backend::Device(simulated::device_with_held_f64_gemm(false)),
            ReferenceChoice::Gpu,
            0.0,
        );
        assert!(
            simulated::drawn_activations() > drawn,
            "{case}: X was drawn"
        );
        assert_eq!(outcomes(&host), outcomes(&device), "{case}");
        let wrong = run_with_reference(
            case,
            Backend::Device(simulated::device_with_wrong_draws()),
            ReferenceChoice::Gpu,
            0.0,
        );
        let data: Vec<&Verdict> = wrong.iter().filter(|v| v.check == Check::Data).collect();
        assert_eq!(data.len(), 1, "{wrong:#?}");
        assert_eq!(data[0].outcome, Outcome::Fail);
        assert!(
            data[0].detail.contains("disagrees with the host stream"),
            "{}",
            data[0].detail
        );
        assert!(
            wrong.iter().all(|v| !matches!(v.check, Check::Path(_))),
            "{wrong:#?}"
        );
    }
}

/// `gpu` by default only where a CUDA device is open; asking for it elsewhere is an error.
#[test]
fn the_reference_choice_resolves_by_the_device() {
    let sim = simulated::device_with_f64_gemm(false);
    assert_eq!(
        ReferenceChoice::resolve(None, Some(sim.as_ref())),
        Ok(ReferenceChoice::Cpu)
    );
    assert_eq!(
        ReferenceChoice::resolve(None, None),
        Ok(ReferenceChoice::Cpu)
    );
    let err = ReferenceChoice::resolve(Some(ReferenceChoice::Gpu), Some(sim.as_ref()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("needs a CUDA device"), "{err}");
    assert_eq!(
        ReferenceChoice::resolve(Some(ReferenceChoice::Cpu), None),
        Ok(ReferenceChoice::Cpu)
    );
}

/// initcheck judges the kernels against the CPU reference unless the run asks for one; the other
/// tools, and runs without a sanitizer, keep the default.
#[test]
fn initcheck_defaults_to_the_cpu_reference() {
    use crate::runner::verdict::SanitizerTool;
    let under = ReferenceChoice::requested_under;
    assert_eq!(
        under(None, Some(SanitizerTool::Initcheck)),
        Some(ReferenceChoice::Cpu)
    );
    assert_eq!(
        under(Some(ReferenceChoice::Gpu), Some(SanitizerTool::Initcheck)),
        Some(ReferenceChoice::Gpu)
    );
    assert_eq!(under(None, Some(SanitizerTool::Memcheck)), None);
    assert_eq!(under(None, None), None);
}
