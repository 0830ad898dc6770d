//! The search's view of one host (NCCL's `ncclTopoSystem` as `search.cc` uses it):
//! GPUs and NETs by index, every path the search follows reduced to the list of
//! directed links it crosses, and the link bandwidths as `f32` (NCCL computes
//! in `float`; keeping the same precision keeps the channel counts identical).
//!
//! Built once from a `Topology`; the search then mutates only a `BwState`.

use crate::error::{Error, Result};
use crate::topo::paths::mirror_bits;
use crate::topo::{CpuArch, CpuVendor, LinkKind, NodeData, NodeKind, PathType, Topology};
use petgraph::stable_graph::{EdgeIndex, NodeIndex};
use petgraph::visit::EdgeRef;
use std::sync::Arc;

pub(crate) use crate::limits::MAX_CHANNELS;
/// `limits::LOC_BW` in the search's `float`.
const LOC_BW: f32 = crate::limits::LOC_BW as f32;

/// What crossing one link costs beyond the link itself (`followPath`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum RevCharge {
    None,
    /// Entering a pre-Ampere GPU from a non-GPU start also uses 1/8 of the bandwidth backwards.
    Eighth(u32),
    /// NVLink into a POWER CPU uses the same bandwidth backwards.
    Full(u32),
}

/// What crossing one link costs beyond the link itself (`followPath`), by `EdgeIndex::index()`. It depends on the
/// link and on whether the path started at a GPU, not on the path, so it is kept once per link: a search system
/// holds about four million hops at NCCL's largest host (576 GPUs and 576 NICs), stored as bare link indices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LinkCost {
    /// A PCI link (costs 1.2x on `intel_overhead` paths).
    pub(crate) pci: bool,
    /// The backward charge on a path that started at a GPU.
    pub(crate) rev_from_gpu: RevCharge,
    /// The backward charge on a path that started elsewhere (a NET or an NVSwitch).
    pub(crate) rev_from_other: RevCharge,
}

/// A path as the search uses it: type, bottleneck bandwidth, and the run of `SearchSystem::hops` it crosses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SPath {
    pub(crate) ptype: PathType,
    pub(crate) bw: f32,
    start: u32,
    count: u16,
    /// GPU-started PHB path through an Intel x86 root complex: PCI links cost 1.2x.
    pub(crate) intel_overhead: bool,
    /// Started at a GPU (chooses `LinkCost::rev_from_gpu`).
    pub(crate) from_gpu: bool,
}

