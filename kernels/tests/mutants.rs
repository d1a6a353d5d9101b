//! The seeded-bug catalogue (`kernels/mutants/*.toml`) against the sources of this checkout:
//! every entry parses and is well formed, its pattern occurs exactly as stated (so a kernel edit
//! cannot disarm a mutant silently), applying it changes exactly one place, every class of
//! docs/field.md §6 and the two read gaps of §8 is covered or has a recorded reason, and — with NVRTC — every mutant
//! compiles for sm_90 except those marked stillborn, which must not ("compiles" is NVRTC's front
//! end: parsing, types, template instantiation; a GPU run compiles the PTX). Without NVRTC the compile
//! check is a loud skip (`W4A16_REQUIRE=nvrtc` makes it a failure).

use std::collections::BTreeSet;
use w4a16_kernels::mutants::{BugClass, Catalogue, CatalogueError, catalogue_dir};
use w4a16_kernels::nvrtc::{self, NvrtcError};
use w4a16_kernels::source::{KernelSources, SourceFile};

const ARCH: &str = "sm_90";

fn catalogue() -> Catalogue {
    Catalogue::load(&catalogue_dir()).unwrap_or_else(|e| panic!("{e}"))
}

mod common;
use common::skip_or_fail;

#[test]
fn the_catalogue_parses_and_holds_at_least_thirty_mutants() {
    let cat = catalogue();
    assert!(cat.mutants.len() >= 30, "{} mutants", cat.mutants.len());
    let ids: BTreeSet<&str> = cat.mutants.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids.len(), cat.mutants.len());
    // Every file of the set is mutated somewhere.
    let files: BTreeSet<SourceFile> = cat.mutants.iter().map(|m| m.file).collect();
    assert_eq!(files.len(), SourceFile::ALL.len(), "{files:?}");
    // Most mutants must count on the GPU we measure on: equivalents and stillborns are the
    // exception (a mutant of a branch another target compiles is equivalent here).
    let live = cat
        .mutants
        .iter()
        .filter(|m| m.equivalent_on("sm_90").is_none() && m.stillborn.is_none())
        .count();
    assert!(live >= 30, "{live} live mutants");
}

#[test]
fn every_pattern_occurs_as_stated_in_the_sources_of_this_checkout() {
    let cat = catalogue();
    cat.check_against(&KernelSources::Embedded)
        .unwrap_or_else(|e| panic!("{e}"));
    // The embedded copies are kernels/hip/ (source.rs checks it); check the folder too.
    cat.check_against(&KernelSources::directory(w4a16_kernels::source::hip_dir()).unwrap())
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn applying_a_mutant_changes_exactly_one_place() {
    for m in &catalogue().mutants {
        let base = m.file.embedded();
        let out = m.apply(base).unwrap();
        assert_ne!(out, base, "{}", m.id);
        // One contiguous edit: common prefix + replacement + common suffix = the whole text.
        let pre = base
            .bytes()
            .zip(out.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        let suf = base
            .bytes()
            .rev()
            .zip(out.bytes().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let changed_base = base.len().saturating_sub(pre + suf.min(base.len() - pre));
        assert!(
            changed_base <= m.pattern.len(),
            "{}: {changed_base} bytes changed, the pattern has {}",
            m.id,
            m.pattern.len()
        );
        assert_eq!(
            out.len() as isize - base.len() as isize,
            m.replacement.len() as isize - m.pattern.len() as isize,
            "{}",
            m.id
        );
        // Nothing else moved: removing the replacement at the pattern's place gives the base back.
        let at = base.find(&m.pattern).unwrap();
        assert_eq!(&out[..at], &base[..at], "{}", m.id);
        assert_eq!(
            &out[at + m.replacement.len()..],
            &base[at + m.pattern.len()..],
            "{}",
            m.id
        );
    }
}

#[test]
fn every_required_class_is_covered_or_has_a_recorded_reason() {
    let cat = catalogue();
    cat.check_coverage().unwrap_or_else(|e| panic!("{e}"));
    let with_mutant: BTreeSet<BugClass> = cat
        .mutants
        .iter()
        .filter(|m| m.stillborn.is_none())
        .map(|m| m.class)
        .collect();
    for class in BugClass::ALL.into_iter().filter(|c| c.required()) {
        let record = cat.outside.iter().find(|o| o.class == class);
        assert!(
            with_mutant.contains(&class) || record.is_some(),
            "{class} ({}) has no live mutant and no record",
            class.origin()
        );
        if let Some(r) = record {
            assert!(!r.reason.trim().is_empty(), "{class}: empty reason");
        }
    }
    // The two read gaps (docs/field.md §8.1–8.2) have real mutants, not only reasons.
    for gap in [BugClass::UnalignedVectorX, BugClass::UnusedOobRead] {
        assert!(with_mutant.contains(&gap), "{gap}");
    }
}

#[test]
fn a_pattern_that_moved_breaks_the_catalogue_loudly() {
    let dir = std::env::temp_dir().join(format!("w4a16-mutants-moved-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cat = catalogue();
    let m = &cat.mutants[0];
    // A base tree where the first mutant's pattern was edited away.
    let tree = m.write_tree(&KernelSources::Embedded, &dir).unwrap();
    let err = cat.check_against(&tree).unwrap_err();
    assert!(
        matches!(&err, CatalogueError::PatternCount { id, found: 0, .. } if *id == m.id),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_mutant_compiles_for_sm90_unless_marked_stillborn() {
    if let Err(u) = nvrtc::nvrtc_loadable().and_then(|_| nvrtc::find_cuda_include().map(|_| ())) {
        return skip_or_fail(&u.reason);
    }
    let cat = catalogue();
    let root = std::env::temp_dir().join(format!("w4a16-mutants-nvrtc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let problems = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(m) = cat.mutants.get(i) else { break };
                    let tree = m
                        .write_tree(&KernelSources::Embedded, &root.join(&m.id))
                        .unwrap();
                    let mut errors = Vec::new();
                    for kernel in m.file.kernels() {
                        match nvrtc::check_front_end(&tree, kernel, ARCH, &[]) {
                            Ok(_) => {}
                            Err(NvrtcError::Compile { log, .. }) => errors
                                .push(format!("{kernel}: {}", log.lines().next().unwrap_or(""))),
                            Err(e) => errors.push(format!("{kernel}: {e}")),
                        }
                    }
                    let mut p = problems.lock().unwrap();
                    match (&m.stillborn, errors.is_empty()) {
                        (None, false) => {
                            p.push(format!("{} does not compile: {}", m.id, errors.join("; ")))
                        }
                        (Some(why), true) => {
                            p.push(format!("{} is marked stillborn ({why}) but compiles", m.id))
                        }
                        _ => {}
                    }
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&root);
    let problems = problems.into_inner().unwrap();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
