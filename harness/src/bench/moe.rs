//! The MoE benchmark: `moe_align` + `moe` on the qwen3.5-35b-a3b expert layers
//! (E = 256, top-8, G = 128) at T ∈ {1, 16, 256, 2048}, against the same work as one `fused`
//! launch per active expert on its gathered rows (the way an engine without a grouped kernel
//! runs a MoE layer). Both sides are timed on the device in one run, side by side, and read cold
//! weights: the routings rotate (each sample routes through a different seed) until the experts
//! they touch exceed the last-level cache. PyTorch has no grouped int4 GEMM (its int4 matmul
//! takes one dense weight matrix), so there is no third column: the report says so.

use serde::Serialize;
use w4a16_kernels::{KernelId, Target, set, tiles};
use w4a16_reference::ActDtype;
use w4a16_reference::data::{self, DataClass};
use w4a16_reference::formats::RowPadding;
use w4a16_reference::layer::{Activations, LayerShape, Symmetry};
use w4a16_reference::moe::{MoeLayer, MoeSpec, Routing, RoutingKind, route};

use super::{BenchError, TimeUs, dev, progress};
use std::path::Path;
use w4a16_device::launch::DeviceInputs;
use w4a16_device::tensor::{XBuffer, YSpec};
use w4a16_device::{BenchPlan, DeviceBench, MoeLaunch};

use std::process::ExitCode;
use w4a16_kernels::source::KernelSources;

/// One expert layer of the benchmark.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MoeBenchShape {
    pub name: String,
    pub shape: LayerShape,
    pub experts: usize,
    pub top_k: usize,
}

/// What the benchmark measures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MoeBenchSuite {
    pub shapes: Vec<MoeBenchShape>,
    pub tokens: Vec<usize>,
    pub dtype: ActDtype,
    pub symmetries: Vec<Symmetry>,
    /// Distinct weight bytes the rotated routings must touch (more than the H200's 60 MB L2).
    pub cold_bytes: usize,
    /// At most this many routings rotate.
    pub max_routings: usize,
}

impl MoeBenchSuite {
    /// The qwen3.5-35b-a3b experts (gate_up K=2048 N=1024, down K=512 N=2048), bf16,
    /// symmetric and asymmetric.
    pub fn qwen35_experts() -> Self {
        let qwen = |name: &str, k: usize, n: usize| MoeBenchShape {
            name: format!("qwen3.5-35b-a3b.{name}"),
            shape: LayerShape::new(n, k, 128),
            experts: 256,
            top_k: 8,
        };
        MoeBenchSuite {
            shapes: vec![
                qwen("experts_gate_up", 2048, 1024),
                qwen("experts_down", 512, 2048),
            ],
            tokens: vec![1, 16, 256, 2048],
            dtype: ActDtype::Bf16,
            symmetries: vec![Symmetry::Sym, Symmetry::Asym],
            cold_bytes: 128 << 20,
            max_routings: 16,
        }
    }
}

/// One row of the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MoeBenchRow {
    pub shape: String,
    pub symmetry: Symmetry,
    pub tokens: usize,
    pub slots: usize,
    /// Experts the first routing sends at least one slot to.
    pub active_experts: usize,
    /// How many routings the samples rotate through.
    pub routings: usize,
    /// The `moe` tile; its BM is `block_m`.
    pub tile: String,
    pub align_us: TimeUs,
    pub moe_us: TimeUs,
    /// `moe_align` then `moe`, back to back.
    pub pipeline_us: TimeUs,
    /// One `fused` launch per active expert on its gathered rows, back to back.
    pub fused_loop_us: TimeUs,
    /// `fused_loop / pipeline` (medians): above 1, the grouped kernel is faster.
    pub speedup: f64,
    /// Weight bytes of the active experts / pipeline median.
    pub weight_gb_per_s: f64,
    pub tflop_per_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MoeBenchReport {
    pub device: String,
    pub target: Target,
    pub dtype: ActDtype,
    pub rows: Vec<MoeBenchRow>,
    pub conventions: Vec<String>,
}

/// The slots of `routing` grouped by expert, in slot order.
fn slots_by_expert(routing: &Routing) -> Vec<Vec<usize>> {
    let mut by = vec![Vec::new(); routing.experts];
    for (s, &e) in routing.ids.iter().enumerate() {
        by[e as usize].push(s);
    }
    by
}

/// The X rows the slots of one expert read, gathered (what a loop of dense launches needs).
fn gathered(x: &Activations, routing: &Routing, slots: &[usize]) -> Activations {
    let mut data = Vec::with_capacity(slots.len() * x.k);
    for &s in slots {
        let t = routing.token_of(s);
        data.extend_from_slice(&x.data[t * x.row_stride..t * x.row_stride + x.k]);
    }
    Activations {
        m: slots.len(),
        k: x.k,
        row_stride: x.k,
        dtype: x.dtype,
        data,
    }
}

