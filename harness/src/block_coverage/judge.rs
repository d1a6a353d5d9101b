//! Judging a coverage record: every block no suite executes is named by an `[[uncovered]]`
//! entry of `cases/exceptions/coverage.toml` (the one suppression mechanism, judged strictly:
//! an entry naming a block that now runs, or nothing, or past its expiry fails), and a fresh
//! run of a suite executes at least the blocks the record says it does.

use super::record::{EntryRecord, Record, flags, offset_text};
use std::fmt;
use w4a16_cases::Xfail;
use w4a16_cases::coverage_exceptions::{BlockList, Uncovered, parse_offset};
use w4a16_cases::suppress::Date;
use w4a16_device::BlockCoverage;

/// One way a record (or a run against it) fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// A block no suite executes, with no `[[uncovered]]` entry giving the reason.
    NoReason {
        target: String,
        entry: String,
        offset: String,
        line: Option<String>,
    },
    /// An `[[uncovered]]` entry names a block that executes (remove it from the list), or an
    /// entry under `blocks = "all"` that executes some blocks.
    Covered {
        key: String,
        entry: String,
        what: String,
    },
    /// An `[[uncovered]]` entry names a block (or entry) the record does not have.
    NamesNothing { key: String, what: String },
    /// An `[[uncovered]]` entry past its `expires`.
    Expired { key: String, expires: Date },
    /// The record is of other machine code than the run's (rerun `w4a16 coverage`).
    Stale { target: String, entry: String },
    /// The run did not execute a block the record says it executes.
    Dropped {
        target: String,
        /// What ran: `suite checkpoints`, `the CI share`.
        ran: String,
        entry: String,
        offset: String,
    },
    /// The record lacks an entry the run has, or a suite's bitmap.
    Missing { target: String, what: String },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::NoReason {
                target,
                entry,
                offset,
                line,
            } => write!(
                f,
                "{target}: block {offset} of {entry} ({}) runs in no suite and no [[uncovered]] entry gives a reason: reach it with a case or add it to cases/exceptions/coverage.toml",
                line.as_deref().unwrap_or("no source line")
            ),
            Problem::Covered { key, entry, what } => write!(
                f,
                "{key}: {what} of {entry} now executes: remove it from the entry (XPASS)"
            ),
            Problem::NamesNothing { key, what } => {
                write!(f, "{key}: {what}: the record has no such block or entry")
            }
            Problem::Expired { key, expires } => write!(f, "{key}: expired on {expires}"),
            Problem::Stale { target, entry } => write!(
                f,
                "{target}: the machine code of {entry} is not the recorded one: rerun `w4a16 coverage --target {target}` and commit coverage/{target}.*"
            ),
            Problem::Dropped {
                target,
                ran,
                entry,
                offset,
            } => write!(
                f,
                "{target}: {ran} no longer executes block {offset} of {entry} (the record says it does): coverage dropped"
            ),
            Problem::Missing { target, what } => write!(f, "{target}: the record lacks {what}"),
        }
    }
}

/// Judges `record` against the `[[uncovered]]` entries on `today`.
pub fn judge(record: &Record, uncovered: &[Uncovered], today: Date) -> Vec<Problem> {
    let target = record.target.as_str();
    let mine: Vec<&Uncovered> = uncovered
        .iter()
        .filter(|u| u.target.matches(target))
        .collect();
    let mut problems = Vec::new();
    for e in &record.entries {
        if e.executed == 0 {
            let all = mine
                .iter()
                .any(|u| u.scope.entry.matches(&e.entry) && u.scope.blocks == BlockList::All);
            if !all {
                problems.push(Problem::NoReason {
                    target: target.to_string(),
                    entry: e.entry.clone(),
                    offset: "(every block: no suite launches the entry)".into(),
                    line: None,
                });
            }
            continue;
        }
        for b in &e.uncovered {
            let named = mine.iter().any(|u| {
                u.scope.entry.matches(&e.entry)
                    && match &u.scope.blocks {
                        BlockList::All => true,
                        BlockList::Offsets(o) => {
                            parse_offset(&b.offset).is_some_and(|x| o.contains(&x))
                        }
                    }
            });
            if !named {
                problems.push(Problem::NoReason {
                    target: target.to_string(),
                    entry: e.entry.clone(),
                    offset: b.offset.clone(),
                    line: b.line.clone(),
                });
            }
        }
    }
    for u in mine {
        problems.extend(judge_entry(record, u, today));
    }
    problems
}

