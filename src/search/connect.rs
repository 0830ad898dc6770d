//! Connecting the per-node search result across nodes (NCCL's `connect.cc`
//! `ncclTopoPreset` / `ncclTopoPostset`, `rings.cc`): ring neighbours, the
//! double binary tree over nodes with chains inside each node, and the runtime
//! channel count.
//!
//! Every node of a `Cluster` has the same topology, hence the same search
//! result; rank `r` of node `k` is global rank `k * gpus_per_node + r`.

use super::trees::{dtree, log2_floor};
use super::{Connection, Graphs, Pattern, SearchGraph, SearchOptions, TreeLinks};
use crate::error::{Error, Result};
use crate::topo::Cluster;

use crate::limits::MAX_TREE_ARITY;
/// `NCCL_COLLNET_NODE_THRESHOLD` default.
const COLLNET_NODE_THRESHOLD: usize = 2;

/// One node's ring and tree data for one search channel, in local ranks (`ncclTopoRanks`).
#[derive(Debug, Clone)]
struct NodeChannel {
    ring_recv: i32,
    ring_send: i32,
    /// Per local rank: next rank inside the node, -1 for the node's last.
    ring_next: Vec<i32>,
}

/// Check that each channel of `graph` lists every local rank exactly once.
fn check_channels(graph: &SearchGraph, gpn: usize, what: &str) -> Result<()> {
    for (c, ch) in graph.channels.iter().enumerate() {
        let mut seen = vec![false; gpn];
        let ok = ch.ranks.len() == gpn
            && ch.ranks.iter().all(|&r| {
                let fresh = r >= 0 && (r as usize) < gpn && !seen[r as usize];
                if fresh {
                    seen[r as usize] = true;
                }
                fresh
            });
        if !ok {
            return Err(Error::bad_input(format!(
                "{what} graph channel {c}: ranks {:?} are not each of the {gpn} local ranks once",
                ch.ranks
            )));
        }
    }
    if graph.channels.len() < graph.n_channels {
        return Err(Error::bad_input(format!(
            "{what} graph: {} channels listed, {} announced",
            graph.channels.len(),
            graph.n_channels
        )));
    }
    Ok(())
}

fn node_channel(ring: &[i32], gpn: usize) -> NodeChannel {
    let mut next = vec![-1; gpn];
    for (i, &r) in ring.iter().enumerate() {
        next[r as usize] = if i + 1 == ring.len() { -1 } else { ring[i + 1] };
    }
    NodeChannel {
        ring_recv: ring[0],
        ring_send: ring[ring.len() - 1],
        ring_next: next,
    }
}

fn add_down(links: &mut TreeLinks, child: i32, channel: usize, rank: usize) -> Result<()> {
    match links.down.iter_mut().find(|d| **d < 0) {
        Some(slot) => {
            *slot = child;
            Ok(())
        }
        None => Err(Error::runtime(format!(
            "tree channel {channel}: rank {rank} already has {MAX_TREE_ARITY} children ({:?})",
            links.down
        ))),
    }
}

