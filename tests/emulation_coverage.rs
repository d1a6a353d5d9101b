//! What the emulated AMD targets cover, from the preprocessed sources:
//! for each emulated target, the source lines of the kernel files, `compat.h` and
//! `amd_emulation.h` that the real target compiles (clang-19 `-x hip --offload-arch=gfxNNNN -E`,
//! the code-object build's options), which of those the emulated configuration compiles (the same
//! files preprocessed as NVRTC sees them: `__CUDACC_RTC__`, `__CUDACC__`, `__CUDA_ARCH__=900` and
//! `emulation::nvrtc_options(target)`; the sources test no other compiler macro), and the rest named
//! line by line. The rest must be the builtin leaves of `compat.h` (between its
//! `W4-GCN-LEAVES-BEGIN` and `W4-GCN-LEAVES-END` lines), which `amd_emulation.h` replaces: any other
//! line that the real target compiles and the emulation does not fails the test. The table is the
//! snapshot `snapshots/emulation-coverage@<target>.snap`.
//!
//! Emulation checks the AMD algorithms and layouts, not the AMD hardware.
//! No clang → a loud skip (a failure under `W4A16_REQUIRE=amd-toolchain`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use w4a16_harness::require::{Requirement, Skip, skip_or_fail};
use w4a16_kernels::amd::{Flavor, Toolchain};
use w4a16_kernels::source::{self, SourceFile};
use w4a16_kernels::{Target, emulation};

/// (file, 1-based line) of every source line that produced tokens.
type Lines = BTreeSet<(SourceFile, usize)>;

/// The lines of our sources in clang `-E` output, read through its line markers.
fn compiled_lines(preprocessed: &str) -> Lines {
    let mut out = Lines::new();
    let mut file: Option<SourceFile> = None;
    let mut line = 0usize;
    for text in preprocessed.lines() {
        if let Some(rest) = text.strip_prefix("# ") {
            // # <line> "<file>" <flags>
            let mut parts = rest.splitn(2, ' ');
            if let (Some(n), Some(name)) = (parts.next(), parts.next())
                && let Ok(n) = n.parse::<usize>()
            {
                let name = name.split('"').nth(1).unwrap_or("");
                file = Path::new(name)
                    .file_name()
                    .and_then(|f| SourceFile::parse(&f.to_string_lossy()));
                line = n;
                continue;
            }
        }
        if let Some(f) = file
            && !text.trim().is_empty()
        {
            out.insert((f, line));
        }
        line += 1;
    }
    out
}

/// The 1-based lines of `compat.h` strictly between the leaf markers.
fn leaf_lines(compat: &str) -> BTreeSet<usize> {
    let lines: Vec<&str> = compat.lines().collect();
    let begin = lines
        .iter()
        .position(|l| l.trim() == "// W4-GCN-LEAVES-BEGIN")
        .expect("compat.h: no W4-GCN-LEAVES-BEGIN line");
    let end = lines
        .iter()
        .position(|l| l.trim() == "// W4-GCN-LEAVES-END")
        .expect("compat.h: no W4-GCN-LEAVES-END line");
    assert!(begin < end, "compat.h: leaf markers out of order");
    (begin + 2..end + 1).collect()
}

