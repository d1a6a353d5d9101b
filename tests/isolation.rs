//! A crash or a hang in one case becomes that case's verdict and the run goes on (ARCHITECTURE.md rule 8).

use std::path::{Path, PathBuf};
use std::time::Duration;
use w4a16_harness::runner::isolate::{WorkerCommand, WorkerSpec, run_isolated, run_worker};
use w4a16_harness::runner::sanitize::{Engine, Sanitizer};
use w4a16_harness::runner::session::StopFlag;
use w4a16_harness::runner::verdict::SanitizerTool;
use w4a16_harness::runner::{Outcome, Verdict};
use w4a16_kernels::Target;

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn rows(verdicts: &[Verdict]) -> Vec<(String, String, Outcome)> {
    verdicts
        .iter()
        .map(|v| (v.case_id.clone(), v.check.to_string(), v.outcome))
        .collect()
}

fn want(rows: &[(&str, &str, Outcome)]) -> Vec<(String, String, Outcome)> {
    rows.iter()
        .map(|(id, check, o)| (id.to_string(), check.to_string(), *o))
        .collect()
}

#[test]
fn crash_and_hang_are_contained_to_their_case() {
    let exe = Path::new(env!("CARGO_BIN_EXE_w4a16"));
    let ids: Vec<String> = ["a/ok1", "b/crash", "c/ok2", "d/hang", "e/ok3"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let spec = WorkerSpec::simulated();
    let mut seen = 0;
    let out = run_isolated(exe, &spec, &ids, Duration::from_secs(2), |_| seen += 1).unwrap();
    // Timings come back framed per case; the faulted cases report none.
    assert_eq!(out.times.cases, 3);
    let verdicts = out.verdicts;
    let by_id: Vec<(&str, Outcome)> = verdicts
        .iter()
        .map(|v| (v.case_id.as_str(), v.outcome))
        .collect();
    assert_eq!(
        by_id,
        vec![
            ("a/ok1", Outcome::Pass),
            ("b/crash", Outcome::Fault),
            ("c/ok2", Outcome::Pass),
            ("d/hang", Outcome::Fault),
            ("e/ok3", Outcome::Pass),
        ]
    );
    assert_eq!(seen, 5);
    let hang = verdicts.iter().find(|v| v.case_id == "d/hang").unwrap();
    assert!(hang.detail.contains("watchdog"), "{}", hang.detail);
}

#[test]
fn a_worker_whose_device_is_lost_retires_and_a_fresh_one_takes_the_rest() {
    let exe = Path::new(env!("CARGO_BIN_EXE_w4a16"));
    let spec = WorkerSpec::simulated();
    let ids = ids(&["a/ok1", "b/lose-device", "c/ok2", "d/ok3"]);
    let out = run_isolated(exe, &spec, &ids, Duration::from_secs(5), |_| {}).unwrap();
    assert_eq!(
        rows(&out.verdicts),
        want(&[
            ("a/ok1", "fallback", Outcome::Pass),
            ("b/lose-device", "fallback", Outcome::Pass),
            ("c/ok2", "fallback", Outcome::Pass),
            ("d/ok3", "fallback", Outcome::Pass),
        ]),
        "retiring is no fault of the next case"
    );
    // The simulated verdict's detail is its worker's process id.
    let pid = |i: usize| out.verdicts[i].detail.clone();
    assert_eq!(pid(0), pid(1));
    assert_ne!(
        pid(1),
        pid(2),
        "the case after the loss runs in a fresh worker"
    );
    assert_eq!(pid(2), pid(3));
}

/// A stand-in for compute-sanitizer: checks the options it must be given, prints the banner,
/// runs the worker after `--` on the same stdout, then the error summary.
#[cfg(unix)]
fn fake_sanitizer(dir: &Path, errors: usize) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("compute-sanitizer");
    let script = format!(
        r#"#!/bin/sh
case " $* " in
  *" --tool memcheck "*"--kernel-name kns=w4a16_ "*"-- "*) ;;
  *) echo "fake compute-sanitizer: unexpected options: $*" >&2; exit 3 ;;
