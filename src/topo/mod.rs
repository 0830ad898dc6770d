//! The topology stage: what the machine is, in NCCL's terms.
//!
//! `crate::xml` reads and writes NCCL's topology files, `build` turns an XML tree into
//! a graph of nodes and links with NCCL's bandwidths, `paths` computes NCCL's
//! path type, bottleneck bandwidth and hops for every pair of nodes, and
//! `fixtures` holds the built-in machines; `vendor` and `gpu_models` complete partial vendor topology files,
//! `mnnvl` joins the trays of one multi-node NVLink domain, `cluster` replicates a host `--nodes` times. A `Topology` is one node (one host);
//! a `Cluster` is that host replicated `--nodes` times and joined through NICs,
//! the way NCCL sees a multi-node job (each rank searches its own host's graph).

pub mod build;
pub mod cluster;
pub mod fixtures;
pub mod gpu_models;
pub mod mnnvl;
pub mod paths;
pub mod vendor;

pub use cluster::Cluster;

use crate::xml::XmlNode;
use petgraph::stable_graph::{EdgeIndex, NodeIndex, StableDiGraph};
use serde::Serialize;

/// NCCL's node types (`src/graph/topo.h`), in NCCL's order (before v2.30's DEV nodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum NodeKind {
    Gpu = 0,
    Pci = 1,
    Nvs = 2,
    Cpu = 3,
    Nic = 4,
    Net = 5,
}

impl NodeKind {
    pub(crate) const ALL: [NodeKind; 6] = [
        NodeKind::Gpu,
        NodeKind::Pci,
        NodeKind::Nvs,
        NodeKind::Cpu,
        NodeKind::Nic,
        NodeKind::Net,
    ];
    /// The name NCCL prints (`GPU`, `PCI`, `NVS`, `CPU`, `NIC`, `NET`).
    pub(crate) fn nccl_name(self) -> &'static str {
        ["GPU", "PCI", "NVS", "CPU", "NIC", "NET"][self as usize]
    }
}

/// NCCL's link types; the numbers equal the path type a link alone makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub(crate) enum LinkKind {
    Loc = 0,
    Nvl = 1,
    C2c = 3,
    Pci = 4,
    Sys = 9,
    Net = 10,
}

impl LinkKind {
    pub(crate) fn nccl_name(self) -> &'static str {
        match self {
            LinkKind::Loc => "LOC",
            LinkKind::Nvl => "NVL",
            LinkKind::C2c => "C2C",
            LinkKind::Pci => "PCI",
            LinkKind::Sys => "SYS",
            LinkKind::Net => "NET",
        }
    }
}

/// NCCL's path types, best to worst (`src/include/graph.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum PathType {
    Loc = 0,
    Nvl = 1,
    Nvb = 2,
    C2c = 3,
    Pix = 4,
    Pxb = 5,
    P2c = 6,
    Pxn = 7,
    Phb = 8,
    Sys = 9,
    Net = 10,
    Dis = 11,
}

