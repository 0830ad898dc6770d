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

use crate::error::{Error, Result};
use crate::model::{rules, Algo, Coll, Proto};
use crate::search::{Pattern, SearchGraph};
use crate::topo::PathType;
use serde::Serialize;

/// One `Pattern ..., nChannels ..., bw ..., type ..., sameChannels ...` line: the search's graph type (with the
/// fields the line has; no per-channel GPU order, no NET latency) and where it stood.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogGraph {
    pub graph: SearchGraph,
    pub line: usize,
    /// Index into `NcclLog::streams`: the rank that printed it.
    pub stream: usize,
}

/// One cell of the init table as printed: latency and bandwidth text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogCell {
    pub latency: String,
    pub bandwidth: String,
    /// The line of the function's row.
    pub line: usize,
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
    pub line: usize,
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
    pub channel: usize,
    pub n_channels: usize,
    pub ranks: Vec<i32>,
    pub line: usize,
}

/// `Ring cc : prev -> rank -> next`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogRingLink {
    pub channel: usize,
    pub prev: i32,
    pub rank: i32,
    pub next: i32,
    pub line: usize,
}

/// One tree entry: from `Trees [c] d0/d1/d2->rank->up` or `Tree c : up -> rank -> d0/d1/d2`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogTreeLink {
    pub channel: usize,
    pub up: i32,
    pub rank: i32,
    pub down: [i32; 3],
    /// True for a `Tree c :` line (the links across nodes, `connectTrees`).
    pub across_nodes: bool,
    pub line: usize,
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
    pub coll: Option<Coll>,
    /// NCCL's `nBytes`.
    pub n_bytes: u64,
    pub n_ranks: usize,
    pub n_nodes: usize,
    pub outcome: PluginOutcome,
    pub process: String,
    pub line: usize,
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
    pub line: usize,
    /// The stream's last NCCL line that is not a graph line (`Pattern ...` or its channel
    /// lines ` 0 : GPU/0 ...`): a rank whose graph lines end the log may have been cut.
    pub last_other_line: usize,
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
    pub plugin_plan: Option<(String, usize)>,
    pub plugin_decisions: Vec<PluginDecision>,
}

/// The family (`(2, 22)`) a version string names, if it names one.
pub fn version_family(version: &str) -> Option<rules::Family> {
    crate::model::table::family_of(version)
        .ok()
        .and_then(|f| rules::parse_family(&f))
}

/// `host:pid` of a line's prefix (`host:pid:tid [dev] `, after any launcher tag), or "".
fn process_key(prefix: &str) -> String {
    let words: Vec<&str> = prefix.split_whitespace().collect();
    // The last word before NCCL's `[dev]` (INFO) or `[dev] ms func:line` (TRACE) is `host:pid:tid`.
    let id = words
        .iter()
        .rev()
        .find(|w| w.matches(':').count() >= 2 && !w.starts_with('['));
    match id.and_then(|w| w.rsplit_once(':')) {
        Some((host_pid, _tid)) => host_pid.to_string(),
        None => String::new(),
    }
}

/// A line's prefix without the thread id (`[tag] host:pid [dev]`, the stream key), the
/// process (`host:pid`, "" when none) and NCCL's `[dev]`.
fn stream_key(prefix: &str) -> (String, String, Option<usize>) {
    let words: Vec<&str> = prefix.split_whitespace().collect();
    let bracket = |w: &str| {
        w.strip_prefix('[')
            .and_then(|w| w.strip_suffix(']'))
            .and_then(|n| n.parse::<usize>().ok())
    };
    // `host:pid:tid` is the last word with two colons (TRACE adds `ms func:line` after `[dev]`).
    match words
        .iter()
        .rposition(|w| w.matches(':').count() >= 2 && !w.starts_with('['))
    {
        Some(i) => {
            let host_pid = words[i].rsplit_once(':').map_or(words[i], |(hp, _)| hp);
            let dev = words.get(i + 1).and_then(|w| bracket(w));
            let mut key: Vec<&str> = words[..i].to_vec();
            key.push(host_pid);
            if let Some(w) = words.get(i + 1).filter(|w| bracket(w).is_some()) {
                key.push(w);
            }
            (key.join(" "), host_pid.to_string(), dev)
        }
        // No `host:pid:tid`: nothing, or only a rank tag such as `[3] `; a TRACE line's
        // `ms func:line` (from the first number with a decimal point on) is not part of it.
        None => {
            let tag: Vec<&str> = words
                .iter()
                .copied()
                .take_while(|w| !(w.contains('.') && w.parse::<f64>().is_ok()))
                .collect();
            let dev = tag.last().and_then(|w| bracket(w));
            (tag.join(" "), String::new(), dev)
        }
    }
}

