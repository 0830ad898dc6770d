//! The plan: which (algorithm, protocol, channels) NCCL should run per collective, communicator shape and size band.
//!
//! `planner tune` writes it (with these types and [`Plan::to_json`]); the plugin reads it at `init` with
//! [`Plan::from_json`]. Schema version 1:
//!
//! ```json
//! {"format":"planner-tuner-plan","version":1,
//!  "provenance":{"planner_version":"0.1.0","created_unix":0,"machine":"2x NVIDIA H200","nccl_version":"2.28.3",
//!                "topology_hash":"9f3a","source_kind":"verify","source_file":"results.json",
//!                "source_hash":"cbf29ce484222325","margin_percent":2.0},
//!  "rules":[{"collective":"AllReduce","n_ranks":2,"n_nodes":1,"min_bytes":0,"max_bytes":65535,
//!            "algorithm":"Ring","protocol":"LL","channels":null,"predicted_us":null,"measured_us":12.5}]}
//! ```
//!
//! * `n_ranks`/`n_nodes` null (or absent) = any communicator; `min_bytes`/`max_bytes` are inclusive and compared with
//!   the `nBytes` NCCL passes to the tuner (AllGather/ReduceScatter: nRanks x per-rank bytes).
//! * Names are NCCL's spellings: collectives `AllReduce`, `AllGather`, `ReduceScatter`, `Broadcast`, `Reduce`;
//!   algorithms `Tree`, `Ring`, `CollNetDirect`, `CollNetChain`, `NVLS`, `NVLSTree`, `PAT`; protocols `LL`, `LL128`,
//!   `Simple`.
//! * Bands of one (collective, n_ranks, n_nodes) never overlap. Bands of different keys may: the most specific key
//!   wins ([`Plan::pick`]): exact n_ranks and n_nodes, then exact n_ranks, then exact n_nodes, then any/any.
//! * Optional fields (`n_ranks`, `n_nodes`, `channels`, `predicted_us`, `measured_us`, `nccl_version`,
//!   `topology_hash`) may be null or absent; every other field is required and unknown fields are errors (a typo
//!   such as `"chanels"` must not silently drop a setting).

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The `format` field of every plan.
pub const PLAN_FORMAT: &str = "planner-tuner-plan";
/// The schema version this crate reads and writes.
pub const PLAN_VERSION: u64 = 1;
/// NCCL's `MAXCHANNELS` (`src/include/device.h:86` at v2.28.3-1, `:91` at v2.30.7-1).
pub const MAX_CHANNELS: u32 = 64;

/// A collective NCCL tunes, with `ncclFunc_t` values as indices (`src/include/nccl_common.h:59-64` at v2.28.9-1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Coll {
    Broadcast = 0,
    Reduce = 1,
    AllGather = 2,
    ReduceScatter = 3,
    AllReduce = 4,
}

impl Coll {
    pub const ALL: [Coll; 5] = [
        Coll::Broadcast,
        Coll::Reduce,
        Coll::AllGather,
        Coll::ReduceScatter,
        Coll::AllReduce,
    ];
    /// NCCL's `ncclFuncStr` spelling (also the JSON spelling).
    pub fn nccl_name(self) -> &'static str {
        [
            "Broadcast",
            "Reduce",
            "AllGather",
            "ReduceScatter",
            "AllReduce",
        ][self as usize]
    }
    /// The spelling of NCCL's example tuner CSV (`plugins/tuner/example/plugin.c:60-64` at v2.30.7-1).
    pub fn csv_name(self) -> &'static str {
        [
            "broadcast",
            "reduce",
            "allgather",
            "reducescatter",
            "allreduce",
        ][self as usize]
    }
    /// From an `ncclFunc_t` value; `None` for functions NCCL does not tune (SendRecv = 5 and above) or garbage.
    pub fn from_nccl_index(index: i32) -> Option<Coll> {
        usize::try_from(index)
            .ok()
            .and_then(|i| Coll::ALL.get(i).copied())
    }
    fn from_name(name: &str) -> Option<Coll> {
        Coll::ALL.into_iter().find(|c| c.nccl_name() == name)
    }
}

