//! Compare what NCCL logged with what the planner's model says for the same
//! machine: graphs, channel counts, every cell of the init table, thread
//! thresholds and every per-call choice.

// NCCL's example tuner CSV: read, and a log of a run that used it compared with its rules (issue 26).
pub mod tuner_csv;

use crate::error::{Error, Result};
use crate::model::input::NvlsFlag;
use crate::model::select::Call;
use crate::model::{Algo, Coll, Model, Proto};
use crate::nccl_env::NcclEnv;
use crate::nccl_log::{table_for_log, CallFormat, LogGraph, NcclLog, PluginOutcome};
use crate::pipeline::{self, Source};
use crate::search::{Graphs, Pattern, SearchGraph, SearchResult};
use serde::Serialize;
use std::path::Path;

mod calls231;
pub mod init_checks;
mod machine;

/// One disagreement between the log and the planner.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// The log line that holds the differing value (0: the log has no such line, e.g. a
    /// graph the planner searched and NCCL did not print).
    pub line: usize,
    /// The rank whose line it is, in a log of several ranks.
    pub rank: Option<usize>,
    /// What is compared (`AllReduce Ring LL latency`).
    pub what: String,
    /// The values as printed (NCCL's format).
    pub nccl: String,
    pub planner: String,
}

/// A value that is a number goes to JSON as a number (`19.5`, `8`), anything else as text.
struct JsonValue<'a>(&'a str);

impl Serialize for JsonValue<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let text = self.0;
        let numeric = !text.is_empty()
            && text
                .chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E'))
            && text.starts_with(|c: char| c.is_ascii_digit() || c == '-');
        if numeric {
            if let Ok(i) = text.parse::<i64>() {
                return s.serialize_i64(i);
            }
            if let Ok(f) = text.parse::<f64>() {
                if f.is_finite() {
                    return s.serialize_f64(f);
                }
            }
        }
        s.serialize_str(text)
    }
}

impl Serialize for Difference {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut m = s.serialize_struct("Difference", 5)?;
        m.serialize_field("line", &(self.line > 0).then_some(self.line))?;
        match self.rank {
            Some(r) => m.serialize_field("rank", &r)?,
            None => m.skip_field("rank")?,
        }
        m.serialize_field("what", &self.what)?;
        m.serialize_field("nccl", &JsonValue(&self.nccl))?;
        m.serialize_field("planner", &JsonValue(&self.planner))?;
        m.end()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditReport {
    pub(crate) log: String,
    pub(crate) nccl_version: Option<String>,
    pub table_family: String,
    /// How many values were compared.
    pub compared: usize,
    /// The differences listed: the first `DIFFERENCES_LISTED_PER_KIND` of each kind.
    pub differences: Vec<Difference>,
    /// Per kind, how many differences were found beyond those listed (counted, not kept).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub differences_not_listed: std::collections::BTreeMap<DifferenceKind, usize>,
    /// One-line notices: the log is newer than the newest modelled family, calls
    /// compared under an assumption.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<String>,
    /// What the log has that could not be compared, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_checked: Vec<String>,
    /// planner's tuner plugin, when the log has its lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<PluginSummary>,
    /// The log's NCCL_* variables the model applied (name -> value, as the log prints them).
    pub(crate) nccl_env: std::collections::BTreeMap<String, String>,
    /// The same, as the model read them (for the one stderr line).
    #[serde(skip)]
    pub(crate) env: NcclEnv,
}

impl AuditReport {
    /// Every difference found: those listed and those only counted.
    pub(crate) fn difference_count(&self) -> usize {
        self.differences.len() + self.differences_not_listed.values().sum::<usize>()
    }
}

/// What planner's tuner plugin did in the log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PluginSummary {
    /// The plugin's `plan PATH applies: ...` line.
    pub plan: Option<String>,
    /// Decision lines.
    pub decisions: usize,
    /// Calls the plugin steered (`ALGO/PROTO channels C (rule I)`).
    pub steered: usize,
    /// Steered calls whose per-call line shows the plugin's pair.
    pub steered_followed: usize,
    /// Steered decisions with no per-call line after them (other ranks print none).
    pub(crate) steered_without_call_line: usize,
    /// Decisions that left NCCL's choice in place (`kept (...)`).
    pub kept: usize,
}

/// `%.1f` as NCCL prints the table.
pub(crate) fn cell(v: f32) -> String {
    format!("{:.1}", v as f64)
}

