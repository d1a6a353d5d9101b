//! Perf on the ISA emulator: where the target's GPU is not here, `w4a16 perf --target gfxNNNN`
//! runs each perf case's selected path once on the emulator within a MAC budget and judges its
//! deterministic counters (emu's `counters`, named as rocprof names them) **exactly** against
//! `perf/<target>.counters.json`: no band, no noise. A model time from the declared machine
//! (emu's `machine`) is reported beside them, labelled as a model; it is never judged.
//!
//! Pipeline: [`count_suite`] (one launch per case and side) → [`judge`] (against [`golden`]) →
//! [`report`] and, only on request, [`golden::update`].

pub mod golden;
pub mod judge;
pub mod report;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use w4a16_device::launch::DeviceInputs;
use w4a16_device::tensor::{XBuffer, YSpec};
use w4a16_device::{DeviceBench, DeviceKind};
use w4a16_emu::counters::Counters;
use w4a16_emu::machine::Machine;
use w4a16_kernels::KernelId;
use w4a16_kernels::set::decl;

use super::key::{KernelLabel, PerfKey};
use super::measure::{
    KernelLaunch, PerfCase, PerfError, PreparedLayer, Side, device_fault, largest_m, prepare,
    refused, x_on_path,
};

/// Default MAC budget of a counted case (M·N·K): 2^27 takes 12 of qwen3-8b's 56 keys per
/// provider (o_proj up to M = 8, the first fused one; qkv_proj up to 4; down_proj up to 2;
/// gate_up_proj at 1), 48 of 224 cases; a target's run takes about 1.5 min of one core
/// (bench/perf-counters.md).
pub const DEFAULT_MAX_MACS: u64 = 1 << 27;

/// The counters of one launch, by their names (`SQ_WAVES`, …; emu's `Counters::entries`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchCount {
    pub entry: String,
    pub counters: BTreeMap<String, u64>,
}

impl LaunchCount {
    pub fn of(entry: &str, c: &Counters) -> LaunchCount {
        LaunchCount {
            entry: entry.to_string(),
            counters: c
                .entries()
                .iter()
                .map(|(n, v)| (n.to_string(), *v))
                .collect(),
        }
    }

    /// The counters back as emu's struct (names it does not know are ignored).
    pub fn counters(&self) -> Counters {
        let mut c = Counters::default();
        let get = |n: &str| self.counters.get(n).copied().unwrap_or(0);
        c.waves = get("SQ_WAVES");
        c.valu = get("SQ_INSTS_VALU");
        c.wmma = get("W4A16_INSTS_WMMA");
        c.lds_bytes = get("W4A16_LDS_BYTES");
        c.lds_bank_conflict = get("SQ_LDS_BANK_CONFLICT");
        c.global_read_bytes = get("W4A16_GLOBAL_READ_BYTES");
        c.global_write_bytes = get("W4A16_GLOBAL_WRITE_BYTES");
        c
    }
}

/// One case's count on one side: the kernel label and each launch of its path, in order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Counted {
    pub key: PerfKey,
    pub kernel: KernelLabel,
    pub launches: Vec<LaunchCount>,
    /// The model time of the path on the target's declared machine (µs; a model, not a
    /// measurement): the sum of its launches' bounds.
    pub model_us: Option<f64>,
}

/// A case the MAC budget left out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LeftOut {
    pub key: PerfKey,
    pub case_id: String,
    pub macs: u64,
}

/// Splits `cases` by the budget: those counted, and those left out (with their MACs).
pub fn within_budget(cases: Vec<PerfCase>, max_macs: u64) -> (Vec<PerfCase>, Vec<LeftOut>) {
    let macs = |c: &PerfCase| (c.m * c.shape.n * c.shape.k) as u64;
    let (in_budget, over): (Vec<_>, Vec<_>) = cases.into_iter().partition(|c| macs(c) <= max_macs);
    let left = over
        .iter()
        .map(|c| LeftOut {
            key: c.key.clone(),
            case_id: c.case_id.clone(),
            macs: macs(c),
        })
        .collect();
    (in_budget, left)
}

/// Model time of a list of launches on `gfx`'s declared machine, µs.
pub fn model_us(gfx: &str, launches: &[LaunchCount]) -> Option<f64> {
    let machine = Machine::of(gfx)?;
    Some(
        launches
            .iter()
            .map(|l| machine.model(&l.counters()).us())
            .sum(),
    )
}

