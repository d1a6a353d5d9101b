//! Case files: the real `cases/` folder loads, expands as documented and deterministically, and
//! every deliberately broken file in `cases/invalid/` is refused with an error naming the file
//! and the key. Known-bad entries and static-gate exceptions are one suppression schema: the
//! same mistake in either file is refused with the same message.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use w4a16_cases::gate_exceptions;
use w4a16_cases::{self, CarrierMode, CaseSet, DataClass, Date, Producer, RowPadding, ViewLayout};
use w4a16_reference::ActDtype;
use w4a16_reference::layer::Symmetry;

fn cases_dir() -> PathBuf {
    w4a16_cases::locate(None).expect("the cases folder")
}

fn load() -> CaseSet {
    w4a16_cases::load_all(&cases_dir()).unwrap_or_else(|e| panic!("cases/ must load: {e}"))
}

fn src(path: &str, text: &str) -> (PathBuf, String) {
    (PathBuf::from(path), text.to_owned())
}

const SHAPES: &str = r#"
[[shape]]
name = "a.k256-n64"
k = 256
n = 64
group = 128
[[shape]]
name = "a.k512-n36"
k = 512
n = 36
group = 64
"#;

#[test]
fn the_cases_folder_loads_with_every_suite() {
    let set = load();
    let names = set.suite_names();
    for expected in [
        "carrier",
        "checkpoints",
        "edges",
        "field",
        "kernels",
        "regressions",
        "selection",
        "smoke",
    ] {
        assert!(
            names.contains(&expected),
            "suite {expected} missing: {names:?}"
        );
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "suites are listed in name order");
    eprint!("{}", w4a16_cases::render_counts(&set));
    for s in set.suites() {
        if s.name != "regressions" {
            assert!(s.cases > 0, "suite {} is empty", s.name);
        }
    }
}

#[test]
fn models_toml_holds_the_spec_section_7_sizes() {
    let set = load();
    // docs/contract.md §7 as (K, N, G).
    #[rustfmt::skip]
    let spec: &[(usize, usize, usize)] = &[
        (2048, 32768, 128), (16384, 2048, 128), (2048, 2560, 128), (2048, 2048, 128),
        (38912, 2048, 128), (49152, 2048, 128), (49152, 4096, 128),
        (2560, 3840, 128), (2560, 2560, 128), (2560, 19456, 128), (9728, 2560, 128),
        (2560, 6144, 32), (4096, 2560, 32), (2560, 19456, 32), (9728, 2560, 32),
        (4096, 6144, 128), (4096, 4096, 128), (4096, 24576, 128), (12288, 4096, 128),
        (4096, 2048, 128),
        (3584, 4608, 128), (3584, 3584, 128), (3584, 37888, 128), (18944, 3584, 128),
        (8192, 512, 128), (8320, 512, 128),
        (2048, 4096, 128), (2048, 12288, 128), (6144, 2048, 128),
        (2560, 4096, 128), (2560, 20480, 128), (10240, 2560, 128),
        (5376, 43008, 32), (21504, 5376, 32), (5376, 16384, 32),
        (8192, 5376, 32), (16384, 5376, 32), (5376, 20480, 32),
    ];
    let mut listed: Vec<(usize, usize, usize)> = set
        .model_shapes()
        .map(|s| (s.shape.k, s.shape.n, s.shape.group))
        .collect();
    let mut want = spec.to_vec();
    listed.sort();
    want.sort();
    assert_eq!(listed, want);
    assert_eq!(
        set.batch_sizes(),
        &[1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    );
    let providers: HashSet<(ActDtype, Symmetry)> = set
        .providers()
        .iter()
        .map(|p| (p.dtype, p.symmetry))
        .collect();
    assert_eq!(providers.len(), 4);
}

#[test]
fn the_field_suite_is_every_shape_by_every_batch_size_by_every_provider() {
    let set = load();
    let field = set.suite("field").unwrap();
    let shapes = set.model_shapes().count();
    assert_eq!(
        field.cases.len(),
        shapes * set.batch_sizes().len() * set.providers().len()
    );
    assert!(field.cases.iter().all(|c| c.class == DataClass::Realistic
        && !c.bias
        && c.padding == RowPadding::CacheCliff));
    // Stable ids: no variant suffix, so adding an axis elsewhere cannot rename a field case.
    for c in &field.cases {
        assert_eq!(c.variant(), None, "{}", c.id);
        let model = set.shape(&c.shape_name).and_then(|s| s.model.clone());
        assert!(model.is_some(), "{}: not a docs/contract.md §7 shape", c.id);
        assert_eq!(
            c.id,
            format!(
                "field/{}/M={}/{}/{}/g{}/realistic",
                c.shape_name,
                c.m,
                c.dtype.name(),
                c.symmetry.name(),
                c.shape.group
            )
        );
    }
    let c = set
        .case("field/qwen3-8b.down_proj/M=4/bf16/asym/g128/realistic")
        .expect("the README's example id");
    assert_eq!(
        (c.shape.k, c.shape.n, c.shape.group, c.m),
        (12288, 4096, 128, 4)
    );
    let g32 = set
        .case("field/gemma4-31b.down_proj/M=1/f16/sym/g32/realistic")
        .unwrap();
    assert_eq!(g32.shape.k, 21504);
}

/// The kernel set's differential matrix: every (dtype, symmetry, G, M) on each matrix shape, exact.
#[test]
fn the_kernels_suite_covers_the_differential_matrix() {
    const MS: [usize; 12] = [1, 2, 3, 4, 5, 6, 17, 64, 255, 256, 257, 1024];
    let set = load();
    let kern = set.suite("kernels").unwrap();
    let matrix_shapes: Vec<&str> = set
        .shapes()
        .iter()
        .map(|s| s.name.as_str())
        .filter(|n| n.starts_with("kern."))
        .collect();
    assert!(matrix_shapes.len() >= 2, "{matrix_shapes:?}");
    let has = |f: &dyn Fn(&w4a16_cases::Case) -> bool| kern.cases.iter().any(f);
    for shape in &matrix_shapes {
        let s = set.shape(shape).unwrap().shape;
        assert!(
            !s.n.is_multiple_of(32),
            "{shape}: N={} is a multiple of a tile",
            s.n
        );
        for dtype in ActDtype::ALL {
            for sym in [Symmetry::Sym, Symmetry::Asym] {
                for g in [32, 64, 128] {
                    for m in MS {
                        assert!(
                            has(&|c| c.shape_name == *shape
                                && (c.dtype, c.symmetry, c.shape.group, c.m) == (dtype, sym, g, m)
                                && c.class == DataClass::Exact
                                && c.variant().is_none()),
                            "{shape} M={m} {} {} g{g}",
                            dtype.name(),
                            sym.name()
                        );
                    }
                }
            }
        }
    }
    // One step below, at and past each of skinny's declared capacities.
    assert_covers_skinny_capacity_edges(kern);
    assert!(has(&|c| set
        .shape(&c.shape_name)
        .is_some_and(|s| s.model.is_some())
        && c.m >= 256));
    for class in [DataClass::Realistic, DataClass::LargeActivation] {
        assert!(has(&|c| c.class == class), "no {} slice", class.name());
    }
    assert!(has(&|c| c.padding == RowPadding::Forced));
    assert!(kern.cases.iter().all(|c| c.is_buildable()));
    // One GPU, a few minutes with the CPU reference.
    assert!(kern.cases.len() <= 1500, "{} cases", kern.cases.len());
}

/// Every shape `skinny_capacity_edges` generates from the declared capacities, at its M, in
/// both dtypes and symmetries: the edges then move with the constants.
fn assert_covers_skinny_capacity_edges(suite: &w4a16_cases::Suite) {
    let edges = w4a16_kernels::set::skinny_capacity_edges();
    assert!(!edges.is_empty());
    for e in &edges {
        for dtype in ActDtype::ALL {
            for sym in [Symmetry::Sym, Symmetry::Asym] {
                assert!(
                    suite
                        .cases
                        .iter()
                        .any(|c| (c.m, c.shape.k, c.shape.n, c.shape.group)
                            == (e.m, e.k, e.n, e.group)
                            && (c.dtype, c.symmetry) == (dtype, sym)
                            && c.variant().is_none()),
                    "suite {}: no {} {} case for the {:?} {:?} edge {e:?} (load {} against {})",
                    suite.name,
                    dtype.name(),
                    sym.name(),
                    e.capacity,
                    e.side,
                    e.load(),
                    e.limit()
                );
            }
        }
    }
}

#[test]
fn the_edges_suite_covers_every_generated_skinny_capacity_edge() {
    let set = load();
    assert_covers_skinny_capacity_edges(set.suite("edges").unwrap());
}

#[test]
fn the_counts_table_has_a_row_per_suite_and_the_total() {
    let set = load();
    let table = w4a16_cases::render_counts(&set);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), set.suites().len() + 2, "{table}");
    assert!(lines[0].starts_with("suite") && lines[0].contains("M values"));
    for (line, s) in lines[1..].iter().zip(set.suites()) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols[0], s.name);
        assert_eq!(
            cols[1..5],
            [
                s.cases.to_string(),
                s.shapes.to_string(),
                s.batch_sizes.to_string(),
                s.providers.to_string()
            ]
        );
        assert!(line.ends_with(&s.description), "{line}");
    }
    let total: Vec<&str> = lines.last().unwrap().split_whitespace().collect();
    assert_eq!(total, ["total", &set.total_cases().to_string()]);
}

