//! `calibrate --plot`: one panel per pair (small multiples), time against size
//! on a log2 axis with binary-unit ticks; measured points (one colour per
//! input), the stock NCCL model dashed, the calibrated model solid.

use super::file::Calibration;
use super::input::Measurements;
use super::verify::median;
use crate::error::{Error, Result};
use std::collections::BTreeMap;

/// 2^exp in binary units: 8, 512, 1K, 64K, 1M, 1G.
fn binary_label(exp: i32) -> String {
    match exp {
        e if e < 0 => String::new(),
        e if e < 10 => format!("{}", 1u64 << e),
        e if e < 20 => format!("{}K", 1u64 << (e - 10)),
        e if e < 30 => format!("{}M", 1u64 << (e - 20)),
        e if e < 40 => format!("{}G", 1u64 << (e - 30)),
        e => format!("{}T", 1u64 << (e.min(62) - 40)),
    }
}

/// Tick label at a log2 position: only at 1, 1K, 1M, 1G (exponents that are
/// multiples of 10) so a panel stays readable.
fn tick_label(x: f64) -> String {
    let e = x.round();
    if (x - e).abs() > 1e-6 || (e as i64) % 10 != 0 {
        return String::new();
    }
    binary_label(e as i32)
}

/// One colour per input file (tab10's first five).
const INPUT_COLORS: [plotters::style::RGBColor; 5] = [
    plotters::style::RGBColor(31, 119, 180),
    plotters::style::RGBColor(255, 127, 14),
    plotters::style::RGBColor(44, 160, 44),
    plotters::style::RGBColor(148, 103, 189),
    plotters::style::RGBColor(140, 86, 75),
];

struct Panel {
    title: String,
    /// Per input: (bytes, measured µs).
    measured: Vec<Vec<(f64, f64)>>,
    stock: Vec<(f64, f64)>,
    calibrated: Vec<(f64, f64)>,
}

