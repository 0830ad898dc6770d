//! Fitting the constants marked `fit` to measurements, and leave-one-machine-out (LOMO) cross-validation.
//!
//! The data: rows of `points.csv` (tests/data/expect-train, with every source URL in its README and cases), each a
//! measured nccl-tests time or busbw of one machine, collective and size, with the planner flags that describe
//! the machine. Each row becomes a prepared pair (the plan's loads and steps: `super::prepare`), so a fit
//! re-evaluates only the constants. The fit minimises the squared log error (Huber beyond 30 %) plus a pull of
//! each constant towards its prior (the spec or measured value its file names), by coordinate descent in log
//! space from the priors. LOMO: for each machine, fit without it (constants no other machine touches go back to
//! their priors), then predict it. That error, per class and size range, is the figure to trust and the band.

use super::params::Params;
use super::{
    evaluate, prepare, Chunking, ExpectOptions, Expected, Launch, NetKind, Prepared, Resolved,
};
use crate::error::{Error, Result};
use crate::model::input::NvlsFlag;
use crate::model::select::Call;
use crate::model::{table, Algo, Coll, Proto};
use crate::nccl_env::NcclEnv;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The size ranges of the targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Range {
    /// <= 64 KiB.
    Small,
    /// Above 64 KiB, below the series' largest size.
    Mid,
    /// The series' largest size, when >= 256 MiB.
    Large,
}

impl Range {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Range::Small => "<= 64 KiB",
            Range::Mid => "64 KiB - largest",
            Range::Large => "largest (>= 256 MiB)",
        }
    }
}

/// One measured point, prepared.
#[derive(Debug, Clone)]
pub struct FitPoint {
    pub(crate) case: String,
    /// The machine left out together (a cloud fixture is one machine whatever the case; a generic one is its case).
    pub(crate) machine: String,
    pub(crate) band_key: String,
    pub(crate) size: u64,
    pub(crate) range: Range,
    pub(crate) measured_us: f64,
    pub(crate) nccl_estimate_us: f64,
    pub(crate) algo: Algo,
    pub(crate) proto: Proto,
    combo: usize,
    plan: usize,
    prepared: Prepared,
}

/// Why rows were not used, with counts.
#[derive(Debug, Clone, Default)]
pub struct Skipped {
    pub reasons: BTreeMap<String, usize>,
}

impl Skipped {
    fn add(&mut self, why: &str) {
        *self.reasons.entry(why.to_string()).or_default() += 1;
    }
}

/// The prepared data: points, the plans they refer to, the (GPU class, network, launch) combinations.
#[derive(Debug, Clone)]
pub struct Data {
    pub points: Vec<FitPoint>,
    pub plans: Vec<super::plan::Plan>,
    /// (GPU class, network, launch, GPUs per process).
    combos: Vec<(String, NetKind, Launch, usize)>,
    pub skipped: Skipped,
}

/// Error statistics of one group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    pub(crate) n: usize,
    pub median: f64,
    pub worst: f64,
    pub(crate) p80: f64,
}

impl Stats {
    fn of(errors: &mut [f64]) -> Option<Stats> {
        if errors.is_empty() {
            return None;
        }
        errors.sort_by(|a, b| a.total_cmp(b));
        let at = |q: f64| errors[((errors.len() - 1) as f64 * q).round() as usize];
        Some(Stats {
            n: errors.len(),
            median: at(0.5),
            worst: errors[errors.len() - 1],
            p80: at(0.8),
        })
    }
}

/// The figures of a fit.
#[derive(Debug, Clone)]
pub struct FitReport {
    pub(crate) points: usize,
    pub machines: usize,
    pub(crate) skipped: Skipped,
    /// (band key or "all", range) -> stats: training set, LOMO, NCCL's own estimate.
    pub(crate) training: BTreeMap<(String, Range), Stats>,
    pub lomo: BTreeMap<(String, Range), Stats>,
    pub nccl: BTreeMap<(String, Range), Stats>,
    /// Per machine: LOMO median |error| and worst point (case, size, error).
    pub(crate) per_machine: Vec<(String, Stats, String)>,
    pub(crate) params: Params,
    /// Every point: its fitted and left-out expected time beside the measured one (the CSV of `--points-out`).
    pub(crate) rows: Vec<PointRow>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PointRow {
    pub(crate) case: String,
    pub(crate) machine: String,
    pub(crate) size: u64,
    pub(crate) pair: String,
    pub(crate) range: Range,
    pub(crate) measured_us: f64,
    pub(crate) expected_fit_us: f64,
    pub(crate) expected_lomo_us: f64,
    pub(crate) nccl_estimate_us: f64,
    /// What bounds the fitted expectation (`Limit::describe`), and the channels the pair runs on.
    pub(crate) fit_limit: String,
    pub(crate) channels: usize,
}

impl FitReport {
    /// The points as CSV.
    pub(crate) fn points_csv(&self) -> String {
        let mut s = String::from(
            "case,machine,size_bytes,pair,range,measured_us,expected_fit_us,expected_lomo_us,nccl_estimate_us,lomo_error,channels,fit_limit\n",
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.4},{},\"{}\"",
                r.case,
                r.machine,
                r.size,
                r.pair,
                r.range.name(),
                r.measured_us,
                r.expected_fit_us,
                r.expected_lomo_us,
                r.nccl_estimate_us,
                r.expected_lomo_us / r.measured_us - 1.0,
                r.channels,
                r.fit_limit
            );
        }
        s
    }
}

