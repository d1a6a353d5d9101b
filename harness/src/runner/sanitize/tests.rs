//! Sanitizer mode's tests: compute-sanitizer's reports as its versions print them, the case
//! windows, and where the mode skips.

use super::*;
use crate::runner::verdict::Check;
use w4a16_kernels::{KernelId, Target};

/// memcheck, an out-of-bounds read by one of ours, as compute-sanitizer 2025.3 (CUDA 13)
/// prints it on the H200: kernel+offset, thread and block, `Access to` and the nearest
/// allocation, the host backtrace, a separator with a trailing space.
const MEMCHECK_READ: &str = "\
========= Invalid __global__ read of size 16 bytes
=========     at w4a16_skinny_f16_rt2+0x1a70
=========     by thread (64,1,0) in block (12,0,0)
=========     Access to 0x7f3a4e2005f0 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3a4e200000 of size 1,519 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f4f1f] in libcuda.so.1
=========         Host Frame: w4a16_device::cuda::CudaDevice::launch [0x1c2b3d] in w4a16
========= \n";

/// memcheck, a write one element past Y, in the documentation's `kernel():offset` form.
const MEMCHECK_WRITE: &str = "\
========= Invalid __global__ write of size 2 bytes
=========     at w4a16_fallback_bf16():0x3c0 in fallback.hip:81
=========     by thread (39,0,0) in block (0,2,0)
=========     Address 0x7f6510c00050 is out of bounds
=========     and is 0 bytes after the nearest allocation at 0x7f6510c00000 of size 80 bytes
=========
";

const RACECHECK_HAZARD: &str = "\
========= ERROR: Potential WAW hazard detected at __shared__ 0x40 in block (3,0,0) :
=========     Write Thread (0,0,0) at w4a16_fused_f16+0x2f0 in fused.hip:140
=========     Write Thread (32,0,0) at w4a16_fused_f16+0x2f0 in fused.hip:140
=========     Current Value : 0, Incoming Value : 15360
=========
";

const RACECHECK_ANALYSIS: &str = "\
========= Error: Race reported between Write access at w4a16_skinny_bf16+0x8d0 in skinny.hip:402
=========     and Read access at w4a16_skinny_bf16+0x910 in skinny.hip:410 [16 hazards]
=========
";

const INITCHECK: &str = "\
========= Uninitialized __global__ memory read of size 4 bytes
=========     at w4a16_dequant_f16+0x250
=========     by thread (255,0,0) in block (7,0,0)
=========     Address 0x7f0c8a201ffc
=========
";

const SYNCCHECK: &str = "\
========= Barrier error detected. Divergent thread(s) in block
=========     at w4a16_fused_bf16+0x1180 in fused.hip:211
=========     by thread (96,0,0) in block (0,5,0)
=========
";

/// synccheck as compute-sanitizer 2025.3 prints it: one report per warp, back to back, no
/// thread line and no separator.
const SYNCCHECK_2025: &str = "\
========= Barrier error detected. Divergent thread(s) in warp.
=========     at w4a16_skinny_bf16(const unsigned int *, const __nv_bfloat16 *)+0x70
========= Barrier error detected. Divergent thread(s) in warp.
=========     at w4a16_skinny_bf16(const unsigned int *, const __nv_bfloat16 *)+0x70
";

fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_string).collect()
}

#[test]
fn memcheck_reports_become_typed_findings() {
    let f = parse_findings(&lines(MEMCHECK_READ));
    assert_eq!(f.len(), 1);
    let f = &f[0];
    assert_eq!(
        f.kind,
        FindingKind::InvalidAccess {
            space: Space::Global,
            access: "read".into(),
            bytes: 16
        }
    );
    assert_eq!(f.kernel.as_deref(), Some("w4a16_skinny_f16_rt2"));
    assert_eq!(f.kernel_id(), Some(KernelId::Skinny));
    assert_eq!((f.thread, f.block), (Some([64, 1, 0]), Some([12, 0, 0])));
    assert_eq!(
        f.address.as_deref(),
        Some(
            "0x7f3a4e2005f0 is out of bounds and is 1 bytes after the nearest allocation at 0x7f3a4e200000 of size 1,519 bytes"
        )
    );
    assert_eq!(f.lines.len(), 8, "the backtrace stays with its report");

    let w = &parse_findings(&lines(MEMCHECK_WRITE))[0];
    assert_eq!(
        w.kind,
        FindingKind::InvalidAccess {
            space: Space::Global,
            access: "write".into(),
            bytes: 2
        }
    );
    assert_eq!(w.kernel_id(), Some(KernelId::Fallback));
    assert_eq!(w.block, Some([0, 2, 0]));
    assert!(w.summary().starts_with(
            "Invalid __global__ write of size 2 bytes in w4a16_fallback_bf16 by thread (39,0,0) in block (0,2,0); address 0x7f6510c00050 is out of bounds and is 0 bytes after"
        ), "{}", w.summary());
}

