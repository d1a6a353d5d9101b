//! Selection (docs/contract.md §5): the priority list and its reasons, the hybrid's M-dispatch, padding,
//! per-target tables snapshotted from the case files, tile invariants and shape fuzzing.

use std::fmt::Write;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use w4a16_cases::{CaseSet, RowPadding};
use w4a16_kernels::{KernelId, Target, tiles};
use w4a16_reference::ActDtype;
use w4a16_reference::layer::{LayerShape, Symmetry};
use w4a16_select::config::{KernelConfig, PrefillDequant};
use w4a16_select::reach::{self, TileReach};
use w4a16_select::{
    DeclaredContracts, Dispatch, LayerKernel, LayerRequest, RejectReason, Selection,
};
use w4a16_testkit::strategy;

fn load() -> CaseSet {
    w4a16_cases::load_all(&w4a16_cases::locate(None).expect("the cases folder")).unwrap()
}

const DISABLE: KernelConfig = KernelConfig {
    prefill_dequant: PrefillDequant::Disable,
};
const ENABLE: KernelConfig = KernelConfig {
    prefill_dequant: PrefillDequant::Enable,
};

fn req(n: usize, k: usize, group: usize, m: usize, symmetry: Symmetry) -> LayerRequest {
    LayerRequest::new(LayerShape::new(n, k, group), m, ActDtype::F16, symmetry)
}

fn path(sel: &Selection) -> Vec<KernelId> {
    sel.path.clone()
}

#[test]
fn the_hybrid_dispatches_on_m_at_5_6_255_256_257() {
    for target in [
        Target::Gfx1100,
        Target::Gfx1151,
        Target::Gfx1201,
        Target::Sm90,
    ] {
        let at = |m, cfg: &KernelConfig| {
            w4a16_select::select(target, &req(4096, 4096, 128, m, Symmetry::Asym), cfg)
        };
        for m in 1..=5 {
            assert_eq!(path(&at(m, &ENABLE)), [KernelId::Skinny], "{target} M={m}");
        }
        let dense_from = w4a16_select::dense_min_m(target);
        for m in [6, 7, 128, 255].into_iter().filter(|&m| m < dense_from) {
            assert_eq!(
                path(&at(m, &ENABLE)),
                [KernelId::Fused],
                "{target} M={m}: batches of 6 to {dense_from} - 1 stay on fused"
            );
        }
        for m in [dense_from, dense_from + 1, 256, 257, 4096] {
            assert_eq!(
                path(&at(m, &ENABLE)),
                [KernelId::Dequant, KernelId::Dense],
                "{target} M={m}"
            );
            assert_eq!(
                path(&at(m, &DISABLE)),
                [KernelId::Fused],
                "{target} M={m} disabled"
            );
        }
        assert!(at(dense_from, &ENABLE).rejections.is_empty());
        assert_eq!(at(256, &ENABLE).layer_kernel, Some(LayerKernel::Hybrid));
    }
}

/// The dense threshold is the target's: upstream's M = 256 on the AMD targets, the first M
/// above skinny's on sm_90 (measured there: bench/regret-sm_90-h200-f16-sym.md). Disabled, or without a
/// built cache, every target stays on fused between skinny and any threshold.
#[test]
fn the_dense_threshold_is_data_per_target() {
    use w4a16_select::{DENSE_MIN_M, SKINNY_MAX_M, dense_min_m};
    for t in [Target::Gfx1100, Target::Gfx1151, Target::Gfx1201] {
        assert_eq!(dense_min_m(t), DENSE_MIN_M, "{t}");
    }
    assert_eq!(dense_min_m(Target::Sm90), SKINNY_MAX_M + 1);
    let m = SKINNY_MAX_M + 1;
    let sel = w4a16_select::select(
        Target::Sm90,
        &req(4096, 4096, 128, m, Symmetry::Sym),
        &ENABLE,
    );
    assert_eq!(path(&sel), [KernelId::Dequant, KernelId::Dense]);
    assert_eq!(
        sel.dispatch.to_string(),
        format!("M = {m} ≥ {m}, prefill dequant enabled and cache built")
    );
    let mut unbuilt = req(4096, 4096, 128, m, Symmetry::Sym);
    unbuilt.dense_cache_built = false;
    for (r, cfg) in [
        (req(4096, 4096, 128, m, Symmetry::Sym), &DISABLE),
        (unbuilt, &ENABLE),
    ] {
        assert_eq!(
            path(&w4a16_select::select(Target::Sm90, &r, cfg)),
            [KernelId::Fused]
        );
    }
    let amd = w4a16_select::select(
        Target::Gfx1151,
        &req(4096, 4096, 128, m, Symmetry::Sym),
        &ENABLE,
    );
    assert_eq!(
        amd.dispatch.to_string(),
        format!("{SKINNY_MAX_M} < M = {m} < 256: fused")
    );
}

