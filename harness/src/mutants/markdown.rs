//! The mutation score as Markdown (`bench/mutants-<target>.md`) and its JSON twin: the header,
//! the per-suite and per-class tables, then one section per kind of mutant.

use super::{MutantResult, MutantStatus, MutantsReport};
use crate::report::markdown::{Align, Table};
use crate::report::{self as writer, FileError};
use std::path::{Path, PathBuf};

fn pct(r: Option<f64>) -> String {
    r.map_or("—".to_owned(), |r| format!("{:.0} %", 100.0 * r))
}

/// The first line of `s`, cut at 160 characters.
fn one_line(s: &str) -> String {
    let l = s.lines().next().unwrap_or("").trim();
    if l.chars().count() > 160 {
        format!("{}…", l.chars().take(160).collect::<String>())
    } else {
        l.to_owned()
    }
}

/// `## title` and one line per row; nothing without rows.
fn section(md: &mut String, title: &str, rows: Vec<String>) {
    if !rows.is_empty() {
        md.push_str(&format!("\n## {title}\n\n"));
        for r in rows {
            md.push_str(&r);
            md.push('\n');
        }
    }
}

impl MutantsReport {
    /// The Markdown table for `bench/mutants-<target>.md`.
    pub fn markdown(&self) -> String {
        let mut md = self.header();
        md.push_str(&self.sanitize_summary());
        md.push_str("## Per suite\n\n");
        md.push_str(&self.per_suite_table().render());
        md.push_str("\n## Per class\n\n");
        md.push_str(&self.per_class_table().render());
        section(
            &mut md,
            "Survivors (live mutants no suite killed)",
            self.survivors(),
        );
        section(&mut md, "Killed", self.killed_rows());
        section(
            &mut md,
            "Equivalent (not in the kill rate)",
            self.equivalent_rows(),
        );
        section(
            &mut md,
            "Stillborn (did not compile; not counted)",
            self.rows_of(|m| match &m.status {
                MutantStatus::Stillborn { log } => {
                    Some(format!("- `{}` ({}): {}", m.id, m.class, one_line(log)))
                }
                _ => None,
            }),
        );
        section(
            &mut md,
            "Errors (not measured)",
            self.rows_of(|m| match &m.status {
                MutantStatus::Error { reason } => {
                    Some(format!("- `{}`: {}", m.id, one_line(reason)))
                }
                _ => None,
            }),
        );
        section(
            &mut md,
            "Classes without a kernel-source form (catalogue records)",
            self.outside
                .iter()
                .map(|(c, why)| format!("- {c} ({}): {why}", c.origin()))
                .collect(),
        );
        md.push_str(&format!(
            "\n_{:.0} s wall ({:.0} s of it the unmutated baseline)._\n",
            self.wall_s, self.baseline_wall_s
        ));
        md
    }

    /// Writes the table to `table` and the report as JSON beside it (`.json`), each atomically;
    /// returns the JSON's path.
    pub fn write(&self, table: &Path) -> Result<PathBuf, FileError> {
        if let Some(parent) = table.parent().filter(|p| !p.as_os_str().is_empty()) {
            FileError::at(parent, std::fs::create_dir_all(parent))?;
        }
        writer::write_atomic(table, self.markdown().as_bytes())?;
        let json = table.with_extension("json");
        writer::write_atomic(
            &json,
            writer::json::pretty_line(self, "a mutants report").as_bytes(),
        )?;
        Ok(json)
    }

    /// The title, the suites and how they ran, the kill rate and the command.
    fn header(&self) -> String {
        let mut md = format!(
            "# Mutation score on {}\n\nSuites {} ({}). {} mutants: {} live, {} killed — kill rate **{}**.\n\n",
            self.target,
            self.suites.join(" + "),
            if self.each_suite {
                "every suite on every mutant"
            } else {
                "in order; a suite runs only on the mutants the earlier ones let through"
            },
            self.mutants.len(),
            self.live,
            self.killed,
            pct(self.kill_rate),
        );
        if !self.command.is_empty() {
            md.push_str(&format!("Command: `{}`\n\n", self.command));
        }
        md
    }