/// A small CSV reader (quoted fields with commas; `""` inside quotes).
pub(crate) fn csv_rows(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let mut fields = Vec::new();
        let mut cur = String::new();
        let mut quoted = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '"' if quoted && chars.peek() == Some(&'"') => {
                    cur.push('"');
                    chars.next();
                }
                '"' => quoted = !quoted,
                ',' if !quoted => fields.push(std::mem::take(&mut cur)),
                c => cur.push(c),
            }
        }
        fields.push(cur);
        rows.push(fields);
    }
    rows
}

/// The machine a row's flags describe.
#[derive(Debug, Clone, PartialEq)]
struct Flags {
    fixture: String,
    nodes: usize,
    version: Option<String>,
    coll: Option<String>,
    algo: Option<String>,
    proto: Option<String>,
    nvls: NvlsFlag,
    mnnvl: Option<crate::topo::mnnvl::MnnvlEnable>,
    env: Vec<(String, String)>,
}

fn env_tokens(text: &str) -> Vec<(String, String)> {
    text.split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter_map(|t| t.split_once('='))
        .filter(|(k, v)| k.starts_with("NCCL_") && !v.is_empty())
        .filter(|(k, _)| !matches!(*k, "NCCL_TOPO_FILE" | "NCCL_GRAPH_FILE"))
        .map(|(k, v)| (k.to_string(), v.trim_end_matches(['.', ')']).to_string()))
        .collect()
}

