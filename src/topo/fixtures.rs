//! Built-in topologies (`fixtures/*.xml`), embedded in the binary so the tool
//! works on a machine with no GPU.

pub struct Fixture {
    pub name: &'static str,
    pub description: &'static str,
    pub xml: &'static str,
}

pub const FIXTURES: &[Fixture] = &[Fixture {
    name: "h200x2-nvswitch-vm",
    description:
        "2x H200 SXM in a VM, 18 NVLinks each to an invisible NVSwitch (real NCCL 2.28.9 dump)",
    xml: include_str!("../../fixtures/h200x2-nvswitch-vm.xml"),
}];

/// The fixture used when no GPU is found.
pub const DEFAULT_FIXTURE: &str = "h200x2-nvswitch-vm";

pub fn find(name: &str) -> Option<&'static Fixture> {
    FIXTURES.iter().find(|f| f.name == name)
}

pub fn names() -> Vec<&'static str> {
    FIXTURES.iter().map(|f| f.name).collect()
}