/// `... rank R nRanks N ...` (the `comm` line) or `... rank R nranks N ... Init START` /
/// `Init COMPLETE`: the rank of the line's stream (not `Destroy COMPLETE`, which another
/// thread may print).
fn rank_of_line(msg: &str) -> Option<usize> {
    let init = msg.ends_with("Init START") || msg.ends_with("Init COMPLETE");
    let comm = msg.starts_with("comm ") && msg.contains(" nRanks ");
    if !(init && msg.contains(" nranks ") || comm) {
        return None;
    }
    word_after(msg, "rank").and_then(|w| w.parse().ok())
}

/// ` 0 : NET/0 GPU/0 GPU/1 NET/0`: a graph's channel, printed after its `Pattern` line.
fn graph_channel_line(msg: &str) -> bool {
    match msg.split_once(" : ") {
        Some((c, rest)) => {
            c.parse::<usize>().is_ok()
                && rest
                    .split_whitespace()
                    .all(|w| w.contains('/') || w == "...")
        }
        None => false,
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

    pub fn parse(text: &str, source: &str) -> Result<NcclLog> {
        let mut log = NcclLog {
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
        };
        let bad = |line: usize, what: &str| Error::bad_input(format!("{source}:{line}: {what}"));
        let mut table = TableBuilder::default();
        let mut nccl_lines = 0usize;
        // Per stream: its `[dev]`, its process, and whether its first communicator's graph
        // lines are complete (a second ring graph starts another communicator).
        let mut stream_dev: Vec<Option<usize>> = Vec::new();
        let mut stream_process: Vec<String> = Vec::new();
        let mut graphs_done: Vec<bool> = Vec::new();
        // The last `Func: opCount ...` line per stream: (collective, line).
        let mut last_coll: Vec<(String, Option<Coll>, usize)> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let (pos, marker, trace) = if let Some(p) = raw.find("NCCL INFO ") {
                (p, "NCCL INFO ", false)
            } else if let Some(p) = raw.find("NCCL TRACE ") {
                (p, "NCCL TRACE ", true)
            } else {
                // Up to 2.21 the version goes to stdout without NCCL's prefix.
                if log.version.is_none() {
                    log.version = bare_version(raw);
                }
                continue;
            };
            nccl_lines += 1;
            let process = process_key(&raw[..pos]);
            let (key, key_process, dev) = stream_key(&raw[..pos]);
            let stream = match log.streams.iter().position(|s| s.key == key) {
                Some(k) => k,
                None => {
                    log.streams.push(LogStream {
                        key: key.clone(),
                        rank: None,
                        line: line_no,
                        last_other_line: 0,
                    });
                    stream_dev.push(dev);
                    stream_process.push(key_process);
                    graphs_done.push(false);
                    log.streams.len() - 1
                }
            };
            let msg = &raw[pos + marker.len()..];
            let trimmed = msg.trim();
            if !trimmed.starts_with("Pattern ") && !graph_channel_line(trimmed) {
                log.streams[stream].last_other_line = line_no;
            }
            if trace {
                // Only TRACE's per-call line is read (NCCL_COLL, `ENABLE_TRACE` builds).
                if trimmed.contains(" Bytes -> Algo ") && trimmed.contains(" time ") {
                    let mut call = call_line(trimmed, line_no).map_err(|e| bad(line_no, &e))?;
                    call.trace = true;
                    call.process = process;
                    call.stream = stream;
                    fill_coll(&mut call, &last_coll, &key);
                    log.calls.push(call);
                }
                continue;
            }
            if let Some(rank) = rank_of_line(trimmed) {
                log.streams[stream].rank.get_or_insert(rank);
            }
            if table.open() && !table.accepts(msg) {
                table.finish(source, line_no)?;
            }
            if let Some(v) = trimmed.strip_prefix("NCCL version ") {
                log.version = Some(v.trim().to_string());
            } else if let Some((name, value)) = env_line(trimmed) {
                log.env.push((name, value, line_no));
            } else if trimmed.starts_with("comm ") && trimmed.contains(" nRanks ") {
                let field = |key: &str| -> Result<Option<usize>> {
                    match word_after(trimmed, key) {
                        None => Ok(None),
                        Some(w) => w
                            .parse::<usize>()
                            .map(Some)
                            .map_err(|_| bad(line_no, &format!("'{key} {w}' is not a count"))),
                    }
                };
                let (n_ranks, n_nodes, local_ranks) =
                    (field("nRanks")?, field("nNodes")?, field("localRanks")?);
                // Every rank prints one; the first stands for the log (a 2.18-2.19 init line
                // may have given the rank count before).
                if log.shape_line == 0 || log.n_nodes.is_none() {
                    (log.n_ranks, log.n_nodes, log.local_ranks) = (n_ranks, n_nodes, local_ranks);
                    log.shape_line = line_no;
                }
            } else if trimmed.contains(" nranks ") && trimmed.ends_with("Init START") {
                // 2.18-2.19 have no `comm ... nRanks` line; the init line has the rank count.
                if log.n_ranks.is_none() {
                    log.n_ranks = word_after(trimmed, "nranks").and_then(|w| w.parse().ok());
                    log.shape_line = line_no;
                }
            } else if trimmed.starts_with("Pattern ") {
                let mut g = graph_line(trimmed).map_err(|e| bad(line_no, &e))?;
                g.line = line_no;
                g.stream = stream;
                // Every rank prints its graphs; the ring graph opens a communicator's set, and
                // only each rank's first set is kept.
                let has_graphs = log.graphs.iter().any(|x| x.stream == stream);
                if has_graphs && g.graph.pattern == Pattern::Ring {
                    graphs_done[stream] = true;
                }
                if !graphs_done[stream] {
                    log.graphs.push(g);
                }
            } else if trimmed.contains(" coll channels,") {
                let (coll, nvls, line) =
                    channel_counts(trimmed, line_no).map_err(|e| bad(line_no, &e))?;
                if !log.channels.iter().any(|c| c.stream == stream) {
                    log.channels.push(LogChannels {
                        coll,
                        nvls,
                        line,
                        stream,
                    });
                }
            } else if let Some(rest) = trimmed.strip_prefix("threadThresholds ") {
                let nums: Vec<i64> = rest
                    .split(['/', '|'])
                    .map(|w| w.trim())
                    .filter(|w| !w.is_empty())
                    .map(|w| w.parse::<i64>())
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|_| bad(line_no, &format!("unreadable threadThresholds '{rest}'")))?;
                let arr: [i64; 8] = nums.try_into().map_err(|_| {
                    bad(
                        line_no,
                        &format!("threadThresholds needs 8 values: '{rest}'"),
                    )
                })?;
                if !log.thread_thresholds.iter().any(|t| t.stream == stream) {
                    log.thread_thresholds.push(LogThresholds {
                        values: arr,
                        line: line_no,
                        stream,
                    });
                }
            } else if msg.starts_with("  Algorithm   |") {
                table.header(msg, line_no).map_err(|e| bad(line_no, &e))?;
            } else if table.open() && table.accepts(msg) {
                table.row(msg, line_no).map_err(|e| bad(line_no, &e))?;
            } else if trimmed.contains(" Bytes -> Algo ") {
                let mut call = call_line(trimmed, line_no).map_err(|e| bad(line_no, &e))?;
                call.process = process;
                call.stream = stream;
                fill_coll(&mut call, &last_coll, &key);
                log.calls.push(call);
            } else if let Some((coll, _)) = coll_op_line(trimmed) {
                match last_coll.iter_mut().find(|(k, _, _)| *k == key) {
                    Some(slot) => *slot = (key, coll, line_no),
                    None => last_coll.push((key, coll, line_no)),
                }
            } else if let Some(rest) = trimmed.strip_prefix("planner-tuner: ") {
                if rest.contains(" bytes nRanks ") {
                    let mut d = plugin_line(rest).map_err(|e| bad(line_no, &e))?;
                    d.process = process;
                    d.line = line_no;
                    log.plugin_decisions.push(d);
                } else if rest.contains(" applies: ") && log.plugin_plan.is_none() {
                    log.plugin_plan = Some((trimmed.to_string(), line_no));
                }
            } else if let Some(ring) = ring_line(trimmed).map_err(|e| bad(line_no, &e))? {
                log.rings.push(LogRing {
                    line: line_no,
                    ..ring
                });
            } else if let Some(link) = ring_link_line(trimmed).map_err(|e| bad(line_no, &e))? {
                log.ring_links.push(LogRingLink {
                    line: line_no,
                    ..link
                });
            } else if trimmed.starts_with("Trees") {
                log.trees
                    .extend(trees_line(trimmed, line_no).map_err(|e| bad(line_no, &e))?);
            } else if let Some(link) = tree_line(trimmed).map_err(|e| bad(line_no, &e))? {
                log.trees.push(LogTreeLink {
                    line: line_no,
                    ..link
                });
            }
        }
        let end = text.lines().count();
        if table.open() {
            table.finish(source, end)?;
        }
        if let Some(mut t) = table.table.take() {
            let missing: Vec<Algo> = Algo::ALL
                .into_iter()
                .filter(|a| !table.seen.contains(a))
                .collect();
            // Up to 2.22 the table has no PAT block (6 algorithms in two blocks).
            let six_block_layout =
                missing == [Algo::Pat] && log.family().is_none_or(|f| f < (2, 23));
            if let Some(first) = missing.first().filter(|_| !six_block_layout) {
                return Err(Error::bad_input(format!(
                    "{source}:{end}: the tuning table that starts at line {} is cut short: no {} block",
                    t.line,
                    first.nccl_name()
                )));
            }
            t.algorithms = Algo::ALL
                .into_iter()
                .filter(|a| table.seen.contains(a))
                .collect();
            log.table = Some(t);
        }
        if nccl_lines == 0 {
            return Err(Error::bad_input(format!(
                "{source}: no 'NCCL INFO' line: not an NCCL_DEBUG=INFO log"
            )));
        }
        // A one-rank communicator prints graphs but no table and no per-call line (NCCL only copies).
        if log.table.is_none()
            && log.calls.is_empty()
            && log.graphs.is_empty()
            && log.channels.is_empty()
            && log.thread_thresholds.is_empty()
            && log.rings.is_empty()
            && log.ring_links.is_empty()
            && log.trees.is_empty()
        {
            return Err(Error::bad_input(format!(
                "{source}: nothing to compare: no tuning table, per-call, graph, channel, ring or tree line; run NCCL with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING"
            )));
        }
        log.resolve_ranks(&stream_dev, &stream_process);
        Ok(log)
    }

    /// Ranks of the streams that no `comm`/`Init` line named: in a log of one process
    /// (nccl-tests `-g N`, one thread per GPU) or with a rank-only prefix (`[3] NCCL INFO`),
    /// NCCL's `[dev]`; a log of one stream is rank 0's.
    fn resolve_ranks(&mut self, dev: &[Option<usize>], process: &[String]) {
        let one_process = process.iter().all(|p| *p == process[0]);
        let single = self.streams.len() == 1;
        for (k, s) in self.streams.iter_mut().enumerate() {
            if s.rank.is_none() {
                s.rank = if single && dev[k].is_none() {
                    Some(0)
                } else if one_process {
                    dev[k]
                } else {
                    None
                };
            }
        }
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
    pub fn stream_label(&self, stream: usize) -> String {
        match self.streams.get(stream) {
            Some(LogStream { rank: Some(r), .. }) => format!("rank {r}"),
            Some(s) if !s.key.is_empty() => format!("'{}'", s.key),
            _ => "rank ?".to_string(),
        }
    }
}

