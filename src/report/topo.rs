//! `planner topo`: what the machine is.
//!
//! Two views of one host:
//! 1. the link matrix in the exact format of `nvidia-smi topo -m` (tab-separated,
//!    same column names, same legend), derived from the topology XML: NVLink
//!    counts from the `<nvlink>` elements, PCIe relations from the `<pci>` tree
//!    as NCCL writes it (switches only; root ports and downstream ports left out);
//! 2. NCCL's view: for every GPU pair and GPU-NIC pair, NCCL's path type and
//!    bottleneck bandwidth from the computed paths (`Topology::path`).
//!
//! Plus `--json` (both views), `--xml` (the NCCL topology file) and `--dot`
//! (Graphviz of NCCL's graph).
//!
//! Sized for NCCL's largest node (576 GPUs and 576 NICs: a 1152 x 1152 matrix and 663,552 paths): the report
//! holds the pairs compactly, the text view summarises the pairs above `FULL_VIEW_MAX_DEVICES`, and `--json`
//! writes the long lists item by item (`write_json`).

use crate::topo::fixtures::Fixture;
use crate::topo::{Cluster, NodeData, NodeKind, PathType, Topology};
use crate::xml::XmlNode;
use comfy_table::{presets, CellAlignment, ContentArrangement, Table};
use petgraph::stable_graph::NodeIndex;
use petgraph::visit::{EdgeRef, IntoEdgeReferences};
use serde::ser::SerializeSeq;
use serde::{Serialize, Serializer};
use std::collections::HashMap;
use std::fmt;

/// Above this many GPUs or NICs per node the text view summarises its matrices (pairs grouped by link, path type
/// and bandwidth): a table of more columns than this is not read by a person; `--json` lists every pair. Every
/// committed fixture is below it (the largest, the NVL72 domain of `gb200-nvl72-tray --nodes 18`, has 72 GPUs
/// and 72 NICs).
pub(crate) const FULL_VIEW_MAX_DEVICES: usize = 128;

/// NCCL's NET bandwidth: `speed` in Mb/s divided by 8000 gives GB/s (`topo.cc`).
pub(crate) fn net_bw_gbs(speed_mbps: f64) -> f64 {
    speed_mbps / 8000.0
}

/// One PCI endpoint (GPU or NIC) as the XML places it.
#[derive(Debug, Clone)]
struct PciPlace {
    /// Index of the `<cpu>` element under `<system>`.
    cpu: usize,
    /// Bus ids of the `<pci>` ancestors below the CPU, outermost first, then the
    /// device's own bus id last.
    chain: Vec<String>,
}

/// A GPU as the matrix shows it.
#[derive(Debug, Clone, Serialize)]
pub struct GpuInfo {
    /// `GPU0`, `GPU1`, ... by NVML index (`dev`), as nvidia-smi numbers them.
    pub name: String,
    pub(crate) dev: i32,
    pub rank: i32,
    pub(crate) busid: String,
    pub(crate) sm: u32,
    /// NCCL's node label (`GPU/0-18000`).
    pub(crate) nccl_label: String,
    /// NUMA node of its CPU, `None` when unknown (-1): the driver's on a live probe, else the XML's `numaid`.
    pub(crate) numa: Option<i64>,
    /// CPU list of its NUMA node (`0-55,112-167`): the driver's on a live probe, else the XML `affinity` mask.
    pub(crate) cpu_affinity: Option<String>,
    /// Total NVLinks of this GPU (sum of `<nvlink count>`).
    pub(crate) nvlinks: u32,
}

/// A network device (NCCL NET node).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct NetInfo {
    /// Column name in the link matrix (`NIC0`), `None` for a NIC that is not a
    /// PCI device in the XML (virtio NICs seen through sockets): nvidia-smi
    /// lists only PCI NICs.
    pub(crate) matrix_name: Option<String>,
    /// Device name (`mlx5_0`, `eth0`).
    pub(crate) name: String,
    pub(crate) dev: i64,
    pub(crate) busid: Option<String>,
    pub(crate) speed_mbps: f64,
    /// NCCL's NET bandwidth, GB/s.
    pub(crate) bw_gbs: f64,
    pub(crate) latency_us: f64,
    pub(crate) gdr: bool,
    pub(crate) nccl_label: String,
}

/// The `nvidia-smi topo -m` matrix.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LinkMatrix {
    /// `GPU0.., NIC0..`
    pub(crate) columns: Vec<String>,
    /// One row per column (same order).
    pub(crate) rows: MatrixRows,
    /// NIC legend: `NIC0` is `mlx5_0`.
    pub(crate) nic_legend: Vec<NicLegend>,
}

/// One cell of the matrix, in nvidia-smi's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum LinkCell {
    /// `X`: the device itself.
    Own,
    /// `NV#`: a bonded set of # NVLinks.
    Nv(u32),
    Pix,
    Pxb,
    Phb,
    Node,
    Sys,
}

impl fmt::Display for LinkCell {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            LinkCell::Own => f.write_str("X"),
            LinkCell::Nv(count) => write!(f, "NV{count}"),
            LinkCell::Pix => f.write_str("PIX"),
            LinkCell::Pxb => f.write_str("PXB"),
            LinkCell::Phb => f.write_str("PHB"),
            LinkCell::Node => f.write_str("NODE"),
            LinkCell::Sys => f.write_str("SYS"),
        }
    }
}

impl Serialize for LinkCell {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// The square of cells, row by row (one `LinkCell` a cell: 1.3 M of them at 576 GPUs and 576 NICs).
/// Serialises as a list of rows, each a list of cell texts.
#[derive(Debug, Clone, Default)]
pub struct MatrixRows {
    size: usize,
    cells: Vec<LinkCell>,
}

impl MatrixRows {
    /// Rows (= columns).
    pub(crate) fn len(&self) -> usize {
        self.size
    }

    pub(crate) fn row(&self, index: usize) -> &[LinkCell] {
        &self.cells[index * self.size..(index + 1) * self.size]
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &[LinkCell]> {
        self.cells.chunks(self.size.max(1))
    }
}

impl Serialize for MatrixRows {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.size))?;
        for row in self.iter() {
            seq.serialize_element(row)?;
        }
        seq.end()
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct NicLegend {
    pub(crate) column: String,
    pub(crate) name: String,
}

/// One path as NCCL computed it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PathCell {
    pub(crate) ptype: PathType,
    /// Bottleneck bandwidth, GB/s.
    pub(crate) bw_gbs: f64,
    /// Links crossed.
    pub(crate) hops: u32,
}

