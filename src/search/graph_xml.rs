//! Graph XML (`NCCL_GRAPH_DUMP_FILE` / `NCCL_GRAPH_FILE`, `search.cc`):
//! `<graphs version="1"><graph id pattern crossnic nchannels speedintra
//! speedinter latencyinter typeintra typeinter samechannels><channel>[<net
//! dev/>]<gpu dev/>...[<net dev/>]</channel>...</graph>...</graphs>`.
//!
//! NCCL writes ints with `%d`, GPU and NET ids with `%#lx` (`0`, `0x1`) and
//! floats with `%g`; GPU ids are read back with `strtol(.., 16)`.

use super::engine::Graph;
use super::system::{SearchSystem, MAX_CHANNELS};
use super::{Graphs, Pattern, SearchGraph};
use crate::error::{Error, Result};
use crate::topo::{Cluster, PathType};
use crate::xml::XmlNode;

/// Path type names NCCL's graph XML knows (`kvDictLinkType`).
const XML_TYPES: [PathType; 9] = [
    PathType::Loc,
    PathType::Nvl,
    PathType::Nvb,
    PathType::Pix,
    PathType::Pxb,
    PathType::P2c,
    PathType::Pxn,
    PathType::Phb,
    PathType::Sys,
];

/// C's `%g` (6 significant digits, trailing zeros removed).
pub(crate) fn format_g(x: f64) -> String {
    if x == 0.0 {
        return "0".to_string();
    }
    if !x.is_finite() {
        return format!("{x}");
    }
    let exp = x.abs().log10().floor() as i32;
    // Round to 6 significant digits first: that can move the exponent (999999.5 -> 1e+06).
    let sci = format!("{:.5e}", x);
    let (mantissa, e) = sci.split_once('e').unwrap_or((&sci, "0"));
    let e: i32 = e.parse().unwrap_or(exp);
    if !(-4..6).contains(&e) {
        let m = trim_zeros(mantissa);
        let sign = if e < 0 { '-' } else { '+' };
        return format!("{m}e{sign}{:02}", e.abs());
    }
    let decimals = (5 - e).max(0) as usize;
    trim_zeros(&format!("{:.*}", decimals, x)).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// C's `%#lx`: `0` for zero, `0x..` otherwise.
fn format_id(v: i64) -> String {
    if v == 0 {
        "0".to_string()
    } else {
        format!("{:#x}", v)
    }
}

fn gpu_id_of_rank(sys: &SearchSystem, rank: i32) -> Option<i64> {
    let g = sys.gpu_index_of_rank(rank)?;
    Some(((sys.gpu_system_id[g] << 56) as i64) + sys.gpu_dev[g] as i64)
}

fn graph_to_xml(g: &SearchGraph, sys: &SearchSystem) -> Result<XmlNode> {
    let mut node = XmlNode::new("graph")
        .with_attr("id", g.id.to_string())
        .with_attr("pattern", g.pattern.number().to_string())
        .with_attr("crossnic", g.cross_nic.to_string())
        .with_attr("nchannels", g.n_channels.to_string())
        .with_attr("speedintra", format_g(g.bw_intra as f32 as f64))
        .with_attr("speedinter", format_g(g.bw_inter as f32 as f64))
        .with_attr("latencyinter", format_g(g.latency_inter as f32 as f64))
        .with_attr("typeintra", g.type_intra.nccl_name())
        .with_attr("typeinter", g.type_inter.nccl_name())
        .with_attr("samechannels", if g.same_channels { "1" } else { "0" });
    for (c, ch) in g.channels.iter().enumerate() {
        let mut xc = XmlNode::new("channel");
        if sys.inter {
            xc.children
                .push(XmlNode::new("net").with_attr("dev", format_id(ch.net_in.unwrap_or(0))));
        }
        for &r in &ch.ranks {
            let id = gpu_id_of_rank(sys, r).ok_or_else(|| {
                Error::runtime(format!("graph {} channel {c}: rank {r} is not a GPU", g.id))
            })?;
            xc.children
                .push(XmlNode::new("gpu").with_attr("dev", format_id(id)));
            if g.id == 3 {
                break; // NVLS graphs list only the head GPU.
            }
        }
        if sys.inter {
            xc.children
                .push(XmlNode::new("net").with_attr("dev", format_id(ch.net_out.unwrap_or(0))));
        }
        node.children.push(xc);
    }
    Ok(node)
}

/// The XML tree NCCL dumps: ring, tree, collnet direct, collnet chain, NVLS
/// (graphs NCCL did not compute appear empty, as in NCCL's dump).
pub(crate) fn graphs_to_xml(graphs: &Graphs, sys: &SearchSystem) -> Result<XmlNode> {
    let or_empty = |g: &Option<SearchGraph>, id, pattern| {
        g.clone().unwrap_or_else(|| SearchGraph::empty(id, pattern))
    };
    let ordered = [
        graphs.ring.clone(),
        graphs.tree.clone(),
        or_empty(&graphs.collnet_direct, 4, Pattern::CollNetDirect),
        or_empty(&graphs.collnet_chain, 2, Pattern::Tree),
        or_empty(&graphs.nvls, 3, Pattern::Nvls),
    ];
    let mut root = XmlNode::new("graphs").with_attr("version", "1");
    for g in &ordered {
        root.children.push(graph_to_xml(g, sys)?);
    }
    Ok(root)
}

/// The graph XML text for `graphs` searched on `cluster`.
pub fn write_graphs(graphs: &Graphs, cluster: &Cluster) -> Result<String> {
    let sys = super::search_system(cluster)?;
    Ok(crate::xml::write(&graphs_to_xml(graphs, &sys)?))
}

fn parse_hex(text: &str) -> Option<i64> {
    let t = text.trim();
    let body = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    i64::from_str_radix(body, 16).ok()
}

fn int_attr(node: &XmlNode, key: &str, source: &str) -> Result<i64> {
    let v = node.required(key, source)?;
    crate::xml::parse_int(v).ok_or_else(|| {
        Error::bad_input(format!(
            "{source}:{}: <{} {key}=\"{v}\">: not an integer",
            node.line, node.name
        ))
    })
}

fn float_attr(node: &XmlNode, key: &str, source: &str) -> Result<f32> {
    let v = node.required(key, source)?;
    v.trim()
        .parse::<f32>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| {
            Error::bad_input(format!(
                "{source}:{}: <{} {key}=\"{v}\">: not a non-negative number",
                node.line, node.name
            ))
        })
}

