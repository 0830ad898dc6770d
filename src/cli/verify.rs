//! `planner verify`: flags, and the thin glue between the stages and the report.

use super::source::{SizeArgs, SourceArgs};
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::measure::Backend;
use crate::measure::IterPlan;
use crate::model::Coll;
use crate::nccl;
use crate::predict::Predictor;
use crate::report::verify as report;
use crate::result_file::VerifyRun;
use crate::units::parse_size;
use crate::verify::rendezvous::{LauncherEnv, Rendezvous};
use crate::verify::run::{Progress, VerifyRequest};
use crate::verify::score;
use crate::verify::session;
use crate::verify::tuner::TunerSetup;
use crate::verify::PairSelection;
use std::time::Duration;

#[derive(Debug, clap::Args)]
#[command(
    mut_arg("size", |a| a.help("One message size in bytes, binary units (16K, 16M = 16 MiB, 1G) [default: the --sweep]")),
    mut_arg("sweep", |a| a.help("A range of sizes LO..HI, both included, doubling each step [default: 8..4G]"))
)]
pub(crate) struct VerifyArgs {
    /// The topology for the model's predictions (default: the probe of this machine)
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    /// Sizes to measure: --size S (one) or --sweep LO..HI (doubling each step); default 8..4G
    #[command(flatten)]
    pub(crate) sizes: SizeArgs,
    /// Collective: all-reduce, all-gather, reduce-scatter, broadcast, reduce
    #[arg(long, default_value = "all-reduce", value_name = "NAME")]
    pub(crate) coll: String,
    /// Pairs: all (Ring and Tree with LL, LL128, Simple), winner (the model's pick per size), or a list such as Ring/LL,Tree/Simple
    #[arg(long, default_value = "all", value_name = "LIST")]
    pub(crate) pair: String,
    /// Executor: native (our kernels), nccl (libnccl, each pair pinned, and its free choice), nccl-symm (libnccl's free choice on symmetric windows), both (native and nccl), or a list such as nccl,nccl-symm
    #[arg(long, default_value = "both", value_name = "WHICH")]
    pub(crate) backend: String,
    /// With the nccl backend: also run NCCL's free choice with the planner tuner plugin steering it by this plan (the `tuned` row beside `auto`)
    #[arg(long, value_name = "PLAN")]
    pub(crate) tuner: Option<String>,
    /// The tuner plugin for --tuner (default: libnccl_tuner_planner.so next to the planner binary)
    #[arg(long, value_name = "PATH")]
    pub(crate) tuner_plugin: Option<String>,
    /// Calls per timed loop (fewer at large sizes, see --loop-cap)
    #[arg(long, default_value_t = 20)]
    pub(crate) iters: u32,
    /// Untimed calls before the first loop
    #[arg(long, default_value_t = 5)]
    pub(crate) warmup: u32,
    /// Timed loops per size and pair; the median and maximum are over these (a p99 from 100 on)
    #[arg(long, default_value_t = 5)]
    pub(crate) repeats: u32,
    /// Most bytes one timed loop moves; above it a loop has fewer calls (at least one)
    #[arg(long, default_value = "4G", value_name = "SIZE")]
    pub(crate) loop_cap: String,
    /// Capture each timed loop in a CUDA graph and replay it (as nccl-tests -G)
    #[arg(long)]
    pub(crate) cuda_graph: bool,
    /// Element type: f32, bf16, f16
    #[arg(long, default_value = "f32")]
    pub(crate) dtype: String,
    /// Seconds to wait for one size (and for the ranks to meet) before giving up
    #[arg(long, default_value_t = 60, value_name = "S")]
    pub(crate) timeout: u64,
    /// Use only the first N GPUs of this machine
    #[arg(long, value_name = "N")]
    pub(crate) gpus: Option<usize>,
    /// Write the result file here (default planner-verify-<time>.json)
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub(crate) out: Option<String>,
    /// Re-render and re-score a saved result file (no GPU needed; takes none of the measuring flags)
    #[arg(long, value_name = "FILE", conflicts_with_all = [
        "size", "sweep", "coll", "pair", "backend", "tuner", "tuner_plugin", "iters", "warmup", "repeats", "loop_cap",
        "cuda_graph", "dtype", "timeout", "gpus", "out", "fixture", "topo", "nodes", "net_latency"
    ])]
    pub(crate) load: Option<String>,
    /// With --load: re-score with a calibrated model (from `planner calibrate`), the stock model next to it
    #[arg(long, value_name = "CAL.json", requires = "load")]
    pub(crate) calibration: Option<String>,
    /// Apply --calibration to a result file of another topology or GPU count
    #[arg(long, requires = "calibration")]
    pub(crate) force: bool,
    /// Machine-readable output on stdout (docs/json.md)
    #[arg(long)]
    pub(crate) json: bool,
    /// Also write every row as CSV
    #[arg(long, value_name = "FILE")]
    pub(crate) csv: Option<String>,
    /// Also draw measured and predicted time against size (SVG)
    #[arg(long, value_name = "FILE")]
    pub(crate) plot: Option<String>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RendezvousCheckArgs {
    /// Seconds to wait for every rank
    #[arg(long, default_value_t = 30)]
    pub(crate) timeout: u64,
}

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
    let backends = Backend::parse_list(&args.backend)?;
    let dtype = Dtype::parse(&args.dtype)?;
    let sizes = SizeArgs::as_run(
        &args.sizes.sizes("8..4G")?,
        dtype.size(),
        dtype.nccl_tests_name(),
    );
    Ok(VerifyRequest {
        collective: Coll::parse(&args.coll)?,
        dtype,
        sizes,
        pairs: PairSelection::parse(&args.pair)?,
        pairs_text: args.pair.clone(),
        tuner: tuner_from(args, &backends)?,
        backends,
        plan,
        graph: args.cuda_graph,
        timeout: Duration::from_secs(args.timeout),
        gpus: args.gpus,
    })
}

