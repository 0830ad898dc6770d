//! Multi-node NVLink (MNNVL): GPUs of several OS nodes (GB200/GB300 NVL72 trays) in one NVLink domain.
//!
//! What NCCL does (checked against v2.28.9-1 and v2.30.7-1):
//! * Every rank reads its GPU's fabric identity from NVML (`nvmlDeviceGetGpuFabricInfoV`: cluster UUID, clique id,
//!   state, health mask) and logs it (`init.cc:640-674` in 2.28.9, `MNNVL busId ... fabric UUID %lx.%lx cliqueId 0x%x
//!   state %d healthMask 0x%x`). NCCL never writes it into the topology XML: it travels in the bootstrap all-gather.
//!   planner keeps it in the XML as its own `<gpu>` attributes (`fabric_uuid`, `fabric_clique`, `fabric_state`,
//!   `fabric_health`), which NCCL ignores when it loads such a file.
//! * `ncclMnnvlCheck` runs when the job spans several OS nodes and `NCCL_MNNVL_ENABLE` is not 0 and P2P is not
//!   disabled, or when `NCCL_MNNVL_ENABLE=1` (`init.cc:914` 2.28.9, `:1072` 2.30.7). It gives up unless cuMem and
//!   FABRIC handles are supported and every rank's fabric state is COMPLETED (`mnnvl.cc:15-29`); a zero cluster UUID
//!   disables it (`mnnvl.cc:43`); the clique is every rank with the same cluster UUID and clique id
//!   (`mnnvl.cc:44-50`); a clique of one rank leaves MNNVL off (`mnnvl.cc:54`; 2.30 also counts the NVLink domain,
//!   `mnnvl.cc:60`); then it checks that IMEX can export/import a FABRIC handle (an error, not a fallback, when that
//!   fails: `mnnvl.cc:56-82`) and sets `comm->MNNVL = 1` (`mnnvl.cc:86`, log `MNNVL 1 cliqueId %x cliqueSize %d
//!   cliqueRank %d`).
//! * With MNNVL the topology XMLs of the whole clique are fused, not only those of one host (`topo.cc:1493-1529`):
//!   every tray keeps its own CPUs, PCI tree and NICs (its `host_hash` gives it its own system id) and all GPUs join the
//!   one collapsed NVSwitch node (`topo.cc:594-597`). GPUs of other trays are then NVLink peers (2 hops through the
//!   NVS); CPUs and NICs of other trays are unreachable (DIS).
//! * `system->inter` is 0 when the fused system holds every rank (`paths.cc:802`), so the search is intra-node, and
//!   the node count NCCL derives from the rings (`init.cc:1099-1110`) is 1 for a single clique: the log says
//!   `nNodes 1 localRanks <clique size> ... MNNVL 1`. Several cliques (racks) are joined through the NICs.
//! * P2P between ranks of different hosts is allowed only inside the clique (`paths.cc:286-289`, `:391-409`).
//!
//! `--nodes N` on a topology whose GPUs carry a completed fabric identity does what NCCL would: trays fill cliques of
//! at most `NCCL_MAX_LOCAL_RANKS` (72) GPUs, the NVL72 rack; each clique becomes one fused node of the cluster.

use super::{build, paths::PathOptions, Cluster, NodeKind, PathType, Topology};
use crate::error::{Error, Result};
use crate::xml::{parse_int, parse_u64, XmlNode};
use serde::Serialize;

/// `NVML_GPU_FABRIC_STATE_COMPLETED` (nvml.h); the only state in which NCCL enables MNNVL (`mnnvl.cc:28`).
pub(crate) const FABRIC_STATE_COMPLETED: u32 = 3;
/// `NVML_GPU_FABRIC_STATE_NOT_SUPPORTED`: what NCCL assumes when NVML has no fabric info (`init.cc:647`).
pub(crate) const FABRIC_STATE_NOT_SUPPORTED: u32 = 0;
/// `NCCL_MAX_LOCAL_RANKS` (`device.h:87` in 2.28.9, `:92` in 2.30.7): the most ranks one node (or clique) may hold;
/// it is the GB200/GB300 NVL72 rack.
pub(crate) const MAX_CLIQUE_GPUS: usize = 72;

