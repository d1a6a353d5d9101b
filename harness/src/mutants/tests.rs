//! Kill rates from synthetic outcomes, the Markdown table, and a run's report folder read as a
//! suite outcome.

use super::*;
use crate::runner::Verdict;
use w4a16_kernels::mutants::catalogue_dir;

fn run(suite: &str, outcome: SuiteOutcome) -> SuiteRun {
    SuiteRun {
        suite: suite.into(),
        sanitize: None,
        outcome,
        wall_s: 1.0,
    }
}

fn killed(case: &str) -> SuiteOutcome {
    SuiteOutcome::Killed {
        case_id: case.into(),
        check: "skinny".into(),
        outcome: Outcome::Fail,
        detail: "3 over bound".into(),
    }
}

fn passed() -> SuiteOutcome {
    SuiteOutcome::Passed {
        checks: 10,
        skipped: 0,
    }
}

fn result(cat: &Catalogue, id: &str, runs: Vec<SuiteRun>) -> MutantResult {
    let m = cat.mutant(id).unwrap();
    MutantResult::new(m, "sm_90", status_of(&runs), runs, 1.0)
}

#[test]
fn kill_rates_per_suite_and_class_from_synthetic_outcomes() {
    let cat = Catalogue::load(&catalogue_dir()).unwrap();
    let suites: Vec<String> = ["smoke", "kernels", "edges"].map(String::from).to_vec();
    let mut results = vec![
        // killed by smoke
        result(
            &cat,
            "skinny-scale-per-span",
            vec![run("smoke", killed("smoke/a"))],
        ),
        // killed by kernels after smoke passed
        result(
            &cat,
            "skinny-flush-ignores-group-end",
            vec![run("smoke", passed()), run("kernels", killed("kernels/b"))],
        ),
        // killed by edges
        result(
            &cat,
            "skinny-y-mask-off-by-one",
            vec![
                run("smoke", passed()),
                run("kernels", passed()),
                run("edges", killed("edges/c")),
            ],
        ),
        // survived everything
        result(
            &cat,
            "skinny-row-h-valid-off-by-one",
            vec![
                run("smoke", passed()),
                run("kernels", passed()),
                run("edges", passed()),
            ],
        ),
        // stillborn: never counted
        result(
            &cat,
            "skinny-x-fragment-wrong-width",
            vec![run(
                "smoke",
                SuiteOutcome::CompileError {
                    detail: "compiling skinny.hip for sm_90 failed: no".into(),
                },
            )],
        ),
    ];
    // equivalent, not run
    let eq = cat.mutant("skinny-group-engine-g128-only").unwrap();
    results.push(MutantResult::new(
        eq,
        "sm_90",
        MutantStatus::NotRunEquivalent,
        vec![],
        0.0,
    ));
    let r = MutantsReport::aggregate("sm_90", &suites, None, false, &cat, results);
    assert_eq!((r.live, r.killed), (4, 3));
    assert_eq!(r.kill_rate, Some(0.75));
    let rows: Vec<(usize, usize, usize)> = r
        .per_suite
        .iter()
        .map(|s| (s.ran, s.killed, s.cumulative_killed))
        .collect();
    assert_eq!(rows, vec![(4, 1, 1), (3, 1, 2), (2, 1, 3)]);
    assert_eq!(r.per_suite[2].cumulative_rate, 0.75);

    let class = |c: BugClass| r.per_class.iter().find(|x| x.class == c).unwrap().clone();
    let sa = class(BugClass::ScaleAliasing);
    assert_eq!((sa.killed, sa.survived, sa.kill_rate), (2, 0, Some(1.0)));
    let oob = class(BugClass::UnusedOobRead);
    assert_eq!((oob.killed, oob.survived, oob.kill_rate), (0, 1, Some(0.0)));
    let vx = class(BugClass::UnalignedVectorX);
    assert_eq!((vx.stillborn, vx.killed, vx.kill_rate), (1, 0, None));
    let gg = class(BugClass::GroupSizeGaps);
    assert_eq!((gg.equivalent, gg.kill_rate), (1, None));

    let md = r.markdown();
    assert!(md.contains("kill rate **75 %**"), "{md}");
    assert!(md.contains("| edges | 2 | 1 | 3 | 75 % |"), "{md}");
    assert!(md.contains("| scale-aliasing | docs/field.md §6.3 | 2 | 0 | 0 | 0 | 2 | 0 | 100 % |"));
    assert!(md.contains("`skinny-row-h-valid-off-by-one`"));
    assert!(md.contains("no failing check: 30 checks of smoke + kernels + edges passed"));
    assert!(md.contains("Stillborn"));
    assert!(md.contains("fused-silu-mul"));
    // JSON round trip.
    let json = serde_json::to_string(&r).unwrap();
    let back: MutantsReport = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
}

fn memcheck(suite: &str, outcome: SuiteOutcome) -> SuiteRun {
    SuiteRun {
        sanitize: Some(SanitizerTool::Memcheck),
        ..run(suite, outcome)
    }
}

