//! Running `planner verify` on GPUs: the NCCL jobs (one child process per
//! pinned pair, NCCL's free choice, and the TUNING read-out), the native
//! executor, predictions, the machine fingerprint, and the multi-process
//! variant in which every launcher rank runs this and rank 0 coordinates.

use super::rendezvous::{LauncherEnv, Rendezvous};
use super::score::Predictor;
use super::{
    fnv1a64, Backend, Dtype, Fingerprint, GpuInfo, IterPlan, Pair, PairSelection, Row, RowStatus,
    RunOptions, VerifyRun, RESULT_FORMAT, RESULT_VERSION,
};
use crate::error::{Error, Result};
use crate::model::Coll;
use crate::nccl::spawn::{rows_from_outcome, run_child, ChildInit, ChildOutcome};
use crate::nccl::{self, choices_from_log, ChildEvent, ChildMode, ChildRanks, ChildSpec};
use crate::units::format_size;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct VerifyRequest {
    pub collective: Coll,
    pub dtype: Dtype,
    pub sizes: Vec<u64>,
    pub pairs: PairSelection,
    /// `--pairs` as typed, for the result file.
    pub pairs_text: String,
    pub backends: Vec<Backend>,
    pub plan: IterPlan,
    pub graph: bool,
    pub timeout: Duration,
    /// GPUs of this machine to use (None: all).
    pub gpus: Option<usize>,
}

/// The topology the predictions are for.
#[derive(Debug, Clone, Default)]
pub struct TopologyRecord {
    pub source: String,
    pub xml: Option<String>,
    pub nodes: usize,
    pub net_latency_us: f64,
}

/// Progress callbacks (the CLI draws a bar).
pub trait Progress {
    fn start(&self, total: u64);
    fn job(&self, label: &str);
    fn step(&self, label: &str);
    fn note(&self, text: &str);
    fn finish(&self);
}

/// No progress output.
pub struct Silent;
impl Progress for Silent {
    fn start(&self, _: u64) {}
    fn job(&self, _: &str) {}
    fn step(&self, _: &str) {}
    fn note(&self, _: &str) {}
    fn finish(&self) {}
}

/// The executor of our own kernels, as verify drives it. The native stage
/// provides it; `measure` returns one row per size (status, times per repeat
/// as the mean of a back-to-back loop, #wrong), timed like the NCCL backend.
pub trait NativeBackend {
    fn measure(
        &self,
        request: &VerifyRequest,
        pair: Pair,
        sizes: &[u64],
        progress: &dyn Progress,
    ) -> Result<Vec<Row>>;
}

/// The NCCL jobs of a request: each pinned pair (with the sizes it runs at),
/// then NCCL's free choice timed, then its TUNING read-out.
fn nccl_jobs(request: &VerifyRequest, pairs: &[(Pair, Vec<u64>)]) -> Vec<(ChildMode, Vec<u64>)> {
    let mut jobs: Vec<(ChildMode, Vec<u64>)> = pairs
        .iter()
        .filter(|(p, sizes)| nccl::refused_pair(*p).is_none() && !sizes.is_empty())
        .map(|(p, sizes)| (ChildMode::Pinned { pair: *p }, sizes.clone()))
        .collect();
    jobs.push((ChildMode::Free, request.sizes.clone()));
    jobs.push((ChildMode::Choices, request.sizes.clone()));
    jobs
}

/// The pairs to run and at which sizes.
pub fn plan_pairs(
    request: &VerifyRequest,
    predictor: &dyn Predictor,
) -> Result<Vec<(Pair, Vec<u64>)>> {
    match &request.pairs {
        PairSelection::All => Ok(Pair::ring_tree_all()
            .into_iter()
            .map(|p| (p, request.sizes.clone()))
            .collect()),
        PairSelection::List(list) => Ok(list.iter().map(|p| (*p, request.sizes.clone())).collect()),
        PairSelection::Winner => {
            let mut out: Vec<(Pair, Vec<u64>)> = Vec::new();
            for &bytes in &request.sizes {
                let pick = predictor.pick(request.collective, bytes).ok_or_else(|| {
                    Error::bad_input(format!(
                        "--pairs winner: the model ({}) makes no choice at {}; give the pairs instead",
                        predictor.label(),
                        format_size(bytes)
                    ))
                })?;
                match out.iter_mut().find(|(p, _)| *p == pick) {
                    Some((_, sizes)) => sizes.push(bytes),
                    None => out.push((pick, vec![bytes])),
                }
            }
            Ok(out)
        }
    }
}

