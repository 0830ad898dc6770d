//! The fixtures of machines users have and planner lacked (issue 24 item 6): GeForce boxes without P2P, L40S, H100
//! PCIe with an NVLink bridge, the 4-GPU HGX H100 board and 8x H800. Each loads, `topo`/`channels`/`explain` run on it,
//! and the facts a hand calculation gives hold: path types and bandwidths between GPUs, where NCCL's P2P transport
//! applies and where SHM through host memory does, the NVLink bandwidth, and the channels it bounds.

use crate::common::{planner, run_ok};
use serde_json::Value;

const NEW: [&str; 7] = [
    "pcie-rtx4090-8",
    "pcie-rtx5090-8",
    "pcie-l40s-4",
    "pcie-l40s-8",
    "pcie-h100-2-nvbridge",
    "hgx-h100-4",
    "hgx-h800-8",
];

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&run_ok(args)).unwrap()
}

/// (path type, bandwidth GB/s) from GPU `a` to GPU `b` in `topo --json` of `args`.
fn gpu_path(topo: &Value, a: usize, b: usize) -> (String, f64) {
    let p = topo["gpu_paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["from"] == format!("GPU{a}") && p["to"] == format!("GPU{b}"))
        .unwrap_or_else(|| panic!("no path GPU{a} -> GPU{b}"));
    (
        p["type"].as_str().unwrap().to_string(),
        p["bw_gbs"].as_f64().unwrap(),
    )
}

/// `text` in the file `name` of this test's scratch directory.
fn scratch(name: &str, text: &str) -> std::path::PathBuf {
    crate::common::with_scratch(|s| s.write(name, text))
}

fn fixture_topo(name: &str) -> Value {
    json(&["topo", "--fixture", name, "--json"])
}

#[test]
fn each_new_fixture_is_listed_and_runs_topo_channels_and_explain() {
    let list = run_ok(&["fixtures"]);
    for name in NEW {
        assert!(list.contains(name), "{name} not in `planner fixtures`");
        run_ok(&["topo", "--fixture", name]);
        run_ok(&["channels", "--fixture", name]);
        run_ok(&["explain", "--fixture", name, "--size", "16M"]);
        let readme = include_str!("../../README.md");
        assert!(
            readme.contains(&format!("`{name}`")),
            "{name} not in the README table"
        );
    }
}

#[test]
fn geforce_cards_without_p2p_go_through_the_cpu_for_every_pair() {
    // pcie-rtx4090-8: GPUs 0 and 1 share a Gen4 switch, which NCCL would call PIX (P2P). The driver refuses P2P
    // (nvml_p2p="0"), so ncclTopoCheckP2p routes the pair through the CPU: PHB, and the bottleneck is the GPU's Gen4 x16
    // link, 24 GB/s in NCCL's units (as pcie-l40s-4's PIX pairs). Across sockets SYS: min(24, SRP's 22 GB/s UPI) = 22.
    let t = fixture_topo("pcie-rtx4090-8");
    assert_eq!(gpu_path(&t, 0, 1), ("PHB".into(), 24.0));
    assert_eq!(gpu_path(&t, 0, 3), ("PHB".into(), 24.0));
    assert_eq!(gpu_path(&t, 0, 4), ("SYS".into(), 22.0));
    // Every pair beyond NCCL's P2P level (PXB) means its P2P transport declines and SHM carries the hop: no pair
    // may be PIX or PXB on a GeForce box.
    for name in ["pcie-rtx4090-8", "pcie-rtx5090-8"] {
        let t = fixture_topo(name);
        for p in t["gpu_paths"].as_array().unwrap() {
            let ty = p["type"].as_str().unwrap();
            assert!(ty == "PHB" || ty == "SYS", "{name}: {p}");
        }
        // So the ring graph's intra-node type is SYS (it crosses the sockets through host memory).
        let c = json(&["channels", "--fixture", name, "--json"]);
        assert_eq!(c["graphs"]["ring"]["type_intra"], "SYS", "{name}");
    }
    // pcie-rtx5090-8: Gen5 x16 = 48 GB/s on one socket (as pcie-rtxpro6000-8's PIX pairs), SYS min(48, ERP's 40).
    let t = fixture_topo("pcie-rtx5090-8");
    assert_eq!(gpu_path(&t, 0, 1), ("PHB".into(), 48.0));
    assert_eq!(gpu_path(&t, 3, 4), ("SYS".into(), 40.0));
    // The same file without the attribute: the switch pair is PIX again (P2P), so the attribute is what changes it.
    let xml = include_str!("../../fixtures/pcie-rtx4090-8.xml").replace(" nvml_p2p=\"0\"", "");
    let f = scratch("rtx4090-p2p.xml", &xml);
    let t = json(&["topo", "--topo", f.to_str().unwrap(), "--json"]);
    assert_eq!(gpu_path(&t, 0, 1), ("PIX".into(), 24.0));
    assert_eq!(gpu_path(&t, 0, 2).0, "PHB");
}

#[test]
fn l40s_uses_p2p_within_a_switch_and_shm_across_sockets() {
    // pcie-l40s-4: all 4 GPUs under one Gen4 switch: every pair PIX at 24 GB/s, within NCCL's default P2P level.
    let t = fixture_topo("pcie-l40s-4");
    for a in 0..4 {
        for b in (0..4).filter(|&b| b != a) {
            assert_eq!(gpu_path(&t, a, b), ("PIX".into(), 24.0));
        }
    }
    let c = json(&["channels", "--fixture", "pcie-l40s-4", "--json"]);
    assert_eq!(c["graphs"]["ring"]["type_intra"], "PIX");
    // pcie-l40s-8: PIX on a socket, SYS across (min(24, 22) = 22): beyond PXB, so SHM through host memory.
    let t = fixture_topo("pcie-l40s-8");
    assert_eq!(gpu_path(&t, 4, 7), ("PIX".into(), 24.0));
    assert_eq!(gpu_path(&t, 3, 4), ("SYS".into(), 22.0));
}

#[test]
fn nvlink_bandwidths_and_the_channels_they_bound() {
    // NCCL's NVLink 4 bandwidth is 20.6 GB/s per link (SM90_NVLINK_BW).
    // H100 PCIe bridge: 12 links = 247.2 GB/s; HGX H100 4-GPU: 6 per pair = 123.6; H800: 8 to the NVSwitch = 164.8.
    for (name, a, b, bw) in [
        ("pcie-h100-2-nvbridge", 0, 1, 247.2),
        ("hgx-h100-4", 0, 3, 123.6),
        ("hgx-h100-4", 1, 2, 123.6),
        ("hgx-h800-8", 0, 7, 164.8),
    ] {
        let t = fixture_topo(name);
        let (ty, got) = gpu_path(&t, a, b);
        assert_eq!(ty, "NVL", "{name}");
        assert!((got - bw).abs() < 1e-3, "{name}: {got} vs {bw}");
    }
    // The search charges each ring channel's bandwidth on the NVLinks it crosses, so the channels of the ring graph
    // cannot carry more than one GPU's NVLink bandwidth: on H800, n_channels x bw_intra <= 164.8 GB/s (8 x 20 = 160),
    // on the 4-GPU board a GPU's 3 peers give 3 x 123.6 = 370.8 GB/s (12 x 30 = 360).
    for (name, total) in [("hgx-h800-8", 164.8), ("hgx-h100-4", 370.8)] {
        let c = json(&["channels", "--fixture", name, "--json"]);
        let ring = &c["graphs"]["ring"];
        assert_eq!(ring["type_intra"], "NVL", "{name}");
        let sum = ring["n_channels"].as_f64().unwrap() * ring["bw_intra_gbs"].as_f64().unwrap();
        assert!(sum <= total + 1e-3 && sum > 0.0, "{name}: {sum}");
    }
    // H800 sits on NVSwitches, so NVLS is searched; the 4-GPU board has none (no NVSwitch) and the bridge pair neither.
    let c = json(&["channels", "--fixture", "hgx-h800-8", "--json"]);
    assert!(c["graphs"]["nvls"].is_object());
    for name in ["hgx-h100-4", "pcie-h100-2-nvbridge"] {
        let c = json(&["channels", "--fixture", name, "--json"]);
        assert!(c["graphs"]["nvls"].is_null(), "{name}");
    }
}

#[test]
fn gpu_models_of_the_new_cards_fill_a_partial_file() {
    // A bare endpoint of class 0x0300 on one switch with another: --gpu rtx4090 writes sm 89 and nvml_p2p="0", so the
    // pair goes through the CPU (PHB); --gpu l40s leaves it PIX.
    let partial = r#"<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:16:00.0" class="0x060400" vendor="0x1000" device="0xc010" subsystem_vendor="0x1000" subsystem_device="0x100b" link_speed="16.0 GT/s PCIe" link_width="16">
      <pci busid="0000:18:00.0" class="0x030000" vendor="0x10de" device="0x2684" link_speed="16.0 GT/s PCIe" link_width="16"/>
      <pci busid="0000:19:00.0" class="0x030000" vendor="0x10de" device="0x2684" link_speed="16.0 GT/s PCIe" link_width="16"/>
    </pci>
  </cpu>
</system>
"#;
    let f = scratch("partial.xml", partial);
    let path = f.to_str().unwrap();
    for (model, ty) in [("rtx4090", "PHB"), ("rtx5090", "PHB"), ("l40s", "PIX")] {
        let out = planner()
            .args(["topo", "--topo", path, "--gpu", model, "--json"])
            .env_remove("NCCL_TOPO_FILE")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{model}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let t: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(gpu_path(&t, 0, 1).0, ty, "{model}");
        if ty == "PHB" {
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("refuses P2P"),
                "{model}"
            );
        }
    }
    for model in ["h800-sxm", "l40s", "rtx4090", "rtx5090", "h100-pcie"] {
        assert!(planner::topo::gpu_models::find(model).is_some(), "{model}");
    }
    assert_eq!(
        planner::topo::gpu_models::find("h800-sxm").unwrap().nvlinks,
        8
    );
    assert_eq!(planner::topo::gpu_models::find("rtx5090").unwrap().sm, 120);
}

