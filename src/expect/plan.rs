//! The physical plan of one node, parameter-free: for every search channel of every algorithm, the physical links
//! (per direction) its traffic crosses and how many units of the channel's volume each carries. Nodes are
//! identical, so one node's links stand for all of them (a job of 12,500 nodes costs what one node does); the
//! network is charged at each node's NICs (a non-blocking fabric).

use crate::error::{Error, Result};
use crate::search::{Graphs, SearchChannel};
use crate::topo::{Cluster, CpuVendor, LinkKind, NodeKind, PathType, Topology};
use petgraph::stable_graph::{EdgeIndex, NodeIndex};
use std::collections::HashMap;

/// What a physical link is, which says which constants give its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkClass {
    /// NVLink of a generation (3: A100, 4: Hopper, 5: Blackwell).
    NvLink(u8),
    Pcie,
    InterSocket(CpuVendor),
    C2c,
    /// A NIC's port to the network.
    Nic,
    /// A socket's memory as SHM staging (and non-GPUDirect network traffic) writes and reads it.
    HostMemory,
}

impl LinkClass {
    pub(crate) fn name(self) -> String {
        match self {
            LinkClass::NvLink(g) => format!("nvlink{g}"),
            LinkClass::Pcie => "pcie".into(),
            LinkClass::InterSocket(_) => "inter-socket".into(),
            LinkClass::C2c => "c2c".into(),
            LinkClass::Nic => "nic".into(),
            LinkClass::HostMemory => "host-memory".into(),
        }
    }
}

/// One physical link in one direction (or one socket's memory).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Slot {
    pub(crate) class: LinkClass,
    /// NCCL's figure for the link, GB/s (PCIe: the raw lane rate; NIC: the line rate).
    pub(crate) nominal_gbs: f64,
    /// NVLinks in the bundle (1 for others).
    pub(crate) lanes: u32,
    /// e.g. "GPU0->NVS0".
    pub(crate) name: String,
}

/// Units of a channel's volume on each slot it crosses; `net` is charged separately (its units depend on the
/// algorithm's inter-node pattern).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ChannelFlows {
    pub(crate) intra: Vec<(usize, f64)>,
    pub(crate) net: Vec<(usize, f64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub n_ranks: usize,
    pub(crate) n_nodes: usize,
    pub(crate) local_ranks: usize,
    pub(crate) min_sm: u32,
    pub(crate) slots: Vec<Slot>,
    pub(crate) ring: Vec<ChannelFlows>,
    pub(crate) tree: Vec<ChannelFlows>,
    /// NVLS: every GPU's links to the NVSwitch, out and in; `nvls` per channel holds the heads' network flows.
    pub(crate) nvls_out: Vec<usize>,
    pub(crate) nvls_in: Vec<usize>,
    pub(crate) nvls: Vec<ChannelFlows>,
    /// Some hop of a ring stages through host memory (SHM).
    pub(crate) shm_hops: bool,
    pub(crate) has_nvswitch: bool,
    pub(crate) sockets: usize,
    pub(crate) nic_names: Vec<String>,
}

struct Builder<'a> {
    topo: &'a Topology,
    p2p_level: PathType,
    slots: Vec<Slot>,
    by_edge: HashMap<EdgeIndex, usize>,
    by_cpu: HashMap<NodeIndex, usize>,
    gpu_by_rank: HashMap<i32, NodeIndex>,
    shm_hops: bool,
}

impl<'a> Builder<'a> {
    fn label(&self, n: NodeIndex) -> String {
        let node = self.topo.node(n);
        match (&node.kind, node.gpu(), node.net()) {
            (NodeKind::Gpu, Some(g), _) => format!("GPU{}", g.rank),
            (NodeKind::Net, _, Some(net)) => format!("NET{}", net.dev),
            _ => node.nccl_label(),
        }
    }