/// `[NCCL_X=Y ...] explain --fixture F [--nodes N] ... (comment)`; None when the row names no fixture.
fn parse_flags(args: &str) -> Option<Flags> {
    let args = args.split(" (").next().unwrap_or("");
    let words: Vec<&str> = args.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "explain")?;
    let mut f = Flags {
        fixture: String::new(),
        nodes: 1,
        version: None,
        coll: None,
        algo: None,
        proto: None,
        nvls: NvlsFlag::Auto,
        mnnvl: None,
        env: env_tokens(&words[..at].join(" ")),
    };
    let mut i = at + 1;
    while i < words.len() {
        let value = words.get(i + 1).map(|s| s.to_string());
        match words[i] {
            "--fixture" => f.fixture = value.clone()?,
            "--nodes" => f.nodes = value.as_deref()?.parse().ok()?,
            "--nccl-version" => f.version = value.clone(),
            "--coll" => f.coll = value.clone(),
            "--algo" => f.algo = value.clone(),
            "--proto" => f.proto = value.clone(),
            "--nvls" => {
                f.nvls = match value.as_deref() {
                    Some("off") => NvlsFlag::Off,
                    Some("on") => NvlsFlag::On,
                    _ => NvlsFlag::Auto,
                }
            }
            "--mnnvl" => {
                f.mnnvl = match value.as_deref() {
                    Some("off") => Some(crate::topo::mnnvl::MnnvlEnable::Off),
                    Some("on") => Some(crate::topo::mnnvl::MnnvlEnable::On),
                    _ => None,
                }
            }
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    (!f.fixture.is_empty()).then_some(f)
}

fn net_kind_of(network: &str, env: &[(String, String)]) -> Option<NetKind> {
    if env.iter().any(|(k, v)| k == "NCCL_IB_DISABLE" && v == "1") {
        return Some(NetKind::Socket);
    }
    let n = network.to_ascii_lowercase();
    if n.starts_with("none") {
        None
    } else if n.contains("efa") {
        Some(NetKind::Efa)
    } else if n.contains("tcpx") {
        Some(NetKind::Tcpx)
    } else if n.contains("roce") {
        Some(NetKind::Roce)
    } else if n.contains("socket") || n.contains("tcp") {
        Some(NetKind::Socket)
    } else if n.contains("ib") {
        Some(NetKind::Ib)
    } else {
        None
    }
}

/// The machines of `points.csv` rows whose `planner_topology_args` say no fixture described them ("none: ..."), with
/// the fixture added for them since (each fixture's comment names the source's facts and what is assumed): case,
/// nodes -> the flags. E05 is placed but held out of the fit ([`HELD_OUT`]). E17 (several NVL72 NVLink domains joined
/// by IB), E18 (IB SHARP, CollNetChain) and E19 (NVL8 partitions) stay unplaced: planner does not split MNNVL domains
/// below a rack nor model CollNet.
pub const PLACED: &[(&str, &str, &str)] = &[
    (
        "E05",
        "2",
        "explain --fixture hgx-b200-8 --nodes 2 --nccl-version 2.26 (GCP A4: 8x B200, 8 RoCE NICs; the network column says RoCE)",
    ),
    (
        "E06",
        "2",
        "explain --fixture gcp-h200-1gpu --nodes 2 --nccl-version 2.25",
    ),
    ("E07", "1", "explain --fixture b200-sxm-2 --nccl-version 2.26"),
    (
        "E10",
        "2",
        "NCCL_IB_DISABLE=1 explain --fixture pcie-l40s-1-400g --nodes 2 --algo ring --nccl-version 2.27",
    ),
    (
        "E20",
        "2",
        "explain --fixture hgx-h20-8 --nodes 2 --algo nvlstree --nccl-version 2.21",
    ),
    (
        "E23",
        "2",
        "explain --fixture dgx-spark --nodes 2 --nccl-version 2.31",
    ),
    (
        "E24",
        "2",
        "explain --fixture aws-p6-b300 --nodes 2 --nccl-version 2.31",
    ),
    (
        "E25",
        "2",
        "explain --fixture aws-g7e-1gpu --nodes 2 --proto simple --nccl-version 2.29",
    ),
    (
        "E25",
        "8",
        "explain --fixture aws-g7e-1gpu --nodes 8 --proto simple --nccl-version 2.29",
    ),
];

/// Cases placed on a fixture but kept out of the fit, with why: test data for `check`, not training.
pub const HELD_OUT: &[(&str, &str)] = &[(
    "E05",
    "held out: E05's own case note (1 KiB 280 us, 16 MiB slower than 32 MiB, 260 GB/s at 8 GiB on 8x 400G RoCE)",
)];

/// The flags of a row: its own, or for a "none: ..." row of a machine placed since, [`PLACED`]'s.
fn topology_args<'a>(case: &str, nodes: &str, args: &'a str) -> &'a str {
    if !args.trim_start().starts_with("none") {
        return args;
    }
    PLACED
        .iter()
        .find(|(c, n, _)| *c == case && *n == nodes.trim())
        .map_or(args, |(_, _, placed)| placed)
}

/// Fixtures that are one cloud machine type: their cases are one machine for LOMO.
fn machine_key(case: &str, fixture: &str) -> String {
    let cloud = ["aws-", "azure-", "gcp-", "h200x2-", "gb200-"];
    if cloud.iter().any(|p| fixture.starts_with(p)) {
        fixture.to_string()
    } else {
        format!("{case} {fixture}")
    }
}

type Built = (usize, Expected);

/// What reading `points.csv` files carries from row to row: the parameters, their chunking, and the machines
/// built so far (by flags, network and launch; None: the model cannot build it).
struct LoadCtx<'a> {
    params: &'a Params,
    chunking: Chunking,
    built: Vec<(String, Option<Built>)>,
}

impl Data {
    /// Read `points.csv` files; every row the model can place is prepared, the others are counted by reason.
    pub fn load(paths: &[&str], params: &Params) -> Result<Data> {
        let mut data = Data {
            points: Vec::new(),
            plans: Vec::new(),
            combos: Vec::new(),
            skipped: Skipped::default(),
        };
        let mut ctx = LoadCtx {
            params,
            chunking: Resolved::new(params, "sm90", NetKind::Ib, Launch::Eager).chunking,
            built: Vec::new(),
        };
        for path in paths {
            data.load_file(path, &mut ctx)?;
        }
        Ok(data)
    }

