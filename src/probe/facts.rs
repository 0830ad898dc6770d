//! What NVML (and the CUDA driver) said about the GPUs, as plain data. The live
//! reader in `nvml.rs` fills it; tests fill it from recorded values. Every
//! query that can fail on some machine is an `Option`: `None` means "asked,
//! no answer", and the XML builder does what NCCL does when the call fails.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineFacts {
    /// e.g. "580.159.04"
    pub driver_version: Option<String>,
    /// e.g. 13000
    pub cuda_driver_version: Option<i32>,
    /// In NVML index order.
    pub gpus: Vec<GpuFacts>,
    /// NVML P2P status for each ordered pair of GPUs (by NVML index).
    pub p2p: Vec<P2pFacts>,
    /// Whether the CUDA driver could be asked at all (device ordinals, GDR).
    pub cuda_available: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuFacts {
    /// NVML index (NCCL's `dev`).
    pub index: u32,
    pub name: String,
    /// NVML's bus id as it prints it, e.g. "00000000:00:06.0".
    pub bus_id: String,
    /// CUDA ordinal when the CUDA driver sees this GPU (NCCL's rank order).
    pub cuda_ordinal: Option<u32>,
    /// (major, minor), e.g. (9, 0).
    pub compute_capability: (i32, i32),
    /// One entry per NVLink probed, in link order.
    pub nvlinks: Vec<NvLinkFacts>,
    /// `None` when the C2C link count field is not supported.
    pub c2c: Option<Vec<C2cLinkFacts>>,
    /// `cudaDevAttrGPUDirectRDMASupported`.
    pub gdr: Option<bool>,
    /// Current PCIe generation and width (NVML).
    pub pcie_gen: Option<u32>,
    pub pcie_width: Option<u32>,
    pub pcie_max_gen: Option<u32>,
    pub pcie_max_width: Option<u32>,
    /// NVML CPU affinity mask, 64 CPUs per word, lowest first.
    pub cpu_affinity: Option<Vec<u64>>,
    /// NVML memory affinity at NUMA-node scope (`nvmlDeviceGetMemoryAffinity`), 64 nodes per word, lowest first:
    /// nvidia-smi's "NUMA Affinity" column. Absent in facts recorded before it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_affinity: Option<Vec<u64>>,
    /// The GPU's own NUMA node (`nvmlDeviceGetNumaNodeId`: GPU memory as a NUMA node, on C2C machines); nvidia-smi's
    /// "GPU NUMA ID".
    pub numa_node: Option<u32>,
    /// NVML's NVLink fabric identity (`nvmlDeviceGetGpuFabricInfoV`); `None` on GPUs without a fabric (state
    /// NOT_SUPPORTED) and on drivers without the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<FabricFacts>,
}