/// The lines compiled for the real target and not for the emulation, outside the leaves.
fn uncovered(real: &Lines, emulated: &Lines, leaves: &BTreeSet<usize>) -> Vec<(SourceFile, usize)> {
    real.difference(emulated)
        .filter(|(f, l)| !(*f == SourceFile::Compat && leaves.contains(l)))
        .copied()
        .collect()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn preprocess_real(tc: &Toolchain, file: &Path, target: Target) -> String {
    let mut cmd = Command::new(&tc.clang);
    cmd.args(["-x", "hip", "-std=c++17", "--cuda-device-only", "-O3", "-E"])
        .arg(format!("--offload-arch={}", target.name()))
        .arg(format!("-I{}", source::hip_dir().display()));
    match &tc.flavor {
        Flavor::Rocm { root } => cmd.arg(format!("--rocm-path={}", root.display())),
        Flavor::Debian { include_dir, .. } => cmd
            .arg("-nogpulib")
            .arg(format!("-I{}", include_dir.display())),
    };
    run(cmd.arg(file))
}

fn preprocess_emulated(tc: &Toolchain, file: &Path, target: Target) -> String {
    preprocess_nvrtc_view(tc, file, Some(target), None)
}

/// `file` as NVRTC sees it: in `emulated`'s AMD configuration, or plainly for sm_90 (which
/// includes the CUDA headers from `cuda_include`).
fn preprocess_nvrtc_view(
    tc: &Toolchain,
    file: &Path,
    emulated: Option<Target>,
    cuda_include: Option<&Path>,
) -> String {
    let mut cmd = Command::new(&tc.clang);
    cmd.args(["-x", "c++", "-std=c++17", "-E"])
        .args(["-D__CUDACC_RTC__", "-D__CUDACC__", "-D__CUDA_ARCH__=900"])
        .args(
            emulated
                .map(|t| emulation::nvrtc_options(t).unwrap())
                .unwrap_or_default(),
        )
        .arg(format!("-I{}", source::hip_dir().display()));
    if let Some(dir) = cuda_include {
        cmd.arg(format!("-I{}", dir.display()));
    }
    run(cmd.arg(file))
}

fn snippet(text: &str) -> String {
    let t = text.trim();
    if t.chars().count() > 120 {
        format!("{}…", t.chars().take(120).collect::<String>())
    } else {
        t.to_owned()
    }
}

#[test]
fn every_line_the_real_target_compiles_is_emulated_except_the_builtin_leaves() {
    let tc = match Toolchain::discover() {
        Ok(t) => t,
        Err(e) => {
            return skip_or_fail(&Skip {
                requirement: Requirement::AmdToolchain,
                reason: e.to_string(),
            });
        }
    };
    let texts: BTreeMap<SourceFile, Vec<&str>> = SourceFile::ALL
        .into_iter()
        .map(|f| (f, f.embedded().lines().collect()))
        .collect();
    let leaves = leaf_lines(source::COMPAT_H);
    let mut failures = Vec::new();
    for target in Target::AMD_CODE_OBJECT_TARGETS {
        let (mut real, mut emulated) = (Lines::new(), Lines::new());
        for kernel in source::WITH_SOURCE {
            let file = source::hip_dir().join(source::file_name(kernel).unwrap());
            real.extend(compiled_lines(&preprocess_real(&tc, &file, target)));
            emulated.extend(compiled_lines(&preprocess_emulated(&tc, &file, target)));
        }
        assert!(
            emulated.iter().any(|(f, _)| *f == SourceFile::AmdEmulation),
            "{target}: the emulated preprocess did not reach amd_emulation.h"
        );
        let missing = uncovered(&real, &emulated, &leaves);
        for (f, l) in &missing {
            failures.push(format!(
                "{target}: {f}:{l} is compiled for {target} but not emulated (not a builtin leaf): {}",
                snippet(texts[f][l - 1])
            ));
        }

        let mut table = format!(
            "Emulated {target} (NVRTC, {}) against the real {target} compile, from the preprocessed\n\
             sources of every kernel. Emulation checks the AMD algorithms and layouts, not the AMD\n\
             hardware.\n\n\
             | file | lines compiled for {target} | of those, compiled emulated | not emulated | emulation only |\n\
             |---|---:|---:|---:|---:|\n",
            emulation::nvrtc_options(target).unwrap().join(" ")
        );
        for f in SourceFile::ALL {
            let r = real.iter().filter(|(g, _)| *g == f).count();
            let both = real
                .iter()
                .filter(|x| x.0 == f && emulated.contains(x))
                .count();
            let only = emulated
                .iter()
                .filter(|x| x.0 == f && !real.contains(x))
                .count();
            table.push_str(&format!("| {f} | {r} | {both} | {} | {only} |\n", r - both));
        }
        table.push_str(&format!(
            "\nCompiled for {target}, not emulated: the builtin leaves of compat.h, replaced by \
             amd_emulation.h\n\n"
        ));
        for x in real.difference(&emulated) {
            table.push_str(&format!("- {}: `{}`\n", x.0, snippet(texts[&x.0][x.1 - 1])));
        }
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path("../snapshots");
        settings.set_prepend_module_to_snapshot(false);
        settings.set_snapshot_suffix(target.name());
        settings.set_omit_expression(true);
        settings.set_description(format!(
            "What the emulated {target} covers of the real {target} compile (tests/emulation_coverage.rs)"
        ));
        settings.bind(|| insta::assert_snapshot!("emulation-coverage", table));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_line_missing_outside_the_leaves_is_named() {
    let real: Lines = [
        (SourceFile::Compat, 10),
        (SourceFile::Compat, 20),
        (SourceFile::Fused, 5),
    ]
    .into();
    let leaves: BTreeSet<usize> = [20].into();
    let emulated: Lines = [(SourceFile::Compat, 10)].into();
    assert_eq!(
        uncovered(&real, &emulated, &leaves),
        vec![(SourceFile::Fused, 5)]
    );
    let with_fused: Lines = [(SourceFile::Compat, 10), (SourceFile::Fused, 5)].into();
    assert!(uncovered(&real, &with_fused, &leaves).is_empty());
    // Line markers: a file switch, a jump, blank lines not counted.
    let pre = "# 1 \"kernels/hip/fused.hip\"\nint a;\n\n# 7 \"./compat.h\" 1\nint b;\nint c;\n# 3 \"/usr/include/x.h\" 3\nint d;\n";
    assert_eq!(
        compiled_lines(pre),
        [
            (SourceFile::Fused, 1),
            (SourceFile::Compat, 7),
            (SourceFile::Compat, 8)
        ]
        .into()
    );
    // The markers of the real compat.h enclose the leaves.
    let leaves = leaf_lines(source::COMPAT_H);
    let compat: Vec<&str> = source::COMPAT_H.lines().collect();
    assert!(
        leaves
            .iter()
            .all(|l| !compat[l - 1].contains("W4-GCN-LEAVES"))
    );
    assert!(
        leaves
            .iter()
            .any(|l| compat[l - 1].contains("__builtin_amdgcn_wmma_f32_16x16x16_f16_w32("))
    );
}

/// The 1-based lines a mutant's replaced occurrence spans in its file.
fn mutant_lines(m: &w4a16_kernels::mutants::Mutant) -> Vec<usize> {
    let text = m.file.embedded();
    let at = text
        .match_indices(&m.pattern)
        .map(|(i, _)| i)
        .nth(m.nth.unwrap_or(1) - 1)
        .unwrap_or_else(|| panic!("{}: pattern not in {}", m.id, m.file));
    let first = text[..at].matches('\n').count() + 1;
    (first..=first + m.pattern.matches('\n').count()).collect()
}

/// The mutation catalogue agrees with what each configuration compiles: a mutant whose lines
/// the NVRTC build of a run target (sm_90, or an emulated AMD target) does not compile cannot
/// change a result there, so it must be marked equivalent there (`equivalent`, with `live_on`
/// naming where it is live); otherwise `w4a16 mutants` on that target would count a mutant no
/// suite can kill as a survivor, or one marked live would be measured where it does not exist.
#[test]
fn every_mutant_is_live_exactly_where_its_lines_are_compiled() {
    let tc = match Toolchain::discover() {
        Ok(t) => t,
        Err(e) => {
            return skip_or_fail(&Skip {
                requirement: Requirement::AmdToolchain,
                reason: e.to_string(),
            });
        }
    };
    // The plain sm_90 view includes the CUDA headers (the emulated one does not).
    let cuda_include = match w4a16_kernels::nvrtc::find_cuda_include() {
        Ok(dir) => dir,
        Err(u) => {
            return skip_or_fail(&Skip {
                requirement: Requirement::Nvrtc,
                reason: u.reason,
            });
        }
    };
    let cat =
        w4a16_kernels::mutants::Catalogue::load(&w4a16_kernels::mutants::catalogue_dir()).unwrap();
    let preprocess = |target: Option<Target>, file: &Path| {
        compiled_lines(&preprocess_nvrtc_view(
            &tc,
            file,
            target,
            Some(&cuda_include),
        ))
    };
    let mut configs: Vec<(String, Lines)> = Vec::new();
    for target in [None]
        .into_iter()
        .chain(Target::AMD_CODE_OBJECT_TARGETS.map(Some))
    {
        let mut lines = Lines::new();
        for kernel in source::WITH_SOURCE {
            let file = source::hip_dir().join(source::file_name(kernel).unwrap());
            lines.extend(preprocess(target, &file));
        }
        let name = match target {
            None => Target::Sm90.name().to_string(),
            Some(t) => w4a16_kernels::RunTarget::emulated(t).unwrap().name(),
        };
        configs.push((name, lines));
    }
    let mut wrong = Vec::new();
    for m in &cat.mutants {
        if m.stillborn.is_some() {
            continue;
        }
        let lines = mutant_lines(m);
        for (name, compiled) in &configs {
            let present = lines.iter().any(|l| compiled.contains(&(m.file, *l)));
            if !present && m.equivalent_on(name).is_none() {
                wrong.push(format!(
                    "{}: {}:{:?} is not compiled on {name}, yet the mutant is live there (mark it equivalent, with live_on)",
                    m.id, m.file, lines
                ));
            }
            if !present && m.live_on.iter().any(|t| t == name) {
                wrong.push(format!(
                    "{}: live_on names {name}, where {}:{:?} is not compiled",
                    m.id, m.file, lines
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