#[test]
fn an_enabled_option_without_a_built_cache_stays_on_fused() {
    let mut r = req(4096, 4096, 128, 512, Symmetry::Sym);
    r.dense_cache_built = false;
    let sel = w4a16_select::select(Target::Gfx1151, &r, &ENABLE);
    assert_eq!(path(&sel), [KernelId::Fused]);
    assert_eq!(
        sel.dispatch,
        Dispatch::NoCacheBuilt {
            m: 512,
            dense_from: 256
        }
    );
    assert!(
        sel.dispatch.to_string().contains("no cache built"),
        "{}",
        sel.dispatch
    );
    assert!(sel.strides.dense_row_stride.is_none());
}

#[test]
fn wave64_targets_never_take_the_hybrid() {
    let sel = w4a16_select::select(
        Target::Gfx942,
        &req(4096, 4096, 128, 1, Symmetry::Sym),
        &ENABLE,
    );
    assert_eq!(sel.layer_kernel, Some(LayerKernel::Fallback));
    assert_eq!(path(&sel), [KernelId::Fallback]);
    assert_eq!(sel.rejections.len(), 1);
    assert_eq!(sel.rejections[0].kernel, LayerKernel::Hybrid);
    assert_eq!(
        sel.rejections[0].reason,
        RejectReason::NotWave32 {
            target: Target::Gfx942
        }
    );
    assert!(
        sel.rejections[0].reason.to_string().contains("wave64"),
        "{}",
        sel.rejections[0].reason
    );
}

#[test]
fn group_sizes_off_the_fast_path_fall_back_with_a_reason() {
    for (group, needle) in [
        (256, "G = 256"),
        (4096, "channelwise (G = K = 4096)"),
        (16, "G = 16"),
    ] {
        let sel = w4a16_select::select(
            Target::Gfx1151,
            &req(4096, 4096, group, 6, Symmetry::Asym),
            &DISABLE,
        );
        assert_eq!(sel.layer_kernel, Some(LayerKernel::Fallback), "G={group}");
        assert!(
            sel.rejections
                .iter()
                .any(|r| r.kernel == LayerKernel::Hybrid && r.reason.to_string().contains(needle)),
            "{:?}",
            sel.rejections
        );
    }
    for group in [32, 64, 128] {
        let sel = w4a16_select::select(
            Target::Gfx1151,
            &req(4096, 4096, group, 6, Symmetry::Asym),
            &DISABLE,
        );
        assert_eq!(sel.layer_kernel, Some(LayerKernel::Hybrid), "G={group}");
    }
}

#[test]
fn k_not_a_multiple_of_16_is_named_by_every_kernel() {
    // docs/contract.md §1: K % 16 == 0 is a shape rule of the whole set, the fallback included.
    let sel = w4a16_select::select(
        Target::Sm90,
        &req(256, 1000, 1000, 1, Symmetry::Sym),
        &DISABLE,
    );
    assert_eq!(sel.layer_kernel, None);
    for k in LayerKernel::PRIORITY {
        assert!(
            sel.rejections.iter().any(|r| r.kernel == k
                && r.reason == RejectReason::KNotMultipleOf16 { k: 1000 }
                && r.reason.to_string() == "K = 1000 must be divisible by 16"),
            "{k}: {:?}",
            sel.rejections
        );
    }
}