/// Runs the suite on `device`.
pub fn run(
    device: &dyn DeviceBench,
    suite: &MoeBenchSuite,
    plan: BenchPlan,
) -> Result<MoeBenchReport, BenchError> {
    let target = device.target();
    let mut rows = Vec::new();
    for s in &suite.shapes {
        for &symmetry in &suite.symmetries {
            let spec = MoeSpec {
                class: DataClass::Realistic,
                shape: s.shape,
                dtype: suite.dtype,
                symmetry,
                experts: s.experts,
                // Timing only: one draw for every expert (the values do not change the work),
                // each still in its own memory.
                distinguishable: false,
            };
            progress(&format!(
                "moe: {} {} × {} experts",
                s.name,
                symmetry.name(),
                s.experts
            ));
            let layer_err = |error| BenchError::MoeLayer {
                case: s.name.clone(),
                error,
            };
            let layer = MoeLayer::generate(data::case_seed(&s.name), &spec).map_err(layer_err)?;
            let stacked = layer.stack(RowPadding::NONE).map_err(layer_err)?;
            let expert_bytes = s.shape.n * s.shape.k / 2;
            for &t in &suite.tokens {
                rows.push(measure(
                    device,
                    suite,
                    s,
                    &layer,
                    &stacked,
                    &spec,
                    t,
                    expert_bytes,
                    plan,
                )?);
                let r = rows.last().expect("pushed");
                progress(&format!(
                    "moe: {} {} T={t}: pipeline {:.1} µs, fused loop {:.1} µs ({:.2}x)",
                    s.name,
                    symmetry.name(),
                    r.pipeline_us.median,
                    r.fused_loop_us.median,
                    r.speedup
                ));
            }
        }
    }
    Ok(MoeBenchReport {
        device: device.name(),
        target,
        dtype: suite.dtype,
        rows,
        conventions: vec![
            "pipeline = moe_align + moe back to back; moe and moe_align also timed alone".into(),
            "fused loop = one fused launch per active expert on its rows, gathered beforehand \
             (the gather is not timed: the baseline is favoured)"
                .into(),
            "cold weights: sample i routes with seed i mod routings; routings rotate until the \
             active experts' weights exceed 128 MiB (H200 L2: 60 MB)"
                .into(),
            "weight GB/s = active experts x N*K/2 / pipeline median; TFLOP/s = 2*T*top_k*N*K / \
             pipeline median"
                .into(),
            "torch: no grouped int4 GEMM op exists in PyTorch (torch._weight_int4pack_mm takes \
             one weight matrix), so none is measured"
                .into(),
            "time = median of per-sample device-event intervals after queued warm-up".into(),
        ],
    })
}

