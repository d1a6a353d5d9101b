//! The report as markdown tables for the terminal, conventions first.

use super::BenchReport;
use std::fmt::Write as _;

/// Markdown tables of the report, conventions first.
pub fn render_table(r: &BenchReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "device: {} ({}); warm-up {}, {} timed launches, {} rotated input copies",
        r.device, r.target, r.warmup, r.iters, r.weight_copies
    );
    for c in &r.conventions {
        let _ = writeln!(s, "- {c}");
    }
    let _ = writeln!(
        s,
        "\ncopy ceiling: {} MiB device to device, median {:.1} us, {:.0} GB/s (read + write)\n",
        r.copy.bytes >> 20,
        r.copy.time_us.median,
        r.copy.gb_per_s
    );
    let _ = writeln!(
        s,
        "| skinny | M | dtype | zp | median us | min us | bytes | GB/s | of copy | / M=1 |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|");
    for k in &r.skinny {
        let _ = writeln!(
            s,
            "| {}x{} g{} | {} | {} | {} | {:.2} | {:.2} | {} | {:.0} | {:.3} | {} |",
            k.k,
            k.n,
            k.group,
            k.m,
            k.dtype,
            k.symmetry,
            k.time_us.median,
            k.time_us.min,
            k.bytes,
            k.gb_per_s,
            k.of_copy,
            k.over_m1.map_or("-".into(), |v| format!("{v:.3}"))
        );
    }
    let _ = writeln!(
        s,
        "\n| fused | M | dtype | fused us | TFLOP/s | cuBLAS us | TFLOP/s | fused / cuBLAS | dequant us |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    for f in &r.fused {
        let _ = writeln!(
            s,
            "| {}x{} g{} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} | {:.1} |",
            f.k,
            f.n,
            f.group,
            f.m,
            f.dtype,
            f.fused_us.median,
            f.fused_tflop_per_s,
            f.dense_us.median,
            f.dense_tflop_per_s,
            f.fused_over_dense,
            f.dequant_us.median
        );
    }
    let _ = writeln!(s, "\ntargets:");
    for t in &r.targets {
        let _ = writeln!(
            s,
            "- [{}] {}: {:.3} (target {})",
            if t.met { "met" } else { "MISSED" },
            t.what,
            t.value,
            t.target
        );
    }
    s
}