/// The hybrid refuses asymmetric N % 8 != 0 (docs/contract.md §5); the fallback takes it, reading the
/// partial last zero-point word of `[ceil(N/8), K/G]` row by row.
#[test]
fn asymmetric_n_not_a_multiple_of_8_goes_to_the_fallback() {
    for m in [1, 6, 256] {
        let sel = w4a16_select::select(
            Target::Gfx1151,
            &req(204, 1024, 128, m, Symmetry::Asym),
            &ENABLE,
        );
        assert_eq!(sel.layer_kernel, Some(LayerKernel::Fallback), "M = {m}");
        assert_eq!(sel.path, vec![KernelId::Fallback]);
        assert_eq!(
            sel.rejections
                .iter()
                .map(|r| (r.kernel, r.reason, r.reason.to_string()))
                .collect::<Vec<_>>(),
            vec![(
                LayerKernel::Hybrid,
                RejectReason::ZeroPointsNNotMultipleOf8 { n: 204 },
                "asymmetric zero points are packed 8 per u32 along N: N = 204 must be divisible by 8"
                    .to_owned()
            )]
        );
        assert!(w4a16_select::cross_check(&sel, &DeclaredContracts).is_ok());
    }
    // The same N is fine without zero points.
    let sym = w4a16_select::select(
        Target::Gfx1151,
        &req(204, 1024, 128, 1, Symmetry::Sym),
        &DISABLE,
    );
    assert_eq!(sym.layer_kernel, Some(LayerKernel::Hybrid));
}

#[test]
fn act_order_is_refused_by_every_kernel() {
    let mut r = req(4096, 4096, 128, 1, Symmetry::Sym);
    r.act_order = true;
    let sel = w4a16_select::select(Target::Sm90, &r, &DISABLE);
    assert_eq!(sel.layer_kernel, None);
    assert_eq!(
        sel.rejections
            .iter()
            .filter(|r| r.reason == RejectReason::ActOrder)
            .count(),
        2
    );
}

#[test]
fn padding_follows_the_target_rule_and_the_case_axis() {
    let at = |t, k, m, padding| {
        let mut r = req(512, k, 128, m, Symmetry::Sym);
        r.padding = padding;
        w4a16_select::select(t, &r, &ENABLE)
    };
    // gfx11: weight rows of 1024 B multiples pad; dense rows of 2048 B multiples pad.
    let s = at(Target::Gfx1151, 2048, 256, RowPadding::CacheCliff);
    assert_eq!(
        (
            s.strides.weight_row_stride_bytes,
            s.strides.dense_row_stride
        ),
        (1024 + 128, Some(2048 + 64))
    );
    let s = at(Target::Gfx1100, 2560, 256, RowPadding::CacheCliff);
    assert_eq!(
        (
            s.strides.weight_row_stride_bytes,
            s.strides.dense_row_stride
        ),
        (1280, Some(2560))
    );
    let s = at(Target::Gfx1100, 1024, 256, RowPadding::CacheCliff);
    assert_eq!(
        (
            s.strides.weight_row_stride_bytes,
            s.strides.dense_row_stride
        ),
        (512, Some(1024 + 64))
    );
    // Other targets pad nothing by default; forced pads everywhere; none pads nowhere.
    for t in [Target::Gfx1201, Target::Sm90] {
        let s = at(t, 2048, 256, RowPadding::CacheCliff);
        assert_eq!(
            (s.strides.weight_pad_bytes, s.strides.dense_row_stride),
            (0, Some(2048)),
            "{t}"
        );
        let s = at(t, 2560, 256, RowPadding::Forced);
        assert_eq!(
            (s.strides.weight_pad_bytes, s.strides.dense_row_stride),
            (128, Some(2560 + 64)),
            "{t}"
        );
    }
    let s = at(Target::Gfx1151, 2048, 256, RowPadding::None);
    assert_eq!(
        (s.strides.weight_pad_bytes, s.strides.dense_row_stride),
        (0, Some(2048))
    );
    // Logical shapes never change; only strides.
    assert_eq!(s.request.shape, LayerShape::new(512, 2048, 128));
}