#[test]
fn ids_are_unique_and_spell_their_fields() {
    let set = load();
    let mut seen = HashSet::new();
    for c in set.cases() {
        assert!(seen.insert(c.id.clone()), "duplicate id {}", c.id);
        assert_eq!(c.id, c.make_id());
        // A MoE case's batch is its token count T.
        let batch = if c.moe.is_some() { "T" } else { "M" };
        assert!(
            c.id.starts_with(&format!("{}/{}/{batch}={}/", c.suite, c.shape_name, c.m)),
            "{}",
            c.id
        );
        if let Some(moe) = &c.moe {
            assert!(moe.top_k <= moe.experts, "{}", c.id);
            assert!(
                c.id.contains(&format!(
                    "/e{}-top{}/{}",
                    moe.experts,
                    moe.top_k,
                    moe.routing.name()
                )),
                "{}",
                c.id
            );
        }
        assert_eq!(c.shape.k % c.shape.group, 0, "{}", c.id);
    }
    assert_eq!(seen.len(), set.total_cases());
}

#[test]
fn the_moe_suite_names_every_routing_edge_case_of_issue_11() {
    let set = load();
    let moe: Vec<_> = set
        .suite("moe")
        .expect("cases/sweeps/moe.toml")
        .cases
        .iter()
        .filter_map(|c| c.moe.map(|r| (c, r)))
        .collect();
    let has = |what: &str, f: &dyn Fn(&w4a16_cases::Case, &w4a16_cases::MoeRouting) -> bool| {
        assert!(moe.iter().any(|(c, r)| f(c, r)), "no moe case with {what}");
    };
    for e in [8, 64, 128, 257] {
        has(&format!("E = {e}"), &|_, r| r.experts == e);
    }
    for k in [1, 2, 6, 8] {
        has(&format!("top_k = {k}"), &|_, r| r.top_k == k);
    }
    for kind in [
        w4a16_cases::RoutingKind::Softmax,
        w4a16_cases::RoutingKind::EmptyExperts,
        w4a16_cases::RoutingKind::AllOnOneExpert,
        w4a16_cases::RoutingKind::SameExpertTwice,
    ] {
        has(kind.name(), &|_, r| r.routing == kind);
    }
    has("experts mapped away", &|_, r| {
        r.map == w4a16_cases::MapKind::EveryOther
    });
    has("T = 1", &|c, _| c.m == 1);
    has("no routed weight", &|_, r| !r.routed_weight);
    // T·top_k not a multiple of any block size the tables use.
    has("T not a multiple of block_m", &|c, r| {
        (c.m * r.top_k) % 16 != 0
    });
    for shape in [
        "qwen3.5-35b-a3b.experts_gate_up",
        "qwen3.5-35b-a3b.experts_down",
    ] {
        has(shape, &|c, _| c.shape_name == shape);
    }
    assert!(
        set.moe_shapes()
            .iter()
            .any(|s| s.model.as_deref() == Some("qwen3.5-35b-a3b")),
        "the docs/contract.md §7 MoE model's expert layers"
    );
}

