//! Times every legal path of every regret case on one device, as perf times the selected path:
//! `reps` device-event samples after queued warm-up, every launch on one of enough separately
//! staged copies of the inputs to span the cold footprint (no launch finds its inputs cached).
//! The fused rungs launch their own tile variant with that tile's geometry; the dense path is
//! the vendor BLAS on the layer's dense copy (dequantized once, as at load: a call pays only
//! the GEMM).

use std::ops::ControlFlow;
use w4a16_device::DeviceBench;
use w4a16_device::launch::DeviceInputs;
use w4a16_kernels::set::{decl, fused_geometry_for};
use w4a16_kernels::{Execution, KernelDecl, KernelId};

use crate::perf::key::KernelLabel;
use w4a16_select::LinearPath;

use super::{PathTime, RegretCase, RegretRow};
use crate::perf::PerfError;
use crate::perf::measure::{
    KernelLaunch, PerfCase, PerfPlan, PreparedLayer, Side, device_fault, largest_m, prepare,
    refused, time_dense, time_kernel,
};

/// Every case's row, in `cases` order: each legal path timed on `device` back to back.
pub fn measure_regret(
    device: &dyn DeviceBench,
    cases: &[RegretCase],
    plan: PerfPlan,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<RegretRow>, PerfError> {
    measure_regret_each(device, cases, plan, progress, &mut |_| {
        ControlFlow::Continue(())
    })
}

/// As [`measure_regret`], handing each row to `on_row` as soon as its case is timed, so that a
/// caller can write the report so far: a run stopped by a time limit still leaves every case
/// it finished. `on_row` returning `Break` stops before the next case (the rows so far are
/// returned).
pub fn measure_regret_each(
    device: &dyn DeviceBench,
    cases: &[RegretCase],
    plan: PerfPlan,
    progress: &mut dyn FnMut(&str),
    on_row: &mut dyn FnMut(&RegretRow) -> ControlFlow<()>,
) -> Result<Vec<RegretRow>, PerfError> {
    let plan = plan.checked()?;
    if device.execution() != Execution::Native {
        return Err(PerfError::Emulated {
            target: device.run_target(),
        });
    }
    let perf: Vec<PerfCase> = cases.iter().map(|c| c.perf.clone()).collect();
    if let Some(case) = perf.iter().find(|c| c.target != device.target()) {
        return Err(PerfError::WrongTarget {
            case: case.key.clone(),
            side: Side::Candidate,
            selected_for: case.target,
            device: device.name(),
            device_target: device.target(),
        });
    }
    let mut prepared: Option<PreparedLayer> = None;
    // The load-time dequantization of the current layer, timed once when first needed.
    let mut dequant_us: Option<f64> = None;
    let mut rows = Vec::with_capacity(cases.len());
    for (i, case) in cases.iter().enumerate() {
        let pc = &case.perf;
        let same = |p: &PreparedLayer| p.shape == pc.key.shape && p.provider == pc.key.provider;
        if !prepared.as_ref().is_some_and(same) {
            drop(prepared.take());
            dequant_us = None;
            progress(&format!(
                "data: {} {} (M up to {})",
                pc.key.shape,
                pc.key.provider,
                largest_m(&perf, pc)
            ));
            prepared = Some(prepare(&perf, pc)?);
        }
        let layer = prepared.as_mut().expect("prepared above");
        progress(&format!(
            "[{}/{}] {}: {} paths (selected {})",
            i + 1,
            cases.len(),
            pc.key,
            case.paths.len(),
            case.selected
        ));
        let mut times = Vec::with_capacity(case.paths.len());
        for candidate in &case.paths {
            let (label, samples) = time_path(device, pc, candidate.path, layer, plan)?;
            times.push(PathTime {
                candidate: *candidate,
                label,
                median_us: crate::perf::stats::median(&samples).unwrap_or(f64::NAN),
                samples_us: samples,
            });
        }
        let mut row = RegretRow::from_times(case, times)
            .map_err(|e| PerfError::Regret { error: Box::new(e) })?;
        if row
            .times
            .iter()
            .any(|t| t.candidate.path == LinearPath::DequantDense)
        {
            if dequant_us.is_none() {
                dequant_us = Some(time_dequant(device, pc, layer, plan)?);
            }
            row.dequant_once_us = dequant_us;
        }
        progress(&format!(
            "{}: regret {:.3} (selected {} {:.1} µs, best {} {:.1} µs)",
            row.key, row.regret, row.selected, row.selected_us, row.best, row.best_us
        ));
        let next = on_row(&row);
        rows.push(row);
        if next.is_break() {
            break;
        }
    }
    Ok(rows)
}

/// Median time of the dequant kernel that builds the layer's dense cache: paid once at load, not
/// per call, so it is reported beside the dense path's time instead of added to it (the field
/// asks both "how fast is a call" and "what does building the cache cost").
fn time_dequant(
    device: &dyn DeviceBench,
    case: &PerfCase,
    layer: &PreparedLayer,
    plan: PerfPlan,
) -> Result<f64, PerfError> {
    let side = Side::Candidate;
    let dq = decl(KernelId::Dequant);
    let entry = case.entry(dq);
    let dense = case.dense_spec();
    let bytes = (case.shape.n * case.shape.k) as u64 / 2 + (dense.n * dense.row_stride * 2) as u64;
    let copies = (0..PerfPlan::cold_copies(bytes))
        .map(|_| DeviceInputs::dequant(dq, &layer.layer, dense))
        .collect::<Result<Vec<_>, _>>()
        .map_err(refused(case, side, "dequant"))?;
    let t = device
        .bench_kernel_rotating(dq, &entry, &copies, plan.bench())
        .map_err(device_fault(case, side, format!("timing {entry}")))?;
    Ok(t.median_us)
}

/// The label and per-launch samples of `path` on `case`.
fn time_path(
    device: &dyn DeviceBench,
    case: &PerfCase,
    path: LinearPath,
    layer: &mut PreparedLayer,
    plan: PerfPlan,
) -> Result<(KernelLabel, Vec<f64>), PerfError> {
    let side = Side::Candidate;
    let kernel = match path {
        LinearPath::DequantDense => {
            let dq = case.entry(decl(KernelId::Dequant));
            let t = time_dense(device, side, case, layer, plan)?;
            return Ok((KernelLabel(format!("dequant:{dq}+dense:blas")), t.samples));
        }
        LinearPath::Skinny => KernelId::Skinny,
        LinearPath::Fused { .. } => KernelId::Fused,
        LinearPath::Fallback => KernelId::Fallback,
    };
    let d: &KernelDecl = decl(kernel);
    let shape = case.launch_shape();
    let (entry, geometry) = match path {
        LinearPath::Fused { tile, .. } => (
            d.variant_entry(case.dtype, tile.into()),
            fused_geometry_for(&shape, tile.into()),
        ),
        _ => (case.entry(d), (d.geometry)(&shape, case.target)),
    };
    let launch = KernelLaunch {
        decl: d,
        entry: &entry,
        geometry: Some(&geometry),
    };
    let t = time_kernel(
        device,
        Side::Candidate,
        case,
        path.kernels(),
        layer,
        plan,
        launch,
    )?;
    Ok((KernelLabel(format!("{}:{entry}", kernel.name())), t.samples))
}
