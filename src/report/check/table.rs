//! `planner check` for people: measured beside expected per size, then the verdict and its causes.

use super::CheckFormat;
use crate::check::{CheckReport, Status, Verdict};
use crate::error::Result;
use crate::units::format_size;
use comfy_table::{presets, CellAlignment, ContentArrangement};

pub(crate) struct Table;

fn number(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

impl CheckFormat for Table {
    fn render(&self, r: &CheckReport) -> Result<String> {
        let m = &r.machine;
        let mut out = String::new();
        let files: Vec<&str> = r.inputs.iter().map(|i| i.source.as_str()).collect();
        out.push_str(&format!(
            "{}: {} measured on {} ({} x {})",
            files.join(", "),
            crate::units::count(r.sizes.len(), "size"),
            m.source,
            crate::units::count(m.nodes, "node"),
            crate::units::count(m.gpus_per_node, "GPU")
        ));
        if let Some(v) = &r.run.nccl_version {
            out.push_str(&format!(", NCCL {v}"));
        }
        out.push('\n');
        out.push_str(&format!(
            "Expected: {}; slow = measured busbw below the band's low edge by more than {} %\n",
            r.expectation, r.tolerance_pct
        ));
        let mut table = comfy_table::Table::new();
        table
            .load_style(presets::UTF8_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Disabled)
            .set_header(vec![
                "collective",
                "pair",
                "size",
                "measured µs",
                "measured busbw GB/s",
                "expected busbw GB/s",
                "expected band GB/s",
                "vs expected",
                "status",
            ]);
        for s in &r.sizes {
            let (exp, band) = match &s.expected {
                Some(e) => (
                    number(e.busbw_gbs),
                    format!("{}-{}", number(e.low_busbw_gbs), number(e.high_busbw_gbs)),
                ),
                None => ("-".into(), "-".into()),
            };
            table.add_row(vec![
                s.coll.nccl_name().to_string(),
                s.pair.clone(),
                format_size(s.bytes),
                number(s.measured_time_us),
                number(s.measured_busbw_gbs),
                exp,
                band,
                s.deviation_pct.map_or("-".into(), |d| format!("{d:+.0} %")),
                s.status.label().to_string(),
            ]);
        }
        for c in 2..8 {
            if let Some(col) = table.column_mut(c) {
                col.set_cell_alignment(CellAlignment::Right);
            }
        }
        out.push_str(&table.to_string());
        out.push('\n');
        out.push_str(&per_iteration_text(&r.sizes));
        let slow = r.sizes.iter().filter(|s| s.status == Status::Slow).count();
        let fast = r
            .sizes
            .iter()
            .filter(|s| s.status == Status::Suspicious)
            .count();
        out.push_str(&match r.verdict {
            Verdict::Healthy => "Verdict: healthy: every size inside its expected band\n".to_string(),
            Verdict::Slow => format!(
                "Verdict: slow: {slow} of {} below their band by more than {} %{}\n",
                crate::units::count(r.sizes.len(), "size"),
                r.tolerance_pct,
                if fast > 0 { format!("; {fast} faster than expected") } else { String::new() }
            ),
            Verdict::Suspicious => format!(
                "Verdict: suspicious: {} faster than this machine should be (another machine, or a timing artefact?)\n",
                crate::units::count(fast, "size")
            ),
        });
        let (likely, other): (Vec<_>, Vec<_>) = r.causes.iter().partition(|c| c.likely);
        for (title, list) in [
            ("Likely causes", &likely),
            ("Also seen (no slow size to explain)", &other),
        ] {
            if list.is_empty() {
                continue;
            }
            out.push_str(&format!("{title}:\n"));
            for (i, c) in list.iter().enumerate() {
                out.push_str(&format!("  {}. [{}] {}\n", i + 1, c.kind.id(), c.summary));
                for e in &c.evidence {
                    match e.line {
                        Some(l) => out.push_str(&format!("     {}:{l}: {}\n", e.source, e.text)),
                        None => out.push_str(&format!("     {}: {}\n", e.source, e.text)),
                    }
                }
            }
        }
        if r.verdict == Verdict::Slow && likely.is_empty() {
            out.push_str(
                "No cause found in the files: run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV and check again\n",
            );
        }
        for c in &r.contradictions {
            let at = c.line.map_or(String::new(), |l| format!(":{l}"));
            out.push_str(&format!(
                "Contradiction ({}): {}{at} says {}, the machine says {}\n",
                c.what, c.source, c.file_says, c.machine_says
            ));
        }
        for n in &r.notes {
            out.push_str(&format!("Note: {n}\n"));
        }
        Ok(out)
    }
}

/// Where the files carry nccl-tests' per-iteration statistics (`-I 1`): how much the iterations of each size moved,
/// the sizes whose iterations vary most first (a measured time with a coefficient of variation of 20 % is one
/// sample of a wide distribution, not a machine's rate); empty without them.
fn per_iteration_text(sizes: &[crate::check::SizeCheck]) -> String {
    let mut with: Vec<&crate::check::SizeCheck> =
        sizes.iter().filter(|s| s.per_iteration.is_some()).collect();
    if with.is_empty() {
        return String::new();
    }
    with.sort_by(|a, b| {
        let cv = |s: &crate::check::SizeCheck| s.per_iteration.as_ref().map_or(0.0, |p| p.cv_pct);
        cv(b).total_cmp(&cv(a))
    });
    let mut out = format!(
        "Per-iteration (nccl-tests -I 1, measured, the slowest GPU per iteration): {} with statistics; most variable:\n",
        crate::units::count(with.len(), "size")
    );
    for s in with.iter().take(3) {
        if let Some(p) = &s.per_iteration {
            let processes = if p.per_process_median_us.len() > 1 {
                let lo = p
                    .per_process_median_us
                    .iter()
                    .copied()
                    .fold(f64::INFINITY, f64::min);
                let hi = p.per_process_median_us.iter().copied().fold(0.0, f64::max);
                format!(
                    ", per-process median {lo:.2}-{hi:.2} us over {} processes",
                    p.per_process_median_us.len()
                )
            } else {
                String::new()
            };
            out.push_str(&format!(
                "  {} {}: cv {:.1} %, min {:.2} us, max {:.2} us, p99 {:.2} us{}{processes}\n",
                s.coll.nccl_name(),
                crate::units::format_size(s.bytes),
                p.cv_pct,
                p.min_us,
                p.max_us,
                p.p99_us,
                p.iterations
                    .map(|n| format!(" over {}", crate::units::count(n as usize, "iteration")))
                    .unwrap_or_default(),
            ));
        }
    }
    out
}
