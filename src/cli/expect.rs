//! `planner expect`: what nccl-tests should print on this machine, per collective and size, from planner's
//! expected model (not NCCL's estimate). `--fit` fits the model's constants to measurements and prints the
//! training-set and leave-one-machine-out errors. Thin: parse flags, call `expect`, hand to `report`.

use super::source::{GraphArgs, ModelArgs, NvlsArgs, SizeArgs, SourceArgs};
use crate::error::{Error, Result};
use crate::expect::{self, ExpectOptions, Launch, NetKind};
use crate::report::expect as out;

#[derive(Debug, clap::Args)]
#[command(
    mut_arg("size", |a| a.help("One message size in bytes, binary units (16K, 16M = 16 MiB, 1G) [default: the --sweep]")),
    mut_arg("sweep", |a| a.help("A range of sizes LO..HI, both included, doubling each step, as nccl-tests -b LO -e HI -f 2 [default: 8..8G]"))
)]
pub(crate) struct ExpectArgs {
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    #[command(flatten)]
    pub(crate) graph: GraphArgs,
    /// --size S, or --sweep LO..HI (default 8..8G, as `nccl-tests -b 8 -e 8G -f 2`)
    #[command(flatten)]
    pub(crate) sizes: SizeArgs,
    /// Collectives, comma-separated (all-reduce, all-gather, reduce-scatter, broadcast, reduce) or "all"
    #[arg(long, default_value = "all")]
    pub(crate) coll: String,
    /// Algorithms allowed, NCCL_ALGO syntax (pins what nccl-tests would run); overrides NCCL_ALGO
    #[arg(long, value_name = "LIST")]
    pub(crate) algo: Option<String>,
    /// Protocols allowed, NCCL_PROTO syntax; overrides NCCL_PROTO
    #[arg(long, value_name = "LIST")]
    pub(crate) proto: Option<String>,
    /// Launch mode: eager (nccl-tests' default) or graph (nccl-tests -G 1)
    #[arg(long, default_value = "eager", value_name = "eager|graph")]
    pub(crate) launch: String,
    /// GPUs one host thread drives, as nccl-tests -g N (default 1: one process per GPU, as mpirun -np 8 or PyTorch);
    /// under eager launch each further GPU adds its kernel launch to the host's cost of a call
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub(crate) gpus_per_thread: usize,
    /// Network between nodes: ib, roce, efa, tcpx, tcpxo, socket (default: from the NIC names)
    #[arg(long, value_name = "KIND")]
    pub(crate) net_kind: Option<String>,
    #[command(flatten)]
    pub(crate) nvls: NvlsArgs,
    #[command(flatten)]
    pub(crate) model: ModelArgs,
    /// The expected model's constants from this directory (the files of tuning-tables/expect/) instead of the built-in
    #[arg(long, value_name = "DIR")]
    pub(crate) params: Option<String>,
    /// Fit the constants marked "fit" to measurements (points.csv of tests/data/expect-train) and print the
    /// training-set and leave-one-machine-out error per class; no topology flags
    #[arg(long, value_name = "POINTS.csv", conflicts_with_all = ["fixture", "topo", "size", "sweep", "json", "csv"])]
    pub(crate) fit: Option<String>,
    /// With --fit: write the fitted constants and bands into this directory (a copy of tuning-tables/expect)
    #[arg(long, value_name = "DIR", requires = "fit")]
    pub(crate) write: Option<String>,
    /// With --fit: write every point (measured, fitted, left-out expected, NCCL's estimate) as CSV to FILE
    #[arg(long, value_name = "FILE", requires = "fit")]
    pub(crate) points_out: Option<String>,
    /// Machine-readable output (docs/json.md)
    #[arg(long)]
    pub(crate) json: bool,
    /// Also write the rows as CSV to FILE
    #[arg(long, value_name = "FILE")]
    pub(crate) csv: Option<String>,
}

pub(crate) fn run(args: ExpectArgs) -> Result<()> {
    if let Some(points) = &args.fit {
        let params = match &args.params {
            Some(dir) => expect::Params::load_dir(dir)?,
            None => expect::Params::builtin()?,
        };
        let report = expect::fit::run_fit(
            points,
            &params,
            args.write.as_deref(),
            args.points_out.as_deref(),
        )?;
        print!("{}", out::fit_text(&report));
        return Ok(());
    }
    let colls = super::diff::colls(&args.coll)?;
    let sizes = args.sizes.sizes("8..8G")?;
    SizeArgs::as_run(&sizes, 4, "float32");
    if args.gpus_per_thread == 0 {
        return Err(Error::bad_input(
            "--gpus-per-thread 0: a host thread drives at least 1 GPU (nccl-tests -g N, N >= 1)",
        ));
    }
    let opts = ExpectOptions {
        launch: Launch::parse(&args.launch)?,
        net_kind: args.net_kind.as_deref().map(NetKind::parse).transpose()?,
        gpus_per_thread: args.gpus_per_thread,
    };
    let mut env = args.source.nccl_env.clone();
    if let Some(a) = &args.algo {
        env.algo = Some(a.clone());
        env.overridden("NCCL_ALGO");
    }
    if let Some(p) = &args.proto {
        env.proto = Some(p.clone());
        env.overridden("NCCL_PROTO");
    }
    super::source::preflight::algo_proto(args.algo.as_deref(), args.proto.as_deref())?;
    super::source::preflight::sizes(&sizes, args.sizes.size.is_some(), 1)?;
    super::source::preflight::output(args.csv.as_deref())?;
    super::source::preflight::input(args.graph.graph.as_deref())?;
    super::source::preflight::input_dir("--params", args.params.as_deref())?;
    let table = args.model.table(None)?;
    let cluster = args.source.source().load()?;
    let node_gpus = cluster.node.gpu_count();
    if args.gpus_per_thread > node_gpus {
        return Err(Error::bad_input(format!(
            "--gpus-per-thread {}: more than the {} of a node here (nccl-tests -g drives GPUs of its own host)",
            args.gpus_per_thread,
            crate::units::count(node_gpus, "GPU")
        )));
    }
    let params = match &args.params {
        Some(dir) => expect::Params::load_dir(dir)?,
        None => expect::Params::builtin()?,
    };
    let (_model, expected) = expect::build_with(
        &cluster,
        args.graph.graph.as_deref(),
        table,
        env.clone(),
        args.nvls.flag(),
        &opts,
        &params,
    )?;
    let table = out::ExpectTable::new(&expected, &cluster.node.source, &colls, &sizes);
    if table.rows.is_empty() {
        return Err(Error::bad_input(
            "no size gives a call here (sizes are float32 counts; all-gather/reduce-scatter need 16 B per rank)",
        ));
    }
    if let Some(path) = &args.csv {
        crate::fsio::write_output(path, out::csv(&table).as_bytes())?;
    }
    if args.json {
        println!("{}", crate::report::json::render(&table, "rows")?);
    } else {
        print!("{}", crate::report::text(&out::text(&table)));
    }
    for line in env.announce_lines() {
        eprintln!("{line}");
    }
    Ok(())
}