fn mode_label(mode: ChildMode) -> String {
    match mode {
        ChildMode::Pinned { pair } => format!("nccl {pair}"),
        ChildMode::Free => "nccl auto".into(),
        ChildMode::Choices => "nccl auto (reading its TUNING log)".into(),
    }
}

fn job_steps(jobs: &[(ChildMode, Vec<u64>)]) -> u64 {
    jobs.iter().map(|(_, s)| s.len() as u64).sum()
}

/// One job's child, with progress.
fn run_job(
    exe: &Path,
    spec: &ChildSpec,
    timeout: Duration,
    progress: &dyn Progress,
) -> Result<ChildOutcome> {
    let label = mode_label(spec.mode);
    progress.job(&label);
    run_child(exe, spec, timeout, &mut |event| {
        if let ChildEvent::Size { bytes, .. } = event {
            progress.step(&format!("{label} {}", format_size(*bytes)));
        }
    })
}

/// Rows of the NCCL jobs' outcomes, NCCL's choices attached to its free rows.
fn collect_nccl_rows(
    request: &VerifyRequest,
    outcomes: &[(ChildMode, Vec<u64>, ChildOutcome)],
    world: usize,
) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut choices = Vec::new();
    for (mode, sizes, outcome) in outcomes {
        match mode {
            ChildMode::Pinned { pair } => rows.extend(rows_from_outcome(
                Some(*pair),
                sizes,
                outcome,
                request.timeout,
            )),
            ChildMode::Free => {
                rows.extend(rows_from_outcome(None, sizes, outcome, request.timeout))
            }
            ChildMode::Choices => {
                if let Some(log) = &outcome.tuning_log {
                    choices = choices_from_log(log.lines(), request.collective, sizes, world);
                }
            }
        }
    }
    for row in rows.iter_mut().filter(|r| r.pair.is_none()) {
        row.nccl_choice = choices
            .iter()
            .find(|(b, _)| *b == row.bytes)
            .and_then(|(_, c)| *c);
    }
    rows
}

fn refused_rows(request: &VerifyRequest, pairs: &[(Pair, Vec<u64>)]) -> Vec<Row> {
    let mut rows = Vec::new();
    for (pair, sizes) in pairs {
        if let Some(why) = nccl::refused_pair(*pair) {
            for &bytes in sizes {
                for &backend in &request.backends {
                    let mut row = Row::empty(backend, Some(*pair), bytes, RowStatus::Unavailable);
                    row.note = Some(why.clone());
                    rows.push(row);
                }
            }
        }
    }
    rows
}

fn spec_for(
    request: &VerifyRequest,
    mode: ChildMode,
    sizes: Vec<u64>,
    ranks: ChildRanks,
) -> ChildSpec {
    ChildSpec {
        collective: request.collective,
        dtype: request.dtype,
        sizes,
        plan: request.plan,
        graph: request.graph,
        mode,
        ranks,
    }
}

/// Everything about the machine that the children reported.
#[derive(Debug, Default)]
struct Seen {
    init: Option<ChildInit>,
    gpus: Vec<GpuInfo>,
    topo_dump: Option<String>,
    graph_dump: Option<String>,
}

impl Seen {
    fn absorb(&mut self, outcome: &ChildOutcome) {
        if let Some(init) = &outcome.init {
            if self.init.is_none() {
                self.gpus = init.gpus.clone();
                self.init = Some(init.clone());
            }
        }
        if outcome.topo_dump.is_some() {
            self.topo_dump = outcome.topo_dump.clone();
        }
        if outcome.graph_dump.is_some() {
            self.graph_dump = outcome.graph_dump.clone();
        }
    }
}

fn driver_version() -> Option<String> {
    let nvml = nvml_wrapper::Nvml::init().ok()?;
    nvml.sys_driver_version().ok()
}

