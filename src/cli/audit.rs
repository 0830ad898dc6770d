//! `planner audit NCCL_LOG`: compare an NCCL_DEBUG=INFO log with the model
//! for the same machine. Thin: read, build, compare, hand to `report`.

use super::channels::GraphArgs;
use super::explain::{choose_table, graphs_for, ModelArgs};
use super::source::SourceArgs;
use crate::audit::audit;
use crate::audit::log::NcclLog;
use crate::error::{Error, Result};
use crate::model::input::NvlsFlag;
use crate::model::{Model, ModelInput, NcclEnv};
use crate::search::{Graphs, Pattern, SearchGraph};
use std::path::Path;

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

/// The log's graph lines and its runtime channel count.
fn graphs_from_log(log: &NcclLog) -> Result<(Graphs, usize)> {
    let pattern = |n: u32| match n {
        1 => Pattern::BalancedTree,
        2 => Pattern::SplitTree,
        3 => Pattern::Tree,
        5 => Pattern::Nvls,
        6 => Pattern::CollNetDirect,
        _ => Pattern::Ring,
    };
    let graph = |i: usize, id: u32| -> Option<SearchGraph> {
        let g = log.graphs.get(i)?;
        Some(SearchGraph {
            id,
            pattern: pattern(g.pattern),
            cross_nic: g.cross_nic,
            n_channels: g.n_channels,
            bw_intra: g.bw_intra,
            bw_inter: g.bw_inter,
            type_intra: g.type_intra,
            type_inter: g.type_inter,
            latency_inter: 0.0,
            same_channels: g.same_channels,
            channels: Vec::new(),
        })
    };
    let missing = |what: &str| {
        Error::bad_input(format!(
            "{}: --log-graphs needs the log's {what} line (NCCL_DEBUG_SUBSYS must include GRAPH and INIT)",
            log.source
        ))
    };
    let ring = graph(0, 0).ok_or_else(|| missing("ring graph 'Pattern ...'"))?;
    let tree = graph(1, 1).ok_or_else(|| missing("tree graph 'Pattern ...'"))?;
    let mut collnet_chain = None;
    let mut collnet_direct = None;
    let mut nvls = None;
    for i in 2..log.graphs.len() {
        match log.graphs[i].pattern {
            6 => collnet_direct = graph(i, 4),
            5 => nvls = graph(i, 3),
            _ => collnet_chain = graph(i, 2),
        }
    }
    let (channels, _, _) = log.channels.ok_or_else(|| missing("'N coll channels'"))?;
    Ok((
        Graphs {
            ring,
            tree,
            collnet_chain,
            collnet_direct,
            nvls,
        },
        channels,
    ))
}

/// The topology file: --topo/--fixture, else the log's NCCL_TOPO_DUMP_FILE next to the log.
fn source_for(source: &SourceArgs, log: &NcclLog, log_path: &str) -> Result<SourceArgs> {
    if source.topo.is_some() || source.fixture.is_some() {
        return Ok(source.clone());
    }
    let dir = Path::parent(Path::new(log_path)).unwrap_or(Path::new("."));
    let dump = log.env_value("NCCL_TOPO_DUMP_FILE").ok_or_else(|| {
        Error::bad_input(format!(
            "{log_path}: no topology: pass --topo FILE (the log names no NCCL_TOPO_DUMP_FILE)"
        ))
    })?;
    let name = Path::new(dump)
        .file_name()
        .map(Path::new)
        .unwrap_or(Path::new(dump));
    let candidates = [dir.join(dump), dir.join(name)];
    let found = candidates.iter().find(|p| p.is_file()).ok_or_else(|| {
        Error::bad_input(format!(
            "{log_path}: no topology: the log's NCCL_TOPO_DUMP_FILE {dump} is not next to it; pass --topo FILE"
        ))
    })?;
    let mut s = source.clone();
    s.topo = Some(found.to_string_lossy().into_owned());
    Ok(s)
}

pub fn run(source: &SourceArgs, graph: &GraphArgs, args: AuditArgs) -> Result<()> {
    let log = NcclLog::load(&args.log)?;
    let table = choose_table(&args.model, log.version.as_deref())?;
    let src = source_for(source, &log, &args.log)?;
    let mut cluster = src.load()?;
    // The dump is one node; the log says how many there were.
    if let Some(n) = log.n_nodes {
        cluster.n_nodes = n.max(1);
    }
    let env = NcclEnv::from_pairs(log.env.iter().map(|(n, v, _)| (n.clone(), v.clone())));
    let nvls_state = ModelInput::nvls_request(&cluster, &env, NvlsFlag::Auto);
    let (graphs, channels, ours) = if args.log_graphs {
        let (g, c) = graphs_from_log(&log)?;
        (g, c, false)
    } else {
        let r = graphs_for(&cluster, &env, nvls_state.supported(), graph).map_err(|e| {
            Error::runtime(format!(
                "{} (use --log-graphs to audit the cost model with the log's own graphs)",
                e.message()
            ))
        })?;
        (r.0, r.1, true)
    };
    let input = ModelInput::from_graphs(&cluster, &graphs, channels, &env, nvls_state, &table)?;
    let model = Model::new(input, env, table)?;
    let report = audit(&log, &model, ours.then_some(&graphs))?;
    if args.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| Error::runtime(format!("cannot write JSON: {e}")))?;
        println!("{text}");
    } else {
        print!("{}", crate::report::audit::audit_text(&report));
    }
    Ok(())
}
