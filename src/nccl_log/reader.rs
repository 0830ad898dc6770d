//! The log read line by line: each line's prefix names its stream (one rank's lines), and its message goes to
//! the reader of its kind (`lines`, `table`). Per-stream state sits in one vector indexed through a hash map of
//! the stream keys, so a line costs O(its length) whatever the number of streams and lines before it.

use super::formats::{
    graph_channel_format, p2p_type_format, ring_line_format, FormatSeen, LineFormat,
};
use super::init_lines::{init_line, InitLine, LogInitValue, LogNvlsHead};
use super::lines::{
    call_line, channel_counts, coll_op_line, env_line, graph_line, plugin_line, ring_line,
    ring_link_line, tree_line, trees_line, word_after,
};
use super::table::TableBuilder;
use super::{
    bare_version, CallFormat, LogChannels, LogRing, LogRingLink, LogStream, LogThresholds,
    LogTreeLink, NcclLog,
};
use crate::error::{Error, Result};
use crate::model::{Algo, Coll};
use crate::search::Pattern;
use std::collections::HashMap;

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

/// What the reader keeps per stream besides `LogStream`.
#[derive(Default)]
struct StreamState {
    /// NCCL's `[dev]` of the prefix.
    dev: Option<usize>,
    /// `host:pid` of the prefix ("" when none).
    process: String,
    /// Graph lines of this stream kept so far; `graphs_done` once a second ring graph started another
    /// communicator (only each rank's first set is kept).
    has_graphs: bool,
    graphs_done: bool,
    has_channels: bool,
    has_thresholds: bool,
    /// The last `Func: opCount ...` line: (collective, line).
    last_coll: Option<(Option<Coll>, usize)>,
}

/// The reader's state between lines.
struct Reader<'a> {
    source: &'a str,
    log: NcclLog,
    table: TableBuilder,
    nccl_lines: usize,
    /// Stream key -> index into `log.streams` and `state`.
    stream_index: HashMap<String, usize>,
    state: Vec<StreamState>,
    /// The line of the version the log names.
    version_line: usize,
}

/// One line's stream and prefix facts.
struct Prefix {
    stream: usize,
    /// `host:pid` as `process_key` reads it.
    process: String,
}

pub(super) fn parse(text: &str, source: &str) -> Result<NcclLog> {
    let mut r = Reader {
        source,
        log: NcclLog::empty(source),
        table: TableBuilder::default(),
        nccl_lines: 0,
        stream_index: HashMap::new(),
        state: Vec::new(),
        version_line: 0,
    };
    let mut end = 0;
    for (i, raw) in text.lines().enumerate() {
        end = i + 1;
        r.line(&printable(raw), end)?;
    }
    r.finish(end)
}

/// A control character other than a tab: a terminal escape sequence (ESC, CSI) or a stray carriage return.
fn is_control(c: char) -> bool {
    c.is_control() && c != '\t'
}

