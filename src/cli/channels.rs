//! `planner channels`: NCCL's ring/tree/NVLS/CollNet graphs for the machine,
//! their connection across nodes, and the graph XML; plus the global
//! `--graph FILE` option that makes every stage use a given graph.

use super::source::{GraphArgs, NvlsArgs, SourceArgs};
use crate::error::{Error, Result};
use crate::pipeline::{self, cross_nic_from_env};
use crate::search::{self, SearchOptions};
use crate::topo::Cluster;

#[derive(Debug, Clone, clap::Args)]
pub struct ChannelsArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub graph: GraphArgs,
    /// Machine-readable output (graphs and per-rank connection; docs/json.md)
    #[arg(long, conflicts_with = "graph_xml")]
    pub json: bool,
    /// Print the graphs as NCCL's graph XML (what NCCL_GRAPH_DUMP_FILE writes)
    #[arg(long)]
    pub graph_xml: bool,
    /// Show NCCL's log lines as this rank prints them
    #[arg(long, value_name = "RANK", default_value_t = 0)]
    pub rank: usize,
    #[command(flatten)]
    pub nvls: NvlsArgs,
    /// Also search the CollNet graphs (a SHARP-capable network)
    #[arg(long)]
    pub collnet: bool,
    /// NCCL_CROSS_NIC: 0 = a channel leaves by the NIC it entered (same rail), 1 = may cross,
    /// 2 = try without then with [default: $NCCL_CROSS_NIC or 2]
    #[arg(long, value_name = "0|1|2", value_parser = clap::value_parser!(u32).range(0..=2))]
    pub cross_nic: Option<u32>,
}

impl ChannelsArgs {
    pub fn options(&self, cluster: &Cluster) -> Result<SearchOptions> {
        let cross_nic = match self.cross_nic {
            Some(v) => v,
            None => cross_nic_from_env()?,
        };
        let flag = self.nvls.flag();
        let env = crate::model::NcclEnv::from_process();
        let nvls = crate::model::ModelInput::nvls_request(cluster, &env, flag).supported();
        Ok(SearchOptions {
            nvls,
            collnet: self.collnet,
            cross_nic,
        })
    }
}

pub fn run(args: &ChannelsArgs) -> Result<()> {
    let (source, graph) = (&args.source, &args.graph);
    let cluster = source.source().load()?;
    if args.rank >= cluster.n_ranks() {
        return Err(Error::bad_input(format!(
            "--rank {}: the job has {} ranks (0..{})",
            args.rank,
            cluster.n_ranks(),
            cluster.n_ranks().saturating_sub(1)
        )));
    }
    let (result, origin) =
        pipeline::channels(&cluster, &args.options(&cluster)?, graph.graph.as_deref())?;
    if args.graph_xml {
        print!(
            "{}",
            search::graph_xml::write_graphs(&result.graphs, &cluster)?
        );
    } else if args.json {
        println!(
            "{}",
            crate::report::channels::render_json(&cluster, &result, &origin)
        );
    } else {
        print!(
            "{}",
            crate::report::text(&crate::report::channels::render_text(
                &cluster,
                &result,
                args.rank as i32,
                &origin
            ))
        );
    }
    Ok(())
}
