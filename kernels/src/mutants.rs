//! Seeded bugs: the catalogue of `kernels/mutants/*.toml` (data, not code) and its application to
//! the kernel sources. Each mutant is one realistic mistake in one place of one file, labelled
//! with the bug class it stands for; `w4a16 mutants` runs the suites against every mutant and
//! reports which ones the harness catches (its detection power).
//!
//! A pattern is an exact substring that must occur in the base sources as often as the entry
//! says (once unless `occurs` says otherwise; `nth` then picks the one replaced), so that a
//! kernel edit that moves a pattern breaks the catalogue loudly instead of silently disarming a
//! mutant.

use crate::source::{KernelSources, SourceError, SourceFile};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The kinds of bug a mutant stands for: docs/field.md §6's fifteen classes, the four classes the
/// project added (docs/field.md §8) and two families of plain kernel mistakes that neither numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BugClass {
    /// docs/field.md §6.1: packed `[N/8, G]` zero points read with another layout.
    ZeroPointLayout,
    /// docs/field.md §6.2: the selected kernel's ABI is not what the build provides.
    SelectionAbi,
    /// docs/field.md §6.3: one scale per K tile when the tile is wider than the group.
    ScaleAliasing,
    /// docs/field.md §6.4: padded strides (weights, scales, X, Y, the dense copy) ignored or misused.
    PaddedStrides,
    /// docs/field.md §6.5: ragged M, N, K tails.
    RaggedShapes,
    /// docs/field.md §6.6: symmetric checkpoints that still carry qzeros.
    SymWithQzeros,
    /// docs/field.md §6.7: symmetric layer + dense dequant cache (the zero point lost on that path).
    SymDenseCache,
    /// docs/field.md §6.8: bf16 asym, cast before subtract; the magic-offset cancellation.
    Bf16Cancellation,
    /// docs/field.md §6.9: fp16 rounding order (pre-rounded bias_eff, FMA vs mul + add).
    Fp16Rounding,
    /// docs/field.md §6.10: an arch-specific layout or reduction width used where it does not hold.
    ArchGate,
    /// docs/field.md §6.11: split-K summed in arrival order (atomics): nondeterministic bits.
    SplitKNondeterminism,
    /// docs/field.md §6.12: the capacity gate and the shared-memory buffers disagree.
    LdsGate,
    /// docs/field.md §6.13: bias in fp32 before the cast vs in the activation dtype after it; bias index.
    BiasOrder,
    /// docs/field.md §6.14: fused silu·mul precision order.
    FusedSiluMul,
    /// docs/field.md §6.15: group sizes the kernel does not really implement.
    GroupSizeGaps,
    /// docs/field.md §8.1: 16-byte vector loads of X rows whose stride or base is not 16-byte aligned.
    UnalignedVectorX,
    /// docs/field.md §8.2: reads past the end of a tensor whose values never reach an output.
    UnusedOobRead,
    /// docs/contract.md §4: nibble order, shifts and magic offsets of the int4 unpack.
    NibbleUnpack,
    /// A missing barrier or a pipeline wait for too few copies: a race.
    MissingSync,
    /// docs/field.md §8.3: MoE routing mistakes: a slot computed with another expert's weights, the routed
    /// weight skipped, the align step's padding or slot order lost.
    ExpertRouting,
    /// docs/field.md §8.4: a matrix instruction's A and B fragments in each other's roles (the tile's
    /// product comes out transposed); only running the machine code shows it.
    MatrixOperands,
    /// docs/field.md §8.5: a second rounding in an epilogue: the accumulator or a factor (the
    /// routed weight) rounded to the activation dtype before the one cast.
    DoubleRounding,
    /// docs/field.md §8.6: MoE routing buffers used past their logical length: the align step
    /// writing past the padded length or the last block, a `moe` block run at or past it.
    RoutingBounds,
    /// docs/perf-counters.md: a kernel made slower without changing its output (an extra pass
    /// over the weights); only the perf gate (counters on the ISA emulator, timings on a GPU)
    /// can flag it, so its mutants are equivalent for the suites.
    Slowdown,
}