#[test]
fn loading_is_deterministic() {
    let a = load();
    let b = load();
    let ids = |s: &CaseSet| s.cases().map(|c| c.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&a), ids(&b));
    assert_eq!(a.suites(), b.suites());
}

#[test]
fn suite_counts_match_their_expansion() {
    let set = load();
    let counts = set.suites();
    let smoke = counts.iter().find(|s| s.name == "smoke").unwrap();
    // dtype(2) × G(3) × sym/asym(2) × M(4) + bias: dtype(2) × sym/asym(2) × M(2).
    assert_eq!(smoke.cases, 2 * 3 * 2 * 4 + 2 * 2 * 2);
    assert_eq!(smoke.providers, 4);
    let sel = counts.iter().find(|s| s.name == "selection").unwrap();
    // M(6)×G(5)×dtype(2)×sym(2) + M(3)×dtype(2)×sym(2) + M(3)×G(2)×sym(2) + M(2)×sym(2) + shapes(3)×M(3)×padding(3).
    assert_eq!(sel.cases, 120 + 12 + 12 + 4 + 27);
    assert_eq!(
        set.total_cases(),
        counts.iter().map(|s| s.cases).sum::<usize>()
    );
    // Every promoted regression is exactly one case.
    let entries = std::fs::read_to_string(cases_dir().join("regressions.toml"))
        .unwrap()
        .lines()
        .filter(|l| l.trim() == "[[case]]")
        .count();
    assert!(entries >= 2, "the two H200 fuzz finds are promoted");
    assert_eq!(
        counts
            .iter()
            .find(|s| s.name == "regressions")
            .unwrap()
            .cases,
        entries
    );
}

#[test]
fn producers_pair_only_with_the_symmetry_they_mean() {
    let set = load();
    let ck = set.suite("checkpoints").unwrap();
    for c in &ck.cases {
        if c.producer == Producer::LegacyUnpackedZp {
            assert_eq!(c.symmetry, Symmetry::Asym, "{}", c.id);
        }
    }
    for p in Producer::ALL {
        assert!(
            ck.cases.iter().any(|c| c.producer == p),
            "no checkpoints case for {}",
            p.name()
        );
    }
    // 2 shapes × 2 G × 2 M × 2 dtypes × (4 producers sym + 5 asym), then the strided-X /
    // offset-Y sweep: 1 shape × 1 G × 2 M × 2 dtypes × 9.
    assert_eq!(ck.cases.len(), 2 * 2 * 2 * 2 * 9 + 2 * 2 * 9);
    assert!(
        set.case("checkpoints/ckpt.k256-n128/M=6/f16/asym/g32/exact/legacy-unpacked-zp+x-odd-stride+y-offset-2b")
            .is_some()
    );
    assert!(
        set.case("checkpoints/ckpt.k256-n128/M=6/bf16/asym/g32/exact/legacy-unpacked-zp")
            .is_some()
    );
}

/// The symmetric checkpoint that still carries zero points is the GPTQ × sym case: the
/// checkpoints suite has no separate producer for it because GPTQ always writes `qzeros`.
#[test]
fn gptq_symmetric_checkpoints_carry_zero_points() {
    use w4a16_reference::data::generate;
    use w4a16_reference::formats::{GptqLayer, GptqVersion};
    let set = load();
    let c = set
        .case("checkpoints/ckpt.k256-n128/M=1/f16/sym/g32/exact/gptq-v2")
        .expect("a gptq-v2 symmetric case");
    let g = generate(&c.id, &c.data_spec()).unwrap();
    assert!(g.layer.zeros.is_none());
    for v in [GptqVersion::V1, GptqVersion::V2] {
        let ckpt = GptqLayer::from_logical(&g.layer, v).unwrap();
        assert!(
            ckpt.qzeros.is_some(),
            "{v:?}: symmetric GPTQ without qzeros"
        );
    }
}

#[test]
fn overlapping_sweeps_are_deduplicated_in_first_seen_order() {
    let set = w4a16_cases::load_sources(&[
        src("shapes.toml", SHAPES),
        src(
            "s.toml",
            r#"
[suite]
name = "t"
description = "x"
class = ["exact"]
[[sweep]]
shapes = ["a.*"]
m = [1, 6]
dtype = ["f16"]
symmetry = ["sym"]
[[sweep]]
shapes = ["a.k256-n64"]
m = [6, 256]
dtype = ["f16"]
symmetry = ["sym"]
"#,
        ),
    ])
    .unwrap();
    let ids: Vec<&str> = set
        .suite("t")
        .unwrap()
        .cases
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(
        ids,
        [
            "t/a.k256-n64/M=1/f16/sym/g128/exact",
            "t/a.k256-n64/M=6/f16/sym/g128/exact",
            "t/a.k512-n36/M=1/f16/sym/g64/exact",
            "t/a.k512-n36/M=6/f16/sym/g64/exact",
            "t/a.k256-n64/M=256/f16/sym/g128/exact",
        ]
    );
}

