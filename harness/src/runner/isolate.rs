//! Fault isolation (DESIGN rule 8): GPU cases run in a worker process. A device fault that
//! poisons the context, a crash or a hang becomes that case's verdict; a fresh worker picks up
//! the remaining cases, so the run always finishes.
//!
//! Protocol on the worker's stdout, one line each: `BEGIN <case id>`, then any number of
//! `VERDICT <json>`, then `TIMING <json>` (the case's [`PhaseTimes`]), then `END <case id>`.
//! Anything else is passed through to stderr.

use super::session::{RunOutput, StopFlag};
use super::timing::PhaseTimes;
use super::verdict::{Outcome, Verdict};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Worker side: run `execute` for each case id read from stdin, framing its verdicts.
pub fn serve(mut execute: impl FnMut(&str) -> (Vec<Verdict>, PhaseTimes)) -> std::io::Result<()> {
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
    }
    Ok(())
}

enum Line {
    Text(String),
    Closed,
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
    mut on_verdict: impl FnMut(&Verdict),
) -> std::io::Result<RunOutput> {
    let mut verdicts = Vec::new();
    let mut times = PhaseTimes::default();
    let mut next = 0usize;
    while next < case_ids.len() && !stop.is_stopped() {
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
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
        let mut stopped = false;
        let failure: Option<String> = loop {
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
                    if let Some(id) = l.strip_prefix("BEGIN ") {
                        current = Some(id.to_string());
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
                    } else if l.starts_with("END ") {
                        times.merge(&times_for_current);
                        for v in got_for_current.drain(..) {
                            on_verdict(&v);
                            verdicts.push(v);
                        }
                        current = None;
                        next += 1;
                        if next == case_ids.len() {
                            break None;
                        }
                    } else {
                        eprintln!("{l}");
                    }
                }
                Ok(Line::Closed) => {
                    let status = child.wait()?;
                    break if next == case_ids.len() {
                        None
                    } else {
                        Some(format!("worker exited ({status})"))
                    };
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Some(format!(
                        "no progress for {} s (watchdog)",
                        timeout.as_secs()
                    ));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.wait()?;
                    break Some(format!("worker exited ({status})"));
                }
            }
        };
        let _ = child.kill();
        let _ = child.wait();
        if stopped {
            break;
        }
        if let Some(why) = failure {
            // The case in flight (or, if the worker died between cases, the next one) is charged.
            let id = current.unwrap_or_else(|| case_ids[next].clone());
            let v = Verdict::new(id, "device", Outcome::Fault).detail(why);
            on_verdict(&v);
            verdicts.push(v);
            next += 1;
        }
    }
    Ok(RunOutput { verdicts, times })
}