/// How many differences of one kind (`DifferenceKind`) are listed; the rest are counted. A log of 700,000
/// per-call lines that all disagree would otherwise build (and render) 1.4 million rows.
pub const DIFFERENCES_LISTED_PER_KIND: usize = 1000;

/// What a compared value belongs to: the unit of the cap on listed differences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DifferenceKind {
    Shape,
    Graphs,
    ChannelCounts,
    InitTable,
    ThreadThresholds,
    PerCall,
    Rings,
    Trees,
    /// NVLS heads, NVLS_NCHANNELS, P2P chunk size (`init_checks`).
    InitLines,
}

impl DifferenceKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            DifferenceKind::Shape => "communicator shape",
            DifferenceKind::Graphs => "graph",
            DifferenceKind::ChannelCounts => "channel count",
            DifferenceKind::InitTable => "init table",
            DifferenceKind::ThreadThresholds => "thread threshold",
            DifferenceKind::PerCall => "per-call",
            DifferenceKind::Rings => "ring",
            DifferenceKind::Trees => "tree",
            DifferenceKind::InitLines => "init line",
        }
    }
}

struct Collector {
    compared: usize,
    differences: Vec<Difference>,
    /// Differences found per kind, listed or not.
    found: std::collections::BTreeMap<DifferenceKind, usize>,
    /// The kind of the next checks.
    kind: DifferenceKind,
    /// The rank the next checks belong to (set only for a log of several ranks).
    rank: Option<usize>,
}

impl Collector {
    fn check(&mut self, line: usize, what: impl Into<String>, nccl: String, planner: String) {
        self.compared += 1;
        if nccl != planner {
            let found = self.found.entry(self.kind).or_insert(0);
            *found += 1;
            if *found <= DIFFERENCES_LISTED_PER_KIND {
                self.differences.push(Difference {
                    line,
                    rank: self.rank,
                    what: what.into(),
                    nccl,
                    planner,
                });
            }
        }
    }

    /// Per kind, the differences found beyond those listed.
    fn not_listed(&self) -> std::collections::BTreeMap<DifferenceKind, usize> {
        self.found
            .iter()
            .filter(|(_, &n)| n > DIFFERENCES_LISTED_PER_KIND)
            .map(|(&k, &n)| (k, n - DIFFERENCES_LISTED_PER_KIND))
            .collect()
    }
}

/// What a rank's lines are called in a log of several ranks (`rank 3 `), else "".
fn rank_prefix(log: &NcclLog, multi: bool, stream: usize) -> String {
    if multi {
        format!("{} ", log.stream_label(stream))
    } else {
        String::new()
    }
}

/// The rank of a stream, in a log of several ranks.
fn rank_of(log: &NcclLog, multi: bool, stream: usize) -> Option<usize> {
    multi
        .then(|| log.streams.get(stream).and_then(|s| s.rank))
        .flatten()
}

fn graph_name(index: usize, pattern: Pattern) -> &'static str {
    match (index, pattern) {
        (0, _) => "ring graph",
        (1, _) => "tree graph",
        (_, Pattern::CollNetDirect) => "collnet direct graph",
        (_, Pattern::Nvls) => "NVLS graph",
        _ => "collnet chain graph",
    }
}

/// The planner's graphs in NCCL's print order (ring, tree, collnet chain,
/// collnet direct, NVLS), for those NCCL would search.
fn planner_graphs(g: &Graphs) -> Vec<&SearchGraph> {
    let mut out = vec![&g.ring, &g.tree];
    if let (Some(c), Some(d)) = (&g.collnet_chain, &g.collnet_direct) {
        out.push(c);
        out.push(d);
    }
    if let Some(n) = &g.nvls {
        out.push(n);
    }
    out
}

/// Compare a log with the model. `search` is the planner's own search and connection
/// (None when the model was fed the log's graphs, so there is nothing to compare).
pub fn audit(log: &NcclLog, model: &Model, search: Option<&SearchResult>) -> Result<AuditReport> {
    audit_with(log, model, search, &init_checks::Facts::default())
}

