//! `regret.svg`: one panel per shape, x = M (log2), y = the regret (selected over best legal
//! path, 1 = the selection is the fastest), one colour per provider; hollow triangles show the
//! prefill dequant option's value (best with it over best without) where a dense path is legal.
//! A reader sees at a glance at which M the selection leaves time on the table, and whether the
//! option would win it back (triangles below 1).

use std::collections::BTreeMap;

use plotters::prelude::*;

use super::{RegretRow, RegretRun, TimeSource};
use crate::perf::plot::plot_error;
use crate::perf::report::ReportError;

const PANEL_W: u32 = 640;
const PANEL_H: u32 = 340;
const TITLE_H: u32 = 40;
const MIN_W: u32 = 900;

/// The SVG document of the run's regret plot.
pub fn render_svg(run: &RegretRun) -> Result<String, ReportError> {
    let mut shapes: BTreeMap<&str, Vec<&RegretRow>> = BTreeMap::new();
    for r in &run.rows {
        shapes.entry(r.key.shape.as_str()).or_default().push(r);
    }
    let mut providers: Vec<&str> = run.rows.iter().map(|r| r.key.provider.as_str()).collect();
    providers.sort();
    providers.dedup();
    let cols = shapes.len().clamp(1, 2);
    let rows = shapes.len().div_ceil(cols).max(1);
    let mut svg = String::new();
    {
        let size = (
            (PANEL_W * cols as u32).max(MIN_W),
            TITLE_H + PANEL_H * rows as u32,
        );
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let model = match run.source {
            TimeSource::DeviceEvents => "",
            TimeSource::Model => " (MODEL times)",
        };
        let title = format!(
            "w4a16 perf --regret {} on {}{model}: selected / best legal path (●), prefill dequant with / without (△)",
            run.target, run.device
        );
        let body = root
            .titled(&title, ("sans-serif", 16))
            .map_err(plot_error)?;
        if shapes.is_empty() {
            body.draw_text(
                "no case was timed",
                &("sans-serif", 16).into_text_style(&body),
                (20, 20),
            )
            .map_err(plot_error)?;
        }
        let panels = body.split_evenly((rows, cols));
        for ((shape, rows), panel) in shapes.iter().zip(panels.iter()) {
            draw_panel(panel, shape, rows, &providers)?;
        }
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

/// (log2 M, value) of one provider's rows, sorted by M.
fn points(
    rows: &[&RegretRow],
    provider: &str,
    value: fn(&RegretRow) -> Option<f64>,
) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| r.key.provider == provider)
        .filter_map(|r| {
            value(r)
                .filter(|v| v.is_finite())
                .map(|v| ((r.key.m as f64).log2(), v))
        })
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}

fn draw_panel<DB: DrawingBackend>(
    panel: &DrawingArea<DB, plotters::coord::Shift>,
    shape: &str,
    rows: &[&RegretRow],
    providers: &[&str],
) -> Result<(), ReportError>
where
    DB::ErrorType: 'static,
{
    /// (colour index, provider, regret points, option points).
    type Series<'a> = (usize, &'a str, Vec<(f64, f64)>, Vec<(f64, f64)>);
    let series: Vec<Series> = providers
        .iter()
        .enumerate()
        .map(|(i, p)| {
            (
                i,
                *p,
                points(rows, p, |r| Some(r.regret)),
                points(rows, p, |r| r.prefill_dequant_ratio),
            )
        })
        .filter(|(_, _, g, o)| !g.is_empty() || !o.is_empty())
        .collect();
    let (mut y0, mut y1) = (0.9f64, 1.5f64);
    for &(_, y) in series.iter().flat_map(|(_, _, g, o)| g.iter().chain(o)) {
        y0 = y0.min(y * 0.95);
        y1 = y1.max(y * 1.05);
    }
    // Headroom above the data for the legend, so that it hides no point.
    y1 += (y1 - y0) * 0.35;
    let max_m = rows.iter().map(|r| r.key.m).max().unwrap_or(1).max(2);
    let (mut chart, x0, x1) =
        crate::perf::plot::log2_m_chart(panel, shape, max_m, y0..y1, "time / best time")?;
    chart
        .draw_series(LineSeries::new([(x0, 1.0), (x1, 1.0)], BLACK.mix(0.4)))
        .map_err(plot_error)?;
    for (i, provider, regret, option) in &series {
        let color = Palette99::pick(*i).to_rgba();
        if !regret.is_empty() {
            chart
                .draw_series(LineSeries::new(regret.clone(), color.stroke_width(2)))
                .map_err(plot_error)?
                .label(format!("{provider} regret"))
                .legend(move |(x, y)| Circle::new((x, y), 4, color.filled()));
            chart
                .draw_series(regret.iter().map(|&p| Circle::new(p, 4, color.filled())))
                .map_err(plot_error)?;
        }
        if !option.is_empty() {
            chart
                .draw_series(option.iter().map(|&p| TriangleMarker::new(p, 5, color)))
                .map_err(plot_error)?
                .label(format!("{provider} prefill dequant"))
                .legend(move |(x, y)| TriangleMarker::new((x, y), 5, color));
        }
    }
    if !series.is_empty() {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .label_font(("sans-serif", 11))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(plot_error)?;
    }
    Ok(())
}