/// A GPU's NVLink fabric identity as NVML reports it (`nvmlGpuFabricInfo_v2_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FabricInfo {
    /// `clusterUuid` as the two 64-bit halves NCCL prints (`%lx.%lx`, `init.cc:669`).
    pub(crate) cluster_uuid: [u64; 2],
    pub clique_id: u32,
    /// `NVML_GPU_FABRIC_STATE_*`: 0 not supported, 1 not started, 2 in progress, 3 completed.
    pub(crate) state: u32,
    pub(crate) health_mask: u32,
}

impl FabricInfo {
    /// The UUID as NCCL logs it.
    pub(crate) fn uuid_text(&self) -> String {
        format!("{:x}.{:x}", self.cluster_uuid[0], self.cluster_uuid[1])
    }

    /// The planner attributes of a `<gpu>` element; `None` when it has none (a GPU without fabric).
    pub(crate) fn from_gpu_xml(gpu: &XmlNode, source: &str) -> Result<Option<FabricInfo>> {
        let Some(uuid) = gpu.attr("fabric_uuid") else {
            return Ok(None);
        };
        let bad = |what: &str| Error::bad_input(format!("{source}:{}: <gpu {what}>", gpu.line));
        let cluster_uuid = parse_uuid(uuid).ok_or_else(|| {
            bad(&format!(
                "fabric_uuid=\"{uuid}\">: expected two hexadecimal halves as NCCL logs them, e.g. 3143b15bc2cd192b.28cc9b5473fb5b93"
            ))
        })?;
        let number = |key: &str, default: u32| -> Result<u32> {
            match gpu.attr(key) {
                None => Ok(default),
                Some(text) => parse_u64(text)
                    .or_else(|| parse_int(text).and_then(|v| u64::try_from(v).ok()))
                    .and_then(|v| u32::try_from(v).ok())
                    .ok_or_else(|| bad(&format!("{key}=\"{text}\">: not a 32-bit number"))),
            }
        };
        Ok(Some(FabricInfo {
            cluster_uuid,
            clique_id: number("fabric_clique", 0)?,
            state: number("fabric_state", FABRIC_STATE_COMPLETED)?,
            health_mask: number("fabric_health", 0)?,
        }))
    }
}

/// `3143b15bc2cd192b.28cc9b5473fb5b93` (hex digits only, as NCCL prints `%lx.%lx`).
fn parse_uuid(text: &str) -> Option<[u64; 2]> {
    let (a, b) = text.trim().split_once('.')?;
    let half = |s: &str| {
        (!s.is_empty() && s.len() <= 16 && s.bytes().all(|c| c.is_ascii_hexdigit()))
            .then(|| u64::from_str_radix(s, 16).ok())
            .flatten()
    };
    Some([half(a)?, half(b)?])
}

/// `NCCL_MNNVL_ENABLE`: 0 off, 1 force, 2 (default) when the job spans OS nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum MnnvlEnable {
    Off,
    On,
    #[default]
    Auto,
}

impl MnnvlEnable {
    /// `NCCL_MNNVL_ENABLE` as NCCL reads it (an integer: 0 off, 1 force, anything else auto).
    pub(crate) fn from_value(value: Option<i64>) -> MnnvlEnable {
        match value {
            Some(0) => MnnvlEnable::Off,
            Some(1) => MnnvlEnable::On,
            _ => MnnvlEnable::Auto,
        }
    }
}

/// An MNNVL domain as NCCL builds it: `trays` OS nodes per clique, `cliques` cliques joined through NICs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Domain {
    pub trays: usize,
    pub gpus_per_tray: usize,
    pub cliques: usize,
    pub fabric: FabricInfo,
}

impl Domain {
    pub fn clique_size(&self) -> usize {
        self.trays * self.gpus_per_tray
    }
}

/// Why NCCL would not form an MNNVL domain, or the domain it would form.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Decision {
    /// MNNVL off; the reason in words (NCCL's rule that stopped it).
    Off(String),
    Domain(Domain),
}