/// An algorithm, with NCCL's `NCCL_ALGO_*` values as indices (`src/include/plugin/nccl_tuner.h:26-32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
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
    pub const ALL: [Algo; 7] = [
        Algo::Tree,
        Algo::Ring,
        Algo::CollNetDirect,
        Algo::CollNetChain,
        Algo::Nvls,
        Algo::NvlsTree,
        Algo::Pat,
    ];
    /// NCCL's `ncclAlgoStr` spelling (also the JSON spelling).
    pub fn nccl_name(self) -> &'static str {
        [
            "Tree",
            "Ring",
            "CollNetDirect",
            "CollNetChain",
            "NVLS",
            "NVLSTree",
            "PAT",
        ][self as usize]
    }
    /// The spelling of NCCL's example tuner CSV (`plugins/tuner/example/plugin.c:82-88` at v2.30.7-1).
    pub fn csv_name(self) -> &'static str {
        [
            "tree",
            "ring",
            "collnet_direct",
            "collnet_chain",
            "nvls",
            "nvls_tree",
            "pat",
        ][self as usize]
    }
    fn from_name(name: &str) -> Option<Algo> {
        Algo::ALL.into_iter().find(|a| a.nccl_name() == name)
    }
}

/// A protocol, with NCCL's `NCCL_PROTO_*` values as indices (`src/include/plugin/nccl_tuner.h:35-38`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Proto {
    #[serde(rename = "LL")]
    Ll = 0,
    #[serde(rename = "LL128")]
    Ll128 = 1,
    Simple = 2,
}

impl Proto {
    pub const ALL: [Proto; 3] = [Proto::Ll, Proto::Ll128, Proto::Simple];
    /// NCCL's `ncclProtoStr` spelling (also the JSON spelling).
    pub fn nccl_name(self) -> &'static str {
        ["LL", "LL128", "Simple"][self as usize]
    }
    /// The spelling of NCCL's example tuner CSV (`plugins/tuner/example/plugin.c:108-110` at v2.30.7-1).
    pub fn csv_name(self) -> &'static str {
        ["ll", "ll128", "simple"][self as usize]
    }
    fn from_name(name: &str) -> Option<Proto> {
        Proto::ALL.into_iter().find(|p| p.nccl_name() == name)
    }
}

/// Whether NCCL has a kernel for `algorithm`/`protocol` of `coll` (`src/device/generate.py` at v2.28: AllGather and
/// ReduceScatter run Ring, CollNetDirect, NVLS and PAT; AllReduce everything but PAT; Broadcast and Reduce only
/// Ring; LL and LL128 only with Ring and Tree). NCCL never runs any other pair, so a rule naming one is refused.
pub fn nccl_runs(coll: Coll, algorithm: Algo, protocol: Proto) -> bool {
    let algorithm_ok = match coll {
        Coll::Broadcast | Coll::Reduce => algorithm == Algo::Ring,
        Coll::AllGather | Coll::ReduceScatter => matches!(
            algorithm,
            Algo::Ring | Algo::CollNetDirect | Algo::Nvls | Algo::Pat
        ),
        Coll::AllReduce => algorithm != Algo::Pat,
    };
    algorithm_ok && (protocol == Proto::Simple || matches!(algorithm, Algo::Ring | Algo::Tree))
}

/// What the plan was made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// A `planner verify` result file: the measured-best pair of the NCCL backend per size.
    Verify,
    /// A calibration file: the calibrated model's pick per size.
    Calibration,
    /// planner's expected model of the machine's links (`planner tune --expected`): no measurement was used.
    Expected,
}

impl SourceKind {
    pub fn name(self) -> &'static str {
        match self {
            SourceKind::Verify => "verify",
            SourceKind::Calibration => "calibration",
            SourceKind::Expected => "expected",
        }
    }
}