impl BugClass {
    pub const ALL: [BugClass; 24] = [
        BugClass::ZeroPointLayout,
        BugClass::SelectionAbi,
        BugClass::ScaleAliasing,
        BugClass::PaddedStrides,
        BugClass::RaggedShapes,
        BugClass::SymWithQzeros,
        BugClass::SymDenseCache,
        BugClass::Bf16Cancellation,
        BugClass::Fp16Rounding,
        BugClass::ArchGate,
        BugClass::SplitKNondeterminism,
        BugClass::LdsGate,
        BugClass::BiasOrder,
        BugClass::FusedSiluMul,
        BugClass::GroupSizeGaps,
        BugClass::UnalignedVectorX,
        BugClass::UnusedOobRead,
        BugClass::NibbleUnpack,
        BugClass::MissingSync,
        BugClass::ExpertRouting,
        BugClass::MatrixOperands,
        BugClass::DoubleRounding,
        BugClass::RoutingBounds,
        BugClass::Slowdown,
    ];

    /// Where the class is defined: `docs/field.md §6.n` or `§8.n`, `docs/contract.md §4` or `kernels`.
    pub fn origin(self) -> &'static str {
        match self {
            BugClass::ZeroPointLayout => "docs/field.md §6.1",
            BugClass::SelectionAbi => "docs/field.md §6.2",
            BugClass::ScaleAliasing => "docs/field.md §6.3",
            BugClass::PaddedStrides => "docs/field.md §6.4",
            BugClass::RaggedShapes => "docs/field.md §6.5",
            BugClass::SymWithQzeros => "docs/field.md §6.6",
            BugClass::SymDenseCache => "docs/field.md §6.7",
            BugClass::Bf16Cancellation => "docs/field.md §6.8",
            BugClass::Fp16Rounding => "docs/field.md §6.9",
            BugClass::ArchGate => "docs/field.md §6.10",
            BugClass::SplitKNondeterminism => "docs/field.md §6.11",
            BugClass::LdsGate => "docs/field.md §6.12",
            BugClass::BiasOrder => "docs/field.md §6.13",
            BugClass::FusedSiluMul => "docs/field.md §6.14",
            BugClass::GroupSizeGaps => "docs/field.md §6.15",
            BugClass::UnalignedVectorX => "docs/field.md §8.1",
            BugClass::UnusedOobRead => "docs/field.md §8.2",
            BugClass::NibbleUnpack => "docs/contract.md §4",
            BugClass::MissingSync => "kernels",
            BugClass::ExpertRouting => "docs/field.md §8.3",
            BugClass::MatrixOperands => "docs/field.md §8.4",
            BugClass::DoubleRounding => "docs/field.md §8.5",
            BugClass::RoutingBounds => "docs/field.md §8.6",
            BugClass::Slowdown => "docs/perf-counters.md",
        }
    }

    /// The classes every catalogue must cover (by a mutant or a recorded reason): the field's fifteen
    /// (docs/field.md §6) and the two read gaps (docs/field.md §8.1–8.2).
    pub fn required(self) -> bool {
        self.origin().starts_with("docs/field.md §6.")
            || matches!(self, BugClass::UnalignedVectorX | BugClass::UnusedOobRead)
    }

    /// The catalogue spelling (`zero-point-layout`).
    pub fn name(self) -> String {
        serde_json::to_string(&self)
            .map(|s| s.trim_matches('"').to_owned())
            .unwrap_or_default()
    }
}

impl std::fmt::Display for BugClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// One seeded bug.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mutant {
    /// Stable name (`skinny-zp-nibble-reversed`).
    pub id: String,
    pub file: SourceFile,
    /// Exact text that occurs `occurs` times in `file`.
    pub pattern: String,
    /// How often `pattern` occurs in the base sources (default 1).
    #[serde(default = "one")]
    pub occurs: usize,
    /// Which occurrence (1-based) is replaced; required when `occurs` > 1.
    #[serde(default)]
    pub nth: Option<usize>,
    pub replacement: String,
    pub class: BugClass,
    /// One line: the mistake, as a kernel engineer would make it.
    pub description: String,
    /// Why the mutant cannot change any result (it is then left out of the kill rate), on
    /// every run target but those in `live_on`.
    #[serde(default)]
    pub equivalent: Option<String>,
    /// Run targets where that equivalence does not hold (`gfx1100-emu`: a mutant of a gfx11-only
    /// branch is equivalent on sm_90 and live where the branch is compiled).
    #[serde(default)]
    pub live_on: Vec<String>,
    /// Why the mutant is expected not to compile (it is then reported as stillborn, never run;
    /// the NVRTC test checks that it indeed does not compile, and that every other one does).
    #[serde(default)]
    pub stillborn: Option<String>,
}

