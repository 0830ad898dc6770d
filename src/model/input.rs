//! What the cost model needs to know, as plain data. `ModelInput::from_search`
//! fills it from a `Cluster` and a `SearchResult` the way NCCL's init does
//! (`init.cc`: graph alignment across ranks, NVLS and CollNet support);
//! tests build it by hand.

use super::rules::Rule;
use super::table::TuningTable;
use crate::error::{Error, Result};
use crate::nccl_env::NcclEnv;
use crate::search::{Graphs, Pattern, SearchGraph, SearchResult};
use crate::topo::{Cluster, CpuArch, CpuVendor, NodeKind, PathType};
use serde::Serialize;

/// The part of an NCCL graph (`ncclTopoGraph`) the model reads, after the
/// cross-rank alignment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GraphInfo {
    pub pattern: Pattern,
    /// Search channels (not the doubled runtime count).
    pub n_channels: usize,
    /// Per-channel bandwidth, GB/s (`float` in NCCL).
    pub bw_intra: f32,
    pub bw_inter: f32,
    pub type_intra: PathType,
    pub type_inter: PathType,
    /// µs, the NET's `latency` property (0 for NCCL's built-in plugins).
    pub latency_inter: f32,
    pub same_channels: bool,
}

impl GraphInfo {
    /// A graph NCCL did not search: zero-filled (`memset`), types LOC.
    pub fn empty(pattern: Pattern) -> GraphInfo {
        GraphInfo {
            pattern,
            n_channels: 0,
            bw_intra: 0.0,
            bw_inter: 0.0,
            type_intra: PathType::Loc,
            type_inter: PathType::Loc,
            latency_inter: 0.0,
            same_channels: false,
        }
    }

    pub(crate) fn from_search(g: &SearchGraph) -> GraphInfo {
        GraphInfo {
            pattern: g.pattern,
            n_channels: g.n_channels,
            bw_intra: g.bw_intra as f32,
            bw_inter: g.bw_inter as f32,
            type_intra: g.type_intra,
            type_inter: g.type_inter,
            latency_inter: g.latency_inter as f32,
            same_channels: g.same_channels,
        }
    }
}

/// Whether NVLS (NVLink SHARP) is usable, and if not, why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum NvlsState {
    Supported,
    /// Switched off by the user (`NCCL_NVLS_ENABLE=0`, `--nvls off`).
    Disabled(String),
    /// The machine cannot: no NVSwitch, GPUs older than sm90, fewer than 2 GPUs,
    /// or the NVLS search found no channels.
    Unavailable(String),
}

impl NvlsState {
    pub fn supported(&self) -> bool {
        matches!(self, NvlsState::Supported)
    }

    /// Why NVLS cannot be used (empty when it can).
    pub(crate) fn why(&self) -> String {
        match self {
            NvlsState::Supported => String::new(),
            NvlsState::Disabled(by) => format!("disabled by {by}"),
            NvlsState::Unavailable(why) => why.clone(),
        }
    }
}

/// Everything the model reads about the machine and the graphs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelInput {
    pub n_ranks: usize,
    pub n_nodes: usize,
    /// GPUs per node (NCCL's `localRanks` and `maxLocalRanks`; nodes are identical).
    pub local_ranks: usize,
    /// Lowest and highest compute capability x10 (`minCompCap`, `maxCompCap`).
    pub min_sm: u32,
    pub max_sm: u32,
    pub cpu_arch: CpuArch,
    pub cpu_vendor: CpuVendor,
    /// The topology has an NVSwitch node (`ncclTopoGetNvsCount > 0`).
    pub has_nvswitch: bool,
    pub ring: GraphInfo,
    pub tree: GraphInfo,
    pub collnet_chain: GraphInfo,
    pub collnet_direct: GraphInfo,
    pub nvls: GraphInfo,
    /// Highest tree pattern over the ranks (`comm->maxTreePattern`).
    pub max_tree_pattern: Pattern,
    /// Runtime channels (`comm->nChannels`).
    pub channels: usize,
    pub nvls_state: NvlsState,
    /// `comm->nvlsChannels` (0 without NVLS).
    pub nvls_channels: usize,
    /// CollNet (SHARP) usable (`config.collnetEnable` after init's checks).
    pub collnet_enable: bool,
    /// The collnet plugin supports chains (`collNetChainSupport`).
    pub collnet_chain_support: bool,
    /// CollNetDirect heads (`collNetHeadsNum`, NICs per node used by collnet direct).
    pub collnet_heads: usize,
    /// The net plugin's device type is the host (no device offload); PAT needs it.
    pub net_device_host: bool,
}

/// NVLS request from the planner's flags, on top of `NCCL_NVLS_ENABLE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum NvlsFlag {
    /// Follow `NCCL_NVLS_ENABLE` (default 2: use it where the hardware has it).
    Auto,
    On,
    Off,
}

