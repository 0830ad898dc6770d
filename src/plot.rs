//! Small-multiples SVG plots against message size, shared by `explain`, `verify`, `diff` and
//! `calibrate`: one panel per pair, a log2 size axis with binary-unit ticks (1K, 1M, 1G), a log
//! or linear value axis, shaded size bands (where NCCL picks the panel's pair), and one legend
//! per figure that shows each mark as it is drawn (solid, dashed, points, band).
//!
//! Both axes are drawn on linear coordinates over exponents (log2 bytes, log10 values) rather
//! than with the plotting library's log scale: its tick search does not end on a range that
//! reaches infinity or zero, and a result file may hold such values. Points that cannot be
//! placed (size 0, non-finite values, values <= 0 on a log axis) are dropped, never drawn.

use crate::error::{Error, Result};
use plotters::prelude::*;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// Solid line (a measurement, or the panel's own prediction in `explain`).
    Line,
    /// Solid line with a dot on every point.
    LinePoints,
    /// Dashed line (a prediction next to a measurement).
    Dashed,
    /// Dots only.
    Points,
    /// Thin grey line drawn under the others (the best of all pairs, for comparison).
    Reference,
    /// Vertical bars from `low` to `high` at each point (a noise band), with a dot at the value.
    Bars,
}

/// One line (or set of points) of a panel.
#[derive(Debug, Clone)]
pub struct Series {
    pub(crate) color: RGBColor,
    pub(crate) mark: Mark,
    /// (bytes, value). For `Mark::Bars`, the value of the dot.
    pub(crate) points: Vec<(u64, f64)>,
    /// For `Mark::Bars`: (bytes, low, high) per point.
    pub(crate) bars: Vec<(u64, f64, f64)>,
}

impl Series {
    pub(crate) fn new(color: RGBColor, mark: Mark) -> Series {
        Series {
            color,
            mark,
            points: Vec::new(),
            bars: Vec::new(),
        }
    }
    pub(crate) fn with_points(mut self, points: Vec<(u64, f64)>) -> Series {
        self.points = points;
        self
    }
}

/// One panel: a title, its series, and the sizes to shade.
#[derive(Debug, Clone, Default)]
pub(crate) struct Panel {
    pub(crate) title: String,
    pub(crate) series: Vec<Series>,
    /// Sizes (bytes) at which the panel is shaded; adjacent powers of two merge into one band.
    pub(crate) shaded_sizes: Vec<u64>,
    /// A horizontal line at this value (e.g. ratio 1.0).
    pub(crate) reference_y: Option<f64>,
}

/// The value axis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ValueAxis {
    /// Log10 scale (times).
    Log,
    /// Linear from 0 (bandwidths).
    LinearFromZero,
    /// Linear around the data (ratios).
    Linear,
}

/// One grid of panels with a title, a value-axis name and a legend.
#[derive(Debug, Clone)]
pub struct Figure {
    pub(crate) title: String,
    /// The value axis's name with its unit, e.g. "time (µs)".
    pub(crate) value_name: String,
    pub(crate) axis: ValueAxis,
    pub(crate) panels: Vec<Panel>,
    /// What the shaded bands mean (legend entry); None when nothing is shaded.
    pub(crate) shaded_label: Option<String>,
    /// Legend entries: (label, color, mark); series labels are not repeated per panel.
    pub(crate) legend: Vec<(String, RGBColor, Mark)>,
}

/// tab10 colours, for series that need distinct hues.
pub(crate) const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];
/// Predictions and references.
pub(crate) const DARK: RGBColor = RGBColor(40, 40, 40);
pub(crate) const GREY: RGBColor = RGBColor(160, 160, 160);
const BAND: RGBColor = RGBColor(255, 200, 80);

const PANEL_W: u32 = 400;
const PANEL_H: u32 = 280;
const TITLE_H: u32 = 34;
const LEGEND_ROW_H: u32 = 22;