/// docs/contract.md §5: the fused path copies X per call, and on gfx11 those rows get +128 B when `K·2`
/// bytes is a multiple of 2048; decode (skinny) and the dense path take X as the caller has it.
#[test]
fn activation_rows_on_the_fused_path_follow_the_cache_cliff_rule() {
    let at = |t, k, m, padding| {
        let mut r = req(512, k, 128, m, Symmetry::Sym);
        r.padding = padding;
        w4a16_select::select(t, &r, &DISABLE)
    };
    for (k, padded) in [(1024, true), (4096, true), (1280, false), (2560, false)] {
        let s = at(Target::Gfx1151, k, 64, RowPadding::CacheCliff);
        assert_eq!(s.path, [KernelId::Fused]);
        let want = if padded { k + 64 } else { k };
        assert_eq!(s.strides.x_row_stride, want, "K = {k}");
        assert!(
            w4a16_select::row(&s).contains(&format!(" xpad={} ", want - k)),
            "{}",
            w4a16_select::row(&s)
        );
        // decode takes the caller's X
        assert_eq!(
            at(Target::Gfx1151, k, 1, RowPadding::CacheCliff)
                .strides
                .x_row_stride,
            k
        );
    }
    assert_eq!(
        at(Target::Sm90, 4096, 64, RowPadding::CacheCliff)
            .strides
            .x_row_stride,
        4096
    );
    assert_eq!(
        at(Target::Sm90, 1280, 64, RowPadding::Forced)
            .strides
            .x_row_stride,
        1280 + 64
    );
    assert_eq!(
        at(Target::Gfx1151, 4096, 64, RowPadding::None)
            .strides
            .x_row_stride,
        4096
    );
    // The padded X is one the fused kernel's declaration takes.
    let s = at(Target::Gfx1151, 4096, 64, RowPadding::CacheCliff);
    w4a16_select::cross_check(&s, &DeclaredContracts).unwrap();
}

#[test]
fn every_field_shape_takes_the_hybrid_on_wave32_targets_and_the_fallback_on_gfx942() {
    let set = load();
    for case in &set.suite("field").unwrap().cases {
        let r = LayerRequest::from_case(case);
        for t in Target::ALL {
            let sel = w4a16_select::select(t, &r, &ENABLE);
            let want = if t == Target::Gfx942 {
                LayerKernel::Fallback
            } else {
                LayerKernel::Hybrid
            };
            assert_eq!(sel.layer_kernel, Some(want), "{} on {t}", case.id);
        }
    }
}

#[test]
fn the_pretty_printer_shows_path_reasons_and_strides() {
    let mut r = req(204, 4096, 256, 300, Symmetry::Sym);
    r.bias = true;
    let text = w4a16_select::render(&w4a16_select::select(Target::Gfx1151, &r, &ENABLE));
    let expected = [
        "target    gfx1151 (wave32)",
        "layer     M=300 N=204 K=4096 G=256 f16 sym  bias=yes act-order=no padding=cache-cliff",
        "kernel    fallback",
        "path      fallback  (fallback: every shape the formats allow)",
        "strides   weights 2176 B/row (K/2 = 2048, +128 padding), scales 16, x 4096, y 204",
        "rejected  hybrid: G = 256 is not a fast-path group size (32, 64, 128)",
    ];
    assert_eq!(text.lines().collect::<Vec<_>>(), expected);
    let fused = w4a16_select::render(&w4a16_select::select(
        Target::Sm90,
        &req(256, 512, 64, 33, Symmetry::Asym),
        &DISABLE,
    ));
    assert!(
        fused.contains("path      fused  (M = 33 ≥ 6, prefill dequant disabled)"),
        "{fused}"
    );
    assert!(
        fused.lines().any(|l| l.starts_with("tile      BM=")),
        "{fused}"
    );
    assert!(
        fused.contains(
            "rung      sm_90 #1 (sm_90): M ≤ 64, N ≤ 16384 → 32x64x32w4 (field 32,64,32,4)"
        ),
        "{fused}"
    );
}

fn table(set: &CaseSet, suite: &str, target: Target) -> String {
    let mut out = String::new();
    for case in &set.suite(suite).unwrap().cases {
        let r = LayerRequest::from_case(case);
        let off = w4a16_select::select(target, &r, &DISABLE);
        let on = w4a16_select::select(target, &r, &ENABLE);
        let id = case.id.strip_prefix(&format!("{suite}/")).unwrap();
        let _ = write!(out, "{id} | {}", w4a16_select::row(&off));
        if on.path != off.path {
            let dpad = on
                .strides
                .dense_pad_elems(r.shape.k)
                .map_or("-".to_owned(), |p| p.to_string());
            let _ = write!(out, " | enable: {} dpad={dpad}", on.path_name());
        }
        out.push('\n');
    }
    out
}

