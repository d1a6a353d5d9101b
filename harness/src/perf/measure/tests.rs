//! Perf cases from a suite, and timing on the simulated and stand-in devices.

use std::collections::BTreeSet;

use super::*;
use crate::bench::Traffic;
use w4a16_cases::{CarrierMode, Case, DEFAULT_PRODUCER, ViewLayout};
use w4a16_cases::{Provider, RowPadding, Suite};
use w4a16_device::{simulated, stand_in::StandInDevice};
use w4a16_reference::layer::Symmetry;
use w4a16_reference::{ActDtype, LayerShape};
use w4a16_select::config::{KernelConfig, PrefillDequant};

pub(crate) fn providers() -> Vec<Provider> {
    let p = |name: &str, dtype, symmetry| Provider {
        name: name.into(),
        dtype,
        symmetry,
    };
    vec![
        p("hybrid-w4a16", ActDtype::F16, Symmetry::Sym),
        p("hybrid-w4a16-zp", ActDtype::F16, Symmetry::Asym),
        p("hybrid-w4a16-bf16", ActDtype::Bf16, Symmetry::Sym),
    ]
}

pub(crate) fn case(
    shape_name: &str,
    shape: LayerShape,
    m: usize,
    dtype: ActDtype,
    sym: Symmetry,
) -> Case {
    let mut c = Case {
        id: String::new(),
        suite: "perf-test".into(),
        shape_name: shape_name.into(),
        shape,
        m,
        dtype,
        symmetry: sym,
        class: DataClass::Realistic,
        padding: RowPadding::CacheCliff,
        bias: false,
        act_order: false,
        producer: DEFAULT_PRODUCER,
        x_layout: ViewLayout::default(),
        y_layout: ViewLayout::default(),
        carrier: CarrierMode::Off,
        moe: None,
    };
    c.id = c.make_id();
    c
}

pub(crate) fn suite(cases: Vec<Case>) -> Suite {
    Suite {
        name: "perf-test".into(),
        description: String::new(),
        file: "perf-test.toml".into(),
        allow_unsupported: true,
        on_request: false,
        isa_emulator_max_macs: None,
        isa_emulator_sweep_budgets: Default::default(),
        cases,
    }
}

pub(crate) const SMALL: LayerShape = LayerShape {
    n: 64,
    k: 256,
    group: 128,
};

/// M = 1 (skinny), 8 (fused) and 256 (the dense cache, built) of one small layer, f16 sym,
/// listed out of order.
/// One case per path of the set on sm_90: skinny (M = 1) and fused (M = 8) with the prefill
/// dequant option off, dequant + dense (M = 256) with it on (on sm_90 the option takes every M
/// above skinny's to the dense cache, `w4a16_select::dense_min_m`).
fn small_cases() -> Vec<PerfCase> {
    let timed_with = |ms: &[usize], option| {
        let cases = ms
            .iter()
            .map(|&m| case("t.small", SMALL, m, ActDtype::F16, Symmetry::Sym))
            .collect();
        let config = KernelConfig::with_prefill_dequant(option);
        let (timed, not_timed) = perf_cases(&suite(cases), &providers(), Target::Sm90, &config);
        assert!(not_timed.is_empty(), "{not_timed:?}");
        timed
    };
    let mut timed = timed_with(&[1, 8], PrefillDequant::Disable);
    timed.extend(timed_with(&[256], PrefillDequant::Enable));
    timed
}