fn one() -> usize {
    1
}

/// A docs/field.md §6 class (or gap) without a kernel-source form here, with the reason and the
/// closest kernel-side mutants.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutsideSources {
    pub class: BugClass,
    pub reason: String,
    /// Ids of the catalogue's closest kernel-side mutants (may be empty).
    #[serde(default)]
    pub closest: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogueFile {
    #[serde(default)]
    mutant: Vec<Mutant>,
    #[serde(default)]
    outside: Vec<OutsideSources>,
}

/// Every mutant and every recorded class without a source form, from all files of a folder.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalogue {
    pub mutants: Vec<Mutant>,
    pub outside: Vec<OutsideSources>,
}

/// A catalogue that cannot be used; every variant names the file or mutant at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CatalogueError {
    #[error("{}: {reason}", path.display())]
    Read { path: PathBuf, reason: String },
    #[error("{}: {reason}", path.display())]
    Parse { path: PathBuf, reason: String },
    #[error("{}: no catalogue files (*.toml)", dir.display())]
    Empty { dir: PathBuf },
    #[error("mutant `{id}` is defined twice ({} and {})", first.display(), second.display())]
    DuplicateId {
        id: String,
        first: PathBuf,
        second: PathBuf,
    },
    #[error("mutant `{id}`: {what}")]
    Invalid { id: String, what: String },
    #[error(
        "mutant `{id}`: pattern {pattern:?} occurs {found} times in {file}, the catalogue says {expected}"
    )]
    PatternCount {
        id: String,
        file: SourceFile,
        pattern: String,
        expected: usize,
        found: usize,
    },
    #[error("outside-sources record of {class}: closest mutant `{id}` is not in the catalogue")]
    UnknownClosest { class: BugClass, id: String },
    #[error("class {class} has neither a mutant nor an outside-sources record")]
    Uncovered { class: BugClass },
    #[error(transparent)]
    Source(#[from] SourceError),
}

/// `kernels/mutants/` of this checkout.
pub fn catalogue_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("mutants")
}

