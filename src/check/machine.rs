//! What the machine is, as far as `check`'s causes need it: read once from the cluster (the topology NCCL would
//! see, `--nodes` copies of it) and the search's channels, so the cause rules below work on plain data.

use crate::error::Result;
use crate::model::input::{ModelInput, NvlsFlag};
use crate::nccl_env::NcclEnv;
use crate::topo::{Cluster, NodeKind, PathType};
use serde::Serialize;

/// A PCIe link of the topology dump that trained below its peers (same device class, narrower or slower).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct DegradedPcie {
    pub(crate) busid: String,
    /// `GPU`, `NIC`, `PCI switch` (from the dump's class).
    pub(crate) device: String,
    pub(crate) link_speed: String,
    pub(crate) link_width: u32,
    /// What the best link of that class in the dump has.
    pub(crate) peer_speed: String,
    pub(crate) peer_width: u32,
    /// Line of the element in the topology file (0: built in memory).
    pub(crate) line: usize,
}

/// One network device of a node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Nic {
    pub(crate) name: String,
    pub(crate) speed_gbits: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MachineFacts {
    /// Where the topology came from (`fixture hgx-h200-8`, a file, `live probe`).
    pub(crate) source: String,
    pub(crate) nodes: usize,
    pub(crate) gpus_per_node: usize,
    /// GPU pairs of one node joined by NVLink (NCCL path NVL), and all pairs.
    pub nvlink_pairs: usize,
    pub(crate) gpu_pairs: usize,
    /// GPU pairs that NCCL's rules let use P2P (path no worse than PXB/P2C, as NCCL_P2P_LEVEL defaults).
    pub p2p_pairs: usize,
    /// Network devices of one node.
    pub nics: Vec<Nic>,
    /// What those devices are: `IB` (mlx5_*, ibp*), `EFA` (rdmap*, efa*), else `Socket`.
    pub(crate) net_kind: Option<String>,
    /// GPUDirect RDMA possible from some GPU to some NIC (both support it).
    pub(crate) gdr_possible: bool,
    /// NCCL routes some GPU's NIC traffic through a peer (PXN paths).
    pub(crate) pxn_paths: bool,
    /// NVLS (NVLink SHARP) available on this machine with NCCL's defaults.
    pub(crate) nvls_supported: bool,
    /// Channels NCCL's search gives the rings on this machine (the runtime channel count).
    pub(crate) search_channels: usize,
    pub(crate) degraded_pcie: Vec<DegradedPcie>,
}

/// The kind of network a device name belongs to.
pub(crate) fn net_kind_of(name: &str) -> &'static str {
    let n = name.to_ascii_lowercase();
    if n.starts_with("mlx")
        || n.starts_with("ibp")
        || n.starts_with("bnxt_re")
        || n.starts_with("irdma")
    {
        "IB"
    } else if n.starts_with("rdmap") || n.starts_with("efa") {
        "EFA"
    } else {
        "Socket"
    }
}

impl MachineFacts {
    /// The facts of `cluster` under NCCL's environment `env` (the search runs once for the channel count).
    pub fn of_cluster(cluster: &Cluster, env: &NcclEnv) -> Result<MachineFacts> {
        let topo = &cluster.node;
        let gpus: Vec<_> = topo.nodes(NodeKind::Gpu).to_vec();
        let (mut nvlink_pairs, mut gpu_pairs, mut p2p_pairs) = (0, 0, 0);
        for (i, &a) in gpus.iter().enumerate() {
            for &b in &gpus[i + 1..] {
                gpu_pairs += 1;
                if let Some(p) = topo.path(a, b) {
                    if p.ptype == PathType::Nvl || p.ptype == PathType::Nvb {
                        nvlink_pairs += 1;
                    }
                    if p.ptype <= PathType::Pxb || p.ptype == PathType::P2c {
                        p2p_pairs += 1;
                    }
                }
            }
        }
        let nets: Vec<_> = topo
            .nodes(NodeKind::Net)
            .iter()
            .filter_map(|&i| topo.node(i).net().map(|n| (i, n)))
            .collect();
        let nics: Vec<Nic> = nets
            .iter()
            .map(|(_, n)| Nic {
                name: n.name.clone(),
                speed_gbits: n.speed_mbps / 1000.0,
            })
            .collect();
        let net_kind = nets.first().map(|(_, n)| net_kind_of(&n.name).to_string());
        let gpu_gdr = topo.gpus().any(|(_, g)| g.gdr);
        let gdr_possible = gpu_gdr && nets.iter().any(|(_, n)| n.gdr);
        let pxn_paths = gpus.iter().any(|&g| {
            nets.iter()
                .any(|(n, _)| topo.path(g, *n).is_some_and(|p| p.ptype == PathType::Pxn))
        });
        let nvls_supported = ModelInput::nvls_request(cluster, env, NvlsFlag::Auto).supported();
        let search_channels = match crate::pipeline::graphs_for(cluster, env, nvls_supported, None)
        {
            Ok((_, n)) => n,
            Err(_) => 0,
        };
        Ok(MachineFacts {
            source: topo.source.clone(),
            nodes: cluster.n_nodes,
            gpus_per_node: topo.gpu_count(),
            nvlink_pairs,
            gpu_pairs,
            p2p_pairs,
            nics,
            net_kind,
            gdr_possible,
            pxn_paths,
            nvls_supported,
            search_channels,
            degraded_pcie: degraded_pcie(&topo.xml),
        })
    }
}

