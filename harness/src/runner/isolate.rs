//! Fault isolation (ARCHITECTURE.md rule 8): GPU cases run in a worker process. A device fault that
//! poisons the context, a crash or a hang becomes that case's verdict; a fresh worker picks up
//! the remaining cases, so the run always finishes.
//!
//! Protocol on the worker's stdout, one line each: `BEGIN <case id>`, then any number of
//! `VERDICT <json>`, then `TIMING <json>` (the case's [`PhaseTimes`]), then `END <case id>`. A
//! worker whose device is lost says `RETIRE <why>` after a case's `END` and exits: a fresh one
//! takes the remaining cases. Under a sanitizer, its `=========` lines are charged to the case
//! whose `BEGIN` came last ([`super::sanitize`]). Anything else is passed through to stderr.
//!
//! A worker is told what to run by one argument, `worker --spec JSON` ([`WorkerSpec`]); the
//! case ids come on its stdin, so a fresh worker after a crash is given the rest.

use super::cost::SuiteTimes;
use super::execute::ReferenceChoice;
use super::sanitize::{self, CaseWindow, ReportLine, Sanitizer};
use super::session::{RunOutput, StopFlag};
use super::timing::PhaseTimes;
use super::verdict::{Cause, Outcome, Verdict, WorkerFailure};
use super::verdict::{Check, SanitizerTool};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use w4a16_kernels::RunTarget;
use w4a16_select::config::KernelConfig;

/// Worker side: run `execute` for each case id read from stdin, framing its verdicts.
pub fn serve(execute: impl FnMut(&str) -> (Vec<Verdict>, PhaseTimes)) -> std::io::Result<()> {
    serve_until(execute, || None)
}

/// As [`serve`]; after each case `retire` may give a reason to stop (the device is lost), which
/// the worker announces (`RETIRE <why>`) before it returns.
pub fn serve_until(
    mut execute: impl FnMut(&str) -> (Vec<Verdict>, PhaseTimes),
    mut retire: impl FnMut() -> Option<String>,
) -> std::io::Result<()> {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let id = line?;
        let id = id.trim();
        if id.is_empty() {
            continue;
        }
        writeln!(out, "BEGIN {id}")?;
        out.flush()?;
        let (verdicts, times) = execute(id);
        for v in verdicts {
            writeln!(
                out,
                "VERDICT {}",
                serde_json::to_string(&v).expect("verdict serializes")
            )?;
        }
        writeln!(
            out,
            "TIMING {}",
            serde_json::to_string(&times).expect("times serialize")
        )?;
        writeln!(out, "END {id}")?;
        out.flush()?;
        if let Some(why) = retire() {
            writeln!(out, "RETIRE {}", why.replace('\n', " "))?;
            out.flush()?;
            return Ok(());
        }
    }
    Ok(())
}

/// Everything a worker process needs besides its case ids, as the parent resolved it: handed
/// over as one JSON argument (`worker --spec JSON`) and read back whole by the worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// The case folder; `None` is located as `--cases` would be.
    pub cases_dir: Option<PathBuf>,
    /// `None` runs on the GPU found here.
    pub target: Option<RunTarget>,
    /// The HIP source folder the kernels are compiled from; `None` is the embedded copies.
    pub kernel_sources: Option<PathBuf>,
    /// The kernel configuration (docs/contract.md §5), carried in its JSON form.
    #[serde(with = "kernel_config_json")]
    pub kernel_config: KernelConfig,
    /// Where failure artifacts go.
    pub artifacts: Option<PathBuf>,
    /// Where the reference's products are formed (already resolved by the parent).
    pub reference: ReferenceChoice,
    /// Every tensor at exactly its view's size, no guard bands (sanitizer runs).
    pub exact_allocations: bool,
    /// The ISA emulator's sanitizer watching every launch of the worker's device (`run
    /// --sanitize racecheck|initcheck` on a gfx target), its reports printed per case.
    #[serde(default, with = "tool_json")]
    pub emulator_sanitizer: Option<SanitizerTool>,
    /// The device this worker is bound to (`run --gpus`); `None` is device 0.
    pub device_ordinal: Option<usize>,
    /// Self-test mode: ids containing `crash` abort, `hang` never finish, others pass.
    pub simulate: bool,
    /// A model check's launches (`check-model` on a device): each case's layer is read from this
    /// model instead of being generated from the case files.
    #[serde(default)]
    pub model: Option<ModelLaunches>,
    /// Self-test, in any mode: the worker aborts on a case whose id contains this, as a kernel
    /// that takes its process down would.
    #[serde(default)]
    pub abort_on: Option<String>,
}