/// Where a plan comes from, so a user (and the plugin's version check) can tell whether it fits the machine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Provenance {
    /// `CARGO_PKG_VERSION` of the planner that wrote the plan.
    pub planner_version: String,
    /// Seconds since the Unix epoch when the plan was written.
    pub created_unix: u64,
    /// Free text, e.g. "2x NVIDIA H200".
    pub machine: String,
    /// NCCL version of the measurements ("2.28.3"; a suffix such as "+cuda12.9" is allowed and ignored when
    /// comparing); null when unknown. The plugin warns when the loading NCCL differs.
    pub nccl_version: Option<String>,
    /// Hash of the topology the measurements ran on (hex), null when unknown.
    pub topology_hash: Option<String>,
    pub source_kind: SourceKind,
    /// File name of the source (verify result or calibration file).
    pub source_file: String,
    /// FNV-1a 64 of the source file's bytes, 16 hex digits ([`fnv1a64_hex`]).
    pub source_hash: String,
    /// The margin (percent) by which a pair had to beat NCCL's own pick to become a rule.
    pub margin_percent: f64,
}

/// One size band: for `collective` on communicators of `n_ranks` x `n_nodes` (null = any) with
/// `min_bytes <= nBytes <= max_bytes`, run `algorithm`/`protocol` (and `channels` if set).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rule {
    pub collective: Coll,
    pub n_ranks: Option<u32>,
    pub n_nodes: Option<u32>,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub algorithm: Algo,
    pub protocol: Proto,
    /// 1..=64; null leaves NCCL's channel count alone.
    pub channels: Option<u32>,
    /// The model's time for this band's pair (µs), informational.
    pub predicted_us: Option<f64>,
    /// The measured time for this band's pair (µs), informational.
    pub measured_us: Option<f64>,
}

impl Rule {
    fn matches_shape(&self, n_ranks: u64, n_nodes: u64) -> bool {
        self.n_ranks.is_none_or(|r| u64::from(r) == n_ranks)
            && self.n_nodes.is_none_or(|n| u64::from(n) == n_nodes)
    }
    /// 0 = exact ranks and nodes (most specific) .. 3 = any/any.
    fn specificity_tier(&self) -> usize {
        match (self.n_ranks, self.n_nodes) {
            (Some(_), Some(_)) => 0,
            (Some(_), None) => 1,
            (None, Some(_)) => 2,
            (None, None) => 3,
        }
    }
}

/// A whole plan file.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    /// Always [`PLAN_FORMAT`].
    pub format: String,
    /// Always [`PLAN_VERSION`].
    pub version: u64,
    pub provenance: Provenance,
    pub rules: Vec<Rule>,
}

/// What the plan says for one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pick {
    /// Index into [`Plan::rules`] (0-based), as printed in the plugin's log lines.
    pub rule_index: usize,
    pub algorithm: Algo,
    pub protocol: Proto,
    pub channels: Option<u32>,
}

/// A plan that cannot be used, naming the offending field (`rules[3].algorithm`) or the JSON position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// Not JSON (or trailing garbage, or nested too deep).
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// Well-formed JSON that is not a valid plan.
    Invalid { field: String, message: String },
}

impl PlanError {
    fn invalid(field: impl Into<String>, message: impl Into<String>) -> PlanError {
        PlanError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::Syntax {
                line,
                column,
                message,
            } => write!(f, "not JSON at line {line} column {column}: {message}"),
            PlanError::Invalid { field, message } => write!(f, "{field}: {message}"),
        }
    }
}

impl std::error::Error for PlanError {}

impl Plan {
    /// A plan of the current format and version (not validated: [`Plan::to_json`] validates before writing).
    pub fn new(provenance: Provenance, rules: Vec<Rule>) -> Plan {
        Plan {
            format: PLAN_FORMAT.to_string(),
            version: PLAN_VERSION,
            provenance,
            rules,
        }
    }

    /// Parses and validates a plan. Never panics, whatever the input (see `tests/plan_format.rs`).
    pub fn from_json(text: &str) -> Result<Plan, PlanError> {
        let value: Value = strict_json(text).map_err(|e| {
            let (line, column) = (e.line(), e.column());
            let full = e.to_string();
            let suffix = format!(" at line {line} column {column}");
            PlanError::Syntax {
                line,
                column,
                message: full.strip_suffix(&suffix).unwrap_or(&full).to_string(),
            }
        })?;
        Plan::from_value(&value)
    }

