//! NCCL's topology detection (`src/graph/xml.cc`, `topo.cc` of NCCL 2.28),
//! re-done over recorded NVML facts and a sysfs root, so that the XML comes out
//! as NCCL's own `NCCL_TOPO_DUMP_FILE` would on the same machine: the same
//! elements, attributes in NCCL's insertion order, children in NCCL's order.
//!
//! NCCL builds one XML per rank (its GPU, then the NICs) and fuses them in
//! rank order; so do we. Within a rank's XML, nodes may exist detached from
//! the tree for a while (a PCI node is created first and hung under its parent
//! once sysfs says where), so the rank XML is an arena of nodes with parent
//! links, turned into an `XmlNode` tree at the end.

use super::cpu::CpuId;
use super::facts::{nccl_nvlink_target, GpuFacts, MachineFacts, RemoteType, INVISIBLE_TARGET};
use super::net::NetDevice;
use super::sysfs::{is_bdf, leading_float, strtol, SysFs};
use super::warnings::{Oddity, Warnings};
use crate::xml::XmlNode;

/// What the probe knows about the host besides NVML and the PCI tree.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HostInfo {
    /// NCCL's `arch`: "x86_64", "arm64", "ppc64".
    pub(crate) arch: String,
    /// x86 only; `None` when /proc/cpuinfo could not be read.
    pub(crate) cpu: Option<CpuId>,
    /// `host_hash` attribute value ("0x...").
    pub(crate) host_hash: String,
}

/// The whole detection: one XML per rank, fused in rank order.
pub(crate) fn build(
    facts: &MachineFacts,
    nets: &[NetDevice],
    sys: &SysFs,
    host: &HostInfo,
    warnings: &mut Warnings,
) -> XmlNode {
    let ranked = ranked_gpus(facts, warnings);
    let mut fused: Option<XmlNode> = None;
    for (rank, gpu) in ranked.iter().enumerate() {
        let mut det = RankXml::new(sys, host, warnings);
        let gpu_node = det.fill_gpu(gpu);
        det.xml.set(gpu_node, "rank", rank.to_string());
        let gdr = match gpu.gdr {
            Some(g) => g,
            None => {
                det.warnings.add(Oddity::GdrUnknown, gpu.nccl_bus_id());
                false
            }
        };
        det.xml.init(gpu_node, "gdr", if gdr { "1" } else { "0" });
        for (dev, net) in nets.iter().enumerate() {
            det.fill_net(dev, net);
        }
        let tree = det.xml.tree(0);
        fused = Some(match fused {
            None => tree,
            Some(mut dst) => {
                fuse(&mut dst, &tree);
                dst
            }
        });
    }
    p2p_warnings(facts, warnings);
    fused.unwrap_or_else(|| XmlNode::new("system").with_attr("version", "1"))
}

/// The GPUs NCCL would have as ranks: those CUDA sees, in CUDA order, or all of
/// NVML's in NVML order when CUDA could not be asked.
pub(crate) fn ranked_gpus<'a>(
    facts: &'a MachineFacts,
    warnings: &mut Warnings,
) -> Vec<&'a GpuFacts> {
    if !facts.cuda_available {
        let mut all: Vec<&GpuFacts> = facts.gpus.iter().collect();
        all.sort_by_key(|g| g.index);
        return all;
    }
    let mut seen: Vec<&GpuFacts> = Vec::new();
    for g in &facts.gpus {
        if g.cuda_ordinal.is_some() {
            seen.push(g);
        } else {
            warnings.add(Oddity::HiddenFromCuda, g.nccl_bus_id());
        }
    }
    seen.sort_by_key(|g| g.cuda_ordinal);
    seen
}

