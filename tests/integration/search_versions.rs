//! The search's rules by NCCL version (`search::rules`, issue 16): each modelled rule changes a graph between the
//! families around its first version on a topology, and nothing else; recorded rules name their source.

use crate::common::planner;
use planner::pipeline::Source;
use planner::search::rules::{self, SearchRule, RULES};
use planner::search::{self, SearchOptions};
use predicates::str::contains;

fn cluster_of_topo(rel: &str) -> planner::topo::Cluster {
    Source {
        topo: Some(format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))),
        nodes: 1,
        ..Default::default()
    }
    .load()
    .unwrap()
}

fn at(family: rules::Family) -> SearchOptions {
    SearchOptions {
        family,
        ..SearchOptions::default()
    }
}

#[test]
fn every_rule_names_its_first_tag() {
    for r in RULES {
        let tag = format!("v{}.{}.", r.first.0, r.first.1);
        assert!(r.source.starts_with(&tag), "{}: {}", r.name, r.source);
        assert!(
            r.source.contains(".cc:") || r.source.contains(".h:"),
            "{}",
            r.source
        );
        assert!((2, 18) < r.first && r.first <= rules::NEWEST, "{}", r.name);
    }
    let modelled: Vec<&str> = RULES
        .iter()
        .filter(|r| r.modelled)
        .map(|r| r.name)
        .collect();
    assert_eq!(
        modelled,
        [
            "dup_before_pass2",
            "channel_line_width",
            "max_channels_64",
            "sm100_ladders",
            "sm100_ladder_rungs",
            "graph_line_topo_ids",
            "sm100_ladder_rungs_2_29",
            "sm100_ladder_rungs_2_30"
        ]
    );
}

/// DupBeforePass2 (v2.19.3-1 search.cc:993-1017) on hgx-h100-8's NVLS graph. By hand: one node forces NVLS to
/// min = max = 8 channels (one head per GPU); every channel charges bwIntra on each GPU's NVLink to the NVSwitch
/// in both directions, twice on its head's, so a GPU carries 9 x bwIntra over 8 channels: 40 fits 370.8 GB/s
/// (360), 50 does not (450). Pass 1: 8 x 40/40. 2.19+: pass 2's NVLS branch raises bwInter (unused inside one
/// node) while it is below 2 x bwIntra: 50, then 60, the top of the sm90 ladder -> 40/60. 2.18: pass 2 only
/// raises a non-ring graph's bwIntra one rung (50 on the ladder planner uses; 60 on 2.18's own, which lacks 50),
/// which fails (9 x 50 = 450 > 370.8) -> 40/40. Ring and tree are the same in both (ring 6 x 60
/// is perfect and duplicated to 12 x 30 before or after pass 2; 12 x 40 would need 480 > 370.8).
#[test]
fn dup_before_pass2_shows_on_the_nvls_graph() {
    let cluster = Source {
        fixture: Some("hgx-h100-8".into()),
        nodes: 1,
        ..Default::default()
    }
    .load()
    .unwrap();
    let run = |family| {
        let opts = SearchOptions {
            nvls: true,
            ..at(family)
        };
        search::search(&cluster, &opts).unwrap()
    };
    let (old, new) = (run((2, 18)), run((2, 19)));
    let nvls = |r: &search::SearchResult| {
        let g = r.graphs.nvls.as_ref().unwrap();
        (g.n_channels, g.bw_intra, g.bw_inter)
    };
    assert_eq!(nvls(&old), (8, 40.0, 40.0));
    assert_eq!(nvls(&new), (8, 40.0, 60.0));
    assert_eq!(nvls(&run(rules::NEWEST)), (8, 40.0, 60.0));
    assert_eq!(old.graphs.ring, new.graphs.ring);
    assert_eq!(old.graphs.tree, new.graphs.tree);
    assert_eq!(
        (new.graphs.ring.n_channels, new.graphs.ring.bw_intra),
        (12, 30.0)
    );
}

