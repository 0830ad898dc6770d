//! NCCL's path computation (2.28 `src/graph/paths.cc`): a breadth-first search
//! to every CPU, GPU, NET and NVSwitch node, then NCCL's post-processing:
//! GPU pairs that may not use P2P are routed through the CPU, C2C+PHB becomes
//! P2C, GPU->NIC traffic may relay through an NVLink peer (PXN), and NICs
//! without GPU Direct RDMA are reached through the CPU.

use super::{CpuArch, CpuVendor, LinkKind, NodeKind, Path, PathType, Topology};
use crate::error::{Error, Result};
use petgraph::stable_graph::{EdgeIndex, NodeIndex};
use std::rc::Rc;
use std::sync::Arc;

/// The kinds NCCL computes paths to (`ncclTopoComputePaths`); paths are kept between nodes of these kinds only,
/// which is every path NCCL's search and log use: memory grows with (CPUs + GPUs + NETs)^2, not with PCI
/// switches and NICs too.
const PATH_KINDS: [NodeKind; 4] = [NodeKind::Cpu, NodeKind::Gpu, NodeKind::Net, NodeKind::Nvs];

/// NCCL's paths between the CPU, GPU, NET and NVS nodes of one topology, compact: a node of NCCL's largest host
/// (576 GPUs and 576 NICs) has 1.3 million paths, so each is a 16-byte cell whose links live in one shared list.
#[derive(Debug, Clone, Default)]
pub struct PathTable {
    /// Row and column of each node (by `NodeIndex::index()`); `None` for the kinds without paths.
    slot: Vec<Option<u32>>,
    width: usize,
    /// `cells[row * width + column]`.
    cells: Vec<Cell>,
    /// Every path's links, end to end; a cell names its run, which no other cell shares. A path that changes
    /// after the breadth-first search (`addInterStep`) gets the links of both halves copied in, as NCCL copies
    /// them: over its old run when it is no longer, else in a new run at the end. Shared with the search, which
    /// follows the same runs.
    links: Arc<Vec<EdgeIndex>>,
}

/// One path in the table; `ptype: None` where NCCL stores none.
#[derive(Debug, Clone, Copy, Default)]
struct Cell {
    bw: f64,
    start: u32,
    count: u16,
    ptype: Option<PathType>,
}

impl Cell {
    fn run(&self) -> std::ops::Range<usize> {
        self.start as usize..self.start as usize + self.count as usize
    }
}

impl PathTable {
    fn new(topo: &Topology) -> Self {
        let mut slot = vec![None; topo.adjacency.len()];
        let mut width = 0;
        for kind in PATH_KINDS {
            for &n in topo.nodes(kind) {
                if let Some(s) = slot.get_mut(n.index()) {
                    *s = Some(width as u32);
                    width += 1;
                }
            }
        }
        PathTable {
            slot,
            width,
            cells: vec![Cell::default(); width * width],
            links: Arc::default(),
        }
    }

    fn cell(&self, from: NodeIndex, to: NodeIndex) -> Option<usize> {
        let row = (*self.slot.get(from.index())?)? as usize;
        let column = (*self.slot.get(to.index())?)? as usize;
        Some(row * self.width + column)
    }

    /// The path from `from` to `to`, if NCCL has one.
    pub(crate) fn get(&self, from: NodeIndex, to: NodeIndex) -> Option<Path<'_>> {
        let cell = self.cells[self.cell(from, to)?];
        Some(Path {
            ptype: cell.ptype?,
            bw: cell.bw,
            links: self.links.get(cell.run())?,
        })
    }

    /// Every path's links end to end (what `link_run` indexes), shared rather than copied.
    pub(crate) fn shared_links(&self) -> Arc<Vec<EdgeIndex>> {
        Arc::clone(&self.links)
    }

    /// Where the links of the path from `from` to `to` sit in `shared_links`.
    pub(crate) fn link_run(
        &self,
        from: NodeIndex,
        to: NodeIndex,
    ) -> Option<std::ops::Range<usize>> {
        let cell = self.cells[self.cell(from, to)?];
        cell.ptype.map(|_| cell.run())
    }

    /// Store a path whose links are `links` (appended to the shared list).
    fn set(
        &mut self,
        from: NodeIndex,
        to: NodeIndex,
        ptype: PathType,
        bw: f64,
        links: impl IntoIterator<Item = EdgeIndex>,
    ) -> Result<()> {
        let Some(i) = self.cell(from, to) else {
            return Ok(());
        };
        // Not shared while the table is being filled, so this does not copy.
        let all = Arc::make_mut(&mut self.links);
        let start = all.len();
        all.extend(links);
        // A path crosses each link at most once per XML nesting level (at most `MAX_XML_DEPTH`) and the table holds
        // a few million links at NCCL's largest host, so neither bound is reached by a file the reader accepts.
        let (Ok(start), Ok(count)) = (u32::try_from(start), u16::try_from(all.len() - start))
        else {
            return Err(Error::runtime(format!(
                "path table overflow at {} links ({} in one path)",
                all.len(),
                all.len() - start
            )));
        };
        self.cells[i] = Cell {
            bw,
            start,
            count,
            ptype: Some(ptype),
        };
        Ok(())
    }

    /// Replace a stored path by one crossing `links` (`addInterStep`). Every cell owns its run, so a path no
    /// longer than the one it replaces is written over it (a PXN path is as long as the CPU path it replaces);
    /// a longer one is appended.
    fn replace(
        &mut self,
        from: NodeIndex,
        to: NodeIndex,
        ptype: PathType,
        bw: f64,
        links: &[EdgeIndex],
    ) -> Result<()> {
        let Some(i) = self.cell(from, to) else {
            return Ok(());
        };
        let old = self.cells[i];
        if old.ptype.is_none() || links.len() > old.count as usize {
            return self.set(from, to, ptype, bw, links.iter().copied());
        }
        let start = old.start as usize;
        let all = Arc::make_mut(&mut self.links);
        if let Some(run) = all.get_mut(start..start + links.len()) {
            run.copy_from_slice(links);
        }
        self.cells[i] = Cell {
            bw,
            start: old.start,
            count: links.len() as u16,
            ptype: Some(ptype),
        };
        Ok(())
    }

    /// Change a stored path's type (NCCL's P2C and PXN relabelling); its links stay.
    fn set_type(
        &mut self,
        from: NodeIndex,
        to: NodeIndex,
        ptype: impl FnOnce(PathType) -> PathType,
    ) {
        if let Some(i) = self.cell(from, to) {
            if let Some(t) = self.cells[i].ptype {
                self.cells[i].ptype = Some(ptype(t));
            }
        }
    }
}