/// A log line with its control characters written as `\x1b`: what a log holds is echoed in values, notices and
/// errors, and must not drive the user's terminal. NCCL's own lines have none, so they pass unchanged.
fn printable(raw: &str) -> std::borrow::Cow<'_, str> {
    if !raw.chars().any(is_control) {
        return std::borrow::Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len() + 8);
    for c in raw.chars() {
        if is_control(c) {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The release of a version word (`2.28.9` of `2.28.9+cuda13.0`): two lines of one NCCL may differ in the suffix.
fn release(version: &str) -> &str {
    version.split('+').next().unwrap_or(version).trim()
}

impl Reader<'_> {
    fn bad(&self, line: usize, what: &str) -> Error {
        Error::bad_input(format!("{}:{line}: {what}", self.source))
    }

    fn line(&mut self, raw: &str, line_no: usize) -> Result<()> {
        let (pos, marker, trace) = if let Some(p) = raw.find("NCCL INFO ") {
            (p, "NCCL INFO ", false)
        } else if let Some(p) = raw.find("NCCL TRACE ") {
            (p, "NCCL TRACE ", true)
        } else {
            // Up to 2.21 the version goes to stdout without NCCL's prefix.
            if let Some(v) = bare_version(raw) {
                self.version(v, line_no)?;
            }
            return Ok(());
        };
        self.nccl_lines += 1;
        let prefix = self.prefix(&raw[..pos], line_no);
        let msg = &raw[pos + marker.len()..];
        let trimmed = msg.trim();
        if graph_channel_line(trimmed) {
            if let Some(f) = graph_channel_format(trimmed) {
                self.format(f, line_no);
            }
        } else if !trimmed.starts_with("Pattern ") {
            self.log.streams[prefix.stream].last_other_line = line_no;
        }
        if trace {
            // Only TRACE's per-call line is read (NCCL_COLL, `ENABLE_TRACE` builds).
            if trimmed.contains(" Bytes -> Algo ") && trimmed.contains(" time ") {
                self.call(trimmed, line_no, prefix, true)?;
            }
            return Ok(());
        }
        if let Some(rank) = rank_of_line(trimmed) {
            self.log.streams[prefix.stream].rank.get_or_insert(rank);
        }
        if self.table.open() && !self.table.accepts(msg) {
            self.table.finish(self.source, line_no)?;
        }
        self.info(msg, trimmed, line_no, prefix)
    }

    /// The stream of a line's prefix (a new one for a prefix not seen before).
    fn prefix(&mut self, prefix: &str, line_no: usize) -> Prefix {
        let process = process_key(prefix);
        let (key, key_process, dev) = stream_key(prefix);
        let next = self.log.streams.len();
        let stream = *self.stream_index.entry(key.clone()).or_insert(next);
        if stream == next {
            self.log.streams.push(LogStream {
                key,
                rank: None,
                line: line_no,
                last_other_line: 0,
            });
            self.state.push(StreamState {
                dev,
                process: key_process,
                ..StreamState::default()
            });
        }
        Prefix { stream, process }
    }

    /// An INFO line's message, by its kind.
    fn info(&mut self, msg: &str, trimmed: &str, line_no: usize, prefix: Prefix) -> Result<()> {
        let stream = prefix.stream;
        if let Some(v) = trimmed.strip_prefix("NCCL version ") {
            self.version(v.trim().to_string(), line_no)?;
        } else if let Some((name, value)) = env_line(trimmed) {
            self.log
                .env
                .push((name.to_string(), value.to_string(), line_no));
        } else if trimmed.starts_with("comm ") && trimmed.contains(" nRanks ") {
            self.comm(trimmed, line_no)?;
        } else if trimmed.contains(" nranks ") && trimmed.ends_with("Init START") {
            // 2.18-2.19 have no `comm ... nRanks` line; the init line has the rank count.
            if self.log.n_ranks.is_none() {
                self.log.n_ranks = word_after(trimmed, "nranks").and_then(|w| w.parse().ok());
                self.log.shape_line = line_no;
                if let Some(n) = self.log.n_ranks {
                    self.check_ranks(n, line_no)?;
                }
            }
        } else if trimmed.starts_with("Pattern ") {
            self.pattern(trimmed, line_no, stream)?;
        } else if trimmed.contains(" coll channels,") {
            let (coll, nvls, line) =
                channel_counts(trimmed, line_no).map_err(|e| self.bad(line_no, &e))?;
            self.format(
                if trimmed.contains(" collnet channels") {
                    LineFormat::ChannelsWithCollnet
                } else {
                    LineFormat::ChannelsWithoutCollnet
                },
                line_no,
            );
            if !std::mem::replace(&mut self.state[stream].has_channels, true) {
                self.log.channels.push(LogChannels {
                    coll,
                    nvls,
                    line,
                    stream,
                });
            }
        } else if let Some(rest) = trimmed.strip_prefix("threadThresholds ") {
            self.thresholds(rest, line_no, stream)?;
        } else if msg.starts_with("  Algorithm   |") {
            let source = self.source;
            self.table
                .header(msg, line_no)
                .map_err(|e| Error::bad_input(format!("{source}:{line_no}: {e}")))?;
        } else if self.table.open() && self.table.accepts(msg) {
            let source = self.source;
            self.table
                .row(msg, line_no)
                .map_err(|e| Error::bad_input(format!("{source}:{line_no}: {e}")))?;
        } else if let Some(parsed) = super::tuning231::tuning_line(trimmed) {
            let parsed = parsed.map_err(|e| self.bad(line_no, &e))?;
            let (stream, line) = (prefix.stream, line_no);
            self.format(LineFormat::Tuning231, line);
            self.log.tuning231.push(super::tuning231::TuningLineAt {
                parsed,
                stream,
                line,
            });
        } else if trimmed.contains(" Bytes -> Algo ") {
            self.call(trimmed, line_no, prefix, false)?;
        } else if let Some((coll, _)) = coll_op_line(trimmed) {
            self.state[stream].last_coll = Some((coll, line_no));
        } else if let Some(rest) = trimmed.strip_prefix("planner-tuner: ") {
            if rest.contains(" bytes nRanks ") {
                let mut d = plugin_line(rest).map_err(|e| self.bad(line_no, &e))?;
                d.process = prefix.process;
                d.line = line_no;
                self.log.plugin_decisions.push(d);
            } else if rest.contains(" applies: ") && self.log.plugin_plan.is_none() {
                self.log.plugin_plan = Some((trimmed.to_string(), line_no));
            }
        } else if trimmed.starts_with("Best tuning, algorithm, ") {
            // 2.31's summary of the `Best tuning {` line before it (dev src/enqueue.cc ncclGetAlgoInfo).
            self.format(LineFormat::Tuning231, line_no);
            self.log.tuning_summaries.push(line_no);
        } else if let Some(parsed) = init_line(trimmed) {
            let parsed = parsed.map_err(|e| self.bad(line_no, &e))?;
            self.init_line(parsed, trimmed, line_no, stream);
        } else {
            if trimmed == "Connected all rings" {
                self.format(LineFormat::ConnectedRingsBare, line_no);
            }
            self.connection(trimmed, line_no)?;
        }
        Ok(())
    }

    /// Note that the log has a line format (its first line of that format).
    fn format(&mut self, format: LineFormat, line: usize) {
        if !self.log.formats.iter().any(|f| f.format == format) {
            self.log.formats.push(FormatSeen { format, line });
        }
    }

    /// An init line of `init_lines`: each stream's first of each kind (its first communicator's); NVLS heads until
    /// a head comes again.
    fn init_line(&mut self, parsed: InitLine, trimmed: &str, line: usize, stream: usize) {
        let value = |value: Option<i64>| LogInitValue {
            text: trimmed.to_string(),
            value,
            line,
            stream,
        };
        let first = |list: &[LogInitValue]| !list.iter().any(|v| v.stream == stream);
        let init = &mut self.log.init;
        let format = match parsed {
            InitLine::NvlsHead(head, ranks) => {
                if !init
                    .nvls_heads
                    .iter()
                    .any(|h| h.stream == stream && h.head == head)
                {
                    init.nvls_heads.push(LogNvlsHead {
                        head,
                        ranks,
                        line,
                        stream,
                    });
                }
                None
            }
            InitLine::NvlsNchannels(n) => {
                if first(&init.nvls_nchannels) {
                    init.nvls_nchannels.push(value(Some(n)));
                }
                Some(LineFormat::NvlsNchannelsInSupportLine)
            }
            InitLine::P2pChunksize(n) => {
                if first(&init.p2p_chunksize) {
                    init.p2p_chunksize.push(value(Some(n)));
                }
                None
            }
            InitLine::P2pType => {
                if first(&init.p2p_type) {
                    init.p2p_type.push(value(None));
                }
                p2p_type_format(trimmed)
            }
            InitLine::RingPxn => {
                if first(&init.ring_pxn) {
                    init.ring_pxn.push(value(None));
                }
                Some(LineFormat::ConnectedRingsPxn)
            }
        };
        if let Some(f) = format {
            self.format(f, line);
        }
    }

    /// A version line: the first names the log's NCCL; one of another release means two runs in one file, which
    /// no single model fits (every rank prints the same version, so repeats are fine).
    fn version(&mut self, v: String, line_no: usize) -> Result<()> {
        match &self.log.version {
            None => {
                self.log.version = Some(v);
                self.version_line = line_no;
            }
            Some(first) if release(first) != release(&v) => {
                return Err(self.bad(
                    line_no,
                    &format!(
                        "a second NCCL version, {v}, after {first} (line {}): the log holds two runs; audit each version's lines on their own",
                        self.version_line
                    ),
                ));
            }
            // The INFO line (with its +cuda suffix) is fuller than a bare one printed before it.
            Some(_) => self.log.version = Some(v),
        }
        Ok(())
    }

    /// `comm 0x... rank R nRanks N nNodes M localRanks L ...`.
    fn comm(&mut self, trimmed: &str, line_no: usize) -> Result<()> {
        let field = |key: &str| -> Result<Option<usize>> {
            match word_after(trimmed, key) {
                None => Ok(None),
                Some(w) => w
                    .parse::<usize>()
                    .map(Some)
                    .map_err(|_| self.bad(line_no, &format!("'{key} {w}' is not a count"))),
            }
        };
        let (n_ranks, n_nodes, local_ranks) =
            (field("nRanks")?, field("nNodes")?, field("localRanks")?);
        if let Some(n) = n_ranks {
            self.check_ranks(n, line_no)?;
        }
        // Every rank prints one; the first stands for the log (a 2.18-2.19 init line
        // may have given the rank count before).
        let log = &mut self.log;
        if log.shape_line == 0 || log.n_nodes.is_none() {
            (log.n_ranks, log.n_nodes, log.local_ranks) = (n_ranks, n_nodes, local_ranks);
            log.shape_line = line_no;
        }
        Ok(())
    }

    /// `Pattern ...`: kept for the stream's first communicator only.
    fn pattern(&mut self, trimmed: &str, line_no: usize, stream: usize) -> Result<()> {
        let mut g = graph_line(trimmed).map_err(|e| self.bad(line_no, &e))?;
        g.line = line_no;
        g.stream = stream;
        // Every rank prints its graphs; the ring graph opens a communicator's set, and
        // only each rank's first set is kept.
        let state = &mut self.state[stream];
        if state.has_graphs && g.graph.pattern == Pattern::Ring {
            state.graphs_done = true;
        }
        if !state.graphs_done {
            state.has_graphs = true;
            self.log.graphs.push(g);
        }
        Ok(())
    }

    /// `threadThresholds a/b/c | d/e/f | g | h`: each stream's first.
    fn thresholds(&mut self, rest: &str, line_no: usize, stream: usize) -> Result<()> {
        let nums: Vec<i64> = rest
            .split(['/', '|'])
            .map(|w| w.trim())
            .filter(|w| !w.is_empty())
            .map(|w| w.parse::<i64>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| self.bad(line_no, &format!("unreadable threadThresholds '{rest}'")))?;
        let arr: [i64; 8] = nums.try_into().map_err(|_| {
            self.bad(
                line_no,
                &format!("threadThresholds needs 8 values: '{rest}'"),
            )
        })?;
        if !std::mem::replace(&mut self.state[stream].has_thresholds, true) {
            self.log.thread_thresholds.push(LogThresholds {
                values: arr,
                line: line_no,
                stream,
            });
        }
        Ok(())
    }

    /// A communicator's rank count: 1 to planner's rank limit, else bad input (not a model difference).
    fn check_ranks(&self, n: usize, line_no: usize) -> Result<()> {
        if n == 0 || n > crate::limits::MAX_RANKS {
            return Err(self.bad(
                line_no,
                &format!(
                    "nRanks {n}: must be between 1 and {} (planner's rank limit)",
                    crate::limits::MAX_RANKS
                ),
            ));
        }
        Ok(())
    }

    /// A per-call line; a `Timed` one takes its collective from the last `Func: opCount` line of its stream.
    fn call(&mut self, trimmed: &str, line_no: usize, prefix: Prefix, trace: bool) -> Result<()> {
        let mut call = call_line(trimmed, line_no).map_err(|e| self.bad(line_no, &e))?;
        if call.bytes > crate::units::MAX_SIZE {
            return Err(self.bad(
                line_no,
                &format!(
                    "per-call line of {} bytes: above planner's size limit of 1 TiB",
                    call.bytes
                ),
            ));
        }
        call.trace = trace;
        if !trace {
            let format = match call.format {
                CallFormat::Named => LineFormat::CallNamed,
                CallFormat::NamedTimed => LineFormat::CallNamedTimed,
                CallFormat::Timed => LineFormat::CallTimed,
            };
            self.format(format, line_no);
        }
        call.process = prefix.process;
        call.stream = prefix.stream;
        if call.coll.is_none() {
            if let Some((coll, line)) = self.state[prefix.stream].last_coll {
                call.coll = coll;
                call.coll_line = Some(line);
            }
        }
        self.log.calls.push(call);
        Ok(())
    }

    /// Rank 0's ring lines, the ring neighbours and the trees.
    fn connection(&mut self, trimmed: &str, line_no: usize) -> Result<()> {
        let source = self.source;
        let bad = move |e: String| Error::bad_input(format!("{source}:{line_no}: {e}"));
        if let Some(ring) = ring_line(trimmed).map_err(bad)? {
            let ranks_text = trimmed.split_once(" :").map_or("", |(_, r)| r);
            if let Some(f) = ring_line_format(ranks_text) {
                self.format(f, line_no);
            }
            self.log.rings.push(LogRing {
                line: line_no,
                ..ring
            });
        } else if let Some(link) = ring_link_line(trimmed).map_err(bad)? {
            self.log.ring_links.push(LogRingLink {
                line: line_no,
                ..link
            });
        } else if trimmed.starts_with("Trees") {
            let trees = trees_line(trimmed, line_no).map_err(bad)?;
            self.log.trees.extend(trees);
        } else if let Some(link) = tree_line(trimmed).map_err(bad)? {
            self.log.trees.push(LogTreeLink {
                line: line_no,
                ..link
            });
        }
        Ok(())
    }

    /// After the last line: the table closed and checked, the log checked for anything to compare, the
    /// streams' ranks resolved.
    fn finish(mut self, end: usize) -> Result<NcclLog> {
        let source = self.source;
        if self.table.open() {
            self.table.finish(source, end)?;
        }
        if let Some(mut t) = self.table.table.take() {
            let missing: Vec<Algo> = Algo::ALL
                .into_iter()
                .filter(|a| !self.table.seen.contains(a))
                .collect();
            // Up to 2.22 the table has no PAT block (6 algorithms in two blocks).
            let six_block_layout =
                missing == [Algo::Pat] && self.log.family().is_none_or(|f| f < (2, 23));
            if let Some(first) = missing.first().filter(|_| !six_block_layout) {
                return Err(Error::bad_input(format!(
                    "{source}:{end}: the tuning table that starts at line {} is cut short: no {} block",
                    t.line,
                    first.nccl_name()
                )));
            }
            t.algorithms = Algo::ALL
                .into_iter()
                .filter(|a| self.table.seen.contains(a))
                .collect();
            let layout = if t.algorithms.contains(&Algo::Pat) {
                LineFormat::TableWithPat
            } else {
                LineFormat::TableSixAlgorithms
            };
            self.format(layout, t.line);
            self.log.table = Some(t);
        }
        if self.nccl_lines == 0 {
            return Err(Error::bad_input(format!(
                "{source}: no 'NCCL INFO' line: not an NCCL_DEBUG=INFO log"
            )));
        }
        let log = &self.log;
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
        self.resolve_ranks();
        Ok(self.log)
    }

    /// Ranks of the streams that no `comm`/`Init` line named: in a log of one process
    /// (nccl-tests `-g N`, one thread per GPU) or with a rank-only prefix (`[3] NCCL INFO`),
    /// NCCL's `[dev]`; a log of one stream is rank 0's.
    fn resolve_ranks(&mut self) {
        let one_process = self
            .state
            .iter()
            .all(|s| s.process == self.state[0].process);
        let single = self.log.streams.len() == 1;
        for (s, state) in self.log.streams.iter_mut().zip(&self.state) {
            if s.rank.is_none() {
                s.rank = if single && state.dev.is_none() {
                    Some(0)
                } else if one_process {
                    state.dev
                } else {
                    None
                };
            }
        }
    }
}
