//! `planner verify`: the shared vocabulary (collectives, data types,
//! algorithm/protocol pairs), the measurement plan (sizes and iterations per
//! size), the statistics, and the self-describing result file that
//! `verify --load` reads back on any machine.
//!
//! Timing method (the same for every backend so that they compare directly):
//! for each repeat, a loop of `iters` back-to-back collectives is timed with
//! device events on every GPU; the repeat's time is the loop's mean per call,
//! taken as the slowest GPU's. A row's measured time is the median over
//! repeats, its tail the p99 over repeats (nearest rank).

pub mod native;
pub mod rendezvous;
pub mod run;
pub mod score;

use crate::error::{Error, Result};
use crate::model::{Algo, Coll, Proto};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Verify measures the model's collectives (`Coll`). Sizes follow
/// nccl-tests: the bytes of the largest buffer of one rank (the output of
/// all-gather, the input of reduce-scatter), which is also the byte count
/// NCCL's cost model uses.
///
/// Result files and report titles spell a collective as NCCL's name in lower
/// case (`allreduce`).
pub fn coll_label(coll: Coll) -> String {
    coll.nccl_name().to_ascii_lowercase()
}

/// `#[serde(with = "coll_label_serde")]`: a `Coll` as `coll_label` spells it,
/// the result file's format.
pub mod coll_label_serde {
    use super::coll_label;
    use crate::model::Coll;
    use serde::{de::Error as _, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(coll: &Coll, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&coll_label(*coll))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Coll, D::Error> {
        let text = String::deserialize(deserializer)?;
        Coll::ALL
            .into_iter()
            .find(|c| coll_label(*c) == text)
            .ok_or_else(|| {
                D::Error::custom(format!(
                    "unknown collective `{text}`, expected one of {}",
                    Coll::ALL.map(coll_label).join(", ")
                ))
            })
    }
}

/// How NCCL's per-call TUNING line counts bytes: all-gather logs the
/// per-rank send size and reduce-scatter the per-rank receive size, so the
/// line shows `size / n_ranks` for those two.
pub fn logged_bytes(coll: Coll, size: u64, n_ranks: usize) -> u64 {
    if coll.is_ag_rs() {
        size / n_ranks.max(1) as u64
    } else {
        size
    }
}

/// Element types verify can move. Sums of the test pattern are exact in each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F32,
    Bf16,
    F16,
}

