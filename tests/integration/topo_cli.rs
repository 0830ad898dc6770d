//! `planner topo` and `planner fixtures` end to end: snapshots of the text
//! output for several fixtures, the --xml/--json/--dot outputs, and every bad
//! input giving one line on stderr and exit code 2.

use crate::common::{planner, run_ok as stdout_of};
use std::path::PathBuf;

/// `text` in the file `name` of this test's scratch directory.
fn scratch(name: &str, text: &str) -> PathBuf {
    crate::common::with_scratch(|s| s.write(name, text))
}

/// Run, expect exit code 2 and exactly one line on stderr; return that line.
fn bad_input(args: &[&str]) -> String {
    let out = planner().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "planner {args:?}: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line on stderr, got {stderr:?}");
    assert!(out.stdout.is_empty(), "nothing on stdout for bad input");
    lines[0].to_string()
}

#[test]
fn snapshot_topo_hgx_h200_8() {
    insta::assert_snapshot!(stdout_of(&["topo", "--fixture", "hgx-h200-8"]));
}

#[test]
fn snapshot_topo_dgx_a100_8() {
    insta::assert_snapshot!(stdout_of(&["topo", "--fixture", "dgx-a100-8"]));
}

#[test]
fn snapshot_topo_capture() {
    insta::assert_snapshot!(stdout_of(&["topo", "--fixture", "h200x2-nvswitch-vm"]));
}

#[test]
fn snapshot_topo_pcie_rtxpro6000_8() {
    insta::assert_snapshot!(stdout_of(&["topo", "--fixture", "pcie-rtxpro6000-8"]));
}

#[test]
fn snapshot_topo_pcie_rtx4000ada_2() {
    insta::assert_snapshot!(stdout_of(&["topo", "--fixture", "pcie-rtx4000ada-2"]));
}

#[test]
fn snapshot_topo_hgx_h100_8_two_nodes() {
    insta::assert_snapshot!(stdout_of(&[
        "topo",
        "--fixture",
        "hgx-h100-8",
        "--nodes",
        "2",
        "--net-latency",
        "1.5"
    ]));
}

#[test]
fn matrix_matches_nvidia_smi_format_of_the_capture() {
    // The capture's `nvidia-smi topo -m` (shared/captures/.../nvidia-smi-topo-m.txt):
    //   \tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
    //   GPU0\t X \tNV18\t0-31\t0\t\tN/A
    // The NCCL dump has no affinity and numaid -1, so those two columns read N/A.
    let out = stdout_of(&["topo", "--fixture", "h200x2-nvswitch-vm"]);
    assert!(out.contains("\n\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"));
    assert!(out.contains("\nGPU0\t X \tNV18\tN/A\tN/A\t\tN/A\n"));
    assert!(out.contains("\nGPU1\tNV18\t X \tN/A\tN/A\t\tN/A\n"));
    // No PCI NIC: no NIC columns and no NIC legend (virtio eth0 is not listed).
    assert!(!out.contains("NIC Legend"));
    // NCCL's view: 18 links x 20.6 GB/s = 370.8 GB/s over NVLink (the capture's
    // log: GPU/0-60 : GPU/0-70 (2/370.8/NVL)).
    assert!(out.contains("NVL 370.8"));
}

#[test]
fn multi_node_reports_net_bandwidth_and_latency() {
    let out = stdout_of(&[
        "topo",
        "--fixture",
        "dgx-a100-8",
        "--nodes",
        "4",
        "--net-latency",
        "2",
    ]);
    // 4 nodes x 8 GPUs = 32 ranks; 8 HDR NICs: 200000 / 8000 = 25 GB/s, x 8 = 200 GB/s.
    assert!(out.contains("4 nodes: 32 ranks (8 GPUs per node)"), "{out}");
    assert!(out.contains("8 x 25.0 GB/s (200000 Mb/s / 8000) = 200.0 GB/s"));
    assert!(out.contains("Network latency: 2 us"));
    let single = stdout_of(&["topo", "--fixture", "dgx-a100-8"]);
    assert!(!single.contains("nodes:"));
}

