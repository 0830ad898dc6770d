//! The init lines of `nccl_log::init_lines` against the model: NVLS heads (against planner's NVLS graph),
//! `NVLS_NCHANNELS n` (the model's NVLS channel count) and `P2P Chunksize` (NCCL's rule, below); the P2P-type and
//! ring PXN/GDR lines are listed as not checked, by name and count.

use super::{rank_of, rank_prefix, Collector, DifferenceKind};
use crate::model::rules::Family;
use crate::model::Model;
use crate::nccl_log::init_lines::LogInitValue;
use crate::nccl_log::NcclLog;
use crate::search::SearchResult;
use crate::topo::{Cluster, CpuArch, NodeKind, PathType};

/// Facts of the topology the model does not carry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Facts {
    /// The best and worst path types between two distinct GPUs of a node, as indices (`PathType as usize`), from
    /// DIS and LOC when the node has one GPU: NCCL's `isAllNvlink` reads them (`all_nvlink`). None when unknown (no
    /// P2P chunk size is checked then).
    pub gpu_paths: Option<(usize, usize)>,
}

impl Facts {
    pub fn of(cluster: &Cluster, _log: &NcclLog) -> Facts {
        let topo = &cluster.node;
        let gpus = topo.nodes(NodeKind::Gpu);
        let (mut min, mut max) = (PathType::Dis as usize, PathType::Loc as usize);
        for &a in gpus {
            for &b in gpus.iter().filter(|&&b| b != a) {
                let t = topo.path(a, b).map_or(PathType::Dis, |p| p.ptype) as usize;
                min = min.min(t);
                max = max.max(t);
            }
        }
        Facts {
            gpu_paths: Some((min, max)),
        }
    }

    /// NCCL's `isAllNvlink` in `family`: up to 2.24 the best GPU pair below PIX (v2.24.3-1 src/graph/paths.cc
    /// `ncclTopoPathAllNVLink`: the minimum from PATH_DIS, so one GPU is not), from 2.25 the worst (v2.25.1-1:
    /// `ncclTopoGetGpuMaxPath` from PATH_LOC, so one GPU is).
    pub fn all_nvlink(&self, family: Family) -> Option<bool> {
        let (min, max) = self.gpu_paths?;
        let pix = PathType::Pix as usize;
        Some(if family >= (2, 25) {
            max < pix
        } else {
            min < pix
        })
    }
}

/// The value of an integer `NCCL_*` variable the log reports.
fn env_int(log: &NcclLog, name: &str) -> Option<i64> {
    log.env_value(name)
        .and_then(crate::model::knobs::parse_c_integer)
}

/// `comm->p2pChunkSize` (`computeBuffSizes`, v2.18.6-1 src/init.cc:525-530, v2.28.9-1 :716-721, dev :833-846):
/// NCCL_P2P_NET_CHUNKSIZE (128 KiB; x2 on ARM with sm100+ from v2.29.7-1 :775) across nodes, else
/// NCCL_P2P_NVL_CHUNKSIZE (512 KiB) when every GPU path is NVLink, else NCCL_P2P_PCI_CHUNKSIZE (128 KiB); at most
/// the Simple buffer (NCCL_BUFFSIZE, 4 MiB; 1 MiB on ARM in 2.18) over NCCL_STEPS (8).
pub fn p2p_chunk_size(
    log: &NcclLog,
    family: Family,
    n_nodes: usize,
    all_nvlink: bool,
    arm: bool,
    min_sm: u32,
) -> i64 {
    let net = env_int(log, "NCCL_P2P_NET_CHUNKSIZE").unwrap_or(1 << 17);
    let pci = env_int(log, "NCCL_P2P_PCI_CHUNKSIZE").unwrap_or(1 << 17);
    let nvl = env_int(log, "NCCL_P2P_NVL_CHUNKSIZE").unwrap_or(1 << 19);
    let default_buff = if arm && family < (2, 19) {
        1 << 20
    } else {
        1 << 22
    };
    let buff = env_int(log, "NCCL_BUFFSIZE")
        .filter(|&b| b != -2)
        .unwrap_or(default_buff);
    let mut chunk = if n_nodes > 1 {
        let ratio = if family >= (2, 29) && arm && min_sm >= 100 {
            2
        } else {
            1
        };
        net.saturating_mul(ratio)
    } else if all_nvlink {
        nvl
    } else {
        pci
    };
    if chunk.saturating_mul(8) > buff {
        chunk = buff / 8;
    }
    chunk
}

/// Where a list of lines starts, for a not-checked entry.
fn first_line(list: &[LogInitValue]) -> String {
    match list.first() {
        Some(v) => format!("line {}: '{}'", v.line, v.text),
        None => String::new(),
    }
}

