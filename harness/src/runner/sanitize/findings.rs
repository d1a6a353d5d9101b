//! Reading compute-sanitizer's output: its prefixed lines, split into reports ([`Finding`]),
//! each classified and located (kernel, thread, block, address).

use super::REPORT_PREFIX;
use w4a16_kernels::KernelId;

/// Memory an access touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    Global,
    Shared,
    Local,
}

impl Space {
    fn parse(s: &str) -> Option<Space> {
        match s {
            "__global__" => Some(Space::Global),
            "__shared__" => Some(Space::Shared),
            "__local__" => Some(Space::Local),
            _ => None,
        }
    }
}

/// What a report says went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FindingKind {
    /// memcheck: `Invalid __global__ read of size 16 bytes` (out of bounds or misaligned).
    InvalidAccess {
        space: Space,
        /// `read`, `write`, `atomic`, …, as printed.
        access: String,
        bytes: usize,
    },
    /// initcheck: `Uninitialized __global__ memory read of size 4 bytes`.
    Uninitialized { space: Space, bytes: usize },
    /// racecheck: a race (analysis report) or a WAW/WAR/RAW hazard (hazard report).
    Race {
        /// `ERROR`, `WARNING` or `INFO`, upper-cased.
        severity: String,
        /// `WAW`, `WAR`, `RAW`, or `race` for an analysis report.
        hazard: String,
    },
    /// synccheck: `Barrier error detected. Divergent thread(s) in warp` (or a warpgroup MMA
    /// sequence error); the classification as printed.
    Barrier { class: String },
    /// A CUDA API call failed (`Program hit … on CUDA API call to …`).
    ApiError,
    /// The tool's own trouble (`Internal Sanitizer Error`, a tracking overflow warning): the
    /// check did not fully run.
    Tool,
    /// Anything else the tool reported (hardware exceptions, malloc/free errors, …).
    Other,
}

impl FindingKind {
    fn classify(headline: &str) -> FindingKind {
        let words: Vec<&str> = headline.split_whitespace().collect();
        let size = |w: &[&str]| {
            w.windows(3)
                .find(|x| x[0] == "size" && x[2].starts_with("byte"))
                .and_then(|x| x[1].replace(',', "").parse().ok())
                .unwrap_or(0)
        };
        if let ["Invalid", space, access, ..] = words.as_slice()
            && let Some(space) = Space::parse(space)
        {
            return FindingKind::InvalidAccess {
                space,
                access: access.to_string(),
                bytes: size(&words),
            };
        }
        if let ["Uninitialized", space, ..] = words.as_slice()
            && let Some(space) = Space::parse(space)
        {
            return FindingKind::Uninitialized {
                space,
                bytes: size(&words),
            };
        }
        if headline.contains("Race reported between") || headline.contains("hazard detected") {
            let severity = words
                .first()
                .map(|w| w.trim_end_matches(':').to_ascii_uppercase())
                .unwrap_or_default();
            let hazard = ["WAW", "WAR", "RAW"]
                .into_iter()
                .find(|h| words.contains(h))
                .unwrap_or("race")
                .to_string();
            return FindingKind::Race { severity, hazard };
        }
        if let Some(rest) = headline.strip_prefix("Barrier error detected.") {
            return FindingKind::Barrier {
                class: rest.trim().trim_end_matches('.').to_string(),
            };
        }
        if let Some(rest) = headline.strip_prefix("Warpgroup MMA sequence error detected") {
            return FindingKind::Barrier {
                class: format!(
                    "warpgroup MMA sequence{}",
                    rest.trim_start_matches(['.', ':'])
                ),
            };
        }
        if headline.starts_with("Program hit") && headline.contains("on CUDA API call") {
            return FindingKind::ApiError;
        }
        if headline.starts_with("Internal Sanitizer Error")
            || headline.starts_with("Warning: Detected overflow")
        {
            return FindingKind::Tool;
        }
        FindingKind::Other
    }
}

/// One report of the tool: its first line, what it means, and where it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub kind: FindingKind,
    pub headline: String,
    /// The kernel the report names (for ours, the entry point `w4a16_…`).
    pub kernel: Option<String>,
    pub thread: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    /// `0x7f… is out of bounds and is 2 bytes after the nearest allocation at 0x7f… of size
    /// 80 bytes`, as printed.
    pub address: Option<String>,
    /// Every line of the report, prefix and indentation removed.
    pub lines: Vec<String>,
}

impl Finding {
    /// Which kernel of the set the report is against, from its entry-point name.
    pub fn kernel_id(&self) -> Option<KernelId> {
        KernelId::split_entry(self.kernel.as_deref()?).map(|(kernel, _, _)| kernel)
    }

    /// One line for a verdict's detail.
    pub fn summary(&self) -> String {
        let mut s = self.headline.clone();
        if let Some(k) = &self.kernel {
            s.push_str(&format!(" in {k}"));
        }
        let xyz = |v: [u32; 3]| format!("({},{},{})", v[0], v[1], v[2]);
        if let Some(t) = self.thread {
            s.push_str(&format!(" by thread {}", xyz(t)));
        }
        if let Some(b) = self.block {
            s.push_str(&format!(" in block {}", xyz(b)));
        }
        if let Some(a) = &self.address {
            s.push_str(&format!("; address {a}"));
        }
        s
    }
}