    /// One `points.csv` file: its rows' points, each series' sizes ranged (small, mid, its largest).
    fn load_file(&mut self, path: &str, ctx: &mut LoadCtx) -> Result<()> {
        let text = crate::units::read_input_file(path)?;
        let rows = csv_rows(&text);
        let Some(header) = rows.first() else {
            return Err(Error::bad_input(format!("{path}: empty")));
        };
        let col = |name: &str| -> Result<usize> {
            header.iter().position(|h| h == name).ok_or_else(|| {
                Error::bad_input(format!("{path}: no column '{name}' in the header"))
            })
        };
        let c = [
            col("case")?,
            col("collective")?,
            col("env")?,
            col("size_bytes")?,
            col("measured_busbw_gbs")?,
            col("measured_time_us")?,
            col("planner_topology_args")?,
            col("status")?,
            col("launch")?,
            col("network")?,
            col("nodes")?,
        ];
        // Optional (tests/data/expect-own has none): one process per GPU where absent.
        let gpus_per_process_col = header.iter().position(|h| h == "gpus_per_process");
        let mut series: BTreeMap<String, u64> = BTreeMap::new();
        let mut staged = Vec::new();
        for (line, row) in rows.iter().enumerate().skip(1) {
            let gpus_per_process = gpus_per_process_col
                .and_then(|i| row.get(i))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|&g| g >= 1)
                .unwrap_or(1);
            if let Some((series_key, point)) =
                self.row_point(ctx, path, line, row, &c, gpus_per_process)?
            {
                let largest = series.entry(series_key.clone()).or_insert(0);
                *largest = (*largest).max(point.size);
                staged.push((series_key, point));
            }
        }
        for (key, mut p) in staged {
            let largest = series.get(&key).copied().unwrap_or(0);
            p.range = if p.size <= 64 << 10 {
                Range::Small
            } else if p.size == largest && largest >= 256 << 20 {
                Range::Large
            } else {
                Range::Mid
            };
            self.points.push(p);
        }
        Ok(())
    }

    /// One row (`line`, 0-based; `c`: the columns' indices): its series and point, or None (counted by reason)
    /// when the model cannot place it.
    fn row_point(
        &mut self,
        ctx: &mut LoadCtx,
        path: &str,
        line: usize,
        row: &[String],
        c: &[usize; 11],
        gpus_per_process: usize,
    ) -> Result<Option<(String, FitPoint)>> {
        let get = |i: usize| row.get(c[i]).map(String::as_str).unwrap_or("");
        if get(7) != "healthy" {
            self.skipped.add(&format!("status {}", get(7)));
            return Ok(None);
        }
        if let Some((_, why)) = HELD_OUT.iter().find(|(case, _)| *case == get(0)) {
            self.skipped.add(why);
            return Ok(None);
        }
        let args = topology_args(get(0), get(10), get(6));
        let Some(mut flags) = parse_flags(args) else {
            self.skipped.add("no fixture describes the machine");
            return Ok(None);
        };
        if crate::topo::fixtures::find(&flags.fixture).is_none() {
            self.skipped.add("fixture not in this build");
            return Ok(None);
        }
        let env_col = env_tokens(get(2));
        for (k, v) in env_col {
            if !flags.env.iter().any(|(x, _)| *x == k) {
                flags.env.push((k, v));
            }
        }
        let Ok(size) = get(3).parse::<u64>() else {
            return Err(Error::bad_input(format!(
                "{path}:{}: size_bytes '{}' is not a number",
                line + 1,
                get(3)
            )));
        };
        let coll = match Coll::parse(get(1)) {
            Ok(c) => c,
            Err(_) => {
                self.skipped.add("collective not modelled");
                return Ok(None);
            }
        };
        let launch = if get(8) == "graph" {
            Launch::Graph
        } else {
            Launch::Eager
        };
        let net = net_kind_of(get(9), &flags.env);
        let key = format!("{flags:?} {net:?} {launch:?}");
        let index = match ctx.built.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                let b = build_machine(&flags, net, launch, ctx.params).ok();
                let b = b.map(|e| {
                    self.plans.push(e.plan.clone());
                    (self.plans.len() - 1, e)
                });
                ctx.built.push((key, b));
                ctx.built.len() - 1
            }
        };
        let Some((plan_index, expected)) = &ctx.built[index].1 else {
            self.skipped.add("the model cannot build the machine");
            return Ok(None);
        };
        let Ok(call) = Call::new(coll, size, expected.n_ranks(), 1) else {
            self.skipped.add("size too small for the collective");
            return Ok(None);
        };
        let Ok(eval) = expected.model.evaluate(&call) else {
            self.skipped.add("the model cannot evaluate the call");
            return Ok(None);
        };
        let w = eval.winner();
        let Some(prepared) = prepare(
            &expected.plan,
            &ctx.chunking,
            coll,
            w.algo,
            w.proto,
            call.model_bytes,
            w.channels,
        ) else {
            self.skipped.add("algorithm not modelled (CollNet, PAT)");
            return Ok(None);
        };
        let factor = coll.nccl_tests_bus_factor(expected.n_ranks());
        let measured_us = match (get(5).parse::<f64>(), get(4).parse::<f64>()) {
            (Ok(t), _) if t > 0.0 => t,
            (_, Ok(bw)) if bw > 0.0 => call.model_bytes as f64 * factor / (bw * 1e3),
            _ => {
                self.skipped.add("no measured value");
                return Ok(None);
            }
        };
        let combo = (
            expected.class.gpu_class.clone(),
            net.unwrap_or(NetKind::Ib),
            launch,
            gpus_per_process,
        );
        let combo = match self.combos.iter().position(|x| *x == combo) {
            Some(i) => i,
            None => {
                self.combos.push(combo);
                self.combos.len() - 1
            }
        };
        let series_key = format!("{} {} {}", get(0), args, get(2));
        Ok(Some((
            series_key,
            FitPoint {
                case: get(0).to_string(),
                machine: machine_key(get(0), &flags.fixture),
                band_key: expected.class.band_key.clone(),
                size,
                range: Range::Small,
                measured_us,
                nccl_estimate_us: f64::from(w.time_us),
                algo: w.algo,
                proto: w.proto,
                combo,
                plan: *plan_index,
                prepared,
            },
        )))
    }

    fn resolved(&self, params: &Params) -> Vec<Resolved> {
        self.combos
            .iter()
            .map(|(g, n, l, per_process)| Resolved::for_process(params, g, *n, *l, *per_process))
            .collect()
    }

    fn predict(&self, resolved: &[Resolved], i: usize) -> f64 {
        let p = &self.points[i];
        evaluate(&self.plans[p.plan], &resolved[p.combo], &p.prepared)
            .map(|(t, _)| t)
            .unwrap_or(f64::INFINITY)
    }
}