/// Counts every case on `candidate` and, case by case, on `control` (both the ISA emulator).
/// Results are in `cases` order.
pub fn count_suite(
    candidate: &dyn DeviceBench,
    control: Option<&dyn DeviceBench>,
    cases: &[PerfCase],
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<(Counted, Option<Counted>)>, PerfError> {
    for device in std::iter::once(candidate).chain(control) {
        if device.kind() != DeviceKind::Emulator || !device.count_launches(true) {
            return Err(PerfError::NotCounting {
                device: device.name(),
            });
        }
    }
    let mut prepared: Option<PreparedLayer> = None;
    let mut out = Vec::with_capacity(cases.len());
    for (i, case) in cases.iter().enumerate() {
        let same = |p: &PreparedLayer| p.shape == case.key.shape && p.provider == case.key.provider;
        if !prepared.as_ref().is_some_and(same) {
            drop(prepared.take());
            progress(&format!(
                "data: {} {} (M up to {})",
                case.key.shape,
                case.key.provider,
                largest_m(cases, case)
            ));
            prepared = Some(prepare(cases, case)?);
        }
        let layer = prepared.as_ref().expect("prepared above");
        progress(&format!(
            "[{}/{}] {} {}",
            i + 1,
            cases.len(),
            case.key,
            case.label()
        ));
        let cand = count_case(candidate, Side::Candidate, case, layer)?;
        let ctrl = match control {
            Some(d) => Some(count_case(d, Side::Control, case, layer)?),
            None => None,
        };
        out.push((cand, ctrl));
    }
    for device in std::iter::once(candidate).chain(control) {
        device.count_launches(false);
    }
    Ok(out)
}

/// One launch of the case's path on `device`, counted. The dense path counts its dequant
/// kernel; the vendor GEMM after it is the emulator's host stand-in, which counts nothing.
fn count_case(
    device: &dyn DeviceBench,
    side: Side,
    case: &PerfCase,
    layer: &PreparedLayer,
) -> Result<Counted, PerfError> {
    device.take_launch_counters();
    match case.path.as_slice() {
        [KernelId::Dequant, KernelId::Dense] => {
            let dq = decl(KernelId::Dequant);
            let entry = case.entry(dq);
            let inputs = DeviceInputs::dequant(dq, &layer.layer, case.dense_spec())
                .map_err(refused(case, side, "dequant"))?;
            device.dequant(dq, &entry, &inputs).map_err(device_fault(
                case,
                side,
                format!("counting {entry}"),
            ))?;
        }
        [k @ (KernelId::Skinny | KernelId::Fused | KernelId::Fallback)] => {
            let d = decl(*k);
            let launch = KernelLaunch {
                decl: d,
                entry: &case.entry(d),
                geometry: None,
            };
            launch_counted(device, side, case, &case.path, layer, launch)?;
        }
        other => {
            return Err(PerfError::Path {
                case: case.key.clone(),
                path: other.iter().map(|k| k.name()).collect::<Vec<_>>().join("+"),
            });
        }
    }
    let launches: Vec<LaunchCount> = device
        .take_launch_counters()
        .iter()
        .map(|l| LaunchCount::of(&l.entry, &l.counters))
        .collect();
    Ok(Counted {
        key: case.key.clone(),
        kernel: case.label(),
        model_us: model_us(case.target.name(), &launches),
        launches,
    })
}

/// `launch`, a kernel of `path`, launched once on `device` (counting): at its geometry where
/// given (a fused tile variant), else through the checked launch as the case selects it.
fn launch_counted(
    device: &dyn DeviceBench,
    side: Side,
    case: &PerfCase,
    path: &[KernelId],
    layer: &PreparedLayer,
    launch: KernelLaunch<'_>,
) -> Result<(), PerfError> {
    let KernelLaunch {
        decl: d,
        entry,
        geometry,
    } = launch;
    let x = x_on_path(case, path, layer);
    let xb = XBuffer::as_laid_out(&x);
    let y = YSpec::dense(case.m, case.shape.n, case.dtype);
    let inputs =
        DeviceInputs::gemm_strided(d, &layer.layer, &xb, y).map_err(refused(case, side, entry))?;
    let launched = match geometry {
        Some(g) => device.launch_once_at(d, entry, g, &inputs),
        None => device.run_gemm(d, entry, &inputs).map(|_| ()),
    };
    launched.map_err(device_fault(case, side, format!("counting {entry}")))
}

/// `launch`, a kernel of `path`, counted once on the ISA emulator: its model time on the case's
/// target, µs (perf's regret mode on a gfx target without its GPU).
pub(crate) fn count_kernel(
    device: &dyn DeviceBench,
    case: &PerfCase,
    path: &[KernelId],
    layer: &PreparedLayer,
    launch: KernelLaunch<'_>,
) -> Result<f64, PerfError> {
    device.take_launch_counters();
    launch_counted(device, Side::Candidate, case, path, layer, launch)?;
    let launches: Vec<LaunchCount> = device
        .take_launch_counters()
        .iter()
        .map(|l| LaunchCount::of(&l.entry, &l.counters))
        .collect();
    model_us(case.target.name(), &launches).ok_or_else(|| PerfError::NoMachine {
        case: case.key.clone(),
        target: case.target,
    })
}
