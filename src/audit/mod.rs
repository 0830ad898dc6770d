//! Compare what NCCL logged with what the planner's model says for the same
//! machine: graphs, channel counts, every cell of the init table, thread
//! thresholds and every per-call choice.

pub mod cells;
pub mod log;

pub use cells::{table_from_log, LoggedCells};

use crate::error::{Error, Result};
use crate::model::input::NvlsFlag;
use crate::model::select::Call;
use crate::model::{table, Algo, Coll, Model, NcclEnv, Proto, TuningTable};
use crate::pipeline::{self, Source};
use crate::search::{Graphs, Pattern, SearchGraph, SearchResult};
use log::{CallFormat, NcclLog, PluginOutcome};
use serde::Serialize;
use std::path::Path;

/// One disagreement between the log and the planner.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// Log line it came from.
    pub line: usize,
    /// What is compared (`AllReduce Ring LL latency`).
    pub what: String,
    pub nccl: String,
    pub planner: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditReport {
    pub log: String,
    pub nccl_version: Option<String>,
    pub table_family: String,
    /// How many values were compared.
    pub compared: usize,
    pub differences: Vec<Difference>,
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
    pub steered_without_call_line: usize,
    /// Decisions that left NCCL's choice in place (`kept (...)`).
    pub kept: usize,
}

/// `%.1f` as NCCL prints the table.
pub fn cell(v: f32) -> String {
    format!("{:.1}", v as f64)
}

struct Collector {
    compared: usize,
    differences: Vec<Difference>,
}

impl Collector {
    fn check(&mut self, line: usize, what: impl Into<String>, nccl: String, planner: String) {
        self.compared += 1;
        if nccl != planner {
            self.differences.push(Difference {
                line,
                what: what.into(),
                nccl,
                planner,
            });
        }
    }
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
    let mut c = Collector {
        compared: 0,
        differences: Vec::new(),
    };
    let mut notices = Vec::new();
    let mut not_checked = Vec::new();
    let input = &model.input;
    if let Some(n) = log.n_ranks {
        c.check(0, "ranks", n.to_string(), input.n_ranks.to_string());
    }
    if let Some(n) = log.n_nodes {
        c.check(0, "nodes", n.to_string(), input.n_nodes.to_string());
    }
    if search.is_some() && log.graphs.is_empty() {
        not_checked.push(
            "graphs: the log has no 'Pattern ...' lines (NCCL_DEBUG_SUBSYS without GRAPH)".into(),
        );
    }
    if let Some(search) = search.filter(|_| !log.graphs.is_empty()) {
        let ours = planner_graphs(&search.graphs);
        for (i, lg) in log.graphs.iter().enumerate() {
            let name = graph_name(i, lg.graph.pattern);
            let Some(pg) = ours.get(i) else {
                c.check(
                    lg.line,
                    name.to_string(),
                    "searched".to_string(),
                    "not searched".to_string(),
                );
                continue;
            };
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
        for (i, pg) in ours.iter().enumerate().skip(log.graphs.len()) {
            c.check(
                0,
                graph_name(i, pg.pattern).to_string(),
                "not in the log".to_string(),
                "searched".to_string(),
            );
        }
    }
    if let Some((coll, nvls, line)) = log.channels {
        c.check(
            line,
            "coll channels",
            coll.to_string(),
            input.channels.to_string(),
        );
        c.check(
            line,
            "nvls channels",
            nvls.to_string(),
            input.nvls_channels.to_string(),
        );
    }
    let tuned = &model.tuned;
    if let Some(table) = &log.table {
        for a in Algo::ALL {
            for p in Proto::ALL {
                if let Some(v) = table.max_threads[a as usize][p as usize] {
                    c.check(
                        table.line,
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
                        table.line,
                        format!("{what} latency"),
                        cellv.latency.clone(),
                        cell(tuned.latency[ci][ai][pi]),
                    );
                    c.check(
                        table.line,
                        format!("{what} bandwidth"),
                        cellv.bandwidth.clone(),
                        cell(tuned.bandwidth[ci][ai][pi]),
                    );
                }
            }
        }
    }
    if let Some((values, line)) = log.thread_thresholds {
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
                format!("thread threshold {}", names[k]),
                values[k].to_string(),
                ours[k].to_string(),
            );
        }
    }
    let plugin = compare_calls(&mut c, log, model, &mut notices);
    compare_connection(&mut c, log, search, &mut not_checked);
    Ok(AuditReport {
        log: log.source.clone(),
        nccl_version: log.version.clone(),
        table_family: model.table.family.clone(),
        compared: c.compared,
        differences: c.differences,
        notices,
        not_checked,
        plugin,
    })
}

