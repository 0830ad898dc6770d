//! Reader for an `NCCL_DEBUG=INFO` log (`NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING`) of any NCCL
//! from 2.18 on: version, environment, communicator shape, searched graphs, channel counts,
//! rings and trees, the init tuning table, the per-call choices, and the decision lines of
//! planner's tuner plugin. Lines from other programs are ignored; an NCCL line that starts
//! one of these records but does not parse is a bad input naming the file and line.
//!
//! The formats changed between families (each read in the tag's source):
//! * per-call lines: `Func: N Bytes -> Algo RING proto LL channel{Lo..Hi}={a..b}` from 2.24
//!   (v2.24.3-1 src/enqueue.cc:678, N = per-rank count x type size); `Func: N Bytes -> Algo 1
//!   proto 0 time T` in 2.23 (v2.23.4-1 src/enqueue.cc:1855); `N Bytes -> Algo 1 proto 0 time T`
//!   as INFO in 2.20-2.22 (v2.20.5-1 src/enqueue.cc:1498, v2.22.3-1 :1613) and as TRACE in
//!   every family (v2.18.6-1 src/enqueue.cc:1186, v2.28.9-1 :1863); N is NCCL's `nBytes`
//!   (all ranks' data for AllGather/ReduceScatter) and T the model's time in µs;
//! * the version: an INFO line, or `NCCL version X` printed bare on stdout (always up to 2.21,
//!   v2.18.6-1 src/init.cc:452; at NCCL_DEBUG=VERSION or WARN from 2.22, v2.22.3-1 :495);
//! * the init table: two blocks of three algorithms up to 2.22 (v2.18.6-1
//!   src/graph/tuning.cc:303-335), a third block with PAT from 2.23;
//! * channel counts: `%d coll channels, %d nvls channels, ...` (v2.18.6-1 src/init.cc:1113),
//!   with `%d collnet channels` after the first count from 2.20 (v2.20.5-1 src/init.cc:1256);
//! * ring lines `Channel cc/nn :` + ranks (rank 0; at most 20 ranks of `%4d` up to 2.22,
//!   v2.18.6-1 src/graph/rings.cc:35 and `dumpLine`; 128 characters from 2.23), `Ring cc : p ->
//!   r -> n` (v2.18.6-1 src/init.cc:1042), `Trees [c] d0/d1/d2->r->up ...` (:1045) and, across
//!   nodes, `Tree c : up -> r -> d0/d1/d2` (v2.18.6-1 src/graph/connect.cc:161).
//!
//! Every rank prints its own graph, channel-count and threshold lines (the ring lines and
//! the init table only rank 0: v2.28.9-1 src/graph/rings.cc `if (rank == 0) dumpLine`,
//! src/graph/tuning.cc:499). A log of several ranks (several processes, or nccl-tests `-g N`:
//! one process, one thread per GPU) is split into streams by the line prefix without the
//! thread id (`host:pid [dev]`, or a bare `[r]`); a stream's rank comes from its `comm ...
//! rank R nRanks N` or `Init START/COMPLETE` line, else from `[dev]` in a log of one process.

mod cells;
pub mod formats;
pub mod init_lines;
mod lines;
mod reader;
mod table;
pub mod tuning231;

pub use cells::{table_from_log, LoggedCells};
pub(crate) use lines::word_after;
pub use lines::{env_setting, symmetric_line, tuner_line, tuning_line, SymmetricLogLine};

use crate::error::{Error, Result};
use crate::model::{rules, table as tuning_table, Algo, Coll, Proto, TuningTable};
use crate::search::SearchGraph;
use serde::Serialize;

/// One `Pattern ..., nChannels ..., bw ..., type ..., sameChannels ...` line: the search's graph type (with the
/// fields the line has; no per-channel GPU order, no NET latency) and where it stood.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogGraph {
    pub graph: SearchGraph,
    pub line: usize,
    /// Index into `NcclLog::streams`: the rank that printed it.
    pub(crate) stream: usize,
}

