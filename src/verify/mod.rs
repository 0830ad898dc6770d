//! `planner verify`: the shared vocabulary (collectives, data types,
//! algorithm/protocol pairs), the measurement plan (sizes and iterations per
//! size), the statistics, and the self-describing result file that
//! `verify --load` reads back on any machine.
//!
//! The vocabulary of a measurement (data types, rows, statistics) is `crate::measure`; the pair is `crate::model::Pair`.

pub mod fake;
pub mod keep;
pub mod native;
pub mod rendezvous;
pub mod run;
pub mod score;
pub mod session;
pub mod tuner;

use crate::measure::Backend;
pub use crate::measure::{
    algbw_gbs, coll_label, coll_label_serde, logged_bytes, Dtype, GpuInfo, IterPlan, NcclChoice,
    Row, RowStatus, SymmetricLaunch, TunerDecision,
};
use crate::model::Pair;

use crate::error::{Error, Result};
use crate::model::Coll;
use serde::{Deserialize, Serialize};

/// `--pairs all|winner|Ring/LL,...`
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairSelection {
    All,
    Winner,
    List(Vec<Pair>),
}

impl PairSelection {
    pub fn parse(text: &str) -> Result<PairSelection> {
        match text.trim().to_ascii_lowercase().as_str() {
            "all" => return Ok(PairSelection::All),
            "winner" => return Ok(PairSelection::Winner),
            _ => {}
        }
        let mut pairs = Vec::new();
        for part in text.split(',').filter(|s| !s.trim().is_empty()) {
            let pair = Pair::parse(part)?;
            if !pairs.contains(&pair) {
                pairs.push(pair);
            }
        }
        if pairs.is_empty() {
            return Err(Error::bad_input(format!(
                "invalid --pairs '{text}': give all, winner, or a list such as Ring/LL,Tree/Simple"
            )));
        }
        Ok(PairSelection::List(pairs))
    }
}

/// The three size regimes of the summary: latency-bound, middle, bandwidth-bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Regime {
    /// below 64 KiB
    Small,
    /// 64 KiB to 16 MiB, both included
    Medium,
    /// above 16 MiB
    Large,
}

impl Regime {
    pub const ALL: [Regime; 3] = [Regime::Small, Regime::Medium, Regime::Large];
    pub fn of(bytes: u64) -> Regime {
        if bytes < 64 << 10 {
            Regime::Small
        } else if bytes <= 16 << 20 {
            Regime::Medium
        } else {
            Regime::Large
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Regime::Small => "< 64 KiB",
            Regime::Medium => "64 KiB - 16 MiB",
            Regime::Large => "> 16 MiB",
        }
    }
}

/// FNV-1a, 64 bit: a stable fingerprint of a topology's XML text (the tuner plan's hash, one definition).
pub use nccl_tuner_planner::plan::fnv1a64;

// ---------------------------------------------------------------------------
// The result file.

/// First field of every result file, so a wrong file is recognised at once.
pub const RESULT_FORMAT: &str = "planner-verify";
/// Bumped when a field changes meaning; `--load` refuses newer files.
pub const RESULT_VERSION: u32 = 1;

/// Everything one `planner verify` run measured, with what it ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyRun {
    pub format: String,
    pub version: u32,
    /// The planner that took the measurements.
    pub planner_version: String,
    /// Seconds since the Unix epoch when the run ended.
    pub created_unix: u64,
    pub machine: Fingerprint,
    pub options: RunOptions,
    pub rows: Vec<Row>,
    /// Whether every requested measurement ran to its end. The file is rewritten after each
    /// finished size with `false`, and `true` once the run ended normally; files written before
    /// the field existed are complete.
    #[serde(default = "keep::complete_by_default")]
    pub complete: bool,
    /// Why a run ended incomplete (Ctrl-C, a crashed NCCL child, a timeout, a lost rank).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<keep::Stopped>,
}

