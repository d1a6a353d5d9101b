//! What a device affords per case. The CUDA emulation of an AMD target (`gfx1151-emu`) and the
//! ISA emulator interpret work a GPU does in parallel, so each runs cases up to a size (M·N·K
//! multiply-adds) and leaves the larger ones out, loudly; a GPU running its own target runs
//! every case. A budgeted run's snapshot says how many cases it left out (see
//! [`super::snapshot::LeftOut`]).

use crate::cases::{Case, CaseSet, Suite};
use crate::device::DeviceKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use w4a16_kernels::{RunTarget, emulation};

/// Multiply-adds above which a case is not run on the ISA emulator, unless its suite declares
/// less (`isa_emulator_max_macs` in `[suite]`). The emulator interprets every wave-instruction on
/// one host thread (about 10 M per second: `w4a16 bench --emulated`) where a GPU runs thousands
/// of waves at once; 2^24 runs all of `smoke`, `checkpoints` and `regressions` (a few seconds a
/// case at most), and the larger cases run on the target's GPU.
pub const ISA_EMULATOR_MAX_CASE_MACS: u64 = 1 << 24;

/// The largest case a run executes of one suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CaseBudget {
    /// A GPU running its own target: every case.
    Unbounded,
    /// Cases up to `max` multiply-adds, set by what interprets the kernels.
    Macs { max: u64, by: Interpreter },
}

/// What interprets the kernels of a budgeted run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Interpreter {
    /// An AMD target's configuration compiled for and run on an NVIDIA GPU (`gfxN-emu`).
    CudaEmulation,
    /// The target's code objects executed instruction by instruction on the host.
    IsaEmulator,
}

impl CaseBudget {
    /// The budget of `suite` when `target` runs on `device` (`None`: no device opened, so
    /// nothing runs and nothing is left out).
    pub fn of(target: RunTarget, device: Option<DeviceKind>, suite: Option<&Suite>) -> CaseBudget {
        if target.is_emulated() {
            CaseBudget::Macs {
                max: emulation::MAX_CASE_MACS,
                by: Interpreter::CudaEmulation,
            }
        } else if device == Some(DeviceKind::Emulator) {
            CaseBudget::Macs {
                max: suite
                    .and_then(|s| s.isa_emulator_max_macs)
                    .unwrap_or(ISA_EMULATOR_MAX_CASE_MACS),
                by: Interpreter::IsaEmulator,
            }
        } else {
            CaseBudget::Unbounded
        }
    }

    /// Whether `case` is within the budget. A MoE case's GEMM has one row per routed slot
    /// (T·top_k).
    pub fn admits(&self, case: &Case) -> bool {
        let CaseBudget::Macs { max, .. } = *self else {
            return true;
        };
        let rows = case.moe.map_or(case.m, |r| r.slots(case.m));
        (rows as u128)
            .checked_mul(case.shape.n as u128)
            .and_then(|mn| mn.checked_mul(case.shape.k as u128))
            .is_some_and(|macs| macs <= max as u128)
    }
}

impl std::fmt::Display for CaseBudget {
    /// `the ISA emulator's budget of 2^22 MACs (M·N·K)`; `no budget` when unbounded.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CaseBudget::Unbounded => f.write_str("no budget"),
            CaseBudget::Macs { max, by } => {
                let by = match by {
                    Interpreter::CudaEmulation => "the CUDA emulation's",
                    Interpreter::IsaEmulator => "the ISA emulator's",
                };
                if max.is_power_of_two() {
                    write!(f, "{by} budget of 2^{} MACs (M·N·K)", max.trailing_zeros())
                } else {
                    write!(f, "{by} budget of {max} MACs (M·N·K)")
                }
            }
        }
    }
}

/// The budgets of a whole run, suite by suite.
#[derive(Clone, Debug)]
pub struct RunBudget {
    target: RunTarget,
    device: Option<DeviceKind>,
    suites: BTreeMap<String, CaseBudget>,
}

impl RunBudget {
    pub fn of(target: RunTarget, device: Option<DeviceKind>, set: &CaseSet) -> RunBudget {
        let suites = set
            .suite_names()
            .into_iter()
            .map(|name| {
                let budget = CaseBudget::of(target, device, set.suite(name));
                (name.to_string(), budget)
            })
            .collect();
        RunBudget {
            target,
            device,
            suites,
        }
    }

    /// The budget of the suite named `suite` (a suite the set lacks gets the device's default).
    pub fn of_suite(&self, suite: &str) -> CaseBudget {
        self.suites
            .get(suite)
            .copied()
            .unwrap_or_else(|| CaseBudget::of(self.target, self.device, None))
    }

    pub fn admits(&self, case: &Case) -> bool {
        self.of_suite(&case.suite).admits(case)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases;

    fn case_of(m: usize, n: usize, k: usize) -> Case {
        let set = cases::load_all(&cases::locate(None).unwrap()).unwrap();
        let mut c = set.suite("smoke").unwrap().cases[0].clone();
        c.m = m;
        c.shape = w4a16_reference::layer::LayerShape::new(n, k, c.shape.group);
        c
    }

    /// The ISA emulator's budget holds exactly up to its bound, a suite's declared one first;
    /// the CUDA emulation's is its own; a GPU on its target and a run without a device leave
    /// nothing out.
    #[test]
    fn each_interpreter_has_its_bound_and_gpus_have_none() {
        let set = cases::load_all(&cases::locate(None).unwrap()).unwrap();
        let native = RunTarget::parse("gfx1151").unwrap();
        let emulated = RunTarget::parse("gfx1151-emu").unwrap();
        let isa = CaseBudget::of(native, Some(DeviceKind::Emulator), set.suite("smoke"));
        assert!(isa.admits(&case_of(16, 1024, 1024)));
        assert!(!isa.admits(&case_of(17, 1024, 1024)));
        assert_eq!(
            isa.to_string(),
            "the ISA emulator's budget of 2^24 MACs (M·N·K)"
        );
        let mut declared = set.suite("smoke").unwrap().clone();
        declared.isa_emulator_max_macs = Some(3 << 20);
        let small = CaseBudget::of(native, Some(DeviceKind::Emulator), Some(&declared));
        assert!(small.admits(&case_of(3, 1024, 1024)));
        assert!(!small.admits(&case_of(4, 1024, 1024)));
        assert_eq!(
            small.to_string(),
            "the ISA emulator's budget of 3145728 MACs (M·N·K)"
        );
        let cuda_emu = CaseBudget::of(emulated, Some(DeviceKind::Cuda), set.suite("smoke"));
        assert!(cuda_emu.admits(&case_of(17, 1024, 1024)));
        assert!(!cuda_emu.admits(&case_of(1 << 17, 1024, 1025)));
        assert_eq!(
            CaseBudget::of(native, Some(DeviceKind::Rocm), Some(&declared)),
            CaseBudget::Unbounded
        );
        assert!(CaseBudget::of(native, None, None).admits(&case_of(1 << 20, 1 << 20, 1 << 20)));
        assert!(!isa.admits(&case_of(usize::MAX, usize::MAX, usize::MAX)));
        let run = RunBudget::of(native, Some(DeviceKind::Emulator), &set);
        for suite in set.suite_names() {
            assert_eq!(
                run.of_suite(suite),
                CaseBudget::of(native, Some(DeviceKind::Emulator), set.suite(suite))
            );
        }
    }
}