/// What a model check's worker needs to launch the model's layers as the parent planned them:
/// the model and the options that choose and shape its layers (docs/check-model.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelLaunches {
    pub dir: PathBuf,
    /// Only modules matching this glob (`--filter`).
    pub filter: Option<String>,
    /// Layers with a checkpoint defect are refused (`--strict`).
    pub strict: bool,
    /// Recorded activations (`--activations`).
    pub activations: Option<PathBuf>,
    /// The folder of the decoder layer's conversions that the parent made and handed over
    /// (check-model converts each layer once); `None`, or a layer missing there, the worker
    /// reads and converts itself.
    #[serde(default)]
    pub handoff: Option<PathBuf>,
}

impl WorkerSpec {
    /// The subcommand that serves a spec, and its flag.
    pub const SUBCOMMAND: &'static str = "worker";
    pub const FLAG: &'static str = "--spec";

    /// A self-test worker ([`WorkerSpec::simulate`]) with nothing else set.
    pub fn simulated() -> WorkerSpec {
        WorkerSpec {
            cases_dir: None,
            target: None,
            kernel_sources: None,
            kernel_config: KernelConfig::default(),
            artifacts: None,
            reference: ReferenceChoice::Cpu,
            exact_allocations: false,
            emulator_sanitizer: None,
            device_ordinal: None,
            simulate: true,
            model: None,
            abort_on: None,
        }
    }

    /// The same spec bound to device `ordinal` (`None` leaves it unbound).
    pub fn on_device(&self, ordinal: Option<usize>) -> WorkerSpec {
        WorkerSpec {
            device_ordinal: ordinal,
            ..self.clone()
        }
    }

    /// The worker's arguments after the executable: `worker --spec JSON`.
    pub fn to_args(&self) -> Vec<String> {
        let json = serde_json::to_string(self).expect("a worker spec serializes");
        vec![Self::SUBCOMMAND.into(), Self::FLAG.into(), json]
    }

    /// The spec a worker was given (the JSON of `--spec`).
    pub fn from_json(json: &str) -> Result<WorkerSpec, WorkerSpecError> {
        serde_json::from_str(json).map_err(|source| WorkerSpecError { source })
    }
}

/// A `worker --spec` value that is not a [`WorkerSpec`].
#[derive(Debug, thiserror::Error)]
#[error("worker --spec: expected a worker spec's JSON (as `w4a16 run` writes it): {source}")]
pub struct WorkerSpecError {
    pub source: serde_json::Error,
}

/// [`KernelConfig`] as its JSON object (`{"rdna_hybrid_w4a16_prefill_dequant": "enable"}`), read
/// back by the config's own parser so a worker refuses what the command line refuses.
mod kernel_config_json {
    use serde::{Deserialize, Deserializer, Serialize, Serializer, de, ser};
    use w4a16_select::config::KernelConfig;

    pub fn serialize<S: Serializer>(config: &KernelConfig, s: S) -> Result<S::Ok, S::Error> {
        let object: serde_json::Value =
            serde_json::from_str(&config.to_string()).map_err(ser::Error::custom)?;
        object.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<KernelConfig, D::Error> {
        let object = serde_json::Value::deserialize(d)?;
        KernelConfig::from_json(&object.to_string()).map_err(de::Error::custom)
    }
}

/// An optional [`SanitizerTool`] as its name (`"racecheck"`) or null.
mod tool_json {
    use crate::runner::verdict::SanitizerTool;
    use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

    pub fn serialize<S: Serializer>(tool: &Option<SanitizerTool>, s: S) -> Result<S::Ok, S::Error> {
        tool.map(|t| t.name()).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SanitizerTool>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(None),
            Some(name) => SanitizerTool::parse(&name)
                .map(Some)
                .ok_or_else(|| de::Error::custom(format!("unknown sanitizer tool `{name}`"))),
        }
    }
}

enum Line {
    Text(String),
    Closed,
}

/// How the parent starts a worker process.
#[derive(Clone, Copy, Debug)]
pub struct WorkerCommand<'a> {
    pub exe: &'a Path,
    pub spec: &'a WorkerSpec,
    /// Run the worker under compute-sanitizer and charge its reports to cases; `target` names
    /// the target in their repro commands.
    pub sanitizer: Option<(&'a Sanitizer, RunTarget)>,
}

