//! NCCL's tuning constants as data: one JSON file per NCCL version family in
//! `tuning-tables/`, embedded in the binary, or loaded from a file with
//! `--tuning-table`. Every value is checked on load; a missing, negative or
//! malformed constant is a bad input naming the file and the key.

use super::cells::{AlgoProto, NUM_ALGORITHMS, NUM_HW_LINKS, NUM_PROTOCOLS};
use super::rules::{self, Family, Rule};
use super::{Algo, Proto};
use crate::error::{Error, Result};
use serde::Serialize;
use serde_json::Value;

/// The tables built into the binary, oldest first: one per NCCL release
/// family, each checked against the latest patch tag of its family.
pub const EMBEDDED: &[(&str, &str)] = &[
    ("2.18", include_str!("../../tuning-tables/nccl-2.18.json")),
    ("2.19", include_str!("../../tuning-tables/nccl-2.19.json")),
    ("2.20", include_str!("../../tuning-tables/nccl-2.20.json")),
    ("2.21", include_str!("../../tuning-tables/nccl-2.21.json")),
    ("2.22", include_str!("../../tuning-tables/nccl-2.22.json")),
    ("2.23", include_str!("../../tuning-tables/nccl-2.23.json")),
    ("2.24", include_str!("../../tuning-tables/nccl-2.24.json")),
    ("2.25", include_str!("../../tuning-tables/nccl-2.25.json")),
    ("2.26", include_str!("../../tuning-tables/nccl-2.26.json")),
    ("2.27", include_str!("../../tuning-tables/nccl-2.27.json")),
    ("2.28", include_str!("../../tuning-tables/nccl-2.28.json")),
    ("2.29", include_str!("../../tuning-tables/nccl-2.29.json")),
    ("2.30", include_str!("../../tuning-tables/nccl-2.30.json")),
    ("2.31", include_str!("../../tuning-tables/nccl-2.31.json")),
];

/// Families read from an unreleased branch (their tables say `"pre_release": true`):
/// used only when a version, a log or a live libnccl asks for them, never by default.
pub(crate) const PRE_RELEASE_FAMILIES: &[&str] = &["2.31"];

/// The newest NCCL whose libnccl is known to exist (PyPI's nvidia-nccl-cu12/-cu13 wheels),
/// beyond every modelled family; its source is not public here.
pub const NEWEST_KNOWN_UNMODELLED: &str = "2.32.3";

/// GPU generations as NCCL indexes its bandwidth tables (`compCapIndex`).
pub(crate) const GENERATIONS: [&str; 4] = ["Volta", "Ampere", "Hopper", "Blackwell"];
/// NCCL's latency hardware classes (`NCCL_HW_*`).
pub const HW_CLASSES: [&str; 3] = ["NVLINK", "PCI", "NET"];

