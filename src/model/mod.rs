//! The model stage: NCCL's algorithm/protocol cost model (`src/graph/tuning.cc`
//! and the per-call half of `src/enqueue.cc`), one version family at a time.
//!
//! * `table`: every constant of the model as data (`tuning-tables/*.json`).
//! * `knobs`: the NCCL environment variables the model reads, with NCCL's own
//!   `NCCL_ALGO` / `NCCL_PROTO` list syntax.
//! * `input`: what the model needs from the topology and the search, as plain
//!   data (`ModelInput`), so tests can build it by hand.
//! * `tune`: NCCL's init tables (latency, algorithm bandwidth, max threads,
//!   thread thresholds) and the three masking layers, each with its reason.
//! * `select`: per-call time, argmin in NCCL's tie order, channels and threads.
//! * `schedule`: grouping of several ops and the channel range each op gets.
//! * `sweep`: winners over a size range as bands with exact crossovers.
//! * `cells`: the cost-table shape (`Cells<T>`, indexed by collective, algorithm and protocol).
//! * `pair`: one algorithm x protocol pair (`Pair`, NCCL's `Algo` or planner's own).
//! * `rules`: the formula and rule changes between release families.
//! * `symmetric`: NCCL's symmetric kernels (2.27+), their gates and pick.
//! * `beyond`: planner's own all-reduce algorithms outside NCCL's menu (`OwnAlgo`).
//! * `examples`: model inputs written out by hand from real NCCL dumps.
//!
//! Logs are read by `crate::nccl_log` and compared with the model by `crate::audit`.
//!
//! Arithmetic follows NCCL's C types: bandwidths, latencies and times are
//! `f32` where NCCL stores `float`, constants are `f64` where NCCL keeps
//! `double`, so printed cells and ties come out as NCCL's do.

pub mod beyond;
pub mod cells;
pub mod examples;
pub mod input;
pub mod knobs;
pub(crate) mod pair;
pub mod rules;
pub(crate) mod schedule;
pub mod select;
pub(crate) mod sweep;
pub mod symmetric;
pub mod table;
pub mod tune;

pub use beyond::OwnAlgo;
pub use cells::Cells;
pub use input::{GraphInfo, ModelInput, NvlsState};
pub use pair::Pair;
pub use select::{Candidate, Evaluation};
pub use table::TuningTable;
pub use tune::{MaskReason, Tuned};

use crate::error::{Error, Result};
use crate::nccl_env::NcclEnv;
use serde::{Deserialize, Serialize};

/// NCCL's collective functions that the model tunes, in NCCL's index order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Coll {
    Broadcast = 0,
    Reduce = 1,
    AllGather = 2,
    ReduceScatter = 3,
    AllReduce = 4,
}

impl Coll {
    pub const ALL: [Coll; cells::NUM_FUNCTIONS] = [
        Coll::Broadcast,
        Coll::Reduce,
        Coll::AllGather,
        Coll::ReduceScatter,
        Coll::AllReduce,
    ];
    /// `ncclFuncStr` (init table, `NCCL_ALGO` prefixes) and `ncclFuncToString` (per-call line).
    pub fn nccl_name(self) -> &'static str {
        [
            "Broadcast",
            "Reduce",
            "AllGather",
            "ReduceScatter",
            "AllReduce",
        ][self as usize]
    }
    /// The planner's flag spelling (`all-reduce`).
    pub fn cli_name(self) -> &'static str {
        [
            "broadcast",
            "reduce",
            "all-gather",
            "reduce-scatter",
            "all-reduce",
        ][self as usize]
    }
    /// Accepts `all-reduce`, `allreduce`, `AllReduce`, `all_reduce`.
    pub fn parse(text: &str) -> Result<Coll> {
        let key: String = text
            .chars()
            .filter(|c| *c != '-' && *c != '_')
            .collect::<String>()
            .to_ascii_lowercase();
        Coll::ALL
            .into_iter()
            .find(|c| c.nccl_name().eq_ignore_ascii_case(&key))
            .ok_or_else(|| {
                Error::bad_input(format!(
                    "unknown collective '{text}'; known: {}",
                    Coll::ALL.map(|c| c.cli_name()).join(", ")
                ))
            })
    }
    /// Steps of a ring (`nsteps` in tuning.cc).
    pub(crate) fn ring_steps(self, n_ranks: usize) -> usize {
        match self {
            Coll::AllReduce => 2 * (n_ranks.saturating_sub(1)),
            Coll::AllGather | Coll::ReduceScatter => n_ranks.saturating_sub(1),
            Coll::Broadcast | Coll::Reduce => n_ranks,
        }
    }
    /// `ncclFuncTrafficPerByte`.
    pub(crate) fn traffic_per_byte(self, n_ranks: usize) -> u64 {
        match self {
            Coll::AllReduce => 2,
            Coll::AllGather | Coll::ReduceScatter => n_ranks as u64,
            Coll::Broadcast | Coll::Reduce => 1,
        }
    }
    pub fn is_ag_rs(self) -> bool {
        matches!(self, Coll::AllGather | Coll::ReduceScatter)
    }
    /// nccl-tests' bus-bandwidth factor (`all_reduce.cu` `AllReduceGetBw` and
    /// siblings): busbw = algbw x factor for `n_ranks` ranks, whatever the
    /// algorithm. This is nccl-tests' convention, not NCCL's per-algorithm
    /// bus bandwidth (`select::bus_factor`).
    pub(crate) fn nccl_tests_bus_factor(self, n_ranks: usize) -> f64 {
        let n = n_ranks.max(1) as f64;
        match self {
            Coll::AllReduce => 2.0 * (n - 1.0) / n,
            Coll::AllGather | Coll::ReduceScatter => (n - 1.0) / n,
            Coll::Broadcast | Coll::Reduce => 1.0,
        }
    }
}