/// How often a waiting parent looks at its [`StopFlag`].
const STOP_POLL: Duration = Duration::from_millis(100);

/// The next line, or `None` once `stop` is set; a timeout only after `timeout` without a line.
fn recv_until(
    rx: &mpsc::Receiver<Line>,
    timeout: Duration,
    stop: &StopFlag,
) -> Option<Result<Line, mpsc::RecvTimeoutError>> {
    let deadline = Instant::now() + timeout;
    loop {
        if stop.is_stopped() {
            return None;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.min(STOP_POLL)) {
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => continue,
            r => return Some(r),
        }
    }
}

/// Parent side: feed `case_ids` to workers of `exe` given `spec`, restarting after a crash or
/// hang. `per_case_timeout` bounds the time between a case's BEGIN and END.
pub fn run_isolated(
    exe: &Path,
    spec: &WorkerSpec,
    case_ids: &[String],
    per_case_timeout: Duration,
    on_verdict: impl FnMut(&Verdict),
) -> std::io::Result<RunOutput> {
    let never = StopFlag::default();
    run_isolated_until(exe, spec, case_ids, per_case_timeout, &never, on_verdict)
}

/// As [`run_isolated`]; once `stop` is set, the worker is ended and the cases it had not
/// finished are left out of the output (the case in flight included, uncharged).
pub fn run_isolated_until(
    exe: &Path,
    spec: &WorkerSpec,
    case_ids: &[String],
    per_case_timeout: Duration,
    stop: &StopFlag,
    on_verdict: impl FnMut(&Verdict),
) -> std::io::Result<RunOutput> {
    let worker = WorkerCommand {
        exe,
        spec,
        sanitizer: None,
    };
    run_worker(&worker, case_ids, per_case_timeout, stop, on_verdict)
}