/// NCCL's paths from each GPU (`from`) to each target (`to`: GPUs or NETs), row by row; between GPUs, a GPU's
/// path to itself is left out. Serialises as a list of `PathEntry`.
#[derive(Debug, Clone, Default)]
pub struct PathTable {
    from: Vec<String>,
    to: Vec<String>,
    /// `from` and `to` are the same GPUs and the diagonal is left out.
    skip_self: bool,
    cells: Vec<PathCell>,
}

/// One path of a `PathTable` as `--json` lists it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PathEntry<'a> {
    pub(crate) from: &'a str,
    pub(crate) to: &'a str,
    #[serde(rename = "type")]
    pub(crate) ptype: &'static str,
    pub(crate) bw_gbs: f64,
    pub(crate) hops: u32,
}

impl PathTable {
    fn build(
        from: Vec<String>,
        to: Vec<String>,
        skip_self: bool,
        mut cell: impl FnMut(usize, usize) -> PathCell,
    ) -> Self {
        let mut cells = Vec::with_capacity(from.len() * to.len());
        for i in 0..from.len() {
            for j in 0..to.len() {
                if !(skip_self && i == j) {
                    cells.push(cell(i, j));
                }
            }
        }
        PathTable {
            from,
            to,
            skip_self,
            cells,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.cells.len()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// The path from `from[i]` to `to[j]`; None on the left-out diagonal or out of range.
    pub(crate) fn get(&self, i: usize, j: usize) -> Option<&PathCell> {
        if i >= self.from.len() || j >= self.to.len() || (self.skip_self && i == j) {
            return None;
        }
        let row = self.to.len() - usize::from(self.skip_self);
        let col = if self.skip_self && j > i { j - 1 } else { j };
        self.cells.get(i * row + col)
    }

    /// The `index`-th path in list order.
    pub(crate) fn entry(&self, index: usize) -> PathEntry<'_> {
        let row = self.to.len() - usize::from(self.skip_self);
        let (i, mut j) = (index / row, index % row);
        if self.skip_self && j >= i {
            j += 1;
        }
        let cell = &self.cells[index];
        PathEntry {
            from: &self.from[i],
            to: &self.to[j],
            ptype: cell.ptype.nccl_name(),
            bw_gbs: cell.bw_gbs,
            hops: cell.hops,
        }
    }

    pub(crate) fn cells(&self) -> &[PathCell] {
        &self.cells
    }
}

impl Serialize for PathTable {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len()))?;
        for index in 0..self.len() {
            seq.serialize_element(&self.entry(index))?;
        }
        seq.end()
    }
}

/// What `--nodes N` adds: the network between the hosts.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct NetworkInfo {
    pub(crate) nodes: usize,
    pub(crate) ranks: usize,
    pub(crate) nics_per_node: usize,
    /// NET bandwidth of each NIC, GB/s (speed / 8000).
    pub(crate) bw_per_nic_gbs: Vec<f64>,
    /// Sum over the node's NICs, GB/s.
    pub(crate) bw_per_node_gbs: f64,
    /// `--net-latency`, µs, added to each NIC's reported latency.
    pub(crate) net_latency_us: f64,
}

/// Everything `planner topo` shows, with stable field names for `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct TopoReport {
    pub(crate) source: String,
    pub(crate) nodes: usize,
    pub(crate) gpus_per_node: usize,
    pub(crate) cpus: usize,
    pub(crate) nvswitch: bool,
    pub(crate) gpus: Vec<GpuInfo>,
    pub(crate) nets: Vec<NetInfo>,
    pub(crate) matrix: LinkMatrix,
    /// GPU to GPU, then GPU to NET, in matrix order.
    pub(crate) gpu_paths: PathTable,
    pub(crate) net_paths: PathTable,
    /// Present when `nodes > 1`.
    pub(crate) network: Option<NetworkInfo>,
    /// Present only on an MNNVL domain: several OS nodes fused into one NVLink domain (`topo::mnnvl`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mnnvl: Option<crate::topo::mnnvl::MnnvlInfo>,
}

/// NVLink facts of one `<gpu>` element: (target bus id, count, tclass).
type NvLinks = Vec<(String, u32, String)>;

/// Walk the XML once: where each GPU and NIC bus id sits, and each GPU's NVLinks. Looked up by lower-case bus
/// id (the first element of a bus id wins, as a linear search would find it), so the matrix is O(devices^2).
struct XmlFacts<'a> {
    cpus: Vec<&'a XmlNode>,
    places: HashMap<String, PciPlace>,
    nvlinks: HashMap<String, NvLinks>,
}

impl<'a> XmlFacts<'a> {
    fn read(root: &'a XmlNode) -> Self {
        let mut facts = XmlFacts {
            cpus: Vec::new(),
            places: HashMap::new(),
            nvlinks: HashMap::new(),
        };
        for cpu in root.children_named("cpu") {
            let index = facts.cpus.len();
            facts.cpus.push(cpu);
            for child in cpu.children_named("pci") {
                facts.walk(child, index, &mut Vec::new());
            }
        }
        facts
    }

    fn walk(&mut self, pci: &'a XmlNode, cpu: usize, chain: &mut Vec<String>) {
        let busid = pci.attr("busid").unwrap_or("").to_ascii_lowercase();
        chain.push(busid.clone());
        for child in &pci.children {
            match child.name.as_str() {
                "pci" => self.walk(child, cpu, chain),
                "gpu" => {
                    self.places
                        .entry(busid.clone())
                        .or_insert_with(|| PciPlace {
                            cpu,
                            chain: chain.clone(),
                        });
                    let links = child
                        .children_named("nvlink")
                        .map(|l| {
                            (
                                l.attr("target").unwrap_or("").to_ascii_lowercase(),
                                // As the topology builds it (and NCCL, strtol base 0): "0x12" is 18.
                                l.attr("count")
                                    .and_then(crate::xml::parse_int)
                                    .and_then(|c| u32::try_from(c).ok())
                                    .unwrap_or(0),
                                l.attr("tclass").unwrap_or("").to_ascii_lowercase(),
                            )
                        })
                        .collect();
                    self.nvlinks.entry(busid.clone()).or_insert(links);
                }
                "nic" => {
                    self.places
                        .entry(busid.clone())
                        .or_insert_with(|| PciPlace {
                            cpu,
                            chain: chain.clone(),
                        });
                }
                _ => {}
            }
        }
        chain.pop();
    }

    fn place(&self, busid: &str) -> Option<&PciPlace> {
        self.places.get(&busid.to_ascii_lowercase())
    }

    fn links(&self, busid: &str) -> &[(String, u32, String)] {
        self.nvlinks
            .get(&busid.to_ascii_lowercase())
            .map(|l| l.as_slice())
            .unwrap_or(&[])
    }

