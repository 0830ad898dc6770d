//! `planner run`: run one plan (or a size sweep of it) with our own kernels on
//! the local GPUs, check every element, and print time, algbw, busbw, #wrong.

use crate::cli::source::SourceArgs;
use crate::error::{Error, Result};
use crate::exec::plan::{parse_collective, parse_pair, ExecPlan, PlanChoice};
use crate::exec::runtime::{Executor, RunOptions, RunReport};
use crate::measure::Dtype;
use crate::model::Pair;
use crate::units::clap_size_range;
use std::time::Duration;

/// Runtime channels assumed when no search result is available: NCCL's count
/// on the 2x H200 NVSwitch machine of the capture (12 search channels x 2).
pub const FALLBACK_CHANNELS: usize = 24;

/// `--size`: one size or a sweep (a newtype so clap takes one value).
#[derive(Debug, Clone, PartialEq)]
pub struct Sizes(pub Vec<u64>);

fn parse_sizes(text: &str) -> std::result::Result<Sizes, String> {
    clap_size_range(text).map(Sizes)
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Bytes per rank (all-reduce buffer; total for all-gather / reduce-scatter), or a sweep LO..HI (x2 steps)
    #[arg(long, value_parser = parse_sizes, default_value = "16M")]
    pub size: Sizes,
    /// Algorithm/protocol: Ring|Tree / LL|LL128|Simple
    #[arg(long, default_value = "Ring/Simple")]
    pub pair: String,
    /// Collective: all-reduce, all-gather, reduce-scatter, broadcast (the last three Ring/Simple only)
    #[arg(long, default_value = "all-reduce")]
    pub coll: String,
    /// Channels (CTAs per rank) for every size; default: NCCL's choice per size
    #[arg(long)]
    pub channels: Option<usize>,
    /// Threads per CTA for every size; default: NCCL's choice per size
    #[arg(long)]
    pub threads: Option<usize>,
    /// Element type: f32, bf16, f16
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Time the iterations as one CUDA graph (nccl-tests -G)
    #[arg(long)]
    pub cuda_graph: bool,
    /// Timed iterations per size
    #[arg(long, default_value_t = 20)]
    pub iters: usize,
    /// Untimed iterations per size before timing
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// Output buffer = input buffer (nccl-tests' in-place layout)
    #[arg(long)]
    pub in_place: bool,
    /// Broadcast root
    #[arg(long, default_value_t = 0)]
    pub root: usize,
    /// Run N ranks as N buffers on GPU 0 (rings and trees of N on one GPU)
    #[arg(long, value_name = "N")]
    pub virtual_ranks: Option<usize>,
    /// Use only the first N GPUs
    #[arg(long, value_name = "N")]
    pub gpus: Option<usize>,
    /// Abort a collective that takes longer than this many seconds
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
    /// Seed of the input pattern
    #[arg(long, default_value_t = 1)]
    pub seed: u32,
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
}

/// Rings and trees for `n_ranks`: the search's when it runs on this machine,
/// otherwise ring 0..n-1 and the chain (virtual ranks: alternating test shapes).
fn shapes(
    args: &RunArgs,
    source: &SourceArgs,
    n_ranks: usize,
    choice: &PlanChoice,
) -> Result<ExecPlan> {
    if args.virtual_ranks.is_some() {
        let nch = args.channels.unwrap_or(FALLBACK_CHANNELS);
        return ExecPlan::test_shapes(n_ranks, nch, choice);
    }
    match search_plan(source, n_ranks, choice) {
        Ok(plan) => Ok(plan),
        Err(why) => {
            eprintln!(
                "planner: no search result ({why}); running ring 0..{} and the chain tree on {} channels",
                n_ranks - 1,
                args.channels.unwrap_or(FALLBACK_CHANNELS)
            );
            ExecPlan::default_shapes(n_ranks, args.channels.unwrap_or(FALLBACK_CHANNELS), choice)
        }
    }
}