/// `[1 node, 2 nodes, >=4 nodes]`.
pub(crate) type PerScale = [f64; 3];

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Factors {
    pub(crate) ring_ll_bw: f64,
    pub ring_ll128_bw: f64,
    pub(crate) tree_allreduce_bw: f64,
    pub(crate) tree_ll_bw_divisor: f64,
    pub(crate) tree_ll128_bw_one_node: f64,
    pub(crate) tree_ll128_bw_multi_node: f64,
    pub(crate) tree_pattern_tree_bw: f64,
    pub(crate) pat_bw: f64,
    pub(crate) collnet_direct_inter_bw: f64,
    pub(crate) collnet_direct_sm90_bw: f64,
    pub(crate) collnet_direct_arity_latency_us: f64,
    pub(crate) pat_log_latency_divisor: f64,
    pub(crate) pat_rank_latency_us: f64,
    pub(crate) ring_simple_plateau_latency_pre_sm80: f64,
    pub(crate) ring_simple_plateau_latency: f64,
    pub(crate) ring_simple_plateau_min_bytes_per_rank_channel: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetOverhead {
    pub(crate) x86_intel: f64,
    pub(crate) x86_amd: f64,
    pub(crate) other: f64,
    pub(crate) simple_multiplier: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Threads {
    pub(crate) max_nthreads: i64,
    pub(crate) simple_max_nthreads: i64,
    pub(crate) ll_max_nthreads: i64,
    pub(crate) ll128_max_nthreads: i64,
    pub(crate) warp_size: i64,
    pub(crate) ring_simple_low_bw_nthreads: i64,
    pub(crate) pci_bw: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadThresholds {
    pub(crate) ll: i64,
    pub(crate) ll128: i64,
    pub(crate) simple: i64,
    pub(crate) collnet_simple: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scheduler {
    /// `MinTrafficPerChannel` in `scheduleCollTasksToPlan`.
    pub min_traffic_per_channel: u64,
    /// 2.30: traffic per channel is rounded up to 16 bytes; 2.28: it is at
    /// least `min_traffic_per_channel` and not rounded.
    pub(crate) round_traffic_per_channel_to_16: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NvlsChannels {
    pub(crate) sm90: usize,
    pub(crate) sm100_one_node: usize,
    pub(crate) sm100_multi_node: usize,
}

/// Code paths that changed between versions (not numbers, but switches).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Behaviour {
    /// LL128's auto gate accepts different GPU generations when the oldest is sm90+.
    pub ll128_mixed_compcap_allowed_from_sm90: bool,
    /// CollNetChain is disabled when the collnet plugin lacks chain support.
    pub collnet_chain_needs_chain_support: bool,
    /// NVLSTree gets the tree correction on Blackwell with x86 CPUs.
    pub nvls_tree_correction_sm100_x86: bool,
}

/// One constant or rule that differs from the previous family
/// (`changes_from_previous` in the table file), for `planner diff`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// A constant's dotted path (`hw_latencies.NET.Tree`) or `rule:NAME`.
    pub what: String,
    /// The previous family's value (`"on"`/`"off"` for a rule).
    pub from: Value,
    pub to: Value,
    /// `tag file:line` where the new value was read.
    pub source: String,
}

/// A patch release of the family that differs from the tag the table carries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct PatchChange {
    pub(crate) tag: String,
    pub(crate) what: String,
    pub(crate) source: String,
}

/// Every constant of NCCL's cost model for one version family.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TuningTable {
    pub family: String,
    /// `family` as numbers: decides which `rules::Rule`s apply.
    pub version: Family,
    pub verified_against: String,
    /// Read from an unreleased branch (`"pre_release": true`); absent in released families.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pre_release: bool,
    /// Where the table came from (`built-in nccl-2.28.json` or a path).
    pub(crate) source: String,
    /// By GPU generation.
    pub(crate) nvls_efficiency: [f64; 4],
    /// `[algo][proto]`, µs.
    pub base_latencies: AlgoProto<f64>,
    /// `[hw][algo][proto]`, µs.
    pub hw_latencies: [AlgoProto<f64>; NUM_HW_LINKS],
    /// `[generation][scale]`, GB/s.
    pub ll_max_bws: [PerScale; 4],
    pub per_channel_max_ring_ll128_bws: [PerScale; 4],
    pub per_channel_max_tree_ll128_bws: [PerScale; 4],
    pub per_channel_max_tree_bws: [PerScale; 4],
    pub per_channel_max_nvls_tree_bws: [PerScale; 4],
    /// `[proto][log2(bytes/64)]`; 23 entries in 2.28, 24 from 2.30.
    pub tree_correction_factor: [Vec<f64>; 3],
    pub factors: Factors,
    pub net_overhead_us: NetOverhead,
    pub threads: Threads,
    pub thread_thresholds: ThreadThresholds,
    pub max_dev_work_batch_colls: i64,
    pub max_direct_arity: usize,
    pub max_nvls_arity: usize,
    pub scheduler: Scheduler,
    pub nvls_channels: NvlsChannels,
    pub behaviour: Behaviour,
    /// Empty for the oldest family and for user tables without the list.
    pub changes_from_previous: Vec<Change>,
    pub(crate) patch_changes: Vec<PatchChange>,
}

/// The families built in, oldest first (`2.18` ... `2.31`, the last pre-release).
pub fn families() -> Vec<&'static str> {
    EMBEDDED.iter().map(|(f, _)| *f).collect()
}

