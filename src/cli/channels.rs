//! `planner channels`: NCCL's ring/tree/NVLS/CollNet graphs for the machine,
//! their connection across nodes, and the graph XML; plus the global
//! `--graph FILE` option that makes every stage use a given graph.

use super::source::SourceArgs;
use crate::error::{Error, Result};
use crate::search::{self, SearchOptions, SearchResult};
use crate::topo::Cluster;

/// `--graph FILE`, shared by every command that needs channels.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct GraphArgs {
    /// Use the graphs in an NCCL graph XML (NCCL_GRAPH_FILE / NCCL_GRAPH_DUMP_FILE format)
    /// instead of searching; graphs the file lacks are searched
    #[arg(long, global = true, value_name = "FILE")]
    pub graph: Option<String>,
}

impl GraphArgs {
    /// Search, or load `--graph`; also says where the graphs came from.
    pub fn resolve(
        &self,
        cluster: &Cluster,
        opts: &SearchOptions,
    ) -> Result<(SearchResult, String)> {
        match &self.graph {
            Some(path) => Ok((
                search::load_graph_file_with(path, cluster, opts)?,
                format!("from {path}"),
            )),
            None => Ok((search::search(cluster, opts)?, "searched".to_string())),
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct ChannelsArgs {
    /// Machine-readable output (graphs and per-rank connection)
    #[arg(long, conflicts_with = "graph_xml")]
    pub json: bool,
    /// Print the graphs as NCCL's graph XML (what NCCL_GRAPH_DUMP_FILE writes)
    #[arg(long)]
    pub graph_xml: bool,
    /// Show NCCL's log lines as this rank prints them
    #[arg(long, value_name = "RANK", default_value_t = 0)]
    pub rank: usize,
    /// NVLink SHARP graph: on/off overrides NCCL_NVLS_ENABLE; by default it is searched
    /// where NCCL would (an NVSwitch, sm90+, NCCL_NVLS_ENABLE not 0), as `explain` does
    #[arg(long, value_name = "on|off")]
    pub nvls: Option<super::explain::OnOff>,
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
        let flag = match self.nvls {
            Some(super::explain::OnOff::On) => crate::model::input::NvlsFlag::On,
            Some(super::explain::OnOff::Off) => crate::model::input::NvlsFlag::Off,
            None => crate::model::input::NvlsFlag::Auto,
        };
        let env = crate::model::NcclEnv::from_process();
        let nvls = crate::model::ModelInput::nvls_request(cluster, &env, flag).supported();
        Ok(SearchOptions {
            nvls,
            collnet: self.collnet,
            cross_nic,
        })
    }
}

/// `NCCL_CROSS_NIC` from the environment (NCCL's default 2).
pub fn cross_nic_from_env() -> Result<u32> {
    match std::env::var("NCCL_CROSS_NIC") {
        Ok(v) if !v.trim().is_empty() => match v.trim() {
            "0" => Ok(0),
            "1" => Ok(1),
            "2" => Ok(2),
            other => Err(Error::bad_input(format!(
                "NCCL_CROSS_NIC={other}: expected 0, 1 or 2"
            ))),
        },
        _ => Ok(2),
    }
}

pub fn run(source: &SourceArgs, graph: &GraphArgs, args: &ChannelsArgs) -> Result<()> {
    let cluster = source.load()?;
    if args.rank >= cluster.n_ranks() {
        return Err(Error::bad_input(format!(
            "--rank {}: the job has {} ranks (0..{})",
            args.rank,
            cluster.n_ranks(),
            cluster.n_ranks().saturating_sub(1)
        )));
    }
    let (result, origin) = graph.resolve(&cluster, &args.options(&cluster)?)?;
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
            crate::report::channels::render_text(&cluster, &result, args.rank as i32, &origin)
        );
    }
    Ok(())
}