#[test]
fn racecheck_initcheck_and_synccheck_reports_become_typed_findings() {
    let h = &parse_findings(&lines(RACECHECK_HAZARD))[0];
    assert_eq!(
        h.kind,
        FindingKind::Race {
            severity: "ERROR".into(),
            hazard: "WAW".into()
        }
    );
    assert_eq!(h.kernel_id(), Some(KernelId::Fused));
    assert_eq!((h.thread, h.block), (Some([0, 0, 0]), Some([3, 0, 0])));

    let a = parse_findings(&lines(RACECHECK_ANALYSIS));
    assert_eq!(a.len(), 1, "the `and … access` line continues the report");
    assert_eq!(
        a[0].kind,
        FindingKind::Race {
            severity: "ERROR".into(),
            hazard: "race".into()
        }
    );
    assert_eq!(a[0].kernel_id(), Some(KernelId::Skinny));

    let i = &parse_findings(&lines(INITCHECK))[0];
    assert_eq!(
        i.kind,
        FindingKind::Uninitialized {
            space: Space::Global,
            bytes: 4
        }
    );
    assert_eq!(i.kernel_id(), Some(KernelId::Dequant));
    assert_eq!(i.address.as_deref(), Some("0x7f0c8a201ffc"));

    let s = &parse_findings(&lines(SYNCCHECK))[0];
    assert_eq!(
        s.kind,
        FindingKind::Barrier {
            class: "Divergent thread(s) in block".into()
        }
    );
    assert_eq!(s.kernel.as_deref(), Some("w4a16_fused_bf16"));
    assert_eq!(s.thread, Some([96, 0, 0]));

    let s = parse_findings(&lines(SYNCCHECK_2025));
    assert_eq!(s.len(), 2, "a new headline starts a new report");
    assert_eq!(
        s[1].kind,
        FindingKind::Barrier {
            class: "Divergent thread(s) in warp".into()
        }
    );
    assert_eq!(s[1].kernel.as_deref(), Some("w4a16_skinny_bf16"));
    assert_eq!((s[1].thread, s[1].block), (None, None));
}

#[test]
fn the_documentations_unindented_layout_parses_the_same() {
    // As the manual renders its samples: no indentation after the prefix.
    let text = "\
========= WARNING: Race reported between Write access at RAW()+0xf0 in raceGroupBasic.cu:40
========= and Read access at RAW()+0x280 in raceGroupBasic:46 [4 hazards]
========= Invalid __global__ write of size 4 bytes
========= at unaligned_kernel():0x160 in memcheck_demo.cu:6
========= by thread (0,0,0) in block (0,0,0)
========= Address 0x7f6510c00001 is misaligned
";
    let f = parse_findings(&lines(text));
    assert_eq!(f.len(), 2);
    assert_eq!(
        f[0].kind,
        FindingKind::Race {
            severity: "WARNING".into(),
            hazard: "race".into()
        }
    );
    assert_eq!(f[0].kernel.as_deref(), Some("RAW"));
    assert_eq!(f[0].kernel_id(), None, "not one of ours");
    assert_eq!(f[1].kernel.as_deref(), Some("unaligned_kernel"));
    assert_eq!(
        f[1].address.as_deref(),
        Some("0x7f6510c00001 is misaligned")
    );
}

#[test]
fn banner_and_summaries_are_not_findings() {
    assert_eq!(
        report_line("========= COMPUTE-SANITIZER"),
        Some(ReportLine::Banner)
    );
    assert_eq!(
        report_line("========= ERROR SUMMARY: 0 errors"),
        Some(ReportLine::Summary { errors: 0 })
    );
    assert_eq!(
        report_line("========= ERROR SUMMARY: 1 error"),
        Some(ReportLine::Summary { errors: 1 })
    );
    assert_eq!(
        report_line("========= ERROR SUMMARY: 1,203 errors"),
        Some(ReportLine::Summary { errors: 1203 })
    );
    assert_eq!(
        report_line("========= RACECHECK SUMMARY: 3 hazards displayed (1 error, 2 warnings)"),
        Some(ReportLine::Summary { errors: 3 })
    );
    assert_eq!(report_line("VERDICT {}"), None);
    let mut text = String::from("========= COMPUTE-SANITIZER\n");
    text.push_str(MEMCHECK_WRITE);
    text.push_str("========= ERROR SUMMARY: 1 error\n");
    assert_eq!(parse_findings(&lines(&text)).len(), 1);
}