fn snapshot_settings(target: Target) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("../../snapshots");
    s.set_prepend_module_to_snapshot(false);
    s.set_snapshot_suffix(target.name());
    s.set_omit_expression(true);
    s
}

/// The MoE selection of every moe-suite case and of the docs/contract.md §7 MoE layers at the benchmark's T,
/// per target: path, tile (`block_m`), the table and why.
fn moe_table(set: &CaseSet, target: Target) -> String {
    use w4a16_select::moe::{MoeRequest, row, select_moe};
    let mut rows = std::collections::BTreeSet::new();
    for c in &set.suite("moe").unwrap().cases {
        let r = MoeRequest::from_case(c, c.moe.expect("a MoE case"));
        rows.insert(row(&r, &select_moe(target, &r)));
    }
    for s in set.moe_shapes() {
        for tokens in [1, 16, 256, 2048] {
            for dtype in ActDtype::ALL {
                let r = MoeRequest {
                    shape: s.shape,
                    tokens,
                    top_k: s.top_k,
                    experts: s.experts,
                    dtype,
                    symmetry: Symmetry::Asym,
                    padding: w4a16_cases::RowPadding::default(),
                    producer: w4a16_reference::formats::Producer::CompressedTensors,
                };
                rows.insert(row(&r, &select_moe(target, &r)));
            }
        }
    }
    rows.into_iter().collect::<Vec<_>>().join("\n")
}

#[test]
fn moe_selection_per_target() {
    let set = load();
    for target in Target::ALL {
        let t = moe_table(&set, target);
        snapshot_settings(target).bind(|| insta::assert_snapshot!("selection_moe", t));
    }
}

#[test]
fn moe_refusals_name_every_broken_rule() {
    use w4a16_select::moe::{MoeRequest, MoeSelection, select_moe};
    let r = MoeRequest {
        shape: LayerShape::new(36, 1000, 40),
        tokens: 4,
        top_k: 9,
        experts: 8,
        dtype: ActDtype::F16,
        symmetry: Symmetry::Asym,
        padding: w4a16_cases::RowPadding::default(),
        producer: w4a16_reference::formats::Producer::LegacyUnpackedZp,
    };
    let MoeSelection::Refused { reasons } = select_moe(Target::Gfx1151, &r) else {
        panic!("a layer that breaks every rule was taken");
    };
    for needle in ["group size 40", "K=1000", "N=36", "unpacked", "top_k = 9"] {
        assert!(
            reasons.iter().any(|r| r.to_string().contains(needle)),
            "{needle}: {reasons:?}"
        );
    }
    // The same layer without its faults is taken, on every target, with block_m = the tile's BM.
    let ok = MoeRequest {
        shape: LayerShape::new(64, 256, 64),
        top_k: 2,
        producer: w4a16_reference::formats::Producer::CompressedTensors,
        ..r
    };
    for target in Target::ALL {
        match select_moe(target, &ok) {
            MoeSelection::Chosen(c) => assert_eq!(c.block_m(), c.tile.bm as usize),
            MoeSelection::Refused { reasons } => panic!("{target}: {reasons:?}"),
        }
    }
}

#[test]
fn selection_boundaries_per_target() {
    let set = load();
    for target in Target::ALL {
        let t = table(&set, "selection", target);
        snapshot_settings(target).bind(|| insta::assert_snapshot!("selection", t));
    }
}

#[test]
fn selection_of_the_field_matrix_per_target() {
    let set = load();
    for target in Target::ALL {
        let t = table(&set, "field", target);
        snapshot_settings(target).bind(|| insta::assert_snapshot!("selection_field", t));
    }
}