/// What the measurements were taken on.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Host names, one per node.
    pub hosts: Vec<String>,
    /// Every GPU of the communicator, by rank.
    pub gpus: Vec<GpuInfo>,
    /// Kernel-mode driver (NVML), e.g. "580.159.04".
    pub driver_version: Option<String>,
    /// CUDA version the driver supports (cuDriverGetVersion), e.g. "13.0".
    pub cuda_version: Option<String>,
    /// libnccl the reference ran on, e.g. "2.28.3".
    pub nccl_version: Option<String>,
    /// Ranks in the communicator.
    pub world_size: usize,
    /// Processes that drove them (1: one process for every GPU).
    pub processes: usize,
    /// Where the topology came from (live probe, fixture, file).
    pub topology_source: String,
    /// FNV-1a 64 of `topology_xml`, hex.
    pub topology_hash: String,
    /// NCCL topology XML of one node, as the planner read it; `--load` rebuilds
    /// the model's input from it.
    pub topology_xml: Option<String>,
    /// Nodes (`--nodes`, or the hosts of a multi-process run).
    pub nodes: usize,
    /// µs added to every NIC (`--net-latency`).
    pub net_latency_us: f64,
    /// NCCL's own view of the machine, dumped by rank 0 during the run
    /// (NCCL_TOPO_DUMP_FILE and NCCL_GRAPH_DUMP_FILE): the model can be
    /// re-run on them anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_topology_xml: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_graph_xml: Option<String>,
    /// The links of one node, from `topology_xml` (`links_from_xml`), e.g. "2 GPUs: 18 NVLink
    /// to NVSwitch, PCIe 32.0 GT/s x0; NICs: eth0 10000 Mb/s". Absent in files written
    /// before it existed: `planner diff` derives it from `topology_xml` then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<String>,
}

impl Fingerprint {
    /// A one-line summary of a node's links from its NCCL topology XML: NVLinks per GPU
    /// and where they go, each GPU's PCIe link, and the NICs. None when the XML does not parse.
    pub fn links_from_xml(xml: &str) -> Option<String> {
        let root = crate::xml::parse(xml, "topology").ok()?;
        let mut gpus: Vec<(String, usize)> = Vec::new();
        let mut nics: Vec<String> = Vec::new();
        // (pci link of the enclosing PCI device, element)
        fn walk<'a>(
            n: &'a crate::xml::XmlNode,
            pci: Option<&'a crate::xml::XmlNode>,
            out: &mut Vec<(Option<&'a crate::xml::XmlNode>, &'a crate::xml::XmlNode)>,
        ) {
            for c in &n.children {
                out.push((pci, c));
                walk(c, if c.name == "pci" { Some(c) } else { pci }, out);
            }
        }
        let mut all = Vec::new();
        walk(&root, None, &mut all);
        for (pci, node) in all {
            match node.name.as_str() {
                "gpu" => {
                    // NCCL's target classes: 0x068000 an NVSwitch, 0x0604xx a CPU bridge, else a GPU.
                    let mut links: Vec<(String, u64)> = Vec::new();
                    for l in node.children_named("nvlink") {
                        let count = l.attr("count").and_then(crate::xml::parse_u64).unwrap_or(1);
                        let target = match l.attr("tclass").unwrap_or("") {
                            "0x068000" => "NVSwitch",
                            c if c.starts_with("0x0604") => "CPU",
                            _ => "GPU",
                        };
                        match links.iter_mut().find(|(t, _)| t == target) {
                            Some(slot) => slot.1 += count,
                            None => links.push((target.to_string(), count)),
                        }
                    }
                    let nvlink = if links.is_empty() {
                        "no NVLink".to_string()
                    } else {
                        links
                            .iter()
                            .map(|(t, n)| format!("{n} NVLink to {t}"))
                            .collect::<Vec<_>>()
                            .join(" + ")
                    };
                    let pcie = pci
                        .map(|p| {
                            format!(
                                "PCIe {} x{}",
                                p.attr("link_speed")
                                    .map(|v| v.trim_end_matches(" PCIe"))
                                    .unwrap_or("?"),
                                p.attr("link_width").unwrap_or("?")
                            )
                        })
                        .unwrap_or_else(|| "no PCIe link".to_string());
                    let text = format!("{nvlink}, {pcie}");
                    match gpus.iter_mut().find(|(t, _)| *t == text) {
                        Some(slot) => slot.1 += 1,
                        None => gpus.push((text, 1)),
                    }
                }
                "net" => nics.push(format!(
                    "{} {} Mb/s",
                    node.attr("name").unwrap_or("?"),
                    node.attr("speed").unwrap_or("?")
                )),
                _ => {}
            }
        }
        let gpus = gpus
            .iter()
            .map(|(t, n)| format!("{n} GPU{}: {t}", if *n == 1 { "" } else { "s" }))
            .collect::<Vec<_>>()
            .join("; ");
        let nics = if nics.is_empty() {
            "no NIC".to_string()
        } else {
            format!("NICs: {}", nics.join(", "))
        };
        Some(format!("{gpus}; {nics}"))
    }
}

