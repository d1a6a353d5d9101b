//! The reports of a regret run: `regret.md` (the worst cases first, then every case with every
//! path's time), `regret.json` (the [`RegretRun`] itself; [`read_json`] reads it back) and
//! `regret.svg` (regret against M per shape), written by the one report writer.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{RegretRow, RegretRun, TimeSource};
use crate::perf::report::{ReportError, fmt_sig3};
use crate::report::markdown::{Align, Table, escape};
use crate::report::{ReportDir, ReportFiles};

/// The files a regret report owns in its folder, in the order they are written.
pub const FILES: [&str; 3] = ["regret.svg", "regret.md", "regret.json"];

/// Rows of the worst-cases table; every case is in the collapsed table below it.
pub const WORST_ROWS: usize = 25;

/// A regret below this is within timing noise: the case counts as "selection is fastest".
pub const NOISE_REGRET: f64 = 1.05;

/// The selected path may take at most this many times the faster peer where dense is legal
/// under the config (docs/perf.md#regret-mode).
pub const PEER_BOUND: f64 = 1.5;

/// Where [`write_reports`] put each report.
#[derive(Clone, Debug, PartialEq)]
pub struct RegretReportPaths {
    pub markdown: PathBuf,
    pub json: PathBuf,
    pub plot: PathBuf,
}

/// Why a regret JSON report could not be read back.
#[derive(Debug, thiserror::Error)]
#[error("{path}: not a regret report: {error}")]
pub struct ReadError {
    pub path: String,
    #[source]
    pub error: serde_json::Error,
}

/// The three files of `run`'s report.
pub fn files(run: &RegretRun) -> Result<ReportFiles, ReportError> {
    let [plot, md, json_name] = FILES;
    Ok(ReportFiles::new()
        .with(plot, super::plot::render_svg(run)?)
        .with(md, markdown(run))
        .with(json_name, json(run)))
}

/// Writes `regret.svg`, `regret.md` and `regret.json` into `dir` (created), an earlier run's
/// first removed, so that a plot that cannot be drawn leaves no stale report behind.
pub fn write_reports(run: &RegretRun, dir: &Path) -> Result<RegretReportPaths, ReportError> {
    let folder = open(dir)?;
    write_into(&folder, run)
}

/// The report folder `dir`, created, with an earlier run's regret reports removed.
pub fn open(dir: &Path) -> Result<ReportDir, ReportError> {
    Ok(ReportDir::open(dir, &FILES)?)
}

/// (Re)writes the three files of `run` into `folder`, each atomically: called after every case,
/// a stopped run leaves a consistent report of the cases it finished.
pub fn write_into(folder: &ReportDir, run: &RegretRun) -> Result<RegretReportPaths, ReportError> {
    folder.write(&files(run)?)?;
    let dir = folder.path();
    Ok(RegretReportPaths {
        markdown: dir.join("regret.md"),
        json: dir.join("regret.json"),
        plot: dir.join("regret.svg"),
    })
}

/// The run as JSON, one row per line (what [`read_json`] reads).
pub fn json(run: &RegretRun) -> String {
    crate::report::json::records(run, "the regret report")
}

/// A regret report written by [`json`]; `path` only names it in the error.
pub fn read_json(path: &str, text: &str) -> Result<RegretRun, ReadError> {
    serde_json::from_str(text).map_err(|error| ReadError {
        path: path.to_string(),
        error,
    })
}

/// Rows by regret, worst first (ties by key, so the order does not depend on timing order).
pub fn worst_first(run: &RegretRun) -> Vec<&RegretRow> {
    let mut rows: Vec<&RegretRow> = run.rows.iter().collect();
    rows.sort_by(|a, b| b.regret.total_cmp(&a.regret).then(a.key.cmp(&b.key)));
    rows
}

fn us(x: f64) -> String {
    fmt_sig3(x)
}

fn ratio(x: f64) -> String {
    format!("{}×", fmt_sig3(x))
}