/// One cell of the init table as printed: latency and bandwidth text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogCell {
    pub latency: String,
    pub bandwidth: String,
    /// The line of the function's row.
    pub(crate) line: usize,
}

/// The init tuning table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogTable {
    /// `[algo][proto]`, None where the log had no block for the algorithm.
    pub max_threads: Vec<Vec<Option<i64>>>,
    /// `[algo]`: the line of the block's `Max NThreads` row (0 where none).
    pub max_threads_line: Vec<usize>,
    /// `[func][algo][proto]`.
    pub cells: Vec<Vec<Vec<Option<LogCell>>>>,
    /// The algorithms that have a block: 6 up to 2.22 (no PAT), 7 from 2.23.
    pub algorithms: Vec<Algo>,
    /// Line of the first `Algorithm` header.
    pub(crate) line: usize,
}

/// The shape of a per-call line (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CallFormat {
    /// `Func: N Bytes -> Algo RING proto LL channel{Lo..Hi}={a..b}` (2.24+): N per rank.
    Named,
    /// `Func: N Bytes -> Algo 1 proto 0 time T` (2.23): N is `nBytes`.
    NamedTimed,
    /// `N Bytes -> Algo 1 proto 0 time T` (INFO 2.20-2.22, TRACE always): N is `nBytes`.
    Timed,
}

/// One per-call line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogCall {
    /// None when the line does not name it and no `Func: opCount ...` line of the
    /// same process came before it.
    pub coll: Option<Coll>,
    /// Line of the `Func: opCount ...` (NCCL_COLL) line that named the collective of a
    /// `Timed` call.
    pub coll_line: Option<usize>,
    pub format: CallFormat,
    /// The bytes as printed: per rank for `Named`, NCCL's `nBytes` otherwise.
    pub bytes: u64,
    pub algo: Algo,
    pub proto: Proto,
    /// `channel{Lo..Hi}` (`Named` lines only).
    pub channels: Option<(usize, usize)>,
    /// The model's time as printed (`%f`, µs; `NamedTimed` and `Timed` lines).
    pub time_us: Option<String>,
    /// A TRACE line (every rank prints them) rather than rank 0's INFO line.
    pub trace: bool,
    /// `host:pid` of the line's prefix ("" when the log has no prefix).
    pub process: String,
    /// Index into `NcclLog::streams`.
    pub stream: usize,
    pub line: usize,
}

impl LogCall {
    /// NCCL's `nBytes` of the call (what the model and the tuner plugin see).
    pub fn n_bytes(&self, n_ranks: usize) -> u64 {
        match (self.format, self.coll) {
            (CallFormat::Named, Some(c)) if c.is_ag_rs() => self.bytes * n_ranks as u64,
            _ => self.bytes,
        }
    }
}

/// `Channel cc/nn : r r r ...`: a ring as rank 0 prints it (possibly cut short).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogRing {
    pub(crate) channel: usize,
    pub n_channels: usize,
    pub ranks: Vec<i32>,
    pub(crate) line: usize,
}

/// `Ring cc : prev -> rank -> next`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogRingLink {
    pub(crate) channel: usize,
    pub(crate) prev: i32,
    pub rank: i32,
    pub(crate) next: i32,
    pub(crate) line: usize,
}

/// One tree entry: from `Trees [c] d0/d1/d2->rank->up` or `Tree c : up -> rank -> d0/d1/d2`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogTreeLink {
    pub channel: usize,
    pub up: i32,
    pub rank: i32,
    pub(crate) down: [i32; 3],
    /// True for a `Tree c :` line (the links across nodes, `connectTrees`).
    pub(crate) across_nodes: bool,
    pub(crate) line: usize,
}