/// The environment knobs that change paths (NCCL's defaults in `Default`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PathOptions {
    /// `NCCL_P2P_LEVEL` / `NCCL_P2P_DISABLE=1` (LOC); `None` = NCCL's default.
    pub(crate) p2p_level: Option<PathType>,
    /// `NCCL_NVB_DISABLE`: no NVLink routes through an intermediate GPU.
    pub(crate) nvb_disable: bool,
    /// `NCCL_PXN_DISABLE`.
    pub(crate) pxn_disable: bool,
    /// `NCCL_PXN_C2C` (default on): a PXN relay may reach its NIC through C2C.
    pub(crate) pxn_c2c: bool,
    /// `NCCL_NET_GDR_LEVEL`; `None` = PXB.
    pub(crate) gdr_level: Option<PathType>,
    /// `NCCL_NET_GDR_C2C` (default on).
    pub(crate) gdr_c2c: bool,
    /// `NCCL_IB_DISABLE`: NCCL's IB plugin refuses to start (net_ib/init.cc:291) and NCCL falls back to its
    /// socket transport, which takes host memory only (net_socket.cc:170 `ptrSupport = NCCL_PTR_HOST`): no NIC
    /// keeps GPU Direct RDMA, so GPU<->NIC traffic goes through the CPU as paths.cc:845-852 sets it.
    pub(crate) ib_disable: bool,
    /// `NCCL_IB_HCA`: the NICs kept; the others are left out of the topology.
    pub(crate) ib_hca: Option<crate::probe::net::IfList>,
}

impl Default for PathOptions {
    fn default() -> Self {
        PathOptions {
            p2p_level: None,
            nvb_disable: false,
            pxn_disable: false,
            pxn_c2c: true,
            gdr_level: None,
            gdr_c2c: true,
            ib_disable: false,
            ib_hca: None,
        }
    }
}

