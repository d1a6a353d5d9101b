//! What a device affords per case. The CUDA emulation of an AMD target (`gfx1151-emu`) and the
//! ISA emulator interpret work a GPU does in parallel, so each runs cases up to a size (M·N·K
//! multiply-adds) and leaves the larger ones out, loudly; a GPU running its own target runs
//! every case. A budgeted run's snapshot says how many cases it left out (see
//! [`super::snapshot::LeftOut`]).

use serde::{Deserialize, Serialize};
use w4a16_cases::{Case, CaseSet, Suite};
use w4a16_device::DeviceKind;
use w4a16_kernels::{RunTarget, emulation};

/// Multiply-adds above which a case is not run on the ISA emulator, unless its sweep or suite
/// declares less (`isa_emulator_max_macs`). The emulator interprets every wave-instruction on one
/// host thread (about 16 M per second: `w4a16 bench --emulator`) where a GPU runs thousands of
/// waves at once; 2^24 runs all of `smoke` and `checkpoints` (a few seconds a case
/// at most). The larger cases run on the target's GPU.
pub const ISA_EMULATOR_MAX_CASE_MACS: u64 = 1 << 24;

/// The main job's share of the suites on a machine without a GPU, where the ISA emulator runs
/// the default target's code objects in the GPU's place: these suites whole (their own
/// budgets), every other suite only its cases up to [`MAIN_JOB_SHARE_MACS`], so the whole job
/// stays within a few minutes on two cores (`bench/main-job-no-gpu.md`). `w4a16 run --target
/// gfx1151` runs the emulator's full budget.
pub const MAIN_JOB_WHOLE_SUITES: [&str; 1] = ["smoke"];

/// Multiply-adds a case of a suite outside [`MAIN_JOB_WHOLE_SUITES`] may have in the main job's
/// share.
pub const MAIN_JOB_SHARE_MACS: u64 = 1 << 16;

/// What interprets the kernels of a budgeted run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Interpreter {
    /// An AMD target's configuration compiled for and run on an NVIDIA GPU (`gfxN-emu`).
    CudaEmulation,
    /// The target's code objects executed instruction by instruction on the host.
    IsaEmulator,
    /// The ISA emulator standing in for a missing GPU in the main job, with the main job's
    /// share ([`MAIN_JOB_WHOLE_SUITES`], [`MAIN_JOB_SHARE_MACS`]).
    IsaEmulatorMainJob,
}

impl Interpreter {
    /// Its budget, as a snapshot header and a run's summary name it.
    pub fn budget(self) -> String {
        match self {
            Interpreter::CudaEmulation => format!(
                "the CUDA emulation's budget of 2^{} MACs (M·N·K)",
                emulation::MAX_CASE_MACS.trailing_zeros()
            ),
            Interpreter::IsaEmulator => format!(
                "the ISA emulator's budget (isa_emulator_max_macs of the case's sweep or suite, else 2^{} MACs)",
                ISA_EMULATOR_MAX_CASE_MACS.trailing_zeros()
            ),
            Interpreter::IsaEmulatorMainJob => format!(
                "the main job's share ({} within the emulator's budget, other suites up to 2^{} MACs a case)",
                MAIN_JOB_WHOLE_SUITES.join(", "),
                MAIN_JOB_SHARE_MACS.trailing_zeros()
            ),
        }
    }
}

/// The largest case a run executes of one suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaseBudget<'s> {
    /// A GPU running its own target: every case.
    Unbounded,
    /// The CUDA emulation of an AMD target: [`emulation::MAX_CASE_MACS`].
    CudaEmulation,
    /// The ISA emulator: the suite's declared budgets, else [`ISA_EMULATOR_MAX_CASE_MACS`];
    /// in the main job's share ([`Interpreter::IsaEmulatorMainJob`]) at most
    /// [`MAIN_JOB_SHARE_MACS`] outside [`MAIN_JOB_WHOLE_SUITES`].
    IsaEmulator {
        suite: Option<&'s Suite>,
        main_job: bool,
    },
}