    /// With a sanitizer share: the two kill rates, the suites' alone and the GPU job's (the
    /// suites, then the share), and what the share is.
    fn sanitize_summary(&self) -> String {
        let Some(share) = &self.sanitize else {
            return String::new();
        };
        format!(
            "| measured by | killed | kill rate |\n|---|---:|---:|\n\
             | the suites ({}) | {} of {} | {} |\n\
             | the GPU job with {tool}: the suites, then {} under compute-sanitizer {tool} \
             (exact-size allocations) | {} of {} ({} by {tool} alone) | {} |\n\n",
            self.suites.join(" + "),
            self.killed_by_suites,
            self.live,
            pct(self.suites_kill_rate),
            share.suites.join(" + "),
            self.killed,
            self.live,
            self.killed_by_sanitizer,
            pct(self.kill_rate),
            tool = share.tool,
        )
    }

    fn per_suite_table(&self) -> Table {
        let mut t = Table::aligned([
            ("suite", Align::Left),
            ("ran on", Align::Right),
            ("killed", Align::Right),
            ("cumulative killed", Align::Right),
            ("cumulative kill rate", Align::Right),
        ]);
        for r in &self.per_suite {
            t.row([
                r.suite.clone(),
                r.ran.to_string(),
                r.killed.to_string(),
                r.cumulative_killed.to_string(),
                pct(Some(r.cumulative_rate)),
            ]);
        }
        t
    }

    fn per_class_table(&self) -> Table {
        let mut columns = vec![
            ("class".to_owned(), Align::Left),
            ("origin".to_owned(), Align::Left),
            ("mutants".to_owned(), Align::Right),
            ("equivalent".to_owned(), Align::Right),
            ("stillborn".to_owned(), Align::Right),
            ("errors".to_owned(), Align::Right),
            ("killed".to_owned(), Align::Right),
        ];
        let tool = self.sanitize.as_ref().map(|s| s.tool);
        if let Some(tool) = tool {
            columns.push((format!("killed by {tool}"), Align::Right));
        }
        columns.push(("survived".to_owned(), Align::Right));
        if let Some(tool) = tool {
            columns.push(("kill rate, suites".to_owned(), Align::Right));
            columns.push((format!("kill rate, with {tool}"), Align::Right));
        } else {
            columns.push(("kill rate".to_owned(), Align::Right));
        }
        let mut t = Table::aligned(columns);
        for r in &self.per_class {
            let mut row = vec![
                r.class.to_string(),
                r.origin.clone(),
                r.mutants.to_string(),
                r.equivalent.to_string(),
                r.stillborn.to_string(),
                r.errors.to_string(),
                r.killed.to_string(),
            ];
            if tool.is_some() {
                row.push(r.killed_by_sanitizer.to_string());
            }
            row.push(r.survived.to_string());
            if tool.is_some() {
                row.push(pct(r.suites_kill_rate));
            }
            row.push(pct(r.kill_rate));
            t.row(row);
        }
        t
    }

    fn rows_of(&self, row: impl Fn(&MutantResult) -> Option<String>) -> Vec<String> {
        self.mutants.iter().filter_map(row).collect()
    }

    /// Live mutants no suite killed, with why they survived.
    fn survivors(&self) -> Vec<String> {
        self.rows_of(|m| {
            if !m.live() || m.killed_by().is_some() {
                return None;
            }
            let why = match &m.status {
                MutantStatus::Survived { reason } => reason.as_str(),
                _ => "",
            };
            Some(format!(
                "- `{}` ({}, {}): {} — {why}",
                m.id, m.class, m.file, m.description
            ))
        })
    }

    /// Live mutants killed, with the suite, case and check that killed them.
    fn killed_rows(&self) -> Vec<String> {
        self.rows_of(|m| match &m.status {
            MutantStatus::Killed {
                case_id,
                check,
                detail,
                ..
            } if m.live() => Some(format!(
                "- `{}` ({}): {} `{case_id}` [{check}] {}",
                m.id,
                m.class,
                m.killed_by_label().unwrap_or_default(),
                one_line(detail)
            )),
            _ => None,
        })
    }

    /// Mutants marked equivalent, and what running them (if they ran) showed.
    fn equivalent_rows(&self) -> Vec<String> {
        self.rows_of(|m| {
            let why = m.equivalent.as_ref()?;
            let ran = match &m.status {
                MutantStatus::NotRunEquivalent => "not run".to_owned(),
                MutantStatus::Killed { suite, check, .. } => format!(
                    "**KILLED by {suite} [{check}]: a false alarm or a wrong equivalence claim**"
                ),
                MutantStatus::Survived { .. } => "survived, as claimed".to_owned(),
                other => format!("{other:?}"),
            };
            Some(format!("- `{}` ({}): {why} — {ran}", m.id, m.class))
        })
    }
}
