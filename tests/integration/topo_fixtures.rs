//! Every built-in fixture: its XML round-trips byte for byte, it builds, and the
//! bandwidth-relevant facts come out as NCCL computes them (hand arithmetic in
//! the comments, constants from NCCL 2.28 `topo.h`).

use planner::topo::{build, fixtures, NodeKind, PathType, Topology};
use planner::xml;

fn load(name: &str) -> Topology {
    let f = fixtures::find(name).unwrap_or_else(|| panic!("fixture {name} is registered"));
    build::from_xml(&xml::parse(f.xml, name).unwrap(), name).unwrap()
}

/// The element part of a fixture file (after its leading comment).
fn body(text: &str) -> &str {
    &text[text.find("<system").expect("a <system> element")..]
}

#[test]
fn every_fixture_round_trips_byte_exactly() {
    for f in fixtures::FIXTURES {
        let root = xml::parse(f.xml, f.name).unwrap();
        let written = xml::write(&root);
        assert_eq!(
            written,
            body(f.xml),
            "{}: write(parse(file)) differs",
            f.name
        );
        // And reading our own output gives the same tree (line numbers aside).
        let again = xml::parse(&written, f.name).unwrap();
        assert_eq!(xml::write(&again), written, "{}", f.name);
    }
}

#[test]
fn registry_is_complete_and_documented() {
    let names = fixtures::names();
    for expected in [
        "h200x2-nvswitch-vm",
        "hgx-h100-8",
        "hgx-h200-8",
        "dgx-a100-8",
        "a100-sxm-2",
        "a100-sxm-4",
        "pcie-rtx4000ada-2",
        "pcie-rtxpro6000-8",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), names.len(), "duplicate fixture names");
    assert_eq!(fixtures::DEFAULT_FIXTURE, "hgx-h200-8");
    assert!(fixtures::find(fixtures::DEFAULT_FIXTURE).is_some());
    for f in fixtures::FIXTURES {
        assert!(!f.description.is_empty());
        // Each file opens with a comment that names the fixture and its sources.
        assert!(
            f.xml.starts_with(&format!("<!-- {}:", f.name)),
            "{}",
            f.name
        );
        let comment = &f.xml[..f.xml.find("-->").unwrap()];
        assert!(
            comment.contains("Sources:") || comment.contains("Copied verbatim"),
            "{}: the leading comment must say where the facts come from",
            f.name
        );
    }
}

fn gpu_sms(t: &Topology) -> Vec<u32> {
    t.gpus().map(|(_, g)| g.sm).collect()
}

fn net_speeds(t: &Topology) -> Vec<f64> {
    t.nodes(NodeKind::Net)
        .iter()
        .map(|&n| t.node(n).net().unwrap().speed_mbps)
        .collect()
}

/// Bandwidth of the link from the first GPU to the NVSwitch node.
fn gpu_to_nvswitch_bw(t: &Topology) -> f64 {
    let gpu = t.nodes(NodeKind::Gpu)[0];
    let nvs = t.nodes(NodeKind::Nvs)[0];
    t.path(gpu, nvs).unwrap().bw
}

fn cpu_to_cpu_bw(t: &Topology) -> f64 {
    let cpus = t.nodes(NodeKind::Cpu);
    t.path(cpus[0], cpus[1]).unwrap().bw
}

fn gpu_path(t: &Topology, a: usize, b: usize) -> (PathType, f64) {
    let g = t.nodes(NodeKind::Gpu);
    let p = t.path(g[a], g[b]).unwrap();
    (p.ptype, p.bw)
}

fn gpu_net_path(t: &Topology, gpu: usize, net: usize) -> (PathType, f64) {
    let p = t
        .path(t.nodes(NodeKind::Gpu)[gpu], t.nodes(NodeKind::Net)[net])
        .unwrap();
    (p.ptype, p.bw)
}