esac
echo "========= COMPUTE-SANITIZER"
while [ "$1" != "--" ]; do shift; done
shift
"$@"
rc=$?
echo "========= ERROR SUMMARY: {errors} errors"
exit $rc
"#
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[cfg(unix)]
#[test]
fn sanitizer_reports_are_charged_to_the_case_that_printed_them() {
    let dir = std::env::temp_dir().join(format!("w4a16-fake-sanitizer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sanitizer = Sanitizer {
        tool: SanitizerTool::Memcheck,
        engine: Engine::ComputeSanitizer(fake_sanitizer(&dir, 2)),
    };
    let exe = Path::new(env!("CARGO_BIN_EXE_w4a16"));
    let spec = WorkerSpec::simulated();
    let worker = WorkerCommand {
        exe,
        spec: &spec,
        sanitizer: Some((&sanitizer, Target::Sm90.into())),
    };
    let ids = ids(&["a/ok", "b/oob", "c/crash", "d/ok", "e/oob"]);
    let mut seen = Vec::new();
    let out = run_worker(
        &worker,
        &ids,
        Duration::from_secs(5),
        &StopFlag::default(),
        |v| seen.push(v.case_id.clone()),
    )
    .unwrap();
    let mut got = rows(&out.verdicts);
    got.sort();
    assert_eq!(
        got,
        want(&[
            ("a/ok", "fallback", Outcome::Pass),
            ("a/ok", "sanitize:memcheck:fallback", Outcome::Pass),
            ("b/oob", "fallback", Outcome::Pass),
            ("b/oob", "sanitize:memcheck:fallback", Outcome::Fail),
            ("c/crash", "device", Outcome::Fault),
            ("d/ok", "fallback", Outcome::Pass),
            ("d/ok", "sanitize:memcheck:fallback", Outcome::Pass),
            ("e/oob", "fallback", Outcome::Pass),
            ("e/oob", "sanitize:memcheck:fallback", Outcome::Fail),
        ]),
        "the report after `BEGIN b/oob` is b's alone; the crash is contained; the last case's \
         report, read before the worker's exit, is e's"
    );
    assert_eq!(seen.len(), out.verdicts.len());
    let b = out
        .verdicts
        .iter()
        .find(|v| v.case_id == "b/oob" && v.outcome == Outcome::Fail)
        .unwrap();
    assert!(
        b.detail.starts_with(
            "Invalid __global__ read of size 16 bytes in w4a16_fallback_f16 by thread (3,0,0) in block (1,0,0); address 0x7f3a4e2005f0 is out of bounds"
        ),
        "{}",
        b.detail
    );
    assert!(
        b.detail.contains("--sanitize memcheck --filter 'b/oob'"),
        "{}",
        b.detail
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(unix)]
#[test]
fn errors_the_sanitizer_counted_outside_every_case_fail_the_run() {
    let dir = std::env::temp_dir().join(format!("w4a16-fake-sanitizer-sum-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The summary claims an error, but no case's window held a report.
    let sanitizer = Sanitizer {
        tool: SanitizerTool::Memcheck,
        engine: Engine::ComputeSanitizer(fake_sanitizer(&dir, 1)),
    };
    let exe = Path::new(env!("CARGO_BIN_EXE_w4a16"));
    let spec = WorkerSpec::simulated();
    let worker = WorkerCommand {
        exe,
        spec: &spec,
        sanitizer: Some((&sanitizer, Target::Sm90.into())),
    };
    let out = run_worker(
        &worker,
        &ids(&["a/ok"]),
        Duration::from_secs(5),
        &StopFlag::default(),
        |_| {},
    )
    .unwrap();
    let summary = out
        .verdicts
        .iter()
        .find(|v| v.check == "sanitize:memcheck:summary")
        .expect("an unattributed error is a verdict");
    assert_eq!(summary.outcome, Outcome::Fail);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_stop_ends_the_workers_and_leaves_unfinished_cases_out() {
    use std::time::Instant;
    use w4a16_harness::runner::isolate::run_isolated_until;

    let exe = Path::new(env!("CARGO_BIN_EXE_w4a16"));
    let ids: Vec<String> = ["a/ok1", "b/hang", "c/ok2"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let spec = WorkerSpec::simulated();
    let stop = StopFlag::default();
    let started = Instant::now();
    // The first verdict stops the run (as `run --fail-fast` does on a failure): the hanging
    // case is not waited for (its watchdog is a minute) and is not charged as a fault.
    let out = run_isolated_until(exe, &spec, &ids, Duration::from_secs(60), &stop, |_| {
        stop.stop()
    })
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let ran: Vec<&str> = out.verdicts.iter().map(|v| v.case_id.as_str()).collect();
    assert_eq!(ran, vec!["a/ok1"]);
    assert!(stop.is_stopped());
}

/// `run --gpus`: each worker is bound to one device by its spec's ordinal (round-robin), every
/// device gets work, and the verdicts come back in case order, the same for any number of
/// devices or workers (the simulated worker's detail names its process and device: all else is
/// compared).
#[test]
fn workers_are_bound_to_devices_and_the_verdicts_do_not_depend_on_how_many() {
    use w4a16_harness::runner::session::run_worker_jobs_on;
    let exe = Path::new(env!("CARGO_BIN_EXE_w4a16"));
    let spec = WorkerSpec::simulated();
    let worker = WorkerCommand {
        exe,
        spec: &spec,
        sanitizer: None,
    };
    // Six layers, the last with two cases (a layer stays on one worker).
    let ids = ids(&[
        "s/l1/M=1/x",
        "s/l2/M=1/x",
        "s/l3/M=1/x",
        "s/l4/M=1/x",
        "s/l5/M=1/x",
        "s/l6/M=1/x",
        "s/l6/M=8/x",
    ]);
    let never = StopFlag::default();
    let run = |jobs: usize, ordinals: &[usize]| {
        run_worker_jobs_on(
            &worker,
            &ids,
            |_| 1.0,
            w4a16_reference::data::layer_key,
            jobs,
            ordinals,
            Duration::from_secs(20),
            &never,
            &|_| {},
        )
        .unwrap()
    };
    let one = run(1, &[0]);
    let many = run(4, &[0, 1]);
    assert_eq!(rows(&one.verdicts), rows(&many.verdicts));
    assert_eq!(
        one.verdicts.iter().map(|v| &v.case_id).collect::<Vec<_>>(),
        ids.iter().collect::<Vec<_>>(),
        "case order"
    );
    let device_of = |v: &Verdict| {
        v.detail
            .rsplit_once(" on device ")
            .map(|(_, d)| d.parse::<usize>().unwrap())
    };
    assert!(one.verdicts.iter().all(|v| device_of(v) == Some(0)));
    let used: std::collections::BTreeSet<usize> =
        many.verdicts.iter().filter_map(device_of).collect();
    assert_eq!(used, [0, 1].into_iter().collect());
    // A layer's cases share a worker, hence a device.
    assert_eq!(device_of(&many.verdicts[5]), device_of(&many.verdicts[6]));
    // Per-device times are kept beside the verdicts, and add up.
    assert_eq!(many.devices.keys().copied().collect::<Vec<_>>(), vec![0, 1]);
    let per_device: usize = many.devices.values().map(|t| t.cases).sum();
    assert_eq!(per_device, ids.len());
    // And per suite, charged from each case's TIMING line by its id.
    let per_suite: Vec<(&str, usize)> = many.suites.iter().map(|(s, t)| (s, t.cases)).collect();
    assert_eq!(per_suite, vec![("s", ids.len())]);
    // Unbound workers say no device (they open their default one).
    let unbound = run(2, &[]);
    assert!(unbound.verdicts.iter().all(|v| device_of(v).is_none()));
    assert!(unbound.devices.is_empty());
}

/// `--gpus` values are typed: a bad one is refused at the command line, naming it.
#[test]
fn a_bad_gpus_value_is_refused_naming_it() {
    let exe = Path::new(env!("CARGO_BIN_EXE_w4a16"));
    for (value, says) in [
        ("0,x", "\"x\""),
        ("0,1,0", "device 0 is listed twice"),
        ("", "empty"),
        // No host has a device 99: named, not a CPU-only run in its place.
        ("99", "device 99"),
    ] {
        let out = std::process::Command::new(exe)
            .args(["run", "--gpus", value, "--suite", "smoke"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value:?}: {err}");
        assert!(
            err.contains("--gpus") && err.contains(says),
            "{value:?}: {err}"
        );
    }
}