/// The built-in table of one family.
pub fn builtin(family: &str) -> Result<TuningTable> {
    let (fam, text) = EMBEDDED.iter().find(|(f, _)| *f == family).ok_or_else(|| {
        Error::bad_input(format!(
            "no tuning table for NCCL {family}; built-in tables: {}",
            families().join(", ")
        ))
    })?;
    TuningTable::parse(text, &format!("built-in nccl-{fam}.json"))
}

/// Map a version written by a user (`2.28`, `2.28.9`, `2.30.7-1`) to a family.
pub fn family_of(version: &str) -> Result<String> {
    let text = version.trim().trim_start_matches('v');
    let mut parts = text.split(['.', '-', '+']);
    let major = parts.next().and_then(|p| p.parse::<u32>().ok());
    let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
    match (major, minor) {
        (Some(major), Some(minor)) => Ok(format!("{major}.{minor}")),
        _ => Err(Error::bad_input(format!(
            "invalid NCCL version '{version}': expected MAJOR.MINOR such as 2.28 or 2.30.7"
        ))),
    }
}

/// The built-in family to use for an NCCL found on the machine: its own
/// family, else the newest older one, else the oldest. Returns the family and
/// whether it is an exact match.
pub fn nearest_family(major: u32, minor: u32) -> (&'static str, bool) {
    let key = |f: &str| -> (u32, u32) {
        let mut it = f.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        (it.next().unwrap_or(0), it.next().unwrap_or(0))
    };
    let mut best: Option<&'static str> = None;
    for (fam, _) in EMBEDDED {
        if key(fam) == (major, minor) {
            return (fam, true);
        }
        if key(fam) <= (major, minor) {
            best = Some(fam);
        }
    }
    (best.unwrap_or(EMBEDDED[0].0), false)
}

/// The newest built-in family of a released NCCL: the default table.
pub fn newest_family() -> &'static str {
    EMBEDDED
        .iter()
        .rev()
        .map(|(f, _)| *f)
        .find(|f| !is_pre_release(f))
        .unwrap_or(EMBEDDED[0].0)
}

/// The newest built-in family, pre-release or not.
pub fn newest_modelled_family() -> &'static str {
    EMBEDDED[EMBEDDED.len() - 1].0
}

/// Whether `family` was read from an unreleased branch.
pub fn is_pre_release(family: &str) -> bool {
    PRE_RELEASE_FAMILIES.contains(&family)
}

/// The line that says a pre-release family is used.
fn pre_release_notice(version: &str, family: &str) -> String {
    format!(
        "planner: NCCL {version} uses the {family} table, modelled from a pre-release branch (see tuning-tables/VERSIONS.md)"
    )
}

/// The line that says a version newer than every modelled family is not modelled.
fn unmodelled_notice(version: &str, newest: &str) -> String {
    let pre = if is_pre_release(newest) {
        " (pre-release)"
    } else {
        ""
    };
    format!(
        "planner: NCCL {version} is not modelled; newest modelled {newest}{pre}; using the {newest} table (use explain --from-log with a log of that machine)"
    )
}

/// A libnccl found on the machine (`ncclGetVersion`): the family to model it
/// with and, for a pre-release family or a version newer than every family,
/// the line to print (other versions: `nearest_family`).
pub fn live_family(major: u32, minor: u32) -> (&'static str, bool, Option<String>) {
    let (family, exact) = nearest_family(major, minor);
    let version = format!("{major}.{minor}");
    let newest = newest_modelled_family();
    let notice = if exact && is_pre_release(family) {
        Some(pre_release_notice(&version, family))
    } else if rules::parse_family(newest).is_some_and(|n| (major, minor) > n) {
        Some(unmodelled_notice(&version, newest))
    } else {
        None
    };
    (family, exact, notice)
}

/// The oldest built-in family.
pub(crate) fn oldest_family() -> &'static str {
    EMBEDDED[0].0
}

