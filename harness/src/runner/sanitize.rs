//! Sanitizer mode (`w4a16 run --sanitize TOOL`): on an NVIDIA GPU the fault-isolated workers run
//! under NVIDIA's compute-sanitizer with exact-size allocations ([`Allocation::Exact`]), so that
//! an access past a tensor lands outside every allocation. The tool prints its reports on the
//! worker's stdout, each line prefixed `=========`; the parent charges them to the case the worker
//! announced last (`BEGIN <id>` opens a case's window, the next `BEGIN` closes it) and turns the
//! first report against each kernel into that case's `sanitize:<tool>:<kernel>` FAIL.
//!
//! Elsewhere (ROCm, no GPU, a simulated device, no compute-sanitizer binary) every case gets a
//! loud `sanitize:<tool>` skip with the reason, a failure under `W4A16_REQUIRE=gpu`.
//!
//! [`Allocation::Exact`]: w4a16_device::Allocation::Exact

use super::check::{Check, SanitizeScope};
use super::verdict::{Outcome, Verdict};
use crate::require::{Requirement, Skip};
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use w4a16_device::DeviceKind;
use w4a16_kernels::{KernelId, RunTarget};

w4a16_reference::named_enum! {
    /// One of compute-sanitizer's tools, by the name `--tool` takes (and `--sanitize` offers).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum SanitizerTool {
        /// Out-of-bounds and misaligned accesses, hardware exceptions.
        Memcheck = "memcheck",
        /// Shared-memory data races.
        Racecheck = "racecheck",
        /// Misused barriers (`__syncthreads` in divergent code, bad `__syncwarp` masks).
        Synccheck = "synccheck",
        /// Reads of global memory nothing has written.
        Initcheck = "initcheck",
    }
}

impl SanitizerTool {
    /// The check of this tool's verdicts about a case as a whole (`sanitize:memcheck`).
    pub fn check(self) -> Check {
        self.check_of(SanitizeScope::Case)
    }

    /// The check of this tool's verdicts about `scope` (`sanitize:memcheck:skinny`).
    pub fn check_of(self, scope: SanitizeScope) -> Check {
        Check::Sanitize { tool: self, scope }
    }
}

/// compute-sanitizer's `--kernel-name` filter: only kernels whose (unmangled, `extern "C"`)
/// name contains `w4a16_` are checked, i.e. every entry point of the set
/// (`w4a16_<kernel>_<dtype>[_variant]`) and nothing of cuBLAS.
pub const KERNEL_FILTER: &str = "kns=w4a16_";

/// memcheck's `--padding`: bytes of unallocated space after every allocation, so that an access
/// just past a buffer is never absorbed by a neighbour allocated back to back.
pub const MEMCHECK_PADDING_BYTES: usize = 4096;

/// Seconds compute-sanitizer waits for the worker to connect (its default, 10 s, is short for a
/// dozen workers starting at once on a loaded host).
pub const LAUNCH_TIMEOUT_S: u32 = 120;

/// The prefix compute-sanitizer puts before each of its lines (`--prefix`, the default).
pub const REPORT_PREFIX: &str = "=========";

/// A compute-sanitizer found on this machine, with the tool to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sanitizer {
    pub tool: SanitizerTool,
    pub executable: PathBuf,
}

impl Sanitizer {
    /// The command that runs `worker worker_args…` under the tool: `(program, arguments)`.
    pub fn command(&self, worker: &Path, worker_args: &[String]) -> (PathBuf, Vec<String>) {
        let mut args: Vec<String> = vec![
            "--tool".into(),
            self.tool.name().into(),
            "--kernel-name".into(),
            KERNEL_FILTER.into(),
            // Every report counts: the default stops printing after 100 per process, and a
            // worker runs many cases.
            "--print-limit".into(),
            "0".into(),
            // A precise error ends the kernel, not the context: the worker's next cases run.
            "--destroy-on-device-error".into(),
            "kernel".into(),
            "--launch-timeout".into(),
            LAUNCH_TIMEOUT_S.to_string(),
            "--target-processes".into(),
            "application-only".into(),
            // The worker's exit status is the parent's business (a crash is already a fault).
            "--check-exit-code".into(),
            "no".into(),
        ];
        if self.tool == SanitizerTool::Memcheck {
            args.extend([
                "--padding".into(),
                MEMCHECK_PADDING_BYTES.to_string(),
                // Every driver status is checked by the backend and becomes a typed fault;
                // memcheck's own API-error reports would also flag the driver's probing calls.
                "--report-api-errors".into(),
                "no".into(),
            ]);
        }
        args.push("--".into());
        args.push(worker.display().to_string());
        args.extend(worker_args.iter().cloned());
        (self.executable.clone(), args)
    }
}