fn p2p_warnings(facts: &MachineFacts, warnings: &mut Warnings) {
    for p in &facts.p2p {
        let bad: Vec<&str> = [("read", p.read_ok), ("write", p.write_ok)]
            .iter()
            .filter(|(_, ok)| *ok == Some(false))
            .map(|(what, _)| *what)
            .collect();
        if !bad.is_empty() && p.from < p.to {
            warnings.add(
                Oddity::P2pNotOk,
                format!("GPU {} <-> GPU {} ({})", p.from, p.to, bad.join("/")),
            );
        }
    }
}

/// NCCL's fusion (`ncclTopoFuseXml`): a child of `src` that has a twin in
/// `dst` (same name, same attributes) is merged into it, else appended.
pub(crate) fn fuse(dst: &mut XmlNode, src: &XmlNode) {
    for child in &src.children {
        let twin = dst.children.iter_mut().find(|d| {
            d.name == child.name
                && d.attrs.len() == child.attrs.len()
                && child
                    .attrs
                    .iter()
                    .all(|(k, v)| d.attr(k) == Some(v.as_str()))
        });
        match twin {
            Some(d) => fuse(d, child),
            None => dst.children.push(child.clone()),
        }
    }
}

#[derive(Debug, Clone)]
struct ArenaNode {
    name: String,
    attrs: Vec<(String, String)>,
    subs: Vec<usize>,
    parent: Option<usize>,
}

/// NCCL's `ncclXml`: nodes in creation order (searches go in that order).
#[derive(Debug, Clone)]
struct Arena {
    nodes: Vec<ArenaNode>,
}

impl Arena {
    fn new() -> Arena {
        let mut a = Arena { nodes: Vec::new() };
        let system = a.add(None, "system");
        a.set(system, "version", "1");
        a
    }

    fn add(&mut self, parent: Option<usize>, name: &str) -> usize {
        let id = self.nodes.len();
        self.nodes.push(ArenaNode {
            name: name.to_string(),
            attrs: Vec::new(),
            subs: Vec::new(),
            parent,
        });
        if let Some(p) = parent {
            self.nodes[p].subs.push(id);
        }
        id
    }

    fn attr(&self, id: usize, key: &str) -> Option<&str> {
        self.nodes[id]
            .attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn has(&self, id: usize, key: &str) -> bool {
        self.attr(id, key).is_some()
    }

    /// `xmlSetAttr`: replace in place or append.
    fn set(&mut self, id: usize, key: &str, value: impl Into<String>) {
        let value = value.into();
        let attrs = &mut self.nodes[id].attrs;
        match attrs.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => attrs.push((key.to_string(), value)),
        }
    }

    /// `xmlSetAttrIfUnset` / `xmlInitAttr*`.
    fn init(&mut self, id: usize, key: &str, value: impl Into<String>) {
        if !self.has(id, key) {
            self.set(id, key, value);
        }
    }

    /// `xmlFindTag`: the first node of that name in creation order.
    fn find_tag(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// `xmlFindTagKv`.
    fn find_tag_kv(&self, name: &str, key: &str, value: &str) -> Option<usize> {
        (0..self.nodes.len())
            .find(|&i| self.nodes[i].name == name && self.attr(i, key) == Some(value))
    }

    /// `xmlGetSub`.
    fn sub(&self, id: usize, name: &str) -> Option<usize> {
        self.nodes[id]
            .subs
            .iter()
            .copied()
            .find(|&s| self.nodes[s].name == name)
    }

    /// `xmlGetSubKv`.
    fn sub_kv(&self, id: usize, name: &str, key: &str, value: &str) -> Option<usize> {
        self.nodes[id]
            .subs
            .iter()
            .copied()
            .find(|&s| self.nodes[s].name == name && self.attr(s, key) == Some(value))
    }

    fn tree(&self, id: usize) -> XmlNode {
        let n = &self.nodes[id];
        XmlNode {
            name: n.name.clone(),
            attrs: n.attrs.clone(),
            children: n.subs.iter().map(|&s| self.tree(s)).collect(),
            line: 0,
        }
    }
}

/// One rank's detection.
struct RankXml<'a> {
    sys: &'a SysFs,
    host: &'a HostInfo,
    warnings: &'a mut Warnings,
    xml: Arena,
}