impl SPath {
    /// NCCL's state for "no path": type DIS, bandwidth 0, no hops.
    pub(crate) fn none() -> Self {
        SPath {
            ptype: PathType::Dis,
            bw: 0.0,
            start: 0,
            count: 0,
            intel_overhead: false,
            from_gpu: false,
        }
    }
    fn local() -> Self {
        SPath {
            ptype: PathType::Loc,
            bw: LOC_BW,
            ..SPath::none()
        }
    }
    pub(crate) fn count(&self) -> usize {
        self.count as usize
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SNet {
    /// NCCL's NET id (`systemId << 56 | dev`), what graphs store in `inter`.
    pub(crate) id: i64,
    pub(crate) dev: i64,
    /// NICs sharing an asic and port share bandwidth (`net.asic` = the `guid`).
    pub(crate) asic: u64,
    pub(crate) port: i64,
    pub(crate) bw: f32,
    pub(crate) latency: f32,
    pub(crate) coll: bool,
    /// The GPU this NET is the preferred NIC of, or -1 (`ncclTopoGetLocalGpu`).
    pub(crate) local_gpu: i32,
}

#[derive(Debug, Clone)]
pub(crate) struct SearchSystem {
    pub(crate) ngpus: usize,
    pub(crate) gpu_rank: Vec<i32>,
    pub(crate) gpu_dev: Vec<i32>,
    /// NCCL node id of each GPU (graph XML writes `systemId<<56 | dev`).
    pub(crate) gpu_system_id: Vec<u64>,
    pub(crate) gpu_label: Vec<String>,
    pub(crate) gpu_cc: Vec<u32>,
    /// `gpuPciBw`, truncated to an int as NCCL's score does; -1 without a PCI link.
    pub(crate) gpu_pci_bw: Vec<i32>,
    pub(crate) nets: Vec<SNet>,
    /// Per NET, the NETs (itself included) on the same asic and port, which share its bandwidth.
    pub(crate) net_port_peers: Vec<Vec<usize>>,
    pub(crate) n_nvs: usize,
    pub(crate) gpu_gpu: Vec<SPath>,
    pub(crate) gpu_net: Vec<SPath>,
    pub(crate) net_gpu: Vec<SPath>,
    pub(crate) nvs_gpu: Vec<SPath>,
    pub(crate) gpu_nvs: Vec<SPath>,
    /// The links every path crosses, end to end: the topology's own list (`PathTable::shared_links`), whose
    /// runs the paths name.
    hops: Arc<Vec<EdgeIndex>>,
    /// Per link, by `EdgeIndex::index()`.
    pub(crate) link_cost: Vec<LinkCost>,
    /// Initial bandwidth of every directed link, by `EdgeIndex::index()`.
    pub(crate) link_bw: Vec<f32>,
    /// More than one node: channels enter and leave through NETs.
    pub(crate) inter: bool,
    pub(crate) max_bw: f32,
    pub(crate) total_bw: f32,
    pub(crate) cpu_arch: CpuArch,
    pub(crate) cpu_vendor: CpuVendor,
    /// `ncclTopoGetLocalNet(gpu, c)` for c in 0..MAXCHANNELS, as NET indices.
    pub(crate) local_net: Vec<Vec<usize>>,
    /// Next-GPU sort keys (`ncclGpuScore`), see `score_keys`: by [gpu * ngpus + candidate].
    pub(crate) intra_key: Vec<u64>,
    /// By [net * ngpus + candidate].
    pub(crate) inter_key: Vec<u64>,
    /// `ncclTopoGetLocal` from each NET to GPUs (fixed once the paths are: the search asks it at every step).
    net_local_gpus: Vec<(Vec<usize>, PathType)>,
}

/// The search's mutable state: remaining bandwidth per link and NET, and which
/// GPUs each channel already visits.
#[derive(Debug, Clone)]
pub(crate) struct BwState {
    pub(crate) link_bw: Vec<f32>,
    pub(crate) net_bw: Vec<f32>,
    pub(crate) used: Vec<u64>,
}

/// The search's per-GPU columns, in the topology's GPU order.
struct GpuColumns {
    gpu_rank: Vec<i32>,
    gpu_dev: Vec<i32>,
    gpu_system_id: Vec<u64>,
    gpu_label: Vec<String>,
    gpu_cc: Vec<u32>,
}

impl GpuColumns {
    /// Err when a GPU node carries no GPU data or two GPUs have the same rank.
    fn read(topo: &Topology, gpus: &[NodeIndex]) -> Result<Self> {
        let src = &topo.source;
        let ngpus = gpus.len();
        let mut gpu_rank = Vec::with_capacity(ngpus);
        let mut gpu_dev = Vec::with_capacity(ngpus);
        let mut gpu_system_id = Vec::with_capacity(ngpus);
        let mut gpu_label = Vec::with_capacity(ngpus);
        let mut gpu_cc = Vec::with_capacity(ngpus);
        for &g in gpus {
            let node = topo.node(g);
            let Some(info) = node.gpu() else {
                return Err(Error::runtime(format!(
                    "{src}: node {} is listed as a GPU but carries no GPU data",
                    node.nccl_label()
                )));
            };
            gpu_rank.push(info.rank);
            gpu_dev.push(info.dev);
            gpu_system_id.push(node.id >> 56);
            gpu_label.push(node.nccl_label());
            gpu_cc.push(info.sm);
        }
        let mut seen = gpu_rank.clone();
        seen.sort_unstable();
        if seen.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::bad_input(format!(
                "{src}: two GPUs have the same rank ({:?})",
                gpu_rank
            )));
        }
        Ok(GpuColumns {
            gpu_rank,
            gpu_dev,
            gpu_system_id,
            gpu_label,
            gpu_cc,
        })
    }
}