impl ModelInput {
    /// The graph NCCL uses for each algorithm (`graphs[]` in `init.cc`).
    pub(crate) fn graph(&self, algo: super::Algo) -> &GraphInfo {
        use super::Algo::*;
        match algo {
            Tree | Pat => &self.tree,
            Ring => &self.ring,
            CollNetDirect => &self.collnet_direct,
            CollNetChain => &self.collnet_chain,
            Nvls | NvlsTree => &self.nvls,
        }
    }

    /// Ranks per node as NCCL's integer `nRanks/nNodes`.
    pub(crate) fn ppn(&self) -> usize {
        self.n_ranks / self.n_nodes.max(1)
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.n_ranks == 0 || self.n_nodes == 0 || self.n_nodes > self.n_ranks {
            return Err(Error::bad_input(format!(
                "model input: {} ranks on {} nodes is not a valid communicator",
                self.n_ranks, self.n_nodes
            )));
        }
        if self.n_ranks > 1 && self.channels == 0 {
            return Err(Error::bad_input(
                "model input: the communicator has 0 channels (the ring search found nothing)",
            ));
        }
        Ok(())
    }

    /// Decide NVLS the way NCCL's `ncclNvlsInit` does, with `--nvls` on top.
    /// Returns the state before the NVLS search (which may still find nothing).
    pub fn nvls_request(cluster: &Cluster, env: &NcclEnv, flag: NvlsFlag) -> NvlsState {
        let (min_sm, _) = cluster.node.sm_range();
        let enable = match flag {
            NvlsFlag::On => 1,
            NvlsFlag::Off => {
                return NvlsState::Disabled("--nvls off".to_string());
            }
            NvlsFlag::Auto => env.nvls_enable.unwrap_or(2),
        };
        if enable == 0 {
            return NvlsState::Disabled("NCCL_NVLS_ENABLE=0".to_string());
        }
        if cluster.n_ranks() < 2 {
            return NvlsState::Unavailable("needs at least 2 GPUs".to_string());
        }
        // NCCL_NVLS_ENABLE=2 asks CUDA for multicast, which needs an NVSwitch
        // with NVLink SHARP and sm90+; =1 forces it but the search still needs both.
        if !cluster.node.has_nvswitch() || min_sm < 90 {
            return NvlsState::Unavailable("needs an NVSwitch with reduction, sm90+".to_string());
        }
        NvlsState::Supported
    }

    /// Build the input from a searched cluster. `nvls` is the state from
    /// `nvls_request` (the search was run with NVLS iff it is `Supported`).
    pub fn from_search(
        cluster: &Cluster,
        result: &SearchResult,
        env: &NcclEnv,
        nvls: NvlsState,
        table: &TuningTable,
    ) -> Result<ModelInput> {
        ModelInput::from_graphs(
            cluster,
            &result.graphs,
            result.connection.n_channels,
            env,
            nvls,
            table,
        )
    }

    /// As `from_search`, from graphs and the runtime channel count
    /// (`comm->nChannels`) given separately (NCCL's graph dump, a log).
    pub(crate) fn from_graphs(
        cluster: &Cluster,
        graphs: &Graphs,
        channels: usize,
        env: &NcclEnv,
        nvls: NvlsState,
        table: &TuningTable,
    ) -> Result<ModelInput> {
        let topo = &cluster.node;
        let (min_sm, max_sm) = topo.sm_range();
        let (cpu_arch, cpu_vendor) = topo
            .first_cpu()
            .map(|c| (c.arch, c.vendor))
            .unwrap_or((CpuArch::Unknown, CpuVendor::Unknown));
        let mut ring = GraphInfo::from_search(&graphs.ring);
        let mut tree = GraphInfo::from_search(&graphs.tree);
        // init.cc: tree and ring use the smaller of the two channel counts.
        let common = ring.n_channels.min(tree.n_channels);
        ring.n_channels = common;
        tree.n_channels = common;
        let optional = |g: &Option<SearchGraph>, pattern: Pattern| {
            g.as_ref()
                .map(GraphInfo::from_search)
                .unwrap_or_else(|| GraphInfo::empty(pattern))
        };
        let collnet_chain = optional(&graphs.collnet_chain, Pattern::Tree);
        let collnet_direct = optional(&graphs.collnet_direct, Pattern::CollNetDirect);
        let nvls_graph = optional(&graphs.nvls, Pattern::Nvls);
        let nvls_state = match nvls {
            NvlsState::Supported if nvls_graph.n_channels == 0 => {
                NvlsState::Unavailable("the NVLS search found no channels".to_string())
            }
            other => other,
        };
        let nvls_channels = if nvls_state.supported() {
            let mut count = nvls_channel_count(table, min_sm, cluster.n_nodes);
            if min_sm >= 100 && cluster.n_nodes > 1 && table.has(Rule::NvlsSm100MultiNodeTuning) {
                count = nvls_sm100_multi_node_channels(
                    count,
                    cluster.n_nodes,
                    cluster.gpus_per_node(),
                    min_net_bw(cluster),
                );
            }
            nvls_channels_under(env, count)
        } else {
            0
        };
        let coll_nic = topo
            .nodes(NodeKind::Net)
            .iter()
            .filter_map(|&i| topo.node(i).net())
            .any(|n| n.coll);
        // NCCL: collnet needs NCCL_COLLNET_ENABLE=1, a collnet plugin, a chain
        // graph with channels, and at least NCCL_COLLNET_NODE_THRESHOLD (2) nodes.
        let collnet_enable = env.collnet_enable == Some(1)
            && coll_nic
            && collnet_chain.n_channels > 0
            && cluster.n_nodes >= 2;
        Ok(ModelInput {
            n_ranks: cluster.n_ranks(),
            n_nodes: cluster.n_nodes,
            local_ranks: cluster.gpus_per_node(),
            min_sm,
            max_sm,
            cpu_arch,
            cpu_vendor,
            has_nvswitch: topo.has_nvswitch(),
            max_tree_pattern: tree.pattern,
            ring,
            tree,
            collnet_heads: collnet_direct.n_channels,
            collnet_chain,
            collnet_direct,
            nvls: nvls_graph,
            channels,
            nvls_state,
            nvls_channels,
            collnet_enable,
            collnet_chain_support: collnet_enable,
            net_device_host: true,
        })
    }
}

