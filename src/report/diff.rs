//! Output of `planner diff`: the version diff (bands, picks, times, causes) and the run
//! diff (machine differences, ratio tables, verdicts, SVG of the ratios).

use crate::diff::runs::{Flag, RatioRow, RunDiff};
use crate::diff::versions::VersionDiff;
use crate::error::{Error, Result};
use crate::measure::Backend;
use crate::model::Pair;
use crate::units::format_size;
use comfy_table::{presets, ContentArrangement, Table};

/// A size in a table: `16 MiB` for a power of two, the bytes otherwise.
fn short_size(bytes: u64) -> String {
    if bytes.is_power_of_two() || bytes < 1024 {
        format_size(bytes)
    } else {
        format!("{bytes} B")
    }
}

fn table() -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled);
    t
}

fn arrow(a: f64, b: f64, decimals: usize) -> String {
    format!("{a:.decimals$} -> {b:.decimals$}")
}

/// The version diff for people.
pub fn versions_text(d: &VersionDiff) -> String {
    let (fa, fb) = (&d.a.family, &d.b.family);
    let mut out = format!(
        "NCCL {fa} ({}) vs {fb} ({}) on {}\n",
        d.a.tag, d.b.tag, d.machine
    );
    if !d.steps.is_empty() {
        let steps: Vec<String> = d
            .steps
            .iter()
            .map(|s| {
                let rules = s
                    .changes
                    .iter()
                    .filter(|c| c.what.starts_with("rule:"))
                    .count();
                format!(
                    "{} -> {} ({} constants, {} rules)",
                    s.from_family,
                    s.to_family,
                    s.changes.len() - rules,
                    rules
                )
            })
            .collect();
        out.push_str(&format!("Steps: {}\n", steps.join(", ")));
    }
    for note in &d.notes {
        out.push_str(&format!("Note: {note}\n"));
    }
    for c in &d.collectives {
        out.push_str(&format!("\n{}:\n", c.coll.nccl_name()));
        if c.bands.is_empty() {
            out.push_str("  no size of the sweep fits this collective\n");
            continue;
        }
        let mut t = table();
        t.set_header(vec![
            "sizes".to_string(),
            format!("{fa} pick"),
            format!("{fb} pick"),
            "time µs, first size".to_string(),
            "time µs, last size".to_string(),
            "busbw GB/s, last size (nccl-tests)".to_string(),
            "change".to_string(),
        ]);
        for b in &c.bands {
            let (Some(first), Some(last)) = (b.points.first(), b.points.last()) else {
                continue;
            };
            let change = if b.pick_changed {
                "pick".to_string()
            } else if b.changed {
                format!(
                    "time {:+.1} % at {}",
                    b.time_change_pct,
                    short_size(b.time_change_at_bytes)
                )
            } else {
                "-".to_string()
            };
            t.add_row(vec![
                format!("{} - {}", short_size(b.from_bytes), short_size(b.to_bytes)),
                b.pick_a.to_string(),
                b.pick_b.to_string(),
                arrow(first.time_a_us, first.time_b_us, 2),
                arrow(last.time_a_us, last.time_b_us, 2),
                arrow(last.busbw_a_gbs, last.busbw_b_gbs, 1),
                change,
            ]);
        }
        out.push_str(&t.to_string());
        out.push('\n');
        let changed: Vec<_> = c.bands.iter().filter(|b| b.changed).collect();
        if changed.is_empty() {
            out.push_str("  no band changed (pick the same, time within 1 %)\n");
            continue;
        }
        out.push_str("Why:\n");
        for b in changed {
            let what = if b.pick_changed {
                format!("{} -> {}", b.pick_a, b.pick_b)
            } else {
                format!(
                    "{} under both, time {:+.1} % at {}",
                    b.pick_a,
                    b.time_change_pct,
                    short_size(b.time_change_at_bytes)
                )
            };
            out.push_str(&format!(
                "  {} - {}: {what}\n",
                short_size(b.from_bytes),
                short_size(b.to_bytes),
            ));
            if b.causes.is_empty() {
                out.push_str("    no change of the chain moves it by itself\n");
            }
            for cause in &b.causes {
                let with = if cause.together_with.is_empty() {
                    String::new()
                } else {
                    format!(" (with {})", cause.together_with.join(", "))
                };
                let source = if cause.change.source.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", cause.change.source)
                };
                out.push_str(&format!(
                    "    {}: {}{with}: {}{source}\n",
                    cause.family, cause.change.text, cause.effect
                ));
            }
        }
    }
    out
}

