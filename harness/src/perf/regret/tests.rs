//! Regret mode end to end on a simulated device whose cost model makes chosen paths fast or
//! slow: the legal paths, the regret and the path it names, the option's value, the reports
//! and the JSON read back.

use super::report::{self, read_json, worst_first};
use super::*;
use crate::perf::PerfError;
use crate::perf::measure::tests::{SMALL, case, providers, suite};
use w4a16_device::simulated::{self, SimCosts, SimOp};
use w4a16_kernels::{KernelId, tiles};
use w4a16_reference::ActDtype;
use w4a16_reference::layer::{LayerShape, Symmetry};
use w4a16_select::TileSize;

const PLAN: PerfPlan = PerfPlan {
    reps: 9,
    warmup: 1,
    copies: 2,
};

/// Skinny 3 µs, the fallback 100 µs, the vendor BLAS 2 µs, each fused variant 1024 µs over
/// its block's threads (so that a fused time shows the geometry it was launched with): 8 µs for
/// the four-warp tiles, 4 µs for the eight-warp 128x128 tile.
fn costs(op: &SimOp<'_>) -> f64 {
    match op {
        SimOp::Launch {
            kernel: KernelId::Skinny,
            ..
        } => 3.0,
        SimOp::Launch {
            kernel: KernelId::Fallback,
            ..
        } => 100.0,
        SimOp::Launch {
            kernel: KernelId::Fused,
            geometry,
            ..
        } => 1024.0 / f64::from(geometry.block[0]),
        SimOp::Launch { .. } => 1.0,
        SimOp::Blas { .. } => 2.0,
        SimOp::Copy { .. } => 1.0,
    }
}

fn cases_at(ms: &[usize], config: &KernelConfig) -> Vec<RegretCase> {
    let cases = ms
        .iter()
        .map(|&m| case("t.small", SMALL, m, ActDtype::F16, Symmetry::Sym))
        .collect();
    let (timed, not_timed) = regret_cases(&suite(cases), &providers(), Target::Sm90, config);
    assert!(not_timed.is_empty(), "{not_timed:?}");
    timed
}

fn run_of(rows: Vec<RegretRow>, config: &KernelConfig) -> RegretRun {
    RegretRun {
        target: "sm_90".into(),
        device: "simulated".into(),
        suite: "perf-test".into(),
        prefill_dequant: config.prefill_dequant,
        plan: PLAN,
        source: TimeSource::DeviceEvents,
        kernels: "xxh3:0123456789abcdef".into(),
        planned: rows.len(),
        rows,
        not_timed: vec![("perf-test/x".into(), "a MoE case".into())],
        peers_note: None,
    }
}

#[test]
fn legal_paths_follow_the_selection_and_the_config() {
    let disabled = KernelConfig::default();
    let cases = cases_at(&[1, 16, 256], &disabled);
    let table = tiles::table(Target::Sm90, ActDtype::F16);
    for c in &cases {
        let paths: Vec<LinearPath> = c.paths.iter().map(|p| p.path).collect();
        assert!(paths.contains(&c.selected), "{}: {paths:?}", c.perf.key);
        assert_eq!(paths.contains(&LinearPath::Skinny), c.perf.m <= 5);
        assert_eq!(paths.last(), Some(&LinearPath::Fallback));
        // Timed for the option's value, never counted for the regret under `disable`.
        let dense = c
            .paths
            .iter()
            .find(|p| p.path == LinearPath::DequantDense)
            .expect("the dense path is timed for the option's value");
        assert!(!dense.under_config && !dense.without_option);
        for p in &c.paths {
            if let LinearPath::Fused { rung, tile } = p.path {
                let (_, r) = table.rung(rung).expect("a rung of the table");
                assert_eq!(TileSize::from(r.tile), tile);
            }
        }
    }
    let sel: Vec<LinearPath> = cases.iter().map(|c| c.selected).collect();
    assert_eq!(sel[0], LinearPath::Skinny);
    assert!(matches!(sel[1], LinearPath::Fused { .. }));
    assert!(matches!(sel[2], LinearPath::Fused { .. }), "option off");
    // Enabled: the dense path is selected at M = 256 and counts for the regret.
    let enabled = KernelConfig::with_prefill_dequant(PrefillDequant::Enable);
    let c = &cases_at(&[256], &enabled)[0];
    assert_eq!(c.selected, LinearPath::DequantDense);
    assert!(c.paths.iter().all(|p| p.under_config));
}

