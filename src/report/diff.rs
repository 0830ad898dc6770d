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
pub(crate) fn versions_text(d: &VersionDiff) -> String {
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
                    "{} -> {} ({}, {})",
                    s.from_family,
                    s.to_family,
                    crate::units::count(s.changes.len() - rules, "constant"),
                    crate::units::count(rules, "rule")
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
pub(crate) fn runs_text(d: &RunDiff) -> String {
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
        // The first row of each (size, pair), looked up per cell: a map, not a scan of every row per cell (issue 28
        // class 3: 178,000 rows of distinct sizes took 128 s).
        let mut cell_of: std::collections::HashMap<(u64, Option<Pair>), &RatioRow> =
            std::collections::HashMap::with_capacity(rows.len());
        for r in &rows {
            cell_of.entry((r.bytes, r.pair)).or_insert(r);
        }
        for s in sizes {
            let mut row = vec![short_size(s)];
            for p in &pairs {
                row.push(
                    cell_of
                        .get(&(s, *p))
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
            "Measured in one file only: {} of A, {} of B\n",
            crate::units::count(d.only_in_a, "row"),
            d.only_in_b
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

/// The ratio B/A per pair against size: one panel per pair (NCCL's own choice included), a
/// line per backend with the noise band as bars, sizes outside the noise band shaded.
pub(crate) fn runs_svg(d: &RunDiff) -> Result<String> {
    use crate::plot::{Figure, Mark, Panel, Series, ValueAxis, COLORS};
    let mut pairs: Vec<Option<Pair>> = d.rows.iter().map(|r| r.pair).collect();
    pairs.sort_by_key(|p| (p.is_none(), *p));
    pairs.dedup();
    if pairs.is_empty() {
        return Err(Error::bad_input(
            "--plot: the two files have no measurement in common",
        ));
    }
    let backends = [(Backend::Native, COLORS[0]), (Backend::Nccl, COLORS[3])];
    let mut panels = Vec::new();
    for pair in &pairs {
        let mine: Vec<&RatioRow> = d.rows.iter().filter(|r| r.pair == *pair).collect();
        let mut series = Vec::new();
        for (backend, color) in backends {
            let mut rows: Vec<&&RatioRow> = mine.iter().filter(|r| r.backend == backend).collect();
            if rows.is_empty() {
                continue;
            }
            rows.sort_by_key(|r| r.bytes);
            let points: Vec<(u64, f64)> = rows.iter().map(|r| (r.bytes, r.ratio)).collect();
            series.push(Series::new(color, Mark::Line).with_points(points.clone()));
            let mut bars = Series::new(color, Mark::Bars).with_points(points);
            bars.bars = rows
                .iter()
                .map(|r| (r.bytes, r.ratio_lo, r.ratio_hi))
                .collect();
            series.push(bars);
        }
        panels.push(Panel {
            title: match pair {
                Some(p) => p.to_string(),
                None => "NCCL's own choice".to_string(),
            },
            series,
            shaded_sizes: mine
                .iter()
                .filter(|r| r.flag != Flag::WithinNoise)
                .map(|r| r.bytes)
                .collect(),
            reference_y: Some(1.0),
        });
    }
    let legend = backends
        .iter()
        .filter(|(b, _)| d.rows.iter().any(|r| r.backend == *b))
        .map(|(b, c)| (b.name().to_string(), *c, Mark::Bars))
        .collect();
    crate::plot::render(&[Figure {
        title: format!(
            "{}: time B / time A (B = {}); bars from min B / max A to max B / min A",
            d.collective, d.b
        ),
        value_name: "time B / time A".to_string(),
        axis: ValueAxis::Linear,
        panels,
        shaded_label: Some("outside the noise band".to_string()),
        legend,
    }])
}