#[test]
fn api_errors_and_tool_trouble_are_findings_too() {
    let text = "\
========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to \"invalid argument\" on CUDA API call to cuMemcpyDtoHAsync_v2.
=========     Saved host backtrace up to driver entry point at error
=========
========= Internal Sanitizer Error: The Sanitizer encountered an error while launching w4a16_fused_f16 and didn't track the launch. Errors might go undetected. (Unable to allocate enough memory to perform the requested operation)
";
    let f = parse_findings(&lines(text));
    assert_eq!(f.len(), 2);
    assert_eq!(f[0].kind, FindingKind::ApiError);
    assert_eq!(f[1].kind, FindingKind::Tool);
    assert_eq!(f[1].kernel_id(), Some(KernelId::Fused));
}

fn verdict(check: &str, outcome: Outcome) -> Verdict {
    let check = check.parse().expect("a check name");
    Verdict::new("smoke/x/M=1/f16/asym/g128/exact", check, outcome)
}

#[test]
fn a_window_charges_each_report_to_its_kernel() {
    let mut w = CaseWindow::new("smoke/x/M=1/f16/asym/g128/exact");
    for (c, o) in [
        ("selection:skinny", Outcome::Pass),
        ("skinny", Outcome::Pass),
        ("determinism:skinny", Outcome::Pass),
        ("fused", Outcome::Skip),
        ("fallback", Outcome::Fail),
        ("dequant", Outcome::Pass),
        ("dequant+dense", Outcome::Pass),
    ] {
        w.note(&verdict(c, o));
    }
    assert_eq!(
        w.launched.iter().copied().collect::<Vec<_>>(),
        vec![KernelId::Skinny, KernelId::Dequant, KernelId::Fallback],
        "skipped fused launched nothing; cuBLAS is not watched"
    );
    w.lines = lines(&format!("{MEMCHECK_WRITE}{MEMCHECK_WRITE}"));
    let vs = w.verdicts(SanitizerTool::Memcheck, RunTarget::native(Target::Sm90));
    let rows: Vec<(String, Outcome)> = vs
        .iter()
        .map(|v| (v.check.to_string(), v.outcome))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("sanitize:memcheck:skinny".to_string(), Outcome::Pass),
            ("sanitize:memcheck:dequant".to_string(), Outcome::Pass),
            ("sanitize:memcheck:fallback".to_string(), Outcome::Fail),
        ]
    );
    let fail = &vs[2];
    assert!(
        fail.detail.contains("w4a16_fallback_bf16"),
        "{}",
        fail.detail
    );
    assert!(
        fail.detail.contains("(first of 2 reports)"),
        "{}",
        fail.detail
    );
    assert!(
            fail.detail.contains(
                "repro: cargo run --release --bin w4a16 -- run --sanitize memcheck --filter 'smoke/x/M=1/f16/asym/g128/exact' --target sm_90"
            ),
            "{}",
            fail.detail
        );
}

#[test]
fn a_report_against_no_launched_kernel_fails_the_case() {
    let mut w = CaseWindow::new("c");
    w.note(&Verdict::new(
        "c",
        Check::kernel(KernelId::Skinny),
        Outcome::Pass,
    ));
    // A crash before any verdict came back, and a report against a kernel never launched.
    w.lines = lines(&format!(
        "{SYNCCHECK}========= Error: process didn't terminate successfully\n"
    ));
    let vs = w.verdicts(SanitizerTool::Synccheck, RunTarget::native(Target::Sm90));
    assert_eq!(vs.len(), 2);
    assert_eq!(
        (vs[0].check.to_string().as_str(), vs[0].outcome),
        ("sanitize:synccheck:skinny", Outcome::Pass)
    );
    assert_eq!(
        (vs[1].check.to_string().as_str(), vs[1].outcome),
        ("sanitize:synccheck", Outcome::Fail)
    );
    assert!(
        vs[1].detail.contains("Barrier error detected"),
        "{}",
        vs[1].detail
    );
    assert!(
        vs[1].detail.contains("(first of 2 reports)"),
        "{}",
        vs[1].detail
    );
    // Nothing launched and nothing reported: no rows at all (nothing was watched).
    assert!(
        CaseWindow::new("d")
            .verdicts(SanitizerTool::Memcheck, RunTarget::native(Target::Sm90))
            .is_empty()
    );
}