#[test]
fn variants_name_every_non_default_axis() {
    let set = w4a16_cases::load_sources(&[
        src("shapes.toml", SHAPES),
        src(
            "s.toml",
            r#"
[suite]
name = "v"
description = "x"
[[sweep]]
shapes = ["a.k256-n64"]
m = [2]
dtype = ["bf16"]
symmetry = ["asym"]
group = ["channelwise"]
class = ["last-row"]
padding = ["forced", "none"]
bias = [true]
producer = ["awq"]
"#,
        ),
    ])
    .unwrap();
    let ids: Vec<&str> = set.cases().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "v/a.k256-n64/M=2/bf16/asym/g256/last-row/awq+forced-pad+bias",
            "v/a.k256-n64/M=2/bf16/asym/g256/last-row/awq+unpadded+bias"
        ]
    );
}

#[test]
fn layout_axes_add_an_id_segment_only_off_the_default() {
    let set = w4a16_cases::load_sources(&[
        src("shapes.toml", SHAPES),
        src(
            "s.toml",
            r#"
[suite]
name = "v"
description = "x"
[[sweep]]
shapes = ["a.k256-n64"]
m = [2]
dtype = ["f16"]
symmetry = ["sym"]
class = ["exact"]
x_layout = ["contiguous", "odd-stride"]
y_layout = ["contiguous", "offset-2b"]
[[sweep]]
shapes = ["a.k256-n64"]
m = [3]
dtype = ["f16"]
symmetry = ["sym"]
class = ["exact"]
padding = ["forced"]
bias = [true]
x_layout = ["offset-8b"]
y_layout = ["padded"]
[[case]]
shape = "a.k256-n64"
m = 4
dtype = "bf16"
symmetry = "asym"
class = "exact"
y_layout = "odd-stride"
"#,
        ),
    ])
    .unwrap();
    let ids: Vec<&str> = set.cases().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "v/a.k256-n64/M=2/f16/sym/g128/exact",
            "v/a.k256-n64/M=2/f16/sym/g128/exact/y-offset-2b",
            "v/a.k256-n64/M=2/f16/sym/g128/exact/x-odd-stride",
            "v/a.k256-n64/M=2/f16/sym/g128/exact/x-odd-stride+y-offset-2b",
            "v/a.k256-n64/M=3/f16/sym/g128/exact/forced-pad+bias+x-offset-8b+y-padded",
            "v/a.k256-n64/M=4/bf16/asym/g128/exact/y-odd-stride",
        ]
    );
    let c = set.case(ids[3]).unwrap();
    assert_eq!(
        (c.x_layout, c.y_layout),
        (ViewLayout::OddStride, ViewLayout::Offset2b)
    );
    // The views themselves: stride and offset in elements of a row of `cols`.
    let geometry: Vec<(usize, usize)> = ViewLayout::ALL
        .iter()
        .map(|l| (l.row_stride(100), l.offset()))
        .collect();
    assert_eq!(geometry, [(100, 0), (108, 0), (103, 0), (100, 1), (104, 4)]);
}

/// The new axes reach every kernel in the differential suites, and no case id that existed
/// before them moved (their seeded data and snapshot rows stay): every id the committed
/// verdict snapshots list is still a case (a layout segment appears only on non-default views).
#[test]
fn layout_axes_cover_every_view_in_the_differential_suites_and_keep_old_ids() {
    let set = load();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../snapshots");
    for suite in ["kernels", "edges", "checkpoints"] {
        let s = set.suite(suite).unwrap();
        let strided = |c: &&w4a16_cases::Case| !c.x_layout.is_default() || !c.y_layout.is_default();
        let ids: HashSet<&str> = s.cases.iter().map(|c| c.id.as_str()).collect();
        let snap =
            std::fs::read_to_string(dir.join(format!("verdicts-{suite}@sm_90.snap"))).unwrap();
        let listed: HashSet<&str> = snap
            .lines()
            .filter_map(|l| l.split(" | ").next())
            .filter(|id| id.starts_with(&format!("{suite}/")))
            .collect();
        assert!(!listed.is_empty(), "{suite}: no rows in the snapshot");
        for id in &listed {
            assert!(ids.contains(id), "{suite}: case {id} disappeared");
        }
        assert!(s.cases.iter().filter(strided).count() > 0, "{suite}");
    }
    let kern = set.suite("kernels").unwrap();
    for layout in ViewLayout::ALL.into_iter().filter(|l| !l.is_default()) {
        // decode (skinny), fused, and M ≥ 256 (the dense threshold), for X and for Y
        for (lo, hi) in [(1, 5), (6, 255), (256, usize::MAX)] {
            for (tensor, of) in [
                (
                    "x",
                    (|c: &w4a16_cases::Case| c.x_layout) as fn(&w4a16_cases::Case) -> ViewLayout,
                ),
                ("y", |c: &w4a16_cases::Case| c.y_layout),
            ] {
                assert!(
                    kern.cases
                        .iter()
                        .any(|c| of(c) == layout && (lo..=hi).contains(&c.m)),
                    "kernels: no {tensor} {} case with M in {lo}..={hi}",
                    layout.name()
                );
            }
        }
    }
}

#[test]
fn explicit_cases_take_inline_shapes() {
    let set = w4a16_cases::load_sources(&[src(
        "r.toml",
        r#"
[suite]
name = "regressions"
description = "x"
[[case]]
k = 1088
n = 264
group = 64
m = 6
dtype = "bf16"
symmetry = "asym"
class = "exact"
padding = "forced"
bias = true
producer = "awq"
note = "proptest seed"
"#,
    )])
    .unwrap();
    let c = set.cases().next().unwrap();
    assert_eq!(
        c.id,
        "regressions/k1088-n264/M=6/bf16/asym/g64/exact/awq+forced-pad+bias"
    );
    assert_eq!((c.shape.k, c.shape.n, c.shape.group), (1088, 264, 64));
}