impl Dtype {
    pub fn parse(text: &str) -> Result<Dtype> {
        match text.to_ascii_lowercase().as_str() {
            "f32" | "float" | "float32" => Ok(Dtype::F32),
            "bf16" | "bfloat16" => Ok(Dtype::Bf16),
            "f16" | "half" | "float16" => Ok(Dtype::F16),
            _ => Err(Error::bad_input(format!(
                "unknown data type '{text}'; known: f32, bf16, f16"
            ))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::Bf16 => "bf16",
            Dtype::F16 => "f16",
        }
    }
    pub fn size(self) -> u64 {
        match self {
            Dtype::F32 => 4,
            Dtype::Bf16 | Dtype::F16 => 2,
        }
    }
    /// Largest integer magnitude the type holds exactly (2^(mantissa bits + 1)).
    pub fn exact_integer_limit(self) -> u64 {
        match self {
            Dtype::F32 => 1 << 24,
            Dtype::Bf16 => 1 << 8,
            Dtype::F16 => 1 << 11,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One algorithm x protocol pair, written `Ring/LL128`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Pair {
    pub algo: Algo,
    pub proto: Proto,
}

impl Pair {
    pub fn new(algo: Algo, proto: Proto) -> Self {
        Pair { algo, proto }
    }

    /// `ALGO/PROTO`, either NCCL spelling of the algorithm, any case, with or
    /// without `_` / `-` (`ring/ll128`, `NVLS_TREE/SIMPLE`, `nvls-tree/simple`).
    pub fn parse(text: &str) -> Result<Pair> {
        let bad = || {
            Error::bad_input(format!(
                "invalid pair '{text}': expected ALGO/PROTO such as Ring/LL128 (algorithms: {}; protocols: {})",
                Algo::ALL.map(|a| a.nccl_name()).join(", "),
                Proto::ALL.map(|p| p.nccl_name()).join(", ")
            ))
        };
        let (a, p) = text.trim().split_once('/').ok_or_else(bad)?;
        let algo = Algo::parse(&a.trim().replace(['_', '-'], "")).map_err(|_| bad())?;
        let proto = Proto::parse(p.trim()).map_err(|_| bad())?;
        Ok(Pair { algo, proto })
    }

    /// The pairs `--pairs all` covers: Ring and Tree with each protocol.
    /// (NVLS and NVLSTree are never run here: multicast stays off; CollNet
    /// needs a SHARP network and PAT one GPU per node, which NCCL reports as
    /// unavailable when asked.)
    pub fn ring_tree_all() -> Vec<Pair> {
        let mut pairs = Vec::new();
        for algo in [Algo::Ring, Algo::Tree] {
            for proto in Proto::ALL {
                pairs.push(Pair { algo, proto });
            }
        }
        pairs
    }
}

impl fmt::Display for Pair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.algo.nccl_name(), self.proto.nccl_name())
    }
}

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

/// Which executor produced a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The planner's own kernels (`crate::exec`).
    Native,
    /// libnccl, each pair pinned with NCCL_ALGO/NCCL_PROTO.
    Nccl,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Native => "native",
            Backend::Nccl => "nccl",
        }
    }
    /// `--backend native|nccl|both`
    pub fn parse_list(text: &str) -> Result<Vec<Backend>> {
        match text.to_ascii_lowercase().as_str() {
            "native" => Ok(vec![Backend::Native]),
            "nccl" => Ok(vec![Backend::Nccl]),
            "both" => Ok(vec![Backend::Native, Backend::Nccl]),
            _ => Err(Error::bad_input(format!(
                "unknown backend '{text}'; known: native, nccl, both"
            ))),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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

// ---------------------------------------------------------------------------
// The measurement plan.

/// How many iterations, warm-ups and repeats one (pair, size) gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IterPlan {
    /// `--iters`: calls per timed loop at small sizes.
    pub iters: u32,
    /// `--warmup`: untimed calls before the first loop.
    pub warmup: u32,
    /// `--repeats`: timed loops; the median and p99 are over these.
    pub repeats: u32,
    /// Fewer iterations at large sizes: a loop moves at most this many bytes
    /// (but always at least one call), so a sweep to 4 GiB fits its budget.
    pub loop_bytes_cap: u64,
}

impl Default for IterPlan {
    fn default() -> Self {
        IterPlan {
            iters: 20,
            warmup: 5,
            repeats: 5,
            loop_bytes_cap: 4 << 30,
        }
    }
}

impl IterPlan {
    /// Calls per timed loop at `bytes`: `iters`, capped so the loop moves at
    /// most `loop_bytes_cap` bytes, and never below 1.
    pub fn iters_at(&self, bytes: u64) -> u32 {
        let by_cap = self.loop_bytes_cap / bytes.max(1);
        (self.iters as u64).min(by_cap).max(1) as u32
    }
    /// Warm-up calls at `bytes`: at most as many as one loop, at least 1.
    pub fn warmup_at(&self, bytes: u64) -> u32 {
        self.warmup.min(self.iters_at(bytes)).max(1)
    }
    pub fn check(&self) -> Result<()> {
        if self.iters == 0 || self.repeats == 0 {
            return Err(Error::bad_input(format!(
                "invalid --iters {} / --repeats {}: both must be at least 1",
                self.iters, self.repeats
            )));
        }
        if self.iters > 1_000_000 || self.repeats > 10_000 || self.warmup > 1_000_000 {
            return Err(Error::bad_input(format!(
                "invalid --iters {} / --warmup {} / --repeats {}: too large",
                self.iters, self.warmup, self.repeats
            )));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Statistics.

/// Median (mean of the middle two for an even count); None when empty or
/// when a value is not finite.
pub fn median(values: &[f64]) -> Option<f64> {
    let sorted = sorted_finite(values)?;
    let n = sorted.len();
    Some(if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    })
}

/// Percentile by nearest rank: the smallest value with at least `p` percent
/// of the values at or below it. With 5 repeats p99 is the slowest one.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    let sorted = sorted_finite(values)?;
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

fn sorted_finite(values: &[f64]) -> Option<Vec<f64>> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    Some(sorted)
}

/// Algorithm bandwidth in GB/s (10^9 bytes per second) for `bytes` in `time_us`.
pub fn algbw_gbs(bytes: u64, time_us: f64) -> f64 {
    if time_us > 0.0 {
        bytes as f64 / (time_us * 1e3)
    } else {
        0.0
    }
}

/// FNV-1a, 64 bit: a stable fingerprint of a topology's XML text.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= *b as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

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
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GpuInfo {
    pub rank: usize,
    pub host: String,
    pub name: String,
    pub bus_id: String,
    /// Compute capability, "9.0".
    pub compute_capability: String,
    pub memory_bytes: u64,
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
}

/// What happened to one (backend, pair, size).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowStatus {
    /// Measured.
    Ok,
    /// The library or executor does not offer this pair for this collective:
    /// not a failure.
    Unavailable,
    /// It ran and broke (error, timeout); `note` says how.
    Failed,
    /// Not run (too small for the data type and rank count, or an earlier
    /// failure in the same process).
    Skipped,
}

/// NCCL's own choice for one call, from its `NCCL_DEBUG_SUBSYS=TUNING` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NcclChoice {
    pub pair: Pair,
    pub channel_lo: u32,
    pub channel_hi: u32,
}