/// A `Timed` call takes its collective from the last `Func: opCount` line of its stream.
fn fill_coll(call: &mut LogCall, last_coll: &[(String, Option<Coll>, usize)], stream: &str) {
    if call.coll.is_some() {
        return;
    }
    if let Some((_, coll, line)) = last_coll.iter().find(|(k, _, _)| k == stream) {
        call.coll = *coll;
        call.coll_line = Some(*line);
    }
}

/// `AllReduce: opCount 0 sendbuff ...` (NCCL_COLL): the collective (None for Send/Recv and others).
fn coll_op_line(msg: &str) -> Option<(Option<Coll>, ())> {
    let (func, rest) = msg.split_once(": ")?;
    if !rest.starts_with("opCount ") || func.contains(' ') {
        return None;
    }
    Some((Coll::ALL.into_iter().find(|c| c.nccl_name() == func), ()))
}

/// `24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, ...`: by label.
fn channel_counts(msg: &str, line: usize) -> std::result::Result<(usize, usize, usize), String> {
    let mut coll = None;
    let mut nvls = None;
    for part in msg.split(',') {
        let mut words = part.split_whitespace();
        let (Some(n), Some(label)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(n) = n.parse::<usize>() else { continue };
        match (label, words.next()) {
            ("coll", Some("channels")) => coll = Some(n),
            ("nvls", Some("channels")) => nvls = Some(n),
            _ => {}
        }
    }
    match (coll, nvls) {
        (Some(c), Some(n)) => Ok((c, n, line)),
        _ => Err("channel counts line is cut short (no 'coll channels' or 'nvls channels')".into()),
    }
}

/// `NAME set by environment to VALUE` (integer params end with a period).
fn env_line(msg: &str) -> Option<(String, String)> {
    let (name, value) = msg.split_once(" set by environment to ")?;
    if !name.starts_with("NCCL_") || name.contains(' ') {
        return None;
    }
    let value = value.trim();
    let value = match value.strip_suffix('.') {
        Some(v) if crate::model::knobs::parse_c_integer(v).is_some() => v,
        _ => value,
    };
    Some((name.to_string(), value.to_string()))
}

fn word_after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == key {
            return words.next();
        }
    }
    None
}

