//! The AMD build checked without an AMD GPU: every kernel compiled for every target in
//! `W4A16_AMD_TARGETS` (gfx1100, gfx1151, gfx1201 by default), its metadata and instruction
//! families snapshotted per target, the static gates, and the launch ABI against the Rust
//! declarations. No toolchain → a loud skip (a failure under `W4A16_REQUIRE=amd-toolchain`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use w4a16_cases::Date;
use w4a16_cases::gate_exceptions;
use w4a16_codeobject::abi::{self, ArgProblem};
use w4a16_codeobject::disasm::{self, Disassembly};
use w4a16_codeobject::gates::{self, Verdict};
use w4a16_codeobject::{self as co, CodeObjectInfo, snapshot};
use w4a16_harness::require::{Requirement, Skip, skip_or_fail};
use w4a16_kernels::amd::{self, AmdBuildError, Builder, CodeObject, KernelSource};
use w4a16_kernels::decl::{ArgDecl, ArgKind};
use w4a16_kernels::set::{self, entry_name};
use w4a16_kernels::{KernelId, Target, TensorRole, tiles};
use w4a16_reference::ActDtype;

struct Built {
    builder: Builder,
    targets: Vec<Target>,
    objects: Vec<(CodeObject, CodeObjectInfo, Disassembly)>,
}

impl Built {
    fn for_target(
        &self,
        t: Target,
    ) -> impl Iterator<Item = &(CodeObject, CodeObjectInfo, Disassembly)> {
        self.objects.iter().filter(move |(c, _, _)| c.target == t)
    }
}

enum NotBuilt {
    Skip(Skip),
    /// A kernel that does not compile is a failure in every test that needs it, not a skip.
    Error(String),
}

/// The kernel set, built once per test binary.
fn built() -> &'static Result<Built, NotBuilt> {
    static BUILT: OnceLock<Result<Built, NotBuilt>> = OnceLock::new();
    BUILT.get_or_init(|| {
        let builder = match Builder::from_env() {
            Ok(b) => b,
            Err(e @ AmdBuildError::ToolchainMissing { .. }) => {
                return Err(NotBuilt::Skip(Skip {
                    requirement: Requirement::AmdToolchain,
                    reason: e.to_string(),
                }));
            }
            Err(e) => return Err(NotBuilt::Error(e.to_string())),
        };
        let targets = amd::targets_from_env().map_err(|e| NotBuilt::Error(e.to_string()))?;
        let built = builder
            .build_all(&amd::kernel_sources(), &targets)
            .map_err(|e| NotBuilt::Error(e.to_string()))?;
        let mut objects = Vec::new();
        for c in built {
            let info = co::read(&c.path).map_err(|e| NotBuilt::Error(format!("{c}: {e}")))?;
            let dis = disasm::disassemble(&builder.toolchain.objdump, c.target.name(), &c.path)
                .map_err(|e| NotBuilt::Error(format!("{c}: {e}")))?;
            objects.push((c, info, dis));
        }
        Ok(Built {
            builder,
            targets,
            objects,
        })
    })
}

macro_rules! built_or_skip {
    () => {
        match built() {
            Ok(b) => b,
            Err(NotBuilt::Skip(skip)) => {
                skip_or_fail(skip);
                return;
            }
            Err(NotBuilt::Error(e)) => panic!("{e}"),
        }
    };
}

