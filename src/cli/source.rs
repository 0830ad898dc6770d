//! Where the topology comes from, shared by every command: the live probe by
//! default, `--fixture NAME`, or `--topo FILE`, replicated by `--nodes`.

use crate::error::{Error, Result};
use crate::probe::{self, ProbeError};
use crate::topo::paths::PathOptions;
use crate::topo::{build, cluster::MAX_NODES, fixtures, Cluster, Topology};
use crate::xml;

#[derive(Debug, Clone, clap::Args)]
pub struct SourceArgs {
    /// Use a built-in topology instead of probing (see `planner fixtures`)
    #[arg(long, global = true, value_name = "NAME", conflicts_with = "topo")]
    pub fixture: Option<String>,
    /// Use an NCCL topology XML file (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE format)
    #[arg(long, global = true, value_name = "FILE")]
    pub topo: Option<String>,
    /// Replicate the node N times, joined through its NICs
    #[arg(long, global = true, value_name = "N", default_value_t = 1)]
    pub nodes: usize,
    /// Network latency in µs added to every NIC (NCCL's built-in IB plugin reports 0)
    #[arg(long, global = true, value_name = "US", default_value_t = 0.0)]
    pub net_latency: f64,
}

impl SourceArgs {
    /// Load the topology, printing the fallback notice when no GPU is found.
    pub fn load(&self) -> Result<Cluster> {
        if self.nodes == 0 || self.nodes > MAX_NODES {
            return Err(Error::bad_input(format!(
                "invalid --nodes {}: must be between 1 and {MAX_NODES}",
                self.nodes
            )));
        }
        if !self.net_latency.is_finite() || self.net_latency < 0.0 {
            return Err(Error::bad_input(format!(
                "invalid --net-latency {}: must be a non-negative number of µs",
                self.net_latency
            )));
        }
        let node = self.load_node()?;
        if self.nodes > 1 && node.nodes(crate::topo::NodeKind::Net).is_empty() {
            return Err(Error::bad_input(format!(
                "--nodes {}: the topology ({}) has no NIC to join nodes through",
                self.nodes, node.source
            )));
        }
        Ok(Cluster {
            node,
            n_nodes: self.nodes,
            net_latency_us: self.net_latency,
        })
    }

    fn load_node(&self) -> Result<Topology> {
        if let Some(name) = &self.fixture {
            return load_fixture(name);
        }
        if let Some(path) = &self.topo {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Error::bad_input(format!("{path}: cannot read: {e}")))?;
            let root = xml::parse(&text, path)?;
            return build::from_xml_with(&root, path, &PathOptions::from_env()?);
        }
        match probe::probe() {
            Ok(root) => build::from_xml_with(&root, "live probe", &PathOptions::from_env()?),
            Err(ProbeError::Unavailable(why)) => {
                eprintln!(
                    "planner: no GPU found ({why}); using built-in fixture {}; pass --fixture or --topo to choose",
                    fixtures::DEFAULT_FIXTURE
                );
                load_fixture(fixtures::DEFAULT_FIXTURE)
            }
            Err(ProbeError::Failed(e)) => Err(e),
        }
    }
}

pub fn load_fixture(name: &str) -> Result<Topology> {
    let fixture = fixtures::find(name).ok_or_else(|| {
        Error::bad_input(format!(
            "unknown fixture '{name}'; known fixtures: {}",
            fixtures::names().join(", ")
        ))
    })?;
    let source = format!("fixture {name}");
    let root = xml::parse(fixture.xml, &source)?;
    build::from_xml_with(&root, &source, &PathOptions::from_env()?)
}