/// `Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1`
fn graph_line(msg: &str) -> std::result::Result<LogGraph, String> {
    let field = |key: &str| -> std::result::Result<&str, String> {
        msg.split(',')
            .map(str::trim)
            .find_map(|part| part.strip_prefix(key).map(str::trim))
            .ok_or_else(|| format!("graph line without '{}': '{msg}'", key.trim()))
    };
    let int = |key: &str| -> std::result::Result<u64, String> {
        let v = field(key)?;
        v.parse::<u64>()
            .map_err(|_| format!("graph line: '{}{v}' is not a count", key))
    };
    let pair = |key: &str| -> std::result::Result<(&str, &str), String> {
        let v = field(key)?;
        v.split_once('/')
            .ok_or_else(|| format!("graph line: '{key}{v}' is not A/B"))
    };
    let (bi, be) = pair("bw ")?;
    let num = |v: &str| -> std::result::Result<f64, String> {
        v.parse::<f64>()
            .map_err(|_| format!("graph line: bandwidth '{v}' is not a number"))
    };
    let (ti, te) = pair("type ")?;
    let path = |v: &str| -> std::result::Result<PathType, String> {
        PathType::from_name(v).ok_or_else(|| format!("graph line: '{v}' is not an NCCL path type"))
    };
    let pattern = Pattern::from_number(int("Pattern ")?)
        .ok_or_else(|| format!("graph line: unknown NCCL pattern number in '{msg}'"))?;
    let mut graph = SearchGraph::empty(0, pattern);
    graph.cross_nic = int("crossNic ")? as u32;
    graph.n_channels = int("nChannels ")? as usize;
    graph.bw_intra = num(bi)?;
    graph.bw_inter = num(be)?;
    graph.type_intra = path(ti)?;
    graph.type_inter = path(te)?;
    graph.same_channels = int("sameChannels ")? != 0;
    Ok(LogGraph {
        graph,
        line: 0,
        stream: 0,
    })
}