impl PathType {
    pub(crate) const ALL: [PathType; 12] = [
        PathType::Loc,
        PathType::Nvl,
        PathType::Nvb,
        PathType::C2c,
        PathType::Pix,
        PathType::Pxb,
        PathType::P2c,
        PathType::Pxn,
        PathType::Phb,
        PathType::Sys,
        PathType::Net,
        PathType::Dis,
    ];
    pub fn nccl_name(self) -> &'static str {
        [
            "LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS",
        ][self as usize]
    }
    pub(crate) fn from_index(i: usize) -> Option<PathType> {
        PathType::ALL.get(i).copied()
    }
    /// Parse NCCL's names (graph XML `typeintra`, `NCCL_P2P_LEVEL`), case-insensitive.
    pub(crate) fn from_name(name: &str) -> Option<PathType> {
        PathType::ALL
            .iter()
            .copied()
            .find(|t| t.nccl_name().eq_ignore_ascii_case(name.trim()))
    }
    pub(crate) fn from_link(kind: LinkKind) -> PathType {
        match kind {
            LinkKind::Loc => PathType::Loc,
            LinkKind::Nvl => PathType::Nvl,
            LinkKind::C2c => PathType::C2c,
            LinkKind::Pci => PathType::Pix,
            LinkKind::Sys => PathType::Sys,
            LinkKind::Net => PathType::Net,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CpuArch {
    X86,
    Power,
    Arm,
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CpuVendor {
    Intel,
    Amd,
    Zhaoxin,
    Unknown,
}

/// Intel CPU generation as NCCL classifies it by model number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum IntelModel {
    Broadwell,
    Skylake,
    SapphireRapids,
    EmeraldRapids,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuNode {
    /// NVML / CUDA device index on its host (`dev`).
    pub(crate) dev: i32,
    /// NCCL rank (`rank`).
    pub(crate) rank: i32,
    /// Compute capability x10 + minor, e.g. 90 for sm_90.
    pub sm: u32,
    /// GPU Direct RDMA supported (`gdr`).
    pub(crate) gdr: bool,
    /// PCI bus id, lower case (`0000:00:06.0`).
    pub(crate) busid: String,
    /// Whether the driver allows P2P between this GPU and its PCIe peers: planner's `nvml_p2p` attribute (NCCL
    /// ignores it; at init it asks NVML, `nvmlDeviceGetP2PStatus` in `ncclTopoCheckP2p`), `nvml_p2p="0"` on
    /// GeForce cards, whose driver refuses P2P. Default: allowed.
    #[serde(skip)]
    pub(crate) nvml_p2p: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CpuNode {
    /// NUMA node (-1 when unknown, as in VMs).
    pub(crate) numa: i64,
    pub(crate) arch: CpuArch,
    pub(crate) vendor: CpuVendor,
    pub(crate) family: u32,
    pub(crate) model: u32,
    /// CPU list or mask as written in the XML `affinity` attribute, if any.
    pub(crate) affinity: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetNode {
    /// Net plugin device index (`dev`).
    pub(crate) dev: i64,
    pub name: String,
    /// Link speed in Mb/s (`speed`).
    pub speed_mbps: f64,
    /// Latency in µs reported by the plugin (`latency`, 0 for IB and sockets).
    pub latency_us: f64,
    pub(crate) port: i64,
    /// NIC ASIC identity (`guid`, or the NET id when absent): ports of one NIC share it.
    pub(crate) asic: u64,
    /// Identity of the parent PCI device (same value = same PCI function), for rail matching.
    pub(crate) pci_id: u64,
    /// Channels the NIC accepts (`maxconn`, default 64).
    pub(crate) max_channels: i64,
    pub gdr: bool,
    /// CollNet (SHARP) capable (`coll`).
    pub(crate) coll: bool,
    /// GPU index (into `by_kind[Gpu]`) NCCL considers local to this NET, if any
    /// (`ncclTopoGetLocalGpu`), filled in by the path computation.
    pub(crate) local_gpu: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) enum NodeData {
    Gpu(GpuNode),
    /// PCI switch or bridge; `busid` empty for made-up parents.
    Pci {
        busid: String,
        device_id: u64,
    },
    Nvs,
    Cpu(CpuNode),
    /// NIC PCI function (`busid` empty when the NIC is not a PCI device, e.g. virtio).
    Nic {
        busid: String,
    },
    Net(NetNode),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    pub(crate) kind: NodeKind,
    /// NCCL's 64-bit id: `(systemId << 56) | localId` (bus id as hex for PCI devices).
    pub(crate) id: u64,
    pub(crate) data: NodeData,
}

impl Node {
    /// NCCL's log name: `GPU/0-60`, `NVS/0-0`, `CPU/0-ffffffffffffff`.
    pub fn nccl_label(&self) -> String {
        format!(
            "{}/{:x}-{:x}",
            self.kind.nccl_name(),
            self.id >> 56,
            self.id & 0x00ff_ffff_ffff_ffff
        )
    }
    pub(crate) fn gpu(&self) -> Option<&GpuNode> {
        match &self.data {
            NodeData::Gpu(g) => Some(g),
            _ => None,
        }
    }
    pub(crate) fn cpu(&self) -> Option<&CpuNode> {
        match &self.data {
            NodeData::Cpu(c) => Some(c),
            _ => None,
        }
    }
    pub fn net(&self) -> Option<&NetNode> {
        match &self.data {
            NodeData::Net(n) => Some(n),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Link {
    pub(crate) kind: LinkKind,
    /// GB/s in this direction, as NCCL assigns it. NCCL computes bandwidths in
    /// `float`; the values stored here are those `f32` results widened, so a
    /// stage that must reproduce NCCL's float arithmetic can narrow them losslessly.
    pub(crate) bw: f64,
}

/// NCCL's view of how one node reaches another: a view into the topology's path table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Path<'a> {
    pub ptype: PathType,
    /// Bottleneck bandwidth, GB/s.
    pub bw: f64,
    /// The directed links crossed, in order (empty for a node to itself).
    pub(crate) links: &'a [EdgeIndex],
}

impl Path<'_> {
    pub fn hops(&self) -> usize {
        self.links.len()
    }
}

/// One host's topology: NCCL's `ncclTopoSystem`.
#[derive(Debug, Clone)]
pub struct Topology {
    /// Directed graph; every physical connection is two edges, one per direction,
    /// because the search consumes bandwidth per direction.
    pub graph: StableDiGraph<Node, Link>,
    /// Nodes of each kind in NCCL's order (the index NCCL's search uses).
    pub(crate) by_kind: [Vec<NodeIndex>; 6],
    /// Outgoing links of each node in NCCL's order (bandwidth descending as
    /// `ncclTopoConnectNodes` keeps them, then the PCI up-link moved last by
    /// `ncclTopoSortSystem`). NCCL's breadth-first searches follow this order.
    pub adjacency: Vec<Vec<EdgeIndex>>,
    /// NCCL's paths between the nodes it computes paths to (CPU, GPU, NET, NVS); read with `path`.
    pub paths: paths::PathTable,
    /// The XML this topology was built from, kept so `--xml` writes exactly it.
    pub(crate) xml: XmlNode,
    /// Where it came from (`fixture hgx-h200-8`, a file path, `live probe`).
    pub source: String,
    /// The driver's CPU and NUMA affinity of each GPU, from a live probe (empty otherwise). NCCL's XML may lack them
    /// (a VM without NUMA information gets numaid=-1 and no affinity) where nvidia-smi, reading the driver, has them.
    pub driver_affinity: Vec<DriverAffinity>,
}

/// What NVML says of one GPU's affinity (nvidia-smi topo -m's "CPU Affinity" and "NUMA Affinity").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverAffinity {
    /// NCCL's spelling of the bus id ("0000:00:06.0").
    pub(crate) busid: String,
    /// CPU mask, 64 CPUs per word, lowest first.
    pub(crate) cpu_mask: Option<Vec<u64>>,
    /// The nearest NUMA node (the lowest in NVML's node-scope memory affinity).
    pub(crate) numa_node: Option<u32>,
}

impl DriverAffinity {
    /// Every probed GPU's affinity.
    pub fn from_facts(facts: &crate::probe::facts::MachineFacts) -> Vec<DriverAffinity> {
        facts
            .gpus
            .iter()
            .map(|g| DriverAffinity {
                busid: g.nccl_bus_id(),
                cpu_mask: g.cpu_affinity.clone().filter(|w| w.iter().any(|&x| x != 0)),
                numa_node: g
                    .memory_affinity
                    .as_ref()
                    .and_then(|words| lowest_bit(words)),
            })
            .collect()
    }
}

/// The index of the lowest set bit of a mask of 64-bit words, lowest word first.
fn lowest_bit(words: &[u64]) -> Option<u32> {
    words
        .iter()
        .enumerate()
        .find(|(_, w)| **w != 0)
        .map(|(i, w)| i as u32 * 64 + w.trailing_zeros())
}

impl Topology {
    pub fn nodes(&self, kind: NodeKind) -> &[NodeIndex] {
        &self.by_kind[kind as usize]
    }
    pub fn node(&self, idx: NodeIndex) -> &Node {
        &self.graph[idx]
    }
    pub fn gpus(&self) -> impl Iterator<Item = (NodeIndex, &GpuNode)> + '_ {
        self.nodes(NodeKind::Gpu)
            .iter()
            .filter_map(move |&i| self.graph[i].gpu().map(|g| (i, g)))
    }
    pub fn gpu_count(&self) -> usize {
        self.nodes(NodeKind::Gpu).len()
    }
    /// NCCL's path from `from` to `to`; `None` where NCCL stores none (either end not a CPU, GPU, NET or NVS
    /// node, or unreachable).
    pub fn path(&self, from: NodeIndex, to: NodeIndex) -> Option<Path<'_>> {
        self.paths.get(from, to)
    }
    /// Lowest and highest compute capability over all GPUs (x10).
    pub(crate) fn sm_range(&self) -> (u32, u32) {
        let sms: Vec<u32> = self.gpus().map(|(_, g)| g.sm).collect();
        (
            sms.iter().copied().min().unwrap_or(0),
            sms.iter().copied().max().unwrap_or(0),
        )
    }
    /// First CPU's description (NCCL uses it for vendor-dependent constants).
    pub(crate) fn first_cpu(&self) -> Option<&CpuNode> {
        self.nodes(NodeKind::Cpu)
            .first()
            .and_then(|&i| self.graph[i].cpu())
    }
    /// The node a link leads to. Links come from `adjacency` and `paths`, which name only existing links
    /// (`build` checks that before it returns a topology).
    pub(crate) fn link_target(&self, edge: EdgeIndex) -> NodeIndex {
        self.graph
            .edge_endpoints(edge)
            .map(|(_, to)| to)
            .expect("edge indices in paths and adjacency always exist (checked by build)")
    }
    pub fn has_nvswitch(&self) -> bool {
        !self.nodes(NodeKind::Nvs).is_empty()
    }
}
