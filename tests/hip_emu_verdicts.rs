//! The rocm backend on the emulated HIP runtime (`hip-emu/`) against the ISA emulator's own
//! verdicts: `.ci/run` runs `w4a16 run --target gfx1151 --suite smoke` through the rocm backend
//! with the emulated runtime on `LD_LIBRARY_PATH` and hands this test its `report.json`
//! (`W4A16_HIP_EMU_REPORT`); every smoke row it recorded must have the outcome the committed
//! `verdicts-smoke@gfx1151.snap` (recorded by the ISA emulator device) gives the same case and
//! check, and every committed row must have been recorded. Both run the same machine code on the
//! same emulator, so a difference is the rocm backend's host path (loading, argument buffer,
//! copies, synchronisation, error mapping) or the runtime disagreeing with the emulator device.
//!
//! One known difference, asserted as such: the emulated runtime has no hipBLAS, so the
//! `dequant+dense` rows are loud skips there (they pass on the emulator device's host BLAS).
//! Without the report (a plain `cargo test`) the test is a loud skip under `rocm`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use w4a16_harness::require::{Requirement, Skip, skip_or_fail};
use w4a16_harness::runner::snapshot;

const REPORT_ENV: &str = "W4A16_HIP_EMU_REPORT";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

#[test]
fn the_rocm_backend_on_the_emulated_runtime_gives_the_isa_emulators_smoke_outcomes() {
    let Some(path) = std::env::var_os(REPORT_ENV) else {
        skip_or_fail(&Skip {
            requirement: Requirement::Rocm,
            reason: format!(
                "no report of the rocm backend on the emulated HIP runtime (${REPORT_ENV}; .ci/run sets it)"
            ),
        });
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let report: serde_json::Value = serde_json::from_str(&text).expect("report.json");
    assert_eq!(report["device"], "rocm", "the run opened the rocm backend");
    assert_eq!(report["target"], "gfx1151");
    let got: BTreeMap<(String, String), String> = report["verdicts"]
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
        .collect();
    let committed = root().join("snapshots/verdicts-smoke@gfx1151.snap");
    let snap = std::fs::read_to_string(&committed).expect("the committed gfx1151 smoke snapshot");
    assert!(
        snap.contains("recorded by the ISA emulator"),
        "{}",
        committed.display()
    );
    let rows = snapshot::parse_rows(&snap);
    assert!(rows.len() > 100, "{} rows", rows.len());
    let (mut compared, mut dense) = (0, 0);
    for row in &rows {
        let key = (row.case_id.clone(), row.check.clone());
        let outcome = got.get(&key).unwrap_or_else(|| {
            panic!(
                "the run recorded no `{}` row for {}",
                row.check, row.case_id
            )
        });
        if row.check == "dequant+dense" {
            assert_eq!(
                outcome, "skip",
                "{}: no hipBLAS on the emulated runtime",
                row.case_id
            );
            dense += 1;
        } else {
            assert_eq!(outcome, &row.outcome, "{} | {}", row.case_id, row.check);
            compared += 1;
        }
    }
    let extra: Vec<_> = got
        .keys()
        .filter(|k| !rows.iter().any(|r| r.case_id == k.0 && r.check == k.1))
        .collect();
    assert!(
        extra.is_empty(),
        "rows the emulator's snapshot lacks: {extra:?}"
    );
    assert!(
        compared > 500 && dense > 0,
        "{compared} compared, {dense} dense"
    );
    eprintln!(
        "{compared} smoke rows agree outcome for outcome; {dense} dense rows skip (no hipBLAS)"
    );
}