fn build_machine(
    flags: &Flags,
    net: Option<NetKind>,
    launch: Launch,
    params: &Params,
) -> Result<Expected> {
    let mut env = NcclEnv::from_pairs(flags.env.clone());
    if let Some(a) = &flags.algo {
        env.algo = Some(a.clone());
    }
    if let Some(p) = &flags.proto {
        env.proto = Some(p.clone());
    }
    let source = crate::pipeline::Source {
        fixture: Some(flags.fixture.clone()),
        nodes: flags.nodes,
        mnnvl: flags.mnnvl,
        nccl_env: env.clone(),
        ..Default::default()
    };
    let cluster = source.load()?;
    let table = match &flags.version {
        Some(v) => table::builtin_for_version(v)?.0,
        None => table::builtin(table::newest_family())?,
    };
    // the fit resolves each point's constants itself (its gpus_per_process column); the plan does not depend on it
    let opts = ExpectOptions {
        launch,
        net_kind: net,
        gpus_per_thread: 1,
    };
    super::build_with(&cluster, None, table, env, flags.nvls, &opts, params).map(|(_, e)| e)
}

/// Huber loss of a log error: quadratic within 30 %, linear beyond (one bad source cannot drag the fit).
fn loss(pred: f64, measured: f64) -> f64 {
    let r = (pred / measured).ln();
    if !r.is_finite() {
        return 1e6;
    }
    let delta = 0.3;
    if r.abs() <= delta {
        r * r
    } else {
        delta * (2.0 * r.abs() - delta)
    }
}

/// Regularisation: how strongly a constant stays near its prior, per unit of squared log ratio.
const PRIOR_WEIGHT: f64 = 0.05;

struct Fitter<'a> {
    data: &'a Data,
    /// Weight of each point: each machine counts about as much as the square root of its points.
    weight: Vec<f64>,
    slots: Vec<(usize, usize)>,
    priors: Vec<f64>,
    /// Points each fitted constant moves.
    affects: Vec<Vec<usize>>,
}

