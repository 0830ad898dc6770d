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

/// Largest `--nodes` accepted.
pub const MAX_NODES: usize = 4096;

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
    pub fn n_ranks(&self) -> usize {
        self.gpus_per_node() * self.n_nodes
    }
}
