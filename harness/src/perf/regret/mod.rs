//! Regret mode (`w4a16 perf --regret`): for every dense case, every path of the kernel set that
//! may take it is timed the way perf times the selected one (cold inputs, device events), so
//! that the report can say, case by case, where the selection is not the fastest path and by
//! how much — and what the prefill dequant option would be worth there.
//!
//! Pipeline: [`regret_cases`] (the selection's choice and the legal paths, from the select
//! crate's own checks) → [`measure::measure_regret`] (one timing per path) →
//! [`RegretRow::from_times`] (regret and the option's value) → [`report`] (markdown, JSON, SVG).
//! Every identifier is typed ([`LinearPath`], [`PerfKey`]); strings appear only in the reports.

pub mod measure;
pub mod plot;
pub mod report;
pub mod resume;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use w4a16_cases::{Provider, Suite};
use w4a16_kernels::Target;
use w4a16_select::config::{KernelConfig, PrefillDequant};
use w4a16_select::{LayerRequest, LinearPath, legal_paths};

use super::key::{KernelLabel, PerfKey};
use super::measure::{PerfCase, PerfPlan, perf_cases};
use super::peers::PeerTimes;

pub use measure::{Clock, measure_regret, measure_regret_each, regret_each};

/// One case to time in regret mode: the perf case (with the selected path), the path the
/// selection took, and every legal path in the set's order, each flagged with whether the
/// case's own kernel config allows it (the dense path is timed even when the option is off,
/// for the option's value; it never counts towards the regret then).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegretCase {
    pub perf: PerfCase,
    pub selected: LinearPath,
    pub paths: Vec<CandidatePath>,
    /// Legal paths not timed, each with why (never the selected path).
    pub left_out: Vec<LeftOutPath>,
}

/// The fallback's largest M·N·K that regret mode times by default: plain scalar sums, each
/// thread's weight row read uncoalesced, it takes seconds per launch on the field's large
/// prefill cases (qwen3-8b gate_up at M = 4096 is 4·10¹¹ MACs), where it is never the fastest;
/// 2³³ keeps every decode and small-batch case of the field (where it could be) and the H200
/// batch within minutes.
pub const DEFAULT_FALLBACK_MAX_MACS: u64 = 1 << 33;

/// A legal path regret mode did not time, and why: the report lists it beside the case, so a
/// regret is read as "over the best timed path".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOutPath {
    pub path: LinearPath,
    pub why: LeftOutReason,
}

/// Why a legal path was not timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum LeftOutReason {
    /// The fallback above `--regret-fallback-max-macs`.
    FallbackAboveMacs { macs: u64, max_macs: u64 },
    /// A path the model has no time for: the dense path on the ISA emulator, whose vendor GEMM
    /// is a host stand-in that counts nothing.
    NoModel,
}

impl std::fmt::Display for LeftOutPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.why {
            LeftOutReason::FallbackAboveMacs { macs, max_macs } => write!(
                f,
                "{} not timed ({macs} MACs > --regret-fallback-max-macs {max_macs})",
                self.path
            ),
            LeftOutReason::NoModel => write!(
                f,
                "{} not timed (no model time: its vendor GEMM is the emulator's host stand-in)",
                self.path
            ),
        }
    }
}

impl RegretCase {
    /// M·N·K of one call.
    pub fn macs(&self) -> u64 {
        (self.perf.m as u64) * (self.perf.shape.n as u64) * (self.perf.shape.k as u64)
    }

    /// Leaves the fallback untimed above `max_macs`, unless the selection took it (then it is
    /// the only path, and the case's time).
    pub fn limit_fallback(&mut self, max_macs: u64) {
        let macs = self.macs();
        if macs <= max_macs || self.selected == LinearPath::Fallback {
            return;
        }
        let before = self.paths.len();
        self.paths.retain(|p| p.path != LinearPath::Fallback);
        if self.paths.len() < before {
            self.left_out.push(LeftOutPath {
                path: LinearPath::Fallback,
                why: LeftOutReason::FallbackAboveMacs { macs, max_macs },
            });
        }
    }
}

/// Why the counter model gives a case no time (the run lists it as not timed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotModelled {
    #[error("{macs} MACs > --max-macs {max_macs} (the ISA emulator's budget)")]
    AboveBudget { macs: u64, max_macs: u64 },
    #[error(
        "the selected dequant+dense path has no model time (its vendor GEMM is the emulator's \
         host stand-in)"
    )]
    SelectedDense,
}

