//! `planner explain`: NCCL's choice for one size or a sweep, why, and NCCL's
//! own table and per-call formats. Thin: build the model, hand to `report`.

use super::source::{GraphArgs, ModelArgs, NvlsArgs, SizeArgs, SourceArgs};
use crate::calibrate;
use crate::error::{Error, Result};
use crate::model::select::Call;
use crate::model::Coll;
use crate::nccl_env::{NcclEnv, WithNcclEnv};
use crate::nccl_log::{self, NcclLog};
use crate::report::explain as out;
use crate::units::parse_size_range;

#[derive(Debug, clap::Args)]
#[command(
    mut_arg("size", |a| a.help("One message size in bytes, binary units (16K, 16M = 16 MiB, 1G) [default: 16M; all-gather/reduce-scatter: the whole buffer, as nccl-tests]")),
    mut_arg("sweep", |a| a.help("A range of sizes LO..HI, both included, doubling each step (e.g. 8..4G) [default: one size, --size]"))
)]
pub(crate) struct ExplainArgs {
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    #[command(flatten)]
    pub(crate) graph: GraphArgs,
    /// The message size (--size, default 16M: the whole buffer for all-gather/reduce-scatter, as nccl-tests), or
    /// --sweep LO..HI: the crossover bands of a range
    #[command(flatten)]
    pub(crate) sizes: SizeArgs,
    /// Collective: all-reduce, all-gather, reduce-scatter, broadcast, reduce
    #[arg(long, default_value = "all-reduce")]
    pub(crate) coll: String,
    /// Draw predicted time per algorithm/protocol against size (log-log SVG); uses --sweep or 8..4G
    #[arg(long, value_name = "FILE.svg", conflicts_with = "size")]
    pub(crate) plot: Option<String>,
    /// Print NCCL's init tuning table exactly as NCCL_DEBUG=INFO does (every collective and size)
    #[arg(long, conflicts_with_all = ["size", "sweep", "coll", "ops", "plot", "nccl_calls"])]
    pub(crate) nccl_table: bool,
    /// Print NCCL's per-call lines ("AllReduce: N Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}") for --size or --sweep
    #[arg(long, conflicts_with = "plot")]
    pub(crate) nccl_calls: bool,
    /// Algorithms allowed, NCCL_ALGO syntax (e.g. "ring,tree", "^nvls", "allreduce:tree"); overrides NCCL_ALGO
    #[arg(long, value_name = "LIST")]
    pub(crate) algo: Option<String>,
    /// Protocols allowed, NCCL_PROTO syntax (e.g. "^LL128"); overrides NCCL_PROTO
    #[arg(long, value_name = "LIST")]
    pub(crate) proto: Option<String>,
    /// Identical ops in one group (NCCL aggregates them)
    #[arg(long, default_value_t = 1)]
    pub(crate) ops: usize,
    #[command(flatten)]
    pub(crate) nvls: NvlsArgs,
    /// Audit an NCCL_DEBUG=INFO log against the model (same as `planner audit FILE`)
    #[arg(long, value_name = "FILE", conflicts_with_all = [
        "size", "sweep", "coll", "ops", "plot", "nccl_table", "nccl_calls", "algo", "proto", "nvls", "calibration",
        "nodes"
    ])]
    pub(crate) nccl_log: Option<String>,
    /// Use the TUNING table an NCCL_DEBUG=INFO log printed (latency, bandwidth) as the model's cells
    #[arg(long, value_name = "LOG", conflicts_with_all = ["nccl_version", "tuning_table", "nccl_log"])]
    pub(crate) from_log: Option<String>,
    #[command(flatten)]
    pub(crate) model: ModelArgs,
    /// Add a calibrated model (from `planner calibrate`): calibrated time, busbw and pick next to NCCL's
    #[arg(long, value_name = "CAL.json")]
    pub(crate) calibration: Option<String>,
    /// Apply --calibration to a topology or GPU count other than the one it was measured on
    #[arg(long, requires = "calibration")]
    pub(crate) force: bool,
    /// Machine-readable output (docs/json.md)
    #[arg(long)]
    pub(crate) json: bool,
}