/// A family chosen for a version a user or a log gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionChoice {
    pub family: &'static str,
    /// One line to print on stderr when the version is newer than every
    /// built-in table (the newest family is used then).
    pub notice: Option<String>,
}

/// `--nccl-version`: `2.22` or `2.22.3` -> the 2.22 table; a version newer
/// than the newest family -> the newest family and a notice; an older one
/// (or one between families, which cannot happen while every family from
/// 2.18 to 2.31 is built in) is a bad input naming the version. A
/// pre-release family gets a notice too.
pub fn for_version(version: &str) -> Result<VersionChoice> {
    let family = family_of(version)?;
    let key = rules::parse_family(&family).ok_or_else(|| {
        Error::bad_input(format!(
            "invalid NCCL version '{version}': expected MAJOR.MINOR such as 2.28 or 2.30.7"
        ))
    })?;
    if let Some((fam, _)) = EMBEDDED.iter().find(|(f, _)| *f == family) {
        return Ok(VersionChoice {
            family: fam,
            notice: is_pre_release(fam).then(|| pre_release_notice(version, fam)),
        });
    }
    let newest = newest_modelled_family();
    if rules::parse_family(newest).is_some_and(|n| key > n) {
        return Ok(VersionChoice {
            family: newest,
            notice: Some(unmodelled_notice(version, newest)),
        });
    }
    Err(Error::bad_input(format!(
        "no tuning table for NCCL {version}; built-in tables: {} (NCCL {} to {})",
        families().join(", "),
        oldest_family(),
        newest
    )))
}

/// The built-in table for a version (`for_version`), with its notice.
pub fn builtin_for_version(version: &str) -> Result<(TuningTable, Option<String>)> {
    let choice = for_version(version)?;
    Ok((builtin(choice.family)?, choice.notice))
}

/// JSON text of a table (tuning or symmetric); a syntax error is bad input naming the source, line and column.
pub(crate) fn parse_json(text: &str, source: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| {
        Error::bad_input(format!(
            "{source}:{}:{}: not valid JSON: {e}",
            e.line(),
            e.column()
        ))
    })
}

impl TuningTable {
    /// Load a table from a file (`--tuning-table FILE`).
    pub fn load_file(path: &str) -> Result<TuningTable> {
        let text = crate::units::read_input_file(path)?;
        TuningTable::parse(&text, path)
    }