/// `audit`, with the facts of the topology that some init lines need (`init_checks::Facts`).
pub fn audit_with(
    log: &NcclLog,
    model: &Model,
    search: Option<&SearchResult>,
    facts: &init_checks::Facts,
) -> Result<AuditReport> {
    let mut c = Collector {
        compared: 0,
        differences: Vec::new(),
        found: Default::default(),
        kind: DifferenceKind::Shape,
        rank: None,
    };
    let mut notices = Vec::new();
    let mut not_checked = Vec::new();
    let input = &model.input;
    if let Some(n) = log.n_ranks {
        c.check(
            log.shape_line,
            "ranks",
            n.to_string(),
            input.n_ranks.to_string(),
        );
    }
    if let Some(n) = log.n_nodes {
        c.check(
            log.shape_line,
            "nodes",
            n.to_string(),
            input.n_nodes.to_string(),
        );
    }
    compare_graphs(&mut c, log, search, &mut not_checked);
    compare_channel_counts(&mut c, log, model);
    compare_table(&mut c, log, model);
    compare_thread_thresholds(&mut c, log, model);
    c.rank = None;
    let plugin = compare_calls(&mut c, log, model, &mut notices);
    calls231::compare(&mut c, log, model, &mut not_checked);
    compare_connection(&mut c, log, search, &mut not_checked);
    init_checks::compare(&mut c, log, model, search, facts, &mut not_checked);
    c.rank = None;
    Ok(AuditReport {
        log: log.source.clone(),
        nccl_version: log.version.clone(),
        table_family: model.table.family.clone(),
        compared: c.compared,
        differences_not_listed: c.not_listed(),
        differences: c.differences,
        notices,
        not_checked,
        plugin,
        nccl_env: model.env.applied_map(),
        env: model.env.clone(),
    })
}

/// Each rank's graph lines against the planner's search (nothing when the model was fed the log's graphs).
fn compare_graphs(
    c: &mut Collector,
    log: &NcclLog,
    search: Option<&SearchResult>,
    not_checked: &mut Vec<String>,
) {
    c.kind = DifferenceKind::Graphs;
    let multi = log.multi_rank();
    if search.is_some() && log.graphs.is_empty() {
        not_checked.push(
            "graphs: the log has no 'Pattern ...' lines (NCCL_DEBUG_SUBSYS without GRAPH)".into(),
        );
    }
    // Every rank prints its own graphs: each rank's lines against the planner's graphs
    // (one search serves every rank: the nodes are alike), by position within the rank.
    let graph_sets = if search.is_some() {
        log.graph_sets()
    } else {
        Vec::new()
    };
    for (stream, graphs) in graph_sets {
        let Some(search) = search else { break };
        let ours = planner_graphs(&search.graphs);
        let prefix = rank_prefix(log, multi, stream);
        c.rank = rank_of(log, multi, stream);
        let who = if multi {
            log.stream_label(stream)
        } else {
            "the log".to_string()
        };
        // NCCL prints the ring graph (always pattern RING) first: a rank whose first graph
        // line is another one was cut off before it (a log excerpt), so its lines start at
        // the tree graph.
        let first = graphs.first().map_or(0, |g| g.line);
        let skip = match graphs.first() {
            Some(g) if g.graph.pattern != Pattern::Ring => {
                not_checked.push(format!(
                    "{who}: ring graph: no 'Pattern 4' line before line {first} (the log starts after it)"
                ));
                1
            }
            _ => 0,
        };
        for (k, lg) in graphs.iter().enumerate() {
            let i = k + skip;
            let name = format!("{prefix}{}", graph_name(i, lg.graph.pattern));
            let Some(pg) = ours.get(i) else {
                c.check(
                    lg.line,
                    name.to_string(),
                    "searched".to_string(),
                    "not searched".to_string(),
                );
                continue;
            };
            check_graph(c, &name, lg, pg);
        }
        // A graph NCCL did not print after its last one is a difference, unless the rank
        // printed nothing else after its graph lines (the log ends within them).
        let last = graphs.last().map_or(0, |g| g.line);
        let cut = log.streams[stream].last_other_line < last;
        for (i, pg) in ours.iter().enumerate().skip(graphs.len() + skip) {
            let name = graph_name(i, pg.pattern);
            if cut {
                not_checked.push(format!(
                    "{who}: {name}: the log ends within the graph lines (last one at line {last})"
                ));
                continue;
            }
            c.check(
                0,
                format!("{prefix}{name}"),
                "not in the log".to_string(),
                "searched".to_string(),
            );
        }
    }
    c.rank = None;
}

