//! Partial vendor topology files: Azure's azhpc-images `topology/*.xml` and AWS's aws-ofi-nccl `topology/*.xml`
//! hold CPUs, PCIe switches and bare `<pci>` endpoints, with no `<gpu>` or `<nic>`. NCCL (2.28.9) never uses such a
//! file alone: `ncclTopoGetSystem` (topo.cc:1421-1428) loads NCCL_TOPO_FILE first, then fills what it detects into
//! it (topo.cc:1450 `ncclTopoFillGpu`, topo.cc:1341 `ncclTopoFillNet`) and trims the branches nothing detected
//! lands in (topo.cc:1490 `ncclTopoTrimXml`). `merge_with_detected` does that with our probe's XML;
//! `fill_from_model` fills a table's GPU model into the file when there is no GPU to detect (`--gpu MODEL`).

use super::gpu_models::{self, GpuModel};
use crate::error::{Error, Result};
use crate::xml::XmlNode;

/// The far end NCCL writes for an NVLink whose peer it cannot see (an NVSwitch outside a VM), as the fixtures do.
pub(crate) const INVISIBLE_NVSWITCH: &str = "fffffff:ff:ff.0";
/// NCCL's PCI class of an NVSwitch (xml.cc:866 assumes it for an invisible far end).
const NVSWITCH_CLASS: &str = "0x068000";

/// A file is partial when it has no `<gpu>` but bare `<pci>` endpoints: NCCL would find every GPU by detection and
/// fill it into them. (A file with neither is no topology at all, and is reported as such by `build`.)
pub fn is_partial(root: &XmlNode) -> bool {
    let all = root.descendants();
    !all.iter().any(|n| n.name == "gpu") && all.iter().any(|n| is_bare_endpoint(n))
}

/// What a bare `<pci>` endpoint of a vendor file stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Gpu,
    Nic,
    Other,
}

/// From the PCI class (0x03xxxx display/3D controller = GPU when the vendor is NVIDIA or unnamed, 0x02xxxx network
/// controller = NIC: 0x020000 Ethernet/EFA, 0x020700 InfiniBand), else from the vendor id (10de NVIDIA; 15b3
/// Mellanox, 1d0f Amazon EFA) when the file gives no class. Azure's files give only classes, AWS's both.
pub(crate) fn endpoint_kind(pci: &XmlNode) -> Endpoint {
    let vendor = pci.attr("vendor").map(str::to_ascii_lowercase);
    let nvidia_or_unnamed = matches!(vendor.as_deref(), None | Some("0x10de"));
    match pci.attr("class").map(str::to_ascii_lowercase) {
        Some(c) if c.starts_with("0x03") && nvidia_or_unnamed => Endpoint::Gpu,
        Some(c) if c.starts_with("0x02") => Endpoint::Nic,
        Some(_) => Endpoint::Other,
        None => match vendor.as_deref() {
            Some("0x10de") => Endpoint::Gpu,
            Some("0x15b3") | Some("0x1d0f") => Endpoint::Nic,
            _ => Endpoint::Other,
        },
    }
}

fn is_bare_endpoint(node: &XmlNode) -> bool {
    node.name == "pci"
        && !node
            .children
            .iter()
            .any(|c| matches!(c.name.as_str(), "pci" | "gpu" | "nic"))
}

// ------------------------------------------------------------------------------------------------ merge (on a machine)

