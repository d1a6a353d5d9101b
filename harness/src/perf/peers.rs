//! The peers timed on the same cases with the same cold-input method (torch's int4 kernel and
//! dense fp16), so that every table has them side by side.
//!
//! The timing itself is `scripts/perf-peers.py` (PyTorch): this module writes its request,
//! runs it, and reads its output back into a [`PeerTable`] keyed like the goldens. When the
//! peers cannot run (no python, no torch, no CUDA) the error says so, for the report to show.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use w4a16_reference::layer::Symmetry;
use w4a16_reference::{ActDtype, LayerShape};

use super::key::PerfKey;
use super::measure::PerfPlan;

/// Medians of one case's peers; a peer that could not run is named in `skipped` with why.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PeerTimes {
    pub torch_int4_us: Option<f64>,
    pub dense_fp16_us: Option<f64>,
    pub skipped: Vec<String>,
}

/// The environment variable naming the python that runs the peers script (default `python3`).
pub const PYTHON_ENV: &str = "W4A16_PYTHON";
const DEFAULT_PYTHON: &str = "python3";

/// Exit statuses of `scripts/perf-peers.py` (declared there too, in its docstring).
const EXIT_NO_TORCH: i32 = 3;
const EXIT_NO_CUDA: i32 = 4;

/// How much of the script's stderr an error quotes.
const STDERR_TAIL_LINES: usize = 12;
const STDERR_TAIL_CHARS: usize = 2000;

/// Files the run leaves in its work folder, for the curious and for the error messages.
const REQUEST_FILE: &str = "peers-request.json";
const OUTPUT_FILE: &str = "peers-output.json";
const STDERR_FILE: &str = "peers-stderr.log";
const STDOUT_FILE: &str = "peers-stdout.log";

/// One case as the peers script sees it: the key and what the peers need to build it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerCase {
    #[serde(flatten)]
    pub key: PerfKey,
    pub n: usize,
    pub k: usize,
    pub group: usize,
    pub dtype: ActDtype,
    pub symmetry: Symmetry,
}

impl PeerCase {
    pub fn new(key: PerfKey, shape: &LayerShape, dtype: ActDtype, symmetry: Symmetry) -> Self {
        PeerCase {
            key,
            n: shape.n,
            k: shape.k,
            group: shape.group,
            dtype,
            symmetry,
        }
    }
}

/// The script's input file: the plan's cold-input method and the cases, one per key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerRequest {
    pub copies: usize,
    pub reps: usize,
    pub warmup: usize,
    pub cases: Vec<PeerCase>,
}

/// The request for `cases` timed as `plan` times the kernels; a repeated key keeps its first
/// case, as perf cases do.
pub fn peer_request(cases: &[PeerCase], plan: PerfPlan) -> PeerRequest {
    let mut seen = std::collections::HashSet::new();
    PeerRequest {
        copies: plan.copies,
        reps: plan.reps,
        warmup: plan.warmup,
        cases: cases
            .iter()
            .filter(|c| seen.insert(c.key.clone()))
            .cloned()
            .collect(),
    }
}

/// The peers of one run: where they ran and each key's times.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerTable {
    pub device: String,
    pub torch: String,
    /// What the script says about how it ran the peers (dtype, method), for the report.
    pub notes: Vec<String>,
    pub rows: HashMap<PerfKey, PeerTimes>,
}

impl PeerTable {
    /// One line for the report's header (`PerfRun::peers_note`).
    pub fn note(&self) -> String {
        let skipped = self.rows.values().filter(|t| !t.skipped.is_empty()).count();
        let mut line = format!(
            "peers on {}, torch {}: {} cases",
            self.device,
            self.torch,
            self.rows.len()
        );
        if skipped > 0 {
            line.push_str(&format!(", {skipped} with a peer skipped"));
        }
        for n in &self.notes {
            line.push_str("; ");
            line.push_str(n);
        }
        line
    }
}

