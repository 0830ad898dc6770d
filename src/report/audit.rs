//! Output of `planner audit`: every difference between an NCCL log and the
//! planner's model, with both values.

use crate::audit::AuditReport;
use comfy_table::{presets, ContentArrangement, Table};

pub fn audit_text(report: &AuditReport) -> String {
    let mut out = format!(
        "{}: NCCL {}, compared with the planner's NCCL {} model: {}, {}\n",
        report.log,
        report
            .nccl_version
            .as_deref()
            .unwrap_or("(version not in the log)"),
        report.table_family,
        crate::units::count(report.compared, "value"),
        crate::units::count(report.difference_count(), "difference")
    );
    if let Some(p) = &report.plugin {
        let checked = p.steered - p.steered_without_call_line;
        out.push_str(&format!(
            "planner-tuner plugin steered {} ({}, {} kept NCCL's choice); NCCL ran the plugin's pair in {} of {} checked\n",
            crate::units::count(p.steered, "call"),
            crate::units::count(p.decisions, "decision line"),
            p.kept,
            p.steered_followed,
            checked
        ));
    }
    for part in &report.not_checked {
        out.push_str(&format!("Not checked: {part}\n"));
    }
    if report.differences.is_empty() {
        out.push_str("No differences.\n");
        return out;
    }
    let mut table = Table::new();
    table
        .load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(vec!["log line", "what", "NCCL", "planner"]);
    for d in &report.differences {
        table.add_row(vec![
            if d.line > 0 {
                d.line.to_string()
            } else {
                "-".to_string()
            },
            d.what.clone(),
            d.nccl.clone(),
            d.planner.clone(),
        ]);
    }
    out.push_str(&table.to_string());
    out.push('\n');
    for (kind, n) in &report.differences_not_listed {
        out.push_str(&format!(
            "... and {n} more {} {}, counted, not listed (the first {} of each kind are)\n",
            kind.name(),
            if *n == 1 { "difference" } else { "differences" },
            crate::audit::DIFFERENCES_LISTED_PER_KIND
        ));
    }
    out
}