/// One graph line's fields against the planner's graph of the same place.
fn check_graph(c: &mut Collector, name: &str, lg: &LogGraph, pg: &SearchGraph) {
    let l = lg.line;
    c.check(
        l,
        format!("{name} pattern"),
        lg.graph.pattern.number().to_string(),
        pg.pattern.number().to_string(),
    );
    c.check(
        l,
        format!("{name} channels"),
        lg.graph.n_channels.to_string(),
        pg.n_channels.to_string(),
    );
    c.check(
        l,
        format!("{name} bw intra"),
        format!("{:.6}", lg.graph.bw_intra),
        format!("{:.6}", pg.bw_intra),
    );
    c.check(
        l,
        format!("{name} bw inter"),
        format!("{:.6}", lg.graph.bw_inter),
        format!("{:.6}", pg.bw_inter),
    );
    c.check(
        l,
        format!("{name} type intra"),
        lg.graph.type_intra.nccl_name().to_string(),
        pg.type_intra.nccl_name().to_string(),
    );
    c.check(
        l,
        format!("{name} type inter"),
        lg.graph.type_inter.nccl_name().to_string(),
        pg.type_inter.nccl_name().to_string(),
    );
    c.check(
        l,
        format!("{name} sameChannels"),
        (lg.graph.same_channels as u8).to_string(),
        (pg.same_channels as u8).to_string(),
    );
}

/// Each rank's `N coll channels, .. M nvls channels` line.
fn compare_channel_counts(c: &mut Collector, log: &NcclLog, model: &Model) {
    c.kind = DifferenceKind::ChannelCounts;
    let input = &model.input;
    let multi = log.multi_rank();
    for counts in &log.channels {
        let prefix = rank_prefix(log, multi, counts.stream);
        c.rank = rank_of(log, multi, counts.stream);
        c.check(
            counts.line,
            format!("{prefix}coll channels"),
            counts.coll.to_string(),
            input.channels.to_string(),
        );
        c.check(
            counts.line,
            format!("{prefix}nvls channels"),
            counts.nvls.to_string(),
            input.nvls_channels.to_string(),
        );
    }
    c.rank = None;
}

/// Every cell of the init table (rank 0's) and its `Max NThreads` row.
fn compare_table(c: &mut Collector, log: &NcclLog, model: &Model) {
    c.kind = DifferenceKind::InitTable;
    let tuned = &model.tuned;
    if let Some(table) = &log.table {
        for a in Algo::ALL {
            for p in Proto::ALL {
                if let Some(v) = table.max_threads[a as usize][p as usize] {
                    c.check(
                        table.max_threads_line[a as usize],
                        format!("{} {} max threads", a.nccl_name(), p.nccl_name()),
                        v.to_string(),
                        tuned.max_threads[a as usize][p as usize].to_string(),
                    );
                }
            }
        }
        for coll in Coll::ALL {
            for a in Algo::ALL {
                for p in Proto::ALL {
                    let Some(cellv) = &table.cells[coll as usize][a as usize][p as usize] else {
                        continue;
                    };
                    let what = format!("{} {} {}", coll.nccl_name(), a.nccl_name(), p.nccl_name());
                    let (ci, ai, pi) = (coll as usize, a as usize, p as usize);
                    c.check(
                        cellv.line,
                        format!("{what} latency"),
                        cellv.latency.clone(),
                        cell(tuned.latency[ci][ai][pi]),
                    );
                    c.check(
                        cellv.line,
                        format!("{what} bandwidth"),
                        cellv.bandwidth.clone(),
                        cell(tuned.bandwidth[ci][ai][pi]),
                    );
                }
            }
        }
    }
}

/// Each rank's `threadThresholds` line.
fn compare_thread_thresholds(c: &mut Collector, log: &NcclLog, model: &Model) {
    c.kind = DifferenceKind::ThreadThresholds;
    let tuned = &model.tuned;
    let multi = log.multi_rank();
    for thresholds in &log.thread_thresholds {
        let (values, line) = (thresholds.values, thresholds.line);
        let prefix = rank_prefix(log, multi, thresholds.stream);
        c.rank = rank_of(log, multi, thresholds.stream);
        let t = &tuned.thread_thresholds;
        let ours = [
            t[0][0], t[0][1], t[0][2], t[1][0], t[1][1], t[1][2], t[2][2], t[3][2],
        ];
        let names = [
            "Tree LL",
            "Tree LL128",
            "Tree Simple",
            "Ring LL",
            "Ring LL128",
            "Ring Simple",
            "CollNetDirect Simple",
            "CollNetChain Simple",
        ];
        for k in 0..8 {
            c.check(
                line,
                format!("{prefix}thread threshold {}", names[k]),
                values[k].to_string(),
                ours[k].to_string(),
            );
        }
    }
    c.rank = None;
}