#[test]
fn every_kernel_builds_for_every_target_with_its_entries() {
    let b = built_or_skip!();
    let sources = amd::kernel_sources();
    assert_eq!(b.objects.len(), sources.len() * b.targets.len());
    for (c, info, dis) in &b.objects {
        assert_eq!(
            info.gfx(),
            c.target.name(),
            "{c}: amdhsa.target {}",
            info.target
        );
        let kernel = c.source.kernel.expect("kernel sources carry their id");
        let mut declared: Vec<String> = ActDtype::ALL
            .iter()
            .flat_map(|d| set::decl(kernel).entries(*d))
            .collect();
        declared.sort();
        let found: Vec<&str> = info.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(
            found, declared,
            "{c}: code-object entries vs the declaration's entries"
        );
        for k in &info.kernels {
            let split = gates::split_entry(&k.name);
            assert!(
                split.is_some_and(|(id, _, _)| id == kernel),
                "{c}: entry {} is not w4a16_{kernel}_<f16|bf16>[_<tile>]",
                k.name
            );
            assert_eq!(
                k.wavefront_size,
                c.target.wave_size(),
                "{c}: {} wave size",
                k.name
            );
            assert!(
                dis.functions.contains_key(&k.name),
                "{c}: {} missing from the disassembly",
                k.name
            );
        }
    }
}

