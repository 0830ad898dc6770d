//! `planner verify`: flags, and the thin glue between the stages and the report.

use super::source::SourceArgs;
use crate::error::{Error, Result};
use crate::model::Coll;
use crate::nccl;
use crate::report::verify as report;
use crate::topo::{build, paths::PathOptions, Cluster};
use crate::units::{parse_size, parse_size_range};
use crate::verify::rendezvous::{LauncherEnv, Rendezvous};
use crate::verify::run::{self, Progress, TopologyRecord, VerifyRequest};
use crate::verify::score::{self, ModelPredictor, NoModel, Predictor};
use crate::verify::{Backend, Dtype, IterPlan, PairSelection, VerifyRun};
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Sizes to measure: one size or a range LO..HI doubling each step
    #[arg(long, default_value = "8..4G", value_name = "RANGE")]
    pub sizes: String,
    /// Coll: all-reduce, all-gather, reduce-scatter, broadcast, reduce
    #[arg(long, default_value = "all-reduce", value_name = "NAME")]
    pub coll: String,
    /// Pairs: all (Ring and Tree with LL, LL128, Simple), winner (the model's pick per size), or a list such as Ring/LL,Tree/Simple
    #[arg(long, default_value = "all", value_name = "LIST")]
    pub pairs: String,
    /// Executor: native (our kernels), nccl (libnccl, each pair pinned), or both
    #[arg(long, default_value = "both", value_name = "WHICH")]
    pub backend: String,
    /// Calls per timed loop (fewer at large sizes, see --loop-cap)
    #[arg(long, default_value_t = 20)]
    pub iters: u32,
    /// Untimed calls before the first loop
    #[arg(long, default_value_t = 5)]
    pub warmup: u32,
    /// Timed loops per size and pair; the median and p99 are over these
    #[arg(long, default_value_t = 5)]
    pub repeats: u32,
    /// Most bytes one timed loop moves; above it a loop has fewer calls (at least one)
    #[arg(long, default_value = "4G", value_name = "SIZE")]
    pub loop_cap: String,
    /// Capture each timed loop in a CUDA graph and replay it (as nccl-tests -G)
    #[arg(long)]
    pub cuda_graph: bool,
    /// Element type: f32, bf16, f16
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Seconds to wait for one size (and for the ranks to meet) before giving up
    #[arg(long, default_value_t = 60, value_name = "S")]
    pub timeout: u64,
    /// Use only the first N GPUs of this machine
    #[arg(long, value_name = "N")]
    pub gpus: Option<usize>,
    /// Write the result file here (default planner-verify-<time>.json)
    #[arg(long, value_name = "FILE")]
    pub out: Option<String>,
    /// Re-render and re-score a saved result file (no GPU needed)
    #[arg(long, value_name = "FILE")]
    pub load: Option<String>,
    /// Machine-readable output on stdout
    #[arg(long)]
    pub json: bool,
    /// Also write every row as CSV
    #[arg(long, value_name = "FILE")]
    pub csv: Option<String>,
    /// Also draw measured and predicted time against size (SVG)
    #[arg(long, value_name = "FILE")]
    pub plot: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct RendezvousCheckArgs {
    /// Seconds to wait for every rank
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
}

/// Runtime channels of the native executor's rings and trees when the
/// search cannot say (NCCL's count on the 2 x H200 capture: 12 search
/// channels, doubled).
const NATIVE_CHANNELS: usize = 24;

fn request_from(args: &VerifyArgs) -> Result<VerifyRequest> {
    let plan = IterPlan {
        iters: args.iters,
        warmup: args.warmup,
        repeats: args.repeats,
        loop_bytes_cap: parse_size(&args.loop_cap)
            .map_err(|e| Error::bad_input(format!("--loop-cap: {e}")))?,
    };
    plan.check()?;
    if args.timeout == 0 {
        return Err(Error::bad_input(
            "invalid --timeout 0: give seconds, at least 1",
        ));
    }
    Ok(VerifyRequest {
        collective: Coll::parse(&args.coll)?,
        dtype: Dtype::parse(&args.dtype)?,
        sizes: parse_size_range(&args.sizes)
            .map_err(|e| Error::bad_input(format!("--sizes: {e}")))?,
        pairs: PairSelection::parse(&args.pairs)?,
        pairs_text: args.pairs.clone(),
        backends: Backend::parse_list(&args.backend)?,
        plan,
        graph: args.cuda_graph,
        timeout: Duration::from_secs(args.timeout),
        gpus: args.gpus,
    })
}