/// What planner's tuner plugin did for one call (tuner/README.md, "Log line formats").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum PluginOutcome {
    /// `ALGO/PROTO channels C (rule I)`: the plugin set the pair (and C channels).
    Steered {
        algo: Algo,
        proto: Proto,
        channels: Option<u32>,
        rule: usize,
    },
    /// `kept (WHY)`: NCCL's own choice stands.
    Kept(String),
}

/// `planner-tuner: COLL BYTES bytes nRanks R nNodes N -> OUTCOME`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PluginDecision {
    /// None for `func<N>` (a collective the model does not know).
    pub(crate) coll: Option<Coll>,
    /// NCCL's `nBytes`.
    pub(crate) n_bytes: u64,
    pub(crate) n_ranks: usize,
    pub(crate) n_nodes: usize,
    pub outcome: PluginOutcome,
    pub(crate) process: String,
    pub(crate) line: usize,
}

/// One rank's lines: the lines of one prefix (`[tag] host:pid` and NCCL's `[dev]`, the
/// thread id left out). A log of several processes, or of one process driving several
/// GPUs (nccl-tests `-g N`), has one stream per rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogStream {
    /// The prefix without the thread id (`node031:1936469 [2]`, `[3]`, "" for no prefix).
    pub key: String,
    /// The rank: from the stream's `comm ... rank R nRanks N` or `... rank R nranks N cudaDev D
    /// ... Init START/COMPLETE` line; else the `[dev]` of a log of one process (nccl-tests
    /// `-g N`) or of a prefix that is only `[r]`.
    pub rank: Option<usize>,
    /// The stream's first NCCL line.
    pub(crate) line: usize,
    /// The stream's last NCCL line that is not a graph line (`Pattern ...` or its channel
    /// lines ` 0 : GPU/0 ...`): a rank whose graph lines end the log may have been cut.
    pub(crate) last_other_line: usize,
}

/// `N coll channels, .. M nvls channels` as one rank printed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LogChannels {
    pub coll: usize,
    pub nvls: usize,
    pub line: usize,
    pub stream: usize,
}

/// `threadThresholds a/b/c | d/e/f | g | h` as one rank printed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LogThresholds {
    pub values: [i64; 8],
    pub line: usize,
    pub stream: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NcclLog {
    pub source: String,
    /// `NCCL version 2.28.9+cuda13.0` -> "2.28.9+cuda13.0".
    pub version: Option<String>,
    /// `X set by environment to Y` lines, in order (name, value, line).
    pub env: Vec<(String, String, usize)>,
    pub n_ranks: Option<usize>,
    pub n_nodes: Option<usize>,
    pub local_ranks: Option<usize>,
    /// The line of the first `comm ... nRanks` (or 2.18-2.19 `Init START`) line.
    pub shape_line: usize,
    /// The ranks that printed lines, in the order of their first line.
    pub streams: Vec<LogStream>,
    /// Graph lines of every rank's first communicator, in log order; per rank in the order
    /// NCCL prints them: ring, tree, then collnet chain, collnet direct, NVLS when searched.
    pub graphs: Vec<LogGraph>,
    /// Each rank's first `N coll channels, .. M nvls channels` line, in log order.
    pub channels: Vec<LogChannels>,
    pub rings: Vec<LogRing>,
    pub ring_links: Vec<LogRingLink>,
    pub trees: Vec<LogTreeLink>,
    pub table: Option<LogTable>,
    /// Each rank's first `threadThresholds a/b/c | d/e/f | g | h` line, in log order.
    pub thread_thresholds: Vec<LogThresholds>,
    pub calls: Vec<LogCall>,
    /// The plugin's `plan PATH applies: ...` line and its line number.
    pub(crate) plugin_plan: Option<(String, usize)>,
    pub plugin_decisions: Vec<PluginDecision>,
    /// NCCL 2.31's `Input: {` and `Best tuning {` lines (`tuning231`), in log order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tuning231: Vec<tuning231::TuningLineAt>,
    /// The lines of 2.31's `Best tuning, algorithm, A, protocol, P` (the pair of the `Best tuning {` line before).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tuning_summaries: Vec<usize>,
    /// NVLS heads, NVLS_NCHANNELS, P2P chunk size, P2P type and ring PXN/GDR lines (`init_lines`).
    #[serde(skip_serializing_if = "init_lines::InitLines::is_empty")]
    pub init: init_lines::InitLines,
    /// The line formats that only some families print, each with its first line (`formats`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub formats: Vec<formats::FormatSeen>,
}