/// Fill `topo.paths` as NCCL does.
pub(crate) fn compute(topo: &mut Topology, options: &PathOptions) -> Result<()> {
    if options.ib_disable {
        for &net in &topo.nodes(NodeKind::Net).to_vec() {
            if let super::NodeData::Net(data) = &mut topo.graph[net].data {
                data.gdr = false;
            }
        }
    }
    let mut table = PathTable::new(topo);
    let mut column = Vec::new();
    for kind in PATH_KINDS {
        for &base in topo.nodes(kind) {
            set_paths_to(topo, base, options, &mut column);
            for row_kind in PATH_KINDS {
                for &from in topo.nodes(row_kind) {
                    materialize(&mut table, &column, from, base)?;
                }
            }
        }
    }
    Arc::make_mut(&mut table.links).shrink_to_fit();
    topo.paths = table;

    let gpus = topo.nodes(NodeKind::Gpu).to_vec();
    let nets = topo.nodes(NodeKind::Net).to_vec();

    // Every GPU must reach every other GPU; NCCL would trim an unreachable one,
    // for a planner that is a broken topology file.
    for &g in &gpus {
        for &p in &gpus {
            if topo
                .path(p, g)
                .is_none_or(|path| path.ptype == PathType::Dis)
            {
                return Err(Error::bad_input(format!(
                    "{}: GPU {} has no path to GPU {} (is it under a <cpu>?)",
                    topo.source,
                    topo.node(p).nccl_label(),
                    topo.node(g).nccl_label()
                )));
            }
        }
    }

    // GPU pairs beyond the P2P level go through the CPU local to the destination.
    let p2p_level = options.p2p_level.unwrap_or_else(|| {
        let cpu = topo.first_cpu();
        let amd = cpu.is_some_and(|c| c.arch == CpuArch::X86 && c.vendor == CpuVendor::Amd);
        if amd && gpus.len() <= 2 {
            PathType::Sys
        } else {
            PathType::Pxb
        }
    });
    // ncclTopoCheckP2p also asks NVML whether the pair may use P2P; where the driver refuses (GeForce cards, NVML's
    // P2P status not OK) a PCIe pair within the level is routed through the CPU too, so NCCL's P2P transport
    // refuses it and the SHM transport stages it through host memory ("P2P is disabled between connected GPUs").
    // NVLink pairs NCCL refuses instead (an init error), so they are left as they are.
    let nvml_p2p = |topo: &Topology, g: NodeIndex| match &topo.node(g).data {
        super::NodeData::Gpu(gpu) => gpu.nvml_p2p,
        _ => true,
    };
    for &g in &gpus {
        for &p in &gpus {
            let ptype = topo.path(p, g).map(|x| x.ptype).unwrap_or(PathType::Dis);
            let driver_refuses =
                p != g && ptype > PathType::Nvb && !(nvml_p2p(topo, p) && nvml_p2p(topo, g));
            if ptype > p2p_level || driver_refuses {
                let cpu = local_cpu(topo, g)?;
                add_inter_step(topo, cpu, p, g)?;
            }
        }
    }

    // GPU -> NIC through C2C to the CPU then PCIe: P2C.
    for &net in &nets {
        for &g in &gpus {
            let cpu = local_cpu(topo, g)?;
            let gpu_cpu = topo.path(g, cpu).map(|p| p.ptype).unwrap_or(PathType::Dis);
            let net_cpu = topo
                .path(net, cpu)
                .map(|p| p.ptype)
                .unwrap_or(PathType::Dis);
            if merge_path_type(gpu_cpu, net_cpu) == PathType::P2c {
                for (a, b) in [(g, net), (net, g)] {
                    topo.paths.set_type(a, b, |t| t.min(PathType::P2c));
                }
            }
        }
    }

    // PXN and GPU Direct RDMA. NCCL asks for the NET's local GPU again for every GPU because the steps below
    // change paths; the answer is kept while none of the paths it read changes (`LocalMemo`).
    let mut local_gpus = LocalMemo::new(topo);
    for (n, &net) in nets.iter().enumerate() {
        for (g, &gpu) in gpus.iter().enumerate() {
            if !options.pxn_disable {
                if let Some(local) = local_gpus.local_gpu(topo, n) {
                    if local != g {
                        let peer = gpus[local];
                        let pxn_type = if options.pxn_c2c {
                            PathType::P2c
                        } else {
                            PathType::Pxb
                        };
                        let peer_net = topo.path(peer, net).map(|p| (p.ptype, p.bw));
                        let peer_gpu = topo.path(peer, gpu).map(|p| p.ptype);
                        let gpu_net = topo.path(gpu, net).map(|p| (p.ptype, p.bw));
                        if let (Some(peer_net), Some(peer_gpu), Some(gpu_net)) =
                            (peer_net, peer_gpu, gpu_net)
                        {
                            if peer_net.0 <= pxn_type
                                && peer_gpu <= PathType::Nvl
                                && topo.node(peer).id >> 56 == topo.node(gpu).id >> 56
                                && (peer_net.1 > gpu_net.1 || gpu_net.0 > PathType::Pxn)
                            {
                                add_inter_step(topo, peer, gpu, net)?;
                                topo.paths.set_type(gpu, net, |_| PathType::Pxn);
                                local_gpus.changed(gpu);
                            }
                        }
                    }
                }
            }
            let gpu_net = topo
                .path(gpu, net)
                .map(|p| p.ptype)
                .unwrap_or(PathType::Dis);
            if gpu_net < PathType::Phb && !gdr_enabled(topo, gpu, net, options) {
                let cpu = local_cpu(topo, gpu)?;
                add_inter_step(topo, cpu, net, gpu)?;
                add_inter_step(topo, cpu, gpu, net)?;
                local_gpus.changed(net);
                local_gpus.changed(gpu);
            }
        }
    }

    // NCCL pre-computes each NET's local GPU for the search.
    for (n, &net) in nets.iter().enumerate() {
        let local = local_gpus.local_gpu(topo, n);
        if let super::NodeData::Net(data) = &mut topo.graph[net].data {
            data.local_gpu = local;
        }
    }
    Ok(())
}