    /// The PCIe relation of two endpoints, nvidia-smi's words.
    ///
    /// The XML keeps only NUMA domains and PCI switches, not host bridges, so
    /// PHB versus NODE is a rule of thumb: two endpoints that meet only at the
    /// CPU are behind one host bridge (PHB) when they sit on the same root bus
    /// (as in VMs) or the host has a single CPU node (workstations), and behind
    /// different host bridges of one NUMA node (NODE) otherwise, as on servers
    /// where each x16 root port heads its own host bridge.
    fn pci_relation(&self, a: &PciPlace, b: &PciPlace) -> LinkCell {
        if a.cpu != b.cpu {
            return LinkCell::Sys;
        }
        // Switches above each endpoint (the endpoint itself is the last entry).
        let above_a = &a.chain[..a.chain.len().saturating_sub(1)];
        let above_b = &b.chain[..b.chain.len().saturating_sub(1)];
        let common = above_a
            .iter()
            .zip(above_b)
            .take_while(|(x, y)| x == y)
            .count();
        if common > 0 {
            // Bridges crossed: from each endpoint up to the common switch.
            let crossed = (above_a.len() - common) + (above_b.len() - common) + 1;
            return if crossed <= 1 {
                LinkCell::Pix
            } else {
                LinkCell::Pxb
            };
        }
        let same_root_bus = match (a.chain.first(), b.chain.first()) {
            (Some(x), Some(y)) => root_bus(x) == root_bus(y),
            _ => false,
        };
        if same_root_bus || self.cpus.len() == 1 {
            LinkCell::Phb
        } else {
            LinkCell::Node
        }
    }
}

/// `dddd:bb` of a bus id `dddd:bb:dd.f`.
fn root_bus(busid: &str) -> &str {
    match busid.rfind(':') {
        Some(i) => &busid[..i],
        None => busid,
    }
}

/// A Linux cpumask (`00000000,0000ffff,ffffffff`, most significant word first)
/// as a CPU list (`0-47`); `None` if it is not a mask.
pub(crate) fn cpumask_to_list(mask: &str) -> Option<String> {
    let mut cpus = Vec::new();
    for (word_index, word) in mask.trim().split(',').rev().enumerate() {
        let bits = u32::from_str_radix(word.trim(), 16).ok()?;
        for bit in 0..32 {
            if bits & (1 << bit) != 0 {
                cpus.push(word_index * 32 + bit);
            }
        }
    }
    cpus_to_list(&cpus)
}

/// NVML's CPU mask (64 CPUs per word, lowest word first) as a CPU list (`0-15`); `None` if no CPU is set.
pub(crate) fn cpu_words_to_list(words: &[u64]) -> Option<String> {
    let cpus: Vec<usize> = (0..words.len() * 64)
        .filter(|&c| words[c / 64] & (1u64 << (c % 64)) != 0)
        .collect();
    cpus_to_list(&cpus)
}

/// Ascending CPU numbers as ranges (`0-15,32`).
fn cpus_to_list(cpus: &[usize]) -> Option<String> {
    if cpus.is_empty() {
        return None;
    }
    let mut ranges: Vec<String> = Vec::new();
    let mut start = cpus[0];
    let mut prev = cpus[0];
    for &c in &cpus[1..] {
        if c != prev + 1 {
            ranges.push(range_text(start, prev));
            start = c;
        }
        prev = c;
    }
    ranges.push(range_text(start, prev));
    Some(ranges.join(","))
}

fn range_text(a: usize, b: usize) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a}-{b}")
    }
}

fn path_cell(topo: &Topology, from: NodeIndex, to: NodeIndex) -> PathCell {
    match topo.path(from, to) {
        Some(p) => PathCell {
            ptype: p.ptype,
            bw_gbs: p.bw,
            hops: u32::try_from(p.hops()).unwrap_or(u32::MAX),
        },
        None => PathCell {
            ptype: PathType::Dis,
            bw_gbs: 0.0,
            hops: 0,
        },
    }
}

/// Build the report for one host of the cluster.
pub fn report(cluster: &Cluster) -> TopoReport {
    let topo = &cluster.node;
    let facts = XmlFacts::read(&topo.xml);

    // GPUs in NVML order (dev), as nvidia-smi lists them.
    let mut gpu_nodes: Vec<(NodeIndex, &crate::topo::GpuNode)> = topo.gpus().collect();
    gpu_nodes.sort_by_key(|(idx, g)| (topo.node(*idx).id >> 56, g.dev, g.rank));
    let gpus: Vec<GpuInfo> = gpu_nodes
        .iter()
        .enumerate()
        .map(|(i, (idx, g))| {
            let cpu = facts
                .place(&g.busid)
                .and_then(|p| facts.cpus.get(p.cpu).copied());
            // The driver's affinity where the live probe has it (nvidia-smi reads it there), else the XML's.
            let driver = topo.driver_affinity.iter().find(|d| d.busid == g.busid);
            let numa = driver.and_then(|d| d.numa_node).map(i64::from).or_else(|| {
                cpu.and_then(|c| c.attr("numaid"))
                    .and_then(|n| n.trim().parse::<i64>().ok())
                    .filter(|&n| n >= 0)
            });
            let cpu_affinity = driver
                .and_then(|d| d.cpu_mask.as_deref())
                .and_then(cpu_words_to_list)
                .or_else(|| {
                    cpu.and_then(|c| c.attr("affinity"))
                        .and_then(cpumask_to_list)
                });
            GpuInfo {
                name: format!("GPU{i}"),
                dev: g.dev,
                rank: g.rank,
                busid: g.busid.clone(),
                sm: g.sm,
                nccl_label: topo.node(*idx).nccl_label(),
                numa,
                cpu_affinity,
                nvlinks: facts.links(&g.busid).iter().map(|(_, c, _)| c).sum(),
            }
        })
        .collect();

    // NET nodes in plugin order (dev); a NET's PCI place is its NIC's.
    let mut net_nodes: Vec<(NodeIndex, &crate::topo::NetNode)> = topo
        .nodes(NodeKind::Net)
        .iter()
        .filter_map(|&i| topo.node(i).net().map(|n| (i, n)))
        .collect();
    net_nodes.sort_by_key(|(idx, n)| (topo.node(*idx).id >> 56, n.dev));
    let mut nets = Vec::new();
    let mut matrix_nics = 0;
    for (idx, n) in &net_nodes {
        let busid = nic_busid(topo, *idx);
        let matrix_name = match &busid {
            // An MNNVL domain spans OS nodes; like nvidia-smi on one of them, the matrix shows the first host.
            Some(b) if facts.place(b).is_some() && topo.node(*idx).id >> 56 == 0 => {
                matrix_nics += 1;
                Some(format!("NIC{}", matrix_nics - 1))
            }
            _ => None,
        };
        nets.push(NetInfo {
            matrix_name,
            name: n.name.clone(),
            dev: n.dev,
            busid,
            speed_mbps: n.speed_mbps,
            bw_gbs: net_bw_gbs(n.speed_mbps),
            latency_us: n.latency_us,
            gdr: n.gdr,
            nccl_label: topo.node(*idx).nccl_label(),
        });
    }

    let first_host_gpus = gpu_nodes
        .iter()
        .filter(|(idx, _)| topo.node(*idx).id >> 56 == 0)
        .count();
    let matrix = link_matrix(&facts, &gpus[..first_host_gpus], &nets);

    let gpu_names: Vec<String> = gpus.iter().map(|g| g.name.clone()).collect();
    let net_names: Vec<String> = nets.iter().map(|n| n.name.clone()).collect();
    // Each GPU node once in `gpu_nodes`: the diagonal is exactly a GPU's path to itself.
    let gpu_paths = PathTable::build(gpu_names.clone(), gpu_names.clone(), true, |i, j| {
        path_cell(topo, gpu_nodes[i].0, gpu_nodes[j].0)
    });
    let net_paths = PathTable::build(gpu_names, net_names, false, |i, k| {
        path_cell(topo, gpu_nodes[i].0, net_nodes[k].0)
    });

    let network = (cluster.n_nodes > 1).then(|| {
        let bw_per_nic_gbs: Vec<f64> = nets.iter().map(|n| n.bw_gbs).collect();
        NetworkInfo {
            nodes: cluster.n_nodes,
            ranks: cluster.n_ranks(),
            nics_per_node: nets.len(),
            bw_per_node_gbs: bw_per_nic_gbs.iter().sum(),
            bw_per_nic_gbs,
            net_latency_us: cluster.net_latency_us,
        }
    });

    TopoReport {
        source: topo.source.clone(),
        nodes: cluster.n_nodes,
        gpus_per_node: gpus.len(),
        cpus: topo.nodes(NodeKind::Cpu).len(),
        nvswitch: topo.has_nvswitch(),
        gpus,
        nets,
        matrix,
        gpu_paths,
        net_paths,
        network,
        mnnvl: crate::topo::mnnvl::info(cluster),
    }
}

