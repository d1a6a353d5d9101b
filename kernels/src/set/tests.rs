//! The kernel set's declarations checked against each other, the tiles and the sources.

use super::args::{int, ptr};
use super::*;
use crate::decl::{ArgDecl, ArgKind, LaunchShape, RoutedDims, ScalarArg, TensorRole};
use crate::target::Target;
use w4a16_reference::{BiasStage, NumericRecipe};

/// Every declared `skinny` capacity has a generated shape one step below, at and one step
/// past its edge, and each is a shape skinny's contract takes (apart from M past its cap).
#[test]
fn the_skinny_edge_shapes_straddle_every_declared_capacity() {
    let edges = skinny_capacity_edges();
    let caps = [
        SkinnyCapacity::Rows,
        SkinnyCapacity::StagedX,
        SkinnyCapacity::StagedScales,
    ];
    for cap in caps {
        for side in [EdgeSide::Below, EdgeSide::At, EdgeSide::Above] {
            assert!(
                edges.iter().any(|e| (e.capacity, e.side) == (cap, side)),
                "{cap:?}: no shape {side:?} the edge"
            );
        }
    }
    let ms: Vec<usize> = edges
        .iter()
        .filter(|e| e.capacity == SkinnyCapacity::StagedX)
        .map(|e| e.m)
        .collect();
    assert!((1..=SKINNY_M_MAX).all(|m| ms.contains(&m)), "{ms:?}");
    assert!(edges.iter().all(|e| e.side != EdgeSide::FarAbove));
    let far: Vec<usize> = skinny_streamed_x_edges().iter().map(|e| e.m).collect();
    assert_eq!(far, (1..=SKINNY_M_MAX).collect::<Vec<_>>());
    // Each scale edge also with a last row tile half past N.
    for side in [EdgeSide::Below, EdgeSide::At, EdgeSide::Above] {
        assert!(
            edges.iter().any(
                |e| (e.capacity, e.side) == (SkinnyCapacity::StagedScales, side) && e.n % 16 == 8
            ),
            "no ragged scale edge {side:?}"
        );
    }
    for e in edges.iter().chain(&skinny_streamed_x_edges()) {
        // One step: a row of M, a group of K.
        let unit = match e.capacity {
            SkinnyCapacity::Rows => 1,
            SkinnyCapacity::StagedX => e.m * e.group,
            SkinnyCapacity::StagedScales => 16,
        };
        let (load, limit) = (e.load(), e.limit());
        match e.side {
            EdgeSide::Below => assert!(load + unit <= limit, "{e:?}"),
            EdgeSide::At => assert!(load <= limit && load + unit > limit, "{e:?}"),
            EdgeSide::Above => assert!(load > limit && load - unit <= limit, "{e:?}"),
            EdgeSide::FarAbove => {
                assert_eq!(e.capacity, SkinnyCapacity::StagedX, "{e:?}");
                // Past the stage by a span for each K-split warp of the row tile, and one more.
                let staged = SKINNY_X_CAPACITY / e.m / e.group * e.group;
                let k_splits = SKINNY_THREADS as usize
                    / 32
                    / skinny_row_tiles(e.n, e.k, e.group, Target::Gfx1151) as usize;
                assert!(e.k - staged > k_splits * SKINNY_SPAN, "{e:?}");
            }
        }
        assert!(FAST_GROUPS.contains(&e.group), "{e:?}");
        assert_eq!(e.k % SKINNY.contract.k_multiple, 0, "{e:?}");
        assert_eq!(e.k % e.group, 0, "{e:?}");
        assert_eq!(e.n % 8, 0, "{e:?}");
        if e.capacity == SkinnyCapacity::StagedScales {
            assert!(e.n == SKINNY_EDGE_N || e.n == RAGGED_ROW_TILE_N, "{e:?}");
            for t in Target::ALL {
                assert_eq!(skinny_row_tiles(e.n, e.k, e.group, t), 1, "{e:?} on {t:?}");
            }
        }
    }
}

