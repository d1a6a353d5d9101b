//! Text forms of a selection: a block for `w4a16 select`, one line for snapshots.

use std::fmt::Write;

use w4a16_kernels::decl::Tile;
use w4a16_kernels::tiles;

use crate::Selection;

fn tile_str(t: &Tile) -> String {
    format!("{}x{}x{}w{}", t.bm, t.bn, t.bk, t.warps)
}

/// One stable line: `hybrid/fused tile=32x64x32w4 wpad=128 xpad=64 dpad=-`, then each rejected
/// kernel's reasons (`| no hybrid: G = 256 ...; ...`). `xpad` is X's row padding in elements.
pub fn row(sel: &Selection) -> String {
    let kernel = sel.layer_kernel.map_or("none", |k| k.name());
    let mut out = format!(
        "{kernel}/{} tile={} wpad={} xpad={} dpad={}",
        sel.path_name(),
        sel.tile.as_ref().map_or("-".to_owned(), tile_str),
        sel.strides.weight_pad_bytes,
        sel.strides.x_row_stride - sel.request.shape.k,
        sel.strides
            .dense_pad_elems(sel.request.shape.k)
            .map_or("-".to_owned(), |p| p.to_string()),
    );
    let mut last = None;
    for r in &sel.rejections {
        if last != Some(r.kernel) {
            let _ = write!(out, " | no {}: {}", r.kernel, r.reason);
            last = Some(r.kernel);
        } else {
            let _ = write!(out, "; {}", r.reason);
        }
    }
    out
}

/// The block `w4a16 select` prints.
pub fn render(sel: &Selection) -> String {
    let r = &sel.request;
    let s = &sel.strides;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "target    {} (wave{})",
        sel.target,
        sel.target.wave_size()
    );
    let _ = writeln!(
        out,
        "layer     M={} N={} K={} G={}{} {} {}  bias={} act-order={} padding={}",
        r.m,
        r.shape.n,
        r.shape.k,
        r.shape.group,
        if r.shape.is_channelwise() {
            " (channelwise)"
        } else {
            ""
        },
        r.dtype.name(),
        r.symmetry.name(),
        yes_no(r.bias),
        yes_no(r.act_order),
        r.padding.name(),
    );
    let _ = writeln!(
        out,
        "kernel    {}",
        sel.layer_kernel
            .map_or("none (no kernel takes this layer)", |k| k.name())
    );
    let _ = writeln!(out, "path      {}  ({})", sel.path_name(), sel.dispatch);
    if let Some(t) = &sel.tile {
        let _ = writeln!(
            out,
            "tile      BM={} BN={} BK={} warps={}",
            t.bm, t.bn, t.bk, t.warps
        );
    }
    if let Some(rung) = sel.tile_rung {
        let table = tiles::table_named(rung.table);
        let _ = writeln!(
            out,
            "rung      {}",
            table.map_or_else(
                || format!("{} #{}", rung.table, rung.index),
                |t| t.describe(rung.index)
            )
        );
    }
    let _ = write!(
        out,
        "strides   weights {} B/row (K/2 = {}, +{} padding), scales {}, x {}, y {}",
        s.weight_row_stride_bytes,
        r.shape.k / 2,
        s.weight_pad_bytes,
        s.scale_row_stride,
        s.x_row_stride,
        s.y_row_stride
    );
    if let Some(d) = s.dense_row_stride {
        let _ = write!(out, ", dense {d} (+{})", d - r.shape.k);
    }
    out.push('\n');
    if sel.rejections.is_empty() {
        let _ = writeln!(out, "rejected  (none)");
    } else {
        for (i, rej) in sel.rejections.iter().enumerate() {
            let label = if i == 0 { "rejected" } else { "" };
            let _ = writeln!(out, "{label:<9} {}: {}", rej.kernel, rej.reason);
        }
    }
    out
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
