//! The CLI side of `w4a16 mutants` without a GPU: `--kernel-sources` names a missing file, and
//! `w4a16 mutants` skips loudly and writes no table.

use std::path::{Path, PathBuf};
use std::process::Command;
use w4a16_kernels::source::SourceFile;

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_w4a16"))
}

fn cases_dir() -> PathBuf {
    w4a16_cases::locate(None).expect("the cases folder")
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("w4a16-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn kernel_sources_with_a_missing_file_is_refused_naming_it() {
    let dir = temp("sources-missing");
    for f in SourceFile::ALL {
        if f != SourceFile::Fallback {
            std::fs::write(dir.join(f.name()), f.embedded()).unwrap();
        }
    }
    for sub in [
        vec!["run", "--suite", "smoke", "--target", "sm_90"],
        vec!["repro", "smoke/x", "--target", "sm_90"],
    ] {
        let out = Command::new(exe())
            .arg("--cases")
            .arg(cases_dir())
            .args(&sub)
            .arg("--kernel-sources")
            .arg(&dir)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{sub:?}: {err}");
        assert!(
            err.contains("--kernel-sources") && err.contains("fallback.hip"),
            "{sub:?}: {err}"
        );
        assert!(err.contains(&dir.display().to_string()), "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mutants_without_a_gpu_skip_loudly_and_write_no_table() {
    if w4a16_device::open(w4a16_device::DeviceRequest::first_gpu()).is_ok() {
        w4a16_harness::require::announce_skip(
            "no-gpu",
            "a GPU is present: `w4a16 mutants` would measure for real",
        );
        return;
    }
    let dir = temp("mutants-skip");
    let table = dir.join("mutants.md");
    let out = Command::new(exe())
        .arg("--cases")
        .arg(cases_dir())
        .args(["mutants", "--target", "sm_90", "--out"])
        .arg(&table)
        .env_remove("W4A16_REQUIRE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("W4A16-SKIP [gpu] w4a16 mutants"), "{err}");
    assert!(err.contains("no table written"), "{err}");
    assert!(!table.exists() && !table.with_extension("json").exists());
    // Demanded, the skip is a failure.
    let out = Command::new(exe())
        .arg("--cases")
        .arg(cases_dir())
        .args(["mutants", "--target", "sm_90", "--out"])
        .arg(&table)
        .env("W4A16_REQUIRE", "gpu")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(!table.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mutants_refuse_an_only_glob_that_matches_nothing() {
    let out = Command::new(exe())
        .arg("--cases")
        .arg(cases_dir())
        .args(["mutants", "--target", "sm_90", "--only", "no-such-mutant-*"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no mutant id matches"), "{err}");
}

/// The subprocess contract of `w4a16 mutants` (the flags it passes to `run`, the report it
/// reads back, the trees it writes), exercised without a GPU: `run` then does the CPU-side
/// checks and skips the launches, so the mutant can only survive — with its skips counted in
/// the reason. On a GPU machine this would be a real (slow) measurement, so it is left out there.
#[test]
fn the_measurement_drives_run_through_kernel_sources_and_reads_its_report() {
    use w4a16_harness::mutants::{self, MutantStatus, Plan, SuiteRunner};
    use w4a16_kernels::mutants::Catalogue;
    use w4a16_kernels::source::KernelSources;
    if w4a16_device::open(w4a16_device::DeviceRequest::first_gpu()).is_ok() {
        w4a16_harness::require::announce_skip(
            "no-gpu",
            "a GPU is present: the plumbing test would measure for real",
        );
        return;
    }
    let work = temp("mutants-plumbing");
    let cat = Catalogue::load(&w4a16_kernels::mutants::catalogue_dir()).unwrap();
    let chosen = vec![cat.mutant("fallback-nibbles-sequential").unwrap()];
    let plan = Plan {
        runner: SuiteRunner {
            exe: exe().to_owned(),
            cases_dir: Some(cases_dir()),
            target: "sm_90".into(),
            jobs: 1,
            case_timeout: std::time::Duration::from_secs(60),
        },
        suites: vec!["smoke".into()],
        base: KernelSources::Embedded,
        work: work.clone(),
        each_suite: false,
        run_equivalent: false,
        sanitize: None,
        nvrtc_arch: None,
        nvrtc_extra: Vec::new(),
    };
    let mut seen = Vec::new();
    let report = mutants::measure(&plan, &cat, &chosen, &mut |r| seen.push(r.id.clone())).unwrap();
    assert_eq!(seen, vec!["fallback-nibbles-sequential".to_string()]);
    let m = &report.mutants[0];
    match &m.status {
        MutantStatus::Survived { reason } => {
            assert!(reason.contains("skipped"), "{reason}")
        }
        other => panic!("without a GPU the mutant cannot be killed: {other:?}"),
    }
    // The mutated tree was written and the run read it: the changed line is in the tree.
    let tree = std::fs::read_to_string(work.join(&m.id).join("src").join("fallback.hip")).unwrap();
    assert!(tree.contains("(wr[kk >> 3] >> (e * 4)) & 15u"));
    assert!(work.join(&m.id).join("smoke").join("report.json").is_file());
    assert!(
        work.join("base")
            .join("smoke")
            .join("report.json")
            .is_file()
    );
    std::fs::remove_dir_all(&work).unwrap();
}