/// GPUs that cannot reach each other: NCCL would trim them away and run a smaller communicator; we refuse,
/// because the job asked for all of them.
fn check_reachable(src: &str, gpu_gpu: &[SPath], gpu_label: &[String]) -> Result<()> {
    let ngpus = gpu_label.len();
    for a in 0..ngpus {
        for b in 0..ngpus {
            let p = &gpu_gpu[a * ngpus + b];
            if a != b && p.ptype >= PathType::Net {
                return Err(Error::bad_input(format!(
                    "{src}: {} cannot reach {} (path type {}); every GPU must reach every other",
                    gpu_label[a],
                    gpu_label[b],
                    p.ptype.nccl_name()
                )));
            }
        }
    }
    Ok(())
}

/// The search's NICs, in the topology's NET order (no local GPU yet).
fn search_nets(topo: &Topology, nets: &[NodeIndex]) -> Result<Vec<SNet>> {
    let src = &topo.source;
    let mut snets = Vec::with_capacity(nets.len());
    for &n in nets {
        let node = topo.node(n);
        let NodeData::Net(info) = &node.data else {
            return Err(Error::runtime(format!(
                "{src}: node {} is listed as a NET but carries no NET data",
                node.nccl_label()
            )));
        };
        snets.push(SNet {
            id: node.id as i64,
            dev: info.dev,
            asic: info.asic,
            port: info.port,
            // NCCL: speed in Mb/s / 8000, 10 Gb/s when unknown.
            bw: if info.speed_mbps > 0.0 {
                (info.speed_mbps / 8000.0) as f32
            } else {
                1.25
            },
            latency: info.latency_us as f32,
            coll: info.coll,
            local_gpu: -1,
        });
    }
    Ok(snets)
}

impl SearchSystem {
    pub(crate) fn new(topo: &Topology, inter: bool) -> Result<Self> {
        let src = &topo.source;
        let gpus: Vec<NodeIndex> = topo.nodes(NodeKind::Gpu).to_vec();
        let nets: Vec<NodeIndex> = topo.nodes(NodeKind::Net).to_vec();
        let nvs: Vec<NodeIndex> = topo.nodes(NodeKind::Nvs).to_vec();
        let ngpus = gpus.len();
        if ngpus == 0 {
            return Err(Error::bad_input(format!("{src}: the topology has no GPU")));
        }
        let (cpu_arch, cpu_vendor) = topo
            .first_cpu()
            .map(|c| (c.arch, c.vendor))
            .unwrap_or((CpuArch::Unknown, CpuVendor::Unknown));

        let GpuColumns {
            gpu_rank,
            gpu_dev,
            gpu_system_id,
            gpu_label,
            gpu_cc,
        } = GpuColumns::read(topo, &gpus)?;

        use petgraph::visit::EdgeIndexable;
        let edge_bound = EdgeIndexable::edge_bound(&topo.graph);
        let mut link_bw = vec![0.0f32; edge_bound];
        for e in topo.graph.edge_indices() {
            link_bw[e.index()] = topo.graph[e].bw as f32;
        }

        let link_cost = link_costs(topo, edge_bound);
        let hops = topo.paths.shared_links();
        let convert = |from: NodeIndex, to: NodeIndex| -> Result<SPath> {
            if from == to {
                return Ok(SPath::local());
            }
            match (topo.path(from, to), topo.paths.link_run(from, to)) {
                (Some(p), Some(run)) => convert_path(topo, from, p, run),
                _ => Ok(SPath::none()),
            }
        };
        let mut gpu_gpu = Vec::with_capacity(ngpus * ngpus);
        for &a in &gpus {
            for &b in &gpus {
                gpu_gpu.push(convert(a, b)?);
            }
        }
        let mut gpu_net = Vec::with_capacity(ngpus * nets.len());
        for &a in &gpus {
            for &n in &nets {
                gpu_net.push(convert(a, n)?);
            }
        }
        let mut net_gpu = Vec::with_capacity(ngpus * nets.len());
        for &n in &nets {
            for &b in &gpus {
                net_gpu.push(convert(n, b)?);
            }
        }
        let (nvs_gpu, gpu_nvs) = match nvs.first() {
            Some(&s) => (
                gpus.iter()
                    .map(|&g| convert(s, g))
                    .collect::<Result<Vec<_>>>()?,
                gpus.iter()
                    .map(|&g| convert(g, s))
                    .collect::<Result<Vec<_>>>()?,
            ),
            None => (Vec::new(), Vec::new()),
        };

        check_reachable(src, &gpu_gpu, &gpu_label)?;

        let snets = search_nets(topo, &nets)?;
        if inter && snets.is_empty() {
            return Err(Error::bad_input(format!(
                "{src}: more than one node but the topology has no NIC to join them through"
            )));
        }

        let mut sys = SearchSystem {
            ngpus,
            gpu_rank,
            gpu_dev,
            gpu_system_id,
            gpu_label,
            gpu_cc,
            gpu_pci_bw: gpus.iter().map(|&g| gpu_pci_bw(topo, g)).collect(),
            net_port_peers: snets
                .iter()
                .map(|a| {
                    (0..snets.len())
                        .filter(|&m| snets[m].asic == a.asic && snets[m].port == a.port)
                        .collect()
                })
                .collect(),
            nets: snets,
            n_nvs: nvs.len().min(1),
            gpu_gpu,
            gpu_net,
            net_gpu,
            nvs_gpu,
            gpu_nvs,
            hops,
            link_cost,
            link_bw,
            inter,
            max_bw: 0.0,
            total_bw: 0.0,
            cpu_arch,
            cpu_vendor,
            local_net: Vec::new(),
            intra_key: Vec::new(),
            inter_key: Vec::new(),
            net_local_gpus: Vec::new(),
        };
        sys.net_local_gpus = (0..sys.nnets())
            .map(|n| get_local((0..ngpus).map(|g| sys.net_gpu(n, g))))
            .collect();

        if !sys.nets.is_empty() {
            sys.init_local_nets(src)?;
        }
        sys.init_bw(topo, &gpus);
        sys.score_keys();
        Ok(sys)
    }