/// `regret.md`.
pub fn markdown(run: &RegretRun) -> String {
    let mut s = String::new();
    let source = match run.source {
        TimeSource::DeviceEvents => format!(
            "device events, {} launches per path after {} queued, cold inputs (rotating copies)",
            run.plan.reps, run.plan.warmup
        ),
        TimeSource::Model => "a MODEL, not a measurement: each path launched once on the ISA \
            emulator, its counters timed by the target's declared machine \
            (docs/perf-counters.md); the dense path has no model time (its vendor GEMM is a host \
            stand-in) and is listed as not timed. The model is throughput only, at the whole \
            GPU's rates: it has no latency term, so it favours launches of few workgroups with \
            long serial K loops (large fused tiles at small M); a regret it reports there is a \
            question for the hardware, not a finding"
            .to_string(),
    };
    let _ = writeln!(
        s,
        "# w4a16 perf --regret: {} on {} ({}, prefill dequant {})\n",
        run.target, run.device, run.suite, run.prefill_dequant
    );
    let _ = writeln!(
        s,
        "Times: {source}. **Regret** = the selected path's time over the fastest path legal under \
         the run's kernel config (1× = the selection is the fastest). **Prefill dequant** = the \
         best time with the option enabled over the best with it disabled (below 1×: enabling it \
         would make the call faster; — where no dense path is legal). **Dequant once** = the \
         dequant kernel that builds the dense cache, paid once per layer at load (not in the \
         dense path's per-call time). Peers: torch's int4 GEMM \
         and dense fp16 on the dequantized weights, where `--peers` measured them. A case whose \
         best path says *(of the timed)* had a legal path left untimed (the fallback on large \
         layers, the dense path under a model; listed in the per-case table).\n"
    );
    if !run.kernels.is_empty() {
        let _ = writeln!(
            s,
            "Kernel sources: `{}` (a resumed run must have timed the same).\n",
            run.kernels
        );
    }
    let noisy = run.rows.iter().filter(|r| r.regret >= NOISE_REGRET).count();
    let geo = if run.rows.is_empty() {
        f64::NAN
    } else {
        (run.rows.iter().map(|r| r.regret.ln()).sum::<f64>() / run.rows.len() as f64).exp()
    };
    let _ = writeln!(
        s,
        "{} cases timed; {} with regret ≥ {}× (a faster legal path exists); geometric mean \
         regret {}; {} not timed.\n",
        run.rows.len(),
        noisy,
        NOISE_REGRET,
        ratio(geo),
        run.not_timed.len()
    );
    if run.rows.len() < run.planned {
        let _ = writeln!(
            s,
            "**Partial report: {} of {} cases timed** (written after every case; the run had \
             not finished, or was stopped, when this was written).\n",
            run.rows.len(),
            run.planned
        );
    }
    if let Some(line) = peer_summary(run) {
        let _ = writeln!(s, "{line}\n");
    }
    if let Some(note) = &run.peers_note {
        let _ = writeln!(s, "Peers: {}\n", escape(note));
    }
    s.push_str("![regret against M per shape](regret.svg)\n\n## Worst cases\n\n");
    s.push_str(&worst_table(run).render());
    s.push_str("\n<details><summary>Every case, every legal path (µs)</summary>\n\n");
    s.push_str(&paths_table(run).render());
    s.push_str("\n</details>\n");
    if !run.not_timed.is_empty() {
        s.push_str("\n<details><summary>Not timed</summary>\n\n");
        let mut t = Table::new(["case", "why"]);
        for (id, why) in &run.not_timed {
            t.row([escape(id), escape(why)]);
        }
        s.push_str(&t.render());
        s.push_str("\n</details>\n");
    }
    s
}

/// The selected path against the faster peer: held to [`PEER_BOUND`] where the dense path is
/// legal under the config, shown for information elsewhere (the selection could not have
/// taken dense there).
fn peer_summary(run: &RegretRun) -> Option<String> {
    let worst = |legal: bool| {
        let rows = run.rows.iter().filter(|r| r.dense_legal() == legal);
        let with: Vec<(f64, &RegretRow)> = rows
            .filter_map(|r| r.peer_ratio().map(|p| (p, r)))
            .collect();
        let over = with.iter().filter(|(p, _)| *p > PEER_BOUND).count();
        let top = with.iter().max_by(|a, b| a.0.total_cmp(&b.0))?;
        Some((with.len(), over, top.0, top.1))
    };
    let mut parts = Vec::new();
    if let Some((n, over, p, r)) = worst(true) {
        parts.push(format!(
            "**Against the faster peer** (torch int4 or dense fp16), where dense is legal under \
             the config: {over} of {n} cases above {PEER_BOUND}×, worst {} ({}/{} M = {})",
            ratio(p),
            r.key.provider,
            r.key.shape,
            r.key.m
        ));
    }
    if let Some((n, _, p, r)) = worst(false) {
        parts.push(format!(
            "where the config leaves dense out (for information: the selection cannot take it): \
             worst {} of {n} cases ({}/{} M = {})",
            ratio(p),
            r.key.provider,
            r.key.shape,
            r.key.m
        ));
    }
    (!parts.is_empty()).then(|| escape(&parts.join("; ")) + ".")
}

fn worst_table(run: &RegretRun) -> Table {
    let r = Align::Right;
    let l = Align::Left;
    let mut t = Table::aligned([
        ("case", l),
        ("M", r),
        ("selected", l),
        ("µs", r),
        ("best legal", l),
        ("µs", r),
        ("regret", r),
        ("prefill dequant", r),
        ("dequant once µs", r),
        ("torch int4 µs", r),
        ("dense fp16 µs", r),
        ("over faster peer", r),
    ]);
    for row in worst_first(run).into_iter().take(WORST_ROWS) {
        let peer = |f: fn(&crate::perf::peers::PeerTimes) -> Option<f64>| {
            row.peers.as_ref().and_then(f).map_or("—".into(), us)
        };
        t.row([
            escape(&format!("{}/{}", row.key.provider, row.key.shape)),
            row.key.m.to_string(),
            row.selected.to_string(),
            us(row.selected_us),
            match row.left_out.is_empty() {
                true => row.best.to_string(),
                false => format!("{} (of the timed)", row.best),
            },
            us(row.best_us),
            ratio(row.regret),
            row.prefill_dequant_ratio.map_or("—".into(), ratio),
            row.dequant_once_us.map_or("—".into(), us),
            peer(|p| p.torch_int4_us),
            peer(|p| p.dense_fp16_us),
            row.peer_ratio().map_or("—".into(), ratio),
        ]);
    }
    t
}

fn paths_table(run: &RegretRun) -> Table {
    let mut t = Table::new([
        "case",
        "M",
        "regret",
        "paths (µs; * selected, † not legal under the config)",
    ]);
    for row in &run.rows {
        let paths: Vec<String> = row
            .times
            .iter()
            .map(|p| {
                let mark = if p.candidate.path == row.selected {
                    "*"
                } else if !p.candidate.under_config {
                    "†"
                } else {
                    ""
                };
                format!("{}{mark} {}", p.candidate.path, us(p.median_us))
            })
            .chain(row.left_out.iter().map(|l| l.to_string()))
            .collect();
        t.row([
            escape(&format!("{}/{}", row.key.provider, row.key.shape)),
            row.key.m.to_string(),
            ratio(row.regret),
            escape(&paths.join(", ")),
        ]);
    }
    t
}