/// NCCL's merge of a topology file with detection (`ncclTopoGetSystem`, topo.cc:1412-1490, NCCL 2.28.9), over the
/// XML our probe detected (`detected`, the probe's fused `<system>`):
/// - every `<cpu>` of the file gets this host's `host_hash` (topo.cc:1433-1437);
/// - each detected GPU goes into the file's `<pci>` of the same bus id (`ncclTopoGetPciNode`, xml.cc:551), else is
///   hung under the nearest ancestor the file has (a `<pci>` of the same bus id, or the `<cpu>` of the same numaid;
///   xml.cc:625-671), in bus-id order among its siblings (xml.cc:700-718); the file's attributes are kept, only
///   missing ones are filled (xml.cc:583-621), except `class`, which NCCL rereads from sysfs (xml.cc:579-581);
/// - the `<gpu>`: the file's is kept, its missing `dev`/`sm` filled, NVLinks only if it has none (xml.cc:734-775),
///   `rank` set and `gdr` filled (topo.cc:1452-1454);
/// - each detected NET: the file's `<net>` of that name is kept (xml.cc:911-913), else a `<nic><net>` is added
///   under the NIC's `<pci>` (placed as a GPU's, xml.cc:930-946); `dev` is set, other attributes filled
///   (topo.cc:1343-1354);
/// - finally every `<pci>`, `<cpu>`, `<nic>`, `<net>` with no detected GPU or NET below it is removed
///   (`ncclTopoTrimXml`, xml.cc:957-993): the file's bare endpoints and empty switches disappear.
pub fn merge_with_detected(file: &XmlNode, detected: &XmlNode) -> XmlNode {
    let mut out = file.clone();
    if let Some(hash) = detected
        .children_named("cpu")
        .find_map(|c| c.attr("host_hash"))
    {
        for cpu in out.children.iter_mut().filter(|c| c.name == "cpu") {
            cpu.set_attr("host_hash", hash);
        }
    }
    for chain in chains_to(detected, "gpu") {
        let Some((gpu, above)) = chain.split_last() else {
            continue;
        };
        let pci_path = place(&mut out, above);
        let pci = node_at_mut(&mut out, &pci_path);
        merge_gpu(pci, gpu);
    }
    for chain in chains_to(detected, "net") {
        merge_net(&mut out, &chain);
    }
    trim(&mut out);
    out
}

/// The chains from `root`'s children down to every element named `leaf`, in document order.
fn chains_to<'a>(root: &'a XmlNode, leaf: &str) -> Vec<Vec<&'a XmlNode>> {
    fn walk<'a>(
        node: &'a XmlNode,
        leaf: &str,
        stack: &mut Vec<&'a XmlNode>,
        out: &mut Vec<Vec<&'a XmlNode>>,
    ) {
        stack.push(node);
        if node.name == leaf {
            out.push(stack.clone());
        } else {
            for c in &node.children {
                walk(c, leaf, stack, out);
            }
        }
        stack.pop();
    }
    let mut out = Vec::new();
    for c in &root.children {
        walk(c, leaf, &mut Vec::new(), &mut out);
    }
    out
}

/// Path (child indices) of the first element, in document order, that `pred` accepts.
fn find_path(root: &XmlNode, pred: &dyn Fn(&XmlNode) -> bool) -> Option<Vec<usize>> {
    for (i, c) in root.children.iter().enumerate() {
        if pred(c) {
            return Some(vec![i]);
        }
        if let Some(mut rest) = find_path(c, pred) {
            rest.insert(0, i);
            return Some(rest);
        }
    }
    None
}

fn node_at_mut<'a>(root: &'a mut XmlNode, path: &[usize]) -> &'a mut XmlNode {
    let mut node = root;
    for &i in path {
        node = &mut node.children[i];
    }
    node
}

fn node_at<'a>(root: &'a XmlNode, path: &[usize]) -> &'a XmlNode {
    let mut node = root;
    for &i in path {
        node = &node.children[i];
    }
    node
}

fn same_element(a: &XmlNode, b: &XmlNode) -> bool {
    a.name == b.name
        && match a.name.as_str() {
            "pci" => a.attr("busid").is_some() && a.attr("busid") == b.attr("busid"),
            "cpu" => a.attr("numaid") == b.attr("numaid"),
            _ => false,
        }
}

/// Fill what the file leaves out of `node` from the detected twin: missing attributes; a PCI class from sysfs wins.
fn fill_attrs(node: &mut XmlNode, detected: &XmlNode) {
    for (k, v) in &detected.attrs {
        if node.name == "pci" && k == "class" {
            node.set_attr(k, v.as_str());
        } else {
            node.init_attr(k, v.as_str());
        }
    }
}

