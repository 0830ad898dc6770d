//! Known GPU models for `--gpu MODEL`: the facts NCCL would detect on a GPU (compute capability, NVLinks and where
//! they go) that a partial vendor topology file leaves out, and the NIC those boards ship with. Each row names its
//! public source. Also the NICs whose PCI ids say their speed.

/// One GPU model: what NCCL's detection would write for it (`ncclTopoGetXmlFromGpu`, xml.cc:734 in NCCL 2.28.9).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuModel {
    /// The `--gpu` value.
    pub name: &'static str,
    /// What it is, for warnings and the list of known models.
    pub description: &'static str,
    /// NCCL's `sm`: compute capability x 10.
    pub sm: u32,
    /// Active NVLinks per GPU (0: a PCIe card, NVLink bridges not assumed).
    pub nvlinks: u32,
    /// NVLink generation, for the warning.
    pub nvlink_gen: u32,
    /// The NIC speed of the vendor's reference system (Gb/s), used for NICs nothing else names.
    pub reference_nic_gbits: u32,
    /// The reference system's NIC, for the warning.
    pub reference_nic: &'static str,
    /// Whether the driver allows P2P between these GPUs over PCIe (false on GeForce cards: written as planner's
    /// `nvml_p2p="0"`, so NCCL's paths go through the CPU and its SHM transport carries every hop).
    pub driver_p2p: bool,
    /// GPUDirect RDMA (`gdr`): data-center and professional boards; not GeForce.
    pub gdr: bool,
}

/// The known models. Sources:
/// - sm: CUDA C++ Programming Guide, "Compute Capabilities" (A100 8.0, H100/H200 9.0, B200 10.0).
/// - A100 SXM4: NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 12 third-generation NVLinks, 600 GB/s,
///   to 6 NVSwitches on HGX A100; DGX A100 User Guide: 8x ConnectX-6 HDR 200 Gb/s InfiniBand.
/// - A100 PCIe: A100 PCIe datasheet: PCIe Gen4, NVLink only through an optional 2-GPU bridge (not assumed).
/// - H100 SXM5: NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): 18 fourth-generation NVLinks, 900 GB/s,
///   to 4 NVSwitches on HGX H100; DGX H100 User Guide: 8x ConnectX-7 400 Gb/s (NDR).
/// - H100 PCIe: H100 PCIe datasheet: PCIe Gen5, NVLink only through an optional bridge (not assumed).
/// - H200 SXM: NVIDIA H200 datasheet: NVLink 900 GB/s (18 NVLink 4 links, as H100 SXM5), HGX H200 with NVSwitch;
///   DGX H200: 8x ConnectX-7 400 Gb/s.
/// - B200: NVIDIA DGX B200 datasheet: fifth-generation NVLink 1.8 TB/s per GPU (18 links) through NVSwitch, 8x
///   ConnectX-7 400 Gb/s.
/// - H800 SXM5: NVIDIA H800 product brief: NVLink 400 GB/s, i.e. 8 NVLink 4 links (50 GB/s each, both directions),
///   to NVSwitch on HGX H800; NIC as DGX H100 (ASSUMED).
/// - L40S: NVIDIA L40S datasheet: sm 89 (Ada), PCIe Gen4 x16, "NVLink support: No"; a data-center board (P2P, GPUDirect
///   RDMA). Reference NIC ASSUMED 200 Gb/s (NVIDIA's L40S reference servers: ConnectX-7 200 Gb/s per 2 GPUs).
/// - GeForce RTX 4090 (sm 89, Gen4) and RTX 5090 (sm 120, Gen5): NVIDIA's product specifications, no NVLink; the
///   driver refuses P2P (NVIDIA/nccl#1637, tinygrad/open-gpu-kernel-modules#17) and gives no GPUDirect RDMA. Their
///   servers seldom have a fast NIC: reference NIC ASSUMED 100 Gb/s Ethernet.
pub const GPU_MODELS: &[GpuModel] = &[
    GpuModel {
        name: "a100-sxm",
        description: "A100 SXM4 (sm 80, 12 NVLink 3 links to NVSwitch)",
        sm: 80,
        nvlinks: 12,
        nvlink_gen: 3,
        reference_nic_gbits: 200,
        reference_nic: "HDR InfiniBand, as in DGX A100",
        driver_p2p: true,
        gdr: true,
    },
    GpuModel {
        name: "a100-pcie",
        description: "A100 PCIe (sm 80, no NVLink)",
        sm: 80,
        nvlinks: 0,
        nvlink_gen: 3,
        reference_nic_gbits: 200,
        reference_nic: "HDR InfiniBand, as in DGX A100",
        driver_p2p: true,
        gdr: true,
    },
    GpuModel {
        name: "h100-sxm",
        description: "H100 SXM5 (sm 90, 18 NVLink 4 links to NVSwitch)",
        sm: 90,
        nvlinks: 18,
        nvlink_gen: 4,
        reference_nic_gbits: 400,
        reference_nic: "NDR InfiniBand, as in DGX H100",
        driver_p2p: true,
        gdr: true,
    },
    GpuModel {
        name: "h100-pcie",
        description: "H100 PCIe (sm 90, no NVLink)",
        sm: 90,
        nvlinks: 0,
        nvlink_gen: 4,
        reference_nic_gbits: 400,
        reference_nic: "NDR InfiniBand, as in DGX H100",
        driver_p2p: true,
        gdr: true,
    },
    GpuModel {
        name: "h200-sxm",
        description: "H200 SXM (sm 90, 18 NVLink 4 links to NVSwitch)",
        sm: 90,
        nvlinks: 18,
        nvlink_gen: 4,
        reference_nic_gbits: 400,
        reference_nic: "NDR InfiniBand, as in DGX H200",
        driver_p2p: true,
        gdr: true,
    },
    GpuModel {
        name: "b200-sxm",
        description: "B200 SXM (sm 100, 18 NVLink 5 links to NVSwitch)",
        sm: 100,
        nvlinks: 18,
        nvlink_gen: 5,
        reference_nic_gbits: 400,
        reference_nic: "NDR InfiniBand, as in DGX B200",
        driver_p2p: true,
        gdr: true,
    },
    GpuModel {
        name: "h800-sxm",
        description: "H800 SXM5 (sm 90, 8 NVLink 4 links to NVSwitch)",
        sm: 90,
        nvlinks: 8,
        nvlink_gen: 4,
        reference_nic_gbits: 400,
        reference_nic: "NDR InfiniBand, as in DGX H100",
        driver_p2p: true,
        gdr: true,
    },
    GpuModel {
        name: "l40s",
        description: "L40S (sm 89, PCIe Gen4, no NVLink)",
        sm: 89,
        nvlinks: 0,
        nvlink_gen: 0,
        reference_nic_gbits: 200,
        reference_nic: "200 Gb/s ConnectX-7, as in NVIDIA's L40S reference servers",
        driver_p2p: true,
        gdr: true,
    },
    GpuModel {
        name: "rtx4090",
        description: "GeForce RTX 4090 (sm 89, PCIe Gen4, no NVLink, no P2P)",
        sm: 89,
        nvlinks: 0,
        nvlink_gen: 0,
        reference_nic_gbits: 100,
        reference_nic: "100 Gb/s Ethernet (ASSUMED)",
        driver_p2p: false,
        gdr: false,
    },
    GpuModel {
        name: "rtx5090",
        description: "GeForce RTX 5090 (sm 120, PCIe Gen5, no NVLink, no P2P)",
        sm: 120,
        nvlinks: 0,
        nvlink_gen: 0,
        reference_nic_gbits: 100,
        reference_nic: "100 Gb/s Ethernet (ASSUMED)",
        driver_p2p: false,
        gdr: false,
    },
];

