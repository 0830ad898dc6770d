//! Pinned search results for every built-in fixture, one node and several.
//! Each value carries the hand calculation from link bandwidths and NCCL's
//! speed ladders (search.cc, v2.28.9) that makes it right.
//!
//! Shorthands: NVLink per link 20.0 GB/s (sm80) / 20.6 (sm90); PCIe x16 Gen4 24,
//! Gen5 48; NET = speed/8000. Ladders: intra sm80 [40 30 20 18 ..], intra sm90
//! [60 50 40 30 24 ..], intra sm100+ [90 80 70 60 50 40 30 24 20 19 18], inter sm80
//! [48 30 28 24 20 ..], inter sm90 [48 45 42 40 30 24 22 20 17.5 15 12 6 3 2.4 1.2 ..].
//! The search stops at the first speed whose channels fill totalBw (the GPU's summed
//! NVLink, or PCI, bandwidth); otherwise it relaxes and keeps the best of speeds down
//! to half of the best; then it doubles the channels at half speed ("dup") unless
//! bw < 25 or (cc > 80, bw < 50 and > 4 channels).

use planner::pipeline::load_fixture;
use planner::search::{self, Pattern, SearchOptions, SearchResult};
use planner::topo::{Cluster, PathType};

fn run(name: &str, nodes: usize) -> SearchResult {
    let cluster = Cluster {
        node: load_fixture(name).unwrap(),
        n_nodes: nodes,
        net_latency_us: 0.0,
    };
    search::search(&cluster, &SearchOptions::default()).unwrap()
}

/// (pattern, channels, bw intra, bw inter, type intra, type inter, same channels)
type Pin = (Pattern, usize, f64, f64, PathType, PathType, bool);

fn check(r: &SearchResult, ring: Pin, tree: Pin, runtime: usize) {
    for (g, pin) in [(&r.graphs.ring, ring), (&r.graphs.tree, tree)] {
        let got = (
            g.pattern,
            g.n_channels,
            g.bw_intra,
            g.bw_inter,
            g.type_intra,
            g.type_inter,
            g.same_channels,
        );
        assert_eq!(got, pin, "graph {}", g.id);
        assert_eq!(g.channels.len(), g.n_channels);
    }
    assert_eq!(r.connection.n_channels, runtime);
}

use PathType::{Nvl, Phb, Pix, Sys};
use Pattern::{BalancedTree, Ring};

#[test]
fn hgx_h200_8() {
    // 18 NVLinks x 20.6 = 370.8 GB/s to the NVSwitch per GPU: maxBw = totalBw = 370.8.
    // Ring: every channel crosses each GPU's NVSwitch up and down link once.
    //   60: floor(370.8/60) = 6 channels = 360 < 370.8, so relax; 50 -> 7 x 50 = 350,
    //   40 -> 9 x 40 = 360, 30 -> 12 x 30 = 360 are not better; 24/60 < 0.49 stops.
    //   6 x 60, dup (60 >= 50) -> 12 x 30. Pass 2: 40 needs 12 x 40 = 480 > 370.8: no.
    // Tree: totalBw x 8/7 = 423.8; 12 channels required: 60,50,40 x 12 > 423.8 -> start 30;
    //   a chain uses each link once: floor(370.8/30) = 12 = max -> 12 x 30, same channels.
    //   No dup (30 < 50, 12 > 4); pass 2 tries 40 intra: 9 chains < 12.
    // Runtime: 12 x 2 = 24.
    let r = run("hgx-h200-8", 1);
    check(
        &r,
        (Ring, 12, 30.0, 30.0, Nvl, Pix, true),
        (BalancedTree, 12, 30.0, 30.0, Nvl, Pix, true),
        24,
    );
    // NVSwitch rings come out in index order: PCI order first, then replayed.
    assert_eq!(
        r.graphs.ring.channels[0].ranks,
        (0..8).collect::<Vec<i32>>()
    );
}

#[test]
fn hgx_h100_8() {
    // Same NVLink fabric as H200 (18 x 20.6 = 370.8), same sm90 ladder: same result.
    check(
        &run("hgx-h100-8", 1),
        (Ring, 12, 30.0, 30.0, Nvl, Pix, true),
        (BalancedTree, 12, 30.0, 30.0, Nvl, Pix, true),
        24,
    );
}

#[test]
fn dgx_a100_8() {
    // 12 NVLinks x 20 = 240 GB/s per GPU. Ring at 40 (sm80 ladder top): 240/40 = 6 channels
    // = 240 >= totalBw 240, done; dup (cc 80 is not > 80) -> 12 x 20. Pass 2: 30 x 12 = 360 > 240.
    // Tree: totalBw 240 x 8/7 = 274.3; 40 x 12, 30 x 12 > 274.3 -> 20; 240/20 = 12 chains = max.
    check(
        &run("dgx-a100-8", 1),
        (Ring, 12, 20.0, 20.0, Nvl, Pix, true),
        (BalancedTree, 12, 20.0, 20.0, Nvl, Pix, true),
        24,
    );
}

