//! `plot.svg`: one panel per shape, x = M (log2), y = the candidate's ratio over its golden
//! (filled circles) and over the control (triangles), one colour per provider, the band shaded.
//! A reader sees at a glance which M moved, which way, and whether the control moved with it.

use super::judge::CaseOutcome;
use super::report::{PerfRun, ReportError, fmt_delta};
use plotters::prelude::*;
use std::collections::BTreeMap;

const PANEL_W: u32 = 640;
const PANEL_H: u32 = 340;
const TITLE_H: u32 = 40;

/// The SVG document of the run's plot.
pub fn render_svg(run: &PerfRun) -> Result<String, ReportError> {
    let mut shapes: BTreeMap<&str, Vec<&CaseOutcome>> = BTreeMap::new();
    for o in &run.outcomes {
        shapes.entry(o.key.shape.as_str()).or_default().push(o);
    }
    let providers: Vec<&str> = {
        let mut p: Vec<&str> = run
            .outcomes
            .iter()
            .map(|o| o.key.provider.as_str())
            .collect();
        p.sort();
        p.dedup();
        p
    };
    let cols = shapes.len().clamp(1, 2);
    let rows = shapes.len().div_ceil(cols).max(1);
    let mut svg = String::new();
    {
        let size = (PANEL_W * cols as u32, TITLE_H + PANEL_H * rows as u32);
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let title = format!(
            "w4a16 perf {} on {}: ratio / golden ratio (●) and / control (▲), band ±{}",
            run.target,
            run.device,
            fmt_delta(run.policy.band).trim_start_matches('+')
        );
        let body = root
            .titled(&title, ("sans-serif", 18))
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
        for ((shape, outcomes), panel) in shapes.iter().zip(panels.iter()) {
            draw_panel(panel, shape, outcomes, &providers, run.policy.band)?;
        }
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

fn plot_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> ReportError {
    ReportError::Plot(e.to_string())
}

/// (log2 M, 1 + Δ) points of one provider, from `shift` (the Δ of one comparison).
fn points(
    outcomes: &[&CaseOutcome],
    provider: &str,
    shift: fn(&CaseOutcome) -> Option<f64>,
) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = outcomes
        .iter()
        .filter(|o| o.key.provider == provider)
        .filter_map(|o| {
            shift(o)
                .filter(|d| d.is_finite())
                .map(|d| ((o.key.m as f64).log2(), 1.0 + d))
        })
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}

fn draw_panel<DB: DrawingBackend>(
    panel: &DrawingArea<DB, plotters::coord::Shift>,
    shape: &str,
    outcomes: &[&CaseOutcome],
    providers: &[&str],
    band: f64,
) -> Result<(), ReportError>
where
    DB::ErrorType: 'static,
{
    let vs_golden = |o: &CaseOutcome| o.candidate_judgement.delta();
    let vs_control = |o: &CaseOutcome| o.cand_over_control;
    let series: Vec<(usize, &str, Vec<(f64, f64)>, Vec<(f64, f64)>)> = providers
        .iter()
        .enumerate()
        .map(|(i, p)| {
            (
                i,
                *p,
                points(outcomes, p, vs_golden),
                points(outcomes, p, vs_control),
            )
        })
        .filter(|(_, _, g, c)| !g.is_empty() || !c.is_empty())
        .collect();
    let all = series.iter().flat_map(|(_, _, g, c)| g.iter().chain(c));
    let (mut y0, mut y1) = (1.0 - 1.5 * band, 1.0 + 1.5 * band);
    let max_m = outcomes.iter().map(|o| o.key.m).max().unwrap_or(1).max(2);
    for &(_, y) in all {
        y0 = y0.min(y - 0.02);
        y1 = y1.max(y + 0.02);
    }
    let (x0, x1) = (-0.3, (max_m as f64).log2() + 0.3);
    let mut chart = ChartBuilder::on(panel)
        .caption(shape, ("sans-serif", 15))
        .margin(10)
        .x_label_area_size(32)
        .y_label_area_size(48)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(plot_error)?;
    let whole_powers = (max_m as f64).log2().ceil() as usize + 1;
    chart
        .configure_mesh()
        .x_desc("M")
        .y_desc("ratio / reference")
        .x_labels(whole_powers * 2)
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-6 && *x >= 0.0 {
                (1u64 << x.round() as u32).to_string()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| format!("{y:.2}"))
        .draw()
        .map_err(plot_error)?;
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(x0, 1.0 - band), (x1, 1.0 + band)],
            GREEN.mix(0.15).filled(),
        )))
        .map_err(plot_error)?;
    chart
        .draw_series(LineSeries::new([(x0, 1.0), (x1, 1.0)], BLACK.mix(0.4)))
        .map_err(plot_error)?;
    for (i, provider, golden, control) in &series {
        let color = Palette99::pick(*i).to_rgba();
        if !golden.is_empty() {
            chart
                .draw_series(LineSeries::new(golden.clone(), color.stroke_width(2)))
                .map_err(plot_error)?
                .label(format!("{provider} / golden"))
                .legend(move |(x, y)| Circle::new((x, y), 4, color.filled()));
            chart
                .draw_series(golden.iter().map(|&p| Circle::new(p, 4, color.filled())))
                .map_err(plot_error)?;
        }
        if !control.is_empty() {
            chart
                .draw_series(LineSeries::new(
                    control.clone(),
                    color.mix(0.6).stroke_width(1),
                ))
                .map_err(plot_error)?
                .label(format!("{provider} / control"))
                .legend(move |(x, y)| TriangleMarker::new((x, y), 5, color.filled()));
            chart
                .draw_series(
                    control
                        .iter()
                        .map(|&p| TriangleMarker::new(p, 5, color.filled())),
                )
                .map_err(plot_error)?;
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
