//! `calibrate --plot`: one panel per pair (small multiples), time against size
//! on a log2 axis with binary-unit ticks; measured points (one colour per
//! input), the stock NCCL model dashed, the calibrated model solid.

use super::file::Calibration;
use super::input::Measurements;
use crate::error::{Error, Result};
use crate::measure::median;
use std::collections::BTreeMap;

/// The SVG text of the plot.
pub fn render_svg(cal: &Calibration, inputs: &[Measurements]) -> Result<String> {
    use crate::plot::{Figure, Mark, Panel, Series, ValueAxis, COLORS, DARK};
    if cal.pairs.is_empty() {
        return Err(Error::bad_input(
            "the calibration has no fitted pair to plot",
        ));
    }
    let calibrated_color = COLORS[3];
    // Measured inputs take the other colours (red is the calibrated model's).
    let input_colors = [COLORS[0], COLORS[1], COLORS[2], COLORS[4], COLORS[5]];
    let mut panels = Vec::new();
    for fit in &cal.pairs {
        let pair = fit.pair();
        let mut series = Vec::new();
        let mut stock: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
        let (mut lo, mut hi) = (fit.min_bytes.max(1), fit.max_bytes.max(2));
        for (k, input) in inputs.iter().enumerate() {
            let mut pts = Vec::new();
            for row in input.rows.iter().filter(|r| {
                r.backend == cal.backend && r.coll == fit.coll && r.fit_pair() == Some(pair)
            }) {
                pts.push((row.bytes, row.time_us));
                lo = lo.min(row.bytes.max(1));
                hi = hi.max(row.bytes);
                if let Some(s) = row.stock_us {
                    stock.entry(row.bytes).or_default().push(s);
                }
            }
            let color = input_colors[k % input_colors.len()];
            series.push(Series::new(color, Mark::Points).with_points(pts));
        }
        let stock: Vec<(u64, f64)> = stock
            .into_iter()
            .filter_map(|(b, v)| Some((b, median(&v)?)))
            .collect();
        if stock.len() > 1 {
            series.push(Series::new(DARK, Mark::Dashed).with_points(stock));
        }
        // The calibrated curve at eight points per power of two.
        let (l2lo, l2hi) = ((lo as f64).log2(), (hi as f64).log2());
        let steps = (((l2hi - l2lo) * 8.0).ceil() as usize).max(2);
        let calibrated = (0..=steps)
            .filter_map(|i| {
                let b = (l2lo + (l2hi - l2lo) * i as f64 / steps as f64).exp2();
                let t = match fit.physical {
                    None => fit.params.time_us(b),
                    Some(_) => fit.time_us(b.round() as u64, cal.expected_form.as_ref())?,
                };
                Some((b.round() as u64, t))
            })
            .collect();
        series.push(Series::new(calibrated_color, Mark::Line).with_points(calibrated));
        panels.push(Panel {
            title: format!("{} {}", fit.coll.nccl_name(), pair),
            series,
            shaded_sizes: Vec::new(),
            reference_y: None,
        });
    }
    let mut legend: Vec<(String, plotters::style::RGBColor, Mark)> = inputs
        .iter()
        .enumerate()
        .map(|(k, m)| {
            (
                format!("measured: {}", input_name(m)),
                input_colors[k % input_colors.len()],
                Mark::Points,
            )
        })
        .collect();
    legend.push(("stock NCCL model".to_string(), DARK, Mark::Dashed));
    legend.push(("calibrated".to_string(), calibrated_color, Mark::Line));
    crate::plot::render(&[Figure {
        title: format!(
            "{} backend: measured time against the stock NCCL model and the calibrated model",
            cal.backend
        ),
        value_name: "time (µs)".to_string(),
        axis: ValueAxis::Log,
        panels,
        shaded_label: None,
        legend,
    }])
}

/// An input's last two path components (`dir/file.json`), to tell inputs apart in the legend.
fn input_name(m: &Measurements) -> String {
    let mut parts: Vec<&str> = m.source.rsplit('/').take(2).collect();
    parts.reverse();
    parts.join("/")
}
