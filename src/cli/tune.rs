//! `planner tune`: flags, and the thin glue between `crate::tune` and the output.

use super::source::{nvls_flag, GraphArgs, OnOff, SourceArgs};
use crate::error::{Error, Result};
use crate::tune::{self, render, TuneInput, TuneRequest, DEFAULT_MARGIN_PERCENT};

/// The plan file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum PlanFormat {
    // Plain comments: a doc comment here would give `tune --help` clap's long layout.
    // The plan the planner tuner plugin reads (PLANNER_TUNER_PLAN).
    Json,
    // The CSV config of NCCL's example tuner plugin (nccl_tuner.conf).
    NcclCsv,
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["from", "calibration", "show", "expected"])))]
pub(crate) struct TuneArgs {
    /// With --calibration: the topology for the stock model's pick (default: the calibration's verify files)
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    /// Make the plan from a `planner verify` result file: per size the fastest pair NCCL ran (NCCL backend rows)
    #[arg(long, value_name = "RESULTS.json")]
    pub(crate) from: Option<String>,
    /// Make the plan from a calibration file: per size the calibrated model's pick (--topo/--fixture: the topology
    /// for the stock model's pick; default: the calibration's verify files)
    #[arg(long, value_name = "CAL.json")]
    pub(crate) calibration: Option<String>,
    /// Print the bands of a plan file, or the rules of NCCL's example tuner config (nccl_tuner.conf, CSV)
    #[arg(long, value_name = "PLAN.json|FILE.conf")]
    pub(crate) show: Option<String>,
    /// Make the plan from planner's expected model of the topology (--fixture/--topo, --nodes, NCCL_* env), without
    /// any measurement: per size the expected fastest pair NCCL can run (the plan says no measurement was used)
    #[arg(long)]
    pub(crate) expected: bool,
    #[command(flatten)]
    pub(crate) graph: GraphArgs,
    /// With --expected: NCCL version family whose tuning table gives NCCL's own pick (2.18 to 2.31, or a full
    /// version such as 2.28.3, recorded in the plan; default: the libnccl on this machine, else the newest)
    #[arg(long, value_name = "VERSION", requires = "expected")]
    pub(crate) nccl_version: Option<String>,
    /// With --expected: launch mode, eager (nccl-tests' and PyTorch's default) or graph (CUDA graphs)
    #[arg(long, value_name = "eager|graph", requires = "expected")]
    pub(crate) launch: Option<String>,
    /// With --expected: network between nodes: ib, roce, efa, tcpx, tcpxo, socket (default: from the NIC names)
    #[arg(long, value_name = "KIND", requires = "expected")]
    pub(crate) net_kind: Option<String>,
    /// With --expected: NVLink SHARP on/off (overrides NCCL_NVLS_ENABLE; default: NCCL's rule)
    #[arg(long, value_enum, value_name = "on|off", requires = "expected")]
    pub(crate) nvls: Option<OnOff>,
    /// Write the plan here
    #[arg(
        short = 'o',
        long = "out",
        value_name = "PLAN.json",
        required_unless_present = "show",
        conflicts_with = "show"
    )]
    pub(crate) out: Option<String>,
    /// Plan format: json (the planner plugin's PLANNER_TUNER_PLAN) or nccl-csv (nccl_tuner.conf of NCCL's example tuner plugin)
    #[arg(long, value_enum, default_value = "json", conflicts_with = "show")]
    pub(crate) format: PlanFormat,
    /// Keep NCCL's own choice unless another pair is faster by more than this many percent
    #[arg(long, value_name = "PERCENT", default_value_t = DEFAULT_MARGIN_PERCENT, conflicts_with = "show")]
    pub(crate) margin: f64,
    /// Ranks of the communicator, where the input does not say
    #[arg(long, value_name = "N", conflicts_with_all = ["show", "expected"])]
    pub(crate) ranks: Option<u32>,
    /// Machine-readable output on stdout (docs/json.md)
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) fn run(args: TuneArgs) -> Result<()> {
    let source = &args.source;
    if let Some(path) = &args.show {
        source.refuse_with("--show", "a plan file carries its own bands")?;
        // NCCL's example tuner config (CSV) or planner's plan (JSON), told apart by content.
        let text = crate::fsio::read_input_file(path)?;
        if crate::audit::tuner_csv::looks_like_csv(&text) {
            let csv = crate::audit::tuner_csv::TunerCsv::parse(&text, path)?;
            if args.json {
                println!("{}", pretty(render::nccl_csv_json(&csv))?);
            } else {
                print!("{}", crate::report::text(&render::nccl_csv_table(&csv)));
            }
            return Ok(());
        }
        let plan = tune::load_plan(path)?;
        if args.json {
            println!("{}", pretty(render::plan_json(&plan))?);
        } else {
            print!("{}", crate::report::text(&render::plan_table(&plan)));
        }
        return Ok(());
    }
    if args.graph.graph.is_some() && !args.expected {
        return Err(Error::bad_input(
            "--graph is used only with --expected (a result file or calibration carries its own topology)",
        ));
    }
    if args.expected {
        return run_expected(&args);
    }
    let (input, every_size) = match (&args.from, &args.calibration) {
        (Some(path), _) => {
            // Not silently ignored: only a calibration takes the topology for the stock model.
            source.refuse_with(
                "--from",
                "a result file's plan uses its own rows, not a topology",
            )?;
            (TuneInput::Verify(path.clone()), true)
        }
        (None, Some(path)) => (TuneInput::Calibration(path.clone()), false),
        (None, None) => return Err(Error::bad_input("give --from, --calibration or --show")),
    };
    let source = source.source();
    let request = TuneRequest {
        input,
        margin_percent: args.margin,
        ranks: args.ranks,
        topology: source.is_explicit().then_some(source),
    };
    let tuned = tune::make(&request)?;
    for note in &tuned.notes {
        eprintln!("planner: {note}");
    }
    let text = match args.format {
        // The plan is made from the input: one the plugin could not read (too many bands) is that input's fault.
        PlanFormat::Json => tuned.plan.to_json().map_err(|e| {
            Error::bad_input(format!(
                "{}: the plan made from it cannot be written: {e}",
                request.input.path()
            ))
        })?,
        PlanFormat::NcclCsv => tuned.plan.to_nccl_csv(),
    };
    let out = args.out.as_deref().unwrap_or("plan.json");
    crate::fsio::write_output(out, text.as_bytes())?;
    if args.json {
        println!("{}", pretty(render::tuned_json(&tuned))?);
    } else {
        print!(
            "{}",
            crate::report::text(&render::decisions_table(&tuned.decisions, every_size))
        );
        print!("{}", crate::report::text(&render::plan_table(&tuned.plan)));
    }
    eprintln!(
        "planner: wrote {out} ({})",
        crate::units::count(tuned.plan.rules.len(), "rule")
    );
    Ok(())
}