/// Bus id of the NIC PCI device a NET hangs off, if it is a PCI device.
fn nic_busid(topo: &Topology, net: NodeIndex) -> Option<String> {
    topo.graph
        .edges(net)
        .find_map(|e| match &topo.node(e.target()).data {
            NodeData::Nic { busid } if !busid.is_empty() => Some(busid.to_ascii_lowercase()),
            _ => None,
        })
}

/// One row/column of the matrix, with what the XML says about it looked up once (the matrix is O(entries^2)).
struct MatrixEntry<'f> {
    name: String,
    busid: String,
    gpu: bool,
    place: Option<&'f PciPlace>,
    nvlinks: &'f [(String, u32, String)],
    /// NVLinks to NVSwitches.
    to_switch: u32,
}

impl MatrixEntry<'_> {
    /// NVLinks between two GPUs as nvidia-smi counts them: direct links to the
    /// other GPU, plus, when both reach NVSwitches, the smaller of the two
    /// GPUs' switch link counts (the NVSwitch carries that many to the pair).
    fn nvlinks_to(&self, other: &MatrixEntry) -> u32 {
        let direct: u32 = self
            .nvlinks
            .iter()
            .filter(|(target, _, _)| target.eq_ignore_ascii_case(&other.busid))
            .map(|(_, count, _)| count)
            .sum();
        direct + self.to_switch.min(other.to_switch)
    }
}

fn link_matrix(facts: &XmlFacts, gpus: &[GpuInfo], nets: &[NetInfo]) -> LinkMatrix {
    let entry = |name: &str, busid: String, gpu: bool| {
        let nvlinks = facts.links(&busid);
        MatrixEntry {
            name: name.to_string(),
            place: facts.place(&busid),
            to_switch: nvlinks
                .iter()
                .filter(|(_, _, tclass)| tclass.starts_with("0x0680"))
                .map(|(_, count, _)| count)
                .sum(),
            nvlinks,
            busid,
            gpu,
        }
    };
    // Matrix entries: GPUs, then PCI-visible NICs.
    let mut entries: Vec<MatrixEntry> = gpus
        .iter()
        .map(|g| entry(&g.name, g.busid.to_ascii_lowercase(), true))
        .collect();
    let mut nic_legend = Vec::new();
    for n in nets {
        if let (Some(col), Some(busid)) = (&n.matrix_name, &n.busid) {
            entries.push(entry(col, busid.clone(), false));
            nic_legend.push(NicLegend {
                column: col.clone(),
                name: n.name.clone(),
            });
        }
    }
    let relation = |a: &MatrixEntry, b: &MatrixEntry| -> LinkCell {
        if a.name == b.name {
            return LinkCell::Own;
        }
        if a.gpu && b.gpu {
            let nv = a.nvlinks_to(b);
            if nv > 0 {
                return LinkCell::Nv(nv);
            }
        }
        match (a.place, b.place) {
            (Some(pa), Some(pb)) => facts.pci_relation(pa, pb),
            // A GPU the XML does not place under a CPU: nothing known.
            _ => LinkCell::Sys,
        }
    };
    let mut cells = Vec::with_capacity(entries.len() * entries.len());
    for a in &entries {
        cells.extend(entries.iter().map(|b| relation(a, b)));
    }
    LinkMatrix {
        rows: MatrixRows {
            size: entries.len(),
            cells,
        },
        columns: entries.into_iter().map(|e| e.name).collect(),
        nic_legend,
    }
}

const LEGEND: &str = "Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
";

/// Whether the text view summarises its matrices: more than `FULL_VIEW_MAX_DEVICES` GPUs or NICs.
pub(crate) fn summarised(report: &TopoReport) -> bool {
    report.gpus.len() > FULL_VIEW_MAX_DEVICES || report.nets.len() > FULL_VIEW_MAX_DEVICES
}

