//! A one-GPU communicator (issue 14): NCCL searches and logs graphs for it and its collectives are a local copy.
//! Checked against nccl-tests#329 (1x T600, NCCL 2.19.3, its own topology dump) and a one-GPU H200 topology (the
//! 2x H200 capture with its second GPU cut out: what the live probe sees on a one-GPU H200 machine).

use crate::common::planner;
use planner::model::input::NvlsFlag;
use planner::model::table;
use planner::nccl_env::NcclEnv;
use planner::nccl_log::NcclLog;
use planner::pipeline::{self, Source};
use planner::search::{self, Pattern, SearchOptions};
use planner::topo::PathType;
use predicates::str::contains;

const T600_TOPO: &str = "tests/integration/logs/nccl-tests-329-t600-topo.xml";
const T600_LOG: &str = "tests/integration/logs/nccl-tests-329-t600-2.19.3.log";
const CAPTURE_XML: &str = include_str!("../../fixtures/h200x2-nvswitch-vm.xml");

fn path(rel: &str) -> String {
    format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))
}

fn t600() -> planner::topo::Cluster {
    Source {
        topo: Some(path(T600_TOPO)),
        nodes: 1,
        ..Default::default()
    }
    .load()
    .unwrap()
}

/// The 2x H200 capture with its second GPU's PCI block cut out.
fn one_h200_file() -> std::path::PathBuf {
    let body = &CAPTURE_XML[CAPTURE_XML.find("<system").unwrap()..];
    let start = body.find("    <pci busid=\"0000:00:07.0\"").unwrap();
    let end = start + body[start..].find("    </pci>\n").unwrap() + "    </pci>\n".len();
    let dir = std::env::temp_dir().join(format!("planner-single-gpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("one-h200.xml");
    std::fs::write(&file, format!("{}{}", &body[..start], &body[end..])).unwrap();
    file
}

/// NCCL 2.19.3 on the T600 of nccl-tests#329: ring and tree of 16 channels at 40 GB/s, type LOC/PIX, 32 runtime
/// channels. By hand from v2.19.3-1 search.cc: one GPU without NET gives maxBw = LOC_BW (5000); the sm75 one-node
/// ladder starts at 40; a one-GPU ring closes on itself through the LOC path (5000 GB/s), so every channel fits
/// until maxChannels = MAXCHANNELS/2 = 16 (MAXCHANNELS 32 in 2.19) -> perfect; dup: min(32, 16) = 16, nothing to
/// add. The tree (min = max = 16) becomes pattern TREE (ngpus == 1), same result. Runtime: 2 x 16 = 32.
#[test]
fn t600_issue329_graphs_are_nccl_2_19s() {
    let log = NcclLog::load(&path(T600_LOG)).unwrap();
    assert!(log.version.as_deref().unwrap().starts_with("2.19.3"));
    let opts = SearchOptions {
        family: (2, 19),
        ..SearchOptions::default()
    };
    let result = search::search(&t600(), &opts).unwrap();
    let ours = [&result.graphs.ring, &result.graphs.tree];
    assert_eq!(log.graphs.len(), 2, "the log's two Pattern lines");
    for (logged, ours) in log.graphs.iter().zip(ours) {
        let g = &logged.graph;
        assert_eq!(
            (
                g.pattern,
                g.n_channels,
                g.bw_intra,
                g.bw_inter,
                g.type_intra,
                g.type_inter,
                g.same_channels
            ),
            (
                ours.pattern,
                ours.n_channels,
                ours.bw_intra,
                ours.bw_inter,
                ours.type_intra,
                ours.type_inter,
                ours.same_channels
            ),
            "log line {}",
            logged.line
        );
    }
    assert_eq!(
        (
            result.graphs.ring.pattern,
            result.graphs.ring.n_channels,
            result.graphs.ring.bw_intra
        ),
        (Pattern::Ring, 16, 40.0)
    );
    assert_eq!(result.graphs.tree.pattern, Pattern::Tree);
    assert_eq!(result.graphs.ring.type_intra, PathType::Loc);
    assert!(result.graphs.ring.channels.iter().all(|c| c.ranks == [0]));
    // "32 coll channels" and 32 "Ring NN : 0 -> 0 -> 0" lines.
    assert_eq!(log.channels.first().map(|c| c.coll), Some(32));
    assert_eq!(result.connection.n_channels, 32);
    assert_eq!(log.rings.len(), 32);
    assert_eq!(result.connection.rings.len(), 32);
    assert!(result.connection.rings.iter().all(|r| r == &[0]));
}

/// `planner channels --nccl-version 2.19.3` prints rank 0's graph, tree, channel and ring lines exactly as the
/// log has them (131 lines: both graphs with their 16 `GPU/0` channels, 32 `Tree`, 32 `Channel 00/32 :    0`, 32
/// `Ring`, the `Trees` line), in 2.19's formats (`search::rules` ChannelLineWidth, GraphLineTopoIds).
#[test]
fn t600_issue329_log_lines_from_the_cli() {
    let text = std::fs::read_to_string(path(T600_LOG)).unwrap();
    let logged: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("6a9ab017bb44:454:461 [0] NCCL INFO "))
        .filter(|l| {
            ["Pattern ", "Tree ", "Channel ", "Ring ", "Trees "]
                .iter()
                .any(|p| l.starts_with(p))
                || l.ends_with(" : GPU/0")
        })
        .collect();
    assert_eq!(logged.len(), 131);
    let out = planner()
        .args([
            "channels",
            "--topo",
            &path(T600_TOPO),
            "--nccl-version",
            "2.19.3",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("runtime channels: 32 (16 search channels x 2)"));
    let ours: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("NCCL log lines as rank 0"))
        .skip(1)
        .collect();
    assert_eq!(ours, logged);
    // The newest format names the GPU by topology id and pads ranks to their own width.
    planner()
        .args(["channels", "--topo", &path(T600_TOPO)])
        .assert()
        .success()
        .stdout(contains(" 0 : GPU/0-d8000"))
        .stdout(contains("Channel 00/64 : 0"));
}

/// `planner audit` reads the one-rank log (graphs, no table: NCCL prints none for one rank) and finds no
/// difference with the log's own version; with 2.25's rules the channel counts differ as MaxChannels64 says, and the
/// P2P chunk size as 2.25's `ncclTopoPathAllNVLink` says (one GPU counts as all-NVLink from 2.25: 512 KiB).
#[test]
fn t600_issue329_audit() {
    let out = planner()
        .args([
            "audit",
            "--json",
            "--topo",
            &path(T600_TOPO),
            &path(T600_LOG),
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(json["table_family"], "2.19");
    assert!(json["compared"].as_u64().unwrap() > 100);
    assert_eq!(json["differences"].as_array().unwrap().len(), 0);
    planner()
        .args([
            "audit",
            "--nccl-version",
            "2.25",
            "--topo",
            &path(T600_TOPO),
            &path(T600_LOG),
        ])
        .assert()
        // audit exits 1 when it finds differences
        .code(1)
        .stdout(contains("5 differences"))
        .stdout(contains("P2P chunk size      | 131072 | 524288"))
        .stdout(contains("ring graph channels | 16     | 32"))
        .stdout(contains("coll channels       | 32     | 64"));
}

/// NCCL 2.25+ on the same GPU: MAXCHANNELS 64, so the ring allows 32 channels (all fit: 32 x 40 = 1280 <= 5000)
/// and the runtime count is 2 x 32 = 64.
#[test]
fn one_gpu_newest_has_32_search_channels() {
    let result = search::search(&t600(), &SearchOptions::default()).unwrap();
    assert_eq!(result.graphs.ring.n_channels, 32);
    assert_eq!(result.graphs.tree.n_channels, 32);
    assert_eq!(result.graphs.ring.bw_intra, 40.0);
    assert_eq!(result.connection.n_channels, 64);
}

/// The model built by the pipeline follows the table's family: 32 runtime channels with 2.24, 64 with 2.25.
#[test]
fn pipeline_channels_follow_the_tables_family() {
    let cluster = t600();
    let channels = |family: &str| {
        let model = pipeline::build_model(
            &cluster,
            None,
            table::builtin(family).unwrap(),
            NcclEnv::default(),
            NvlsFlag::Auto,
        )
        .unwrap();
        (model.input.n_ranks, model.input.channels)
    };
    assert_eq!(channels("2.24"), (1, 32));
    assert_eq!(channels("2.25"), (1, 64));
}

/// One H200 (sm90): the sm90 one-node ladder starts at 60 GB/s: 32 channels x 60 (1920 <= 5000), 64 at runtime.
#[test]
fn one_h200_end_to_end() {
    let topo = one_h200_file();
    let topo = topo.to_str().unwrap();
    planner()
        .args(["topo", "--topo", topo])
        .assert()
        .success()
        .stdout(contains("Per node: 1 GPU (sm 90)"));
    planner()
        .args(["channels", "--topo", topo])
        .assert()
        .success()
        .stdout(contains("1 GPU x 1 node = 1 rank"))
        .stdout(contains(
            "Pattern 4, crossNic 0, nChannels 32, bw 60.000000/60.000000, type LOC/PIX, sameChannels 1",
        ))
        .stdout(contains(
            "Pattern 3, crossNic 0, nChannels 32, bw 60.000000/60.000000, type LOC/PIX, sameChannels 1",
        ))
        .stdout(contains("Channel 63/64 : 0"));
    planner()
        .args(["explain", "--topo", topo, "--size", "16M"])
        .assert()
        .success()
        .stdout(contains(
            "One rank: NCCL runs no algorithm, protocol or channel.",
        ))
        .stdout(contains("cudaMemcpyAsync"))
        .stdout(contains("NCCL picks").not());
    let out = planner()
        .args(["explain", "--topo", topo, "--size", "16M", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(json["one_rank"]["copy_bytes"], 16u64 << 20);
    assert_eq!(json["ranks"], 1);
    let out = planner()
        .args(["explain", "--topo", topo, "--sweep", "8..1G", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert!(json["one_rank_note"]
        .as_str()
        .unwrap()
        .contains("ncclLaunchOneRank"));
}

/// With 2+ ranks nothing changes: no one-rank note.
#[test]
fn two_ranks_have_no_one_rank_note() {
    planner()
        .args([
            "explain",
            "--fixture",
            "h200x2-nvswitch-vm",
            "--size",
            "16M",
        ])
        .assert()
        .success()
        .stdout(contains("NCCL picks"))
        .stdout(contains("One rank").not());
}

use predicates::prelude::PredicateBooleanExt;
