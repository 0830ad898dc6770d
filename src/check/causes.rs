//! Why a run is slower than its machine should be: each rule reads the log's evidence against the machine's facts
//! and names a cause with the lines that show it. A cause is *likely* when some size is slow and the cause acts
//! where it is (an inter-node cause on a run across nodes); the report lists likely causes first, each in the order
//! of how much it usually costs (a TCP fallback before a missing PXN).

use super::evidence::{LogEvidence, Transport};
use super::machine::MachineFacts;
use super::{RunFacts, SizeCheck};
use crate::error::Result;
use crate::model::Coll;
use crate::topo::Cluster;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CauseKind {
    /// Inter-node traffic over TCP sockets (`NET/Socket`).
    SocketTransport,
    /// P2P between the GPUs of a node disabled, or staged through host memory (SHM).
    P2pDisabled,
    /// Fewer NICs used than the node has.
    FewerNics,
    /// GPUDirect RDMA off: the NIC reads and writes host memory.
    GdrOff,
    /// Fewer channels than NCCL's search gives this machine.
    FewerChannels,
    /// NVLS (NVLink SHARP) off or unavailable where the NVSwitches have it.
    NvlsOff,
    /// PXN off: GPUs send through NICs that are not on their rail.
    PxnOff,
    /// A PCIe link trained below its peers.
    PcieDegraded,
    /// The run's NCCL version picks another algorithm/protocol here than the newest one.
    VersionChoice,
}

impl CauseKind {
    pub(crate) fn id(self) -> &'static str {
        match self {
            CauseKind::SocketTransport => "socket-transport",
            CauseKind::P2pDisabled => "p2p-disabled",
            CauseKind::FewerNics => "fewer-nics",
            CauseKind::GdrOff => "gdr-off",
            CauseKind::FewerChannels => "fewer-channels",
            CauseKind::NvlsOff => "nvls-off",
            CauseKind::PxnOff => "pxn-off",
            CauseKind::PcieDegraded => "pcie-degraded",
            CauseKind::VersionChoice => "version-choice",
        }
    }
    /// Acts between nodes only.
    fn inter_node(self) -> bool {
        matches!(
            self,
            CauseKind::SocketTransport
                | CauseKind::FewerNics
                | CauseKind::GdrOff
                | CauseKind::PxnOff
        )
    }
}

/// One line that shows a cause.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    pub(crate) source: String,
    /// 1-based line (None: a fact of the machine rather than of a line).
    pub line: Option<usize>,
    pub(crate) text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cause {
    pub kind: CauseKind,
    /// One sentence: what is wrong.
    pub summary: String,
    pub evidence: Vec<Evidence>,
    /// Some size is slow and this cause acts there.
    pub likely: bool,
}

/// What the rules read.
pub struct CauseInput<'a> {
    /// Each file's name and log evidence.
    pub evidence: &'a [(&'a str, &'a LogEvidence)],
    pub machine: &'a MachineFacts,
    pub cluster: &'a Cluster,
    pub run: &'a RunFacts,
    /// Where the cluster came from (diff's version comparison loads it again).
    pub source: &'a crate::pipeline::Source,
    pub slow: &'a [&'a SizeCheck],
}

/// Every cause the evidence shows, likely ones first.
pub fn find(input: &CauseInput) -> Result<Vec<Cause>> {
    let mut out = Vec::new();
    for (source, ev) in input.evidence {
        let mut add = |kind: CauseKind, summary: String, evidence: Vec<Evidence>| {
            if let Some(c) = out.iter_mut().find(|c: &&mut Cause| c.kind == kind) {
                c.evidence.extend(evidence);
            } else {
                out.push(Cause {
                    kind,
                    summary,
                    evidence,
                    likely: false,
                });
            }
        };
        let at = |line: usize, text: String| Evidence {
            source: source.to_string(),
            line: (line > 0).then_some(line),
            text,
        };
        socket(ev, input.machine, &at, &mut add);
        p2p(ev, input.machine, &at, &mut add);
        nics(ev, input.machine, &at, &mut add);
        gdr(ev, input.machine, &at, &mut add);
        channels(ev, input.machine, &at, &mut add);
        nvls(ev, input.machine, &at, &mut add);
        pxn(ev, input.machine, &at, &mut add);
    }
    if !input.machine.degraded_pcie.is_empty() {
        out.push(Cause {
            kind: CauseKind::PcieDegraded,
            summary: format!(
                "{} PCIe link(s) of the topology trained below their peers",
                input.machine.degraded_pcie.len()
            ),
            evidence: input
                .machine
                .degraded_pcie
                .iter()
                .map(|d| Evidence {
                    source: input.machine.source.clone(),
                    line: (d.line > 0).then_some(d.line),
                    text: format!(
                        "{} {}: {} x{} where other {}s have {} x{}",
                        d.device,
                        d.busid,
                        d.link_speed,
                        d.link_width,
                        d.device,
                        d.peer_speed,
                        d.peer_width
                    ),
                })
                .collect(),
            likely: false,
        });
    }
    if let Some(c) = version_choice(input)? {
        out.push(c);
    }
    let across_nodes = input.cluster.n_nodes > 1;
    for c in &mut out {
        c.likely = !input.slow.is_empty() && (!c.kind.inter_node() || across_nodes);
    }
    out.sort_by_key(|c| (!c.likely, c.kind));
    Ok(out)
}

