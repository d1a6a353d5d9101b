//! GPU targets the harness knows: the three RDNA parts users run, gfx942 (wave64, for the
//! selection model) and the H200 we can reach.

use serde::{Deserialize, Serialize};

w4a16_reference::named_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Target {
        Gfx1100 = "gfx1100",
        Gfx1151 = "gfx1151",
        Gfx1201 = "gfx1201",
        Gfx942 = "gfx942",
        Sm90 = "sm_90" | "sm90",
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    Amd,
    Nvidia,
}

impl Target {
    /// The AMD targets we build code objects for by default.
    pub const AMD_CODE_OBJECT_TARGETS: [Target; 3] =
        [Target::Gfx1100, Target::Gfx1151, Target::Gfx1201];

    pub fn vendor(self) -> Vendor {
        match self {
            Target::Sm90 => Vendor::Nvidia,
            _ => Vendor::Amd,
        }
    }

    /// Lanes per wave/warp.
    pub fn wave_size(self) -> u32 {
        match self {
            Target::Gfx942 => 64,
            _ => 32,
        }
    }

    /// gfx11 family (RDNA3/3.5).
    pub fn is_gfx11(self) -> bool {
        matches!(self, Target::Gfx1100 | Target::Gfx1151)
    }

    pub fn is_gfx12(self) -> bool {
        matches!(self, Target::Gfx1201)
    }

    /// Shared memory (LDS) one workgroup may use, in bytes.
    pub fn shared_mem_bytes(self) -> usize {
        match self {
            Target::Sm90 => 227 * 1024,
            _ => 64 * 1024,
        }
    }

    /// The gfx11 cache-cliff row padding of docs/contract.md §5 applies by default.
    pub fn pads_cache_cliff(self) -> bool {
        self.is_gfx11()
    }
}

/// How the kernels of a target's configuration run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Execution {
    /// On the target's own GPU.
    Native,
    /// The AMD target's configuration compiled for and run on an NVIDIA GPU, its builtins
    /// emulated (`crate::emulation`): checks the AMD algorithms and layouts, not the hardware.
    Emulated,
}

/// A target as a run names it: `gfx1151` (native) or `gfx1151-emu` (emulated). The host side
/// (selection, tiles, padding, tolerances) reads `target`; snapshots and repro lines use the
/// whole name, so emulated and native verdicts never share a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RunTarget {
    pub target: Target,
    pub execution: Execution,
}

/// The suffix that names an emulated target.
pub const EMULATED_SUFFIX: &str = "-emu";

impl RunTarget {
    pub fn native(target: Target) -> RunTarget {
        RunTarget {
            target,
            execution: Execution::Native,
        }
    }

    /// `target`'s AMD configuration on an NVIDIA GPU; only the RDNA code-object targets have one.
    pub fn emulated(target: Target) -> Result<RunTarget, crate::emulation::NotEmulable> {
        crate::emulation::gfx_number(target)?;
        Ok(RunTarget {
            target,
            execution: Execution::Emulated,
        })
    }

    /// Every emulated target, in `Target` order.
    pub fn all_emulated() -> Vec<RunTarget> {
        Target::AMD_CODE_OBJECT_TARGETS
            .into_iter()
            .filter_map(|t| RunTarget::emulated(t).ok())
            .collect()
    }

    /// `gfx1151`, `sm_90`, or `gfx1151-emu`.
    pub fn parse(s: &str) -> Option<RunTarget> {
        match s.strip_suffix(EMULATED_SUFFIX) {
            Some(base) => RunTarget::emulated(Target::parse(base)?).ok(),
            None => Target::parse(s).map(RunTarget::native),
        }
    }

    /// Every run target: each target natively, then each emulated one.
    pub fn all() -> Vec<RunTarget> {
        Target::ALL
            .into_iter()
            .map(RunTarget::native)
            .chain(RunTarget::all_emulated())
            .collect()
    }

    /// Every name `parse` accepts (aliases aside), for error messages.
    pub fn known_names() -> Vec<String> {
        RunTarget::all().iter().map(RunTarget::name).collect()
    }

    /// Further spellings `parse` accepts for this target (`sm90`).
    pub fn aliases(&self) -> &'static [&'static str] {
        match self.execution {
            Execution::Native => self.target.aliases(),
            Execution::Emulated => &[],
        }
    }

    pub fn name(&self) -> String {
        match self.execution {
            Execution::Native => self.target.name().to_string(),
            Execution::Emulated => format!("{}{EMULATED_SUFFIX}", self.target.name()),
        }
    }

    pub fn is_emulated(&self) -> bool {
        self.execution == Execution::Emulated
    }

    /// NVRTC options beyond the architecture: an emulated target's macros, none natively.
    pub fn nvrtc_options(&self) -> Result<Vec<String>, crate::emulation::NotEmulable> {
        match self.execution {
            Execution::Native => Ok(Vec::new()),
            Execution::Emulated => crate::emulation::nvrtc_options(self.target),
        }
    }

    /// Who runs the kernels: the target's vendor, or NVIDIA for an emulated target.
    pub fn executing_vendor(&self) -> Vendor {
        match self.execution {
            Execution::Native => self.target.vendor(),
            Execution::Emulated => Vendor::Nvidia,
        }
    }
}

impl From<Target> for RunTarget {
    fn from(t: Target) -> RunTarget {
        RunTarget::native(t)
    }
}

impl std::fmt::Display for RunTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_target_names_round_trip() {
        for name in RunTarget::known_names() {
            let t = RunTarget::parse(&name).unwrap_or_else(|| panic!("{name} does not parse"));
            assert_eq!(t.name(), name);
        }
        let emu = RunTarget::parse("gfx1151-emu").unwrap();
        assert_eq!(emu.target, Target::Gfx1151);
        assert!(emu.is_emulated());
        assert_eq!(emu.executing_vendor(), Vendor::Nvidia);
        assert_eq!(
            RunTarget::parse("gfx1151").unwrap().executing_vendor(),
            Vendor::Amd
        );
    }

    #[test]
    fn only_rdna_targets_have_an_emulated_name() {
        assert_eq!(RunTarget::parse("sm_90-emu"), None);
        assert_eq!(RunTarget::parse("gfx942-emu"), None);
        assert_eq!(RunTarget::parse("gfx1151-em"), None);
        assert_eq!(RunTarget::all_emulated().len(), 3);
    }
}