/// The matrix exactly as `nvidia-smi topo -m` prints it: tab-separated, ` X `
/// on the diagonal, CPU/NUMA affinity and GPU NUMA ID after the GPU rows, NIC
/// rows without them, then the legend and the NIC legend. Summarised when
/// `summarised` (its cells grouped by pair and link).
pub fn render_nvidia_smi(report: &TopoReport) -> String {
    use std::fmt::Write;
    if summarised(report) {
        return render_nvidia_smi_summary(report);
    }
    let m = &report.matrix;
    let mut out = String::new();
    for col in &m.columns {
        out.push('\t');
        out.push_str(col);
    }
    out.push_str("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n");
    for (name, row) in m.columns.iter().zip(m.rows.iter()) {
        out.push_str(name);
        for cell in row {
            out.push('\t');
            match cell {
                LinkCell::Own => out.push_str(" X "),
                // Writing to a String cannot fail.
                cell => _ = write!(out, "{cell}"),
            }
        }
        if let Some(g) = report.gpus.iter().find(|g| &g.name == name) {
            let affinity = g.cpu_affinity.as_deref().unwrap_or("N/A");
            let numa = g.numa.map_or("N/A".to_string(), |n| n.to_string());
            out.push_str(&format!("\t{affinity}\t{numa}\t\tN/A"));
        }
        out.push('\n');
    }
    out.push('\n');
    out.push_str(LEGEND);
    if !m.nic_legend.is_empty() {
        out.push_str("\nNIC Legend:\n\n");
        for nic in &m.nic_legend {
            out.push_str(&format!("  {}: {}\n", nic.column, nic.name));
        }
    }
    out
}

/// The matrix's cells counted by pair (GPU-GPU, GPU-NIC, NIC-NIC) and link, the GPUs' affinities grouped.
fn render_nvidia_smi_summary(report: &TopoReport) -> String {
    let m = &report.matrix;
    let n_gpus = m.columns.len().saturating_sub(m.nic_legend.len());
    let mut counts: HashMap<(&str, LinkCell), usize> = HashMap::new();
    for (i, row) in m.rows.iter().enumerate() {
        for (j, &cell) in row.iter().enumerate() {
            let pair = match (i < n_gpus, j < n_gpus) {
                _ if i == j => continue,
                (true, true) => "GPU-GPU",
                (true, false) => "GPU-NIC",
                // The NIC rows' GPU columns mirror the GPU rows' NIC columns.
                (false, true) => continue,
                (false, false) => "NIC-NIC",
            };
            *counts.entry((pair, cell)).or_default() += 1;
        }
    }
    let mut groups: Vec<_> = counts.into_iter().collect();
    groups.sort_unstable();
    let mut out = format!(
        "Link matrix (nvidia-smi topo -m) of {} GPUs and {} NICs, summarised above {} GPUs or NICs: cells by pair \
         and link (GPU-NIC: the GPU rows; --json lists every cell in matrix.rows):\n",
        n_gpus,
        m.nic_legend.len(),
        FULL_VIEW_MAX_DEVICES
    );
    let mut t = table();
    t.set_header(vec!["pair", "link", "cells"]);
    for ((pair, cell), count) in groups {
        t.add_row(vec![pair.to_string(), cell.to_string(), count.to_string()]);
    }
    if let Some(col) = t.column_mut(2) {
        col.set_cell_alignment(CellAlignment::Right);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    out.push_str("\nCPU Affinity and NUMA Affinity of the GPUs:\n");
    let mut affinities: Vec<(&str, String, usize, &str)> = Vec::new();
    for g in report.gpus.iter().take(n_gpus) {
        let affinity = g.cpu_affinity.as_deref().unwrap_or("N/A");
        let numa = g.numa.map_or("N/A".to_string(), |n| n.to_string());
        match affinities
            .iter_mut()
            .find(|(a, n, _, _)| *a == affinity && *n == numa)
        {
            Some(group) => group.2 += 1,
            None => affinities.push((affinity, numa, 1, &g.name)),
        }
    }
    for (affinity, numa, count, first) in affinities {
        out.push_str(&format!(
            "  {count} GPU{} (first {first}): CPU Affinity {affinity}, NUMA Affinity {numa}\n",
            plural(count)
        ));
    }
    out.push('\n');
    out.push_str(LEGEND);
    if let (Some(first), Some(last)) = (m.nic_legend.first(), m.nic_legend.last()) {
        out.push_str(&format!(
            "\nNIC Legend: {} to {} are {} to {} (--json: matrix.nic_legend)\n",
            first.column, last.column, first.name, last.name
        ));
    }
    out
}

fn table() -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .force_no_tty();
    t
}

fn cell_text(p: &PathCell) -> String {
    format!("{} {:.1}", p.ptype.nccl_name(), p.bw_gbs)
}

/// Paths counted by type and bandwidth as the full table prints them (`TYPE 12.3`): best type first, then
/// highest bandwidth.
fn path_groups(cells: &[PathCell]) -> Vec<(PathType, String, usize)> {
    let mut exact: HashMap<(PathType, u64), usize> = HashMap::new();
    for c in cells {
        *exact.entry((c.ptype, c.bw_gbs.to_bits())).or_default() += 1;
    }
    let mut exact: Vec<(PathType, f64, usize)> = exact
        .into_iter()
        .map(|((ptype, bits), count)| (ptype, f64::from_bits(bits), count))
        .collect();
    exact.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)));
    let mut groups: Vec<(PathType, String, usize)> = Vec::new();
    for (ptype, bw, count) in exact {
        let text = format!("{bw:.1}");
        match groups.last_mut() {
            Some(g) if g.0 == ptype && g.1 == text => g.2 += count,
            _ => groups.push((ptype, text, count)),
        }
    }
    groups
}

/// One path table of NCCL's view, in full (`from` GPU rows, `to` columns of `TYPE GB/s`), or summarised.
fn render_paths(
    out: &mut String,
    what: &str,
    paths: &PathTable,
    columns: &[&str],
    summary: bool,
    json_key: &str,
) {
    if summary {
        out.push_str(&format!(
            "NCCL paths, {what} (path type, bottleneck GB/s), summarised above {FULL_VIEW_MAX_DEVICES} GPUs or \
             NICs: {} pairs by type and bandwidth (--json lists every pair in {json_key}):\n",
            paths.len()
        ));
        let mut t = table();
        t.set_header(vec!["type", "GB/s", "pairs"]);
        for (ptype, bw, count) in path_groups(paths.cells()) {
            t.add_row(vec![ptype.nccl_name().to_string(), bw, count.to_string()]);
        }
        align_right(&mut t);
        out.push_str(&t.to_string());
        out.push('\n');
        return;
    }
    out.push_str(&format!(
        "NCCL paths, {what} (path type, bottleneck GB/s):\n"
    ));
    let mut t = table();
    // Rows are the sources: the corner says so (no unlabelled column).
    let mut header = vec!["from".to_string()];
    header.extend(columns.iter().map(|c| c.to_string()));
    t.set_header(header);
    for (i, from) in paths.from.iter().enumerate() {
        let mut row = vec![from.clone()];
        for j in 0..columns.len() {
            if paths.skip_self && i == j {
                row.push("X".to_string());
            } else {
                row.push(paths.get(i, j).map_or("-".to_string(), cell_text));
            }
        }
        t.add_row(row);
    }
    align_right(&mut t);
    out.push_str(&t.to_string());
    out.push('\n');
}