#[test]
fn xml_output_round_trips_the_capture_byte_exactly() {
    let fixture = include_str!("../../fixtures/h200x2-nvswitch-vm.xml");
    let body = &fixture[fixture.find("<system").unwrap()..];
    assert_eq!(
        stdout_of(&["topo", "--fixture", "h200x2-nvswitch-vm", "--xml"]),
        body
    );
    // -o FILE writes the same bytes, and reading that file back gives them again.
    let path = scratch("capture-out.xml", "");
    let p = path.to_str().unwrap();
    stdout_of(&["topo", "--fixture", "h200x2-nvswitch-vm", "--xml", "-o", p]);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), body);
    assert_eq!(stdout_of(&["topo", "--topo", p, "--xml"]), body);
}

#[test]
fn xml_output_of_every_fixture_loads_back_to_the_same_paths() {
    for name in planner::topo::fixtures::names() {
        let xml = stdout_of(&["topo", "--fixture", name, "--xml"]);
        let path = scratch(&format!("{name}.xml"), &xml);
        let from_file = stdout_of(&["topo", "--topo", path.to_str().unwrap(), "--json"]);
        let from_fixture = stdout_of(&["topo", "--fixture", name, "--json"]);
        let strip = |s: &str| -> serde_json::Value {
            let mut v: serde_json::Value = serde_json::from_str(s).unwrap();
            v["source"] = serde_json::Value::Null;
            v
        };
        assert_eq!(strip(&from_file), strip(&from_fixture), "{name}");
    }
}

#[test]
fn json_output_has_stable_fields() {
    let v: serde_json::Value =
        serde_json::from_str(&stdout_of(&["topo", "--fixture", "hgx-h200-8", "--json"])).unwrap();
    assert_eq!(v["source"], "fixture hgx-h200-8");
    assert_eq!(v["gpus_per_node"], 8);
    assert_eq!(v["gpus"][0]["cpu_affinity"], "0-55,112-167");
    assert_eq!(v["gpus"][7]["numa"], 1);
    assert_eq!(v["nets"][0]["bw_gbs"], 50.0);
    assert_eq!(v["matrix"]["columns"][8], "NIC0");
    assert_eq!(v["matrix"]["rows"][0][1], "NV18");
    assert_eq!(v["matrix"]["rows"][0][8], "PIX");
    assert_eq!(v["matrix"]["rows"][0][10], "NODE");
    assert_eq!(v["matrix"]["rows"][0][12], "SYS");
    // 8 x 7 ordered GPU pairs, 8 x 8 GPU-NIC pairs.
    assert_eq!(v["gpu_paths"].as_array().unwrap().len(), 56);
    assert_eq!(v["net_paths"].as_array().unwrap().len(), 64);
    assert_eq!(v["gpu_paths"][0]["type"], "NVL");
    assert!((v["gpu_paths"][0]["bw_gbs"].as_f64().unwrap() - 370.8).abs() < 1e-3);
    assert_eq!(v["net_paths"][0]["type"], "PIX");
    assert!(v["network"].is_null());
}

#[test]
fn dot_output_is_a_graphviz_graph() {
    let dot = stdout_of(&["topo", "--fixture", "a100-sxm-2", "--dot"]);
    assert!(dot.starts_with("graph topology {\n"));
    assert!(dot.ends_with("}\n"));
    // GPU to NVSwitch: 12 x 20.0 = 240 GB/s; GPU on a Gen4 x16 root port: 24 GB/s.
    assert!(dot.contains("[label=\"NVL 240.0\"]"), "{dot}");
    assert!(dot.contains("[label=\"PCI 24.0\"]"), "{dot}");
    // Six nodes (CPU, 2 GPUs, NIC, NET, NVS) and six undirected edges.
    assert_eq!(dot.matches(" [label=").count(), 12);
}

