//! The search stage: NCCL's channel search (`src/graph/search.cc`), the double
//! binary tree (`trees.cc`) and the connection of rings and trees across nodes
//! (`connect.cc`). Input: a `Cluster`; output: plain data (`Graphs`,
//! `Connection`) that the model and the executor read. No global state.

pub mod connect;
pub(crate) mod engine;
mod memo;
pub mod graph_xml;
pub mod ladder;
pub mod rules;
pub(crate) mod system;
pub(crate) mod trees;

use crate::error::Result;
use crate::topo::{Cluster, PathType};
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
    /// NCCL's pattern number (`graph.h`); None for a number NCCL does not define.
    pub(crate) fn from_number(n: u64) -> Option<Pattern> {
        [
            Pattern::BalancedTree,
            Pattern::SplitTree,
            Pattern::Tree,
            Pattern::Ring,
            Pattern::Nvls,
            Pattern::CollNetDirect,
        ]
        .into_iter()
        .find(|p| p.number() as u64 == n)
    }
    pub(crate) fn is_tree(self) -> bool {
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
    /// The 2 x search-channel trees `connectTrees` builds and logs (`Tree c : ...`, connect.cc:168-169), before
    /// NCCL_MAX_NCHANNELS / NCCL_MAX_CTAS cut the runtime channels; the audit compares those lines with these.
    #[serde(skip)]
    pub preset_trees: Vec<Vec<TreeLinks>>,
    /// Search channels connected (`min(ring, tree)`), before the runtime multipliers.
    pub search_channels: usize,
    pub n_nodes: usize,
    pub gpus_per_node: usize,
    /// NCCL's tree depth estimate: `nRanks/nNodes - 1 + log2i(nNodes)`.
    pub tree_depth: usize,
    /// Per search channel, the local ranks that face other nodes in the tree:
    /// `[to parent, to child 0, to child 1]` (NCCL's `treeToParent/Child0/Child1`).
    pub tree_heads: Vec<[i32; 3]>,
}

impl Connection {
    pub fn n_ranks(&self) -> usize {
        self.n_nodes * self.gpus_per_node
    }
    /// Ring predecessor and successor of `rank` on runtime channel `channel`.
    pub fn ring_neighbours(&self, channel: usize, rank: i32) -> Option<(i32, i32)> {
        let ring = self.rings.get(channel)?;
        let pos = ring.iter().position(|&r| r == rank)?;
        let n = ring.len();
        Some((ring[(pos + n - 1) % n], ring[(pos + 1) % n]))
    }
    /// Whether NCCL logs a `Tree c : ...` line for `rank` (it faces another node).
    pub(crate) fn faces_other_nodes(&self, search_channel: usize, rank: i32) -> bool {
        let local = rank.rem_euclid(self.gpus_per_node.max(1) as i32);
        self.tree_heads
            .get(search_channel)
            .is_some_and(|h| h.contains(&local))
    }
}

/// Knobs of the search (NCCL environment variables and planner flags).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchOptions {
    /// NVLS allowed (`NCCL_NVLS_ENABLE` != 0 and multicast present); the NVLS graph is searched only then.
    pub nvls: bool,
    /// CollNet (SHARP) network present and enabled.
    pub collnet: bool,
    /// `NCCL_CROSS_NIC` (0, 1, 2 = try without then with; 3 = any other value, searched as 0).
    pub cross_nic: u32,
    /// Runtime channels at most: `min(NCCL_MAX_NCHANNELS, NCCL_MAX_CTAS)` (connect.cc:503).
    pub max_channels: usize,
    /// Runtime channels at least, by copying: `max(NCCL_MIN_NCHANNELS, NCCL_MIN_CTAS)` (connect.cc:505).
    pub min_channels: usize,
    /// The NCCL release family whose search rules apply (`rules::SearchRule`); the newest by default.
    pub family: rules::Family,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            nvls: false,
            collnet: false,
            cross_nic: 2,
            max_channels: crate::limits::MAX_CHANNELS,
            min_channels: 1,
            family: rules::NEWEST,
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
pub fn search(cluster: &Cluster, opts: &SearchOptions) -> Result<SearchResult> {
    search_with_presets(cluster, opts, &[])
}

/// Use the graphs of an `NCCL_GRAPH_FILE`-format file instead of searching
/// (graphs the file does not hold are searched, as NCCL does).
pub fn load_graph_file(path: &str, cluster: &Cluster) -> Result<SearchResult> {
    load_graph_file_with(path, cluster, &SearchOptions::default())
}

/// `load_graph_file` with explicit search options for the graphs not in the file.
pub fn load_graph_file_with(
    path: &str,
    cluster: &Cluster,
    opts: &SearchOptions,
) -> Result<SearchResult> {
    let text = crate::units::read_input_file(path)?;
    graphs_from_text(&text, path, cluster, opts)
}

/// Graph XML text (`NCCL_GRAPH_FILE` format, `source` names it in errors) checked against `cluster`, searched
/// where the text lacks a graph and connected: the entry point for any graph text (a fuzz target is one line).
pub fn graphs_from_text(
    text: &str,
    source: &str,
    cluster: &Cluster,
    opts: &SearchOptions,
) -> Result<SearchResult> {
    let root = crate::xml::parse(text, source)?;
    let sys = search_system(cluster)?;
    let presets = graph_xml::parse_graphs(&root, &sys, source)?;
    search_on(&sys, cluster, opts, &presets)
}