/// Where the last element of `chain` (a detected `<pci>`, with its ancestors from `<cpu>` down) lives in `out`:
/// the file's element of the same bus id (its attributes and those of its ancestors filled from their detected
/// twins), else new elements hung under the nearest ancestor the file has, else a new `<cpu>`.
fn place(out: &mut XmlNode, chain: &[&XmlNode]) -> Vec<usize> {
    let Some(&target) = chain.last() else {
        return Vec::new();
    };
    if let Some(path) = find_path(out, &|n| same_element(n, target)) {
        for depth in 1..=path.len() {
            let file_node = node_at_mut(out, &path[..depth]);
            if let Some(twin) = chain.iter().find(|d| same_element(file_node, d)) {
                fill_attrs(file_node, twin);
            }
        }
        return path;
    }
    for i in (0..chain.len() - 1).rev() {
        let ancestor = chain[i];
        let found = if ancestor.name == "cpu" {
            out.children
                .iter()
                .position(|c| same_element(c, ancestor))
                .map(|i| vec![i])
        } else {
            find_path(out, &|n| same_element(n, ancestor))
        };
        if let Some(mut path) = found {
            fill_attrs(node_at_mut(out, &path), ancestor);
            for new in &chain[i + 1..] {
                let parent = node_at_mut(out, &path);
                let index = insert_sorted(parent, shallow(new));
                path.push(index);
            }
            return path;
        }
    }
    let mut path = Vec::new();
    for new in chain {
        let parent = node_at_mut(out, &path);
        let index = if path.is_empty() {
            parent.children.push(shallow(new));
            parent.children.len() - 1
        } else {
            insert_sorted(parent, shallow(new))
        };
        path.push(index);
    }
    path
}

/// The element without its children.
fn shallow(node: &XmlNode) -> XmlNode {
    XmlNode {
        name: node.name.clone(),
        attrs: node.attrs.clone(),
        children: Vec::new(),
        line: node.line,
    }
}

/// NCCL keeps PCI children ordered by bus id (xml.cc:700-718): before the first sibling whose bus id sorts after.
fn insert_sorted(parent: &mut XmlNode, child: XmlNode) -> usize {
    let index = match child.attr("busid") {
        Some(new) => parent
            .children
            .iter()
            .position(|s| s.attr("busid").is_some_and(|b| new < b))
            .unwrap_or(parent.children.len()),
        None => parent.children.len(),
    };
    parent.children.insert(index, child);
    index
}

fn merge_gpu(pci: &mut XmlNode, detected: &XmlNode) {
    let index = match pci.children.iter().position(|c| c.name == "gpu") {
        Some(i) => i,
        None => {
            pci.children.push(shallow(detected));
            pci.children.len() - 1
        }
    };
    let gpu = &mut pci.children[index];
    for key in ["dev", "sm"] {
        if let Some(v) = detected.attr(key) {
            gpu.init_attr(key, v);
        }
    }
    if let Some(rank) = detected.attr("rank") {
        gpu.set_attr("rank", rank);
    }
    for (k, v) in &detected.attrs {
        gpu.init_attr(k, v.as_str());
    }
    for sub in ["nvlink", "c2c"] {
        if !gpu.children.iter().any(|c| c.name == sub) {
            gpu.children.extend(detected.children_named(sub).cloned());
        }
    }
    for link in gpu.children.iter_mut().filter(|c| c.name == "nvlink") {
        let twin = detected
            .children_named("nvlink")
            .find(|d| d.attr("target") == link.attr("target"))
            .and_then(|d| d.attr("tclass"));
        link.init_attr("tclass", twin.unwrap_or(NVSWITCH_CLASS));
    }
    gpu.set_attr("keep", "1");
}

