//! From NCCL topology XML to a `Topology` (NCCL 2.28's `ncclTopoGetSystemFromXml`,
//! `src/graph/topo.cc`): CPUs and their PCI trees first, then NVLinks, C2C links
//! and PCI peer links in a second pass, Broadcom switch flattening, the CPU mesh,
//! and NCCL's link order. Then the paths (`paths.rs`).
//!
//! NCCL 2.28 has no DEV nodes: the GPU node carries its own PCI and NVLink links.

use super::paths::{self, PathOptions};
use super::{
    CpuArch, CpuNode, CpuVendor, GpuNode, Link, LinkKind, NetNode, Node, NodeData, NodeKind,
    Topology,
};
use crate::error::{Error, Result};
use crate::xml::{parse_int, parse_u64, XmlNode};
use petgraph::stable_graph::{EdgeIndex, NodeIndex, StableDiGraph};

use crate::limits::{LOC_BW, MAX_NET_LATENCY_US, MAX_TOPO_NODES_PER_KIND};

/// NCCL's per-link NVLink bandwidth by compute capability (`ncclTopoNVLinkBw`).
pub(crate) fn nvlink_bw(sm: u32) -> f32 {
    match sm {
        s if s >= 100 => 40.1,
        s if s >= 90 => 20.6,
        86 => 12.0,
        s if s >= 80 => 20.0,
        s if s >= 70 => 20.0,
        s if s >= 60 => 18.0,
        _ => 20.0,
    }
}

/// PCIe speed per lane in 100 Mb/s units from the sysfs string (`kvDictPciGen`),
/// matched by prefix as NCCL does. `None` for a string NCCL would not know.
fn pci_gen_speed(link_speed: &str) -> Option<u32> {
    const GENS: [(&str, u32); 11] = [
        ("2.5 GT/s", 15),
        ("5 GT/s", 30),
        ("8 GT/s", 60),
        ("16 GT/s", 120),
        ("32 GT/s", 240),
        ("2.5 GT/s PCIe", 15),
        ("5.0 GT/s PCIe", 30),
        ("8.0 GT/s PCIe", 60),
        ("16.0 GT/s PCIe", 120),
        ("32.0 GT/s PCIe", 240),
        ("64.0 GT/s PCIe", 480),
    ];
    GENS.iter()
        .find(|(prefix, _)| link_speed.starts_with(prefix))
        .map(|&(_, speed)| speed)
}

/// NCCL's fallback speed for an unknown PCIe generation (Gen3).
const PCI_GEN_FALLBACK: u32 = 60;

/// Inter-socket bandwidth (`ncclTopoGetInterCpuBw`).
fn inter_cpu_bw(cpu: &CpuNode) -> f64 {
    match (cpu.arch, cpu.vendor) {
        (CpuArch::Power, _) => 32.0,
        (CpuArch::Arm, _) => 6.0,
        (CpuArch::X86, CpuVendor::Intel) => match intel_model(cpu) {
            Some(super::IntelModel::EmeraldRapids) => 40.0,
            Some(super::IntelModel::SapphireRapids) => 22.0,
            Some(super::IntelModel::Skylake) => 10.0,
            _ => 6.0,
        },
        (CpuArch::X86, CpuVendor::Amd) => 16.0,
        (CpuArch::X86, CpuVendor::Zhaoxin) => {
            if cpu.family == 7 && cpu.model == 0x5b {
                9.0
            } else {
                6.0
            }
        }
        _ => LOC_BW,
    }
}

/// NCCL's Intel generation from family/model (`ncclTopoAddCpu`).
pub(crate) fn intel_model(cpu: &CpuNode) -> Option<super::IntelModel> {
    use super::IntelModel::*;
    if cpu.vendor != CpuVendor::Intel {
        return None;
    }
    Some(match (cpu.family, cpu.model) {
        (6, m) if m >= 0xcf => EmeraldRapids,
        (6, m) if m >= 0x8f => SapphireRapids,
        (6, m) if m >= 0x55 => Skylake,
        _ => Broadwell,
    })
}

/// `busIdToInt64`: the hex digits of a bus id, separators skipped.
pub(crate) fn bus_id_to_u64(busid: &str) -> u64 {
    let digits: String = busid
        .chars()
        .filter(|c| *c != ':' && *c != '.')
        .take_while(|c| c.is_ascii_hexdigit())
        .take(16)
        .collect();
    u64::from_str_radix(&digits, 16).unwrap_or(0)
}

const LOCAL_ID_MASK: u64 = 0x00ff_ffff_ffff_ffff;

fn topo_id(system: u64, local: u64) -> u64 {
    (system << 56).wrapping_add(local & LOCAL_ID_MASK)
}

/// A small stable hash (FNV-1a) standing in for NCCL's `eatHash/digestHash`:
/// only equality matters (same PCI parent = same rail candidate).
fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Mutable state while turning the XML into a graph.
struct Builder<'a> {
    source: &'a str,
    graph: StableDiGraph<Node, Link>,
    by_kind: [Vec<NodeIndex>; 6],
    adjacency: Vec<Vec<EdgeIndex>>,
    host_hashes: Vec<u64>,
    /// `NCCL_IB_HCA`: NICs outside it are left out.
    ib_hca: Option<crate::probe::net::IfList>,
}

impl<'a> Builder<'a> {
    fn new(source: &'a str) -> Self {
        Builder {
            source,
            graph: StableDiGraph::new(),
            by_kind: Default::default(),
            adjacency: Vec::new(),
            host_hashes: Vec::new(),
            ib_hca: None,
        }
    }