#[test]
fn the_table_is_complete_and_named_by_entry_name() {
    for (id, d) in KernelId::ALL.into_iter().zip(all()) {
        assert_eq!(d.id, id);
        assert_eq!(decl(id).id, id);
        assert_eq!(d.source_file.is_some(), source::WITH_SOURCE.contains(&id));
        for dtype in ActDtype::ALL {
            assert_eq!((d.entry_point)(dtype), entry_name(id, dtype));
        }
    }
}

/// Every entry point names its kernel and dtype, the underscores of `moe_align` and
/// `fused_carrier` included.
#[test]
fn entries_name_their_kernel() {
    for d in all() {
        for dtype in ActDtype::ALL {
            for e in d.entries(dtype) {
                let (k, dt, _) = KernelId::split_entry(&e).unwrap();
                assert_eq!((k, dt), (d.id, dtype), "{e}");
            }
        }
    }
    assert_eq!(
        KernelId::split_entry("w4a16_moe_align_f16"),
        Some((KernelId::MoeAlign, ActDtype::F16, None))
    );
    assert_eq!(
        KernelId::split_entry("w4a16_moe_bf16_16x64x32w4"),
        Some((KernelId::Moe, ActDtype::Bf16, Some("16x64x32w4")))
    );
    assert_eq!(KernelId::split_entry("w4a16_fused"), None);
    assert_eq!(KernelId::split_entry("w4a16_probe_f16"), None);
}

/// One parameter of a HIP entry point, as written in the source.
#[derive(Debug)]
struct HipParam {
    name: String,
    pointer: bool,
    constant: bool,
}

/// The parameter list of `W4_<KERNEL>_ENTRY`'s `void NAME(...)` and the entry names the
/// source instantiates, read from the source text (no toolchain needed).
fn hip_entries(src: &str, kernel: KernelId) -> (Vec<HipParam>, Vec<String>) {
    let mac = format!("W4_{}_ENTRY(", kernel.name().to_uppercase());
    let def_at = src
        .find(&format!("#define {mac}"))
        .unwrap_or_else(|| panic!("no #define {mac}"));
    let body: String = src[def_at..]
        .lines()
        .take_while(|l| l.trim_end().ends_with('\\'))
        .collect::<Vec<_>>()
        .join(" ");
    let body = body.replace('\\', " ");
    let open = body.find("void NAME(").expect("void NAME(") + "void NAME(".len();
    let close = open + body[open..].find(')').unwrap();
    let params = body[open..close]
        .split(',')
        .map(|p| {
            let p = p.trim();
            let name = p.rsplit([' ', '*']).next().unwrap().to_owned();
            HipParam {
                name,
                pointer: p.contains('*'),
                constant: p.starts_with("const "),
            }
        })
        .collect();
    let names = src
        .lines()
        .filter(|l| l.starts_with(&mac))
        .map(|l| l[mac.len()..].split(',').next().unwrap().trim().to_owned())
        .collect();
    (params, names)
}

#[test]
fn hip_parameter_lists_follow_the_declared_abi() {
    for d in all() {
        let Some(src) = source::source(d.id) else {
            continue;
        };
        let (params, names) = hip_entries(src, d.id);
        assert_eq!(params.len(), d.args.len(), "{}: {params:?}", d.id);
        for (p, a) in params.iter().zip(d.args) {
            assert_eq!(p.name, a.name, "{}", d.id);
            match a.kind {
                ArgKind::Pointer { writes, .. } => {
                    assert!(p.pointer, "{}: {} must be a pointer", d.id, a.name);
                    assert_eq!(p.constant, !writes, "{}: {} constness", d.id, a.name);
                }
                ArgKind::I32(_) => assert!(!p.pointer, "{}: {} must be an int", d.id, a.name),
            }
        }
        let mut want: Vec<String> = ActDtype::ALL
            .into_iter()
            .flat_map(|t| d.entries(t))
            .collect();
        let mut got = names.clone();
        want.sort();
        got.sort();
        assert_eq!(got, want, "{}: entry points", d.id);
    }
}