impl Catalogue {
    /// Reads every `*.toml` of `dir` (in name order) and checks ids, fields and records; the
    /// patterns are checked against sources by [`Catalogue::check_against`].
    pub fn load(dir: &Path) -> Result<Catalogue, CatalogueError> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| CatalogueError::Read {
                path: dir.to_owned(),
                reason: e.to_string(),
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(CatalogueError::Empty {
                dir: dir.to_owned(),
            });
        }
        let mut cat = Catalogue::default();
        let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
        for path in files {
            let text = std::fs::read_to_string(&path).map_err(|e| CatalogueError::Read {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            let file: CatalogueFile = toml::from_str(&text).map_err(|e| CatalogueError::Parse {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            for m in file.mutant {
                if let Some(first) = seen.insert(m.id.clone(), path.clone()) {
                    return Err(CatalogueError::DuplicateId {
                        id: m.id,
                        first,
                        second: path,
                    });
                }
                m.validate()?;
                cat.mutants.push(m);
            }
            cat.outside.extend(file.outside);
        }
        for o in &cat.outside {
            for id in &o.closest {
                if cat.mutant(id).is_none() {
                    return Err(CatalogueError::UnknownClosest {
                        class: o.class,
                        id: id.clone(),
                    });
                }
            }
        }
        Ok(cat)
    }

    pub fn mutant(&self, id: &str) -> Option<&Mutant> {
        self.mutants.iter().find(|m| m.id == id)
    }

    /// Every pattern occurs in `sources` exactly as its entry says.
    pub fn check_against(&self, sources: &KernelSources) -> Result<(), CatalogueError> {
        let mut texts = BTreeMap::new();
        for f in SourceFile::ALL {
            texts.insert(f, sources.read(f)?.into_owned());
        }
        for m in &self.mutants {
            m.apply(&texts[&m.file])?;
        }
        Ok(())
    }

    /// The mutants of each class.
    pub fn by_class(&self) -> BTreeMap<BugClass, Vec<&Mutant>> {
        let mut out: BTreeMap<BugClass, Vec<&Mutant>> = BTreeMap::new();
        for m in &self.mutants {
            out.entry(m.class).or_default().push(m);
        }
        out
    }

    /// Every required class has a mutant or an outside-sources record.
    pub fn check_coverage(&self) -> Result<(), CatalogueError> {
        let with_mutant: BTreeSet<BugClass> = self.mutants.iter().map(|m| m.class).collect();
        let recorded: BTreeSet<BugClass> = self.outside.iter().map(|o| o.class).collect();
        match BugClass::ALL
            .into_iter()
            .filter(|c| c.required())
            .find(|c| !with_mutant.contains(c) && !recorded.contains(c))
        {
            Some(class) => Err(CatalogueError::Uncovered { class }),
            None => Ok(()),
        }
    }
}

impl Mutant {
    fn invalid(&self, what: impl Into<String>) -> CatalogueError {
        CatalogueError::Invalid {
            id: self.id.clone(),
            what: what.into(),
        }
    }

    /// Why the mutant cannot change a result on `target` (a run target name), if it cannot.
    pub fn equivalent_on(&self, target: &str) -> Option<&str> {
        self.equivalent
            .as_deref()
            .filter(|_| !self.live_on.iter().any(|t| t == target))
    }

    fn validate(&self) -> Result<(), CatalogueError> {
        let id_ok = !self.id.is_empty()
            && self
                .id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !id_ok {
            return Err(self.invalid("id: expected lowercase letters, digits and dashes"));
        }
        if self.pattern.is_empty() {
            return Err(self.invalid("pattern: expected non-empty text"));
        }
        if self.pattern == self.replacement {
            return Err(self.invalid("replacement: expected text other than the pattern"));
        }
        if self.description.trim().is_empty() || self.description.contains('\n') {
            return Err(self.invalid("description: expected one non-empty line"));
        }
        if self.equivalent.is_some() && self.stillborn.is_some() {
            return Err(self.invalid("equivalent and stillborn: expected at most one"));
        }
        if !self.live_on.is_empty() && self.equivalent.is_none() {
            return Err(
                self.invalid("live_on: only a mutant marked equivalent can be live elsewhere")
            );
        }
        if let Some(bad) = self
            .live_on
            .iter()
            .find(|t| crate::RunTarget::parse(t).is_none())
        {
            return Err(self.invalid(format!(
                "live_on: {bad:?} is not a target; expected one of {}",
                crate::RunTarget::known_names().join(", ")
            )));
        }
        if self.occurs == 0 {
            return Err(self.invalid("occurs: expected 1 or more"));
        }
        match self.nth {
            None if self.occurs > 1 => Err(self.invalid(format!(
                "nth: required when the pattern occurs {} times",
                self.occurs
            ))),
            Some(n) if n == 0 || n > self.occurs => {
                Err(self.invalid(format!("nth: expected 1..={}, got {n}", self.occurs)))
            }
            _ => Ok(()),
        }
    }

    /// `text` with the chosen occurrence of the pattern replaced; the pattern must occur exactly
    /// `occurs` times (non-overlapping).
    pub fn apply(&self, text: &str) -> Result<String, CatalogueError> {
        let at: Vec<usize> = text.match_indices(&self.pattern).map(|(i, _)| i).collect();
        if at.len() != self.occurs {
            return Err(CatalogueError::PatternCount {
                id: self.id.clone(),
                file: self.file,
                pattern: self.pattern.clone(),
                expected: self.occurs,
                found: at.len(),
            });
        }
        let start = at[self.nth.unwrap_or(1) - 1];
        let mut out = String::with_capacity(text.len() + self.replacement.len());
        out.push_str(&text[..start]);
        out.push_str(&self.replacement);
        out.push_str(&text[start + self.pattern.len()..]);
        Ok(out)
    }

    /// Writes the whole source set of `base` into `dir`, this mutant applied, and returns the
    /// folder as [`KernelSources`].
    pub fn write_tree(
        &self,
        base: &KernelSources,
        dir: &Path,
    ) -> Result<KernelSources, CatalogueError> {
        std::fs::create_dir_all(dir).map_err(|e| CatalogueError::Read {
            path: dir.to_owned(),
            reason: format!("creating the folder: {e}"),
        })?;
        for f in SourceFile::ALL {
            let text = base.read(f)?;
            let text = if f == self.file {
                self.apply(&text)?
            } else {
                text.into_owned()
            };
            let path = dir.join(f.name());
            std::fs::write(&path, text).map_err(|e| CatalogueError::Read {
                path,
                reason: format!("writing: {e}"),
            })?;
        }
        Ok(KernelSources::directory(dir)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mutant(pattern: &str, occurs: usize, nth: Option<usize>) -> Mutant {
        Mutant {
            id: "t".into(),
            file: SourceFile::Skinny,
            pattern: pattern.into(),
            occurs,
            nth,
            replacement: "X".into(),
            class: BugClass::RaggedShapes,
            description: "test".into(),
            equivalent: None,
            live_on: Vec::new(),
            stillborn: None,
        }
    }

    #[test]
    fn equivalence_can_be_lifted_per_target() {
        let mut m = mutant("b", 1, None);
        m.equivalent = Some("gfx11 branch only".into());
        m.live_on = vec!["gfx1100-emu".into()];
        assert!(m.validate().is_ok());
        assert_eq!(m.equivalent_on("sm_90"), Some("gfx11 branch only"));
        assert_eq!(m.equivalent_on("gfx1100-emu"), None);
        m.live_on = vec!["gfx1100-emulated".into()];
        let e = m.validate().unwrap_err().to_string();
        assert!(
            e.contains("live_on") && e.contains("gfx1100-emulated"),
            "{e}"
        );
        m.equivalent = None;
        m.live_on = vec!["gfx1100-emu".into()];
        let e = m.validate().unwrap_err().to_string();
        assert!(e.contains("only a mutant marked equivalent"), "{e}");
    }

    #[test]
    fn apply_replaces_exactly_the_chosen_occurrence() {
        assert_eq!(mutant("b", 1, None).apply("abc").unwrap(), "aXc");
        assert_eq!(mutant("b", 2, Some(2)).apply("abcb").unwrap(), "abcX");
        assert_eq!(mutant("b", 2, Some(1)).apply("abcb").unwrap(), "aXcb");
        assert!(matches!(
            mutant("b", 1, None).apply("abcb"),
            Err(CatalogueError::PatternCount {
                expected: 1,
                found: 2,
                ..
            })
        ));
        assert!(matches!(
            mutant("q", 1, None).apply("abc"),
            Err(CatalogueError::PatternCount { found: 0, .. })
        ));
    }

    #[test]
    fn invalid_entries_are_named() {
        assert!(mutant("b", 2, None).validate().is_err());
        assert!(mutant("b", 2, Some(3)).validate().is_err());
        assert!(mutant("", 1, None).validate().is_err());
        assert!(mutant("X", 1, None).validate().is_err());
        let mut m = mutant("b", 1, None);
        m.id = "Bad Id".into();
        assert!(matches!(m.validate(), Err(CatalogueError::Invalid { id, .. }) if id == "Bad Id"));
    }

    #[test]
    fn class_names_are_the_catalogue_spelling() {
        assert_eq!(BugClass::ZeroPointLayout.name(), "zero-point-layout");
        assert_eq!(BugClass::UnusedOobRead.name(), "unused-oob-read");
        let field = BugClass::ALL
            .iter()
            .filter(|c| c.origin().starts_with("docs/field.md §6."))
            .count();
        assert_eq!(field, 15);
        assert_eq!(BugClass::ALL.iter().filter(|c| c.required()).count(), 17);
    }
}