fn fingerprint(
    seen: &Seen,
    topology: &TopologyRecord,
    world: usize,
    processes: usize,
    hosts: Vec<String>,
) -> Fingerprint {
    let hash = topology
        .xml
        .as_ref()
        .map(|x| format!("{:016x}", fnv1a64(x.as_bytes())))
        .unwrap_or_default();
    let mut gpus = seen.gpus.clone();
    gpus.sort_by_key(|g| g.rank);
    Fingerprint {
        hosts,
        gpus,
        driver_version: driver_version(),
        cuda_version: seen.init.as_ref().map(|i| i.cuda_version.clone()),
        nccl_version: seen.init.as_ref().map(|i| i.nccl_version.clone()),
        world_size: world,
        processes,
        topology_source: topology.source.clone(),
        topology_hash: hash,
        topology_xml: topology.xml.clone(),
        nodes: topology.nodes.max(1),
        net_latency_us: topology.net_latency_us,
        nccl_topology_xml: seen.topo_dump.clone(),
        nccl_graph_xml: seen.graph_dump.clone(),
        links: topology
            .xml
            .as_deref()
            .and_then(Fingerprint::links_from_xml),
    }
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn finish_run(
    request: &VerifyRequest,
    predictor: &dyn Predictor,
    machine: Fingerprint,
    launch: String,
    mut rows: Vec<Row>,
) -> VerifyRun {
    for row in rows.iter_mut() {
        if let Some(pair) = row.pair {
            row.predicted_us = predictor.predict_us(request.collective, pair, row.bytes);
        }
        row.derive_stats();
    }
    rows.sort_by(|a, b| {
        (a.backend, a.pair.is_none(), a.pair, a.bytes).cmp(&(
            b.backend,
            b.pair.is_none(),
            b.pair,
            b.bytes,
        ))
    });
    VerifyRun {
        format: RESULT_FORMAT.into(),
        version: RESULT_VERSION,
        planner_version: env!("CARGO_PKG_VERSION").into(),
        created_unix: now_unix(),
        machine,
        options: RunOptions {
            collective: request.collective,
            dtype: request.dtype,
            sizes: request.sizes.clone(),
            pairs: request.pairs_text.clone(),
            backends: request.backends.clone(),
            plan: request.plan,
            graph: request.graph,
            timeout_s: request.timeout.as_secs(),
            launch,
            model: Some(predictor.label()),
        },
        rows,
    }
}

/// `planner verify` in one process driving this machine's GPUs.
pub fn run_local(
    exe: &Path,
    request: &VerifyRequest,
    topology: &TopologyRecord,
    predictor: &dyn Predictor,
    native: Option<&dyn NativeBackend>,
    progress: &dyn Progress,
) -> Result<VerifyRun> {
    nccl::check_libraries()?;
    let count = cudarc::driver::CudaContext::device_count().map_err(|e| {
        Error::runtime(format!(
            "no usable CUDA GPU: cuDeviceGetCount failed: {e:?}"
        ))
    })? as usize;
    if count == 0 {
        return Err(Error::runtime(
            "no CUDA GPU visible: verify needs GPUs; `planner verify --load FILE` studies saved results without them",
        ));
    }
    let gpus = match request.gpus {
        Some(n) if n == 0 || n > count => {
            return Err(Error::bad_input(format!(
                "invalid --gpus {n}: this machine shows {count} GPU(s)"
            )))
        }
        Some(n) => n,
        None => count,
    };
    if gpus == 1 {
        progress.note(
            "one GPU: running single-rank plans (no data moves between GPUs; the times are a local copy)",
        );
    }
    let pairs = plan_pairs(request, predictor)?;
    let mut rows = refused_rows(request, &pairs);
    let runnable: Vec<(Pair, Vec<u64>)> = pairs
        .iter()
        .filter(|(p, _)| nccl::refused_pair(*p).is_none())
        .cloned()
        .collect();

    let jobs = if request.backends.contains(&Backend::Nccl) {
        nccl_jobs(request, &runnable)
    } else {
        Vec::new()
    };
    let native_steps: u64 = if request.backends.contains(&Backend::Native) {
        runnable.iter().map(|(_, s)| s.len() as u64).sum()
    } else {
        0
    };
    progress.start(job_steps(&jobs) + native_steps);

    let mut seen = Seen::default();
    if request.backends.contains(&Backend::Native) {
        match native {
            Some(native) => {
                for (pair, sizes) in &runnable {
                    progress.job(&format!("native {pair}"));
                    rows.extend(native.measure(request, *pair, sizes, progress)?);
                }
            }
            None => {
                progress.note("the native executor is not available in this build: native rows are marked unavailable");
                for (pair, sizes) in &runnable {
                    for &bytes in sizes {
                        let mut row =
                            Row::empty(Backend::Native, Some(*pair), bytes, RowStatus::Unavailable);
                        row.note = Some("native executor not available in this build".into());
                        rows.push(row);
                    }
                }
            }
        }
    }

    let mut outcomes = Vec::new();
    for (mode, sizes) in jobs {
        let spec = spec_for(request, mode, sizes.clone(), ChildRanks::Local { gpus });
        let outcome = run_job(exe, &spec, request.timeout, progress)?;
        seen.absorb(&outcome);
        if !outcome.exit_ok && outcome.init.is_none() {
            progress.note(&format!(
                "{}: the child failed before NCCL was up ({}): {}",
                mode_label(mode),
                outcome.exit,
                outcome
                    .fatal
                    .clone()
                    .unwrap_or_else(|| outcome.output_tail.trim().to_string())
            ));
        }
        outcomes.push((mode, sizes, outcome));
    }
    rows.extend(collect_nccl_rows(request, &outcomes, gpus));
    progress.finish();

    let machine = fingerprint(
        &seen,
        topology,
        gpus,
        1,
        vec![super::rendezvous::hostname()],
    );
    Ok(finish_run(
        request,
        predictor,
        machine,
        "one process".into(),
        rows,
    ))
}

/// One job as rank 0 hands it out.
#[derive(Debug, Serialize, Deserialize)]
enum JobMessage {
    Run { spec: ChildSpec },
    End,
}

/// What a rank says after its child finished.
#[derive(Debug, Serialize, Deserialize)]
struct JobReport {
    rank: usize,
    ok: bool,
    summary: String,
    gpus: Vec<GpuInfo>,
}

/// `planner verify --backend nccl` as one rank of a launcher's job. Rank 0
/// returns the run; the other ranks None.
pub fn run_distributed(
    exe: &Path,
    env: &LauncherEnv,
    request: &VerifyRequest,
    topology: &TopologyRecord,
    predictor: &dyn Predictor,
    progress: &dyn Progress,
) -> Result<Option<VerifyRun>> {
    if request.backends.contains(&Backend::Native) {
        return Err(Error::bad_input(format!(
            "--backend {}: under a launcher (rank {} of {} from {}) verify runs the NCCL backend only; use --backend nccl",
            if request.backends.len() > 1 { "both" } else { "native" },
            env.rank,
            env.world_size,
            env.source
        )));
    }
    nccl::check_libraries()?;
    let count = cudarc::driver::CudaContext::device_count()
        .map_err(|e| Error::runtime(format!("rank {}: no usable CUDA GPU: {e:?}", env.rank)))?
        as usize;
    if count == 0 {
        return Err(Error::runtime(format!(
            "rank {}: no CUDA GPU visible",
            env.rank
        )));
    }
    let local_rank = env.local_rank.unwrap_or(env.rank % count);
    let mut rendezvous = Rendezvous::join(env, request.timeout)?;
    let world = env.world_size;

    if env.rank != 0 {
        loop {
            let message = rendezvous.broadcast(None)?;
            let message: JobMessage = serde_json::from_slice(&message).map_err(|e| {
                Error::runtime(format!("rank {}: bad job from rank 0: {e}", env.rank))
            })?;
            let JobMessage::Run { mut spec } = message else {
                return Ok(None);
            };
            localise_spec(&mut spec, env, count);
            let outcome = run_child(exe, &spec, request.timeout, &mut |_| {})?;
            let report = JobReport {
                rank: env.rank,
                ok: outcome.exit_ok,
                summary: outcome.fatal.clone().unwrap_or_else(|| {
                    if outcome.timed_out {
                        "timed out".into()
                    } else {
                        outcome.exit.clone()
                    }
                }),
                gpus: outcome.init.map(|i| i.gpus).unwrap_or_default(),
            };
            let bytes = serde_json::to_vec(&report).map_err(|e| Error::runtime(e.to_string()))?;
            rendezvous.gather(&bytes)?;
        }
    }

    // Rank 0.
    let pairs = plan_pairs(request, predictor)?;
    let mut rows = refused_rows(request, &pairs);
    let runnable: Vec<(Pair, Vec<u64>)> = pairs
        .iter()
        .filter(|(p, _)| nccl::refused_pair(*p).is_none())
        .cloned()
        .collect();
    let jobs = nccl_jobs(request, &runnable);
    progress.start(job_steps(&jobs));
    let mut seen = Seen::default();
    let mut other_gpus: Vec<GpuInfo> = Vec::new();
    let mut outcomes = Vec::new();
    for (mode, sizes) in jobs {
        let id_hex = nccl::new_unique_id_hex()?;
        let spec_of = |rank: usize, local_rank: usize| {
            spec_for(
                request,
                mode,
                sizes.clone(),
                ChildRanks::Rank {
                    rank,
                    world,
                    local_rank,
                    id_hex: id_hex.clone(),
                },
            )
        };
        // Every rank gets the job with its own rank filled in by itself: send
        // rank 0's, the others replace rank and local rank.
        let message = serde_json::to_vec(&JobMessage::Run {
            spec: spec_of(0, 0),
        })
        .map_err(|e| Error::runtime(e.to_string()))?;
        rendezvous.broadcast(Some(&message))?;
        let outcome = run_job(exe, &spec_of(0, local_rank), request.timeout, progress)?;
        seen.absorb(&outcome);
        let mine = serde_json::to_vec(&JobReport {
            rank: 0,
            ok: outcome.exit_ok,
            summary: outcome.exit.clone(),
            gpus: Vec::new(),
        })
        .map_err(|e| Error::runtime(e.to_string()))?;
        let reports = rendezvous.gather(&mine)?.unwrap_or_default();
        let mut failures = Vec::new();
        for bytes in reports.iter().skip(1) {
            if let Ok(report) = serde_json::from_slice::<JobReport>(bytes) {
                if !report.ok {
                    failures.push(format!("rank {}: {}", report.rank, report.summary));
                }
                for g in report.gpus {
                    if !other_gpus.iter().any(|o| o.rank == g.rank) {
                        other_gpus.push(g);
                    }
                }
            }
        }
        if !failures.is_empty() {
            progress.note(&format!("{}: {}", mode_label(mode), failures.join("; ")));
        }
        outcomes.push((mode, sizes, outcome));
    }
    rendezvous.broadcast(Some(
        &serde_json::to_vec(&JobMessage::End).map_err(|e| Error::runtime(e.to_string()))?,
    ))?;
    rows.extend(collect_nccl_rows(request, &outcomes, world));
    progress.finish();
    seen.gpus.extend(other_gpus);
    let mut hosts = rendezvous.hosts.clone();
    hosts.dedup();
    let machine = fingerprint(&seen, topology, world, world, hosts);
    let launch = format!(
        "launcher: {} ranks, one process each ({}), rendezvous {}:{}",
        world, env.source, env.master_addr, env.master_port
    );
    Ok(Some(finish_run(request, predictor, machine, launch, rows)))
}

/// The child side of every rank: the job's ranks say which rank this process
/// is; a spec received from rank 0 carries rank 0's values, so fix them here.
pub fn localise_spec(spec: &mut ChildSpec, env: &LauncherEnv, device_count: usize) {
    if let ChildRanks::Rank {
        rank, local_rank, ..
    } = &mut spec.ranks
    {
        *rank = env.rank;
        *local_rank = env.local_rank.unwrap_or(env.rank % device_count.max(1));
    }
}

/// Default name of the result file.
pub fn default_result_path() -> PathBuf {
    PathBuf::from(format!("planner-verify-{}.json", now_unix()))
}