/// A progress bar on stderr.
struct Bar(indicatif::ProgressBar);

impl Bar {
    fn new() -> Bar {
        let bar = indicatif::ProgressBar::new(0);
        if let Ok(style) =
            indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed_precise} {msg}")
        {
            bar.set_style(style);
        }
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        Bar(bar)
    }
}

impl Progress for Bar {
    fn start(&self, total: u64) {
        self.0.set_length(total);
    }
    fn job(&self, label: &str) {
        self.0.set_message(label.to_string());
    }
    fn step(&self, label: &str) {
        self.0.set_message(label.to_string());
        self.0.inc(1);
    }
    fn note(&self, text: &str) {
        self.0.suspend(|| eprintln!("planner: {text}"));
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

fn output(run: &VerifyRun, predictor: &dyn Predictor, args: &VerifyArgs) -> Result<()> {
    let scored = score::score(run, predictor);
    if let Some(path) = &args.csv {
        std::fs::write(path, report::render_csv(&scored))
            .map_err(|e| Error::runtime(format!("{path}: cannot write: {e}")))?;
    }
    if let Some(path) = &args.plot {
        std::fs::write(path, report::render_svg(run, &scored)?)
            .map_err(|e| Error::runtime(format!("{path}: cannot write: {e}")))?;
    }
    if args.json {
        println!("{}", report::render_json(run, &scored)?);
    } else {
        print!("{}", report::render_text(run, &scored));
    }
    Ok(())
}

/// The machine's topology for the model before measuring: what the user
/// chose (--fixture/--topo), else the live probe; never the built-in default
/// fixture, which would describe another machine.
fn topology_before(source: &SourceArgs) -> Option<Cluster> {
    let explicit = source.fixture.is_some() || source.topo.is_some();
    let loaded = if explicit {
        source.load()
    } else {
        match crate::probe::probe() {
            Ok(root) => PathOptions::from_env()
                .and_then(|opts| build::from_xml_with(&root, "live probe", &opts))
                .map(|node| Cluster {
                    node,
                    n_nodes: source.nodes,
                    net_latency_us: source.net_latency,
                }),
            Err(crate::probe::ProbeError::Unavailable(_)) => return None,
            Err(crate::probe::ProbeError::Failed(e)) => Err(e),
        }
    };
    match loaded {
        Ok(cluster) => Some(cluster),
        Err(e) => {
            eprintln!("planner: no topology for the model before the run ({e})");
            None
        }
    }
}

fn record_of(cluster: &Cluster) -> TopologyRecord {
    TopologyRecord {
        source: cluster.node.source.clone(),
        xml: Some(crate::xml::write(&cluster.node.xml)),
        nodes: cluster.n_nodes,
        net_latency_us: cluster.net_latency_us,
    }
}

pub fn run(args: VerifyArgs, source: &SourceArgs) -> Result<()> {
    if let Some(path) = &args.load {
        let run = VerifyRun::load(path)?;
        let predictor = score::predictor_for_run(&run);
        return output(&run, predictor.as_ref(), &args);
    }
    let request = request_from(&args)?;
    let before = topology_before(source);
    let library = nccl::library_version().ok();
    let planning: Box<dyn Predictor> = match &before {
        Some(cluster) => match ModelPredictor::new(cluster, None, library.as_deref()) {
            Ok(p) => Box::new(p),
            Err(e) => {
                eprintln!("planner: the model cannot run before the run ({e})");
                Box::new(NoModel)
            }
        },
        None => Box::new(NoModel),
    };
    let topology = match &before {
        Some(cluster) => record_of(cluster),
        None => TopologyRecord {
            source: "NCCL's topology dump (rank 0)".into(),
            nodes: source.nodes,
            net_latency_us: source.net_latency,
            ..Default::default()
        },
    };
    let exe = std::env::current_exe().map_err(|e| {
        Error::runtime(format!(
            "cannot find the planner binary to start NCCL children: {e}"
        ))
    })?;
    let bar = Bar::new();
    let mut run = match LauncherEnv::from_env()? {
        Some(env) => {
            match run::run_distributed(&exe, &env, &request, &topology, planning.as_ref(), &bar)? {
                Some(run) => run,
                None => return Ok(()), // not rank 0: rank 0 prints
            }
        }
        None => {
            let native = crate::verify::native::NativeExec {
                channels: NATIVE_CHANNELS,
            };
            run::run_local(
                &exe,
                &request,
                &topology,
                planning.as_ref(),
                Some(&native),
                &bar,
            )?
        }
    };
    // Predictions: the planner's topology if it had one, else NCCL's own dump;
    // the planner's search if it runs, else NCCL's graph dump.
    if before.is_none() {
        if let Some(dump) = &run.machine.nccl_topology_xml {
            run.machine.topology_hash = format!("{:016x}", crate::verify::fnv1a64(dump.as_bytes()));
        }
    }
    let hosts = run.machine.hosts.len();
    run.machine.nodes = run.machine.nodes.max(hosts).max(1);
    let path = args
        .out
        .clone()
        .unwrap_or_else(|| run::default_result_path().to_string_lossy().into_owned());
    let (predictions, label) = {
        let predictor = score::predictor_for_run(&run);
        let coll = run.options.collective;
        let predictions: Vec<Option<f64>> = run
            .rows
            .iter()
            .map(|r| r.pair.and_then(|p| predictor.predict_us(coll, p, r.bytes)))
            .collect();
        (predictions, predictor.label())
    };
    for (row, predicted) in run.rows.iter_mut().zip(predictions) {
        row.predicted_us = predicted;
    }
    run.options.model = Some(label);
    run.save(&path)?;
    eprintln!("planner: result file {path}");
    let predictor = score::predictor_for_run(&run);
    output(&run, predictor.as_ref(), &args)
}

/// The hidden child of the NCCL backend.
pub fn nccl_child() -> Result<()> {
    crate::nccl::child::child_main()
}

/// Hidden: join the launcher's rendezvous, pass an id from rank 0 to every
/// rank, and print it (tests run two of these as two processes).
pub fn rendezvous_check(args: RendezvousCheckArgs) -> Result<()> {
    let env = LauncherEnv::from_env()?.ok_or_else(|| {
        Error::bad_input("no launcher variables (RANK/WORLD_SIZE with MASTER_ADDR/MASTER_PORT, or the MPI/Slurm ones)")
    })?;
    let mut rv = Rendezvous::join(&env, Duration::from_secs(args.timeout))?;
    let id = if env.rank == 0 {
        // An NCCL id where libnccl is present, else 128 bytes that differ per run.
        let hex = nccl::new_unique_id_hex().unwrap_or_else(|_| {
            let seed = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
            let mut bytes = [0u8; 128];
            for (i, chunk) in bytes.chunks_mut(8).enumerate() {
                let h = crate::verify::fnv1a64(format!("{seed}-{i}").as_bytes());
                chunk.copy_from_slice(&h.to_le_bytes());
            }
            nccl::id_to_hex(&bytes)
        });
        rv.broadcast(Some(hex.as_bytes()))?
    } else {
        rv.broadcast(None)?
    };
    let id = String::from_utf8_lossy(&id).into_owned();
    nccl::id_from_hex(&id)?;
    let all = rv.gather(format!("{}:{id}", env.rank).as_bytes())?;
    println!("rank {} of {} got id {id}", env.rank, env.world_size);
    if let Some(all) = all {
        let same = all
            .iter()
            .all(|m| String::from_utf8_lossy(m).ends_with(&format!(":{id}")));
        println!(
            "rank 0: {} ranks joined from {}; ids agree: {same}",
            all.len(),
            rv.hosts.join(", ")
        );
        if !same {
            return Err(Error::runtime(
                "rendezvous check: the ranks hold different ids",
            ));
        }
    }
    Ok(())
}
