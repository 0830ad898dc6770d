//! `planner run` output: an nccl-tests-like table for people, JSON for scripts.

use crate::exec::plan::coll_name;
use crate::exec::runtime::RunReport;
use comfy_table::{presets, CellAlignment, ContentArrangement, Table};

/// The table, headed by what ran where.
pub(crate) fn table(report: &RunReport) -> String {
    let p = &report.plan;
    let mut out = String::new();
    out.push_str(&format!(
        "# {} {}/{} on {}{}, {} {}\n",
        coll_name(p.collective),
        p.algorithm.name(),
        p.protocol.nccl_name(),
        crate::units::count(p.n_ranks, "rank"),
        match report.device.virtual_ranks {
            Some(v) => format!(" ({v} virtual ranks on one GPU)"),
            None => String::new(),
        },
        p.dtype.nccl_tests_name(),
        if p.in_place {
            "in-place"
        } else {
            "out-of-place"
        }
    ));
    out.push_str(&format!("# shapes: {}\n", p.origin));
    out.push_str(&format!(
        "# GPUs: {}; driver {}, NVRTC {}, {}\n",
        report.device.gpus.join(", "),
        report.device.driver_version,
        report.device.nvrtc_version,
        report.device.arch
    ));
    out.push_str(&format!(
        "# timing: {} iterations{} after {} warm-up; time = mean over ranks; busbw = algbw x {:.3}\n",
        report.iters,
        if report.graph { " in one CUDA graph" } else { ", one launch each" },
        report.warmup,
        p.collective.nccl_tests_bus_factor(p.n_ranks)
    ));
    let mut t = Table::new();
    t.load_style(presets::ASCII_MARKDOWN)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(vec![
            "size (B)",
            "count",
            "type",
            "channels",
            "threads",
            "time (us)",
            "algbw (GB/s)",
            "busbw (GB/s)",
            "#wrong",
        ]);
    for r in &report.results {
        t.add_row(vec![
            r.bytes.to_string(),
            r.count.to_string(),
            p.dtype.nccl_tests_name().to_string(),
            r.n_channels.to_string(),
            r.n_threads.to_string(),
            format!("{:.2}", r.time_us),
            format!("{:.2}", r.algbw_gbs),
            format!("{:.2}", r.busbw_gbs),
            r.wrong.to_string(),
        ]);
    }
    for i in [0, 1, 3, 4, 5, 6, 7, 8] {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    out.push_str(&t.to_string());
    out.push('\n');
    let wrong = report
        .results
        .iter()
        .map(|r| r.wrong)
        .fold(0u64, u64::saturating_add);
    out.push_str(&format!(
        "# Out of bounds values : {wrong} {}\n",
        if wrong == 0 { "OK" } else { "FAILED" }
    ));
    out
}

/// The report as JSON (docs/json.md: the field names of `RunReport` and its parts, in the schema's spelling).
pub(crate) fn json(report: &RunReport) -> crate::error::Result<String> {
    super::json::render(report, "")
}