    /// Validates an already parsed JSON value (what [`Plan::from_json`] does after parsing).
    pub fn from_value(value: &Value) -> Result<Plan, PlanError> {
        let top = object(value, "plan")?;
        check_keys(top, "", &["format", "version", "provenance", "rules"])?;
        let format = required_string(top, "", "format")?;
        if format != PLAN_FORMAT {
            return Err(PlanError::invalid(
                "format",
                format!("is {format:?}, expected {PLAN_FORMAT:?}"),
            ));
        }
        let version = required_u64(top, "", "version")?;
        if version != PLAN_VERSION {
            return Err(PlanError::invalid(
                "version",
                format!("is {version}; this plugin reads version {PLAN_VERSION}"),
            ));
        }
        let provenance = parse_provenance(required(top, "", "provenance")?)?;
        let rules_value = required(top, "", "rules")?;
        let Value::Array(rule_values) = rules_value else {
            return Err(PlanError::invalid(
                "rules",
                format!("must be an array, found {}", kind_of(rules_value)),
            ));
        };
        let rules = rule_values
            .iter()
            .enumerate()
            .map(|(i, v)| parse_rule(v, &format!("rules[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let plan = Plan {
            format,
            version,
            provenance,
            rules,
        };
        plan.validate()?;
        Ok(plan)
    }

    /// Checks what the types cannot: ranges, hex strings, finite numbers, non-overlapping bands. `from_json`
    /// calls it; `to_json` calls it so that a written plan is always readable by the plugin.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.format != PLAN_FORMAT {
            return Err(PlanError::invalid(
                "format",
                format!("is {:?}, expected {PLAN_FORMAT:?}", self.format),
            ));
        }
        if self.version != PLAN_VERSION {
            return Err(PlanError::invalid(
                "version",
                format!(
                    "is {}; this plugin reads version {PLAN_VERSION}",
                    self.version
                ),
            ));
        }
        let p = &self.provenance;
        if p.planner_version.is_empty() {
            return Err(PlanError::invalid("provenance.planner_version", "is empty"));
        }
        if let Some(v) = &p.nccl_version {
            if parse_nccl_version(v).is_none() {
                return Err(PlanError::invalid(
                    "provenance.nccl_version",
                    format!("{v:?} is not a version like \"2.28.3\""),
                ));
            }
        }
        if let Some(h) = &p.topology_hash {
            if h.is_empty() || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(PlanError::invalid(
                    "provenance.topology_hash",
                    format!("{h:?} is not a hex string"),
                ));
            }
        }
        if p.source_file.is_empty() {
            return Err(PlanError::invalid("provenance.source_file", "is empty"));
        }
        if p.source_hash.len() != 16 || !p.source_hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(PlanError::invalid(
                "provenance.source_hash",
                format!("{:?} is not 16 hex digits (FNV-1a 64)", p.source_hash),
            ));
        }
        if !(p.margin_percent.is_finite() && (0.0..=100.0).contains(&p.margin_percent)) {
            return Err(PlanError::invalid(
                "provenance.margin_percent",
                format!("{} is not within 0..=100", p.margin_percent),
            ));
        }
        for (i, rule) in self.rules.iter().enumerate() {
            validate_rule(rule, &format!("rules[{i}]"))?;
        }
        self.check_overlaps()
    }

    fn check_overlaps(&self) -> Result<(), PlanError> {
        let mut order: Vec<usize> = (0..self.rules.len()).collect();
        let key = |r: &Rule| (r.collective, r.n_ranks, r.n_nodes, r.min_bytes);
        order.sort_by_key(|&i| key(&self.rules[i]));
        for pair in order.windows(2) {
            let (a, b) = (&self.rules[pair[0]], &self.rules[pair[1]]);
            let same_key =
                a.collective == b.collective && a.n_ranks == b.n_ranks && a.n_nodes == b.n_nodes;
            if same_key && b.min_bytes <= a.max_bytes {
                return Err(PlanError::invalid(
                    format!("rules[{}]", pair[1]),
                    format!(
                        "bytes {}..={} overlap rules[{}] (bytes {}..={}) for {} nRanks {} nNodes {}",
                        b.min_bytes,
                        b.max_bytes,
                        pair[0],
                        a.min_bytes,
                        a.max_bytes,
                        a.collective.nccl_name(),
                        any_or(a.n_ranks),
                        any_or(a.n_nodes)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The plan as pretty JSON (validated first, and refused above the plugin's `MAX_PLAN_BYTES`, so the plugin
    /// can always read what this writes).
    pub fn to_json(&self) -> Result<String, PlanError> {
        self.validate()?;
        let mut text = serde_json::to_string_pretty(self)
            .map_err(|e| PlanError::invalid("plan", e.to_string()))?;
        text.push('\n');
        let limit = crate::context::MAX_PLAN_BYTES;
        if text.len() as u64 > limit {
            return Err(PlanError::invalid(
                "plan",
                format!(
                    "{} rules make {} bytes, more than the plugin reads ({} MiB): it would keep NCCL's choices",
                    self.rules.len(),
                    text.len(),
                    limit >> 20
                ),
            ));
        }
        Ok(text)
    }

    /// The rule for one call: `coll_index` is the `ncclFunc_t` value NCCL passes (not a tuned collective -> None).
    /// Among rules whose shape matches, the most specific key wins (exact n_ranks and n_nodes, then exact
    /// n_ranks, then exact n_nodes, then any/any); within a key the bands do not overlap.
    pub fn pick(&self, coll_index: i32, n_ranks: u64, n_nodes: u64, n_bytes: u64) -> Option<Pick> {
        let coll = Coll::from_nccl_index(coll_index)?;
        self.rules
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                r.collective == coll
                    && r.matches_shape(n_ranks, n_nodes)
                    && (r.min_bytes..=r.max_bytes).contains(&n_bytes)
            })
            .min_by_key(|(i, r)| (r.specificity_tier(), *i))
            .map(|(i, r)| Pick {
                rule_index: i,
                algorithm: r.algorithm,
                protocol: r.protocol,
                channels: r.channels,
            })
    }

    /// Whether any rule applies to a communicator of `n_ranks` ranks on `n_nodes` nodes.
    pub fn has_shape(&self, n_ranks: u64, n_nodes: u64) -> bool {
        self.rules.iter().any(|r| r.matches_shape(n_ranks, n_nodes))
    }

    /// How many rules apply to a communicator of `n_ranks` ranks on `n_nodes` nodes.
    pub fn rules_for_shape(&self, n_ranks: u64, n_nodes: u64) -> usize {
        self.rules
            .iter()
            .filter(|r| r.matches_shape(n_ranks, n_nodes))
            .count()
    }

    /// A lookup table for one communicator shape (what the plugin builds at `init`); same answers as [`Plan::pick`].
    pub fn index_for_shape(&self, n_ranks: u64, n_nodes: u64) -> ShapeIndex {
        let mut index = ShapeIndex::default();
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.matches_shape(n_ranks, n_nodes) {
                index.bands[rule.collective as usize][rule.specificity_tier()].push(Band {
                    min_bytes: rule.min_bytes,
                    max_bytes: rule.max_bytes,
                    pick: Pick {
                        rule_index: i,
                        algorithm: rule.algorithm,
                        protocol: rule.protocol,
                        channels: rule.channels,
                    },
                });
            }
        }
        for tiers in &mut index.bands {
            for bands in tiers {
                bands.sort_by_key(|b| b.min_bytes);
            }
        }
        index
    }

    /// The plan in the CSV format of NCCL's example tuner plugin (`plugins/tuner/example/`, `nccl_tuner.conf`):
    /// `collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff`,
    /// lower-case names, -1 for "any"/"keep". That plugin takes the first matching line, so lines are ordered
    /// most specific first, which keeps [`Plan::pick`]'s precedence.
    pub fn to_nccl_csv(&self) -> String {
        let mut out = String::new();
        out.push_str("# NCCL example tuner config written by planner ");
        out.push_str(&self.provenance.planner_version);
        out.push_str(" from ");
        out.push_str(self.provenance.source_kind.name());
        out.push(' ');
        out.push_str(&printable(&self.provenance.source_file));
        out.push_str(" (");
        out.push_str(&printable(&self.provenance.machine));
        out.push_str(", NCCL ");
        out.push_str(
            &self
                .provenance
                .nccl_version
                .as_deref()
                .map_or_else(|| "unknown".to_string(), printable),
        );
        out.push_str(")\n");
        out.push_str("# collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff\n");
        let mut order: Vec<usize> = (0..self.rules.len()).collect();
        order.sort_by_key(|&i| {
            let r = &self.rules[i];
            (
                r.specificity_tier(),
                r.collective,
                r.n_ranks,
                r.n_nodes,
                r.min_bytes,
            )
        });
        for i in order {
            let r = &self.rules[i];
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},-1,-1\n",
                r.collective.csv_name(),
                r.min_bytes,
                r.max_bytes,
                r.algorithm.csv_name(),
                r.protocol.csv_name(),
                minus_one_or(r.channels),
                minus_one_or(r.n_nodes),
                minus_one_or(r.n_ranks),
            ));
        }
        out
    }
}