/// Kills the worker and everything it started (under a sanitizer the worker is the sanitizer's
/// child: killing only the sanitizer would leave a hung worker holding the GPU).
fn kill(child: &mut Child, own_group: bool) {
    // Only while the child is unreaped is its id surely still its process group's.
    #[cfg(unix)]
    if own_group && let Ok(None) = child.try_wait() {
        // SAFETY: signals the process group created for this child at spawn (`process_group(0)`).
        unsafe {
            libc::kill(-(child.id() as i32), libc::SIGKILL);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// When the first worker of this process started (the case-times log's clock).
static CASE_TIMES_START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// With `W4A16_CASE_TIMES=FILE`, one line per finished case is appended to FILE: the id and
/// its data, conversion, device and verification seconds, the seconds since the first line and
/// the worker's thread (a diagnostic for the cost model that
/// deals layers to workers; timings never enter reports' verdicts).
fn case_times_log(id: &str, t: &PhaseTimes) {
    static LOG: std::sync::OnceLock<Option<std::sync::Mutex<std::fs::File>>> =
        std::sync::OnceLock::new();
    let since = CASE_TIMES_START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64();
    let log = LOG.get_or_init(|| {
        let path = std::env::var_os("W4A16_CASE_TIMES")?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| eprintln!("w4a16: W4A16_CASE_TIMES {}: {e}", path.to_string_lossy()))
            .ok()?;
        Some(std::sync::Mutex::new(file))
    });
    if let Some(file) = log {
        let mut file = file.lock().unwrap_or_else(|p| p.into_inner());
        let line = format!(
            "{id} {:.4} {:.4} {:.4} {:.4} {since:.3} {:?}\n",
            t.data_s,
            t.convert_s,
            t.device_s,
            t.verify_s,
            std::thread::current().id()
        );
        let _ = file.write_all(line.as_bytes());
    }
}

/// As [`run_isolated`], for any [`WorkerCommand`]: a worker process after another until every
/// case has a verdict (or `stop` is set).
pub fn run_worker(
    worker: &WorkerCommand<'_>,
    case_ids: &[String],
    per_case_timeout: Duration,
    stop: &StopFlag,
    on_verdict: impl FnMut(&Verdict),
) -> std::io::Result<RunOutput> {
    CASE_TIMES_START.get_or_init(std::time::Instant::now);
    let mut out = Collected {
        on_verdict,
        verdicts: Vec::new(),
        times: PhaseTimes::default(),
        suites: SuiteTimes::default(),
        next: 0,
    };
    while out.next < case_ids.len() && !stop.is_stopped() {
        let first_of_process = out.next;
        let (mut child, rx) = spawn(worker, &case_ids[out.next..])?;
        let mut process = WorkerProcess::new(worker);
        let ended = process.read(&mut child, &rx, per_case_timeout, stop, case_ids, &mut out);
        kill(&mut child, worker.sanitizer.is_some());
        let failure = match ended? {
            Ended::Stopped => break,
            Ended::Done => None,
            Ended::Failed(why) => Some(why),
        };
        if let Some(why) = failure {
            // The case in flight (or, if the worker died between cases, the next one) is charged.
            match process
                .current
                .clone()
                .or_else(|| case_ids.get(out.next).cloned())
            {
                Some(id) => {
                    let v =
                        Verdict::new(id, Check::Device, Outcome::Fault).because(Cause::Worker(why));
                    out.emit(v);
                    out.next += 1;
                }
                None => eprintln!("w4a16: worker failed after its last case: {why}"),
            }
        }
        let ran = &case_ids[first_of_process..out.next.min(case_ids.len())];
        process.close(ran, &mut out);
    }
    Ok(RunOutput {
        verdicts: out.verdicts,
        times: out.times,
        suites: out.suites,
        ..RunOutput::default()
    })
}

/// Starts one worker process and feeds it `ids`; its stdout comes back line by line.
fn spawn(
    worker: &WorkerCommand<'_>,
    ids: &[String],
) -> std::io::Result<(Child, mpsc::Receiver<Line>)> {
    let args = worker.spec.to_args();
    let (program, args) = match worker.sanitizer {
        Some((s, _)) => s.command(worker.exe, &args),
        None => (worker.exe.to_path_buf(), args),
    };
    let mut command = Command::new(&program);
    command
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // Under a sanitizer the worker is the sanitizer's child: a group of its own lets the
    // watchdog kill both (a plain worker stays in ours, so Ctrl-C still reaches it).
    #[cfg(unix)]
    if worker.sanitizer.is_some() {
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
    }
    let mut child = command.spawn()?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let ids = ids.to_vec();
    std::thread::spawn(move || {
        for id in ids {
            if writeln!(stdin, "{id}").is_err() {
                break;
            }
        }
    });
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            match line {
                Ok(l) => {
                    if tx.send(Line::Text(l)).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = tx.send(Line::Closed);
    });
    Ok((child, rx))
}

/// What the parent has gathered over every worker process of a run.
struct Collected<F> {
    on_verdict: F,
    verdicts: Vec<Verdict>,
    times: PhaseTimes,
    /// The same times per suite, each case's charged by its id.
    suites: SuiteTimes,
    /// The index of the first case without its verdicts.
    next: usize,
}

impl<F: FnMut(&Verdict)> Collected<F> {
    fn emit(&mut self, v: Verdict) {
        (self.on_verdict)(&v);
        self.verdicts.push(v);
    }
}

/// How one worker process ended.
enum Ended {
    /// Every case it was given is done (or it retired between cases).
    Done,
    /// The run was stopped: the process is ended, its case in flight uncharged.
    Stopped,
    /// It died or hung: the case in flight is charged.
    Failed(WorkerFailure),
}

/// The parent's reading of one worker process's protocol.
struct WorkerProcess<'w> {
    worker: &'w WorkerCommand<'w>,
    /// The case between its BEGIN and END, with what it sent so far.
    current: Option<String>,
    got_for_current: Vec<Verdict>,
    times_for_current: PhaseTimes,
    /// Under a sanitizer: the case announced last, and the errors its summary counted.
    window: Option<CaseWindow>,
    reported_errors: usize,
    attributed: usize,
    retired: bool,
}

impl<'w> WorkerProcess<'w> {
    fn new(worker: &'w WorkerCommand<'w>) -> Self {
        WorkerProcess {
            worker,
            current: None,
            got_for_current: Vec::new(),
            times_for_current: PhaseTimes::default(),
            window: None,
            reported_errors: 0,
            attributed: 0,
            retired: false,
        }
    }

    /// Reads the process's lines until it has done every case, dies, hangs or is stopped.
    fn read<F: FnMut(&Verdict)>(
        &mut self,
        child: &mut Child,
        rx: &mpsc::Receiver<Line>,
        per_case_timeout: Duration,
        stop: &StopFlag,
        case_ids: &[String],
        out: &mut Collected<F>,
    ) -> std::io::Result<Ended> {
        loop {
            let timeout = if self.current.is_some() {
                per_case_timeout
            } else {
                per_case_timeout * 4
            };
            let Some(got) = recv_until(rx, timeout, stop) else {
                return Ok(Ended::Stopped);
            };
            let exited = |status: std::process::ExitStatus| {
                Ended::Failed(WorkerFailure::Exited {
                    status: status.to_string(),
                })
            };
            match got {
                Ok(Line::Text(l)) => {
                    if self.on_line(l, case_ids.len(), out) {
                        return Ok(Ended::Done);
                    }
                }
                Ok(Line::Closed) => {
                    let status = child.wait()?;
                    let done =
                        out.next == case_ids.len() || (self.retired && self.current.is_none());
                    return Ok(if done { Ended::Done } else { exited(status) });
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    kill(child, self.worker.sanitizer.is_some());
                    return Ok(Ended::Failed(WorkerFailure::Watchdog {
                        seconds: timeout.as_secs(),
                    }));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(exited(child.wait()?)),
            }
        }
    }

    /// One line of the protocol; `true` once the last of `total` cases has ended and nothing
    /// more is to be read.
    fn on_line<F: FnMut(&Verdict)>(
        &mut self,
        l: String,
        total: usize,
        out: &mut Collected<F>,
    ) -> bool {
        if self.worker.sanitizer.is_some()
            && let Some(r) = sanitize::report_line(&l)
        {
            match (r, self.window.as_mut()) {
                (ReportLine::Summary { errors }, _) => {
                    self.reported_errors += errors;
                    eprintln!("{l}");
                }
                (ReportLine::Report(_), Some(w)) => w.lines.push(l),
                _ => eprintln!("{l}"),
            }
            return false;
        }
        if let Some(id) = l.strip_prefix("BEGIN ") {
            self.flush_window(out);
            self.current = Some(id.to_string());
            self.window = self.worker.sanitizer.map(|_| CaseWindow::new(id));
            self.got_for_current.clear();
            self.times_for_current = PhaseTimes::default();
        } else if let Some(json) = l.strip_prefix("VERDICT ") {
            match serde_json::from_str::<Verdict>(json) {
                Ok(v) => self.got_for_current.push(v),
                Err(e) => eprintln!("w4a16: unreadable verdict from worker ({e}): {json}"),
            }
        } else if let Some(json) = l.strip_prefix("TIMING ") {
            match serde_json::from_str::<PhaseTimes>(json) {
                Ok(t) => self.times_for_current = t,
                Err(e) => eprintln!("w4a16: unreadable timing from worker ({e}): {json}"),
            }
        } else if let Some(id) = l.strip_prefix("END ") {
            out.times.merge(&self.times_for_current);
            out.suites.add_case(id, &self.times_for_current);
            case_times_log(id, &self.times_for_current);
            for v in std::mem::take(&mut self.got_for_current) {
                if let Some(w) = self.window.as_mut() {
                    w.note(&v);
                }
                out.emit(v);
            }
            self.current = None;
            out.next += 1;
            // Under a sanitizer, reports may trail the last END: read on to the end.
            return out.next == total && self.worker.sanitizer.is_none();
        } else if let Some(why) = l.strip_prefix("RETIRE ") {
            eprintln!("w4a16: worker retired ({why}); a fresh one takes the rest");
            self.retired = true;
        } else {
            eprintln!("{l}");
        }
        false
    }

    /// The sanitizer's verdicts of the case announced last.
    fn flush_window<F: FnMut(&Verdict)>(&mut self, out: &mut Collected<F>) {
        let verdicts = match (self.window.take(), self.worker.sanitizer) {
            (Some(w), Some((s, target))) => w.verdicts(s.tool, target),
            _ => Vec::new(),
        };
        for v in verdicts {
            self.attributed += usize::from(v.outcome == Outcome::Fail);
            out.emit(v);
        }
    }

    /// After the process: its last case's sanitizer verdicts, and errors the sanitizer counted
    /// outside every case of `ran`.
    fn close<F: FnMut(&Verdict)>(mut self, ran: &[String], out: &mut Collected<F>) {
        self.flush_window(out);
        if let Some((s, _)) = self.worker.sanitizer
            && let Some(v) =
                sanitize::unattributed_errors(s.tool, self.reported_errors, self.attributed, ran)
        {
            out.emit(v);
        }
    }
}
