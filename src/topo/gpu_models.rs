//! Known GPU models for `--gpu MODEL`: the facts NCCL would detect on a GPU (compute capability, NVLinks and where
//! they go) that a partial vendor topology file leaves out, and the NIC those boards ship with. Each row names its
//! public source. Also the NICs whose PCI ids say their speed.

/// One GPU model: what NCCL's detection would write for it (`ncclTopoGetXmlFromGpu`, xml.cc:734 in NCCL 2.28.9).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuModel {
    /// The `--gpu` value.
    pub(crate) name: &'static str,
    /// What it is, for warnings and the list of known models.
    pub(crate) description: &'static str,
    /// NCCL's `sm`: compute capability x 10.
    pub sm: u32,
    /// Active NVLinks per GPU (0: a PCIe card, NVLink bridges not assumed).
    pub nvlinks: u32,
    /// NVLink generation, for the warning.
    pub(crate) nvlink_gen: u32,
    /// The NIC speed of the vendor's reference system (Gb/s), used for NICs nothing else names.
    pub(crate) reference_nic_gbits: u32,
    /// The reference system's NIC, for the warning.
    pub(crate) reference_nic: &'static str,
    /// Whether the driver allows P2P between these GPUs over PCIe (false on GeForce cards: written as planner's
    /// `nvml_p2p="0"`, so NCCL's paths go through the CPU and its SHM transport carries every hop).
    pub(crate) driver_p2p: bool,
    /// GPUDirect RDMA (`gdr`): data-center and professional boards; not GeForce.
    pub(crate) gdr: bool,
    /// The card's PCIe host interface: generation and lanes (spec sheet), for reference and tests; a `--topo` file's
    /// own `link_speed`/`link_width` are what NCCL reads.
    pub pcie_gen: u32,
    pub pcie_width: u32,
    /// Where the facts come from (spec sheet or public listing).
    pub source_url: &'static str,
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
/// - H20: PCI id 10de:2329 "GH100 [H20]" (pci.ids); a Hopper part (sm 90) with H100 SXM5's 18 NVLink 4 links (900 GB/s)
///   to NVSwitch on its HGX board, as the H20 nodes of NVIDIA/nccl#1244 (NVLSTree runs, so NVSwitch multicast); PCIe
///   Gen5 x16 as H100 SXM5. NIC: 400 Gb/s NDR ("16 cx7 NICs(IB NDR)" for 2 nodes, the same issue).
/// - RTX PRO 6000 Blackwell Server Edition: NVIDIA's product page (sm 120, PCIe Gen5 x16, no NVLink); a professional
///   board: P2P and GPUDirect RDMA. Reference NIC ASSUMED 400 Gb/s.
/// - GB10 (DGX Spark): compute capability 12.1 (CUDA C++ Programming Guide, "Compute Capabilities"); DGX Spark page:
///   NVLink-C2C between CPU and GPU, ConnectX-7 200 Gb/s; GPUDirect RDMA is not supported on its unified memory (DGX
///   Spark documentation): gdr false. Its PCIe figure (Gen5 x16) is ASSUMED: the GPU reaches the CPU over C2C.
///
/// Each row's `source_url` names its spec sheet or listing.
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
        pcie_gen: 4,
        pcie_width: 16,
        source_url: "https://www.nvidia.com/en-us/data-center/a100/",
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
        pcie_gen: 4,
        pcie_width: 16,
        source_url: "https://www.nvidia.com/en-us/data-center/a100/",
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
        pcie_gen: 5,
        pcie_width: 16,
        source_url: "https://www.nvidia.com/en-us/data-center/h100/",
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
        pcie_gen: 5,
        pcie_width: 16,
        source_url: "https://www.nvidia.com/en-us/data-center/h100/",
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
        pcie_gen: 5,
        pcie_width: 16,
        source_url: "https://www.nvidia.com/en-us/data-center/h200/",
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
        pcie_gen: 5,
        pcie_width: 16,
        source_url: "https://www.nvidia.com/en-us/data-center/dgx-b200/",
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
        pcie_gen: 5,
        pcie_width: 16,
        source_url: "https://www.nvidia.cn/data-center/h800/",
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
        pcie_gen: 4,
        pcie_width: 16,
        source_url: "https://www.nvidia.com/en-us/data-center/l40s/",
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
        pcie_gen: 4,
        pcie_width: 16,
        source_url: "https://www.nvidia.com/en-us/geforce/graphics-cards/40-series/rtx-4090/",
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
        pcie_gen: 5,
        pcie_width: 16,
        source_url: "https://www.nvidia.com/en-us/geforce/graphics-cards/50-series/rtx-5090/",
    },
    GpuModel {
        name: "h20",
        description: "H20 (sm 90, Hopper, 18 NVLink 4 links to NVSwitch)",
        sm: 90,
        nvlinks: 18,
        nvlink_gen: 4,
        reference_nic_gbits: 400,
        reference_nic: "NDR InfiniBand (ConnectX-7), as in NVIDIA/nccl#1244's H20 nodes",
        driver_p2p: true,
        gdr: true,
        pcie_gen: 5,
        pcie_width: 16,
        source_url: "https://pci-ids.ucw.cz/read/PC/10de/2329",
    },
    GpuModel {
        name: "rtxpro6000",
        description: "RTX PRO 6000 Blackwell Server Edition (sm 120, PCIe Gen5, no NVLink)",
        sm: 120,
        nvlinks: 0,
        nvlink_gen: 0,
        reference_nic_gbits: 400,
        reference_nic: "400 Gb/s ConnectX-7 (ASSUMED, as NVIDIA's RTX PRO servers)",
        driver_p2p: true,
        gdr: true,
        pcie_gen: 5,
        pcie_width: 16,
        source_url:
            "https://www.nvidia.com/en-us/data-center/rtx-pro-6000-blackwell-server-edition/",
    },
    GpuModel {
        name: "gb10",
        description:
            "GB10 of DGX Spark (sm 121, NVLink-C2C to its CPU, no GPU NVLink, no GPUDirect RDMA)",
        sm: 121,
        nvlinks: 0,
        nvlink_gen: 0,
        reference_nic_gbits: 200,
        reference_nic: "200 Gb/s ConnectX-7, as in DGX Spark",
        driver_p2p: true,
        gdr: false,
        pcie_gen: 5,
        pcie_width: 16,
        source_url: "https://www.nvidia.com/en-us/products/workstations/dgx-spark/",
    },
];