#[test]
fn fixtures_command_lists_every_fixture() {
    let out = stdout_of(&["fixtures"]);
    for name in planner::topo::fixtures::names() {
        assert!(out.contains(name), "{name} not listed");
    }
    assert!(out.contains("hgx-h200-8") && out.contains("(default when no GPU is found)"));
    let v: serde_json::Value = serde_json::from_str(&stdout_of(&["fixtures", "--json"])).unwrap();
    let list = v["fixtures"].as_array().unwrap();
    assert_eq!(list.len(), planner::topo::fixtures::FIXTURES.len());
    let defaults: Vec<&serde_json::Value> = list.iter().filter(|f| f["default"] == true).collect();
    assert_eq!(defaults.len(), 1);
    assert_eq!(defaults[0]["name"], "hgx-h200-8");
}

#[test]
fn no_gpu_falls_back_to_hgx_h200_8() {
    let out = planner().arg("topo").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stderr}");
    if stderr.contains("no GPU found") {
        // One notice line, then the default fixture's matrix.
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("using built-in fixture hgx-h200-8"));
        assert!(stderr.contains("pass --fixture or --topo to choose"));
        assert!(stdout.starts_with("Topology: fixture hgx-h200-8 (1 node)\n"));
        assert!(stdout.contains("\nGPU0\t X \tNV18\t"));
    } else {
        // A machine with GPUs: the live probe is shown instead.
        assert!(stdout.starts_with("Topology: live probe"), "{stdout}");
    }
}

#[test]
fn unknown_fixture_lists_the_known_ones() {
    let line = bad_input(&["topo", "--fixture", "dgx-h100"]);
    assert!(line.contains("unknown fixture 'dgx-h100'"), "{line}");
    for name in planner::topo::fixtures::names() {
        assert!(line.contains(name), "{line}");
    }
}

#[test]
fn bad_node_counts() {
    let line = bad_input(&["topo", "--fixture", "hgx-h200-8", "--nodes", "0"]);
    assert!(line.contains("--nodes 0"), "{line}");
    let line = bad_input(&["topo", "--fixture", "hgx-h200-8", "--nodes", "100000"]);
    assert!(line.contains("--nodes 100000"), "{line}");
    // A PCIe box without a NIC cannot be joined to another.
    let line = bad_input(&["topo", "--fixture", "pcie-rtx4000ada-2", "--nodes", "2"]);
    assert!(line.contains("no NIC"), "{line}");
}

const CPU: &str =
    r#"<cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">"#;

#[test]
fn zero_gpus() {
    let xml = format!(
        "<system version=\"1\">\n  {CPU}\n    <pci busid=\"0000:01:00.0\" class=\"0x060400\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\"/>\n  </cpu>\n</system>\n"
    );
    let path = scratch("zero-gpus.xml", &xml);
    let line = bad_input(&["topo", "--topo", path.to_str().unwrap()]);
    assert!(
        line.contains("zero-gpus.xml") && line.contains("no GPU"),
        "{line}"
    );
}

#[test]
fn gpu_with_no_path_to_another() {
    // Two hosts (different host_hash) in one file: no link joins their CPUs.
    let gpu = |bus: &str, dev: u32| {
        format!(
            "    <pci busid=\"{bus}\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\n      <gpu dev=\"{dev}\" sm=\"89\" rank=\"{dev}\" gdr=\"1\"/>\n    </pci>\n"
        )
    };
    let xml = format!(
        "<system version=\"1\">\n  <cpu host_hash=\"0x1\" numaid=\"0\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\">\n{}  </cpu>\n  <cpu host_hash=\"0x2\" numaid=\"0\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\">\n{}  </cpu>\n</system>\n",
        gpu("0000:01:00.0", 0),
        gpu("0000:02:00.0", 1)
    );
    let path = scratch("no-path.xml", &xml);
    let line = bad_input(&["topo", "--topo", path.to_str().unwrap()]);
    assert!(line.contains("no path"), "{line}");
}