#[test]
fn rotations_span_the_cold_footprint_within_the_copy_limits() {
    let plan = PerfPlan::default();
    // qwen3-8b.o_proj: ~8.4 MB of int4 weights per copy needs 16 copies, not 8.
    let small = 8_650_752u64;
    let n = plan.copies_for(small);
    assert_eq!(n, 16);
    assert!(n as u64 * small >= PerfPlan::COLD_FOOTPRINT_BYTES);
    assert!((n as u64 - 1) * small < PerfPlan::COLD_FOOTPRINT_BYTES);
    // Large layers keep the plan's minimum; tiny ones stop at the limit.
    assert_eq!(plan.copies_for(1 << 30), plan.copies);
    assert_eq!(plan.copies_for(1024), PerfPlan::MAX_COPIES);
    // The dense control: one copy once a copy is big enough on its own.
    assert_eq!(PerfPlan::cold_copies(1 << 30), 1);
    assert_eq!(PerfPlan::cold_copies(32 << 20), 4);
    assert_eq!(PerfPlan::cold_copies(0), PerfPlan::MAX_COPIES);
}

#[test]
fn the_plan_takes_9_to_30_repetitions_and_at_least_one_copy() {
    assert_eq!(PerfPlan::default().checked().unwrap(), PerfPlan::default());
    for reps in [9, 15, 30] {
        let p = PerfPlan {
            reps,
            ..PerfPlan::default()
        };
        assert_eq!(p.checked().unwrap().reps, reps);
    }
    for reps in [0, 8, 31] {
        let p = PerfPlan {
            reps,
            ..PerfPlan::default()
        };
        let e = p.checked().unwrap_err();
        assert!(
            matches!(e, PerfError::Reps { reps: r, min: 9, max: 30 } if r == reps),
            "{e}"
        );
        assert!(e.to_string().contains(&format!("--reps {reps}")), "{e}");
    }
    let e = PerfPlan {
        copies: 0,
        ..PerfPlan::default()
    }
    .checked()
    .unwrap_err();
    assert!(matches!(e, PerfError::NoCopies), "{e}");
}

#[test]
fn the_field_suite_is_every_shape_at_every_m_for_every_provider() {
    let set = w4a16_cases::load_all(&w4a16_cases::locate(None).unwrap()).unwrap();
    let field = set.suite("field").unwrap();
    let (timed, not_timed) = perf_cases(
        field,
        set.providers(),
        Target::Sm90,
        &KernelConfig::default(),
    );
    let distinct =
        |f: &dyn Fn(&Case) -> String| field.cases.iter().map(f).collect::<BTreeSet<_>>().len();
    let shapes = distinct(&|c| c.shape_name.clone());
    let ms = distinct(&|c| c.m.to_string());
    let providers = distinct(&|c| format!("{:?}/{:?}", c.dtype, c.symmetry));
    assert_eq!(providers, set.providers().len());
    assert_eq!(timed.len(), shapes * ms * providers);
    // docs/contract.md §7 as the case files spell it today: 38 shapes × 14 M × 4 providers.
    assert_eq!((shapes, ms, providers), (38, 14, 4));
    assert!(
        not_timed.is_empty(),
        "{:?}",
        &not_timed[..not_timed.len().min(3)]
    );
    let keys: BTreeSet<&PerfKey> = timed.iter().map(|c| &c.key).collect();
    assert_eq!(keys.len(), timed.len(), "one case per key");
    // Sorted by shape, provider, M: each layer's cases are adjacent.
    for w in timed.windows(2) {
        let k = |c: &PerfCase| (c.key.shape.clone(), c.key.provider.clone(), c.m);
        assert!(k(&w[0]) < k(&w[1]), "{} before {}", w[0].key, w[1].key);
    }
    for c in &timed {
        let expected = match c.m {
            1..=5 => vec![KernelId::Skinny],
            _ => vec![KernelId::Fused],
        };
        assert_eq!(c.path, expected, "{} (prefill dequant off)", c.key);
        assert_eq!(c.control(), ControlKind::for_m(c.m));
    }
}

