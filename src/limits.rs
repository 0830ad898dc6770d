//! NCCL's fixed constants that several stages share (topology, search, executor), one definition each, and the
//! limits every input is checked against where it enters (README "Limits"). Tuning constants that vary by version
//! are data in `tuning-tables/`.

use crate::error::{Error, Result};

/// `LOC_BW` (`src/graph/topo.h`): GB/s of a node's path to itself, a link that is never a bottleneck.
pub(crate) const LOC_BW: f64 = 5000.0;
/// `MAXCHANNELS` (`src/include/device.h`): the most channels (CTAs) one communicator or collective uses.
pub const MAX_CHANNELS: usize = 64;
/// `NCCL_MAX_TREE_ARITY` (`src/include/device.h`): children per tree node.
pub(crate) const MAX_TREE_ARITY: usize = 3;
/// `NCCL_MAX_NTHREADS` (`src/include/device.h`): threads per CTA.
pub const MAX_THREADS: usize = 640;

/// `NCCL_TOPO_MAX_NODES` (NCCL 2.28.9 `src/include/graph.h:89`; 256 before 2.27, 640 from 2.30): the most nodes of
/// one kind (GPU, PCI, NVS, CPU, NIC, NET) one topology holds. The topology and search stages re-create 2.28, so a
/// host has at most 576 GPUs, 576 PCI switches, 576 NICs, ...; NCCL refuses more ("tried to create too many nodes").
pub(crate) const MAX_TOPO_NODES_PER_KIND: usize = 576;

/// Deepest element nesting the XML reader accepts. NCCL reads at most `NCCL_TOPO_XML_MAX_NODES` = 256 elements from
/// a topology file (`src/graph/topo.h:216`), so no file NCCL accepts nests deeper; graph files nest 3 deep.
pub(crate) const MAX_XML_DEPTH: usize = 256;
/// Most elements in one XML file: `NCCL_GRAPH_XML_MAX_NODES` of NCCL 2.30 (`src/graph/topo.h:211`, 4096 in 2.28),
/// the largest XML NCCL reads.
pub(crate) const MAX_XML_ELEMENTS: usize = 65_536;
/// `MAX_ATTR_COUNT` (`src/graph/xml.h:18`): attributes per element.
pub(crate) const MAX_XML_ATTRIBUTES: usize = 16;
/// `MAX_STR_LEN` (`src/graph/xml.h:17`): characters in an element name, attribute name or value.
pub(crate) const MAX_XML_STRING: usize = 255;

/// Largest input file any reader accepts (topology, graph, log, tuning table, result and calibration files). The
/// biggest real inputs are NCCL INFO logs with per-call lines, a few MiB; a bigger file is refused before it is
/// read whole.
pub(crate) const MAX_INPUT_FILE_BYTES: u64 = 64 << 20;

/// Most nodes (`--nodes`, a log's `nNodes`, a result file's `nodes`). NCCL has no node limit; the largest jobs of
/// 2026 run 100k-200k GPUs, 12,500-25,000 nodes of 8.
pub const MAX_NODES: usize = 65_536;
/// Most ranks (nodes x GPUs per node) planner connects: 65,536 nodes of 8 GPUs. The per-rank ring and tree tables
/// of every runtime channel are held in memory (16 bytes per rank and channel for the trees, twice), so at this
/// count they take about 330 MB with 16 channels and 830 MB with 64 (`NCCL_MIN_NCHANNELS=64`;
/// bench/results/large-cluster-2026-12-01). NCCL itself has no such limit; planner's, for memory.
pub(crate) const MAX_RANKS: usize = 65_536 * 8;
/// Most ranks whose rings and trees `channels --json` lists rank by rank (the former rank limit, so every output
/// of a job planner accepted before is unchanged); above it the JSON gives one rank's neighbours instead of
/// millions of lines (`report::channels::ConnectionJson`).
pub(crate) const MAX_LISTED_RANKS: usize = 65_536;

/// Largest network latency (`--net-latency`, `<net latency>`) in µs: one second. Real networks add µs; a larger
/// value only makes every time infinite.
pub(crate) const MAX_NET_LATENCY_US: f64 = 1e6;

/// Check a node count and the rank count it makes against `MAX_NODES` and `MAX_RANKS`. `what` names the input
/// (`--nodes`, `nccl.log: nNodes`, ...). Every reader of a node count calls this where the count enters.
pub(crate) fn check_nodes(what: &str, nodes: u64, gpus_per_node: usize) -> Result<()> {
    if nodes == 0 || nodes > MAX_NODES as u64 {
        return Err(Error::bad_input(format!(
            "{what} {nodes}: must be between 1 and {MAX_NODES} (planner's node limit)"
        )));
    }
    let ranks = (nodes as usize).saturating_mul(gpus_per_node);
    if ranks > MAX_RANKS {
        return Err(Error::bad_input(format!(
            "{what} {nodes}: {nodes} nodes x {gpus_per_node} GPUs = {ranks} ranks, more than planner's limit of {MAX_RANKS} ranks"
        )));
    }
    Ok(())
}

/// Check a network latency in µs: finite and within 0..=`MAX_NET_LATENCY_US`. `what` names the input.
pub(crate) fn check_net_latency_us(what: &str, value: f64) -> Result<()> {
    if !value.is_finite() || !(0.0..=MAX_NET_LATENCY_US).contains(&value) {
        return Err(Error::bad_input(format!(
            "{what} {}: must be a number of µs between 0 and {MAX_NET_LATENCY_US:.0} (planner's limit: 1 s)",
            short_number(value)
        )));
    }
    Ok(())
}

/// A number as a person reads it: `2.5`, `1e308` (Rust's `{}` writes 1e308 with 309 digits).
pub(crate) fn short_number(value: f64) -> String {
    if value.is_finite() && value != 0.0 && !(1e-6..1e15).contains(&value.abs()) {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_and_latency_checks_name_input_and_limit() {
        assert!(check_nodes("--nodes", 65_536, 8).is_ok());
        let e = check_nodes("--nodes", 65_537, 1).unwrap_err();
        assert!(e.to_string().contains("between 1 and 65536"), "{e}");
        let e = check_nodes("nccl.log: nNodes", u64::MAX, 8).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("nccl.log: nNodes") && e.to_string().contains("65536"));
        // 65,536 x 8 = 524,288 ranks is the most; 4,096 nodes of 576 GPUs (2.4 M ranks) are refused.
        assert!(check_nodes("--nodes", 65_536, 9).is_err());
        let e = check_nodes("--nodes", 4096, 576).unwrap_err();
        assert!(e.to_string().contains("524288 ranks"), "{e}");
        assert!(check_nodes("--nodes", 0, 8).is_err());
        assert!(check_net_latency_us("--net-latency", 2.0).is_ok());
        for bad in [f64::NAN, f64::INFINITY, -1.0, 1e308] {
            let e = check_net_latency_us("--net-latency", bad).unwrap_err();
            assert!(e.to_string().contains("--net-latency"), "{e}");
            assert!(e.to_string().contains("1000000"), "{e}");
        }
        assert_eq!(short_number(1e308), "1e308");
        assert_eq!(short_number(2.5), "2.5");
    }
}
