//! `planner check FILE...`: flags -> `CheckRequest` -> `check::check` -> one of `report::check`'s formats.

use super::source::SourceArgs;
use crate::calibrate::ReadOptions;
use crate::check::{self, CheckRequest};
use crate::error::{Error, Result};
use crate::model::Coll;
use crate::model::Pair;
use crate::report::check::CheckFormat;

#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// The machine the files were measured on (default: the live probe); --nodes defaults to the files' node count
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    /// Measurements: nccl-tests output (text, with or without its NCCL_DEBUG=INFO log, or -J JSON), NCCL Inspector JSONL, planner verify result files
    #[arg(value_name = "FILE", required = true)]
    pub(crate) files: Vec<String>,
    /// A size is slow when its busbw is below the expected band by more than this, %
    #[arg(long, default_value_t = check::DEFAULT_TOLERANCE_PCT, value_name = "PCT")]
    pub(crate) tolerance: f64,
    /// The pair every row of the nccl-tests files ran (pinned with NCCL_ALGO/NCCL_PROTO, without a log in the file)
    #[arg(long, value_name = "ALGO/PROTO")]
    pub(crate) pair: Option<String>,
    /// The collective of nccl-tests text without its "# Collective test starting" line
    #[arg(long, value_name = "NAME")]
    pub(crate) coll: Option<String>,
    /// Machine-readable output on stdout (docs/json.md, `check`)
    #[arg(long, conflicts_with = "prometheus")]
    pub(crate) json: bool,
    /// A node_exporter textfile on stdout, with NCCL Inspector's labels
    #[arg(long)]
    pub(crate) prometheus: bool,
}

fn request_from(args: &CheckArgs) -> Result<CheckRequest> {
    let pair = match &args.pair {
        Some(p) => Some(Pair::parse(p).map_err(|e| Error::bad_input(format!("--pair: {e}")))?),
        None => None,
    };
    let coll = match &args.coll {
        Some(c) => Some(Coll::parse(c)?),
        None => None,
    };
    Ok(CheckRequest {
        files: args.files.clone(),
        read: ReadOptions { pair, coll },
        source: args.source.source(),
        nodes_given: args.source.nodes.is_some(),
        tolerance_pct: args.tolerance,
    })
}

pub(crate) fn run(args: CheckArgs) -> Result<()> {
    let report = check::check(&request_from(&args)?)?;
    let format: &dyn CheckFormat = if args.json {
        &crate::report::check::Json
    } else if args.prometheus {
        &crate::report::check::Prometheus
    } else {
        &crate::report::check::Table
    };
    let text = format.render(&report)?;
    if args.json || args.prometheus {
        print!("{text}");
        if args.json {
            println!();
        }
    } else {
        print!("{}", crate::report::text(&text));
    }
    match report.slow().count() {
        0 => Ok(()),
        n => Err(Error::runtime(format!(
            "{n} of {} below the expected band by more than {} %",
            crate::units::count(report.sizes.len(), "size"),
            report.tolerance_pct
        ))),
    }
}