#[test]
fn a100_sxm_4() {
    // 4 A100 on an NVSwitch, 12 x 20 = 240 each: ring as DGX A100 (6 x 40 fills 240, dup 12 x 20).
    // Tree: 240 x 4/3 = 320; 40 x 12 = 480, 30 x 12 = 360 > 320 -> 20; 240/20 = 12 chains.
    check(
        &run("a100-sxm-4", 1),
        (Ring, 12, 20.0, 20.0, Nvl, Pix, true),
        (BalancedTree, 12, 20.0, 20.0, Nvl, Pix, true),
        24,
    );
}

#[test]
fn a100_sxm_2() {
    // Ring as above: 6 x 40 = 240 fills 240, dup -> 12 x 20.
    // Tree: 240 x 2/1 = 480; 40 x 12 = 480 <= 480 -> start 40. A 2-GPU chain 0->1 loads only
    // the 0->NVS->1 direction: 240/40 = 6 chains, then 6 chains 1->0 use the other direction:
    // 12 = max at 40, found only once channels may differ (same channels 0), like the capture.
    let r = run("a100-sxm-2", 1);
    check(
        &r,
        (Ring, 12, 20.0, 20.0, Nvl, Pix, true),
        (BalancedTree, 12, 40.0, 40.0, Nvl, Pix, false),
        24,
    );
    assert_eq!(r.graphs.tree.channels[5].ranks, vec![0, 1]);
    assert_eq!(r.graphs.tree.channels[6].ranks, vec![1, 0]);
}

#[test]
fn pcie_rtx4000ada_2() {
    // No NVLink; P2P between the two GPUs crosses the CPU (PHB), PCIe Gen4 x16 = 24 GB/s,
    // Intel CPU: GPU-to-GPU PHB traffic costs 1.2x on PCI links. maxBw = totalBw = 24.
    // Ring (sm89, intra ladder 40 30 20 ..): first rung <= 24 is 20; one ring charges
    // 20 x 1.2 = 24 on each PCI link direction -> 1 channel (20 < 24, relax: 18, 15, 12 give
    // 1 channel; 10 gives 2 x 10 = 20, not better; 9/20 < 0.49 stops). 20 < 25: no dup.
    // Tree: 24 x 2 = 48; 1 channel wanted (ring's), 20 fits: 1 x 20 = max.
    check(
        &run("pcie-rtx4000ada-2", 1),
        (Ring, 1, 20.0, 20.0, Phb, Pix, true),
        (BalancedTree, 1, 20.0, 20.0, Phb, Pix, true),
        2,
    );
}

#[test]
fn pcie_rtxpro6000_8() {
    // sm120, PCIe Gen5 x16 = 48 GB/s, two Emerald Rapids sockets joined by 40 GB/s (ERP).
    // GPUs of one socket are PIX/PHB, across sockets SYS, so a ring of 8 needs type SYS and
    // crosses the socket link once each way. Ladder sm100 intra: first rung <= 48 is 40.
    // At 40 one ring fits (socket link 40/40 = 1); 30 and 24 still fit 1 ring; 20 fits 2
    // (2 x 20 = 40, equal, not better); 19/40 < 0.49 stops. 1 x 40, dup (cc > 80 but only 1
    // channel) -> 2 x 20. Pass 2 tries 24 x 2 channels: the socket link (40) takes one.
    // Tree (2 channels): totalBw 48 x 8/7 = 54.9, 40 x 2 and 30 x 2 > 54.9 -> 24; at 24 a
    // second chain needs the socket link again (40 - 24 < 24) in the search budget -> none;
    // at 20 two identical chains share it (2 x 20 = 40): 2 x 20, same channels.
    check(
        &run("pcie-rtxpro6000-8", 1),
        (Ring, 2, 20.0, 20.0, Sys, Pix, true),
        (BalancedTree, 2, 20.0, 20.0, Sys, Pix, true),
        4,
    );
}