/// No dead rung: the derived boundary sweep of every table, and the selection and field suites,
/// through `select`; every rung of the table of every (target, dtype) where the hybrid runs
/// must be chosen. The per-target snapshot lists each rung with the first layer that took it.
#[test]
fn every_rung_of_every_tile_table_is_chosen_by_the_selection_sweeps() {
    let mut reach = reach::check_shipped().unwrap_or_else(|e| panic!("{e}"));
    let set = load();
    for suite in ["selection", "field"] {
        for case in &set.suite(suite).unwrap().cases {
            let r = LayerRequest::from_case(case);
            for t in Target::ALL {
                for cfg in [DISABLE, ENABLE] {
                    reach.record(&w4a16_select::select(t, &r, &cfg));
                }
            }
        }
    }
    if let Err(e) = reach.check() {
        panic!("{e}");
    }
    for target in reach::targets() {
        let t = reach::report(&reach, target);
        snapshot_settings(target).bind(|| insta::assert_snapshot!("selection_tiles", t));
    }
}

/// A stand-in table for gfx1201 bf16 with two rungs no selection can reach: one below M = 6
/// (skinny takes those batches, the dispatch-order bug of the field's gfx12 branch) and one
/// shadowed by an earlier rung. Both are named; the rest of the table is reached.
#[test]
fn a_table_with_unreachable_rungs_is_reported_by_name() {
    use w4a16_kernels::tiles::{Rung, Segment, ShapeRule, TileTable, field};
    static RUNGS: Segment = Segment {
        name: "stand-in",
        rungs: &[
            Rung {
                m_max: Some(4),
                when: ShapeRule::Any,
                tile: tiles::TILE_16X64W4,
                field: field(16, 64, 32, 4),
            },
            Rung {
                m_max: Some(64),
                when: ShapeRule::Any,
                tile: tiles::TILE_64X64W4,
                field: field(64, 64, 32, 4),
            },
            Rung {
                m_max: Some(32),
                when: ShapeRule::TALL,
                tile: tiles::TILE_32X64W4,
                field: field(32, 64, 32, 4),
            },
            Rung {
                m_max: None,
                when: ShapeRule::Any,
                tile: tiles::TILE_128X128W8,
                field: field(128, 128, 32, 8),
            },
        ],
    };
    static STAND_IN: TileTable = TileTable {
        name: "stand-in-gfx1201-bf16",
        segments: &[&RUNGS],
    };
    fn tables(t: Target, d: ActDtype) -> &'static TileTable {
        if (t, d) == (Target::Gfx1201, ActDtype::Bf16) {
            &STAND_IN
        } else {
            tiles::table(t, d)
        }
    }
    let mut reach = TileReach::with_tables(tables);
    reach.sweep(|t, r| {
        // Selection as it is, reading the stand-in table where selection picks a tile.
        let mut sel = w4a16_select::select(t, r, &DISABLE);
        if sel.tile.is_some() {
            let (n, k, g) = (r.shape.n, r.shape.k, r.shape.group);
            let pick = tables(t, r.dtype).pick(r.m, n, k, g);
            sel.tile = Some(pick.tile);
            sel.tile_rung = Some(pick.rung);
        }
        sel
    });
    let err = reach.check().unwrap_err();
    assert!(err.foreign.is_empty());
    let names: Vec<String> = err.dead.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        names,
        [
            "gfx1201/bf16: dead rung stand-in-gfx1201-bf16 #0 (stand-in): M ≤ 4, any N, K → \
             16x64x32w4 (field 16,64,32,4), chosen by no case of the selection sweeps",
            "gfx1201/bf16: dead rung stand-in-gfx1201-bf16 #2 (stand-in): M ≤ 32, K ≥ 2N → \
             32x64x32w4 (field 32,64,32,4), chosen by no case of the selection sweeps",
        ]
    );
    let text = err.to_string();
    assert!(
        text.starts_with(
            "2 dead tile-table rung(s)\n  gfx1201/bf16: dead rung stand-in-gfx1201-bf16 #0"
        ),
        "{text}"
    );
    // A selection that reads another table than the one declared for its target is named too.
    let mut reach = TileReach::new();
    let mut sel = w4a16_select::select(
        Target::Gfx1151,
        &req(4096, 4096, 128, 64, Symmetry::Sym),
        &DISABLE,
    );
    sel.tile_rung = Some(tiles::RungId {
        table: "gfx1201",
        index: 0,
    });
    reach.record(&sel);
    let err = reach.check().unwrap_err();
    assert_eq!(err.foreign.len(), 1);
    assert!(
        err.to_string().contains(
            "gfx1151/f16: selection took rung gfx1201 #0, not from the table of gfx1151/f16"
        ),
        "{err}"
    );
}