#[test]
fn a_layer_only_the_fallback_takes_has_one_path_and_no_regret() {
    let channelwise = LayerShape {
        n: 64,
        k: 256,
        group: 256,
    };
    let cases = vec![case("t.cw", channelwise, 16, ActDtype::F16, Symmetry::Sym)];
    let config = KernelConfig::with_prefill_dequant(PrefillDequant::Enable);
    let (timed, _) = regret_cases(&suite(cases), &providers(), Target::Sm90, &config);
    assert_eq!(timed.len(), 1);
    let only: Vec<LinearPath> = timed[0].paths.iter().map(|p| p.path).collect();
    assert_eq!(only, vec![LinearPath::Fallback]);
    let dev = simulated::device_with_costs(SimCosts { cost_us: costs });
    let rows = measure_regret(dev.as_ref(), &timed, PLAN, &mut |_| {}).unwrap();
    assert_eq!(rows[0].regret, 1.0);
    assert_eq!(
        rows[0].prefill_dequant_ratio, None,
        "no dense path is legal"
    );
    assert_eq!(rows[0].dequant_once_us, None);
}

#[test]
fn the_regret_names_the_faster_path_and_the_reports_round_trip() {
    let config = KernelConfig::default();
    let cases = cases_at(&[1, 16], &config);
    let dev = simulated::device_with_costs(SimCosts { cost_us: costs });
    let mut said = Vec::new();
    let rows = measure_regret(dev.as_ref(), &cases, PLAN, &mut |s| {
        said.push(s.to_string())
    })
    .unwrap();
    assert_eq!(said.iter().filter(|s| s.starts_with("data: ")).count(), 1);
    // M = 1: skinny (3 µs) is selected and the fastest.
    let decode = &rows[0];
    assert_eq!(
        (decode.selected, decode.best),
        (LinearPath::Skinny, LinearPath::Skinny)
    );
    assert_eq!(decode.regret, 1.0);
    assert!(!decode.regrets());
    // Every fused rung ran with its own tile's geometry: its time is its block's threads.
    for t in &rows[1].times {
        assert_eq!(t.samples_us.len(), PLAN.reps);
        if let LinearPath::Fused { tile, .. } = t.candidate.path {
            let threads = f64::from(tiles::threads(tile.into()));
            assert_eq!(t.median_us, 1024.0 / threads, "{t:?}");
            assert!(t.label.0.ends_with(&tile.to_string()), "{}", t.label);
        }
    }
    // M = 16: the selected fused tile (four warps, 8 µs) is slower than the eight-warp
    // 128x128 tile (4 µs), which the regret names; the dense path (2 µs) is faster still, but
    // the option is off: it shows in the option's value, not in the regret.
    let mid = &rows[1];
    let selected_tile = match mid.selected {
        LinearPath::Fused { tile, .. } => tile,
        other => panic!("M = 16 selected {other}"),
    };
    let eight_warps = TileSize::from(tiles::TILE_128X128W8);
    assert_ne!(
        selected_tile, eight_warps,
        "the test needs another tile selected"
    );
    assert!(
        matches!(mid.best, LinearPath::Fused { tile, .. } if tile == eight_warps),
        "{mid:?}"
    );
    assert_eq!(mid.best_us, 4.0);
    let expected = 2.0;
    assert!(
        (mid.regret - expected).abs() < 1e-9 && mid.regret > 1.0,
        "{}",
        mid.regret
    );
    assert!(mid.regrets());
    assert_eq!(mid.prefill_dequant_ratio, Some(2.0 / 4.0));
    // The dequant that builds the cache (1 µs a launch here) is beside the dense time, not in it.
    assert_eq!(mid.dequant_once_us, Some(1.0));
    assert_eq!(decode.dequant_once_us, Some(1.0));

    let run = run_of(rows, &config);
    assert_eq!(worst_first(&run)[0].key.m, 16);
    let dir = tempfile::tempdir().unwrap();
    let paths = report::write_reports(&run, dir.path()).unwrap();
    let text = std::fs::read_to_string(&paths.json).unwrap();
    let back = read_json(&paths.json.display().to_string(), &text).unwrap();
    assert_eq!(back, run);
    let md = std::fs::read_to_string(&paths.markdown).unwrap();
    let worst_line = md
        .lines()
        .find(|l| l.contains("| 16 |"))
        .unwrap_or_else(|| panic!("no M = 16 row in {md}"));
    assert!(worst_line.contains("fused#"), "{worst_line}");
    assert!(
        worst_line.contains(&eight_warps.to_string()),
        "{worst_line}"
    );
    assert!(
        worst_line.contains(&format!("{}×", crate::perf::report::fmt_sig3(expected))),
        "{worst_line}"
    );
    assert!(md.contains("a MoE case"), "{md}");
    let svg = std::fs::read_to_string(&paths.plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("t.small"), "{svg}");
    assert!(svg.contains("hybrid-w4a16 regret"), "{svg}");
    // No minor grid: a whole-field plot stays small enough to keep in the repository.
    assert!(!svg.contains(r#"opacity="0.1""#), "{svg}");
    // Not JSON of a regret run: a typed error naming the file.
    let e = read_json("bad.json", "{\"target\": 1}").unwrap_err();
    assert!(e.to_string().contains("bad.json"), "{e}");
}

#[test]
fn bad_times_are_typed_errors_not_regrets() {
    let config = KernelConfig::default();
    let c = &cases_at(&[16], &config)[0];
    let time = |path: LinearPath, us: f64| PathTime {
        candidate: *c.paths.iter().find(|p| p.path == path).unwrap(),
        label: crate::perf::key::KernelLabel("k".into()),
        median_us: us,
        samples_us: vec![us],
    };
    let e = RegretRow::from_times(c, vec![time(LinearPath::Fallback, 5.0)]).unwrap_err();
    assert!(matches!(e, RegretError::SelectedNotTimed { .. }), "{e}");
    for bad in [0.0, f64::NAN, f64::INFINITY] {
        let e = RegretRow::from_times(
            c,
            vec![time(c.selected, 10.0), time(LinearPath::Fallback, bad)],
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                RegretError::BadTime {
                    path: LinearPath::Fallback,
                    ..
                }
            ),
            "{e}"
        );
    }
}

#[test]
fn a_device_that_cannot_time_is_a_typed_error() {
    let cases = cases_at(&[1], &KernelConfig::default());
    let dev = w4a16_device::stand_in::StandInDevice::new(Target::Sm90);
    match measure_regret(&dev, &cases, PLAN, &mut |_| {}) {
        Err(PerfError::Emulated { .. } | PerfError::Device { .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_fallback_above_its_budget_is_left_out_and_said_so() {
    let config = KernelConfig::default();
    let mut cases = cases_at(&[1, 16], &config);
    let macs = cases[1].macs();
    assert_eq!(macs, 16 * 64 * 256);
    for c in &mut cases {
        c.limit_fallback(macs - 1);
    }
    // M = 1 is within the budget; M = 16 is not.
    assert!(cases[0].left_out.is_empty());
    assert!(
        cases[0]
            .paths
            .iter()
            .any(|p| p.path == LinearPath::Fallback)
    );
    assert!(
        cases[1]
            .paths
            .iter()
            .all(|p| p.path != LinearPath::Fallback)
    );
    assert_eq!(
        cases[1].left_out,
        vec![LeftOutPath {
            path: LinearPath::Fallback,
            why: LeftOutReason::FallbackAboveMacs {
                macs,
                max_macs: macs - 1
            }
        }]
    );
    let dev = simulated::device_with_costs(SimCosts { cost_us: costs });
    let rows = measure_regret(dev.as_ref(), &cases, PLAN, &mut |_| {}).unwrap();
    assert!(
        rows[1]
            .times
            .iter()
            .all(|t| !t.label.0.starts_with("fallback"))
    );
    assert_eq!(rows[1].left_out, cases[1].left_out);
    let run = run_of(rows, &config);
    let md = report::markdown(&run);
    assert!(
        md.contains("fallback not timed (262144 MACs > --regret-fallback-max-macs 262143)"),
        "{md}"
    );
    assert!(md.contains("(of the timed)"), "{md}");
    let back = read_json("r.json", &report::json(&run)).unwrap();
    assert_eq!(back, run);
    // A layer only the fallback takes keeps it whatever the budget: it is the selected path.
    let channelwise = LayerShape {
        n: 64,
        k: 256,
        group: 256,
    };
    let cw = vec![case("t.cw", channelwise, 16, ActDtype::F16, Symmetry::Sym)];
    let (mut timed, _) = regret_cases(&suite(cw), &providers(), Target::Sm90, &config);
    timed[0].limit_fallback(0);
    assert!(timed[0].left_out.is_empty());
    assert_eq!(timed[0].paths.len(), 1);
}

/// The counter model times no dense path: within its budget a case keeps its other paths and
/// says why the dense one is missing; above the budget, or where the selection takes the dense
/// path, the case is not timed at all, with the typed reason.
#[test]
fn the_counter_model_leaves_out_what_it_cannot_time_and_says_why() {
    let disabled = KernelConfig::default();
    let mut c = cases_at(&[16], &disabled).remove(0);
    let macs = c.macs();
    assert_eq!(
        c.clone().leave_out_unmodelled(macs - 1),
        Err(NotModelled::AboveBudget {
            macs,
            max_macs: macs - 1
        })
    );
    let before = c.paths.len();
    assert_eq!(c.leave_out_unmodelled(macs), Ok(()));
    assert_eq!(c.paths.len(), before - 1);
    assert!(c.paths.iter().all(|p| p.path != LinearPath::DequantDense));
    assert_eq!(
        c.left_out,
        vec![LeftOutPath {
            path: LinearPath::DequantDense,
            why: LeftOutReason::NoModel
        }]
    );
    let enabled = KernelConfig::with_prefill_dequant(PrefillDequant::Enable);
    let mut dense = cases_at(&[256], &enabled).remove(0);
    assert_eq!(dense.selected, LinearPath::DequantDense);
    assert_eq!(
        dense.leave_out_unmodelled(u64::MAX),
        Err(NotModelled::SelectedDense)
    );
}

/// The CLI rewrites the report after every case: each row reaches `on_row` in case order as it
/// is timed, and a report with fewer rows than planned says it is partial.
#[test]
fn rows_are_handed_over_case_by_case_and_a_partial_report_says_so() {
    let config = KernelConfig::default();
    let cases = cases_at(&[1, 2, 16], &config);
    let dev = simulated::device_with_costs(SimCosts { cost_us: costs });
    let mut seen = Vec::new();
    let rows = measure_regret_each(dev.as_ref(), &cases, PLAN, &mut |_| {}, &mut |r| {
        seen.push(r.clone());
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(seen, rows);
    // A caller that says stop after the second row gets two rows, the third case untimed.
    let stopped = measure_regret_each(dev.as_ref(), &cases, PLAN, &mut |_| {}, &mut |r| match r
        .key
        .m
    {
        2 => std::ops::ControlFlow::Break(()),
        _ => std::ops::ControlFlow::Continue(()),
    })
    .unwrap();
    assert_eq!(stopped.len(), 2);
    let ms: Vec<usize> = seen.iter().map(|r| r.key.m).collect();
    assert_eq!(ms, vec![1, 2, 16]);
    let mut run = run_of(rows, &config);
    assert!(!report::markdown(&run).contains("Partial report"));
    run.rows.truncate(1);
    let dir = tempfile::tempdir().unwrap();
    let folder = report::open(dir.path()).unwrap();
    let paths = report::write_into(&folder, &run).unwrap();
    let md = std::fs::read_to_string(&paths.markdown).unwrap();
    assert!(
        md.contains("**Partial report: 1 of 3 cases timed**"),
        "{md}"
    );
    assert!(
        md.contains("Kernel sources: `xxh3:0123456789abcdef`"),
        "{md}"
    );
    let back = read_json("r", &std::fs::read_to_string(&paths.json).unwrap()).unwrap();
    assert_eq!((back.rows.len(), back.planned), (1, 3));
    assert_eq!(back.kernels, run.kernels);
}

#[test]
fn a_resumed_report_keeps_its_rows_times_only_the_rest_and_refuses_other_settings() {
    let config = KernelConfig::default();
    let cases = cases_at(&[1, 16, 256], &config);
    let dev = simulated::device_with_costs(SimCosts { cost_us: costs });
    // The first call was stopped after M = 1.
    let first = measure_regret(dev.as_ref(), &cases[..1], PLAN, &mut |_| {}).unwrap();
    let previous = run_of(first.clone(), &config);
    let mut run = run_of(Vec::new(), &config);
    run.not_timed = vec![("perf-test/y".into(), "another reason".into())];
    let todo = resume::resume(&mut run, previous.clone(), cases.clone(), "r.json").unwrap();
    let left: Vec<usize> = todo.iter().map(|c| c.perf.m).collect();
    assert_eq!(left, vec![16, 256]);
    assert_eq!(run.rows, first);
    assert_eq!(run.planned, 3);
    assert_eq!(run.not_timed.len(), 2, "{:?}", run.not_timed);
    // A report with every case continues to nothing left.
    let all = measure_regret(dev.as_ref(), &cases, PLAN, &mut |_| {}).unwrap();
    let mut again = run_of(Vec::new(), &config);
    let none = resume::resume(&mut again, run_of(all, &config), cases.clone(), "r.json").unwrap();
    assert!(none.is_empty());
    assert_eq!(again.planned, 3);
    // Rows of another option, device or plan are refused by name.
    let enabled = KernelConfig::with_prefill_dequant(PrefillDequant::Enable);
    let mut other = run_of(Vec::new(), &enabled);
    let e = resume::resume(&mut other, previous.clone(), cases.clone(), "r.json").unwrap_err();
    assert!(e.to_string().contains("prefill dequant option"), "{e}");
    let mut other = run_of(Vec::new(), &config);
    other.device = "NVIDIA H100".into();
    let e = resume::resume(&mut other, previous.clone(), cases.clone(), "r.json").unwrap_err();
    assert!(
        e.to_string().starts_with("r.json: its device is simulated"),
        "{e}"
    );
    let mut other = run_of(Vec::new(), &config);
    other.plan.reps = 15;
    let e = resume::resume(&mut other, previous.clone(), cases.clone(), "r.json").unwrap_err();
    assert!(e.to_string().contains("its plan"), "{e}");
    // Other kernel text (a kernel changed between the calls), or a report from before the
    // digest was recorded, is refused too.
    for kernels in ["xxh3:fedcba9876543210", ""] {
        let mut other = run_of(Vec::new(), &config);
        other.kernels = kernels.into();
        let e = resume::resume(&mut other, previous.clone(), cases.clone(), "r.json").unwrap_err();
        assert!(e.to_string().contains("its kernel sources"), "{e}");
    }
    // A kept row whose case the selection now sends elsewhere is refused, naming the case.
    let mut moved = previous;
    assert_ne!(moved.rows[0].selected, LinearPath::Fallback);
    moved.rows[0].selected = LinearPath::Fallback;
    let mut other = run_of(Vec::new(), &config);
    let e = resume::resume(&mut other, moved, cases, "r.json").unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(&first[0].case_id) && text.contains("fallback selected"),
        "{text}"
    );
}

/// The peer bound holds the selection to account only where dense is legal under the config:
/// the report counts the cases above it there and gives the worst elsewhere for information.
#[test]
fn the_selected_path_is_set_against_the_faster_peer_where_dense_is_legal() {
    let enabled = KernelConfig::with_prefill_dequant(PrefillDequant::Enable);
    let mut cases = cases_at(&[256], &enabled);
    cases.extend(cases_at(&[1], &KernelConfig::default()));
    let dev = simulated::device_with_costs(SimCosts { cost_us: costs });
    let mut rows = measure_regret(dev.as_ref(), &cases, PLAN, &mut |_| {}).unwrap();
    assert!(rows[0].dense_legal() && !rows[1].dense_legal());
    assert_eq!(rows[0].peer_ratio(), None, "no peers measured");
    let peers = |torch: f64, dense: Option<f64>| {
        Some(crate::perf::peers::PeerTimes {
            torch_int4_us: Some(torch),
            dense_fp16_us: dense,
            skipped: Vec::new(),
        })
    };
    // The faster peer is the divisor: dense at half the selected time is 2×, torch slower.
    let t = rows[0].selected_us;
    rows[0].peers = peers(4.0 * t, Some(t / 2.0));
    assert_eq!(rows[0].peer_ratio(), Some(2.0));
    let t = rows[1].selected_us;
    rows[1].peers = peers(t / 3.0, None);
    assert_eq!(rows[1].peer_ratio(), Some(3.0));
    let mut run = run_of(rows, &enabled);
    let md = report::markdown(&run);
    assert!(
        md.contains("where dense is legal under the config: 1 of 1 cases above 1.5×, worst 2.00×"),
        "{md}"
    );
    assert!(md.contains("worst 3.00× of 1 cases"), "{md}");
    run.rows[0].peers = peers(4.0 * run.rows[0].selected_us, Some(run.rows[0].selected_us));
    let md = report::markdown(&run);
    assert!(md.contains("0 of 1 cases above 1.5×, worst 1.00×"), "{md}");
}

/// The regret records kept under `bench/` read back (a later `--regret-resume` continues them)
/// and are in the layout the writer gives them, so a re-recorded row diffs as its own line.
#[test]
fn committed_regret_records_read_back_in_the_writers_layout() {
    let bench = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench");
    let mut seen = 0;
    for entry in std::fs::read_dir(&bench).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("regret") && name.ends_with(".json")) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let run = read_json(&name, &text).unwrap_or_else(|e| panic!("{e}"));
        assert!(!run.rows.is_empty(), "{name} has no row");
        assert!(
            report::json(&run) == text,
            "{name} is not in the writer's layout"
        );
        seen += 1;
    }
    assert!(seen > 0, "no regret record under {}", bench.display());
}