#[test]
fn malformed_xml_names_file_and_line() {
    let path = scratch(
        "malformed.xml",
        "<system version=\"1\">\n  <cpu numaid=\"0\" arch=\"x86_64\"\n</system>\n",
    );
    let line = bad_input(&["topo", "--topo", path.to_str().unwrap()]);
    assert!(line.contains("malformed.xml:2:"), "{line}");
}

#[test]
fn truncated_xml_names_file_and_line() {
    // Cut the default fixture in the middle of its line 33.
    let text = planner::topo::fixtures::find("hgx-h200-8").unwrap().xml;
    let cut: String = text.chars().take(3000).collect();
    let line_of_cut = cut.matches('\n').count() + 1;
    let path = scratch("truncated.xml", &cut);
    let line = bad_input(&["topo", "--topo", path.to_str().unwrap()]);
    assert!(
        line.contains(&format!("truncated.xml:{line_of_cut}:")),
        "{line} (cut on line {line_of_cut})"
    );
}

#[test]
fn unknown_element_and_attribute_values() {
    let xml = format!("<system version=\"1\">\n  {CPU}\n    <gadget/>\n  </cpu>\n</system>\n");
    let path = scratch("unknown-element.xml", &xml);
    let line = bad_input(&["topo", "--topo", path.to_str().unwrap()]);
    assert!(
        line.contains("unknown-element.xml:3:") && line.contains("gadget"),
        "{line}"
    );

    let xml = "<system version=\"1\">\n  <cpu numaid=\"0\" arch=\"sparc\">\n  </cpu>\n</system>\n";
    let path = scratch("unknown-arch.xml", xml);
    let line = bad_input(&["topo", "--topo", path.to_str().unwrap()]);
    assert!(
        line.contains("unknown-arch.xml:2:") && line.contains("sparc"),
        "{line}"
    );

    let xml = format!(
        "<system version=\"1\">\n  {CPU}\n    <pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" link_width=\"sixteen\">\n      <gpu dev=\"0\" sm=\"89\" rank=\"0\" gdr=\"1\"/>\n    </pci>\n  </cpu>\n</system>\n"
    );
    let path = scratch("bad-width.xml", &xml);
    let line = bad_input(&["topo", "--topo", path.to_str().unwrap()]);
    assert!(
        line.contains("bad-width.xml:3:") && line.contains("sixteen"),
        "{line}"
    );

    let xml = "<system version=\"2\">\n</system>\n";
    let path = scratch("bad-version.xml", xml);
    let line = bad_input(&["topo", "--topo", path.to_str().unwrap()]);
    assert!(
        line.contains("bad-version.xml:1:") && line.contains("version"),
        "{line}"
    );
}

#[test]
fn conflicting_output_flags_are_refused() {
    let out = planner()
        .args(["topo", "--fixture", "hgx-h200-8", "--json", "--xml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn unwritable_output_file_is_bad_input() {
    let line = bad_input(&[
        "topo",
        "--fixture",
        "hgx-h200-8",
        "--xml",
        "-o",
        "/nonexistent-dir/x.xml",
    ]);
    assert!(line.contains("/nonexistent-dir/x.xml"), "{line}");
}

#[test]
fn the_matrix_reads_hex_nvlink_counts_as_the_paths_and_nccl_do() {
    // NCCL reads `count` with strtol base 0: "0x12" is 18. The path table did; the matrix showed no NVLink.
    let text = std::fs::read_to_string(crate::common::golden("topo.xml")).unwrap();
    assert!(text.contains("count=\"18\""));
    let hex = scratch(
        "hex-nvlink-count.xml",
        &text.replace("count=\"18\"", "count=\"0x12\""),
    );
    let decimal = stdout_of(&["topo", "--topo", &crate::common::golden("topo.xml")]);
    let from_hex = stdout_of(&["topo", "--topo", hex.to_str().unwrap()]);
    let body = |s: &str| s.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert!(decimal.contains("NV18"), "{decimal}");
    assert_eq!(body(&from_hex), body(&decimal));
}
