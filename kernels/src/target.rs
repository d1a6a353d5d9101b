//! GPU targets the harness knows: the three RDNA parts users run, gfx942 (wave64, for the
//! selection model) and the H200 we can reach.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    Gfx1100,
    Gfx1151,
    Gfx1201,
    Gfx942,
    Sm90,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    Amd,
    Nvidia,
}

impl Target {
    pub const ALL: [Target; 5] = [
        Target::Gfx1100,
        Target::Gfx1151,
        Target::Gfx1201,
        Target::Gfx942,
        Target::Sm90,
    ];
    /// The AMD targets we build code objects for by default.
    pub const AMD_CODE_OBJECT_TARGETS: [Target; 3] =
        [Target::Gfx1100, Target::Gfx1151, Target::Gfx1201];

    pub fn name(self) -> &'static str {
        match self {
            Target::Gfx1100 => "gfx1100",
            Target::Gfx1151 => "gfx1151",
            Target::Gfx1201 => "gfx1201",
            Target::Gfx942 => "gfx942",
            Target::Sm90 => "sm_90",
        }
    }

    pub fn parse(s: &str) -> Option<Target> {
        Target::ALL
            .into_iter()
            .find(|t| t.name() == s || (s == "sm90" && *t == Target::Sm90))
    }

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

    /// The gfx11 cache-cliff row padding of SPEC §5 applies by default.
    pub fn pads_cache_cliff(self) -> bool {
        self.is_gfx11()
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
