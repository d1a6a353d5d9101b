//! A model check's reports: `model-report.json` (every layer and verdict), `model-junit.xml`
//! (one test suite per layer, one test case per check) and `model-summary.md` (a table per
//! layer with the kernel selected at each batch size, the defects and refusals, the time split),
//! written by the one report writer ([`crate::report`]).

use super::{LayerRecord, LayerStatus, ModelCheck, StartupMemoryOutcome};
use crate::report::markdown::Table;
use crate::report::{self as writer, FileError, ReportFiles};
use crate::runner::verdict::{Outcome, Summary, Verdict};
use quick_junit::{Report, TestCase, TestSuite};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The files a model check's report owns in its folder, in the order they are written.
pub const FILES: [&str; 3] = ["model-report.json", "model-junit.xml", "model-summary.md"];

/// The three files of `check`'s report.
pub fn files(check: &ModelCheck) -> ReportFiles {
    let [json_name, junit_name, md_name] = FILES;
    ReportFiles::new()
        .with(json_name, json(check))
        .with(junit_name, junit(check))
        .with(md_name, markdown(check))
}

/// Writes the three reports into `dir` (created), replacing an earlier check's; returns their
/// paths.
pub fn write_all(check: &ModelCheck, dir: &Path) -> Result<Vec<PathBuf>, FileError> {
    writer::write(dir, &files(check))
}

pub fn json(check: &ModelCheck) -> String {
    writer::json::pretty(check, "a model check")
}

fn verdicts_of<'v>(check: &'v ModelCheck, layer: &LayerRecord) -> Vec<&'v Verdict> {
    let prefix = format!("{}/", layer.id);
    check
        .verdicts
        .iter()
        .filter(|v| v.case_id == layer.id || v.case_id.starts_with(&prefix))
        .collect()
}