/// NCCL's view: a GPU x GPU table and a GPU x NET table of `TYPE GB/s` (O(GPUs x (GPUs + NICs))), summarised
/// when `summarised`, then the NICs.
pub(crate) fn render_nccl_view(report: &TopoReport) -> String {
    let summary = summarised(report);
    let mut out = String::new();
    let gpu_names: Vec<&str> = report.gpus.iter().map(|g| g.name.as_str()).collect();
    render_paths(
        &mut out,
        "GPU to GPU",
        &report.gpu_paths,
        &gpu_names,
        summary,
        "gpu_paths",
    );
    if report.nets.is_empty() {
        out.push_str("No NIC: NCCL has no network device on this host.\n");
        return out;
    }
    out.push('\n');
    let net_names: Vec<&str> = report.nets.iter().map(|n| n.name.as_str()).collect();
    render_paths(
        &mut out,
        "GPU to NIC",
        &report.net_paths,
        &net_names,
        summary,
        "net_paths",
    );
    out.push_str("\nNICs (NCCL NET bandwidth = speed / 8000):\n");
    let nic_line = |n: &NetInfo| {
        format!(
            "{:>7.0} Mb/s = {:>6.1} GB/s  gdr {}  latency {} µs",
            n.speed_mbps,
            n.bw_gbs,
            u8::from(n.gdr),
            n.latency_us
        )
    };
    if summary {
        // Grouped by what the line says apart from name, dev and bus id.
        let mut groups: Vec<(String, usize, &str)> = Vec::new();
        for n in &report.nets {
            let line = nic_line(n);
            match groups.iter_mut().find(|g| g.0 == line) {
                Some(g) => g.1 += 1,
                None => groups.push((line, 1, &n.name)),
            }
        }
        for (line, count, first) in groups {
            out.push_str(&format!(
                "  {count} NIC{} (first {first}): {line}\n",
                plural(count)
            ));
        }
        return out;
    }
    for n in &report.nets {
        out.push_str(&format!(
            "  {:<10} dev {:<2} {}{}\n",
            n.name,
            n.dev,
            nic_line(n),
            n.busid
                .as_ref()
                .map_or(String::new(), |b| format!("  pci {b}"))
        ));
    }
    out
}

fn align_right(t: &mut Table) {
    for col in t.column_iter_mut().skip(1) {
        col.set_cell_alignment(CellAlignment::Right);
    }
}

/// The whole text report: summary, nvidia-smi matrix, NCCL's view, network.
pub fn render_text(report: &TopoReport) -> String {
    let mut out = String::new();
    let (sm_lo, sm_hi) = report
        .gpus
        .iter()
        .fold((u32::MAX, 0), |(lo, hi), g| (lo.min(g.sm), hi.max(g.sm)));
    let sm = if sm_lo == sm_hi {
        format!("sm {sm_lo}")
    } else {
        format!("sm {sm_lo}-{sm_hi}")
    };
    out.push_str(&format!(
        "Topology: {} ({} node{})\n",
        report.source,
        report.nodes,
        if report.nodes == 1 { "" } else { "s" }
    ));
    out.push_str(&format!(
        "Per node: {} GPU{} ({sm}){}, {} CPU node{}, {} NIC{}\n",
        report.gpus_per_node,
        plural(report.gpus_per_node),
        if report.nvswitch { ", NVSwitch" } else { "" },
        report.cpus,
        plural(report.cpus),
        report.nets.len(),
        plural(report.nets.len()),
    ));
    if summarised(report) {
        out.push_str(&format!(
            "More than {FULL_VIEW_MAX_DEVICES} GPUs or NICs per node: the matrices below are summarised (pairs \
             grouped by link, path type and bandwidth); --json lists every pair.\n"
        ));
    }
    out.push('\n');
    if let Some(info) = &report.mnnvl {
        out.push_str(&info.summary());
        out.push_str("\n(the nvidia-smi view below shows the first OS node; NCCL's view covers the domain)\n\n");
    }
    out.push_str(&render_nvidia_smi(report));
    out.push('\n');
    out.push_str(&render_nccl_view(report));
    if let Some(net) = &report.network {
        out.push('\n');
        out.push_str(&format!(
            "{} nodes: {} ranks ({} GPUs per node), joined through {} NIC{} per node.\n",
            net.nodes,
            net.ranks,
            report.gpus_per_node,
            net.nics_per_node,
            plural(net.nics_per_node)
        ));
        let uniform = report
            .nets
            .windows(2)
            .all(|w| w[0].speed_mbps == w[1].speed_mbps);
        match report.nets.first() {
            Some(first) if uniform => out.push_str(&format!(
                "NET bandwidth per node: {} x {:.1} GB/s ({:.0} Mb/s / 8000) = {:.1} GB/s\n",
                net.nics_per_node, first.bw_gbs, first.speed_mbps, net.bw_per_node_gbs
            )),
            _ => {
                let per_nic: Vec<String> = net
                    .bw_per_nic_gbs
                    .iter()
                    .map(|b| format!("{b:.1}"))
                    .collect();
                out.push_str(&format!(
                    "NET bandwidth per node: {} GB/s = {:.1} GB/s (NIC speed / 8000)\n",
                    per_nic.join(" + "),
                    net.bw_per_node_gbs
                ));
            }
        }
        out.push_str(&format!(
            "Network latency: {} µs added to each NIC's reported latency (--net-latency)\n",
            net.net_latency_us
        ));
    }
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `--json`'s document: the report with its long lists (`matrix.rows`, `gpu_paths`, `net_paths`) as
/// placeholders that `write_json` fills item by item. Built by taking the report apart field by field, so a
/// field added to `TopoReport` or `LinkMatrix` does not compile until it is placed here too.
#[derive(Serialize)]
pub(crate) struct JsonHead<'a> {
    source: &'a str,
    nodes: usize,
    gpus_per_node: usize,
    cpus: usize,
    nvswitch: bool,
    gpus: &'a [GpuInfo],
    nets: &'a [NetInfo],
    matrix: JsonMatrixHead<'a>,
    gpu_paths: super::json::Placeholder,
    net_paths: super::json::Placeholder,
    network: Option<&'a NetworkInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mnnvl: Option<&'a crate::topo::mnnvl::MnnvlInfo>,
}

