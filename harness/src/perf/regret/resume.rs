//! Continuing a regret report across device calls: the whole field's every legal path takes
//! longer than one call may run, so a run can start from an earlier `regret.json` (one a time
//! limit stopped, or a batch of another `--filter`), keep its rows and time only the cases it
//! lacks. Rows measured under other settings never mix into one report: the target, device,
//! suite, prefill dequant option, plan, time source and kernel sources must all be the same,
//! and every kept row's selected path must still be the one the selection picks.

use super::{RegretCase, RegretRun};
use std::collections::BTreeSet;

/// Why an earlier report cannot be continued by this run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ResumeError {
    #[error(
        "{path}: its {field} is {found}, this run's is {expected}: times taken under other \
         settings do not go into one report (start a new report, or run with the same settings)"
    )]
    Differs {
        path: String,
        field: &'static str,
        found: String,
        expected: String,
    },
    #[error(
        "{path}: {case} was timed with {found} selected, this run's selection picks {expected}: \
         the selection changed since, so its regret would be another run's (start a new report)"
    )]
    SelectionMoved {
        path: String,
        case: String,
        found: String,
        expected: String,
    },
}

/// Starts `run` (still empty) from `previous`, read from `path`: its rows and not-timed cases
/// are kept, and the cases of `cases` it has no row for are returned, in order, to be timed.
/// `run.planned` becomes the kept rows plus those cases.
pub fn resume(
    run: &mut RegretRun,
    previous: RegretRun,
    cases: Vec<RegretCase>,
    path: &str,
) -> Result<Vec<RegretCase>, ResumeError> {
    let differs = |field: &'static str, found: String, expected: String| ResumeError::Differs {
        path: path.to_string(),
        field,
        found,
        expected,
    };
    let fields = [
        ("target", &previous.target, &run.target),
        ("device", &previous.device, &run.device),
        ("suite", &previous.suite, &run.suite),
        ("kernel sources", &previous.kernels, &run.kernels),
    ];
    for (field, found, expected) in fields {
        if found != expected {
            return Err(differs(field, found.clone(), expected.clone()));
        }
    }
    if previous.prefill_dequant != run.prefill_dequant {
        return Err(differs(
            "prefill dequant option",
            previous.prefill_dequant.to_string(),
            run.prefill_dequant.to_string(),
        ));
    }
    if previous.plan != run.plan {
        return Err(differs(
            "plan",
            format!("{:?}", previous.plan),
            format!("{:?}", run.plan),
        ));
    }
    if previous.source != run.source {
        return Err(differs(
            "time source",
            format!("{:?}", previous.source),
            format!("{:?}", run.source),
        ));
    }
    for row in &previous.rows {
        let now = cases.iter().find(|c| c.perf.case_id == row.case_id);
        if let Some(case) = now.filter(|c| c.selected != row.selected) {
            return Err(ResumeError::SelectionMoved {
                path: path.to_string(),
                case: row.case_id.clone(),
                found: row.selected.to_string(),
                expected: case.selected.to_string(),
            });
        }
    }
    let done: BTreeSet<&str> = previous.rows.iter().map(|r| r.case_id.as_str()).collect();
    let todo: Vec<RegretCase> = cases
        .into_iter()
        .filter(|c| !done.contains(c.perf.case_id.as_str()))
        .collect();
    let mut not_timed = previous.not_timed;
    for entry in std::mem::take(&mut run.not_timed) {
        if !not_timed.iter().any(|(id, _)| *id == entry.0) {
            not_timed.push(entry);
        }
    }
    run.not_timed = not_timed;
    run.planned = previous.rows.len() + todo.len();
    run.rows = previous.rows;
    if run.peers_note.is_none() {
        run.peers_note = previous.peers_note;
    }
    Ok(todo)
}
