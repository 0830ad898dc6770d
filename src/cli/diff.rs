//! `planner diff`: two NCCL versions on one machine (`--nccl-version A --against B`), or two
//! verify result files (`RUN_A.json RUN_B.json`). Thin: flags -> `diff` -> `report`.

use super::source::{GraphArgs, NvlsArgs, SizeArgs, SourceArgs};
use crate::diff::{diff_runs, diff_versions, VersionDiffOptions};
use crate::error::{Error, Result};
use crate::model::Coll;
use crate::pipeline;
use crate::report::diff as out;
use crate::result_file::VerifyRun;

#[derive(Debug, clap::Args)]
#[command(
    mut_arg("size", |a| a.help("One message size in bytes, binary units (16K, 16M = 16 MiB, 1G) [default: the --sweep]")),
    mut_arg("sweep", |a| a.help("A range of sizes LO..HI, both included, doubling each step [default: 8..4G]"))
)]
pub(crate) struct DiffArgs {
    /// With --against: the topology both versions model
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    #[command(flatten)]
    pub(crate) graph: GraphArgs,
    /// Two `planner verify` result files, A then B (e.g. before and after a driver or NCCL change); they are compared
    /// as measured, so none of the model's flags apply
    #[arg(value_name = "RUN.json", conflicts_with_all = [
        "nccl_version", "against", "size", "sweep", "coll", "nvls", "fixture", "topo", "nodes", "net_latency", "graph"
    ])]
    pub(crate) runs: Vec<String>,
    /// NCCL version or family A (default: the libnccl on this machine, else the newest)
    #[arg(long, value_name = "VERSION")]
    pub(crate) nccl_version: Option<String>,
    /// NCCL version or family B to compare A with (2.18 .. 2.30)
    #[arg(long, value_name = "VERSION")]
    pub(crate) against: Option<String>,
    /// Sizes to compare: --size S (one) or --sweep LO..HI (doubling); default 8..4G
    #[command(flatten)]
    pub(crate) sizes: SizeArgs,
    /// Collectives: all, or a comma list of all-reduce, all-gather, reduce-scatter, broadcast, reduce
    #[arg(long, default_value = "all")]
    pub(crate) coll: String,
    #[command(flatten)]
    pub(crate) nvls: NvlsArgs,
    /// Draw the ratio B/A per pair against size (two result files only)
    #[arg(long, value_name = "FILE.svg", conflicts_with = "against")]
    pub(crate) plot: Option<String>,
    /// Machine-readable output (docs/json.md)
    #[arg(long)]
    pub(crate) json: bool,
}

fn write_json(value: &impl serde::Serialize) -> Result<()> {
    println!("{}", crate::report::json::render(value, "")?);
    Ok(())
}

/// `--coll all` or a comma-separated list (also `planner expect`'s).
pub(super) fn colls(text: &str) -> Result<Vec<Coll>> {
    if text.trim().eq_ignore_ascii_case("all") {
        return Ok(vec![
            Coll::AllReduce,
            Coll::AllGather,
            Coll::ReduceScatter,
            Coll::Broadcast,
            Coll::Reduce,
        ]);
    }
    let mut out = Vec::new();
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        let c = Coll::parse(part.trim())?;
        if !out.contains(&c) {
            out.push(c);
        }
    }
    if out.is_empty() {
        return Err(Error::bad_input(format!(
            "invalid --coll '{text}': give all or a list such as all-reduce,all-gather"
        )));
    }
    Ok(out)
}

pub(crate) fn run(args: DiffArgs) -> Result<()> {
    let (source, graph) = (&args.source, &args.graph);
    match (args.runs.as_slice(), &args.against) {
        ([a, b], None) => {
            if args.nccl_version.is_some() {
                return Err(Error::bad_input(
                    "--nccl-version compares model versions (with --against); two result files are compared as measured",
                ));
            }
            super::source::preflight::output(args.plot.as_deref())?;
            let (ra, rb) = (VerifyRun::load(a)?, VerifyRun::load(b)?);
            let d = diff_runs(&ra, a, &rb, b)?;
            if let Some(path) = &args.plot {
                let svg = out::runs_svg(&d)?;
                crate::fsio::write_output(path, svg.as_bytes())?;
                eprintln!("planner: wrote {path}");
            }
            if args.json {
                return write_json(&d);
            }
            print!("{}", crate::report::text(&out::runs_text(&d)));
            Ok(())
        }
        ([], Some(against)) => {
            if args.plot.is_some() {
                return Err(Error::bad_input(
                    "--plot draws the ratios of two result files; for versions use --json",
                ));
            }
            let sizes = args.sizes.sizes("8..4G")?;
            super::source::preflight::sizes(&sizes, args.sizes.size.is_some(), 1)?;
            super::source::SizeArgs::as_run(&sizes, 4, "float32");
            super::source::preflight::input(graph.graph.as_deref())?;
            let colls = colls(&args.coll)?;
            let from = match &args.nccl_version {
                Some(v) => v.clone(),
                None => pipeline::choose_table(None, None, None)?.family,
            };
            let d = diff_versions(&VersionDiffOptions {
                from,
                against: against.clone(),
                source: source.source(),
                graph_file: graph.graph.clone(),
                colls,
                sizes,
                env: source.nccl_env.clone(),
                nvls: args.nvls.flag(),
            })?;
            if args.json {
                // The models of both versions ran under these NCCL_* variables.
                return write_json(&crate::nccl_env::WithNcclEnv::new(&d, &source.nccl_env));
            }
            print!("{}", crate::report::text(&out::versions_text(&d)));
            Ok(())
        }
        (runs, against) => Err(Error::bad_input(format!(
            "planner diff compares two verify result files (RUN_A.json RUN_B.json) or two NCCL versions (--nccl-version A --against B); got {}{}",
            crate::units::count(runs.len(), "file"),
            if against.is_some() { " and --against" } else { "" }
        ))),
    }
}
