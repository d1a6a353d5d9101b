//! Fault isolation (ARCHITECTURE.md rule 8): GPU cases run in a worker process. A device fault that
//! poisons the context, a crash or a hang becomes that case's verdict; a fresh worker picks up
//! the remaining cases, so the run always finishes.
//!
//! Protocol on the worker's stdout, one line each: `BEGIN <case id>`, then any number of
//! `VERDICT <json>`, then `TIMING <json>` (the case's [`PhaseTimes`]), then `END <case id>`. A
//! worker whose device is lost says `RETIRE <why>` after a case's `END` and exits: a fresh one
//! takes the remaining cases. Under a sanitizer, its `=========` lines are charged to the case
//! whose `BEGIN` came last ([`super::sanitize`]). Anything else is passed through to stderr.

use super::sanitize::{self, CaseWindow, ReportLine, Sanitizer};
use super::session::{RunOutput, StopFlag};
use super::timing::PhaseTimes;
use super::verdict::Check;
use super::verdict::{Cause, Outcome, Verdict, WorkerFailure};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use w4a16_kernels::RunTarget;

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

enum Line {
    Text(String),
    Closed,
}

/// How the parent starts a worker process.
#[derive(Clone, Copy, Debug)]
pub struct WorkerCommand<'a> {
    pub exe: &'a Path,
    pub args: &'a [String],
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

/// Parent side: feed `case_ids` to `exe args…` workers, restarting after a crash or hang.
/// `per_case_timeout` bounds the time between a case's BEGIN and END.
pub fn run_isolated(
    exe: &Path,
    args: &[String],
    case_ids: &[String],
    per_case_timeout: Duration,
    on_verdict: impl FnMut(&Verdict),
) -> std::io::Result<RunOutput> {
    let never = StopFlag::default();
    run_isolated_until(exe, args, case_ids, per_case_timeout, &never, on_verdict)
}

