//! NCCL's graph dump (`NCCL_GRAPH_DUMP_FILE`, `<graphs><graph id=..>`) read
//! back as search results, so `--graph FILE` can feed the model NCCL's own
//! graphs instead of the planner's search.

use crate::error::{Error, Result};
use crate::search::{Connection, Graphs, Pattern, SearchChannel, SearchGraph, SearchResult};
use crate::topo::xml::{self, parse_int, XmlNode};
use crate::topo::PathType;

fn pattern_from(n: i64) -> Option<Pattern> {
    Some(match n {
        1 => Pattern::BalancedTree,
        2 => Pattern::SplitTree,
        3 => Pattern::Tree,
        4 => Pattern::Ring,
        5 => Pattern::Nvls,
        6 => Pattern::CollNetDirect,
        _ => return None,
    })
}

fn graph_from(node: &XmlNode, source: &str) -> Result<SearchGraph> {
    let int = |key: &str| -> Result<i64> {
        let v = node.required(key, source)?;
        parse_int(v).ok_or_else(|| {
            Error::bad_input(format!(
                "{source}:{}: <graph {key}=\"{v}\">: not an integer",
                node.line
            ))
        })
    };
    let float = |key: &str| -> Result<f64> {
        let v = node.required(key, source)?;
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| {
                Error::bad_input(format!(
                    "{source}:{}: <graph {key}=\"{v}\">: not a non-negative number",
                    node.line
                ))
            })
    };
    let path = |key: &str| -> Result<PathType> {
        let v = node.required(key, source)?;
        PathType::from_name(v).ok_or_else(|| {
            Error::bad_input(format!(
                "{source}:{}: <graph {key}=\"{v}\">: not an NCCL path type (LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS, NET, DIS)",
                node.line
            ))
        })
    };
    let id = int("id")?;
    let pattern_number = int("pattern")?;
    let pattern = pattern_from(pattern_number).ok_or_else(|| {
        Error::bad_input(format!(
            "{source}:{}: <graph pattern=\"{pattern_number}\">: not an NCCL pattern (1..6)",
            node.line
        ))
    })?;
    let n_channels = int("nchannels")?;
    if !(0..=64).contains(&n_channels) {
        return Err(Error::bad_input(format!(
            "{source}:{}: <graph nchannels=\"{n_channels}\">: must be between 0 and 64",
            node.line
        )));
    }
    let mut channels = Vec::new();
    for ch in node.children_named("channel") {
        let mut ranks = Vec::new();
        let mut nets = Vec::new();
        for item in &ch.children {
            let dev = item.required("dev", source)?;
            let value = parse_int(dev).ok_or_else(|| {
                Error::bad_input(format!(
                    "{source}:{}: <{} dev=\"{dev}\">: not an integer",
                    item.line, item.name
                ))
            })?;
            match item.name.as_str() {
                "gpu" => ranks.push(value as i32),
                "net" => nets.push(value),
                other => {
                    return Err(Error::bad_input(format!(
                        "{source}:{}: unexpected <{other}> in a graph channel",
                        item.line
                    )))
                }
            }
        }
        channels.push(SearchChannel {
            ranks,
            net_in: nets.first().copied(),
            net_out: nets.get(1).copied(),
        });
    }
    Ok(SearchGraph {
        id: id as u32,
        pattern,
        cross_nic: int("crossnic")?.max(0) as u32,
        n_channels: n_channels as usize,
        bw_intra: float("speedintra")?,
        bw_inter: float("speedinter")?,
        type_intra: path("typeintra")?,
        type_inter: path("typeinter")?,
        latency_inter: float("latencyinter")?,
        same_channels: int("samechannels")? != 0,
        channels,
    })
}

/// Parse a graph dump. The runtime channel count is NCCL's postset rule for
/// the common cases (search channels doubled, doubled again for sm90+
/// multi-node rings over 45 GB/s with fewer than 16 channels, at most 64);
/// the planner's own search computes it exactly.
pub fn parse_graphs(text: &str, source: &str, min_sm: u32, n_nodes: usize) -> Result<SearchResult> {
    let root = xml::parse(text, source)?;
    if root.name != "graphs" {
        return Err(Error::bad_input(format!(
            "{source}:{}: expected <graphs>, found <{}>",
            root.line, root.name
        )));
    }
    let mut by_id: [Option<SearchGraph>; 5] = Default::default();
    for node in root.children_named("graph") {
        let g = graph_from(node, source)?;
        let slot = by_id.get_mut(g.id as usize).ok_or_else(|| {
            Error::bad_input(format!(
                "{source}:{}: <graph id=\"{}\">: NCCL graph ids are 0..4",
                node.line, g.id
            ))
        })?;
        *slot = Some(g);
    }
    let [ring, tree, collnet_chain, nvls, collnet_direct] = by_id;
    let ring = ring
        .ok_or_else(|| Error::bad_input(format!("{source}: no ring graph (<graph id=\"0\">)")))?;
    let tree = tree
        .ok_or_else(|| Error::bad_input(format!("{source}: no tree graph (<graph id=\"1\">)")))?;
    let keep = |g: Option<SearchGraph>| g.filter(|g| g.n_channels > 0);
    let mut channels = (2 * ring.n_channels.min(tree.n_channels)).min(64);
    if min_sm >= 90 && n_nodes > 1 && ring.bw_intra > 45.0 && channels < 16 {
        channels = (2 * channels).min(64);
    }
    Ok(SearchResult {
        graphs: Graphs {
            ring,
            tree,
            collnet_chain: keep(collnet_chain),
            collnet_direct: keep(collnet_direct),
            nvls: keep(nvls),
        },
        connection: Connection {
            n_channels: channels,
            rings: Vec::new(),
            trees: Vec::new(),
        },
    })
}