/// The fabric identity of every GPU of one tray's XML, in document order; `None` for a GPU without one.
pub(crate) fn tray_fabric(root: &XmlNode, source: &str) -> Result<Vec<Option<FabricInfo>>> {
    root.descendants()
        .into_iter()
        .filter(|n| n.name == "gpu")
        .map(|g| FabricInfo::from_gpu_xml(g, source))
        .collect()
}

/// Whether any GPU of the topology carries a fabric identity (a GB200/GB300-class tray).
pub fn has_fabric(tray: &Topology) -> bool {
    tray_fabric(&tray.xml, &tray.source)
        .map(|f| f.iter().any(Option::is_some))
        .unwrap_or(false)
}

/// NCCL's decision for `nodes` copies of `tray` (`init.cc:914`, `mnnvl.cc:13-91`). FABRIC handle support, cuMem
/// and IMEX are assumed to work (NCCL errors out rather than falling back when IMEX fails).
pub fn decide(
    tray: &Topology,
    nodes: usize,
    enable: MnnvlEnable,
    p2p_level: Option<PathType>,
) -> Result<Decision> {
    let fabric = tray_fabric(&tray.xml, &tray.source)?;
    if fabric.iter().all(Option::is_none) {
        return Ok(Decision::Off(
            "no GPU reports an NVLink fabric (NVML fabric state not supported)".into(),
        ));
    }
    match enable {
        MnnvlEnable::Off => return Ok(Decision::Off("NCCL_MNNVL_ENABLE=0".into())),
        MnnvlEnable::Auto if nodes <= 1 => {
            return Ok(Decision::Off(
                "one OS node (NCCL checks MNNVL only across nodes unless NCCL_MNNVL_ENABLE=1)"
                    .into(),
            ))
        }
        // ncclGetUserP2pLevel: NCCL_P2P_DISABLE=1 / NCCL_P2P_LEVEL=LOC make p2pLevel 0.
        MnnvlEnable::Auto if p2p_level == Some(PathType::Loc) => {
            return Ok(Decision::Off(
                "P2P disabled (NCCL_P2P_DISABLE=1 or NCCL_P2P_LEVEL=LOC)".into(),
            ))
        }
        _ => {}
    }
    let Some(first) = fabric.iter().flatten().next().copied() else {
        return Ok(Decision::Off("no fabric identity".into()));
    };
    if let Some(bad) = fabric
        .iter()
        .find(|f| f.map(|f| f.state) != Some(FABRIC_STATE_COMPLETED))
    {
        return Ok(Decision::Off(format!(
            "a GPU's fabric state is {} (NCCL needs every rank COMPLETED = 3)",
            bad.map(|f| f.state).unwrap_or(FABRIC_STATE_NOT_SUPPORTED)
        )));
    }
    if fabric.iter().flatten().any(|f| f.cluster_uuid == [0, 0]) {
        return Ok(Decision::Off(
            "a GPU reports a zero fabric cluster UUID".into(),
        ));
    }
    let gpus_per_tray = tray.gpu_count();
    // Copies of one tray share its identity; a tray whose GPUs disagree forms cliques NCCL would split per GPU
    // group, which planner does not model.
    if fabric
        .iter()
        .flatten()
        .any(|f| f.cluster_uuid != first.cluster_uuid || f.clique_id != first.clique_id)
    {
        return Err(Error::bad_input(format!(
            "{}: the GPUs of one node report different fabric cluster UUIDs or clique ids; planner models one clique per topology",
            tray.source
        )));
    }
    let max_trays = (MAX_CLIQUE_GPUS / gpus_per_tray.max(1)).max(1);
    let trays = nodes.clamp(1, max_trays);
    if !nodes.is_multiple_of(trays) {
        return Err(Error::bad_input(format!(
            "--nodes {nodes}: an NVLink domain holds at most {MAX_CLIQUE_GPUS} GPUs ({max_trays} nodes of {gpus_per_tray}); \
             give a multiple of {max_trays} to model several racks, or --mnnvl off"
        )));
    }
    if trays * gpus_per_tray <= 1 {
        return Ok(Decision::Off("a clique of one rank (mnnvl.cc:54)".into()));
    }
    Ok(Decision::Domain(Domain {
        trays,
        gpus_per_tray,
        cliques: nodes / trays,
        fabric: first,
    }))
}