fn write_json(value: &impl serde::Serialize, list_key: &str) -> Result<()> {
    println!("{}", crate::report::json::render(value, list_key)?);
    Ok(())
}

/// A JSON object with the `nccl_env` object (the NCCL_* variables applied) after its own fields.
/// A list is first wrapped as `{list_key: [...]}` so the object can carry `nccl_env`.
fn write_json_with_env(value: &impl serde::Serialize, env: &NcclEnv, list_key: &str) -> Result<()> {
    let value = serde_json::to_value(value)
        .map_err(|e| Error::runtime(format!("cannot write JSON: {e}")))?;
    let value = match value {
        serde_json::Value::Array(items) => serde_json::json!({ list_key: items }),
        other => other,
    };
    write_json(&WithNcclEnv::new(&value, env), list_key)
}

/// NCCL's own formats stay NCCL's model: `--calibration` never changes them.
fn refuse_calibrated_nccl_formats(args: &ExplainArgs) -> Result<()> {
    if args.calibration.is_none() {
        return Ok(());
    }
    for (set, flag) in [
        (args.nccl_table, "--nccl-table"),
        (args.nccl_calls, "--nccl-calls"),
        (args.nccl_log.is_some(), "--nccl-log"),
    ] {
        if set {
            return Err(Error::bad_input(format!(
                "--calibration cannot be combined with {flag}: NCCL's own output is NCCL's model, never calibrated"
            )));
        }
    }
    Ok(())
}

pub(crate) fn run(args: ExplainArgs) -> Result<()> {
    // The NCCL_* lines and notes go to stderr once the command succeeded: a refused NCCL_ALGO / NCCL_PROTO is then
    // one error line and nothing else.
    let mut stderr_lines = Vec::new();
    let result = run_explain(args, &mut stderr_lines);
    if result.is_ok() {
        for line in stderr_lines {
            eprintln!("{line}");
        }
    }
    result
}

/// What `explain` prints, decided from its flags once (clap already refused the combinations that contradict).
enum ExplainMode {
    /// `--nccl-log LOG`: the same as `planner audit LOG`.
    Audit(String),
    /// `--nccl-table`: NCCL's init TUNING table (every collective and size).
    NcclTable,
    /// `--nccl-calls`: NCCL's per-call lines for these sizes.
    NcclCalls { coll: Coll, sizes: Vec<u64> },
    /// `--plot FILE` without `--sweep`: the plot of 8..4G, nothing on stdout.
    Plot { coll: Coll, path: String },
    /// `--sweep` (with `--plot FILE`, the plot first).
    Sweep {
        coll: Coll,
        sizes: Vec<u64>,
        plot: Option<String>,
    },
    /// One size: NCCL's table for it, then the symmetric, beyond-NCCL and possible sections.
    Single { coll: Coll, size: u64 },
}

impl ExplainMode {
    fn parse(args: &ExplainArgs) -> Result<ExplainMode> {
        if let Some(log) = &args.nccl_log {
            return Ok(ExplainMode::Audit(log.clone()));
        }
        let coll = Coll::parse(&args.coll)?;
        // With --sweep the sweep's sizes, else the one size (default 16M).
        let sizes = args.sizes.sizes("16M")?;
        let swept = args.sizes.sweep.is_some();
        Ok(if args.nccl_table {
            ExplainMode::NcclTable
        } else if args.nccl_calls {
            let sizes = if swept { sizes } else { vec![sizes[0]] };
            ExplainMode::NcclCalls { coll, sizes }
        } else if swept {
            ExplainMode::Sweep {
                coll,
                sizes,
                plot: args.plot.clone(),
            }
        } else if let Some(path) = &args.plot {
            ExplainMode::Plot {
                coll,
                path: path.clone(),
            }
        } else {
            ExplainMode::Single {
                coll,
                size: sizes[0],
            }
        })
    }
}

/// What every mode but `--nccl-log` prints from: the model, built once, and the cluster it was built for.
struct Explained {
    model: crate::model::Model,
    cluster: crate::topo::Cluster,
    small: out::SmallMessageContext,
    /// The NCCL_* variables applied (`nccl_env` in the JSON).
    applied: NcclEnv,
    /// planner's expected model on the same plan (the tuning table before `--from-log` replaced its cells).
    expected: crate::expect::Expected,
}

