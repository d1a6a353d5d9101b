//! `w4a16 perf --target gfxNNNN` on the ISA emulator (docs/perf-counters.md): counting is
//! deterministic, the committed counter goldens are current for a few small cases of gfx1151,
//! and only `--update-goldens` writes a counters file, which reads back as written. Each run is a
//! handful of qwen3-8b o_proj cases at M = 1 (a few seconds each). No AMD toolchain → a loud
//! skip (a failure under `W4A16_REQUIRE=amd-toolchain`); an AMD GPU here would time instead of
//! count, so these skip there.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use w4a16_harness::perf::counters::golden::CountersFile;
use w4a16_harness::perf::counters::{count_suite, within_budget};
use w4a16_harness::perf::measure::perf_cases;
use w4a16_harness::require::{Requirement, Skip, skip_or_fail};
use w4a16_harness::runner::cli_run;
use w4a16_kernels::Target;
use w4a16_kernels::amd::{AmdBuildError, Builder};
use w4a16_select::config::KernelConfig;

/// One case per provider: qwen3-8b's o_proj at M = 1 (2^24 MACs each).
const SMALL: &str = "field/qwen3-8b.o_proj/M=1/**";
/// One of them.
const ONE: &str = "field/qwen3-8b.o_proj/M=1/f16/sym/**";

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_w4a16"))
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn perf(args: &[&str]) -> Output {
    Command::new(exe())
        .current_dir(repo())
        .args(["perf", "--target", "gfx1151"])
        .args(args)
        .output()
        .expect("the CLI runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `true` when the emulator can count here; else a loud skip (a failure when required).
fn emulator_or_skip() -> bool {
    if Path::new("/dev/kfd").exists() {
        w4a16_harness::require::announce_skip(
            "no-amd-gpu",
            "an AMD GPU is here: perf times it instead of counting on the emulator",
        );
        return false;
    }
    match Builder::from_env() {
        Ok(_) => true,
        Err(e @ AmdBuildError::ToolchainMissing { .. }) => {
            skip_or_fail(&Skip {
                requirement: Requirement::AmdToolchain,
                reason: format!("perf counters on the ISA emulator: {e}"),
            });
            false
        }
        Err(e) => panic!("{e}"),
    }
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("w4a16-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn the_committed_counter_goldens_are_current_for_small_cases_of_gfx1151() {
    if !emulator_or_skip() {
        return;
    }
    let out = scratch("counters-current");
    let o = perf(&["--filter", SMALL, "--report-dir", out.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "perf/gfx1151.counters.json is not current (re-record with --update-goldens): {t}"
    );
    assert!(t.contains("same: 4"), "{t}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn counting_a_launch_twice_counts_the_same() {
    if !emulator_or_skip() {
        return;
    }
    let (_, set) = cli_run::load_with_dir(None).expect("cases load");
    let mut suite = set.suite("field").expect("field").clone();
    suite
        .cases
        .retain(|c| w4a16_cases::glob::glob_match(ONE, &c.id));
    let (cases, _) = perf_cases(
        &suite,
        set.providers(),
        Target::Gfx1151,
        &KernelConfig::default(),
    );
    let (cases, left) = within_budget(cases, 1 << 24);
    assert_eq!((cases.len(), left.len()), (1, 0));
    let device = w4a16_device::open(w4a16_device::DeviceRequest::emulator(Target::Gfx1151))
        .expect("the emulator opens");
    // The emulator alternates schedules per launch of an entry: the second count runs the other.
    let first = count_suite(device.as_ref(), None, &cases, &mut |_| {}).expect("counts");
    let second = count_suite(device.as_ref(), None, &cases, &mut |_| {}).expect("counts");
    assert_eq!(first, second);
    let launch = &first[0].0.launches[0];
    assert!(launch.counters["SQ_WAVES"] > 0 && launch.counters["SQ_INSTS_VALU"] > 0);
}

#[test]
fn only_update_goldens_writes_a_counters_file_and_it_reads_back() {
    if !emulator_or_skip() {
        return;
    }
    let goldens = scratch("counters-goldens");
    let report = scratch("counters-report");
    std::fs::create_dir_all(&goldens).unwrap();
    let args = |update: bool| {
        let mut a = vec![
            "--filter",
            ONE,
            "--goldens",
            goldens.to_str().unwrap(),
            "--report-dir",
            report.to_str().unwrap(),
        ];
        if update {
            a.push("--update-goldens");
        }
        perf(&a)
    };
    let path = CountersFile::path_for(&goldens, "gfx1151");
    let o = args(false);
    assert_eq!(
        o.status.code(),
        Some(1),
        "no golden must fail: {}",
        text(&o)
    );
    assert!(!path.exists(), "a judging run wrote {}", path.display());
    let o = args(true);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let file = CountersFile::load(&path)
        .expect("reads back")
        .expect("written");
    assert_eq!(file.entries.len(), 1);
    assert_eq!(file.target, "gfx1151");
    // Saved again, the file is byte for byte what the CLI wrote.
    let again = goldens.join("again").join("gfx1151.counters.json");
    file.save(&again).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        std::fs::read_to_string(&again).unwrap()
    );
    let written = std::fs::read_to_string(&path).unwrap();
    let o = args(false);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), written);
    let _ = std::fs::remove_dir_all(&goldens);
    let _ = std::fs::remove_dir_all(&report);
}