    fn bad(&self, node: &XmlNode, msg: impl std::fmt::Display) -> Error {
        Error::bad_input(format!(
            "{}:{}: <{}>: {msg}",
            self.source, node.line, node.name
        ))
    }

    fn int_attr(&self, node: &XmlNode, key: &str) -> Result<Option<i64>> {
        node.parsed(key, self.source, "an integer", parse_int)
    }

    fn required_int(&self, node: &XmlNode, key: &str) -> Result<i64> {
        self.int_attr(node, key)?
            .ok_or_else(|| self.bad(node, format!("missing the attribute '{key}'")))
    }

    /// A new node; `xml` is the element it comes from, named if the host already has NCCL's most nodes of `kind`.
    fn create(
        &mut self,
        xml: &XmlNode,
        kind: NodeKind,
        id: u64,
        data: NodeData,
    ) -> Result<NodeIndex> {
        if self.by_kind[kind as usize].len() >= MAX_TOPO_NODES_PER_KIND {
            return Err(self.bad(
                xml,
                format!(
                    "more than {MAX_TOPO_NODES_PER_KIND} {} nodes in one topology (NCCL_TOPO_MAX_NODES)",
                    kind.nccl_name()
                ),
            ));
        }
        let idx = self.graph.add_node(Node { kind, id, data });
        if self.adjacency.len() <= idx.index() {
            self.adjacency.resize(idx.index() + 1, Vec::new());
        }
        self.by_kind[kind as usize].push(idx);
        Ok(idx)
    }

    fn find(&self, kind: NodeKind, id: u64) -> Option<NodeIndex> {
        self.by_kind[kind as usize]
            .iter()
            .copied()
            .find(|&n| self.graph[n].id == id)
    }

    /// `ncclTopoConnectNodes`: add bandwidth to an existing (target, kind) link or
    /// create it, then keep the node's links sorted by bandwidth, descending,
    /// moving only the touched link (a stable insertion step, as NCCL does).
    fn connect(&mut self, from: NodeIndex, to: NodeIndex, kind: LinkKind, bw: f32) {
        let existing = self.adjacency[from.index()].iter().position(|&e| {
            self.graph[e].kind == kind && self.graph.edge_endpoints(e).map(|(_, t)| t) == Some(to)
        });
        let mut pos = match existing {
            Some(pos) => {
                let e = self.adjacency[from.index()][pos];
                let summed = self.graph[e].bw as f32 + bw;
                self.graph[e].bw = f64::from(summed);
                pos
            }
            None => {
                let e = self.graph.add_edge(
                    from,
                    to,
                    Link {
                        kind,
                        bw: f64::from(bw),
                    },
                );
                self.adjacency[from.index()].push(e);
                self.adjacency[from.index()].len() - 1
            }
        };
        let list = &mut self.adjacency[from.index()];
        while pos > 0 && self.graph[list[pos - 1]].bw < self.graph[list[pos]].bw {
            list.swap(pos - 1, pos);
            pos -= 1;
        }
    }

    fn connect_both(&mut self, a: NodeIndex, b: NodeIndex, kind: LinkKind, bw: f32) {
        self.connect(a, b, kind, bw);
        self.connect(b, a, kind, bw);
    }

    fn system_id(&mut self, cpu: &XmlNode) -> Result<u64> {
        let hash = match cpu.attr("host_hash") {
            Some(text) => parse_u64(text).ok_or_else(|| {
                self.bad(
                    cpu,
                    format!("host_hash=\"{text}\" is not a hexadecimal number"),
                )
            })?,
            None => 0,
        };
        let id = match self.host_hashes.iter().position(|&h| h == hash) {
            Some(i) => i,
            None => {
                self.host_hashes.push(hash);
                self.host_hashes.len() - 1
            }
        };
        Ok(id as u64)
    }

