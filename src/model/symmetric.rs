//! NCCL's symmetric kernels (2.27+): the separate path NCCL takes for
//! AllReduce, AllGather and ReduceScatter when the buffers lie in windows
//! registered with `ncclCommWindowRegister(..., NCCL_WIN_COLL_SYMMETRIC)`.
//! NCCL picks one kernel with a cost model of its own (`ncclSymkPickKernel`,
//! `src/sym_kernels.cc`), apart from the classic algorithm/protocol argmin,
//! which stays in `select`.
//!
//! * [`SymmetricTable`]: the kernel list and every constant of one NCCL family,
//!   read from `tuning-tables/nccl-symmetric-<family>.json` (tag and file:line
//!   of each constant are in the file).
//! * [`symmetric_candidates`]: every kernel of the call's collective with its
//!   eligibility, blocks, predicted time and bus bandwidth, and NCCL's pick.
//! * The line in which NCCL reports the kernel it actually ran is read by
//!   `nccl_log::symmetric_line`.
//!
//! The model per kernel (`queryModel`, `sym_kernels.cc:105-203` in v2.28.3,
//! `:162-165,338-432` in v2.30.7), all in `double` unless noted:
//! `bw(b) = softmin(b * smBw * busMultiplier, peakBw, smBw)`,
//! `time(b) = baseLat + softplus(busBytes / bw(b) - 1, 1)` µs, with
//! `softmin(x, c, s) = c - s ln(1 + (e^(c/s) - 1) e^(-x/s))` and
//! `softplus(x, s) = s ln(1 + e^(x/s))` (or `x` once `x/s >= 100`). Blocks:
//! the fewest from `minCTAs` up whose time is within 2.5 % of the time at the
//! most blocks. NCCL keeps the time as a `float` and picks the kernel with the
//! least `time * (1 + 0.025 * blocks)` (floats, strict `<`, so the lowest
//! kernel id wins ties). NCCL's "GBps" here is 2^30 bytes/s. The GPU's SM count
//! plays no part: `nSMs` in the formula is the block count.
//!
//! Multicast kernels (`...MC...`, NVLink SHARP) are modelled and listed, and
//! always marked [`SymCandidate::needs_multicast`]; this project never runs
//! them. Not modelled: grouped calls (several works in one kernel exclude the
//! LL kernels), multi-node GIN kernels (2.30), copy-engine collectives under
//! `NCCL_CTA_POLICY_ZERO`, windows with system-memory segments, and 2.30's
//! fallback for one process driving several GPUs with unregistered buffers.

use super::Coll;
use crate::error::{Error, Result};
use crate::units::MAX_SIZE;
use serde::{Serialize, Serializer};
use serde_json::Value;
use std::fmt;

/// The symmetric-kernel tables built into the binary, oldest first.
pub(crate) const EMBEDDED: &[(&str, &str)] = &[
    (
        "2.28",
        include_str!("../../tuning-tables/nccl-symmetric-2.28.json"),
    ),
    (
        "2.30",
        include_str!("../../tuning-tables/nccl-symmetric-2.30.json"),
    ),
];

/// Largest rank count accepted: planner's rank limit (2^40 bytes x 2^19 ranks keeps every product in u64).
pub(crate) const MAX_RANKS: usize = crate::limits::MAX_RANKS;

// ---------------------------------------------------------------- vocabulary

/// NCCL's data types (`ncclDataType_t`), spelled as the planner's `--dtype`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SymDtype {
    I8,
    U8,
    I32,
    U32,
    I64,
    U64,
    F16,
    F32,
    F64,
    Bf16,
    F8e4m3,
    F8e5m2,
}

impl SymDtype {
    pub(crate) const ALL: [SymDtype; 12] = [
        SymDtype::I8,
        SymDtype::U8,
        SymDtype::I32,
        SymDtype::U32,
        SymDtype::I64,
        SymDtype::U64,
        SymDtype::F16,
        SymDtype::F32,
        SymDtype::F64,
        SymDtype::Bf16,
        SymDtype::F8e4m3,
        SymDtype::F8e5m2,
    ];
    pub(crate) fn name(self) -> &'static str {
        match self {
            SymDtype::I8 => "i8",
            SymDtype::U8 => "u8",
            SymDtype::I32 => "i32",
            SymDtype::U32 => "u32",
            SymDtype::I64 => "i64",
            SymDtype::U64 => "u64",
            SymDtype::F16 => "f16",
            SymDtype::F32 => "f32",
            SymDtype::F64 => "f64",
            SymDtype::Bf16 => "bf16",
            SymDtype::F8e4m3 => "f8e4m3",
            SymDtype::F8e5m2 => "f8e5m2",
        }
    }
    /// `ncclTypeSize`.
    pub(crate) fn size(self) -> u64 {
        match self {
            SymDtype::I8 | SymDtype::U8 | SymDtype::F8e4m3 | SymDtype::F8e5m2 => 1,
            SymDtype::F16 | SymDtype::Bf16 => 2,
            SymDtype::I32 | SymDtype::U32 | SymDtype::F32 => 4,
            SymDtype::I64 | SymDtype::U64 | SymDtype::F64 => 8,
        }
    }
    fn is_fp8(self) -> bool {
        matches!(self, SymDtype::F8e4m3 | SymDtype::F8e5m2)
    }
    /// Accepts the short names (`f32`, `bf16`) and NCCL's (`float32`, `bfloat16`).
    pub fn parse(text: &str) -> Result<SymDtype> {
        let key = text.trim().to_ascii_lowercase();
        let alias = match key.as_str() {
            "float" | "float32" => Some(SymDtype::F32),
            "half" | "float16" => Some(SymDtype::F16),
            "bfloat16" => Some(SymDtype::Bf16),
            "double" | "float64" => Some(SymDtype::F64),
            "int8" | "char" => Some(SymDtype::I8),
            "uint8" => Some(SymDtype::U8),
            "int" | "int32" => Some(SymDtype::I32),
            "uint32" => Some(SymDtype::U32),
            "int64" => Some(SymDtype::I64),
            "uint64" => Some(SymDtype::U64),
            "float8e4m3" | "fp8_e4m3" => Some(SymDtype::F8e4m3),
            "float8e5m2" | "fp8_e5m2" => Some(SymDtype::F8e5m2),
            _ => None,
        };
        alias
            .or_else(|| SymDtype::ALL.into_iter().find(|d| d.name() == key))
            .ok_or_else(|| {
                Error::bad_input(format!(
                    "unknown data type '{text}'; known: {}",
                    SymDtype::ALL.map(|d| d.name()).join(", ")
                ))
            })
    }
}