impl RegretCase {
    /// For the counter model: within `max_macs` (the ISA emulator runs every path), the dense
    /// path moves to the paths not timed (it has no model time). A case above the budget, or
    /// one the selection sends down the dense path, has no regret there: `Err` says why.
    pub fn leave_out_unmodelled(&mut self, max_macs: u64) -> Result<(), NotModelled> {
        let macs = self.macs();
        if macs > max_macs {
            return Err(NotModelled::AboveBudget { macs, max_macs });
        }
        if self.selected == LinearPath::DequantDense {
            return Err(NotModelled::SelectedDense);
        }
        let before = self.paths.len();
        self.paths.retain(|p| p.path != LinearPath::DequantDense);
        if self.paths.len() < before {
            self.left_out.push(LeftOutPath {
                path: LinearPath::DequantDense,
                why: LeftOutReason::NoModel,
            });
        }
        Ok(())
    }
}

/// One legal path of a case and under which configurations it is legal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidatePath {
    pub path: LinearPath,
    /// Legal under the run's kernel config (counts for the regret).
    pub under_config: bool,
    /// Legal with the prefill dequant option disabled (counts for "best without").
    pub without_option: bool,
}

/// The request `case` makes: perf times the plain layer (no bias; an act-order layer has no
/// kernel, so no timed case has one), with the dense cache built as `config` builds it.
fn request(case: &PerfCase, config: &KernelConfig) -> LayerRequest {
    LayerRequest {
        padding: case.padding,
        dense_cache_built: config.builds_dense_cache(),
        ..LayerRequest::new(case.shape, case.m, case.dtype, case.symmetry)
    }
}

/// The perf cases of `suite` (as [`perf_cases`] chooses them) with their legal paths: the union
/// of the paths legal with the prefill dequant option enabled and disabled, each flagged. A
/// case whose selected path is not among them would be a selection bug: it is listed as not
/// timed, with why, instead of being timed against the wrong set.
pub fn regret_cases(
    suite: &Suite,
    providers: &[Provider],
    target: Target,
    config: &KernelConfig,
) -> (Vec<RegretCase>, Vec<(String, String)>) {
    let (cases, mut not_timed) = perf_cases(suite, providers, target, config);
    let enabled = KernelConfig::with_prefill_dequant(PrefillDequant::Enable);
    let disabled = KernelConfig::with_prefill_dequant(PrefillDequant::Disable);
    let mut out = Vec::with_capacity(cases.len());
    for case in cases {
        let under = legal_paths(target, &request(&case, config), config);
        let with = legal_paths(target, &request(&case, &enabled), &enabled);
        let without = legal_paths(target, &request(&case, &disabled), &disabled);
        let sel = w4a16_select::select(target, &request(&case, config), config);
        // Several rungs may hold one tile: the legal list names the first, the launch is the same.
        let chosen = LinearPath::of_selection(&sel);
        let Some(selected) = chosen.and_then(|s| under.iter().copied().find(|l| l.same_launch(&s)))
        else {
            not_timed.push((
                case.case_id.clone(),
                format!(
                    "the selected path {} is not among the legal paths {under:?}",
                    sel.path_name()
                ),
            ));
            continue;
        };
        let paths = with
            .iter()
            .map(|&path| CandidatePath {
                path,
                under_config: under.contains(&path),
                without_option: without.contains(&path),
            })
            .collect();
        out.push(RegretCase {
            perf: case,
            selected,
            paths,
            left_out: Vec::new(),
        });
    }
    (out, not_timed)
}

/// Where a run's times come from: device events on the target's GPU, or (labelled, never mixed
/// with measurements) a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeSource {
    DeviceEvents,
    Model,
}

/// One path's timing of one case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathTime {
    #[serde(flatten)]
    pub candidate: CandidatePath,
    /// The kernel label as launched (`fused:w4a16_fused_f16_64x64x32w4`, `dequant:…+dense:blas`).
    pub label: KernelLabel,
    pub median_us: f64,
    /// Per-launch times, µs.
    pub samples_us: Vec<f64>,
}

/// One case's result: the selected path's time over the best legal path's (the regret, ≥ 1),
/// and the prefill dequant option's value (the best time with it over the best without; < 1
/// means enabling the option would make this call faster).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegretRow {
    pub key: PerfKey,
    pub case_id: String,
    pub n: usize,
    pub k: usize,
    pub group: usize,
    pub selected: LinearPath,
    pub selected_us: f64,
    /// The fastest path legal under the run's kernel config.
    pub best: LinearPath,
    pub best_us: f64,
    /// `selected_us / best_us`.
    pub regret: f64,
    /// Best with the option enabled over best with it disabled; `None` when no dense path is
    /// legal for the layer (the option changes nothing for it).
    pub prefill_dequant_ratio: Option<f64>,
    pub times: Vec<PathTime>,
    /// The dequant kernel that builds the layer's dense cache, µs: paid once at load, not per
    /// call (the dense path's time is the GEMM alone); `None` where no dense path was timed.
    pub dequant_once_us: Option<f64>,
    /// Legal paths not timed, with why: the regret is over the best timed path.
    pub left_out: Vec<LeftOutPath>,
    /// torch's int4 kernel and dense fp16, where `--peers` measured them.
    pub peers: Option<PeerTimes>,
}