impl<'a> Fitter<'a> {
    fn new(data: &'a Data, params: &Params, active: Vec<bool>) -> Fitter<'a> {
        let mut per_machine: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, p) in data.points.iter().enumerate() {
            if active[i] {
                *per_machine.entry(p.machine.as_str()).or_default() += 1;
            }
        }
        let weight = data
            .points
            .iter()
            .map(|p| {
                1.0 / (per_machine.get(p.machine.as_str()).copied().unwrap_or(1) as f64).sqrt()
            })
            .collect();
        let slots = params.fit_slots();
        let priors = slots
            .iter()
            .map(|&(f, j)| params.files[f].params[j].prior)
            .collect();
        // Everything from the priors, so a fit does not depend on the values it starts from.
        let mut params = params.clone();
        for &(f, j) in &slots {
            let prm = &mut params.files[f].params[j];
            prm.value = prm.prior;
        }
        let params = &params;
        // Which points each constant moves: perturb it and look.
        let base = data.resolved(params);
        let before: Vec<f64> = (0..data.points.len())
            .map(|i| data.predict(&base, i))
            .collect();
        let mut affects = Vec::with_capacity(slots.len());
        for &(f, j) in &slots {
            // Both ways and far: a rate that does not bind at its prior may bind once lowered.
            let moved: Vec<Vec<f64>> = [0.3, 3.0]
                .iter()
                .map(|k| {
                    let mut p = params.clone();
                    let prm = &mut p.files[f].params[j];
                    prm.value = prm.prior * k;
                    if prm.unit == super::params::Unit::Fraction {
                        prm.value = prm.value.min(1.0);
                    }
                    let r = data.resolved(&p);
                    (0..data.points.len())
                        .map(|i| data.predict(&r, i))
                        .collect()
                })
                .collect();
            affects.push(
                (0..data.points.len())
                    .filter(|&i| active[i] && moved.iter().any(|m| m[i] != before[i]))
                    .collect(),
            );
        }
        Fitter {
            data,
            weight,
            slots,
            priors,
            affects,
        }
    }

    fn point_loss(&self, resolved: &[Resolved], i: usize) -> f64 {
        self.weight[i]
            * loss(
                self.data.predict(resolved, i),
                self.data.points[i].measured_us,
            )
    }

    /// Coordinate descent in log space from the priors.
    // `k` indexes four parallel lists (slots, affects, step, priors): an index reads plainer than a zip of four.
    #[allow(clippy::needless_range_loop)]
    fn fit(&self, params: &Params, sweeps: usize) -> Params {
        let mut p = params.clone();
        for (k, &(f, j)) in self.slots.iter().enumerate() {
            p.files[f].params[j].value = self.priors[k];
        }
        let mut step = vec![0.4f64; self.slots.len()];
        for _ in 0..sweeps {
            let mut moved = false;
            for (k, &(f, j)) in self.slots.iter().enumerate() {
                if self.affects[k].is_empty() || step[k] < 0.01 {
                    continue;
                }
                let fraction = p.files[f].params[j].unit == super::params::Unit::Fraction;
                let cost = |p: &Params| -> f64 {
                    let r = self.data.resolved(p);
                    let v = p.files[f].params[j].value;
                    let prior = (v / self.priors[k]).ln();
                    self.affects[k]
                        .iter()
                        .map(|&i| self.point_loss(&r, i))
                        .sum::<f64>()
                        + PRIOR_WEIGHT * prior * prior
                };
                let here = cost(&p);
                let v0 = p.files[f].params[j].value;
                let mut best = (here, v0);
                for dir in [1.0, -1.0] {
                    let mut v = v0 * (dir * step[k]).exp();
                    if fraction {
                        v = v.min(1.0);
                    }
                    p.files[f].params[j].value = v;
                    let c = cost(&p);
                    if c < best.0 - 1e-12 {
                        best = (c, v);
                    }
                }
                p.files[f].params[j].value = best.1;
                if best.1 != v0 {
                    moved = true;
                } else {
                    step[k] *= 0.5;
                }
            }
            if !moved && step.iter().all(|s| *s < 0.01) {
                break;
            }
        }
        p
    }
}

fn stats_by(data: &Data, errors: &[(usize, f64)]) -> BTreeMap<(String, Range), Stats> {
    let mut groups: BTreeMap<(String, Range), Vec<f64>> = BTreeMap::new();
    for &(i, e) in errors {
        let p = &data.points[i];
        groups
            .entry((p.band_key.clone(), p.range))
            .or_default()
            .push(e);
        groups.entry(("all".into(), p.range)).or_default().push(e);
    }
    groups
        .into_iter()
        .filter_map(|(k, mut v)| Stats::of(&mut v).map(|s| (k, s)))
        .collect()
}