impl<'de> Deserialize<'de> for Plan {
    /// Deserialising goes through the same validation as [`Plan::from_json`].
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Plan, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Plan::from_value(&value).map_err(serde::de::Error::custom)
    }
}

/// Per collective, per specificity tier, bands sorted by `min_bytes` (non-overlapping within a tier).
#[derive(Clone, Debug, Default)]
pub struct ShapeIndex {
    bands: [[Vec<Band>; 4]; 5],
}

#[derive(Clone, Debug)]
struct Band {
    min_bytes: u64,
    max_bytes: u64,
    pick: Pick,
}

impl ShapeIndex {
    /// The rule for `n_bytes` of `coll` (binary search per tier, most specific tier first).
    pub fn pick(&self, coll: Coll, n_bytes: u64) -> Option<Pick> {
        self.bands[coll as usize].iter().find_map(|bands| {
            let after = bands.partition_point(|b| b.min_bytes <= n_bytes);
            let band = bands.get(after.checked_sub(1)?)?;
            (n_bytes <= band.max_bytes).then_some(band.pick)
        })
    }
    /// Number of rules in the index.
    pub fn len(&self) -> usize {
        self.bands.iter().flatten().map(Vec::len).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `(major, minor, patch)` from "2.28.3", "2.28.3-1" or "2.28.3+cuda12.9"; None otherwise.
pub fn parse_nccl_version(text: &str) -> Option<(u32, u32, u32)> {
    let core = text.split(['+', '-']).next()?;
    let mut parts = core.split('.');
    let mut number = || -> Option<u32> {
        let part = parts.next()?;
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let version = (number()?, number()?, number()?);
    parts.next().is_none().then_some(version)
}

/// FNV-1a 64 of `bytes` (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// [`fnv1a64`] as the 16 lower-case hex digits of `provenance.source_hash`.
pub fn fnv1a64_hex(bytes: &[u8]) -> String {
    format!("{:016x}", fnv1a64(bytes))
}

fn validate_rule(rule: &Rule, path: &str) -> Result<(), PlanError> {
    if !nccl_runs(rule.collective, rule.algorithm, rule.protocol) {
        return Err(PlanError::invalid(
            format!("{path}.protocol"),
            format!(
                "NCCL never runs {} {}/{} (it has no such kernel)",
                rule.collective.nccl_name(),
                rule.algorithm.nccl_name(),
                rule.protocol.nccl_name()
            ),
        ));
    }
    if rule.n_ranks == Some(0) {
        return Err(PlanError::invalid(
            format!("{path}.n_ranks"),
            "must be at least 1 (or null for any)",
        ));
    }
    if rule.n_nodes == Some(0) {
        return Err(PlanError::invalid(
            format!("{path}.n_nodes"),
            "must be at least 1 (or null for any)",
        ));
    }
    if let (Some(ranks), Some(nodes)) = (rule.n_ranks, rule.n_nodes) {
        if nodes > ranks {
            return Err(PlanError::invalid(
                format!("{path}.n_nodes"),
                format!("{nodes} nodes for {ranks} ranks"),
            ));
        }
    }
    if rule.min_bytes > rule.max_bytes {
        return Err(PlanError::invalid(
            format!("{path}.max_bytes"),
            format!("{} is below min_bytes {}", rule.max_bytes, rule.min_bytes),
        ));
    }
    if let Some(c) = rule.channels {
        if !(1..=MAX_CHANNELS).contains(&c) {
            return Err(PlanError::invalid(
                format!("{path}.channels"),
                format!("{c} is not within 1..={MAX_CHANNELS} (or null to keep NCCL's)"),
            ));
        }
    }
    for (name, value) in [
        ("predicted_us", rule.predicted_us),
        ("measured_us", rule.measured_us),
    ] {
        if let Some(t) = value {
            if !(t.is_finite() && t >= 0.0) {
                return Err(PlanError::invalid(
                    format!("{path}.{name}"),
                    format!("{t} is not a time >= 0"),
                ));
            }
        }
    }
    Ok(())
}

fn parse_provenance(value: &Value) -> Result<Provenance, PlanError> {
    const P: &str = "provenance";
    let map = object(value, P)?;
    check_keys(
        map,
        P,
        &[
            "planner_version",
            "created_unix",
            "machine",
            "nccl_version",
            "topology_hash",
            "source_kind",
            "source_file",
            "source_hash",
            "margin_percent",
        ],
    )?;
    let source_kind = match required_string(map, P, "source_kind")?.as_str() {
        "verify" => SourceKind::Verify,
        "calibration" => SourceKind::Calibration,
        "expected" => SourceKind::Expected,
        other => {
            return Err(PlanError::invalid(
                "provenance.source_kind",
                format!("unknown source kind {other:?} (expected \"verify\", \"calibration\" or \"expected\")"),
            ))
        }
    };
    Ok(Provenance {
        planner_version: required_string(map, P, "planner_version")?,
        created_unix: required_u64(map, P, "created_unix")?,
        machine: required_string(map, P, "machine")?,
        nccl_version: optional_string(map, P, "nccl_version")?,
        topology_hash: optional_string(map, P, "topology_hash")?,
        source_kind,
        source_file: required_string(map, P, "source_file")?,
        source_hash: required_string(map, P, "source_hash")?,
        margin_percent: required_f64(map, P, "margin_percent")?,
    })
}

fn parse_rule(value: &Value, path: &str) -> Result<Rule, PlanError> {
    let map = object(value, path)?;
    check_keys(
        map,
        path,
        &[
            "collective",
            "n_ranks",
            "n_nodes",
            "min_bytes",
            "max_bytes",
            "algorithm",
            "protocol",
            "channels",
            "predicted_us",
            "measured_us",
        ],
    )?;
    let collective = named(
        map,
        path,
        "collective",
        Coll::from_name,
        &Coll::ALL.map(Coll::nccl_name),
    )?;
    let algorithm = named(
        map,
        path,
        "algorithm",
        Algo::from_name,
        &Algo::ALL.map(Algo::nccl_name),
    )?;
    let protocol = named(
        map,
        path,
        "protocol",
        Proto::from_name,
        &Proto::ALL.map(Proto::nccl_name),
    )?;
    Ok(Rule {
        collective,
        n_ranks: optional_u32(map, path, "n_ranks")?,
        n_nodes: optional_u32(map, path, "n_nodes")?,
        min_bytes: required_u64(map, path, "min_bytes")?,
        max_bytes: required_u64(map, path, "max_bytes")?,
        algorithm,
        protocol,
        channels: optional_u32(map, path, "channels")?,
        predicted_us: optional_f64(map, path, "predicted_us")?,
        measured_us: optional_f64(map, path, "measured_us")?,
    })
}

fn field_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn object<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>, PlanError> {
    match value {
        Value::Object(map) => Ok(map),
        other => Err(PlanError::invalid(
            path,
            format!("must be an object, found {}", kind_of(other)),
        )),
    }
}

fn check_keys(map: &Map<String, Value>, path: &str, allowed: &[&str]) -> Result<(), PlanError> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(PlanError::invalid(
            field_path(path, key),
            format!("unknown field (expected one of {})", allowed.join(", ")),
        )),
        None => Ok(()),
    }
}

fn required<'a>(
    map: &'a Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<&'a Value, PlanError> {
    map.get(key)
        .ok_or_else(|| PlanError::invalid(field_path(path, key), "is missing"))
}

/// `None` when absent or null.
fn optional<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).filter(|v| !v.is_null())
}