#[test]
fn the_command_line_of_each_tool() {
    let s = |tool| Sanitizer {
        tool,
        engine: Engine::ComputeSanitizer(PathBuf::from("/usr/local/cuda/bin/compute-sanitizer")),
    };
    let worker_args = vec!["worker".to_string(), "--spec".to_string(), "{}".to_string()];
    let (prog, args) = s(SanitizerTool::Memcheck).command(Path::new("/x/w4a16"), &worker_args);
    assert_eq!(prog, PathBuf::from("/usr/local/cuda/bin/compute-sanitizer"));
    assert_eq!(
        args.join(" "),
        "--tool memcheck --kernel-name kns=w4a16_ --print-limit 0 --destroy-on-device-error kernel \
             --launch-timeout 120 --target-processes application-only --check-exit-code no \
             --padding 4096 --report-api-errors no -- /x/w4a16 worker --spec {}"
    );
    for tool in [
        SanitizerTool::Racecheck,
        SanitizerTool::Synccheck,
        SanitizerTool::Initcheck,
    ] {
        let (_, args) = s(tool).command(Path::new("/x/w4a16"), &worker_args);
        assert_eq!(
            args.join(" "),
            format!(
                "--tool {tool} --kernel-name kns=w4a16_ --print-limit 0 --destroy-on-device-error kernel \
                     --launch-timeout 120 --target-processes application-only --check-exit-code no \
                     -- /x/w4a16 worker --spec {{}}"
            ),
            "memcheck's own options stay off {tool}"
        );
    }
}

#[test]
fn tools_parse_by_name() {
    for t in SanitizerTool::ALL {
        assert_eq!(SanitizerTool::parse(t.name()), Some(t));
    }
    assert_eq!(SanitizerTool::parse("memchek"), None);
    assert_eq!(
        SanitizerTool::Initcheck.check().to_string(),
        "sanitize:initcheck"
    );
}