    fn add_cpu(&mut self, xml: &XmlNode) -> Result<()> {
        let numa = self.required_int(xml, "numaid")?;
        let system = self.system_id(xml)?;
        let arch_text = xml.attr("arch").unwrap_or("");
        let arch = match arch_text {
            "x86_64" => CpuArch::X86,
            "arm64" => CpuArch::Arm,
            "ppc64" => CpuArch::Power,
            "" => return Err(self.bad(xml, "missing the attribute 'arch'")),
            other => {
                return Err(self.bad(
                    xml,
                    format!("arch=\"{other}\" is not one of x86_64, arm64, ppc64"),
                ))
            }
        };
        let mut vendor = CpuVendor::Unknown;
        let (mut family, mut model) = (0, 0);
        if arch == CpuArch::X86 {
            vendor = match xml.attr("vendor") {
                Some("GenuineIntel") => CpuVendor::Intel,
                Some("AuthenticAMD") => CpuVendor::Amd,
                Some("CentaurHauls") | Some("  Shanghai  ") => CpuVendor::Zhaoxin,
                Some(other) => {
                    return Err(self.bad(
                        xml,
                        format!(
                            "vendor=\"{other}\" is not one of GenuineIntel, AuthenticAMD, CentaurHauls, \"  Shanghai  \""
                        ),
                    ))
                }
                None => return Err(self.bad(xml, "missing the attribute 'vendor' (needed for x86_64)")),
            };
            if matches!(vendor, CpuVendor::Intel | CpuVendor::Zhaoxin) {
                family = self.required_int(xml, "familyid")? as u32;
                model = self.required_int(xml, "modelid")? as u32;
            } else {
                family = self.int_attr(xml, "familyid")?.unwrap_or(0) as u32;
                model = self.int_attr(xml, "modelid")?.unwrap_or(0) as u32;
            }
        }
        let cpu = self.create(
            xml,
            NodeKind::Cpu,
            topo_id(system, numa as u64),
            NodeData::Cpu(CpuNode {
                numa,
                arch,
                vendor,
                family,
                model,
                affinity: xml.attr("affinity").map(str::to_string),
            }),
        )?;
        for child in &xml.children {
            match child.name.as_str() {
                "pci" => self.add_pci(child, cpu, system, numa)?,
                "nic" => {
                    // A NIC that is not a PCI device (virtio): attached to the CPU at LOC_BW.
                    let id = topo_id(system, (numa as u64) << 56);
                    let nic = match self.find(NodeKind::Nic, id) {
                        Some(n) => n,
                        None => {
                            let n = self.create(
                                child,
                                NodeKind::Nic,
                                id,
                                NodeData::Nic {
                                    busid: String::new(),
                                },
                            )?;
                            self.connect_both(cpu, n, LinkKind::Pci, LOC_BW as f32);
                            n
                        }
                    };
                    self.add_nic(child, nic, system, None)?;
                }
                other => {
                    return Err(self.bad(
                        child,
                        format!("<{other}> is not allowed inside <cpu> (expected <pci> or <nic>)"),
                    ))
                }
            }
        }
        Ok(())
    }

    /// Whether `NCCL_IB_HCA` (if set) keeps at least one `<net>` of a `<nic>`.
    fn keeps_a_net(&self, nic: &XmlNode) -> bool {
        let Some(filter) = &self.ib_hca else {
            return true;
        };
        nic.children.iter().any(|net| {
            let port = net
                .attr("port")
                .and_then(|p| p.trim().parse::<i64>().ok())
                .unwrap_or(1);
            filter.accepts(net.attr("name").unwrap_or(""), Some(port))
        })
    }

    fn add_nic(
        &mut self,
        xml: &XmlNode,
        nic: NodeIndex,
        system: u64,
        parent_busid: Option<&str>,
    ) -> Result<()> {
        for net in &xml.children {
            if net.name != "net" {
                return Err(self.bad(
                    net,
                    format!(
                        "<{}> is not allowed inside <nic> (expected <net>)",
                        net.name
                    ),
                ));
            }
            // A <net> without `dev` is not part of the topology (NCCL skips it).
            let Some(dev) = self.int_attr(net, "dev")? else {
                continue;
            };
            // NCCL_IB_HCA: the IB plugin never lists a device the filter leaves out.
            if let Some(filter) = &self.ib_hca {
                let port = self.int_attr(net, "port")?.unwrap_or(1);
                if !filter.accepts(net.attr("name").unwrap_or(""), Some(port)) {
                    continue;
                }
            }
            let id = topo_id(system, dev as u64);
            let asic = match net.attr("guid") {
                Some(text) => parse_u64(text).ok_or_else(|| {
                    self.bad(net, format!("guid=\"{text}\" is not a hexadecimal number"))
                })?,
                None => id,
            };
            let mbps = self.int_attr(net, "speed")?.unwrap_or(0);
            let mbps = if mbps <= 0 { 10000 } else { mbps };
            let bw = mbps as f32 / 8000.0;
            let latency = net
                .parsed(
                    "latency",
                    self.source,
                    "a number of µs between 0 and 1000000 (planner's limit: 1 s)",
                    |t| {
                        t.trim()
                            .parse::<f64>()
                            .ok()
                            .filter(|l| (0.0..=MAX_NET_LATENCY_US).contains(l))
                    },
                )?
                .unwrap_or(0.0);
            let pci_id = match parent_busid {
                Some(b) => stable_hash(b.as_bytes()),
                None => stable_hash(&asic.to_le_bytes()),
            };
            let data = NetNode {
                dev,
                name: net.attr("name").unwrap_or("").to_string(),
                speed_mbps: mbps as f64,
                latency_us: latency,
                port: self.int_attr(net, "port")?.unwrap_or(0),
                asic,
                pci_id,
                max_channels: self.int_attr(net, "maxconn")?.unwrap_or(64),
                gdr: self.int_attr(net, "gdr")?.unwrap_or(0) != 0,
                coll: self.int_attr(net, "coll")?.unwrap_or(0) != 0,
                local_gpu: None,
            };
            let node = self.create(net, NodeKind::Net, id, NodeData::Net(data))?;
            self.connect_both(nic, node, LinkKind::Net, bw);
        }
        Ok(())
    }