/// 2^exp in binary units: 8, 512, 1K, 64K, 1M, 1G.
pub(crate) fn binary_label(exp: i32) -> String {
    match exp {
        e if e < 0 => String::new(),
        e if e < 10 => format!("{}", 1u64 << e),
        e if e < 20 => format!("{}K", 1u64 << (e - 10)),
        e if e < 30 => format!("{}M", 1u64 << (e - 20)),
        e if e < 40 => format!("{}G", 1u64 << (e - 30)),
        e => format!("{}T", 1u64 << (e.min(62) - 40)),
    }
}

/// Tick positions (log2 bytes) for an axis from `lo` to `hi`: the powers of 1K inside the
/// range, and between them every 2nd, 4th or 5th power so that a panel keeps 3 to 8 ticks.
pub(crate) fn size_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (lo, hi) = (lo.ceil() as i64, hi.floor() as i64);
    let span = hi - lo;
    let step = match span {
        s if s <= 6 => 1,
        s if s <= 12 => 2,
        s if s <= 24 => 5,
        _ => 10,
    };
    (lo..=hi)
        .filter(|e| e.rem_euclid(step) == 0 || (step < 10 && e.rem_euclid(10) == 0))
        .map(|e| e as f64)
        .collect()
}

/// A value at a log10 position, in plain numbers: 0.01, 0.5, 20, 1000, 1e+06.
fn decade_label(e: f64) -> String {
    let v = 10f64.powf(e);
    if !(1e-3..1e6).contains(&v) {
        format!("{v:.0e}")
    } else if v >= 1.0 {
        format!("{}", v.round())
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').to_string()
    }
}

/// Tick positions (log10) for a log value axis: decades, with 2 and 5 in between when the
/// range spans less than two decades, and always below 100 (20 and 50 µs, 2 and 5 µs: small-message
/// times are read there).
fn value_ticks_log(lo: f64, hi: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    let (first, last) = (lo.floor() as i64, hi.ceil() as i64);
    let every = ((last - first) / 8).max(1);
    for d in first..=last {
        if (d - first) % every == 0 {
            ticks.push(d as f64);
        }
        if hi - lo < 2.0 || d < 2 {
            for m in [2f64, 5.0] {
                ticks.push(d as f64 + m.log10());
            }
        }
    }
    ticks.retain(|t| *t >= lo - 1e-9 && *t <= hi + 1e-9);
    ticks
}

fn err(e: impl std::fmt::Display) -> Error {
    Error::runtime(format!("cannot draw the plot: {e}"))
}

/// x position of a size, or None where it cannot be placed.
fn x_of(bytes: u64) -> Option<f64> {
    (bytes > 0).then(|| (bytes as f64).log2())
}

/// y position of a value on `axis`, or None where it cannot be placed.
fn y_of(v: f64, axis: ValueAxis) -> Option<f64> {
    match axis {
        ValueAxis::Log => (v.is_finite() && v > 0.0 && v.log10().is_finite()).then(|| v.log10()),
        _ => v.is_finite().then_some(v),
    }
}

/// The placeable points of one series, sorted by size.
fn placed(series: &Series, axis: ValueAxis) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = series
        .points
        .iter()
        .filter_map(|&(b, v)| Some((x_of(b)?, y_of(v, axis)?)))
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}

fn placed_bars(series: &Series, axis: ValueAxis) -> Vec<(f64, f64, f64)> {
    series
        .bars
        .iter()
        .filter_map(|&(b, lo, hi)| Some((x_of(b)?, y_of(lo, axis)?, y_of(hi, axis)?)))
        .collect()
}

/// Merges shaded sizes into bands (log2 positions), each size covering half a step either side.
fn bands(sizes: &[u64]) -> Vec<(f64, f64)> {
    let mut xs: Vec<f64> = sizes.iter().filter_map(|&b| x_of(b)).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let mut out: Vec<(f64, f64)> = Vec::new();
    for x in xs {
        match out.last_mut() {
            Some(last) if x - last.1 <= 0.5 + 1e-9 => last.1 = x + 0.5,
            _ => out.push((x - 0.5, x + 0.5)),
        }
    }
    out
}

