//! The rocm backend on the emulated HIP runtime (`hip-emu/`) against the ISA emulator's own
//! verdicts, on each of the three AMD targets: `.ci/run` runs `w4a16 run --suite smoke` through
//! the rocm backend with the emulated runtime (and its hipBLAS stand-in) on `LD_LIBRARY_PATH`,
//! once per target (`W4A16_HIP_EMU_TARGET`), each into `<dir>/<gfx>/report.json`, and hands this
//! test `<dir>` (`W4A16_HIP_EMU_REPORTS`). A run restricted to a budgeted share of the suite
//! leaves its `--filter` glob in `<dir>/<gfx>/filter`.
//!
//! Every smoke row a run recorded must have the outcome the committed
//! `verdicts-smoke@<gfx>.snap` (recorded by the ISA emulator device) gives the same case and
//! check, and every committed row of the cases the run chose (all of them without a filter) must
//! have been recorded — the `dequant+dense` rows included: they run through the backend's real
//! hipBLAS binding on the stand-in and must pass as on the emulator device's host BLAS (the same
//! host GEMM, `w4a16_reference::blas`). Both run the same machine code on the same emulator, so
//! a difference is the rocm backend's host path (loading, argument buffer, copies,
//! synchronisation, error mapping, the hipBLAS call) or the runtime disagreeing with the
//! emulator device. Without the reports (a plain `cargo test`) the test is a loud skip under
//! `rocm`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use w4a16_cases::glob::glob_match;
use w4a16_harness::require::{Requirement, Skip, skip_or_fail};
use w4a16_harness::runner::snapshot;

const REPORTS_ENV: &str = "W4A16_HIP_EMU_REPORTS";

/// The targets CI runs, each of which must have its report.
const TARGETS: [&str; 3] = ["gfx1151", "gfx1100", "gfx1201"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// (case, check) → outcome of the smoke rows of one run's report.json.
fn recorded(report_path: &Path, gfx: &str) -> BTreeMap<(String, String), String> {
    let text = std::fs::read_to_string(report_path)
        .unwrap_or_else(|e| panic!("{}: {e}", report_path.display()));
    let report: serde_json::Value = serde_json::from_str(&text).expect("report.json");
    assert_eq!(
        report["device"], "rocm",
        "{gfx}: the run opened the rocm backend"
    );
    assert_eq!(report["target"], gfx, "{}", report_path.display());
    report["verdicts"]
        .as_array()
        .expect("verdicts")
        .iter()
        .filter(|v| {
            v["case_id"]
                .as_str()
                .is_some_and(|c| c.starts_with("smoke/"))
        })
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            ((s("case_id"), s("check")), s("outcome"))
        })
        .collect()
}

/// Compares one target's run with its snapshot; (rows compared, dense rows among them).
fn compare(dir: &Path, gfx: &str) -> (usize, usize) {
    let run_dir = dir.join(gfx);
    let got = recorded(&run_dir.join("report.json"), gfx);
    let filter = std::fs::read_to_string(run_dir.join("filter"))
        .ok()
        .map(|f| f.trim().to_string());
    let committed = root().join(format!("snapshots/verdicts-smoke@{gfx}.snap"));
    let snap = std::fs::read_to_string(&committed)
        .unwrap_or_else(|e| panic!("{}: {e}", committed.display()));
    assert!(
        snap.contains("recorded by the ISA emulator"),
        "{}",
        committed.display()
    );
    let all = snapshot::parse_rows(&snap);
    assert!(all.len() > 100, "{gfx}: {} rows", all.len());
    let rows: Vec<_> = all
        .iter()
        .filter(|r| filter.as_deref().is_none_or(|f| glob_match(f, &r.case_id)))
        .collect();
    let (mut compared, mut dense) = (0, 0);
    for row in &rows {
        let key = (row.case_id.clone(), row.check.clone());
        let outcome = got.get(&key).unwrap_or_else(|| {
            panic!(
                "{gfx}: the run recorded no `{}` row for {}",
                row.check, row.case_id
            )
        });
        assert_eq!(
            outcome, &row.outcome,
            "{gfx}: {} | {}",
            row.case_id, row.check
        );
        compared += 1;
        if row.check == "dequant+dense" {
            assert_eq!(
                outcome, "pass",
                "{gfx}: {} through the hipBLAS stand-in",
                row.case_id
            );
            dense += 1;
        }
    }
    let extra: Vec<_> = got
        .keys()
        .filter(|k| !rows.iter().any(|r| r.case_id == k.0 && r.check == k.1))
        .collect();
    assert!(
        extra.is_empty(),
        "{gfx}: rows the emulator's snapshot (filter {filter:?}) lacks: {extra:?}"
    );
    // A filtered run still has to cover a real share of the suite, the dense path included.
    let floor = if filter.is_some() { 100 } else { 500 };
    assert!(
        compared > floor && dense > 0,
        "{gfx}: {compared} compared, {dense} dense (filter {filter:?})"
    );
    eprintln!(
        "{gfx}: {compared} smoke rows agree outcome for outcome ({dense} dequant+dense through \
         the hipBLAS stand-in){}",
        filter.map(|f| format!(", cases `{f}`")).unwrap_or_default()
    );
    (compared, dense)
}

#[test]
fn the_rocm_backend_on_the_emulated_runtime_gives_the_isa_emulators_smoke_outcomes() {
    let Some(dir) = std::env::var_os(REPORTS_ENV) else {
        skip_or_fail(&Skip {
            requirement: Requirement::Rocm,
            reason: format!(
                "no reports of the rocm backend on the emulated HIP runtime (${REPORTS_ENV}; .ci/run sets it)"
            ),
        });
        return;
    };
    let dir = PathBuf::from(dir);
    for gfx in TARGETS {
        compare(&dir, gfx);
    }
}
