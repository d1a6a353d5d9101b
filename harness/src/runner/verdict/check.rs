//! What a verdict is about, typed. `Display` is the second column of the verdict snapshots: it
//! must never change for an existing check (the committed snapshots are keyed by it), and
//! `FromStr` inverts it (a test reads every committed snapshot back through both). Serialized as
//! that string, so reports and the worker pipe keep their form.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use w4a16_kernels::KernelId;
use w4a16_reference::formats::Producer;

/// The kernels one output goes through, in launch order (`skinny`, `dequant+dense`); never empty.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelPath(Vec<KernelId>);

impl KernelPath {
    /// `None` for an empty path (no kernel takes the layer: there is nothing to name).
    pub fn new(kernels: Vec<KernelId>) -> Option<KernelPath> {
        (!kernels.is_empty()).then_some(KernelPath(kernels))
    }

    pub fn single(kernel: KernelId) -> KernelPath {
        KernelPath(vec![kernel])
    }

    pub fn kernels(&self) -> &[KernelId] {
        &self.0
    }
}

impl fmt::Display for KernelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, k) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("+")?;
            }
            f.write_str(k.name())?;
        }
        Ok(())
    }
}

impl FromStr for KernelPath {
    type Err = UnknownCheck;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let kernels: Option<Vec<KernelId>> = s.split('+').map(KernelId::parse).collect();
        kernels
            .and_then(KernelPath::new)
            .ok_or_else(|| UnknownCheck(s.to_string()))
    }
}

w4a16_reference::named_enum! {
    /// One of compute-sanitizer's tools, by the name `--tool` takes (and `--sanitize` offers).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum SanitizerTool {
        /// Out-of-bounds and misaligned accesses, hardware exceptions.
        Memcheck = "memcheck",
        /// Shared-memory data races.
        Racecheck = "racecheck",
        /// Misused barriers (`__syncthreads` in divergent code, bad `__syncwarp` masks).
        Synccheck = "synccheck",
        /// Reads of global memory nothing has written.
        Initcheck = "initcheck",
    }
}

impl SanitizerTool {
    /// The check of this tool's verdicts about a case as a whole (`sanitize:memcheck`).
    pub fn check(self) -> Check {
        self.check_of(SanitizeScope::Case)
    }

    /// The check of this tool's verdicts about `scope` (`sanitize:memcheck:skinny`).
    pub fn check_of(self, scope: SanitizeScope) -> Check {
        Check::Sanitize { tool: self, scope }
    }
}

/// Which part of a case a sanitizer verdict is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SanitizeScope {
    /// The case as a whole: reports that name no launched kernel, or the tool did not run.
    Case,
    /// One kernel the case launched.
    Kernel(KernelId),
    /// A worker's error summary counted errors no case's window held.
    WorkerSummary,
}

/// What one verdict checked.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Check {
    /// A path's output against the reference and its bound (`skinny`, `dequant+dense`); the
    /// dequant kernel's own bit-exact check is the one-kernel path `dequant`.
    Path(KernelPath),
    /// The selection and its static cross-check on the real tensors (`selection:<path>`), or
    /// `selection` alone when no kernel takes the layer.
    Selection(Option<KernelPath>),
    /// A producer's checkpoint read back by itself and through the converter (`convert:awq`).
    Convert(Producer),
    /// Two identical launches give the same bits (`determinism:fused`).
    Determinism(KernelId),
    /// Padded, strided and offset layouts give the unpadded contiguous bits (`padding:skinny`).
    Padding(KernelId),
    /// A fast kernel against the fallback, within both bounds (`second-opinion:fused`).
    SecondOpinion(KernelId),
    /// A sanitizer's findings (`sanitize:memcheck`, `sanitize:memcheck:skinny`,
    /// `sanitize:memcheck:summary`).
    Sanitize {
        tool: SanitizerTool,
        scope: SanitizeScope,
    },
    /// The asymmetric carrier built from the resident scales and packed zero points reads back
    /// as them (`carrier`; a carrier case's producer step).
    Carrier,
    /// The carrier handed over with the scales' padded row stride is refused before any launch
    /// (`carrier-stride-trap`, docs/field.md §6 item 4).
    CarrierStrideTrap,
    /// Seeded data generation for the case.
    Data,
    /// The f64 reference for the case.
    Reference,
    /// The exhaustive (q, z) dequant-trick tables.
    Exhaustive,
    /// A deliberately invalid case file is refused naming its file and key.
    Loader,
    /// The worker process running the case crashed or hung.
    Device,
    /// The worker could not set up the case's session.
    Session,
    /// The worker was handed a case id that is not in the case set.
    Case,
    /// A checkpoint's layer as its files hold it (`checkpoint`): detected, read and checked for
    /// known producer defects before any conversion; a refusal names the shard and tensor.
    Checkpoint,
    /// The producer library's own reading of a checkpoint (its dequantized weights and its
    /// output on the recorded activations) against ours (`oracle`).
    Oracle,
    /// An engine's fused projection (q|k|v, gate|up) built from its parts (`fused-projection`):
    /// the parts must agree in group size, dtype and symmetry to be fused.
    FusedProjection,
}