/// Why the peers have no table. [`PeerError::is_unavailable`] tells a machine without the
/// peers' stack (a loud skip) from a broken run.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error(
        "peers skipped: no python executable `{python}` ({source}); set {PYTHON_ENV} to a python with PyTorch"
    )]
    PythonMissing { python: String, source: io::Error },
    #[error("peers skipped: `{python}` cannot import torch: {stderr_tail}")]
    TorchUnavailable { python: String, stderr_tail: String },
    #[error("peers skipped: torch sees no CUDA device: {stderr_tail}")]
    NoCudaDevice { stderr_tail: String },
    #[error("peers script {} does not exist", script.display())]
    ScriptMissing { script: PathBuf },
    #[error("cannot start `{python}` for the peers script: {source}")]
    Spawn { python: String, source: io::Error },
    #[error("peers script {} failed ({status}): {stderr_tail}", script.display())]
    ScriptFailed {
        script: PathBuf,
        status: String,
        stderr_tail: String,
    },
    #[error("peers script {} ran past {after_s} s and was stopped", script.display())]
    TimedOut { script: PathBuf, after_s: u64 },
    #[error("peers: cannot {what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("peers output {} is unparsable: {message}", path.display())]
    Unparsable { path: PathBuf, message: String },
    #[error("peers output {} lacks {missing} requested case(s), the first {first}", path.display())]
    MissingRows {
        path: PathBuf,
        missing: usize,
        first: PerfKey,
    },
    #[error("peers output {} has a row for {key} that was not requested or is repeated", path.display())]
    UnexpectedRow { path: PathBuf, key: PerfKey },
    #[error("peers output {}: {key} has {field} = {value} µs, expected a finite time > 0", path.display())]
    BadTime {
        path: PathBuf,
        key: PerfKey,
        field: &'static str,
        value: f64,
    },
}

impl PeerError {
    /// The peers' stack is absent here (python, torch or a CUDA device): the report says so
    /// loudly, and the run goes on; every other error is a broken peers run.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            PeerError::PythonMissing { .. }
                | PeerError::TorchUnavailable { .. }
                | PeerError::NoCudaDevice { .. }
        )
    }
}

/// How the script is started: which python, extra environment, how long it may run.
struct ScriptRunner {
    python: OsString,
    env: Vec<(OsString, OsString)>,
    timeout: Duration,
}

impl ScriptRunner {
    /// Generous: torch's import and CUDA start take seconds, each case well under one.
    fn timeout_for(cases: usize) -> Duration {
        Duration::from_secs(180 + 3 * cases as u64)
    }
}

/// Times the peers of `cases` with `script` (`scripts/perf-peers.py`) as `plan` times the
/// kernels, under the python named by `W4A16_PYTHON` (default `python3`). The request, output
/// and the script's logs are left in `work_dir`.
pub fn run_peers(
    script: &Path,
    cases: &[PeerCase],
    plan: PerfPlan,
    work_dir: &Path,
) -> Result<PeerTable, PeerError> {
    let runner = ScriptRunner {
        python: std::env::var_os(PYTHON_ENV).unwrap_or_else(|| DEFAULT_PYTHON.into()),
        env: Vec::new(),
        timeout: ScriptRunner::timeout_for(cases.len()),
    };
    run_with(&runner, script, cases, plan, work_dir)
}