fn shape(m: usize, n: usize, k: usize, group: usize) -> LaunchShape {
    LaunchShape {
        m,
        n,
        k,
        group,
        dtype: ActDtype::F16,
        asymmetric: true,
        routing: None,
    }
}

#[test]
fn skinny_blocks_are_eight_warps_covering_n() {
    for target in Target::ALL {
        for n in [8usize, 16, 200, 2048, 14336, 151936] {
            let g = (SKINNY.geometry)(&shape(3, n, 4096, 128), target);
            assert_eq!(g.block[0] * g.block[1], SKINNY_THREADS);
            assert_eq!(g.block[0] % 32, 0);
            let rows = 16 * g.block[1] as usize;
            assert!(
                g.grid[0] as usize * rows >= n && (g.grid[0] as usize - 1) * rows < n,
                "{target} n={n}"
            );
        }
    }
    assert_eq!(skinny_row_tiles(14336, 4096, 128, Target::Sm90), 4);
    assert_eq!(skinny_row_tiles(14336, 4096, 32, Target::Sm90), 2);
    assert_eq!(skinny_row_tiles(2048, 4096, 128, Target::Sm90), 1);
    // K so long that even one row tile's scales overflow the stage: still fill the device.
    assert_eq!(skinny_row_tiles(14336, 131072, 32, Target::Sm90), 4);
}

#[test]
fn fused_launches_the_variant_its_geometry_is_for() {
    for target in Target::ALL {
        for (m, n) in [(6usize, 256usize), (64, 4096), (2048, 14336), (257, 200)] {
            let s = shape(m, n, 4096, 64);
            let tile = tiles::fused_tile(target, s.dtype, m, n, 4096, 64);
            let g = (FUSED.geometry)(&s, target);
            assert_eq!(g.block, [tile.warps * 32, 1, 1]);
            assert_eq!(
                g.grid,
                [
                    n.div_ceil(tile.bn as usize) as u32,
                    m.div_ceil(tile.bm as usize) as u32,
                    1
                ]
            );
            let entry = FUSED.launch_entry(&s, target);
            assert!(FUSED.entries(s.dtype).contains(&entry), "{entry}");
            assert!(
                entry.ends_with(&format!(
                    "{}x{}x{}w{}",
                    tile.bm, tile.bn, tile.bk, tile.warps
                )),
                "{entry}"
            );
        }
    }
    assert_eq!(
        SKINNY.launch_entry(&shape(1, 64, 256, 32), Target::Sm90),
        "w4a16_skinny_f16"
    );
}

#[test]
fn other_geometries_cover_their_outputs() {
    let s = shape(17, 1000, 4096, 128);
    let g = (DEQUANT.geometry)(&s, Target::Gfx1151);
    assert_eq!((g.grid[0], g.grid[1] * g.block[0]), (1000, 512));
    // fallback: a thread per column and FALLBACK_ROWS rows; 17 rows take three row blocks.
    let g = (FALLBACK.geometry)(&s, Target::Sm90);
    assert_eq!(g.grid[0] * g.block[0], 3 * 1024);
    assert!(g.grid[0] * g.block[0] * FALLBACK_ROWS >= 17 * 1000);
}

/// The value of `#define NAME value` in a source.
fn define(src: &str, name: &str) -> usize {
    let prefix = format!("#define {name} ");
    let line = src
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {prefix}"));
    line[prefix.len()..].trim().parse().unwrap()
}