/// Every per-call line against the model, or, where planner's tuner plugin steered the
/// call, against the plugin's decision (NCCL must have run the pair it was given).
fn compare_calls(
    c: &mut Collector,
    log: &NcclLog,
    model: &Model,
    notices: &mut Vec<String>,
) -> Option<PluginSummary> {
    let n_ranks = model.input.n_ranks;
    let mut used = vec![false; log.plugin_decisions.len()];
    let mut followed = 0usize;
    let mut unnamed = 0usize;
    for call in &log.calls {
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
        let decision = log.plugin_decisions.iter().enumerate().find(|(k, d)| {
            !used[*k]
                && d.line < call.line
                && d.process == call.process
                && d.coll == Some(coll)
                && d.n_bytes
                    == match call.format {
                        CallFormat::Named if coll.is_ag_rs() => call.bytes * d.n_ranks as u64,
                        _ => call.bytes,
                    }
        });
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
        let (nccl, planner) = match call.format {
            CallFormat::Named => {
                let (lo, hi) = call.channels.unwrap_or((0, 0));
                let planner =
                    match Call::new(coll, n_bytes, n_ranks, 1).and_then(|k| model.plan(&k)) {
                        Ok(plan) => match plan.tasks.first() {
                            Some(t) => format!(
                                "{} {{{}..{}}}",
                                pair(t.algo, t.proto),
                                t.channel_lo,
                                t.channel_hi
                            ),
                            None => "no task".to_string(),
                        },
                        Err(e) => format!("error: {e}"),
                    };
                (
                    format!("{} {{{lo}..{hi}}}", pair(call.algo, call.proto)),
                    planner,
                )
            }
            CallFormat::NamedTimed | CallFormat::Timed => {
                // NCCL prints the model's time with `%f` of a float.
                let planner = match Call::new(coll, n_bytes, n_ranks, 1)
                    .and_then(|k| model.choose(coll, k.model_bytes, model.num_pipe_ops(1)))
                {
                    Ok(ch) => format!("{} time {:.6}", pair(ch.algo, ch.proto), ch.time_us as f64),
                    Err(e) => format!("error: {e}"),
                };
                let time = call.time_us.as_deref().unwrap_or("?");
                (
                    format!("{} time {time}", pair(call.algo, call.proto)),
                    planner,
                )
            }
        };
        let what = if call.trace {
            format!("{label} (TRACE)")
        } else {
            label
        };
        c.check(call.line, what, nccl, planner);
    }
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
    for l in &log.ring_links {
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
    for t in &log.trees {
        let planner = match conn
            .trees
            .get(t.channel)
            .and_then(|v| v.get(t.rank as usize))
        {
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
pub struct AuditOptions {
    pub log: String,
    /// `--topo` / `--fixture`; without either, the log's NCCL_TOPO_DUMP_FILE next to the log.
    pub source: Source,
    /// `--graph FILE`.
    pub graph_file: Option<String>,
    /// Feed the model the log's own graphs (compares the cost model alone, not the search).
    pub log_graphs: bool,
    pub tuning_table: Option<String>,
    pub nccl_version: Option<String>,
}

/// Read the log, build the model for its machine, and compare.
pub fn audit_log(opts: &AuditOptions) -> Result<AuditReport> {
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
    let mut cluster = source_for(&opts.source, &log, &opts.log)?.load()?;
    // The dump is one node; the log says how many there were.
    if let Some(n) = log.n_nodes {
        crate::limits::check_nodes(
            &format!("{}: nNodes", opts.log),
            n.max(1) as u64,
            cluster.gpus_per_node(),
        )?;
        cluster.n_nodes = n.max(1);
    }
    let env = NcclEnv::from_pairs(log.env.iter().map(|(n, v, _)| (n.clone(), v.clone())));
    let nvls_state = crate::model::ModelInput::nvls_request(&cluster, &env, NvlsFlag::Auto);
    let (graphs, channels, search) = if opts.log_graphs {
        let (g, c) = graphs_from_log(&log)?;
        (g, c, None)
    } else {
        let opts_search = pipeline::search_options(&cluster, &env, nvls_state.supported())?;
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
    let mut report = audit(&log, &model, search.as_ref())?;
    if notice.is_some() {
        // A family planner has no table for: the newest (or nearest) one's rules stand in.
        report.not_checked.push(format!(
            "NCCL {}'s own rules (per-call choice, channels, threads): the {family} model stands in for them",
            log.version.as_deref().unwrap_or("?")
        ));
    }
    report.notices.splice(0..0, notice);
    Ok(report)
}

/// The built-in table for the NCCL version a log names: its family, else the newest
/// family (for a newer NCCL) or the nearest older one, with a one-line notice.
pub fn table_for_log(version: &str) -> Result<(TuningTable, Option<String>)> {
    match table::for_version(version) {
        Ok(choice) => {
            let notice = choice.notice.map(|_| {
                format!(
                    "the log's NCCL {version} is newer than the newest modelled family {}; compared with the {} model",
                    choice.family, choice.family
                )
            });
            Ok((table::builtin(choice.family)?, notice))
        }
        Err(_) => {
            let (family, why) = match log::version_family(version) {
                Some((major, minor)) => (
                    table::nearest_family(major, minor).0,
                    format!("no model for NCCL {major}.{minor}"),
                ),
                None => (
                    table::newest_family(),
                    format!("cannot read the version '{version}'"),
                ),
            };
            Ok((
                table::builtin(family)?,
                Some(format!(
                    "the log's NCCL {version}: {why}; compared with the {family} model"
                )),
            ))
        }
    }
}

/// The log's graph lines and its runtime channel count.
fn graphs_from_log(log: &NcclLog) -> Result<(Graphs, usize)> {
    let graph = |i: usize, id: u32| -> Option<SearchGraph> {
        let mut g = log.graphs.get(i)?.graph.clone();
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
    for i in 2..log.graphs.len() {
        match log.graphs[i].graph.pattern {
            Pattern::CollNetDirect => collnet_direct = graph(i, 4),
            Pattern::Nvls => nvls = graph(i, 3),
            _ => collnet_chain = graph(i, 2),
        }
    }
    let (channels, _, _) = log.channels.ok_or_else(|| missing("'N coll channels'"))?;
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
            "{log_path}: no topology: pass --topo FILE (the log names no NCCL_TOPO_DUMP_FILE)"
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