/// `nvmlGpuFabricInfo_v2_t` as NCCL reads it (`init.cc:640-674`): what makes GPUs of several OS nodes one NVLink
/// domain (topo::mnnvl).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricFacts {
    /// `clusterUuid`'s 16 bytes as the two little-endian 64-bit halves NCCL prints (`%lx.%lx`).
    pub cluster_uuid: [u64; 2],
    pub clique_id: u32,
    /// `NVML_GPU_FABRIC_STATE_*` (3 = COMPLETED).
    pub state: u32,
    pub health_mask: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NvLinkFacts {
    pub link: u32,
    /// `nvmlDeviceGetNvLinkCapability(NVML_NVLINK_CAP_P2P_SUPPORTED)`.
    pub p2p_capable: Option<bool>,
    /// Link up: the `NVML_FI_DEV_NVLINK_GET_STATE` field (scoped to the link)
    /// on sm >= 90, `nvmlDeviceGetNvLinkState` before.
    pub active: Option<bool>,
    pub version: Option<u32>,
    /// Far end bus id as NVML prints it, e.g. "FFFFFFFF:FF:FF.0".
    pub remote_bus_id: Option<String>,
    /// Far end type from the raw `nvmlDeviceGetNvLinkRemoteDeviceType` call.
    pub remote_type: Option<RemoteType>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RemoteType {
    Gpu,
    IbmNpu,
    Switch,
    Unknown,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct C2cLinkFacts {
    /// `NVML_FI_DEV_C2C_LINK_GET_STATUS == 1`.
    pub(crate) up: Option<bool>,
    /// `NVML_FI_DEV_C2C_LINK_GET_MAX_BW` (MB/s).
    pub(crate) max_bw: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct P2pFacts {
    /// NVML indices.
    pub from: u32,
    pub to: u32,
    pub read_ok: Option<bool>,
    pub write_ok: Option<bool>,
}

impl GpuFacts {
    pub(crate) fn sm(&self) -> i32 {
        self.compute_capability.0 * 10 + self.compute_capability.1
    }

    /// The bus id in NCCL's spelling: lower case, 4-digit domain ("0000:00:06.0").
    pub(crate) fn nccl_bus_id(&self) -> String {
        nccl_bus_id(&self.bus_id)
    }
}

/// NCCL's spelling of a bus id: lower case, domain printed with at least 4
/// digits (NVML prints 8), e.g. "00000000:1B:00.0" -> "0000:1b:00.0".
pub(crate) fn nccl_bus_id(nvml_bus_id: &str) -> String {
    let lower = nvml_bus_id.trim().to_lowercase();
    match lower.split_once(':') {
        Some((domain, rest)) => match u32::from_str_radix(domain, 16) {
            Ok(d) => format!("{d:04x}:{rest}"),
            Err(_) => lower,
        },
        None => lower,
    }
}

/// How NCCL names an NVLink far end. NCCL reads it through NVML's legacy
/// 16-byte bus id, so an invisible far end (domain 0xffffffff, as in a VM
/// whose NVSwitch lives outside) comes out as "fffffff:ff:ff.0" in NCCL's
/// dumps (see the h200x2-nvswitch-vm capture); anything else is the normal
/// 4-digit-domain spelling.
pub(crate) fn nccl_nvlink_target(nvml_remote_bus_id: &str) -> String {
    let id = nccl_bus_id(nvml_remote_bus_id);
    if is_invisible_remote(nvml_remote_bus_id) {
        INVISIBLE_TARGET.to_string()
    } else {
        id
    }
}

/// The target NCCL writes for an NVLink far end it cannot see.
pub(crate) const INVISIBLE_TARGET: &str = "fffffff:ff:ff.0";

/// Whether NVML's far-end bus id is the "not visible" one (all-ones domain).
pub(crate) fn is_invisible_remote(nvml_remote_bus_id: &str) -> bool {
    let lower = nvml_remote_bus_id.trim().to_lowercase();
    let domain = lower.split(':').next().unwrap_or("");
    domain.len() >= 7 && domain.chars().all(|c| c == 'f')
}

/// A CPU mask as a Linux cpu list ("0-31,64-95").
#[cfg(test)]
fn cpu_list(mask: &[u64]) -> String {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for (w, word) in mask.iter().enumerate() {
        for b in 0..64 {
            if word & (1u64 << b) != 0 {
                let cpu = w * 64 + b;
                match ranges.last_mut() {
                    Some((_, end)) if *end + 1 == cpu => *end = cpu,
                    _ => ranges.push((cpu, cpu)),
                }
            }
        }
    }
    ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_in_nccl_spelling() {
        assert_eq!(nccl_bus_id("00000000:00:06.0"), "0000:00:06.0");
        assert_eq!(nccl_bus_id("00000000:1B:00.0"), "0000:1b:00.0");
        assert_eq!(nccl_bus_id("0001:C3:00.1"), "0001:c3:00.1");
        assert_eq!(nccl_bus_id("00010000:01:00.0"), "10000:01:00.0");
    }

    #[test]
    fn invisible_far_end_is_spelled_as_nccl_dumps_it() {
        // nvml-links.txt of the capture says FFFFFFFF:FF:FF.0, NCCL's topo.xml says fffffff:ff:ff.0.
        assert!(is_invisible_remote("FFFFFFFF:FF:FF.0"));
        assert_eq!(nccl_nvlink_target("FFFFFFFF:FF:FF.0"), "fffffff:ff:ff.0");
        assert!(!is_invisible_remote("00000000:07:00.0"));
        assert_eq!(nccl_nvlink_target("00000000:07:00.0"), "0000:07:00.0");
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list(&[0xffff_ffff, 0, 0, 0]), "0-31");
        assert_eq!(cpu_list(&[0b1011]), "0-1,3");
        assert_eq!(cpu_list(&[0, 1]), "64");
        assert_eq!(cpu_list(&[]), "");
    }
}
