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
            "graph_line_topo_ids"
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