/// MaxChannels64 (v2.25.1-1 device.h:62, MAXCHANNELS 32 -> 64) on the one-GPU T600 of nccl-tests#329: the ring
/// search stops at maxChannels = MAXCHANNELS/2 (every one-GPU channel fits the 5000 GB/s LOC path), so 16
/// channels x 40 GB/s up to 2.24 and 32 from 2.25; runtime 2 x that, capped at MAXCHANNELS (32 / 64).
#[test]
fn max_channels_64_shows_on_one_gpu() {
    let cluster = cluster_of_topo("tests/integration/logs/nccl-tests-329-t600-topo.xml");
    let shape = |family| {
        let r = search::search(&cluster, &at(family)).unwrap();
        (
            r.graphs.ring.n_channels,
            r.graphs.tree.n_channels,
            r.graphs.ring.bw_intra,
            r.connection.n_channels,
        )
    };
    assert_eq!(shape((2, 18)), (16, 16, 40.0, 32));
    assert_eq!(shape((2, 24)), (16, 16, 40.0, 32));
    assert_eq!(shape((2, 25)), (32, 32, 40.0, 64));
    assert_eq!(shape(rules::NEWEST), (32, 32, 40.0, 64));
    assert!(!rules::has((2, 24), SearchRule::MaxChannels64));
    assert!(rules::has((2, 25), SearchRule::MaxChannels64));
}

/// The same rule leaves multi-GPU fixtures alone: their ring search finds fewer than 16 channels (A100: 6 x 40
/// GB/s fill 12 NVLinks x 20 = 240, duplicated to 12), so the 16-channel cap never binds.
#[test]
fn max_channels_64_does_not_change_multi_gpu_fixtures() {
    for name in [
        "dgx-a100-8",
        "hgx-h100-8",
        "pcie-rtxpro6000-8",
        "h200x2-nvswitch-vm",
    ] {
        for nodes in [1, 2] {
            // pcie-rtxpro6000-8 has no NIC: one node only.
            let Ok(cluster) = (Source {
                fixture: Some(name.into()),
                nodes,
                ..Default::default()
            })
            .load() else {
                assert_eq!((name, nodes), ("pcie-rtxpro6000-8", 2));
                continue;
            };
            let old = search::search(&cluster, &at((2, 24))).unwrap();
            let new = search::search(&cluster, &at((2, 25))).unwrap();
            assert_eq!(old, new, "{name} x {nodes}");
        }
    }
    let a100 = Source {
        fixture: Some("dgx-a100-8".into()),
        nodes: 1,
        ..Default::default()
    }
    .load()
    .unwrap();
    let r = search::search(&a100, &at((2, 24))).unwrap();
    assert_eq!(
        (r.graphs.ring.n_channels, r.graphs.ring.bw_intra),
        (12, 20.0)
    );
}

#[test]
fn channels_takes_an_nccl_version() {
    planner()
        .args([
            "channels",
            "--fixture",
            "a100-sxm-2",
            "--nccl-version",
            "2.19.3",
        ])
        .assert()
        .success();
    planner()
        .args([
            "channels",
            "--fixture",
            "a100-sxm-2",
            "--nccl-version",
            "two",
        ])
        .assert()
        .code(2)
        .stderr(contains("two"));
}

