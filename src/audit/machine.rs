//! The machine a log is audited on: its node count (the log's `comm ... nNodes`, `--nodes`, or inferred from the
//! ranks its lines name), the NICs `NCCL_IB_HCA` keeps on a topology whose NIC names may not be the machine's, and
//! the families the log's line formats allow.

use crate::error::{Error, Result};
use crate::nccl_env::NcclEnv;
use crate::nccl_log::NcclLog;
use crate::pipeline::Source;
use crate::probe::net::IfList;
use crate::topo::{Cluster, NodeKind};

/// `--nodes N` where the log's `comm ... nNodes M` says otherwise: a bad input naming both.
pub(super) fn refuse_contradicting_nodes(log: &NcclLog, flag: Option<usize>) -> Result<()> {
    match (flag, log.n_nodes) {
        (Some(n), Some(logged)) if n != logged.max(1) => Err(Error::bad_input(format!(
            "audit --nodes {n} contradicts the log: {}:{} says nNodes {logged}",
            log.source, log.shape_line
        ))),
        _ => Ok(()),
    }
}

/// How many nodes the job had: the log's `nNodes`, else `--nodes`, else the ranks the log's lines name over the
/// topology's GPUs per node (with a notice), else 1. `--nodes` that contradicts the log is a bad input.
pub(super) fn nodes_of(
    log: &NcclLog,
    flag: Option<usize>,
    gpus_per_node: usize,
    notices: &mut Vec<String>,
) -> Result<usize> {
    let gpn = gpus_per_node.max(1);
    let at = |line: usize| format!("{}:{line}", log.source);
    if let Some(n) = flag {
        crate::limits::check_nodes("audit --nodes", n as u64, gpn)?;
    }
    refuse_contradicting_nodes(log, flag)?;
    if let Some(logged) = log.n_nodes {
        return Ok(logged.max(1));
    }
    // No `nNodes`: a rank count the log prints (2.18-2.19's `Init START ... nranks N`) or the ranks its lines name.
    let named = log.largest_rank_named();
    if let Some(n) = flag {
        let ranks = n.saturating_mul(gpn);
        if let Some(r) = log.n_ranks.filter(|&r| r != ranks) {
            return Err(Error::bad_input(format!(
                "audit --nodes {n}: {n} x {gpn} GPUs = {ranks} ranks contradicts the log: {} says nRanks {r}",
                at(log.shape_line)
            )));
        }
        if let Some((rank, line)) = named.filter(|&(r, _)| r >= ranks) {
            return Err(Error::bad_input(format!(
                "audit --nodes {n}: {n} x {gpn} GPUs = {ranks} ranks contradicts the log: {} names rank {rank}",
                at(line)
            )));
        }
        return Ok(n);
    }
    if let Some(r) = log.n_ranks {
        if r > gpn && r % gpn == 0 {
            crate::limits::check_nodes(
                &format!(
                    "{}: nRanks {r} over {gpn} GPUs per node:",
                    at(log.shape_line)
                ),
                (r / gpn) as u64,
                gpn,
            )?;
            notices.push(format!(
                "{}: the log gives nRanks {r} but no nNodes: audited as {} nodes of {gpn} GPUs (pass --nodes N to say otherwise)",
                at(log.shape_line),
                r / gpn
            ));
            return Ok(r / gpn);
        }
        return Ok(1);
    }
    match named {
        Some((rank, line)) if rank >= gpn => {
            let nodes = (rank + 1).div_ceil(gpn);
            crate::limits::check_nodes(
                &format!("{}: rank {rank} over {gpn} GPUs per node: nodes", at(line)),
                nodes as u64,
                gpn,
            )?;
            notices.push(format!(
                "{}: no line gives the rank count; the ring, tree and NVLS head lines name ranks up to {rank} (line {line}), so at least {} ranks: audited as {nodes} nodes of {gpn} GPUs = {} ranks (pass --nodes N to say otherwise)",
                log.source,
                rank + 1,
                nodes * gpn
            ));
            Ok(nodes)
        }
        _ => Ok(1),
    }
}

