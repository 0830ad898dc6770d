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

use crate::topo::fixtures::Fixture;
use crate::topo::{Cluster, NodeData, NodeKind, PathType, Topology};
use crate::xml::XmlNode;
use comfy_table::{presets, CellAlignment, ContentArrangement, Table};
use petgraph::stable_graph::NodeIndex;
use petgraph::visit::{EdgeRef, IntoEdgeReferences};
use serde::Serialize;
use std::collections::HashMap;

/// NCCL's NET bandwidth: `speed` in Mb/s divided by 8000 gives GB/s (`topo.cc`).
pub fn net_bw_gbs(speed_mbps: f64) -> f64 {
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
    pub dev: i32,
    pub rank: i32,
    pub busid: String,
    pub sm: u32,
    /// NCCL's node label (`GPU/0-18000`).
    pub nccl_label: String,
    /// NUMA node of its CPU, `None` when unknown (-1).
    pub numa: Option<i64>,
    /// CPU list of its NUMA node (`0-55,112-167`), from the XML `affinity` mask.
    pub cpu_affinity: Option<String>,
    /// Total NVLinks of this GPU (sum of `<nvlink count>`).
    pub nvlinks: u32,
}

/// A network device (NCCL NET node).
#[derive(Debug, Clone, Serialize)]
pub struct NetInfo {
    /// Column name in the link matrix (`NIC0`), `None` for a NIC that is not a
    /// PCI device in the XML (virtio NICs seen through sockets): nvidia-smi
    /// lists only PCI NICs.
    pub matrix_name: Option<String>,
    /// Device name (`mlx5_0`, `eth0`).
    pub name: String,
    pub dev: i64,
    pub busid: Option<String>,
    pub speed_mbps: f64,
    /// NCCL's NET bandwidth, GB/s.
    pub bw_gbs: f64,
    pub latency_us: f64,
    pub gdr: bool,
    pub nccl_label: String,
}