/// The family (`(2, 22)`) a version string names, if it names one.
pub fn version_family(version: &str) -> Option<rules::Family> {
    crate::model::table::family_of(version)
        .ok()
        .and_then(|f| rules::parse_family(&f))
}

/// The built-in table for the NCCL version a log names: its family, else the newest
/// family (for a newer NCCL) or the nearest older one, with a one-line notice.
pub fn table_for_log(version: &str) -> Result<(TuningTable, Option<String>)> {
    match tuning_table::for_version(version) {
        Ok(choice) => {
            let pre_release = tuning_table::is_pre_release(choice.family)
                && tuning_table::family_of(version).ok().as_deref() == Some(choice.family);
            let notice = choice.notice.map(|_| {
                if pre_release {
                    return format!(
                        "the log's NCCL {version}: the {} model is read from a pre-release branch",
                        choice.family
                    );
                }
                format!(
                    "the log's NCCL {version} is newer than the newest modelled family {}; compared with the {} model",
                    choice.family, choice.family
                )
            });
            Ok((tuning_table::builtin(choice.family)?, notice))
        }
        Err(_) => {
            let (family, why) = match version_family(version) {
                Some((major, minor)) => (
                    tuning_table::nearest_family(major, minor).0,
                    format!("no model for NCCL {major}.{minor}"),
                ),
                None => (
                    tuning_table::newest_family(),
                    format!("cannot read the version '{version}'"),
                ),
            };
            Ok((
                tuning_table::builtin(family)?,
                Some(format!(
                    "the log's NCCL {version}: {why}; compared with the {family} model"
                )),
            ))
        }
    }
}

/// `NCCL version 2.20.5+cuda12.4` anywhere in a line: the version word.
pub(crate) fn bare_version(raw: &str) -> Option<String> {
    let pos = raw.find("NCCL version ")?;
    let word = raw[pos + "NCCL version ".len()..]
        .split_whitespace()
        .next()?;
    word.starts_with(|c: char| c.is_ascii_digit())
        .then(|| word.to_string())
}

impl NcclLog {
    /// A log with nothing read yet.
    fn empty(source: &str) -> NcclLog {
        NcclLog {
            source: source.to_string(),
            version: None,
            env: Vec::new(),
            n_ranks: None,
            n_nodes: None,
            local_ranks: None,
            shape_line: 0,
            streams: Vec::new(),
            graphs: Vec::new(),
            channels: Vec::new(),
            rings: Vec::new(),
            ring_links: Vec::new(),
            trees: Vec::new(),
            table: None,
            thread_thresholds: Vec::new(),
            calls: Vec::new(),
            plugin_plan: None,
            plugin_decisions: Vec::new(),
            tuning231: Vec::new(),
            tuning_summaries: Vec::new(),
            init: Default::default(),
            formats: Vec::new(),
        }
    }