/// Every flag and file checked before the topology is probed or loaded (a bad one is then the only line).
fn preflight(args: &ExplainArgs, mode: &ExplainMode) -> Result<()> {
    use super::source::preflight;
    preflight::algo_proto(args.algo.as_deref(), args.proto.as_deref())?;
    match mode {
        // All-gather/reduce-scatter's least size depends on the ranks: checked once the topology is loaded.
        ExplainMode::Single { size, coll } => {
            preflight::sizes(&[*size], !coll.is_ag_rs(), args.ops)?
        }
        ExplainMode::NcclCalls { sizes, coll } => preflight::sizes(
            sizes,
            args.sizes.sweep.is_none() && !coll.is_ag_rs(),
            args.ops,
        )?,
        ExplainMode::Sweep { sizes, .. } => preflight::sizes(sizes, false, args.ops)?,
        ExplainMode::Plot { .. } => preflight::sizes(&[], false, args.ops)?,
        ExplainMode::Audit(_) | ExplainMode::NcclTable => {}
    }
    if !matches!(mode, ExplainMode::NcclTable | ExplainMode::Audit(_)) {
        crate::model::select::Call::check(1, args.ops)?;
    }
    preflight::output(args.plot.as_deref())?;
    preflight::input(args.graph.graph.as_deref())?;
    if let Some(path) = &args.calibration {
        calibrate::Calibration::load(path)?;
        if args.ops != 1 {
            return Err(Error::bad_input(format!(
                "--calibration with --ops {}: {path} was measured one call at a time, not in aggregated groups",
                args.ops
            )));
        }
    }
    Ok(())
}

fn run_explain(args: ExplainArgs, stderr_lines: &mut Vec<String>) -> Result<()> {
    refuse_calibrated_nccl_formats(&args)?;
    let mode = ExplainMode::parse(&args)?;
    preflight(&args, &mode)?;
    match mode {
        ExplainMode::Audit(log) => run_audit(&args, log),
        ExplainMode::NcclTable => run_nccl_table(&args, &build(&args, stderr_lines)?),
        ExplainMode::NcclCalls { coll, sizes } => {
            run_nccl_calls(&args, &build(&args, stderr_lines)?, coll, sizes)
        }
        ExplainMode::Plot { coll, path } => {
            let ex = build(&args, stderr_lines)?;
            let calibration = load_calibration(&args, &ex, coll)?;
            write_plot(
                &args,
                &ex,
                coll,
                &path,
                &parse_size_range("8..4G")?,
                calibration.is_some(),
            )
        }
        ExplainMode::Sweep { coll, sizes, plot } => {
            let ex = build(&args, stderr_lines)?;
            let calibration = load_calibration(&args, &ex, coll)?;
            if let Some(path) = &plot {
                write_plot(&args, &ex, coll, path, &sizes, calibration.is_some())?;
            }
            run_sweep(&args, &ex, coll, &sizes, calibration.as_ref())
        }
        ExplainMode::Single { coll, size } => {
            let ex = build(&args, stderr_lines)?;
            let calibration = load_calibration(&args, &ex, coll)?;
            run_single(&args, &ex, coll, size, calibration.as_ref())
        }
    }
}

fn run_audit(args: &ExplainArgs, log: String) -> Result<()> {
    let source = &args.source;
    let audit_args = super::audit::AuditArgs {
        source: super::source::AuditSourceArgs {
            fixture: source.fixture.clone(),
            topo: source.topo.clone(),
            nodes: None,
            net_latency: source.net_latency,
        },
        graph: args.graph.clone(),
        log,
        log_graphs: false,
        tuner_csv: None,
        model: args.model.clone(),
        json: args.json,
    };
    super::audit::run(audit_args)
}

