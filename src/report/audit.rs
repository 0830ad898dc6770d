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

/// The log's per-call choices against NCCL's example tuner config (`planner audit --tuner-csv`).
pub fn tuner_csv_text(a: &crate::audit::tuner_csv::CsvAudit) -> String {
    let mut out = format!(
        "NCCL's example tuner config {} ({}): of {} NCCL ran, {} fell in no rule's range (NCCL's own choice); NCCL ran the first matching rule's pair in {}, a later matching rule's in {} (the first rule's pair masked), another pair in {}\n",
        a.file,
        crate::units::count(a.rules, "rule"),
        crate::units::count(a.calls, "per-call line"),
        a.no_rule,
        a.followed,
        a.followed_later_rule,
        a.differences.len()
    );
    out.push_str(&format!(
        "  rules naming numPipeOps or regBuff matched with {}\n",
        a.assumed
    ));
    if a.differences.is_empty() {
        return out;
    }
    let mut t = super::table(vec![
        "log line",
        "collective",
        "nBytes",
        "rule line",
        "rule's pair",
        "NCCL ran",
    ]);
    super::right_align(&mut t, &[0, 2, 3]);
    const SHOWN: usize = 20;
    for d in a.differences.iter().take(SHOWN) {
        t.add_row(vec![
            d.log_line.to_string(),
            d.collective.nccl_name().to_string(),
            d.n_bytes.to_string(),
            d.rule_line.to_string(),
            d.rule_pair.clone(),
            d.nccl_pair.clone(),
        ]);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    if a.differences.len() > SHOWN {
        out.push_str(&format!("... and {} more\n", a.differences.len() - SHOWN));
    }
    out
}
