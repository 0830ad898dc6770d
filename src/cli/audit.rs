//! `planner audit NCCL_LOG`: compare an NCCL_DEBUG=INFO log with the model
//! for the same machine. Thin: flags -> `audit::audit_log` -> `report`.

use super::source::{GraphArgs, ModelArgs, SourceArgs};
use crate::audit::{audit_log, AuditOptions};
use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// NCCL log (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING); the topology is --topo or the NCCL_TOPO_DUMP_FILE next to it
    pub log: String,
    /// Feed the model the log's own graphs (compares the cost model alone, not the search)
    #[arg(long, conflicts_with = "graph")]
    pub log_graphs: bool,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
}

pub fn run(source: &SourceArgs, graph: &GraphArgs, args: AuditArgs) -> Result<()> {
    let report = audit_log(&AuditOptions {
        log: args.log,
        source: source.source(),
        graph_file: graph.graph.clone(),
        log_graphs: args.log_graphs,
        tuning_table: args.model.tuning_table,
        nccl_version: args.model.nccl_version,
    })?;
    report.env.announce_warnings();
    for notice in &report.notices {
        eprintln!("planner: {notice}");
    }
    if args.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| Error::runtime(format!("cannot write JSON: {e}")))?;
        println!("{text}");
    } else {
        print!("{}", crate::report::audit::audit_text(&report));
    }
    // Differences are a finding, not bad input: exit 1 (bad input exits 2).
    match report.differences.len() {
        0 => Ok(()),
        n => Err(Error::runtime(format!(
            "{}: {n} difference(s) between the log and the model",
            report.log
        ))),
    }
}
