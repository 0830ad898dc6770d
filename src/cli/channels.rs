//! `planner channels`: NCCL's ring/tree/NVLS/CollNet graphs for the machine,
//! their connection across nodes, and the graph XML; plus the global
//! `--graph FILE` option that makes every stage use a given graph.

use super::source::{GraphArgs, NvlsArgs, SourceArgs};
use crate::error::{Error, Result};
use crate::nccl_env::{NcclEnv, WithNcclEnv};
use crate::pipeline;
use crate::search::{self, SearchOptions};
use crate::topo::Cluster;

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ChannelsArgs {
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    #[command(flatten)]
    pub(crate) graph: GraphArgs,
    /// Machine-readable output (graphs and per-rank connection; docs/json.md)
    #[arg(long, conflicts_with = "graph_xml")]
    pub(crate) json: bool,
    /// Print the graphs as NCCL's graph XML (what NCCL_GRAPH_DUMP_FILE writes)
    #[arg(long)]
    pub(crate) graph_xml: bool,
    /// Show NCCL's log lines as this rank prints them
    #[arg(long, value_name = "RANK", default_value_t = 0)]
    pub(crate) rank: usize,
    #[command(flatten)]
    pub(crate) nvls: NvlsArgs,
    /// Also search the CollNet graphs (a SHARP-capable network)
    #[arg(long)]
    pub(crate) collnet: bool,
    /// NCCL_CROSS_NIC: 0 = a channel leaves by the NIC it entered (same rail), 1 = may cross,
    /// 2 = try without then with [default: $NCCL_CROSS_NIC or 2]
    #[arg(long, value_name = "0|1|2", value_parser = clap::value_parser!(u32).range(0..=2))]
    pub(crate) cross_nic: Option<u32>,
    /// Follow the search of this NCCL version (2.18 to 2.30, or a full version such as 2.19.3) [default: the newest]
    #[arg(long, value_name = "VERSION")]
    pub(crate) nccl_version: Option<String>,
}

impl ChannelsArgs {
    /// The search options of `env` (NCCL's environment, read once), with this command's flags on top.
    pub(crate) fn options(&self, cluster: &Cluster, env: &NcclEnv) -> Result<SearchOptions> {
        let flag = self.nvls.flag();
        let nvls = crate::model::ModelInput::nvls_request(cluster, env, flag).supported();
        let mut opts = pipeline::search_options(cluster, env, nvls)?;
        opts.collnet = self.collnet || opts.collnet;
        if let Some(v) = self.cross_nic {
            opts.cross_nic = v;
        }
        if let Some(v) = &self.nccl_version {
            opts.family = search_family(v)?;
        }
        Ok(opts)
    }
}

/// `--nccl-version` as the `(major, minor)` family whose search rules apply.
fn search_family(version: &str) -> Result<search::rules::Family> {
    let family = crate::model::table::family_of(version)?;
    let mut parts = family.split('.').filter_map(|p| p.parse::<u32>().ok());
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => Ok((major, minor)),
        _ => Err(Error::bad_input(format!(
            "invalid --nccl-version '{version}': expected MAJOR.MINOR such as 2.19 or 2.28.9"
        ))),
    }
}

pub(crate) fn run(args: &ChannelsArgs) -> Result<()> {
    let (source, graph) = (&args.source, &args.graph);
    super::source::preflight::input(graph.graph.as_deref())?;
    let cluster = source.source().load()?;
    if args.rank >= cluster.n_ranks() {
        return Err(Error::bad_input(format!(
            "--rank {}: the job has {} ranks (0..{})",
            args.rank,
            cluster.n_ranks(),
            cluster.n_ranks().saturating_sub(1)
        )));
    }
    let env = &source.nccl_env;
    let options = args.options(&cluster, env)?;
    let (result, origin) = pipeline::channels(&cluster, &options, graph.graph.as_deref())?;
    if args.graph_xml {
        print!(
            "{}",
            search::graph_xml::write_graphs(&result.graphs, &cluster)?
        );
    } else if args.json {
        let doc = crate::report::channels::ChannelsJson {
            source: &cluster.node.source,
            gpus_per_node: cluster.gpus_per_node(),
            nodes: cluster.n_nodes,
            ranks: cluster.n_ranks(),
            graphs_from: &origin,
            mnnvl: crate::topo::mnnvl::info(&cluster),
            graphs: &result.graphs,
            connection: crate::report::channels::ConnectionJson::of(
                &result.connection,
                args.rank as i32,
            ),
        };
        println!(
            "{}",
            crate::report::json::render(&WithNcclEnv::new(&doc, env), "")?
        );
    } else {
        print!(
            "{}",
            crate::report::text(&crate::report::channels::render_text(
                &cluster,
                &result,
                args.rank as i32,
                &origin,
                options.family
            ))
        );
    }
    Ok(())
}