/// The fixtures added for the public points no fixture described (tests/data/expect-train cases E06, E07, E10, E20,
/// E23, E24, E25; `planner::expect::fit::PLACED`).
const PLACED: [&str; 7] = [
    "hgx-h20-8",
    "b200-sxm-2",
    "pcie-l40s-1-400g",
    "dgx-spark",
    "aws-p6-b300",
    "aws-g7e-1gpu",
    "gcp-h200-1gpu",
];

#[test]
fn each_placed_fixture_is_listed_and_runs_at_the_sources_node_count() {
    let list = run_ok(&["fixtures"]);
    let readme = include_str!("../../README.md");
    for name in PLACED {
        assert!(list.contains(name), "{name} not in `planner fixtures`");
        assert!(
            readme.contains(&format!("`{name}`")),
            "{name} not in the README table"
        );
        // the node counts of the sources: 2 (8 for g7e), one node for the 2-GPU slice
        let nodes = match name {
            "b200-sxm-2" => "1",
            "aws-g7e-1gpu" => "8",
            _ => "2",
        };
        run_ok(&["topo", "--fixture", name, "--nodes", nodes]);
        run_ok(&["channels", "--fixture", name, "--nodes", nodes]);
        run_ok(&[
            "explain",
            "--fixture",
            name,
            "--nodes",
            nodes,
            "--size",
            "16M",
        ]);
        run_ok(&[
            "expect",
            "--fixture",
            name,
            "--nodes",
            nodes,
            "--size",
            "1M",
        ]);
    }
    // every placed case's flags name a fixture of this build
    for (case, _, args) in planner::expect::fit::PLACED {
        let fixture = args
            .split_whitespace()
            .skip_while(|w| *w != "--fixture")
            .nth(1)
            .unwrap();
        assert!(
            planner::topo::fixtures::find(fixture).is_some(),
            "{case}: {fixture}"
        );
    }
}

