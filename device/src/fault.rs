//! Device faults and how they are classified. A fault is a case's verdict, not the run's end:
//! the runner keeps GPU cases in a restartable worker, and the classification says whether the
//! worker must be restarted (the context is gone) or the next case can go on.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use w4a16_kernels::KernelId;

/// What kind of failure a driver status is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultClass {
    /// The launch was refused (bad configuration, too many resources, missing function); the
    /// context is still usable.
    Launch,
    /// The kernel faulted on the device (illegal address, trap, misaligned access...): the
    /// context is poisoned for good.
    Sticky,
    /// The device is gone or was never usable (not initialised, no device, ECC, lost).
    Fatal,
    /// An allocation the device's memory could not hold; the context survives, and the same
    /// work may fit with fewer processes sharing the device.
    OutOfMemory,
    /// Any other failure of a driver call; the context survives.
    Call,
}

/// Something a device may lack although it works: the check that needs it cannot run here (a
/// SKIP naming it), which says nothing about the device's behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// The vendor BLAS library the dense path calls (cuBLAS, hipBLASLt or hipBLAS).
    VendorBlas,
    /// The MoE launch path (`moe_align`, then `moe` on its outputs): devices that are host code
    /// standing in for a GPU (the CPU-side stand-in) have none.
    MoeLaunch,
    /// An instruction the ISA emulator does not implement: it stops the case rather than guess.
    EmulatorInstruction,
    /// Device timing (events): the ISA emulator has no clock worth a benchmark.
    Timing,
    /// The vendor's f64 GEMM the GPU reference (`--reference gpu`) runs on.
    F64Gemm,
}

impl Capability {
    pub fn name(self) -> &'static str {
        match self {
            Capability::VendorBlas => "the vendor BLAS",
            Capability::MoeLaunch => "the MoE launch path",
            Capability::EmulatorInstruction => "an instruction the ISA emulator implements",
            Capability::Timing => "device timing",
            Capability::F64Gemm => "the vendor f64 GEMM",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a device call did not give a result. Serializable so that a fault-isolated worker can
/// hand it to its parent inside a verdict.
#[derive(Clone, Debug, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "kebab-case")]
pub enum DeviceFault {
    #[error("launch of {kernel} refused: {code}{}; the context is still usable", fmt_detail(.detail))]
    Launch {
        kernel: String,
        code: String,
        detail: String,
    },

    #[error("device fault during {during}: {code}; the context is unusable (restart the worker)")]
    Sticky { during: String, code: String },

    #[error("{during} did not finish within the {:.1} s watchdog (W4A16_WATCHDOG_S); the device is presumed hung", .after.as_secs_f64())]
    Timeout { during: String, after: Duration },

    #[error("{during} failed: {code}")]
    Call { during: String, code: String },

    /// The device's memory was exhausted: on a card shared by several workers, each holding
    /// its own layers, copies and references, this says the run asked too much of the card,
    /// not that a kernel is wrong.
    #[error(
        "{during} failed: {code}: the device's memory is exhausted (each worker holds its own \
         layers and references: fewer workers, `--jobs`, leave each more)"
    )]
    OutOfMemory { during: String, code: String },

    #[error("compiling {source_file} for {arch} failed: {log}")]
    Compile {
        source_file: String,
        arch: String,
        log: String,
    },

    #[error("device unusable after an earlier fault ({cause}); restart the worker")]
    ContextLost { cause: String },

    /// The harness asked for something no device does (a launch without an output, a benchmark
    /// of nothing): a harness bug, reported as a fault.
    #[error("{what} is not available on {device}")]
    Unsupported { what: String, device: String },

    /// The device works but lacks `capability` (e.g. the vendor BLAS library is not installed):
    /// the checks that need it are skipped with this reason, never faulted.
    #[error("{capability} is not available on {device}: {why}")]
    MissingCapability {
        capability: Capability,
        device: String,
        why: String,
    },

    /// The ISA emulator stopped the kernel's machine code: an access outside every allocation
    /// (reads included), a register read before the wait for its load, a hang, a bad branch.
    #[error("the machine code of {kernel} faulted at {at:#x} `{inst}`: {detail}")]
    MachineCode {
        kernel: String,
        at: u64,
        inst: String,
        detail: String,
    },

    #[error("the inputs were validated for {validated}, but the launch is of {kernel}")]
    WrongKernel {
        kernel: KernelId,
        validated: KernelId,
    },
}

fn fmt_detail(d: &str) -> String {
    if d.is_empty() {
        String::new()
    } else {
        format!(" ({d})")
    }
}

impl DeviceFault {
    /// Builds the fault for a failed driver status of class `class`.
    pub fn from_status(class: FaultClass, during: &str, code: &str) -> DeviceFault {
        match class {
            FaultClass::Launch => DeviceFault::Launch {
                kernel: during.to_string(),
                code: code.to_string(),
                detail: String::new(),
            },
            FaultClass::Sticky | FaultClass::Fatal => DeviceFault::Sticky {
                during: during.to_string(),
                code: code.to_string(),
            },
            FaultClass::OutOfMemory => DeviceFault::OutOfMemory {
                during: during.to_string(),
                code: code.to_string(),
            },
            FaultClass::Call => DeviceFault::Call {
                during: during.to_string(),
                code: code.to_string(),
            },
        }
    }

    /// After this fault nothing more can run in this process's context.
    pub fn context_unusable(&self) -> bool {
        matches!(
            self,
            DeviceFault::Sticky { .. }
                | DeviceFault::Timeout { .. }
                | DeviceFault::ContextLost { .. }
        )
    }