/// Draws a dashed segment from (x0, y) to (x1, y) in pixel coordinates.
fn dashed_h<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    x0: i32,
    x1: i32,
    y: i32,
    style: ShapeStyle,
) -> Result<()> {
    let mut x = x0;
    while x < x1 {
        let end = (x + 6).min(x1);
        area.draw(&PathElement::new(vec![(x, y), (end, y)], style))
            .map_err(err)?;
        x += 10;
    }
    Ok(())
}

/// The two views `explain` and `verify` draw: time (log scale) above busbw (nccl-tests' definition, linear from
/// zero), with the same panels, legend and shading.
pub(crate) fn render_time_and_busbw(
    time_title: String,
    busbw_title: String,
    time_panels: Vec<Panel>,
    busbw_panels: Vec<Panel>,
    legend: Vec<(String, RGBColor, Mark)>,
    shaded_label: Option<String>,
) -> Result<String> {
    render(&[
        Figure {
            title: time_title,
            value_name: "time (µs)".to_string(),
            axis: ValueAxis::Log,
            panels: time_panels,
            shaded_label: shaded_label.clone(),
            legend: legend.clone(),
        },
        Figure {
            title: busbw_title,
            value_name: "busbw (GB/s)".to_string(),
            axis: ValueAxis::LinearFromZero,
            panels: busbw_panels,
            shaded_label,
            legend,
        },
    ])
}

/// Renders the figures one under the other as one SVG document. A figure whose panels have
/// nothing placeable is an error naming the figure.
pub(crate) fn render(figures: &[Figure]) -> Result<String> {
    let figures: Vec<&Figure> = figures.iter().filter(|f| !f.panels.is_empty()).collect();
    if figures.is_empty() {
        return Err(Error::bad_input("nothing to plot"));
    }
    let cols = figures
        .iter()
        .map(|f| if f.panels.len() <= 4 { 2 } else { 3 }.min(f.panels.len()))
        .max()
        .unwrap_or(1) as u32;
    let heights: Vec<u32> = figures
        .iter()
        .map(|f| {
            let legend_rows = legend_layout(f, cols * PANEL_W)
                .last()
                .map_or(1, |e| e.1 + 1);
            TITLE_H + legend_rows * LEGEND_ROW_H + (f.panels.len() as u32).div_ceil(cols) * PANEL_H
        })
        .collect();
    let (w, h) = (cols * PANEL_W, heights.iter().sum::<u32>());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut rest = root;
        for (figure, height) in figures.iter().zip(heights) {
            let (area, below) = rest.split_vertically(height);
            rest = below;
            draw_figure(&area, figure, cols)?;
        }
        rest.present().map_err(err)?;
    }
    Ok(svg)
}

fn draw_figure<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    figure: &Figure,
    cols: u32,
) -> Result<()> {
    let (title, body) = area.split_vertically(TITLE_H);
    title
        .draw(&Text::new(
            figure.title.clone(),
            (10, 8),
            ("sans-serif", 17).into_font().color(&BLACK),
        ))
        .map_err(err)?;
    let width = cols * PANEL_W;
    let layout = legend_layout(figure, width);
    let legend_rows = layout.last().map_or(1, |e| e.1 + 1);
    let (legend, grid) = body.split_vertically(legend_rows * LEGEND_ROW_H);
    draw_legend(&legend, figure, &layout)?;
    let rows = (figure.panels.len() as u32).div_ceil(cols);
    let cells = grid.split_evenly((rows as usize, cols as usize));
    for (panel, cell) in figure.panels.iter().zip(cells.iter()) {
        draw_panel(cell, panel, figure)?;
    }
    Ok(())
}

/// The legend's entries (label, colour, mark; None for the shaded band).
fn legend_entries(figure: &Figure) -> Vec<(String, RGBColor, Option<Mark>)> {
    let mut entries: Vec<(String, RGBColor, Option<Mark>)> = figure
        .legend
        .iter()
        .map(|(l, c, m)| (l.clone(), *c, Some(*m)))
        .collect();
    if let Some(label) = &figure.shaded_label {
        entries.push((label.clone(), BAND, None));
    }
    entries
}

