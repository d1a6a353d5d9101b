//! The ISA emulator's sanitizers in a sanitized run (`w4a16 run --sanitize racecheck|initcheck
//! --target gfx1100|gfx1151|gfx1201` without that GPU): which of compute-sanitizer's tools the
//! emulator has, and how a worker prints its device's reports so that the parent's case windows
//! ([`super::CaseWindow`]) and parser ([`super::parse_findings`]) take them as they take
//! compute-sanitizer's.

use super::REPORT_PREFIX;
use crate::runner::verdict::SanitizerTool;
use std::io::Write;
use w4a16_device::{EmuSanitizer, SanitizerReport};

/// The emulator's counterpart of `tool`: racecheck and initcheck. memcheck has none to run
/// (the emulator faults on any access outside a tensor in every run), synccheck none at all.
pub fn emulator_tool(tool: SanitizerTool) -> Option<EmuSanitizer> {
    match tool {
        SanitizerTool::Racecheck => Some(EmuSanitizer::Racecheck),
        SanitizerTool::Initcheck => Some(EmuSanitizer::Initcheck),
        SanitizerTool::Memcheck | SanitizerTool::Synccheck => None,
    }
}

/// Each report's lines with compute-sanitizer's prefix, a prefixed empty line after each (the
/// separator that closes a report), flushed.
pub fn print_reports(reports: &[SanitizerReport], out: &mut impl Write) -> std::io::Result<()> {
    for r in reports {
        for l in &r.lines {
            writeln!(out, "{REPORT_PREFIX} {l}")?;
        }
        writeln!(out, "{REPORT_PREFIX}")?;
    }
    out.flush()
}

/// A case's `sanitize:<tool>:<kernel>` verdicts from its other verdicts and the reports its
/// launches made, as a sanitized run's parent forms them from the worker's stdout: the reports
/// printed ([`print_reports`]), read back through the case's window ([`super::CaseWindow`]).
pub fn case_verdicts(
    case_id: &str,
    verdicts: &[crate::runner::verdict::Verdict],
    reports: &[SanitizerReport],
    tool: SanitizerTool,
    target: w4a16_kernels::RunTarget,
) -> Vec<crate::runner::verdict::Verdict> {
    let mut printed = Vec::new();
    print_reports(reports, &mut printed).expect("writing to memory");
    let mut window = super::CaseWindow::new(case_id);
    verdicts.iter().for_each(|v| window.note(v));
    window.lines = String::from_utf8_lossy(&printed)
        .lines()
        .map(str::to_string)
        .collect();
    window.verdicts(tool, target)
}