#[test]
fn the_sanitizer_is_looked_for_in_cuda_home_the_default_toolkit_and_path() {
    let dir = std::env::temp_dir().join(format!("w4a16-sanitize-{}", std::process::id()));
    let bin = dir.join("toolkit").join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let path = std::env::join_paths([dir.join("empty"), dir.join("other")]).unwrap();
    let dirs = search_dirs(Some(dir.join("toolkit").as_os_str()), Some(&path));
    assert_eq!(
        dirs,
        vec![
            bin.clone(),
            PathBuf::from("/usr/local/cuda/bin"),
            dir.join("empty"),
            dir.join("other")
        ]
    );
    if !Path::new("/usr/local/cuda/bin/compute-sanitizer").exists() {
        let not_found = locate_in(&dirs).unwrap_err();
        assert_eq!(not_found.looked.len(), 4);
        assert_eq!(not_found.looked[0], bin.join("compute-sanitizer"));
        assert_eq!(
            not_found.to_string(),
            format!(
                "compute-sanitizer not found (looked for {}, /usr/local/cuda/bin/compute-sanitizer, {}, {}; set CUDA_HOME to a CUDA toolkit)",
                bin.join("compute-sanitizer").display(),
                dir.join("empty/compute-sanitizer").display(),
                dir.join("other/compute-sanitizer").display()
            )
        );
    }
    std::fs::write(bin.join("compute-sanitizer"), "#!/bin/sh\n").unwrap();
    assert_eq!(locate_in(&dirs), Ok(bin.join("compute-sanitizer")));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn only_a_cuda_device_with_the_binary_is_sanitized() {
    let no_gpu = Skip {
        requirement: Requirement::Gpu,
        reason: "no GPU backend available: cuda: libcuda.so not found".into(),
    };
    let found = || Ok(PathBuf::from("/opt/cuda/bin/compute-sanitizer"));
    let never = || -> Result<PathBuf, Skip> { panic!("looked for the binary needlessly") };
    let t = SanitizerTool::Memcheck;

    let e = availability(t, Err(&no_gpu), RunTarget::native(Target::Sm90), never).unwrap_err();
    assert_eq!(e.requirement, Requirement::Gpu);
    assert!(e.reason.contains("needs an NVIDIA GPU") && e.reason.contains("libcuda.so"));
    let e = availability(
        t,
        Ok(DeviceKind::Rocm),
        RunTarget::native(Target::Gfx1151),
        never,
    )
    .unwrap_err();
    assert!(e.reason.contains("ROCm (gfx1151)"), "{}", e.reason);
    let e = availability(
        t,
        Ok(DeviceKind::Simulated),
        RunTarget::native(Target::Sm90),
        never,
    )
    .unwrap_err();
    assert!(e.reason.contains("simulated"), "{}", e.reason);
    // On the ISA emulator (a gfx target without its GPU) the skip names the emulator's own
    // memory check, and is still a skip: nothing here watched the kernels with compute-sanitizer.
    let e = availability(
        t,
        Ok(DeviceKind::Emulator),
        RunTarget::native(Target::Gfx1151),
        never,
    )
    .unwrap_err();
    assert_eq!(e.requirement, Requirement::Gpu);
    assert!(
        e.reason.contains("not the ISA emulator running gfx1151")
            && e.reason.contains(
                "the ISA emulator's fault on any access outside a tensor (every tensor allocated at exactly its size) is the memory check"
            ),
        "{}",
        e.reason
    );
    // racecheck and initcheck are the emulator's own: the workers run unwrapped, watched
    // inside; synccheck has none.
    for tool in [SanitizerTool::Racecheck, SanitizerTool::Initcheck] {
        let s = availability(
            tool,
            Ok(DeviceKind::Emulator),
            RunTarget::native(Target::Gfx1100),
            never,
        )
        .unwrap();
        assert_eq!(
            (s.engine.clone(), s.emulator_tool()),
            (Engine::Emulator, Some(tool))
        );
        let args = vec!["worker".to_string()];
        assert_eq!(
            s.command(Path::new("/x/w4a16"), &args),
            (PathBuf::from("/x/w4a16"), args.clone())
        );
    }
    let e = availability(
        SanitizerTool::Synccheck,
        Ok(DeviceKind::Emulator),
        RunTarget::native(Target::Gfx1100),
        never,
    )
    .unwrap_err();
    assert!(
        e.reason.contains("has no synccheck of its own") && e.reason.contains("memory check"),
        "{}",
        e.reason
    );
    let missing = || {
        Err(Skip {
            requirement: Requirement::Gpu,
            reason:
                "compute-sanitizer not found (looked for /usr/local/cuda/bin/compute-sanitizer)"
                    .into(),
        })
    };
    let e = availability(
        t,
        Ok(DeviceKind::Cuda),
        RunTarget::native(Target::Sm90),
        missing,
    )
    .unwrap_err();
    assert!(e.reason.contains("/usr/local/cuda/bin/compute-sanitizer"));
    let s = availability(
        t,
        Ok(DeviceKind::Cuda),
        RunTarget::native(Target::Sm90),
        found,
    )
    .unwrap();
    assert_eq!(
        s.engine,
        Engine::ComputeSanitizer(PathBuf::from("/opt/cuda/bin/compute-sanitizer"))
    );
}

#[test]
fn a_skip_is_loud_and_a_failure_when_required() {
    let skip = Skip {
        requirement: Requirement::Gpu,
        reason: "compute-sanitizer memcheck needs an NVIDIA GPU: none here".into(),
    };
    let v = skip_verdict("smoke/a", SanitizerTool::Memcheck, &skip, false);
    assert_eq!(
        (v.check.to_string().as_str(), v.outcome),
        ("sanitize:memcheck", Outcome::Skip)
    );
    assert_eq!(v.detail, skip.reason);
    let v = skip_verdict("smoke/a", SanitizerTool::Memcheck, &skip, true);
    assert_eq!(v.outcome, Outcome::Fail);
    assert!(
        v.detail.starts_with("W4A16_REQUIRE=gpu but"),
        "{}",
        v.detail
    );
}

#[test]
fn errors_counted_but_never_printed_inside_a_case_fail_the_worker() {
    let cases = vec!["smoke/a".to_string()];
    let v = unattributed_errors(SanitizerTool::Memcheck, 2, 0, &cases).unwrap();
    assert_eq!(v.outcome, Outcome::Fail);
    assert_eq!(v.check, "sanitize:memcheck:summary");
    assert!(unattributed_errors(SanitizerTool::Memcheck, 2, 2, &cases).is_none());
    assert!(unattributed_errors(SanitizerTool::Memcheck, 0, 0, &cases).is_none());
}