/// The XML NCCL's fusion builds for one clique (`topo.cc:1493-1529`, `xml.cc:305-320`): the tray's `<cpu>` subtrees
/// once per tray in clique-rank order, each tray with its own `host_hash`, GPU ranks numbered tray by tray.
pub(crate) fn fused_xml(tray: &XmlNode, trays: usize) -> XmlNode {
    let gpus_per_tray = tray
        .descendants()
        .iter()
        .filter(|n| n.name == "gpu")
        .count() as i64;
    let base_hash = tray
        .children
        .iter()
        .find_map(|c| c.attr("host_hash").and_then(parse_u64))
        .unwrap_or(0x6d6e_6e76_6c00_0000);
    let mut root = XmlNode::new("system");
    root.attrs = tray.attrs.clone();
    for t in 0..trays {
        for cpu in &tray.children {
            let mut cpu = cpu.clone();
            cpu.set_attr(
                "host_hash",
                format!("{:#x}", base_hash.wrapping_add(t as u64)),
            );
            let mut stack: Vec<&mut XmlNode> = vec![&mut cpu];
            while let Some(node) = stack.pop() {
                if node.name == "gpu" {
                    let local = node.attr("rank").and_then(parse_int).unwrap_or(0);
                    node.set_attr("rank", (t as i64 * gpus_per_tray + local).to_string());
                }
                stack.extend(node.children.iter_mut());
            }
            root.children.push(cpu);
        }
    }
    root
}

/// The cluster NCCL would see for `nodes` copies of `tray`: one fused node per clique when MNNVL forms, else `None`
/// (the caller replicates the tray through its NICs as for any other machine).
pub(crate) fn cluster(
    tray: &Topology,
    nodes: usize,
    net_latency_us: f64,
    enable: MnnvlEnable,
    options: &PathOptions,
) -> Result<Option<(Cluster, Domain)>> {
    let Decision::Domain(domain) = decide(tray, nodes, enable, options.p2p_level)? else {
        return Ok(None);
    };
    if domain.cliques > 1 && tray.nodes(NodeKind::Net).is_empty() {
        return Err(Error::bad_input(format!(
            "--nodes {nodes}: {} NVLink domains must be joined through NICs, and the topology ({}) has none",
            domain.cliques, tray.source
        )));
    }
    let xml = fused_xml(&tray.xml, domain.trays);
    let source = if domain.trays > 1 {
        format!("{} x{} (MNNVL)", tray.source, domain.trays)
    } else {
        tray.source.clone()
    };
    let node = build::from_xml_with(&xml, &source, options)?;
    Ok(Some((
        Cluster {
            node,
            n_nodes: domain.cliques,
            net_latency_us,
        },
        domain,
    )))
}

/// OS nodes (NCCL's `system->nHosts`, distinct host hashes) in one topology: more than one only for an MNNVL fusion.
pub fn host_count(topo: &Topology) -> usize {
    let mut ids: Vec<u64> = topo
        .nodes(NodeKind::Cpu)
        .iter()
        .map(|&c| topo.node(c).id >> 56)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.len().max(1)
}

/// NCCL's MNNVL log lines for `rank` of an MNNVL cluster (`init.cc:669`, `mnnvl.cc:87`, `init.cc:1170`); empty when
/// the cluster is not one. The `comm %p` pointer of the last line is not known and printed as `comm -`.
pub fn log_lines(cluster: &Cluster, rank: i32) -> Vec<String> {
    let topo = &cluster.node;
    let hosts = host_count(topo);
    if hosts < 2 {
        return Vec::new();
    }
    let gpus = topo.gpu_count();
    let local = rank.rem_euclid(gpus.max(1) as i32);
    let mut out = Vec::new();
    let busid = topo
        .gpus()
        .find(|(_, g)| g.rank == local)
        .map(|(_, g)| g.busid.clone());
    let fabric = topo
        .xml
        .descendants()
        .into_iter()
        .find(|n| n.name == "gpu" && n.attr("rank").and_then(parse_int) == Some(i64::from(local)))
        .and_then(|g| FabricInfo::from_gpu_xml(g, &topo.source).ok().flatten());
    if let (Some(busid), Some(f)) = (busid, fabric) {
        out.push(format!(
            "MNNVL busId 0x{:x} fabric UUID {} cliqueId 0x{:x} state {} healthMask 0x{:x}",
            build::bus_id_to_u64(&busid),
            f.uuid_text(),
            f.clique_id,
            f.state,
            f.health_mask
        ));
        out.push(format!(
            "MNNVL 1 cliqueId {:x} cliqueSize {gpus} cliqueRank {local}",
            f.clique_id
        ));
    }
    out.push(format!(
        "comm - rank {rank} nRanks {} nNodes {} localRanks {gpus} localRank {local} MNNVL 1",
        cluster.n_ranks(),
        cluster.n_nodes
    ));
    out
}

