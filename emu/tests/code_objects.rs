//! The emulator's front end against the kernel set's real code objects, per target (gfx1100,
//! gfx1151, gfx1201):
//! - agreement: every instruction, parsed and printed back with `Display`, assembles with
//!   `llvm-mc` to exactly the bytes the disassembler read (parse and print are faithful);
//! - the committed instruction-coverage table `emu/coverage/<gfx>.md` is up to date;
//! - loader errors on a code object whose `.kd` symbol is gone and on a missing disassembler.
//!
//! The code objects are built (or found current in the build cache) by the kernel crate's AMD
//! builder, as every other code-object test does. No toolchain or no LLVM tools → a loud skip (a
//! failure under `W4A16_REQUIRE=amd-toolchain`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use w4a16_emu::coverage::{Coverage, tested_ops};
use w4a16_emu::inst::{Gen, Inst};
use w4a16_emu::program::{KernelMeta, LoadError, Program};
use w4a16_kernels::Target;
use w4a16_kernels::amd::{self, AmdBuildError, Builder};
use w4a16_require::{Requirement, Skip, skip_or_fail};

const TARGETS: [&str; 3] = ["gfx1100", "gfx1151", "gfx1201"];

fn skip(reason: String) {
    skip_or_fail(&Skip {
        requirement: Requirement::AmdToolchain,
        reason,
    });
}

/// The target's code objects, built or found current in the cache, sorted; `None` (after a
/// loud skip) without a toolchain.
fn code_objects(gfx: &str) -> Option<Vec<PathBuf>> {
    let builder = match Builder::from_env() {
        Ok(b) => b,
        Err(e @ AmdBuildError::ToolchainMissing { .. }) => {
            skip(e.to_string());
            return None;
        }
        Err(e) => panic!("{e}"),
    };
    let target = Target::parse(gfx).unwrap_or_else(|| panic!("{gfx} is a harness target"));
    let built = builder
        .build_all(&amd::kernel_sources(), &[target])
        .unwrap_or_else(|e| panic!("building the {gfx} code objects: {e}"));
    let mut found: Vec<PathBuf> = built.into_iter().map(|c| c.path).collect();
    found.sort();
    Some(found)
}

fn no_meta(_: &str) -> Option<KernelMeta> {
    Some(KernelMeta::default())
}

/// Every code object of `gfx`, loaded; `None` after a loud skip.
fn programs(gfx: &str) -> Option<Vec<Program>> {
    let paths = code_objects(gfx)?;
    let mut out = Vec::new();
    for p in paths {
        match Program::load(&p, gfx, no_meta) {
            Ok(prog) => out.push(prog),
            Err(e @ LoadError::Toolchain { .. }) => {
                skip(e.to_string());
                return None;
            }
            Err(e) => panic!("{e}"),
        }
    }
    Some(out)
}

/// `llvm-mc`: `$W4A16_LLVM_MC`, else `llvm-mc-19`, else `llvm-mc`.
fn llvm_mc() -> Option<PathBuf> {
    if let Some(t) = std::env::var_os("W4A16_LLVM_MC").filter(|t| !t.is_empty()) {
        return Some(PathBuf::from(t));
    }
    let dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    ["llvm-mc-19", "llvm-mc"]
        .iter()
        .find_map(|n| dirs.iter().map(|d| d.join(n)).find(|p| p.is_file()))
}