/// `16.0 GT/s PCIe` -> 16.0.
fn gts(speed: &str) -> Option<f64> {
    speed.split_whitespace().next()?.parse().ok()
}

/// The device class of a `<pci class=...>`: 0x03 display (GPU), 0x02 network, 0x0604 bridge.
fn device_of(class: &str) -> Option<&'static str> {
    let c = class.trim().trim_start_matches("0x");
    if c.starts_with("03") {
        Some("GPU")
    } else if c.starts_with("02") {
        Some("NIC")
    } else if c.starts_with("0604") {
        Some("PCI switch")
    } else {
        None
    }
}

/// PCIe links of GPUs and NICs narrower or slower than the best link of the same class in the dump. NCCL writes
/// the link's speed and width as sysfs reports them (`max_link_speed`/`max_link_width` where the kernel has them,
/// the current ones otherwise); a GPU on x8 beside GPUs on x16 of the same board is a degraded slot or riser.
pub(crate) fn degraded_pcie(root: &crate::xml::XmlNode) -> Vec<DegradedPcie> {
    let mut links: Vec<(&'static str, String, String, f64, u32, usize)> = Vec::new();
    for n in root.descendants() {
        if n.name != "pci" {
            continue;
        }
        let (Some(class), Some(speed), Some(width)) =
            (n.attr("class"), n.attr("link_speed"), n.attr("link_width"))
        else {
            continue;
        };
        let Some(device) = device_of(class) else {
            continue;
        };
        if device == "PCI switch" {
            continue;
        }
        let (Some(g), Ok(w)) = (gts(speed), width.trim().parse::<u32>()) else {
            continue;
        };
        if g <= 0.0 || w == 0 {
            continue;
        }
        links.push((
            device,
            n.attr("busid").unwrap_or("").to_string(),
            speed.to_string(),
            g,
            w,
            n.line,
        ));
    }
    let mut out = Vec::new();
    for device in ["GPU", "NIC"] {
        let of_class: Vec<_> = links.iter().filter(|l| l.0 == device).collect();
        let Some(best) = of_class
            .iter()
            .max_by(|a, b| (a.3 * a.4 as f64).total_cmp(&(b.3 * b.4 as f64)))
        else {
            continue;
        };
        for l in &of_class {
            if l.3 < best.3 || l.4 < best.4 {
                out.push(DegradedPcie {
                    busid: l.1.clone(),
                    device: device.to_string(),
                    link_speed: l.2.clone(),
                    link_width: l.4,
                    peer_speed: best.2.clone(),
                    peer_width: best.4,
                    line: l.5,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_on_x8_beside_x16_peers_is_degraded() {
        let xml = r#"<system version="1"><cpu numaid="0">
<pci busid="0000:01:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
<pci busid="0000:02:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="8"/>
<pci busid="0000:03:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16"/>
<pci busid="0000:04:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16"/>
</cpu></system>"#;
        let root = crate::xml::parse(xml, "t").unwrap();
        let d = degraded_pcie(&root);
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].busid, "0000:02:00.0");
        assert_eq!((d[0].link_width, d[0].peer_width), (8, 16));
        assert_eq!(d[1].link_speed, "16.0 GT/s PCIe");
        assert_eq!(d[1].line, 4);
    }

    #[test]
    fn net_kinds_by_name() {
        assert_eq!(net_kind_of("mlx5_0"), "IB");
        assert_eq!(net_kind_of("rdmap16s27"), "EFA");
        assert_eq!(net_kind_of("eth0"), "Socket");
    }
}
