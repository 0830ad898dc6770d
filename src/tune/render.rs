//! `planner tune` output: the per-size decisions and the plan's bands as tables, and their JSON.

use super::{Decision, Plan, Tuned};
use crate::units::format_size;
use comfy_table::{presets, CellAlignment, ContentArrangement, Table};
use serde_json::{json, Value};

fn us(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |t| format!("{t:.2}"))
}

fn max_text(max_bytes: u64) -> String {
    if max_bytes == u64::MAX {
        "max".to_string()
    } else {
        max_bytes.to_string()
    }
}

/// "0 B - 1.4 MiB", "5.7 MiB - max".
fn range_text(min_bytes: u64, max_bytes: u64) -> String {
    let hi = if max_bytes == u64::MAX {
        "max".to_string()
    } else {
        format_size(max_bytes)
    };
    format!("{} - {hi}", format_size(min_bytes))
}

fn table(header: Vec<&str>, right_aligned: &[usize]) -> Table {
    let mut t = Table::new();
    // The same box style as every other command's tables: `report::text` turns it into plain `+-|` when piped.
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header);
    for &i in right_aligned {
        if let Some(column) = t.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// The provenance as `# ` lines.
pub(crate) fn provenance_lines(plan: &Plan) -> String {
    let p = &plan.provenance;
    format!(
        "# plan v{} for the NCCL tuner plugin: {}, made by planner {} at unix {}\n\
         # machine: {}; NCCL {}; topology {}\n\
         # from {} {} (FNV-1a 64 {}), margin {}%\n",
        plan.version,
        crate::units::count(plan.rules.len(), "rule"),
        p.planner_version,
        p.created_unix,
        p.machine,
        p.nccl_version.as_deref().unwrap_or("unknown"),
        p.topology_hash.as_deref().unwrap_or("unknown"),
        p.source_kind.name(),
        p.source_file,
        p.source_hash,
        p.margin_percent
    )
}

/// The bands in rule order per (collective, nRanks, nNodes) and size, headed by the provenance (`--show`).
pub(crate) fn plan_table(plan: &Plan) -> String {
    let mut t = table(
        vec![
            "collective",
            "nRanks",
            "nNodes",
            "min bytes",
            "max bytes",
            "sizes",
            "pair",
            "channels",
            "predicted (us)",
            "measured (us)",
            "rule",
        ],
        &[1, 2, 3, 4, 7, 8, 9, 10],
    );
    for (i, r) in sorted_rules(plan) {
        let any = |v: Option<u32>| v.map_or_else(|| "any".to_string(), |n| n.to_string());
        t.add_row(vec![
            r.collective.nccl_name().to_string(),
            any(r.n_ranks),
            any(r.n_nodes),
            r.min_bytes.to_string(),
            max_text(r.max_bytes),
            range_text(r.min_bytes, r.max_bytes),
            format!("{}/{}", r.algorithm.nccl_name(), r.protocol.nccl_name()),
            r.channels
                .map_or_else(|| "-".to_string(), |c| c.to_string()),
            us(r.predicted_us),
            us(r.measured_us),
            i.to_string(),
        ]);
    }
    format!("{}{t}\n", provenance_lines(plan))
}

fn sorted_rules(plan: &Plan) -> Vec<(usize, &super::Rule)> {
    let mut rules: Vec<(usize, &super::Rule)> = plan.rules.iter().enumerate().collect();
    rules.sort_by_key(|(_, r)| (r.collective, r.n_ranks, r.n_nodes, r.min_bytes));
    rules
}

/// `--show --json`: the provenance and the bands in the same order as the table, each with its rule index.
pub(crate) fn plan_json(plan: &Plan) -> Value {
    let bands: Vec<Value> = sorted_rules(plan)
        .into_iter()
        .map(|(i, r)| {
            let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
            if let Value::Object(map) = &mut v {
                map.insert("rule".to_string(), json!(i));
            }
            v
        })
        .collect();
    json!({
        "format": plan.format,
        "version": plan.version,
        "provenance": plan.provenance,
        "bands": bands,
    })
}

/// One row per decided size: NCCL's choice and time, the fastest pair and time, the gain, the pick and why.
/// `every_size` false shows only powers of two (a calibration's grid has 8 sizes per doubling).
pub(crate) fn decisions_table(decisions: &[Decision], every_size: bool) -> String {
    let mut t = table(
        vec![
            "collective",
            "size",
            "NCCL's choice",
            "from",
            "NCCL (us)",
            "fastest",
            "fastest (us)",
            "gain %",
            "plan",
            "why",
        ],
        &[1, 4, 6, 7],
    );
    for d in decisions
        .iter()
        .filter(|d| every_size || d.bytes.is_power_of_two())
    {
        let pair =
            |p: Option<crate::model::Pair>| p.map_or_else(|| "-".to_string(), |p| p.to_string());
        t.add_row(vec![
            d.coll.nccl_name().to_string(),
            format_size(d.bytes),
            pair(d.nccl),
            d.nccl_from.unwrap_or("-").to_string(),
            us(d.nccl_us),
            pair(d.best),
            us(d.best_us),
            d.gain_percent
                .map_or_else(|| "-".to_string(), |g| format!("{g:.1}")),
            d.pick.to_string(),
            d.reason.describe().to_string(),
        ]);
    }
    format!("{t}\n")
}

/// `planner tune --json` (making a plan): the plan as written, every decision, the stock model used and the notes.
pub(crate) fn tuned_json(tuned: &Tuned) -> Value {
    json!({
        "plan": tuned.plan,
        "measurement_used": tuned.plan.provenance.source_kind != super::SourceKind::Expected,
        "stock_model": tuned.stock_model,
        "decisions": tuned.decisions,
        "notes": tuned.notes,
    })
}

/// `tune --show FILE.conf`: the rules of NCCL's example tuner config, in the order the plugin tries them.
pub fn nccl_csv_table(csv: &crate::audit::tuner_csv::TunerCsv) -> String {
    let any = |v: i64| {
        if v == -1 {
            "any".to_string()
        } else {
            v.to_string()
        }
    };
    let mut out = format!(
        "# NCCL example tuner config {}: {}, first match wins (a rule whose pair NCCL masked is passed over)\n",
        csv.source,
        crate::units::count(csv.rules.len(), "rule")
    );
    let mut t = table(
        vec![
            "line",
            "collective",
            "min bytes",
            "max bytes",
            "sizes",
            "pair",
            "channels",
            "nNodes",
            "nRanks",
            "numPipeOps",
            "regBuff",
        ],
        &[0, 2, 3, 6, 7, 8, 9, 10],
    );
    for r in &csv.rules {
        t.add_row(vec![
            r.line.to_string(),
            r.collective.nccl_name().to_string(),
            r.min_bytes.to_string(),
            r.max_bytes.to_string(),
            format!(
                "{} - {}",
                format_size(r.min_bytes),
                format_size(r.max_bytes)
            ),
            r.pair(),
            if r.channels == -1 {
                "-".to_string()
            } else {
                r.channels.to_string()
            },
            any(r.n_nodes),
            any(r.n_ranks),
            any(r.num_pipe_ops),
            any(r.reg_buff),
        ]);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    out
}

/// `tune --show FILE.conf --json`: the config's rules (-1 kept as NCCL's wildcard).
pub fn nccl_csv_json(csv: &crate::audit::tuner_csv::TunerCsv) -> Value {
    json!({
        "format": "nccl-example-tuner-csv",
        "source": csv.source,
        "rules": csv.rules.iter().map(|r| json!({
            "line": r.line,
            "collective": r.collective.nccl_name(),
            "min_bytes": r.min_bytes,
            "max_bytes": r.max_bytes,
            "algorithm": r.algorithm.nccl_name(),
            "protocol": r.protocol.nccl_name(),
            "channels": r.channels,
            "n_nodes": r.n_nodes,
            "n_ranks": r.n_ranks,
            "num_pipe_ops": r.num_pipe_ops,
            "reg_buff": r.reg_buff,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_read_in_binary_units() {
        assert_eq!(range_text(0, 1_482_910), "0 B - 1.4 MiB");
        assert_eq!(range_text(5_931_642, u64::MAX), "5.7 MiB - max");
        assert_eq!(max_text(u64::MAX), "max");
        assert_eq!(us(Some(22.0752)), "22.08");
        assert_eq!(us(None), "-");
    }
}