/// The plugin's decision lines by (process, collective, bytes), each list in log order, so that finding a
/// call's decision does not scan every decision line for every call. A decision is filed under its nBytes
/// and, for AllGather/ReduceScatter, also under its per-rank bytes (what a 2.24+ per-call line prints).
struct DecisionIndex<'a> {
    by_key:
        std::collections::HashMap<(&'a str, Coll, u64, bool), std::collections::VecDeque<usize>>,
    lines: Vec<usize>,
}

impl<'a> DecisionIndex<'a> {
    fn new(decisions: &'a [crate::nccl_log::PluginDecision]) -> Self {
        let mut by_key: std::collections::HashMap<_, std::collections::VecDeque<usize>> =
            std::collections::HashMap::new();
        for (k, d) in decisions.iter().enumerate() {
            let Some(coll) = d.coll else { continue };
            by_key
                .entry((d.process.as_str(), coll, d.n_bytes, false))
                .or_default()
                .push_back(k);
            let ranks = d.n_ranks as u64;
            if coll.is_ag_rs() && ranks > 0 && d.n_bytes % ranks == 0 {
                by_key
                    .entry((d.process.as_str(), coll, d.n_bytes / ranks, true))
                    .or_default()
                    .push_back(k);
            }
        }
        DecisionIndex {
            by_key,
            lines: decisions.iter().map(|d| d.line).collect(),
        }
    }

    /// The first decision not yet used of this process, collective and bytes printed before `line`.
    fn next_before(
        &mut self,
        process: &'a str,
        coll: Coll,
        bytes: u64,
        per_rank: bool,
        line: usize,
        used: &[bool],
    ) -> Option<usize> {
        let queue = self.by_key.get_mut(&(process, coll, bytes, per_rank))?;
        while queue.front().is_some_and(|&k| used[k]) {
            queue.pop_front();
        }
        queue.front().copied().filter(|&k| self.lines[k] < line)
    }
}