/// What one prefixed line of the tool's output is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReportLine {
    /// `========= COMPUTE-SANITIZER`.
    Banner,
    /// `========= ERROR SUMMARY: 3 errors` or `========= RACECHECK SUMMARY: 2 hazards displayed
    /// (1 error, 1 warning)`: how many errors the tool counted in the whole process.
    Summary { errors: usize },
    /// Part of a report (a headline, a continuation, or the empty separator).
    Report(String),
}

/// `Some` for a line compute-sanitizer printed (it starts with [`REPORT_PREFIX`]).
pub fn report_line(line: &str) -> Option<ReportLine> {
    let body = line.strip_prefix(REPORT_PREFIX)?;
    let text = body.trim();
    if text == "COMPUTE-SANITIZER" {
        return Some(ReportLine::Banner);
    }
    let count = |s: &str| {
        s.split_whitespace()
            .next()
            .and_then(|n| n.replace(',', "").parse::<usize>().ok())
    };
    if let Some(rest) = text.strip_prefix("ERROR SUMMARY:") {
        return Some(ReportLine::Summary {
            errors: count(rest).unwrap_or(0),
        });
    }
    if let Some(rest) = text.strip_prefix("RACECHECK SUMMARY:") {
        // `N hazards displayed (E errors, W warnings)`: errors and warnings both fail a case.
        let inside = rest
            .split_once('(')
            .and_then(|(_, r)| r.split_once(')'))
            .map(|(i, _)| i)
            .unwrap_or("");
        let mut errors = 0;
        for part in inside.split(',') {
            errors += count(part.trim()).unwrap_or(0);
        }
        return Some(ReportLine::Summary { errors });
    }
    if text == "LEAK SUMMARY:" || text.starts_with("LEAK SUMMARY:") {
        return Some(ReportLine::Summary { errors: 0 });
    }
    Some(ReportLine::Report(body.to_string()))
}

/// Lines that continue a report whatever their indentation (the documentation prints some
/// unindented).
const CONTINUATIONS: [&str; 14] = [
    "at ",
    "by thread",
    "Address ",
    "Access to ",
    "and ",
    "Saved host backtrace",
    "Host Frame",
    "Device Frame",
    "Write Thread",
    "Read Thread",
    "Current Value",
    "Not written",
    "Sync mask",
    "These unused",
];

/// Splits the report lines of one case's window (prefix still on, banner and summaries
/// included or not) into findings, in order.
pub fn parse_findings<S: AsRef<str>>(lines: &[S]) -> Vec<Finding> {
    let mut blocks: Vec<Vec<String>> = Vec::new();
    let mut open = false;
    for l in lines {
        let Some(ReportLine::Report(body)) = report_line(l.as_ref()) else {
            continue;
        };
        let text = body.trim();
        if text.is_empty() {
            open = false;
            continue;
        }
        let indented = body.starts_with("  ") || body.starts_with('\t');
        let continues = indented || CONTINUATIONS.iter().any(|c| text.starts_with(c));
        if open && continues {
            if let Some(b) = blocks.last_mut() {
                b.push(text.to_string());
            }
        } else {
            blocks.push(vec![text.to_string()]);
            open = true;
        }
    }
    blocks.into_iter().map(finding_of).collect()
}

fn finding_of(lines: Vec<String>) -> Finding {
    let headline = lines[0].clone();
    let kind = FindingKind::classify(&headline);
    let kernel = lines.iter().find_map(|l| our_kernel(l)).or_else(|| {
        lines
            .iter()
            .find_map(|l| l.split_once("at ").map(|(_, r)| r))
            .and_then(|r| {
                let end = [" in ", "(", "+0x", ":0x"]
                    .iter()
                    .filter_map(|p| r.find(p))
                    .min()
                    .unwrap_or(r.len());
                let name = r[..end].trim();
                (!name.is_empty() && !name.starts_with("0x")).then(|| name.to_string())
            })
    });
    let thread = lines.iter().find_map(|l| {
        l.find("thread (")
            .or_else(|| l.find("Thread ("))
            .and_then(|i| triple(&l[i + 7..]))
    });
    let block = lines
        .iter()
        .find_map(|l| l.find("block (").and_then(|i| triple(&l[i + 6..])));
    // `Access to 0x… is out of bounds` (compute-sanitizer 2025) or `Address 0x… …` (the manual).
    let address = lines.iter().enumerate().find_map(|(i, l)| {
        let rest = l
            .strip_prefix("Access to ")
            .or_else(|| l.strip_prefix("Address "))?;
        let mut a = rest.to_string();
        if let Some(next) = lines.get(i + 1).filter(|n| n.starts_with("and is")) {
            a.push(' ');
            a.push_str(next);
        }
        Some(a)
    });
    Finding {
        kind,
        headline,
        kernel,
        thread,
        block,
        address,
        lines,
    }
}

/// The first `w4a16_…` identifier in a line.
fn our_kernel(line: &str) -> Option<String> {
    let i = line.find("w4a16_")?;
    let name: String = line[i..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    Some(name)
}

/// `(x,y,z)` at the start of `s` (spaces allowed).
fn triple(s: &str) -> Option<[u32; 3]> {
    let inner = s.trim_start().strip_prefix('(')?.split_once(')')?.0;
    let v: Vec<u32> = inner
        .split(',')
        .map(|p| p.trim().parse().ok())
        .collect::<Option<_>>()?;
    <[u32; 3]>::try_from(v).ok()
}