type At<'a> = dyn Fn(usize, String) -> Evidence + 'a;
type Add<'a> = dyn FnMut(CauseKind, String, Vec<Evidence>) + 'a;

fn env_is(ev: &LogEvidence, name: &str, values: &[&str]) -> Option<(usize, String)> {
    ev.env_value(name)
        .filter(|v| {
            values
                .iter()
                .any(|x| v.value.trim().eq_ignore_ascii_case(x))
        })
        .map(|v| (v.line, format!("{name}={}", v.value)))
}

fn socket(ev: &LogEvidence, m: &MachineFacts, at: &At, add: &mut Add) {
    let conn = ev.first_connection(
        |c| matches!(&c.transport, Transport::Net { network, .. } if network == "Socket"),
    );
    let network = ev.network.as_ref().filter(|n| n.value == "Socket");
    // A single node that only chose the socket plugin sends nothing through it: a cause only where it carries data.
    let inter_node = ev
        .connections
        .iter()
        .any(|c| matches!(c.transport, Transport::Net { .. }))
        || ev.n_nodes.as_ref().is_some_and(|n| n.value > 1)
        || m.nodes > 1;
    // NCCL_IB_DISABLE=1 leaves NCCL sockets (or another plugin) on a machine with IB or EFA NICs.
    let ib_disabled = env_is(ev, "NCCL_IB_DISABLE", &["1"]).filter(|_| {
        matches!(m.net_kind.as_deref(), Some("IB" | "EFA"))
            && ev.network.as_ref().is_none_or(|n| n.value == "Socket")
    });
    if !(inter_node && (conn.is_some() || network.is_some() || ib_disabled.is_some())) {
        return;
    }
    let mut evidence = Vec::new();
    if let Some(n) = network {
        evidence.push(at(n.line, "Using network Socket".into()));
    }
    if let Some(c) = conn {
        evidence.push(at(
            c.line,
            format!(
                "channel {} connection {} -> {} via NET/Socket",
                c.channel, c.from_rank, c.to_rank
            ),
        ));
    }
    if let Some(line) = ev.no_ib_device {
        evidence.push(at(
            line,
            "NET/IB : No device found (the IB transport saw no usable HCA)".into(),
        ));
    }
    if let Some((line, text)) = env_is(ev, "NCCL_IB_DISABLE", &["1"]) {
        evidence.push(at(line, text));
    }
    let machine = match m.net_kind.as_deref() {
        Some(kind @ ("IB" | "EFA")) => format!(
            " where the machine has {kind} ({})",
            m.nics
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => String::new(),
    };
    add(
        CauseKind::SocketTransport,
        format!("inter-node traffic went over TCP sockets (NET/Socket){machine}"),
        evidence,
    );
}

fn p2p(ev: &LogEvidence, m: &MachineFacts, at: &At, add: &mut Add) {
    if m.gpus_per_node < 2 || (m.nvlink_pairs == 0 && m.p2p_pairs == 0) {
        return;
    }
    let mut evidence = Vec::new();
    if let Some((line, text)) = env_is(ev, "NCCL_P2P_DISABLE", &["1"]) {
        evidence.push(at(line, text));
    }
    if let Some((line, text)) = env_is(ev, "NCCL_P2P_LEVEL", &["LOC", "0"]) {
        evidence.push(at(line, text));
    }
    if let Some(line) = ev.intra_node_p2p_unsupported {
        evidence.push(at(line, "Check P2P Type intraNodeP2pSupport 0".into()));
    }
    let shm: Vec<_> = ev
        .connections
        .iter()
        .filter(|c| c.transport == Transport::Shm)
        .collect();
    if let Some(c) = shm.first() {
        evidence.push(at(
            c.line,
            format!(
                "{} connection(s) via SHM (host memory), first {} -> {}",
                shm.len(),
                c.from_rank,
                c.to_rank
            ),
        ));
    }
    if evidence.is_empty() {
        return;
    }
    let links = if m.nvlink_pairs > 0 {
        format!(
            "{} of {} GPU pairs are joined by NVLink",
            m.nvlink_pairs, m.gpu_pairs
        )
    } else {
        format!(
            "{} of {} GPU pairs can use PCIe P2P",
            m.p2p_pairs, m.gpu_pairs
        )
    };
    add(
        CauseKind::P2pDisabled,
        format!("P2P between the GPUs of a node was off (traffic staged through host memory) where {links}"),
        evidence,
    );
}

fn nics(ev: &LogEvidence, m: &MachineFacts, at: &At, add: &mut Add) {
    let present = m.nics.len();
    if present < 2 {
        return;
    }
    let mut evidence = Vec::new();
    let used = ev.net_devs_used();
    let net_conn = ev
        .connections
        .iter()
        .find(|c| matches!(&c.transport, Transport::Net { network, .. } if network != "Socket"));
    if let Some(c) = net_conn {
        if !used.is_empty() && used.len() < present {
            evidence.push(at(
                c.line,
                format!(
                    "the connections use {} network device(s) ({}) of the {present} per node",
                    used.len(),
                    used.iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    if let Some(v) = ev.env_value("NCCL_IB_HCA") {
        // `mlx5_0,mlx5_1` (a list to use; `^...` excludes, `=` asks for exact names).
        let list = v.value.trim().trim_start_matches('=');
        let named = list.split(',').filter(|n| !n.trim().is_empty()).count();
        if !list.starts_with('^') && named > 0 && named < present {
            evidence.push(at(
                v.line,
                format!(
                    "NCCL_IB_HCA={} names {named} of the {present} NICs",
                    v.value
                ),
            ));
        }
    }
    for (plugin, seen) in &ev.nics_listed {
        if plugin != "Socket" && seen.value.len() < present {
            evidence.push(at(
                seen.line,
                format!(
                    "NET/{plugin} lists {} NIC(s): {}",
                    seen.value.len(),
                    seen.value.join(" ")
                ),
            ));
        }
    }
    if evidence.is_empty() {
        return;
    }
    add(
        CauseKind::FewerNics,
        format!("fewer NICs carried the traffic than the {present} each node has"),
        evidence,
    );
}

fn gdr(ev: &LogEvidence, m: &MachineFacts, at: &At, add: &mut Add) {
    if !m.gdr_possible {
        return;
    }
    let mut evidence = Vec::new();
    let net: Vec<_> = ev
        .connections
        .iter()
        .filter(|c| matches!(&c.transport, Transport::Net { network, .. } if network != "Socket"))
        .collect();
    if !net.is_empty()
        && net
            .iter()
            .all(|c| matches!(c.transport, Transport::Net { gdr: false, .. }))
    {
        evidence.push(at(
            net[0].line,
            format!("{} NET connection(s), none with GDRDMA", net.len()),
        ));
    }
    if let Some(g) = ev.ring_gdr.as_ref().filter(|g| !g.value) {
        evidence.push(at(g.line, "Connected all rings ... GDR 0".into()));
    }
    if let Some(s) = &ev.gdr_disabled_hca {
        evidence.push(at(s.line, s.value.clone()));
    }
    for name in ["NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_DISABLE"] {
        let off: &[&str] = if name == "NCCL_NET_GDR_LEVEL" {
            &["LOC", "0"]
        } else {
            &["1"]
        };
        if let Some((line, text)) = env_is(ev, name, off) {
            evidence.push(at(line, text));
        }
    }
    if evidence.is_empty() {
        return;
    }
    add(
        CauseKind::GdrOff,
        "GPUDirect RDMA was off: the NICs went through host memory where GPUs and NICs support it"
            .into(),
        evidence,
    );
}

fn channels(ev: &LogEvidence, m: &MachineFacts, at: &At, add: &mut Add) {
    if m.search_channels == 0 {
        return;
    }
    let mut evidence = Vec::new();
    if let Some(c) = ev
        .coll_channels
        .as_ref()
        .filter(|c| c.value < m.search_channels)
    {
        evidence.push(at(c.line, format!("{} coll channels", c.value)));
    }
    for name in ["NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS"] {
        if let Some(v) = ev.env_value(name) {
            if v.value
                .trim()
                .parse::<usize>()
                .is_ok_and(|n| n < m.search_channels)
            {
                evidence.push(at(v.line, format!("{name}={}", v.value)));
            }
        }
    }
    if evidence.is_empty() {
        return;
    }
    add(
        CauseKind::FewerChannels,
        format!(
            "fewer channels than NCCL would use: planner's search gives this machine {}",
            m.search_channels
        ),
        evidence,
    );
}

fn nvls(ev: &LogEvidence, m: &MachineFacts, at: &At, add: &mut Add) {
    if !m.nvls_supported {
        return;
    }
    let mut evidence = Vec::new();
    if let Some((line, text)) = env_is(ev, "NCCL_NVLS_ENABLE", &["0"]) {
        evidence.push(at(line, text));
    }
    if let Some(line) = ev.nvls_unavailable {
        evidence.push(at(line, "NVLS multicast support is not available".into()));
    }
    if let Some(c) = ev.nvls_channels.as_ref().filter(|c| c.value == 0) {
        evidence.push(at(c.line, "0 nvls channels".into()));
    }
    if evidence.is_empty() {
        return;
    }
    add(
        CauseKind::NvlsOff,
        "NVLS was off or unavailable where the NVSwitches support it (all-reduce loses its fastest algorithm)"
            .into(),
        evidence,
    );
}

fn pxn(ev: &LogEvidence, m: &MachineFacts, at: &At, add: &mut Add) {
    if !m.pxn_paths {
        return;
    }
    let mut evidence = Vec::new();
    if let Some((line, text)) = env_is(ev, "NCCL_PXN_DISABLE", &["1"]) {
        evidence.push(at(line, text));
    }
    if let Some(p) = ev.ring_pxn.as_ref().filter(|p| !p.value) {
        evidence.push(at(p.line, "Connected all rings ... PXN 0".into()));
    }
    if evidence.is_empty() {
        return;
    }
    add(
        CauseKind::PxnOff,
        "PXN was off: GPUs without a NIC on their PCIe switch send through the CPU instead of an NVLink peer's NIC"
            .into(),
        evidence,
    );
}

/// The run's NCCL version picks another pair at a slow size than the newest family does (diff's comparison).
fn version_choice(input: &CauseInput) -> Result<Option<Cause>> {
    let Some(version) = input.run.nccl_version.as_deref() else {
        return Ok(None);
    };
    let Ok(family) = crate::model::table::family_of(version) else {
        return Ok(None);
    };
    let newest = crate::model::table::newest_family();
    if family == newest || input.slow.is_empty() {
        return Ok(None);
    }
    // Only NCCL's free choice: a pinned pair is the same on every version.
    let slow: Vec<&&SizeCheck> = input.slow.iter().filter(|s| s.pair == "auto").collect();
    let mut colls: Vec<Coll> = slow.iter().map(|s| s.coll).collect();
    colls.sort();
    colls.dedup();
    if colls.is_empty() {
        return Ok(None);
    }
    let mut sizes: Vec<u64> = slow.iter().map(|s| s.bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let opts = crate::diff::versions::VersionDiffOptions {
        from: family.clone(),
        against: newest.to_string(),
        source: input.source.clone(),
        graph_file: None,
        colls,
        sizes,
        env: crate::nccl_env::NcclEnv::default(),
        nvls: crate::model::input::NvlsFlag::Auto,
    };
    let diff = match crate::diff::versions::diff_versions(&opts) {
        Ok(d) => d,
        // A version planner has no table for says nothing here.
        Err(_) => return Ok(None),
    };
    let mut evidence = Vec::new();
    for cd in &diff.collectives {
        for band in cd.bands.iter().filter(|b| b.pick_changed) {
            evidence.push(Evidence {
                source: "planner diff".into(),
                line: None,
                text: format!(
                    "{} {}..{} B: NCCL {family} picks {}, {newest} picks {}",
                    cd.coll.nccl_name(),
                    band.from_bytes,
                    band.to_bytes,
                    band.pick_a,
                    band.pick_b
                ),
            });
        }
    }
    if evidence.is_empty() {
        return Ok(None);
    }
    Ok(Some(Cause {
        kind: CauseKind::VersionChoice,
        summary: format!("NCCL {version} chooses differently here than NCCL {newest} (planner diff, NCCL's model)"),
        evidence,
        likely: false,
    }))
}