#[test]
fn moe_cases_are_listed_as_not_timed_with_the_reason() {
    let set = w4a16_cases::load_all(&w4a16_cases::locate(None).unwrap()).unwrap();
    let moe = set.suite("moe").unwrap();
    let (timed, not_timed) =
        perf_cases(moe, set.providers(), Target::Sm90, &KernelConfig::default());
    let moe_ids: BTreeSet<&str> = moe
        .cases
        .iter()
        .filter(|c| c.moe.is_some())
        .map(|c| c.id.as_str())
        .collect();
    assert!(!moe_ids.is_empty());
    let listed: BTreeSet<&str> = not_timed
        .iter()
        .filter(|(_, why)| why == MOE_NOT_TIMED)
        .map(|(id, _)| id.as_str())
        .collect();
    assert_eq!(listed, moe_ids);
    assert!(timed.iter().all(|c| !moe_ids.contains(c.case_id.as_str())));
}

#[test]
fn duplicates_missing_providers_and_pathless_cases_are_not_timed() {
    let plain = case("t.small", SMALL, 2, ActDtype::F16, Symmetry::Sym);
    let mut with_bias = plain.clone();
    with_bias.bias = true;
    with_bias.id = with_bias.make_id();
    let no_provider = case("t.small", SMALL, 2, ActDtype::Bf16, Symmetry::Asym);
    let mut act_order = case("t.other", SMALL, 2, ActDtype::F16, Symmetry::Sym);
    act_order.act_order = true;
    act_order.id = act_order.make_id();
    let s = suite(vec![
        plain.clone(),
        with_bias.clone(),
        no_provider.clone(),
        act_order.clone(),
    ]);
    let (timed, not_timed) = perf_cases(&s, &providers(), Target::Sm90, &KernelConfig::default());
    assert_eq!(timed.len(), 1);
    assert_eq!(timed[0].case_id, plain.id, "the first case of a key wins");
    assert_eq!(timed[0].key.to_string(), "hybrid-w4a16/t.small/M=2");
    let reason = |id: &str| {
        not_timed
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, why)| why.as_str())
            .unwrap_or_else(|| panic!("{id} not listed: {not_timed:?}"))
    };
    assert!(reason(&with_bias.id).contains(&plain.id));
    assert!(reason(&no_provider.id).contains("no provider for bf16/asym"));
    assert!(reason(&act_order.id).contains("act-order"));
    assert_eq!(not_timed.len(), 3);
}

#[test]
fn labels_name_each_kernel_of_the_path_with_its_entry() {
    let timed = small_cases();
    let labels: Vec<(usize, String)> = timed.iter().map(|c| (c.m, c.label().0)).collect();
    assert_eq!(labels[0], (1, "skinny:w4a16_skinny_f16".to_string()));
    assert_eq!(labels[1].0, 8);
    assert!(
        labels[1].1.starts_with("fused:w4a16_fused_f16_"),
        "{labels:?}"
    );
    assert_eq!(
        labels[2],
        (256, "dequant:w4a16_dequant_f16+dense:blas".to_string())
    );
}

#[test]
fn both_sides_time_the_path_and_its_control_case_by_case() {
    let timed = small_cases();
    let (cand, ctrl) = (
        simulated::device(false, true),
        simulated::device(false, true),
    );
    let plan = PerfPlan {
        reps: 9,
        warmup: 2,
        copies: 3,
    };
    let mut said = Vec::new();
    let out = measure_suite(cand.as_ref(), Some(ctrl.as_ref()), &timed, plan, &mut |s| {
        said.push(s.to_string())
    })
    .unwrap();
    assert_eq!(out.len(), 3);
    assert_eq!(
        said.iter().filter(|s| s.starts_with("data: ")).count(),
        1,
        "one layer for the three M: {said:?}"
    );
    for ((m, c), case) in out.iter().zip(&timed) {
        let c = c.as_ref().expect("a control side");
        for side in [m, c] {
            assert_eq!(side.key, case.key);
            assert_eq!(side.kernel, case.label());
            assert_eq!(side.times_us.len(), 9);
            assert_eq!(side.control_us.len(), 9);
            assert_eq!(side.control, ControlKind::for_m(case.m));
            assert_eq!(side.flops, 2 * case.m as u64 * 64 * 256);
            assert_eq!(
                side.traffic_bytes,
                Traffic::gemm(SMALL, case.m, Symmetry::Sym).total()
            );
        }
    }
    // The simulator times a kernel launch at 10 µs, a copy or a BLAS call at nothing.
    assert_eq!(out[0].0.times_us, vec![10.0; 9], "skinny");
    assert_eq!(out[1].0.times_us, vec![10.0; 9], "fused");
    assert_eq!(
        out[2].0.times_us,
        vec![0.0; 9],
        "the dense path is the BLAS alone"
    );
    assert_eq!(
        out[0].0.traffic_bytes,
        64 * 128 + 64 * 2 * 2 + 256 * 2 + 64 * 2
    );
}