/// Fit on every point, then leave each machine out; `sweeps` bounds the coordinate descent.
pub fn fit_and_validate(data: &Data, params: &Params, sweeps: usize) -> FitReport {
    let all = vec![true; data.points.len()];
    let fitter = Fitter::new(data, params, all);
    let fitted = fitter.fit(params, sweeps);
    let r = data.resolved(&fitted);
    let rel = |pred: f64, m: f64| (pred / m - 1.0).abs();
    let training: Vec<(usize, f64)> = (0..data.points.len())
        .map(|i| (i, rel(data.predict(&r, i), data.points[i].measured_us)))
        .collect();
    let nccl: Vec<(usize, f64)> = (0..data.points.len())
        .map(|i| {
            (
                i,
                rel(data.points[i].nccl_estimate_us, data.points[i].measured_us),
            )
        })
        .collect();
    let machines: Vec<String> = {
        let mut m: Vec<String> = data.points.iter().map(|p| p.machine.clone()).collect();
        m.sort();
        m.dedup();
        m
    };
    let mut lomo = Vec::new();
    let mut lomo_pred = vec![f64::NAN; data.points.len()];
    let mut per_machine = Vec::new();
    for m in &machines {
        let active: Vec<bool> = data.points.iter().map(|p| &p.machine != m).collect();
        let f = Fitter::new(data, params, active);
        let p = f.fit(params, sweeps);
        let r = data.resolved(&p);
        let mut errs = Vec::new();
        let mut worst = (0.0, String::new());
        for (i, pt) in data.points.iter().enumerate() {
            if &pt.machine == m {
                let pred = data.predict(&r, i);
                lomo_pred[i] = pred;
                let e = rel(pred, pt.measured_us);
                lomo.push((i, e));
                errs.push(e);
                if e >= worst.0 {
                    worst = (
                        e,
                        format!(
                            "{} {} B {}/{}",
                            pt.case,
                            pt.size,
                            pt.algo.nccl_name(),
                            pt.proto.nccl_name()
                        ),
                    );
                }
            }
        }
        if let Some(s) = Stats::of(&mut errs) {
            per_machine.push((m.clone(), s, worst.1));
        }
    }
    let fit_r = data.resolved(&fitted);
    let rows = data
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| PointRow {
            case: p.case.clone(),
            machine: p.machine.clone(),
            size: p.size,
            pair: format!("{}/{}", p.algo.nccl_name(), p.proto.nccl_name()),
            range: p.range,
            measured_us: p.measured_us,
            expected_fit_us: data.predict(&fit_r, i),
            expected_lomo_us: lomo_pred[i],
            nccl_estimate_us: p.nccl_estimate_us,
            fit_limit: evaluate(&data.plans[p.plan], &fit_r[p.combo], &p.prepared)
                .map(|(_, l)| l.describe())
                .unwrap_or_default(),
            channels: p.prepared.channels,
        })
        .collect();
    FitReport {
        rows,
        points: data.points.len(),
        machines: machines.len(),
        skipped: data.skipped.clone(),
        training: stats_by(data, &training),
        lomo: stats_by(data, &lomo),
        nccl: stats_by(data, &nccl),
        per_machine,
        params: with_bands(fitted, &stats_by(data, &lomo)),
    }
}

/// The fitted constants with the bands set from the LOMO error (its 80th percentile per class and range).
fn with_bands(mut p: Params, lomo: &BTreeMap<(String, Range), Stats>) -> Params {
    if let Some(f) = p.files.iter_mut().find(|f| f.kind == "bands") {
        for param in &mut f.params {
            let Some((key, range)) = param.name.rsplit_once('_') else {
                continue;
            };
            let key = if key == "default" { "all" } else { key };
            let range = match range {
                "small" => Range::Small,
                "mid" => Range::Mid,
                _ => Range::Large,
            };
            let s = lomo
                .get(&(key.to_string(), range))
                .or_else(|| lomo.get(&("all".to_string(), range)));
            if let Some(s) = s {
                param.value = s.p80.clamp(0.01, 0.9);
            }
        }
    }
    p
}

