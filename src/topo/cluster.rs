//! Several identical hosts joined through their NICs (`--nodes N`).

use super::Topology;

/// NCCL's multi-node view: every host has the same topology; ranks are
/// numbered host by host (`rank = node * gpus_per_node + local rank`).
#[derive(Debug, Clone)]
pub struct Cluster {
    pub node: Topology,
    pub n_nodes: usize,
    /// Extra network latency in µs (`--net-latency`), added to each NET's `latency`.
    pub net_latency_us: f64,
}

/// Largest `--nodes` accepted (`limits::MAX_NODES`).
pub use crate::limits::MAX_NODES;

impl Cluster {
    pub fn single(node: Topology) -> Self {
        Cluster {
            node,
            n_nodes: 1,
            net_latency_us: 0.0,
        }
    }
    pub fn gpus_per_node(&self) -> usize {
        self.node.gpu_count()
    }
    /// Ranks over all nodes (saturating: a node count from a file is checked by `check`, not here).
    pub fn n_ranks(&self) -> usize {
        self.gpus_per_node().saturating_mul(self.n_nodes)
    }
    /// The node count and the rank count it makes against `limits::MAX_NODES` and `limits::MAX_RANKS`.
    pub(crate) fn check(&self) -> crate::error::Result<()> {
        crate::limits::check_nodes(
            &format!("{}: node count", self.node.source),
            self.n_nodes as u64,
            self.gpus_per_node(),
        )
    }
}