/// Search with some graphs given (by id); the rest are searched.
pub(crate) fn search_with_presets(
    cluster: &Cluster,
    opts: &SearchOptions,
    presets: &[engine::Graph],
) -> Result<SearchResult> {
    let sys = search_system(cluster)?;
    search_on(&sys, cluster, opts, presets)
}

/// The search's view of one host of `cluster`; `--net-latency` is added to every
/// NET's latency (it becomes the graphs' `latencyInter`).
pub(crate) fn search_system(cluster: &Cluster) -> Result<system::SearchSystem> {
    cluster.check()?;
    let mut sys = system::SearchSystem::new(&cluster.node, cluster.n_nodes > 1)?;
    for net in &mut sys.nets {
        net.latency += cluster.net_latency_us as f32;
    }
    Ok(sys)
}

fn search_on(
    sys: &system::SearchSystem,
    cluster: &Cluster,
    opts: &SearchOptions,
    presets: &[engine::Graph],
) -> Result<SearchResult> {
    // One GPU on one node is searched like any other (NCCL logs its graphs: a ring and a tree of 16 one-GPU
    // channels, `search.cc` ncclTopoSearchInit's LOC_BW case); its collectives never use them (a local copy).
    let graphs = search_graphs(sys, opts, presets);
    let connection = connect::connect(cluster, &graphs, opts)?;
    Ok(SearchResult { graphs, connection })
}

/// The graphs NCCL computes at init, in NCCL's order (`init.cc`), all on one thread with the stack the
/// recursion needs (`engine::with_search_stack`: one thread start, not one per graph).
pub(crate) fn search_graphs(
    sys: &system::SearchSystem,
    opts: &SearchOptions,
    presets: &[engine::Graph],
) -> Graphs {
    engine::with_search_stack(sys.ngpus, || search_graphs_here(sys, opts, presets))
}

fn search_graphs_here(
    sys: &system::SearchSystem,
    opts: &SearchOptions,
    presets: &[engine::Graph],
) -> Graphs {
    let mut st = sys.fresh_state();
    let preset = |id: u32| {
        presets
            .iter()
            .find(|g| g.id == id && !(opts.cross_nic == 0 && g.cross_nic == 1))
    };
    let mut run = |id: u32, pattern: Pattern, coll_net: bool, min: usize, max: usize| {
        let req = engine::GraphRequest {
            id,
            pattern,
            coll_net,
            min_channels: min,
            max_channels: max,
            cross_nic_param: opts.cross_nic,
            dup_before_pass2: rules::has(opts.family, rules::SearchRule::DupBeforePass2),
            family: opts.family,
        };
        engine::compute_with(sys, &mut st, req, preset(id), engine::Shortcuts::ALL)
    };
    // init.cc: ringGraph->maxChannels = MAXCHANNELS/2, MAXCHANNELS of the family (rules::SearchRule::MaxChannels64).
    let max_channels = rules::max_channels(opts.family);
    let ring = run(0, Pattern::Ring, false, 1, max_channels / 2);
    let n = ring.n_channels;
    let tree = run(1, Pattern::BalancedTree, false, n, n);
    let (collnet_chain, collnet_direct) = if opts.collnet {
        let chain = run(2, Pattern::Tree, true, n, n);
        let direct = run(4, Pattern::CollNetDirect, true, 1, max_channels);
        (Some(chain), Some(direct))
    } else {
        (None, None)
    };
    let nvls = opts
        .nvls
        .then(|| run(3, Pattern::Nvls, false, 1, max_channels));
    let public = |g: &engine::Graph| to_public(sys, g);
    Graphs {
        ring: public(&ring),
        tree: public(&tree),
        collnet_chain: collnet_chain.as_ref().map(public),
        collnet_direct: collnet_direct.as_ref().map(public),
        nvls: nvls.as_ref().map(public),
    }
}

/// An `f32` as the `f64` a person would write (`45.1`, not `45.099998474121094`).
pub(crate) fn f32_to_f64(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(x as f64)
}

fn to_public(sys: &system::SearchSystem, g: &engine::Graph) -> SearchGraph {
    let ngpus = sys.ngpus;
    let width = if g.id == 3 { 1 } else { ngpus };
    let channels = (0..g.n_channels)
        .map(|c| SearchChannel {
            ranks: g.intra[c * ngpus..c * ngpus + width].to_vec(),
            net_in: sys.inter.then(|| g.inter[2 * c]),
            net_out: sys.inter.then(|| g.inter[2 * c + 1]),
        })
        .collect();
    SearchGraph {
        id: g.id,
        pattern: g.pattern,
        cross_nic: g.cross_nic,
        n_channels: g.n_channels,
        bw_intra: f32_to_f64(g.bw_intra),
        bw_inter: f32_to_f64(g.bw_inter),
        type_intra: g.type_intra,
        type_inter: g.type_inter,
        latency_inter: f32_to_f64(g.latency_inter),
        same_channels: g.same_channels,
        channels,
    }
}