/// A per-call line in any of its formats (see `CallFormat`).
fn call_line(msg: &str, line: usize) -> std::result::Result<LogCall, String> {
    let err = || format!("per-call line does not parse: '{msg}'");
    let (coll, rest) = match msg.split_once(": ") {
        Some((func, rest)) => {
            let coll = Coll::ALL
                .into_iter()
                .find(|c| c.nccl_name() == func.trim())
                .ok_or_else(|| format!("unknown function '{func}' in per-call line"))?;
            (Some(coll), rest)
        }
        None => (None, msg),
    };
    let mut words = rest.split_whitespace();
    let bytes = words
        .next()
        .and_then(|w| w.parse::<u64>().ok())
        .ok_or_else(err)?;
    let expect = |w: Option<&str>, want: &str| {
        if w == Some(want) {
            Ok(())
        } else {
            Err(err())
        }
    };
    expect(words.next(), "Bytes")?;
    expect(words.next(), "->")?;
    expect(words.next(), "Algo")?;
    let algo_word = words.next().ok_or_else(err)?;
    // Names from 2.24 (`ncclAlgoToString`), indices before.
    let numeric = algo_word.parse::<usize>().ok();
    let algo = match numeric {
        Some(i) => Algo::from_index(i)
            .ok_or_else(|| format!("unknown algorithm index {i} in per-call line"))?,
        None => Algo::ALL
            .into_iter()
            .find(|a| a.log_name() == algo_word)
            .ok_or_else(|| format!("unknown algorithm '{algo_word}' in per-call line"))?,
    };
    expect(words.next(), "proto")?;
    let proto_word = words.next().ok_or_else(err)?;
    let proto = match proto_word.parse::<usize>() {
        Ok(i) => Proto::from_index(i)
            .ok_or_else(|| format!("unknown protocol index {i} in per-call line"))?,
        Err(_) => Proto::ALL
            .into_iter()
            .find(|p| p.log_name() == proto_word)
            .ok_or_else(|| format!("unknown protocol '{proto_word}' in per-call line"))?,
    };
    let next = words.next().ok_or_else(err)?;
    let (format, channels, time_us) = if next == "time" {
        let t = words.next().ok_or_else(err)?;
        t.parse::<f64>().map_err(|_| err())?;
        let format = if coll.is_some() {
            CallFormat::NamedTimed
        } else {
            CallFormat::Timed
        };
        (format, None, Some(t.to_string()))
    } else {
        let inner = next
            .strip_prefix("channel{Lo..Hi}={")
            .and_then(|r| r.strip_suffix('}'))
            .ok_or_else(err)?;
        let (lo, hi) = inner.split_once("..").ok_or_else(err)?;
        let lo = lo.parse::<usize>().map_err(|_| err())?;
        let hi = hi.parse::<usize>().map_err(|_| err())?;
        if coll.is_none() || numeric.is_some() {
            return Err(err());
        }
        (CallFormat::Named, Some((lo, hi)), None)
    };
    Ok(LogCall {
        coll,
        coll_line: None,
        format,
        bytes,
        algo,
        proto,
        channels,
        time_us,
        trace: false,
        process: String::new(),
        stream: 0,
        line,
    })
}