/// The M-dispatch of docs/contract.md §5, restated for the property tests.
/// The contract's dispatch table (docs/contract.md §5), written out apart from the selection:
/// the dense threshold is 6 on sm_90 and 256 elsewhere.
fn expected_hybrid_path(t: Target, m: usize, cfg: &KernelConfig, built: bool) -> Vec<KernelId> {
    let dense_from = if t == Target::Sm90 { 6 } else { 256 };
    if m <= 5 {
        vec![KernelId::Skinny]
    } else if m >= dense_from && cfg.prefill_dequant == PrefillDequant::Enable && built {
        vec![KernelId::Dequant, KernelId::Dense]
    } else {
        vec![KernelId::Fused]
    }
}

fn config() -> impl Strategy<Value = KernelConfig> {
    prop_oneof![Just(DISABLE), Just(ENABLE)]
}

proptest! {
    // Failing seeds persist under the repo-root proptest-regressions/ (commit them; the path is
    // relative to select/, where cargo runs these tests); each shrunk failure is also promoted
    // into cases/regressions.toml as a named case.
    #![proptest_config(ProptestConfig {
        cases: 2048,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("../proptest-regressions/selection.txt"))),
        ..ProptestConfig::default()
    })]

    /// Any request, on any target: no panic, a consistent answer, a reason for every skip.
    #[test]
    fn selection_never_panics_and_always_explains(t in strategy::target(), r in strategy::any_layer_request(), cfg in config()) {
        let sel = w4a16_select::select(t, &r, &cfg);
        let pos = sel.layer_kernel.map_or(LayerKernel::PRIORITY.len(), |k| LayerKernel::PRIORITY.iter().position(|x| *x == k).unwrap());
        for (i, k) in LayerKernel::PRIORITY.iter().enumerate() {
            let rejected = sel.rejections.iter().any(|x| x.kernel == *k);
            prop_assert_eq!(rejected, i < pos, "{} rejected={} but chosen={:?}", k, rejected, sel.layer_kernel);
        }
        prop_assert!(sel.rejections.iter().all(|x| !x.reason.to_string().is_empty()));
        match sel.layer_kernel {
            None => prop_assert!(sel.path.is_empty()),
            Some(LayerKernel::Fallback) => prop_assert_eq!(&sel.path, &vec![KernelId::Fallback]),
            Some(LayerKernel::Hybrid) => prop_assert_eq!(sel.path.clone(), expected_hybrid_path(t, r.m, &cfg, r.dense_cache_built)),
        }
        prop_assert_eq!(sel.tile.is_some(), sel.path.contains(&KernelId::Fused));
        prop_assert_eq!(sel.strides.dense_row_stride.is_some(), sel.path.contains(&KernelId::Dense));
        prop_assert!(sel.strides.weight_row_stride_bytes >= r.shape.k / 2);
        prop_assert!(!w4a16_select::render(&sel).is_empty());
    }

    /// Valid shapes (by construction) take the hybrid wherever it runs.
    #[test]
    fn valid_shapes_take_the_hybrid_on_wave32_targets(t in strategy::target(), r in strategy::layer_request(), cfg in config()) {
        let sel = w4a16_select::select(t, &r, &cfg);
        if t == Target::Gfx942 {
            prop_assert_eq!(sel.layer_kernel, Some(LayerKernel::Fallback));
        } else {
            prop_assert_eq!(sel.layer_kernel, Some(LayerKernel::Hybrid), "{:?}", sel.rejections);
            prop_assert!(sel.rejections.is_empty());
        }
    }

    /// Decode shapes around the old LDS gates stay on skinny: there is no K·M limit.
    #[test]
    fn decode_has_no_k_times_m_limit((shape, m) in strategy::lds_boundary(4096), t in strategy::target()) {
        prop_assume!(t != Target::Gfx942);
        let r = LayerRequest::new(shape, m, ActDtype::Bf16, Symmetry::Asym);
        prop_assert_eq!(w4a16_select::select(t, &r, &ENABLE).path, vec![KernelId::Skinny]);
    }

    /// Tile tables: BK ≤ G, BK % 8 == 0, positive sizes, fits the target's shared memory.
    #[test]
    fn tile_invariants_hold_for_every_target(
        t in strategy::target(),
        dtype in strategy::dtype(),
        shape in strategy::valid_shape(512, 65536),
        m in 1..=8192usize,
    ) {
        let tile = tiles::fused_tile(t, dtype, m, shape.n, shape.k, shape.group);
        prop_assert!(tile.bm > 0 && tile.bn > 0 && tile.bk > 0 && tile.warps > 0, "{:?}", tile);
        prop_assert!(tile.bk as usize <= shape.group, "BK {} > G {}", tile.bk, shape.group);
        prop_assert_eq!(tile.bk % 8, 0);
        let limit = tiles::static_shared_limit(t).min(t.shared_mem_bytes());
        prop_assert!(tiles::shared_mem_bytes(tile) <= limit, "{:?} on {}", tile, t);
        prop_assert_eq!(tiles::check_tile(tile, t, shape.group), Ok(()));
    }

    /// The static cross-check of docs/contract.md §5: whatever selection picks, the picked kernels'
    /// declared contracts accept the layer's resident tensors.
    #[test]
    fn selection_never_picks_a_kernel_whose_contract_refuses_the_layer(
        t in strategy::target(),
        r in strategy::any_layer_request(),
        cfg in config(),
    ) {
        let sel = w4a16_select::select(t, &r, &cfg);
        if sel.layer_kernel.is_some() {
            let checked = w4a16_select::cross_check(&sel, &DeclaredContracts);
            if let Err(e) = &checked {
                prop_assert!(false, "{}\n{}", e, w4a16_select::render(&sel));
            }
        }
    }
}