/// As [`run_isolated`]; once `stop` is set, the worker is ended and the cases it had not
/// finished are left out of the output (the case in flight included, uncharged).
pub fn run_isolated_until(
    exe: &Path,
    args: &[String],
    case_ids: &[String],
    per_case_timeout: Duration,
    stop: &StopFlag,
    on_verdict: impl FnMut(&Verdict),
) -> std::io::Result<RunOutput> {
    let worker = WorkerCommand {
        exe,
        args,
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

/// As [`run_isolated`], for any [`WorkerCommand`].
pub fn run_worker(
    worker: &WorkerCommand<'_>,
    case_ids: &[String],
    per_case_timeout: Duration,
    stop: &StopFlag,
    mut on_verdict: impl FnMut(&Verdict),
) -> std::io::Result<RunOutput> {
    CASE_TIMES_START.get_or_init(std::time::Instant::now);
    let mut verdicts = Vec::new();
    let mut times = PhaseTimes::default();
    let mut next = 0usize;
    let mut emit = |v: Verdict, verdicts: &mut Vec<Verdict>| {
        on_verdict(&v);
        verdicts.push(v);
    };
    while next < case_ids.len() && !stop.is_stopped() {
        let (program, args) = match worker.sanitizer {
            Some((s, _)) => s.command(worker.exe, worker.args),
            None => (worker.exe.to_path_buf(), worker.args.to_vec()),
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
        let first_of_process = next;
        {
            let mut stdin = child.stdin.take().expect("piped stdin");
            let ids: Vec<String> = case_ids[next..].to_vec();
            std::thread::spawn(move || {
                for id in ids {
                    if writeln!(stdin, "{id}").is_err() {
                        break;
                    }
                }
            });
        }
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

        let mut current: Option<String> = None;
        let mut got_for_current: Vec<Verdict> = Vec::new();
        let mut times_for_current = PhaseTimes::default();
        // Under a sanitizer: the case announced last, and the errors its summary counted.
        let mut window: Option<CaseWindow> = None;
        let mut reported_errors = 0usize;
        let mut attributed = 0usize;
        let mut retired = false;
        let window_verdicts = |w: Option<CaseWindow>| match (w, worker.sanitizer) {
            (Some(w), Some((s, target))) => w.verdicts(s.tool, target),
            _ => Vec::new(),
        };
        let mut stopped = false;
        let failure: Option<WorkerFailure> = loop {
            let timeout = if current.is_some() {
                per_case_timeout
            } else {
                per_case_timeout * 4
            };
            let Some(got) = recv_until(&rx, timeout, stop) else {
                stopped = true;
                break None;
            };
            match got {
                Ok(Line::Text(l)) => {
                    if worker.sanitizer.is_some()
                        && let Some(r) = sanitize::report_line(&l)
                    {
                        match (r, window.as_mut()) {
                            (ReportLine::Summary { errors }, _) => {
                                reported_errors += errors;
                                eprintln!("{l}");
                            }
                            (ReportLine::Report(_), Some(w)) => w.lines.push(l),
                            _ => eprintln!("{l}"),
                        }
                        continue;
                    }
                    if let Some(id) = l.strip_prefix("BEGIN ") {
                        for v in window_verdicts(window.take()) {
                            attributed += usize::from(v.outcome == Outcome::Fail);
                            emit(v, &mut verdicts);
                        }
                        current = Some(id.to_string());
                        window = worker.sanitizer.map(|_| CaseWindow::new(id));
                        got_for_current.clear();
                        times_for_current = PhaseTimes::default();
                    } else if let Some(json) = l.strip_prefix("VERDICT ") {
                        match serde_json::from_str::<Verdict>(json) {
                            Ok(v) => got_for_current.push(v),
                            Err(e) => {
                                eprintln!("w4a16: unreadable verdict from worker ({e}): {json}")
                            }
                        }
                    } else if let Some(json) = l.strip_prefix("TIMING ") {
                        match serde_json::from_str::<PhaseTimes>(json) {
                            Ok(t) => times_for_current = t,
                            Err(e) => {
                                eprintln!("w4a16: unreadable timing from worker ({e}): {json}")
                            }
                        }
                    } else if let Some(id) = l.strip_prefix("END ") {
                        times.merge(&times_for_current);
                        case_times_log(id, &times_for_current);
                        for v in got_for_current.drain(..) {
                            if let Some(w) = window.as_mut() {
                                w.note(&v);
                            }
                            emit(v, &mut verdicts);
                        }
                        current = None;
                        next += 1;
                        // Under a sanitizer, reports may trail the last END: read on to the end.
                        if next == case_ids.len() && worker.sanitizer.is_none() {
                            break None;
                        }
                    } else if let Some(why) = l.strip_prefix("RETIRE ") {
                        eprintln!("w4a16: worker retired ({why}); a fresh one takes the rest");
                        retired = true;
                    } else {
                        eprintln!("{l}");
                    }
                }
                Ok(Line::Closed) => {
                    let status = child.wait()?;
                    break if next == case_ids.len() || (retired && current.is_none()) {
                        None
                    } else {
                        Some(WorkerFailure::Exited {
                            status: status.to_string(),
                        })
                    };
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    kill(&mut child, worker.sanitizer.is_some());
                    break Some(WorkerFailure::Watchdog {
                        seconds: timeout.as_secs(),
                    });
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.wait()?;
                    break Some(WorkerFailure::Exited {
                        status: status.to_string(),
                    });
                }
            }
        };
        kill(&mut child, worker.sanitizer.is_some());
        if stopped {
            break;
        }
        if let Some(why) = failure {
            // The case in flight (or, if the worker died between cases, the next one) is charged.
            match current.clone().or_else(|| case_ids.get(next).cloned()) {
                Some(id) => {
                    let v =
                        Verdict::new(id, Check::Device, Outcome::Fault).because(Cause::Worker(why));
                    emit(v, &mut verdicts);
                    next += 1;
                }
                None => eprintln!("w4a16: worker failed after its last case: {why}"),
            }
        }
        for v in window_verdicts(window.take()) {
            attributed += usize::from(v.outcome == Outcome::Fail);
            emit(v, &mut verdicts);
        }
        if let Some((s, _)) = worker.sanitizer
            && let Some(v) = sanitize::unattributed_errors(
                s.tool,
                reported_errors,
                attributed,
                &case_ids[first_of_process..next.min(case_ids.len())],
            )
        {
            emit(v, &mut verdicts);
        }
    }
    Ok(RunOutput {
        verdicts,
        times,
        ..RunOutput::default()
    })
}