#[test]
fn the_loader_message_names_file_key_and_what_was_expected() {
    let err = w4a16_cases::load_sources(&[
        src("shapes.toml", SHAPES),
        src(
            "cases/sweeps/decode.toml",
            "[suite]\nname = \"decode\"\ndescription = \"x\"\nm = \"x\"\n",
        ),
    ])
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cases/sweeps/decode.toml: key \"suite.m\": expected a list of positive integers or \"batch_sizes\", got \"x\" (line 4)"
    );
}

#[test]
fn known_bad_entries_match_by_id_glob_and_target_pattern() {
    let set = w4a16_cases::load_sources(&[
        src("shapes.toml", SHAPES),
        src(
            "s.toml",
            r#"
[suite]
name = "t"
description = "x"
class = ["exact"]
[[sweep]]
shapes = ["a.k256-n64"]
m = [1, 6]
"#,
        ),
        src(
            "known_bad.toml",
            r#"
[[known_bad]]
id = "t/a.k256-n64/M=6/bf16/*/g128/exact"
target = "gfx11*"
reason = "bf16 fused tail"
tracking = "issue #3"
expires = 2026-03-31
mode = "xfail-strict"

[[known_bad]]
id = "t/**"
target = "sm_90"
reason = "everything on sm_90"
tracking = "issue #4"
expires = 2026-01-15
mode = "xfail-strict"
"#,
        ),
    ])
    .unwrap();
    let hit = set
        .known_bad_for("t/a.k256-n64/M=6/bf16/asym/g128/exact", "gfx1151")
        .expect("covered");
    assert_eq!(hit.tracking, "issue #3");
    assert_eq!(hit.key, "known_bad[0]");
    assert_eq!(hit.expires, Date::new(2026, 3, 31).unwrap());
    assert!(
        set.known_bad_for("t/a.k256-n64/M=6/bf16/asym/g128/exact", "gfx1201")
            .is_none()
    );
    assert!(
        set.known_bad_for("t/a.k256-n64/M=6/f16/asym/g128/exact", "gfx1100")
            .is_none()
    );
    assert!(
        set.known_bad_for("t/a.k256-n64/M=1/bf16/asym/g128/exact", "gfx1100")
            .is_none()
    );
    assert_eq!(
        set.known_bad_for("t/a.k256-n64/M=1/f16/sym/g128/exact", "sm_90")
            .unwrap()
            .tracking,
        "issue #4"
    );
    assert!(!hit.is_expired(Date::new(2026, 3, 31).unwrap()));
    assert!(hit.is_expired(Date::new(2026, 4, 1).unwrap()));
}

/// A generated sweep's own `shapes` picks among the generator's points by name: the edges
/// suite's strided and offset X reach every staged-X edge past its capacity (one step, and far
/// past from the streamed-X generator), and no other edge. The far-past edges are edges' alone.
#[test]
fn a_generated_sweeps_shapes_pick_among_its_points() {
    use w4a16_kernels::set::{
        EdgeSide, SkinnyCapacity, skinny_capacity_edges, skinny_streamed_x_edges,
    };
    let set = load();
    let edges = set.suite("edges").unwrap();
    let above: Vec<_> = skinny_capacity_edges()
        .into_iter()
        .chain(skinny_streamed_x_edges())
        .filter(|e| {
            e.capacity == SkinnyCapacity::StagedX
                && matches!(e.side, EdgeSide::Above | EdgeSide::FarAbove)
        })
        .collect();
    assert!(!above.is_empty());
    for e in &above {
        for layout in [ViewLayout::OddStride, ViewLayout::Offset2b] {
            assert!(
                edges.cases.iter().any(|c| (c.m, c.shape.k, c.shape.n)
                    == (e.m, e.k, e.n)
                    && c.x_layout == layout),
                "no {layout:?} X case at the staged-X edge {e:?}"
            );
        }
    }
    let strided_edges: Vec<&str> = edges
        .cases
        .iter()
        .filter(|c| c.id.contains("/skinny-edge.") && c.x_layout != ViewLayout::Contiguous)
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(
        strided_edges.len(),
        above.len() * 2 * 2,
        "{strided_edges:#?}"
    );
    assert!(
        strided_edges
            .iter()
            .all(|id| id.contains("/skinny-edge.x-above.")
                || id.contains("/skinny-edge.x-far-above.")),
        "{strided_edges:#?}"
    );
    let far_elsewhere: Vec<&str> = set
        .cases()
        .filter(|c| c.id.contains("/skinny-edge.x-far-above.") && !c.id.starts_with("edges/"))
        .map(|c| c.id.as_str())
        .collect();
    assert!(far_elsewhere.is_empty(), "{far_elsewhere:#?}");
}