#[derive(Serialize)]
struct JsonMatrixHead<'a> {
    columns: &'a [String],
    rows: super::json::Placeholder,
    nic_legend: &'a [NicLegend],
}

/// Placeholder numbers of `JsonHead`, indexes into `json_lists`.
const MATRIX_ROWS: usize = 0;
const GPU_PATHS: usize = 1;
const NET_PATHS: usize = 2;

pub(crate) fn json_head(report: &TopoReport) -> JsonHead<'_> {
    let TopoReport {
        source,
        nodes,
        gpus_per_node,
        cpus,
        nvswitch,
        gpus,
        nets,
        matrix,
        gpu_paths: _,
        net_paths: _,
        network,
        mnnvl,
    } = report;
    let LinkMatrix {
        columns,
        rows: _,
        nic_legend,
    } = matrix;
    JsonHead {
        source,
        nodes: *nodes,
        gpus_per_node: *gpus_per_node,
        cpus: *cpus,
        nvswitch: *nvswitch,
        gpus,
        nets,
        matrix: JsonMatrixHead {
            columns,
            rows: super::json::Placeholder(MATRIX_ROWS),
            nic_legend,
        },
        gpu_paths: super::json::Placeholder(GPU_PATHS),
        net_paths: super::json::Placeholder(NET_PATHS),
        network: network.as_ref(),
        mnnvl: mnnvl.as_ref(),
    }
}

fn json_lists(report: &TopoReport) -> [super::json::StreamedList<'_>; 3] {
    use super::json::StreamedList;
    let rows = &report.matrix.rows;
    let mut lists = [
        (
            MATRIX_ROWS,
            StreamedList {
                len: rows.len(),
                item: Box::new(|i| serde_json::to_value(rows.row(i))),
                // Cell texts in a list: nothing for the conventions to change.
                text: Some(Box::new(|i, buf| {
                    serde_json::to_writer_pretty(buf, rows.row(i))
                })),
            },
        ),
        (GPU_PATHS, path_list(&report.gpu_paths)),
        (NET_PATHS, path_list(&report.net_paths)),
    ];
    lists.sort_by_key(|(index, _)| *index);
    lists.map(|(_, list)| list)
}

/// A path table's entries; as text, with the bandwidth rounded as the conventions round it (the keys and the
/// upper-case type are the schema's already).
fn path_list(paths: &PathTable) -> super::json::StreamedList<'_> {
    // Neighbouring paths mostly share a bandwidth: round each new one once.
    let last_rounded = std::cell::Cell::new((f64::NAN, f64::NAN));
    super::json::StreamedList {
        len: paths.len(),
        item: Box::new(|i| serde_json::to_value(paths.entry(i))),
        text: Some(Box::new(move |i, buf| {
            let mut entry = paths.entry(i);
            let (raw, rounded) = last_rounded.get();
            entry.bw_gbs = if raw.to_bits() == entry.bw_gbs.to_bits() {
                rounded
            } else {
                let rounded = super::json::round_float(entry.bw_gbs);
                last_rounded.set((entry.bw_gbs, rounded));
                rounded
            };
            serde_json::to_writer_pretty(buf, &entry)
        })),
    }
}

/// `--json` of `report` to `out`, the long lists item by item (the same bytes as `json::render` of the report
/// plus a newline, without holding them): `doc` is `json_head(report)`, alone or with more keys (`WithNcclEnv`).
pub(crate) fn write_json(
    out: &mut dyn std::io::Write,
    doc: &impl Serialize,
    report: &TopoReport,
) -> std::io::Result<()> {
    super::json::write_streamed(out, doc, "", &json_lists(report))
}

/// `--json`: the report as pretty JSON (`write_json` into a String).
#[cfg(test)]
fn render_json(report: &TopoReport) -> String {
    let mut out = Vec::new();
    // Writing to memory what serialises plain strings and numbers cannot fail.
    let _ = write_json(&mut out, &json_head(report), report);
    String::from_utf8(out).unwrap_or_default()
}