/// One test suite per layer; a test case per verdict, named `<check>@M=<m>` where it has a batch.
pub fn junit(check: &ModelCheck) -> String {
    let mut report = Report::new(format!(
        "w4a16 check-model {}@{}",
        check.model, check.target
    ));
    let mut push_suite = |name: &str, vs: Vec<&Verdict>| {
        let mut suite = TestSuite::new(name);
        for v in vs {
            let status = writer::junit::verdict_status(v);
            let batch = v
                .case_id
                .split('/')
                .find(|s| s.starts_with("M="))
                .map(|m| format!("@{m}"))
                .unwrap_or_default();
            let mut case = TestCase::new(format!("{}{batch}", v.check), status);
            case.set_classname(v.case_id.clone());
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
    };
    for layer in &check.layers {
        push_suite(&layer.module, verdicts_of(check, layer));
    }
    let model_level: Vec<&Verdict> = check
        .verdicts
        .iter()
        .filter(|v| v.case_id == format!("{}/model", check.model))
        .collect();
    if !model_level.is_empty() {
        push_suite("model", model_level);
    }
    writer::junit::render(&report).expect("JUnit XML serializes")
}

fn status_name(s: LayerStatus) -> &'static str {
    match s {
        LayerStatus::Pass => "pass",
        LayerStatus::Defect => "DEFECT",
        LayerStatus::Refused => "REFUSED",
        LayerStatus::Fail => "FAIL",
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// One row per layer: its kind, producer, shape, the path selected at each batch size, status
/// and time.
fn layers_table(check: &ModelCheck) -> Table {
    let mut t = Table::new([
        "layer",
        "kind",
        "producer",
        "N×K",
        "G",
        "dtype",
        "sym",
        "selected per M",
        "status",
        "time (s)",
    ]);
    for l in &check.layers {
        let (shape, group) = l.shape.map_or(("?".to_string(), "?".to_string()), |s| {
            (format!("{}×{}", s.n, s.k), s.group.to_string())
        });
        let selected: Vec<String> = l
            .selected
            .iter()
            .map(|s| format!("M={}: {}", s.m, s.path))
            .collect();
        let kind = match l.kind {
            super::LayerKind::Linear => "linear",
            super::LayerKind::FusedPart => "fused part",
            super::LayerKind::FusedProjection => "fused",
            super::LayerKind::Experts => "experts",
        };
        t.row([
            format!("`{}`", l.module),
            kind.to_string(),
            l.producer.map_or("?".into(), |p| p.to_string()),
            shape,
            group,
            l.dtype.map_or("?", |d| d.name()).to_string(),
            l.symmetry.map_or("?", |s| s.name()).to_string(),
            if selected.is_empty() {
                "—".to_string()
            } else {
                selected.join(", ")
            },
            status_name(l.status).to_string(),
            format!("{:.2}", l.read_s + l.times.total_s()),
        ]);
    }
    t
}

/// `model-summary.md`: the model, the result, refusals and defects, the layers table, the
/// failures, the startup memory check and where the time went.
pub fn markdown(check: &ModelCheck) -> String {
    let mut md = String::new();
    let summary = Summary::of(&check.verdicts);
    // Without a GPU nothing ran on the target: the header says so rather than naming it.
    let on = if check.gpu {
        format!("on {}", check.target)
    } else {
        format!(
            "— no GPU: CPU-side checks only (selection and contract as for {})",
            check.target
        )
    };
    let _ = writeln!(
        md,
        "# w4a16 check-model `{}` {on}\n\n{} · {} · {} layers checked · {} unquantized linears left alone\n",
        check.model,
        check.architecture,
        check.quantization,
        check.layers.len(),
        check.unquantized
    );
    let verdict = if check.failed() {
        "**FAILED**"
    } else {
        "passed"
    };
    let _ = writeln!(md, "Result: {verdict}. {summary}\n");
    if !check.refusals.is_empty() {
        let _ = writeln!(md, "## Refused modules\n");
        for r in &check.refusals {
            let _ = writeln!(md, "- {r}");
        }
        md.push('\n');
    }
    let defects: Vec<&LayerRecord> = check
        .layers
        .iter()
        .filter(|l| !l.defects.is_empty())
        .collect();
    if !defects.is_empty() {
        let _ = writeln!(md, "## Checkpoint defects\n");
        for l in defects {
            for d in &l.defects {
                let _ = writeln!(md, "- `{}`: {d}", l.module);
            }
        }
        md.push('\n');
    }
    let _ = writeln!(md, "## Layers\n");
    md.push_str(&layers_table(check).render());
    md.push('\n');
    let failing: Vec<&Verdict> = check
        .verdicts
        .iter()
        .filter(|v| {
            matches!(
                v.outcome,
                Outcome::Fail | Outcome::Fault | Outcome::UnexpectedPass | Outcome::Expired
            )
        })
        .collect();
    if !failing.is_empty() {
        let _ = writeln!(md, "## Failures\n");
        for v in failing {
            let _ = writeln!(
                md,
                "- `{}` **{}** {}: {}",
                v.case_id,
                v.check,
                v.outcome.name(),
                v.detail
            );
        }
        md.push('\n');
    }
    if let Some(b) = &check.startup_memory {
        let _ = writeln!(md, "## Startup memory check (prefill dequant enabled)\n");
        match b {
            StartupMemoryOutcome::Fits(r) => {
                let _ = writeln!(
                    md,
                    "Fits: needs {} (int4 weights {}, dense cache {}, headroom {}, KV {}) of {}.\n",
                    gib(r.needed_bytes),
                    gib(r.resident_bytes),
                    gib(r.dense_cache_bytes),
                    gib(r.headroom_bytes),
                    gib(r.kv_bytes),
                    gib(r.allowed_bytes)
                );
            }
            StartupMemoryOutcome::DoesNotFit { message } => {
                let _ = writeln!(md, "**Does not fit**: {message}\n");
            }
            StartupMemoryOutcome::NotChecked { reason } => {
                let _ = writeln!(md, "Not checked: {reason}\n");
            }
        }
    }
    let t = &check.times;
    let _ = writeln!(md, "## Time\n");
    let _ = writeln!(
        md,
        "wall {:.2} s · reading tensors {:.2} s · data {:.2} s · conversion {:.2} s · device {:.2} s · reference + verification {:.2} s{}",
        check.wall_s,
        check.read_s,
        t.data_s,
        t.convert_s,
        t.device_s,
        t.verify_s,
        check
            .peak_rss_bytes
            .map(|b| format!(
                " · peak memory (RSS) {:.1} MiB",
                b as f64 / (1u64 << 20) as f64
            ))
            .unwrap_or_default()
    );
    md
}