    /// Each GPU's local NICs per channel and each NIC's local GPU. Err when a GPU of a multi-node job reaches no
    /// NIC.
    fn init_local_nets(&mut self, src: &str) -> Result<()> {
        let mut table = Vec::with_capacity(self.ngpus);
        for g in 0..self.ngpus {
            let per_channel = self.compute_local_nets(g);
            if per_channel.is_empty() && self.inter {
                return Err(Error::bad_input(format!(
                    "{src}: {} has no path to any NIC",
                    self.gpu_label[g]
                )));
            }
            table.push(per_channel);
        }
        self.local_net = table;
        for n in 0..self.nets.len() {
            self.nets[n].local_gpu = self.compute_local_gpu(n);
        }
        Ok(())
    }

    /// NCCL sorts next-GPU candidates by interBw desc, interPciBw desc, interNhops asc,
    /// intraBw desc, intraNhops asc, startIndex asc (all ints). Packed as
    /// `inter = (M - interBw) << 40 | (M - (pciBw + 1)) << 16 | interNhops` and
    /// `intra = (M - intraBw) << 40 | intraNhops << 24 | startIndex` (M = 2^24 - 1, fields
    /// clamped), the pair `(inter, intra)` sorts in exactly that order.
    fn score_keys(&mut self) {
        const M: u64 = (1 << 24) - 1;
        let field = |v: i64, max: u64| (v.max(0) as u64).min(max);
        let n = self.ngpus;
        let mut intra = vec![0u64; n * n];
        for g in 0..n {
            for h in 0..n {
                let p = self.gpu_gpu(g, h);
                let start_index = (h + n - g) % n;
                intra[g * n + h] = (M - field(p.bw as i32 as i64, M)) << 40
                    | field(p.count() as i64, 0xffff) << 24
                    | field(start_index as i64, M);
            }
        }
        let mut inter = vec![0u64; self.nnets() * n];
        for net in 0..self.nnets() {
            for h in 0..n {
                let p = self.net_gpu(net, h);
                inter[net * n + h] = (M - field(p.bw as i32 as i64, M)) << 40
                    | (M - field(self.gpu_pci_bw[h] as i64 + 1, M)) << 16
                    | field(p.count() as i64, 0xffff);
            }
        }
        self.intra_key = intra;
        self.inter_key = inter;
    }

    pub(crate) fn nnets(&self) -> usize {
        self.nets.len()
    }

