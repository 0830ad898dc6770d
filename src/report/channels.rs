//! `planner channels`: the searched graphs and their connection, as a table
//! for people, as NCCL's own log lines (so they diff against an
//! `NCCL_DEBUG_SUBSYS=INIT,GRAPH` log), and as JSON.

use crate::search::rules::{self, Family, SearchRule};
use crate::search::{Connection, Graphs, Pattern, SearchGraph, SearchResult};
use crate::topo::{Cluster, NodeKind, Topology};
use comfy_table::{presets, ContentArrangement, Table};
use serde::Serialize;

fn pattern_name(p: Pattern) -> &'static str {
    match p {
        Pattern::BalancedTree => "balanced tree",
        Pattern::SplitTree => "split tree",
        Pattern::Tree => "tree",
        Pattern::Ring => "ring",
        Pattern::Nvls => "NVLS",
        Pattern::CollNetDirect => "CollNet direct",
    }
}

/// NCCL's `%f` of a float value.
fn nccl_f(x: f64) -> String {
    format!("{:.6}", x as f32 as f64)
}

fn gpu_label(topo: &Topology, rank: i32) -> String {
    topo.gpus()
        .find(|(_, g)| g.rank == rank)
        .map(|(i, _)| topo.node(i).nccl_label())
        .unwrap_or_else(|| format!("GPU/rank{rank}"))
}

fn net_label(topo: &Topology, id: i64) -> String {
    topo.nodes(NodeKind::Net)
        .iter()
        .map(|&i| topo.node(i))
        .find(|n| n.id as i64 == id)
        .map(|n| n.nccl_label())
        .unwrap_or_else(|| format!("NET/{:x}-{:x}", id >> 56, id & 0x00ff_ffff_ffff_ffff))
}

/// `ncclTopoPrintGraph`: the `Pattern ...` line and one line per channel.
pub(crate) fn nccl_graph_lines(topo: &Topology, g: &SearchGraph) -> Vec<String> {
    let mut out = vec![format!(
        "Pattern {}, crossNic {}, nChannels {}, bw {}/{}, type {}/{}, sameChannels {}",
        g.pattern.number(),
        g.cross_nic,
        g.n_channels,
        nccl_f(g.bw_intra),
        nccl_f(g.bw_inter),
        g.type_intra.nccl_name(),
        g.type_inter.nccl_name(),
        u8::from(g.same_channels)
    )];
    for (c, ch) in g.channels.iter().enumerate() {
        let mut line = format!("{c:2} :");
        if let Some(n) = ch.net_in {
            line.push(' ');
            line.push_str(&net_label(topo, n));
        }
        for &r in &ch.ranks {
            line.push(' ');
            line.push_str(&gpu_label(topo, r));
        }
        if let Some(n) = ch.net_out {
            line.push(' ');
            line.push_str(&net_label(topo, n));
        }
        out.push(line);
    }
    out
}

/// `Tree c : up -> rank -> d0/d1/d2` for the channels where `rank` faces another
/// node (what `connectTrees` logs), each search channel followed by its mirror.
pub(crate) fn nccl_tree_lines(conn: &Connection, rank: i32) -> Vec<String> {
    let nch = conn.search_channels;
    let mut out = Vec::new();
    for c in 0..nch {
        if !conn.faces_other_nodes(c, rank) {
            continue;
        }
        for channel in [c, c + nch] {
            if let Some(t) = conn.trees.get(channel).and_then(|v| v.get(rank as usize)) {
                out.push(format!(
                    "Tree {channel} : {} -> {rank} -> {}/{}/{}",
                    t.up, t.down[0], t.down[1], t.down[2]
                ));
            }
        }
    }
    out
}

/// `ncclBuildRings`' `Channel cc/nn : r r r ...` lines (rank 0 prints them),
/// with `dumpLine`'s 128-character limit.
pub(crate) fn nccl_channel_lines(conn: &Connection) -> Vec<String> {
    let n = conn.rings.len();
    let width = conn.n_ranks().saturating_sub(1).to_string().len();
    conn.rings
        .iter()
        .enumerate()
        .map(|(c, ring)| {
            let mut line = format!("Channel {c:02}/{n:02} :");
            for r in ring {
                if line.len() >= 127 {
                    break;
                }
                line.push_str(&format!(" {r:>width$}"));
            }
            if line.len() >= 128 {
                line.truncate(124);
                line.push_str("...");
            }
            line
        })
        .collect()
}