#[test]
fn placed_fixtures_have_the_facts_their_sources_state() {
    // (fixture, sm, NIC bandwidth GB/s = speed / 8000, NIC gdr, GPU-NIC path type and bandwidth)
    // H20 and B200 pairs: NVLink 4 18 x 20.6 = 370.8 GB/s, NVLink 5 18 x 40.1 = 721.8 GB/s.
    let nvl = |t: &Value, a: usize, b: usize, bw: f64| {
        let (ty, got) = gpu_path(t, a, b);
        assert_eq!(ty, "NVL");
        assert!((got - bw).abs() < 1e-3, "{got} vs {bw}");
    };
    let t = fixture_topo("hgx-h20-8");
    nvl(&t, 0, 7, 370.8);
    assert!(t["gpus"].as_array().unwrap().iter().all(|g| g["sm"] == 90));
    let t = fixture_topo("b200-sxm-2");
    nvl(&t, 0, 1, 721.8);
    for (name, sm, nic_gbs, gdr, path, path_gbs) in [
        // 400GbE = 50 GB/s; GPU (Gen4 x16, 24 GB/s) and NIC on two root ports: PHB at the GPU's 24
        ("pcie-l40s-1-400g", 89, 50.0, true, "PHB", 24.0),
        // 200 Gb/s = 25 GB/s, no GDR; the NIC's Gen5 x8 link = 24 GB/s
        ("dgx-spark", 121, 25.0, false, "PHB", 24.0),
        // 100 Gb/s EFA = 12.5 GB/s, GDR off (the source's log)
        ("aws-g7e-1gpu", 120, 12.5, false, "PHB", 12.5),
        // A3 Ultra's 400 Gb/s RoCE NIC on the GPU's Gen5 switch: PIX at 48 GB/s (Gen5 x16)
        ("gcp-h200-1gpu", 90, 50.0, true, "PIX", 48.0),
        // 2x 400 Gb/s EFA per GPU as one 800 Gb/s NCCL NIC (100 GB/s) on a Gen6 x16 switch: 16 x 480 / 80 = 96 GB/s
        ("aws-p6-b300", 103, 100.0, true, "PIX", 96.0),
    ] {
        let t = fixture_topo(name);
        assert_eq!(t["gpus"][0]["sm"], sm, "{name}");
        let net = &t["nets"][0];
        assert!(
            (net["bw_gbs"].as_f64().unwrap() - nic_gbs).abs() < 1e-6,
            "{name}"
        );
        assert_eq!(net["gdr"], gdr, "{name}");
        let p = &t["net_paths"][0];
        assert_eq!(p["type"], path, "{name}");
        assert!(
            (p["bw_gbs"].as_f64().unwrap() - path_gbs).abs() < 1e-6,
            "{name}: {p}"
        );
    }
    // aws-p6-b300: 8 GPUs, 8 NCCL NICs, every GPU pair NVLink 5
    let t = fixture_topo("aws-p6-b300");
    assert_eq!(t["nets"].as_array().unwrap().len(), 8);
    nvl(&t, 0, 7, 721.8);
}

