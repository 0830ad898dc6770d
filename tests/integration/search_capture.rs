//! The capture (2x H200, NVSwitch, NCCL 2.28.9): our search and connection
//! must reproduce NCCL's own init log and graph dump.

use planner::pipeline::load_fixture;
use planner::search::{self, Pattern, SearchOptions};
use planner::topo::{Cluster, PathType};

const GRAPH_XML: &str = include_str!("../golden/h200x2-nvswitch-vm/graph.xml");

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

const INIT_LOG: &str = include_str!("../golden/h200x2-nvswitch-vm/nccl-init-rank0.log");

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

fn temp_file(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("planner-capture-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn a_graph_file_replaces_the_search() {
    // The capture dump with the ring changed to 6 channels at 60 GB/s in order 1 0:
    // the loaded graph is used as is; the tree (also in the file) keeps its 12 channels,
    // so the connection uses min(6, 12) = 6 search channels, 12 at runtime.
    let mut text = GRAPH_XML.replacen(
        "nchannels=\"12\" speedintra=\"30\" speedinter=\"30\"",
        "nchannels=\"6\" speedintra=\"60\" speedinter=\"60\"",
        1,
    );
    let ring_channel =
        "    <channel>\n      <gpu dev=\"0\"/>\n      <gpu dev=\"0x1\"/>\n    </channel>\n";
    let swapped =
        "    <channel>\n      <gpu dev=\"0x1\"/>\n      <gpu dev=\"0\"/>\n    </channel>\n";
    let ring_end = text.find("  </graph>").unwrap();
    let ring_part = text[..ring_end].replacen(&ring_channel.repeat(12), &swapped.repeat(6), 1);
    text = format!("{ring_part}{}", &text[ring_end..]);
    let path = temp_file("ring6.xml", &text);
    let r = search::load_graph_file(&path, &capture()).unwrap();
    assert_eq!(r.graphs.ring.n_channels, 6);
    assert_eq!(
        (r.graphs.ring.bw_intra, r.graphs.ring.bw_inter),
        (60.0, 60.0)
    );
    assert_eq!(r.graphs.ring.channels[0].ranks, vec![1, 0]);
    assert_eq!(r.graphs.tree.n_channels, 12);
    assert_eq!(r.connection.search_channels, 6);
    assert_eq!(r.connection.n_channels, 12);
    // Ring 1 -> 0 -> 1 is still the only 2-rank ring.
    assert_eq!(r.connection.rings[0], vec![0, 1]);
}

#[test]
fn graphs_absent_from_the_file_are_searched() {
    // Only the tree graph in the file: the ring is searched (12 x 30 as in the capture).
    let tree_start = GRAPH_XML.find("  <graph id=\"1\"").unwrap();
    let tree_end = GRAPH_XML.find("  <graph id=\"4\"").unwrap();
    let text = format!(
        "<graphs version=\"1\">\n{}</graphs>\n",
        &GRAPH_XML[tree_start..tree_end]
    );
    let path = temp_file("tree-only.xml", &text);
    let r = search::load_graph_file(&path, &capture()).unwrap();
    assert_eq!(r.graphs.ring.n_channels, 12);
    assert_eq!(r.graphs.ring.bw_intra, 30.0);
    assert_eq!(r.graphs.tree.channels[6].ranks, vec![1, 0]);
}

#[test]
fn multi_node_graph_xml_round_trips() {
    // Two nodes: channels carry their NETs; writing then reading gives the same graphs.
    let cluster = Cluster {
        node: load_fixture("hgx-h200-8").unwrap(),
        n_nodes: 2,
        net_latency_us: 0.0,
    };
    let r = search::search(&cluster, &SearchOptions::default()).unwrap();
    let text = search::graph_xml::write_graphs(&r.graphs, &cluster).unwrap();
    assert!(text.contains("<net dev=\"0x7\"/>"), "{text}");
    let path = temp_file("h200x2n.xml", &text);
    let back = search::load_graph_file(&path, &cluster).unwrap();
    assert_eq!(back.graphs, r.graphs);
    assert_eq!(back.connection, r.connection);
}