pub fn find(name: &str) -> Option<&'static GpuModel> {
    GPU_MODELS.iter().find(|m| m.name == name)
}

pub fn names() -> Vec<&'static str> {
    GPU_MODELS.iter().map(|m| m.name).collect()
}

/// A NIC whose PCI vendor:device says what it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KnownNic {
    pub vendor: &'static str,
    pub device: &'static str,
    pub description: &'static str,
    pub speed_gbits: u32,
    /// What the network plugin reports as `latency` (µs).
    pub latency_us: u32,
}

/// Sources: EFA 1d0f:efa0 is the first-generation EFA of p4d/p4de (aws-ofi-nccl topology/p4d-24xl-topo.xml), 100
/// Gb/s each (AWS p4d: "400 Gbps ... 4x 100 Gbps EFA"); the plugin reports latency 75 µs on p4d/p4de
/// (aws-ofi-nccl src/platform-aws.cpp:83-101, `.latency = 75.0`).
pub const KNOWN_NICS: &[KnownNic] = &[KnownNic {
    vendor: "0x1d0f",
    device: "0xefa0",
    description: "EFA (1d0f:efa0, p4d/p4de)",
    speed_gbits: 100,
    latency_us: 75,
}];

pub fn known_nic(vendor: Option<&str>, device: Option<&str>) -> Option<&'static KnownNic> {
    let (vendor, device) = (vendor?.to_ascii_lowercase(), device?.to_ascii_lowercase());
    KNOWN_NICS
        .iter()
        .find(|n| n.vendor == vendor && n.device == device)
}
