//! Built-in topologies (`fixtures/*.xml`), embedded in the binary so the tool
//! works on a machine with no GPU. Each file's leading comment says where its
//! facts come from and what is assumed.

pub struct Fixture {
    pub name: &'static str,
    pub description: &'static str,
    pub xml: &'static str,
}

pub const FIXTURES: &[Fixture] = &[
    Fixture {
        name: "h200x2-nvswitch-vm",
        description:
            "2x H200 SXM in a VM, 18 NVLinks each to an invisible NVSwitch (real NCCL 2.28.9 dump)",
        xml: include_str!("../../fixtures/h200x2-nvswitch-vm.xml"),
    },
    Fixture {
        name: "hgx-h100-8",
        description:
            "8x H100 SXM, NVLink 4 x18 to 4 NVSwitches, 2 Sapphire Rapids sockets, 8x 400 Gb/s NICs",
        xml: include_str!("../../fixtures/hgx-h100-8.xml"),
    },
    Fixture {
        name: "hgx-h200-8",
        description:
            "8x H200 SXM, NVLink 4 x18 to 4 NVSwitches, 2 Sapphire Rapids sockets, 8x 400 Gb/s NICs",
        xml: include_str!("../../fixtures/hgx-h200-8.xml"),
    },
    Fixture {
        name: "hgx-b200-8",
        description:
            "8x B200 SXM, NVLink 5 x18 to 2 NVSwitches, 2 Emerald Rapids sockets, 8x 400 Gb/s NICs",
        xml: include_str!("../../fixtures/hgx-b200-8.xml"),
    },
    Fixture {
        name: "gb200-nvl72-tray",
        description:
            "GB200 NVL72 tray: 4x B200 (NVLink 5 x18 to the rack), 2 Grace (C2C), 4x 400 Gb/s; --nodes 18 = one NVLink domain",
        xml: include_str!("../../fixtures/gb200-nvl72-tray.xml"),
    },
    Fixture {
        name: "dgx-a100-8",
        description:
            "DGX A100: 8x A100 SXM, NVLink 3 x12 to 6 NVSwitches, 2 AMD Rome sockets (NPS4), 8x HDR 200 Gb/s",
        xml: include_str!("../../fixtures/dgx-a100-8.xml"),
    },
    Fixture {
        name: "a100-sxm-2",
        description: "cloud VM slice: 2x A100 SXM of an NVSwitch board (12 NVLinks each), virtio NIC",
        xml: include_str!("../../fixtures/a100-sxm-2.xml"),
    },
    Fixture {
        name: "a100-sxm-4",
        description: "cloud VM slice: 4x A100 SXM of an NVSwitch board (12 NVLinks each), virtio NIC",
        xml: include_str!("../../fixtures/a100-sxm-4.xml"),
    },
    Fixture {
        name: "pcie-rtx4000ada-2",
        description: "workstation: 2x RTX 4000 Ada (PCIe Gen4, no NVLink) behind one host bridge, 1 socket",
        xml: include_str!("../../fixtures/pcie-rtx4000ada-2.xml"),
    },
    Fixture {
        name: "pcie-rtxpro6000-8",
        description:
            "8x RTX PRO 6000 Blackwell (PCIe Gen5, no NVLink), 2 sockets over UPI, 2 PCIe switches per socket",
        xml: include_str!("../../fixtures/pcie-rtxpro6000-8.xml"),
    },
    Fixture {
        name: "pcie-rtx4090-8",
        description:
            "8x GeForce RTX 4090 (PCIe Gen4, no NVLink, driver refuses P2P: SHM), 2 sockets over UPI, 2 PCIe switches per socket",
        xml: include_str!("../../fixtures/pcie-rtx4090-8.xml"),
    },
    Fixture {
        name: "pcie-rtx5090-8",
        description:
            "8x GeForce RTX 5090 (PCIe Gen5, no NVLink, driver refuses P2P: SHM), 2 sockets over UPI, GPUs on root ports",
        xml: include_str!("../../fixtures/pcie-rtx5090-8.xml"),
    },
    Fixture {
        name: "pcie-l40s-4",
        description: "4x L40S (PCIe Gen4, no NVLink) behind one PCIe switch, 1 socket: P2P between all",
        xml: include_str!("../../fixtures/pcie-l40s-4.xml"),
    },
    Fixture {
        name: "pcie-l40s-8",
        description:
            "8x L40S (PCIe Gen4, no NVLink), one PCIe switch of 4 per socket, 2 sockets over UPI: P2P within a socket",
        xml: include_str!("../../fixtures/pcie-l40s-8.xml"),
    },
    Fixture {
        name: "pcie-h100-2-nvbridge",
        description: "2x H100 PCIe joined by an NVLink bridge (12 NVLink 4 links, 600 GB/s), 1 socket",
        xml: include_str!("../../fixtures/pcie-h100-2-nvbridge.xml"),
    },
    Fixture {
        name: "hgx-h100-4",
        description:
            "HGX H100 4-GPU: 4x H100 SXM, 6 NVLinks to each peer (no NVSwitch), 2 Sapphire Rapids sockets, 4x 400 Gb/s NICs",
        xml: include_str!("../../fixtures/hgx-h100-4.xml"),
    },
    Fixture {
        name: "hgx-h800-8",
        description:
            "8x H800 SXM, NVLink 4 x8 to 4 NVSwitches (400 GB/s), 2 Sapphire Rapids sockets, 8x 400 Gb/s NICs",
        xml: include_str!("../../fixtures/hgx-h800-8.xml"),
    },
    Fixture {
        name: "hgx-h20-8",
        description:
            "8x H20 (Hopper, sm 90), NVLink 4 x18 to 4 NVSwitches, 2 Sapphire Rapids sockets, 8x 400 Gb/s NDR NICs",
        xml: include_str!("../../fixtures/hgx-h20-8.xml"),
    },
    Fixture {
        name: "b200-sxm-2",
        description: "pod/VM slice: 2x B200 SXM of an NVSwitch board (18 NVLink 5 links each), virtio NIC",
        xml: include_str!("../../fixtures/b200-sxm-2.xml"),
    },
    Fixture {
        name: "pcie-l40s-1-400g",
        description:
            "1x L40S (PCIe Gen4) and one ConnectX-7 400GbE port per node (a pod's GPU and SR-IOV interface); --nodes N",
        xml: include_str!("../../fixtures/pcie-l40s-1-400g.xml"),
    },
    Fixture {
        name: "dgx-spark",
        description: "DGX Spark: 1 GB10 (sm 121, Arm CPU by NVLink-C2C) and a ConnectX-7 200 Gb/s port, no GDR; --nodes 2",
        xml: include_str!("../../fixtures/dgx-spark.xml"),
    },
    Fixture {
        name: "aws-p4d",
        description:
            "AWS p4d.24xlarge: 8x A100 SXM, NVLink 3 x12, 2 Cascade Lake sockets, 4x 100 Gb/s EFA",
        xml: include_str!("../../fixtures/aws-p4d.xml"),
    },
    Fixture {
        name: "aws-p5",
        description:
            "AWS p5.48xlarge: 8x H100 SXM, NVLink 4 x18, 2 AMD sockets, 32x 100 Gb/s EFA as 8 NICs of 400 Gb/s",
        xml: include_str!("../../fixtures/aws-p5.xml"),
    },
    Fixture {
        name: "aws-p5en",
        description:
            "AWS p5en.48xlarge (inferred): 8x H200 SXM, 2 Sapphire Rapids, 16x 200 Gb/s EFA as 8 NCCL NICs",
        xml: include_str!("../../fixtures/aws-p5en.xml"),
    },
    Fixture {
        name: "aws-p6-b300",
        description:
            "AWS p6-b300.48xlarge: 8x B300 (sm 103), NVLink 5 x18, 16x 400 Gb/s EFA as 8 NCCL NICs of 800 Gb/s",
        xml: include_str!("../../fixtures/aws-p6-b300.xml"),
    },
    Fixture {
        name: "aws-g7e-1gpu",
        description:
            "AWS g7e.8xlarge: 1x RTX PRO 6000 Blackwell Server (PCIe Gen5), 1x 100 Gb/s EFA without GDR; --nodes N",
        xml: include_str!("../../fixtures/aws-g7e-1gpu.xml"),
    },
    Fixture {
        name: "azure-ndv4",
        description:
            "Azure ND A100 v4: 8x A100 SXM, NVLink 3 x12, AMD Rome in 4 NUMA nodes, 8x HDR 200 Gb/s",
        xml: include_str!("../../fixtures/azure-ndv4.xml"),
    },
    Fixture {
        name: "azure-ndv5",
        description:
            "Azure ND H100 v5: 8x H100 SXM, NVLink 4 x18, 2 Sapphire Rapids sockets, 8x NDR 400 Gb/s",
        xml: include_str!("../../fixtures/azure-ndv5.xml"),
    },
    Fixture {
        name: "gcp-a3-high",
        description:
            "GCP a3-highgpu-8g: 8x H100 SXM, NVLink 4 x18, 2 Sapphire Rapids sockets, 4x 200 Gb/s TCPX NICs",
        xml: include_str!("../../fixtures/gcp-a3-high.xml"),
    },
    Fixture {
        name: "gcp-a3-mega",
        description:
            "GCP a3-megagpu-8g: 8x H100 SXM, NVLink 4 x18, 2 Sapphire Rapids sockets, 8x 200 Gb/s TCPXO NICs",
        xml: include_str!("../../fixtures/gcp-a3-mega.xml"),
    },
    Fixture {
        name: "gcp-h200-1gpu",
        description:
            "GCP H200 RDMA node (A3 Ultra class) as a 1-GPU pod: 1x H200 SXM and its 400 Gb/s RoCE NIC; --nodes N",
        xml: include_str!("../../fixtures/gcp-h200-1gpu.xml"),
    },
];

/// The fixture used when no GPU is found.
pub const DEFAULT_FIXTURE: &str = "hgx-h200-8";

pub fn find(name: &str) -> Option<&'static Fixture> {
    FIXTURES.iter().find(|f| f.name == name)
}

pub fn names() -> Vec<&'static str> {
    FIXTURES.iter().map(|f| f.name).collect()
}