/// One `[[uncovered]]` entry against the record: it fails (is caught) when every block it
/// names is uncovered.
fn judge_entry(record: &Record, u: &Uncovered, today: Date) -> Vec<Problem> {
    let entries: Vec<&EntryRecord> = record
        .entries
        .iter()
        .filter(|e| u.scope.entry.matches(&e.entry))
        .collect();
    let mut problems = Vec::new();
    if entries.is_empty() {
        problems.push(Problem::NamesNothing {
            key: u.key.clone(),
            what: format!("entry \"{}\" on {}", u.scope.entry, record.target),
        });
    }
    match &u.scope.blocks {
        BlockList::All => {
            // Only for entries no suite launches: one that runs lists its uncovered blocks.
            for e in entries.iter().filter(|e| e.executed > 0) {
                problems.push(Problem::Covered {
                    key: u.key.clone(),
                    entry: e.entry.clone(),
                    what: format!("blocks = \"all\" ({} blocks)", e.executed),
                });
            }
        }
        BlockList::Offsets(offsets) => {
            for o in offsets {
                let text = offset_text(*o);
                let uncovered = entries
                    .iter()
                    .find(|e| e.uncovered.iter().any(|b| b.offset == text));
                if uncovered.is_some() {
                    continue;
                }
                // Not uncovered: a block that now runs, or one that is not there.
                problems.push(Problem::NamesNothing {
                    key: u.key.clone(),
                    what: format!("block {text} (now executed, or not a block)"),
                });
            }
        }
    }
    let failed = problems.is_empty();
    match u.judge(failed, today) {
        Xfail::Caught => {}
        Xfail::Expired => problems.push(Problem::Expired {
            key: u.key.clone(),
            expires: u.expires,
        }),
        // The problems above say what no longer holds.
        Xfail::UnexpectedPass => {}
    }
    problems
}

/// What a fresh recording run is judged against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Against<'a> {
    /// One suite's blocks in the record.
    Suite(&'a str),
    /// Every block the record's suites execute: what the CI share must execute.
    Share,
}

impl Against<'_> {
    fn ran(&self) -> String {
        match self {
            Against::Suite(s) => format!("suite {s}"),
            Against::Share => "the CI share".to_string(),
        }
    }

    /// The blocks of `r` the run must execute, or the problem that the record of `target`
    /// lacks a suite's blocks.
    fn wanted(&self, target: &str, r: &EntryRecord) -> Result<Vec<bool>, Problem> {
        let of = |suite: &str| {
            r.executed_by
                .get(suite)
                .and_then(|b| flags(b, r.blocks))
                .ok_or_else(|| Problem::Missing {
                    target: target.to_string(),
                    what: format!("suite {suite}'s blocks of {}", r.entry),
                })
        };
        match self {
            Against::Suite(s) => of(s),
            Against::Share => r
                .executed_by
                .keys()
                .try_fold(vec![false; r.blocks], |mut acc, s| {
                    for (a, f) in acc.iter_mut().zip(of(s)?) {
                        *a |= f;
                    }
                    Ok(acc)
                }),
        }
    }
}