impl<'a> RankXml<'a> {
    fn new(sys: &'a SysFs, host: &'a HostInfo, warnings: &'a mut Warnings) -> Self {
        RankXml {
            sys,
            host,
            warnings,
            xml: Arena::new(),
        }
    }

    /// `ncclTopoGetPciNode`: the pci node of that bus id, created detached if new.
    fn pci_node(&mut self, bus_id: &str) -> usize {
        match self.xml.find_tag_kv("pci", "busid", bus_id) {
            Some(id) => id,
            None => {
                let id = self.xml.add(None, "pci");
                self.xml.set(id, "busid", bus_id);
                id
            }
        }
    }

    /// `ncclTopoSetAttrFromSys`: set when the file reads non-empty.
    fn attr_from_sys(&mut self, id: usize, dir: &str, file: &str, attr: &str) -> bool {
        match self.sys.read_attr(dir, file) {
            Some(v) if !v.is_empty() => {
                self.xml.set(id, attr, v);
                true
            }
            _ => false,
        }
    }

    /// `ncclTopoFillGpu`.
    fn fill_gpu(&mut self, gpu: &GpuFacts) -> usize {
        let bus_id = gpu.nccl_bus_id();
        let pci = self.pci_node(&bus_id);
        self.xml.init(pci, "class", "0x03");
        self.fill_from_sys(pci, Some(gpu));
        self.fill_gpu_node(pci, gpu)
    }

    /// `ncclTopoGetXmlFromSys`: fill a pci node from sysfs, hang it under its
    /// parent (upstream switch or CPU), and go on up.
    fn fill_from_sys(&mut self, id: usize, gpu: Option<&GpuFacts>) {
        let bus_id = self.xml.attr(id, "busid").unwrap_or("").to_string();
        let path = self.sys.pci_path(&bus_id);
        if let Some(p) = &path {
            if !self.attr_from_sys(id, p, "class", "class") {
                self.warnings.add(Oddity::MissingFile, format!("{p}/class"));
            }
            for key in ["vendor", "device", "subsystem_vendor", "subsystem_device"] {
                if !self.xml.has(id, key) {
                    self.attr_from_sys(id, p, key, key);
                }
            }
        }
        if !self.xml.has(id, "link_speed") {
            let value = match &path {
                Some(p) => self.link_speed(p),
                None => self.link_from_nvml_speed(gpu),
            };
            self.xml.set(id, "link_speed", value);
        }
        if !self.xml.has(id, "link_width") {
            let value = match &path {
                Some(p) => self.link_width(p),
                None => self.link_from_nvml_width(gpu),
            };
            self.xml.set(id, "link_width", value);
        }
        if self.xml.attr(id, "vendor") == Some("0x1000") {
            self.broadcom_links(id, &bus_id);
        }

        let parent = match self.xml.nodes[id].parent {
            Some(parent) => parent,
            None => {
                let parent = match &path {
                    Some(p) => {
                        let parent = self.sys_parent(p);
                        if self.is_within(parent, id) {
                            // Only a malformed tree names a device's own bus id above it.
                            let numa = self.sys.read_attr(p, "numa_node").unwrap_or_default();
                            self.cpu_for_numa(&numa)
                        } else {
                            parent
                        }
                    }
                    None => {
                        if gpu.is_some() {
                            self.warnings.add(Oddity::GpuNotInSysfs, bus_id.clone());
                        }
                        self.unknown_cpu()
                    }
                };
                self.attach_sorted(parent, id);
                parent
            }
        };
        match self.xml.nodes[parent].name.as_str() {
            "pci" => self.fill_from_sys(parent, None),
            "cpu" => self.fill_cpu(parent),
            _ => {}
        }
    }

