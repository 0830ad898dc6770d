//! The search stage: NCCL's channel search (`src/graph/search.cc`), the double
//! binary tree (`trees.cc`) and the connection of rings and trees across nodes
//! (`connect.cc`). Input: a `Cluster`; output: plain data (`Graphs`,
//! `Connection`) that the model and the executor read. No global state.

use crate::topo::PathType;
use serde::Serialize;

/// NCCL's graph patterns (`graph.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Pattern {
    BalancedTree = 1,
    SplitTree = 2,
    Tree = 3,
    Ring = 4,
    Nvls = 5,
    CollNetDirect = 6,
}

impl Pattern {
    pub fn number(self) -> u32 {
        self as u32
    }
    pub fn is_tree(self) -> bool {
        matches!(
            self,
            Pattern::BalancedTree | Pattern::SplitTree | Pattern::Tree
        )
    }
}

/// One search channel: the GPU order inside the node and, multi-node, the NETs
/// it enters and leaves by.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchChannel {
    /// Ranks in order (NCCL's `intra[c*nGPUs + i]`).
    pub ranks: Vec<i32>,
    /// NET dev entered / left (NCCL's `inter[2c]`, `inter[2c+1]`); None on one node.
    pub net_in: Option<i64>,
    pub net_out: Option<i64>,
}

/// The result of one graph search (NCCL's `ncclTopoGraph`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchGraph {
    /// Graph id as in NCCL's graph XML: ring 0, tree 1, collnet chain 2, nvls 3, collnet direct 4.
    pub id: u32,
    pub pattern: Pattern,
    pub cross_nic: u32,
    pub n_channels: usize,
    /// Per-channel bandwidth inside the node, GB/s.
    pub bw_intra: f64,
    /// Per-channel bandwidth to the network, GB/s.
    pub bw_inter: f64,
    pub type_intra: PathType,
    pub type_inter: PathType,
    /// µs, the first NET's `latency` (0 for NCCL's built-in plugins).
    pub latency_inter: f64,
    pub same_channels: bool,
    pub channels: Vec<SearchChannel>,
}

impl SearchGraph {
    /// An empty graph as NCCL reports a search it did not run or that found nothing.
    pub fn empty(id: u32, pattern: Pattern) -> Self {
        SearchGraph {
            id,
            pattern,
            cross_nic: 0,
            n_channels: 0,
            bw_intra: 0.0,
            bw_inter: 0.0,
            type_intra: PathType::Loc,
            type_inter: PathType::Loc,
            latency_inter: 0.0,
            same_channels: false,
            channels: Vec::new(),
        }
    }
}

/// Every graph NCCL computes at init.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Graphs {
    pub ring: SearchGraph,
    pub tree: SearchGraph,
    /// `None` when NCCL would not search it (collnet disabled / no NVLS support).
    pub collnet_chain: Option<SearchGraph>,
    pub collnet_direct: Option<SearchGraph>,
    pub nvls: Option<SearchGraph>,
}

/// Tree neighbours of one rank on one channel (NCCL's `ncclTree`); -1 = none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TreeLinks {
    pub up: i32,
    pub down: [i32; 3],
}

/// What every rank is connected to, per runtime channel (NCCL's `connect.cc`
/// postset and `rings.cc`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Connection {
    /// Runtime channel count (`comm->nChannels`): the search count x2 and the other multipliers.
    pub n_channels: usize,
    /// Per runtime channel: the ring as a rank sequence starting at rank 0
    /// (rank r sends to the rank after it, the last sends to the first).
    pub rings: Vec<Vec<i32>>,
    /// Per runtime channel, per rank: tree parent and children.
    pub trees: Vec<Vec<TreeLinks>>,
}

/// Knobs of the search (NCCL environment variables and planner flags).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchOptions {
    /// NVLS allowed (`NCCL_NVLS_ENABLE` != 0 and multicast present); the NVLS graph is searched only then.
    pub nvls: bool,
    /// CollNet (SHARP) network present and enabled.
    pub collnet: bool,
    /// `NCCL_CROSS_NIC` (0, 1, 2 = try without then with).
    pub cross_nic: u32,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            nvls: false,
            collnet: false,
            cross_nic: 2,
        }
    }
}

/// Search plus connection.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchResult {
    pub graphs: Graphs,
    pub connection: Connection,
}

/// Run NCCL's searches on `cluster` and connect the result across nodes.
pub fn search(
    cluster: &crate::topo::Cluster,
    _opts: &SearchOptions,
) -> crate::error::Result<SearchResult> {
    Err(crate::error::Error::runtime(format!(
        "{}: the channel search is not written yet",
        cluster.node.source
    )))
}
