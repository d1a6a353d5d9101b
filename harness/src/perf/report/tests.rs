//! The perf reports on a synthetic run: every file written and readable, the numbers as an
//! engineer writes them.

use super::summary::summary_markdown;
use super::*;
use crate::perf::judge::judge_case;
use crate::perf::judge::tests::measured;
use crate::perf::peers::PeerTimes;
use crate::perf::update::golden_entry;

/// A run whose only out-of-band case is a control that moved under a steady kernel says so
/// under the worst cases, and the verdict stands.
#[test]
fn a_control_that_moved_alone_is_said_beside_the_verdict() {
    let mut run = run();
    let golden = golden_entry(&measured(1, "skinny:w4a16_skinny_f16", 30.0, 0.02, 15)).unwrap();
    let goldens = crate::perf::judge::tests::goldens(vec![golden], None);
    let mut m = measured(1, "skinny:w4a16_skinny_f16", 30.0, 0.02, 15);
    m.control_us.iter_mut().for_each(|c| *c /= 5.0);
    run.outcomes = vec![judge_case(m, None, Some(&goldens), &run.policy)];
    run.control = None;
    assert!(run.outcomes[0].fails(&run.policy));
    let md = summary_markdown(&run);
    assert!(
        md.contains(
            "**1 of these 1 out-of-band cases moved with the kernel's own time within ±8.0 %"
        ),
        "{md}"
    );
    assert!(md.contains("| +0.0 % | -80.0 % |"), "{md}");
}

#[test]
fn numbers_read_as_an_engineer_writes_them() {
    assert_eq!(fmt_sig3(33.612), "33.6");
    assert_eq!(fmt_sig3(1372.4), "1370");
    assert_eq!(fmt_sig3(0.21345), "0.213");
    assert_eq!(fmt_sig3(9.996), "10.0");
    assert_eq!(fmt_sig3(f64::NAN), "—");
    assert_eq!(fmt_delta(0.2), "+20.0 %");
    assert_eq!(fmt_delta(-0.0312), "-3.1 %");
    assert_eq!(fmt_p(0.000_182_67), "1.8e-4");
    assert_eq!(fmt_p(0.245), "0.245");
    assert_eq!(fmt_p(f64::NAN), "n/a");
}

/// Four M of one shape against goldens at 30 µs: M=1 20 % slower, M=2 within band, M=3 a
/// different kernel, M=4 without a golden; the control runs everything at the golden's speed.
fn run() -> PerfRun {
    let policy = JudgePolicy::default();
    let goldens = crate::perf::judge::tests::goldens(
        (1..=3)
            .map(|m| golden_entry(&measured(m, "skinny:w4a16_skinny_f16", 30.0, 0.02, 15)).unwrap())
            .collect(),
        None,
    );
    let sides = [
        (1, "skinny:w4a16_skinny_f16", 36.0),
        (2, "skinny:w4a16_skinny_f16", 30.5),
        (3, "fused:w4a16_fused_f16", 30.0),
        (4, "skinny:w4a16_skinny_f16", 30.0),
    ];
    let mut outcomes: Vec<CaseOutcome> = sides
        .iter()
        .map(|&(m, kernel, t)| {
            judge_case(
                measured(m, kernel, t, 0.02, 15),
                Some(measured(m, "skinny:w4a16_skinny_f16", 30.0, 0.02, 15)),
                Some(&goldens),
                &policy,
            )
        })
        .collect();
    outcomes[0].peers = Some(PeerTimes {
        torch_int4_us: Some(20.3),
        dense_fp16_us: Some(34.2),
        skipped: Vec::new(),
    });
    PerfRun {
        target: "sm_90".into(),
        device: "NVIDIA H200".into(),
        suite: "field".into(),
        policy,
        plan: PerfPlan::default(),
        candidate: "embedded kernels".into(),
        control: Some("../base/kernels".into()),
        outcomes,
        not_timed: vec![("field/moe/x".into(), "MoE: timed by bench --moe".into())],
        peers_note: None,
    }
}

#[test]
fn write_reports_writes_all_four_readable_files() {
    let dir = std::env::temp_dir().join(format!("w4a16-perf-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = run();
    let files = write_reports(&run, &dir).unwrap();

    let md = std::fs::read_to_string(&files.summary_md).unwrap();
    assert!(md.starts_with("# Perf `sm_90`: FAIL, 3 of 4 cases"), "{md}");
    assert!(
        md.contains("| candidate vs goldens | 1 | 0 | 1 | 0 | 1 | 1 | 0 |"),
        "{md}"
    );
    assert!(
        md.contains("| control vs goldens | 3 | 0 | 0 | 0 | 0 | 1 | — |"),
        "{md}"
    );
    assert!(
        md.contains("| candidate vs control | 3 | 0 | 1 | 0 | 0 | 0 | — |"),
        "{md}"
    );
    // The worst case is named with its label, time, ratio, golden ratio and shift.
    let worst = md
        .split("## Worst cases")
        .nth(1)
        .unwrap()
        .lines()
        .nth(4)
        .unwrap();
    assert!(
        worst.starts_with("| `hybrid-w4a16-zp-bf16/qwen3-8b.mlp_down/M=1` | `skinny:w4a16_skinny_f16` | 36.0 | 3.60 | 3.00 | +20.0 % |"),
        "{worst}"
    );
    assert!(
        md.contains("wrong kernel: ran fused:w4a16_fused_f16, golden skinny:w4a16_skinny_f16"),
        "{md}"
    );
    assert!(md.contains("| 20.3 | 34.2 |"), "peers columns: {md}");
    // The M = 1 regression is the kernel's own: its time moved, its control did not.
    assert!(worst.contains("| +20.0 % | +0.0 % |"), "{worst}");
    assert!(
        !md.contains("moved with the kernel's own time within"),
        "{md}"
    );
    assert!(md.contains("](plot.svg)"));
    assert!(
        md.contains("1 case not timed</summary>\n\n- `field/moe/x`: MoE: timed by bench --moe"),
        "{md}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files.json).unwrap()).unwrap();
    assert_eq!(json["counts"]["failing"], 3);
    assert_eq!(
        json["outcomes"][0]["candidate_judgement"]["kind"],
        "regression"
    );
    assert_eq!(json["target"], "sm_90");

    let xml = std::fs::read_to_string(&files.junit).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), 4);
    assert_eq!(xml.matches("<failure").count(), 3, "{xml}");
    assert!(
        xml.contains("classname=\"hybrid-w4a16-zp-bf16/qwen3-8b.mlp_down\""),
        "{xml}"
    );
    assert!(xml.contains("message=\"regression +20.0 %"), "{xml}");

    let svg = std::fs::read_to_string(&files.plot).unwrap();
    assert!(
        svg.contains("<svg") && svg.contains("qwen3-8b.mlp_down"),
        "{svg}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_clean_run_says_pass_and_has_no_failures() {
    let mut run = run();
    run.outcomes.truncate(2);
    run.outcomes.remove(0);
    run.control = None;
    for o in &mut run.outcomes {
        (
            o.control,
            o.control_judgement,
            o.vs_control,
            o.cand_over_control,
        ) = (None, None, None, None);
    }
    let md = summary_markdown(&run);
    assert!(md.starts_with("# Perf `sm_90`: pass"), "{md}");
    assert!(md.contains("No case is out of band."));
    assert!(!md.contains("control vs goldens"));
    assert!(!junit(&run).unwrap().contains("<failure"));
}
