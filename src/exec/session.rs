//! One plan over several sizes with our kernels (`planner run`): the rings and trees of NCCL's search where it runs
//! on this machine, else ring 0..n-1 and the chain tree; one executor set up for the largest size; every size checked.

use super::plan::{ExecPlan, PlanChoice};
use super::runtime::{Executor, RunOptions, RunReport, SizeResult};
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::model::{Coll, Pair};
use crate::topo::Cluster;

/// Runtime channels assumed when no search result is available: NCCL's count
/// on the 2x H200 NVSwitch machine of the capture (12 search channels x 2).
pub(crate) const FALLBACK_CHANNELS: usize = 24;

/// What `planner run` asks for.
#[derive(Debug, Clone)]
pub(crate) struct RunRequest {
    pub(crate) sizes: Vec<u64>,
    pub(crate) pair: Pair,
    pub(crate) collective: Coll,
    /// Channels (CTAs per rank) for every size; None: NCCL's choice per size.
    pub(crate) channels: Option<usize>,
    /// Threads per CTA for every size; None: NCCL's choice per size.
    pub(crate) threads: Option<usize>,
    pub(crate) dtype: Dtype,
    pub(crate) in_place: bool,
    pub(crate) root: usize,
    pub(crate) options: RunOptions,
}

/// Run every size of `request`; `machine` is this machine's topology for the search (Err: why there is none).
/// `on_size` sees each size as it finishes. A wrong element is a runtime error after the report is complete.
pub(crate) fn run_sizes(
    request: &RunRequest,
    machine: std::result::Result<Cluster, String>,
    on_size: &mut dyn FnMut(&ExecPlan, &SizeResult),
) -> Result<RunReport> {
    let opts = &request.options;
    let n_ranks = Executor::ranks_available(opts)?;
    let choice_for = |bytes: u64| PlanChoice {
        collective: request.collective,
        algorithm: request.pair.algo,
        protocol: request.pair.proto,
        n_channels: request.channels,
        n_threads: request.threads,
        dtype: request.dtype,
        bytes,
        in_place: request.in_place,
        root: request.root,
    };
    // Round sizes to whole elements.
    let elem = request.dtype.size();
    let sizes: Vec<u64> = request
        .sizes
        .iter()
        .map(|&s| (s / elem).max(1) * elem)
        .collect();
    let max_bytes = *sizes
        .iter()
        .max()
        .ok_or_else(|| Error::bad_input("no size to run"))?;
    let base = shapes(request, machine, n_ranks, &choice_for(max_bytes))?;
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
    let exec = Executor::open(&template, opts)?;
    let mut results = Vec::new();
    for plan in &plans {
        let r = exec.run(plan, opts)?;
        on_size(plan, &r);
        results.push(r);
    }
    Ok(RunReport {
        plan: base.with_bytes(max_bytes),
        device: exec.info().clone(),
        graph: opts.graph,
        iters: opts.iters,
        warmup: opts.warmup,
        results,
    })
}

/// Rings and trees for `n_ranks`: the search's when it runs on this machine,
/// otherwise ring 0..n-1 and the chain (virtual ranks: alternating test shapes).
fn shapes(
    request: &RunRequest,
    machine: std::result::Result<Cluster, String>,
    n_ranks: usize,
    choice: &PlanChoice,
) -> Result<ExecPlan> {
    let n_channels = request.channels.unwrap_or(FALLBACK_CHANNELS);
    if request.options.virtual_ranks.is_some() {
        return ExecPlan::test_shapes(n_ranks, n_channels, choice);
    }
    let searched = machine.and_then(|cluster| {
        if cluster.n_ranks() != n_ranks {
            return Err(format!(
                "the topology has {} ranks, the run {n_ranks}",
                cluster.n_ranks()
            ));
        }
        let result = crate::search::search(&cluster, &crate::search::SearchOptions::default())
            .map_err(|e| e.to_string())?;
        ExecPlan::from_search(&result, choice).map_err(|e| e.to_string())
    });
    match searched {
        Ok(plan) => Ok(plan),
        Err(why) => {
            eprintln!(
                "planner: no search result ({why}); running ring 0..{} and the chain tree on {n_channels} channels",
                n_ranks - 1,
            );
            ExecPlan::default_shapes(n_ranks, n_channels, choice)
        }
    }
}

/// The runtime error for a report with wrong elements, if any.
pub(crate) fn wrong_elements(report: &RunReport) -> Option<Error> {
    let wrong = report
        .results
        .iter()
        .map(|r| r.wrong)
        .fold(0u64, u64::saturating_add);
    if wrong == 0 {
        return None;
    }
    Some(Error::runtime(format!(
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
    )))
}