impl Serialize for SymDtype {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// The reduction operation of the call (`ncclRedOp_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RedOp {
    Sum,
    Prod,
    Max,
    Min,
    Avg,
}

impl RedOp {
    pub(crate) fn name(self) -> &'static str {
        match self {
            RedOp::Sum => "sum",
            RedOp::Prod => "prod",
            RedOp::Max => "max",
            RedOp::Min => "min",
            RedOp::Avg => "avg",
        }
    }
}

/// How every pair of the communicator's GPUs reaches each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PeerPath {
    /// Directly over NVLink or through one NVSwitch (NCCL's `PATH_NVL`).
    NvLink,
    /// CUDA peer-to-peer, but not every pair over NVLink (e.g. PCIe).
    P2p,
    /// At least one pair without peer access.
    NoP2p,
}

/// Which of the call's buffers lie in symmetric windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Registration {
    Both,
    SendOnly,
    RecvOnly,
    Neither,
}

impl Registration {
    fn key(self) -> &'static str {
        match self {
            Registration::Both => "both",
            Registration::SendOnly => "send_only",
            Registration::RecvOnly => "recv_only",
            Registration::Neither => "neither",
        }
    }
    fn from_key(text: &str) -> Option<Registration> {
        [
            Registration::Both,
            Registration::SendOnly,
            Registration::RecvOnly,
            Registration::Neither,
        ]
        .into_iter()
        .find(|r| r.key() == text)
    }
}

/// The NCCL environment variables and config fields this path reads.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct SymmetricKnobs {
    /// `NCCL_SYM_KERNEL`: one kernel name restricts the menu to it (`^` = unset).
    pub sym_kernel: Option<String>,
    /// `NCCL_SYM_CTAS`: blocks for every kernel (0 = unset).
    pub sym_ctas: u32,
    /// `NCCL_MIN_CTAS` / config `minCTAs` (None = NCCL's default, 1).
    pub(crate) min_ctas: Option<u32>,
    /// `NCCL_MAX_CTAS` / config `maxCTAs` (None = NCCL's default, 64).
    pub max_ctas: Option<u32>,
    /// `NCCL_SYM_TMA_ENABLE=1` (2.30, sm100+).
    pub tma: bool,
    /// `NCCL_SYM_NOWIN_ENABLE=1` (2.30): LL symmetric kernels on unregistered buffers.
    pub no_window: bool,
}

/// One call as the symmetric path sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SymmetricInput {
    pub(crate) coll: Coll,
    /// NCCL's `count * typeSize`: the whole buffer for AllReduce, one rank's
    /// share for AllGather/ReduceScatter (what the `[Symmetric]` line prints;
    /// the model's `Call::log_bytes`).
    pub bytes: u64,
    pub dtype: SymDtype,
    pub redop: RedOp,
    pub n_ranks: usize,
    /// Hosts (NCCL's `nNodes`); NVLink domains spanning hosts are not modelled.
    pub n_nodes: usize,
    /// 90 for H100/H200, 100 for B200.
    pub compute_capability: u32,
    pub peers: PeerPath,
    /// NCCL's `nvlsSupport`: `NCCL_NVLS_ENABLE` and a multicast-capable NVSwitch.
    pub nvls_multicast: bool,
    pub registration: Registration,
    pub knobs: SymmetricKnobs,
}

impl SymmetricInput {
    /// A call on one node of NVLink peers, f32 sum, both buffers registered,
    /// NVLS multicast off (as on the project's machines), default knobs.
    pub fn new(coll: Coll, bytes: u64, n_ranks: usize, compute_capability: u32) -> Self {
        SymmetricInput {
            coll,
            bytes,
            dtype: SymDtype::F32,
            redop: RedOp::Sum,
            n_ranks,
            n_nodes: 1,
            compute_capability,
            peers: PeerPath::NvLink,
            nvls_multicast: false,
            registration: Registration::Both,
            knobs: SymmetricKnobs::default(),
        }
    }