/// A fresh recording run against the record: the same machine code, and at least the blocks
/// the record says `against` executes.
pub fn judge_run(record: &Record, against: Against<'_>, run: &BlockCoverage) -> Vec<Problem> {
    let target = record.target.clone();
    let mut problems = Vec::new();
    for (c, e) in run.entries() {
        let Some(r) = record
            .entries
            .iter()
            .find(|r| r.kernel == c.kernel && r.entry == e.entry)
        else {
            problems.push(Problem::Missing {
                target: target.clone(),
                what: format!("entry {} of {}", e.entry, c.kernel),
            });
            continue;
        };
        if r.code_hash != e.code_hash || r.blocks != e.blocks.len() {
            problems.push(Problem::Stale {
                target: target.clone(),
                entry: e.entry.clone(),
            });
            continue;
        }
        let want = match against.wanted(&target, r) {
            Ok(w) => w,
            Err(missing) => {
                problems.push(missing);
                continue;
            }
        };
        for (b, wanted) in e.blocks.iter().zip(want) {
            if wanted && !b.executed {
                problems.push(Problem::Dropped {
                    target: target.clone(),
                    ran: against.ran(),
                    entry: e.entry.clone(),
                    offset: offset_text(b.offset),
                });
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block_coverage::record::{UncoveredBlock, bitmap};
    use std::collections::BTreeMap;
    use std::path::Path;
    use w4a16_cases::coverage_exceptions::parse;
    use w4a16_device::block_coverage::{BlockInfo, CodeObjectBlocks, EntryBlocks};

    fn entry(name: &str, ran: &[bool]) -> EntryRecord {
        EntryRecord {
            kernel: "skinny".into(),
            entry: name.into(),
            code_hash: "h".into(),
            blocks: ran.len(),
            executed: ran.iter().filter(|r| **r).count(),
            executed_by: BTreeMap::from([("smoke".to_string(), bitmap(ran))]),
            uncovered: ran
                .iter()
                .enumerate()
                .filter(|(_, r)| !**r && ran.contains(&true))
                .map(|(i, _)| UncoveredBlock {
                    offset: offset_text(16 * i as u64),
                    instructions: 2,
                    line: Some("kernels/hip/skinny.hip:7".into()),
                    first: vec!["s_nop 0".into()],
                })
                .collect(),
        }
    }

    fn record() -> Record {
        Record {
            target: "gfx1100".into(),
            suites: vec!["smoke".into()],
            subset: None,
            blocks: 6,
            executed: 2,
            entries: vec![
                entry("k_f16", &[true, false, true, false]),
                entry("k_bf16", &[false, false]),
            ],
        }
    }

    fn entry_toml(target: &str, entry: &str, blocks: &str, expires: &str) -> String {
        format!(
            "[[uncovered]]\ntarget = \"{target}\"\nentry = \"{entry}\"\nblocks = {blocks}\nreason = \"r\"\ntracking = \"t\"\nexpires = {expires}\nmode = \"xfail-strict\"\n"
        )
    }

    fn problems(toml: &str) -> Vec<String> {
        let u = parse(toml, Path::new("coverage.toml")).unwrap();
        let today = Date::parse("2026-12-01").unwrap();
        judge(&record(), &u, today)
            .iter()
            .map(|p| p.to_string())
            .collect()
    }

    #[test]
    fn each_uncovered_block_needs_a_reason_and_each_reason_must_hold() {
        let held = entry_toml("gfx11*", "k_f16", "[\"+0x10\", \"+0x30\"]", "2027-01-01")
            + &entry_toml("gfx1100", "k_bf16", "\"all\"", "2027-01-01");
        assert_eq!(problems(&held), Vec::<String>::new());
        // A block left out of the list is not hidden by the entry naming its neighbours.
        let p = problems(&held.replace(", \"+0x30\"", ""));
        assert_eq!(p.len(), 1);
        assert!(
            p[0].starts_with(
                "gfx1100: block +0x30 of k_f16 (kernels/hip/skinny.hip:7) runs in no suite"
            ),
            "{p:?}"
        );
        // A never-launched entry needs `blocks = "all"`; `all` on a launched entry is stale.
        let p = problems(
            &held
                .replace("\"k_bf16\"", "\"k_x\"")
                .replace("\"all\"", "\"all\"\n"),
        );
        assert_eq!(p.len(), 2, "{p:?}");
        let p =
            problems(&(held.clone() + &entry_toml("gfx1100", "k_f16", "\"all\"", "2027-01-01")));
        assert_eq!(
            p,
            vec![
                "uncovered[2]: blocks = \"all\" (2 blocks) of k_f16 now executes: remove it from the entry (XPASS)"
            ]
        );
        // A block that runs, or is no block, may not be named; nor may an expired entry stay.
        let p = problems(&held.replace("\"+0x30\"", "\"+0x30\", \"+0x20\""));
        assert_eq!(
            p,
            vec![
                "uncovered[0]: block +0x20 (now executed, or not a block): the record has no such block or entry"
            ]
        );
        let p = problems(&held.replacen("2027-01-01", "2026-11-30", 1));
        assert_eq!(p, vec!["uncovered[0]: expired on 2026-11-30"]);
    }

    #[test]
    fn a_fresh_run_must_execute_what_the_record_says_of_its_suite() {
        let block = |offset: u64, executed: bool| BlockInfo {
            offset,
            instructions: 2,
            executed,
            first: vec![],
            line: None,
        };
        let run = |ran: [bool; 4], hash: &str| BlockCoverage {
            target: "gfx1100".into(),
            code_objects: vec![CodeObjectBlocks {
                kernel: "skinny".into(),
                entries: vec![EntryBlocks {
                    entry: "k_f16".into(),
                    code_hash: hash.into(),
                    blocks: ran
                        .iter()
                        .enumerate()
                        .map(|(i, r)| block(16 * i as u64, *r))
                        .collect(),
                }],
            }],
        };
        let r = record();
        assert!(
            judge_run(
                &r,
                Against::Suite("smoke"),
                &run([true, true, true, false], "h")
            )
            .is_empty()
        );
        let p = judge_run(
            &r,
            Against::Suite("smoke"),
            &run([true, false, false, false], "h"),
        );
        assert_eq!(p.len(), 1);
        assert!(
            p[0].to_string()
                .contains("no longer executes block +0x20 of k_f16"),
            "{}",
            p[0]
        );
        let p = judge_run(
            &r,
            Against::Suite("smoke"),
            &run([true, true, true, true], "other"),
        );
        assert!(matches!(p[..], [Problem::Stale { .. }]), "{p:?}");
        let p = judge_run(
            &r,
            Against::Suite("edges"),
            &run([true, true, true, true], "h"),
        );
        assert!(matches!(p[..], [Problem::Missing { .. }]), "{p:?}");
        // The CI share answers for every suite's blocks: edges adds block +0x10 here.
        let mut r = record();
        r.entries[0]
            .executed_by
            .insert("edges".into(), bitmap(&[false, true, false, false]));
        let p = judge_run(&r, Against::Share, &run([true, false, true, false], "h"));
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(
            p[0].to_string(),
            "gfx1100: the CI share no longer executes block +0x10 of k_f16 (the record says it does): coverage dropped"
        );
        assert!(judge_run(&r, Against::Share, &run([true, true, true, false], "h")).is_empty());
    }
}
