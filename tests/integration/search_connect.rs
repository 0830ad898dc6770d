//! Connection invariants over fixtures and node counts: every ring visits every
//! rank once; every tree channel is one tree over all ranks with symmetric
//! parent/child links and at most 3 children; the two tree halves are the
//! double binary tree over nodes.

use planner::pipeline::load_fixture;
use planner::search::{self, Connection, SearchOptions};
use planner::topo::Cluster;

fn connect(name: &str, nodes: usize) -> Connection {
    let cluster = Cluster {
        node: load_fixture(name).unwrap(),
        n_nodes: nodes,
        net_latency_us: 0.0,
    };
    search::search(&cluster, &SearchOptions::default())
        .unwrap()
        .connection
}

fn check_invariants(c: &Connection, what: &str) {
    let n = c.n_ranks();
    assert_eq!(c.rings.len(), c.n_channels, "{what}");
    assert_eq!(c.trees.len(), c.n_channels, "{what}");
    for (ch, ring) in c.rings.iter().enumerate() {
        let mut seen = vec![false; n];
        for &r in ring {
            assert!(!seen[r as usize], "{what} ring {ch} visits {r} twice");
            seen[r as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "{what} ring {ch} misses a rank");
        assert_eq!(ring[0], 0, "{what}: rings start at rank 0");
    }
    for (ch, tree) in c.trees.iter().enumerate() {
        assert_eq!(tree.len(), n);
        let roots: Vec<usize> = (0..n).filter(|&r| tree[r].up == -1).collect();
        assert_eq!(roots.len(), 1, "{what} tree {ch}: roots {roots:?}");
        for r in 0..n {
            let t = tree[r];
            if t.up >= 0 {
                assert!(
                    tree[t.up as usize].down.contains(&(r as i32)),
                    "{what} tree {ch}: {r}'s parent {} does not list it",
                    t.up
                );
            }
            for &d in t.down.iter().filter(|&&d| d >= 0) {
                assert_eq!(tree[d as usize].up, r as i32, "{what} tree {ch}");
            }
            // Climbing reaches the root without a cycle.
            let (mut x, mut steps) = (r as i32, 0);
            while tree[x as usize].up >= 0 {
                x = tree[x as usize].up;
                steps += 1;
                assert!(steps <= n, "{what} tree {ch}: cycle from {r}");
            }
        }
    }
}

#[test]
fn invariants_over_fixtures_and_node_counts() {
    for name in [
        "h200x2-nvswitch-vm",
        "hgx-h200-8",
        "dgx-a100-8",
        "a100-sxm-4",
    ] {
        for nodes in [1, 2, 3, 5, 8, 13] {
            check_invariants(&connect(name, nodes), &format!("{name} x{nodes}"));
        }
    }
    for name in ["pcie-rtx4000ada-2", "pcie-rtxpro6000-8"] {
        check_invariants(&connect(name, 1), name);
    }
}

#[test]
fn tree_halves_follow_the_double_binary_tree() {
    // hgx-h200-8 x 4 nodes, ring/tree channel 0 enters every node at local rank 0
    // (balanced tree: parent side I[0] = 0, child0 I[1], child1 I[0]).
    // dtree(4): tree 0: 0 -> 2, 2 -> {1, 3}; tree 1 (mirror): 3 -> 1, 1 -> {2, 0}.
    let c = connect("hgx-h200-8", 4);
    let heads = c.tree_heads[0];
    let gpn = 8;
    let parent_side = |node: i32| node * gpn + heads[0];
    // Tree 0: node 2's parent-facing rank has node 0 above it.
    assert!(c.trees[0][parent_side(2) as usize].up >= 0);
    assert_eq!(c.trees[0][parent_side(0) as usize].up, -1);
    assert_eq!(c.trees[0][parent_side(2) as usize].up / gpn, 0);
    assert_eq!(c.trees[0][parent_side(1) as usize].up / gpn, 2);
    assert_eq!(c.trees[0][parent_side(3) as usize].up / gpn, 2);
    // Tree 1 lives on channel nch (search channels): root node 3.
    let nch = c.search_channels;
    assert_eq!(c.trees[nch][parent_side(3) as usize].up, -1);
    assert_eq!(c.trees[nch][parent_side(1) as usize].up / gpn, 3);
    assert_eq!(c.trees[nch][parent_side(2) as usize].up / gpn, 1);
    assert_eq!(c.trees[nch][parent_side(0) as usize].up / gpn, 1);
    // Depth estimate: 8 ranks per node - 1 + log2(4) = 9.
    assert_eq!(c.tree_depth, 9);
}

#[test]
fn cross_nic_rings_alternate_on_odd_nodes() {
    // A crossNic=2 ring with an even channel count: odd nodes swap channels c and c^1
    // (connect.cc), so ring 0 leaves node 0 on channel 0's NIC and crosses node 1 on
    // channel 1's GPU order. hgx-h200-8 x2: channel 0 is 0 7 6 5 4 3 2 1, channel 1 is
    // 1 2 3 4 5 6 7 0 (see search_fixtures); node 1 adds 8.
    let cluster = Cluster {
        node: load_fixture("hgx-h200-8").unwrap(),
        n_nodes: 2,
        net_latency_us: 0.0,
    };
    let opts = SearchOptions::default();
    let mut graphs = search::search(&cluster, &opts).unwrap().graphs;
    assert_eq!(graphs.ring.channels[1].ranks, vec![1, 2, 3, 4, 5, 6, 7, 0]);
    let plain = search::connect::connect(&cluster, &graphs, &opts).unwrap();
    assert_eq!(
        plain.rings[0],
        vec![0, 7, 6, 5, 4, 3, 2, 1, 8, 15, 14, 13, 12, 11, 10, 9]
    );
    graphs.ring.cross_nic = 2;
    let crossed = search::connect::connect(&cluster, &graphs, &opts).unwrap();
    assert_eq!(
        crossed.rings[0],
        vec![0, 7, 6, 5, 4, 3, 2, 1, 9, 10, 11, 12, 13, 14, 15, 8]
    );
    check_invariants(&crossed, "crossNic 2");
}
