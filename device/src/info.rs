//! What every device says about itself, whatever runs its launches: its target, name, health,
//! what executes it and how it sizes buffers ([`DeviceInfo`], shared by [`crate::Runtime`] and
//! [`crate::Device`] so that each is declared once).

use w4a16_kernels::{Execution, RunTarget, Target};

use crate::Health;

/// What a device says about itself. Runs record it (report.json's `device`, the verdict
/// snapshots' header) and the runner picks its flow by it.
pub trait DeviceInfo: Send + Sync {
    /// The configuration the kernels are built in (an emulated AMD target on a CUDA device).
    fn target(&self) -> Target;
    /// Native unless the device emulates an AMD target's configuration.
    fn execution(&self) -> Execution {
        Execution::Native
    }
    /// The target as a run names it (`sm_90`, `gfx1151-emu`).
    fn run_target(&self) -> RunTarget {
        RunTarget {
            target: self.target(),
            execution: self.execution(),
        }
    }
    fn name(&self) -> String;
    fn health(&self) -> Health;
    /// What executes the launches; every device states it (host code says
    /// [`DeviceKind::Simulated`]).
    fn kind(&self) -> DeviceKind;
    /// How the launch flow sizes buffers on this device.
    fn allocation(&self) -> Allocation {
        Allocation::Guarded
    }
    /// What the ISA emulator has executed so far; `None` for every other device.
    fn emulator_work(&self) -> Option<EmulatorWork> {
        None
    }
    /// The blocks of the target's code objects and which of them ran since the last call (the
    /// ISA emulator opened with `DeviceRequest::recording_blocks`); `None` for every other
    /// device.
    fn block_coverage(&self) -> Option<Result<crate::BlockCoverage, crate::DeviceFault>> {
        None
    }
    /// Starts (`true`, with an empty list) or stops counting every launch's deterministic
    /// counters (docs/perf-counters.md); answers whether this device counts (the ISA emulator
    /// does, no other device).
    fn count_launches(&self, on: bool) -> bool {
        let _ = on;
        false
    }
    /// The counters of the launches since counting started, in launch order (the list is
    /// emptied); empty on a device that does not count.
    fn take_launch_counters(&self) -> Vec<LaunchCounters> {
        Vec::new()
    }
    /// The ISA emulator's sanitizer watching every launch, if the device was opened with one
    /// ([`crate::DeviceRequest::with_emu_sanitizer`]); `None` for every other device.
    fn emu_sanitizer(&self) -> Option<crate::EmuSanitizer> {
        None
    }
    /// The sanitizer's reports since the last call, in launch order (emptied by the call).
    fn take_sanitizer_reports(&self) -> Vec<crate::SanitizerReport> {
        Vec::new()
    }
}

/// One launch's counters and the entry point it launched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchCounters {
    pub entry: String,
    pub counters: w4a16_emu::counters::Counters,
}

/// How a device sizes the buffers of a launch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Allocation {
    /// Inputs as their host buffers, the output inside `GUARD_BYTES` of guard band on each side:
    /// a stray write lands in a band and is seen on download.
    #[default]
    Guarded,
    /// Every tensor, the output included, at exactly its view's extent (`required_bytes`), no
    /// guard and no slack: an access past a view lands outside every allocation, where a
    /// sanitizer (compute-sanitizer's memcheck; the simulator in tests) reports it.
    Exact,
}

/// What executes a launch; says, e.g., whether NVIDIA's compute-sanitizer can watch it. Runs
/// record it (report.json's `device`, the verdict snapshots' header): a verdict of an emulated
/// target or of the ISA emulator is not a hardware one, and a reader must see which it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceKind {
    Cuda,
    Rocm,
    /// Host code standing in for a device (the test simulator, the CPU-side stand-in).
    Simulated,
    /// The ISA emulator running an AMD target's real code objects on the host.
    Emulator,
}

impl DeviceKind {
    pub const ALL: [DeviceKind; 4] = [
        DeviceKind::Cuda,
        DeviceKind::Rocm,
        DeviceKind::Simulated,
        DeviceKind::Emulator,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Cuda => "CUDA",
            DeviceKind::Rocm => "ROCm",
            DeviceKind::Simulated => "a simulated device",
            DeviceKind::Emulator => "the ISA emulator",
        }
    }

    /// What ran the launches, as a verdict snapshot's header says it.
    pub fn recorded_by(self) -> &'static str {
        match self {
            DeviceKind::Cuda => "a CUDA GPU",
            DeviceKind::Rocm => "a ROCm GPU",
            DeviceKind::Simulated => {
                "a simulated device (host code following each kernel's contract)"
            }
            DeviceKind::Emulator => {
                "the ISA emulator (the target's code objects executed on the host; dense GEMM by a host stand-in for the vendor BLAS)"
            }
        }
    }
}

/// Work the ISA emulator has done since it opened (the ISA emulator's throughput figure),
/// in all and per kernel entry point (which kernel a slow suite on the emulator spends its time in).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct EmulatorWork {
    pub launches: u64,
    /// Instructions executed, counted once per wave (each runs for up to 32 lanes).
    pub wave_instructions: u64,
    /// Seconds spent inside the emulator's launches.
    pub seconds: f64,
    pub per_kernel: std::collections::BTreeMap<String, KernelWork>,
}

/// One kernel entry point's share of [`EmulatorWork`].
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct KernelWork {
    pub launches: u64,
    pub wave_instructions: u64,
    pub seconds: f64,
}

impl EmulatorWork {
    /// Counts one launch of `kernel`.
    pub fn add_launch(&mut self, kernel: &str, wave_instructions: u64, seconds: f64) {
        self.launches += 1;
        self.wave_instructions += wave_instructions;
        self.seconds += seconds;
        let k = self.per_kernel.entry(kernel.to_string()).or_default();
        k.launches += 1;
        k.wave_instructions += wave_instructions;
        k.seconds += seconds;
    }
}