/// Sm100LadderRungs2_29 (v2.29.2-1 search.cc:986 adds 45 to the sm100 one-node ladder) on the public 2x GB300 tray
/// run of NCCL 2.29.7 (tests/integration/blackwell_data, MNNVL fuses the trays into one node of 8 GPUs, 18 NVLink 5
/// x 40.1 = 721.8 GB/s per GPU): the tree searches 16 channels (the ring's) at the first rung with 16 x r <= 721.8:
/// 40 on 2.28's ladder (16 x 50 = 800 is too much), 45 from 2.29 (720), as the log's `Pattern 1, ... nChannels 16,
/// bw 45.000000/45.000000`. The ring (8 x 90 doubled to 16 x 45) is the same in both.
#[test]
fn sm100_45_rung_from_2_29_shows_on_the_gb300_tree() {
    let cluster = Source {
        topo: Some(format!(
            "{}/tests/integration/blackwell_data/gb300-tray.xml",
            env!("CARGO_MANIFEST_DIR")
        )),
        nodes: 2,
        mnnvl: Some(planner::topo::mnnvl::MnnvlEnable::Auto),
        ..Default::default()
    }
    .load()
    .unwrap();
    let tree = |family| {
        let r = search::search(&cluster, &at(family)).unwrap();
        assert_eq!(
            (r.graphs.ring.n_channels, r.graphs.ring.bw_intra),
            (16, 45.0),
            "{family:?}"
        );
        (r.graphs.tree.n_channels, r.graphs.tree.bw_intra)
    };
    assert_eq!(tree((2, 28)), (16, 40.0));
    assert_eq!(tree((2, 29)), (16, 45.0));
    assert_eq!(tree(rules::NEWEST), (16, 45.0));
    let log = std::fs::read_to_string(format!(
        "{}/tests/integration/blackwell_data/gb300-2tray-rank4.log",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    assert!(log.contains(
        "Pattern 1, crossNic 0, nChannels 16, bw 45.000000/45.000000, type NVL/PIX, sameChannels 1"
    ));
    assert!(!rules::has((2, 28), SearchRule::Sm100LadderRungs2_29));
    assert!(rules::has((2, 29), SearchRule::Sm100LadderRungs2_29));
}

/// A slow PCIe board: 4 x GeForce RTX 5060 Ti (sm120) at PCIe Gen3 x4 (joorklee/p2p-bench, tests/data/logs/README.md;
/// topology RECONSTRUCTED). NCCL's GPU-to-GPU path is 4 x 60 / 80 = 3 GB/s (PHB). The sm100 ladders stop at 18 GB/s
/// (19 in 2.25-2.26), and NCCL starts at the last rung when none fits (search.cc `while (speedArray[i] > maxBw &&
/// i < nspeeds-1) i++`), so no ring is found at 18 and NCCL falls back to the "simple order" ring at 0.1 GB/s, type
/// SYS (v2.28.9-1 src/graph/search.cc:1185-1196): planner does the same from 2.25. Before 2.25 an sm100 GPU used
/// the sm90 ladder, whose 3 GB/s rung fits: 1 channel x 3 GB/s, PHB.
#[test]
fn sm100_on_slow_pcie_falls_back_to_simple_order_as_nccl_does() {
    let dir = "tests/data/logs/p2p-bench-4x-rtx5060ti-phb-2.28.9";
    let mut source = Source {
        topo: Some(format!(
            "{}/{dir}/topo-guess.xml",
            env!("CARGO_MANIFEST_DIR")
        )),
        nodes: 1,
        ..Default::default()
    };
    source.nccl_env =
        planner::nccl_env::NcclEnv::from_pairs([("NCCL_P2P_LEVEL".to_string(), "PHB".to_string())]);
    let cluster = source.load().unwrap();
    let ring = |family| {
        let g = search::search(&cluster, &at(family)).unwrap().graphs.ring;
        (
            g.n_channels,
            g.bw_intra,
            g.type_intra.nccl_name(),
            g.channels[0].ranks.clone(),
        )
    };
    for family in [(2, 25), (2, 27), (2, 28), (2, 29), rules::NEWEST] {
        assert_eq!(
            ring(family),
            (1, 0.1, "SYS", vec![0, 1, 2, 3]),
            "{family:?}"
        );
    }
    assert_eq!(ring((2, 24)), (1, 3.0, "PHB", vec![0, 1, 2, 3]));
    // The log (2.28.9, 4 ranks, NCCL_MAX_NCHANNELS=4): rank 0's rings `Channel 00/02 : 0 1 2 3` and `01/02`, the
    // Trees chains, `2 coll channels` and the thresholds of every rank agree with that graph.
    let out = planner()
        .args(["audit", "--topo"])
        .arg(format!("{dir}/topo-guess.xml"))
        .arg(format!("{dir}/nccl.log"))
        .arg("--json")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["differences"], serde_json::json!([]));
    assert_eq!(v["compared"], 61, "{v}");
}