/// Where each legend entry goes: (x in pixels, row), wrapping at `width`. The text width is an
/// estimate (7 px per character at 13 px).
fn legend_layout(figure: &Figure, width: u32) -> Vec<(i32, u32)> {
    let (mut x, mut row) = (12i32, 0u32);
    let mut out = Vec::new();
    for (label, _, _) in legend_entries(figure) {
        let w = 30 + 7 * label.chars().count() as i32 + 18;
        if x > 12 && x + w > width as i32 {
            x = 12;
            row += 1;
        }
        out.push((x, row));
        x += w;
    }
    out
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    figure: &Figure,
    layout: &[(i32, u32)],
) -> Result<()> {
    let font = ("sans-serif", 13).into_font().color(&BLACK);
    for ((label, color, mark), &(x, row)) in legend_entries(figure).into_iter().zip(layout) {
        let y = 11 + (row * LEGEND_ROW_H) as i32;
        match mark {
            None => {
                area.draw(&Rectangle::new(
                    [(x, y - 6), (x + 22, y + 6)],
                    color.mix(0.35).filled(),
                ))
                .map_err(err)?;
            }
            Some(Mark::Dashed) => dashed_h(area, x, x + 24, y, color.stroke_width(2))?,
            Some(Mark::Points) | Some(Mark::Bars) => {
                area.draw(&Circle::new((x + 11, y), 3, color.filled()))
                    .map_err(err)?;
                if mark == Some(Mark::Bars) {
                    area.draw(&PathElement::new(
                        vec![(x + 11, y - 7), (x + 11, y + 7)],
                        color.stroke_width(1),
                    ))
                    .map_err(err)?;
                }
            }
            Some(m) => {
                let width = if m == Mark::Reference { 1 } else { 2 };
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 24, y)],
                    color.stroke_width(width),
                ))
                .map_err(err)?;
                if m == Mark::LinePoints {
                    area.draw(&Circle::new((x + 12, y), 3, color.filled()))
                        .map_err(err)?;
                }
            }
        }
        area.draw(&Text::new(label, (x + 30, y - 7), font.clone()))
            .map_err(err)?;
    }
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    cell: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
    figure: &Figure,
) -> Result<()> {
    let axis = figure.axis;
    let series: Vec<Placed<'_>> = panel
        .series
        .iter()
        .map(|s| (s, placed(s, axis), placed_bars(s, axis)))
        .collect();
    let xs = series
        .iter()
        .flat_map(|(_, p, b)| p.iter().map(|q| q.0).chain(b.iter().map(|q| q.0)));
    let (xmin, xmax) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    if !xmin.is_finite() {
        // Nothing placeable: an empty panel with its title says so.
        cell.draw(&Text::new(
            format!("{}: no data", panel.title),
            (10, 10),
            ("sans-serif", 13).into_font(),
        ))
        .map_err(err)?;
        return Ok(());
    }
    let (xmin, xmax) = (xmin.floor(), xmax.ceil().max(xmin.floor() + 1.0));
    let mut ys: Vec<f64> = series
        .iter()
        .flat_map(|(_, p, b)| {
            p.iter()
                .map(|q| q.1)
                .chain(b.iter().flat_map(|q| [q.1, q.2]))
        })
        .collect();
    if let Some(r) = panel.reference_y.and_then(|r| y_of(r, axis)) {
        ys.push(r);
    }
    let lo = ys.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (ymin, ymax) = match axis {
        ValueAxis::Log => (lo - 0.1, hi.max(lo + 0.3) + 0.1),
        ValueAxis::LinearFromZero => (0.0, if hi > 0.0 { hi * 1.1 } else { 1.0 }),
        ValueAxis::Linear => {
            let pad = ((hi - lo) * 0.1).max(hi.abs() * 0.01).max(1e-3);
            (lo - pad, hi + pad)
        }
    };
    let y_ticks = match axis {
        ValueAxis::Log => value_ticks_log(ymin, ymax),
        _ => value_ticks_linear(ymin, ymax),
    };
    let x_axis = TickedAxis {
        lo: xmin,
        hi: xmax,
        ticks: size_ticks(xmin, xmax),
    };
    let y_axis = TickedAxis {
        lo: ymin,
        hi: ymax,
        ticks: y_ticks,
    };
    let log_axis = axis == ValueAxis::Log;
    // Linear ticks share one number of decimals, enough to tell neighbours apart.
    let step = match y_axis.ticks.as_slice() {
        [a, b, ..] => (b - a).abs(),
        _ => 1.0,
    };
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10()).ceil() as usize
    };
    let y_label = |y: &f64| {
        if log_axis {
            decade_label(*y)
        } else {
            format!("{y:.decimals$}")
        }
    };
    let x_label = |x: &f64| binary_label(x.round() as i32);
    let mut chart = ChartBuilder::on(cell)
        .caption(&panel.title, ("sans-serif", 14))
        .margin(8)
        .x_label_area_size(26)
        .y_label_area_size(52)
        .build_cartesian_2d(x_axis, y_axis)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .y_desc(figure.value_name.as_str())
        .bold_line_style(BLACK.mix(0.08))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err)?;
    draw_content(&mut chart, panel, &series, (xmin, xmax), (ymin, ymax), axis)
}

