//! The curves' SVG plots, drawn with plotters (SVG backend only: text stays SVG text, so
//! no font files are read).

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// One line of a panel: its legend name, its points, whether it is drawn dashed (a limit
/// or a reference rather than a measured library).
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
    pub(crate) dashed: bool,
    /// Its colour's index (by default its place in the panel).
    pub(crate) color: Option<usize>,
}

/// One chart: title, axes (each linear or logarithmic) and lines.
pub(crate) struct Panel {
    pub(crate) title: String,
    pub(crate) x_label: String,
    pub(crate) y_label: String,
    pub(crate) x_log: bool,
    pub(crate) y_log: bool,
    /// The top of the y axis when the legend needs room above the lines.
    pub(crate) y_max: Option<f64>,
    pub(crate) series: Vec<Series>,
}

type Failure = Box<dyn std::error::Error>;

/// Line colours, distinct on white (the first ones are the libraries, in legend order).
const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
    RGBColor(127, 127, 127),
];

/// One panel in an SVG of its own.
pub(crate) fn single(path: &Path, panel: Panel) {
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    draw_all(&root, None, &[panel]).unwrap_or_else(|e| panic!("draw {}: {e}", path.display()));
}

/// Several panels in a grid of two columns, under one title.
pub(crate) fn grid(path: &Path, title: &str, panels: &[Panel]) {
    let rows = panels.len().div_ceil(2) as u32;
    let root = SVGBackend::new(path, (1200, 40 + 430 * rows)).into_drawing_area();
    draw_all(&root, Some(title), panels).unwrap_or_else(|e| panic!("draw {}: {e}", path.display()));
}

fn draw_all(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    title: Option<&str>,
    panels: &[Panel],
) -> Result<(), Failure> {
    root.fill(&WHITE)?;
    let area = match title {
        Some(title) => root.titled(title, ("sans-serif", 22))?,
        None => root.clone(),
    };
    let cells = if panels.len() == 1 {
        vec![area]
    } else {
        area.split_evenly((panels.len().div_ceil(2), 2))
    };
    for (panel, cell) in panels.iter().zip(&cells) {
        draw_panel(cell, panel)?;
    }
    root.present()?;
    Ok(())
}

/// The range of `values` (positive ones only on a log axis), padded a little; a linear
/// axis starts at 0.
fn range(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let values: Vec<f64> = values
        .filter(|v| v.is_finite() && (!log || *v > 0.0))
        .collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        (lo / 1.5, hi * 1.5)
    } else {
        (lo.min(0.0), if hi > 0.0 { hi * 1.1 } else { 1.0 })
    }
}

fn draw_panel(area: &DrawingArea<SVGBackend<'_>, Shift>, panel: &Panel) -> Result<(), Failure> {
    let all = || panel.series.iter().flat_map(|s| s.points.iter());
    let (x0, x1) = range(all().map(|p| p.0), panel.x_log);
    let (y0, y1) = range(all().map(|p| p.1), panel.y_log);
    let y1 = panel.y_max.map_or(y1, |top| top.max(y1));
    match (panel.x_log, panel.y_log) {
        (true, true) => draw_on(area, panel, (x0..x1).log_scale(), (y0..y1).log_scale()),
        (true, false) => draw_on(area, panel, (x0..x1).log_scale(), lin(y0, y1)),
        (false, true) => draw_on(area, panel, lin(x0, x1), (y0..y1).log_scale()),
        (false, false) => draw_on(area, panel, lin(x0, x1), lin(y0, y1)),
    }
}

fn lin(lo: f64, hi: f64) -> RangedCoordf64 {
    (lo..hi).into()
}

/// [`label`] for a logarithmic axis: only 1, 2 and 5 times a power of ten are labelled
/// (plotters offers a tick at every integer multiple).
fn log_label(v: &f64) -> String {
    let mantissa = v / 10f64.powf(v.log10().floor());
    if [1.0, 2.0, 5.0, 10.0]
        .iter()
        .any(|m| (mantissa - m).abs() < 1e-6 * m)
    {
        label(v)
    } else {
        String::new()
    }
}

/// `1024`, `10k`, `200k`, `2.5M`, `0.25`: short labels for both axes.
fn label(v: &f64) -> String {
    let a = v.abs();
    let (x, unit) = if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (*v, "")
    };
    let text = if x.abs() >= 100.0 || (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else if x.abs() >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    format!("{text}{unit}")
}

fn draw_on<X, Y>(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    panel: &Panel,
    x: X,
    y: Y,
) -> Result<(), Failure>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)?;
    let pick = |log: bool| -> (usize, &'static dyn Fn(&f64) -> String) {
        if log {
            (40, &log_label)
        } else {
            (10, &label)
        }
    };
    let ((x_labels, x_format), (y_labels, y_format)) = (pick(panel.x_log), pick(panel.y_log));
    chart
        .configure_mesh()
        .x_desc(panel.x_label.as_str())
        .y_desc(panel.y_label.as_str())
        .x_labels(x_labels)
        .y_labels(y_labels)
        .x_label_formatter(x_format)
        .y_label_formatter(y_format)
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for (i, series) in panel.series.iter().enumerate() {
        let color = COLORS[series.color.unwrap_or(i) % COLORS.len()];
        let style = ShapeStyle::from(color).stroke_width(2);
        let drawn = if series.dashed {
            chart.draw_series(DashedLineSeries::new(
                series.points.iter().copied(),
                8,
                5,
                style,
            ))?
        } else {
            chart.draw_series(LineSeries::new(series.points.iter().copied(), style))?
        };
        // A series without a name stays out of the legend.
        if !series.name.is_empty() {
            drawn
                .label(series.name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], style));
        }
        chart.draw_series(
            series
                .points
                .iter()
                .map(|&p| Circle::new(p, 3, ShapeStyle::from(color).filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}