/// One measurement row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub backend: Backend,
    /// The pinned pair; None for NCCL's free choice.
    pub pair: Option<Pair>,
    /// Requested size (see `coll_label`).
    pub bytes: u64,
    pub status: RowStatus,
    /// Why a row is not `ok`, or a remark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Calls per timed loop and timed loops actually used.
    pub iters: u32,
    pub repeats: u32,
    /// Per repeat: the loop's mean time per call in µs (slowest GPU).
    pub times_us: Vec<f64>,
    /// Median and p99 of `times_us` (derived; kept for readers of the file).
    pub median_us: Option<f64>,
    pub p99_us: Option<f64>,
    /// Elements that differed from the expected result (all ranks together).
    pub wrong: Option<u64>,
    /// For NCCL's free choice: what NCCL ran at this size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_choice: Option<NcclChoice>,
    /// Runtime channels the executor used, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channels: Option<u32>,
    /// The model's prediction when measured, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_us: Option<f64>,
}

impl Row {
    /// A row for `bytes` with no measurement yet.
    pub fn empty(backend: Backend, pair: Option<Pair>, bytes: u64, status: RowStatus) -> Row {
        Row {
            backend,
            pair,
            bytes,
            status,
            note: None,
            iters: 0,
            repeats: 0,
            times_us: Vec::new(),
            median_us: None,
            p99_us: None,
            wrong: None,
            nccl_choice: None,
            channels: None,
            predicted_us: None,
        }
    }

    /// Fill `median_us` / `p99_us` from `times_us`.
    pub fn derive_stats(&mut self) {
        self.median_us = median(&self.times_us);
        self.p99_us = percentile(&self.times_us, 99.0);
    }

    /// "Ring/LL" or "NCCL auto".
    pub fn pair_label(&self) -> String {
        match self.pair {
            Some(p) => p.to_string(),
            None => "auto".to_string(),
        }
    }
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
        for (i, row) in run.rows.iter_mut().enumerate() {
            if row.times_us.iter().any(|t| !t.is_finite() || *t < 0.0) {
                return Err(Error::bad_input(format!(
                    "{source}: row {i} ({} {} {} B) has a negative or non-finite time",
                    row.backend,
                    row.pair_label(),
                    row.bytes
                )));
            }
            row.derive_stats();
        }
        Ok(run)
    }

    pub fn load(path: &str) -> Result<VerifyRun> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::bad_input(format!("{path}: cannot read: {e}")))?;
        VerifyRun::from_json(&text, path)
    }

    pub fn save(&self, path: &str) -> Result<()> {
        let text = self.to_json()?;
        std::fs::write(path, text + "\n")
            .map_err(|e| Error::runtime(format!("{path}: cannot write the result file: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