impl<'s> CaseBudget<'s> {
    /// The budget of `suite` when `target` runs on `device` (`None`: no device opened, so
    /// nothing runs and nothing is left out).
    pub fn of(
        target: RunTarget,
        device: Option<DeviceKind>,
        suite: Option<&'s Suite>,
    ) -> CaseBudget<'s> {
        if target.is_emulated() {
            CaseBudget::CudaEmulation
        } else if device == Some(DeviceKind::Emulator) {
            CaseBudget::IsaEmulator {
                suite,
                main_job: false,
            }
        } else {
            CaseBudget::Unbounded
        }
    }

    /// What interprets the kernels; `None` on a GPU running its own target.
    pub fn interpreter(&self) -> Option<Interpreter> {
        match self {
            CaseBudget::Unbounded => None,
            CaseBudget::CudaEmulation => Some(Interpreter::CudaEmulation),
            CaseBudget::IsaEmulator {
                main_job: false, ..
            } => Some(Interpreter::IsaEmulator),
            CaseBudget::IsaEmulator { main_job: true, .. } => Some(Interpreter::IsaEmulatorMainJob),
        }
    }

    /// The same budget cut to the main job's share (only the ISA emulator's has one).
    pub fn main_job_share(self) -> Self {
        match self {
            CaseBudget::IsaEmulator { suite, .. } => CaseBudget::IsaEmulator {
                suite,
                main_job: true,
            },
            other => other,
        }
    }

    /// The most multiply-adds `case` may have here; `None` when unbounded.
    pub fn max_macs(&self, case: &Case) -> Option<u64> {
        match self {
            CaseBudget::Unbounded => None,
            CaseBudget::CudaEmulation => Some(emulation::MAX_CASE_MACS),
            CaseBudget::IsaEmulator { suite, main_job } => {
                let own = suite
                    .and_then(|s| s.isa_emulator_max_macs_of(&case.id))
                    .unwrap_or(ISA_EMULATOR_MAX_CASE_MACS);
                let whole = MAIN_JOB_WHOLE_SUITES.contains(&case.suite.as_str());
                Some(if *main_job && !whole {
                    own.min(MAIN_JOB_SHARE_MACS)
                } else {
                    own
                })
            }
        }
    }

    /// Whether `case` is within the budget. A MoE case's GEMM has one row per routed slot
    /// (T·top_k).
    pub fn admits(&self, case: &Case) -> bool {
        let Some(max) = self.max_macs(case) else {
            return true;
        };
        let rows = case.moe.map_or(case.m, |r| r.slots(case.m));
        emulation::macs_within(rows, case.shape.n, case.shape.k, max)
    }
}

impl std::fmt::Display for CaseBudget<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.interpreter() {
            None => f.write_str("no budget"),
            Some(by) => f.write_str(&by.budget()),
        }
    }
}

/// The budgets of a whole run, suite by suite.
#[derive(Clone, Copy, Debug)]
pub struct RunBudget<'s> {
    target: RunTarget,
    device: Option<DeviceKind>,
    set: &'s CaseSet,
    main_job: bool,
}

impl<'s> RunBudget<'s> {
    pub fn of(target: RunTarget, device: Option<DeviceKind>, set: &'s CaseSet) -> RunBudget<'s> {
        RunBudget {
            target,
            device,
            set,
            main_job: false,
        }
    }

    /// The same run cut to the main job's share ([`CaseBudget::main_job_share`]).
    pub fn main_job_share(self) -> Self {
        RunBudget {
            main_job: true,
            ..self
        }
    }

    /// The budget of the suite named `suite` (one the set lacks gets the device's default).
    pub fn of_suite(&self, suite: &str) -> CaseBudget<'s> {
        let budget = CaseBudget::of(self.target, self.device, self.set.suite(suite));
        if self.main_job {
            budget.main_job_share()
        } else {
            budget
        }
    }