    fn add_pci(&mut self, xml: &XmlNode, parent: NodeIndex, system: u64, numa: i64) -> Result<()> {
        if xml.name != "pci" {
            return Err(self.bad(xml, "expected <pci>"));
        }
        let class = xml
            .attr("class")
            .ok_or_else(|| self.bad(xml, "missing the attribute 'class'"))?;
        if parse_u64(class).is_none() {
            return Err(self.bad(
                xml,
                format!("class=\"{class}\" is not a hexadecimal PCI class"),
            ));
        }
        let busid = xml
            .attr("busid")
            .ok_or_else(|| self.bad(xml, "missing the attribute 'busid'"))?
            .to_string();
        let bus = bus_id_to_u64(&busid);
        let mut kind = pci_class_kind(class);
        for child in &xml.children {
            if !matches!(child.name.as_str(), "pci" | "gpu" | "nic" | "pcilink") {
                return Err(self.bad(
                    child,
                    format!(
                        "<{}> is not allowed inside <pci> (expected <pci>, <gpu>, <nic> or <pcilink>)",
                        child.name
                    ),
                ));
            }
        }

        let mut node = None;
        if let Some(gpu) = xml.children_named("gpu").next() {
            kind = NodeKind::Gpu;
            // A GPU without a rank is not part of this job: NCCL drops the subtree.
            let Some(n) = self.add_pci_gpu(xml, gpu, system, &busid)? else {
                return Ok(());
            };
            node = Some(n);
        }
        let nic_xml = xml.children_named("nic").next();
        if nic_xml.is_some_and(|n| !self.keeps_a_net(n)) {
            // NCCL_IB_HCA left every port of this NIC out: NCCL's topology has no such device (nor its PCI
            // endpoint, which NCCL trims as it keeps only devices in use).
        } else if let Some(nic_xml) = nic_xml {
            // Multi-port NICs share one NIC node per (NUMA, bus id).
            let id = topo_id(system, ((numa as u64) << 56).wrapping_add(bus));
            let nic = match self.find(NodeKind::Nic, id) {
                Some(n) => n,
                None => {
                    let n = self.create(
                        nic_xml,
                        NodeKind::Nic,
                        id,
                        NodeData::Nic {
                            busid: busid.to_lowercase(),
                        },
                    )?;
                    node = Some(n);
                    n
                }
            };
            self.add_nic(nic_xml, nic, system, Some(&busid))?;
        } else if kind == NodeKind::Pci {
            let mut device: u64 = 0;
            for (key, shift) in [
                ("vendor", 48),
                ("device", 32),
                ("subsystem_vendor", 16),
                ("subsystem_device", 0),
            ] {
                if let Some(v) = xml.parsed(key, self.source, "a hexadecimal id", parse_u64)? {
                    device = device.wrapping_add(v << shift);
                }
            }
            let n = self.create(
                xml,
                NodeKind::Pci,
                topo_id(system, bus),
                NodeData::Pci {
                    busid: busid.to_lowercase(),
                    device_id: device,
                },
            )?;
            node = Some(n);
            for child in &xml.children {
                if child.name != "pcilink" {
                    self.add_pci(child, n, system, numa)?;
                }
            }
        }
        if let Some(n) = node {
            let bw = self.pci_link_bw(xml)?;
            self.connect_both(n, parent, LinkKind::Pci, bw);
        }
        Ok(())
    }

    /// The `<gpu>` inside `xml` (a `<pci>` of bus id `busid`): its node, or None for a GPU without a rank (not
    /// part of this job: NCCL drops the subtree).
    fn add_pci_gpu(
        &mut self,
        xml: &XmlNode,
        gpu: &XmlNode,
        system: u64,
        busid: &str,
    ) -> Result<Option<NodeIndex>> {
        let bus = bus_id_to_u64(busid);
        let Some(rank) = self.int_attr(gpu, "rank")? else {
            return Ok(None);
        };
        for link in &gpu.children {
            if !matches!(link.name.as_str(), "nvlink" | "c2c") {
                return Err(self.bad(
                    link,
                    format!(
                        "<{}> is not allowed inside <gpu> (expected <nvlink> or <c2c>)",
                        link.name
                    ),
                ));
            }
        }
        let sm = self.required_int(gpu, "sm")?;
        if !(10..=1000).contains(&sm) {
            return Err(self.bad(
                gpu,
                format!("sm=\"{sm}\" is not a compute capability like 90"),
            ));
        }
        let data = GpuNode {
            dev: self.required_int(gpu, "dev")? as i32,
            rank: rank as i32,
            sm: sm as u32,
            gdr: self.int_attr(gpu, "gdr")?.unwrap_or(0) != 0,
            busid: busid.to_lowercase(),
            nvml_p2p: self.int_attr(gpu, "nvml_p2p")?.unwrap_or(1) != 0,
        };
        if self.find(NodeKind::Gpu, topo_id(system, bus)).is_some() {
            return Err(self.bad(xml, format!("GPU {busid} appears twice")));
        }
        Ok(Some(self.create(
            gpu,
            NodeKind::Gpu,
            topo_id(system, bus),
            NodeData::Gpu(data),
        )?))
    }

    /// The bandwidth of a `<pci>`'s link to its parent (GB/s) from its width and speed.
    fn pci_link_bw(&self, xml: &XmlNode) -> Result<f32> {
        let width = self.int_attr(xml, "link_width")?.unwrap_or(0);
        let width = if width == 0 { 16 } else { width };
        if width < 0 {
            return Err(self.bad(xml, format!("link_width=\"{width}\" is negative")));
        }
        let speed_text = xml.attr("link_speed").unwrap_or("");
        let speed = match pci_gen_speed(speed_text) {
            Some(s) => s,
            // Empty or "Unknown" is what sysfs says in VMs; NCCL falls back to Gen3.
            None if speed_text.is_empty() || speed_text.starts_with("Unknown") => PCI_GEN_FALLBACK,
            None => {
                return Err(self.bad(
                    xml,
                    format!(
                        "link_speed=\"{speed_text}\" is not a PCIe speed like \"16.0 GT/s PCIe\""
                    ),
                ))
            }
        };
        Ok((width as f32) * (speed as f32) / 80.0)
    }