fn merge_net(out: &mut XmlNode, chain: &[&XmlNode]) {
    let Some((&net, above)) = chain.split_last() else {
        return;
    };
    let name = net.attr("name").unwrap_or("");
    let existing = find_path(out, &|n| n.name == "net" && n.attr("name") == Some(name));
    let net_path = match existing {
        Some(path) => path,
        None => {
            let Some(pci_depth) = above.iter().rposition(|n| n.name == "pci") else {
                // A virtual NIC (no PCI device): NCCL hangs it under the first CPU (xml.cc:948-949).
                let cpu_path = find_path(out, &|n| n.name == "cpu")
                    .unwrap_or_else(|| place(out, &above[..1.min(above.len())]));
                return add_net(out, cpu_path, net);
            };
            let pci_path = place(out, &above[..=pci_depth]);
            return add_net(out, pci_path, net);
        }
    };
    let file_net = node_at_mut(out, &net_path);
    for (k, v) in &net.attrs {
        if k == "dev" {
            file_net.set_attr(k, v.as_str());
        } else {
            file_net.init_attr(k, v.as_str());
        }
    }
    file_net.set_attr("keep", "1");
}

fn add_net(out: &mut XmlNode, parent_path: Vec<usize>, net: &XmlNode) {
    let parent = node_at_mut(out, &parent_path);
    let nic = match parent.children.iter().position(|c| c.name == "nic") {
        Some(i) => i,
        None => {
            parent.children.push(XmlNode::new("nic"));
            parent.children.len() - 1
        }
    };
    let mut new = net.clone();
    new.set_attr("keep", "1");
    parent.children[nic].children.push(new);
}

/// `ncclTopoTrimXmlRec` (xml.cc:957-987): true when `node` or something below it is kept; `<pci>`, `<cpu>`,
/// `<nic>`, `<net>` with nothing kept are removed; the `keep` marks are removed.
fn trim(node: &mut XmlNode) -> bool {
    if node.attr("keep") == Some("1") {
        node.remove_attr("keep");
        return true;
    }
    let mut any = false;
    for mut child in std::mem::take(&mut node.children) {
        let kept = trim(&mut child);
        any |= kept;
        if kept || !matches!(child.name.as_str(), "pci" | "cpu" | "nic" | "net") {
            node.children.push(child);
        }
    }
    any
}

// ----------------------------------------------------------------------------------- fill from a model (no GPU here)

/// The NIC speed when neither the user nor the NIC's PCI id gives one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NicChoice {
    /// `--nic-speed` in Gb/s, if given.
    pub speed_gbits: Option<f64>,
}