/// The `nvidia-smi topo -m` matrix.
#[derive(Debug, Clone, Serialize)]
pub struct LinkMatrix {
    /// `GPU0.., NIC0..`
    pub columns: Vec<String>,
    /// One row per column (same order): cells `X`, `NV18`, `PIX`, `PXB`, `PHB`, `NODE`, `SYS`.
    pub rows: Vec<Vec<String>>,
    /// NIC legend: `NIC0` is `mlx5_0`.
    pub nic_legend: Vec<NicLegend>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NicLegend {
    pub column: String,
    pub name: String,
}

/// One path as NCCL computed it.
#[derive(Debug, Clone, Serialize)]
pub struct PathInfo {
    pub from: String,
    pub to: String,
    #[serde(rename = "type")]
    pub ptype: String,
    pub bw_gbs: f64,
    pub hops: usize,
}

/// What `--nodes N` adds: the network between the hosts.
#[derive(Debug, Clone, Serialize)]
pub struct NetworkInfo {
    pub nodes: usize,
    pub ranks: usize,
    pub nics_per_node: usize,
    /// NET bandwidth of each NIC, GB/s (speed / 8000).
    pub bw_per_nic_gbs: Vec<f64>,
    /// Sum over the node's NICs, GB/s.
    pub bw_per_node_gbs: f64,
    /// `--net-latency`, µs, added to each NIC's reported latency.
    pub net_latency_us: f64,
}

/// Everything `planner topo` shows, with stable field names for `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct TopoReport {
    pub source: String,
    pub nodes: usize,
    pub gpus_per_node: usize,
    pub cpus: usize,
    pub nvswitch: bool,
    pub gpus: Vec<GpuInfo>,
    pub nets: Vec<NetInfo>,
    pub matrix: LinkMatrix,
    /// GPU to GPU, then GPU to NET, in matrix order.
    pub gpu_paths: Vec<PathInfo>,
    pub net_paths: Vec<PathInfo>,
    /// Present when `nodes > 1`.
    pub network: Option<NetworkInfo>,
    /// Present only on an MNNVL domain: several OS nodes fused into one NVLink domain (`topo::mnnvl`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mnnvl: Option<crate::topo::mnnvl::MnnvlInfo>,
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
                                l.attr("count")
                                    .and_then(|c| c.trim().parse::<u32>().ok())
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
    fn pci_relation(&self, a: &PciPlace, b: &PciPlace) -> &'static str {
        if a.cpu != b.cpu {
            return "SYS";
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
            return if crossed <= 1 { "PIX" } else { "PXB" };
        }
        let same_root_bus = match (a.chain.first(), b.chain.first()) {
            (Some(x), Some(y)) => root_bus(x) == root_bus(y),
            _ => false,
        };
        if same_root_bus || self.cpus.len() == 1 {
            "PHB"
        } else {
            "NODE"
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
pub fn cpumask_to_list(mask: &str) -> Option<String> {
    let mut cpus = Vec::new();
    for (word_index, word) in mask.trim().split(',').rev().enumerate() {
        let bits = u32::from_str_radix(word.trim(), 16).ok()?;
        for bit in 0..32 {
            if bits & (1 << bit) != 0 {
                cpus.push(word_index * 32 + bit);
            }
        }
    }
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

fn path_info(topo: &Topology, from: NodeIndex, to: NodeIndex, names: (&str, &str)) -> PathInfo {
    match topo.path(from, to) {
        Some(p) => PathInfo {
            from: names.0.to_string(),
            to: names.1.to_string(),
            ptype: p.ptype.nccl_name().to_string(),
            bw_gbs: p.bw,
            hops: p.hops(),
        },
        None => PathInfo {
            from: names.0.to_string(),
            to: names.1.to_string(),
            ptype: PathType::Dis.nccl_name().to_string(),
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
            let numa = cpu
                .and_then(|c| c.attr("numaid"))
                .and_then(|n| n.trim().parse::<i64>().ok())
                .filter(|&n| n >= 0);
            let cpu_affinity = cpu
                .and_then(|c| c.attr("affinity"))
                .and_then(cpumask_to_list);
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

    let mut gpu_paths = Vec::new();
    for (a, ga) in gpu_nodes.iter().zip(&gpus) {
        for (b, gb) in gpu_nodes.iter().zip(&gpus) {
            if a.0 != b.0 {
                gpu_paths.push(path_info(topo, a.0, b.0, (&ga.name, &gb.name)));
            }
        }
    }
    let mut net_paths = Vec::new();
    for (a, ga) in gpu_nodes.iter().zip(&gpus) {
        for ((b, _), nb) in net_nodes.iter().zip(&nets) {
            net_paths.push(path_info(topo, a.0, *b, (&ga.name, &nb.name)));
        }
    }

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
    let relation = |a: &MatrixEntry, b: &MatrixEntry| -> String {
        if a.name == b.name {
            return "X".to_string();
        }
        if a.gpu && b.gpu {
            let nv = a.nvlinks_to(b);
            if nv > 0 {
                return format!("NV{nv}");
            }
        }
        match (a.place, b.place) {
            (Some(pa), Some(pb)) => facts.pci_relation(pa, pb).to_string(),
            // A GPU the XML does not place under a CPU: nothing known.
            _ => "SYS".to_string(),
        }
    };
    let rows = entries
        .iter()
        .map(|a| entries.iter().map(|b| relation(a, b)).collect())
        .collect();
    LinkMatrix {
        columns: entries.into_iter().map(|e| e.name).collect(),
        rows,
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

/// The matrix exactly as `nvidia-smi topo -m` prints it: tab-separated, ` X `
/// on the diagonal, CPU/NUMA affinity and GPU NUMA ID after the GPU rows, NIC
/// rows without them, then the legend and the NIC legend.
pub fn render_nvidia_smi(report: &TopoReport) -> String {
    let m = &report.matrix;
    let mut out = String::new();
    for col in &m.columns {
        out.push('\t');
        out.push_str(col);
    }
    out.push_str("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n");
    for (name, row) in m.columns.iter().zip(&m.rows) {
        out.push_str(name);
        for cell in row {
            out.push('\t');
            out.push_str(if cell == "X" { " X " } else { cell });
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

fn table() -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .force_no_tty();
    t
}

fn cell_text(p: &PathInfo) -> String {
    format!("{} {:.1}", p.ptype, p.bw_gbs)
}

/// The path from `from` to `to` in `paths`: at `guess`, where `report` puts it, when the names there match and
/// `names_unique` (then no earlier entry has them: O(1)), else the first with those names.
fn find_path<'a>(
    paths: &'a [PathInfo],
    names_unique: bool,
    guess: usize,
    from: &str,
    to: &str,
) -> Option<&'a PathInfo> {
    match paths.get(guess) {
        Some(p) if names_unique && p.from == from && p.to == to => Some(p),
        _ => paths.iter().find(|p| p.from == from && p.to == to),
    }
}

fn all_unique<'a>(names: impl Iterator<Item = &'a str>) -> bool {
    let mut seen = std::collections::HashSet::new();
    names.into_iter().all(|n| seen.insert(n))
}

/// NCCL's view: a GPU x GPU table and a GPU x NET table of `TYPE GB/s` (O(GPUs x (GPUs + NICs))).
pub fn render_nccl_view(report: &TopoReport) -> String {
    // `report` lists GPU pairs row by row without the diagonal, and GPU-NIC pairs row by row.
    let gpu_names_unique = all_unique(report.gpus.iter().map(|g| g.name.as_str()));
    let net_names_unique =
        gpu_names_unique && all_unique(report.nets.iter().map(|n| n.name.as_str()));
    let mut out = String::new();
    out.push_str("NCCL paths, GPU to GPU (path type, bottleneck GB/s):\n");
    let mut t = table();
    // Rows are the sources: the corner says so (no unlabelled column).
    let mut header = vec!["from".to_string()];
    header.extend(report.gpus.iter().map(|g| g.name.clone()));
    t.set_header(header);
    let n_gpus = report.gpus.len();
    for (i, g) in report.gpus.iter().enumerate() {
        let mut row = vec![g.name.clone()];
        for (j, h) in report.gpus.iter().enumerate() {
            if g.name == h.name {
                row.push("X".to_string());
            } else {
                let guess =
                    i * n_gpus.saturating_sub(1) + if j < i { j } else { j.saturating_sub(1) };
                let p = find_path(&report.gpu_paths, gpu_names_unique, guess, &g.name, &h.name);
                row.push(p.map_or("-".to_string(), cell_text));
            }
        }
        t.add_row(row);
    }
    align_right(&mut t);
    out.push_str(&t.to_string());
    out.push('\n');
    if report.nets.is_empty() {
        out.push_str("No NIC: NCCL has no network device on this host.\n");
        return out;
    }
    out.push_str("\nNCCL paths, GPU to NIC (path type, bottleneck GB/s):\n");
    let mut t = table();
    let mut header = vec!["from".to_string()];
    header.extend(report.nets.iter().map(|n| n.name.clone()));
    t.set_header(header);
    for (i, g) in report.gpus.iter().enumerate() {
        let mut row = vec![g.name.clone()];
        for (k, n) in report.nets.iter().enumerate() {
            let guess = i * report.nets.len() + k;
            let p = find_path(&report.net_paths, net_names_unique, guess, &g.name, &n.name);
            row.push(p.map_or("-".to_string(), cell_text));
        }
        t.add_row(row);
    }
    align_right(&mut t);
    out.push_str(&t.to_string());
    out.push('\n');
    out.push_str("\nNICs (NCCL NET bandwidth = speed / 8000):\n");
    for n in &report.nets {
        out.push_str(&format!(
            "  {:<10} dev {:<2} {:>7.0} Mb/s = {:>6.1} GB/s  gdr {}  latency {} µs{}\n",
            n.name,
            n.dev,
            n.speed_mbps,
            n.bw_gbs,
            u8::from(n.gdr),
            n.latency_us,
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
        "Per node: {} GPU{} ({sm}){}, {} CPU node{}, {} NIC{}\n\n",
        report.gpus_per_node,
        plural(report.gpus_per_node),
        if report.nvswitch { ", NVSwitch" } else { "" },
        report.cpus,
        plural(report.cpus),
        report.nets.len(),
        plural(report.nets.len()),
    ));
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

/// `--json`: the report as pretty JSON.
pub fn render_json(report: &TopoReport) -> String {
    // Serializing plain structs of strings and numbers cannot fail.
    let mut s = super::json::render(report, "").unwrap_or_default();
    s.push('\n');
    s
}

/// `--dot`: NCCL's graph for Graphviz, one undirected edge per connected pair
/// (labelled with the link type and GB/s; `a/b` when the directions differ).
pub fn render_dot(topo: &Topology) -> String {
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
pub fn render_fixtures(list: &[Fixture], default: &str) -> String {
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
pub fn render_fixtures_json(list: &[Fixture], default: &str) -> String {
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

    #[test]
    fn net_bandwidth_is_speed_over_8000() {
        // 400 Gb/s = 400000 Mb/s -> 50 GB/s; HDR 200000 -> 25 GB/s.
        assert_eq!(net_bw_gbs(400000.0), 50.0);
        assert_eq!(net_bw_gbs(200000.0), 25.0);
    }
}