/// Connect `graphs` over `cluster`'s nodes.
pub fn connect(cluster: &Cluster, graphs: &Graphs, opts: &SearchOptions) -> Result<Connection> {
    // The per-rank tables below are nodes x GPUs long: bounded before they are allocated.
    cluster.check()?;
    let gpn = cluster.gpus_per_node();
    let n_nodes = cluster.n_nodes;
    let n_ranks = gpn * n_nodes;
    let ring = &graphs.ring;
    let tree = &graphs.tree;
    check_channels(ring, gpn, "ring")?;
    check_channels(tree, gpn, "tree")?;
    // NCCL's MAXCHANNELS of the asked family (32 before 2.25).
    let max_channels = super::rules::max_channels(opts.family);
    let nch = ring.n_channels.min(tree.n_channels).min(max_channels / 2);
    if nch == 0 || gpn == 0 {
        return Err(Error::bad_input(
            "the ring and tree graphs need at least one channel each".to_string(),
        ));
    }
    let (cc_min, _) = cluster.node.sm_range();

    // Tree: node-facing ranks and the chain inside the node.
    let child0_index = if tree.pattern == Pattern::Tree { 0 } else { 1 };
    let child1_index = if tree.pattern == Pattern::SplitTree {
        1
    } else {
        0
    };
    let tree_heads: Vec<[i32; 3]> = (0..nch)
        .map(|c| {
            let t = &tree.channels[c].ranks;
            let at = |i: usize| t[i.min(t.len() - 1)];
            [t[0], at(child0_index), at(child1_index)]
        })
        .collect();
    let next = ring_successors(ring, gpn, n_nodes, nch);

    let mut trees = build_trees(tree, &tree_heads, gpn, n_nodes, nch)?;
    let preset_trees = trees.clone();
    // Runtime channel count: x2 (channel c + nch repeats ring c with tree 1) ...
    let mut n_channels = (2 * nch).min(max_channels);
    let mut ring_of: Vec<usize> = (0..n_channels).map(|c| c % nch).collect();
    // `copyChannels` (connect.cc:361-370): channel c >= start repeats channel c - start.
    let copy_channels = |n_channels: &mut usize,
                         end: usize,
                         trees: &mut Vec<Vec<TreeLinks>>,
                         ring_of: &mut Vec<usize>| {
        let start = *n_channels;
        for c in start..end {
            ring_of.push(ring_of[c - start]);
            let copy = trees[c - start].clone();
            trees.push(copy);
        }
        *n_channels = end.max(start);
    };
    // ... x1.5 for CollNet chain when it is faster inside the node than out ...
    if opts.collnet && n_nodes >= COLLNET_NODE_THRESHOLD {
        if let Some(chain) = &graphs.collnet_chain {
            if chain.n_channels > 0 && chain.bw_intra > chain.bw_inter && n_ranks > n_nodes {
                let end = max_channels.min(n_channels + n_channels / 2);
                copy_channels(&mut n_channels, end, &mut trees, &mut ring_of);
            }
        }
    }
    // ... x2 on Hopper+ across nodes with fast NVLink rings and few channels.
    if cc_min >= 90 && n_nodes > 1 && ring.bw_intra > 45.0 && n_channels < 16 {
        let end = 2 * n_channels;
        copy_channels(&mut n_channels, end, &mut trees, &mut ring_of);
    }
    // connect.cc:492-506: nChannels = min(ncclMaxNchannels(), nChannels, maxCTAs), then copied up to
    // max(ncclMinNchannels(), minCTAs): "combining max, then min, to only use the first channels, then duplicate".
    // `max_channels` is the family's MAXCHANNELS (32 before 2.25, 64 from it).
    n_channels = n_channels.min(opts.max_channels).clamp(1, max_channels);
    trees.truncate(n_channels);
    ring_of.truncate(n_channels);
    let min_channels = opts.min_channels.min(max_channels);
    copy_channels(&mut n_channels, min_channels, &mut trees, &mut ring_of);

    let built = build_rings(&next, n_ranks)?;
    let rings: Vec<Vec<i32>> = ring_of[..n_channels]
        .iter()
        .map(|&c| built[c].clone())
        .collect();

    Ok(Connection {
        n_channels,
        rings,
        trees,
        preset_trees,
        search_channels: nch,
        n_nodes,
        gpus_per_node: gpn,
        tree_depth: gpn - 1 + log2_floor(n_nodes),
        tree_heads,
    })
}

/// The ring successor of every global rank, per search channel (`ncclTopoPreset`'s ring part, then
/// `connectRings`): each node's chain, its last rank sending to the next node's first.
fn ring_successors(ring: &SearchGraph, gpn: usize, n_nodes: usize, nch: usize) -> Vec<Vec<i32>> {
    let n_ranks = gpn * n_nodes;
    // Preset: what each node contributes per search channel.
    let per_channel: Vec<NodeChannel> = (0..nch)
        .map(|c| node_channel(&ring.channels[c].ranks, gpn))
        .collect();

    // Odd nodes of a crossNic=2 ring swap channel pairs so rings alternate rails.
    let swap_odd = ring.cross_nic == 2 && nch.is_multiple_of(2);
    let node_view = |k: usize, c: usize| -> usize {
        if swap_odd && k % 2 == 1 {
            c ^ 1
        } else {
            c
        }
    };

    // Ring successor of every global rank, per search channel.
    let mut next: Vec<Vec<i32>> = Vec::with_capacity(nch);
    for c in 0..nch {
        let mut nx = vec![-1i32; n_ranks];
        for k in 0..n_nodes {
            let base = (k * gpn) as i32;
            let data = &per_channel[node_view(k, c)];
            for r in 0..gpn {
                if data.ring_next[r] >= 0 {
                    nx[k * gpn + r] = base + data.ring_next[r];
                }
            }
            // The node's last rank sends to the next node's first.
            let next_node = (k + 1) % n_nodes;
            let recv = (next_node * gpn) as i32 + per_channel[node_view(next_node, c)].ring_recv;
            nx[k * gpn + data.ring_send as usize] = recv;
        }
        next.push(nx);
    }
    next
}

