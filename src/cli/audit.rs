//! `planner audit NCCL_LOG`: compare an NCCL_DEBUG=INFO log with the model
//! for the same machine. Thin: flags -> `audit::audit_log` -> `report`.

use super::source::{AuditSourceArgs, GraphArgs, ModelArgs};
use crate::audit::{audit_log, AuditOptions};
use crate::error::Result;
use std::io::Write;

#[derive(Debug, clap::Args)]
pub(crate) struct AuditArgs {
    #[command(flatten)]
    pub(crate) source: AuditSourceArgs,
    #[command(flatten)]
    pub(crate) graph: GraphArgs,
    /// NCCL log (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING); the topology is --topo or the NCCL_TOPO_DUMP_FILE next to it
    pub(crate) log: String,
    /// Feed the model the log's own graphs (compares the cost model alone, not the search)
    #[arg(long, conflicts_with = "graph")]
    pub(crate) log_graphs: bool,
    #[command(flatten)]
    pub(crate) model: ModelArgs,
    /// Machine-readable output (docs/json.md)
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) fn run(args: AuditArgs) -> Result<()> {
    let report = audit_log(&AuditOptions {
        log: args.log,
        source: args.source.source(),
        graph_file: args.graph.graph.clone(),
        log_graphs: args.log_graphs,
        tuning_table: args.model.tuning_table,
        nccl_version: args.model.nccl_version,
    })?;
    report.env.announce_warnings();
    for notice in &report.notices {
        eprintln!("planner: {notice}");
    }
    if args.json {
        println!("{}", crate::report::json::render(&report, "")?);
    } else {
        print!(
            "{}",
            crate::report::text(&crate::report::audit::audit_text(&report))
        );
    }
    // Differences are a finding, neither bad input (exit 2) nor an error: exit 1 and say how many.
    match report.difference_count() {
        0 => Ok(()),
        n => {
            let noun = if n == 1 { "difference" } else { "differences" };
            let _ = std::io::stdout().flush();
            eprintln!(
                "planner: {}: {n} {noun} between the log and the model",
                report.log
            );
            std::process::exit(1);
        }
    }
}