/// One node's path to the base during the breadth-first search: its first link and the node that link leads to,
/// whose own path follows. A node's path is final once its BFS level is done, before any node extends it, so the
/// chain of `next` nodes spells the same links NCCL copies into each path.
#[derive(Debug, Clone, Copy)]
struct Step {
    ptype: PathType,
    bw: f64,
    count: usize,
    /// `None` for the base itself and for DIS entries.
    first: Option<(EdgeIndex, NodeIndex)>,
}

/// Store the path of `from` to `base` from a finished BFS column, links spelled out.
fn materialize(
    table: &mut PathTable,
    column: &[Option<Step>],
    from: NodeIndex,
    base: NodeIndex,
) -> Result<()> {
    let Some(step) = column.get(from.index()).copied().flatten() else {
        return Ok(());
    };
    // Each node's first link, then the path of the node it leads to: the links NCCL copied into this path.
    let mut at = Some(step);
    let links = std::iter::from_fn(|| {
        let (edge, next) = at?.first?;
        at = column.get(next.index()).copied().flatten();
        Some(edge)
    })
    .take(step.count);
    table.set(from, base, step.ptype, step.bw, links)
}

/// `ncclTopoSetPaths`: breadth-first from `base`, storing in every node (in `column`, by node index) its path *to*
/// `base`.
fn set_paths_to(
    topo: &Topology,
    base: NodeIndex,
    options: &PathOptions,
    column: &mut Vec<Option<Step>>,
) {
    column.clear();
    column.resize(topo.adjacency.len(), None);
    // NCCL initialises the paths to base from nodes of base's own kind as DIS.
    for &other in topo.nodes(topo.node(base).kind) {
        column[other.index()] = Some(Step {
            ptype: PathType::Dis,
            bw: 0.0,
            count: 0,
            first: None,
        });
    }
    column[base.index()] = Some(Step {
        ptype: PathType::Loc,
        bw: crate::limits::LOC_BW,
        count: 0,
        first: None,
    });
    let mut frontier = vec![base];
    let mut queued = vec![false; topo.adjacency.len()];
    while !frontier.is_empty() {
        let mut next: Vec<NodeIndex> = Vec::new();
        for &node in &frontier {
            let Some(path) = column[node.index()] else {
                continue;
            };
            for &edge in &topo.adjacency[node.index()] {
                let link = topo.graph[edge];
                let rem = topo.link_target(edge);
                let bw = path.bw.min(link.bw);
                // Routing through a GPU is allowed only as one NVLink hop (NVB).
                if node != base
                    && topo.graph[node].kind == NodeKind::Gpu
                    && (options.nvb_disable
                        || link.kind != LinkKind::Nvl
                        || topo.graph[rem].kind != NodeKind::Gpu
                        || path.count > 1)
                {
                    continue;
                }
                let (rem_bw, rem_count) = column[rem.index()].map_or((0.0, 0), |p| (p.bw, p.count));
                if (rem_bw == 0.0 || rem_count > path.count) && rem_bw < bw {
                    // The reverse link: from rem back to node, of the same kind.
                    let Some(&reverse) = topo.adjacency[rem.index()]
                        .iter()
                        .find(|&&e| topo.link_target(e) == node && topo.graph[e].kind == link.kind)
                    else {
                        continue;
                    };
                    let count = path.count + 1;
                    let mut hop = if link.kind == LinkKind::Net {
                        PathType::Loc
                    } else {
                        PathType::from_link(link.kind)
                    };
                    let node_kind = topo.graph[node].kind;
                    let rem_kind = topo.graph[rem].kind;
                    if node_kind == NodeKind::Pci && rem_kind == NodeKind::Pci {
                        hop = PathType::Pxb;
                    }
                    if link.kind == LinkKind::Pci
                        && (node_kind == NodeKind::Cpu || rem_kind == NodeKind::Cpu)
                    {
                        hop = PathType::Phb;
                    }
                    if node_kind == NodeKind::Gpu
                        && path.ptype == PathType::Nvl
                        && hop == PathType::Nvl
                        && count > 1
                    {
                        hop = PathType::Nvb;
                    }
                    column[rem.index()] = Some(Step {
                        ptype: path.ptype.max(hop),
                        bw,
                        count,
                        first: Some((reverse, node)),
                    });
                    if !std::mem::replace(&mut queued[rem.index()], true) {
                        next.push(rem);
                    }
                }
            }
        }
        for &n in &next {
            queued[n.index()] = false;
        }
        frontier = next;
    }
}

/// `ncclTopoGetLocal`, `ncclTopoGetLocalNet` and `ncclTopoGetLocalGpu` over paths that change (PXN and GPU Direct
/// RDMA rewrite some while NCCL keeps asking): every answer is kept while the paths it read stay the same, so a
/// host of 576 GPUs and 576 NICs asks `ncclTopoGetLocal` about a thousand times, not a billion.
/// `changed(node)` after a path from `node` changes.
struct LocalMemo {
    /// Per node (by index), how often paths from it changed.
    version: Vec<u64>,
    /// How often any path changed.
    epoch: u64,
    /// `ncclTopoGetLocal(node, GPU)` and `(node, NET)` per node, with the node's version they were read at.
    to_gpu: Vec<Option<(u64, Rc<[usize]>)>>,
    to_net: Vec<Option<(u64, Rc<[usize]>)>>,
    /// Per NET: `ncclTopoGetLocalGpu`'s answer, the epoch it was read at, and the (node, version) pairs it read.
    local_gpu: Vec<Option<LocalGpuAnswer>>,
}

