//! Compare what NCCL logged with what the planner's model says for the same
//! machine: graphs, channel counts, every cell of the init table, thread
//! thresholds and every per-call choice.

pub mod log;

use crate::error::{Error, Result};
use crate::model::input::NvlsFlag;
use crate::model::select::Call;
use crate::model::{Algo, Coll, Model, NcclEnv, Proto};
use crate::pipeline::{self, Source};
use crate::search::{Graphs, Pattern, SearchGraph};
use log::NcclLog;
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

/// Compare a log with the model. `search` is the planner's own search
/// (None when the model was fed the log's graphs, so there is nothing to compare).
pub fn audit(log: &NcclLog, model: &Model, search: Option<&Graphs>) -> Result<AuditReport> {
    let mut c = Collector {
        compared: 0,
        differences: Vec::new(),
    };
    let input = &model.input;
    if let Some(n) = log.n_ranks {
        c.check(0, "ranks", n.to_string(), input.n_ranks.to_string());
    }
    if let Some(n) = log.n_nodes {
        c.check(0, "nodes", n.to_string(), input.n_nodes.to_string());
    }
    if let Some(search) = search {
        let ours = planner_graphs(search);
        for (i, lg) in log.graphs.iter().enumerate() {
            let name = graph_name(i, lg.pattern);
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
                lg.pattern.number().to_string(),
                pg.pattern.number().to_string(),
            );
            c.check(
                l,
                format!("{name} channels"),
                lg.n_channels.to_string(),
                pg.n_channels.to_string(),
            );
            c.check(
                l,
                format!("{name} bw intra"),
                format!("{:.6}", lg.bw_intra),
                format!("{:.6}", pg.bw_intra),
            );
            c.check(
                l,
                format!("{name} bw inter"),
                format!("{:.6}", lg.bw_inter),
                format!("{:.6}", pg.bw_inter),
            );
            c.check(
                l,
                format!("{name} type intra"),
                lg.type_intra.nccl_name().to_string(),
                pg.type_intra.nccl_name().to_string(),
            );
            c.check(
                l,
                format!("{name} type inter"),
                lg.type_inter.nccl_name().to_string(),
                pg.type_inter.nccl_name().to_string(),
            );
            c.check(
                l,
                format!("{name} sameChannels"),
                (lg.same_channels as u8).to_string(),
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
    for call in &log.calls {
        let size = if call.coll.is_ag_rs() {
            call.bytes * input.n_ranks as u64
        } else {
            call.bytes
        };
        let what = format!("{}: {} Bytes", call.coll.nccl_name(), call.bytes);
        let nccl = format!(
            "{} {} {{{}..{}}}",
            call.algo.log_name(),
            call.proto.log_name(),
            call.channel_lo,
            call.channel_hi
        );
        let planner =
            match Call::new(call.coll, size, input.n_ranks, 1).and_then(|k| model.plan(&k)) {
                Ok(plan) => match plan.tasks.first() {
                    Some(t) => format!(
                        "{} {} {{{}..{}}}",
                        t.algo.log_name(),
                        t.proto.log_name(),
                        t.channel_lo,
                        t.channel_hi
                    ),
                    None => "no task".to_string(),
                },
                Err(e) => format!("error: {e}"),
            };
        c.check(call.line, what, nccl, planner);
    }
    Ok(AuditReport {
        log: log.source.clone(),
        nccl_version: log.version.clone(),
        table_family: model.table.family.clone(),
        compared: c.compared,
        differences: c.differences,
    })
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
    let table = pipeline::choose_table(
        opts.tuning_table.as_deref(),
        opts.nccl_version.as_deref(),
        log.version.as_deref(),
    )?;
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
    let (graphs, channels, ours) = if opts.log_graphs {
        let (g, c) = graphs_from_log(&log)?;
        (g, c, false)
    } else {
        let r = pipeline::graphs_for(
            &cluster,
            &env,
            nvls_state.supported(),
            opts.graph_file.as_deref(),
        )
        .map_err(|e| {
            Error::runtime(format!(
                "{} (use --log-graphs to audit the cost model with the log's own graphs)",
                e.message()
            ))
        })?;
        (r.0, r.1, true)
    };
    let model =
        pipeline::model_from_graphs(&cluster, &graphs, channels, table, env, NvlsFlag::Auto)?;
    audit(&log, &model, ours.then_some(&graphs))
}

/// The log's graph lines and its runtime channel count.
fn graphs_from_log(log: &NcclLog) -> Result<(Graphs, usize)> {
    let graph = |i: usize, id: u32| -> Option<SearchGraph> {
        let g = log.graphs.get(i)?;
        Some(SearchGraph {
            id,
            pattern: g.pattern,
            cross_nic: g.cross_nic,
            n_channels: g.n_channels,
            bw_intra: g.bw_intra,
            bw_inter: g.bw_inter,
            type_intra: g.type_intra,
            type_inter: g.type_inter,
            latency_inter: 0.0,
            same_channels: g.same_channels,
            channels: Vec::new(),
        })
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
        match log.graphs[i].pattern {
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