    /// Parse and check a table; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<TuningTable> {
        let root: Value = parse_json(text, source)?;
        let r = Reader {
            source,
            root: &root,
        };
        let algo_rows = |path: &str| -> Result<AlgoProto<f64>> {
            let mut out = [[0.0; NUM_PROTOCOLS]; NUM_ALGORITHMS];
            for a in Algo::ALL {
                out[a as usize] = r.array3(&format!("{path}.{}", a.nccl_name()))?;
            }
            Ok(out)
        };
        let generation_rows = |path: &str| -> Result<[PerScale; 4]> {
            let mut out = [[0.0; 3]; 4];
            for (g, name) in GENERATIONS.iter().enumerate() {
                out[g] = r.array3(&format!("{path}.{name}"))?;
            }
            Ok(out)
        };
        let mut nvls_efficiency = [0.0; 4];
        for (g, name) in GENERATIONS.iter().enumerate() {
            nvls_efficiency[g] = r.number(&format!("nvls_efficiency.{name}"))?;
        }
        let mut hw_latencies = [[[0.0; NUM_PROTOCOLS]; NUM_ALGORITHMS]; NUM_HW_LINKS];
        for (h, name) in HW_CLASSES.iter().enumerate() {
            hw_latencies[h] = algo_rows(&format!("hw_latencies.{name}"))?;
        }
        let mut tree_correction_factor: [Vec<f64>; 3] = Default::default();
        let mut lengths = Vec::new();
        for p in Proto::ALL {
            let path = format!("tree_correction_factor.{}", p.nccl_name());
            let values = r.numbers(&path)?;
            if values.len() != 23 && values.len() != 24 {
                return Err(Error::bad_input(format!(
                    "{source}: {path}: expected 23 or 24 values (64 B .. 256 MiB or 512 MiB buckets), found {}",
                    values.len()
                )));
            }
            lengths.push(values.len());
            tree_correction_factor[p as usize] = values;
        }
        if lengths.iter().any(|&l| l != lengths[0]) {
            return Err(Error::bad_input(format!(
                "{source}: tree_correction_factor: LL, LL128 and Simple must have the same length"
            )));
        }
        let family = r.string("family")?;
        let version = rules::parse_family(&family).ok_or_else(|| {
            Error::bad_input(format!(
                "{source}: 'family' = \"{family}\" must be MAJOR.MINOR such as 2.28"
            ))
        })?;
        let table = TuningTable {
            family,
            version,
            verified_against: r.string("verified_against")?,
            pre_release: r.optional_boolean("pre_release")?,
            source: source.to_string(),
            nvls_efficiency,
            base_latencies: algo_rows("base_latencies")?,
            hw_latencies,
            ll_max_bws: generation_rows("ll_max_bws")?,
            per_channel_max_ring_ll128_bws: generation_rows("per_channel_max_ring_ll128_bws")?,
            per_channel_max_tree_ll128_bws: generation_rows("per_channel_max_tree_ll128_bws")?,
            per_channel_max_tree_bws: generation_rows("per_channel_max_tree_bws")?,
            per_channel_max_nvls_tree_bws: generation_rows("per_channel_max_nvls_tree_bws")?,
            tree_correction_factor,
            factors: r.factors()?,
            net_overhead_us: r.net_overhead_us()?,
            threads: r.threads()?,
            thread_thresholds: r.thread_thresholds()?,
            max_dev_work_batch_colls: r.at_most(
                r.positive_integer("max_dev_work_batch_colls")?,
                "max_dev_work_batch_colls",
                MAX_SMALL_COUNT,
            )?,
            max_direct_arity: r.at_most(
                r.integer("max_direct_arity")?,
                "max_direct_arity",
                MAX_SMALL_COUNT,
            )? as usize,
            max_nvls_arity: r.at_most(
                r.integer("max_nvls_arity")?,
                "max_nvls_arity",
                MAX_SMALL_COUNT,
            )? as usize,
            scheduler: r.scheduler()?,
            nvls_channels: r.nvls_channels()?,
            behaviour: r.behaviour()?,
            changes_from_previous: r.changes()?,
            patch_changes: r.patch_changes()?,
        };
        Ok(table)
    }

    /// Whether NCCL's code in this table's family has `rule`.
    pub fn has(&self, rule: Rule) -> bool {
        rule.applies_to(self.version)
    }

    /// `treeCorrectionFactor[p][logSize]`, or None outside the table.
    pub(crate) fn tree_correction(&self, proto: Proto, log_size: i32) -> Option<f64> {
        if log_size < 0 {
            return None;
        }
        self.tree_correction_factor[proto as usize]
            .get(log_size as usize)
            .copied()
    }
}

/// Threads per CTA a table may name: CUDA's 1024 per block (NCCL uses at most 640).
const MAX_CTA_THREADS: u64 = 1024;
/// Largest small count (arities, batch sizes) a table may name.
const MAX_SMALL_COUNT: u64 = 1 << 16;

/// Walks the JSON by dotted path and names the path in every error.
struct Reader<'a> {
    source: &'a str,
    root: &'a Value,
}