/// Every per-call line against the model, or, where planner's tuner plugin steered the
/// call, against the plugin's decision (NCCL must have run the pair it was given).
fn compare_calls(
    c: &mut Collector,
    log: &NcclLog,
    model: &Model,
    notices: &mut Vec<String>,
) -> Option<PluginSummary> {
    c.kind = DifferenceKind::PerCall;
    let n_ranks = model.input.n_ranks;
    let mut used = vec![false; log.plugin_decisions.len()];
    let mut followed = 0usize;
    let mut unnamed = 0usize;
    let multi = log.multi_rank();
    // The model's answer per (collective, nBytes, per-call format with a channel range): a log repeats the
    // same calls many times, and each answer is a search through the model.
    let mut answers: std::collections::HashMap<(Coll, u64, bool), (String, String)> =
        std::collections::HashMap::new();
    let mut decisions = DecisionIndex::new(&log.plugin_decisions);
    for call in &log.calls {
        c.rank = rank_of(log, multi, call.stream);
        let coll = call.coll.unwrap_or_else(|| {
            unnamed += 1;
            Coll::AllReduce
        });
        let n_bytes = match call.format {
            CallFormat::Named if coll.is_ag_rs() => call.bytes * n_ranks as u64,
            _ => call.bytes,
        };
        let label = format!("{}: {} Bytes", coll.nccl_name(), call.bytes);
        let pair = |a: Algo, p: Proto| format!("{} {}", a.log_name(), p.log_name());
        // The plugin's decision for this call: the first unused one of the same process,
        // collective and nBytes printed before it.
        let per_rank = matches!(call.format, CallFormat::Named) && coll.is_ag_rs();
        let decision = decisions
            .next_before(&call.process, coll, call.bytes, per_rank, call.line, &used)
            .map(|k| (k, &log.plugin_decisions[k]));
        if let Some((k, d)) = decision {
            used[k] = true;
            if let PluginOutcome::Steered {
                algo, proto, rule, ..
            } = d.outcome
            {
                let (nccl, plugin) = (pair(call.algo, call.proto), pair(algo, proto));
                followed += (nccl == plugin) as usize;
                c.check(
                    call.line,
                    format!("{label} (planner-tuner rule {rule}, line {})", d.line),
                    nccl,
                    plugin,
                );
                continue;
            }
        }
        // The pair, then the channel range (2.24+) or the model's time (older formats) as a
        // value of its own, so that JSON carries the time as a number.
        let what = match (call.trace, multi) {
            (true, true) => format!("{}{label} (TRACE)", rank_prefix(log, multi, call.stream)),
            (true, false) => format!("{label} (TRACE)"),
            _ => label,
        };
        let nccl_pair = pair(call.algo, call.proto);
        match call.format {
            CallFormat::Named => {
                let (lo, hi) = call.channels.unwrap_or((0, 0));
                let (planner_pair, planner_range) = answers
                    .entry((coll, n_bytes, true))
                    .or_insert_with(|| {
                        match Call::new(coll, n_bytes, n_ranks, 1).and_then(|k| model.plan(&k)) {
                            Ok(plan) => match plan.tasks.first() {
                                Some(t) => (
                                    pair(t.algo, t.proto),
                                    format!("{}..{}", t.channel_lo, t.channel_hi),
                                ),
                                None => ("no task".to_string(), "-".to_string()),
                            },
                            Err(e) => (format!("error: {e}"), "-".to_string()),
                        }
                    })
                    .clone();
                c.check(call.line, what.clone(), nccl_pair, planner_pair);
                c.check(
                    call.line,
                    format!("{what} channels"),
                    format!("{lo}..{hi}"),
                    planner_range,
                );
            }
            CallFormat::NamedTimed | CallFormat::Timed => {
                // NCCL prints the model's time with `%f` of a float.
                let (planner_pair, planner_time) = answers
                    .entry((coll, n_bytes, false))
                    .or_insert_with(|| {
                        match Call::new(coll, n_bytes, n_ranks, 1)
                            .and_then(|k| model.choose(coll, k.model_bytes, model.num_pipe_ops(1)))
                        {
                            Ok(ch) => {
                                (pair(ch.algo, ch.proto), format!("{:.6}", ch.time_us as f64))
                            }
                            Err(e) => (format!("error: {e}"), "-".to_string()),
                        }
                    })
                    .clone();
                let time = call.time_us.clone().unwrap_or_else(|| "?".to_string());
                c.check(call.line, what.clone(), nccl_pair, planner_pair);
                c.check(call.line, format!("{what} time_us"), time, planner_time);
            }
        }
    }
    c.rank = None;
    if unnamed > 0 {
        notices.push(format!(
            "{unnamed} per-call line(s) name no collective and follow no NCCL_COLL 'Func: opCount' line: compared as AllReduce"
        ));
    }
    if log.plugin_decisions.is_empty() && log.plugin_plan.is_none() {
        return None;
    }
    let steered: Vec<usize> = log
        .plugin_decisions
        .iter()
        .enumerate()
        .filter(|(_, d)| matches!(d.outcome, PluginOutcome::Steered { .. }))
        .map(|(k, _)| k)
        .collect();
    Some(PluginSummary {
        plan: log.plugin_plan.as_ref().map(|(text, _)| text.clone()),
        decisions: log.plugin_decisions.len(),
        steered: steered.len(),
        steered_followed: followed,
        steered_without_call_line: steered.iter().filter(|&&k| !used[k]).count(),
        kept: log.plugin_decisions.len() - steered.len(),
    })
}

