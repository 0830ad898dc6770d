//! The live probe's output from the lent 2x H200 machine
//! (bench/results/probe-h200x2-2026-11-29), read back: its paths must be
//! NCCL's, both the capture's and those NCCL logged on the same boot.

use planner::topo::{build, paths::nccl_path_line, NodeKind};
use planner::xml;
use planner::xml::XmlNode;

const DIR: &str = "bench/results/probe-h200x2-2026-11-29";
const PROBE_XML: &str = include_str!("../../bench/results/probe-h200x2-2026-11-29/probe-topo.xml");
const NCCL_XML: &str = include_str!("../../bench/results/probe-h200x2-2026-11-29/nccl-topo.xml");
const NCCL_LOG: &str = include_str!("../../bench/results/probe-h200x2-2026-11-29/nccl-init.log");
const PROBE_STDERR: &str =
    include_str!("../../bench/results/probe-h200x2-2026-11-29/probe-stderr.txt");
const CAPTURE_XML: &str = include_str!("../../fixtures/h200x2-nvswitch-vm.xml");

/// NCCL's path dump in the capture's init log (shared/captures/h200x2-nvswitch-vm/
/// nccl-init-rank0.log), verbatim.
const CAPTURE_GPU_LINES: [&str; 2] = [
    "GPU/0-60 :GPU/0-60 (0/5000.0/LOC) GPU/0-70 (2/370.8/NVL) NVS/0-0 (1/370.8/NVL) CPU/0-ffffffffffffff (1/48.0/PHB) NET/0-0 (3/1.2/PHB) ",
    "GPU/0-70 :GPU/0-60 (2/370.8/NVL) GPU/0-70 (0/5000.0/LOC) NVS/0-0 (1/370.8/NVL) CPU/0-ffffffffffffff (1/48.0/PHB) NET/0-0 (3/1.2/PHB) ",
];

/// A path line without its entries toward NET nodes: the probe that ran
/// there did not list eth0 (see the README next to the results).
fn without_net(line: &str) -> String {
    let (head, entries) = line.split_once(':').unwrap();
    let mut out = format!("{head}:");
    // Entries look like "KIND/id (hops/bw/TYPE) ".
    let mut rest = entries;
    while let Some(close) = rest.find(") ") {
        let entry = &rest[..close + 2];
        if !entry.starts_with("NET/") {
            out.push_str(entry);
        }
        rest = &rest[close + 2..];
    }
    out
}

fn gpu_lines(root: &XmlNode, source: &str) -> Vec<String> {
    let t = build::from_xml(root, source).unwrap();
    t.nodes(NodeKind::Gpu)
        .iter()
        .map(|&g| nccl_path_line(&t, g))
        .collect()
}

fn probe_xml() -> XmlNode {
    xml::parse(PROBE_XML, &format!("{DIR}/probe-topo.xml")).unwrap()
}

#[test]
fn live_probe_gpu_paths_equal_the_captures() {
    let ours: Vec<String> = gpu_lines(&probe_xml(), "live probe")
        .iter()
        .map(|l| without_net(l))
        .collect();
    let expected: Vec<String> = CAPTURE_GPU_LINES.iter().map(|l| without_net(l)).collect();
    // GPU-GPU (NVL, 2 hops through the NVSwitch, 18 x 20.6 = 370.8 GB/s),
    // GPU-NVS and GPU-CPU (PHB, PCIe Gen5 x16 = 48 GB/s).
    assert_eq!(ours, expected);
    assert!(ours[0].contains("GPU/0-70 (2/370.8/NVL)"), "{ours:?}");
    assert!(
        ours[0].contains("CPU/0-ffffffffffffff (1/48.0/PHB)"),
        "{ours:?}"
    );
}

#[test]
fn live_probe_gpu_paths_equal_what_nccl_logged_on_the_same_boot() {
    let logged: Vec<String> = NCCL_LOG
        .lines()
        .filter_map(|l| l.split_once("NCCL INFO ").map(|(_, m)| m))
        .filter(|m| m.starts_with("GPU/") && m.contains(" :"))
        .map(without_net)
        .collect();
    assert_eq!(logged.len(), 2, "{logged:?}");
    let ours: Vec<String> = gpu_lines(&probe_xml(), "live probe")
        .iter()
        .map(|l| without_net(l))
        .collect();
    assert_eq!(ours, logged);
}

#[test]
fn live_probe_xml_is_nccls_dump_of_the_same_boot_but_the_nic() {
    // NCCL 2.28.9 (PyTorch's) dumped its topology on the same boot: the probe's
    // XML is that dump byte for byte, host_hash included, less the <nic> of eth0.
    let mut nccl = xml::parse(NCCL_XML, "nccl-topo.xml").unwrap();
    nccl.children[0].children.retain(|c| c.name != "nic");
    assert_eq!(xml::write(&probe_xml()), xml::write(&nccl));
    // And NCCL's dump of that boot is the capture's, but for the host hash.
    let mut capture = xml::parse(CAPTURE_XML, "capture").unwrap();
    let same_boot = xml::parse(NCCL_XML, "nccl-topo.xml").unwrap();
    capture.children[0].set_attr(
        "host_hash",
        same_boot.children[0].attr("host_hash").unwrap(),
    );
    assert_eq!(xml::write(&same_boot), xml::write(&capture));
}

#[test]
fn live_probe_printed_one_line_per_oddity() {
    let lines: Vec<&str> = PROBE_STDERR.lines().collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines[..3].iter().all(|l| l.starts_with("planner: probe: ")));
    assert!(lines[0].contains("GPU 0000:00:06.0 (18 links), GPU 0000:00:07.0 (18 links)"));
    assert!(lines[1].ends_with("0000:00:06.0, 0000:00:07.0"));
    assert!(lines[2].starts_with("planner: probe: NUMA node -1"));
    assert_eq!(lines[3], "exit code: 0");
}

/// The second live probe (bench/results/integration-h200x2-2026-11-30), after
/// the socket-NIC fix: it finds eth0, so every path line, NET included, is
/// the capture's, and the XML is NCCL's own dump but for the per-boot host hash.
const PROBE2_XML: &str =
    include_str!("../../bench/results/integration-h200x2-2026-11-30/probe-topo.xml");

#[test]
fn second_live_probe_gives_every_capture_path_line() {
    let root = xml::parse(PROBE2_XML, "integration probe-topo.xml").unwrap();
    assert_eq!(gpu_lines(&root, "live probe"), CAPTURE_GPU_LINES);
    let capture_body = &CAPTURE_XML[CAPTURE_XML.find("<system").unwrap()..];
    let mut probe = root.clone();
    let capture = xml::parse(capture_body, "capture").unwrap();
    // The host hash is NCCL's hash of host name and boot id: it changes every boot.
    probe.children[0].set_attr("host_hash", capture.children[0].attr("host_hash").unwrap());
    assert_eq!(xml::write(&probe), capture_body);
}