    /// The links `path` crosses (`EdgeIndex::index()`), in order.
    #[inline(always)]
    pub(crate) fn hops(&self, path: &SPath) -> &[EdgeIndex] {
        let start = path.start as usize;
        self.hops.get(start..start + path.count()).unwrap_or(&[])
    }
    pub(crate) fn gpu_gpu(&self, a: usize, b: usize) -> &SPath {
        &self.gpu_gpu[a * self.ngpus + b]
    }
    pub(crate) fn gpu_net(&self, g: usize, n: usize) -> &SPath {
        &self.gpu_net[g * self.nets.len() + n]
    }
    pub(crate) fn net_gpu(&self, n: usize, g: usize) -> &SPath {
        &self.net_gpu[n * self.ngpus + g]
    }

    pub(crate) fn cc_min(&self) -> u32 {
        self.gpu_cc.iter().copied().min().unwrap_or(0)
    }

    pub(crate) fn gpu_index_of_rank(&self, rank: i32) -> Option<usize> {
        self.gpu_rank.iter().position(|&r| r == rank)
    }

    pub(crate) fn net_index_of_id(&self, id: i64) -> Option<usize> {
        self.nets.iter().position(|n| n.id == id)
    }

    pub(crate) fn fresh_state(&self) -> BwState {
        BwState {
            link_bw: self.link_bw.clone(),
            net_bw: self.nets.iter().map(|n| n.bw).collect(),
            used: vec![0; self.ngpus],
        }
    }

    /// `ncclTopoSearchInit`: the best per-channel bandwidth (to a NET when
    /// inter, else to another GPU) and the most a GPU can move in total.
    fn init_bw(&mut self, topo: &Topology, gpus: &[NodeIndex]) {
        if !self.inter && self.ngpus == 1 {
            self.max_bw = LOC_BW;
            self.total_bw = LOC_BW;
            return;
        }
        let mut max_bw = 0.0f32;
        let mut total_bw = 0.0f32;
        for (g, &gi) in gpus.iter().enumerate() {
            let paths: Vec<&SPath> = if self.inter {
                (0..self.nnets()).map(|n| self.gpu_net(g, n)).collect()
            } else {
                (0..self.ngpus).map(|h| self.gpu_gpu(g, h)).collect()
            };
            for p in paths {
                if p.count() > 0 {
                    max_bw = max_bw.max(p.bw);
                }
            }
            let mut nvl = 0.0f32;
            let mut pci = 0.0f32;
            for &e in out_links(topo, gi) {
                let link = topo.graph[e];
                match link.kind {
                    LinkKind::Nvl => nvl += link.bw as f32,
                    LinkKind::Pci => pci = link.bw as f32,
                    _ => {}
                }
            }
            total_bw = total_bw.max(pci.max(nvl));
        }
        self.max_bw = max_bw;
        self.total_bw = total_bw;
    }

    /// `ncclTopoGetLocal` from GPU g to NETs: the NETs with the highest
    /// bandwidth, then the best path type; and that type.
    pub(crate) fn local_nets_of_gpu(&self, g: usize) -> (Vec<usize>, PathType) {
        get_local((0..self.nnets()).map(|n| self.gpu_net(g, n)))
    }

    /// `ncclTopoGetLocal` from NET n to GPUs.
    pub(crate) fn local_gpus_of_net(&self, n: usize) -> (&[usize], PathType) {
        match self.net_local_gpus.get(n) {
            Some((gpus, ptype)) => (gpus, *ptype),
            None => (&[], PathType::Dis),
        }
    }

    /// `ncclTopoGetLocalNet` with `NCCL_NETDEVS_POLICY=AUTO` for channels 0..MAXCHANNELS (empty without a
    /// NIC): the local NETs depend on the GPU only, so they are found once.
    fn compute_local_nets(&self, g: usize) -> Vec<usize> {
        let (locals, _) = self.local_nets_of_gpu(g);
        if locals.is_empty() {
            return Vec::new();
        }
        let (gpus_of_first, _) = self.local_gpus_of_net(locals[0]);
        let nets_per_gpu = locals.len().div_ceil(gpus_of_first.len().max(1));
        let mut net = self.gpu_dev[g].max(0) as usize;
        if locals.len().is_power_of_two() {
            net = mirror_bits(net, locals.len());
        }
        (0..MAX_CHANNELS)
            .map(|channel| locals[(net + channel % nets_per_gpu.max(1)) % locals.len()])
            .collect()
    }