/// `--tuner PLAN` (and `--tuner-plugin PATH`), checked before any GPU work.
fn tuner_from(args: &VerifyArgs, backends: &[Backend]) -> Result<Option<TunerSetup>> {
    let Some(plan) = &args.tuner else {
        if let Some(plugin) = &args.tuner_plugin {
            return Err(Error::bad_input(format!(
                "--tuner-plugin {plugin}: give the plan with --tuner PLAN as well"
            )));
        }
        return Ok(None);
    };
    if !backends.contains(&Backend::Nccl) {
        return Err(Error::bad_input(format!(
            "--tuner {plan}: the tuned row is NCCL's; use --backend nccl (or both, or nccl,nccl-symm)"
        )));
    }
    let exe = std::env::current_exe().map_err(|e| {
        Error::runtime(format!(
            "cannot find the planner binary to look for the tuner plugin beside it: {e}"
        ))
    })?;
    let setup = TunerSetup::resolve(plan, args.tuner_plugin.as_deref(), &exe)?;
    if let Some(current) = crate::nccl::tuner_plugin::from_process().filter(|v| !v.is_empty()) {
        eprintln!("planner: {}", tuner_conflict_note(&current, &setup.plugin));
    }
    Ok(Some(setup))
}

/// What verify does with a tuner already named by `NCCL_TUNER_PLUGIN`: NCCL loads one tuner, and verify sets the
/// variable in every child (planner's plugin for the tuned row, `none` for the others).
fn tuner_conflict_note(current: &str, ours: &std::path::Path) -> String {
    format!(
        "NCCL_TUNER_PLUGIN={current} is set, and NCCL loads only one tuner plugin: the tuned row loads planner's {} \
         and every other row runs with NCCL_TUNER_PLUGIN=none, so {current} is not measured",
        ours.display()
    )
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

/// `stock`: with --calibration, the same rows scored by the stock model.
fn output(
    run: &VerifyRun,
    predictor: &dyn Predictor,
    stock: Option<&score::Scored>,
    args: &VerifyArgs,
) -> Result<()> {
    let scored = score::score(run, predictor);
    if let Some(path) = &args.csv {
        crate::fsio::write_output(path, report::render_csv(&scored).as_bytes())?;
    }
    if let Some(path) = &args.plot {
        crate::fsio::write_output(path, report::render_svg(run, &scored)?.as_bytes())?;
    }
    if args.json {
        println!("{}", report::render_json_compared(run, &scored, stock)?);
    } else {
        print!(
            "{}",
            crate::report::text(&report::render_text_compared(run, &scored, stock))
        );
    }
    Ok(())
}

pub(crate) fn run(args: VerifyArgs) -> Result<()> {
    let source = &args.source;
    if let Some(path) = &args.load {
        let run = VerifyRun::load(path)?;
        if let Some(line) = crate::verify::keep::incomplete_line(&run) {
            eprintln!("planner: {path}: {line}");
        }
        if let Some(cal) = &args.calibration {
            let rescore = crate::calibrate::rescore_verify(cal, &run, path, args.force)?;
            for note in &rescore.notes {
                eprintln!("planner: {note}");
            }
            let stock = score::predictor_for_run(&run);
            let stock = score::score(&rescore.run, stock.as_ref());
            return output(&rescore.run, &rescore.predictor, Some(&stock), &args);
        }
        let predictor = score::predictor_for_run(&run);
        return output(&run, predictor.as_ref(), None, &args);
    }
    let request = request_from(&args)?;
    // Written after the run: a path that cannot be written is refused before it.
    for path in args.csv.iter().chain(&args.plot) {
        crate::fsio::check_output_path(path)?;
    }
    // The hidden fake backend (PLANNER_FAKE_BACKEND=1, CPU-only tests) drives GPUs that are not there.
    if crate::measure::FakeBackend::from_env()?.is_none() {
        super::require_gpu("verify")?;
    }
    let bar = Bar::new();
    let Some((run, path)) =
        session::measure(&request, &source.source(), args.out.as_deref(), &bar)?
    else {
        return Ok(()); // not rank 0: rank 0 prints
    };
    eprintln!("planner: result file {path}");
    if let Some(line) = crate::verify::keep::incomplete_line(&run) {
        eprintln!("planner: {line}");
    }
    let predictor = score::predictor_for_run(&run);
    output(&run, predictor.as_ref(), None, &args)?;
    // Stopped by Ctrl-C (or SIGTERM): exit as the signal would, 128 + its number.
    if let Some(signal) = crate::measure::stop_requested() {
        std::process::exit(128 + signal);
    }
    stopped_early(&run, &path)
}

/// A run that stopped early for a runtime failure (a crashed NCCL child, a timeout, a lost rank, planner's own
/// error) exits 1 after printing what it measured; the result file keeps every finished size.
fn stopped_early(run: &VerifyRun, path: &str) -> Result<()> {
    use crate::result_file::StopReason;
    match &run.stopped {
        Some(stopped) if stopped.reason != StopReason::Interrupted => Err(Error::runtime(format!(
            "the run stopped early ({}: {}); the sizes measured before it are kept in {path}",
            stopped.reason.label(),
            stopped.detail
        ))),
        _ => Ok(()),
    }
}

/// The hidden child of the NCCL backend.
pub(crate) fn nccl_child() -> Result<()> {
    crate::nccl::child::child_main()
}

/// Hidden: join the launcher's rendezvous, pass an id from rank 0 to every
/// rank, and print it (tests run two of these as two processes).
pub(crate) fn rendezvous_check(args: RendezvousCheckArgs) -> Result<()> {
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