/// Per channel (2 x `nch`), per global rank: the chain inside each node, then the double binary tree over
/// nodes. Channel c uses tree 0, channel c + nch the mirrored/shifted tree 1.
fn build_trees(
    tree: &SearchGraph,
    tree_heads: &[[i32; 3]],
    gpn: usize,
    n_nodes: usize,
    nch: usize,
) -> Result<Vec<Vec<TreeLinks>>> {
    let n_ranks = gpn * n_nodes;
    let none = TreeLinks {
        up: -1,
        down: [-1; 3],
    };
    let mut trees: Vec<Vec<TreeLinks>> = vec![vec![none; n_ranks]; 2 * nch];
    for c in 0..nch {
        let t = &tree.channels[c].ranks;
        for k in 0..n_nodes {
            let base = k * gpn;
            for (i, &r) in t.iter().enumerate() {
                let up = if i == 0 { -1 } else { (base as i32) + t[i - 1] };
                let down0 = if i + 1 == t.len() {
                    -1
                } else {
                    (base as i32) + t[i + 1]
                };
                let links = TreeLinks {
                    up,
                    down: [down0, -1, -1],
                };
                trees[c][base + r as usize] = links;
                trees[c + nch][base + r as usize] = links;
            }
        }
        let [to_parent, to_child0, to_child1] = tree_heads[c];
        let global = |node: i32, local: i32| node * gpn as i32 + local;
        for k in 0..n_nodes {
            let dt = dtree(n_nodes as i32, k as i32);
            let me = k as i32;
            for (half, t) in dt.iter().enumerate() {
                let channel = c + half * nch;
                if t.up != -1 {
                    let parent_side = if t.child_type == 0 {
                        to_child0
                    } else {
                        to_child1
                    };
                    trees[channel][global(me, to_parent) as usize].up = global(t.up, parent_side);
                }
                if t.down0 != -1 {
                    let rank = global(me, to_child0) as usize;
                    add_down(
                        &mut trees[channel][rank],
                        global(t.down0, to_parent),
                        channel,
                        rank,
                    )?;
                }
                if t.down1 != -1 {
                    let rank = global(me, to_child1) as usize;
                    add_down(
                        &mut trees[channel][rank],
                        global(t.down1, to_parent),
                        channel,
                        rank,
                    )?;
                }
            }
        }
    }
    Ok(trees)
}

/// Rings as rank sequences starting at rank 0 (`ncclBuildRings`), one per search channel.
fn build_rings(next: &[Vec<i32>], n_ranks: usize) -> Result<Vec<Vec<i32>>> {
    let mut built: Vec<Vec<i32>> = Vec::with_capacity(next.len());
    for (c, nx) in next.iter().enumerate() {
        let mut seq = Vec::with_capacity(n_ranks);
        let mut seen = vec![false; n_ranks];
        let mut cur = 0i32;
        for _ in 0..n_ranks {
            if cur < 0 || cur as usize >= n_ranks || seen[cur as usize] {
                return Err(Error::runtime(format!(
                    "ring {c} does not visit every rank once (stuck at {cur})"
                )));
            }
            seen[cur as usize] = true;
            seq.push(cur);
            cur = nx[cur as usize];
        }
        if cur != 0 {
            return Err(Error::runtime(format!(
                "ring {c} does not loop back to rank 0 (ends at {cur})"
            )));
        }
        built.push(seq);
    }
    Ok(built)
}
