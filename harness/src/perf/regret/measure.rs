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
use crate::perf::counters::count_kernel;
use crate::perf::measure::{
    KernelLaunch, PerfCase, PerfPlan, PreparedLayer, Side, device_fault, largest_m, prepare,
    refused, time_dense, time_kernel,
};

/// Where regret mode's times come from.
#[derive(Clone, Copy)]
pub enum Clock<'d> {
    /// Device events on the target's GPU: `plan`'s launches per path, cold inputs.
    Events {
        device: &'d dyn DeviceBench,
        plan: PerfPlan,
    },
    /// One launch per path counted on the ISA emulator, its time the target's declared
    /// machine's (emu's `machine`): a model, never mixed with measurements. The dense path has
    /// none (cases leave it out first: [`RegretCase::leave_out_unmodelled`]).
    Model { device: &'d dyn DeviceBench },
}

impl Clock<'_> {
    fn device(&self) -> &dyn DeviceBench {
        match *self {
            Clock::Events { device, .. } | Clock::Model { device } => device,
        }
    }
}

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
    regret_each(Clock::Events { device, plan }, cases, progress, on_row)
}

/// The rows of `cases` with every path's time from `clock`, each handed to `on_row` as it is
/// made (`Break` stops before the next case).
pub fn regret_each(
    clock: Clock<'_>,
    cases: &[RegretCase],
    progress: &mut dyn FnMut(&str),
    on_row: &mut dyn FnMut(&RegretRow) -> ControlFlow<()>,
) -> Result<Vec<RegretRow>, PerfError> {
    let device = clock.device();
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
            let (label, samples) = time_path(clock, pc, candidate.path, layer)?;
            times.push(PathTime {
                candidate: *candidate,
                label,
                median_us: crate::perf::stats::median(&samples).unwrap_or(f64::NAN),
                samples_us: samples,
            });
        }
        let mut row = RegretRow::from_times(case, times)
            .map_err(|e| PerfError::Regret { error: Box::new(e) })?;
        if let Clock::Events { device, plan } = clock
            && row
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

/// The label and per-launch samples of `path` on `case` (one model time under
/// [`Clock::Model`]).
fn time_path(
    clock: Clock<'_>,
    case: &PerfCase,
    path: LinearPath,
    layer: &mut PreparedLayer,
) -> Result<(KernelLabel, Vec<f64>), PerfError> {
    let side = Side::Candidate;
    let kernel = match (path, clock) {
        (LinearPath::DequantDense, Clock::Events { device, plan }) => {
            let dq = case.entry(decl(KernelId::Dequant));
            let t = time_dense(device, side, case, layer, plan)?;
            return Ok((KernelLabel(format!("dequant:{dq}+dense:blas")), t.samples));
        }
        (LinearPath::DequantDense, Clock::Model { .. }) => {
            return Err(PerfError::Path {
                case: case.key.clone(),
                path: format!("{path} (no model time; left out before counting)"),
            });
        }
        (LinearPath::Skinny, _) => KernelId::Skinny,
        (LinearPath::Fused { .. }, _) => KernelId::Fused,
        (LinearPath::Fallback, _) => KernelId::Fallback,
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
    let label = KernelLabel(format!("{}:{entry}", kernel.name()));
    let samples = match clock {
        Clock::Events { device, plan } => {
            time_kernel(device, side, case, path.kernels(), layer, plan, launch)?.samples
        }
        Clock::Model { device } => {
            vec![count_kernel(device, case, path.kernels(), layer, launch)?]
        }
    };
    Ok((label, samples))
}