struct LocalGpuAnswer {
    gpu: Option<usize>,
    epoch: u64,
    read: Vec<(NodeIndex, u64)>,
}

impl LocalMemo {
    fn new(topo: &Topology) -> Self {
        let nodes = topo.adjacency.len();
        LocalMemo {
            version: vec![0; nodes],
            epoch: 0,
            to_gpu: vec![None; nodes],
            to_net: vec![None; nodes],
            local_gpu: (0..topo.nodes(NodeKind::Net).len()).map(|_| None).collect(),
        }
    }

    fn changed(&mut self, node: NodeIndex) {
        if let Some(v) = self.version.get_mut(node.index()) {
            *v += 1;
        }
        self.epoch += 1;
    }

    fn version(&self, node: NodeIndex) -> u64 {
        self.version.get(node.index()).copied().unwrap_or(0)
    }

    /// `best_local(topo, from, kind)` for kind GPU or NET, kept until a path from `from` changes.
    fn best(&mut self, topo: &Topology, from: NodeIndex, kind: NodeKind) -> Rc<[usize]> {
        let version = self.version(from);
        let memo = match kind {
            NodeKind::Gpu => &mut self.to_gpu,
            NodeKind::Net => &mut self.to_net,
            _ => return best_local(topo, from, kind).into(),
        };
        let Some(entry) = memo.get_mut(from.index()) else {
            return best_local(topo, from, kind).into();
        };
        match entry {
            Some((v, found)) if *v == version => found.clone(),
            _ => {
                let found: Rc<[usize]> = best_local(topo, from, kind).into();
                *entry = Some((version, found.clone()));
                found
            }
        }
    }

    /// `ncclTopoGetLocalNet` (policy AUTO): the NET index a GPU uses on each channel `0..MAX_CHANNELS`.
    fn local_nets(&mut self, topo: &Topology, gpu_index: usize) -> Option<LocalNets> {
        let gpu = *topo.nodes(NodeKind::Gpu).get(gpu_index)?;
        let nets = self.best(topo, gpu, NodeKind::Net);
        let first = *nets.first()?;
        let local_gpus = self
            .best(topo, topo.nodes(NodeKind::Net)[first], NodeKind::Gpu)
            .len();
        let mut base = topo.node(gpu).gpu()?.dev.max(0) as usize;
        if nets.len().is_power_of_two() {
            base = mirror_bits(base, nets.len());
        }
        Some(LocalNets {
            nets_per_gpu: nets.len().div_ceil(local_gpus.max(1)).max(1),
            base,
            nets,
        })
    }

    /// `ncclTopoGetLocalGpu`: the GPU (index) that uses NET `net_index` on some channel.
    fn local_gpu(&mut self, topo: &Topology, net_index: usize) -> Option<usize> {
        if let Some(Some(answer)) = self.local_gpu.get(net_index) {
            if answer.epoch == self.epoch || answer.read.iter().all(|&(n, v)| self.version(n) == v)
            {
                return answer.gpu;
            }
        }
        let net = *topo.nodes(NodeKind::Net).get(net_index)?;
        let local_gpus = self.best(topo, net, NodeKind::Gpu);
        // The answer reads the paths from the NET, from its best GPUs and from those GPUs' first NETs.
        let mut read = vec![(net, self.version(net))];
        let mut per_gpu = Vec::with_capacity(local_gpus.len());
        for &g in local_gpus.iter() {
            let gpu = topo.nodes(NodeKind::Gpu)[g];
            read.push((gpu, self.version(gpu)));
            let nets = self.local_nets(topo, g);
            if let Some(first) = nets.as_ref().and_then(|n| n.nets.first()) {
                let first = topo.nodes(NodeKind::Net)[*first];
                read.push((first, self.version(first)));
            }
            per_gpu.push((g, nets));
        }
        let gpu = (0..crate::limits::MAX_CHANNELS).find_map(|channel| {
            per_gpu.iter().find_map(|(g, nets)| {
                (nets.as_ref()?.on_channel(channel) == net_index).then_some(*g)
            })
        });
        if let Some(slot) = self.local_gpu.get_mut(net_index) {
            *slot = Some(LocalGpuAnswer {
                gpu,
                epoch: self.epoch,
                read,
            });
        }
        gpu
    }
}

/// A GPU's NETs as `ncclTopoGetLocalNet` picks among them per channel.
struct LocalNets {
    nets: Rc<[usize]>,
    nets_per_gpu: usize,
    base: usize,
}