/// The SVG text of the plot.
pub fn render_svg(cal: &Calibration, inputs: &[Measurements]) -> Result<String> {
    use plotters::prelude::*;
    let err = |e: String| Error::runtime(format!("cannot draw the calibration plot: {e}"));
    if cal.pairs.is_empty() {
        return Err(Error::bad_input(
            "the calibration has no fitted pair to plot",
        ));
    }
    let mut panels = Vec::new();
    for fit in &cal.pairs {
        let pair = fit.pair();
        let mut measured = Vec::new();
        let mut stock: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
        let (mut lo, mut hi) = (fit.min_bytes.max(1), fit.max_bytes.max(2));
        for input in inputs {
            let mut pts = Vec::new();
            for row in input.rows.iter().filter(|r| {
                r.backend == cal.backend && r.coll == fit.coll && r.fit_pair() == Some(pair)
            }) {
                pts.push((row.bytes as f64, row.time_us));
                lo = lo.min(row.bytes.max(1));
                hi = hi.max(row.bytes);
                if let Some(s) = row.stock_us {
                    stock.entry(row.bytes).or_default().push(s);
                }
            }
            measured.push(pts);
        }
        let stock: Vec<(f64, f64)> = stock
            .into_iter()
            .filter_map(|(b, v)| Some((b as f64, median(&v)?)))
            .collect();
        let (l2lo, l2hi) = ((lo as f64).log2(), (hi as f64).log2());
        let steps = (((l2hi - l2lo) * 8.0).ceil() as usize).max(2);
        let calibrated = (0..=steps)
            .map(|i| {
                let x = l2lo + (l2hi - l2lo) * i as f64 / steps as f64;
                let b = x.exp2();
                (b, fit.params.time_us(b))
            })
            .collect();
        panels.push(Panel {
            title: format!("{} {}", fit.coll.nccl_name(), pair),
            measured,
            stock,
            calibrated,
        });
    }

    let cols = if panels.len() <= 4 { 2 } else { 3 };
    let rows = panels.len().div_ceil(cols);
    let (w, h) = (cols as u32 * 420, rows as u32 * 330 + 40);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let title = format!(
            "{} backend: measured (points, a colour per input), stock NCCL model (dashed), calibrated (solid)",
            cal.backend
        );
        let root = root
            .titled(&title, ("sans-serif", 16))
            .map_err(|e| err(e.to_string()))?;
        let areas = root.split_evenly((rows, cols));
        let calibrated_color = RGBColor(200, 30, 30);
        let stock_color = RGBColor(70, 70, 70);
        for (i, (panel, area)) in panels.iter().zip(areas.iter()).enumerate() {
            let xs = panel
                .measured
                .iter()
                .flatten()
                .chain(panel.calibrated.iter())
                .map(|p| p.0.log2());
            let (xmin, xmax) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
                (a.min(x), b.max(x))
            });
            let ys: Vec<f64> = panel
                .measured
                .iter()
                .flatten()
                .chain(panel.calibrated.iter())
                .chain(panel.stock.iter())
                .map(|p| p.1)
                .filter(|y| *y > 0.0)
                .collect();
            let ymin = ys.iter().copied().fold(f64::INFINITY, f64::min) * 0.8;
            let ymax = ys.iter().copied().fold(0.0, f64::max) * 1.25;
            let (xmin, xmax) = (xmin.floor(), xmax.ceil().max(xmin.floor() + 1.0));
            let mut chart = ChartBuilder::on(area)
                .caption(&panel.title, ("sans-serif", 15))
                .margin(8)
                .x_label_area_size(28)
                .y_label_area_size(48)
                .build_cartesian_2d(xmin..xmax, (ymin..ymax).log_scale())
                .map_err(|e| err(e.to_string()))?;
            chart
                .configure_mesh()
                .x_labels(((xmax - xmin) / 10.0).ceil() as usize + 1)
                .x_label_formatter(&|x| tick_label(*x))
                .y_label_formatter(&|y| {
                    if *y >= 1.0 {
                        format!("{y:.0}")
                    } else {
                        format!("{y:.2}")
                    }
                })
                .y_desc("µs")
                .light_line_style(WHITE.mix(0.0))
                .draw()
                .map_err(|e| err(e.to_string()))?;
            for (k, pts) in panel.measured.iter().enumerate() {
                let color = INPUT_COLORS[k % INPUT_COLORS.len()];
                let series = chart
                    .draw_series(
                        pts.iter()
                            .map(|&(b, t)| Circle::new((b.log2(), t), 3, color.filled())),
                    )
                    .map_err(|e| err(e.to_string()))?;
                if i == 0 {
                    let name = inputs
                        .get(k)
                        .map(|m| m.source.rsplit('/').take(2).collect::<Vec<_>>())
                        .map(|mut v| {
                            v.reverse();
                            v.join("/")
                        })
                        .unwrap_or_default();
                    series
                        .label(format!("measured: {name}"))
                        .legend(move |(x, y)| Circle::new((x + 8, y), 3, color.filled()));
                }
            }
            if panel.stock.len() > 1 {
                let series = chart
                    .draw_series(DashedLineSeries::new(
                        panel.stock.iter().map(|&(b, t)| (b.log2(), t)),
                        6,
                        4,
                        stock_color.stroke_width(2),
                    ))
                    .map_err(|e| err(e.to_string()))?;
                if i == 0 {
                    series.label("stock NCCL model").legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], stock_color.stroke_width(2))
                    });
                }
            }
            let series = chart
                .draw_series(LineSeries::new(
                    panel.calibrated.iter().map(|&(b, t)| (b.log2(), t)),
                    calibrated_color.stroke_width(2),
                ))
                .map_err(|e| err(e.to_string()))?;
            if i == 0 {
                series.label("calibrated").legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], calibrated_color.stroke_width(2))
                });
                chart
                    .configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .label_font(("sans-serif", 11))
                    .position(SeriesLabelPosition::UpperLeft)
                    .draw()
                    .map_err(|e| err(e.to_string()))?;
            }
        }
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_ticks() {
        assert_eq!(binary_label(3), "8");
        assert_eq!(binary_label(10), "1K");
        assert_eq!(binary_label(16), "64K");
        assert_eq!(binary_label(20), "1M");
        assert_eq!(binary_label(32), "4G");
        assert_eq!(tick_label(20.0), "1M");
        assert_eq!(tick_label(21.0), "");
        assert_eq!(tick_label(20.5), "");
        assert_eq!(tick_label(0.0), "1");
    }
}