/// `AllReduce 2097152 bytes nRanks 2 nNodes 1 -> Ring/LL channels - (rule 3)` or `... -> kept (WHY)`
/// (after `planner-tuner: `).
fn plugin_line(rest: &str) -> std::result::Result<PluginDecision, String> {
    let err = || format!("planner-tuner decision line does not parse: 'planner-tuner: {rest}'");
    let (head, outcome) = rest.split_once(" -> ").ok_or_else(err)?;
    let words: Vec<&str> = head.split_whitespace().collect();
    let [func, bytes, "bytes", "nRanks", ranks, "nNodes", nodes] = words.as_slice() else {
        return Err(err());
    };
    let number = |w: &str| w.parse::<u64>().map_err(|_| err());
    let coll = Coll::ALL.into_iter().find(|c| c.nccl_name() == *func);
    let outcome = if let Some(why) = outcome.strip_prefix("kept (") {
        PluginOutcome::Kept(why.strip_suffix(')').ok_or_else(err)?.to_string())
    } else {
        let words: Vec<&str> = outcome.split_whitespace().collect();
        let [pair, "channels", channels, "(rule", rule] = words.as_slice() else {
            return Err(err());
        };
        let (algo, proto) = pair.split_once('/').ok_or_else(err)?;
        PluginOutcome::Steered {
            algo: Algo::parse(algo).map_err(|e| e.to_string())?,
            proto: Proto::parse(proto).map_err(|e| e.to_string())?,
            channels: match *channels {
                "-" => None,
                c => Some(c.parse::<u32>().map_err(|_| err())?),
            },
            rule: rule
                .strip_suffix(')')
                .and_then(|r| r.parse::<usize>().ok())
                .ok_or_else(err)?,
        }
    };
    Ok(PluginDecision {
        coll,
        n_bytes: number(bytes)?,
        n_ranks: number(ranks)? as usize,
        n_nodes: number(nodes)? as usize,
        outcome,
        process: String::new(),
        line: 0,
    })
}

/// `Channel 00/16 :    0   7   6 ...` (rank 0's rings); None for other `Channel` lines
/// (the connection lines `Channel 00/0 : 0[0] -> 1[1] via P2P` and the like).
fn ring_line(msg: &str) -> std::result::Result<Option<LogRing>, String> {
    let Some(rest) = msg.strip_prefix("Channel ") else {
        return Ok(None);
    };
    if rest.contains("->") || rest.contains(" via ") || rest.contains('[') {
        return Ok(None);
    }
    let Some((head, ranks)) = rest.split_once(" :") else {
        return Ok(None);
    };
    let Some((c, n)) = head.split_once('/') else {
        return Ok(None);
    };
    let (Ok(channel), Ok(n_channels)) = (c.trim().parse::<usize>(), n.trim().parse::<usize>())
    else {
        return Ok(None);
    };
    // Long rings end with "..." (2.23+) or are cut at 20 ranks (up to 2.22).
    let ranks: Vec<i32> = ranks
        .split_whitespace()
        .map_while(|w| w.parse::<i32>().ok())
        .collect();
    if ranks.is_empty() {
        return Err(format!("ring line without ranks: '{msg}'"));
    }
    Ok(Some(LogRing {
        channel,
        n_channels,
        ranks,
        line: 0,
    }))
}

