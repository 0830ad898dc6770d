//! `planner run`: run one plan (or a size sweep of it) with our own kernels on
//! the local GPUs, check every element, and print time, algbw, busbw, #wrong.

use crate::cli::source::{SizeArgs, SourceArgs};
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::exec::plan::{parse_collective, parse_pair};
use crate::exec::runtime::{Fault, RunOptions};
use crate::exec::session::{run_sizes, wrong_elements, RunRequest};
use std::time::Duration;

#[derive(Debug, clap::Args)]
#[command(
    mut_arg("size", |a| a.help("One message size in bytes, binary units (16K, 16M = 16 MiB, 1G) [default: 16M]")),
    mut_arg("sweep", |a| a.help("A range of sizes LO..HI, both included, doubling each step (e.g. 8..4G) [default: one size, --size]"))
)]
pub(crate) struct RunArgs {
    /// The topology the channel search uses (default: the probe of this machine)
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    /// --size: bytes per rank (the all-reduce buffer; the total for all-gather / reduce-scatter), default 16M;
    /// or --sweep LO..HI (x2 steps)
    #[command(flatten)]
    pub(crate) sizes: SizeArgs,
    /// Algorithm/protocol: Ring|Tree / LL|LL128|Simple, or beyond NCCL's menu OneShot/LL, TwoShot/Simple (all-reduce)
    #[arg(long, default_value = "Ring/Simple")]
    pub(crate) pair: String,
    /// Collective: all-reduce, all-gather, reduce-scatter, broadcast (the last three Ring/Simple only)
    #[arg(long, default_value = "all-reduce")]
    pub(crate) coll: String,
    /// Channels (CTAs per rank) for every size; default: NCCL's choice per size
    #[arg(long)]
    pub(crate) channels: Option<usize>,
    /// Threads per CTA for every size; default: NCCL's choice per size
    #[arg(long)]
    pub(crate) threads: Option<usize>,
    /// Element type: f32, bf16, f16
    #[arg(long, default_value = "f32")]
    pub(crate) dtype: String,
    /// Time the iterations as one CUDA graph (nccl-tests -G)
    #[arg(long)]
    pub(crate) cuda_graph: bool,
    /// Timed iterations per size
    #[arg(long, default_value_t = 20)]
    pub(crate) iters: usize,
    /// Untimed iterations per size before timing
    #[arg(long, default_value_t = 5)]
    pub(crate) warmup: usize,
    /// Output buffer = input buffer (nccl-tests' in-place layout)
    #[arg(long)]
    pub(crate) in_place: bool,
    /// Broadcast root
    #[arg(long, default_value_t = 0)]
    pub(crate) root: usize,
    /// Run N ranks as N buffers on GPU 0 (rings and trees of N on one GPU)
    #[arg(long, value_name = "N")]
    pub(crate) virtual_ranks: Option<usize>,
    /// Use only the first N GPUs
    #[arg(long, value_name = "N")]
    pub(crate) gpus: Option<usize>,
    /// Abort a collective that takes longer than this many seconds
    #[arg(long, default_value_t = 30.0)]
    pub(crate) timeout: f64,
    /// Seed of the input pattern
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u32,
    /// Machine-readable output (docs/json.md)
    #[arg(long)]
    pub(crate) json: bool,
    /// Testing only (README, "Testing"): inject wrong-element, hang or oom
    #[arg(long, hide = true, value_name = "FAULT")]
    pub(crate) inject_fault: Option<String>,
}

pub(crate) fn run(args: RunArgs) -> Result<()> {
    let source = &args.source;
    let pair = parse_pair(&args.pair)?;
    let collective = parse_collective(&args.coll)?;
    let dtype = Dtype::parse(&args.dtype)?;
    let sizes = super::source::SizeArgs::as_run(
        &args.sizes.sizes("16M")?,
        dtype.size(),
        dtype.nccl_tests_name(),
    );
    if args.iters == 0 {
        return Err(Error::bad_input("--iters must be at least 1"));
    }
    if !(args.timeout > 0.0 && args.timeout.is_finite()) {
        return Err(Error::bad_input(format!(
            "--timeout {}: must be a positive number of seconds",
            args.timeout
        )));
    }
    if let Some(v) = args.virtual_ranks {
        if v == 0 || v > crate::exec::plan::MAX_RANKS {
            return Err(Error::bad_input(format!(
                "--virtual-ranks {v}: must be between 1 and {}",
                crate::exec::plan::MAX_RANKS
            )));
        }
    }
    let fault = args.inject_fault.as_deref().map(Fault::parse).transpose()?;
    let request = RunRequest {
        sizes,
        pair,
        collective,
        channels: args.channels,
        threads: args.threads,
        dtype,
        in_place: args.in_place,
        root: args.root,
        options: RunOptions {
            iters: args.iters,
            warmup: args.warmup,
            graph: args.cuda_graph,
            timeout: Duration::from_secs_f64(args.timeout),
            virtual_ranks: args.virtual_ranks,
            gpus: args.gpus,
            seed: args.seed,
            fault,
            ..RunOptions::default()
        },
    };
    let machine = match source.source().load_machine() {
        Ok(Some(cluster)) => Ok(cluster),
        Ok(None) => Err("no GPU found by the probe".to_string()),
        Err(e) => Err(e.to_string()),
    };
    super::require_gpu("run")?;
    let json = args.json;
    let report = run_sizes(&request, machine, &mut |plan, r| {
        if !json {
            eprintln!(
                "planner: {:>9}  {:>2} ch x {:>3} thr  {:>10.2} us  busbw {:>7.2} GB/s  #wrong {}",
                crate::units::format_size(plan.bytes),
                plan.n_channels,
                plan.n_threads,
                r.time_us,
                r.busbw_gbs,
                r.wrong
            );
        }
    })?;
    if json {
        println!("{}", crate::report::run::json(&report)?);
    } else {
        print!(
            "{}",
            crate::report::text(&crate::report::run::table(&report))
        );
    }
    match wrong_elements(&report) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
