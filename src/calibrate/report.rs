//! Plain-text tables of a calibration and of a cross-validation report.

use super::cv::{CvReport, CvSection};
use super::file::Calibration;
use super::stats::ErrorStats;
use crate::units::format_size;
use comfy_table::{presets, CellAlignment, ContentArrangement, Table};

fn table(header: Vec<&str>) -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header);
    t
}

fn right_align(t: &mut Table, from: usize) {
    let n = t.column_count();
    for c in from..n {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
}

fn pct(v: f64) -> String {
    format!("{v:.1}%")
}

/// `median / p95 / worst`, or `-`.
fn stats(s: &Option<ErrorStats>) -> String {
    match s {
        Some(s) => format!(
            "{} / {} / {}",
            pct(s.median_abs_error_pct),
            pct(s.p95_abs_error_pct),
            pct(s.worst_abs_error_pct)
        ),
        None => "-".into(),
    }
}

/// `median / worst`, or `-`.
fn stats2(s: &Option<ErrorStats>) -> String {
    match s {
        Some(s) => format!(
            "{} / {}",
            pct(s.median_abs_error_pct),
            pct(s.worst_abs_error_pct)
        ),
        None => "-".into(),
    }
}

fn us(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 1000.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

fn bytes_label(b: f64) -> String {
    if b <= 0.0 {
        "-".into()
    } else if b >= 1024.0 {
        format_size(b.round() as u64)
    } else {
        format!("{b:.0} B")
    }
}

impl Calibration {
    /// The fitted parameters per pair, one table (the notes are not in it).
    pub(crate) fn render_text(&self) -> String {
        let m = &self.machine;
        let mut out = String::new();
        out.push_str(&format!(
            "calibration of the {} backend: {} {}, driver {}, NCCL {}, topology {}\n",
            self.backend,
            m.gpu_count
                .map(|n| crate::units::count(n, "GPU"))
                .unwrap_or_else(|| "? GPUs".into()),
            if m.gpus.is_empty() {
                String::new()
            } else {
                let mut names = m.gpus.clone();
                names.dedup();
                format!("({})", names.join(", "))
            },
            m.driver_version.as_deref().unwrap_or("?"),
            m.nccl_version.as_deref().unwrap_or("?"),
            m.topology_hash.as_deref().unwrap_or("unknown"),
        ));
        for s in &self.sources {
            out.push_str(&format!(
                "  from {} ({}, {} of {} rows, fnv1a64 {})\n",
                s.path, s.format, s.rows_used, s.rows, s.fnv1a64
            ));
        }
        out.push_str(&format!(
            "  time_us = {}, transfer_us = {}\n",
            self.model.time_us, self.model.transfer_us
        ));
        if self.pairs.iter().any(|p| p.physical.is_some()) {
            out.push_str(&self.physical_table());
            return out;
        }
        let mut t = table(vec![
            "collective",
            "pair",
            "latency µs",
            "bandwidth GB/s",
            "ramp bytes",
            "ramp exp",
            "overlap",
            "ramp2 bytes ^exp",
            "L2 step bytes x speedup / width",
            "sizes",
            "fit median / worst",
            "k-fold median / worst",
        ]);
        for p in &self.pairs {
            t.add_row(vec![
                p.coll.nccl_name().to_string(),
                p.pair().to_string(),
                format!("{:.2}", p.params.latency_us),
                format!("{:.1}", p.params.bandwidth_gbs),
                bytes_label(p.params.ramp_bytes),
                if p.params.ramp_bytes > 0.0 {
                    format!("{:.2}", p.params.ramp_exponent)
                } else {
                    "-".into()
                },
                format!("{:.2}", p.params.overlap),
                if p.params.ramp2_bytes > 0.0 {
                    format!(
                        "{} ^{:.2}",
                        bytes_label(p.params.ramp2_bytes),
                        p.params.ramp2_exponent
                    )
                } else {
                    "-".into()
                },
                if p.params.cache_bytes > 0.0 {
                    format!(
                        "{} x{:.2} / {:.2} oct",
                        bytes_label(p.params.cache_bytes),
                        p.params.cache_speedup,
                        p.params.cache_width_octaves
                    )
                } else {
                    "-".into()
                },
                format!(
                    "{} ({}..{})",
                    p.sizes,
                    format_size(p.min_bytes),
                    format_size(p.max_bytes)
                ),
                stats2(&p.fit),
                stats2(&p.cv),
            ]);
        }
        right_align(&mut t, 2);
        out.push_str(&t.to_string());
        out.push('\n');
        // `notes` go to stderr with the progress lines (`command::calibrate`).
        out
    }

    /// The expected form's table: the four physical constants fitted per pair (`calibrate::expected::Physical`)
    /// in place of the empirical form's latency, bandwidth, ramp and overlap columns, which it does not have.
    /// The in-sample fit reads 0 % by construction (the measured ratio at the fitted sizes is kept), so only the
    /// k-fold column says how well the form predicts sizes it did not see.
    fn physical_table(&self) -> String {
        let mut t = table(vec![
            "collective",
            "pair",
            "launch µs",
            "step µs",
            "channel GB/s",
            "link efficiency",
            "sizes",
            "k-fold median / worst",
        ]);
        for p in &self.pairs {
            let (launch, step, rate, efficiency) = match &p.physical {
                Some(c) => (
                    format!("{:.2}", c.launch_us),
                    format!("{:.2}", c.step_us),
                    format!("{:.1}", c.channel_gbs),
                    format!("{:.3}", c.link_efficiency),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            t.add_row(vec![
                p.coll.nccl_name().to_string(),
                p.pair().to_string(),
                launch,
                step,
                rate,
                efficiency,
                format!(
                    "{} ({}..{})",
                    p.sizes,
                    format_size(p.min_bytes),
                    format_size(p.max_bytes)
                ),
                stats2(&p.cv),
            ]);
        }
        right_align(&mut t, 2);
        let mut out = t.to_string();
        out.push('\n');
        out
    }
}

fn render_section(s: &CvSection, out: &mut String) {
    out.push_str(&format!("\n## {}\n", s.method));
    if s.train == s.test {
        out.push_str(&format!("inputs: {}\n", s.train.join(", ")));
    } else {
        out.push_str(&format!(
            "train: {}\ntest:  {}\n",
            s.train.join(", "),
            s.test.join(", ")
        ));
    }
    out.push_str(&format!(
        "{} test points; |error| median / p95 / worst\n",
        s.points
    ));
    let cross = s.regimes.iter().any(|r| r.run_to_run.is_some());
    let repeats = s.regimes.iter().any(|r| r.repeat_spread.is_some());
    let mut header = vec!["sizes", "points", "calibrated", "stock NCCL model"];
    if cross {
        header.push("run-to-run");
    }
    if repeats {
        header.push("repeat spread");
    }
    header.extend(["regret worst: calibrated", "stock"]);
    let mut t = table(header);
    for r in &s.regimes {
        let mut row = vec![
            r.regime.clone(),
            r.calibrated
                .as_ref()
                .map(|c| c.n.to_string())
                .unwrap_or_else(|| "0".into()),
            stats(&r.calibrated),
            stats(&r.stock),
        ];
        if cross {
            row.push(stats(&r.run_to_run));
        }
        if repeats {
            row.push(stats(&r.repeat_spread));
        }
        row.push(r.calibrated_regret_worst_pct.map(pct).unwrap_or("-".into()));
        row.push(r.stock_regret_worst_pct.map(pct).unwrap_or("-".into()));
        t.add_row(row);
    }
    right_align(&mut t, 1);
    out.push_str(&t.to_string());
    out.push('\n');

    let mut header = vec!["collective", "pair", "calibrated median / worst", "stock"];
    if cross {
        header.push("run-to-run");
    }
    let mut t = table(header);
    for p in &s.per_pair {
        let mut row = vec![
            p.collective.nccl_name().to_string(),
            p.pair.to_string(),
            stats2(&p.calibrated),
            stats2(&p.stock),
        ];
        if cross {
            row.push(stats2(&p.run_to_run));
        }
        t.add_row(row);
    }
    right_align(&mut t, 2);
    out.push_str(&t.to_string());
    out.push('\n');

    let mut t = table(vec![
        "size",
        "measured best",
        "best µs",
        "calibrated pick",
        "regret",
        "stock pick",
        "regret",
    ]);
    for g in &s.regret {
        t.add_row(vec![
            format_size(g.bytes),
            g.best.to_string(),
            us(g.best_us),
            g.calibrated_pick
                .map(|p| p.to_string())
                .unwrap_or("-".into()),
            g.calibrated_regret_pct.map(pct).unwrap_or("-".into()),
            g.stock_pick.map(|p| p.to_string()).unwrap_or("-".into()),
            g.stock_regret_pct.map(pct).unwrap_or("-".into()),
        ]);
    }
    right_align(&mut t, 2);
    out.push_str(&t.to_string());
    out.push('\n');

    if !s.largest_errors.is_empty() {
        out.push_str("largest calibrated errors:\n");
        for e in &s.largest_errors {
            out.push_str(&format!(
                "  {} {} {}: measured {} µs, calibrated {} µs ({:+.1}%){}\n",
                e.collective.nccl_name(),
                e.pair,
                format_size(e.bytes),
                us(e.measured_us),
                us(e.calibrated_us),
                e.error_pct,
                e.train_measured_us
                    .map(|t| format!(", training run measured {} µs", us(t)))
                    .unwrap_or_default()
            ));
        }
    }
    if !s.auto.is_empty() {
        out.push_str("NCCL's free choice (pair not recorded) against the calibrated pick:\n");
        for a in &s.auto {
            out.push_str(&format!(
                "  {} {}: NCCL {} µs, calibrated {} {} µs ({:+.1}%)\n",
                a.collective.nccl_name(),
                format_size(a.bytes),
                us(a.measured_us),
                a.calibrated_pick,
                us(a.calibrated_us),
                (a.calibrated_us / a.measured_us - 1.0) * 100.0
            ));
        }
    }
    out.push_str("targets (issue 11):\n");
    for c in &s.targets {
        out.push_str(&format!(
            "  {} <= {}: {}\n",
            c.target,
            pct(c.limit_pct),
            match (c.achieved_pct, c.met) {
                (Some(a), Some(true)) => format!("{} met", pct(a)),
                (Some(a), _) => format!("{} NOT met", pct(a)),
                _ => "no data".into(),
            }
        ));
    }
}

impl CvReport {
    /// Every section as tables.
    pub fn render_text(&self) -> String {
        let mut out = format!("# cross-validation of the {} backend\n", self.backend);
        for s in &self.sections {
            render_section(s, &mut out);
        }
        out
    }
}