pub(super) fn compare(
    c: &mut Collector,
    log: &NcclLog,
    model: &Model,
    search: Option<&SearchResult>,
    facts: &Facts,
    not_checked: &mut Vec<String>,
) {
    c.kind = DifferenceKind::InitLines;
    let init = &log.init;
    let multi = log.multi_rank();
    let input = &model.input;

    // NVLS heads: node 0's ranks print `NVLS Head h:` and each node's rank of head h (connect.cc:277-286).
    if !init.nvls_heads.is_empty() {
        match search {
            None => not_checked.push(format!(
                "{} 'NVLS Head' line(s): the model was given the log's graphs, not the planner's search",
                init.nvls_heads.len()
            )),
            Some(s) => {
                let gpn = input.local_ranks.max(1);
                // ncclTopoPreset: each NVLS channel's first GPU is a head, once (v2.28.9-1 connect.cc:76-87).
                let mut heads: Vec<i32> = Vec::new();
                if let Some(g) = &s.graphs.nvls {
                    for ch in g.channels.iter().take(g.n_channels) {
                        if let Some(&h) = ch.ranks.first() {
                            if !heads.contains(&h) {
                                heads.push(h);
                            }
                        }
                    }
                }
                for h in &init.nvls_heads {
                    c.rank = rank_of(log, multi, h.stream);
                    let prefix = rank_prefix(log, multi, h.stream);
                    let planner = match heads.get(h.head) {
                        Some(&local) => (0..input.n_nodes.min(20))
                            .map(|n| (n * gpn + local as usize).to_string())
                            .collect::<Vec<_>>()
                            .join(" "),
                        None => format!("no NVLS head {} ({} heads)", h.head, heads.len()),
                    };
                    let nccl = h
                        .ranks
                        .iter()
                        .map(|r| r.to_string())
                        .collect::<Vec<_>>()
                        .join(" ");
                    c.check(
                        h.line,
                        format!("{prefix}NVLS head {}", h.head),
                        nccl,
                        planner,
                    );
                }
            }
        }
    }
    // `(NVLS_NCHANNELS n)`: comm->nvlsChannels at ncclNvlsInit (2.27-2.29, nvls.cc:201).
    for v in &init.nvls_nchannels {
        c.rank = rank_of(log, multi, v.stream);
        let prefix = rank_prefix(log, multi, v.stream);
        c.check(
            v.line,
            format!("{prefix}NVLS_NCHANNELS"),
            v.value.unwrap_or(0).to_string(),
            input.nvls_channels.to_string(),
        );
    }
    // `P2P Chunksize set to n`.
    if !init.p2p_chunksize.is_empty() {
        match facts.all_nvlink(model.table.version) {
            Some(all_nvlink) => {
                let ours = p2p_chunk_size(
                    log,
                    model.table.version,
                    input.n_nodes,
                    all_nvlink,
                    input.cpu_arch == CpuArch::Arm,
                    input.min_sm,
                );
                for v in &init.p2p_chunksize {
                    c.rank = rank_of(log, multi, v.stream);
                    let prefix = rank_prefix(log, multi, v.stream);
                    c.check(
                        v.line,
                        format!("{prefix}P2P chunk size"),
                        v.value.unwrap_or(0).to_string(),
                        ours.to_string(),
                    );
                }
            }
            None => not_checked.push(format!(
                "{} 'P2P Chunksize set to' line(s) ({}): the topology's GPU paths were not given",
                init.p2p_chunksize.len(),
                first_line(&init.p2p_chunksize)
            )),
        }
    }
    c.rank = None;
    if !init.p2p_type.is_empty() {
        not_checked.push(format!(
            "{} 'Check P2P Type' line(s) ({}): not modelled (planner does not model NCCL's isAllDirectP2p/directMode/isAllCudaP2p flags)",
            init.p2p_type.len(),
            first_line(&init.p2p_type)
        ));
    }
    if !init.ring_pxn.is_empty() {
        not_checked.push(format!(
            "{} 'Connected all rings, use ring PXN p GDR g' line(s) ({}): not modelled (planner does not model NCCL's ring PXN and GDR choice)",
            init.ring_pxn.len(),
            first_line(&init.ring_pxn)
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_with(env: &str) -> NcclLog {
        let text = format!("h:1:1 [0] NCCL INFO {env}\nh:1:1 [0] NCCL INFO Channel 00/02 : 0 1\n");
        NcclLog::parse(&text, "t.log").unwrap()
    }

    #[test]
    fn p2p_chunk_sizes_by_hand() {
        let log = log_with("NCCL_DEBUG set by environment to INFO");
        // One node of NVLink GPUs: NCCL_P2P_NVL_CHUNKSIZE's 512 KiB (= 4 MiB / 8, not cut).
        assert_eq!(p2p_chunk_size(&log, (2, 28), 1, true, false, 90), 524288);
        // PCIe: 128 KiB; across nodes: 128 KiB, x2 on a GB200/GB300 (ARM, sm100) from 2.29.
        assert_eq!(p2p_chunk_size(&log, (2, 28), 1, false, false, 90), 131072);
        assert_eq!(p2p_chunk_size(&log, (2, 28), 2, true, true, 100), 131072);
        assert_eq!(p2p_chunk_size(&log, (2, 29), 2, true, true, 100), 262144);
        // 2.18 on ARM: a 1 MiB Simple buffer caps the NVLink chunk at 128 KiB.
        assert_eq!(p2p_chunk_size(&log, (2, 18), 1, true, true, 90), 131072);
        // NCCL_BUFFSIZE=1048576: 512 KiB x 8 > 1 MiB -> 128 KiB.
        let small = log_with("NCCL_BUFFSIZE set by environment to 1048576.");
        assert_eq!(p2p_chunk_size(&small, (2, 28), 1, true, false, 90), 131072);
    }
}
