//! `planner audit NCCL_LOG`: compare an NCCL_DEBUG=INFO log with the model
//! for the same machine. Thin: flags -> `audit::audit_log` -> `report`.

use super::source::{AuditSourceArgs, GraphArgs, ModelArgs};
use crate::audit::tuner_csv::{audit_csv, config_named_by_log, TunerCsv};
use crate::audit::{audit_log, AuditOptions};
use crate::error::Result;
use crate::nccl_log::NcclLog;
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
    /// Compare the log's per-call choices with the rules of NCCL's example tuner config (nccl_tuner.conf, CSV);
    /// default: the file the log's `TUNER/ExamplePlugin: Loaded ... from PATH` line names, where it exists
    #[arg(long, value_name = "FILE.conf")]
    pub tuner_csv: Option<String>,
    #[command(flatten)]
    pub(crate) model: ModelArgs,
    /// Machine-readable output (docs/json.md)
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) fn run(args: AuditArgs) -> Result<()> {
    // A config given on the command line is read before the audit (a bad one is the only error).
    let given_csv = match &args.tuner_csv {
        Some(path) => Some(TunerCsv::load(path)?),
        None => None,
    };
    let log_path = args.log.clone();
    let report = audit_log(&AuditOptions {
        log: args.log,
        source: args.source.source(),
        graph_file: args.graph.graph.clone(),
        log_graphs: args.log_graphs,
        tuning_table: args.model.tuning_table,
        nccl_version: args.model.nccl_version,
        nodes: args.source.nodes,
    })?;
    report.env.announce_warnings();
    for notice in &report.notices {
        eprintln!("planner: {notice}");
    }
    let csv = match given_csv {
        Some(csv) => Some(csv),
        None => csv_named_by_log(&log_path)?,
    };
    let csv_audit = match &csv {
        Some(csv) => Some(audit_csv(&NcclLog::load(&log_path)?, csv)?),
        None => None,
    };
    if args.json {
        let mut value = serde_json::to_value(&report)
            .map_err(|e| crate::error::Error::runtime(format!("cannot write JSON: {e}")))?;
        if let (Some(a), Some(map)) = (&csv_audit, value.as_object_mut()) {
            let a = serde_json::to_value(a)
                .map_err(|e| crate::error::Error::runtime(format!("cannot write JSON: {e}")))?;
            map.insert("tuner_csv".into(), a);
        }
        println!("{}", crate::report::json::render(&value, "")?);
    } else {
        print!(
            "{}",
            crate::report::text(&crate::report::audit::audit_text(&report))
        );
        if let Some(a) = &csv_audit {
            print!(
                "{}",
                crate::report::text(&crate::report::audit::tuner_csv_text(a))
            );
        }
    }
    let csv_differences = csv_audit.as_ref().map_or(0, |a| a.differences.len());
    // Differences are a finding, neither bad input (exit 2) nor an error: exit 1 and say how many.
    match report.difference_count() + csv_differences {
        0 => Ok(()),
        n => {
            let _ = std::io::stdout().flush();
            let with_csv = if csv_differences > 0 {
                " and its tuner config"
            } else {
                ""
            };
            eprintln!(
                "planner: {}: {} between the log and the model{with_csv}",
                report.log,
                crate::units::count(n, "difference")
            );
            std::process::exit(1);
        }
    }
}

/// The example-tuner config the log says NCCL loaded, where it is found (as named, else beside the log); a named
/// file that is not here is one notice, not an error.
fn csv_named_by_log(log: &str) -> Result<Option<TunerCsv>> {
    let text = crate::fsio::read_input_file(log)?;
    let Some((named, line)) = config_named_by_log(&text) else {
        return Ok(None);
    };
    let beside = std::path::Path::new(log)
        .parent()
        .map(|d| d.join(std::path::Path::new(&named).file_name().unwrap_or_default()));
    let found = std::iter::once(std::path::PathBuf::from(&named))
        .chain(beside)
        .find(|p| p.is_file());
    match found {
        Some(path) => TunerCsv::load(&path.to_string_lossy()).map(Some),
        None => {
            eprintln!(
                "planner: {log}:{line}: NCCL's example tuner loaded {named}, which is not here (nor beside the log): its rules are not compared; give --tuner-csv FILE"
            );
            Ok(None)
        }
    }
}