/// `planner tune --expected`: the expected model of the topology, no measurement.
fn run_expected(args: &TuneArgs) -> Result<()> {
    use crate::expect::{ExpectOptions, Launch, NetKind, Params};
    let request = tune::expected::ExpectedRequest {
        source: args.source.source(),
        graph: args.graph.graph.clone(),
        table: crate::pipeline::choose_table(None, args.nccl_version.as_deref(), None)?,
        nccl_version: args.nccl_version.clone(),
        nvls: nvls_flag(args.nvls),
        options: ExpectOptions {
            launch: Launch::parse(args.launch.as_deref().unwrap_or("eager"))?,
            net_kind: args.net_kind.as_deref().map(NetKind::parse).transpose()?,
            gpus_per_thread: 1,
        },
        params: Params::builtin()?,
        margin_percent: args.margin,
    };
    let tuned = tune::expected::make(&request)?;
    for note in &tuned.notes {
        eprintln!("planner: {note}");
    }
    let text = match args.format {
        PlanFormat::Json => tuned
            .plan
            .to_json()
            .map_err(|e| Error::runtime(format!("the expected plan cannot be written: {e}")))?,
        PlanFormat::NcclCsv => tuned.plan.to_nccl_csv(),
    };
    let out = args.out.as_deref().unwrap_or("plan.json");
    crate::fsio::write_output(out, text.as_bytes())?;
    if args.json {
        println!("{}", pretty(render::tuned_json(&tuned))?);
    } else {
        println!("{}", tune::expected::NO_MEASUREMENT);
        print!(
            "{}",
            crate::report::text(&tune::expected::decisions_table(&tuned.decisions))
        );
        print!("{}", crate::report::text(&render::plan_table(&tuned.plan)));
    }
    for line in args.source.nccl_env.announce_lines() {
        eprintln!("{line}");
    }
    eprintln!("planner: wrote {out} ({} rules)", tuned.plan.rules.len());
    Ok(())
}

fn pretty(value: serde_json::Value) -> Result<String> {
    crate::report::json::render_value(value, "")
}