    /// `ncclTopoGetLocalGpu`: the first local GPU (in channel order) whose
    /// preferred NET for some channel is n.
    fn compute_local_gpu(&self, n: usize) -> i32 {
        let (locals, _) = self.local_gpus_of_net(n);
        for c in 0..MAX_CHANNELS {
            for &g in locals {
                if self.local_net.get(g).and_then(|v| v.get(c)) == Some(&n) {
                    return g as i32;
                }
            }
        }
        -1
    }

    /// `ncclTopoGetGpuMinPath` / `MaxPath` over GPU->GPU (skipping self) or GPU->NET paths.
    pub(crate) fn gpu_path_type_range(&self, to_net: bool) -> (PathType, PathType) {
        let mut min = PathType::Sys;
        let mut max = PathType::Loc;
        for g in 0..self.ngpus {
            let count = if to_net { self.nnets() } else { self.ngpus };
            for j in 0..count {
                if !to_net && g == j {
                    continue;
                }
                let t = if to_net {
                    self.gpu_net(g, j).ptype
                } else {
                    self.gpu_gpu(g, j).ptype
                };
                min = min.min(t);
                max = max.max(t);
            }
        }
        (min, max)
    }

    /// `ncclTopoSplitNvLink`: exactly two NVLink islands.
    pub(crate) fn split_nvlink(&self) -> bool {
        let n = self.ngpus;
        let mut domain: Vec<usize> = (0..n).collect();
        for g in 0..n {
            let d = domain[g];
            for (p, slot) in domain.iter_mut().enumerate().skip(g + 1) {
                if self.gpu_gpu(g, p).ptype == PathType::Nvl {
                    *slot = d;
                }
            }
        }
        let mut count = vec![0usize; n];
        for &d in &domain {
            count[d] += 1;
        }
        count.iter().filter(|&&c| c > 1).count() == 2
    }
}

/// NCCL's `ncclTopoGetLocal`: indices with the best bandwidth, then best type.
fn get_local<'a>(paths: impl Iterator<Item = &'a SPath>) -> (Vec<usize>, PathType) {
    let mut min_type = PathType::Dis;
    let mut max_bw = 0.0f32;
    let mut out = Vec::new();
    for (i, p) in paths.enumerate() {
        if p.bw > max_bw || (p.bw == max_bw && p.ptype < min_type) {
            max_bw = p.bw;
            min_type = p.ptype;
            out.clear();
        }
        if p.bw == max_bw && p.ptype == min_type {
            out.push(i);
        }
    }
    (out, min_type)
}

/// `gpuPciBw`: min of the GPU's PCI uplink and the link back, as an int.
fn gpu_pci_bw(topo: &Topology, gpu: NodeIndex) -> i32 {
    for &e in out_links(topo, gpu) {
        let link = topo.graph[e];
        if link.kind != LinkKind::Pci {
            continue;
        }
        let Some((_, pci)) = topo.graph.edge_endpoints(e) else {
            continue;
        };
        for &back in out_links(topo, pci) {
            if topo.graph.edge_endpoints(back).map(|(_, t)| t) == Some(gpu) {
                return (link.bw as f32).min(topo.graph[back].bw as f32) as i32;
            }
        }
    }
    -1
}

/// A node's links in NCCL's order (`node->links`).
fn out_links(topo: &Topology, node: NodeIndex) -> &[EdgeIndex] {
    topo.adjacency
        .get(node.index())
        .map(|v| v.as_slice())
        .unwrap_or(&[])
}