/// `planner expect --fit POINTS.csv[,MORE.csv] [--write DIR]`.
pub(crate) fn run_fit(
    points: &str,
    params: &Params,
    write: Option<&str>,
    points_out: Option<&str>,
) -> Result<FitReport> {
    // Outputs are checked before the fit, so a bad path is refused at once, not after it (fsio: 2 for a wrong
    // path, 1 for a disk that fails).
    let param_paths: Vec<String> = write
        .map(|dir| {
            super::params::BUILTIN
                .iter()
                .map(|(name, _)| format!("{}/{name}", dir.trim_end_matches('/')))
                .collect()
        })
        .unwrap_or_default();
    for path in points_out
        .into_iter()
        .chain(param_paths.iter().map(String::as_str))
    {
        crate::fsio::check_output_path(path)?;
    }
    let paths: Vec<&str> = points.split(',').collect();
    let data = Data::load(&paths, params)?;
    if data.points.is_empty() {
        return Err(Error::bad_input(format!(
            "{points}: no point the model can place"
        )));
    }
    let report = fit_and_validate(&data, params, SWEEPS);
    if let Some(path) = points_out {
        crate::fsio::write_output(path, report.points_csv().as_bytes())?;
    }
    for (i, (path, (_, original))) in param_paths.iter().zip(super::params::BUILTIN).enumerate() {
        crate::fsio::write_output(path, report.params.to_json(i, original)?.as_bytes())?;
    }
    Ok(report)
}

/// Coordinate-descent sweeps of `planner expect --fit` (and the test that checks its figures).
pub const SWEEPS: usize = 30;

fn pct(v: f64) -> String {
    format!("{:.1} %", v * 100.0)
}

impl FitReport {
    pub(crate) fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "expected model fit: {} points of {} machines (|expected - measured| / measured, time)",
            self.points, self.machines
        );
        let skipped: usize = self.skipped.reasons.values().sum();
        let _ = writeln!(s, "rows not used: {skipped}");
        for (why, n) in &self.skipped.reasons {
            let _ = writeln!(s, "  {n:>4}  {why}");
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "| class | size range | points | training median / worst | LOMO median / worst | LOMO p80 (band) | NCCL's estimate median / worst |"
        );
        let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- |");
        for ((class, range), t) in &self.training {
            let l = self.lomo.get(&(class.clone(), *range));
            let n = self.nccl.get(&(class.clone(), *range));
            let _ = writeln!(
                s,
                "| {class} | {} | {} | {} / {} | {} | {} | {} |",
                range.name(),
                t.n,
                pct(t.median),
                pct(t.worst),
                l.map(|l| format!("{} / {}", pct(l.median), pct(l.worst)))
                    .unwrap_or_default(),
                l.map(|l| pct(l.p80)).unwrap_or_default(),
                n.map(|n| format!("{} / {}", pct(n.median), pct(n.worst)))
                    .unwrap_or_default(),
            );
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "| machine left out | points | LOMO median / worst | worst point |"
        );
        let _ = writeln!(s, "| --- | --- | --- | --- |");
        for (m, st, worst) in &self.per_machine {
            let _ = writeln!(
                s,
                "| {m} | {} | {} / {} | {worst} |",
                st.n,
                pct(st.median),
                pct(st.worst)
            );
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "fitted constants (prior -> fitted):");
        for f in &self.params.files {
            for p in &f.params {
                if p.fit && (p.value - p.prior).abs() > 1e-9 {
                    let _ = writeln!(
                        s,
                        "  {} {}: {:.4} -> {:.4}",
                        f.file, p.name, p.prior, p.value
                    );
                }
            }
        }
        s
    }

    /// Stats of a class and range (band key or "all").
    pub fn get(&self, lomo: bool, class: &str, range: Range) -> Option<Stats> {
        let map = if lomo { &self.lomo } else { &self.training };
        map.get(&(class.to_string(), range)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_env_parse() {
        let f = parse_flags(
            "NCCL_MIN_CTAS=24 explain --fixture hgx-h100-8 --nodes 2 --algo ring --nccl-version 2.26 (VMs)",
        )
        .unwrap();
        assert_eq!(f.fixture, "hgx-h100-8");
        assert_eq!(f.nodes, 2);
        assert_eq!(f.algo.as_deref(), Some("ring"));
        assert_eq!(f.version.as_deref(), Some("2.26"));
        assert_eq!(f.env, vec![("NCCL_MIN_CTAS".to_string(), "24".to_string())]);
        assert!(parse_flags("none: a GCP A4 fixture").is_none());
        assert_eq!(
            env_tokens("NCCL_MIN_NCHANNELS=32, fp16, CUDA graph"),
            vec![("NCCL_MIN_NCHANNELS".to_string(), "32".to_string())]
        );
        assert_eq!(net_kind_of("EFA 32x 100G", &[]), Some(NetKind::Efa));
        assert_eq!(net_kind_of("none (1 node)", &[]), None);
        let rows = csv_rows("a,\"b, c\",d\n1,\"x \"\"y\"\"\",3\n");
        assert_eq!(rows[0], vec!["a", "b, c", "d"]);
        assert_eq!(rows[1][1], "x \"y\"");
    }
}
