//! The capture (2x H200, NVSwitch, NCCL 2.28.9): our search and connection
//! must reproduce NCCL's own init log and graph dump.

use planner::cli::source::load_fixture;
use planner::search::{self, Pattern, SearchOptions};
use planner::topo::{Cluster, PathType};

const GRAPH_XML: &str = include_str!("../../../shared/captures/h200x2-nvswitch-vm/graph.xml");

fn capture() -> Cluster {
    Cluster::single(load_fixture("h200x2-nvswitch-vm").expect("capture fixture loads"))
}

#[test]
fn ring_graph_matches_the_capture() {
    let r = search::search(&capture(), &SearchOptions::default()).unwrap();
    let ring = &r.graphs.ring;
    // "Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1"
    assert_eq!(ring.pattern, Pattern::Ring);
    assert_eq!(ring.cross_nic, 0);
    assert_eq!(ring.n_channels, 12);
    assert_eq!((ring.bw_intra, ring.bw_inter), (30.0, 30.0));
    assert_eq!(
        (ring.type_intra, ring.type_inter),
        (PathType::Nvl, PathType::Pix)
    );
    assert!(ring.same_channels);
    for ch in &ring.channels {
        assert_eq!(ch.ranks, vec![0, 1]);
    }
}

#[test]
fn tree_graph_matches_the_capture() {
    let r = search::search(&capture(), &SearchOptions::default()).unwrap();
    let tree = &r.graphs.tree;
    // "Pattern 1, crossNic 0, nChannels 12, bw 60.000000/60.000000, type NVL/PIX, sameChannels 0"
    assert_eq!(tree.pattern, Pattern::BalancedTree);
    assert_eq!(tree.n_channels, 12);
    assert_eq!((tree.bw_intra, tree.bw_inter), (60.0, 60.0));
    assert_eq!(
        (tree.type_intra, tree.type_inter),
        (PathType::Nvl, PathType::Pix)
    );
    assert!(!tree.same_channels);
    // Channels 0-5: GPU/0-60 GPU/0-70; channels 6-11: GPU/0-70 GPU/0-60.
    for (c, ch) in tree.channels.iter().enumerate() {
        let expected = if c < 6 { vec![0, 1] } else { vec![1, 0] };
        assert_eq!(ch.ranks, expected, "tree channel {c}");
    }
}

#[test]
fn graph_xml_equals_the_capture_dump() {
    let cluster = capture();
    let r = search::search(&cluster, &SearchOptions::default()).unwrap();
    let xml = search::graph_xml::write_graphs(&r.graphs, &cluster).unwrap();
    assert_eq!(xml, GRAPH_XML);
}

const INIT_LOG: &str =
    include_str!("../../../shared/captures/h200x2-nvswitch-vm/nccl-init-rank0.log");

/// The capture log's graph, tree, channel and ring lines, in order.
fn capture_channel_lines() -> Vec<String> {
    INIT_LOG
        .lines()
        .filter_map(|l| l.strip_prefix("NCCL INFO "))
        .filter(|l| {
            let graph_channel =
                l.len() > 3 && l[..2].trim().parse::<u32>().is_ok() && &l[2..4] == " :";
            (l.starts_with("Pattern ")
                || graph_channel
                || l.starts_with("Tree ")
                || l.starts_with("Trees ")
                || l.starts_with("Ring ")
                || l.starts_with("Channel "))
                && !l.contains(" via ")
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn log_lines_equal_the_capture_init_log() {
    let cluster = capture();
    let r = search::search(&cluster, &SearchOptions::default()).unwrap();
    let ours = planner::report::channels::nccl_log_lines(&cluster.node, &r, 0);
    let theirs = capture_channel_lines();
    // 2 "Pattern" + 24 graph channel + 24 Tree + 24 Channel + 24 Ring + 1 Trees lines.
    assert_eq!(theirs.len(), 2 + 24 + 24 + 24 + 24 + 1);
    assert_eq!(ours, theirs);
}

#[test]
fn runtime_channels_and_neighbours() {
    let r = search::search(&capture(), &SearchOptions::default()).unwrap();
    let c = &r.connection;
    // 12 search channels x2 = 24 ("24 coll channels" in the log).
    assert_eq!(c.search_channels, 12);
    assert_eq!(c.n_channels, 24);
    assert_eq!(c.rings.len(), 24);
    assert_eq!(c.trees.len(), 24);
    for ch in 0..24 {
        assert_eq!(c.rings[ch], vec![0, 1]);
        assert_eq!(c.ring_neighbours(ch, 1), Some((0, 0)));
        // Rank 1 is the chain's child on channels 0-5 (and their copies 12-17).
        let t = c.trees[ch][1];
        if ch % 12 < 6 {
            assert_eq!((t.up, t.down), (0, [-1, -1, -1]));
        } else {
            assert_eq!((t.up, t.down), (-1, [0, -1, -1]));
        }
    }
    // Depth estimate: 2 ranks per node - 1 + log2(1 node) = 1.
    assert_eq!(c.tree_depth, 1);
}