    /// The capability the device lacks, when that is all this is (the check is a SKIP, not a
    /// FAULT: the device did nothing wrong).
    pub fn missing_capability(&self) -> Option<Capability> {
        match self {
            DeviceFault::MissingCapability { capability, .. } => Some(*capability),
            _ => None,
        }
    }

    /// A short stable name for verdict rows (no driver strings, no timings).
    pub fn kind(&self) -> &'static str {
        match self {
            DeviceFault::Launch { .. } => "launch-error",
            DeviceFault::Sticky { .. } => "device-fault",
            DeviceFault::Timeout { .. } => "timeout",
            DeviceFault::Call { .. } => "driver-error",
            DeviceFault::OutOfMemory { .. } => "out-of-memory",
            DeviceFault::Compile { .. } => "compile-error",
            DeviceFault::ContextLost { .. } => "context-lost",
            DeviceFault::Unsupported { .. } => "unsupported",
            DeviceFault::MissingCapability { .. } => "missing-capability",
            DeviceFault::WrongKernel { .. } => "wrong-kernel",
            DeviceFault::MachineCode { .. } => "machine-fault",
        }
    }
}

/// Whether a device can still take work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    Ok,
    /// An earlier sticky fault or timeout; only a fresh process helps.
    Lost {
        cause: String,
    },
}

impl Health {
    /// A backend's health from its sticky-fault record (the cause, once the context is lost).
    pub fn from_lost(lost: &std::sync::Mutex<Option<String>>) -> Health {
        match lost.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            None => Health::Ok,
            Some(cause) => Health::Lost {
                cause: cause.clone(),
            },
        }
    }
}

/// The watchdog limit for one synchronisation: `W4A16_WATCHDOG_S` seconds (default 20).
pub fn watchdog_timeout() -> Duration {
    parse_watchdog(std::env::var("W4A16_WATCHDOG_S").ok().as_deref()).unwrap_or_else(|bad| {
        let bad = bad.value;
        eprintln!("W4A16: ignoring W4A16_WATCHDOG_S={bad:?} (want positive seconds); using {DEFAULT_WATCHDOG_S} s");
        Duration::from_secs_f64(DEFAULT_WATCHDOG_S)
    })
}

pub const DEFAULT_WATCHDOG_S: f64 = 20.0;

/// A `W4A16_WATCHDOG_S` that is not a positive finite number of seconds (below 10^6).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("W4A16_WATCHDOG_S={value:?} is not a positive number of seconds")]
pub struct BadWatchdog {
    pub value: String,
}

/// `None` → default; a positive finite number of seconds → that; anything else → the bad value.
pub fn parse_watchdog(value: Option<&str>) -> Result<Duration, BadWatchdog> {
    match value.map(str::trim) {
        None | Some("") => Ok(Duration::from_secs_f64(DEFAULT_WATCHDOG_S)),
        Some(v) => match v.parse::<f64>() {
            Ok(s) if s.is_finite() && s > 0.0 && s < 1e6 => Ok(Duration::from_secs_f64(s)),
            _ => Err(BadWatchdog {
                value: v.to_string(),
            }),
        },
    }
}

/// A GPU whose architecture has no harness target: no snapshots or tile tables for it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UnknownArch {
    #[error(
        "sm_{major}{minor} (compute capability {major}.{minor}) has no harness target; known NVIDIA targets: sm_90"
    )]
    ComputeCapability { major: i32, minor: i32 },
    /// `known`: the AMD targets, comma-separated.
    #[error("{gcn_arch_name:?} has no harness target; known AMD targets: {known}")]
    GcnArch {
        gcn_arch_name: String,
        known: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_values() {
        assert_eq!(parse_watchdog(None), Ok(Duration::from_secs(20)));
        assert_eq!(parse_watchdog(Some("2.5")), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_watchdog(Some("0")).unwrap_err().value, "0");
        assert_eq!(parse_watchdog(Some("-1")).unwrap_err().value, "-1");
        assert_eq!(parse_watchdog(Some("soon")).unwrap_err().value, "soon");
    }

    #[test]
    fn unusable_faults() {
        let sticky = DeviceFault::from_status(
            FaultClass::Sticky,
            "sync after skinny",
            "CUDA_ERROR_ILLEGAL_ADDRESS",
        );
        assert!(sticky.context_unusable());
        assert_eq!(sticky.kind(), "device-fault");
        let launch =
            DeviceFault::from_status(FaultClass::Launch, "skinny", "CUDA_ERROR_INVALID_VALUE");
        assert!(!launch.context_unusable());
        assert!(launch.to_string().contains("still usable"), "{launch}");
        let t = DeviceFault::Timeout {
            during: "sync after fused".into(),
            after: Duration::from_secs(3),
        };
        assert!(t.context_unusable());
        assert!(t.to_string().contains("3.0 s watchdog"), "{t}");
        assert_eq!(t.missing_capability(), None);
    }

    #[test]
    fn a_missing_capability_names_it_and_survives_the_worker_pipe() {
        let f = DeviceFault::MissingCapability {
            capability: Capability::VendorBlas,
            device: "AMD Radeon 8060S (gfx1151)".into(),
            why: "neither libhipblaslt.so nor libhipblas.so could be loaded".into(),
        };
        assert_eq!(f.missing_capability(), Some(Capability::VendorBlas));
        assert!(!f.context_unusable());
        assert_eq!(
            f.to_string(),
            "the vendor BLAS is not available on AMD Radeon 8060S (gfx1151): neither libhipblaslt.so nor libhipblas.so could be loaded"
        );
        let json = serde_json::to_string(&f).unwrap();
        assert_eq!(serde_json::from_str::<DeviceFault>(&json).unwrap(), f);
        let t = DeviceFault::Timeout {
            during: "sync".into(),
            after: Duration::from_millis(1500),
        };
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<DeviceFault>(&json).unwrap(), t);
    }
}