#[test]
fn capture_two_nodes() {
    // The capture's NIC is 10 Gb/s Ethernet: NET bw 10000/8000 = 1.25, GPU->NET PHB.
    // Ring: inter sm90 ladder, first rung <= 1.25 is 1.2; the NET keeps (int)1.2 = 1 per
    // channel, so 1.25 holds one channel. 1 x 1.2; 0.24/1.2 < 0.49 stops; no dup.
    // Tree: 1 x 1.2, then pass 2 raises intra to 2.4 (< 2 x 1.2 is false after): 2.4/1.2.
    // Runtime: 1 x 2 (ring bw 1.2 is not > 45, so no extra doubling).
    let r = run("h200x2-nvswitch-vm", 2);
    check(
        &r,
        (Ring, 1, 1.2, 1.2, Nvl, Phb, true),
        (BalancedTree, 1, 2.4, 1.2, Nvl, Phb, true),
        2,
    );
    let ch = &r.graphs.ring.channels[0];
    assert_eq!(
        (ch.net_in, ch.ranks.clone(), ch.net_out),
        (Some(0), vec![0, 1], Some(0))
    );
    // Rings 0 1 | 2 3 joined through the NICs; tree 0: node 0 root with child node 1.
    assert_eq!(r.connection.rings[0], vec![0, 1, 2, 3]);
    let t = r.connection.trees[0][0];
    assert_eq!((t.up, t.down), (-1, [1, 2, -1]));
    // Mirrored tree (channel 1): node 1 is the root, node 0 hangs below rank 2.
    let t = r.connection.trees[1][0];
    assert_eq!((t.up, t.down), (2, [1, -1, -1]));
}

#[test]
fn hgx_h200_8_two_nodes() {
    // 8 NICs of 400 Gb/s (50 GB/s), each GPU on a PCIe Gen5 switch (48) with its NIC pair:
    // maxBw = 48 -> inter sm90 rung 48. Each channel enters and leaves through one NET
    // (crossNic 0: same NIC), 50 >= 48 fits one channel per NET: 8 x 48 = 384 >= 370.8: done.
    // No dup (48 < 50, 8 > 4). The return to the NET must be PIX, so the ring runs backwards
    // over the NVSwitch neighbours: NET0 GPU0 GPU7 ... GPU1 NET0.
    // Tree: 8 x 48 likewise. Runtime 8 x 2 = 16; the extra x2 (cc >= 90, ring bw > 45)
    // applies only below 16 channels.
    let r = run("hgx-h200-8", 2);
    check(
        &r,
        (Ring, 8, 48.0, 48.0, Nvl, Pix, false),
        (BalancedTree, 8, 48.0, 48.0, Nvl, Pix, false),
        16,
    );
    let ch = &r.graphs.ring.channels[0];
    assert_eq!(ch.ranks, vec![0, 7, 6, 5, 4, 3, 2, 1]);
    assert_eq!((ch.net_in, ch.net_out), (Some(0), Some(0)));
    for (c, ch) in r.graphs.ring.channels.iter().enumerate() {
        assert_eq!(ch.net_in, Some(c as i64), "channel {c} uses NET {c}");
        assert_eq!(
            ch.ranks[0], c as i32,
            "NET {c}'s local GPU starts channel {c}"
        );
    }
}

#[test]
fn dgx_a100_8_two_nodes() {
    // 8 HDR NICs (200 Gb/s = 25 GB/s), GPU->NIC PCIe Gen4 24: maxBw 24 -> inter sm80 rung 24;
    // a NET holds one channel (25 - 24 < 24): 8 x 24 = 192 < 240, relax; 20, 18, 15 keep
    // 8 channels; 12 gives 16 x 12 = 192, equal; 10/24 < 0.49 stops. 24 < 25: no dup.
    // Tree: 8 x 24, then pass 2 raises intra 24 -> 28 -> 30 (8 x 30 = 240 over the 240 GB/s
    // NVLinks), 48 does not fit: 30/24. Runtime 8 x 2 = 16 (cc 80: no extra doubling).
    check(
        &run("dgx-a100-8", 2),
        (Ring, 8, 24.0, 24.0, Nvl, Pix, false),
        (BalancedTree, 8, 30.0, 24.0, Nvl, Pix, false),
        16,
    );
}

#[test]
fn hgx_h200_8_many_nodes_runtime_channels() {
    // Node count does not change the per-node search (each rank searches its own host).
    for nodes in [3, 16, 128] {
        let r = run("hgx-h200-8", nodes);
        assert_eq!(r.graphs.ring.n_channels, 8);
        assert_eq!(r.connection.n_channels, 16);
        assert_eq!(r.connection.rings[0].len(), 8 * nodes);
    }
}

#[test]
fn net_latency_becomes_latency_inter() {
    // --net-latency 2.5 on top of the NICs' own 0 µs: every multi-node graph reports 2.5.
    let cluster = Cluster {
        node: load_fixture("hgx-h200-8").unwrap(),
        n_nodes: 2,
        net_latency_us: 2.5,
    };
    let r = search::search(&cluster, &SearchOptions::default()).unwrap();
    assert_eq!(r.graphs.ring.latency_inter, 2.5);
    assert_eq!(r.graphs.tree.latency_inter, 2.5);
    // One node: no NET is used, latencyInter stays 0 as in the capture's graph dump.
    let single = Cluster {
        n_nodes: 1,
        ..cluster
    };
    let r = search::search(&single, &SearchOptions::default()).unwrap();
    assert_eq!(r.graphs.ring.latency_inter, 0.0);
}