/// `nvlsChannels` after the user's knobs (nvls.cc:222,234-235; v2.28.9-1 nvls.cc:198-199):
/// `NCCL_NVLS_NCHANNELS` replaces the default, then NCCL clamps it to [`NCCL_MIN_CTAS`, `NCCL_MAX_CTAS`].
/// `NCCL_MIN/MAX_NCHANNELS` do not bound it (they act on `comm->nChannels` only, connect.cc:503-505).
pub(crate) fn nvls_channels_under(env: &NcclEnv, default: usize) -> usize {
    let bounds = env.channel_bounds();
    let wanted = env.nvls_nchannels.unwrap_or(default as i64);
    wanted.clamp(bounds.min_ctas as i64, bounds.max_ctas as i64) as usize
}

/// NCCL's default `nvlsChannels` (`nvls.cc`): one count for sm90, two for
/// sm100 (one node / several nodes).
pub(crate) fn nvls_channel_count(table: &TuningTable, min_sm: u32, n_nodes: usize) -> usize {
    let c = &table.nvls_channels;
    if min_sm >= 100 {
        if n_nodes > 1 {
            c.sm100_multi_node
        } else {
            c.sm100_one_node
        }
    } else {
        c.sm90
    }
}

/// v2.30 `ncclNvlsTreeSm100Tuning`'s channel count (`nvls.cc:164-200`, applied at `:217-219` when `minCompCap >= 100`
/// and `nNodes > 1`): `nic_bw` is `comm->minNetBw`, `ppn` is `minLocalRanks`; below 48 GB/s the default stays.
pub fn nvls_sm100_multi_node_channels(
    default: usize,
    n_nodes: usize,
    ppn: usize,
    nic_bw: f64,
) -> usize {
    // NCCL compares float against float literals.
    let nic_bw = nic_bw as f32;
    if n_nodes == 2 && nic_bw >= 48.0 {
        32
    } else if nic_bw >= 96.0 {
        if ppn <= 8 {
            24
        } else {
            32
        }
    } else if nic_bw >= 48.0 {
        24
    } else {
        default
    }
}

/// `comm->minNetBw` (`ncclTopoGetMinNetBw`, v2.30.7-1 `topo.cc:379-399`, min over ranks at `init.cc:1450`): the
/// smallest GPU-to-NET path bandwidth over each GPU's local NICs (the NICs with the best path from it).
pub fn min_net_bw(cluster: &Cluster) -> f64 {
    let topo = &cluster.node;
    let nets = topo.nodes(NodeKind::Net);
    let mut min = f64::INFINITY;
    for (g, _) in topo.gpus() {
        // ncclTopoGetLocalNet picks among the NICs with the best bandwidth from the GPU (ncclTopoGetLocal), so the
        // minimum over them is that best bandwidth.
        let best = nets
            .iter()
            .filter_map(|&n| topo.path(g, n).map(|p| p.bw))
            .fold(0.0, f64::max);
        if best > 0.0 {
            min = min.min(best);
        }
    }
    if min.is_finite() {
        min
    } else {
        0.0
    }
}