#[test]
fn a_kill_only_memcheck_sees_is_counted_apart_from_the_suites() {
    let cat = Catalogue::load(&catalogue_dir()).unwrap();
    let suites: Vec<String> = ["smoke", "kernels"].map(String::from).to_vec();
    let share = SanitizeShare {
        tool: SanitizerTool::Memcheck,
        suites: ["smoke", "moe"].map(String::from).to_vec(),
    };
    let oob = SuiteOutcome::Killed {
        case_id: "moe/x".into(),
        check: "sanitize:memcheck:moe".into(),
        outcome: Outcome::Fail,
        detail: "Invalid __global__ read of size 4 bytes".into(),
    };
    let results = vec![
        // killed by a plain suite: the sanitizer share never runs on it
        result(
            &cat,
            "skinny-scale-per-span",
            vec![run("smoke", killed("smoke/a"))],
        ),
        // let through by the suites, killed by memcheck over moe
        result(
            &cat,
            "readpast-moe-padding-reads-x-row-t",
            vec![
                run("smoke", passed()),
                run("kernels", passed()),
                memcheck("smoke", passed()),
                memcheck("moe", oob),
            ],
        ),
        // let through by everything
        result(
            &cat,
            "skinny-row-h-valid-off-by-one",
            vec![
                run("smoke", passed()),
                run("kernels", passed()),
                memcheck("smoke", passed()),
                memcheck("moe", passed()),
            ],
        ),
    ];
    let r = MutantsReport::aggregate("sm_90", &suites, Some(&share), false, &cat, results);
    assert_eq!(
        (r.live, r.killed_by_suites, r.killed_by_sanitizer, r.killed),
        (3, 1, 1, 2)
    );
    assert_eq!(r.suites_kill_rate, Some(1.0 / 3.0));
    assert_eq!(r.kill_rate, Some(2.0 / 3.0));
    let labels: Vec<(&str, usize, usize, usize)> = r
        .per_suite
        .iter()
        .map(|s| (s.suite.as_str(), s.ran, s.killed, s.cumulative_killed))
        .collect();
    assert_eq!(
        labels,
        vec![
            ("smoke", 3, 1, 1),
            ("kernels", 2, 0, 1),
            ("memcheck:smoke", 2, 0, 1),
            ("memcheck:moe", 2, 1, 2),
        ]
    );
    let oob_row = r
        .per_class
        .iter()
        .find(|c| c.class == BugClass::UnusedOobRead)
        .unwrap();
    assert_eq!(
        (
            oob_row.killed,
            oob_row.killed_by_sanitizer,
            oob_row.survived
        ),
        (0, 1, 1)
    );
    assert_eq!(
        (oob_row.suites_kill_rate, oob_row.kill_rate),
        (Some(0.0), Some(0.5))
    );
    let md = r.markdown();
    assert!(
        md.contains("| the suites (smoke + kernels) | 1 of 3 | 33 % |"),
        "{md}"
    );
    assert!(
        md.contains("smoke + moe under compute-sanitizer memcheck (exact-size allocations) | 2 of 3 (1 by memcheck alone) | 67 % |"),
        "{md}"
    );
    assert!(md.contains("| memcheck:moe | 2 | 1 | 2 | 67 % |"), "{md}");
    assert!(md.contains("killed by memcheck"), "{md}");
    assert!(
        md.contains("`readpast-moe-padding-reads-x-row-t` (unused-oob-read): memcheck:moe `moe/x` [sanitize:memcheck:moe]"),
        "{md}"
    );
    let json = serde_json::to_string(&r).unwrap();
    let back: MutantsReport = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    // Without a sanitizer share the table has no such column.
    let plain = MutantsReport::aggregate("sm_90", &suites, None, false, &cat, vec![]);
    assert!(!plain.markdown().contains("killed by memcheck"));
}

#[test]
fn an_equivalent_mutant_that_is_killed_is_flagged_not_counted() {
    let cat = Catalogue::load(&catalogue_dir()).unwrap();
    let suites = vec!["smoke".to_string()];
    let eq = result(
        &cat,
        "fallback-mul-add-unfused",
        vec![run("smoke", killed("smoke/x"))],
    );
    let r = MutantsReport::aggregate("sm_90", &suites, None, false, &cat, vec![eq]);
    assert_eq!((r.live, r.killed, r.kill_rate), (0, 0, None));
    assert!(
        r.markdown()
            .contains("a false alarm or a wrong equivalence claim")
    );
}

#[test]
fn a_report_folder_becomes_a_suite_outcome() {
    let dir = std::env::temp_dir().join(format!("w4a16-mutants-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |vs: &[Verdict]| {
        let json = crate::runner::report::json("sm_90", vs, None);
        std::fs::write(dir.join("report.json"), json).unwrap();
    };
    use crate::runner::Check;
    use w4a16_kernels::KernelId;
    let pass = Verdict::new("smoke/a", Check::kernel(KernelId::Skinny), Outcome::Pass);
    let fused = || Check::kernel(KernelId::Fused);
    let fail = Verdict::new("smoke/b", fused(), Outcome::Fail).detail("7 over bound");
    let compile = Verdict::new("smoke/c", fused(), Outcome::Fault)
        .detail("compiling fused.hip for sm_90 failed: error: x");
    write(std::slice::from_ref(&pass));
    assert_eq!(
        suite_outcome(&dir, true, ""),
        SuiteOutcome::Passed {
            checks: 1,
            skipped: 0
        }
    );
    assert!(matches!(
        suite_outcome(&dir, false, "tail"),
        SuiteOutcome::Error { .. }
    ));
    write(&[pass.clone(), fail, compile.clone()]);
    assert!(matches!(
        suite_outcome(&dir, false, ""),
        SuiteOutcome::Killed { case_id, .. } if case_id == "smoke/b"
    ));
    write(&[pass, compile]);
    assert!(matches!(
        suite_outcome(&dir, false, ""),
        SuiteOutcome::CompileError { .. }
    ));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(matches!(
        suite_outcome(&dir, true, ""),
        SuiteOutcome::Error { .. }
    ));
}