    pub fn admits(&self, case: &Case) -> bool {
        self.of_suite(&case.suite).admits(case)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case_of(m: usize, n: usize, k: usize) -> Case {
        let set = w4a16_cases::load_all(&w4a16_cases::locate(None).unwrap()).unwrap();
        let mut c = set.suite("smoke").unwrap().cases[0].clone();
        c.m = m;
        c.shape = w4a16_reference::layer::LayerShape::new(n, k, c.shape.group);
        c
    }

    /// The ISA emulator's budget holds exactly up to its bound, a sweep's or suite's declared
    /// one first; the CUDA emulation's is its own; a GPU on its target and a run without a
    /// device leave nothing out.
    #[test]
    fn each_interpreter_has_its_bound_and_gpus_have_none() {
        let set = w4a16_cases::load_all(&w4a16_cases::locate(None).unwrap()).unwrap();
        let native = RunTarget::parse("gfx1151").unwrap();
        let emulated = RunTarget::parse("gfx1151-emu").unwrap();
        let isa = CaseBudget::of(native, Some(DeviceKind::Emulator), set.suite("smoke"));
        assert!(isa.admits(&case_of(16, 1024, 1024)));
        assert!(!isa.admits(&case_of(17, 1024, 1024)));
        assert!(isa.to_string().contains("else 2^24 MACs"), "{isa}");
        let mut declared = set.suite("smoke").unwrap().clone();
        declared.isa_emulator_max_macs = Some(3 << 20);
        let small = CaseBudget::of(native, Some(DeviceKind::Emulator), Some(&declared));
        assert!(small.admits(&case_of(3, 1024, 1024)));
        assert!(!small.admits(&case_of(4, 1024, 1024)));
        let big = case_of(4, 1024, 1024);
        declared
            .isa_emulator_sweep_budgets
            .insert(big.id.clone(), 4 << 20);
        let per_sweep = CaseBudget::of(native, Some(DeviceKind::Emulator), Some(&declared));
        assert!(per_sweep.admits(&big), "a sweep's own budget comes first");
        let cuda_emu = CaseBudget::of(emulated, Some(DeviceKind::Cuda), set.suite("smoke"));
        assert!(cuda_emu.admits(&case_of(17, 1024, 1024)));
        assert!(!cuda_emu.admits(&case_of(1 << 17, 1024, 1025)));
        assert_eq!(
            cuda_emu.to_string(),
            "the CUDA emulation's budget of 2^37 MACs (M·N·K)"
        );
        assert_eq!(
            CaseBudget::of(native, Some(DeviceKind::Rocm), Some(&declared)),
            CaseBudget::Unbounded
        );
        assert!(CaseBudget::of(native, None, None).admits(&case_of(1 << 20, 1 << 20, 1 << 20)));
        assert!(!isa.admits(&case_of(usize::MAX, usize::MAX, usize::MAX)));
        let run = RunBudget::of(native, Some(DeviceKind::Emulator), &set);
        let edges = set.suite("edges").unwrap();
        for c in &edges.cases {
            assert_eq!(
                run.admits(c),
                CaseBudget::of(native, Some(DeviceKind::Emulator), Some(edges)).admits(c)
            );
        }
    }

    /// The main job's share keeps the whole suites at the emulator's own budget and cuts every
    /// other suite to its bound (a suite's larger declared budget does not lift it); a run on
    /// a GPU has no share.
    #[test]
    fn the_main_jobs_share_is_whole_smoke_and_small_cases_of_the_rest() {
        let set = w4a16_cases::load_all(&w4a16_cases::locate(None).unwrap()).unwrap();
        let native = RunTarget::parse("gfx1151").unwrap();
        let share = RunBudget::of(native, Some(DeviceKind::Emulator), &set).main_job_share();
        let mut smoke = case_of(16, 1024, 1024);
        assert!(share.admits(&smoke), "smoke keeps the emulator's own 2^24");
        smoke.m = 17;
        assert!(!share.admits(&smoke));
        let mut other = case_of(1, 256, 256);
        other.suite = "kernels".into();
        assert!(share.admits(&other), "2^16 MACs is inside the share");
        other.shape = w4a16_reference::layer::LayerShape::new(256, 512, other.shape.group);
        assert!(!share.admits(&other), "one MAC-doubling past it is out");
        assert!(
            RunBudget::of(native, Some(DeviceKind::Emulator), &set).admits(&other),
            "the emulator's own budget (kernels: 2^20) keeps it"
        );
        assert!(
            share
                .of_suite("kernels")
                .to_string()
                .contains("2^16 MACs a case")
        );
        let gpu = RunBudget::of(native, Some(DeviceKind::Rocm), &set).main_job_share();
        assert!(
            gpu.admits(&case_of(1 << 10, 1 << 14, 1 << 14)),
            "a GPU has no share"
        );
    }
}