#[test]
fn hgx_h100_and_h200_facts() {
    for name in ["hgx-h100-8", "hgx-h200-8"] {
        let t = load(name);
        assert_eq!(gpu_sms(&t), vec![90; 8], "{name}");
        assert!(t.has_nvswitch());
        // 18 NVLink 4 links x 20.6 GB/s (SM90_NVLINK_BW) = 370.8 GB/s per GPU.
        assert!((gpu_to_nvswitch_bw(&t) - 370.8).abs() < 1e-3, "{name}");
        assert_eq!(t.nodes(NodeKind::Cpu).len(), 2);
        // Sapphire Rapids (family 6, model 0x8F): SRP_QPI_BW = 22 GB/s.
        assert!((cpu_to_cpu_bw(&t) - 22.0).abs() < 1e-9, "{name}");
        // 8 NICs of 400 Gb/s = 400000 Mb/s -> 50 GB/s each.
        assert_eq!(net_speeds(&t), vec![400000.0; 8]);
        // GPU0 and its NIC share a Gen5 x16 switch: PIX, 16 lanes x 240 / 80 = 48 GB/s.
        assert_eq!(gpu_net_path(&t, 0, 0), (PathType::Pix, 48.0));
        // GPU0 to a NIC of the other socket goes through an NVLink peer (PXN).
        assert_eq!(gpu_net_path(&t, 0, 7).0, PathType::Pxn);
        assert_eq!(gpu_path(&t, 0, 7).0, PathType::Nvl);
    }
}

#[test]
fn dgx_a100_facts() {
    let t = load("dgx-a100-8");
    assert_eq!(gpu_sms(&t), vec![80; 8]);
    // 12 NVLink 3 links x 20.0 GB/s (SM80_NVLINK_BW) = 240 GB/s.
    assert!((gpu_to_nvswitch_bw(&t) - 240.0).abs() < 1e-9);
    // NPS4: the four NUMA domains that hold GPUs, AMD_BW = 16 GB/s between them.
    assert_eq!(t.nodes(NodeKind::Cpu).len(), 4);
    assert!((cpu_to_cpu_bw(&t) - 16.0).abs() < 1e-9);
    // 8 HDR NICs: 200000 Mb/s -> 25 GB/s.
    assert_eq!(net_speeds(&t), vec![200000.0; 8]);
    // Broadcom Gen4 switches are flattened by NCCL: GPU0 to its NIC is PIX,
    // Gen4 x16 = 16 x 120 / 80 = 24 GB/s.
    assert_eq!(gpu_net_path(&t, 0, 0), (PathType::Pix, 24.0));
}

#[test]
fn a100_slices_facts() {
    for (name, n) in [("a100-sxm-2", 2), ("a100-sxm-4", 4)] {
        let t = load(name);
        assert_eq!(gpu_sms(&t), vec![80; n], "{name}");
        assert!((gpu_to_nvswitch_bw(&t) - 240.0).abs() < 1e-9);
        assert_eq!(gpu_path(&t, 0, n - 1), (PathType::Nvl, 240.0));
        // One virtio NIC through NCCL's sockets: 10000 Mb/s -> 1.25 GB/s, no GDR.
        assert_eq!(net_speeds(&t), vec![10000.0]);
    }
}

#[test]
fn pcie_fixtures_facts() {
    let t = load("pcie-rtx4000ada-2");
    assert_eq!(gpu_sms(&t), vec![89, 89]);
    assert!(!t.has_nvswitch());
    assert!(t.nodes(NodeKind::Net).is_empty());
    // Both GPUs on CPU root ports: PHB, Gen4 x16 = 24 GB/s.
    assert_eq!(gpu_path(&t, 0, 1), (PathType::Phb, 24.0));

    let t = load("pcie-rtxpro6000-8");
    assert_eq!(gpu_sms(&t), vec![120; 8]);
    assert!(!t.has_nvswitch());
    // Emerald Rapids (model 0xCF): ERP_QPI_BW = 40 GB/s.
    assert!((cpu_to_cpu_bw(&t) - 40.0).abs() < 1e-9);
    // Same Gen5 switch: PIX at 48 GB/s; other socket: SYS, limited by the 40 GB/s UPI.
    assert_eq!(gpu_path(&t, 0, 1), (PathType::Pix, 48.0));
    assert_eq!(gpu_path(&t, 0, 2).0, PathType::Phb);
    assert_eq!(gpu_path(&t, 0, 4), (PathType::Sys, 40.0));
}