#[test]
fn skinny_capacities_match_the_source() {
    let src = source::SKINNY_HIP;
    assert_eq!(define(src, "SK_XCAP"), SKINNY_X_CAPACITY);
    assert_eq!(define(src, "SK_SCAP"), SKINNY_SCALE_CAPACITY);
    assert_eq!(define(src, "SK_ZCAP") * 8, SKINNY_SCALE_CAPACITY);
    assert_eq!(define(src, "SK_THREADS"), SKINNY_THREADS as usize);
    assert_eq!(define(src, "SK_MMAX"), SKINNY_M_MAX);
    assert_eq!(define(src, "SK_WST"), SKINNY_WEIGHT_STAGES);
    assert_eq!(define(src, "SK_WROW"), SKINNY_STAGE_ROW_BYTES);
    assert_eq!(define(src, "SK_SPAN"), SKINNY_SPAN);
    assert_eq!(
        define(source::DEQUANT_HIP, "DQ_THREADS"),
        DEQUANT_THREADS as usize
    );
    assert_eq!(
        define(source::FALLBACK_HIP, "FB_THREADS"),
        FALLBACK_THREADS as usize
    );
    assert_eq!(
        define(source::FALLBACK_HIP, "FB_ROWS"),
        FALLBACK_ROWS as usize
    );
    assert_eq!(
        define(source::MOE_ALIGN_HIP, "MA_THREADS"),
        MOE_ALIGN_THREADS as usize
    );
    assert_eq!(
        define(source::MOE_ALIGN_HIP, "MA_WINDOW"),
        MOE_ALIGN_EXPERT_WINDOW
    );
}

fn routed(m: usize, n: usize, top_k: usize, experts: usize) -> LaunchShape {
    LaunchShape {
        routing: Some(RoutedDims { top_k, experts }),
        ..shape(m, n, 2048, 128)
    }
}

#[test]
fn moe_launches_the_variant_its_geometry_is_for() {
    for target in Target::ALL {
        for (m, n, top_k, experts) in [
            (1usize, 1024usize, 8usize, 256usize),
            (16, 2048, 8, 257),
            (2048, 1024, 8, 256),
            (8192, 4096, 2, 8),
            (3, 200, 1, 64),
        ] {
            let s = routed(m, n, top_k, experts);
            let tile = tiles::moe_tile(target, s.dtype, m, top_k, experts, n, s.k, s.group);
            let g = (MOE.geometry)(&s, target);
            assert_eq!(g, moe_geometry_for(&s, tile));
            assert_eq!(g.block, [tile.warps * 32, 1, 1]);
            let cap = moe_align_capacity(m * top_k, experts, tile.bm as usize).unwrap();
            assert_eq!(
                g.grid,
                [n.div_ceil(tile.bn as usize) as u32, cap.blocks as u32, 1]
            );
            let entry = MOE.launch_entry(&s, target);
            assert!(MOE.entries(s.dtype).contains(&entry), "{entry}");
            assert_eq!(entry, MOE.variant_entry(s.dtype, tile));
        }
    }
    let g = (MOE_ALIGN.geometry)(&routed(5, 64, 2, 8), Target::Gfx1100);
    assert_eq!((g.grid, g.block), ([1, 1, 1], [MOE_ALIGN_THREADS, 1, 1]));
    assert_eq!(
        MOE_ALIGN.launch_entry(&routed(5, 64, 2, 8), Target::Sm90),
        "w4a16_moe_align_f16"
    );
}

/// The capacity holds the worst case: every expert's run padded by block_m − 1.
#[test]
fn moe_align_capacity_holds_every_padded_run() {
    let c = moe_align_capacity(8, 257, 16).unwrap();
    assert_eq!(c.blocks, (8 + 257 * 15_usize).div_ceil(16));
    assert_eq!(c.sorted, c.blocks * 16);
    // One slot on each of E experts: E blocks, each one slot and block_m − 1 sentinels.
    for (experts, bm) in [(8usize, 16usize), (64, 32), (257, 64)] {
        let c = moe_align_capacity(experts, experts, bm).unwrap();
        assert_eq!(c.blocks, experts);
    }
    // 100 slots on one expert take 2 blocks; the bound (the plan's formula) allows 3.
    let c = moe_align_capacity(100, 1, 64).unwrap();
    assert_eq!((c.blocks, c.sorted), (3, 192));
    assert_eq!(moe_align_capacity(1, 1, 0), None);
    assert_eq!(moe_align_capacity(usize::MAX, 2, 16), None);
}