    fn validate(&self) -> Result<()> {
        if self.n_ranks == 0 || self.n_ranks > MAX_RANKS {
            return Err(Error::bad_input(format!(
                "invalid rank count {}: must be between 1 and {MAX_RANKS}",
                self.n_ranks
            )));
        }
        if self.n_nodes == 0 || self.n_nodes > self.n_ranks {
            return Err(Error::bad_input(format!(
                "invalid node count {}: must be between 1 and the rank count {}",
                self.n_nodes, self.n_ranks
            )));
        }
        if self.bytes == 0 || self.bytes > MAX_SIZE {
            return Err(Error::bad_input(format!(
                "invalid size {} bytes: must be between 1 and 2^40",
                self.bytes
            )));
        }
        if !self.bytes.is_multiple_of(self.dtype.size()) {
            return Err(Error::bad_input(format!(
                "invalid size {} bytes: not a whole number of {} elements ({} bytes each)",
                self.bytes,
                self.dtype.name(),
                self.dtype.size()
            )));
        }
        if !(10..=1000).contains(&self.compute_capability) {
            return Err(Error::bad_input(format!(
                "invalid compute capability {}: expected e.g. 90 for sm90",
                self.compute_capability
            )));
        }
        for (name, value) in [
            ("NCCL_MIN_CTAS", self.knobs.min_ctas),
            ("NCCL_MAX_CTAS", self.knobs.max_ctas),
        ] {
            if value == Some(0) {
                return Err(Error::bad_input(format!(
                    "invalid {name} 0: must be at least 1"
                )));
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- table

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Multicast {
    None,
    /// In `kernelMask_STMC` only: needs multicast.
    Store,
    /// In `kernelMask_LDMC`: needs multicast and a type multicast can reduce.
    LoadReduce,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    /// Load/store over NVLink within one NVLink domain.
    Lsa,
    /// LSA through the Tensor Memory Accelerator (2.30, opt-in).
    Tma,
    /// Network kernels for communicators spanning NVLink domains (2.30).
    Gin,
    /// In the enum, in no collective's mask.
    Unused,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BusBytes {
    Ll,
    TwoShot,
    MulticastTwoShot,
    RanksMinusOne,
    None,
}

#[derive(Debug, Clone, PartialEq)]
struct Kernel {
    name: String,
    coll: Coll,
    ll: bool,
    multicast: Multicast,
    group: Group,
    bus_bytes: BusBytes,
    bus_multiplier: f64,
    bus_multiplier_per_rank: bool,
    multicast_block_limit: bool,
}

/// Constants that depend on `cudaArch < 1000`.
#[derive(Debug, Clone, PartialEq)]
struct ArchConstants {
    latency_ll_allgather_us: f64,
    latency_ll_other_us: f64,
    latency_allreduce_us: f64,
    latency_other_us: f64,
    sm_bw_allreduce_gbs: f64,
    sm_bw_other_gbs: f64,
    /// (kernel name, GB/s) for kernels with their own peak.
    peak_bw_by_kernel_gbs: Vec<(String, f64)>,
    peak_bw_other_gbs: f64,
    multicast_block_budget: u64,
}

#[derive(Debug, Clone, PartialEq)]
struct CopyEngineAllGather {
    min_compute_capability: u32,
    above_count_elements: u64,
    registrations: Vec<Registration>,
}

/// The symmetric kernels and constants of one NCCL version family.
#[derive(Debug, Clone, PartialEq)]
pub struct SymmetricTable {
    family: String,
    verified_against: String,
    source: String,
    kernels: Vec<Kernel>,
    ll_bus_factor: f64,
    cell_bytes: u64,
    max_blocks: u32,
    default_min_ctas: u32,
    default_max_ctas: u32,
    warps_per_block: u32,
    below_sm100: ArchConstants,
    sm100_and_newer: ArchConstants,
    gbs_in_bytes_per_us: f64,
    softplus_linear_from: f64,
    block_tolerance: f64,
    sm_penalty_per_block: f32,
    ll_max_bus_bytes: u64,
    max_bus_bytes: u64,
    reduction_ops: Vec<RedOp>,
    reduction_dtypes: Vec<SymDtype>,
    fp8_min_compute_capability: u32,
    /// (type, lowest compute capability) multicast load-reduce takes.
    load_reduce_dtypes: Vec<(SymDtype, u32)>,
    multicast_min_ranks: usize,
    requires_nvlink: bool,
    /// Ranks across hosts: false = no symmetric path (2.28), true = only the
    /// GIN kernels (2.30).
    multi_node_gin_only: bool,
    min_ranks: usize,
    /// Per collective (AllGather, ReduceScatter, AllReduce): registrations that
    /// keep the whole menu, and those that keep only the LL kernels.
    full_menu: [Vec<Registration>; 3],
    ll_only: [Vec<Registration>; 3],
    ll_fallback_to_classic: bool,
    tma_min_compute_capability: u32,
    tma_needs_knob: bool,
    copy_engine_allgather: Option<CopyEngineAllGather>,
}

fn coll_slot(coll: Coll) -> Option<usize> {
    match coll {
        Coll::AllGather => Some(0),
        Coll::ReduceScatter => Some(1),
        Coll::AllReduce => Some(2),
        Coll::Broadcast | Coll::Reduce => None,
    }
}

const SYMMETRIC_COLLS: [Coll; 3] = [Coll::AllGather, Coll::ReduceScatter, Coll::AllReduce];

impl SymmetricTable {
    /// The built-in table of a family (`2.28`, `2.30`).
    pub fn builtin(family: &str) -> Result<SymmetricTable> {
        let (fam, text) = EMBEDDED.iter().find(|(f, _)| *f == family).ok_or_else(|| {
            Error::bad_input(format!(
                "no symmetric-kernel table for NCCL {family}; built-in: {}",
                EMBEDDED
                    .iter()
                    .map(|(f, _)| *f)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        SymmetricTable::parse(text, &format!("built-in nccl-symmetric-{fam}.json"))
    }

    /// Parse and check a table; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<SymmetricTable> {
        let root: Value = crate::model::table::parse_json(text, source)?;
        let r = Reader {
            source,
            root: &root,
        };
        let mut kernels = Vec::new();
        for (i, row) in r.array("kernels.list")?.iter().enumerate() {
            kernels.push(r.kernel(row, &format!("kernels.list[{i}]"))?);
        }
        let arch = |key: &str| -> Result<ArchConstants> {
            let peak_path = format!("peak_bandwidth_gbs.{key}");
            let mut peak_bw_by_kernel_gbs = Vec::new();
            for (name, _) in r.object(&peak_path)? {
                if name != "other" {
                    if !kernels.iter().any(|k| &k.name == name) {
                        return Err(r.bad(&format!("{peak_path}.{name}"), "names no kernel"));
                    }
                    peak_bw_by_kernel_gbs
                        .push((name.clone(), r.positive(&format!("{peak_path}.{name}"))?));
                }
            }
            Ok(ArchConstants {
                latency_ll_allgather_us: r
                    .number(&format!("base_latency_us.{key}.ll_allgather"))?,
                latency_ll_other_us: r.number(&format!("base_latency_us.{key}.ll_other"))?,
                latency_allreduce_us: r.number(&format!("base_latency_us.{key}.allreduce"))?,
                latency_other_us: r.number(&format!("base_latency_us.{key}.other"))?,
                sm_bw_allreduce_gbs: r.positive(&format!("sm_bandwidth_gbs.{key}.allreduce"))?,
                sm_bw_other_gbs: r.positive(&format!("sm_bandwidth_gbs.{key}.other"))?,
                peak_bw_by_kernel_gbs,
                peak_bw_other_gbs: r.positive(&format!("{peak_path}.other"))?,
                multicast_block_budget: r
                    .positive_integer(&format!("multicast_block_budget.{key}"))?,
            })
        };
        let below_sm100 = arch("below_sm100")?;
        let sm100_and_newer = arch("sm100_and_newer")?;
        let registrations = |path: &str| -> Result<[Vec<Registration>; 3]> {
            let mut out: [Vec<Registration>; 3] = Default::default();
            for coll in SYMMETRIC_COLLS {
                let key = format!("{path}.{}", coll.nccl_name());
                let slot = coll_slot(coll).unwrap_or(0);
                out[slot] = r.registrations(&key)?;
            }
            Ok(out)
        };
        let copy_engine_allgather = match r.get("copy_engine_allgather")? {
            Value::Null => None,
            _ => Some(CopyEngineAllGather {
                min_compute_capability: r.integer("copy_engine_allgather.min_compute_capability")?
                    as u32,
                above_count_elements: r.integer("copy_engine_allgather.above_count_elements")?,
                registrations: r.registrations("copy_engine_allgather.registrations")?,
            }),
        };
        let mut reduction_ops = Vec::new();
        for (i, op) in r.array("reduction.ops")?.iter().enumerate() {
            let path = format!("reduction.ops[{i}]");
            let name = op
                .as_str()
                .ok_or_else(|| r.bad(&path, "must be a string"))?;
            let op = [RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg]
                .into_iter()
                .find(|o| o.name() == name)
                .ok_or_else(|| r.bad(&path, &format!("unknown reduction '{name}'")))?;
            reduction_ops.push(op);
        }
        let mut reduction_dtypes = Vec::new();
        for (i, d) in r.array("reduction.dtypes")?.iter().enumerate() {
            reduction_dtypes.push(r.dtype(d, &format!("reduction.dtypes[{i}]"))?);
        }
        let mut load_reduce_dtypes = Vec::new();
        for (name, _) in r.object("load_reduce_multicast.dtypes")? {
            let path = format!("load_reduce_multicast.dtypes.{name}");
            let dtype = SymDtype::parse(name).map_err(|_| r.bad(&path, "unknown data type"))?;
            load_reduce_dtypes.push((dtype, r.integer(&path)? as u32));
        }
        let table = SymmetricTable {
            family: r.string("family")?,
            verified_against: r.string("verified_against")?,
            source: source.to_string(),
            kernels,
            ll_bus_factor: r.positive("ll_bus_factor.value")?,
            cell_bytes: r.positive_integer("cell_bytes.value")?,
            max_blocks: r.positive_integer("max_blocks.value")? as u32,
            default_min_ctas: r.positive_integer("config_ctas.min")? as u32,
            default_max_ctas: r.positive_integer("config_ctas.max")? as u32,
            warps_per_block: r.positive_integer("warps_per_block.value")? as u32,
            below_sm100,
            sm100_and_newer,
            gbs_in_bytes_per_us: r.positive("gbs_in_bytes_per_us.value")?,
            softplus_linear_from: r.positive("softplus_linear_from.value")?,
            block_tolerance: r.positive("block_tolerance.value")?,
            sm_penalty_per_block: r.number("sm_penalty_per_block.value")? as f32,
            ll_max_bus_bytes: r.positive_integer("ll_max_bus_bytes.value")?,
            max_bus_bytes: r.positive_integer("max_bus_bytes.value")?,
            reduction_ops,
            reduction_dtypes,
            fp8_min_compute_capability: r.integer("reduction.fp8_min_compute_capability")? as u32,
            load_reduce_dtypes,
            multicast_min_ranks: r.positive_integer("multicast_min_ranks.value")? as usize,
            requires_nvlink: r.boolean("requires_nvlink.value")?,
            multi_node_gin_only: match r.string("multi_node.value")?.as_str() {
                "classic" => false,
                "gin_only" => true,
                other => {
                    return Err(r.bad(
                        "multi_node.value",
                        &format!("'{other}' is not classic or gin_only"),
                    ))
                }
            },
            min_ranks: r.positive_integer("min_ranks.value")? as usize,
            full_menu: registrations("registration.full_menu")?,
            ll_only: registrations("registration.ll_only")?,
            ll_fallback_to_classic: r.boolean("registration.ll_fallback_to_classic")?,
            tma_min_compute_capability: r.integer("tma.min_compute_capability")? as u32,
            tma_needs_knob: r.boolean("tma.needs_knob")?,
            copy_engine_allgather,
        };
        Ok(table)
    }

    /// `2.28` or `2.30`.
    pub(crate) fn family(&self) -> &str {
        &self.family
    }

    /// NCCL's kernel names for a collective, in NCCL's id order (the pick's
    /// tie order), kernels NCCL never offers left out.
    pub fn kernel_names(&self, coll: Coll) -> Vec<&str> {
        self.menu(coll).map(|k| k.name.as_str()).collect()
    }

    fn menu(&self, coll: Coll) -> impl Iterator<Item = &Kernel> {
        self.kernels
            .iter()
            .filter(move |k| k.coll == coll && k.group != Group::Unused)
    }

    fn arch(&self, compute_capability: u32) -> &ArchConstants {
        if compute_capability < 100 {
            &self.below_sm100
        } else {
            &self.sm100_and_newer
        }
    }
}

// ---------------------------------------------------------------- output

/// Why NCCL does not (or cannot) use a kernel, or the symmetric path at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SymReason {
    /// Broadcast, Reduce: no symmetric kernels.
    NoSymmetricKernels(Coll),
    /// One rank: NCCL copies locally.
    OneRank,
    /// 2.30: every GPU pair must be connected directly by NVLink.
    NeedsNvlink,
    /// 2.28: every GPU pair needs CUDA peer-to-peer access.
    NeedsPeerAccess,
    /// 2.28: one node only.
    SingleNodeOnly,
    /// The buffers are not in symmetric windows as this family requires.
    NotRegistered(Registration),
    /// 2.30: neither buffer registered and `NCCL_SYM_NOWIN_ENABLE` unset.
    UnregisteredNoWindow,
    /// The reduction or type has no symmetric kernel.
    ReductionNotImplemented(RedOp, SymDtype),
    /// fp8 reduction kernels are built for sm90+ only.
    Fp8NeedsSm90,
    /// 2.30: sm100 AllGather above the copy-engine threshold uses copy engines.
    CopyEngineAllGather,
    /// `NCCL_SYM_KERNEL` names no kernel of this collective.
    ForcedKernelUnavailable(String),
    /// Every kernel was masked off (see the candidates).
    NoKernelLeft,
    /// 2.30 multi-node: NCCL picks among GIN kernels, not modelled here.
    GinNotModelled,
    // Per kernel:
    /// NVLS multicast is off, or fewer ranks than multicast needs.
    NeedsMulticast,
    /// Multicast load-reduce does not take this type (on this GPU).
    MulticastDtype(SymDtype),
    /// LL kernels stop at 2 GiB of bus bytes (32-bit counters).
    LlTooLarge,
    /// Every kernel stops at 64 GiB of bus bytes.
    TooLarge,
    /// 2.30: TMA kernels need sm100+ and `NCCL_SYM_TMA_ENABLE=1`.
    NeedsTma,
    /// 2.30: GIN kernels run only when the ranks span NVLink domains.
    GinNeedsSeveralDomains,
    /// 2.30: load/store kernels need all ranks in one NVLink domain.
    NeedsOneNvlinkDomain,
    /// 2.30: with this registration only the LL kernels remain.
    RegistrationLlOnly(Registration),
    /// `NCCL_SYM_KERNEL` selects another kernel.
    NotForced(String),
}

impl fmt::Display for SymReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SymReason::NoSymmetricKernels(c) => {
                write!(f, "NCCL has no symmetric kernels for {}", c.nccl_name())
            }
            SymReason::OneRank => write!(f, "one rank: NCCL copies locally"),
            SymReason::NeedsNvlink => {
                write!(f, "needs every GPU pair connected directly by NVLink")
            }
            SymReason::NeedsPeerAccess => {
                write!(f, "needs CUDA peer-to-peer access between every pair of GPUs")
            }
            SymReason::SingleNodeOnly => write!(f, "runs within one node only"),
            SymReason::NotRegistered(r) => write!(
                f,
                "needs both buffers in symmetric windows (ncclCommWindowRegister); registered: {}",
                r.key()
            ),
            SymReason::UnregisteredNoWindow => write!(
                f,
                "buffers not in symmetric windows: NCCL falls back to its classic path (NCCL_SYM_NOWIN_ENABLE unset)"
            ),
            SymReason::ReductionNotImplemented(op, d) => write!(
                f,
                "no symmetric kernel reduces {} over {}",
                op.name(),
                d.name()
            ),
            SymReason::Fp8NeedsSm90 => write!(f, "fp8 reduction kernels need sm90 or newer"),
            SymReason::CopyEngineAllGather => write!(
                f,
                "AllGather above the copy-engine threshold on sm100+ runs on copy engines"
            ),
            SymReason::ForcedKernelUnavailable(name) => write!(
                f,
                "NCCL_SYM_KERNEL={name} names no kernel of this collective"
            ),
            SymReason::NoKernelLeft => write!(f, "no symmetric kernel is eligible"),
            SymReason::GinNotModelled => write!(
                f,
                "ranks span NVLink domains: NCCL picks among its network (GIN) kernels, not modelled"
            ),
            SymReason::NeedsMulticast => write!(
                f,
                "needs NVLS multicast (NCCL_NVLS_ENABLE, a multicast NVSwitch, 3+ ranks)"
            ),
            SymReason::MulticastDtype(d) => {
                write!(f, "multicast load-reduce does not take {} here", d.name())
            }
            SymReason::LlTooLarge => write!(f, "LL kernels stop at 2 GiB of bus bytes"),
            SymReason::TooLarge => write!(f, "symmetric kernels stop at 64 GiB of bus bytes"),
            SymReason::NeedsTma => write!(f, "TMA kernel: needs sm100+ and NCCL_SYM_TMA_ENABLE=1"),
            SymReason::GinNeedsSeveralDomains => write!(
                f,
                "network (GIN) kernel: only when the ranks span NVLink domains"
            ),
            SymReason::NeedsOneNvlinkDomain => {
                write!(f, "needs all ranks in one NVLink domain")
            }
            SymReason::RegistrationLlOnly(r) => write!(
                f,
                "registered buffers '{}': only LL kernels are offered",
                r.key()
            ),
            SymReason::NotForced(name) => write!(f, "NCCL_SYM_KERNEL={name} selects another kernel"),
        }
    }
}

impl Serialize for SymReason {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One symmetric kernel for one call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SymCandidate {
    /// NCCL's name, as its log prints it (`AllReduce_AGxLL_R`).
    pub kernel: String,
    /// A multicast (NVLS) kernel: modelled, never run by this project.
    pub needs_multicast: bool,
    pub(crate) ll: bool,
    /// True when NCCL may pick it (no reasons).
    pub eligible: bool,
    pub ineligible: Vec<SymReason>,
    /// `busBytes` of NCCL's model (None for kernels not modelled).
    pub bus_bytes: Option<u64>,
    /// Blocks NCCL's model chooses.
    pub blocks: Option<u32>,
    /// CTAs launched: blocks that receive work (the log's `nchannels`).
    pub channels: Option<u32>,
    /// NCCL's predicted time, µs (a `float` as NCCL keeps it).
    pub time_us: Option<f32>,
    /// `time * (1 + 0.025 * blocks)`: what the pick minimises, µs.
    pub score_us: Option<f32>,
    /// nccl-tests bus bandwidth at the predicted time, GB/s (10^9 bytes/s).
    pub busbw_gbs: Option<f64>,
}

/// NCCL's symmetric path for one call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SymmetricChoice {
    pub(crate) family: String,
    pub(crate) coll: Coll,
    pub(crate) bytes: u64,
    /// `nBytes` of the model: the count aligned up to 1 KiB cells.
    pub model_bytes: u64,
    pub(crate) n_ranks: usize,
    /// Every kernel of the collective in NCCL's id order.
    pub candidates: Vec<SymCandidate>,
    /// `ncclSymkPickKernel`'s choice (None when the call never gets there).
    pub pick: Option<String>,
    /// Non-empty: NCCL runs its classic algorithm/protocol path instead.
    pub classic_path: Vec<SymReason>,
    /// 2.30, one buffer registered and an LL pick: NCCL runs the pick only
    /// when its classic model would pick protocol LL too.
    pub only_if_classic_picks_ll: bool,
}

impl SymmetricChoice {
    /// The pick's row.
    pub fn picked(&self) -> Option<&SymCandidate> {
        let name = self.pick.as_deref()?;
        self.candidates.iter().find(|c| c.kernel == name)
    }
    /// The kernel NCCL runs, when it takes the symmetric path.
    pub fn runs_symmetric(&self) -> Option<&SymCandidate> {
        if self.classic_path.is_empty() {
            self.picked()
        } else {
            None
        }
    }
}

// ---------------------------------------------------------------- model

/// `softmin` of `sym_kernels.cc`: a smooth `min(x, ceiling)`.
fn softmin(x: f64, ceiling: f64, softness: f64) -> f64 {
    ceiling - softness * (((ceiling / softness).exp() - 1.0) * (-x / softness).exp()).ln_1p()
}

/// `softplus` of `sym_kernels.cc`: a smooth `max(0, x)`.
fn softplus(x: f64, softness: f64, linear_from: f64) -> f64 {
    let z = x / softness;
    if linear_from <= z {
        x
    } else {
        softness * z.exp().ln_1p()
    }
}

/// The communicator and call gates: why NCCL never offers the call to the symmetric path (`slot`: the
/// collective's row of the registration menus; `full_menu`: the
/// registration opens every kernel of the collective; `forced`: NCCL_SYM_KERNEL's kernel).
fn call_gates(
    input: &SymmetricInput,
    table: &SymmetricTable,
    slot: usize,
    full_menu: bool,
    forced: Option<&str>,
) -> Vec<SymReason> {
    let cc = input.compute_capability;
    let mut classic: Vec<SymReason> = Vec::new();
    if input.n_ranks < table.min_ranks {
        classic.push(SymReason::OneRank);
    }
    if table.requires_nvlink {
        if input.peers != PeerPath::NvLink {
            classic.push(SymReason::NeedsNvlink);
        }
    } else if input.peers == PeerPath::NoP2p {
        classic.push(SymReason::NeedsPeerAccess);
    }
    if input.n_nodes > 1 && !table.multi_node_gin_only {
        classic.push(SymReason::SingleNodeOnly);
    }
    if !full_menu && !table.ll_only[slot].contains(&input.registration) {
        classic.push(SymReason::NotRegistered(input.registration));
    }
    if input.coll != Coll::AllGather {
        if !table.reduction_ops.contains(&input.redop)
            || !table.reduction_dtypes.contains(&input.dtype)
        {
            classic.push(SymReason::ReductionNotImplemented(input.redop, input.dtype));
        } else if input.dtype.is_fp8() && cc < table.fp8_min_compute_capability {
            classic.push(SymReason::Fp8NeedsSm90);
        }
    }
    if let Some(ce) = &table.copy_engine_allgather {
        let count = input.bytes / input.dtype.size();
        if input.coll == Coll::AllGather
            && cc >= ce.min_compute_capability
            && input.peers == PeerPath::NvLink
            && ce.registrations.contains(&input.registration)
            && count > ce.above_count_elements
        {
            classic.push(SymReason::CopyEngineAllGather);
        }
    }
    if let Some(name) = forced {
        if !table.menu(input.coll).any(|k| k.name == name) {
            classic.push(SymReason::ForcedKernelUnavailable(name.to_string()));
        }
    }
    classic
}

/// The symmetric path of one call: every kernel of the collective, why NCCL
/// may not use it, its blocks and time under NCCL's model, and NCCL's pick.
pub fn symmetric_candidates(
    input: &SymmetricInput,
    table: &SymmetricTable,
) -> Result<SymmetricChoice> {
    input.validate()?;
    let n = input.n_ranks as u64;
    let cc = input.compute_capability;
    let mut choice = SymmetricChoice {
        family: table.family.clone(),
        coll: input.coll,
        bytes: input.bytes,
        model_bytes: input.bytes.div_ceil(table.cell_bytes) * table.cell_bytes,
        n_ranks: input.n_ranks,
        candidates: Vec::new(),
        pick: None,
        classic_path: Vec::new(),
        only_if_classic_picks_ll: false,
    };
    let Some(slot) = coll_slot(input.coll) else {
        choice
            .classic_path
            .push(SymReason::NoSymmetricKernels(input.coll));
        return Ok(choice);
    };

    let several_domains = input.n_nodes > 1;
    let full_menu = table.full_menu[slot].contains(&input.registration);
    let forced = input
        .knobs
        .sym_kernel
        .as_deref()
        .filter(|name| *name != "^");
    let mut classic = call_gates(input, table, slot, full_menu, forced);

    // Per kernel: ncclSymkMask and the registration filter of the pick.
    let arch = table.arch(cc);
    let model_bytes = choice.model_bytes;
    let bus_total = if input.coll == Coll::AllReduce {
        model_bytes
    } else {
        n * model_bytes
    };
    let multicast =
        input.nvls_multicast && input.n_ranks >= table.multicast_min_ranks && !several_domains;
    let load_reduce_dtype = table
        .load_reduce_dtypes
        .iter()
        .any(|(d, min_cc)| *d == input.dtype && cc >= *min_cc);
    for k in table.menu(input.coll) {
        let mut why = Vec::new();
        if let Some(name) = forced {
            if k.name != name {
                why.push(SymReason::NotForced(name.to_string()));
            }
        }
        if k.multicast != Multicast::None && !multicast {
            why.push(SymReason::NeedsMulticast);
        }
        if k.multicast == Multicast::LoadReduce && multicast && !load_reduce_dtype {
            why.push(SymReason::MulticastDtype(input.dtype));
        }
        if k.ll && bus_total >= table.ll_max_bus_bytes {
            why.push(SymReason::LlTooLarge);
        }
        if bus_total >= table.max_bus_bytes {
            why.push(SymReason::TooLarge);
        }
        if k.group == Group::Tma
            && (cc < table.tma_min_compute_capability || (table.tma_needs_knob && !input.knobs.tma))
        {
            why.push(SymReason::NeedsTma);
        }
        match (k.group, several_domains) {
            (Group::Gin, false) => why.push(SymReason::GinNeedsSeveralDomains),
            (Group::Lsa | Group::Tma, true) if table.multi_node_gin_only => {
                why.push(SymReason::NeedsOneNvlinkDomain)
            }
            _ => {}
        }
        if !full_menu && !k.ll {
            why.push(SymReason::RegistrationLlOnly(input.registration));
        }
        let mut row = SymCandidate {
            kernel: k.name.clone(),
            needs_multicast: k.multicast != Multicast::None,
            ll: k.ll,
            eligible: why.is_empty(),
            ineligible: why,
            bus_bytes: None,
            blocks: None,
            channels: None,
            time_us: None,
            score_us: None,
            busbw_gbs: None,
        };
        if k.group != Group::Gin && k.bus_bytes != BusBytes::None {
            model_row(&mut row, k, model_bytes, input, table, arch);
        }
        choice.candidates.push(row);
    }

    if several_domains && table.multi_node_gin_only {
        classic.push(SymReason::GinNotModelled);
    }
    let any_eligible = choice.candidates.iter().any(|c| c.eligible);
    if classic.is_empty() && !any_eligible {
        classic.push(SymReason::NoKernelLeft);
    }
    if classic.is_empty() {
        pick_kernel(&mut choice, &mut classic, input, table, forced);
    }
    choice.classic_path = classic;
    Ok(choice)
}

/// NCCL's model of one load/store kernel on the call, into its row: bus bytes, blocks, channels, time, score and
/// nccl-tests' busbw.
fn model_row(
    row: &mut SymCandidate,
    k: &Kernel,
    model_bytes: u64,
    input: &SymmetricInput,
    table: &SymmetricTable,
    arch: &ArchConstants,
) {
    let nccl_tests_bytes = if input.coll == Coll::AllReduce {
        input.bytes
    } else {
        input.bytes * input.n_ranks as u64
    };
    let (bus_bytes, blocks, time_us) = query_model(k, model_bytes, input, table, arch);
    let cells = model_bytes / table.cell_bytes;
    let cells_per_channel = cells.div_ceil(blocks as u64);
    let score = time_us * (1.0f32 + table.sm_penalty_per_block * blocks as f32);
    row.bus_bytes = Some(bus_bytes);
    row.blocks = Some(blocks);
    row.channels = Some(cells.div_ceil(cells_per_channel) as u32);
    row.time_us = Some(time_us);
    row.score_us = Some(score);
    row.busbw_gbs = Some(
        nccl_tests_bytes as f64 / (time_us as f64 * 1e3)
            * input.coll.nccl_tests_bus_factor(input.n_ranks),
    );
}

/// `ncclSymkPickKernel`: the eligible kernel of least time*(1+0.025*blocks) (floats, strict '<'), then 2.30's
/// fallback to the classic path for LL picks on buffers not fully registered.
fn pick_kernel(
    choice: &mut SymmetricChoice,
    classic: &mut Vec<SymReason>,
    input: &SymmetricInput,
    table: &SymmetricTable,
    forced: Option<&str>,
) {
    let mut best: Option<(usize, f32)> = None;
    for (i, c) in choice.candidates.iter().enumerate() {
        if let (true, Some(score)) = (c.eligible, c.score_us) {
            if best.is_none_or(|(_, b)| score < b) {
                best = Some((i, score));
            }
        }
    }
    if let Some((i, _)) = best {
        let picked = &choice.candidates[i];
        choice.pick = Some(picked.kernel.clone());
        // 2.30 fallback for LL picks on not fully registered buffers.
        if table.ll_fallback_to_classic
            && input.registration != Registration::Both
            && picked.ll
            && forced.is_none()
        {
            if input.registration == Registration::Neither && !input.knobs.no_window {
                classic.push(SymReason::UnregisteredNoWindow);
            } else {
                choice.only_if_classic_picks_ll = true;
            }
        }
    }
}

/// `queryModel` for one load/store kernel: (busBytes, blocks, time µs).
fn query_model(
    k: &Kernel,
    model_bytes: u64,
    input: &SymmetricInput,
    table: &SymmetricTable,
    arch: &ArchConstants,
) -> (u64, u32, f32) {
    let n = input.n_ranks as u64;
    // size_t arithmetic as in C; the LL product goes through a double.
    let bus_bytes = match k.bus_bytes {
        BusBytes::Ll => ((n * model_bytes) as f64 * table.ll_bus_factor) as u64,
        BusBytes::TwoShot => 2 * model_bytes * (n - 1) / n,
        BusBytes::MulticastTwoShot => model_bytes / n + model_bytes,
        BusBytes::RanksMinusOne => (n - 1) * model_bytes,
        BusBytes::None => 1 << 50,
    };
    let bus_multiplier = if k.bus_multiplier_per_rank {
        k.bus_multiplier * input.n_ranks as f64
    } else {
        k.bus_multiplier
    };
    let mut max_blocks = table.max_blocks as u64;
    if k.multicast_block_limit {
        max_blocks = arch.multicast_block_budget.div_ceil(n);
    }
    // comm->config: both capped at MAXCHANNELS, min lowered to max (init.cc).
    let channels_cap = table.default_max_ctas as u64;
    let config_max =
        (input.knobs.max_ctas.unwrap_or(table.default_max_ctas) as u64).min(channels_cap);
    let config_min = (input.knobs.min_ctas.unwrap_or(table.default_min_ctas) as u64)
        .min(channels_cap)
        .min(config_max);
    max_blocks = max_blocks.min(config_max);
    let mut min_blocks = config_min;
    let user = (table.max_blocks as u64).min(input.knobs.sym_ctas as u64);
    if user > 0 {
        min_blocks = user;
        max_blocks = user;
    }
    let is_allreduce = k.coll == Coll::AllReduce;
    let base_latency = match (k.ll, k.coll) {
        (true, Coll::AllGather) => arch.latency_ll_allgather_us,
        (true, _) => arch.latency_ll_other_us,
        (false, _) if is_allreduce => arch.latency_allreduce_us,
        (false, _) => arch.latency_other_us,
    };
    let gbs = table.gbs_in_bytes_per_us;
    let sm_bw = gbs
        * if is_allreduce {
            arch.sm_bw_allreduce_gbs
        } else {
            arch.sm_bw_other_gbs
        };
    let peak_bw = gbs
        * arch
            .peak_bw_by_kernel_gbs
            .iter()
            .find(|(name, _)| *name == k.name)
            .map_or(arch.peak_bw_other_gbs, |(_, v)| *v);
    let model = |blocks: u64| -> f64 {
        let bw = softmin(blocks as f64 * sm_bw * bus_multiplier, peak_bw, sm_bw);
        base_latency + softplus(bus_bytes as f64 / bw - 1.0, 1.0, table.softplus_linear_from)
    };
    let mut blocks = max_blocks;
    let mut time = model(max_blocks) as f32;
    for b in min_blocks..max_blocks {
        let t = model(b);
        if t <= table.block_tolerance * time as f64 {
            blocks = b;
            time = t as f32;
            break;
        }
    }
    (bus_bytes, blocks as u32, time)
}

// ---------------------------------------------------------------- JSON reader

/// Walks the JSON by dotted path and names the path in every error.
struct Reader<'a> {
    source: &'a str,
    root: &'a Value,
}

impl Reader<'_> {
    fn bad(&self, path: &str, what: &str) -> Error {
        Error::bad_input(format!("{}: '{path}' {what}", self.source))
    }

    fn get(&self, path: &str) -> Result<&Value> {
        let mut node = self.root;
        for key in path.split('.') {
            node = node.get(key).ok_or_else(|| {
                Error::bad_input(format!("{}: missing key '{path}'", self.source))
            })?;
        }
        Ok(node)
    }

    fn number_at(&self, path: &str, v: &Value) -> Result<f64> {
        let x = v
            .as_f64()
            .ok_or_else(|| self.bad(path, &format!("must be a number, found {v}")))?;
        if !x.is_finite() || x < 0.0 {
            return Err(self.bad(path, &format!("= {x} must not be negative")));
        }
        Ok(x)
    }

    fn number(&self, path: &str) -> Result<f64> {
        self.number_at(path, self.get(path)?)
    }

    fn positive(&self, path: &str) -> Result<f64> {
        let x = self.number(path)?;
        if x == 0.0 {
            return Err(self.bad(path, "must be greater than 0"));
        }
        Ok(x)
    }

    fn integer(&self, path: &str) -> Result<u64> {
        let v = self.get(path)?;
        v.as_u64()
            .ok_or_else(|| self.bad(path, &format!("must be a whole number, found {v}")))
    }

    fn positive_integer(&self, path: &str) -> Result<u64> {
        let x = self.integer(path)?;
        if x == 0 {
            return Err(self.bad(path, "must be greater than 0"));
        }
        Ok(x)
    }

    fn boolean(&self, path: &str) -> Result<bool> {
        let v = self.get(path)?;
        v.as_bool()
            .ok_or_else(|| self.bad(path, &format!("must be true or false, found {v}")))
    }

    fn string(&self, path: &str) -> Result<String> {
        let v = self.get(path)?;
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| self.bad(path, &format!("must be a string, found {v}")))
    }

    fn array(&self, path: &str) -> Result<&Vec<Value>> {
        let v = self.get(path)?;
        v.as_array().ok_or_else(|| self.bad(path, "must be a list"))
    }

    fn object(&self, path: &str) -> Result<&serde_json::Map<String, Value>> {
        let v = self.get(path)?;
        v.as_object()
            .ok_or_else(|| self.bad(path, "must be an object"))
    }

    fn dtype(&self, v: &Value, path: &str) -> Result<SymDtype> {
        let name = v
            .as_str()
            .ok_or_else(|| self.bad(path, "must be a string"))?;
        SymDtype::parse(name).map_err(|_| self.bad(path, &format!("unknown data type '{name}'")))
    }

    fn registrations(&self, path: &str) -> Result<Vec<Registration>> {
        let mut out = Vec::new();
        for (i, v) in self.array(path)?.iter().enumerate() {
            let p = format!("{path}[{i}]");
            let name = v.as_str().ok_or_else(|| self.bad(&p, "must be a string"))?;
            out.push(Registration::from_key(name).ok_or_else(|| {
                self.bad(
                    &p,
                    &format!("unknown registration '{name}' (both, send_only, recv_only, neither)"),
                )
            })?);
        }
        Ok(out)
    }

    fn kernel(&self, row: &Value, path: &str) -> Result<Kernel> {
        let field = |key: &str| -> Result<&Value> {
            row.get(key)
                .ok_or_else(|| self.bad(&format!("{path}.{key}"), "is missing"))
        };
        let text = |key: &str| -> Result<&str> {
            field(key)?
                .as_str()
                .ok_or_else(|| self.bad(&format!("{path}.{key}"), "must be a string"))
        };
        let flag = |key: &str| -> Result<bool> {
            field(key)?
                .as_bool()
                .ok_or_else(|| self.bad(&format!("{path}.{key}"), "must be true or false"))
        };
        let name = text("name")?.to_string();
        let coll_name = text("coll")?;
        let coll = SYMMETRIC_COLLS
            .into_iter()
            .find(|c| c.nccl_name() == coll_name)
            .ok_or_else(|| {
                self.bad(
                    &format!("{path}.coll"),
                    &format!("'{coll_name}' is not AllReduce, AllGather or ReduceScatter"),
                )
            })?;
        let multicast = match text("multicast")? {
            "none" => Multicast::None,
            "store" => Multicast::Store,
            "load_reduce" => Multicast::LoadReduce,
            other => {
                return Err(self.bad(
                    &format!("{path}.multicast"),
                    &format!("'{other}' is not none, store or load_reduce"),
                ))
            }
        };
        let group = match text("group")? {
            "lsa" => Group::Lsa,
            "tma" => Group::Tma,
            "gin" => Group::Gin,
            "unused" => Group::Unused,
            other => {
                return Err(self.bad(
                    &format!("{path}.group"),
                    &format!("'{other}' is not lsa, tma, gin or unused"),
                ))
            }
        };
        let bus_bytes = match text("bus_bytes")? {
            "ll" => BusBytes::Ll,
            "two_shot" => BusBytes::TwoShot,
            "multicast_two_shot" => BusBytes::MulticastTwoShot,
            "ranks_minus_one" => BusBytes::RanksMinusOne,
            "none" => BusBytes::None,
            other => {
                return Err(self.bad(
                    &format!("{path}.bus_bytes"),
                    &format!("'{other}' is not a formula of bus_bytes_formulas"),
                ))
            }
        };
        Ok(Kernel {
            name,
            coll,
            ll: flag("ll")?,
            multicast,
            group,
            bus_bytes,
            bus_multiplier: {
                let p = format!("{path}.bus_multiplier");
                let x = self.number_at(&p, field("bus_multiplier")?)?;
                if x == 0.0 {
                    return Err(self.bad(&p, "must be greater than 0"));
                }
                x
            },
            bus_multiplier_per_rank: flag("bus_multiplier_per_rank")?,
            multicast_block_limit: flag("multicast_block_limit")?,
        })
    }
}