/// `Ring cc : prev -> rank -> next` per runtime channel.
pub(crate) fn nccl_ring_lines(conn: &Connection, rank: i32) -> Vec<String> {
    (0..conn.n_channels)
        .filter_map(|c| {
            conn.ring_neighbours(c, rank)
                .map(|(p, n)| format!("Ring {c:02} : {p} -> {rank} -> {n}"))
        })
        .collect()
}

/// The `Trees [c] d0/d1/d2->rank->up ...` line (1023-byte buffer in NCCL).
pub(crate) fn nccl_trees_line(conn: &Connection, rank: i32) -> String {
    let mut body = String::new();
    for (c, per_rank) in conn.trees.iter().enumerate() {
        if let Some(t) = per_rank.get(rank as usize) {
            body.push_str(&format!(
                " [{c}] {}/{}/{}->{rank}->{}",
                t.down[0], t.down[1], t.down[2], t.up
            ));
        }
    }
    body.truncate(1022);
    format!("Trees{body}")
}

/// Every NCCL log line the search and connection produce for `rank`, in NCCL's order (the newest NCCL's format).
pub fn nccl_log_lines(topo: &Topology, result: &SearchResult, rank: i32) -> Vec<String> {
    nccl_log_lines_of(topo, result, rank, rules::NEWEST)
}

/// `nccl_log_lines` in the format of NCCL `family`: before 2.28 a graph channel names GPUs by rank (`GPU/0`,
/// v2.27.7-1 search.cc ncclTopoPrintGraph) and before 2.23 NETs by plain id; before 2.23 a `Channel` line is
/// `Channel %02d/%02d : ` then ` %3d` per rank, at most 20 (v2.22.3-1 rings.cc:18,35).
pub(crate) fn nccl_log_lines_of(
    topo: &Topology,
    result: &SearchResult,
    rank: i32,
    family: Family,
) -> Vec<String> {
    let g = &result.graphs;
    let mut out = Vec::new();
    let graph_lines = |x: &SearchGraph| {
        let mut lines = nccl_graph_lines(topo, x);
        if !rules::has(family, SearchRule::GraphLineTopoIds) {
            for (line, ch) in lines.iter_mut().skip(1).zip(&x.channels) {
                let mut text = line[..4].to_string();
                let net = |id: i64| format!(" NET/{:x}", id & 0x00ff_ffff_ffff_ffff);
                if let Some(n) = ch.net_in {
                    text.push_str(&net(n));
                }
                for r in &ch.ranks {
                    text.push_str(&format!(" GPU/{r}"));
                }
                if let Some(n) = ch.net_out {
                    text.push_str(&net(n));
                }
                *line = text;
            }
        }
        lines
    };
    out.extend(graph_lines(&g.ring));
    out.extend(graph_lines(&g.tree));
    for x in [&g.collnet_chain, &g.collnet_direct, &g.nvls]
        .into_iter()
        .flatten()
    {
        out.extend(graph_lines(x));
    }
    let conn = &result.connection;
    out.extend(nccl_tree_lines(conn, rank));
    if rank == 0 {
        if rules::has(family, SearchRule::ChannelLineWidth) {
            out.extend(nccl_channel_lines(conn));
        } else {
            let n = conn.rings.len();
            out.extend(conn.rings.iter().enumerate().map(|(c, ring)| {
                let ranks: String = ring.iter().take(20).map(|r| format!(" {r:>3}")).collect();
                format!("Channel {c:02}/{n:02} : {ranks}")
            }));
        }
    }
    out.extend(nccl_ring_lines(conn, rank));
    out.push(nccl_trees_line(conn, rank));
    out
}

