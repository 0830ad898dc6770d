//! Partial vendor topology files (tests/integration/vendor_topo/, sources in its README): refused without a GPU and
//! without --gpu; with --gpu MODEL, the same topology and channels as the built-in fixture written from the same file;
//! one warning per assumption; and NCCL's merge with a detected XML.

use crate::common::planner;
use planner::search::{self, SearchOptions};
use planner::topo::{build, fixtures, vendor, Cluster};
use serde_json::Value;

fn file(name: &str) -> String {
    format!(
        "{}/tests/integration/vendor_topo/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// (vendor file, --gpu, the fixture hand-written from the same file)
const CASES: [(&str, &str, &str); 4] = [
    ("azure-ndv4-topo.xml", "a100-sxm", "azure-ndv4"),
    ("azure-ndv5-topo.xml", "h100-sxm", "azure-ndv5"),
    ("aws-p4d-24xl-topo.xml", "a100-sxm", "aws-p4d"),
    // p4de (A100 80GB, 10de:20b2) has p4d's tree, EFA and NVLinks: it plans as aws-p4d.
    ("aws-p4de-24xl-topo.xml", "a100-sxm", "aws-p4d"),
];

fn run(args: &[&str]) -> (i32, String, String) {
    // CUDA_VISIBLE_DEVICES="" hides any GPU of the machine the tests run on, so "no GPU" holds there too.
    let out = planner()
        .args(args)
        .env("CUDA_VISIBLE_DEVICES", "")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn without_gpu_each_file_is_refused_in_one_line() {
    for (name, _, _) in CASES {
        let path = file(name);
        let (code, stdout, stderr) = run(&["topo", "--topo", &path]);
        if stdout.contains("merged with the live probe") {
            // A GPU the environment could not hide: NCCL's merge ran instead, which is right on a GPU machine.
            assert_eq!(code, 0, "{stderr}");
            continue;
        }
        assert_eq!(code, 2, "{name}: {stderr}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{name}: {stderr}");
        assert!(lines[0].contains(&path), "names the file: {stderr}");
        assert!(lines[0].contains("--gpu MODEL"), "suggests --gpu: {stderr}");
        assert!(lines[0].contains("h100-sxm"), "lists the models: {stderr}");
    }
}

/// `planner CMD --json` with the NIC names of `names` replaced by net0, net1, ... and "source" removed.
fn json(args: &[&str], names: &[String]) -> Value {
    let (code, mut stdout, stderr) = run(args);
    assert_eq!(code, 0, "{args:?}: {stderr}");
    for (i, n) in names.iter().enumerate() {
        stdout = stdout.replace(&format!("\"{n}\""), &format!("\"net{i}\""));
    }
    let mut v: Value = serde_json::from_str(&stdout).unwrap();
    v.as_object_mut().unwrap().remove("source");
    v
}

#[test]
fn with_gpu_each_file_plans_as_its_fixture() {
    for (name, gpu, fixture) in CASES {
        let path = file(name);
        let fixture_topo = json(&["topo", "--json", "--fixture", fixture], &[]);
        // The only difference by design: the fixtures use the platform's NIC names (mlx5_ib0, rdmap16s27), --gpu
        // writes net0.. in bus-id order, the order the fixtures give their NICs' dev too.
        let nic_names: Vec<String> = fixture_topo["nets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["name"].as_str().unwrap().to_string())
            .collect();
        assert!(!nic_names.is_empty());
        for nodes in ["1", "2"] {
            for cmd in ["topo", "channels"] {
                let want = json(
                    &[cmd, "--json", "--fixture", fixture, "--nodes", nodes],
                    &nic_names,
                );
                let got = json(
                    &[
                        cmd, "--json", "--topo", &path, "--gpu", gpu, "--nodes", nodes,
                    ],
                    &[],
                );
                assert_eq!(
                    got, want,
                    "{name} --gpu {gpu} vs {fixture}: {cmd} --nodes {nodes}"
                );
            }
        }
    }
}

#[test]
fn each_assumption_is_one_warning_printed_once() {
    let path = file("azure-ndv4-topo.xml");
    for cmd in [&["topo"][..], &["channels"], &["explain", "--size", "16M"]] {
        let args: Vec<&str> = cmd
            .iter()
            .copied()
            .chain(["--topo", &path, "--gpu", "a100-sxm"])
            .collect();
        let (code, _, stderr) = run(&args);
        assert_eq!(code, 0, "{stderr}");
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("planner: warning:"))
            .collect();
        // GPUs (model, bus ids, order), NVLinks, NICs (speed), GPUDirect: one line each, each once.
        assert_eq!(warnings.len(), 4, "{cmd:?}: {stderr}");
        for w in &warnings {
            assert!(w.contains(&path), "{w}");
            assert_eq!(stderr.matches(w).count(), 1, "{w}");
        }
        assert!(warnings[0].contains("8 bare PCI endpoints of class 0x03xxxx"));
        assert!(warnings[0].contains("--gpu a100-sxm"));
        assert!(warnings[1].contains("12 NVLink 3 links"));
        assert!(warnings[2].contains("200 Gb/s") && warnings[2].contains("--nic-speed"));
        assert!(warnings[3].contains("GPUDirect"));
    }
    // EFA is known by its PCI id: its speed and the plugin's latency, no --nic-speed hint.
    let (_, _, stderr) = run(&[
        "topo",
        "--topo",
        &file("aws-p4d-24xl-topo.xml"),
        "--gpu",
        "a100-sxm",
    ]);
    let nic = stderr.lines().find(|l| l.contains("0x02xxxx")).unwrap();
    assert!(nic.contains("4 bare PCI endpoints"), "{nic}");
    assert!(
        nic.contains("EFA (1d0f:efa0, p4d/p4de) at 100 Gb/s, latency 75 µs"),
        "{nic}"
    );
    assert!(!nic.contains("--nic-speed"), "{nic}");
}

#[test]
fn nic_speed_and_bad_flags() {
    let path = file("azure-ndv5-topo.xml");
    let (code, stdout, stderr) = run(&[
        "topo",
        "--json",
        "--topo",
        &path,
        "--gpu",
        "h100-sxm",
        "--nic-speed",
        "200",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    for net in v["nets"].as_array().unwrap() {
        assert_eq!(net["speed_mbps"].as_f64(), Some(200000.0));
    }
    assert!(stderr.contains("200 Gb/s (--nic-speed)"), "{stderr}");

    for (args, says) in [
        (
            vec!["--topo", path.as_str(), "--gpu", "v100-sxm"],
            "unknown --gpu 'v100-sxm'",
        ),
        (
            vec!["--fixture", "azure-ndv5", "--gpu", "h100-sxm"],
            "need --topo FILE",
        ),
        (
            vec![
                "--topo",
                path.as_str(),
                "--gpu",
                "h100-sxm",
                "--nic-speed",
                "0",
            ],
            "invalid --nic-speed 0",
        ),
    ] {
        let mut full = vec!["topo"];
        full.extend(args);
        let (code, _, stderr) = run(&full);
        assert_eq!(code, 2, "{full:?}: {stderr}");
        assert!(stderr.contains(says), "{full:?}: {stderr}");
    }
    // A complete file needs no --gpu, and says so rather than ignoring it.
    let complete = format!("{}/fixtures/azure-ndv5.xml", env!("CARGO_MANIFEST_DIR"));
    let (code, _, stderr) = run(&["topo", "--topo", &complete, "--gpu", "h100-sxm"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("already has <gpu> elements"), "{stderr}");
}

/// NCCL's merge on the machine the fixture describes: the Azure NDv4 file merged with what detection writes there
/// (the fixture, used as the detected XML: same bus ids) gives the fixture's channels; merged with a machine whose
/// bus ids the file does not name (the real 2x H200 capture), every file branch is trimmed and the probe is left.
#[test]
fn merge_with_detection_as_nccl_does() {
    let parse = |text: &str, name: &str| planner::xml::parse(text, name).unwrap();
    let vendor_file = parse(
        &std::fs::read_to_string(file("azure-ndv4-topo.xml")).unwrap(),
        "ndv4",
    );
    assert!(vendor::is_partial(&vendor_file));
    let detected = parse(fixtures::find("azure-ndv4").unwrap().xml, "fixture");
    let merged = vendor::merge_with_detected(&vendor_file, &detected);
    let channels = |root: &planner::xml::XmlNode| {
        let cluster = Cluster {
            node: build::from_xml(root, "test").unwrap(),
            n_nodes: 2,
            net_latency_us: 0.0,
        };
        let r = search::search(&cluster, &SearchOptions::default()).unwrap();
        (
            r.graphs.ring.n_channels,
            r.graphs.ring.bw_intra,
            r.graphs.ring.bw_inter,
            r.graphs.tree.n_channels,
            r.connection.n_channels,
        )
    };
    assert_eq!(channels(&merged), channels(&detected));
    // The file's attributes stay: no vendor/device was detected on the switches, and the GPUs keep the file's
    // link speed while gaining the detected sm.
    let gpu_pci = merged
        .descendants()
        .into_iter()
        .find(|n| n.attr("busid") == Some("0001:00:00.0"))
        .unwrap();
    assert_eq!(gpu_pci.attr("link_speed"), Some("16 GT/s"));
    assert_eq!(gpu_pci.children[0].attr("sm"), Some("80"));

    let h200 = parse(
        &std::fs::read_to_string(crate::common::golden("topo.xml")).unwrap(),
        "capture",
    );
    let merged = vendor::merge_with_detected(&vendor_file, &h200);
    // The file's endpoints hold nothing that was detected: trimmed. The GPUs hang under the probe's own CPU (the
    // file has no numaid -1); eth0, a virtual NIC with no PCI device, goes under the file's first CPU, as NCCL
    // attaches such a NIC (xml.cc:947-949), which keeps that CPU and nothing else of the file.
    let numaids: Vec<&str> = merged
        .children
        .iter()
        .map(|c| c.attr("numaid").unwrap())
        .collect();
    assert_eq!(numaids, ["0", "-1"], "{merged:?}");
    let file_cpu = &merged.children[0];
    assert_eq!(
        file_cpu.attr("affinity"),
        Some("00000000,00000000,00ffffff")
    );
    assert_eq!(file_cpu.children.len(), 1);
    assert_eq!(file_cpu.children[0].children[0].attr("name"), Some("eth0"));
    let topo = build::from_xml(&merged, "merged").unwrap();
    assert_eq!(topo.gpus().count(), 2);
}

#[test]
fn every_fixture_is_listed_with_its_sources() {
    let (code, listing, _) = run(&["fixtures"]);
    assert_eq!(code, 0);
    let dir = format!("{}/fixtures", env!("CARGO_MANIFEST_DIR"));
    let mut files = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("xml") {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        files += 1;
        let f = fixtures::find(&name)
            .unwrap_or_else(|| panic!("fixtures/{name}.xml is not registered"));
        let line = listing
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("`planner fixtures` lists {name}"));
        assert!(line.contains(f.description), "{line}");
        let comment = f.xml.split("-->").next().unwrap();
        assert!(
            comment.contains("Sources:") || comment.contains("Copied verbatim from"),
            "{name}: its comment names its sources"
        );
    }
    assert_eq!(files, fixtures::FIXTURES.len());
}