#[test]
fn every_case_file_selection_passes_the_contract_cross_check() {
    let set = load();
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in set.cases() {
        let r = LayerRequest::from_case(case);
        for t in Target::ALL {
            for cfg in [DISABLE, ENABLE] {
                let sel = w4a16_select::select(t, &r, &cfg);
                if sel.layer_kernel.is_none() {
                    continue;
                }
                checked += 1;
                match w4a16_select::cross_check(&sel, &DeclaredContracts) {
                    Ok(()) => {}
                    Err(e) => failures.push(format!("{} ({cfg}): {e}", case.id)),
                }
            }
        }
    }
    let unsupported = set.suite("selection").unwrap().cases.len();
    assert!(
        checked >= 10 * (set.total_cases() - unsupported),
        "{checked} selections checked"
    );
    assert!(
        failures.is_empty(),
        "{} refused:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

#[test]
fn the_cross_check_finds_a_selection_that_would_crash_at_launch() {
    // The field's bug: a selection that hands a decode batch to a kernel that cannot take it.
    let r = req(256, 1024, 128, 6, Symmetry::Asym);
    let mut sel = w4a16_select::select(Target::Gfx1151, &r, &DISABLE);
    assert!(w4a16_select::cross_check(&sel, &DeclaredContracts).is_ok());
    sel.path = vec![KernelId::Skinny];
    let e = w4a16_select::cross_check(&sel, &DeclaredContracts).unwrap_err();
    assert_eq!(e.kernel, KernelId::Skinny);
    assert!(e.to_string().contains("M = 6"), "{e}");
    // Zero points that cannot be packed (N % 8 != 0) are refused by the contract too.
    let mut sel = w4a16_select::select(Target::Gfx1151, &r, &DISABLE);
    sel.request.shape.n = 204;
    let e = w4a16_select::cross_check(&sel, &DeclaredContracts).unwrap_err();
    assert!(e.to_string().contains("N = 204"), "{e}");
    // A validator that refuses everything is reported with the layer.
    let sel = w4a16_select::select(Target::Sm90, &r, &DISABLE);
    let refuse = |_: &w4a16_select::PlannedLaunch| Err("no".to_owned());
    let e = w4a16_select::cross_check(&sel, &refuse).unwrap_err();
    assert_eq!(
        e.to_string(),
        "selection on sm_90 picks fused for M=6 N=256 K=1024 G=128 f16 asym, but its contract refuses the layer: no"
    );
}