/// Where [`locate`] looks for compute-sanitizer, in order.
pub fn search_dirs(cuda_home: Option<&OsStr>, path: Option<&OsStr>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(h) = cuda_home.filter(|h| !h.is_empty()) {
        dirs.push(Path::new(h).join("bin"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/bin"));
    if let Some(p) = path {
        dirs.extend(std::env::split_paths(p).filter(|d| !d.as_os_str().is_empty()));
    }
    dirs.dedup();
    dirs
}

/// The first `compute-sanitizer` file in `dirs`, or the paths looked at.
pub fn locate_in(dirs: &[PathBuf]) -> Result<PathBuf, Vec<PathBuf>> {
    let candidates: Vec<PathBuf> = dirs.iter().map(|d| d.join("compute-sanitizer")).collect();
    candidates
        .iter()
        .find(|c| c.is_file())
        .cloned()
        .ok_or(candidates)
}

/// compute-sanitizer from `$CUDA_HOME/bin`, `/usr/local/cuda/bin` or `PATH`; a loud skip that
/// names every place looked at when there is none.
pub fn locate() -> Result<PathBuf, Skip> {
    let dirs = search_dirs(
        std::env::var_os("CUDA_HOME").as_deref(),
        std::env::var_os("PATH").as_deref(),
    );
    locate_in(&dirs).map_err(|looked| Skip {
        requirement: Requirement::Gpu,
        reason: format!(
            "compute-sanitizer not found (looked for {}; set CUDA_HOME to a CUDA toolkit)",
            looked
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// Whether `tool` can run on what this session opened: a CUDA device and a compute-sanitizer
/// (found by `find`, called only then). Otherwise the skip every case reports.
pub fn availability(
    tool: SanitizerTool,
    device: Result<DeviceKind, &Skip>,
    target: RunTarget,
    find: impl FnOnce() -> Result<PathBuf, Skip>,
) -> Result<Sanitizer, Skip> {
    let skip = |reason: String| Skip {
        requirement: Requirement::Gpu,
        reason,
    };
    match device {
        Err(no_device) => Err(skip(format!(
            "compute-sanitizer {tool} needs an NVIDIA GPU: {}",
            no_device.reason
        ))),
        Ok(DeviceKind::Rocm) => Err(skip(format!(
            "compute-sanitizer {tool} is NVIDIA's; the device here is ROCm ({target}), which it cannot watch"
        ))),
        Ok(DeviceKind::Simulated) => Err(skip(format!(
            "compute-sanitizer {tool} watches GPU kernels; the device here is simulated on the host"
        ))),
        Ok(DeviceKind::Emulator) => Err(skip(format!(
            "compute-sanitizer {tool} watches NVIDIA GPUs; the ISA emulator here bounds-checks every \
             access itself"
        ))),
        Ok(DeviceKind::Cuda) => find().map(|executable| Sanitizer { tool, executable }),
    }
}

/// The command that reruns one case under the sanitizer (it must run in a worker, so it is a
/// filtered `run`, not `repro`).
pub fn repro_command(case_id: &str, target: RunTarget, tool: SanitizerTool) -> String {
    format!(
        "cargo run --release --bin w4a16 -- run --sanitize {tool} --filter '{case_id}' --target {target} --jobs 1"
    )
}

/// The verdict of a case the sanitizer could not watch: a loud skip, or a failure when
/// `required` (`W4A16_REQUIRE` names the skip's requirement).
pub fn skip_verdict(case_id: &str, tool: SanitizerTool, skip: &Skip, required: bool) -> Verdict {
    let v = Verdict::skipped(case_id, tool.check(), skip.clone());
    if required {
        Verdict {
            outcome: Outcome::Fail,
            detail: format!(
                "W4A16_REQUIRE={} but the sanitizer did not run: {}",
                skip.requirement, skip.reason
            ),
            ..v
        }
    } else {
        v
    }
}

/// [`skip_verdict`] for every case, `W4A16_REQUIRE` read from the environment.
pub fn skip_verdicts<'a>(
    case_ids: impl IntoIterator<Item = &'a str>,
    tool: SanitizerTool,
    skip: &Skip,
) -> Vec<Verdict> {
    let required = skip.requirement.is_required();
    case_ids
        .into_iter()
        .map(|id| skip_verdict(id, tool, skip, required))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Reading compute-sanitizer's output.

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

/// One case's share of a sanitized worker's output: the kernels its verdicts show it launched
/// and the report lines printed while it was the last case announced.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseWindow {
    pub case_id: String,
    pub launched: BTreeSet<KernelId>,
    pub lines: Vec<String>,
}

impl CaseWindow {
    pub fn new(case_id: impl Into<String>) -> Self {
        CaseWindow {
            case_id: case_id.into(),
            launched: BTreeSet::new(),
            lines: Vec::new(),
        }
    }

    /// Notes the kernels behind a verdict whose check is a launched path (`skinny`,
    /// `dequant+dense`, the `dequant` check): skipped and refused paths launched nothing, and
    /// the vendor-BLAS `dense` is outside the sanitizer's kernel filter.
    pub fn note(&mut self, v: &Verdict) {
        if matches!(v.outcome, Outcome::Skip | Outcome::Refused) {
            return;
        }
        for &k in v.check.launched_kernels() {
            if k != KernelId::Dense {
                self.launched.insert(k);
            }
        }
    }

    /// The case's sanitizer verdicts: one `sanitize:<tool>:<kernel>` per launched kernel (FAIL
    /// with the first report against it, else pass), and a `sanitize:<tool>` FAIL for reports
    /// that name no launched kernel (a crash, a hardware exception, the tool's own error).
    pub fn verdicts(&self, tool: SanitizerTool, target: RunTarget) -> Vec<Verdict> {
        let findings = parse_findings(&self.lines);
        let repro = repro_command(&self.case_id, target, tool);
        let fail = |check: Check, f: &Finding, n: usize| {
            Verdict::new(&self.case_id, check, Outcome::Fail).detail(format!(
                "{}{}; repro: {repro}",
                f.summary(),
                if n > 1 {
                    format!(" (first of {n} reports)")
                } else {
                    String::new()
                }
            ))
        };
        let mut out = Vec::new();
        for &k in &self.launched {
            let check = tool.check_of(SanitizeScope::Kernel(k));
            let against: Vec<&Finding> = findings
                .iter()
                .filter(|f| f.kernel_id() == Some(k))
                .collect();
            match against.first() {
                Some(f) => out.push(fail(check, f, against.len())),
                None => out.push(
                    Verdict::new(&self.case_id, check, Outcome::Pass)
                        .detail(format!("no {tool} report against {}", k.name())),
                ),
            }
        }
        let stray: Vec<&Finding> = findings
            .iter()
            .filter(|f| f.kernel_id().is_none_or(|k| !self.launched.contains(&k)))
            .collect();
        if let Some(f) = stray.first() {
            out.push(fail(tool.check(), f, stray.len()));
        }
        out
    }
}

/// A worker process's `ERROR SUMMARY` counted errors that no case's window held: the run cannot
/// claim those cases clean.
pub fn unattributed_errors(
    tool: SanitizerTool,
    reported: usize,
    attributed: usize,
    cases: &[String],
) -> Option<Verdict> {
    (reported > 0 && attributed == 0).then(|| {
        Verdict::new(
            format!("sanitize/{tool}/worker"),
            tool.check_of(SanitizeScope::WorkerSummary),
            Outcome::Fail,
        )
        .detail(format!(
            "compute-sanitizer counted {reported} errors in a worker that ran {} cases ({}…), but printed none inside a case",
            cases.len(),
            cases.first().map_or("", String::as_str)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use w4a16_kernels::Target;

    /// memcheck, an out-of-bounds read by one of ours, as compute-sanitizer 2025.3 (CUDA 13)
    /// prints it on the H200: kernel+offset, thread and block, `Access to` and the nearest
    /// allocation, the host backtrace, a separator with a trailing space.
    const MEMCHECK_READ: &str = "\
========= Invalid __global__ read of size 16 bytes
=========     at w4a16_skinny_f16_rt2+0x1a70
=========     by thread (64,1,0) in block (12,0,0)
=========     Access to 0x7f3a4e2005f0 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3a4e200000 of size 1,519 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f4f1f] in libcuda.so.1
=========         Host Frame: w4a16_device::cuda::CudaDevice::launch [0x1c2b3d] in w4a16
========= \n";

    /// memcheck, a write one element past Y, in the documentation's `kernel():offset` form.
    const MEMCHECK_WRITE: &str = "\
========= Invalid __global__ write of size 2 bytes
=========     at w4a16_fallback_bf16():0x3c0 in fallback.hip:81
=========     by thread (39,0,0) in block (0,2,0)
=========     Address 0x7f6510c00050 is out of bounds
=========     and is 0 bytes after the nearest allocation at 0x7f6510c00000 of size 80 bytes
=========
";

    const RACECHECK_HAZARD: &str = "\
========= ERROR: Potential WAW hazard detected at __shared__ 0x40 in block (3,0,0) :
=========     Write Thread (0,0,0) at w4a16_fused_f16+0x2f0 in fused.hip:140
=========     Write Thread (32,0,0) at w4a16_fused_f16+0x2f0 in fused.hip:140
=========     Current Value : 0, Incoming Value : 15360
=========
";

    const RACECHECK_ANALYSIS: &str = "\
========= Error: Race reported between Write access at w4a16_skinny_bf16+0x8d0 in skinny.hip:402
=========     and Read access at w4a16_skinny_bf16+0x910 in skinny.hip:410 [16 hazards]
=========
";

    const INITCHECK: &str = "\
========= Uninitialized __global__ memory read of size 4 bytes
=========     at w4a16_dequant_f16+0x250
=========     by thread (255,0,0) in block (7,0,0)
=========     Address 0x7f0c8a201ffc
=========
";

    const SYNCCHECK: &str = "\
========= Barrier error detected. Divergent thread(s) in block
=========     at w4a16_fused_bf16+0x1180 in fused.hip:211
=========     by thread (96,0,0) in block (0,5,0)
=========
";

    /// synccheck as compute-sanitizer 2025.3 prints it: one report per warp, back to back, no
    /// thread line and no separator.
    const SYNCCHECK_2025: &str = "\
========= Barrier error detected. Divergent thread(s) in warp.
=========     at w4a16_skinny_bf16(const unsigned int *, const __nv_bfloat16 *)+0x70
========= Barrier error detected. Divergent thread(s) in warp.
=========     at w4a16_skinny_bf16(const unsigned int *, const __nv_bfloat16 *)+0x70
";

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn memcheck_reports_become_typed_findings() {
        let f = parse_findings(&lines(MEMCHECK_READ));
        assert_eq!(f.len(), 1);
        let f = &f[0];
        assert_eq!(
            f.kind,
            FindingKind::InvalidAccess {
                space: Space::Global,
                access: "read".into(),
                bytes: 16
            }
        );
        assert_eq!(f.kernel.as_deref(), Some("w4a16_skinny_f16_rt2"));
        assert_eq!(f.kernel_id(), Some(KernelId::Skinny));
        assert_eq!((f.thread, f.block), (Some([64, 1, 0]), Some([12, 0, 0])));
        assert_eq!(
            f.address.as_deref(),
            Some(
                "0x7f3a4e2005f0 is out of bounds and is 1 bytes after the nearest allocation at 0x7f3a4e200000 of size 1,519 bytes"
            )
        );
        assert_eq!(f.lines.len(), 8, "the backtrace stays with its report");

        let w = &parse_findings(&lines(MEMCHECK_WRITE))[0];
        assert_eq!(
            w.kind,
            FindingKind::InvalidAccess {
                space: Space::Global,
                access: "write".into(),
                bytes: 2
            }
        );
        assert_eq!(w.kernel_id(), Some(KernelId::Fallback));
        assert_eq!(w.block, Some([0, 2, 0]));
        assert!(w.summary().starts_with(
            "Invalid __global__ write of size 2 bytes in w4a16_fallback_bf16 by thread (39,0,0) in block (0,2,0); address 0x7f6510c00050 is out of bounds and is 0 bytes after"
        ), "{}", w.summary());
    }

    #[test]
    fn racecheck_initcheck_and_synccheck_reports_become_typed_findings() {
        let h = &parse_findings(&lines(RACECHECK_HAZARD))[0];
        assert_eq!(
            h.kind,
            FindingKind::Race {
                severity: "ERROR".into(),
                hazard: "WAW".into()
            }
        );
        assert_eq!(h.kernel_id(), Some(KernelId::Fused));
        assert_eq!((h.thread, h.block), (Some([0, 0, 0]), Some([3, 0, 0])));

        let a = parse_findings(&lines(RACECHECK_ANALYSIS));
        assert_eq!(a.len(), 1, "the `and … access` line continues the report");
        assert_eq!(
            a[0].kind,
            FindingKind::Race {
                severity: "ERROR".into(),
                hazard: "race".into()
            }
        );
        assert_eq!(a[0].kernel_id(), Some(KernelId::Skinny));

        let i = &parse_findings(&lines(INITCHECK))[0];
        assert_eq!(
            i.kind,
            FindingKind::Uninitialized {
                space: Space::Global,
                bytes: 4
            }
        );
        assert_eq!(i.kernel_id(), Some(KernelId::Dequant));
        assert_eq!(i.address.as_deref(), Some("0x7f0c8a201ffc"));

        let s = &parse_findings(&lines(SYNCCHECK))[0];
        assert_eq!(
            s.kind,
            FindingKind::Barrier {
                class: "Divergent thread(s) in block".into()
            }
        );
        assert_eq!(s.kernel.as_deref(), Some("w4a16_fused_bf16"));
        assert_eq!(s.thread, Some([96, 0, 0]));

        let s = parse_findings(&lines(SYNCCHECK_2025));
        assert_eq!(s.len(), 2, "a new headline starts a new report");
        assert_eq!(
            s[1].kind,
            FindingKind::Barrier {
                class: "Divergent thread(s) in warp".into()
            }
        );
        assert_eq!(s[1].kernel.as_deref(), Some("w4a16_skinny_bf16"));
        assert_eq!((s[1].thread, s[1].block), (None, None));
    }

    #[test]
    fn the_documentations_unindented_layout_parses_the_same() {
        // As the manual renders its samples: no indentation after the prefix.
        let text = "\
========= WARNING: Race reported between Write access at RAW()+0xf0 in raceGroupBasic.cu:40
========= and Read access at RAW()+0x280 in raceGroupBasic:46 [4 hazards]
========= Invalid __global__ write of size 4 bytes
========= at unaligned_kernel():0x160 in memcheck_demo.cu:6
========= by thread (0,0,0) in block (0,0,0)
========= Address 0x7f6510c00001 is misaligned
";
        let f = parse_findings(&lines(text));
        assert_eq!(f.len(), 2);
        assert_eq!(
            f[0].kind,
            FindingKind::Race {
                severity: "WARNING".into(),
                hazard: "race".into()
            }
        );
        assert_eq!(f[0].kernel.as_deref(), Some("RAW"));
        assert_eq!(f[0].kernel_id(), None, "not one of ours");
        assert_eq!(f[1].kernel.as_deref(), Some("unaligned_kernel"));
        assert_eq!(
            f[1].address.as_deref(),
            Some("0x7f6510c00001 is misaligned")
        );
    }

    #[test]
    fn banner_and_summaries_are_not_findings() {
        assert_eq!(
            report_line("========= COMPUTE-SANITIZER"),
            Some(ReportLine::Banner)
        );
        assert_eq!(
            report_line("========= ERROR SUMMARY: 0 errors"),
            Some(ReportLine::Summary { errors: 0 })
        );
        assert_eq!(
            report_line("========= ERROR SUMMARY: 1 error"),
            Some(ReportLine::Summary { errors: 1 })
        );
        assert_eq!(
            report_line("========= ERROR SUMMARY: 1,203 errors"),
            Some(ReportLine::Summary { errors: 1203 })
        );
        assert_eq!(
            report_line("========= RACECHECK SUMMARY: 3 hazards displayed (1 error, 2 warnings)"),
            Some(ReportLine::Summary { errors: 3 })
        );
        assert_eq!(report_line("VERDICT {}"), None);
        let mut text = String::from("========= COMPUTE-SANITIZER\n");
        text.push_str(MEMCHECK_WRITE);
        text.push_str("========= ERROR SUMMARY: 1 error\n");
        assert_eq!(parse_findings(&lines(&text)).len(), 1);
    }

    #[test]
    fn api_errors_and_tool_trouble_are_findings_too() {
        let text = "\
========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to \"invalid argument\" on CUDA API call to cuMemcpyDtoHAsync_v2.
=========     Saved host backtrace up to driver entry point at error
=========
========= Internal Sanitizer Error: The Sanitizer encountered an error while launching w4a16_fused_f16 and didn't track the launch. Errors might go undetected. (Unable to allocate enough memory to perform the requested operation)
";
        let f = parse_findings(&lines(text));
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].kind, FindingKind::ApiError);
        assert_eq!(f[1].kind, FindingKind::Tool);
        assert_eq!(f[1].kernel_id(), Some(KernelId::Fused));
    }

    fn verdict(check: &str, outcome: Outcome) -> Verdict {
        let check = check.parse().expect("a check name");
        Verdict::new("smoke/x/M=1/f16/asym/g128/exact", check, outcome)
    }

    #[test]
    fn a_window_charges_each_report_to_its_kernel() {
        let mut w = CaseWindow::new("smoke/x/M=1/f16/asym/g128/exact");
        for (c, o) in [
            ("selection:skinny", Outcome::Pass),
            ("skinny", Outcome::Pass),
            ("determinism:skinny", Outcome::Pass),
            ("fused", Outcome::Skip),
            ("fallback", Outcome::Fail),
            ("dequant", Outcome::Pass),
            ("dequant+dense", Outcome::Pass),
        ] {
            w.note(&verdict(c, o));
        }
        assert_eq!(
            w.launched.iter().copied().collect::<Vec<_>>(),
            vec![KernelId::Skinny, KernelId::Dequant, KernelId::Fallback],
            "skipped fused launched nothing; cuBLAS is not watched"
        );
        w.lines = lines(&format!("{MEMCHECK_WRITE}{MEMCHECK_WRITE}"));
        let vs = w.verdicts(SanitizerTool::Memcheck, RunTarget::native(Target::Sm90));
        let rows: Vec<(String, Outcome)> = vs
            .iter()
            .map(|v| (v.check.to_string(), v.outcome))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("sanitize:memcheck:skinny".to_string(), Outcome::Pass),
                ("sanitize:memcheck:dequant".to_string(), Outcome::Pass),
                ("sanitize:memcheck:fallback".to_string(), Outcome::Fail),
            ]
        );
        let fail = &vs[2];
        assert!(
            fail.detail.contains("w4a16_fallback_bf16"),
            "{}",
            fail.detail
        );
        assert!(
            fail.detail.contains("(first of 2 reports)"),
            "{}",
            fail.detail
        );
        assert!(
            fail.detail.contains(
                "repro: cargo run --release --bin w4a16 -- run --sanitize memcheck --filter 'smoke/x/M=1/f16/asym/g128/exact' --target sm_90"
            ),
            "{}",
            fail.detail
        );
    }

    #[test]
    fn a_report_against_no_launched_kernel_fails_the_case() {
        let mut w = CaseWindow::new("c");
        w.note(&Verdict::new(
            "c",
            Check::kernel(KernelId::Skinny),
            Outcome::Pass,
        ));
        // A crash before any verdict came back, and a report against a kernel never launched.
        w.lines = lines(&format!(
            "{SYNCCHECK}========= Error: process didn't terminate successfully\n"
        ));
        let vs = w.verdicts(SanitizerTool::Synccheck, RunTarget::native(Target::Sm90));
        assert_eq!(vs.len(), 2);
        assert_eq!(
            (vs[0].check.to_string().as_str(), vs[0].outcome),
            ("sanitize:synccheck:skinny", Outcome::Pass)
        );
        assert_eq!(
            (vs[1].check.to_string().as_str(), vs[1].outcome),
            ("sanitize:synccheck", Outcome::Fail)
        );
        assert!(
            vs[1].detail.contains("Barrier error detected"),
            "{}",
            vs[1].detail
        );
        assert!(
            vs[1].detail.contains("(first of 2 reports)"),
            "{}",
            vs[1].detail
        );
        // Nothing launched and nothing reported: no rows at all (nothing was watched).
        assert!(
            CaseWindow::new("d")
                .verdicts(SanitizerTool::Memcheck, RunTarget::native(Target::Sm90))
                .is_empty()
        );
    }

    #[test]
    fn the_command_line_of_each_tool() {
        let s = |tool| Sanitizer {
            tool,
            executable: PathBuf::from("/usr/local/cuda/bin/compute-sanitizer"),
        };
        let worker_args = vec!["worker".to_string(), "--exact-allocations".to_string()];
        let (prog, args) = s(SanitizerTool::Memcheck).command(Path::new("/x/w4a16"), &worker_args);
        assert_eq!(prog, PathBuf::from("/usr/local/cuda/bin/compute-sanitizer"));
        assert_eq!(
            args.join(" "),
            "--tool memcheck --kernel-name kns=w4a16_ --print-limit 0 --destroy-on-device-error kernel \
             --launch-timeout 120 --target-processes application-only --check-exit-code no \
             --padding 4096 --report-api-errors no -- /x/w4a16 worker --exact-allocations"
        );
        for tool in [
            SanitizerTool::Racecheck,
            SanitizerTool::Synccheck,
            SanitizerTool::Initcheck,
        ] {
            let (_, args) = s(tool).command(Path::new("/x/w4a16"), &worker_args);
            assert_eq!(
                args.join(" "),
                format!(
                    "--tool {tool} --kernel-name kns=w4a16_ --print-limit 0 --destroy-on-device-error kernel \
                     --launch-timeout 120 --target-processes application-only --check-exit-code no \
                     -- /x/w4a16 worker --exact-allocations"
                ),
                "memcheck's own options stay off {tool}"
            );
        }
    }

    #[test]
    fn tools_parse_by_name() {
        for t in SanitizerTool::ALL {
            assert_eq!(SanitizerTool::parse(t.name()), Some(t));
        }
        assert_eq!(SanitizerTool::parse("memchek"), None);
        assert_eq!(
            SanitizerTool::Initcheck.check().to_string(),
            "sanitize:initcheck"
        );
    }

    #[test]
    fn the_sanitizer_is_looked_for_in_cuda_home_the_default_toolkit_and_path() {
        let dir = std::env::temp_dir().join(format!("w4a16-sanitize-{}", std::process::id()));
        let bin = dir.join("toolkit").join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let path = std::env::join_paths([dir.join("empty"), dir.join("other")]).unwrap();
        let dirs = search_dirs(Some(dir.join("toolkit").as_os_str()), Some(&path));
        assert_eq!(
            dirs,
            vec![
                bin.clone(),
                PathBuf::from("/usr/local/cuda/bin"),
                dir.join("empty"),
                dir.join("other")
            ]
        );
        if !Path::new("/usr/local/cuda/bin/compute-sanitizer").exists() {
            let looked = locate_in(&dirs).unwrap_err();
            assert_eq!(looked.len(), 4);
            assert_eq!(looked[0], bin.join("compute-sanitizer"));
        }
        std::fs::write(bin.join("compute-sanitizer"), "#!/bin/sh\n").unwrap();
        assert_eq!(locate_in(&dirs), Ok(bin.join("compute-sanitizer")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_a_cuda_device_with_the_binary_is_sanitized() {
        let no_gpu = Skip {
            requirement: Requirement::Gpu,
            reason: "no GPU backend available: cuda: libcuda.so not found".into(),
        };
        let found = || Ok(PathBuf::from("/opt/cuda/bin/compute-sanitizer"));
        let never = || -> Result<PathBuf, Skip> { panic!("looked for the binary needlessly") };
        let t = SanitizerTool::Memcheck;

        let e = availability(t, Err(&no_gpu), RunTarget::native(Target::Sm90), never).unwrap_err();
        assert_eq!(e.requirement, Requirement::Gpu);
        assert!(e.reason.contains("needs an NVIDIA GPU") && e.reason.contains("libcuda.so"));
        let e = availability(
            t,
            Ok(DeviceKind::Rocm),
            RunTarget::native(Target::Gfx1151),
            never,
        )
        .unwrap_err();
        assert!(e.reason.contains("ROCm (gfx1151)"), "{}", e.reason);
        let e = availability(
            t,
            Ok(DeviceKind::Simulated),
            RunTarget::native(Target::Sm90),
            never,
        )
        .unwrap_err();
        assert!(e.reason.contains("simulated"), "{}", e.reason);
        let missing = || {
            Err(Skip {
                requirement: Requirement::Gpu,
                reason:
                    "compute-sanitizer not found (looked for /usr/local/cuda/bin/compute-sanitizer)"
                        .into(),
            })
        };
        let e = availability(
            t,
            Ok(DeviceKind::Cuda),
            RunTarget::native(Target::Sm90),
            missing,
        )
        .unwrap_err();
        assert!(e.reason.contains("/usr/local/cuda/bin/compute-sanitizer"));
        let s = availability(
            t,
            Ok(DeviceKind::Cuda),
            RunTarget::native(Target::Sm90),
            found,
        )
        .unwrap();
        assert_eq!(
            s.executable,
            PathBuf::from("/opt/cuda/bin/compute-sanitizer")
        );
    }

    #[test]
    fn a_skip_is_loud_and_a_failure_when_required() {
        let skip = Skip {
            requirement: Requirement::Gpu,
            reason: "compute-sanitizer memcheck needs an NVIDIA GPU: none here".into(),
        };
        let v = skip_verdict("smoke/a", SanitizerTool::Memcheck, &skip, false);
        assert_eq!(
            (v.check.to_string().as_str(), v.outcome),
            ("sanitize:memcheck", Outcome::Skip)
        );
        assert_eq!(v.detail, skip.reason);
        let v = skip_verdict("smoke/a", SanitizerTool::Memcheck, &skip, true);
        assert_eq!(v.outcome, Outcome::Fail);
        assert!(
            v.detail.starts_with("W4A16_REQUIRE=gpu but"),
            "{}",
            v.detail
        );
    }

    #[test]
    fn errors_counted_but_never_printed_inside_a_case_fail_the_worker() {
        let cases = vec!["smoke/a".to_string()];
        let v = unattributed_errors(SanitizerTool::Memcheck, 2, 0, &cases).unwrap();
        assert_eq!(v.outcome, Outcome::Fail);
        assert_eq!(v.check, "sanitize:memcheck:summary");
        assert!(unattributed_errors(SanitizerTool::Memcheck, 2, 2, &cases).is_none());
        assert!(unattributed_errors(SanitizerTool::Memcheck, 0, 0, &cases).is_none());
    }
}