/// A partial file with GPUs and NICs filled in from `model`, as NCCL's detection would write them on that machine,
/// and one warning per assumption made. `source` names the file in errors and warnings.
pub fn fill_from_model(
    file: &XmlNode,
    model: &GpuModel,
    nic: NicChoice,
    source: &str,
) -> Result<(XmlNode, Vec<String>)> {
    let mut out = file.clone();
    let mut gpus: Vec<(String, Vec<usize>)> = Vec::new();
    let mut nics: Vec<(String, Vec<usize>)> = Vec::new();
    let mut others: Vec<String> = Vec::new();
    collect_endpoints(&out, &mut Vec::new(), &mut gpus, &mut nics, &mut others);
    if gpus.is_empty() {
        return Err(Error::bad_input(format!(
            "{source}: no bare <pci> endpoint looks like a GPU (class 0x03xxxx, vendor 0x10de or none), so --gpu {} \
             has nowhere to go",
            model.name
        )));
    }
    // dev/rank in bus-id order; the paths stay valid because only leaves gain children.
    gpus.sort();
    nics.sort();
    for (rank, (_, path)) in gpus.iter().enumerate() {
        let mut gpu = XmlNode::new("gpu")
            .with_attr("dev", rank.to_string())
            .with_attr("sm", model.sm.to_string())
            .with_attr("rank", rank.to_string())
            .with_attr("gdr", if model.gdr { "1" } else { "0" });
        if !model.driver_p2p {
            gpu = gpu.with_attr("nvml_p2p", "0");
        }
        if model.nvlinks > 0 {
            gpu.children.push(
                XmlNode::new("nvlink")
                    .with_attr("target", INVISIBLE_NVSWITCH)
                    .with_attr("count", model.nvlinks.to_string())
                    .with_attr("tclass", NVSWITCH_CLASS),
            );
        }
        node_at_mut(&mut out, path).children.push(gpu);
    }
    let bus_ids = |list: &[(String, Vec<usize>)]| {
        list.iter()
            .map(|(b, _)| b.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut warnings = vec![
        format!(
            "{source}: assumed the {} bare PCI endpoints of class 0x03xxxx ({}) are {} GPUs (--gpu {}), dev and rank \
             in bus-id order",
            gpus.len(),
            bus_ids(&gpus),
            model.description,
            model.name
        ),
        if model.nvlinks > 0 {
            format!(
                "{source}: assumed {} NVLink {} links per GPU, all to the NVSwitch fabric (written as NCCL writes an \
                 NVSwitch it cannot see, target {INVISIBLE_NVSWITCH})",
                model.nvlinks, model.nvlink_gen
            )
        } else {
            format!("{source}: assumed no NVLink between the GPUs ({} has no NVLink without a bridge)", model.name)
        },
    ];
    if !model.driver_p2p {
        warnings.push(format!(
            "{source}: assumed the driver refuses P2P between the GPUs ({} is a GeForce card; written as nvml_p2p=\"0\"): \
             NCCL routes every GPU pair through the CPU and uses SHM",
            model.name
        ));
    }
    let mut nic_notes: Vec<String> = Vec::new();
    for (dev, (_, path)) in nics.iter().enumerate() {
        let pci = node_at(&out, path);
        let known = gpu_models::known_nic(pci.attr("vendor"), pci.attr("device"));
        let (speed_mbps, latency_us, note) = match (nic.speed_gbits, known) {
            (Some(gbits), _) => (
                (gbits * 1000.0).round() as u64,
                0,
                format!("{gbits} Gb/s (--nic-speed), latency 0 µs"),
            ),
            (None, Some(k)) => (
                u64::from(k.speed_gbits) * 1000,
                k.latency_us,
                format!(
                    "{} at {} Gb/s, latency {} µs (its PCI id)",
                    k.description, k.speed_gbits, k.latency_us
                ),
            ),
            (None, None) => (
                u64::from(model.reference_nic_gbits) * 1000,
                0,
                format!(
                    "{} Gb/s ({}; pass --nic-speed GBITS to change), latency 0 µs",
                    model.reference_nic_gbits, model.reference_nic
                ),
            ),
        };
        if !nic_notes.contains(&note) {
            nic_notes.push(note);
        }
        let net = XmlNode::new("net")
            .with_attr("name", format!("net{dev}"))
            .with_attr("dev", dev.to_string())
            .with_attr("latency", latency_us.to_string())
            .with_attr("speed", speed_mbps.to_string())
            .with_attr("port", "1")
            .with_attr("guid", format!("{:#x}", dev + 1))
            .with_attr("maxconn", "131072")
            .with_attr("gdr", "1");
        node_at_mut(&mut out, path)
            .children
            .push(XmlNode::new("nic").with_child(net));
    }
    if !nics.is_empty() {
        warnings.push(format!(
            "{source}: assumed the {} bare PCI endpoints of class 0x02xxxx ({}) are NICs of {}, port 1, one NET each, \
             dev in bus-id order",
            nics.len(),
            bus_ids(&nics),
            nic_notes.join("; ")
        ));
    }
    warnings.push(format!(
        "{source}: assumed GPUDirect RDMA (gdr 1) on every GPU{}",
        if nics.is_empty() { "" } else { " and NIC" }
    ));
    if !others.is_empty() {
        warnings.push(format!(
            "{source}: left out {} PCI endpoints that are neither GPU nor NIC ({}), as NCCL trims them",
            others.len(),
            others.join(" ")
        ));
    }
    trim_others(&mut out);
    Ok((out, warnings))
}

fn collect_endpoints(
    node: &XmlNode,
    path: &mut Vec<usize>,
    gpus: &mut Vec<(String, Vec<usize>)>,
    nics: &mut Vec<(String, Vec<usize>)>,
    others: &mut Vec<String>,
) {
    for (i, child) in node.children.iter().enumerate() {
        path.push(i);
        if is_bare_endpoint(child) {
            let bus_id = child.attr("busid").unwrap_or("?").to_string();
            match endpoint_kind(child) {
                Endpoint::Gpu => gpus.push((bus_id, path.clone())),
                Endpoint::Nic => nics.push((bus_id, path.clone())),
                Endpoint::Other => others.push(bus_id),
            }
        } else {
            collect_endpoints(child, path, gpus, nics, others);
        }
        path.pop();
    }
}

/// Remove what NCCL's trim would: bare endpoints and the switches and CPUs left empty.
fn trim_others(root: &mut XmlNode) {
    fn mark(node: &mut XmlNode) {
        for c in &mut node.children {
            if matches!(c.name.as_str(), "gpu" | "net") {
                c.set_attr("keep", "1");
            } else {
                mark(c);
            }
        }
    }
    mark(root);
    trim(root);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xml;

    fn parse(text: &str) -> XmlNode {
        xml::parse(text, "test").unwrap()
    }

    const PARTIAL: &str = r#"<system version="1">
  <cpu numaid="0" affinity="0000ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="ffff:ff:01.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0001:00:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0101:00:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0002:00:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
    </pci>
    <pci busid="ffff:ff:02.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0003:00:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
    </pci>
  </cpu>
</system>"#;

    /// What our probe would write on that machine: GPU 0001 with its real (narrower) PCIe link and class, in a
    /// root port the file does not name; GPU 0009 that the file does not have; NIC mlx5_0 at 0101.
    const DETECTED: &str = r#"<system version="1">
  <cpu host_hash="0xabc" numaid="0" affinity="ffffffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:00:01.0" class="0x060400" link_speed="16.0 GT/s PCIe" link_width="16">
      <pci busid="0001:00:00.0" class="0x030200" vendor="0x10de" device="0x2330" link_speed="16.0 GT/s PCIe" link_width="8">
        <gpu dev="0" sm="90" rank="0" gdr="1">
          <nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>
        </gpu>
      </pci>
      <pci busid="0009:00:00.0" class="0x030200" vendor="0x10de" device="0x2330" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="1" sm="90" rank="1" gdr="0"/>
      </pci>
      <pci busid="0101:00:00.0" class="0x020700" vendor="0x15b3" link_speed="32.0 GT/s PCIe" link_width="16">
        <nic>
          <net name="mlx5_0" dev="0" latency="0" speed="400000" port="1" guid="0x1" maxconn="131072" gdr="1"/>
        </nic>
      </pci>
    </pci>
  </cpu>
</system>"#;

    #[test]
    fn merge_keeps_the_files_attributes_and_fills_the_detected_gpu() {
        let merged = merge_with_detected(&parse(PARTIAL), &parse(DETECTED));
        let cpu = &merged.children[0];
        // host_hash from the probe; the file's affinity kept over the detected one.
        assert_eq!(cpu.attr("host_hash"), Some("0xabc"));
        assert_eq!(cpu.attr("affinity"), Some("0000ffff"));
        // Switch 1 keeps GPU 0001 and NIC 0101; the bare 0002 is trimmed; switch 2 (only the bare 0003) is gone;
        // GPU 0009, which the file lacks, hangs under the file's CPU (the detected root port 0000:00:01.0 is new).
        let kids: Vec<&str> = cpu
            .children
            .iter()
            .map(|c| c.attr("busid").unwrap())
            .collect();
        assert_eq!(kids, ["0000:00:01.0", "ffff:ff:01.0"]);
        let switch = &cpu.children[1];
        let ids: Vec<&str> = switch
            .children
            .iter()
            .map(|c| c.attr("busid").unwrap())
            .collect();
        assert_eq!(ids, ["0001:00:00.0", "0101:00:00.0"]);
        let gpu_pci = &switch.children[0];
        // File values win (link width 16, not the detected 8); missing ones are filled (vendor, device).
        assert_eq!(gpu_pci.attr("link_width"), Some("16"));
        assert_eq!(gpu_pci.attr("vendor"), Some("0x10de"));
        assert_eq!(gpu_pci.attr("device"), Some("0x2330"));
        let gpu = &gpu_pci.children[0];
        assert_eq!(gpu.name, "gpu");
        assert_eq!(gpu.attr("sm"), Some("90"));
        assert_eq!(gpu.attr("rank"), Some("0"));
        assert_eq!(gpu.attr("keep"), None, "keep marks are removed");
        assert_eq!(gpu.children[0].attr("count"), Some("18"));
        let net = &switch.children[1].children[0].children[0];
        assert_eq!(net.attr("name"), Some("mlx5_0"));
        assert_eq!(net.attr("speed"), Some("400000"));
        let new_gpu = &cpu.children[0].children[0];
        assert_eq!(new_gpu.attr("busid"), Some("0009:00:00.0"));
        assert_eq!(new_gpu.children[0].attr("rank"), Some("1"));
    }

    #[test]
    fn merge_keeps_a_gpu_the_file_describes() {
        let file = PARTIAL.replace(
            r#"<pci busid="0001:00:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>"#,
            r#"<pci busid="0001:00:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"><gpu sm="80"><nvlink target="0000:05:00.0" count="2"/></gpu></pci>"#,
        );
        let merged = merge_with_detected(&parse(&file), &parse(DETECTED));
        let gpu = &merged.children[0].children[1].children[0].children[0];
        assert_eq!(gpu.attr("sm"), Some("80"), "the file's sm is kept");
        assert_eq!(gpu.attr("dev"), Some("0"), "the missing dev is filled");
        assert_eq!(
            gpu.children.len(),
            1,
            "the file's NVLinks replace detection"
        );
        assert_eq!(gpu.children[0].attr("target"), Some("0000:05:00.0"));
        assert_eq!(gpu.children[0].attr("tclass"), Some(NVSWITCH_CLASS));
    }

    #[test]
    fn endpoints_by_class_then_vendor() {
        let pci = |attrs: &[(&str, &str)]| {
            attrs
                .iter()
                .fold(XmlNode::new("pci"), |n, (k, v)| n.with_attr(k, *v))
        };
        assert_eq!(endpoint_kind(&pci(&[("class", "0x030200")])), Endpoint::Gpu);
        assert_eq!(endpoint_kind(&pci(&[("class", "0x020700")])), Endpoint::Nic);
        assert_eq!(
            endpoint_kind(&pci(&[("class", "0x020000"), ("vendor", "0x1d0f")])),
            Endpoint::Nic
        );
        // A BMC's VGA (ASPEED) is no GPU; an NVSwitch (class 0x0680) is neither.
        assert_eq!(
            endpoint_kind(&pci(&[("class", "0x030000"), ("vendor", "0x1a03")])),
            Endpoint::Other
        );
        assert_eq!(
            endpoint_kind(&pci(&[("class", "0x068000"), ("vendor", "0x10de")])),
            Endpoint::Other
        );
        assert_eq!(endpoint_kind(&pci(&[("vendor", "0x15b3")])), Endpoint::Nic);
    }

    #[test]
    fn fill_writes_gpus_and_nics_and_says_so() {
        let model = gpu_models::find("h100-sxm").unwrap();
        let (out, warnings) = fill_from_model(
            &parse(PARTIAL),
            model,
            NicChoice { speed_gbits: None },
            "f.xml",
        )
        .unwrap();
        let gpus: Vec<&XmlNode> = out
            .descendants()
            .into_iter()
            .filter(|n| n.name == "gpu")
            .collect();
        assert_eq!(gpus.len(), 3);
        assert_eq!(
            gpus[2].attr("rank"),
            Some("2"),
            "0003 is the third by bus id"
        );
        assert_eq!(gpus[0].children[0].attr("count"), Some("18"));
        let net = out
            .descendants()
            .into_iter()
            .find(|n| n.name == "net")
            .unwrap();
        assert_eq!(net.attr("speed"), Some("400000"));
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        assert!(warnings[3].contains("GPUDirect"));
        assert!(warnings.iter().all(|w| w.starts_with("f.xml: assumed")));
    }
}