    /// The families (of `families`, oldest first) whose line formats are all this log's.
    pub fn families_allowed<'a>(&self, families: &[&'a str]) -> Vec<&'a str> {
        formats::allowed(&self.formats, families)
    }

    /// The log's formats that `family` does not print.
    pub fn formats_ruling_out(&self, family: rules::Family) -> Vec<formats::FormatSeen> {
        self.formats
            .iter()
            .copied()
            .filter(|f| !f.format.allows(family))
            .collect()
    }

    /// The largest rank a ring, ring-neighbour, tree or NVLS head line names, with its line: a lower bound of the
    /// rank count when no line gives it (ring lines are cut at 20 ranks up to 2.22 and at 128 characters after).
    pub fn largest_rank_named(&self) -> Option<(usize, usize)> {
        let rings = self
            .rings
            .iter()
            .flat_map(|r| r.ranks.iter().map(move |&x| (x, r.line)));
        let links = self
            .ring_links
            .iter()
            .flat_map(|l| [l.prev, l.rank, l.next].map(|x| (x, l.line)));
        let trees = self
            .trees
            .iter()
            .flat_map(|t| [t.up, t.rank, t.down[0], t.down[1], t.down[2]].map(|x| (x, t.line)));
        let heads = self
            .init
            .nvls_heads
            .iter()
            .flat_map(|h| h.ranks.iter().map(move |&x| (x, h.line)));
        rings
            .chain(links)
            .chain(trees)
            .chain(heads)
            .filter(|&(x, _)| x >= 0)
            .max_by_key(|&(x, line)| (x, std::cmp::Reverse(line)))
            .map(|(x, line)| (x as usize, line))
    }

    /// The per-call choices of a 2.31 log (`Input` and `Best tuning` lines paired per stream).
    pub fn tuning231_calls(&self) -> Vec<tuning231::TuningCall> {
        tuning231::calls(&self.tuning231)
    }

    /// The value of an environment variable the log reports.
    pub fn env_value(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(n, _, _)| n == name)
            .map(|(_, v, _)| v.as_str())
    }

    /// The family of the log's version, if it names one.
    pub fn family(&self) -> Option<rules::Family> {
        self.version.as_deref().and_then(version_family)
    }

    /// Read a log file.
    pub fn load(path: &str) -> Result<NcclLog> {
        let bytes = crate::units::read_input_bytes(path)?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let line = 1 + e.as_bytes()[..e.utf8_error().valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            Error::bad_input(format!("{path}:{line}: not text (invalid UTF-8)"))
        })?;
        NcclLog::parse(&text, path)
    }

    /// Read a log's text (`source` names it in errors); the module comment says what is read.
    pub fn parse(text: &str, source: &str) -> Result<NcclLog> {
        reader::parse(text, source)
    }

    /// Whether the log has compared lines of more than one rank (ring and tree lines name
    /// their rank; the others are told apart by their prefix).
    pub fn multi_rank(&self) -> bool {
        fn several(mut v: impl Iterator<Item = i64>) -> bool {
            match v.next() {
                Some(first) => v.any(|x| x != first),
                None => false,
            }
        }
        let streams = self
            .graphs
            .iter()
            .map(|g| g.stream)
            .chain(self.channels.iter().map(|c| c.stream))
            .chain(self.thread_thresholds.iter().map(|t| t.stream))
            .chain(self.calls.iter().map(|c| c.stream))
            .map(|s| s as i64);
        let ranks = self
            .ring_links
            .iter()
            .map(|l| l.rank)
            .chain(self.trees.iter().map(|t| t.rank))
            .map(i64::from);
        several(streams) || several(ranks)
    }

    /// The graph lines of each rank, by rank (streams of unknown rank last, in log order).
    pub fn graph_sets(&self) -> Vec<(usize, Vec<&LogGraph>)> {
        let mut streams: Vec<usize> = Vec::new();
        for g in &self.graphs {
            if !streams.contains(&g.stream) {
                streams.push(g.stream);
            }
        }
        streams.sort_by_key(|&s| (self.streams[s].rank.is_none(), self.streams[s].rank));
        streams
            .into_iter()
            .map(|s| (s, self.graphs.iter().filter(|g| g.stream == s).collect()))
            .collect()
    }

    /// How a rank is named in a difference: `rank 3`, else the line prefix.
    pub(crate) fn stream_label(&self, stream: usize) -> String {
        match self.streams.get(stream) {
            Some(LogStream { rank: Some(r), .. }) => format!("rank {r}"),
            Some(s) if !s.key.is_empty() => format!("'{}'", s.key),
            _ => "rank ?".to_string(),
        }
    }
}