impl Reader<'_> {
    /// The model's scalar factors (`factors.*`).
    fn factors(&self) -> Result<Factors> {
        Ok(Factors {
            ring_ll_bw: self.number("factors.ring_ll_bw")?,
            ring_ll128_bw: self.number("factors.ring_ll128_bw")?,
            tree_allreduce_bw: self.number("factors.tree_allreduce_bw")?,
            tree_ll_bw_divisor: self.positive("factors.tree_ll_bw_divisor")?,
            tree_ll128_bw_one_node: self.number("factors.tree_ll128_bw_one_node")?,
            tree_ll128_bw_multi_node: self.number("factors.tree_ll128_bw_multi_node")?,
            tree_pattern_tree_bw: self.number("factors.tree_pattern_tree_bw")?,
            pat_bw: self.number("factors.pat_bw")?,
            collnet_direct_inter_bw: self.number("factors.collnet_direct_inter_bw")?,
            collnet_direct_sm90_bw: self.number("factors.collnet_direct_sm90_bw")?,
            collnet_direct_arity_latency_us: self
                .number("factors.collnet_direct_arity_latency_us")?,
            pat_log_latency_divisor: self.positive("factors.pat_log_latency_divisor")?,
            pat_rank_latency_us: self.number("factors.pat_rank_latency_us")?,
            ring_simple_plateau_latency_pre_sm80: self
                .number("factors.ring_simple_plateau_latency_pre_sm80")?,
            ring_simple_plateau_latency: self.number("factors.ring_simple_plateau_latency")?,
            ring_simple_plateau_min_bytes_per_rank_channel: self.at_most(
                self.integer("factors.ring_simple_plateau_min_bytes_per_rank_channel")?,
                "factors.ring_simple_plateau_min_bytes_per_rank_channel",
                crate::units::MAX_SIZE,
            )? as u64,
        })
    }

    /// The network overheads (`net_overhead_us.*`).
    fn net_overhead_us(&self) -> Result<NetOverhead> {
        Ok(NetOverhead {
            x86_intel: self.number("net_overhead_us.x86_intel")?,
            x86_amd: self.number("net_overhead_us.x86_amd")?,
            other: self.number("net_overhead_us.other")?,
            simple_multiplier: self.number("net_overhead_us.simple_multiplier")?,
        })
    }

    /// The thread counts (`threads.*`), each at most a CTA's.
    fn threads(&self) -> Result<Threads> {
        Ok(Threads {
            max_nthreads: self.at_most(
                self.positive_integer("threads.max_nthreads")?,
                "threads.max_nthreads",
                MAX_CTA_THREADS,
            )?,
            simple_max_nthreads: self.at_most(
                self.positive_integer("threads.simple_max_nthreads")?,
                "threads.simple_max_nthreads",
                MAX_CTA_THREADS,
            )?,
            ll_max_nthreads: self.at_most(
                self.positive_integer("threads.ll_max_nthreads")?,
                "threads.ll_max_nthreads",
                MAX_CTA_THREADS,
            )?,
            ll128_max_nthreads: self.at_most(
                self.positive_integer("threads.ll128_max_nthreads")?,
                "threads.ll128_max_nthreads",
                MAX_CTA_THREADS,
            )?,
            warp_size: self.at_most(
                self.positive_integer("threads.warp_size")?,
                "threads.warp_size",
                MAX_CTA_THREADS,
            )?,
            ring_simple_low_bw_nthreads: self.at_most(
                self.positive_integer("threads.ring_simple_low_bw_nthreads")?,
                "threads.ring_simple_low_bw_nthreads",
                MAX_CTA_THREADS,
            )?,
            pci_bw: self.number("threads.pci_bw")?,
        })
    }

    /// The per-protocol thread thresholds (`thread_thresholds.*`).
    fn thread_thresholds(&self) -> Result<ThreadThresholds> {
        Ok(ThreadThresholds {
            ll: self.at_most(
                self.integer("thread_thresholds.LL")?,
                "thread_thresholds.LL",
                i32::MAX as u64,
            )?,
            ll128: self.at_most(
                self.integer("thread_thresholds.LL128")?,
                "thread_thresholds.LL128",
                i32::MAX as u64,
            )?,
            simple: self.at_most(
                self.integer("thread_thresholds.Simple")?,
                "thread_thresholds.Simple",
                i32::MAX as u64,
            )?,
            collnet_simple: self.at_most(
                self.integer("thread_thresholds.collnet_simple")?,
                "thread_thresholds.collnet_simple",
                i32::MAX as u64,
            )?,
        })
    }

    /// The scheduler's settings (`scheduler.*`).
    fn scheduler(&self) -> Result<Scheduler> {
        Ok(Scheduler {
            min_traffic_per_channel: self.at_most(
                self.positive_integer("scheduler.min_traffic_per_channel")?,
                "scheduler.min_traffic_per_channel",
                crate::units::MAX_SIZE,
            )? as u64,
            round_traffic_per_channel_to_16: self
                .boolean("scheduler.round_traffic_per_channel_to_16")?,
        })
    }

    /// NVLS channel counts (`nvls_channels.*`), each at most MAXCHANNELS.
    fn nvls_channels(&self) -> Result<NvlsChannels> {
        Ok(NvlsChannels {
            sm90: self.at_most(
                self.integer("nvls_channels.sm90")?,
                "nvls_channels.sm90",
                crate::limits::MAX_CHANNELS as u64,
            )? as usize,
            sm100_one_node: self.at_most(
                self.integer("nvls_channels.sm100_one_node")?,
                "nvls_channels.sm100_one_node",
                crate::limits::MAX_CHANNELS as u64,
            )? as usize,
            sm100_multi_node: self.at_most(
                self.integer("nvls_channels.sm100_multi_node")?,
                "nvls_channels.sm100_multi_node",
                crate::limits::MAX_CHANNELS as u64,
            )? as usize,
        })
    }

    /// The family's behaviour switches (`behaviour.*`).
    fn behaviour(&self) -> Result<Behaviour> {
        Ok(Behaviour {
            ll128_mixed_compcap_allowed_from_sm90: self
                .boolean("behaviour.ll128_mixed_compcap_allowed_from_sm90")?,
            collnet_chain_needs_chain_support: self
                .boolean("behaviour.collnet_chain_needs_chain_support")?,
            nvls_tree_correction_sm100_x86: self
                .boolean("behaviour.nvls_tree_correction_sm100_x86")?,
        })
    }

    fn get(&self, path: &str) -> Result<&Value> {
        let mut node = self.root;
        for key in path.split('.') {
            node = node.get(key).ok_or_else(|| {
                Error::bad_input(format!("{}: missing constant '{path}'", self.source))
            })?;
        }
        Ok(node)
    }

    fn check(&self, path: &str, v: &Value) -> Result<f64> {
        let x = v.as_f64().ok_or_else(|| {
            Error::bad_input(format!(
                "{}: '{path}' must be a number, found {v}",
                self.source
            ))
        })?;
        if !x.is_finite() || x < 0.0 {
            return Err(Error::bad_input(format!(
                "{}: '{path}' = {x} is negative",
                self.source
            )));
        }
        // Physics: every constant is a latency (µs), a bandwidth (GB/s), a factor, a count or a byte count; none
        // is above 10^15 or a positive number below 10^-6 (0 means none). Finite but absurd values beyond these
        // would make the model's times inf or NaN.
        if x > 1e15 || (x > 0.0 && x < 1e-6) {
            return Err(Error::bad_input(format!(
                "{}: '{path}' = {} is outside 1e-6..1e15 (or 0): no latency, bandwidth, factor or count is",
                self.source,
                crate::limits::short_number(x)
            )));
        }
        Ok(x)
    }

    fn number(&self, path: &str) -> Result<f64> {
        self.check(path, self.get(path)?)
    }

    fn positive(&self, path: &str) -> Result<f64> {
        let x = self.number(path)?;
        if x == 0.0 {
            return Err(Error::bad_input(format!(
                "{}: '{path}' must be greater than 0 (it is a divisor)",
                self.source
            )));
        }
        Ok(x)
    }

    fn integer(&self, path: &str) -> Result<i64> {
        let v = self.get(path)?;
        let x = self.check(path, v)?;
        if x.fract() != 0.0 || x > 1e15 {
            return Err(Error::bad_input(format!(
                "{}: '{path}' = {v} must be a whole number",
                self.source
            )));
        }
        Ok(x as i64)
    }

    /// `value` (read from `path`) if it is at most `max`: counts the model multiplies stay far from overflow.
    fn at_most(&self, value: i64, path: &str, max: u64) -> Result<i64> {
        if value as u64 > max {
            return Err(Error::bad_input(format!(
                "{}: '{path}' = {value} is larger than {max} (planner's limit for it)",
                self.source
            )));
        }
        Ok(value)
    }

    fn positive_integer(&self, path: &str) -> Result<i64> {
        let x = self.integer(path)?;
        if x == 0 {
            return Err(Error::bad_input(format!(
                "{}: '{path}' must be greater than 0",
                self.source
            )));
        }
        Ok(x)
    }

    fn numbers(&self, path: &str) -> Result<Vec<f64>> {
        let v = self.get(path)?;
        let items = v.as_array().ok_or_else(|| {
            Error::bad_input(format!(
                "{}: '{path}' must be a list of numbers",
                self.source
            ))
        })?;
        items
            .iter()
            .enumerate()
            .map(|(i, item)| self.check(&format!("{path}[{i}]"), item))
            .collect()
    }

    fn array3(&self, path: &str) -> Result<[f64; 3]> {
        let values = self.numbers(path)?;
        <[f64; 3]>::try_from(values.as_slice()).map_err(|_| {
            Error::bad_input(format!(
                "{}: '{path}' must have 3 values, found {}",
                self.source,
                values.len()
            ))
        })
    }

    fn boolean(&self, path: &str) -> Result<bool> {
        let v = self.get(path)?;
        v.as_bool().ok_or_else(|| {
            Error::bad_input(format!(
                "{}: '{path}' must be true or false, found {v}",
                self.source
            ))
        })
    }

    /// A top-level flag that may be absent (false then).
    fn optional_boolean(&self, key: &str) -> Result<bool> {
        match self.root.get(key) {
            None => Ok(false),
            Some(_) => self.boolean(key),
        }
    }

    /// The optional list of objects at `key` (absent = empty).
    fn objects(&self, key: &str) -> Result<Vec<&serde_json::Map<String, Value>>> {
        let Some(v) = self.root.get(key) else {
            return Ok(Vec::new());
        };
        let items = v
            .as_array()
            .ok_or_else(|| Error::bad_input(format!("{}: '{key}' must be a list", self.source)))?;
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                item.as_object().ok_or_else(|| {
                    Error::bad_input(format!(
                        "{}: '{key}[{i}]' must be an object, found {item}",
                        self.source
                    ))
                })
            })
            .collect()
    }

    fn field(
        &self,
        key: &str,
        i: usize,
        obj: &serde_json::Map<String, Value>,
        name: &str,
    ) -> Result<String> {
        obj.get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                Error::bad_input(format!(
                    "{}: '{key}[{i}].{name}' must be a string",
                    self.source
                ))
            })
    }

    fn changes(&self) -> Result<Vec<Change>> {
        let key = "changes_from_previous";
        let mut out = Vec::new();
        for (i, obj) in self.objects(key)?.into_iter().enumerate() {
            let value = |name: &str| {
                obj.get(name).cloned().ok_or_else(|| {
                    Error::bad_input(format!("{}: '{key}[{i}].{name}' is missing", self.source))
                })
            };
            out.push(Change {
                what: self.field(key, i, obj, "what")?,
                from: value("from")?,
                to: value("to")?,
                source: self.field(key, i, obj, "source")?,
            });
        }
        Ok(out)
    }

    fn patch_changes(&self) -> Result<Vec<PatchChange>> {
        let key = "patch_changes";
        let mut out = Vec::new();
        for (i, obj) in self.objects(key)?.into_iter().enumerate() {
            out.push(PatchChange {
                tag: self.field(key, i, obj, "tag")?,
                what: self.field(key, i, obj, "what")?,
                source: self.field(key, i, obj, "source")?,
            });
        }
        Ok(out)
    }

    fn string(&self, path: &str) -> Result<String> {
        let v = self.get(path)?;
        v.as_str().map(str::to_string).ok_or_else(|| {
            Error::bad_input(format!(
                "{}: '{path}' must be a string, found {v}",
                self.source
            ))
        })
    }
}