/// A stop asked for before a case ends the run there: the cases timed so far come back, in
/// order, and no later case is started.
#[test]
fn a_stopped_run_returns_the_cases_it_timed() {
    let timed = small_cases();
    let dev = simulated::device(false, true);
    let mut asked = 0;
    let out = measure_suite_until(
        dev.as_ref(),
        None,
        &timed,
        PerfPlan::default(),
        &mut |_| {},
        &mut || {
            asked += 1;
            asked > 2
        },
    )
    .unwrap();
    let keys: Vec<_> = out.iter().map(|(m, _)| m.key.clone()).collect();
    let first: Vec<_> = timed[..2].iter().map(|c| c.key.clone()).collect();
    assert_eq!(keys, first);
    assert_eq!(asked, 3, "asked before each case, stopped at the third");
}

#[test]
fn a_device_fault_names_the_case_and_the_side() {
    let timed = small_cases();
    let (ok, sticky) = (
        simulated::device(false, true),
        simulated::device(true, true),
    );
    let e = measure_suite(
        sticky.as_ref(),
        None,
        &timed,
        PerfPlan::default(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(
        matches!(&e, PerfError::Device { case, side: Side::Candidate, .. } if *case == timed[0].key),
        "{e}"
    );
    let e = measure_suite(
        ok.as_ref(),
        Some(sticky.as_ref()),
        &timed,
        PerfPlan::default(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(
        matches!(
            &e,
            PerfError::Device {
                side: Side::Control,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string().contains("hybrid-w4a16/t.small/M=1 (control)"),
        "{e}"
    );
    // Without the vendor BLAS the M > 5 control cannot be taken: M = 8's, after M = 1.
    let no_blas = simulated::device(false, false);
    let e = measure_suite(
        no_blas.as_ref(),
        None,
        &timed,
        PerfPlan::default(),
        &mut |_| {},
    )
    .unwrap_err();
    match &e {
        PerfError::Device { case, fault, .. } => {
            assert_eq!(case.m, 8);
            assert!(
                matches!(&**fault, DeviceFault::MissingCapability { .. }),
                "{e}"
            );
        }
        _ => panic!("{e}"),
    }
}

#[test]
fn devices_of_another_target_or_a_bad_plan_are_refused_before_any_timing() {
    let timed = small_cases();
    let gfx = StandInDevice::new(Target::Gfx1151);
    let e = measure_suite(&gfx, None, &timed, PerfPlan::default(), &mut |_| {}).unwrap_err();
    assert!(
        matches!(
            &e,
            PerfError::WrongTarget {
                selected_for: Target::Sm90,
                device_target: Target::Gfx1151,
                ..
            }
        ),
        "{e}"
    );
    let sim = simulated::device(false, true);
    let bad = PerfPlan {
        reps: 40,
        ..PerfPlan::default()
    };
    let mut said = 0;
    let e = measure_suite(sim.as_ref(), None, &timed, bad, &mut |_| said += 1).unwrap_err();
    assert!(matches!(e, PerfError::Reps { reps: 40, .. }), "{e}");
    assert_eq!(said, 0);
}