/// The options of the run, as given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOptions {
    #[serde(with = "coll_label_serde")]
    pub collective: Coll,
    pub dtype: Dtype,
    pub sizes: Vec<u64>,
    /// `--pairs` as given.
    pub pairs: String,
    pub backends: Vec<Backend>,
    pub plan: IterPlan,
    /// CUDA-graph mode: the timed loop is captured once and replayed.
    pub graph: bool,
    pub timeout_s: u64,
    /// How the ranks were launched: "one process" or "launcher: RANK/WORLD_SIZE/...".
    pub launch: String,
    /// The model that made `predicted_us` (recorded at measurement time).
    pub model: Option<String>,
    /// `--tuner`: the plan and plugin of the `tuned` row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuner: Option<tuner::TunerRecord>,
}

impl VerifyRun {
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self)
            .map_err(|e| Error::runtime(format!("cannot serialise the verify result: {e}")))
    }

    /// Read a result file, checking its format and version; every derived
    /// field is recomputed from the raw times.
    pub fn from_json(text: &str, source: &str) -> Result<VerifyRun> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            Error::bad_input(format!(
                "{source}:{}:{}: not a planner verify result file: {e}",
                e.line(),
                e.column()
            ))
        })?;
        let format = value.get("format").and_then(|v| v.as_str());
        if format != Some(RESULT_FORMAT) {
            return Err(Error::bad_input(format!(
                "{source}: not a planner verify result file (format is {}, expected \"{RESULT_FORMAT}\")",
                format.map(|f| format!("\"{f}\"")).unwrap_or_else(|| "missing".into())
            )));
        }
        let version = value.get("version").and_then(|v| v.as_u64());
        if version != Some(RESULT_VERSION as u64) {
            return Err(Error::bad_input(format!(
                "{source}: result file version {} is not supported (this planner reads version {RESULT_VERSION})",
                version.map(|v| v.to_string()).unwrap_or_else(|| "missing".into())
            )));
        }
        let mut run: VerifyRun = serde_json::from_value(value)
            .map_err(|e| Error::bad_input(format!("{source}: bad result file: {e}")))?;
        run.check(source)?;
        for row in &mut run.rows {
            row.derive_stats();
        }
        Ok(run)
    }

    /// The file against its own header and against physics, naming the row: a world of at least one rank, sizes
    /// of 1 B to 1 TiB, times that are positive normal numbers (0, subnormal, negative, inf and NaN are no
    /// measurement), one row per (backend, pair, size), and a topology that matches its recorded hash.
    /// Linear in the rows (the duplicate check is a hash set).
    fn check(&self, source: &str) -> Result<()> {
        let m = &self.machine;
        if m.world_size == 0 {
            return Err(Error::bad_input(format!(
                "{source}: machine.world_size is 0: a run has at least one rank"
            )));
        }
        if !m.gpus.is_empty() && m.gpus.len() != m.world_size {
            return Err(Error::bad_input(format!(
                "{source}: machine.world_size {} but {} GPUs listed",
                m.world_size,
                m.gpus.len()
            )));
        }
        if !m.topology_hash.is_empty() {
            let dumps = [m.topology_xml.as_ref(), m.nccl_topology_xml.as_ref()];
            let hashes: Vec<String> = dumps
                .iter()
                .flatten()
                .map(|x| format!("{:016x}", fnv1a64(x.as_bytes())))
                .collect();
            if !hashes.is_empty() && !hashes.contains(&m.topology_hash.to_ascii_lowercase()) {
                return Err(Error::bad_input(format!(
                    "{source}: machine.topology_hash {} is not the hash of the topology the file holds ({})",
                    crate::fsio::printable(&m.topology_hash),
                    hashes.join(" / ")
                )));
            }
        }
        let mut seen = std::collections::HashSet::with_capacity(self.rows.len());
        for (i, row) in self.rows.iter().enumerate() {
            let label = || {
                format!(
                    "{source}: row {i} ({} {} {} B)",
                    row.backend,
                    row.pair_label(),
                    row.bytes
                )
            };
            if row.bytes == 0 || row.bytes > crate::units::MAX_SIZE {
                return Err(Error::bad_input(format!(
                    "{}: the size must be 1 B to 1 TiB",
                    label()
                )));
            }
            if let Some(t) = row.times_us.iter().find(|t| !(t.is_normal() && **t > 0.0)) {
                return Err(Error::bad_input(format!(
                    "{}: has a negative or non-finite time, or one of 0 or below 2.2e-308: {} µs",
                    label(),
                    crate::limits::short_number(*t)
                )));
            }
            if !seen.insert((row.backend, row.pair, row.tuned, row.bytes)) {
                return Err(Error::bad_input(format!(
                    "{}: a second row for the same backend, pair and size",
                    label()
                )));
            }
        }
        Ok(())
    }

    pub fn load(path: &str) -> Result<VerifyRun> {
        let text = crate::units::read_input_file(path)?;
        VerifyRun::from_json(&text, path)
    }

    /// Write the file whole under a temporary name and rename it over `path`: a reader, or a
    /// kill at any instant, finds the previous version or this one, never half of one.
    pub fn save(&self, path: &str) -> Result<()> {
        keep::write_atomically(path, &(self.to_json()? + "\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{median, percentile};
    use crate::model::{Algo, Proto};

    #[test]
    fn median_and_p99_by_hand() {
        // odd count: middle value
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        // even count: mean of 2 and 3
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        // 5 values: nearest rank ceil(0.99*5) = 5 -> the largest
        assert_eq!(percentile(&[5.0, 1.0, 4.0, 2.0, 3.0], 99.0), Some(5.0));
        // 200 values 1..=200: ceil(0.99*200) = 198
        let v: Vec<f64> = (1..=200).map(|x| x as f64).collect();
        assert_eq!(percentile(&v, 99.0), Some(198.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn iterations_shrink_at_large_sizes() {
        let plan = IterPlan {
            iters: 20,
            warmup: 5,
            repeats: 5,
            loop_bytes_cap: 4 << 30,
        };
        assert_eq!(plan.iters_at(8), 20);
        assert_eq!(plan.iters_at(128 << 20), 20); // 4 GiB / 128 MiB = 32 > 20
        assert_eq!(plan.iters_at(256 << 20), 16); // 4 GiB / 256 MiB
        assert_eq!(plan.iters_at(4 << 30), 1);
        assert_eq!(plan.iters_at(8 << 30), 1); // never 0
        assert_eq!(plan.warmup_at(4 << 30), 1);
        assert_eq!(plan.warmup_at(8), 5);
    }

    #[test]
    fn pairs_parse_in_either_spelling() {
        for (text, algo, proto) in [
            ("ring/ll128", Algo::Ring, Proto::Ll128),
            ("NVLS_TREE/SIMPLE", Algo::NvlsTree, Proto::Simple),
            ("nvls-tree/simple", Algo::NvlsTree, Proto::Simple),
            (" CollNet_Direct / ll ", Algo::CollNetDirect, Proto::Ll),
        ] {
            assert_eq!(Pair::parse(text).unwrap(), Pair::new(algo, proto), "{text}");
        }
        assert_eq!(
            Pair::new(Algo::Tree, Proto::Simple).to_string(),
            "Tree/Simple"
        );
        for bad in ["Ring", "Ring/LL64", "Bus/LL", ""] {
            let e = Pair::parse(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2);
        }
        assert_eq!(
            Pair::parse("Ring/LL64").unwrap_err().to_string(),
            "invalid pair 'Ring/LL64': expected ALGO/PROTO such as Ring/LL128 (algorithms: Tree, Ring, \
             CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT; protocols: LL, LL128, Simple)"
        );
        assert_eq!(
            PairSelection::parse("Ring/LL,Tree/Simple,Ring/LL").unwrap(),
            PairSelection::List(vec![
                Pair::new(Algo::Ring, Proto::Ll),
                Pair::new(Algo::Tree, Proto::Simple)
            ])
        );
        assert_eq!(PairSelection::parse("ALL").unwrap(), PairSelection::All);
        assert!(PairSelection::parse(",").is_err());
    }

    #[test]
    fn regimes_split_at_64k_and_16m() {
        assert_eq!(Regime::of(65535), Regime::Small);
        assert_eq!(Regime::of(65536), Regime::Medium);
        assert_eq!(Regime::of(16 << 20), Regime::Medium);
        assert_eq!(Regime::of((16 << 20) + 1), Regime::Large);
    }

    #[test]
    fn bus_factors_as_nccl_tests() {
        // all-reduce: 2 (n-1)/n = 2*1/2 = 1 and 2*7/8 = 1.75
        assert_eq!(Coll::AllReduce.nccl_tests_bus_factor(2), 1.0);
        assert_eq!(Coll::AllReduce.nccl_tests_bus_factor(8), 1.75);
        // all-gather: (n-1)/n = 7/8
        assert_eq!(Coll::AllGather.nccl_tests_bus_factor(8), 0.875);
        assert_eq!(Coll::Broadcast.nccl_tests_bus_factor(8), 1.0);
        // all-gather logs one rank's share: 1024 / 2
        assert_eq!(logged_bytes(Coll::AllGather, 1024, 2), 512);
        assert_eq!(logged_bytes(Coll::ReduceScatter, 1024, 4), 256);
        assert_eq!(logged_bytes(Coll::AllReduce, 1024, 2), 1024);
    }

    #[test]
    fn result_files_spell_collectives_in_lower_case() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Options {
            #[serde(with = "coll_label_serde")]
            collective: Coll,
        }
        let labels = Coll::ALL.map(coll_label);
        assert_eq!(
            labels,
            [
                "broadcast",
                "reduce",
                "allgather",
                "reducescatter",
                "allreduce"
            ]
        );
        for coll in Coll::ALL {
            let json = serde_json::to_string(&Options { collective: coll }).unwrap();
            assert_eq!(json, format!("{{\"collective\":\"{}\"}}", coll_label(coll)));
            let back: Options = serde_json::from_str(&json).unwrap();
            assert_eq!(back.collective, coll);
        }
        let err = serde_json::from_str::<Options>(r#"{"collective":"AllReduce"}"#).unwrap_err();
        assert!(
            err.to_string().contains("unknown collective `AllReduce`"),
            "{err}"
        );
    }

    #[test]
    fn fnv_known_values() {
        // FNV-1a 64 reference values: "" and "a"
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
    }
}