pub fn find(name: &str) -> Option<&'static GpuModel> {
    GPU_MODELS.iter().find(|m| m.name == name)
}

pub(crate) fn names() -> Vec<&'static str> {
    GPU_MODELS.iter().map(|m| m.name).collect()
}

/// A NIC whose PCI vendor:device says what it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct KnownNic {
    pub(crate) vendor: &'static str,
    pub(crate) device: &'static str,
    pub(crate) description: &'static str,
    pub(crate) speed_gbits: u32,
    /// What the network plugin reports as `latency` (µs).
    pub(crate) latency_us: u32,
}

/// Sources: EFA 1d0f:efa0 is the first-generation EFA of p4d/p4de (aws-ofi-nccl topology/p4d-24xl-topo.xml), 100
/// Gb/s each (AWS p4d: "400 Gbps ... 4x 100 Gbps EFA"); the plugin reports latency 75 µs on p4d/p4de
/// (aws-ofi-nccl src/platform-aws.cpp:83-101, `.latency = 75.0`).
pub(crate) const KNOWN_NICS: &[KnownNic] = &[KnownNic {
    vendor: "0x1d0f",
    device: "0xefa0",
    description: "EFA (1d0f:efa0, p4d/p4de)",
    speed_gbits: 100,
    latency_us: 75,
}];

pub(crate) fn known_nic(vendor: Option<&str>, device: Option<&str>) -> Option<&'static KnownNic> {
    let (vendor, device) = (vendor?.to_ascii_lowercase(), device?.to_ascii_lowercase());
    KNOWN_NICS
        .iter()
        .find(|n| n.vendor == vendor && n.device == device)
}