#[test]
fn recipes_say_where_each_kernel_rounds() {
    for dtype in ActDtype::ALL {
        assert_eq!(
            (SKINNY.recipe)(dtype),
            NumericRecipe::fp32_exact_weights(dtype)
        );
        assert_eq!(
            (FALLBACK.recipe)(dtype),
            NumericRecipe::fp32_exact_weights(dtype)
        );
        let f = (FUSED.recipe)(dtype);
        assert!(f.rounds_dequantized_weight && f.bias == BiasStage::AfterCast && f.output == dtype);
        assert!((DEQUANT.recipe)(dtype).single_rounding);
        assert!((DENSE.recipe)(dtype).rounds_dequantized_weight);
        assert!(
            [&SKINNY, &FUSED, &DEQUANT, &DENSE, &FALLBACK]
                .iter()
                .all(|d| !(d.recipe)(dtype).pre_rounded_bias)
        );
        // The carrier: fused's recipe, plus the pre-rounded bias where the carrier holds one.
        let c = (FUSED_CARRIER.recipe)(dtype);
        assert_eq!(c.pre_rounded_bias, dtype == ActDtype::F16);
        assert_eq!(
            NumericRecipe {
                pre_rounded_bias: false,
                ..c
            },
            f
        );
    }
}

/// fused_carrier is fused with the carrier in place of scales and zero points: the same
/// tiles, geometry and contract, and its argument list is GEMM_ARGS with `scales`, `zeros`
/// and `scale_row_stride` replaced by `carrier` and `carrier_row_stride`.
#[test]
fn fused_carrier_is_fused_reading_the_carrier() {
    assert_eq!(FUSED_CARRIER.contract, FUSED.contract);
    assert_eq!(FUSED_CARRIER.variants, FUSED.variants);
    let s = shape(33, 200, 1024, 64);
    for target in Target::ALL {
        assert_eq!(
            (FUSED_CARRIER.geometry)(&s, target),
            (FUSED.geometry)(&s, target)
        );
        assert_eq!(
            FUSED_CARRIER.launch_entry(&s, target),
            FUSED
                .launch_entry(&s, target)
                .replace("w4a16_fused_", "w4a16_fused_carrier_")
        );
    }
    let expect: Vec<ArgDecl> = GEMM_ARGS
        .iter()
        .filter_map(|a| match a.name {
            "scales" => Some(ptr("carrier", TensorRole::Carrier)),
            "zeros" => None,
            "scale_row_stride" => Some(int("carrier_row_stride", ScalarArg::CarrierRowStride)),
            _ => Some(*a),
        })
        .collect();
    assert_eq!(FUSED_CARRIER.args, expect.as_slice());
    assert_eq!(
        KernelId::split_entry("w4a16_fused_carrier_bf16_64x64x32w4"),
        Some((KernelId::FusedCarrier, ActDtype::Bf16, Some("64x64x32w4")))
    );
    assert_eq!(
        KernelId::split_entry("w4a16_fused_f16"),
        Some((KernelId::Fused, ActDtype::F16, None))
    );
    assert_eq!(KernelId::split_entry("w4a16_fused_carrier"), None);
    assert_eq!(KernelId::split_entry("w4a16_nope_f16"), None);
}

#[test]
fn row_layout_rules_exist_exactly_for_x_and_y_arguments() {
    for d in all() {
        let has = |role| {
            d.args
                .iter()
                .any(|a| matches!(a.kind, ArgKind::Pointer { role: r, .. } if r == role))
        };
        assert_eq!(d.contract.x_rows.is_some(), has(TensorRole::X), "{}", d.id);
        assert_eq!(d.contract.y_rows.is_some(), has(TensorRole::Y), "{}", d.id);
        for rule in [d.contract.x_rows, d.contract.y_rows].into_iter().flatten() {
            assert!(rule.row_stride_multiple >= 1 && rule.base_align_bytes >= 2);
            assert!(rule.base_align_bytes.is_power_of_two(), "{}", d.id);
        }
    }
}