/// NCCL's algorithms (`NCCL_ALGO_*`), in index order (the tie order of the
/// argmin). JSON uses NCCL's `ncclAlgoStr` names.
///
/// NCCL's tables are indexed by `algo as usize` over `Algo::ALL`
/// (`cells::NUM_ALGORITHMS` entries). planner's own algorithms beyond NCCL's
/// menu are `beyond::OwnAlgo`; what may run either is an `AnyAlgo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Algo {
    Tree = 0,
    Ring = 1,
    CollNetDirect = 2,
    CollNetChain = 3,
    #[serde(rename = "NVLS")]
    Nvls = 4,
    #[serde(rename = "NVLSTree")]
    NvlsTree = 5,
    #[serde(rename = "PAT")]
    Pat = 6,
}

impl Algo {
    pub const ALL: [Algo; cells::NUM_ALGORITHMS] = [
        Algo::Tree,
        Algo::Ring,
        Algo::CollNetDirect,
        Algo::CollNetChain,
        Algo::Nvls,
        Algo::NvlsTree,
        Algo::Pat,
    ];
    /// `ncclAlgoStr`: init table and `NCCL_ALGO` names.
    pub fn nccl_name(self) -> &'static str {
        match self {
            Algo::Tree => "Tree",
            Algo::Ring => "Ring",
            Algo::CollNetDirect => "CollNetDirect",
            Algo::CollNetChain => "CollNetChain",
            Algo::Nvls => "NVLS",
            Algo::NvlsTree => "NVLSTree",
            Algo::Pat => "PAT",
        }
    }
    /// `ncclAlgoToString`: the per-call TUNING line.
    pub(crate) fn log_name(self) -> &'static str {
        match self {
            Algo::Tree => "TREE",
            Algo::Ring => "RING",
            Algo::CollNetDirect => "COLLNET_DIRECT",
            Algo::CollNetChain => "COLLNET_CHAIN",
            Algo::Nvls => "NVLS",
            Algo::NvlsTree => "NVLS_TREE",
            Algo::Pat => "PAT",
        }
    }
    pub fn from_index(i: usize) -> Option<Algo> {
        Algo::ALL.get(i).copied()
    }
    /// Accepts either NCCL spelling, case-insensitive (`ring`, `NVLS_TREE`,
    /// `nvlstree`). This is the `NCCL_ALGO` vocabulary: planner's own
    /// algorithms (`OwnAlgo`) are refused.
    pub fn parse(text: &str) -> Result<Algo> {
        Algo::ALL
            .into_iter()
            .find(|a| {
                a.nccl_name().eq_ignore_ascii_case(text) || a.log_name().eq_ignore_ascii_case(text)
            })
            .ok_or_else(|| {
                Error::bad_input(format!(
                    "unknown algorithm '{text}'; known: {}",
                    Algo::ALL.map(|a| a.nccl_name()).join(", ")
                ))
            })
    }
    pub(crate) fn is_collnet(self) -> bool {
        matches!(self, Algo::CollNetDirect | Algo::CollNetChain)
    }
    pub(crate) fn is_nvls(self) -> bool {
        matches!(self, Algo::Nvls | Algo::NvlsTree)
    }
}

/// An algorithm from either menu, for what may run either (exec plans,
/// `planner run` pairs, verify's native backend, the tune plan): NCCL's
/// (`Algo`) or planner's own (`OwnAlgo`). Text and JSON use the member's own
/// name (`Ring`, `NVLS`, `OneShot`), and NCCL's come first in the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AnyAlgo {
    Nccl(Algo),
    Own(OwnAlgo),
}