fn required_string(map: &Map<String, Value>, path: &str, key: &str) -> Result<String, PlanError> {
    as_string(required(map, path, key)?, path, key)
}

fn optional_string(
    map: &Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<Option<String>, PlanError> {
    optional(map, key)
        .map(|v| as_string(v, path, key))
        .transpose()
}

fn as_string(value: &Value, path: &str, key: &str) -> Result<String, PlanError> {
    value.as_str().map(str::to_string).ok_or_else(|| {
        PlanError::invalid(
            field_path(path, key),
            format!("must be a string, found {}", kind_of(value)),
        )
    })
}

fn required_u64(map: &Map<String, Value>, path: &str, key: &str) -> Result<u64, PlanError> {
    let value = required(map, path, key)?;
    value.as_u64().ok_or_else(|| {
        PlanError::invalid(
            field_path(path, key),
            format!("{value} is not a whole number from 0 to {}", u64::MAX),
        )
    })
}

fn optional_u32(map: &Map<String, Value>, path: &str, key: &str) -> Result<Option<u32>, PlanError> {
    optional(map, key)
        .map(|value| {
            value
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    PlanError::invalid(
                        field_path(path, key),
                        format!(
                            "{value} is not a whole number from 0 to {} (or null)",
                            u32::MAX
                        ),
                    )
                })
        })
        .transpose()
}