fn run_with(
    runner: &ScriptRunner,
    script: &Path,
    cases: &[PeerCase],
    plan: PerfPlan,
    work_dir: &Path,
) -> Result<PeerTable, PeerError> {
    if !script.is_file() {
        return Err(PeerError::ScriptMissing {
            script: script.to_path_buf(),
        });
    }
    let io_err = |what, path: &Path| {
        let path = path.to_path_buf();
        move |source| PeerError::Io { what, path, source }
    };
    fs::create_dir_all(work_dir).map_err(io_err("create the folder", work_dir))?;
    let request = peer_request(cases, plan);
    let request_path = work_dir.join(REQUEST_FILE);
    let output_path = work_dir.join(OUTPUT_FILE);
    let stderr_path = work_dir.join(STDERR_FILE);
    let stdout_path = work_dir.join(STDOUT_FILE);
    let json = serde_json::to_string_pretty(&request).expect("a request serializes");
    fs::write(&request_path, json).map_err(io_err("write the request", &request_path))?;
    // A stale output from an earlier run must not pass for this one's.
    match fs::remove_file(&output_path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            return Err(io_err("remove the old output", &output_path)(e));
        }
        _ => {}
    }
    // Logs go to files, not pipes: the child never blocks on a full pipe while we poll it.
    let stderr = fs::File::create(&stderr_path).map_err(io_err("create", &stderr_path))?;
    let stdout = fs::File::create(&stdout_path).map_err(io_err("create", &stdout_path))?;
    let python = runner.python.to_string_lossy().into_owned();
    let mut child = Command::new(&runner.python)
        .arg(script)
        .arg(&request_path)
        .arg(&output_path)
        .envs(runner.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|source| match source.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied => PeerError::PythonMissing {
                python: python.clone(),
                source,
            },
            _ => PeerError::Spawn {
                python: python.clone(),
                source,
            },
        })?;
    let status = wait_with_timeout(&mut child, runner.timeout).map_err(|source| PeerError::Io {
        what: "wait for",
        path: script.to_path_buf(),
        source,
    })?;
    let Some(status) = status else {
        return Err(PeerError::TimedOut {
            script: script.to_path_buf(),
            after_s: runner.timeout.as_secs(),
        });
    };
    if !status.success() {
        let stderr_tail = tail(&fs::read_to_string(&stderr_path).unwrap_or_default());
        return Err(match status.code() {
            Some(EXIT_NO_TORCH) => PeerError::TorchUnavailable {
                python,
                stderr_tail,
            },
            Some(EXIT_NO_CUDA) => PeerError::NoCudaDevice { stderr_tail },
            _ => PeerError::ScriptFailed {
                script: script.to_path_buf(),
                status: describe(status),
                stderr_tail,
            },
        });
    }
    let text = fs::read_to_string(&output_path).map_err(io_err("read", &output_path))?;
    parse_output(&text, &output_path, &request.cases)
}

/// `Some(status)` once the child exits, `None` (child killed) after `timeout`.
fn wait_with_timeout(
    child: &mut std::process::Child,
    timeout: Duration,
) -> io::Result<Option<ExitStatus>> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if start.elapsed() >= timeout {
            child.kill()?;
            child.wait()?;
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn describe(status: ExitStatus) -> String {
    match status.code() {
        Some(code) => format!("exit status {code}"),
        None => format!("{status}"),
    }
}

/// The last lines of a log, at most [`STDERR_TAIL_CHARS`] characters.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.trim_end().lines().collect();
    let joined = lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join("\n");
    let chars = joined.chars().count();
    if chars <= STDERR_TAIL_CHARS {
        joined
    } else {
        joined.chars().skip(chars - STDERR_TAIL_CHARS).collect()
    }
}

/// The script's output file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PeerOutput {
    device: String,
    torch: String,
    torch_int4_dtype: String,
    #[serde(default)]
    notes: Vec<String>,
    rows: Vec<PeerRow>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PeerRow {
    provider: String,
    shape: String,
    m: usize,
    torch_int4_us: Option<f64>,
    dense_fp16_us: Option<f64>,
    skipped: Vec<String>,
}

