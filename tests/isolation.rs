//! A crash or a hang in one case becomes that case's verdict and the run goes on (DESIGN rule 8).

use std::path::Path;
use std::time::Duration;
use w4a16_harness::runner::{Outcome, isolate::run_isolated};

#[test]
fn crash_and_hang_are_contained_to_their_case() {
    let exe = Path::new(env!("CARGO_BIN_EXE_w4a16"));
    let ids: Vec<String> = ["a/ok1", "b/crash", "c/ok2", "d/hang", "e/ok3"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let args = vec!["worker".to_string(), "--simulate".to_string()];
    let mut seen = 0;
    let out = run_isolated(exe, &args, &ids, Duration::from_secs(2), |_| seen += 1).unwrap();
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
fn a_stop_ends_the_workers_and_leaves_unfinished_cases_out() {
    use std::time::Instant;
    use w4a16_harness::runner::isolate::run_isolated_until;
    use w4a16_harness::runner::session::StopFlag;
    let exe = Path::new(env!("CARGO_BIN_EXE_w4a16"));
    let ids: Vec<String> = ["a/ok1", "b/hang", "c/ok2"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let args = vec!["worker".to_string(), "--simulate".to_string()];
    let stop = StopFlag::default();
    let started = Instant::now();
    // The first verdict stops the run (as `run --fail-fast` does on a failure): the hanging
    // case is not waited for (its watchdog is a minute) and is not charged as a fault.
    let out = run_isolated_until(exe, &args, &ids, Duration::from_secs(60), &stop, |_| {
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