/// `a -> b -> c` as three numbers.
fn arrow3(text: &str) -> Option<[&str; 3]> {
    let parts: Vec<&str> = text.split("->").map(str::trim).collect();
    <[&str; 3]>::try_from(parts.as_slice()).ok()
}

/// `d0/d1/d2`.
fn down3(text: &str) -> Option<[i32; 3]> {
    let v: Vec<i32> = text
        .split('/')
        .map(|w| w.trim().parse::<i32>().ok())
        .collect::<Option<_>>()?;
    <[i32; 3]>::try_from(v.as_slice()).ok()
}

/// `Ring 00 : 1 -> 0 -> 1`; None for other `Ring` lines (older `Ring 00 : 3[b0] -> 0[80] via ...`).
fn ring_link_line(msg: &str) -> std::result::Result<Option<LogRingLink>, String> {
    let Some(rest) = msg.strip_prefix("Ring ") else {
        return Ok(None);
    };
    if rest.contains('[') || rest.contains(" via ") {
        return Ok(None);
    }
    let Some((c, links)) = rest.split_once(" : ") else {
        return Ok(None);
    };
    let Ok(channel) = c.trim().parse::<usize>() else {
        return Ok(None);
    };
    let err = || format!("ring line does not parse: '{msg}'");
    let [p, r, n] = arrow3(links).ok_or_else(err)?;
    let num = |w: &str| w.parse::<i32>().map_err(|_| err());
    Ok(Some(LogRingLink {
        channel,
        prev: num(p)?,
        rank: num(r)?,
        next: num(n)?,
        line: 0,
    }))
}

/// `Tree 0 : -1 -> 0 -> 1/-1/-1` (the links across nodes).
fn tree_line(msg: &str) -> std::result::Result<Option<LogTreeLink>, String> {
    let Some(rest) = msg.strip_prefix("Tree ") else {
        return Ok(None);
    };
    let Some((c, links)) = rest.split_once(" : ") else {
        return Ok(None);
    };
    let Ok(channel) = c.trim().parse::<usize>() else {
        return Ok(None);
    };
    let err = || format!("tree line does not parse: '{msg}'");
    let [up, r, down] = arrow3(links).ok_or_else(err)?;
    Ok(Some(LogTreeLink {
        channel,
        up: up.parse().map_err(|_| err())?,
        rank: r.parse().map_err(|_| err())?,
        down: down3(down).ok_or_else(err)?,
        across_nodes: true,
        line: 0,
    }))
}

/// `Trees [0] 1/-1/-1->0->-1 [1] ...`. NCCL cuts the line at 1023 bytes, so a last entry
/// that does not parse is dropped; older formats (`a->b->c|c->b->a`) are skipped.
fn trees_line(msg: &str, line: usize) -> std::result::Result<Vec<LogTreeLink>, String> {
    let Some(rest) = msg.strip_prefix("Trees") else {
        return Ok(Vec::new());
    };
    if rest.contains('|') {
        return Ok(Vec::new());
    }
    let entries: Vec<&str> = rest.split('[').skip(1).collect();
    let mut out = Vec::new();
    for (k, entry) in entries.iter().enumerate() {
        let parsed = (|| {
            let (c, body) = entry.split_once(']')?;
            let [down, r, up] = arrow3(body.trim())?;
            Some(LogTreeLink {
                channel: c.trim().parse().ok()?,
                up: up.parse().ok()?,
                rank: r.parse().ok()?,
                down: down3(down)?,
                across_nodes: false,
                line,
            })
        })();
        match parsed {
            Some(t) => out.push(t),
            None if k + 1 == entries.len() => {}
            None => return Err(format!("Trees entry '[{entry}' does not parse")),
        }
    }
    Ok(out)
}

/// Assembles the init table block by block: `Algorithm`, `Protocol`,
/// `Max NThreads`, then one row per function.
#[derive(Default)]
struct TableBuilder {
    /// Algorithms of the open block, and how many function rows it has read.
    block: Option<(Vec<Algo>, usize, bool, bool, usize)>,
    table: Option<LogTable>,
    /// Algorithms whose block was read completely.
    seen: Vec<Algo>,
}