impl LocalNets {
    fn on_channel(&self, channel: usize) -> usize {
        self.nets[(self.base + channel % self.nets_per_gpu) % self.nets.len()]
    }
}

/// `mergePathType`: PHB after C2C is P2C, otherwise the worse of the two.
fn merge_path_type(a: PathType, b: PathType) -> PathType {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    if hi == PathType::Phb && lo == PathType::C2c {
        PathType::P2c
    } else {
        hi
    }
}

/// `addInterStep`: make `src -> dst` go through `via` (a CPU, or a GPU for PXN).
fn add_inter_step(
    topo: &mut Topology,
    via: NodeIndex,
    src: NodeIndex,
    dst: NodeIndex,
) -> Result<()> {
    let (Some(first), Some(second)) = (topo.path(src, via), topo.path(via, dst)) else {
        return Ok(());
    };
    let ptype = if topo.node(via).kind == NodeKind::Gpu {
        PathType::Pxn
    } else {
        merge_path_type(first.ptype, second.ptype)
    };
    let bw = first.bw.min(second.bw);
    let links: Vec<EdgeIndex> = first.links.iter().chain(second.links).copied().collect();
    topo.paths.replace(src, dst, ptype, bw, &links)
}

/// `ncclGetLocalCpu`: the CPU fewest hops away.
pub(crate) fn local_cpu(topo: &Topology, gpu: NodeIndex) -> Result<NodeIndex> {
    let mut best: Option<(usize, NodeIndex)> = None;
    for &cpu in topo.nodes(NodeKind::Cpu) {
        let hops = topo.path(gpu, cpu).map_or(0, |p| p.hops());
        if hops > 0 && best.is_none_or(|(h, _)| hops < h) {
            best = Some((hops, cpu));
        }
    }
    best.map(|(_, c)| c).ok_or_else(|| {
        Error::bad_input(format!(
            "{}: no CPU is reachable from {}",
            topo.source,
            topo.node(gpu).nccl_label()
        ))
    })
}

/// `ncclTopoGetLocal`: indices (within `to_kind`) of the nodes with the best
/// bandwidth from `from`, then the best path type.
pub(crate) fn best_local(topo: &Topology, from: NodeIndex, to_kind: NodeKind) -> Vec<usize> {
    let mut max_bw = 0.0;
    let mut min_type = PathType::Dis;
    let mut found = Vec::new();
    for (i, &to) in topo.nodes(to_kind).iter().enumerate() {
        let (bw, ptype) = topo
            .path(from, to)
            .map_or((0.0, PathType::Dis), |p| (p.bw, p.ptype));
        if bw > max_bw || (bw == max_bw && ptype < min_type) {
            max_bw = bw;
            min_type = ptype;
            found.clear();
        }
        if bw == max_bw && ptype == min_type {
            found.push(i);
        }
    }
    found
}

/// `mirrorBits`: reverse the low log2(pow2) bits of `val`.
pub(crate) fn mirror_bits(val: usize, pow2: usize) -> usize {
    let mut mirror = 0;
    let (mut b, mut mb) = (1, pow2 >> 1);
    while b < pow2 {
        if val & b != 0 {
            mirror |= mb;
        }
        b <<= 1;
        mb >>= 1;
    }
    mirror
}

/// `ncclTopoCheckGdr` for writes (receives), as the path computation asks it.
fn gdr_enabled(topo: &Topology, gpu: NodeIndex, net: NodeIndex, options: &PathOptions) -> bool {
    let net_gdr = topo.node(net).net().is_some_and(|n| n.gdr);
    let gpu_gdr = topo.node(gpu).gpu().is_some_and(|g| g.gdr);
    if !net_gdr || !gpu_gdr {
        return false;
    }
    let level = options.gdr_level.unwrap_or(PathType::Pxb);
    let mut via = gpu;
    let mut distance = topo.path(gpu, net).map_or(PathType::Dis, |p| p.ptype);
    if distance == PathType::Pxn {
        // Use the relay GPU's own distance.
        if let Some(path) = topo.path(gpu, net) {
            if let Some(relay) = path
                .links
                .iter()
                .map(|&e| topo.link_target(e))
                .find(|&n| topo.node(n).kind != NodeKind::Nvs)
                .filter(|&n| topo.node(n).kind == NodeKind::Gpu)
            {
                via = relay;
            }
        }
        distance = topo.path(via, net).map_or(PathType::Dis, |p| p.ptype);
    }
    if options.gdr_c2c && distance == PathType::P2c {
        distance = PathType::C2c;
    }
    distance <= level
}