fn required_f64(map: &Map<String, Value>, path: &str, key: &str) -> Result<f64, PlanError> {
    let value = required(map, path, key)?;
    value.as_f64().ok_or_else(|| {
        PlanError::invalid(
            field_path(path, key),
            format!("must be a number, found {}", kind_of(value)),
        )
    })
}

fn optional_f64(map: &Map<String, Value>, path: &str, key: &str) -> Result<Option<f64>, PlanError> {
    optional(map, key)
        .map(|value| {
            value.as_f64().ok_or_else(|| {
                PlanError::invalid(
                    field_path(path, key),
                    format!("must be a number or null, found {}", kind_of(value)),
                )
            })
        })
        .transpose()
}

fn named<T>(
    map: &Map<String, Value>,
    path: &str,
    key: &str,
    from_name: fn(&str) -> Option<T>,
    names: &[&str],
) -> Result<T, PlanError> {
    let text = required_string(map, path, key)?;
    from_name(&text).ok_or_else(|| {
        PlanError::invalid(
            field_path(path, key),
            format!(
                "unknown {key} {text:?} (expected one of {})",
                names.join(", ")
            ),
        )
    })
}

fn any_or(value: Option<u32>) -> String {
    value.map_or_else(|| "any".to_string(), |v| v.to_string())
}

fn minus_one_or(value: Option<u32>) -> String {
    value.map_or_else(|| "-1".to_string(), |v| v.to_string())
}

/// Keeps a free-text field on one CSV comment line.
/// `text` as one printable line: every control character (newline, carriage return, ESC of a terminal escape
/// sequence, NUL, C1 controls) becomes a space, and so do the Unicode line and paragraph separators and the
/// bidirectional overrides that make a terminal show text in another order than it is.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            let invisible = matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
            if c.is_control() || invisible {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// `text` as a JSON value, refusing an object with a key twice (serde_json keeps the last, so a plan could say one
/// thing to a reader of the file and another to the plugin).
pub fn strict_json(text: &str) -> Result<Value, serde_json::Error> {
    use serde::de::DeserializeSeed;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = StrictValue.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// Builds a `serde_json::Value` as `Value::deserialize` does, with an error at a repeated key.
struct StrictValue;

impl<'de> serde::de::DeserializeSeed<'de> for StrictValue {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for StrictValue {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!(
                    "duplicate key {:?}",
                    printable(&key)
                )));
            }
            let value = map.next_value_seed(StrictValue)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}