/// Assembles `lines` in one `llvm-mc -show-encoding` run: the bytes of each line, or its error.
fn assemble(mc: &Path, gfx: &str, lines: &[String]) -> Vec<Result<Vec<u8>, String>> {
    let mut child = Command::new(mc)
        .args(["-arch=amdgcn", &format!("-mcpu={gfx}"), "-show-encoding"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {}: {e}", mc.display()));
    let input = lines.join("\n") + "\n";
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("llvm-mc output");
    writer.join().expect("writer").expect("writing to llvm-mc");
    // Errors name their 1-based line: `<stdin>:LINE:COL: error: …`.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut errors: BTreeMap<usize, String> = BTreeMap::new();
    for l in stderr.lines() {
        if let Some(rest) = l.strip_prefix("<stdin>:")
            && let Some((n, msg)) = rest.split_once(':')
            && msg.contains("error:")
            && let Ok(n) = n.parse::<usize>()
        {
            errors
                .entry(n - 1)
                .or_insert_with(|| msg.trim().to_string());
        }
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut encodings = stdout
        .lines()
        .filter_map(|l| {
            let list = l.split_once("encoding: [")?.1.split(']').next()?;
            Some(
                list.split(',')
                    .map(|b| u8::from_str_radix(b.trim().trim_start_matches("0x"), 16))
                    .collect::<Result<Vec<u8>, _>>()
                    .map_err(|e| format!("encoding `{list}`: {e}")),
            )
        })
        .collect::<Vec<_>>()
        .into_iter();
    (0..lines.len())
        .map(|i| match errors.get(&i) {
            Some(e) => Err(e.clone()),
            None => encodings
                .next()
                .unwrap_or_else(|| Err("no encoding printed".to_string())),
        })
        .collect()
}

fn bytes_of(inst: &Inst) -> Vec<u8> {
    inst.words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Parse + Display agree with the bytes on every instruction of the set.
#[test]
fn every_instruction_prints_back_to_its_own_encoding() {
    let Some(mc) = llvm_mc() else {
        skip("llvm-mc-19 / llvm-mc not on $PATH (set W4A16_LLVM_MC)".to_string());
        return;
    };
    for gfx in TARGETS {
        let Some(programs) = programs(gfx) else {
            continue;
        };
        let mut texts: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let mut total = 0usize;
        let mut clashes = Vec::new();
        for k in programs.iter().flat_map(|p| &p.kernels) {
            for inst in &k.code {
                total += 1;
                let text = inst.to_string();
                let bytes = bytes_of(inst);
                if let Some(prev) = texts.get(&text) {
                    if *prev != bytes {
                        clashes.push(format!("`{text}`: {prev:02x?} and {bytes:02x?}"));
                    }
                } else {
                    texts.insert(text, bytes);
                }
            }
        }
        let lines: Vec<String> = texts.keys().cloned().collect();
        let assembled = assemble(&mc, gfx, &lines);
        let mut wrong = Vec::new();
        for ((text, expected), got) in texts.iter().zip(&assembled) {
            match got {
                Ok(b) if b == expected => {}
                Ok(b) => wrong.push(format!(
                    "`{text}`: llvm-mc {b:02x?}, code object {expected:02x?}"
                )),
                Err(e) => wrong.push(format!("`{text}`: llvm-mc rejects it: {e}")),
            }
        }
        eprintln!(
            "{gfx}: {total} instructions in {} code objects, {} distinct texts, {} agree with llvm-mc",
            programs.len(),
            texts.len(),
            texts.len() - wrong.len()
        );
        assert!(
            clashes.is_empty(),
            "{gfx}: one printed text for different encodings ({}):\n{}",
            clashes.len(),
            clashes[..clashes.len().min(20)].join("\n")
        );
        assert!(
            wrong.is_empty(),
            "{gfx}: {} of {} printed instructions do not assemble to their bytes:\n{}",
            wrong.len(),
            texts.len(),
            wrong[..wrong.len().min(30)].join("\n")
        );
    }
}

/// Every `.rs` file under `dir`, read.
fn sources(dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
            );
        }
    }
}

/// The coverage table per target is committed, current and full: every
/// instruction in the code objects is implemented and unit tested.
#[test]
fn the_committed_coverage_tables_are_current_and_full() {
    let mut texts = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut texts,
    );
    let tested = tested_ops(texts.iter().map(String::as_str));
    let write = std::env::var("W4A16_EMU_COVERAGE").is_ok_and(|v| v == "write");
    let mut stale = Vec::new();
    let mut gaps = Vec::new();
    for gfx in TARGETS {
        let Some(programs) = programs(gfx) else {
            continue;
        };
        let generation = Gen::of_target(gfx).expect("a target the emulator runs");
        let coverage = Coverage::compute(gfx, generation, &programs, &tested);
        let missing: Vec<&str> = coverage.missing().iter().map(|r| r.name.as_str()).collect();
        eprintln!(
            "{gfx}: {} ops, {} not yet implemented and unit tested: {}",
            coverage.rows.len(),
            missing.len(),
            missing.join(" ")
        );
        if !missing.is_empty() {
            gaps.push(format!("{gfx}: {}", missing.join(" ")));
        }
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("coverage/{gfx}.md"));
        let table = coverage.markdown();
        if write {
            std::fs::write(&path, &table).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(table.as_str()) {
            stale.push(format!(
                "{} (missing: {})",
                path.display(),
                missing.join(" ")
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "stale coverage tables; rerun with W4A16_EMU_COVERAGE=write and commit:\n{}",
        stale.join("\n")
    );
    assert!(
        gaps.is_empty(),
        "instructions of the code objects that are not implemented and unit tested:\n{}",
        gaps.join("\n")
    );
}

/// A code object whose `<kernel>.kd` symbol is renamed: the loader names the kernel.
#[test]
fn a_kernel_without_its_descriptor_is_a_load_error() {
    let Some(paths) = code_objects("gfx1100") else {
        return;
    };
    let path = paths
        .iter()
        .find(|p| p.ends_with("dequant.co"))
        .unwrap_or(&paths[0]);
    let mut elf = std::fs::read(path).unwrap();
    let mut renamed = 0;
    for i in 0..elf.len().saturating_sub(4) {
        if &elf[i..i + 4] == b".kd\0" {
            elf[i + 2] = b'x';
            renamed += 1;
        }
    }
    assert!(renamed > 0, "{}: no `.kd` symbol names", path.display());
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.co");
    std::fs::write(&broken, &elf).unwrap();
    match Program::load(&broken, "gfx1100", no_meta) {
        Err(e @ LoadError::MissingDescriptor { .. }) => {
            let text = e.to_string();
            assert!(text.contains("broken.co") && text.contains(".kd"), "{text}");
        }
        Err(e @ LoadError::Toolchain { .. }) => skip(e.to_string()),
        other => panic!("expected MissingDescriptor, got {other:?}"),
    }
}

/// A disassembler that is not there is a typed toolchain error (the caller's loud skip).
#[test]
fn a_missing_disassembler_is_a_toolchain_error() {
    let Some(paths) = code_objects("gfx1100") else {
        return;
    };
    let tool = Path::new("/nonexistent/llvm-objdump-19");
    match Program::load_with(&paths[0], "gfx1100", no_meta, tool) {
        Err(LoadError::Toolchain { tool: t, .. }) => assert!(t.contains("nonexistent"), "{t}"),
        other => panic!("expected Toolchain, got {other:?}"),
    }
}