    /// Second pass: `<nvlink>`, `<c2c>` and `<pcilink>` elements, which refer to
    /// nodes that may appear later in the file.
    fn add_links(&mut self, xml: &XmlNode, parent_busid: Option<&str>, system: u64) -> Result<()> {
        match xml.name.as_str() {
            "nvlink" => self.add_nvlink(xml, parent_busid, system),
            "c2c" => self.add_c2c(xml, parent_busid, system),
            "pcilink" => self.add_pcilink(xml, parent_busid, system),
            _ => {
                let system = if xml.name == "cpu" {
                    self.system_id(xml)?
                } else {
                    system
                };
                let busid = xml.attr("busid").or(parent_busid).map(str::to_string);
                for child in &xml.children {
                    self.add_links(child, busid.as_deref(), system)?;
                }
                Ok(())
            }
        }
    }

    fn parent_gpu(
        &self,
        xml: &XmlNode,
        parent_busid: Option<&str>,
        system: u64,
    ) -> Result<NodeIndex> {
        let busid = parent_busid.unwrap_or("");
        self.find(NodeKind::Gpu, topo_id(system, bus_id_to_u64(busid)))
            .ok_or_else(|| self.bad(xml, format!("no GPU with bus id '{busid}' holds this link")))
    }

    fn add_nvlink(&mut self, xml: &XmlNode, parent_busid: Option<&str>, system: u64) -> Result<()> {
        let gpu = self.parent_gpu(xml, parent_busid, system)?;
        let count = self.required_int(xml, "count")?;
        if !(0..=64).contains(&count) {
            return Err(self.bad(xml, format!("count=\"{count}\" is not a number of NVLinks")));
        }
        let tclass = xml
            .attr("tclass")
            .ok_or_else(|| self.bad(xml, "missing the attribute 'tclass'"))?;
        let sm = self.graph[gpu].gpu().map(|g| g.sm).unwrap_or(0);
        let bw = count as f32 * nvlink_bw(sm);
        // A link to the GPU's own bus id is no link (a GPU "peer" at itself, or a GPU at the NVSwitch's address):
        // NCCL would connect the GPU to itself and count bandwidth that is not there.
        if let (Some(target), Some(own)) = (xml.attr("target"), parent_busid) {
            if !target.trim().is_empty() && bus_id_to_u64(target) == bus_id_to_u64(own) {
                let what = if tclass.starts_with("0x03") {
                    "an NVLink from the GPU to itself"
                } else {
                    "the GPU has the bus id of the device its NVLinks go to (the NVSwitch's)"
                };
                return Err(self.bad(xml, format!("target=\"{target}\": {what}")));
            }
        }
        let remote = if tclass.starts_with("0x03") {
            let target = xml
                .attr("target")
                .ok_or_else(|| self.bad(xml, "missing the attribute 'target'"))?;
            // A peer GPU not in this job: NCCL ignores the link.
            self.find(NodeKind::Gpu, topo_id(system, bus_id_to_u64(target)))
        } else if tclass.starts_with("0x068001") {
            self.local_cpu(gpu)
        } else if tclass.starts_with("0x068000") || parse_u64(tclass).is_some() {
            // Every NVSwitch (and any other target class) is the one collapsed NVS node.
            Some(match self.by_kind[NodeKind::Nvs as usize].first() {
                Some(&n) => n,
                None => self.create(xml, NodeKind::Nvs, 0, NodeData::Nvs)?,
            })
        } else {
            return Err(self.bad(
                xml,
                format!("tclass=\"{tclass}\" is not a hexadecimal PCI class"),
            ));
        };
        if let Some(remote) = remote {
            self.connect(gpu, remote, LinkKind::Nvl, bw);
            if self.graph[remote].kind != NodeKind::Gpu {
                self.connect(remote, gpu, LinkKind::Nvl, bw);
            }
        }
        Ok(())
    }

    fn add_c2c(&mut self, xml: &XmlNode, parent_busid: Option<&str>, system: u64) -> Result<()> {
        let gpu = self.parent_gpu(xml, parent_busid, system)?;
        let count = self.required_int(xml, "count")?;
        let bw = self.required_int(xml, "bw")?;
        // NCCL reads both as `int` (`ncclTopoAddC2c`); in range, their product fits an i64.
        for (key, value) in [("count", count), ("bw", bw)] {
            if !(0..=i64::from(i32::MAX)).contains(&value) {
                return Err(self.bad(
                    xml,
                    format!(
                        "{key}=\"{value}\" is not between 0 and {} (an int)",
                        i32::MAX
                    ),
                ));
            }
        }
        let c2c_bw = ((bw * count) as f64 / 1000.0) as f32;
        if let Some(cpu) = self.local_cpu(gpu) {
            self.connect_both(gpu, cpu, LinkKind::C2c, c2c_bw);
        }
        Ok(())
    }

    fn add_pcilink(
        &mut self,
        xml: &XmlNode,
        parent_busid: Option<&str>,
        system: u64,
    ) -> Result<()> {
        let busid = parent_busid.unwrap_or("");
        let pci = self
            .find(NodeKind::Pci, topo_id(system, bus_id_to_u64(busid)))
            .ok_or_else(|| {
                self.bad(
                    xml,
                    format!("no PCI switch with bus id '{busid}' holds this link"),
                )
            })?;
        let target = xml
            .attr("target")
            .ok_or_else(|| self.bad(xml, "missing the attribute 'target'"))?;
        if let Some(remote) = self.find(NodeKind::Pci, topo_id(system, bus_id_to_u64(target))) {
            self.connect(pci, remote, LinkKind::Loc, LOC_BW as f32);
        }
        Ok(())
    }

