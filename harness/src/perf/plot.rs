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
const MIN_W: u32 = 900;

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
        // Wide enough for the title even with one panel.
        let size = (
            (PANEL_W * cols as u32).max(MIN_W),
            TITLE_H + PANEL_H * rows as u32,
        );
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

pub(crate) fn plot_error<E: std::error::Error + Send + Sync>(
    e: DrawingAreaErrorKind<E>,
) -> ReportError {
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
    /// (colour index, provider, points over the golden, points over the control).
    type ProviderSeries<'a> = (usize, &'a str, Vec<(f64, f64)>, Vec<(f64, f64)>);
    let series: Vec<ProviderSeries> = providers
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
    // Headroom above the data for the legend, so that it hides no point.
    y1 += (y1 - y0) * 0.35;
    let (mut chart, x0, x1) = log2_m_chart(panel, shape, max_m, y0..y1, "ratio / reference")?;
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

/// One shape's panel of the perf and regret plots: M on a log₂ axis (labelled at powers of two up
/// to `max_m`), y over `y`. Returns the chart and its x range.
pub(crate) fn log2_m_chart<'a, DB: DrawingBackend>(
    panel: &'a DrawingArea<DB, plotters::coord::Shift>,
    shape: &str,
    max_m: usize,
    y: std::ops::Range<f64>,
    y_desc: &str,
) -> Result<(LogMChart<'a, DB>, f64, f64), ReportError>
where
    DB::ErrorType: 'static,
{
    let (x0, x1) = (-0.3, (max_m as f64).log2() + 0.3);
    let mut chart = ChartBuilder::on(panel)
        .caption(shape, ("sans-serif", 15))
        .margin(10)
        .x_label_area_size(32)
        .y_label_area_size(48)
        .build_cartesian_2d(x0..x1, y)
        .map_err(plot_error)?;
    let whole_powers = (max_m as f64).log2().ceil() as usize + 1;
    chart
        .configure_mesh()
        .x_desc("M")
        .y_desc(y_desc)
        .x_labels(whole_powers * 2)
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-6 && *x >= 0.0 {
                (1u64 << x.round() as u32).to_string()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| format!("{y:.2}"))
        // The labelled grid is enough to read a point by; the minor grid's thousands of faint
        // lines made most of a whole-field plot's bytes.
        .light_line_style(TRANSPARENT)
        .draw()
        .map_err(plot_error)?;
    Ok((chart, x0, x1))
}

/// The chart [`log2_m_chart`] makes.
pub(crate) type LogMChart<'a, DB> = ChartContext<
    'a,
    DB,
    plotters::coord::cartesian::Cartesian2d<
        plotters::coord::types::RangedCoordf64,
        plotters::coord::types::RangedCoordf64,
    >,
>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::judge::tests::measured;
    use crate::perf::judge::{JudgePolicy, judge_case};
    use crate::perf::measure::PerfPlan;
    use crate::perf::update::golden_entry;

    /// Two shapes × two providers over the field's M, the candidate drifting slower with M.
    fn run() -> PerfRun {
        let ms = [1, 2, 3, 4, 5, 8, 16, 32, 64, 128, 256, 512, 1024, 2048];
        let mut sides = Vec::new();
        for shape in ["qwen3-8b.mlp_down", "qwen3-8b.qkv"] {
            for provider in ["hybrid-w4a16-zp-bf16", "vllm-w4a16-f16"] {
                for (i, &m) in ms.iter().enumerate() {
                    let side = |t| {
                        let mut s = measured(m, "skinny:k", t, 0.02, 15);
                        (s.key.shape, s.key.provider) = (shape.into(), provider.into());
                        s
                    };
                    let (g, c, k) = (side(30.0), side(30.0 + i as f64 * 0.6), side(30.0));
                    sides.push((golden_entry(&g).unwrap(), c, k));
                }
            }
        }
        let goldens =
            crate::perf::judge::tests::goldens(sides.iter().map(|s| s.0.clone()).collect(), None);
        let policy = JudgePolicy::default();
        PerfRun {
            target: "sm_90".into(),
            device: "NVIDIA H200".into(),
            suite: "field".into(),
            policy,
            plan: PerfPlan::default(),
            candidate: "embedded kernels".into(),
            control: Some("base".into()),
            outcomes: sides
                .into_iter()
                .map(|(_, c, k)| judge_case(c, Some(k), Some(&goldens), &policy))
                .collect(),
            not_timed: Vec::new(),
            peers_note: None,
        }
    }

    #[test]
    fn a_panel_per_shape_a_legend_entry_per_provider_and_side() {
        let mut run = run();
        let svg = render_svg(&run).unwrap();
        assert!(svg.starts_with("<svg"));
        for (text, count) in [
            (">\nqwen3-8b.mlp_down\n<", 1),
            (">\nqwen3-8b.qkv\n<", 1),
            (">\nhybrid-w4a16-zp-bf16 / golden\n<", 2),
            (">\nvllm-w4a16-f16 / control\n<", 2),
            (">\n2048\n<", 2),
            ("band ±8.0 %", 1),
        ] {
            assert_eq!(svg.matches(text).count(), count, "{text:?} in {svg}");
        }
        run.outcomes.clear();
        let empty = render_svg(&run).unwrap();
        assert!(empty.contains("no case was timed"), "{empty}");
    }
}