    fn edge_slot(&mut self, e: EdgeIndex) -> Option<usize> {
        if let Some(&s) = self.by_edge.get(&e) {
            return Some(s);
        }
        let link = *self.topo.graph.edge_weight(e)?;
        let (a, b) = self.topo.graph.edge_endpoints(e)?;
        let sm_of = |n: NodeIndex| self.topo.node(n).gpu().map(|g| g.sm);
        let (class, lanes) = match link.kind {
            LinkKind::Loc => return None,
            LinkKind::Nvl => {
                let sm = sm_of(a)
                    .or(sm_of(b))
                    .unwrap_or_else(|| self.topo.sm_range().0);
                let per = f64::from(crate::topo::build::nvlink_bw(sm));
                let gen = if sm >= 100 {
                    5
                } else if sm >= 90 {
                    4
                } else {
                    3
                };
                (
                    LinkClass::NvLink(gen),
                    (link.bw / per).round().max(1.0) as u32,
                )
            }
            LinkKind::Pci => (LinkClass::Pcie, 1),
            LinkKind::Sys => {
                let vendor = self
                    .topo
                    .node(a)
                    .cpu()
                    .map(|c| c.vendor)
                    .unwrap_or(CpuVendor::Unknown);
                (LinkClass::InterSocket(vendor), 1)
            }
            LinkKind::C2c => (LinkClass::C2c, 1),
            LinkKind::Net => (LinkClass::Nic, 1),
        };
        let name = format!("{}->{}", self.label(a), self.label(b));
        self.slots.push(Slot {
            class,
            nominal_gbs: link.bw,
            lanes,
            name,
        });
        let s = self.slots.len() - 1;
        self.by_edge.insert(e, s);
        Some(s)
    }

    fn memory_slot(&mut self, cpu: NodeIndex) -> usize {
        if let Some(&s) = self.by_cpu.get(&cpu) {
            return s;
        }
        let name = format!("{} memory", self.topo.node(cpu).nccl_label());
        self.slots.push(Slot {
            class: LinkClass::HostMemory,
            nominal_gbs: 0.0,
            lanes: 1,
            name,
        });
        let s = self.slots.len() - 1;
        self.by_cpu.insert(cpu, s);
        s
    }

    fn gpu(&self, rank: i32) -> Result<NodeIndex> {
        self.gpu_by_rank.get(&rank).copied().ok_or_else(|| {
            Error::bad_input(format!(
                "expected model: the search names rank {rank}, which is not a GPU of {}",
                self.topo.source
            ))
        })
    }

    fn channel_gpus(&self, ch: &SearchChannel) -> Result<Vec<NodeIndex>> {
        ch.ranks.iter().map(|&r| self.gpu(r)).collect()
    }

    fn net(&self, dev: i64) -> Option<NodeIndex> {
        self.topo
            .nodes(NodeKind::Net)
            .iter()
            .copied()
            .find(|&n| self.topo.node(n).net().map(|x| x.dev) == Some(dev))
    }

    /// The CPUs a path crosses (SHM staging and host-staged network traffic land in their memory).
    fn cpus_on(&self, links: &[EdgeIndex]) -> Vec<NodeIndex> {
        let mut out = Vec::new();
        for &e in links {
            if let Some((_, b)) = self.topo.graph.edge_endpoints(e) {
                if self.topo.node(b).kind == NodeKind::Cpu && !out.contains(&b) {
                    out.push(b);
                }
            }
        }
        out
    }

    fn local_cpu(&self, gpu: NodeIndex) -> Option<NodeIndex> {
        crate::topo::paths::local_cpu(self.topo, gpu).ok()
    }

    /// One GPU-to-GPU hop: the path's links, plus host memory where NCCL uses SHM (the path is worse than the P2P
    /// level: through a CPU, or P2P disabled).
    fn hop(&mut self, from: NodeIndex, to: NodeIndex, units: f64, out: &mut Vec<(usize, f64)>) {
        let Some(path) = self.topo.path(from, to) else {
            return;
        };
        let (ptype, links) = (path.ptype, path.links.to_vec());
        for e in &links {
            if let Some(s) = self.edge_slot(*e) {
                out.push((s, units));
            }
        }
        if ptype > self.p2p_level {
            self.shm_hops = true;
            let mut cpus = self.cpus_on(&links);
            if cpus.is_empty() {
                cpus.extend(self.local_cpu(from));
            }
            for c in cpus {
                let s = self.memory_slot(c);
                // Written by the sender, read by the receiver.
                out.push((s, 2.0 * units));
            }
        }
    }

    /// GPU -> NET (send) or NET -> GPU (receive): the path, plus host memory without GPUDirect RDMA.
    fn net_hop(&mut self, gpu: NodeIndex, net: NodeIndex, send: bool, out: &mut Vec<(usize, f64)>) {
        let (a, b) = if send { (gpu, net) } else { (net, gpu) };
        let Some(path) = self.topo.path(a, b) else {
            return;
        };
        let links = path.links.to_vec();
        for e in &links {
            if let Some(s) = self.edge_slot(*e) {
                out.push((s, 1.0));
            }
        }
        let gdr = self.topo.node(gpu).gpu().map(|g| g.gdr).unwrap_or(false)
            && self.topo.node(net).net().map(|n| n.gdr).unwrap_or(false);
        if !gdr {
            let mut cpus = self.cpus_on(&links);
            if cpus.is_empty() {
                cpus.extend(self.local_cpu(gpu));
            }
            if let Some(c) = cpus.first() {
                let s = self.memory_slot(*c);
                out.push((s, 2.0));
            }
        }
    }