/// Why a case's times cannot make a row: a path missing, or a time that is not a positive
/// finite number (a device or model error that must not become a regret of 0 or ∞).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RegretError {
    #[error("{case}: the selected path {path} was not timed")]
    SelectedNotTimed { case: PerfKey, path: LinearPath },
    #[error("{case}: {path} took {us} µs: expected a positive finite time")]
    BadTime {
        case: PerfKey,
        path: LinearPath,
        us: f64,
    },
}

impl RegretRow {
    /// The row of `case` from its paths' times (one per timed path, any order).
    pub fn from_times(case: &RegretCase, times: Vec<PathTime>) -> Result<RegretRow, RegretError> {
        let key = case.perf.key.clone();
        if let Some(t) = times
            .iter()
            .find(|t| !(t.median_us.is_finite() && t.median_us > 0.0))
        {
            return Err(RegretError::BadTime {
                case: key,
                path: t.candidate.path,
                us: t.median_us,
            });
        }
        let selected_us = times
            .iter()
            .find(|t| t.candidate.path == case.selected)
            .map(|t| t.median_us)
            .ok_or(RegretError::SelectedNotTimed {
                case: key.clone(),
                path: case.selected,
            })?;
        let best_of = |keep: &dyn Fn(&CandidatePath) -> bool| {
            times
                .iter()
                .filter(|t| keep(&t.candidate))
                .min_by(|a, b| a.median_us.total_cmp(&b.median_us))
        };
        // The selected path is legal under the config, so a best exists whenever the case was
        // built by `regret_cases`; a hand-made case without one is refused, not unwrapped.
        let best = best_of(&|c| c.under_config).ok_or(RegretError::SelectedNotTimed {
            case: key.clone(),
            path: case.selected,
        })?;
        let with = best_of(&|_| true).map(|t| t.median_us);
        let without = best_of(&|c| c.without_option).map(|t| t.median_us);
        let dense_legal = times
            .iter()
            .any(|t| t.candidate.path == LinearPath::DequantDense);
        let prefill_dequant_ratio = match (dense_legal, with, without) {
            (true, Some(w), Some(wo)) => Some(w / wo),
            _ => None,
        };
        Ok(RegretRow {
            key,
            case_id: case.perf.case_id.clone(),
            n: case.perf.shape.n,
            k: case.perf.shape.k,
            group: case.perf.shape.group,
            selected: case.selected,
            selected_us,
            best: best.candidate.path,
            best_us: best.median_us,
            regret: selected_us / best.median_us,
            prefill_dequant_ratio,
            times,
            dequant_once_us: None,
            left_out: case.left_out.clone(),
            peers: None,
        })
    }

    /// Whether a path other than the selected one was faster (regret above 1).
    pub fn regrets(&self) -> bool {
        self.best != self.selected
    }

    /// The selected path's time over the faster of the peers (torch's int4 GEMM, dense fp16),
    /// where `--peers` measured one: how far the set is from what the field would run instead.
    pub fn peer_ratio(&self) -> Option<f64> {
        let p = self.peers.as_ref()?;
        let fastest = [p.torch_int4_us, p.dense_fp16_us]
            .into_iter()
            .flatten()
            .filter(|t| *t > 0.0)
            .reduce(f64::min)?;
        Some(self.selected_us / fastest)
    }

    /// Whether the dequant + dense path is legal under the run's kernel config: only there is
    /// dense fp16 a path the selection could have taken, so only there does the peer bound hold
    /// the selection to account.
    pub fn dense_legal(&self) -> bool {
        self.times
            .iter()
            .any(|t| t.candidate.path == LinearPath::DequantDense && t.candidate.under_config)
    }
}

/// Everything one `w4a16 perf --regret` run produced; the JSON report is this, and reads back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegretRun {
    pub target: String,
    pub device: String,
    pub suite: String,
    /// The run's prefill dequant option (the configuration the regret is judged under).
    pub prefill_dequant: PrefillDequant,
    pub plan: PerfPlan,
    pub source: TimeSource,
    /// The digest of the kernel sources timed ([`KernelSources::digest`]); empty in a report
    /// written before it was recorded, which no run continues (and then left out of the JSON, as
    /// such a report was written).
    ///
    /// [`KernelSources::digest`]: w4a16_kernels::source::KernelSources::digest
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernels: String,
    /// Cases the run set out to time; more than `rows` in a report written before the run
    /// finished (or one that was stopped).
    pub planned: usize,
    pub rows: Vec<RegretRow>,
    /// (case id, why it is not timed here).
    pub not_timed: Vec<(String, String)>,
    pub peers_note: Option<String>,
}