#[test]
fn every_invalid_case_file_is_refused_naming_the_file_and_the_key() {
    let dir = cases_dir();
    let valid = w4a16_cases::case_files(&dir).unwrap();
    let mut invalid: Vec<PathBuf> = std::fs::read_dir(dir.join("invalid"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    invalid.sort();
    assert!(
        invalid.len() >= 8,
        "cases/invalid/ must hold at least 8 files, has {}",
        invalid.len()
    );
    for path in invalid {
        let text = std::fs::read_to_string(&path).unwrap();
        let expected_key = text
            .lines()
            .find_map(|l| l.strip_prefix("# expect-key: "))
            .unwrap_or_else(|| panic!("{} must start with `# expect-key: <key>`", path.display()))
            .trim();
        let mut files = valid.clone();
        files.push(path.clone());
        let err = match w4a16_cases::load_files(&files) {
            Ok(_) => panic!("{} was accepted", path.display()),
            Err(e) => e,
        };
        assert_eq!(err.file, path, "error names the wrong file: {err}");
        assert_eq!(err.key, expected_key, "error names the wrong key: {err}");
        let shown = err.to_string();
        eprintln!("{shown}");
        assert!(
            shown.starts_with(&format!("{}: key \"{expected_key}\": ", path.display())),
            "{shown}"
        );
        assert!(err.line.is_some(), "no line for {shown}");
        assert!(
            shown.len() > path.display().to_string().len() + expected_key.len() + 12,
            "an explanation follows: {shown}"
        );
    }
}

/// The `# expect-key:` line of a deliberately broken file, and its `# expect-message:` line
/// when it has one.
fn expectations(path: &Path, text: &str) -> (String, Option<String>) {
    let line = |prefix: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .map(|v| v.trim().to_owned())
    };
    let key = line("# expect-key: ")
        .unwrap_or_else(|| panic!("{} must start with `# expect-key: <key>`", path.display()));
    (key, line("# expect-message: "))
}

#[test]
fn every_invalid_gate_exceptions_file_is_refused_naming_the_file_and_the_key() {
    let mut invalid: Vec<PathBuf> = std::fs::read_dir(cases_dir().join("invalid/static-gates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    invalid.sort();
    assert!(
        invalid.len() >= 6,
        "cases/invalid/static-gates/ must hold at least 6 files, has {}",
        invalid.len()
    );
    for path in invalid {
        let text = std::fs::read_to_string(&path).unwrap();
        let (expected_key, expected_message) = expectations(&path, &text);
        let err = match gate_exceptions::load(&path) {
            Ok(_) => panic!("{} was accepted", path.display()),
            Err(e) => e,
        };
        assert_eq!(err.file, path, "error names the wrong file: {err}");
        assert_eq!(err.key, expected_key, "error names the wrong key: {err}");
        let shown = err.to_string();
        eprintln!("{shown}");
        assert!(
            shown.starts_with(&format!("{}: key \"{expected_key}\": ", path.display())),
            "{shown}"
        );
        assert!(err.line.is_some(), "no line for {shown}");
        if let Some(m) = expected_message {
            assert!(err.message.contains(&m), "expected {m:?} in: {shown}");
        }
    }
}

/// The committed suppression files load through the one schema, each entry naming where it
/// was written.
#[test]
fn both_suppression_files_load() {
    let set = load();
    for kb in set.known_bad() {
        assert!(kb.key.starts_with("known_bad["), "{kb:?}");
        assert!(set.cases().any(|c| kb.scope.id.matches(&c.id)), "{kb:?}");
    }
    let path = gate_exceptions::exceptions_path(&w4a16_cases::locate(None).unwrap());
    let exc = gate_exceptions::load(&path).unwrap_or_else(|e| panic!("{e}"));
    for e in &exc.exceptions {
        assert_eq!(e.file, path);
        assert!(e.key.starts_with("exception["), "{e:?}");
    }
}

/// One schema for the shared keys: the same mistake in a `[[known_bad]]` table and in an
/// `[[exception]]` table is refused at the same key with the same message.
#[test]
fn known_bad_and_gate_exceptions_share_one_schema() {
    let suite = r#"
[suite]
name = "t"
description = "x"
class = ["exact"]
[[sweep]]
shapes = ["a.k256-n64"]
m = [1]
"#;
    let shared = "target = \"gfx11*\"\nreason = \"r\"\ntracking = \"issue #0\"\nexpires = 2099-01-01\nmode = \"xfail-strict\"\n";
    let known_bad = format!("[[known_bad]]\nid = \"t/**\"\n{shared}");
    let exception = format!("[[exception]]\nkernel = \"fused\"\ngate = \"fused-wmma\"\n{shared}");
    let load_kb = |text: &str| {
        w4a16_cases::load_sources(&[
            src("shapes.toml", SHAPES),
            src("s.toml", suite),
            src("known_bad.toml", text),
        ])
    };
    let load_exc = |text: &str| gate_exceptions::parse(text, Path::new("static-gates.toml"));
    let kb = load_kb(&known_bad).unwrap_or_else(|e| panic!("{e}"));
    let exc = load_exc(&exception).unwrap_or_else(|e| panic!("{e}"));
    let (a, b) = (&kb.known_bad()[0], &exc.exceptions[0]);
    assert_eq!(
        (&a.target, &a.reason, &a.tracking, a.expires, a.mode),
        (&b.target, &b.reason, &b.tracking, b.expires, b.mode)
    );
    for (from, to, key) in [
        (
            "expires = 2099-01-01",
            "expires = \"2099-01-01\"",
            "expires",
        ),
        (
            "expires = 2099-01-01",
            "expires = 2099-01-01T00:00:00",
            "expires",
        ),
        ("tracking = \"issue #0\"", "tracking = \"\"", "tracking"),
        ("tracking = \"issue #0\"\n", "", "tracking"),
        ("reason = \"r\"", "reason = 3", "reason"),
        ("mode = \"xfail-strict\"", "mode = \"skip\"", "mode"),
        ("target = \"gfx11*\"", "target = \"gfx 11\"", "target"),
        ("target = \"gfx11*\"", "target = \"gfx10*\"", "target"),
    ] {
        let e1 = load_kb(&known_bad.replace(from, to)).unwrap_err();
        let e2 = load_exc(&exception.replace(from, to)).unwrap_err();
        assert_eq!(e1.key, format!("known_bad[0].{key}"), "{e1}");
        assert_eq!(e2.key, format!("exception[0].{key}"), "{e2}");
        if key == "target" && to.contains("gfx10") {
            // The target lists differ (every target for cases, the AMD code-object targets for
            // gates); the refusal is the same.
            for e in [&e1, &e2] {
                assert!(
                    e.message.starts_with("\"gfx10*\" matches no target ("),
                    "{e}"
                );
            }
        } else {
            assert_eq!(e1.message, e2.message, "{to}");
        }
        assert!(e1.line.is_some() && e2.line.is_some(), "{e1} / {e2}");
    }
}

#[test]
fn the_model_description_agrees_with_models_toml() {
    let set = load();
    let m = set.model("qwen3-8b").expect("cases/models/qwen3-8b.toml");
    assert_eq!(m.linears.len(), 4);
    for l in &m.linears {
        let s = set.shape(&format!("qwen3-8b.{}", l.name)).unwrap();
        assert_eq!(s.shape, l.shape);
    }
    // 2 × 36 layers × 8 KV heads × 128 × 40960 tokens × 2 bytes.
    assert_eq!(m.kv_bytes(40960), 2 * 36 * 8 * 128 * 40960 * 2);
}

#[test]
fn a_model_description_that_disagrees_is_refused() {
    let dir = std::env::temp_dir().join(format!("w4a16-cases-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("models")).unwrap();
    std::fs::copy(cases_dir().join("models.toml"), dir.join("models.toml")).unwrap();
    let text = std::fs::read_to_string(cases_dir().join("models/qwen3-8b.toml"))
        .unwrap()
        .replace("n = 4096\n", "n = 4104\n");
    std::fs::write(dir.join("models/qwen3-8b.toml"), text).unwrap();
    let err = w4a16_cases::load_all(&dir).unwrap_err();
    assert_eq!(err.file, dir.join("models/qwen3-8b.toml"));
    assert_eq!(err.key, "linear[1]");
    assert!(
        err.message.contains("disagrees with qwen3-8b.o_proj"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unsupported_layers_live_only_in_suites_that_allow_them() {
    let set = load();
    for s in ["smoke", "edges", "field", "checkpoints"] {
        for c in &set.suite(s).unwrap().cases {
            assert!(!c.act_order, "{}", c.id);
            assert!(
                c.symmetry == Symmetry::Sym || c.shape.n % 8 == 0,
                "{}",
                c.id
            );
        }
    }
    for c in set.cases() {
        // Asymmetric N % 8 != 0: compressed-tensors writes a partial last zero-point word and
        // the legacy layout packs nothing; GPTQ and AWQ cannot write it.
        let whole_words_only = !matches!(
            c.producer,
            Producer::CompressedTensors | Producer::LegacyUnpackedZp
        );
        assert_eq!(
            c.is_buildable(),
            !(c.act_order
                || c.shape.k % 16 != 0
                || (c.symmetry == Symmetry::Asym && c.shape.n % 8 != 0 && whole_words_only)),
            "{}",
            c.id
        );
        assert!(
            c.is_buildable() || set.suite(&c.suite).unwrap().allow_unsupported,
            "{}",
            c.id
        );
        let spec = c.data_spec();
        assert_eq!(
            (spec.m, spec.shape, spec.class, spec.with_bias),
            (c.m, c.shape, c.class, c.bias)
        );
    }
    let sel = set.suite("selection").unwrap();
    assert!(sel.allow_unsupported);
    assert!(
        sel.cases
            .iter()
            .any(|c| c.symmetry == Symmetry::Asym && c.shape.n % 8 != 0)
    );
    assert!(sel.cases.iter().any(|c| c.act_order));
}

/// The carrier axis: off by default and then absent from the id (every existing id, and its
/// seeded data, stays), `carrier` or `carrier-padded-scales` otherwise, in sweeps and in
/// explicit cases.
#[test]
fn the_carrier_axis_adds_an_id_segment_only_when_on() {
    let set = w4a16_cases::load_sources(&[
        src("shapes.toml", SHAPES),
        src(
            "s.toml",
            r#"
[suite]
name = "v"
description = "x"
[[sweep]]
shapes = ["a.k256-n64"]
m = [2]
dtype = ["f16"]
symmetry = ["asym"]
class = ["exact"]
carrier = ["off", "on", "padded-scales"]
[[case]]
shape = "a.k256-n64"
m = 4
dtype = "bf16"
symmetry = "sym"
class = "exact"
bias = true
carrier = "on"
"#,
        ),
    ])
    .unwrap();
    let got: Vec<(&str, CarrierMode)> = set.cases().map(|c| (c.id.as_str(), c.carrier)).collect();
    assert_eq!(
        got,
        [
            ("v/a.k256-n64/M=2/f16/asym/g128/exact", CarrierMode::Off),
            (
                "v/a.k256-n64/M=2/f16/asym/g128/exact/carrier",
                CarrierMode::On
            ),
            (
                "v/a.k256-n64/M=2/f16/asym/g128/exact/carrier-padded-scales",
                CarrierMode::PaddedScales
            ),
            (
                "v/a.k256-n64/M=4/bf16/sym/g128/exact/bias+carrier",
                CarrierMode::On
            ),
        ]
    );
    assert_eq!(CarrierMode::PaddedScales.scale_extra_elems(), 8);
    assert_eq!(CarrierMode::On.scale_extra_elems(), 0);
    // No committed suite but `carrier` turns it on.
    let set = load();
    for c in set.cases() {
        assert_eq!(c.carrier.is_on(), c.suite == "carrier", "{}", c.id);
    }
}

/// The carrier suite: both dtypes, every fast-path G, decode and prefill M, ragged N, a docs/contract.md §7
/// shape, padded scale rows for the stride trap, exact-class (bit-exact) cases, and symmetric
/// layers whose carrier launch must be refused.
#[test]
fn the_carrier_suite_covers_what_the_issue_asks() {
    let set = load();
    let s = set.suite("carrier").expect("cases/sweeps/carrier.toml");
    let asym = |c: &&w4a16_cases::Case| c.symmetry == Symmetry::Asym;
    for d in ActDtype::ALL {
        for g in [32, 64, 128] {
            for mode in [CarrierMode::On, CarrierMode::PaddedScales] {
                for (lo, hi) in [(1, 5), (64, usize::MAX)] {
                    assert!(
                        s.cases.iter().filter(asym).any(|c| c.dtype == d
                            && c.shape.group == g
                            && c.carrier == mode
                            && (lo..=hi).contains(&c.m)),
                        "no {d} asym G={g} {mode:?} case with M in {lo}..={hi}"
                    );
                }
            }
        }
        assert!(
            s.cases
                .iter()
                .any(|c| c.dtype == d && c.symmetry == Symmetry::Sym),
            "no symmetric refusal case for {d}"
        );
        assert!(
            s.cases
                .iter()
                .filter(asym)
                .any(|c| c.dtype == d && c.class == DataClass::Exact),
            "no exact-class {d} case"
        );
    }
    assert!(s.cases.iter().all(|c| c.carrier.is_on()));
    assert!(
        s.cases.iter().any(|c| !c.shape.n.is_multiple_of(64)),
        "no ragged N"
    );
    let model: HashSet<&str> = set.model_shapes().map(|m| m.name.as_str()).collect();
    assert!(
        s.cases
            .iter()
            .filter(asym)
            .any(|c| model.contains(c.shape_name.as_str())),
        "no docs/contract.md §7 shape"
    );
}

/// `is_buildable` says what the producers can really write: an asymmetric N % 8 != 0 layer of
/// the selection suite, under every producer, is buildable exactly when the producer builds it
/// and its checkpoint converts to the resident layout.
#[test]
fn buildable_asymmetric_ragged_n_is_what_the_producer_can_write() {
    use w4a16_reference::formats::{LoadTarget, RowPadding as Pad};
    let set = load();
    let base = set
        .suite("selection")
        .unwrap()
        .cases
        .iter()
        .find(|c| c.symmetry == Symmetry::Asym && c.shape.n % 8 != 0)
        .expect("an asymmetric ragged-N selection case")
        .clone();
    for p in Producer::ALL {
        let case = w4a16_cases::Case {
            producer: p,
            ..base.clone()
        };
        let spec = case.data_spec();
        let layer = w4a16_reference::data::generate_layer(1, &spec).unwrap();
        let target = LoadTarget {
            n: case.shape.n,
            k: case.shape.k,
            dtype: case.dtype,
        };
        let built = p
            .build(&layer)
            .map_err(|e| e.to_string())
            .and_then(|c| c.to_resident(&target, Pad::NONE).map_err(|e| e.to_string()));
        assert_eq!(case.is_buildable(), built.is_ok(), "{p}: {built:?}");
    }
}

/// The moe suite reaches every strictness axis from its case file: exact-class cases, X in every
/// non-default layout and C in strided and offset slices, each named in the case id.
#[test]
fn the_moe_suite_has_exact_cases_and_x_and_c_layouts() {
    let set = load();
    let moe: Vec<_> = set.cases().filter(|c| c.suite == "moe").collect();
    let exact = moe.iter().filter(|c| c.class == DataClass::Exact).count();
    assert!(exact >= 40, "{exact} exact moe cases");
    for layout in [
        ViewLayout::Padded,
        ViewLayout::OddStride,
        ViewLayout::Offset2b,
        ViewLayout::Offset8b,
    ] {
        let x = moe.iter().find(|c| c.x_layout == layout);
        let x = x.unwrap_or_else(|| panic!("no moe case with X {}", layout.name()));
        assert!(x.id.contains(&format!("x-{}", layout.name())), "{}", x.id);
        assert!(x.moe.is_some() && x.class == DataClass::Exact, "{}", x.id);
    }
    for layout in [
        ViewLayout::Padded,
        ViewLayout::OddStride,
        ViewLayout::Offset2b,
    ] {
        let y = moe.iter().find(|c| c.y_layout == layout);
        let y = y.unwrap_or_else(|| panic!("no moe case with C {}", layout.name()));
        assert!(y.id.contains(&format!("y-{}", layout.name())), "{}", y.id);
    }
}

/// `other-shapes` runs only when named (`on_request`): other models than the field's through the
/// range-edge classes and strided / offset views, two 70B-class layers, and MoE routers of
/// E {8, 64} × top_k {2, 6} up to T = 300.
#[test]
fn the_other_shapes_suite_is_on_request_and_holds_what_it_says() {
    let set = load();
    let suite = set.suite("other-shapes").expect("the other-shapes suite");
    assert!(suite.on_request);
    let others: Vec<&str> = set
        .suite_names()
        .into_iter()
        .filter(|s| set.suite(s).unwrap().on_request)
        .collect();
    assert_eq!(others, ["other-shapes"], "only it is on request");
    let cases = &suite.cases;
    let class = |name: &str| cases.iter().filter(|c| c.class.name() == name).count();
    assert!(class("saturating") > 0 && class("special-values") > 0);
    assert!(cases.iter().any(|c| !c.x_layout.is_default()));
    assert!(cases.iter().any(|c| !c.y_layout.is_default()));
    assert!(
        cases
            .iter()
            .any(|c| c.shape_name.starts_with("llama-3-70b."))
    );
    let moe: Vec<_> = cases.iter().filter_map(|c| Some((c, c.moe?))).collect();
    assert!(moe.iter().any(|(_, m)| m.experts == 64 && m.top_k == 6));
    assert!(moe.iter().any(|(_, m)| m.experts == 8 && m.top_k == 2));
    assert_eq!(moe.iter().map(|(c, _)| c.m).max(), Some(300));
    for model in ["mistral-7b", "phi-3-mini", "gemma-7b", "qwen2.5-14b"] {
        assert!(
            cases.iter().any(|c| c.shape_name.starts_with(model)),
            "{model}"
        );
    }
    eprintln!("other-shapes: {} cases ({} MoE)", cases.len(), moe.len());
}