fn graph_row(name: &str, g: Option<&SearchGraph>, why_not: &str) -> Vec<String> {
    match g {
        None => vec![
            name.to_string(),
            why_not.to_string(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ],
        Some(g) if g.n_channels == 0 => vec![
            name.to_string(),
            format!("{} {}", g.pattern.number(), pattern_name(g.pattern)),
            "0 (nothing found)".to_string(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ],
        Some(g) => vec![
            name.to_string(),
            format!("{} {}", g.pattern.number(), pattern_name(g.pattern)),
            g.n_channels.to_string(),
            format!("{} / {}", g.bw_intra, g.bw_inter),
            format!(
                "{} / {}",
                g.type_intra.nccl_name(),
                g.type_inter.nccl_name()
            ),
            if g.same_channels { "yes" } else { "no" }.to_string(),
            g.cross_nic.to_string(),
        ],
    }
}

/// The table of graphs.
pub(crate) fn graphs_table(graphs: &Graphs) -> String {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL.with_rounded_corners())
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(110)
        .set_header(vec![
            "graph",
            "pattern",
            "channels",
            "GB/s intra / inter",
            "type intra / inter",
            "same",
            "crossNic",
        ]);
    t.add_row(graph_row("ring (0)", Some(&graphs.ring), ""));
    t.add_row(graph_row("tree (1)", Some(&graphs.tree), ""));
    t.add_row(graph_row(
        "collnet chain (2)",
        graphs.collnet_chain.as_ref(),
        "not searched (CollNet off)",
    ));
    t.add_row(graph_row(
        "collnet direct (4)",
        graphs.collnet_direct.as_ref(),
        "not searched (CollNet off)",
    ));
    t.add_row(graph_row(
        "nvls (3)",
        graphs.nvls.as_ref(),
        "not searched (NVLS off)",
    ));
    t.to_string()
}

/// The human summary: header, table, runtime channels, NCCL's log lines for `rank`.
/// `family`: the NCCL version whose log format the lines follow.
pub(crate) fn render_text(
    cluster: &Cluster,
    result: &SearchResult,
    rank: i32,
    origin: &str,
    family: Family,
) -> String {
    let conn = &result.connection;
    let mut out = String::new();
    out.push_str(&format!(
        "{}: {} x {} = {}; graphs {}\n",
        cluster.node.source,
        crate::units::count(cluster.gpus_per_node(), "GPU"),
        crate::units::count(cluster.n_nodes, "node"),
        crate::units::count(cluster.n_ranks(), "rank"),
        origin
    ));
    if let Some(line) = crate::topo::mnnvl::summary(cluster) {
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(&graphs_table(&result.graphs));
    out.push('\n');
    out.push_str(&format!(
        "runtime channels: {} ({} search channels x {}), tree depth {}\n",
        conn.n_channels,
        conn.search_channels,
        if conn.search_channels > 0 {
            format!("{}", conn.n_channels as f64 / conn.search_channels as f64)
        } else {
            "0".into()
        },
        conn.tree_depth
    ));
    if conn.n_ranks() > crate::limits::MAX_LISTED_RANKS {
        out.push_str(&format!(
            "More than {} ranks: --json summarises the connection (rank {rank}'s ring neighbours and tree links, not every rank's)\n",
            crate::limits::MAX_LISTED_RANKS
        ));
    }
    out.push_str(&format!("\nNCCL log lines as rank {rank} prints them:\n"));
    // On an MNNVL domain NCCL logs the fabric lines before the graphs and the `comm ... MNNVL 1` line after them
    // (init.cc:669, mnnvl.cc:87, init.cc:1170).
    let mut mnnvl = crate::topo::mnnvl::log_lines(cluster, rank);
    let comm_line = mnnvl.pop();
    let mut lines = mnnvl;
    let graph_lines = {
        let g = &result.graphs;
        [
            Some(&g.ring),
            Some(&g.tree),
            g.collnet_chain.as_ref(),
            g.collnet_direct.as_ref(),
            g.nvls.as_ref(),
        ]
        .into_iter()
        .flatten()
        .map(|x| nccl_graph_lines(&cluster.node, x).len())
        .sum::<usize>()
    };
    for (i, line) in nccl_log_lines_of(&cluster.node, result, rank, family)
        .into_iter()
        .enumerate()
    {
        if i == graph_lines {
            lines.extend(comm_line.clone());
        }
        lines.push(line);
    }
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `--json`: stable field names.
#[derive(Debug, Serialize)]
pub(crate) struct ChannelsJson<'a> {
    pub(crate) source: &'a str,
    pub(crate) gpus_per_node: usize,
    pub(crate) nodes: usize,
    pub(crate) ranks: usize,
    pub(crate) graphs_from: &'a str,
    /// Present only on an MNNVL domain (several OS nodes fused into one NVLink domain).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mnnvl: Option<crate::topo::mnnvl::MnnvlInfo>,
    pub(crate) graphs: &'a Graphs,
    pub(crate) connection: ConnectionJson<'a>,
}

/// `connection` in `channels --json`: every rank's rings and trees up to `limits::MAX_LISTED_RANKS` ranks (the
/// `Connection` as it is), above that a summary of the same keys with `rings` and `trees` null and one rank's
/// neighbours (`rank_view`), so 65,536 nodes give a few KB instead of a GB.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum ConnectionJson<'a> {
    Listed(&'a Connection),
    Summarised(ConnectionSummary),
}

/// The `connection` of a job above `limits::MAX_LISTED_RANKS` ranks.
#[derive(Debug, Serialize)]
pub(crate) struct ConnectionSummary {
    pub(crate) n_channels: usize,
    /// Null: not listed rank by rank (see `per_rank_listed_up_to_ranks`).
    pub(crate) rings: Option<()>,
    pub(crate) trees: Option<()>,
    pub(crate) search_channels: usize,
    pub(crate) n_nodes: usize,
    pub(crate) gpus_per_node: usize,
    pub(crate) tree_depth: usize,
    pub(crate) tree_heads: Vec<[i32; 3]>,
    /// `limits::MAX_LISTED_RANKS`: the most ranks whose rings and trees are listed.
    pub(crate) per_rank_listed_up_to_ranks: usize,
    pub(crate) rank_view: RankView,
}

/// One rank's ring neighbours and tree links on every runtime channel (what its NCCL log lines say).
#[derive(Debug, Serialize)]
pub(crate) struct RankView {
    pub(crate) rank: i32,
    /// Per runtime channel: the rank it receives from and the rank it sends to.
    pub(crate) rings: Vec<RingNeighbours>,
    /// Per runtime channel: its tree parent and children.
    pub(crate) trees: Vec<crate::search::TreeLinks>,
}

#[derive(Debug, Serialize)]
pub(crate) struct RingNeighbours {
    pub(crate) prev: i32,
    pub(crate) next: i32,
}

impl<'a> ConnectionJson<'a> {
    /// The whole connection up to `limits::MAX_LISTED_RANKS` ranks, else its summary with `rank`'s view.
    pub(crate) fn of(conn: &'a Connection, rank: i32) -> Self {
        if conn.n_ranks() <= crate::limits::MAX_LISTED_RANKS {
            return ConnectionJson::Listed(conn);
        }
        let rings = (0..conn.n_channels)
            .filter_map(|c| conn.ring_neighbours(c, rank))
            .map(|(prev, next)| RingNeighbours { prev, next })
            .collect();
        let trees = conn
            .trees
            .iter()
            .filter_map(|per_rank| per_rank.get(rank as usize).copied())
            .collect();
        ConnectionJson::Summarised(ConnectionSummary {
            n_channels: conn.n_channels,
            rings: None,
            trees: None,
            search_channels: conn.search_channels,
            n_nodes: conn.n_nodes,
            gpus_per_node: conn.gpus_per_node,
            tree_depth: conn.tree_depth,
            tree_heads: conn.tree_heads.clone(),
            per_rank_listed_up_to_ranks: crate::limits::MAX_LISTED_RANKS,
            rank_view: RankView { rank, rings, trees },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::TreeLinks;

    /// A one-channel connection of `ranks` single-GPU nodes: ring 0, 1, ..., every rank a tree root.
    fn connection(ranks: usize) -> Connection {
        let root = TreeLinks {
            up: -1,
            down: [-1; 3],
        };
        Connection {
            n_channels: 1,
            rings: vec![(0..ranks as i32).collect()],
            trees: vec![vec![root; ranks]],
            preset_trees: Vec::new(),
            search_channels: 1,
            n_nodes: ranks,
            gpus_per_node: 1,
            tree_depth: 0,
            tree_heads: vec![[0, 0, 0]],
        }
    }

    #[test]
    fn connection_json_lists_every_rank_up_to_the_limit_then_summarises() {
        let limit = crate::limits::MAX_LISTED_RANKS;
        let listed = connection(limit);
        assert!(matches!(
            ConnectionJson::of(&listed, 0),
            ConnectionJson::Listed(_)
        ));
        let big = connection(limit + 1);
        let ConnectionJson::Summarised(summary) = ConnectionJson::of(&big, 5) else {
            panic!("{} ranks listed", limit + 1);
        };
        // Rank 5 of the ring 0, 1, ..., 65536 receives from 4 and sends to 6.
        assert_eq!(summary.rank_view.rank, 5);
        assert_eq!(summary.rank_view.rings.len(), 1);
        assert_eq!(
            (
                summary.rank_view.rings[0].prev,
                summary.rank_view.rings[0].next
            ),
            (4, 6)
        );
        assert_eq!(summary.rank_view.trees[0].up, -1);
        let json = serde_json::to_value(ConnectionJson::of(&big, 0)).unwrap();
        assert!(json["rings"].is_null() && json["trees"].is_null());
        // Rank 0 closes the ring: it receives from the last rank.
        assert_eq!(json["rank_view"]["rings"][0]["prev"], limit);
        assert_eq!(json["per_rank_listed_up_to_ranks"], limit);
    }
}