    /// The slower of the device's and its upstream port's `max_link_speed`.
    fn link_speed(&mut self, path: &str) -> String {
        let device = self.read_link_file(path, "max_link_speed");
        let port = self.read_link_file(path, "../max_link_speed");
        let device_speed = leading_float(&device).unwrap_or(f32::MAX);
        let port_speed = leading_float(&port).unwrap_or(f32::MAX);
        if port_speed < device_speed {
            port
        } else {
            device
        }
    }

    /// The narrower of the device's and its upstream port's `max_link_width`;
    /// a missing file counts as 0, as NCCL's strtol("") does.
    fn link_width(&mut self, path: &str) -> String {
        let device = strtol(&self.read_link_file(path, "max_link_width"));
        let port = strtol(&self.read_link_file(path, "../max_link_width"));
        device.min(port).to_string()
    }

    fn read_link_file(&mut self, path: &str, file: &str) -> String {
        match self.sys.read_attr(path, file) {
            Some(v) => v,
            None => {
                let parent_is_root = file.starts_with("../")
                    && !path.rsplit('/').nth(1).map(is_bdf).unwrap_or(false);
                if parent_is_root {
                    let dev = path.rsplit('/').next().unwrap_or(path).to_string();
                    self.warnings.add(Oddity::RootBusDevice, dev);
                } else {
                    self.warnings
                        .add(Oddity::MissingFile, format!("{path}/{file}"));
                }
                String::new()
            }
        }
    }

    /// No sysfs entry: NCCL 2.28 writes empty strings here; NCCL 2.30 asks
    /// NVML for the current link, which is the better graph, so do that.
    fn link_from_nvml_speed(&self, gpu: Option<&GpuFacts>) -> String {
        match gpu.and_then(|g| g.pcie_gen) {
            Some(gen) => pcie_gen_speed(gen).to_string(),
            None => String::new(),
        }
    }

    fn link_from_nvml_width(&self, gpu: Option<&GpuFacts>) -> String {
        match gpu.and_then(|g| g.pcie_width) {
            Some(w) if w > 0 => w.to_string(),
            _ => String::new(),
        }
    }

    /// Broadcom PEX switches with P2P links between them (`getBcmLinks`).
    fn broadcom_links(&mut self, id: usize, bus_id: &str) {
        let dir = format!(
            "/sys/kernel/pci_switch_link/virtual_switch_links/{}",
            bus_id.to_lowercase()
        );
        for peer in self.sys.list_dir(&dir) {
            if peer.len() != 12 || self.sys.pci_path(&peer).is_none() {
                continue;
            }
            if self.xml.sub_kv(id, "pcilink", "target", &peer).is_none() {
                let link = self.xml.add(Some(id), "pcilink");
                self.xml.set(link, "target", peer);
            }
        }
    }

    /// Walk up the sysfs path: skip the bridge right above (the switch's
    /// downstream port), take the next BDF (the switch's upstream port) as the
    /// parent, or the CPU when a non-BDF directory (`pci0000:00`, the root
    /// complex) comes first.
    fn sys_parent(&mut self, path: &str) -> usize {
        let numa = self.sys.read_attr(path, "numa_node").unwrap_or_default();
        let parts: Vec<&str> = path.split('/').collect();
        // parts[last] is the device itself; look at its ancestors, nearest first.
        let mut slash_count = 0;
        for depth in (0..parts.len().saturating_sub(1)).rev() {
            slash_count += 1;
            let name = parts[depth];
            if !is_bdf(name) {
                return self.cpu_for_numa(&numa);
            }
            if slash_count == 2 {
                let parent_bus = name.to_string();
                return match self.xml.find_tag_kv("pci", "busid", &parent_bus) {
                    Some(p) => p,
                    None => {
                        let p = self.xml.add(None, "pci");
                        self.xml.set(p, "busid", parent_bus);
                        p
                    }
                };
            }
        }
        self.cpu_for_numa(&numa)
    }

    /// Whether `node` is `ancestor` or hangs (directly or not) under it.
    fn is_within(&self, node: usize, ancestor: usize) -> bool {
        let mut at = Some(node);
        while let Some(n) = at {
            if n == ancestor {
                return true;
            }
            at = self.xml.nodes[n].parent;
        }
        false
    }