/// Rank 0's rings (`Channel cc/nn :`), the ring neighbours (`Ring cc :`) and the trees
/// (`Trees`, `Tree c :`) against the planner's connection.
fn compare_connection(
    c: &mut Collector,
    log: &NcclLog,
    search: Option<&SearchResult>,
    not_checked: &mut Vec<String>,
) {
    let lines = log.rings.len() + log.ring_links.len() + log.trees.len();
    let Some(search) = search else {
        if lines > 0 {
            not_checked.push(format!(
                "{lines} ring/tree value(s): the model was given the log's graphs, not the planner's search (drop --log-graphs to compare them)"
            ));
        }
        return;
    };
    let conn = &search.connection;
    let join = |v: &[i32]| {
        v.iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    c.kind = DifferenceKind::Rings;
    if let Some(first) = log.rings.first() {
        c.check(
            first.line,
            "ring channels",
            first.n_channels.to_string(),
            conn.rings.len().to_string(),
        );
    }
    for r in &log.rings {
        let planner = match conn.rings.get(r.channel) {
            Some(ring) => join(&ring[..r.ranks.len().min(ring.len())]),
            None => format!("no channel {}", r.channel),
        };
        c.check(
            r.line,
            format!("ring {:02} order", r.channel),
            join(&r.ranks),
            planner,
        );
    }
    let multi = log.multi_rank();
    for l in &log.ring_links {
        c.rank = multi
            .then_some(l.rank)
            .and_then(|r| usize::try_from(r).ok());
        let planner = match conn.ring_neighbours(l.channel, l.rank) {
            Some((p, n)) => format!("{p} -> {} -> {n}", l.rank),
            None => format!("no ring {} for rank {}", l.channel, l.rank),
        };
        c.check(
            l.line,
            format!("ring {:02} rank {}", l.channel, l.rank),
            format!("{} -> {} -> {}", l.prev, l.rank, l.next),
            planner,
        );
    }
    let tree_text =
        |up: i32, rank: i32, d: [i32; 3]| format!("{}/{}/{}->{rank}->{up}", d[0], d[1], d[2]);
    c.kind = DifferenceKind::Trees;
    for t in &log.trees {
        c.rank = multi
            .then_some(t.rank)
            .and_then(|r| usize::try_from(r).ok());
        // `Tree c :` lines come from connectTrees, before the runtime channel cut; `Trees [c]` from init.
        let trees = if t.across_nodes {
            &conn.preset_trees
        } else {
            &conn.trees
        };
        let planner = match trees.get(t.channel).and_then(|v| v.get(t.rank as usize)) {
            Some(p) if t.rank >= 0 => tree_text(p.up, t.rank, p.down),
            _ => format!("no tree {} for rank {}", t.channel, t.rank),
        };
        let kind = if t.across_nodes {
            "tree (across nodes)"
        } else {
            "tree"
        };
        c.check(
            t.line,
            format!("{kind} {} rank {}", t.channel, t.rank),
            tree_text(t.up, t.rank, t.down),
            planner,
        );
    }
}

/// What `planner audit` compares: a log, the topology to model it on, and the model's flags.
#[derive(Debug, Clone, Default)]
pub(crate) struct AuditOptions {
    pub(crate) log: String,
    /// `--topo` / `--fixture`; without either, the log's NCCL_TOPO_DUMP_FILE next to the log.
    pub(crate) source: Source,
    /// `--graph FILE`.
    pub(crate) graph_file: Option<String>,
    /// Feed the model the log's own graphs (compares the cost model alone, not the search).
    pub(crate) log_graphs: bool,
    pub(crate) tuning_table: Option<String>,
    pub(crate) nccl_version: Option<String>,
    /// `--nodes N`: the job's node count where the log has no `nNodes` (refused when it contradicts the log).
    pub nodes: Option<usize>,
}

/// Read the log, build the model for its machine, and compare.
pub(crate) fn audit_log(opts: &AuditOptions) -> Result<AuditReport> {
    let log = NcclLog::load(&opts.log)?;
    let (table, notice) = match (&opts.tuning_table, &opts.nccl_version, &log.version) {
        (None, None, Some(version)) => table_for_log(version)?,
        _ => (
            pipeline::choose_table(
                opts.tuning_table.as_deref(),
                opts.nccl_version.as_deref(),
                log.version.as_deref(),
            )?,
            None,
        ),
    };
    // NCCL ran with the log's environment: it shapes the paths and the search too, not the process's own.
    let env = NcclEnv::from_pairs(log.env.iter().map(|(n, v, _)| (n.clone(), v.clone())));
    let mut notices_before = Vec::new();
    // Before the topology is read: the contradiction is the flag's, whatever the topology.
    machine::refuse_contradicting_nodes(&log, opts.nodes)?;
    let mut source = source_for(&opts.source, &log, &opts.log)?;
    source.nccl_env = env.clone();
    source.nccl_env = machine::ib_hca_env(&source, &log, &env, &mut notices_before)?;
    let mut cluster = source.load()?;
    // The dump is one node; the log (or --nodes, or the ranks its lines name) says how many there were.
    if let Some(n) = log.n_nodes {
        crate::limits::check_nodes(
            &format!("{}: nNodes", opts.log),
            n.max(1) as u64,
            cluster.gpus_per_node(),
        )?;
    }
    cluster.n_nodes = machine::nodes_of(
        &log,
        opts.nodes,
        cluster.gpus_per_node(),
        &mut notices_before,
    )?;
    let facts = init_checks::Facts::of(&cluster, &log);
    let nvls_state = crate::model::ModelInput::nvls_request(&cluster, &env, NvlsFlag::Auto);
    let (graphs, channels, search) = if opts.log_graphs {
        let (g, c) = graphs_from_log(&log)?;
        (g, c, None)
    } else {
        let mut opts_search = pipeline::search_options(&cluster, &env, nvls_state.supported())?;
        opts_search.family = table.version;
        let (result, _) = pipeline::channels(&cluster, &opts_search, opts.graph_file.as_deref())
            .map_err(|e| {
                // A bad --graph file stays bad input (exit 2); a search that fails gets the hint.
                if opts.graph_file.is_some() && e.exit_code() == 2 {
                    return e;
                }
                Error::runtime(format!(
                    "{} (use --log-graphs to audit the cost model with the log's own graphs)",
                    e.message()
                ))
            })?;
        (
            result.graphs.clone(),
            result.connection.n_channels,
            Some(result),
        )
    };
    let model =
        pipeline::model_from_graphs(&cluster, &graphs, channels, table, env, NvlsFlag::Auto)?;
    let family = model.table.family.clone();
    // An AllGather/ReduceScatter line prints one rank's share: the whole call must stay within planner's limit.
    if let Some(call) = log
        .calls
        .iter()
        .find(|c| c.n_bytes(model.input.n_ranks) > crate::units::MAX_SIZE)
    {
        return Err(Error::bad_input(format!(
            "{}:{}: per-call line of {} bytes x {} ranks: above planner's size limit of 1 TiB",
            log.source, call.line, call.bytes, model.input.n_ranks
        )));
    }
    let mut report = audit_with(&log, &model, search.as_ref(), &facts)?;
    machine::format_notices(&log, &family, &mut notices_before);
    if notice.is_some() {
        // A family planner has no table for: the newest (or nearest) one's rules stand in.
        report.not_checked.push(format!(
            "NCCL {}'s own rules (per-call choice, channels, threads): the {family} model stands in for them",
            log.version.as_deref().unwrap_or("?")
        ));
    }
    report
        .notices
        .splice(0..0, notice.into_iter().chain(notices_before));
    Ok(report)
}

/// The log's graph lines and its runtime channel count.
fn graphs_from_log(log: &NcclLog) -> Result<(Graphs, usize)> {
    // Rank 0's graphs (the first rank's when no line names rank 0).
    let sets = log.graph_sets();
    let first: Vec<&LogGraph> = sets.into_iter().next().map(|(_, g)| g).unwrap_or_default();
    let graph = |i: usize, id: u32| -> Option<SearchGraph> {
        let mut g = first.get(i)?.graph.clone();
        g.id = id;
        Some(g)
    };
    let missing = |what: &str| {
        Error::bad_input(format!(
            "{}: --log-graphs needs the log's {what} line (NCCL_DEBUG_SUBSYS must include GRAPH and INIT)",
            log.source
        ))
    };
    let ring = graph(0, 0).ok_or_else(|| missing("ring graph 'Pattern ...'"))?;
    let tree = graph(1, 1).ok_or_else(|| missing("tree graph 'Pattern ...'"))?;
    let mut collnet_chain = None;
    let mut collnet_direct = None;
    let mut nvls = None;
    for (i, lg) in first.iter().enumerate().skip(2) {
        match lg.graph.pattern {
            Pattern::CollNetDirect => collnet_direct = graph(i, 4),
            Pattern::Nvls => nvls = graph(i, 3),
            _ => collnet_chain = graph(i, 2),
        }
    }
    let channels = log
        .channels
        .first()
        .map(|c| c.coll)
        .ok_or_else(|| missing("'N coll channels'"))?;
    Ok((
        Graphs {
            ring,
            tree,
            collnet_chain,
            collnet_direct,
            nvls,
        },
        channels,
    ))
}

/// The topology: --topo/--fixture, else the log's NCCL_TOPO_DUMP_FILE next to the log.
fn source_for(source: &Source, log: &NcclLog, log_path: &str) -> Result<Source> {
    if source.is_explicit() {
        return Ok(source.clone());
    }
    let dir = Path::parent(Path::new(log_path)).unwrap_or(Path::new("."));
    let dump = log.env_value("NCCL_TOPO_DUMP_FILE").ok_or_else(|| {
        Error::bad_input(format!(
            "{log_path}: no topology: pass --topo FILE or --fixture NAME (the log names no NCCL_TOPO_DUMP_FILE; audit does not fall back to hgx-h200-8, since a guessed machine gives false differences)"
        ))
    })?;
    let name = Path::new(dump)
        .file_name()
        .map(Path::new)
        .unwrap_or(Path::new(dump));
    let candidates = [dir.join(dump), dir.join(name)];
    let found = candidates.iter().find(|p| p.is_file()).ok_or_else(|| {
        Error::bad_input(format!(
            "{log_path}: no topology: the log's NCCL_TOPO_DUMP_FILE {dump} is not next to it; pass --topo FILE"
        ))
    })?;
    let mut s = source.clone();
    s.topo = Some(found.to_string_lossy().into_owned());
    Ok(s)
}
