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
];

/// The fixture used when no GPU is found.
pub const DEFAULT_FIXTURE: &str = "hgx-h200-8";

pub fn find(name: &str) -> Option<&'static Fixture> {
    FIXTURES.iter().find(|f| f.name == name)
}

pub fn names() -> Vec<&'static str> {
    FIXTURES.iter().map(|f| f.name).collect()
}