    /// `findLocalCpu`: walk up PCI links through switches to the CPU (depth first, in link order; iterative, and
    /// each node once, so a PCI cycle made of a malformed file cannot loop).
    fn local_cpu(&self, start: NodeIndex) -> Option<NodeIndex> {
        let mut seen = vec![false; self.adjacency.len()];
        let mut todo: Vec<(NodeIndex, Option<NodeIndex>)> = vec![(start, None)];
        while let Some((node, from)) = todo.pop() {
            if std::mem::replace(&mut seen[node.index()], true) {
                continue;
            }
            if self.graph[node].kind == NodeKind::Cpu {
                return Some(node);
            }
            for &e in self.adjacency[node.index()].iter().rev() {
                let Some((_, next)) = self.graph.edge_endpoints(e) else {
                    continue;
                };
                if self.graph[e].kind == LinkKind::Pci
                    && Some(next) != from
                    && !seen[next.index()]
                    && matches!(self.graph[next].kind, NodeKind::Pci | NodeKind::Cpu)
                {
                    todo.push((next, Some(node)));
                }
            }
        }
        None
    }

    /// `ncclTopoFlattenBcmSwitches`: Broadcom Gen4/Gen5 switches show up as two
    /// levels; NCCL merges the sub-switches into the parent. Like NCCL's
    /// `ncclTopoRemoveNode`, removing a sub-switch removes every link to it.
    /// A switch is never its own sub-switch (a `<pcilink>` to its own bus id).
    fn flatten_bcm_switches(&mut self) {
        fn bcm_gen(device: u64, level: u64) -> u32 {
            if device & 0xffff_ffff_ffff_f000 == 0x1000_c010_1000_a000 {
                return 4;
            }
            if device & 0xffff_ffff_ffff_f000 == (0x1000_c030_1000_0000 | (level * 0x1000)) {
                return 5;
            }
            0
        }
        let device_of = |b: &Builder, n: NodeIndex| match &b.graph[n].data {
            NodeData::Pci { device_id, .. } => *device_id,
            _ => 0,
        };
        // Each pass disables one switch for good (device |= 0xffff), so this ends.
        'restart: loop {
            for s in 0..self.by_kind[NodeKind::Pci as usize].len() {
                let switch = self.by_kind[NodeKind::Pci as usize][s];
                let gen = bcm_gen(device_of(self, switch), 0);
                if gen == 0 {
                    continue;
                }
                let mut subs: Vec<NodeIndex> = Vec::new();
                let links = self.adjacency[switch.index()].clone();
                let mut kept = Vec::new();
                for e in links {
                    let Some((_, sub)) = self.graph.edge_endpoints(e) else {
                        continue;
                    };
                    if sub != switch
                        && self.graph[sub].kind == NodeKind::Pci
                        && bcm_gen(device_of(self, sub), 1) == gen
                    {
                        if !subs.contains(&sub) {
                            subs.push(sub);
                        }
                        self.graph.remove_edge(e);
                    } else {
                        kept.push(e);
                    }
                }
                self.adjacency[switch.index()] = kept;
                for sub in subs {
                    for e in self.adjacency[sub.index()].clone() {
                        let Some((_, rem)) = self.graph.edge_endpoints(e) else {
                            continue;
                        };
                        if rem == switch || rem == sub {
                            continue;
                        }
                        let link = self.graph[e];
                        let ne = self.graph.add_edge(switch, rem, link);
                        self.adjacency[switch.index()].push(ne);
                        // Re-point the device's up-link from the sub-switch to the parent.
                        for &re in &self.adjacency[rem.index()].clone() {
                            if self.graph.edge_endpoints(re).map(|(_, t)| t) == Some(sub) {
                                let l = self.graph[re];
                                let pos = self.adjacency[rem.index()].iter().position(|&x| x == re);
                                self.graph.remove_edge(re);
                                let new = self.graph.add_edge(rem, switch, l);
                                if let Some(p) = pos {
                                    self.adjacency[rem.index()][p] = new;
                                }
                                break;
                            }
                        }
                    }
                    self.graph.remove_node(sub);
                    self.adjacency[sub.index()].clear();
                    self.by_kind[NodeKind::Pci as usize].retain(|&n| n != sub);
                    // The graph dropped the sub-switch's remaining edges; so do the link lists.
                    let graph = &self.graph;
                    for list in &mut self.adjacency {
                        list.retain(|&e| graph.edge_endpoints(e).is_some());
                    }
                }
                if let NodeData::Pci { device_id, .. } = &mut self.graph[switch].data {
                    *device_id |= 0xffff;
                }
                continue 'restart;
            }
            break;
        }
    }

    /// `ncclTopoConnectCpus`: CPUs of one host are fully meshed by SYS links.
    fn connect_cpus(&mut self) {
        let cpus = self.by_kind[NodeKind::Cpu as usize].clone();
        for &a in &cpus {
            for &b in &cpus {
                if a == b || self.graph[a].id >> 56 != self.graph[b].id >> 56 {
                    continue;
                }
                let bw = self.graph[a].cpu().map(inter_cpu_bw).unwrap_or(LOC_BW);
                self.connect(a, b, LinkKind::Sys, bw as f32);
            }
        }
    }

    /// `ncclTopoSortSystem`: in the PCI tree, each node's up-link goes last. Depth first from each CPU in link
    /// order, as NCCL's recursion; iterative, each node once.
    fn sort_links(&mut self) {
        let mut seen = vec![false; self.adjacency.len()];
        for cpu in self.by_kind[NodeKind::Cpu as usize].clone() {
            let mut todo: Vec<(NodeIndex, Option<NodeIndex>)> = vec![(cpu, None)];
            while let Some((node, up)) = todo.pop() {
                if std::mem::replace(&mut seen[node.index()], true) {
                    continue;
                }
                if let Some(up) = up {
                    let graph = &self.graph;
                    let list = &mut self.adjacency[node.index()];
                    if let Some(pos) = list
                        .iter()
                        .position(|&e| graph.edge_endpoints(e).map(|(_, t)| t) == Some(up))
                    {
                        let link = list.remove(pos);
                        list.push(link);
                    }
                }
                for &e in self.adjacency[node.index()].iter().rev() {
                    let Some((_, next)) = self.graph.edge_endpoints(e) else {
                        continue;
                    };
                    if self.graph[e].kind == LinkKind::Pci
                        && Some(next) != up
                        && !seen[next.index()]
                    {
                        todo.push((next, Some(node)));
                    }
                }
            }
        }
    }

    /// Every link list names existing links leaving its own node (what `Topology::link_target` relies on).
    fn check_links(&self) -> Result<()> {
        for (i, list) in self.adjacency.iter().enumerate() {
            for &e in list {
                if self.graph.edge_endpoints(e).map(|(from, _)| from.index()) != Some(i) {
                    return Err(Error::runtime(format!(
                        "{}: internal error: a link of node {i} is stale after building the topology",
                        self.source
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Build a topology from NCCL topology XML bytes (`source` names them in errors), default path options: the entry
/// point for any byte input (a fuzz target is one line).
pub fn from_bytes(bytes: &[u8], source: &str) -> Result<Topology> {
    from_xml(&crate::xml::parse_bytes(bytes, source)?, source)
}

/// Build a topology from NCCL XML with NCCL's default path options.
pub fn from_xml(root: &XmlNode, source: &str) -> Result<Topology> {
    from_xml_with(root, source, &PathOptions::default())
}

/// Build a topology from NCCL XML (`<system version="1">`).
pub(crate) fn from_xml_with(
    root: &XmlNode,
    source: &str,
    options: &PathOptions,
) -> Result<Topology> {
    if root.name != "system" {
        return Err(Error::bad_input(format!(
            "{source}:{}: the top element is <{}>, expected <system> (an NCCL topology file)",
            root.line, root.name
        )));
    }
    match root.attr("version") {
        Some("1") => {}
        Some(other) => {
            return Err(Error::bad_input(format!(
                "{source}:{}: <system version=\"{other}\">: only version 1 is known",
                root.line
            )))
        }
        None => {
            return Err(Error::bad_input(format!(
                "{source}:{}: <system> is missing the attribute 'version'",
                root.line
            )))
        }
    }
    let mut b = Builder::new(source);
    b.ib_hca = options.ib_hca.clone();
    for child in &root.children {
        if child.name != "cpu" {
            return Err(b.bad(
                child,
                format!(
                    "<{}> is not allowed inside <system> (expected <cpu>)",
                    child.name
                ),
            ));
        }
        b.add_cpu(child)?;
    }
    b.add_links(root, None, 0)?;
    b.flatten_bcm_switches();
    b.connect_cpus();
    b.sort_links();
    b.check_links()?;
    if b.by_kind[NodeKind::Gpu as usize].is_empty() {
        return Err(Error::bad_input(format!(
            "{source}: the topology has no GPU (no <gpu> element with a rank)"
        )));
    }
    let mut topo = Topology {
        graph: b.graph,
        by_kind: b.by_kind,
        adjacency: b.adjacency,
        paths: Default::default(),
        xml: root.clone(),
        source: source.to_string(),
        driver_affinity: Vec::new(),
    };
    paths::compute(&mut topo, options)?;
    Ok(topo)
}

/// The node kind of a PCI class (`kvDictPciClass`, prefix matched).
fn pci_class_kind(class: &str) -> NodeKind {
    if class.starts_with("0x060400") || class.starts_with("0x080100") {
        NodeKind::Pci
    } else if class.starts_with("0x068000") {
        NodeKind::Nvs
    } else if class.starts_with("0x068001") {
        NodeKind::Cpu
    } else if class.starts_with("0x03") {
        NodeKind::Gpu
    } else if class.starts_with("0x02") {
        NodeKind::Nic
    } else {
        NodeKind::Pci
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xml;

    fn capture() -> Topology {
        let text = include_str!("../../fixtures/h200x2-nvswitch-vm.xml");
        from_xml(&xml::parse(text, "capture").unwrap(), "capture").unwrap()
    }

    #[test]
    fn capture_nodes_and_links_match_nccl_system_dump() {
        // NCCL's log of this machine:
        //   CPU/0-ffffffffffffff (1/1/4)
        //   + PCI[5000.0] - NIC/0-0
        //                   + NET[1.2] - NET/0-0 (0/0/0/1.250000)
        //   + PCI[48.0] - GPU/0-60 (0)
        //                 + NVL[370.8] - NVS/0-0
        //   + PCI[48.0] - GPU/0-70 (1)
        //                 + NVL[370.8] - NVS/0-0
        let t = capture();
        let label = |k: NodeKind| -> Vec<String> {
            t.nodes(k).iter().map(|&n| t.node(n).nccl_label()).collect()
        };
        assert_eq!(label(NodeKind::Cpu), vec!["CPU/0-ffffffffffffff"]);
        assert_eq!(label(NodeKind::Gpu), vec!["GPU/0-60", "GPU/0-70"]);
        assert_eq!(label(NodeKind::Nvs), vec!["NVS/0-0"]);
        assert_eq!(label(NodeKind::Nic), vec!["NIC/0-0"]);
        assert_eq!(label(NodeKind::Net), vec!["NET/0-0"]);
        let cpu = t.nodes(NodeKind::Cpu)[0];
        let links: Vec<(String, String)> = t.adjacency[cpu.index()]
            .iter()
            .map(|&e| {
                let l = t.graph[e];
                (
                    format!("{}[{:.1}]", l.kind.nccl_name(), l.bw),
                    t.node(t.link_target(e)).nccl_label(),
                )
            })
            .collect();
        // CPU links in NCCL's print order: NIC first (5000), then the GPUs (48 each).
        assert_eq!(
            links,
            vec![
                ("PCI[5000.0]".to_string(), "NIC/0-0".to_string()),
                ("PCI[48.0]".to_string(), "GPU/0-60".to_string()),
                ("PCI[48.0]".to_string(), "GPU/0-70".to_string()),
            ]
        );
        // 18 links x 20.6 GB/s (sm90) = 370.8; PCIe Gen5 (240) x16 (width 0 -> 16) / 80 = 48.
        let gpu0 = t.nodes(NodeKind::Gpu)[0];
        let first = t.adjacency[gpu0.index()][0];
        assert_eq!(t.graph[first].kind, LinkKind::Nvl);
        assert!((t.graph[first].bw - 370.8).abs() < 1e-3);
        let net = t.node(t.nodes(NodeKind::Net)[0]).net().unwrap();
        assert_eq!(net.speed_mbps, 10000.0);
        let cpu_node = t.node(cpu).cpu().unwrap();
        assert_eq!(
            intel_model(cpu_node),
            Some(crate::topo::IntelModel::EmeraldRapids)
        );
    }

    #[test]
    fn bad_values_name_file_and_line() {
        let cases = [
            ("<system version=\"2\"/>", "capture.xml:1:"),
            ("<system version=\"1\">\n  <gpu/>\n</system>", "capture.xml:2: <gpu>"),
            (
                "<system version=\"1\">\n  <cpu numaid=\"0\" arch=\"sparc\"/>\n</system>",
                "arch=\"sparc\"",
            ),
            (
                "<system version=\"1\">\n  <cpu numaid=\"x\" arch=\"x86_64\" vendor=\"AuthenticAMD\"/>\n</system>",
                "numaid=\"x\"",
            ),
            (
                "<system version=\"1\">\n  <cpu numaid=\"0\" arch=\"x86_64\" vendor=\"AuthenticAMD\"/>\n</system>",
                "no GPU",
            ),
            (
                "<system version=\"1\">\n  <cpu numaid=\"0\" arch=\"x86_64\" vendor=\"AuthenticAMD\">\n    <pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"9 GT/s\" link_width=\"16\">\n      <gpu dev=\"0\" sm=\"90\" rank=\"0\" gdr=\"1\"/>\n    </pci>\n  </cpu>\n</system>",
                "capture.xml:3: <pci>: link_speed=\"9 GT/s\"",
            ),
        ];
        for (text, expected) in cases {
            let root = xml::parse(text, "capture.xml").unwrap();
            let err = from_xml(&root, "capture.xml").unwrap_err();
            assert_eq!(err.exit_code(), 2, "{err}");
            assert!(err.to_string().contains(expected), "{err} lacks {expected}");
        }
    }

    #[test]
    fn a_gpu_linked_to_its_own_bus_id_is_refused() {
        let capture = include_str!("../../tests/golden/h200x2-nvswitch-vm/topo.xml");
        assert!(from_xml(&xml::parse(capture, "t.xml").unwrap(), "t.xml").is_ok());
        let first_gpu_bus = "0000:00:06.0";
        assert!(capture.contains(first_gpu_bus));
        let cases = [
            // GPU 0's NVLinks go to a GPU at its own bus id.
            (
                capture.replacen(
                    "target=\"fffffff:ff:ff.0\" count=\"18\" tclass=\"0x068000\"",
                    &format!("target=\"{first_gpu_bus}\" count=\"18\" tclass=\"0x030200\""),
                    1,
                ),
                "an NVLink from the GPU to itself",
            ),
            // GPU 0 sits at the NVSwitch's bus id.
            (
                capture.replacen(first_gpu_bus, "fffffff:ff:ff.0", 1),
                "the NVSwitch's",
            ),
        ];
        for (text, says) in cases {
            assert_ne!(text, capture);
            let err = from_xml(&xml::parse(&text, "t.xml").unwrap(), "t.xml").unwrap_err();
            assert_eq!(err.exit_code(), 2, "{err}");
            assert!(err.to_string().contains(says), "{err}");
            assert!(err.to_string().contains("t.xml:"), "{err}");
        }
    }
}