/// The environment with `--algo`/`--proto`, the table (or a log's cells), the cluster and the model, in the order
/// their errors are reported.
fn build(args: &ExplainArgs, stderr_lines: &mut Vec<String>) -> Result<Explained> {
    let mut env = args.source.nccl_env.clone();
    if let Some(a) = &args.algo {
        env.algo = Some(a.clone());
        env.overridden("NCCL_ALGO");
    }
    if let Some(p) = &args.proto {
        env.proto = Some(p.clone());
        env.overridden("NCCL_PROTO");
    }
    let applied = env.clone();
    let log = match &args.from_log {
        Some(path) => Some(NcclLog::load(path)?),
        None => None,
    };
    let table = match &log {
        Some(log) => {
            let (table, notice) =
                nccl_log::table_for_log(log.version.as_deref().unwrap_or("2.30"))?;
            if let Some(notice) = notice {
                eprintln!("planner: {notice}");
            }
            table
        }
        None => args.model.table(None)?,
    };
    let cluster = args.source.source().load()?;
    // NCCL's model and planner's expected model from one channel search.
    let (mut model, expected) = crate::expect::build(
        &cluster,
        args.graph.graph.as_deref(),
        table,
        env,
        args.nvls.flag(),
        &crate::expect::ExpectOptions::default(),
    )?;
    if let Some(log) = &log {
        let cells = nccl_log::table_from_log(log)?;
        cells.apply(&mut model);
        let note = format!(
            "latency and bandwidth from the TUNING table in {} (line {}); channels, threads and per-call rules are the model's (NCCL {})",
            log.source, cells.line, model.table.family
        );
        // NCCL's own formats and JSON stay clean on stdout.
        if args.json || args.nccl_table || args.nccl_calls {
            eprintln!("planner: {note}");
        } else {
            println!("{note}");
        }
    }
    stderr_lines.extend(applied.announce_lines());
    for note in nvls_priced_as_pci(&model)
        .into_iter()
        .chain(fewer_channels_same_times(&model))
    {
        stderr_lines.push(format!("planner: note: {note}"));
    }
    let small = out::SmallMessageContext::new(&model, &cluster);
    Ok(Explained {
        model,
        cluster,
        small,
        applied,
        expected,
    })
}

/// `--calibration CAL.json`, checked against the cluster the model was built for.
fn load_calibration(
    args: &ExplainArgs,
    ex: &Explained,
    coll: Coll,
) -> Result<Option<calibrate::Calibration>> {
    match &args.calibration {
        Some(path) => Ok(Some(calibrate::load_for_cluster(
            path,
            &ex.cluster,
            coll,
            args.ops,
            args.force,
        )?)),
        None => Ok(None),
    }
}

fn run_nccl_table(args: &ExplainArgs, ex: &Explained) -> Result<()> {
    if args.json {
        return write_json_with_env(&out::nccl_table_json(&ex.model), &ex.applied, "entries");
    }
    if ex.model.input.n_ranks <= 1 {
        eprintln!("planner: NCCL prints no tuning table for a single rank (it only copies)");
        return Ok(());
    }
    for line in out::nccl_table_lines(&ex.model) {
        println!("{line}");
    }
    Ok(())
}

fn run_nccl_calls(args: &ExplainArgs, ex: &Explained, coll: Coll, sizes: Vec<u64>) -> Result<()> {
    let mut plans = Vec::new();
    for s in sizes {
        let call = Call::new(coll, s, ex.model.input.n_ranks, args.ops)?;
        plans.push(ex.model.plan(&call)?);
    }
    if args.json {
        return write_json_with_env(&plans, &ex.applied, "calls");
    }
    for line in out::nccl_call_lines(&plans) {
        println!("{line}");
    }
    Ok(())
}

fn write_plot(
    args: &ExplainArgs,
    ex: &Explained,
    coll: Coll,
    path: &str,
    sizes: &[u64],
    calibrated: bool,
) -> Result<()> {
    let svg = out::plot_svg(&ex.model, coll, sizes, args.ops, Some(&ex.expected))?;
    crate::fsio::write_output(path, svg.as_bytes())?;
    eprintln!("planner: wrote {path}");
    if calibrated {
        eprintln!("planner: the plot shows NCCL's model; `planner calibrate --plot` draws the calibrated one");
    }
    Ok(())
}