/// The search on the explicit topology (--fixture / --topo) or the live probe.
fn search_plan(
    source: &SourceArgs,
    n_ranks: usize,
    choice: &PlanChoice,
) -> std::result::Result<ExecPlan, String> {
    let cluster = if source.fixture.is_some() || source.topo.is_some() {
        source.load().map_err(|e| e.to_string())?
    } else {
        let root = crate::probe::probe().map_err(|e| match e {
            crate::probe::ProbeError::Unavailable(why) => why,
            crate::probe::ProbeError::Failed(e) => e.to_string(),
        })?;
        let node = crate::topo::build::from_xml(&root, "live probe").map_err(|e| e.to_string())?;
        crate::topo::Cluster::single(node)
    };
    if cluster.n_ranks() != n_ranks {
        return Err(format!(
            "the topology has {} ranks, the run {n_ranks}",
            cluster.n_ranks()
        ));
    }
    let result = crate::search::search(&cluster, &crate::search::SearchOptions::default())
        .map_err(|e| e.to_string())?;
    ExecPlan::from_search(&result, choice).map_err(|e| e.to_string())
}

pub fn run(args: RunArgs, source: &SourceArgs) -> Result<()> {
    let Pair {
        algo: algorithm,
        proto: protocol,
    } = parse_pair(&args.pair)?;
    let collective = parse_collective(&args.coll)?;
    let dtype = Dtype::parse(&args.dtype)?;
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
    let sizes: Vec<u64> = args.size.0.clone();
    let opts = RunOptions {
        iters: args.iters,
        warmup: args.warmup,
        graph: args.cuda_graph,
        timeout: Duration::from_secs_f64(args.timeout),
        virtual_ranks: args.virtual_ranks,
        gpus: args.gpus,
        seed: args.seed,
        ..RunOptions::default()
    };
    let n_ranks = Executor::ranks_available(&opts)?;
    let choice_for = |bytes: u64| PlanChoice {
        collective,
        algorithm,
        protocol,
        n_channels: args.channels,
        n_threads: args.threads,
        dtype,
        bytes,
        in_place: args.in_place,
        root: args.root,
    };
    // Round sizes to whole elements.
    let elem = dtype.size();
    let sizes: Vec<u64> = sizes.iter().map(|&s| (s / elem).max(1) * elem).collect();
    let max_bytes = *sizes.iter().max().expect("clap gives at least one size");
    let base = shapes(&args, source, n_ranks, &choice_for(max_bytes))?;
    let plans: Vec<ExecPlan> = sizes
        .iter()
        .map(|&b| {
            ExecPlan::build(
                n_ranks,
                base.rings.clone(),
                base.trees.clone(),
                &choice_for(b),
                base.origin.clone(),
            )
        })
        .collect::<Result<_>>()?;
    // Set up once for the largest size, channel and thread count.
    let mut template = base.clone();
    template.bytes = max_bytes;
    template.n_channels = plans.iter().map(|p| p.n_channels).max().unwrap_or(1);
    template.n_threads = plans.iter().map(|p| p.n_threads).max().unwrap_or(64);
    template.rings = base
        .rings
        .iter()
        .cycle()
        .take(template.n_channels)
        .cloned()
        .collect();
    template.trees = base
        .trees
        .iter()
        .cycle()
        .take(template.n_channels)
        .cloned()
        .collect();
    let exec = Executor::open(&template, &opts)?;
    let mut results = Vec::new();
    for plan in &plans {
        let r = exec.run(plan, &opts)?;
        if !args.json {
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
        results.push(r);
    }
    let report = RunReport {
        plan: base.with_bytes(max_bytes),
        device: exec.info().clone(),
        graph: args.cuda_graph,
        iters: args.iters,
        warmup: args.warmup,
        results,
    };
    drop(exec);
    if args.json {
        println!("{}", crate::report::run::json(&report));
    } else {
        print!("{}", crate::report::run::table(&report));
    }
    let wrong: u64 = report.results.iter().map(|r| r.wrong).sum();
    if wrong > 0 {
        return Err(Error::runtime(format!(
            "{wrong} wrong element(s) in {} ({})",
            report.plan,
            report
                .results
                .iter()
                .filter(|r| r.wrong > 0)
                .map(|r| format!(
                    "{}: {} wrong, first at rank {} element {}",
                    crate::units::format_size(r.bytes),
                    r.wrong,
                    r.first_wrong.map_or(0, |f| f.0),
                    r.first_wrong.map_or(0, |f| f.1)
                ))
                .collect::<Vec<_>>()
                .join("; ")
        )));
    }
    Ok(())
}