/// Each link's `LinkCost`: the reverse link of the same kind is charged when the link enters a pre-Ampere GPU
/// (1/8, for paths that did not start at a GPU) or a POWER CPU over NVLink (in full).
fn link_costs(topo: &Topology, edge_bound: usize) -> Vec<LinkCost> {
    let mut costs = vec![
        LinkCost {
            pci: false,
            rev_from_gpu: RevCharge::None,
            rev_from_other: RevCharge::None,
        };
        edge_bound
    ];
    for e in topo.graph.edge_indices() {
        let Some((node, rem)) = topo.graph.edge_endpoints(e) else {
            continue;
        };
        let link = topo.graph[e];
        let reverse = || {
            topo.graph
                .edges_connecting(rem, node)
                .find(|r| r.weight().kind == link.kind)
                .map(|r| r.id().index() as u32)
        };
        let (mut rev_from_gpu, mut rev_from_other) = (RevCharge::None, RevCharge::None);
        match &topo.node(rem).data {
            NodeData::Gpu(g) if g.sm < 80 => {
                if let Some(r) = reverse() {
                    rev_from_other = RevCharge::Eighth(r);
                }
            }
            NodeData::Cpu(c) if c.arch == CpuArch::Power && link.kind == LinkKind::Nvl => {
                if let Some(r) = reverse() {
                    rev_from_gpu = RevCharge::Full(r);
                    rev_from_other = RevCharge::Full(r);
                }
            }
            _ => {}
        }
        costs[e.index()] = LinkCost {
            pci: link.kind == LinkKind::Pci,
            rev_from_gpu,
            rev_from_other,
        };
    }
    costs
}