fn run_sweep(
    args: &ExplainArgs,
    ex: &Explained,
    coll: Coll,
    sizes: &[u64],
    calibration: Option<&calibrate::Calibration>,
) -> Result<()> {
    let model = &ex.model;
    let sweep = model.sweep(coll, sizes, args.ops)?;
    let calibrated = match calibration {
        Some(cal) => Some(calibrate::calibrate_sweep(cal, model, &sweep)?),
        None => None,
    };
    let possible = possible_bands(model, &ex.small, coll, sizes, args.ops)?;
    // planner's expected model times single calls: left out with several ops per group.
    let expected = (args.ops == 1).then(|| out::ExpectedSweep::new(&ex.expected, &sweep));
    if args.json {
        let mut json =
            out::sweep_json_calibrated(model, &sweep, calibrated.as_ref(), expected.as_ref());
        json.possible = possible;
        return write_json_with_env(&json, &ex.applied, "");
    }
    print!("{}", crate::report::text(&out::sweep_text(model, &sweep)));
    if let Some(expected) = &expected {
        let bands = expected.bands(&sweep);
        print!("{}", crate::report::text(&out::expected_sweep_text(&bands)));
    }
    // Before the calibrated map: the stock model's view stays a prefix of the calibrated output.
    match &possible {
        Some(bands) => print!("{}", crate::report::text(&out::possible_text(bands))),
        None => println!("{ONE_OP_ONLY}"),
    }
    if let (Some(c), Some(cal)) = (&calibrated, calibration) {
        print!("{}", crate::report::text(&out::calibrated_sweep_text(c)));
        let (measured, unmeasured) = measured_pairs(model, cal, coll, sizes, args.ops)?;
        print!(
            "{}",
            crate::report::text(&out::calibrated_sweep_unmeasured_text(
                &measured,
                &unmeasured
            ))
        );
    }
    Ok(())
}

/// The pairs NCCL's model allows at some size of the sweep, split into those the calibration has a time for and
/// those it has not (in NCCL's candidate order).
fn measured_pairs(
    model: &crate::model::Model,
    cal: &calibrate::Calibration,
    coll: Coll,
    sizes: &[u64],
    ops: usize,
) -> Result<(Vec<String>, Vec<String>)> {
    let mut allowed: Vec<crate::model::Pair> = Vec::new();
    for &size in sizes {
        let Ok(call) = Call::new(coll, size, model.input.n_ranks, ops) else {
            continue;
        };
        for c in model
            .evaluate(&call)?
            .candidates
            .iter()
            .filter(|c| c.usable())
        {
            let pair = crate::model::Pair::new(c.algo, c.proto);
            if !allowed.contains(&pair) {
                allowed.push(pair);
            }
        }
    }
    let calibrated: Vec<crate::model::Pair> = cal
        .pairs
        .iter()
        .filter(|p| p.coll == coll)
        .map(|p| p.pair())
        .collect();
    let (measured, unmeasured): (Vec<_>, Vec<_>) =
        allowed.into_iter().partition(|p| calibrated.contains(p));
    let names = |v: Vec<crate::model::Pair>| v.iter().map(|p| p.to_string()).collect();
    Ok((names(measured), names(unmeasured)))
}

fn run_single(
    args: &ExplainArgs,
    ex: &Explained,
    coll: Coll,
    size: u64,
    calibration: Option<&calibrate::Calibration>,
) -> Result<()> {
    let (model, small) = (&ex.model, &ex.small);
    let call = Call::new(coll, size, model.input.n_ranks, args.ops)?;
    let eval = model.evaluate(&call)?;
    let calibrated = calibration.map(|cal| calibrate::calibrate_call(cal, &eval));
    let single_op = args.ops == 1;
    // planner's expected model times single calls: its columns are left out with several ops per group.
    let expected = single_op.then(|| ex.expected.all(coll, size));
    if args.json {
        let mut json = out::explain_json_calibrated(model, &eval, calibrated.as_ref());
        if let Some(expected) = &expected {
            out::add_expected(&mut json, expected);
            json.symmetric = out::symmetric_json(small, &call);
            json.beyond_nccl = Some(out::beyond_json(small, &call));
            json.possible = Some(out::possible(small, &eval));
        }
        return write_json_with_env(&json, &ex.applied, "");
    }
    let text = out::explain_text_calibrated(model, &eval, calibrated.as_ref(), expected.as_deref());
    print!("{}", crate::report::text(&text));
    if !single_op {
        println!("{ONE_OP_ONLY}");
        return Ok(());
    }
    print!(
        "{}",
        crate::report::text(&out::symmetric_text(small, &call))
    );
    print!("{}", crate::report::text(&out::beyond_text(small, &call)));
    let p = out::possible(small, &eval);
    print!(
        "{}",
        crate::report::text(&out::possible_text(&out::possible_bands(vec![p])))
    );
    Ok(())
}

