//! The verdict model's tests: the summary, `W4A16_REQUIRE`, and verdicts across the worker pipe.

use super::*;
use w4a16_device::{Capability, DeviceFault};
use w4a16_kernels::KernelId;
use w4a16_require::{Requirement, Skip};

fn no(requirement: Requirement) -> Skip {
    Skip {
        requirement,
        reason: format!("no {requirement} here"),
    }
}

#[test]
fn only_skips_of_a_required_need_turn_into_failures() {
    let kernel = || Check::kernel(KernelId::Skinny);
    let (blas_outcome, blas) = Cause::of_device(DeviceFault::MissingCapability {
        capability: Capability::VendorBlas,
        device: "d".into(),
        why: "not installed".into(),
    });
    let (sticky_outcome, sticky) = Cause::of_device(DeviceFault::Sticky {
        during: "sync".into(),
        code: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
    });
    assert_eq!(
        (blas_outcome, sticky_outcome),
        (Outcome::Skip, Outcome::Fault)
    );
    let mut vs = vec![
        Verdict::skipped("a", kernel(), no(Requirement::Gpu)),
        Verdict::skipped("b", kernel(), no(Requirement::Nvrtc)),
        Verdict::new("c", kernel(), blas_outcome).because(blas),
        Verdict::new("d", kernel(), sticky_outcome).because(sticky),
        Verdict::new("e", kernel(), Outcome::Pass),
    ];
    let s = Summary::of(&vs);
    assert_eq!((s.skipped, s.faults, s.failures()), (3, 1, 1));
    assert_eq!(s.skips_needing.get(&Requirement::Gpu), Some(&2));
    assert_eq!(s.skips_needing.get(&Requirement::Nvrtc), Some(&1));
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["skips_needing"]["gpu"], 2);

    assert_eq!(apply_required(&mut vs, &[]), 0);
    assert_eq!(apply_required(&mut vs, &[Requirement::Gpu]), 2);
    let outcomes: Vec<Outcome> = vs.iter().map(|v| v.outcome).collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Fail,
            Outcome::Skip,
            Outcome::Fail,
            Outcome::Fault,
            Outcome::Pass
        ]
    );
    assert_eq!(
        vs[0].detail,
        "W4A16_REQUIRE=gpu but the check was skipped: no gpu here"
    );
    // Applying it again changes nothing: the turned verdicts are no skips any more.
    assert_eq!(apply_required(&mut vs, &[Requirement::Gpu]), 0);
    assert_eq!(Summary::of(&vs).failures(), 3);
}

/// An exhausted device memory is a fault like any other, counted apart: the summary says the
/// run asked too much of the card and what to change, and the count travels in the report.
#[test]
fn out_of_memory_faults_are_counted_and_the_summary_says_what_to_change() {
    let kernel = || Check::kernel(KernelId::Fused);
    let (outcome, oom) = Cause::of_device(DeviceFault::OutOfMemory {
        during: "allocating 234889216 bytes".into(),
        code: "CUDA_ERROR_OUT_OF_MEMORY".into(),
    });
    assert_eq!(outcome, Outcome::Fault);
    let (_, other) = Cause::of_device(DeviceFault::Call {
        during: "sync".into(),
        code: "CUDA_ERROR_UNKNOWN".into(),
    });
    let vs = vec![
        Verdict::new("a", kernel(), outcome).because(oom.clone()),
        Verdict::new("b", kernel(), outcome).because(oom),
        Verdict::new("c", kernel(), Outcome::Fault).because(other),
        Verdict::new("d", kernel(), Outcome::Pass),
    ];
    let s = Summary::of(&vs);
    assert_eq!((s.faults, s.out_of_memory), (3, 2));
    let text = s.to_string();
    assert!(
        text.contains("2 of the faults: the device ran out of memory") && text.contains("--jobs"),
        "{text}"
    );
    assert_eq!(serde_json::to_value(&s).unwrap()["out_of_memory"], 2);
    let none = Summary::of(&vs[2..]);
    assert_eq!(none.out_of_memory, 0);
    assert!(!none.to_string().contains("out of memory"));
}

#[test]
fn a_verdict_with_its_cause_survives_the_worker_pipe() {
    let v = Verdict::new("a", Check::Determinism(KernelId::Fused), Outcome::Fail)
        .because(Cause::Mismatch(Mismatch::Nondeterministic { elements: 3 }));
    assert_eq!(v.detail, "3 elements differ between two identical launches");
    let json = serde_json::to_string(&v).unwrap();
    assert!(json.contains("\"check\":\"determinism:fused\""), "{json}");
    assert_eq!(serde_json::from_str::<Verdict>(&json).unwrap(), v);
    // A non-finite worst ratio (every element Inf) still crosses.
    let problems = OutputProblems {
        over_bound: 4,
        worst_ratio: f64::INFINITY,
        ..OutputProblems::default()
    };
    let v = Verdict::new("a", Check::kernel(KernelId::Fused), Outcome::Fail)
        .because(Cause::Mismatch(Mismatch::Output(problems)));
    let json = serde_json::to_string(&v).unwrap();
    let back: Verdict = serde_json::from_str(&json).unwrap();
    assert_eq!(back.detail, v.detail);
    let Some(Cause::Mismatch(Mismatch::Output(p))) = back.cause else {
        panic!("{back:?}")
    };
    assert_eq!(p.over_bound, 4);
    assert!(p.worst_ratio.is_nan());
    // A reference-side error keeps its type here and its text across the pipe.
    let bad = w4a16_reference::data::DataError::ZeroGroup;
    let v = Verdict::new("a", Check::Data, Outcome::Fail).because(Cause::Reference {
        stage: ReferenceStage::Bound,
        error: SourceError::new(bad.clone()),
    });
    assert_eq!(v.detail, format!("bound: {bad}"));
    let Some(Cause::Reference { error, .. }) = &v.cause else {
        panic!("{v:?}")
    };
    assert_eq!(error.downcast_ref(), Some(&bad));
    let json = serde_json::to_string(&v).unwrap();
    assert!(json.contains(r#""stage":"bound""#), "{json}");
    let back: Verdict = serde_json::from_str(&json).unwrap();
    assert_eq!(back, v);
    let Some(Cause::Reference { error, .. }) = &back.cause else {
        panic!("{back:?}")
    };
    assert_eq!(
        error.downcast_ref::<w4a16_reference::data::DataError>(),
        None
    );
    // A verdict from before causes existed still reads.
    let old = r#"{"case_id":"a","check":"skinny","outcome":"pass","bucket":null,"detail":""}"#;
    let v: Verdict = serde_json::from_str(old).unwrap();
    assert_eq!((v.check, v.cause), (Check::kernel(KernelId::Skinny), None));
}
