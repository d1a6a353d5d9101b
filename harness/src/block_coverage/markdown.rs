//! `coverage/<gfx>.md`: the record as a reader wants it — per entry, blocks executed over
//! blocks, and every block no suite executes with its first instructions, its source line and
//! the reason its `[[uncovered]]` entry gives.

use super::record::{EntryRecord, Record};
use std::fmt::Write;
use w4a16_cases::coverage_exceptions::{BlockList, Uncovered, parse_offset};

/// The reason (and entry key) `uncovered` gives for block `offset` of `entry`, if any.
fn reason<'u>(
    uncovered: &'u [Uncovered],
    target: &str,
    entry: &str,
    offset: &str,
) -> Option<&'u Uncovered> {
    uncovered.iter().find(|u| {
        u.target.matches(target)
            && u.scope.entry.matches(entry)
            && match &u.scope.blocks {
                BlockList::All => true,
                BlockList::Offsets(o) => parse_offset(offset).is_some_and(|x| o.contains(&x)),
            }
    })
}

/// The `blocks = "all"` entry naming `entry`, if any.
fn reason_for_all<'u>(
    uncovered: &'u [Uncovered],
    target: &str,
    entry: &str,
) -> Option<&'u Uncovered> {
    uncovered.iter().find(|u| {
        u.target.matches(target) && u.scope.entry.matches(entry) && u.scope.blocks == BlockList::All
    })
}

/// The report of `record`, with the reasons of `uncovered`.
pub fn render(record: &Record, uncovered: &[Uncovered]) -> String {
    let mut s = String::new();
    let t = &record.target;
    let _ = writeln!(
        s,
        "# Machine-code block coverage of {t} on the ISA emulator\n"
    );
    let _ = writeln!(
        s,
        "Which basic blocks of the {t} code objects the suites {} execute on the ISA emulator \
         (`w4a16 coverage --target {t}`; the record is `{t}.json`, the reasons for blocks no suite \
         executes are `cases/exceptions/coverage.toml`; docs/block-coverage.md). Not the \
         emulator's instruction-set table (`emu/coverage/{t}.md`).\n",
        record
            .suites
            .iter()
            .map(|x| format!("`{x}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(subset) = &record.subset {
        let _ = writeln!(s, "**Subset:** {subset}\n");
    }
    let _ = writeln!(
        s,
        "Overall: {} of {} blocks executed ({:.1} %); entries at or above 95 %: {} of {}.\n",
        record.executed,
        record.blocks,
        record.percent(),
        record
            .entries
            .iter()
            .filter(|e| e.percent() >= 95.0)
            .count(),
        record.entries.len()
    );
    let _ = writeln!(
        s,
        "| code object | entry | executed / blocks | % | uncovered, with a reason |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|");
    for e in &record.entries {
        let named = if e.executed == 0 {
            reason_for_all(uncovered, t, &e.entry).map_or(0, |_| e.blocks)
        } else {
            e.uncovered
                .iter()
                .filter(|b| reason(uncovered, t, &e.entry, &b.offset).is_some())
                .count()
        };
        let _ = writeln!(
            s,
            "| {} | `{}` | {} / {} | {:.1} | {} / {} |",
            e.kernel,
            e.entry,
            e.executed,
            e.blocks,
            e.percent(),
            named,
            e.blocks - e.executed
        );
    }
    for e in record.entries.iter().filter(|e| e.executed < e.blocks) {
        entry_section(&mut s, t, e, uncovered);
    }
    s
}

/// The never-executed blocks of one entry, grouped by the reason given for them.
fn entry_section(s: &mut String, target: &str, e: &EntryRecord, uncovered: &[Uncovered]) {
    let _ = writeln!(
        s,
        "\n## `{}` ({}): {} of {} blocks never executed\n",
        e.entry,
        e.kernel,
        e.blocks - e.executed,
        e.blocks
    );
    if e.executed == 0 {
        let r = reason_for_all(uncovered, target, &e.entry);
        let _ = writeln!(
            s,
            "No suite launches this entry{}.",
            r.map_or(String::new(), |u| format!(
                " — {} ({}, {}, expires {})",
                u.reason, u.tracking, u.key, u.expires
            ))
        );
        return;
    }
    let mut last: Option<Option<&str>> = None;
    for b in &e.uncovered {
        let r = reason(uncovered, target, &e.entry, &b.offset);
        let key = r.map(|u| u.key.as_str());
        if last != Some(key) {
            match r {
                Some(u) => {
                    let _ = writeln!(
                        s,
                        "\n{} ({}, {}, expires {}):\n",
                        u.reason, u.tracking, u.key, u.expires
                    );
                }
                None => {
                    let _ = writeln!(
                        s,
                        "\n**No reason given** (add it to `cases/exceptions/coverage.toml` or reach it with a case):\n"
                    );
                }
            }
            last = Some(key);
        }
        let _ = writeln!(
            s,
            "- `{}` ({} instructions, {}): `{}`",
            b.offset,
            b.instructions,
            b.line.as_deref().unwrap_or("no source line"),
            b.first.join("; ")
        );
    }
}