    fn net_flows(
        &mut self,
        ch: &SearchChannel,
        head: NodeIndex,
        tail: NodeIndex,
    ) -> Vec<(usize, f64)> {
        let mut net = Vec::new();
        if let Some(n) = ch.net_out.and_then(|d| self.net(d)) {
            self.net_hop(tail, n, true, &mut net);
        }
        if let Some(n) = ch.net_in.and_then(|d| self.net(d)) {
            self.net_hop(head, n, false, &mut net);
        }
        net
    }
}

impl Plan {
    pub(crate) fn new(
        cluster: &Cluster,
        graphs: &Graphs,
        p2p_level: Option<PathType>,
    ) -> Result<Plan> {
        let topo = &cluster.node;
        let mut gpu_by_rank = HashMap::new();
        for (idx, g) in topo.gpus() {
            gpu_by_rank.insert(g.rank, idx);
        }
        let mut b = Builder {
            topo,
            // NCCL's default P2P level: through PCIe switches, not through a CPU.
            p2p_level: p2p_level.unwrap_or(PathType::Pxb),
            slots: Vec::new(),
            by_edge: HashMap::new(),
            by_cpu: HashMap::new(),
            gpu_by_rank,
            shm_hops: false,
        };
        let multi = cluster.n_nodes > 1;
        let mut ring = Vec::new();
        for ch in &graphs.ring.channels {
            let gpus = b.channel_gpus(ch)?;
            let mut flows = ChannelFlows::default();
            for w in gpus.windows(2) {
                b.hop(w[0], w[1], 1.0, &mut flows.intra);
            }
            if let (Some(&head), Some(&tail)) = (gpus.first(), gpus.last()) {
                if multi {
                    flows.net = b.net_flows(ch, head, tail);
                } else if gpus.len() > 1 {
                    b.hop(tail, head, 1.0, &mut flows.intra);
                }
            }
            ring.push(flows);
        }
        let mut tree = Vec::new();
        for ch in &graphs.tree.channels {
            let gpus = b.channel_gpus(ch)?;
            let mut flows = ChannelFlows::default();
            for w in gpus.windows(2) {
                // Reduce up the chain, broadcast down it: both directions carry the channel's data.
                b.hop(w[0], w[1], 1.0, &mut flows.intra);
                b.hop(w[1], w[0], 1.0, &mut flows.intra);
            }
            if let Some(&head) = gpus.first() {
                if multi {
                    flows.net = b.net_flows(ch, head, head);
                }
            }
            tree.push(flows);
        }
        let (mut nvls_out, mut nvls_in, mut nvls) = (Vec::new(), Vec::new(), Vec::new());
        if let Some(g) = graphs.nvls.as_ref().filter(|g| g.n_channels > 0) {
            if let Some(&nvs) = topo.nodes(NodeKind::Nvs).first() {
                let gpus: Vec<NodeIndex> = topo.gpus().map(|(i, _)| i).collect();
                for gpu in gpus {
                    for (from, to, list) in [(gpu, nvs, &mut nvls_out), (nvs, gpu, &mut nvls_in)] {
                        let links = topo
                            .path(from, to)
                            .map(|p| p.links.to_vec())
                            .unwrap_or_default();
                        // The first link out of the GPU (into it, the last): its NVLinks.
                        let edge = if from == gpu {
                            links.first()
                        } else {
                            links.last()
                        };
                        if let Some(s) = edge.and_then(|e| b.edge_slot(*e)) {
                            list.push(s);
                        }
                    }
                }
            }
            for ch in &g.channels {
                let mut flows = ChannelFlows::default();
                if multi {
                    if let Some(&r) = ch.ranks.first() {
                        let head = b.gpu(r)?;
                        flows.net = b.net_flows(ch, head, head);
                    }
                }
                nvls.push(flows);
            }
        }
        let nic_names = topo
            .nodes(NodeKind::Net)
            .iter()
            .filter_map(|&n| topo.node(n).net().map(|x| x.name.clone()))
            .collect();
        Ok(Plan {
            n_ranks: cluster.n_ranks(),
            n_nodes: cluster.n_nodes,
            local_ranks: cluster.gpus_per_node(),
            min_sm: topo.sm_range().0,
            shm_hops: b.shm_hops,
            slots: b.slots,
            ring,
            tree,
            nvls_out,
            nvls_in,
            nvls,
            has_nvswitch: topo.has_nvswitch(),
            sockets: topo.nodes(NodeKind::Cpu).len(),
            nic_names,
        })
    }
}