/// The log's `NCCL_IB_HCA` on the topology it is audited on. The filter keeps the NICs NCCL's IB plugin would list;
/// on a topology whose NIC names are not the machine's (a stand-in fixture), an entry that names none of its NICs,
/// or a filter that keeps none of them (NCCL would then have no IB device and use sockets, while the log shows the
/// NICs NCCL used), shows the names do not match: the filter is then not applied, with a notice naming them.
/// Returns the environment to load the topology with.
pub(super) fn ib_hca_env(
    source: &Source,
    log: &NcclLog,
    env: &NcclEnv,
    notices: &mut Vec<String>,
) -> Result<NcclEnv> {
    let Some(spec) = env.ib_hca.clone() else {
        return Ok(env.clone());
    };
    let mut unfiltered = source.clone();
    unfiltered.nccl_env.ib_hca = None;
    let cluster = unfiltered.load()?;
    let nics = net_names(&cluster);
    if nics.is_empty() {
        return Ok(env.clone());
    }
    let filter = IfList::parse(&spec);
    let kept: Vec<&(String, i64)> = nics
        .iter()
        .filter(|(n, p)| filter.accepts(n, Some(*p)))
        .collect();
    let exclude = spec.starts_with('^');
    let body = spec.trim_start_matches('^');
    let exact = body.starts_with('=');
    let unmatched: Vec<&str> = if exclude {
        Vec::new()
    } else {
        body.trim_start_matches('=')
            .split(',')
            .filter(|e| !e.is_empty())
            .filter(|e| {
                let one = IfList::parse(&format!("{}{e}", if exact { "=" } else { "" }));
                !nics.iter().any(|(n, p)| one.accepts(n, Some(*p)))
            })
            .collect()
    };
    if kept.is_empty() || !unmatched.is_empty() {
        let line = log
            .env
            .iter()
            .rev()
            .find(|(n, _, _)| n == "NCCL_IB_HCA")
            .map_or(0, |(_, _, l)| *l);
        let names: Vec<String> = nics.iter().map(|(n, p)| format!("{n}:{p}")).collect();
        let what = if kept.is_empty() {
            format!("names none of the topology's {} NICs", nics.len())
        } else {
            format!(
                "has {} that name no NIC of the topology (it would keep {} of its {} NICs)",
                unmatched.join(", "),
                kept.len(),
                nics.len()
            )
        };
        notices.push(format!(
            "{}:{line}: NCCL_IB_HCA={spec} {what} ({}): the topology's NIC names are not the machine's, so the filter is not applied (all {} NICs kept)",
            log.source,
            names.join(" "),
            nics.len()
        ));
        let mut out = env.clone();
        out.ib_hca = None;
        return Ok(out);
    }
    Ok(env.clone())
}

/// Each NET of the topology's node: (name, port).
fn net_names(cluster: &Cluster) -> Vec<(String, i64)> {
    let topo = &cluster.node;
    let mut out: Vec<(String, i64)> = topo
        .nodes(NodeKind::Net)
        .iter()
        .filter_map(|&i| topo.node(i).net())
        .map(|n| (n.name.clone(), n.port))
        .collect();
    out.dedup();
    out
}

/// The notice for a log whose line formats rule out the family it is compared with, or that names no version.
pub(super) fn format_notices(log: &NcclLog, family: &str, notices: &mut Vec<String>) {
    let families = crate::model::table::families();
    let allowed = log.families_allowed(&families);
    let list = |v: &[&str]| {
        if v.is_empty() {
            "no single family: they contradict each other".to_string()
        } else {
            v.join(", ")
        }
    };
    if log.version.is_none() && !log.formats.is_empty() {
        let formats: Vec<String> = log
            .formats
            .iter()
            .map(|f| format!("{} (line {})", f.format.describe(), f.line))
            .collect();
        notices.push(format!(
            "the log names no NCCL version; its line formats allow NCCL {}: {}",
            list(&allowed),
            formats.join("; ")
        ));
    }
    let Some(fam) = crate::model::rules::parse_family(family) else {
        return;
    };
    let against = log.formats_ruling_out(fam);
    if against.is_empty() {
        return;
    }
    let why: Vec<String> = against
        .iter()
        .map(|f| {
            format!(
                "{} (line {}) are printed by NCCL {} only",
                f.format.describe(),
                f.line,
                f.format.families_text()
            )
        })
        .collect();
    notices.push(format!(
        "warning: audited with the NCCL {family} model, which the log's line formats rule out: {} (the formats allow {})",
        why.join("; "),
        list(&allowed)
    ));
}