fn ratio_cell(r: &RatioRow) -> String {
    let mark = match r.flag {
        Flag::Slower => "+",
        Flag::Faster => "-",
        Flag::WithinNoise => "",
    };
    format!("{:.3}{mark}", r.ratio)
}

/// The run diff for people.
pub fn runs_text(d: &RunDiff) -> String {
    let mut out = format!("A: {}\nB: {}\ncollective: {}\n", d.a, d.b, d.collective);
    out.push_str("\nMachine and versions:\n");
    let mut t = table();
    t.set_header(vec!["what", "A", "B", "same?"]);
    for f in &d.machine {
        let status = if f.same {
            "same".to_string()
        } else {
            match &f.detail {
                Some(detail) => format!("DIFFERS: {detail}"),
                None => "DIFFERS".to_string(),
            }
        };
        let b = if f.same { "" } else { f.b.as_str() };
        t.add_row(vec![f.field.clone(), f.a.clone(), b.to_string(), status]);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    let options: Vec<_> = d.options.iter().filter(|f| !f.same).collect();
    if options.is_empty() {
        out.push_str("Options: the same\n");
    } else {
        for f in options {
            out.push_str(&format!("Option {}: {} -> {}\n", f.field, f.a, f.b));
        }
    }
    out.push_str(
        "\nRatio B/A of the medians (+ every B repeat slower than every A repeat, - every one faster):\n",
    );
    for backend in [Backend::Native, Backend::Nccl] {
        let rows: Vec<&RatioRow> = d.rows.iter().filter(|r| r.backend == backend).collect();
        if rows.is_empty() {
            continue;
        }
        let mut pairs: Vec<Option<Pair>> = rows.iter().map(|r| r.pair).collect();
        pairs.sort_by_key(|p| (p.is_none(), *p));
        pairs.dedup();
        let mut sizes: Vec<u64> = rows.iter().map(|r| r.bytes).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let mut t = table();
        let mut header = vec![backend.name().to_string()];
        header.extend(pairs.iter().map(|p| match p {
            Some(p) => p.to_string(),
            None => "NCCL's choice".to_string(),
        }));
        t.set_header(header);
        for s in sizes {
            let mut row = vec![short_size(s)];
            for p in &pairs {
                row.push(
                    rows.iter()
                        .find(|r| r.bytes == s && r.pair == *p)
                        .map(|r| ratio_cell(r))
                        .unwrap_or_default(),
                );
            }
            t.add_row(row);
        }
        out.push_str(&t.to_string());
        out.push('\n');
    }
    if d.only_in_a + d.only_in_b > 0 {
        out.push_str(&format!(
            "Measured in one file only: {} row(s) of A, {} of B\n",
            d.only_in_a, d.only_in_b
        ));
    }
    let pair_text = |p: Option<Pair>| p.map_or("-".to_string(), |p| p.to_string());
    let changed: Vec<String> = d
        .best
        .iter()
        .filter(|b| b.changed)
        .map(|b| {
            format!(
                "{} {}: {} -> {}",
                b.backend.name(),
                short_size(b.bytes),
                pair_text(b.best_a),
                pair_text(b.best_b)
            )
        })
        .collect();
    out.push_str(&format!(
        "Measured-best pair changed: {}\n",
        if changed.is_empty() {
            "nowhere".to_string()
        } else {
            changed.join("; ")
        }
    ));
    let choices: Vec<String> = d
        .rows
        .iter()
        .filter(|r| r.pair.is_none() && r.nccl_choice_a != r.nccl_choice_b)
        .map(|r| {
            format!(
                "{}: {} -> {}",
                short_size(r.bytes),
                pair_text(r.nccl_choice_a),
                pair_text(r.nccl_choice_b)
            )
        })
        .collect();
    if d.rows.iter().any(|r| r.pair.is_none()) {
        out.push_str(&format!(
            "NCCL's own choice changed: {}\n",
            if choices.is_empty() {
                "nowhere".to_string()
            } else {
                choices.join("; ")
            }
        ));
    }
    out.push_str("\nVerdict:\n");
    for r in &d.regimes {
        out.push_str(&format!("  {}: {}\n", r.label, r.verdict));
    }
    out
}

/// The ratio B/A per pair against size: one panel per pair (NCCL's own choice included),
/// log2 size axis with binary ticks, a line per backend with the noise band as bars.
pub fn runs_svg(d: &RunDiff) -> Result<String> {
    use plotters::prelude::*;
    let err = |e: String| Error::runtime(format!("cannot draw the plot: {e}"));
    let mut pairs: Vec<Option<Pair>> = d.rows.iter().map(|r| r.pair).collect();
    pairs.sort_by_key(|p| (p.is_none(), *p));
    pairs.dedup();
    if pairs.is_empty() {
        return Err(Error::bad_input(
            "--plot: the two files have no measurement in common",
        ));
    }
    let exp = |b: u64| (b.max(1) as f64).log2();
    let xs: Vec<f64> = d.rows.iter().map(|r| exp(r.bytes)).collect();
    let xmin = xs.iter().copied().fold(f64::INFINITY, f64::min).floor();
    let xmax = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max).ceil();
    let xmax = if xmax <= xmin { xmin + 1.0 } else { xmax };
    // Label every 1, 2 or 4 powers of two, depending on the range.
    let every = if xmax - xmin > 16.0 {
        4.0
    } else if xmax - xmin > 8.0 {
        2.0
    } else {
        1.0
    };
    let cols = pairs.len().min(3);
    let rows = pairs.len().div_ceil(cols);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (420 * cols as u32, 300 * rows as u32 + 40))
            .into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let root = root
            .titled(
                &format!(
                    "{}: time B / time A (B = {}); bars: min B / max A .. max B / min A",
                    d.collective, d.b
                ),
                ("sans-serif", 16),
            )
            .map_err(|e| err(e.to_string()))?;
        let panels = root.split_evenly((rows, cols));
        for (pair, area) in pairs.iter().zip(panels.iter()) {
            let mine: Vec<&RatioRow> = d.rows.iter().filter(|r| r.pair == *pair).collect();
            let lo = mine.iter().map(|r| r.ratio_lo).fold(1.0f64, f64::min);
            let hi = mine.iter().map(|r| r.ratio_hi).fold(1.0f64, f64::max);
            let pad = ((hi - lo) * 0.1).max(0.01);
            let title = match pair {
                Some(p) => p.to_string(),
                None => "NCCL's own choice".to_string(),
            };
            let mut chart = ChartBuilder::on(area)
                .caption(title, ("sans-serif", 14))
                .margin(8)
                .x_label_area_size(30)
                .y_label_area_size(45)
                .build_cartesian_2d(xmin..xmax, (lo - pad)..(hi + pad))
                .map_err(|e| err(e.to_string()))?;
            chart
                .configure_mesh()
                .x_labels(((xmax - xmin) as usize + 1).min(64))
                .x_label_formatter(&|x| {
                    let r = x.round();
                    if (x - r).abs() < 1e-6 && (r - xmin).rem_euclid(every) < 1e-6 {
                        format_size(2f64.powf(r) as u64)
                    } else {
                        String::new()
                    }
                })
                .y_label_formatter(&|y| format!("{y:.2}"))
                .light_line_style(TRANSPARENT)
                .draw()
                .map_err(|e| err(e.to_string()))?;
            chart
                .draw_series(LineSeries::new(
                    [(xmin, 1.0), (xmax, 1.0)],
                    BLACK.mix(0.5).stroke_width(1),
                ))
                .map_err(|e| err(e.to_string()))?;
            for (backend, color) in [(Backend::Native, BLUE), (Backend::Nccl, RED)] {
                let mut pts: Vec<&&RatioRow> =
                    mine.iter().filter(|r| r.backend == backend).collect();
                if pts.is_empty() {
                    continue;
                }
                pts.sort_by_key(|r| r.bytes);
                chart
                    .draw_series(LineSeries::new(
                        pts.iter().map(|r| (exp(r.bytes), r.ratio)),
                        color.stroke_width(2),
                    ))
                    .map_err(|e| err(e.to_string()))?
                    .label(backend.name())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                    });
                chart
                    .draw_series(pts.iter().map(|r| {
                        PathElement::new(
                            vec![(exp(r.bytes), r.ratio_lo), (exp(r.bytes), r.ratio_hi)],
                            color.mix(0.6).stroke_width(1),
                        )
                    }))
                    .map_err(|e| err(e.to_string()))?;
                chart
                    .draw_series(
                        pts.iter()
                            .filter(|r| r.flag != Flag::WithinNoise)
                            .map(|r| Circle::new((exp(r.bytes), r.ratio), 3, color.filled())),
                    )
                    .map_err(|e| err(e.to_string()))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperRight)
                .draw()
                .map_err(|e| err(e.to_string()))?;
        }
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}