impl Check {
    /// A check every run makes once, outside any suite (the trick tables, the invalid case
    /// files): it has no suite's snapshot.
    pub fn run_wide(&self) -> bool {
        matches!(self, Check::Exhaustive | Check::Loader)
    }

    /// The check of `kernel`'s own output (a one-kernel path).
    pub fn kernel(kernel: KernelId) -> Check {
        Check::Path(KernelPath::single(kernel))
    }

    /// The kernels a launched-path check ran (for the sanitizer's windows); none for others.
    pub fn launched_kernels(&self) -> &[KernelId] {
        match self {
            Check::Path(p) => p.kernels(),
            _ => &[],
        }
    }

    const PLAIN: [(Check, &'static str); 12] = [
        (Check::Carrier, "carrier"),
        (Check::CarrierStrideTrap, "carrier-stride-trap"),
        (Check::Data, "data"),
        (Check::Reference, "reference"),
        (Check::Exhaustive, "exhaustive"),
        (Check::Loader, "loader"),
        (Check::Device, "device"),
        (Check::Session, "session"),
        (Check::Case, "case"),
        (Check::Checkpoint, "checkpoint"),
        (Check::Oracle, "oracle"),
        (Check::FusedProjection, "fused-projection"),
    ];
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Path(p) => write!(f, "{p}"),
            Check::Selection(None) => f.write_str("selection"),
            Check::Selection(Some(p)) => write!(f, "selection:{p}"),
            Check::Convert(p) => write!(f, "convert:{}", p.name()),
            Check::Determinism(k) => write!(f, "determinism:{k}"),
            Check::Padding(k) => write!(f, "padding:{k}"),
            Check::SecondOpinion(k) => write!(f, "second-opinion:{k}"),
            Check::Sanitize { tool, scope } => match scope {
                SanitizeScope::Case => write!(f, "sanitize:{tool}"),
                SanitizeScope::Kernel(k) => write!(f, "sanitize:{tool}:{k}"),
                SanitizeScope::WorkerSummary => write!(f, "sanitize:{tool}:summary"),
            },
            plain => {
                let name = Check::PLAIN
                    .iter()
                    .find(|(c, _)| c == plain)
                    .map(|(_, n)| *n)
                    .expect("every other check is plain");
                f.write_str(name)
            }
        }
    }
}

/// A check name that no [`Check`] displays as.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "no check is named {0:?} (expected a kernel path such as `skinny` or `dequant+dense`, `selection[:<path>]`, `convert:<producer>`, `determinism:<kernel>`, `padding:<kernel>`, `second-opinion:<kernel>`, `sanitize:<tool>[:<kernel>|:summary]`, or one of carrier, carrier-stride-trap, data, reference, exhaustive, loader, device, session, case, checkpoint, oracle, fused-projection)"
)]
pub struct UnknownCheck(pub String);