impl AnyAlgo {
    /// Every algorithm of both menus, NCCL's first.
    pub fn all() -> impl Iterator<Item = AnyAlgo> {
        let nccl = Algo::ALL.into_iter().map(AnyAlgo::Nccl);
        nccl.chain(OwnAlgo::ALL.into_iter().map(AnyAlgo::Own))
    }
    /// `ncclAlgoStr` for NCCL's, planner's name (`OneShot`) for its own.
    pub fn name(self) -> &'static str {
        match self {
            AnyAlgo::Nccl(a) => a.nccl_name(),
            AnyAlgo::Own(a) => a.name(),
        }
    }
    /// NCCL's algorithm, None for planner's own.
    pub fn nccl(self) -> Option<Algo> {
        match self {
            AnyAlgo::Nccl(a) => Some(a),
            AnyAlgo::Own(_) => None,
        }
    }
    /// planner's own algorithm, None for NCCL's.
    pub(crate) fn own(self) -> Option<OwnAlgo> {
        match self {
            AnyAlgo::Own(a) => Some(a),
            AnyAlgo::Nccl(_) => None,
        }
    }
    /// Whether this is one of planner's algorithms outside NCCL's menu:
    /// NCCL's tables have no cell for it.
    pub fn is_beyond_nccl(self) -> bool {
        matches!(self, AnyAlgo::Own(_))
    }
}

impl From<Algo> for AnyAlgo {
    fn from(algo: Algo) -> Self {
        AnyAlgo::Nccl(algo)
    }
}

impl From<OwnAlgo> for AnyAlgo {
    fn from(algo: OwnAlgo) -> Self {
        AnyAlgo::Own(algo)
    }
}

impl PartialEq<Algo> for AnyAlgo {
    fn eq(&self, other: &Algo) -> bool {
        *self == AnyAlgo::Nccl(*other)
    }
}

impl PartialEq<OwnAlgo> for AnyAlgo {
    fn eq(&self, other: &OwnAlgo) -> bool {
        *self == AnyAlgo::Own(*other)
    }
}

/// The member's own serde name, as a plain `Algo` or `OwnAlgo` writes it.
impl Serialize for AnyAlgo {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        match self {
            AnyAlgo::Nccl(a) => a.serialize(serializer),
            AnyAlgo::Own(a) => a.serialize(serializer),
        }
    }
}

/// Either menu's serde name; anything else is refused as serde refuses an
/// unknown enum variant, listing both menus.
impl<'de> Deserialize<'de> for AnyAlgo {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        struct NameVisitor;
        impl serde::de::Visitor<'_> for NameVisitor {
            type Value = AnyAlgo;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("variant identifier")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> std::result::Result<AnyAlgo, E> {
                AnyAlgo::all().find(|a| a.name() == text).ok_or_else(|| {
                    let known: Vec<String> =
                        AnyAlgo::all().map(|a| format!("`{}`", a.name())).collect();
                    E::custom(format_args!(
                        "unknown variant `{text}`, expected one of {}",
                        known.join(", ")
                    ))
                })
            }
        }
        deserializer.deserialize_str(NameVisitor)
    }
}

/// NCCL's protocols, in index order. JSON uses NCCL's `ncclProtoStr` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Proto {
    #[serde(rename = "LL")]
    Ll = 0,
    #[serde(rename = "LL128")]
    Ll128 = 1,
    Simple = 2,
}

impl Proto {
    pub const ALL: [Proto; cells::NUM_PROTOCOLS] = [Proto::Ll, Proto::Ll128, Proto::Simple];
    /// `ncclProtoStr`: init table and `NCCL_PROTO` names.
    pub fn nccl_name(self) -> &'static str {
        ["LL", "LL128", "Simple"][self as usize]
    }
    /// `ncclProtoToString`: the per-call TUNING line.
    pub fn log_name(self) -> &'static str {
        ["LL", "LL128", "SIMPLE"][self as usize]
    }
    pub(crate) fn from_index(i: usize) -> Option<Proto> {
        Proto::ALL.get(i).copied()
    }
    pub fn parse(text: &str) -> Result<Proto> {
        Proto::ALL
            .into_iter()
            .find(|p| p.nccl_name().eq_ignore_ascii_case(text))
            .ok_or_else(|| {
                Error::bad_input(format!(
                    "unknown protocol '{text}'; known: {}",
                    Proto::ALL.map(|p| p.nccl_name()).join(", ")
                ))
            })
    }
}

/// `log2i`: floor(log2(x)), -1 for 0 (NCCL's `utils.h`).
pub(crate) fn log2i(x: u64) -> i32 {
    if x == 0 {
        -1
    } else {
        63 - x.leading_zeros() as i32
    }
}

/// `DIVUP`.
pub(crate) fn div_up(a: u64, b: u64) -> u64 {
    if b == 0 {
        0
    } else {
        a.div_ceil(b)
    }
}

/// A tuned model: the input, the knobs, the constants and NCCL's init tables.
#[derive(Debug, Clone)]
pub struct Model {
    pub input: ModelInput,
    pub(crate) env: NcclEnv,
    pub table: TuningTable,
    pub tuned: Tuned,
}

impl Model {
    /// Run NCCL's init-time tuning (`ncclTopoTuneModel`).
    pub fn new(input: ModelInput, env: NcclEnv, table: TuningTable) -> Result<Model> {
        input.validate()?;
        let tuned = tune::tune(&input, &env, &table)?;
        Ok(Model {
            input,
            env,
            table,
            tuned,
        })
    }
}