/// The element-aligned X rules of skinny and fused hold because their vector paths are
/// chosen at run time from the base address *and* the row stride; a source that drops
/// either test must declare the alignment its vectors need instead.
#[test]
fn element_aligned_x_rules_rest_on_run_time_checks_in_the_sources() {
    let checks: [(&str, &[&str]); 3] = [
        (
            source::SKINNY_HIP,
            &[
                "a.x_vec16 = (xaddr & 15u) == 0 && (x_row_stride & 7) == 0;",
                "a.x_vec8 = (xaddr & 7u) == 0 && (x_row_stride & 3) == 0;",
            ],
        ),
        (
            source::FUSED_HIP,
            &["a.x_vec = (((u64)(const void*)x) & 15u) == 0 && (x_row_stride & 7) == 0;"],
        ),
        (
            source::MOE_HIP,
            &["a.x_vec = (((u64)(const void*)x) & 15u) == 0 && (x_row_stride & 7) == 0;"],
        ),
    ];
    assert_eq!(SKINNY.contract.x_rows, Some(RowLayoutRule::ELEMENT));
    assert_eq!(FUSED.contract.x_rows, Some(RowLayoutRule::ELEMENT));
    assert_eq!(MOE.contract.x_rows, Some(RowLayoutRule::ELEMENT));
    for (src, lines) in checks {
        for l in lines {
            assert!(src.contains(l), "source no longer checks: {l}");
        }
    }
}

#[test]
fn contracts_match_the_kernels() {
    assert_eq!(SKINNY.contract.m_max, Some(5));
    assert_eq!(SKINNY.contract.groups, GroupRule::OneOf(&[32, 64, 128]));
    assert_eq!(FUSED.contract.groups, GroupRule::OneOf(&[32, 64, 128]));
    assert_eq!(FALLBACK.contract.groups, GroupRule::AnyDividingK);
    // Every fused tile's K step fits inside every group the contract admits.
    let GroupRule::OneOf(gs) = FUSED.contract.groups else {
        unreachable!()
    };
    for g in gs {
        assert!(
            tiles::FUSED_VARIANTS
                .iter()
                .all(|t| t.bk as usize <= *g && *g % t.bk as usize == 0)
        );
    }
    assert!(SKINNY.variants.is_empty() && SKINNY.tile.is_none());
    // moe reads what fused reads, per expert: the same contract, every tile within every G.
    assert_eq!(MOE.contract, FUSED.contract);
    for g in gs {
        assert!(
            tiles::MOE_VARIANTS
                .iter()
                .all(|t| t.bk as usize <= *g && *g % t.bk as usize == 0)
        );
    }
    assert!(MOE_ALIGN.contract.x_rows.is_none() && MOE_ALIGN.contract.y_rows.is_none());
    for dtype in ActDtype::ALL {
        assert_eq!((MOE.recipe)(dtype), (FUSED.recipe)(dtype));
    }
}

/// What a row layout rule admits, as launch validation decides it: ELEMENT takes every layout of
/// 2-byte elements; a 16-byte rule refuses an odd stride (more than one row) and an unaligned base.
#[test]
fn row_layout_rules_admit_what_validation_takes() {
    let e = RowLayoutRule::ELEMENT;
    for (rows, stride, offset) in [(4, 64, 0), (4, 67, 0), (4, 64, 1), (4, 68, 4), (1, 3, 1)] {
        assert!(e.admits(rows, stride, offset), "{rows} {stride} {offset}");
    }
    let vec16 = RowLayoutRule {
        row_stride_multiple: 8,
        base_align_bytes: 16,
    };
    assert!(vec16.admits(4, 72, 0) && vec16.admits(4, 64, 8));
    assert!(!vec16.admits(4, 67, 0), "odd stride");
    assert!(vec16.admits(1, 67, 0), "one row has no stride");
    assert!(
        !vec16.admits(4, 64, 1) && !vec16.admits(4, 68, 4),
        "base 2 and 8 bytes"
    );
}