#[allow(clippy::too_many_arguments)] // one row's inputs
fn measure(
    device: &dyn DeviceBench,
    suite: &MoeBenchSuite,
    s: &MoeBenchShape,
    layer: &MoeLayer,
    stacked: &w4a16_reference::moe::StackedExperts,
    spec: &MoeSpec,
    tokens: usize,
    expert_bytes: usize,
    plan: BenchPlan,
) -> Result<MoeBenchRow, BenchError> {
    let case = format!("bench-moe/{}/T={tokens}", s.name);
    let seed = data::case_seed(&case);
    let x = data::generate_activations(seed, &spec.data_spec(tokens)).map_err(|error| {
        BenchError::Data {
            case: case.clone(),
            error,
        }
    })?;
    let route_n = |i: usize| {
        route(
            RoutingKind::Softmax,
            seed + i as u64,
            tokens,
            s.experts,
            s.top_k,
        )
        .map_err(|error| BenchError::Routing {
            case: case.clone(),
            error,
        })
    };
    let first = route_n(0)?;
    let active = slots_by_expert(&first)
        .iter()
        .filter(|v| !v.is_empty())
        .count();
    let routings = suite
        .cold_bytes
        .div_ceil((active * expert_bytes).max(1))
        .clamp(1, suite.max_routings);
    let mut all = vec![first];
    for i in 1..routings {
        all.push(route_n(i)?);
    }
    let tile = tiles::moe_tile(
        device.target(),
        spec.dtype,
        tokens,
        s.top_k,
        s.experts,
        s.shape.n,
        s.shape.k,
        s.shape.group,
    );
    let launches: Vec<MoeLaunch<'_>> = all
        .iter()
        .map(|r| MoeLaunch {
            x: XBuffer::as_laid_out(&x),
            weights: &stacked.weights,
            scales: &stacked.scales,
            zeros: stacked.zeros.as_deref(),
            w_row_stride_bytes: stacked.w_row_stride_bytes,
            scale_row_stride: stacked.scale_row_stride,
            topk_ids: &r.ids,
            topk_weights: Some(&r.weights),
            expert_map: None,
            tokens,
            top_k: s.top_k,
            experts: s.experts,
            experts_local: stacked.experts,
            n: s.shape.n,
            k: s.shape.k,
            group: s.shape.group,
            dtype: spec.dtype,
            tile,
            c_placement: None,
        })
        .collect();
    let copies = launches
        .iter()
        .map(MoeLaunch::validate)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| BenchError::Contract {
            during: format!("moe {} T={tokens}", s.name),
            error,
        })?;
    let timing = device
        .bench_moe(&copies, plan)
        .map_err(dev(|| format!("moe {} T={tokens}", s.name)))?;

    // The baseline: per routing, one fused launch per active expert on its gathered rows.
    let fused = set::decl(KernelId::Fused);
    let gathered_x: Vec<Vec<(usize, Activations)>> = all
        .iter()
        .map(|r| {
            slots_by_expert(r)
                .into_iter()
                .enumerate()
                .filter(|(_, slots)| !slots.is_empty())
                .map(|(e, slots)| (e, gathered(&x, r, &slots)))
                .collect()
        })
        .collect();
    let groups = gathered_x
        .iter()
        .map(|per_expert| {
            per_expert
                .iter()
                .map(|(e, xe)| {
                    DeviceInputs::gemm(
                        fused,
                        &layer.experts[*e],
                        xe,
                        YSpec::dense(xe.m, s.shape.n, spec.dtype),
                    )
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| BenchError::Contract {
            during: format!("fused loop {} T={tokens}", s.name),
            error,
        })?;
    let fused_loop = device
        .bench_sequence(fused, &groups, plan)
        .map_err(dev(|| format!("fused loop {} T={tokens}", s.name)))?;

    let slots = tokens * s.top_k;
    let pipeline = timing.pipeline.median_us;
    Ok(MoeBenchRow {
        shape: s.name.clone(),
        symmetry: spec.symmetry,
        tokens,
        slots,
        active_experts: active,
        routings,
        tile: format!("{}x{}x{}w{}", tile.bm, tile.bn, tile.bk, tile.warps),
        align_us: (&timing.align).into(),
        moe_us: (&timing.gemm).into(),
        pipeline_us: (&timing.pipeline).into(),
        fused_loop_us: (&fused_loop).into(),
        speedup: fused_loop.median_us / pipeline,
        weight_gb_per_s: (active * expert_bytes) as f64 / pipeline / 1e3,
        tflop_per_s: super::tflop_per_s(slots, s.shape.n, s.shape.k, pipeline),
    })
}

/// The report as a markdown table.
pub fn render(r: &MoeBenchReport) -> String {
    let mut out = format!(
        "MoE benchmark on {} ({}), {}\n\n| layer | sym | T | slots | active experts | tile | moe_align µs | moe µs | align+moe µs | fused loop µs | speedup | weight GB/s | TFLOP/s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        r.device,
        r.target,
        r.dtype.name()
    );
    for row in &r.rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2}x | {:.0} | {:.1} |\n",
            row.shape,
            row.symmetry.name(),
            row.tokens,
            row.slots,
            row.active_experts,
            row.tile,
            row.align_us.median,
            row.moe_us.median,
            row.pipeline_us.median,
            row.fused_loop_us.median,
            row.speedup,
            row.weight_gb_per_s,
            row.tflop_per_s
        ));
    }
    out.push('\n');
    for c in &r.conventions {
        out.push_str(&format!("- {c}\n"));
    }
    out
}

/// `w4a16 bench --moe [--json FILE]`: the suite on the first device, a table on stdout. Without
/// a device, a loud skip (a failure under `W4A16_REQUIRE=gpu`).
pub fn cli(json: Option<&Path>, sources: &KernelSources) -> ExitCode {
    let device = match super::device_or_exit(sources) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let report = match run(
        device.as_ref(),
        &MoeBenchSuite::qwen35_experts(),
        super::CLI_PLAN,
    ) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bench --moe failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    print!("{}", render(&report));
    if let Some(path) = json {
        let text = crate::report::json::pretty_line(&report, "a MoE bench report");
        if let Err(e) = crate::report::write_atomic(path, text.as_bytes()) {
            eprintln!("bench --moe: writing {}: {}", path.display(), e.source);
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
