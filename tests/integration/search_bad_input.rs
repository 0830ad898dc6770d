//! Bad input for the search stage exits with code 2 and one line naming the input.

use crate::common::planner;
use predicates::str::contains;
use std::path::PathBuf;

const CAPTURE_XML: &str = include_str!("../../fixtures/h200x2-nvswitch-vm.xml");
const GRAPH_XML: &str = include_str!("../golden/h200x2-nvswitch-vm/graph.xml");

fn write_temp(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("planner-search-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The capture topology with the second GPU's PCI block cut out.
fn one_gpu_topology() -> String {
    let body = &CAPTURE_XML[CAPTURE_XML.find("<system").unwrap()..];
    let start = body.find("    <pci busid=\"0000:00:07.0\"").unwrap();
    let end = start + body[start..].find("    </pci>\n").unwrap() + "    </pci>\n".len();
    format!("{}{}", &body[..start], &body[end..])
}

// One GPU on one node is no bad input: NCCL searches it (tests/integration/single_gpu.rs).

#[test]
fn single_gpu_per_node_across_nodes_is_fine() {
    // One GPU per node over 2 nodes: a 2-rank ring through the NICs.
    let topo = write_temp("one-gpu-2n.xml", &one_gpu_topology());
    planner()
        .args(["channels", "--topo", topo.to_str().unwrap(), "--nodes", "2"])
        .assert()
        .success()
        .stdout(contains("Channel 00/02 : 0 1"));
}

#[test]
fn gpus_that_cannot_reach_each_other() {
    // Second GPU moved under a CPU of another host and NVLinks removed: no path.
    let body = &CAPTURE_XML[CAPTURE_XML.find("<system").unwrap()..];
    let no_nvlink = body.replace(
        "        <nvlink target=\"fffffff:ff:ff.0\" count=\"18\" tclass=\"0x068000\"/>\n",
        "",
    );
    let start = no_nvlink.find("    <pci busid=\"0000:00:07.0\"").unwrap();
    let end = start + no_nvlink[start..].find("    </pci>\n").unwrap() + "    </pci>\n".len();
    let second = &no_nvlink[start..end];
    let mut text = format!("{}{}", &no_nvlink[..start], &no_nvlink[end..]);
    let other_host = format!(
        "  </cpu>\n  <cpu host_hash=\"0x1234\" numaid=\"-1\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"207\">\n{second}  </cpu>\n"
    );
    text = text.replacen("  </cpu>\n", &other_host, 1);
    let topo = write_temp("unreachable.xml", &text);
    planner()
        .args(["channels", "--topo", topo.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(contains("unreachable.xml"))
        .stderr(contains("GPU"));
}

#[test]
fn several_nodes_without_a_nic() {
    planner()
        .args(["channels", "--fixture", "pcie-rtx4000ada-2", "--nodes", "2"])
        .assert()
        .code(2)
        .stderr(contains("NIC"));
}

#[test]
fn rank_out_of_range() {
    planner()
        .args(["channels", "--fixture", "h200x2-nvswitch-vm", "--rank", "2"])
        .assert()
        .code(2)
        .stderr(contains("--rank 2"));
}

fn graph_file_fails(name: &str, text: &str, expect: &str) {
    let path = write_temp(name, text);
    planner()
        .args([
            "channels",
            "--fixture",
            "h200x2-nvswitch-vm",
            "--graph",
            path.to_str().unwrap(),
        ])
        .assert()
        .code(2)
        .stderr(contains(name))
        .stderr(contains(expect));
}

#[test]
fn graph_xml_with_an_unknown_gpu() {
    // The capture's ring graph, with one GPU renamed to dev 5 (the machine has 0 and 1).
    let text = GRAPH_XML.replacen("<gpu dev=\"0x1\"/>", "<gpu dev=\"0x5\"/>", 1);
    graph_file_fails("unknown-gpu.xml", &text, "no such GPU");
}

#[test]
fn graph_xml_with_a_channel_count_that_disagrees() {
    let text = GRAPH_XML.replacen("nchannels=\"12\"", "nchannels=\"11\"", 1);
    graph_file_fails("count.xml", &text, "12 <channel> elements");
}

#[test]
fn graph_xml_with_a_short_channel() {
    let text = GRAPH_XML.replacen("      <gpu dev=\"0x1\"/>\n", "", 1);
    graph_file_fails("short.xml", &text, "1 GPUs listed");
}

#[test]
fn graph_xml_with_a_gpu_twice_in_a_channel() {
    let text = GRAPH_XML.replacen("<gpu dev=\"0x1\"/>", "<gpu dev=\"0\"/>", 1);
    graph_file_fails("twice.xml", &text, "appears twice");
}

#[test]
fn graph_xml_with_a_bad_type_or_pattern() {
    let text = GRAPH_XML.replacen("typeintra=\"NVL\"", "typeintra=\"XYZ\"", 1);
    graph_file_fails("type.xml", &text, "not a path type");
    let text = GRAPH_XML.replacen("pattern=\"4\"", "pattern=\"9\"", 1);
    graph_file_fails("pattern.xml", &text, "pattern 9");
}

#[test]
fn graph_xml_that_is_not_xml_or_missing() {
    graph_file_fails(
        "garbage.xml",
        "<graphs version=\"1\">\n<graph",
        "garbage.xml",
    );
    planner()
        .args([
            "channels",
            "--fixture",
            "h200x2-nvswitch-vm",
            "--graph",
            "/nonexistent/g.xml",
        ])
        .assert()
        .code(2)
        .stderr(contains("/nonexistent/g.xml"));
}

#[test]
fn graph_file_round_trip_through_the_cli() {
    // The capture's own graph dump, fed back, gives the searched result and the same dump.
    // The capture ran with NCCL_NVLS_ENABLE=0, so its NVLS graph (id 3) is empty.
    let path = write_temp("graph.xml", GRAPH_XML);
    let out = planner()
        .env("NCCL_NVLS_ENABLE", "0")
        .args([
            "channels",
            "--fixture",
            "h200x2-nvswitch-vm",
            "--graph",
            path.to_str().unwrap(),
            "--graph-xml",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(String::from_utf8(out).unwrap(), GRAPH_XML);
}

#[test]
fn channels_searches_nvls_where_nccl_would() {
    // With NVLS allowed (NCCL's default), the 2x H200 NVSwitch machine gets an
    // NVLS graph: one head per GPU, 2 channels; `--nvls off` or
    // NCCL_NVLS_ENABLE=0 leaves it unsearched, as in the capture.
    let run = |env: Option<&str>, extra: &[&str]| {
        let mut cmd = planner();
        cmd.env_remove("NCCL_NVLS_ENABLE");
        if let Some(v) = env {
            cmd.env("NCCL_NVLS_ENABLE", v);
        }
        let mut args = vec!["channels", "--fixture", "h200x2-nvswitch-vm", "--graph-xml"];
        args.extend_from_slice(extra);
        let out = cmd
            .args(args)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        String::from_utf8(out).unwrap()
    };
    let nvls_graph = "<graph id=\"3\" pattern=\"5\" crossnic=\"0\" nchannels=\"2\"";
    assert!(run(None, &[]).contains(nvls_graph));
    assert!(!run(None, &["--nvls", "off"]).contains(nvls_graph));
    assert!(!run(Some("0"), &[]).contains(nvls_graph));
}