    /// The `<cpu>` of that NUMA node under `<system>`, created if new.
    fn cpu_for_numa(&mut self, numa: &str) -> usize {
        let system = self.xml.find_tag("system").unwrap_or(0);
        match self.xml.sub_kv(system, "cpu", "numaid", numa) {
            Some(c) => c,
            None => {
                let c = self.xml.add(Some(system), "cpu");
                self.xml.set(c, "host_hash", self.host.host_hash.clone());
                self.xml.set(c, "numaid", numa);
                c
            }
        }
    }

    /// A device with no sysfs entry hangs under CPU numaid=-1.
    fn unknown_cpu(&mut self) -> usize {
        if let Some(c) = self.xml.find_tag_kv("cpu", "numaid", "-1") {
            return c;
        }
        let system = self.xml.find_tag("system").unwrap_or(0);
        let c = self.xml.add(Some(system), "cpu");
        self.xml.set(c, "host_hash", self.host.host_hash.clone());
        self.xml.set(c, "numaid", "-1");
        self.fill_cpu(c);
        c
    }

    /// Hang `child` under `parent`, children kept ordered by bus id (NCCL
    /// issue #820); children without a bus id are passed over.
    fn attach_sorted(&mut self, parent: usize, child: usize) {
        let new_bus = self.xml.attr(child, "busid").unwrap_or("").to_string();
        let subs = &self.xml.nodes[parent].subs;
        let at = subs
            .iter()
            .position(|&s| matches!(self.xml.attr(s, "busid"), Some(b) if new_bus.as_str() < b))
            .unwrap_or(subs.len());
        self.xml.nodes[parent].subs.insert(at, child);
        self.xml.nodes[child].parent = Some(parent);
    }

    /// `ncclTopoGetXmlFromCpu`.
    fn fill_cpu(&mut self, cpu: usize) {
        if !self.xml.has(cpu, "affinity") {
            let numa = self.xml.attr(cpu, "numaid").unwrap_or("").to_string();
            let dir = format!("/sys/devices/system/node/node{numa}");
            if !self.attr_from_sys(cpu, &dir, "cpumap", "affinity") {
                if numa == "-1" {
                    self.warnings.add(Oddity::NumaUnknown, "cpu numaid=-1");
                } else {
                    self.warnings
                        .add(Oddity::MissingFile, format!("{dir}/cpumap"));
                }
            }
        }
        if !self.xml.has(cpu, "arch") {
            self.xml.set(cpu, "arch", self.host.arch.clone());
        }
        if self.host.arch == "x86_64" {
            match &self.host.cpu {
                Some(id) => {
                    let (vendor, family, model) = (
                        id.vendor.clone(),
                        id.family.to_string(),
                        id.model.to_string(),
                    );
                    if !self.xml.has(cpu, "vendor") {
                        self.xml.set(cpu, "vendor", vendor);
                    }
                    if !self.xml.has(cpu, "familyid") {
                        self.xml.set(cpu, "familyid", family);
                        self.xml.set(cpu, "modelid", model);
                    }
                }
                None => self.warnings.add(Oddity::MissingFile, "/proc/cpuinfo"),
            }
        }
    }