/// What `--json` says about an MNNVL domain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct MnnvlInfo {
    /// OS nodes (trays) fused into each NVLink domain.
    pub(crate) os_nodes: usize,
    pub(crate) gpus_per_os_node: usize,
    /// Ranks of one clique (NCCL's `localRanks`, its node being the whole domain).
    pub(crate) clique_size: usize,
    /// NVLink domains (NCCL's `nNodes`), joined through the NICs when more than one.
    pub(crate) domains: usize,
}

/// The domain of an MNNVL cluster; None when the cluster is not one.
pub(crate) fn info(cluster: &Cluster) -> Option<MnnvlInfo> {
    let hosts = host_count(&cluster.node);
    (hosts > 1).then(|| MnnvlInfo {
        os_nodes: hosts,
        gpus_per_os_node: cluster.node.gpu_count() / hosts,
        clique_size: cluster.node.gpu_count(),
        domains: cluster.n_nodes,
    })
}

/// One line for people: what the domain is and how NCCL counts it; None when the cluster is not MNNVL.
pub(crate) fn summary(cluster: &Cluster) -> Option<String> {
    info(cluster).map(|i| i.summary())
}

impl MnnvlInfo {
    pub(crate) fn summary(&self) -> String {
        format!(
            "MNNVL: {} OS nodes x {} GPUs in one NVLink domain (one clique of {} ranks); NCCL counts it as 1 node{}",
            self.os_nodes,
            self.gpus_per_os_node,
            self.clique_size,
            if self.domains > 1 {
                format!(", {} domains joined through NICs", self.domains)
            } else {
                String::new()
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_round_trips_as_nccl_prints_it() {
        let u = parse_uuid("3143b15bc2cd192b.28cc9b5473fb5b93").unwrap();
        assert_eq!(u, [0x3143_b15b_c2cd_192b, 0x28cc_9b54_73fb_5b93]);
        assert!(parse_uuid("xyz.1").is_none());
        assert!(parse_uuid("12345678901234567.1").is_none());
        assert!(parse_uuid("12").is_none());
    }

    #[test]
    fn fused_xml_renumbers_ranks_and_hosts() {
        let tray = crate::xml::parse(
            "<system version=\"1\"><cpu host_hash=\"0x10\" numaid=\"0\" arch=\"arm64\"><pci busid=\"0008:01:00.0\" class=\"0x030200\" link_speed=\"\" link_width=\"0\"><gpu dev=\"0\" sm=\"100\" rank=\"0\" gdr=\"1\"/></pci><pci busid=\"0009:01:00.0\" class=\"0x030200\" link_speed=\"\" link_width=\"0\"><gpu dev=\"1\" sm=\"100\" rank=\"1\" gdr=\"1\"/></pci></cpu></system>",
            "t",
        )
        .unwrap();
        let fused = fused_xml(&tray, 3);
        let ranks: Vec<&str> = fused
            .descendants()
            .into_iter()
            .filter(|n| n.name == "gpu")
            .filter_map(|g| g.attr("rank"))
            .collect();
        assert_eq!(ranks, ["0", "1", "2", "3", "4", "5"]);
        let hashes: Vec<&str> = fused
            .children
            .iter()
            .filter_map(|c| c.attr("host_hash"))
            .collect();
        assert_eq!(hashes, ["0x10", "0x11", "0x12"]);
    }
}