/// A topology path as the search follows it: its links are the run `run` of the topology's shared list.
fn convert_path(
    topo: &Topology,
    start: NodeIndex,
    path: crate::topo::Path<'_>,
    run: std::ops::Range<usize>,
) -> Result<SPath> {
    let from_gpu = topo.node(start).kind == NodeKind::Gpu;
    let intel_overhead = from_gpu
        && path.ptype == PathType::Phb
        && path.links.iter().any(|&e| {
            topo.graph.edge_endpoints(e).is_some_and(|(_, rem)| {
                matches!(&topo.node(rem).data, NodeData::Cpu(cpu)
                    if cpu.arch == CpuArch::X86 && cpu.vendor == CpuVendor::Intel)
            })
        });
    let (Ok(first), Ok(count)) = (u32::try_from(run.start), u16::try_from(run.len())) else {
        return Err(Error::runtime(format!(
            "{}: the path list overflowed at {} links",
            topo.source, run.end
        )));
    };
    Ok(SPath {
        ptype: path.ptype,
        bw: path.bw as f32,
        start: first,
        count,
        intel_overhead,
        from_gpu,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror() {
        // 4 NICs: dev 1 (01b) -> 10b = 2, dev 2 -> 1, dev 3 -> 3.
        assert_eq!(mirror_bits(1, 4), 2);
        assert_eq!(mirror_bits(2, 4), 1);
        assert_eq!(mirror_bits(3, 4), 3);
        // 8 NICs: 1 (001) -> 100 = 4, 6 (110) -> 011 = 3.
        assert_eq!(mirror_bits(1, 8), 4);
        assert_eq!(mirror_bits(6, 8), 3);
        assert_eq!(mirror_bits(5, 1), 0);
    }

    #[test]
    fn search_paths_follow_the_topology_links() {
        // The search names runs of the topology's shared link list instead of copying them; every GPU-GPU,
        // GPU-NET and NET-GPU path must still cross exactly the topology path's links, PXN and CPU detours included.
        for f in crate::topo::fixtures::FIXTURES {
            let topo = crate::pipeline::load_fixture(f.name).unwrap();
            let sys = SearchSystem::new(&topo, false).unwrap();
            let gpus = topo.nodes(NodeKind::Gpu);
            let nets = topo.nodes(NodeKind::Net);
            let mut checked = 0;
            for (a, &ga) in gpus.iter().enumerate() {
                for (b, &gb) in gpus.iter().enumerate().filter(|&(b, _)| b != a) {
                    let want = topo.path(ga, gb).unwrap();
                    let got = sys.gpu_gpu(a, b);
                    assert_eq!(sys.hops(got), want.links, "{} GPU{a}->GPU{b}", f.name);
                    assert_eq!((got.ptype, got.count()), (want.ptype, want.hops()));
                    checked += 1;
                }
                for (n, &net) in nets.iter().enumerate() {
                    assert_eq!(
                        sys.hops(sys.gpu_net(a, n)),
                        topo.path(ga, net).unwrap().links
                    );
                    assert_eq!(
                        sys.hops(sys.net_gpu(n, a)),
                        topo.path(net, ga).unwrap().links
                    );
                    assert!(sys.gpu_net(a, n).from_gpu && !sys.net_gpu(n, a).from_gpu);
                }
            }
            assert!(checked > 0 || gpus.len() == 1, "{}", f.name);
        }
    }

    #[test]
    fn local_nets_agree_with_the_topology_stage() {
        // Our NET->GPU pairing (ncclTopoGetLocalGpu) must equal what paths.rs stored.
        for f in crate::topo::fixtures::FIXTURES {
            let topo = crate::pipeline::load_fixture(f.name).unwrap();
            let sys = SearchSystem::new(&topo, true).or_else(|_| SearchSystem::new(&topo, false));
            let sys = sys.unwrap();
            for (n, &node) in topo.nodes(NodeKind::Net).iter().enumerate() {
                let theirs = topo.node(node).net().unwrap().local_gpu;
                let ours = usize::try_from(sys.nets[n].local_gpu).ok();
                assert_eq!(ours, theirs, "{} NET {n}", f.name);
            }
        }
    }

    /// The packed keys order candidates exactly as NCCL's `cmpScore` on the int fields.
    #[test]
    fn score_keys_sort_like_nccl() {
        for f in crate::topo::fixtures::FIXTURES {
            let topo = crate::pipeline::load_fixture(f.name).unwrap();
            let inter = !topo.nodes(NodeKind::Net).is_empty();
            let sys = SearchSystem::new(&topo, inter).unwrap();
            let n = sys.ngpus;
            let nets: Vec<Option<usize>> = std::iter::once(None)
                .chain((0..sys.nnets()).map(Some))
                .collect();
            for gpu in 0..n {
                for &net in &nets {
                    let cands: Vec<usize> = (1..n).map(|i| (gpu + i) % n).collect();
                    let ints = |h: usize| {
                        let p = sys.gpu_gpu(gpu, h);
                        let (ih, ip, ib) = net.map_or((0, 0, 0), |x| {
                            let q = sys.net_gpu(x, h);
                            (q.count() as i32, sys.gpu_pci_bw[h], q.bw as i32)
                        });
                        let start = ((h + n - gpu) % n) as i32;
                        // Sort ascending on this tuple = NCCL's comparator.
                        (-ib, -ip, ih, -(p.bw as i32), p.count() as i32, start)
                    };
                    let mut by_ints = cands.clone();
                    by_ints.sort_by_key(|&h| ints(h));
                    let mut by_keys = cands.clone();
                    by_keys.sort_by_key(|&h| {
                        (
                            net.map_or(0, |x| sys.inter_key[x * n + h]),
                            sys.intra_key[gpu * n + h],
                        )
                    });
                    assert_eq!(by_keys, by_ints, "{} gpu {gpu} net {net:?}", f.name);
                }
            }
        }
    }

    #[test]
    fn capture_system() {
        let topo = crate::pipeline::load_fixture("h200x2-nvswitch-vm").unwrap();
        let sys = SearchSystem::new(&topo, false).unwrap();
        // 18 NVLinks x 20.6 GB/s = 370.8 to the NVSwitch, as NCCL's float product
        // (370.80002); GPU->GPU through the NVSwitch is 2 hops.
        assert_eq!(sys.max_bw, 18.0f32 * 20.6f32);
        assert_eq!(sys.total_bw, 18.0f32 * 20.6f32);
        assert_eq!(sys.gpu_gpu(0, 1).count(), 2);
        assert_eq!(sys.gpu_gpu(0, 1).ptype, PathType::Nvl);
        // PCIe Gen5 x16 = 48 both ways.
        assert_eq!(sys.gpu_pci_bw, vec![48, 48]);
        assert_eq!(sys.n_nvs, 1);
        // Intra: the first GPU's path to itself is LOC.
        assert_eq!(sys.gpu_gpu(1, 1).ptype, PathType::Loc);
        // Inter: maxBw is the NET path (10 Gb/s = 1.25 GB/s).
        let inter = SearchSystem::new(&topo, true).unwrap();
        assert_eq!(inter.max_bw, 1.25);
        assert_eq!(inter.nets[0].bw, 1.25);
        assert_eq!(inter.local_net[0][0], 0);
    }
}