/// `--dot`: NCCL's graph for Graphviz, one undirected edge per connected pair
/// (labelled with the link type and GB/s; `a/b` when the directions differ).
pub(crate) fn render_dot(topo: &Topology) -> String {
    let mut out = String::from("graph topology {\n");
    out.push_str(&format!("  label=\"{}\";\n", dot_escape(&topo.source)));
    out.push_str("  node [shape=box, fontname=\"monospace\"];\n");
    for idx in topo.graph.node_indices() {
        let node = topo.node(idx);
        let detail = match &node.data {
            NodeData::Gpu(g) => format!("\\ndev {} sm {}", g.dev, g.sm),
            NodeData::Cpu(c) => format!("\\nnuma {}", c.numa),
            NodeData::Net(n) => format!("\\n{} {:.1} GB/s", n.name, net_bw_gbs(n.speed_mbps)),
            NodeData::Pci { busid, .. } | NodeData::Nic { busid } if !busid.is_empty() => {
                format!("\\n{busid}")
            }
            _ => String::new(),
        };
        out.push_str(&format!(
            "  n{} [label=\"{}{}\"];\n",
            idx.index(),
            dot_escape(&node.nccl_label()),
            detail
        ));
    }
    for edge in (&topo.graph).edge_references() {
        let (a, b) = (edge.source(), edge.target());
        if a.index() > b.index() {
            continue;
        }
        let link = edge.weight();
        let back = topo
            .graph
            .edges(b)
            .find(|e| e.target() == a && e.weight().kind == link.kind)
            .map(|e| e.weight().bw);
        let bw = match back {
            Some(r) if (r - link.bw).abs() > 1e-9 => format!("{:.1}/{:.1}", link.bw, r),
            _ => format!("{:.1}", link.bw),
        };
        out.push_str(&format!(
            "  n{} -- n{} [label=\"{} {}\"];\n",
            a.index(),
            b.index(),
            link.kind.nccl_name(),
            bw
        ));
    }
    out.push_str("}\n");
    out
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// `planner fixtures`: name and description of each built-in topology.
pub(crate) fn render_fixtures(list: &[Fixture], default: &str) -> String {
    let mut t = Table::new();
    t.load_style(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .force_no_tty()
        .set_header(vec!["NAME", "DESCRIPTION"]);
    for f in list {
        let mark = if f.name == default {
            " (default when no GPU is found)"
        } else {
            ""
        };
        t.add_row(vec![f.name.to_string(), format!("{}{mark}", f.description)]);
    }
    let mut out = t.to_string();
    out.push_str("\nUse one with --fixture NAME, or any NCCL topology XML with --topo FILE.\n");
    out
}

#[derive(Serialize)]
struct FixtureEntry<'a> {
    name: &'a str,
    description: &'a str,
    default: bool,
}

/// `planner fixtures --json`.
pub(crate) fn render_fixtures_json(list: &[Fixture], default: &str) -> String {
    let entries: Vec<FixtureEntry> = list
        .iter()
        .map(|f| FixtureEntry {
            name: f.name,
            description: f.description,
            default: f.name == default,
        })
        .collect();
    let mut s = super::json::render(&entries, "fixtures").unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpumask_lists() {
        // 0xffffffff in the low word: CPUs 0-31 (the capture's nvidia-smi shows 0-31).
        assert_eq!(cpumask_to_list("ffffffff").as_deref(), Some("0-31"));
        // Two 56-core sockets with HT, node 0: CPUs 0-55 and 112-167.
        assert_eq!(
            cpumask_to_list("00000000,000000ff,ffffffff,ffff0000,00000000,00ffffff,ffffffff")
                .as_deref(),
            Some("0-55,112-167")
        );
        assert_eq!(cpumask_to_list("00000005").as_deref(), Some("0,2"));
        assert_eq!(cpumask_to_list("0"), None);
        assert_eq!(cpumask_to_list("zz"), None);
    }

    #[test]
    fn root_bus_of_busid() {
        assert_eq!(root_bus("0000:00:06.0"), "0000:00");
        assert_eq!(root_bus("0000:16:00.0"), "0000:16");
    }

    fn fixture_report(name: &str, nodes: usize) -> TopoReport {
        let source = crate::pipeline::Source {
            fixture: Some(name.to_string()),
            nodes,
            ..Default::default()
        };
        report(&source.load().unwrap())
    }

    #[test]
    fn streamed_json_is_the_rendered_report() {
        // `render_json` writes the long lists item by item; `json::render` of the whole report (the
        // `Serialize` of every field, lists included, through one `Value`) is what `--json` printed before.
        for (name, nodes) in [
            ("h200x2-nvswitch-vm", 1),
            ("hgx-h100-8", 4),
            ("pcie-rtx4000ada-2", 1),
            ("gb200-nvl72-tray", 18),
        ] {
            let report = fixture_report(name, nodes);
            let whole = crate::report::json::render(&report, "").unwrap() + "\n";
            assert_eq!(render_json(&report), whole, "{name} x {nodes}");
        }
    }

    #[test]
    fn path_table_positions() {
        // 3 GPUs without the diagonal: entries (0,1) (0,2) (1,0) (1,2) (2,0) (2,1).
        let names: Vec<String> = (0..3).map(|i| format!("GPU{i}")).collect();
        let cell = |i: usize, j: usize| PathCell {
            ptype: PathType::Nvl,
            bw_gbs: (10 * i + j) as f64,
            hops: 1,
        };
        let table = PathTable::build(names.clone(), names.clone(), true, cell);
        assert_eq!(table.len(), 6);
        let listed: Vec<(&str, &str, f64)> = (0..6)
            .map(|k| table.entry(k))
            .map(|e| (e.from, e.to, e.bw_gbs))
            .collect();
        assert_eq!(
            listed,
            [
                ("GPU0", "GPU1", 1.0),
                ("GPU0", "GPU2", 2.0),
                ("GPU1", "GPU0", 10.0),
                ("GPU1", "GPU2", 12.0),
                ("GPU2", "GPU0", 20.0),
                ("GPU2", "GPU1", 21.0)
            ]
        );
        assert_eq!(table.get(2, 1).map(|c| c.bw_gbs), Some(21.0));
        assert_eq!(table.get(1, 1), None);
        assert_eq!(table.get(3, 0), None);
        // With the diagonal (GPU to NET): 2 x 3 entries in row order.
        let nets = PathTable::build(names[..2].to_vec(), names.clone(), false, cell);
        assert_eq!(nets.len(), 6);
        assert_eq!(nets.get(1, 1).map(|c| c.bw_gbs), Some(11.0));
        assert_eq!((nets.entry(4).from, nets.entry(4).to), ("GPU1", "GPU1"));
        // One GPU: no pair.
        assert!(PathTable::build(names[..1].to_vec(), names[..1].to_vec(), true, cell).is_empty());
    }

    #[test]
    fn path_groups_merge_what_the_table_prints_alike() {
        let cell = |ptype, bw_gbs| PathCell {
            ptype,
            bw_gbs,
            hops: 2,
        };
        let cells = [
            cell(PathType::Phb, 24.0),
            cell(PathType::Nvl, 370.8),
            cell(PathType::Nvl, 370.80000001),
            cell(PathType::Nvl, 720.0),
            cell(PathType::Phb, 24.0),
        ];
        assert_eq!(
            path_groups(&cells),
            [
                (PathType::Nvl, "720.0".to_string(), 1),
                (PathType::Nvl, "370.8".to_string(), 2),
                (PathType::Phb, "24.0".to_string(), 2)
            ]
        );
    }

    #[test]
    fn small_hosts_print_full_matrices_large_ones_a_summary() {
        // The largest committed topology, the 72-GPU NVL72 domain, keeps its full tables.
        let nvl72 = fixture_report("gb200-nvl72-tray", 18);
        assert_eq!((nvl72.gpus.len(), nvl72.nets.len()), (72, 72));
        let text = render_text(&nvl72);
        assert!(!summarised(&nvl72));
        assert!(!text.contains("summarised"), "{}", &text[..400]);
        assert!(text.contains("NCCL paths, GPU to GPU (path type, bottleneck GB/s):\n"));
        // Each NIC column shows its own NET's path (the domain repeats NIC names on every tray).
        let gpu0_row = text
            .lines()
            .skip_while(|l| !l.starts_with("NCCL paths, GPU to NIC"))
            .find(|l| l.contains(" GPU0 "))
            .unwrap();
        let cells: Vec<&str> = gpu0_row.split(['│', '┆']).map(str::trim).collect();
        for k in 0..72 {
            let p = nvl72.net_paths.get(0, k).unwrap();
            assert_eq!(cells[k + 2], cell_text(p), "GPU0 to NET {k}");
        }
    }

    #[test]
    fn net_bandwidth_is_speed_over_8000() {
        // 400 Gb/s = 400000 Mb/s -> 50 GB/s; HDR 200000 -> 25 GB/s.
        assert_eq!(net_bw_gbs(400000.0), 50.0);
        assert_eq!(net_bw_gbs(200000.0), 25.0);
    }
}