/// Every fused (and fused_carrier) tile variant's code object uses the shared memory
/// `tiles::shared_mem_bytes` computes for it, within the 48 KiB every target's tiles must fit
/// (the AMD targets also run emulated on NVIDIA), and the block size of its warps.
#[test]
fn fused_variants_use_the_shared_memory_and_block_their_tile_declares() {
    let b = built_or_skip!();
    let mut checked = 0;
    for (c, info, _) in b.objects.iter().filter(|(c, _, _)| {
        matches!(
            c.source.kernel,
            Some(KernelId::Fused | KernelId::FusedCarrier)
        )
    }) {
        let decl = set::decl(c.source.kernel.expect("filtered"));
        for dtype in ActDtype::ALL {
            for tile in tiles::FUSED_VARIANTS {
                let entry = decl.variant_entry(dtype, tile);
                let k = info
                    .kernel(&entry)
                    .unwrap_or_else(|| panic!("{c}: {entry} is not in the code object"));
                assert_eq!(
                    k.lds_bytes as usize,
                    tiles::shared_mem_bytes(tile),
                    "{c}: {entry} LDS"
                );
                assert!(
                    k.lds_bytes as usize <= tiles::static_shared_limit(c.target),
                    "{c}: {entry}"
                );
                assert_eq!(
                    k.max_flat_workgroup_size,
                    tiles::threads(tile),
                    "{c}: {entry} block size"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(
        checked,
        b.targets.len() * 2 * 2 * tiles::FUSED_VARIANTS.len()
    );
}

/// The same for every moe tile variant: the fused tile's shared memory plus moe's row table
/// (`tiles::moe_shared_mem_bytes`), and one block of moe_align with its declared threads.
#[test]
fn moe_variants_use_the_shared_memory_and_block_their_tile_declares() {
    let b = built_or_skip!();
    let mut checked = 0;
    for (c, info, _) in &b.objects {
        for dtype in ActDtype::ALL {
            match c.source.kernel {
                Some(KernelId::Moe) => {
                    for tile in tiles::MOE_VARIANTS {
                        let entry = set::MOE.variant_entry(dtype, tile);
                        let k = info
                            .kernel(&entry)
                            .unwrap_or_else(|| panic!("{c}: {entry} is not in the code object"));
                        assert_eq!(
                            k.lds_bytes as usize,
                            tiles::moe_shared_mem_bytes(tile),
                            "{c}: {entry} LDS"
                        );
                        assert!(
                            k.lds_bytes as usize <= tiles::static_shared_limit(c.target),
                            "{c}: {entry}"
                        );
                        assert_eq!(
                            k.max_flat_workgroup_size,
                            tiles::threads(tile),
                            "{c}: {entry} block size"
                        );
                        checked += 1;
                    }
                }
                Some(KernelId::MoeAlign) => {
                    let entry = entry_name(KernelId::MoeAlign, dtype);
                    let k = info.kernel(&entry).expect("moe_align entry");
                    assert_eq!(k.max_flat_workgroup_size, set::MOE_ALIGN_THREADS, "{c}");
                }
                _ => {}
            }
        }
    }
    assert_eq!(checked, b.targets.len() * 2 * tiles::MOE_VARIANTS.len());
}

#[test]
fn snapshots_per_target() {
    let b = built_or_skip!();
    // Every target is compared before failing, so one run shows (and writes `.snap.new` for)
    // each target's diff.
    let mut changed = Vec::new();
    for &t in &b.targets {
        let digest = snapshot::digest(b.for_target(t).map(|(_, info, dis)| (info, dis)));
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path("../snapshots");
        settings.set_prepend_module_to_snapshot(false);
        settings.set_snapshot_suffix(t.name());
        settings.set_omit_expression(true);
        settings.set_description(format!(
            "AMD code objects for {t}: resources, argument layout and instruction families per entry"
        ));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            settings.bind(|| insta::assert_yaml_snapshot!("codeobject", digest))
        }));
        if r.is_err() {
            changed.push(t.name());
        }
    }
    assert!(
        changed.is_empty(),
        "code-object snapshots changed for {}: review with `cargo insta review`",
        changed.join(", ")
    );
}

#[test]
fn static_gates_hold_on_every_target() {
    let b = built_or_skip!();
    let exceptions = gate_exceptions::load(&gate_exceptions::exceptions_path(
        &w4a16_cases::locate(None).unwrap(),
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let mut results = Vec::new();
    for (c, info, dis) in &b.objects {
        for k in &info.kernels {
            let fams = dis.family_counts(&k.name).unwrap_or_default();
            results.extend(gates::evaluate(c.target, k, &fams));
        }
    }
    let report = gates::judge(results, &exceptions, Date::today_utc(), &b.targets);
    eprint!("{report}");
    let xfail = report.count(|v| matches!(v, Verdict::ExpectedFail { .. }));
    if xfail > 0 {
        eprintln!(
            "W4A16-XFAIL {xfail} static gate(s) fail as {} expects",
            exceptions.file.display()
        );
    }
    assert!(report.is_ok(), "static gates:\n{report}");
    // Every gate ran somewhere: a gate that applies to nothing guards nothing.
    for g in gates::Gate::ALL {
        let applies_somewhere = b.targets.iter().any(|t| t.is_gfx11() || t.is_gfx12())
            || matches!(g, gates::Gate::NoScratch | gates::Gate::NoSpill);
        if applies_somewhere {
            assert!(
                report.rows.iter().any(|r| r.result.gate == g),
                "gate {g} evaluated nothing"
            );
        }
    }
}

#[test]
fn launch_abi_matches_declarations() {
    let b = built_or_skip!();
    let mut checked = 0;
    let mut errors = Vec::new();
    for (c, info, _) in &b.objects {
        for k in &info.kernels {
            let (id, _, _) = gates::split_entry(&k.name)
                .unwrap_or_else(|| panic!("{c}: unknown entry {}", k.name));
            let decl = abi::declared_args(id)
                .unwrap_or_else(|| panic!("{id} has no declared HIP arguments"));
            assert!(
                k.args.iter().all(|a| a.name.is_some()),
                "{c}: {} was built without argument names",
                k.name
            );
            if let Err(e) = abi::check(&k.name, c.target.name(), decl, k) {
                errors.push(e.to_string());
            }
            checked += 1;
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    assert!(
        checked >= 8 * b.targets.len(),
        "only {checked} entries checked"
    );
}

/// The check must fail on a wrong declaration, on the real code objects of every target.
#[test]
fn a_wrong_declaration_is_rejected() {
    let b = built_or_skip!();
    let mut swapped = set::GEMM_ARGS;
    swapped.swap(6, 7);
    let mut as_pointer = set::GEMM_ARGS;
    as_pointer[8] = ArgDecl {
        name: "k",
        kind: ArgKind::Pointer {
            role: TensorRole::X,
            writes: false,
            nullable: false,
        },
    };
    for &t in &b.targets {
        let entry = entry_name(KernelId::Skinny, ActDtype::F16);
        let (_, info, _) = b
            .for_target(t)
            .find(|(c, _, _)| c.source.kernel == Some(KernelId::Skinny))
            .expect("skinny built");
        let k = info.kernel(&entry).expect("skinny f16 entry");
        let e = abi::check(&entry, t.name(), &swapped, k).expect_err("swapped m/n must not pass");
        assert_eq!(
            e.problems,
            vec![
                ArgProblem::Name {
                    index: 6,
                    expected: "n",
                    got: "m".into()
                },
                ArgProblem::Name {
                    index: 7,
                    expected: "m",
                    got: "n".into()
                },
            ]
        );
        let msg = abi::check(&entry, t.name(), &as_pointer, k)
            .expect_err("i32 as pointer must not pass")
            .to_string();
        for needle in [
            format!("kernel {entry} on {t}"),
            "arg 8 (k): kind: expected pointer (global_buffer), got by_value".into(),
            "arg 8 (k): size: expected 8, got 4".into(),
            "arg 9 (group): offset: expected 64, got 60".into(),
        ] {
            assert!(msg.contains(&needle), "missing {needle:?} in:\n{msg}");
        }
    }
}

fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("w4a16-amd-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The build cache: a second build is a hit, a source edit is a miss. Uses the probe kernel in
/// `kernels/hip/testdata/`, so it does not depend on the real kernels' state.
#[test]
fn build_cache_hits_and_rebuilds_on_change() {
    let b = built_or_skip!();
    let work = scratch_dir("cache");
    let src = work.join("probe.hip");
    std::fs::copy(amd::hip_dir().join("testdata/probe.hip"), &src).unwrap();
    let builder = Builder::new(b.builder.toolchain.clone(), work.join("cache"));
    let source = KernelSource {
        name: "probe".into(),
        kernel: None,
        path: src.clone(),
    };
    let t = b.targets[0];
    let first = builder.build(&source, t).unwrap();
    assert!(!first.cached);
    assert_eq!(
        first.path,
        work.join("cache").join(t.name()).join("probe.co")
    );
    let second = builder.build(&source, t).unwrap();
    assert!(second.cached && second.key == first.key);
    std::fs::write(
        &src,
        std::fs::read_to_string(&src).unwrap() + "\n// edited\n",
    )
    .unwrap();
    let third = builder.build(&source, t).unwrap();
    assert!(!third.cached && third.key != first.key);
    // A header next to the source is part of the key too.
    std::fs::write(work.join("extra.h"), "#pragma once\n").unwrap();
    assert_ne!(builder.cache_key(&source, t).unwrap(), third.key);

    // The probe follows the GEMM signature, so it passes the ABI check as declared.
    let info = co::read(&third.path).unwrap();
    for k in &info.kernels {
        abi::check(&k.name, t.name(), &set::GEMM_ARGS, k).unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(info.kernels.len(), 2);
    let missing = KernelSource {
        name: "nope".into(),
        kernel: None,
        path: work.join("nope.hip"),
    };
    assert!(
        matches!(builder.build(&missing, t), Err(AmdBuildError::SourceMissing { path }) if path == work.join("nope.hip"))
    );
    let _ = std::fs::remove_dir_all(&work);
}

/// The gates fail on real compiler output that breaks them, and an exception turns exactly
/// those failures into expected failures. `testdata/gate_breaker.hip` poses as the fp16
/// dequant entry, uses scratch and lacks `v_and_or_b32`.
#[test]
fn gates_fail_on_a_kernel_that_breaks_them() {
    let b = built_or_skip!();
    let work = scratch_dir("gates");
    let builder = Builder::new(b.builder.toolchain.clone(), work.join("cache"));
    let source = KernelSource {
        name: "gate_breaker".into(),
        kernel: None,
        path: amd::hip_dir().join("testdata/gate_breaker.hip"),
    };
    let t = *b
        .targets
        .iter()
        .find(|t| t.is_gfx11() || t.is_gfx12())
        .unwrap_or(&Target::Gfx1151);
    let c = builder.build(&source, t).unwrap_or_else(|e| panic!("{e}"));
    let info = co::read(&c.path).unwrap();
    let dis = disasm::disassemble(&builder.toolchain.objdump, t.name(), &c.path).unwrap();
    let k = info.kernel("w4a16_dequant_f16").expect("the breaker entry");
    assert!(
        k.scratch_bytes > 0,
        "the private array must live in scratch: {k:?}"
    );
    let results = gates::evaluate(t, k, &dis.family_counts(&k.name).unwrap());
    let failed: Vec<gates::Gate> = results
        .iter()
        .filter(|r| matches!(r.outcome, gates::Outcome::Fail(_)))
        .map(|r| r.gate)
        .collect();
    assert_eq!(
        failed,
        vec![gates::Gate::NoScratch, gates::Gate::Fp16AndOr],
        "{results:?}"
    );

    let strict = gates::judge(
        results.clone(),
        &gate_exceptions::parse("", Path::new("none.toml")).unwrap(),
        Date::today_utc(),
        &[t],
    );
    assert_eq!(strict.problems.len(), 2, "{strict}");
    let excepted = gate_exceptions::parse(
        &format!(
            "[[exception]]\ntarget = \"{t}\"\nentry = \"w4a16_dequant_f16\"\ngate = \"no-scratch\"\n\
             reason = \"test\"\ntracking = \"test\"\nexpires = 2999-12-31\nmode = \"xfail-strict\"\n\
             [[exception]]\ntarget = \"gfx1*\"\nkernel = \"dequant\"\ngate = \"fp16-v_and_or_b32\"\n\
             reason = \"test\"\ntracking = \"test\"\nexpires = 2999-12-31\nmode = \"xfail-strict\"\n"
        ),
        Path::new("test.toml"),
    )
    .unwrap();
    let judged = gates::judge(results, &excepted, Date::today_utc(), &[t]);
    assert!(judged.is_ok(), "{judged}");
    assert_eq!(
        judged.count(|v| matches!(v, Verdict::ExpectedFail { .. })),
        2
    );
    let _ = std::fs::remove_dir_all(&work);
}

/// A compile error surfaces as a typed error naming the source and target, with clang's output.
#[test]
fn compile_errors_name_source_and_target() {
    let b = built_or_skip!();
    let work = scratch_dir("broken");
    let src = work.join("broken.hip");
    std::fs::write(
        &src,
        "extern \"C\" __global__ void w4a16_broken_f16(int* p) { p[0] = undeclared; }\n",
    )
    .unwrap();
    let builder = Builder::new(b.builder.toolchain.clone(), work.join("cache"));
    let err = builder
        .build(
            &KernelSource {
                name: "broken".into(),
                kernel: None,
                path: src.clone(),
            },
            Target::Gfx1151,
        )
        .unwrap_err();
    match &err {
        AmdBuildError::Compile {
            source_path,
            target,
            stderr,
            ..
        } => {
            assert_eq!(
                (source_path.as_path(), *target),
                (src.as_path(), Target::Gfx1151)
            );
            assert!(stderr.contains("undeclared"), "{stderr}");
        }
        other => panic!("expected a compile error, got {other}"),
    }
    assert!(
        !work.join("cache/gfx1151/broken.co").exists(),
        "no object is cached for a failed build"
    );
    let _ = std::fs::remove_dir_all(&work);
}

/// The exceptions file is data the suite depends on: it must parse, and each entry must be able
/// to match a built target (the loader refuses a pattern matching no AMD code-object target:
/// it is a typo).
#[test]
fn exceptions_file_parses() {
    let path = gate_exceptions::exceptions_path(&w4a16_cases::locate(None).unwrap());
    gate_exceptions::load(&path).unwrap_or_else(|e| panic!("{e}"));
}