/// `--gpu` accepts every card of the fixtures above and of issue 24's list, writes its compute capability, and its
/// GPU class has the expected model's constants (tuning-tables/expect/gpu-<class>.json).
#[test]
fn gpu_models_cover_every_card_of_the_fixtures_with_expected_constants() {
    // (model, sm, NVLinks, PCIe gen, the class the expected model uses)
    let cards = [
        ("rtx4090", 89, 0, 4, "sm89"),
        ("rtx5090", 120, 0, 5, "sm120"),
        ("l40s", 89, 0, 4, "sm89"),
        ("h100-pcie", 90, 0, 5, "sm90"),
        ("h800-sxm", 90, 8, 5, "sm90"),
        ("h20", 90, 18, 5, "sm90"),
        ("rtxpro6000", 120, 0, 5, "sm120"),
        ("gb10", 121, 0, 5, "sm120"),
    ];
    let partial = r#"<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:16:00.0" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000" subsystem_device="0x100b" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:18:00.0" class="0x030200" vendor="0x10de" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0000:19:00.0" class="0x030200" vendor="0x10de" link_speed="32.0 GT/s PCIe" link_width="16"/>
    </pci>
  </cpu>
</system>
"#;
    let f = scratch("partial-cards.xml", partial);
    let params = planner::expect::Params::builtin().unwrap();
    for (model, sm, nvlinks, gen, class) in cards {
        let m = planner::topo::gpu_models::find(model).unwrap_or_else(|| panic!("--gpu {model}"));
        assert_eq!(
            (m.sm, m.nvlinks, m.pcie_gen, m.pcie_width),
            (sm, nvlinks, gen, 16),
            "{model}"
        );
        assert!(m.source_url.starts_with("https://"), "{model}");
        let out = planner()
            .args([
                "topo",
                "--topo",
                f.to_str().unwrap(),
                "--gpu",
                model,
                "--json",
            ])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{model}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let t: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            t["gpus"].as_array().unwrap().iter().all(|g| g["sm"] == sm),
            "{model}"
        );
        // NVLink models join the pair over NVLink, the PCIe cards over the switch (or the CPU without P2P)
        let ty = gpu_path(&t, 0, 1).0;
        assert_eq!(ty == "NVL", nvlinks > 0, "{model}: {ty}");
        assert_eq!(planner::expect::gpu_class(sm), class, "{model}");
        let file = params
            .file("gpu", class)
            .unwrap_or_else(|| panic!("{model}: no gpu-{class}.json"));
        assert!(!file.params.is_empty(), "{model}");
        assert!(params.get("gpu", class, "launch_eager_us") > 0.0, "{model}");
    }
}