/// The output `text` (read from `path`) against the cases it answers: one row per requested
/// key, no other, every time finite and positive.
fn parse_output(text: &str, path: &Path, requested: &[PeerCase]) -> Result<PeerTable, PeerError> {
    let out: PeerOutput = serde_json::from_str(text).map_err(|e| PeerError::Unparsable {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut expected: std::collections::HashSet<&PerfKey> =
        requested.iter().map(|c| &c.key).collect();
    let mut rows = HashMap::with_capacity(out.rows.len());
    for row in out.rows {
        let key = PerfKey {
            provider: row.provider,
            shape: row.shape,
            m: row.m,
        };
        if !expected.remove(&key) {
            return Err(PeerError::UnexpectedRow {
                path: path.to_path_buf(),
                key,
            });
        }
        for (field, value) in [
            ("torch_int4_us", row.torch_int4_us),
            ("dense_fp16_us", row.dense_fp16_us),
        ] {
            if let Some(value) = value.filter(|v| !(v.is_finite() && *v > 0.0)) {
                return Err(PeerError::BadTime {
                    path: path.to_path_buf(),
                    key,
                    field,
                    value,
                });
            }
        }
        let times = PeerTimes {
            torch_int4_us: row.torch_int4_us,
            dense_fp16_us: row.dense_fp16_us,
            skipped: row.skipped,
        };
        rows.insert(key, times);
    }
    if let Some(first) = requested.iter().find(|c| expected.contains(&c.key)) {
        return Err(PeerError::MissingRows {
            path: path.to_path_buf(),
            missing: expected.len(),
            first: first.key.clone(),
        });
    }
    let mut notes = vec![format!("torch int4 ran in {}", out.torch_int4_dtype)];
    notes.extend(out.notes);
    Ok(PeerTable {
        device: out.device,
        torch: out.torch,
        notes,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(provider: &str, m: usize) -> PerfKey {
        PerfKey {
            provider: provider.into(),
            shape: "qwen3-8b.mlp_up".into(),
            m,
        }
    }

    fn case(provider: &str, m: usize, symmetry: Symmetry) -> PeerCase {
        PeerCase::new(
            key(provider, m),
            &LayerShape::new(14336, 4096, 128),
            ActDtype::Bf16,
            symmetry,
        )
    }

    fn cases() -> Vec<PeerCase> {
        vec![
            case("hybrid-w4a16-zp-bf16", 1, Symmetry::Asym),
            case("hybrid-w4a16-f16", 2048, Symmetry::Sym),
        ]
    }

    fn script() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/perf-peers.py")
    }

    /// A fresh folder per test, so parallel tests never share files.
    fn work_dir(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("w4a16-peers-{test}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    /// `python3` here, or a loud skip (`None`): the script's tests cannot run without it.
    fn python3() -> Option<ScriptRunner> {
        let found = Command::new(DEFAULT_PYTHON)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            crate::require::announce_skip(
                DEFAULT_PYTHON,
                &format!("no `{DEFAULT_PYTHON}` on this machine"),
            );
            return None;
        }
        Some(ScriptRunner {
            python: DEFAULT_PYTHON.into(),
            env: Vec::new(),
            timeout: Duration::from_secs(120),
        })
    }

    fn sample_output() -> serde_json::Value {
        json!({
            "device": "NVIDIA H200",
            "torch": "2.9.0 (CUDA 13.0)",
            "torch_int4_dtype": "bf16",
            "notes": ["method: per-launch CUDA-event times"],
            "rows": [
                {"provider": "hybrid-w4a16-f16", "shape": "qwen3-8b.mlp_up", "m": 2048,
                 "torch_int4_us": 8154.0, "dense_fp16_us": null,
                 "skipped": ["dense-fp16: OutOfMemoryError: CUDA out of memory"]},
                {"provider": "hybrid-w4a16-zp-bf16", "shape": "qwen3-8b.mlp_up", "m": 1,
                 "torch_int4_us": 20.3, "dense_fp16_us": 34.2, "skipped": []}
            ]
        })
    }

    #[test]
    fn request_has_the_scripts_shape_and_one_case_per_key() {
        let mut cs = cases();
        cs.push(case("hybrid-w4a16-zp-bf16", 1, Symmetry::Sym)); // same key: dropped
        let plan = PerfPlan {
            reps: 9,
            warmup: 3,
            copies: 4,
        };
        let got = serde_json::to_value(peer_request(&cs, plan)).unwrap();
        let want = json!({
            "copies": 4, "reps": 9, "warmup": 3,
            "cases": [
                {"provider": "hybrid-w4a16-zp-bf16", "shape": "qwen3-8b.mlp_up", "m": 1,
                 "n": 14336, "k": 4096, "group": 128, "dtype": "bf16", "symmetry": "asym"},
                {"provider": "hybrid-w4a16-f16", "shape": "qwen3-8b.mlp_up", "m": 2048,
                 "n": 14336, "k": 4096, "group": 128, "dtype": "bf16", "symmetry": "sym"}
            ]
        });
        assert_eq!(got, want);
    }

    #[test]
    fn output_is_read_into_rows_by_key() {
        let path = Path::new("/w/peers-output.json");
        let table = parse_output(&sample_output().to_string(), path, &cases()).unwrap();
        assert_eq!(table.device, "NVIDIA H200");
        assert_eq!(table.torch, "2.9.0 (CUDA 13.0)");
        assert_eq!(table.rows.len(), 2);
        assert_eq!(
            table.rows[&key("hybrid-w4a16-zp-bf16", 1)],
            PeerTimes {
                torch_int4_us: Some(20.3),
                dense_fp16_us: Some(34.2),
                skipped: vec![],
            }
        );
        let big = &table.rows[&key("hybrid-w4a16-f16", 2048)];
        assert_eq!(big.dense_fp16_us, None);
        assert_eq!(big.skipped.len(), 1);
        let note = table.note();
        assert!(note.contains("torch int4 ran in bf16"), "{note}");
        assert!(note.contains("1 with a peer skipped"), "{note}");
        assert!(note.contains("NVIDIA H200"), "{note}");
    }

    #[test]
    fn broken_output_names_the_file_and_what_is_wrong() {
        let path = Path::new("/w/peers-output.json");
        let err = parse_output("{\"device\": ", path, &cases()).unwrap_err();
        assert!(matches!(&err, PeerError::Unparsable { path: p, .. } if p == path));
        assert!(err.to_string().contains("/w/peers-output.json"), "{err}");

        let mut one_row = sample_output();
        one_row["rows"].as_array_mut().unwrap().pop();
        let err = parse_output(&one_row.to_string(), path, &cases()).unwrap_err();
        assert!(
            matches!(&err, PeerError::MissingRows { missing: 1, first, .. }
                if *first == key("hybrid-w4a16-zp-bf16", 1)),
            "{err}"
        );

        let mut repeated = sample_output();
        let row = repeated["rows"][0].clone();
        repeated["rows"].as_array_mut().unwrap().push(row);
        let err = parse_output(&repeated.to_string(), path, &cases()).unwrap_err();
        assert!(
            matches!(&err, PeerError::UnexpectedRow { key: k, .. } if *k == key("hybrid-w4a16-f16", 2048)),
            "{err}"
        );

        let mut zero = sample_output();
        zero["rows"][1]["dense_fp16_us"] = json!(0.0);
        let err = parse_output(&zero.to_string(), path, &cases()).unwrap_err();
        assert!(
            matches!(&err, PeerError::BadTime { field: "dense_fp16_us", value, .. } if *value == 0.0),
            "{err}"
        );

        let mut unknown_field = sample_output();
        unknown_field["rows"][1]["torch_int4_dtype"] = json!("f16");
        let err = parse_output(&unknown_field.to_string(), path, &cases()).unwrap_err();
        assert!(matches!(err, PeerError::Unparsable { .. }), "{err}");
    }

    #[test]
    fn missing_python_is_an_unavailable_peer_not_a_failure() {
        let dir = work_dir("no-python");
        let runner = ScriptRunner {
            python: "/nonexistent/python3".into(),
            env: Vec::new(),
            timeout: Duration::from_secs(5),
        };
        let err = run_with(&runner, &script(), &cases(), PerfPlan::default(), &dir).unwrap_err();
        assert!(
            matches!(&err, PeerError::PythonMissing { python, .. } if python == "/nonexistent/python3"),
            "{err}"
        );
        assert!(err.is_unavailable());
        assert!(err.to_string().contains(PYTHON_ENV), "{err}");
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn missing_script_is_named() {
        let dir = work_dir("no-script");
        let runner = ScriptRunner {
            python: DEFAULT_PYTHON.into(),
            env: Vec::new(),
            timeout: Duration::from_secs(5),
        };
        let gone = dir.join("perf-peers.py");
        let err = run_with(&runner, &gone, &cases(), PerfPlan::default(), &dir).unwrap_err();
        assert!(matches!(&err, PeerError::ScriptMissing { script } if *script == gone));
        assert!(!err.is_unavailable());
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn script_without_torch_says_so_and_exits_non_zero() {
        let Some(mut runner) = python3() else {
            return;
        };
        let dir = work_dir("no-torch");
        // A `torch` module that refuses to import shadows any real one (PYTHONPATH comes first).
        let fake = dir.join("fake-site");
        fs::create_dir_all(&fake).unwrap();
        fs::write(
            fake.join("torch.py"),
            "raise ImportError('torch hidden by the test')\n",
        )
        .unwrap();
        runner
            .env
            .push(("PYTHONPATH".into(), fake.into_os_string()));
        let err = run_with(&runner, &script(), &cases(), PerfPlan::default(), &dir).unwrap_err();
        assert!(
            matches!(&err, PeerError::TorchUnavailable { stderr_tail, .. }
                if stderr_tail.contains("cannot import torch")
                    && stderr_tail.contains("torch hidden by the test")),
            "{err}"
        );
        assert!(err.is_unavailable());
        assert!(!dir.join(OUTPUT_FILE).exists());
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn script_self_test_passes() {
        let Some(runner) = python3() else {
            return;
        };
        let out = Command::new(&runner.python)
            .arg(script())
            .arg("--self-test")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A stand-in script (no torch) that answers every case, and one that fails: the whole
    /// spawn → wait → read path, and the stderr tail a failure quotes.
    #[test]
    fn run_reads_a_scripts_answer_and_quotes_a_failures_stderr() {
        let Some(runner) = python3() else {
            return;
        };
        let dir = work_dir("stand-in");
        let answers = dir.join("answers.py");
        fs::write(
            &answers,
            "import json, sys\n\
             req = json.load(open(sys.argv[1]))\n\
             assert req['copies'] == 8 and req['reps'] == 15 and req['warmup'] == 5, req\n\
             rows = [{'provider': c['provider'], 'shape': c['shape'], 'm': c['m'],\n\
                      'torch_int4_us': 10.0 * c['m'], 'dense_fp16_us': None,\n\
                      'skipped': ['dense-fp16: RuntimeError: none here']} for c in req['cases']]\n\
             json.dump({'device': 'stand-in', 'torch': 'none', 'torch_int4_dtype': 'bf16',\n\
                        'notes': [], 'rows': rows}, open(sys.argv[2], 'w'))\n",
        )
        .unwrap();
        let table = run_with(&runner, &answers, &cases(), PerfPlan::default(), &dir).unwrap();
        assert_eq!(table.device, "stand-in");
        assert_eq!(
            table.rows[&key("hybrid-w4a16-f16", 2048)].torch_int4_us,
            Some(20480.0)
        );
        assert_eq!(
            table.rows[&key("hybrid-w4a16-zp-bf16", 1)].skipped,
            vec!["dense-fp16: RuntimeError: none here".to_string()]
        );

        let fails = dir.join("fails.py");
        fs::write(
            &fails,
            "import sys\nprint('boom: the last words', file=sys.stderr)\nsys.exit(7)\n",
        )
        .unwrap();
        let err = run_with(&runner, &fails, &cases(), PerfPlan::default(), &dir).unwrap_err();
        assert!(
            matches!(&err, PeerError::ScriptFailed { status, stderr_tail, .. }
                if status == "exit status 7" && stderr_tail == "boom: the last words"),
            "{err}"
        );
        assert!(!err.is_unavailable());
        // The earlier run's output was removed, not read back as this run's.
        assert!(!dir.join(OUTPUT_FILE).exists());
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn a_hung_script_is_stopped() {
        let Some(mut runner) = python3() else {
            return;
        };
        let dir = work_dir("hung");
        let hangs = dir.join("hangs.py");
        fs::write(&hangs, "import time\ntime.sleep(60)\n").unwrap();
        runner.timeout = Duration::from_millis(300);
        let started = Instant::now();
        let err = run_with(&runner, &hangs, &cases(), PerfPlan::default(), &dir).unwrap_err();
        assert!(matches!(err, PeerError::TimedOut { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(30));
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn stderr_tail_keeps_the_last_lines() {
        let log: String = (0..40).map(|i| format!("line {i}\n")).collect();
        let t = tail(&log);
        assert!(t.starts_with("line 28\n") && t.ends_with("line 39"), "{t}");
        let long = "x".repeat(5000);
        assert_eq!(tail(&long).len(), STDERR_TAIL_CHARS);
    }

    #[test]
    fn a_python_path_with_spaces_is_passed_whole() {
        let runner = ScriptRunner {
            python: "/no such dir/python 3".into(),
            env: Vec::new(),
            timeout: Duration::from_secs(5),
        };
        let dir = work_dir("spaces");
        let err = run_with(&runner, &script(), &cases(), PerfPlan::default(), &dir).unwrap_err();
        assert!(
            matches!(&err, PeerError::PythonMissing { python, .. } if python == "/no such dir/python 3"),
            "{err}"
        );
        let _ = fs::remove_dir_all(dir);
    }
}