impl FromStr for Check {
    type Err = UnknownCheck;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || UnknownCheck(s.to_string());
        if let Some((c, _)) = Check::PLAIN.iter().find(|(_, n)| *n == s) {
            return Ok(c.clone());
        }
        if s == "selection" {
            return Ok(Check::Selection(None));
        }
        let kernel = |k: &str| KernelId::parse(k).ok_or_else(unknown);
        let Some((head, rest)) = s.split_once(':') else {
            return s.parse().map(Check::Path).map_err(|_| unknown());
        };
        match head {
            "selection" => rest
                .parse()
                .map(|p| Check::Selection(Some(p)))
                .map_err(|_| unknown()),
            "convert" => Producer::parse(rest)
                .map(Check::Convert)
                .ok_or_else(unknown),
            "determinism" => kernel(rest).map(Check::Determinism),
            "padding" => kernel(rest).map(Check::Padding),
            "second-opinion" => kernel(rest).map(Check::SecondOpinion),
            "sanitize" => {
                let (tool, scope) = match rest.split_once(':') {
                    None => (rest, SanitizeScope::Case),
                    Some((tool, "summary")) => (tool, SanitizeScope::WorkerSummary),
                    Some((tool, k)) => (tool, SanitizeScope::Kernel(kernel(k)?)),
                };
                let tool = SanitizerTool::parse(tool).ok_or_else(unknown)?;
                Ok(Check::Sanitize { tool, scope })
            }
            _ => Err(unknown()),
        }
    }
}

/// A check equals its name (the snapshot string).
impl PartialEq<str> for Check {
    fn eq(&self, name: &str) -> bool {
        name.parse::<Check>().is_ok_and(|c| c == *self)
    }
}

impl PartialEq<&str> for Check {
    fn eq(&self, name: &&str) -> bool {
        self == *name
    }
}

impl Serialize for Check {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Check {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_displays_as_its_name_and_parses_back() {
        use SanitizeScope::*;
        let dd = KernelPath::new(vec![KernelId::Dequant, KernelId::Dense]).unwrap();
        let cases: Vec<(Check, &str)> = vec![
            (Check::kernel(KernelId::Skinny), "skinny"),
            (Check::kernel(KernelId::Dequant), "dequant"),
            (Check::Path(dd.clone()), "dequant+dense"),
            (Check::Selection(None), "selection"),
            (Check::Selection(Some(dd)), "selection:dequant+dense"),
            (Check::Convert(Producer::GptqV1), "convert:gptq-v1"),
            (
                Check::Convert(Producer::LegacyUnpackedZp),
                "convert:legacy-unpacked-zp",
            ),
            (Check::Determinism(KernelId::Fused), "determinism:fused"),
            (Check::Padding(KernelId::Fallback), "padding:fallback"),
            (
                Check::SecondOpinion(KernelId::Skinny),
                "second-opinion:skinny",
            ),
            (
                Check::Sanitize {
                    tool: SanitizerTool::Memcheck,
                    scope: Case,
                },
                "sanitize:memcheck",
            ),
            (
                Check::Sanitize {
                    tool: SanitizerTool::Racecheck,
                    scope: Kernel(KernelId::Dequant),
                },
                "sanitize:racecheck:dequant",
            ),
            (
                Check::Sanitize {
                    tool: SanitizerTool::Initcheck,
                    scope: WorkerSummary,
                },
                "sanitize:initcheck:summary",
            ),
            (Check::Carrier, "carrier"),
            (Check::CarrierStrideTrap, "carrier-stride-trap"),
            (Check::kernel(KernelId::FusedCarrier), "fused_carrier"),
            (
                Check::SecondOpinion(KernelId::FusedCarrier),
                "second-opinion:fused_carrier",
            ),
            (Check::Data, "data"),
            (Check::Reference, "reference"),
            (Check::Exhaustive, "exhaustive"),
            (Check::Loader, "loader"),
            (Check::Device, "device"),
            (Check::Session, "session"),
            (Check::Case, "case"),
            (Check::Checkpoint, "checkpoint"),
            (Check::Oracle, "oracle"),
            (Check::FusedProjection, "fused-projection"),
        ];
        for (check, name) in cases {
            assert_eq!(check.to_string(), name);
            assert_eq!(name.parse::<Check>(), Ok(check.clone()), "{name}");
            let json = serde_json::to_string(&check).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<Check>(&json).unwrap(), check);
        }
    }

    #[test]
    fn unknown_names_are_refused_naming_them() {
        for bad in [
            "",
            "skiny",
            "dequant+",
            "selection:",
            "selection:none",
            "convert:gptq-v3",
            "determinism:dequant+dense",
            "sanitize:valgrind",
            "sanitize:memcheck:cublas",
            "padding",
        ] {
            let e = bad.parse::<Check>().unwrap_err();
            assert_eq!(e, UnknownCheck(bad.to_string()));
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
        assert!(serde_json::from_str::<Check>("\"skiny\"").is_err());
    }
}