/// Ticks for a linear axis: 1-2-5 steps, about five of them.
fn value_ticks_linear(lo: f64, hi: f64) -> Vec<f64> {
    let span = hi - lo;
    if !(span.is_finite() && span > 0.0) {
        return vec![lo];
    }
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last.min(first + 50))
        .map(|k| k as f64 * step)
        .collect()
}

/// A linear axis over exponents (or values) whose ticks are given: the plotting library's own
/// ticks on a linear range fall on 1-2-5 steps, not on binary units or decades.
#[derive(Debug, Clone)]
struct TickedAxis {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl plotters::coord::ranged1d::Ranged for TickedAxis {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;
    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let t = if self.hi > self.lo {
            ((v - self.lo) / (self.hi - self.lo)).clamp(-1.0, 2.0)
        } else {
            0.5
        };
        limit.0 + (t * f64::from(limit.1 - limit.0)).round() as i32
    }
    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, _hint: H) -> Vec<f64> {
        self.ticks.clone()
    }
    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

type Placed<'a> = (&'a Series, Vec<(f64, f64)>, Vec<(f64, f64, f64)>);

fn draw_content<DB: DrawingBackend, X, Y>(
    chart: &mut ChartContext<DB, Cartesian2d<X, Y>>,
    panel: &Panel,
    series: &[Placed<'_>],
    (xmin, xmax): (f64, f64),
    (ymin, ymax): (f64, f64),
    axis: ValueAxis,
) -> Result<()>
where
    X: plotters::coord::ranged1d::Ranged<ValueType = f64>,
    Y: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    for (x0, x1) in bands(&panel.shaded_sizes) {
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x0, ymin), (x1, ymax)],
                BAND.mix(0.35).filled(),
            )))
            .map_err(err)?;
    }
    if let Some(r) = panel.reference_y.and_then(|r| y_of(r, axis)) {
        chart
            .draw_series(LineSeries::new(
                [(xmin, r), (xmax, r)],
                GREY.stroke_width(1),
            ))
            .map_err(err)?;
    }
    // References first so that the panel's own series are drawn over them.
    let mut ordered: Vec<&Placed<'_>> = series.iter().collect();
    ordered.sort_by_key(|(s, _, _)| s.mark != Mark::Reference);
    for (s, pts, bars) in ordered {
        let color = s.color;
        match s.mark {
            Mark::Line | Mark::LinePoints | Mark::Reference => {
                let width = if s.mark == Mark::Reference { 1 } else { 2 };
                chart
                    .draw_series(LineSeries::new(
                        pts.iter().copied(),
                        color.stroke_width(width),
                    ))
                    .map_err(err)?;
                if s.mark == Mark::LinePoints {
                    chart
                        .draw_series(pts.iter().map(|p| Circle::new(*p, 2, color.filled())))
                        .map_err(err)?;
                }
            }
            Mark::Dashed => {
                chart
                    .draw_series(DashedLineSeries::new(
                        pts.iter().copied(),
                        6,
                        4,
                        color.stroke_width(2),
                    ))
                    .map_err(err)?;
            }
            Mark::Points => {
                chart
                    .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
                    .map_err(err)?;
            }
            Mark::Bars => {
                chart
                    .draw_series(bars.iter().map(|&(x, lo, hi)| {
                        PathElement::new(vec![(x, lo), (x, hi)], color.mix(0.6).stroke_width(1))
                    }))
                    .map_err(err)?;
                chart
                    .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
                    .map_err(err)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_labels() {
        assert_eq!(binary_label(3), "8");
        assert_eq!(binary_label(10), "1K");
        assert_eq!(binary_label(16), "64K");
        assert_eq!(binary_label(20), "1M");
        assert_eq!(binary_label(32), "4G");
    }

    #[test]
    fn ticks_fall_on_binary_units() {
        // 8 B .. 4 GiB (2^3 .. 2^32): every 10th power (1K, 1M, 1G) and no more than 8 ticks.
        let t = size_ticks(3.0, 32.0);
        assert_eq!(t, vec![10.0, 20.0, 30.0]);
        // 1 MiB .. 64 MiB: every power of two is labelled.
        assert_eq!(size_ticks(20.0, 26.0).len(), 7);
        // 8 B .. 1 MiB: 1K and 1M among the ticks.
        let t = size_ticks(3.0, 20.0);
        assert!(t.contains(&10.0) && t.contains(&20.0), "{t:?}");
    }

    #[test]
    fn log_ticks_at_2_and_5_below_100() {
        // 8 µs .. 40 ms (issue 26: 10-20 µs values were unreadable): 10, 20, 50 and 100 are ticks, 200 is not.
        let t: Vec<f64> = value_ticks_log(8f64.log10(), 4e4f64.log10())
            .iter()
            .map(|e| (10f64.powf(*e) * 1000.0).round() / 1000.0)
            .collect();
        for v in [10.0, 20.0, 50.0, 100.0, 1000.0] {
            assert!(t.contains(&v), "{v} not in {t:?}");
        }
        assert!(!t.contains(&200.0), "{t:?}");
    }

    #[test]
    fn bands_merge_adjacent_sizes() {
        let b = bands(&[1 << 20, 1 << 21, 1 << 22, 1 << 30]);
        assert_eq!(b, vec![(19.5, 22.5), (29.5, 30.5)]);
    }

    #[test]
    fn unplaceable_points_are_dropped() {
        let s = Series::new(DARK, Mark::Line).with_points(vec![
            (0, 1.0),
            (8, f64::INFINITY),
            (16, 0.0),
            (32, 1e308),
            (64, 2.0),
        ]);
        // On a log axis: size 0, infinity and 0 go; 1e308 stays (log10 = 308).
        let p = placed(&s, ValueAxis::Log);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].0, 5.0);
        assert!((p[0].1 - 308.0).abs() < 1e-9);
    }

    #[test]
    fn renders_huge_and_zero_values_without_hanging() {
        let s = Series::new(DARK, Mark::LinePoints).with_points(vec![
            (0, 5.0),
            (8, 1e308),
            (16, 1e-300),
            (32, 3.0),
        ]);
        let fig = Figure {
            title: "t".into(),
            value_name: "time (µs)".into(),
            axis: ValueAxis::Log,
            panels: vec![Panel {
                title: "p".into(),
                series: vec![s],
                shaded_sizes: vec![8],
                reference_y: None,
            }],
            shaded_label: Some("NCCL's pick".into()),
            legend: vec![("measured".into(), DARK, Mark::LinePoints)],
        };
        let svg = render(&[fig]).expect("renders");
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("NCCL&apos;s pick") || svg.contains("NCCL's pick"));
    }

    #[test]
    fn nothing_to_plot_is_bad_input() {
        let e = render(&[]).unwrap_err();
        assert!(e.to_string().contains("nothing to plot"));
    }
}