    /// `ncclTopoGetXmlFromGpu`.
    fn fill_gpu_node(&mut self, pci: usize, gpu: &GpuFacts) -> usize {
        let node = match self.xml.sub(pci, "gpu") {
            Some(g) => g,
            None => self.xml.add(Some(pci), "gpu"),
        };
        self.xml.init(node, "dev", gpu.index.to_string());
        self.xml.init(node, "sm", gpu.sm().to_string());
        // planner's own attributes for the NVLink fabric identity (NCCL keeps it out of the XML; topo::mnnvl reads
        // them back to decide whether --nodes copies form one NVLink domain).
        if let Some(f) = &gpu.fabric {
            self.xml.init(
                node,
                "fabric_uuid",
                format!("{:x}.{:x}", f.cluster_uuid[0], f.cluster_uuid[1]),
            );
            self.xml
                .init(node, "fabric_clique", format!("0x{:x}", f.clique_id));
            self.xml.init(node, "fabric_state", f.state.to_string());
            self.xml
                .init(node, "fabric_health", format!("0x{:x}", f.health_mask));
        }
        let sm = gpu.sm();

        if self.xml.sub(node, "nvlink").is_none() {
            let max_links = match sm {
                s if s < 60 => 0,
                s if s < 70 => 4,
                s if s < 80 => 6,
                s if s < 90 => 12,
                _ => 18,
            };
            for link in gpu.nvlinks.iter().filter(|l| l.link < max_links) {
                if link.p2p_capable != Some(true) || link.active != Some(true) {
                    continue;
                }
                let Some(remote) = &link.remote_bus_id else {
                    continue;
                };
                let target = nccl_nvlink_target(remote);
                match self.xml.sub_kv(node, "nvlink", "target", &target) {
                    Some(nv) => {
                        let count = self.xml.attr(nv, "count").map(strtol).unwrap_or(0);
                        self.xml.set(nv, "count", (count + 1).to_string());
                    }
                    None => {
                        let nv = self.xml.add(Some(node), "nvlink");
                        self.xml.set(nv, "target", target);
                        self.xml.set(nv, "count", "1");
                    }
                }
            }
        }

        if self.xml.sub(node, "c2c").is_none() && sm >= 90 {
            if let Some(links) = &gpu.c2c {
                let mut bw = 0;
                let mut count = 0;
                for l in links {
                    if let (Some(true), Some(b)) = (l.up, l.max_bw) {
                        bw = b;
                        count += 1;
                    }
                }
                if count > 0 {
                    let c = self.xml.add(Some(node), "c2c");
                    self.xml.set(c, "bw", bw.to_string());
                    self.xml.set(c, "count", count.to_string());
                }
            }
        }

        // Target classes: sysfs class of the far end, or NVSwitch when it is not visible.
        let subs = self.xml.nodes[node].subs.clone();
        for nv in subs {
            if self.xml.nodes[nv].name != "nvlink" || self.xml.has(nv, "tclass") {
                continue;
            }
            let target = self.xml.attr(nv, "target").unwrap_or("").to_string();
            let count = self.xml.attr(nv, "count").unwrap_or("0").to_string();
            let remote_types: Vec<RemoteType> = gpu
                .nvlinks
                .iter()
                .filter(|l| {
                    l.remote_bus_id
                        .as_deref()
                        .map(|r| nccl_nvlink_target(r) == target)
                        .unwrap_or(false)
                })
                .filter_map(|l| l.remote_type)
                .collect();
            let path = self.sys.pci_path(&target);
            match path {
                Some(p) if target != "fffffff:ffff:ff" => {
                    if !self.attr_from_sys(nv, &p, "class", "tclass") {
                        self.warnings.add(Oddity::MissingFile, format!("{p}/class"));
                    }
                }
                _ => {
                    self.xml.set(nv, "tclass", "0x068000");
                    let not_a_switch = remote_types
                        .iter()
                        .any(|t| !matches!(t, RemoteType::Switch | RemoteType::Unknown));
                    if not_a_switch {
                        self.warnings.add(
                            Oddity::NvlinkPeerTypeMismatch,
                            format!("GPU {} -> {target}", gpu.nccl_bus_id()),
                        );
                    } else if target == INVISIBLE_TARGET {
                        self.warnings.add(
                            Oddity::InvisibleNvlinkPeer,
                            format!("GPU {} ({count} links)", gpu.nccl_bus_id()),
                        );
                    }
                }
            }
        }
        node
    }