fn type_attr(node: &XmlNode, key: &str, source: &str) -> Result<PathType> {
    let v = node.required(key, source)?;
    PathType::from_name(v)
        .filter(|t| XML_TYPES.contains(t))
        .ok_or_else(|| {
            Error::bad_input(format!(
                "{source}:{}: <{} {key}=\"{v}\">: not a path type (LOC NVL NVB PIX PXB P2C PXN PHB SYS)",
                node.line, node.name
            ))
        })
}

/// Read a graph XML, checked against the topology: every GPU must exist,
/// every channel must list each GPU once (the head only for NVLS), NETs must
/// exist and enclose the channel when more than one node, and `nchannels`
/// must match the channels listed.
pub(crate) fn parse_graphs(root: &XmlNode, sys: &SearchSystem, source: &str) -> Result<Vec<Graph>> {
    if root.name != "graphs" {
        return Err(Error::bad_input(format!(
            "{source}:{}: expected <graphs>, found <{}>",
            root.line, root.name
        )));
    }
    if let Some(v) = root.attr("version") {
        if v.trim() != "1" {
            return Err(Error::bad_input(format!(
                "{source}:{}: <graphs version=\"{v}\">: only version 1 is known",
                root.line
            )));
        }
    }
    let ngpus = sys.ngpus;
    let mut out: Vec<Graph> = Vec::new();
    for xg in &root.children {
        let at = |msg: String| Error::bad_input(format!("{source}:{}: {msg}", xg.line));
        if xg.name != "graph" {
            return Err(at(format!("unexpected <{}> inside <graphs>", xg.name)));
        }
        let id = int_attr(xg, "id", source)?;
        if !(0..=4).contains(&id) {
            return Err(at(format!("graph id {id}: must be 0..4")));
        }
        if out.iter().any(|g| g.id as i64 == id) {
            return Err(at(format!("graph id {id} appears twice")));
        }
        let pattern = match int_attr(xg, "pattern", source)? {
            1 => Pattern::BalancedTree,
            2 => Pattern::SplitTree,
            3 => Pattern::Tree,
            4 => Pattern::Ring,
            5 => Pattern::Nvls,
            6 => Pattern::CollNetDirect,
            p => return Err(at(format!("graph {id}: pattern {p} is not 1..6"))),
        };
        let cross_nic = int_attr(xg, "crossnic", source)?;
        if !(0..=2).contains(&cross_nic) {
            return Err(at(format!(
                "graph {id}: crossnic {cross_nic} is not 0, 1 or 2"
            )));
        }
        let nchannels = int_attr(xg, "nchannels", source)?;
        if nchannels < 0 || nchannels as usize > MAX_CHANNELS {
            return Err(at(format!(
                "graph {id}: nchannels {nchannels} is not 0..{MAX_CHANNELS}"
            )));
        }
        let listed = xg.children.len();
        if listed != nchannels as usize {
            return Err(at(format!(
                "graph {id}: nchannels=\"{nchannels}\" but {listed} <channel> elements"
            )));
        }
        let latency = match xg.attr("latencyinter") {
            Some(_) => float_attr(xg, "latencyinter", source)?,
            None => 0.0,
        };
        let mut g = Graph::new(id as u32, pattern, ngpus, 0, MAX_CHANNELS);
        g.cross_nic = cross_nic as u32;
        g.n_channels = nchannels as usize;
        g.bw_intra = float_attr(xg, "speedintra", source)?;
        g.bw_inter = float_attr(xg, "speedinter", source)?;
        g.latency_inter = latency;
        g.type_intra = type_attr(xg, "typeintra", source)?;
        g.type_inter = type_attr(xg, "typeinter", source)?;
        g.same_channels = int_attr(xg, "samechannels", source)? != 0;
        let width = if id == 3 { 1 } else { ngpus };
        for (c, xc) in xg.children.iter().enumerate() {
            let at = |msg: String| Error::bad_input(format!("{source}:{}: {msg}", xc.line));
            if xc.name != "channel" {
                return Err(at(format!("unexpected <{}> inside <graph>", xc.name)));
            }
            let mut gpus: Vec<i32> = Vec::new();
            let mut nets: Vec<(usize, i64)> = Vec::new();
            for (pos, sub) in xc.children.iter().enumerate() {
                let dev_text = sub.required("dev", source)?;
                let dev = parse_hex(dev_text).ok_or_else(|| {
                    Error::bad_input(format!(
                        "{source}:{}: <{} dev=\"{dev_text}\">: not a hex id",
                        sub.line, sub.name
                    ))
                })?;
                match sub.name.as_str() {
                    "gpu" => {
                        let rank = (0..ngpus)
                            .find(|&i| {
                                ((sys.gpu_system_id[i] << 56) as i64) + sys.gpu_dev[i] as i64
                                    == dev
                            })
                            .map(|i| sys.gpu_rank[i])
                            .ok_or_else(|| {
                                Error::bad_input(format!(
                                    "{source}:{}: <gpu dev=\"{dev_text}\">: no such GPU in the topology (devs {:?})",
                                    sub.line, sys.gpu_dev
                                ))
                            })?;
                        if gpus.contains(&rank) {
                            return Err(Error::bad_input(format!(
                                "{source}:{}: <gpu dev=\"{dev_text}\"> appears twice in channel {c}",
                                sub.line
                            )));
                        }
                        gpus.push(rank);
                    }
                    "net" => {
                        if sys.net_index_of_id(dev).is_none() {
                            return Err(Error::bad_input(format!(
                                "{source}:{}: <net dev=\"{dev_text}\">: no such NET in the topology",
                                sub.line
                            )));
                        }
                        nets.push((pos, dev));
                    }
                    other => {
                        return Err(Error::bad_input(format!(
                            "{source}:{}: unexpected <{other}> inside <channel>",
                            sub.line
                        )))
                    }
                }
            }
            if gpus.len() != width {
                return Err(at(format!(
                    "graph {id} channel {c}: {} GPUs listed, the topology has {}",
                    gpus.len(),
                    width
                )));
            }
            if sys.inter {
                let last = xc.children.len().saturating_sub(1);
                if nets.len() != 2 || nets[0].0 != 0 || nets[1].0 != last {
                    return Err(at(format!(
                        "graph {id} channel {c}: a multi-node channel needs one <net> first and one last"
                    )));
                }
                g.inter[2 * c] = nets[0].1;
                g.inter[2 * c + 1] = nets[1].1;
            }
            g.intra[c * ngpus..c * ngpus + width].copy_from_slice(&gpus);
        }
        out.push(g);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_g() {
        assert_eq!(format_g(30.0), "30");
        assert_eq!(format_g(60.0), "60");
        assert_eq!(format_g(0.0), "0");
        assert_eq!(format_g(0.12), "0.12");
        assert_eq!(format_g(17.5), "17.5");
        assert_eq!(format_g(45.1f32 as f64), "45.1");
        assert_eq!(format_g(0.1f32 as f64), "0.1");
        assert_eq!(format_g(1.25), "1.25");
        assert_eq!(format_g(370.8f32 as f64), "370.8");
        assert_eq!(format_g(1234567.0), "1.23457e+06");
        assert_eq!(format_g(0.0001), "0.0001");
        assert_eq!(format_g(0.00001), "1e-05");
    }

    #[test]
    fn ids() {
        assert_eq!(format_id(0), "0");
        assert_eq!(format_id(1), "0x1");
        assert_eq!(format_id(16), "0x10");
        assert_eq!(parse_hex("0x1"), Some(1));
        assert_eq!(parse_hex("10"), Some(16));
        assert_eq!(parse_hex("zz"), None);
    }
}