/// Why the symmetric and beyond-NCCL views are left out with `--ops`.
const ONE_OP_ONLY: &str =
    "NCCL's symmetric kernels and planner's own are shown for single calls only (--ops 1)";

/// The "what is possible" bands of a sweep (None with several ops per group:
/// symmetric kernels and planner's own are timed per call).
fn possible_bands(
    model: &crate::model::Model,
    small: &out::SmallMessageContext,
    coll: Coll,
    sizes: &[u64],
    ops: usize,
) -> Result<Option<Vec<out::PossibleBandJson>>> {
    if ops != 1 {
        return Ok(None);
    }
    let mut points = Vec::new();
    for &size in sizes {
        // Sizes too small for the collective are the sweep's "Skipped" line.
        let Ok(call) = Call::new(coll, size, model.input.n_ranks, 1) else {
            continue;
        };
        points.push(out::possible(small, &model.evaluate(&call)?));
    }
    Ok(Some(out::possible_bands(points)))
}

/// With GPU-to-GPU P2P off (`NCCL_P2P_DISABLE=1`, `NCCL_P2P_LEVEL` below NVL) NCCL still runs NVLS: its setup asks
/// only `NCCL_NVLS_ENABLE` and the multicast attribute (nvls.cc:248-279), and its NVLS search follows the GPU<->NVSwitch
/// paths (search.cc:410-440), which P2P does not change (paths.cc:762-775 diverts GPU<->GPU paths only). But the search
/// starts at the smallest GPU<->GPU path type (search.cc:1088-1091), now PHB, so the NVLS graph's typeIntra is PHB,
/// NCCL prices it with its PCI latency row (tuning.cc:285), whose NVLS entry is 0 (tuning.cc:167), and the bandwidth
/// from bwIntra as before (tuning.cc:307-324). The model keeps NCCL's numbers (they decide NCCL's pick) and says so.
fn nvls_priced_as_pci(model: &crate::model::Model) -> Option<String> {
    use crate::topo::PathType;
    let input = &model.input;
    let nvls = &input.nvls;
    let p2p_off = model.env.p2p_level.is_some_and(|l| l < PathType::Nvl);
    if !p2p_off
        || !input.nvls_state.supported()
        || input.n_nodes != 1
        || nvls.type_intra == PathType::Nvl
    {
        return None;
    }
    Some(format!(
        "NVLS runs without CUDA P2P (multicast over NVLink), and NCCL prices it at 0 µs latency: with P2P off its \
         NVLS graph has typeIntra {} and NCCL reads its PCI latency row, whose NVLS entry is 0 (tuning.cc:167,285); \
         the NVLS bandwidth is unchanged. planner shows NCCL's numbers, which decide NCCL's pick.",
        nvls.type_intra.nccl_name()
    ))
}

/// NCCL_MAX_NCHANNELS / NCCL_MAX_CTAS below the channels NCCL would build: NCCL runs fewer channels but prices
/// every algorithm with its graph's search channels (tuning.cc:324 `busBw = graphs[a]->nChannels * bw`), so its
/// times, and the model's, do not grow; only `nc` per call is capped (enqueue.cc).
fn fewer_channels_same_times(model: &crate::model::Model) -> Option<String> {
    let bounds = model.env.channel_bounds();
    let built = 2 * model.input.ring.n_channels;
    (bounds.max < built).then(|| {
        format!(
            "NCCL runs {} channels under NCCL_MAX_NCHANNELS/NCCL_MAX_CTAS, yet prices each algorithm with its \
             graph's {} search channels (tuning.cc:324): its times do not grow with fewer channels, nor do these",
            model.input.channels,
            model.input.ring.n_channels
        )
    })
}