    /// `ncclTopoFillNet` plus the attributes `ncclTopoPopulateNics` sets.
    fn fill_net(&mut self, dev: usize, net: &NetDevice) {
        if self.xml.find_tag_kv("net", "name", &net.name).is_some() {
            return;
        }
        let mut pci_path = net.pci_path.clone();
        if let Some(p) = &pci_path {
            let subsystem = self.sys.subsystem(p).unwrap_or_default();
            if subsystem != "pci" {
                let what = if subsystem.is_empty() {
                    "no subsystem".to_string()
                } else {
                    subsystem
                };
                self.warnings
                    .add(Oddity::NonPciNic, format!("{} ({what})", net.name));
                pci_path = None;
            }
        } else {
            self.warnings
                .add(Oddity::NonPciNic, format!("{} (virtual)", net.name));
        }
        let parent = match &pci_path {
            Some(p) => {
                let bus_id = p.rsplit('/').next().unwrap_or("").to_string();
                let pci = self.pci_node(&bus_id);
                self.xml.init(pci, "class", "0x02");
                self.fill_from_sys(pci, None);
                pci
            }
            None => match self.xml.find_tag("cpu") {
                Some(c) => c,
                None => self.unknown_cpu(),
            },
        };
        let nic = match self.xml.sub(parent, "nic") {
            Some(n) => n,
            None => self.xml.add(Some(parent), "nic"),
        };
        let n = self.xml.add(Some(nic), "net");
        self.xml.set(n, "name", net.name.clone());
        self.xml.set(n, "dev", dev.to_string());
        self.xml.init(n, "latency", net.latency.to_string());
        self.xml.init(n, "speed", net.speed.to_string());
        self.xml.init(n, "port", net.port.to_string());
        self.xml.init(n, "guid", format!("0x{:x}", net.guid));
        self.xml.init(n, "maxconn", net.maxconn.to_string());
        self.xml.init(n, "gdr", if net.gdr { "1" } else { "0" });
    }
}

/// NCCL 2.30's strings for an NVML PCIe generation.
fn pcie_gen_speed(gen: u32) -> &'static str {
    match gen {
        1 => "2.5 GT/s PCIe",
        2 => "5.0 GT/s PCIe",
        3 => "8.0 GT/s PCIe",
        4 => "16.0 GT/s PCIe",
        5 => "32.0 GT/s PCIe",
        6 => "64.0 GT/s PCIe",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, attrs: &[(&str, &str)], children: Vec<XmlNode>) -> XmlNode {
        let mut n = XmlNode::new(name);
        for (k, v) in attrs {
            n.set_attr(k, *v);
        }
        n.children = children;
        n
    }

    #[test]
    fn fusion_merges_twins_and_appends_the_rest_in_order() {
        // Rank 0: cpu{pci A, nic}, rank 1: cpu{pci B, nic} -> cpu{pci A, nic, pci B},
        // the order of the h200x2 capture.
        let nic = node("nic", &[], vec![node("net", &[("name", "eth0")], vec![])]);
        let cpu = |pci: &str| {
            node(
                "cpu",
                &[("numaid", "-1")],
                vec![node("pci", &[("busid", pci)], vec![]), nic.clone()],
            )
        };
        let mut dst = node("system", &[("version", "1")], vec![cpu("0000:00:06.0")]);
        let src = node("system", &[("version", "1")], vec![cpu("0000:00:07.0")]);
        fuse(&mut dst, &src);
        let names: Vec<String> = dst.children[0]
            .children
            .iter()
            .map(|c| format!("{}{}", c.name, c.attr("busid").unwrap_or("")))
            .collect();
        assert_eq!(names, ["pci0000:00:06.0", "nic", "pci0000:00:07.0"]);
        assert_eq!(dst.children.len(), 1);
        assert_eq!(dst.children[0].children[1].children.len(), 1);
    }

    #[test]
    fn pcie_generations() {
        assert_eq!(pcie_gen_speed(5), "32.0 GT/s PCIe");
        assert_eq!(pcie_gen_speed(9), "");
    }
}