impl TableBuilder {
    fn open(&self) -> bool {
        self.block.is_some()
    }

    /// Lines that belong to an open block.
    fn accepts(&self, msg: &str) -> bool {
        msg.starts_with("  Protocol    |")
            || msg.starts_with(" Max NThreads |")
            || Coll::ALL
                .iter()
                .any(|c| msg.starts_with(&format!("{:>13} |", c.nccl_name())))
    }

    fn header(&mut self, msg: &str, line: usize) -> std::result::Result<(), String> {
        let names: Vec<&str> = msg
            .split('|')
            .skip(1)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let algos = names
            .iter()
            .map(|n| {
                Algo::ALL
                    .into_iter()
                    .find(|a| a.nccl_name() == *n)
                    .ok_or_else(|| format!("unknown algorithm '{n}' in the tuning table header"))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        if algos.is_empty() || algos.len() > 3 {
            return Err("tuning table header must name 1 to 3 algorithms".to_string());
        }
        if self.table.is_none() {
            self.table = Some(LogTable {
                max_threads: vec![vec![None; 3]; 7],
                max_threads_line: vec![0; 7],
                cells: vec![vec![vec![None; 3]; 7]; 5],
                algorithms: Vec::new(),
                line,
            });
        }
        self.block = Some((algos, 0, false, false, line));
        Ok(())
    }

    fn row(&mut self, msg: &str, line: usize) -> std::result::Result<(), String> {
        let Some((algos, rows, proto_seen, threads_seen, _)) = self.block.as_mut() else {
            return Ok(());
        };
        let table = self
            .table
            .as_mut()
            .ok_or("tuning table row before its header")?;
        let (label, rest) = msg.split_once('|').ok_or("tuning table row without '|'")?;
        let label = label.trim();
        let cells: Vec<&str> = rest
            .split('|')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        match label {
            "Protocol" => {
                *proto_seen = true;
            }
            "Max NThreads" => {
                if cells.len() != algos.len() * 3 {
                    return Err(format!(
                        "Max NThreads row has {} values, expected {}",
                        cells.len(),
                        algos.len() * 3
                    ));
                }
                for (k, cell) in cells.iter().enumerate() {
                    let v = cell
                        .parse::<i64>()
                        .map_err(|_| format!("Max NThreads value '{cell}' is not a number"))?;
                    table.max_threads[algos[k / 3] as usize][k % 3] = Some(v);
                    table.max_threads_line[algos[k / 3] as usize] = line;
                }
                *threads_seen = true;
            }
            func => {
                let coll = Coll::ALL
                    .into_iter()
                    .find(|c| c.nccl_name() == func)
                    .ok_or_else(|| format!("unknown function '{func}' in the tuning table"))?;
                if cells.len() != algos.len() * 3 {
                    return Err(format!(
                        "{func} row has {} cells, expected {} (a cut line?)",
                        cells.len(),
                        algos.len() * 3
                    ));
                }
                for (k, cell) in cells.iter().enumerate() {
                    let (lat, bw) = cell
                        .split_once('/')
                        .ok_or_else(|| format!("cell '{cell}' is not latency/bandwidth"))?;
                    let (lat, bw) = (lat.trim(), bw.trim());
                    if lat.parse::<f64>().is_err() || bw.parse::<f64>().is_err() {
                        return Err(format!("cell '{cell}' is not two numbers"));
                    }
                    table.cells[coll as usize][algos[k / 3] as usize][k % 3] = Some(LogCell {
                        latency: lat.to_string(),
                        bandwidth: bw.to_string(),
                        line,
                    });
                }
                *rows += 1;
            }
        }
        Ok(())
    }

    /// Close the open block; a block cut short is a truncated log.
    fn finish(&mut self, source: &str, line: usize) -> Result<()> {
        if let Some((algos, rows, proto_seen, threads_seen, start)) = self.block.take() {
            if rows != 5 || !proto_seen || !threads_seen {
                return Err(Error::bad_input(format!(
                    "{source}:{line}: the tuning table block for {} that starts at line {start} is cut short ({rows} of 5 function rows)",
                    algos.iter().map(|a| a.nccl_name()).collect::<Vec<_>>().join("/")
                )));
            }
            self.seen.extend(algos);
        }
        Ok(())
    }
}