/// NCCL's per-node path line (`printNodePaths`):
/// `GPU/0-60 :GPU/0-60 (0/5000.0/LOC) GPU/0-70 (2/370.8/NVL) ...`.
pub fn nccl_path_line(topo: &Topology, from: NodeIndex) -> String {
    let mut line = format!("{} :", topo.node(from).nccl_label());
    for kind in NodeKind::ALL {
        for &to in topo.nodes(kind) {
            if let Some(p) = topo.path(from, to) {
                line.push_str(&format!(
                    "{} ({}/{:.1}/{}) ",
                    topo.node(to).nccl_label(),
                    p.hops(),
                    p.bw,
                    p.ptype.nccl_name()
                ));
            }
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topo::build;
    use crate::xml;

    fn capture() -> Topology {
        let text = include_str!("../../fixtures/h200x2-nvswitch-vm.xml");
        build::from_xml(&xml::parse(text, "capture").unwrap(), "capture").unwrap()
    }

    #[test]
    fn capture_path_lines_equal_nccl_log() {
        // Verbatim from shared/captures/h200x2-nvswitch-vm/nccl-init-rank0.log.
        let expected = [
            "GPU/0-60 :GPU/0-60 (0/5000.0/LOC) GPU/0-70 (2/370.8/NVL) NVS/0-0 (1/370.8/NVL) CPU/0-ffffffffffffff (1/48.0/PHB) NET/0-0 (3/1.2/PHB) ",
            "GPU/0-70 :GPU/0-60 (2/370.8/NVL) GPU/0-70 (0/5000.0/LOC) NVS/0-0 (1/370.8/NVL) CPU/0-ffffffffffffff (1/48.0/PHB) NET/0-0 (3/1.2/PHB) ",
            "NET/0-0 :GPU/0-60 (3/1.2/PHB) GPU/0-70 (3/1.2/PHB) CPU/0-ffffffffffffff (2/1.2/PHB) NET/0-0 (0/5000.0/LOC) ",
        ];
        let t = capture();
        let mut lines: Vec<String> = t
            .nodes(NodeKind::Gpu)
            .iter()
            .map(|&g| nccl_path_line(&t, g))
            .collect();
        lines.extend(
            t.nodes(NodeKind::Net)
                .iter()
                .map(|&n| nccl_path_line(&t, n)),
        );
        assert_eq!(lines, expected);
    }

    /// An illustrative machine (made up, not a capture): two sm80 GPUs under different Gen4 switches of one
    /// Intel socket, 12 NVLinks between them, a 200 Gb/s NIC beside GPU 0.
    const PXN_EXAMPLE: &str = r#"<system version="1">
  <cpu host_hash="0x9a3c51e07b2d4f18" numaid="0" affinity="00000000,0000ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="106">
    <pci busid="0000:15:00.0" class="0x060400" vendor="0x10b5" device="0xc010" subsystem_vendor="0x10b5" subsystem_device="0xa000" link_speed="16.0 GT/s PCIe" link_width="16">
      <pci busid="0000:17:00.0" class="0x030200" vendor="0x10de" device="0x20b5" subsystem_vendor="0x10de" subsystem_device="0x1533" link_speed="16.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="80" rank="0" gdr="1" mlopart="-1">
          <nvlink target="0000:65:00.0" count="12" tclass="0x030200"/>
        </gpu>
      </pci>
      <pci busid="0000:18:00.0" class="0x020000" vendor="0x15b3" device="0x101b" subsystem_vendor="0x15b3" subsystem_device="0x0007" link_speed="16.0 GT/s PCIe" link_width="16">
        <nic>
          <net name="mlx5_0" dev="0" latency="0" speed="200000" port="1" guid="0x1c34da0300a1b2c3" maxconn="131072" gdr="1" net="1"/>
        </nic>
      </pci>
    </pci>
    <pci busid="0000:63:00.0" class="0x060400" vendor="0x10b5" device="0xc010" subsystem_vendor="0x10b5" subsystem_device="0xa000" link_speed="16.0 GT/s PCIe" link_width="16">
      <pci busid="0000:65:00.0" class="0x030200" vendor="0x10de" device="0x20b5" subsystem_vendor="0x10de" subsystem_device="0x1533" link_speed="16.0 GT/s PCIe" link_width="16">
        <gpu dev="1" sm="80" rank="1" gdr="1" mlopart="-1">
          <nvlink target="0000:17:00.0" count="12" tclass="0x030200"/>
        </gpu>
      </pci>
    </pci>
  </cpu>
</system>
"#;

    #[test]
    fn pxn_example_paths() {
        let t = build::from_xml(&xml::parse(PXN_EXAMPLE, "ex").unwrap(), "ex").unwrap();
        let g = t.nodes(NodeKind::Gpu).to_vec();
        let net = t.nodes(NodeKind::Net)[0];
        // GPU<->GPU: 12 NVLinks x 20.0 GB/s (sm80) = 240, one hop.
        let p = t.path(g[0], g[1]).unwrap();
        assert_eq!((p.ptype, p.bw, p.hops()), (PathType::Nvl, 240.0, 1));
        // GPU0 -> NET: GPU->switch->NIC->NET, PIX, min(24 Gen4 x16, 24, 200000/8000 = 25) = 24.
        let p = t.path(g[0], net).unwrap();
        assert_eq!((p.ptype, p.bw, p.hops()), (PathType::Pix, 24.0, 3));
        // GPU1 -> NET would be PHB through the CPU; NCCL relays it through GPU0
        // over NVLink instead: PXN, bw min(240, 24) = 24, 1 + 3 hops.
        let p = t.path(g[1], net).unwrap();
        assert_eq!((p.ptype, p.bw, p.hops()), (PathType::Pxn, 24.0, 4));
        // NET -> GPU1 stays PHB (NCCL only relays GPU->NIC): NET->NIC->sw->CPU->sw->GPU.
        let p = t.path(net, g[1]).unwrap();
        assert_eq!((p.ptype, p.hops()), (PathType::Phb, 5));
        // The NIC's local GPU is GPU 0.
        assert_eq!(t.node(net).net().unwrap().local_gpu, Some(0));
        // With PXN disabled, GPU1 -> NET stays PHB.
        let opts = PathOptions {
            pxn_disable: true,
            ..Default::default()
        };
        let t2 =
            build::from_xml_with(&xml::parse(PXN_EXAMPLE, "ex").unwrap(), "ex", &opts).unwrap();
        let g1 = t2.nodes(NodeKind::Gpu)[1];
        assert_eq!(
            t2.path(g1, t2.nodes(NodeKind::Net)[0]).unwrap().ptype,
            PathType::Phb
        );
        // With P2P limited to PIX, GPU0 -> GPU1 (NVL) is still allowed; limited to LOC it goes through the CPU.
        let opts = PathOptions {
            p2p_level: Some(PathType::Loc),
            ..Default::default()
        };
        let t3 =
            build::from_xml_with(&xml::parse(PXN_EXAMPLE, "ex").unwrap(), "ex", &opts).unwrap();
        let g = t3.nodes(NodeKind::Gpu).to_vec();
        let p = t3.path(g[0], g[1]).unwrap();
        // GPU0->sw->CPU (PHB, 24) then CPU->sw->GPU1 (PHB, 24): PHB, 4 hops.
        assert_eq!((p.ptype, p.bw, p.hops()), (PathType::Phb, 24.0, 4));
    }

    #[test]
    fn ib_disable_takes_gpu_direct_rdma_away() {
        let parse = |opts: &PathOptions| {
            build::from_xml_with(&xml::parse(PXN_EXAMPLE, "ex").unwrap(), "ex", opts).unwrap()
        };
        let t = parse(&PathOptions::default());
        let (g0, net) = (t.nodes(NodeKind::Gpu)[0], t.nodes(NodeKind::Net)[0]);
        assert!(t.path(g0, net).unwrap().ptype < PathType::Phb);
        // NCCL's socket fallback takes host memory only: GPU0 -> NIC goes through the CPU (PHB), no PXN.
        let t = parse(&PathOptions {
            ib_disable: true,
            ..Default::default()
        });
        assert!(!t.node(net).net().unwrap().gdr);
        assert_eq!(t.path(g0, net).unwrap().ptype, PathType::Phb);
        let g1 = t.nodes(NodeKind::Gpu)[1];
        assert_eq!(t.path(g1, net).unwrap().ptype, PathType::Phb);
    }

    #[test]
    fn mirror_bits_reverse_low_bits() {
        // 8 NICs: GPU 1 (001) -> 4 (100), GPU 3 (011) -> 6 (110).
        assert_eq!(mirror_bits(1, 8), 4);
        assert_eq!(mirror_bits(3, 8), 6);
        assert_eq!(mirror_bits(0, 1), 0);
    }
}

#[cfg(test)]
mod ib_hca_tests {
    use crate::probe::net::IfList;

    /// What a topology keeps of a NIC named `name` on `port`.
    fn keeps(list: &IfList, name: &str, port: i64) -> bool {
        list.accepts(name, Some(port))
    }

    #[test]
    fn prefix_exclude_exact_and_port_as_nccl_matches_them() {
        let prefix = IfList::parse("mlx5_1");
        assert!(keeps(&prefix, "mlx5_1", 1) && keeps(&prefix, "mlx5_10", 1));
        assert!(!keeps(&prefix, "mlx5_0", 1));
        let exact = IfList::parse("=mlx5_1");
        assert!(keeps(&exact, "mlx5_1", 1) && !keeps(&exact, "mlx5_10", 1));
        let exclude = IfList::parse("^mlx5_0,mlx5_2");
        assert!(
            !keeps(&exclude, "mlx5_0", 1)
                && !keeps(&exclude, "mlx5_2", 1)
                && keeps(&exclude, "mlx5_1", 1)
        );
        let exclude_exact = IfList::parse("^=mlx5_1");
        assert!(!keeps(&exclude_exact, "mlx5_1", 1) && keeps(&exclude_exact, "mlx5_10", 1));
        let port = IfList::parse("mlx5_0:2,mlx5_1");
        assert!(
            !keeps(&port, "mlx5_0", 1) && keeps(&port, "mlx5_0", 2) && keeps(&port, "mlx5_1", 2)
        );
    }
}
