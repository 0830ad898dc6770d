//! The result file of `planner verify` (`"format": "planner-verify"`): what one run measured, with what it ran
//! on, self-describing so that `verify --load`, `calibrate`, `tune` and `diff` read it back on any machine. Its own
//! module, placed before both verify (which writes it) and calibrate (which reads it), so that a reader of result
//! files needs no measuring code.

use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::measure::{coll_label_serde, Backend, GpuInfo, IterPlan, Row};
use crate::model::Coll;
use nccl_tuner_planner::plan::fnv1a64;
use serde::{Deserialize, Serialize};

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
    #[serde(default = "complete_by_default")]
    pub complete: bool,
    /// Why a run ended incomplete (Ctrl-C, a crashed NCCL child, a timeout, a lost rank).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
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
    pub tuner: Option<TunerRecord>,
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
        // The topology documents stay verbatim (their hash is checked); every other string is echoed by --load.
        let mut value = value;
        crate::fsio::printable_strings(
            &mut value,
            &["topology_xml", "nccl_topology_xml", "nccl_graph_xml"],
        );
        let mut run: VerifyRun = serde_json::from_value(value)
            .map_err(|e| Error::bad_input(format!("{source}: bad result file: {e}")))?;
        run.check(source)?;
        for row in &mut run.rows {
            row.derive_stats();
        }
        Ok(run)
    }

    /// The file against its own header and against physics, naming the row: a world of at least one rank, no more
    /// nodes than ranks and no more ranks than the topology's GPUs x nodes, sizes
    /// of 1 B to 1 TiB, times that are positive normal numbers (0, subnormal, negative, inf and NaN are no
    /// measurement), at most `bytes` x world_size wrong elements, one row per (backend, pair, size), and a
    /// topology that matches its recorded hash.
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
        // Every node holds a rank, and a node holds no more ranks than its topology has GPUs (a run may use fewer).
        let nodes = m.nodes.max(1);
        if nodes > m.world_size {
            return Err(Error::bad_input(format!(
                "{source}: machine.nodes {} but world_size {}: every node holds at least one rank",
                m.nodes, m.world_size
            )));
        }
        if let Some(root) = m
            .topology_xml
            .as_deref()
            .and_then(|x| crate::xml::parse(x, source).ok())
        {
            let gpus = count_named(&root, "gpu");
            if gpus > 0 && m.world_size > gpus.saturating_mul(nodes) {
                return Err(Error::bad_input(format!(
                    "{source}: machine.world_size {} but topology_xml holds {gpus} GPU(s) per node x {nodes} node(s)",
                    m.world_size
                )));
            }
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
            // Each rank checks at most `bytes` elements of its output: more wrong elements than that, over all
            // ranks, is no count (and would overflow the sums of the report).
            let most_wrong = row.bytes.saturating_mul(m.world_size as u64);
            if let Some(wrong) = row.wrong.filter(|w| *w > most_wrong) {
                return Err(Error::bad_input(format!(
                    "{}: wrong {wrong} is more elements than its {} ranks hold ({most_wrong} at most)",
                    label(),
                    m.world_size
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
        crate::fsio::write_output(path, (self.to_json()? + "\n").as_bytes())
    }
}

/// Files written before `complete` existed ran to their end.
/// Elements named `name` in the tree under `node` (the XML reader bounds its depth and size).
fn count_named(node: &crate::xml::XmlNode, name: &str) -> usize {
    node.children
        .iter()
        .map(|c| usize::from(c.name == name) + count_named(c, name))
        .sum()
}

fn complete_by_default() -> bool {
    true
}

/// Why a run ended before measuring everything it was asked to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// SIGINT (Ctrl-C) or SIGTERM: the run stopped after the current size.
    Interrupted,
    /// A rank of a launcher run stopped answering.
    RankLost,
    /// An NCCL child died (a signal, or an exit without its results).
    ChildCrashed,
    /// A size did not finish within --timeout.
    Timeout,
    /// Planner itself failed part-way (the error is the detail).
    Failed,
}

impl StopReason {
    pub(crate) fn label(self) -> &'static str {
        match self {
            StopReason::Interrupted => "interrupted",
            StopReason::RankLost => "rank lost",
            StopReason::ChildCrashed => "child crashed",
            StopReason::Timeout => "timeout",
            StopReason::Failed => "failed",
        }
    }
}

/// The `stopped` record of an incomplete file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stopped {
    pub reason: StopReason,
    /// What happened, where: "nccl Ring/LL: the child ended (signal: 6 (SIGABRT)) at 4 MiB".
    pub detail: String,
}

/// What the result file records about the tuned run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunerRecord {
    /// The plan as the run used it (absolute path) and its FNV-1a 64 hash.
    pub plan_path: String,
    pub plan_hash: String,
    pub plugin_path: String,
    /// What NCCL and the plugin said about loading it and the plan (NCCL's
    /// `Successfully loaded external tuner plugin ...`, the plugin's `plan
    /// ... applies: K of M rules ...` or the WARN why it changes nothing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plugin_log: Vec<String>,
}
