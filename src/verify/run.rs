//! Running `planner verify` on GPUs: the NCCL jobs (one child process per
//! pinned pair, NCCL's free choice, and the TUNING read-out), the native
//! executor, predictions, the machine fingerprint, and the multi-process
//! variant in which every launcher rank runs this and rank 0 coordinates.

use super::keep::{close_run, Gaps};
use super::rendezvous::{LauncherEnv, Rendezvous};
use super::tuner::TunerSetup;
use super::{fnv1a64, PairSelection};
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::measure::Backend;
use crate::measure::{GpuInfo, IterPlan, Row, RowStatus};
use crate::model::Coll;
use crate::model::Pair;
use crate::nccl::spawn::{rows_from_outcome, run_child, ChildInit, ChildOutcome, RowKind};
use crate::nccl::{
    self, choices_from_log, symmetric_from_log, tuner_decisions_from_log, tuner_status_from_log,
    ChildEvent, ChildMode, ChildRanks, ChildSpec, TunerSetting,
};
use crate::predict::Predictor;
use crate::result_file::StopReason;
use crate::result_file::{Fingerprint, RunOptions, VerifyRun, RESULT_FORMAT, RESULT_VERSION};
use crate::units::format_size;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the user asked for.
#[derive(Debug, Clone)]
pub(crate) struct VerifyRequest {
    pub(crate) collective: Coll,
    pub(crate) dtype: Dtype,
    pub(crate) sizes: Vec<u64>,
    pub(crate) pairs: PairSelection,
    /// `--pairs` as typed, for the result file.
    pub(crate) pairs_text: String,
    pub(crate) backends: Vec<Backend>,
    pub(crate) plan: IterPlan,
    pub(crate) graph: bool,
    pub(crate) timeout: Duration,
    /// GPUs of this machine to use (None: all).
    pub(crate) gpus: Option<usize>,
    /// `--tuner`: NCCL's free choice once more with the planner tuner plugin
    /// and this plan (the `tuned` row).
    pub(crate) tuner: Option<TunerSetup>,
}

/// The topology the predictions are for.
#[derive(Debug, Clone, Default)]
pub(crate) struct TopologyRecord {
    pub(crate) source: String,
    pub(crate) xml: Option<String>,
    pub(crate) nodes: usize,
    pub(crate) net_latency_us: f64,
}

/// Progress callbacks (the CLI draws a bar).
pub(crate) trait Progress {
    fn start(&self, total: u64);
    fn job(&self, label: &str);
    fn step(&self, label: &str);
    fn note(&self, text: &str);
    fn finish(&self);
    /// The run's shape is known (options, what is known of the machine): the result file can
    /// start (`keep::Keeping`).
    fn begin_run(&self, _draft: &VerifyRun) {}
    /// One size of one row kind finished: its row is final.
    fn row_done(&self, _row: &Row) {}
    /// Whether to stop after the current size (the first Ctrl-C).
    fn stop_requested(&self) -> bool {
        crate::measure::stop_requested().is_some()
    }
}

/// No progress output (tests).
#[cfg(test)]
struct Silent;
#[cfg(test)]
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
pub(crate) trait NativeBackend {
    fn measure(
        &self,
        request: &VerifyRequest,
        pair: Pair,
        sizes: &[u64],
        progress: &dyn Progress,
    ) -> Result<Vec<Row>>;
}

/// Which NCCL run a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// NCCL alone on plain buffers (pinned pairs and `auto`).
    Plain,
    /// NCCL's free choice with the tuner plugin (`tuned`).
    Tuned,
    /// NCCL's free choice on symmetric windows (`symm`, backend nccl-symm).
    Symmetric,
}

/// One child process of the NCCL backends.
#[derive(Debug, Clone, PartialEq)]
struct Job {
    mode: ChildMode,
    variant: Variant,
    sizes: Vec<u64>,
}

/// The NCCL jobs of a request. Backend nccl: each pinned pair (with the sizes
/// it runs at), then NCCL's free choice timed, then its TUNING read-out; with
/// `--tuner` the free choice and read-out once more with the plugin. Backend
/// nccl-symm: the free choice on symmetric windows, timed, then its log.
fn nccl_jobs(request: &VerifyRequest, pairs: &[(Pair, Vec<u64>)]) -> Vec<Job> {
    let mut jobs = Vec::new();
    let free = |variant: Variant| {
        [ChildMode::Free, ChildMode::Choices].map(|mode| Job {
            mode,
            variant,
            sizes: request.sizes.clone(),
        })
    };
    if request.backends.contains(&Backend::Nccl) {
        jobs.extend(
            pairs
                .iter()
                .filter(|(p, sizes)| {
                    nccl::refused_pair(*p).is_none()
                        && !p.algo.is_beyond_nccl()
                        && !sizes.is_empty()
                })
                .map(|(p, sizes)| Job {
                    mode: ChildMode::Pinned { pair: *p },
                    variant: Variant::Plain,
                    sizes: sizes.clone(),
                }),
        );
        jobs.extend(free(Variant::Plain));
        if request.tuner.is_some() {
            jobs.extend(free(Variant::Tuned));
        }
    }
    if request.backends.contains(&Backend::NcclSymm) {
        jobs.extend(free(Variant::Symmetric));
    }
    jobs
}

/// The pairs to run and at which sizes.
pub(crate) fn plan_pairs(
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

fn job_label(job: &Job) -> String {
    let free = match job.variant {
        Variant::Plain => "nccl auto",
        Variant::Tuned => "nccl tuned",
        Variant::Symmetric => "nccl-symm",
    };
    match job.mode {
        ChildMode::Pinned { pair } => format!("nccl {pair}"),
        ChildMode::Free => free.into(),
        ChildMode::Choices => format!("{free} (reading its TUNING log)"),
    }
}

fn job_steps(jobs: &[Job]) -> u64 {
    jobs.iter().map(|j| j.sizes.len() as u64).sum()
}

/// One job's child, with progress.
fn run_job(
    exe: &Path,
    job: &Job,
    spec: &ChildSpec,
    timeout: Duration,
    progress: &dyn Progress,
) -> Result<ChildOutcome> {
    let label = job_label(job);
    progress.job(&label);
    let kind = row_kind(job);
    run_child(exe, spec, timeout, &mut |event| {
        if let ChildEvent::Size { bytes, .. } = event {
            progress.step(&format!("{label} {}", format_size(*bytes)));
            if let Some(row) = kind.and_then(|k| k.row_of(event)) {
                progress.row_done(&row);
            }
        }
    })
}

/// Which rows a job's sizes become (None: the TUNING read-out, no rows).
fn row_kind(job: &Job) -> Option<RowKind> {
    match (job.mode, job.variant) {
        (ChildMode::Pinned { pair }, _) => Some(RowKind::pinned(pair)),
        (ChildMode::Free, Variant::Plain) => Some(RowKind::free(Backend::Nccl, false)),
        (ChildMode::Free, Variant::Tuned) => Some(RowKind::free(Backend::Nccl, true)),
        (ChildMode::Free, Variant::Symmetric) => Some(RowKind::free(Backend::NcclSymm, false)),
        (ChildMode::Choices, _) => None,
    }
}

/// What a child's outcome left out, for the result file's `stopped`.
fn gaps_of(job: &Job, outcome: &ChildOutcome, timeout: Duration, gaps: &mut Gaps) {
    let reported = outcome
        .sizes
        .iter()
        .filter(|e| matches!(e, ChildEvent::Size { .. }))
        .count();
    let at = job
        .sizes
        .get(reported)
        .map(|&b| format!(" at {}", format_size(b)))
        .unwrap_or_default();
    let label = job_label(job);
    if outcome.interrupted {
        gaps.push(
            StopReason::Interrupted,
            format!(
                "stopped by a signal during {label}, after {reported} of its {} sizes",
                job.sizes.len()
            ),
        );
    } else if outcome.timed_out {
        gaps.push(
            StopReason::Timeout,
            format!(
                "{label}: no result within --timeout {} s{at}; the child was killed",
                timeout.as_secs()
            ),
        );
    } else if !outcome.exit_ok || reported < job.sizes.len() {
        gaps.push(
            StopReason::ChildCrashed,
            format!(
                "{label}: the child ended ({}){at} after {reported} of {} sizes",
                outcome.exit,
                job.sizes.len()
            ),
        );
    }
}

/// Rows of the NCCL jobs' outcomes, with what each free-choice run's log
/// says NCCL ran attached to its rows: the pair (`auto`, `tuned`), the
/// plugin's decision (`tuned`), the symmetric kernel or, where NCCL took its
/// classic path, the pair (`symm`). Also what the tuned run's log says about
/// the plugin itself.
fn collect_nccl_rows(
    request: &VerifyRequest,
    outcomes: &[(Job, ChildOutcome)],
    world: usize,
) -> (Vec<Row>, Vec<String>) {
    let coll = request.collective;
    let mut rows = Vec::new();
    let mut logs: Vec<(Variant, &str, &[u64])> = Vec::new();
    for (job, outcome) in outcomes {
        let Some(kind) = row_kind(job) else {
            if let Some(log) = &outcome.tuning_log {
                logs.push((job.variant, log, &job.sizes));
            }
            continue;
        };
        rows.extend(rows_from_outcome(
            kind,
            &job.sizes,
            outcome,
            request.timeout,
        ));
    }
    let mut tuner_log = Vec::new();
    for (variant, log, sizes) in logs {
        let choices = choices_from_log(log.lines(), coll, sizes, world);
        let choice_at = |bytes: u64| {
            choices
                .iter()
                .find(|(b, _)| *b == bytes)
                .and_then(|(_, c)| *c)
        };
        match variant {
            Variant::Plain => {
                for row in rows.iter_mut().filter(|r| r.is_auto()) {
                    row.nccl_choice = choice_at(row.bytes);
                }
            }
            Variant::Tuned => {
                let decisions = tuner_decisions_from_log(log.lines(), coll, sizes);
                for row in rows.iter_mut().filter(|r| r.tuned) {
                    row.nccl_choice = choice_at(row.bytes);
                    row.tuner_decision = decisions
                        .iter()
                        .find(|(b, _)| *b == row.bytes)
                        .and_then(|(_, d)| d.clone());
                }
                tuner_log = tuner_status_from_log(log.lines());
            }
            Variant::Symmetric => {
                let launches = symmetric_from_log(log.lines(), coll, sizes, world);
                for row in rows.iter_mut().filter(|r| r.backend == Backend::NcclSymm) {
                    row.symmetric = launches
                        .iter()
                        .find(|(b, _)| *b == row.bytes)
                        .and_then(|(_, l)| l.clone());
                    if row.symmetric.is_none() {
                        // NCCL's classic path at this size: which pair.
                        row.nccl_choice = choice_at(row.bytes);
                    }
                }
            }
        }
    }
    (rows, tuner_log)
}

fn refused_rows(request: &VerifyRequest, pairs: &[(Pair, Vec<u64>)]) -> Vec<Row> {
    let mut rows = Vec::new();
    for (pair, sizes) in pairs {
        if let Some(why) = nccl::refused_pair(*pair) {
            for &bytes in sizes {
                // nccl-symm runs no pinned pairs.
                for &backend in request.backends.iter().filter(|b| **b != Backend::NcclSymm) {
                    let mut row = Row::empty(backend, Some(*pair), bytes, RowStatus::Unavailable);
                    row.note = Some(why.clone());
                    rows.push(row);
                }
            }
        } else if pair.algo.is_beyond_nccl() && request.backends.contains(&Backend::Nccl) {
            // planner's own algorithms: the native backend runs them, NCCL has no such algorithm.
            for &bytes in sizes {
                let mut row = Row::empty(Backend::Nccl, Some(*pair), bytes, RowStatus::Unavailable);
                row.note = Some(format!(
                    "{pair}: not an NCCL algorithm (planner's own kernel)"
                ));
                rows.push(row);
            }
        }
    }
    rows
}

fn spec_for(request: &VerifyRequest, job: &Job, ranks: ChildRanks) -> ChildSpec {
    // With --tuner, only the tuned run sees the plugin; every other run is
    // NCCL alone. Without it the environment stays as the user set it.
    let tuner = match (&request.tuner, job.variant) {
        (None, _) => TunerSetting::Inherit,
        (Some(t), Variant::Tuned) => TunerSetting::Plan {
            plugin: t.plugin.clone(),
            plan: t.plan.clone(),
        },
        (Some(_), _) => TunerSetting::Off,
    };
    ChildSpec {
        collective: request.collective,
        dtype: request.dtype,
        sizes: job.sizes.clone(),
        plan: request.plan,
        graph: request.graph,
        mode: job.mode,
        ranks,
        symmetric: job.variant == Variant::Symmetric,
        tuner,
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
    tuner_log: Vec<String>,
) -> VerifyRun {
    for row in rows.iter_mut() {
        (row.predicted_us, row.predicted_kernel) =
            crate::predict::predict_row(predictor, request.collective, request.dtype, row);
        row.derive_stats();
    }
    rows.sort_by(|a, b| {
        (a.backend, a.pair.is_none(), a.pair, a.tuned, a.bytes).cmp(&(
            b.backend,
            b.pair.is_none(),
            b.pair,
            b.tuned,
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
            tuner: request.tuner.as_ref().map(|t| t.record(tuner_log)),
        },
        rows,
        complete: true,
        stopped: None,
    }
}

/// `planner verify` in one process driving this machine's GPUs. Rows reach
/// `progress.row_done` as each size finishes; a stop request (Ctrl-C) ends the
/// run after the current size, and the run comes back marked incomplete.
pub(crate) fn run_local(
    exe: &Path,
    request: &VerifyRequest,
    topology: &TopologyRecord,
    predictor: &dyn Predictor,
    native: Option<&dyn NativeBackend>,
    progress: &dyn Progress,
) -> Result<VerifyRun> {
    let fake = crate::measure::FakeBackend::from_env()?;
    let fake_native = fake.map(|f| super::fake::FakeNative {
        delay_ms: f.delay_ms,
    });
    let native: Option<&dyn NativeBackend> = match &fake_native {
        Some(f) => Some(f),
        None => native,
    };
    let gpus = match fake {
        // The hidden fake backend (CPU-only tests) drives 2 GPUs that are not there.
        Some(_) => request.gpus.unwrap_or(2),
        None => local_gpus(request, progress)?,
    };
    let pairs = plan_pairs(request, predictor)?;
    let mut rows = refused_rows(request, &pairs);
    let runnable: Vec<(Pair, Vec<u64>)> = pairs
        .iter()
        .filter(|(p, _)| nccl::refused_pair(*p).is_none())
        .cloned()
        .collect();

    let jobs = nccl_jobs(request, &runnable);
    let native_steps: u64 = if request.backends.contains(&Backend::Native) {
        runnable.iter().map(|(_, s)| s.len() as u64).sum()
    } else {
        0
    };
    progress.start(job_steps(&jobs) + native_steps);
    let hosts = || vec![super::rendezvous::hostname()];
    let mut draft = finish_run(
        request,
        predictor,
        fingerprint(&Seen::default(), topology, gpus, 1, hosts()),
        "one process".into(),
        rows.clone(),
        Vec::new(),
    );
    draft.complete = false;
    progress.begin_run(&draft);

    let mut gaps = Gaps::default();
    let mut seen = Seen::default();
    if request.backends.contains(&Backend::Native) {
        match native {
            Some(native) => {
                for (pair, sizes) in &runnable {
                    if progress.stop_requested() {
                        break;
                    }
                    progress.job(&format!("native {pair}"));
                    let measured = native.measure(request, *pair, sizes, progress)?;
                    native_gaps(*pair, sizes, &measured, progress, &mut gaps);
                    rows.extend(measured);
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

    let (nccl_rows, tuner_log) =
        run_local_jobs(exe, request, jobs, gpus, &mut seen, &mut gaps, progress)?;
    rows.extend(nccl_rows);
    if let Some(signal) = crate::measure::stop_requested() {
        gaps.push(StopReason::Interrupted, crate::measure::signal_name(signal));
    }
    progress.finish();

    let machine = fingerprint(&seen, topology, gpus, 1, hosts());
    let mut run = finish_run(
        request,
        predictor,
        machine,
        "one process".into(),
        rows,
        tuner_log,
    );
    close_run(&mut run, &gaps);
    Ok(run)
}

/// The GPUs a one-process run drives: all, or `--gpus N`.
fn local_gpus(request: &VerifyRequest, progress: &dyn Progress) -> Result<usize> {
    // A native-only run needs no libnccl.
    if request.backends.iter().all(|b| *b == Backend::Native) {
        nccl::check_driver()?;
    } else {
        nccl::check_libraries()?;
    }
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
    Ok(gpus)
}

/// What a native pair left out: sizes a stop request skipped, a timeout.
fn native_gaps(pair: Pair, sizes: &[u64], rows: &[Row], progress: &dyn Progress, gaps: &mut Gaps) {
    if rows.len() < sizes.len() && progress.stop_requested() {
        gaps.push(
            StopReason::Interrupted,
            format!(
                "stopped by a signal during native {pair}, after {} of its {} sizes",
                rows.len(),
                sizes.len()
            ),
        );
    }
    for row in rows.iter().filter(|r| r.status == RowStatus::Failed) {
        let note = row.note.as_deref().unwrap_or("failed");
        let reason = if note.starts_with("timeout") {
            StopReason::Timeout
        } else {
            StopReason::Failed
        };
        gaps.push(
            reason,
            format!("native {pair} at {}: {note}", format_size(row.bytes)),
        );
    }
}

/// The NCCL jobs in children of this process driving `gpus` GPUs: their rows
/// and what the tuned run's log says about the plugin. No job starts after a
/// stop request.
fn run_local_jobs(
    exe: &Path,
    request: &VerifyRequest,
    jobs: Vec<Job>,
    gpus: usize,
    seen: &mut Seen,
    gaps: &mut Gaps,
    progress: &dyn Progress,
) -> Result<(Vec<Row>, Vec<String>)> {
    let mut outcomes = Vec::new();
    for job in jobs {
        if progress.stop_requested() {
            break;
        }
        let spec = spec_for(request, &job, ChildRanks::Local { gpus });
        let outcome = run_job(exe, &job, &spec, request.timeout, progress)?;
        seen.absorb(&outcome);
        if !outcome.exit_ok && outcome.init.is_none() && !outcome.interrupted {
            progress.note(&format!(
                "{}: the child failed before NCCL was up ({}): {}",
                job_label(&job),
                outcome.exit,
                outcome
                    .fatal
                    .clone()
                    .unwrap_or_else(|| outcome.output_tail.trim().to_string())
            ));
        }
        gaps_of(&job, &outcome, request.timeout, gaps);
        outcomes.push((job, outcome));
    }
    Ok(collect_nccl_rows(request, &outcomes, gpus))
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
pub(crate) fn run_distributed(
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
        follow_rank0(exe, env, request, count, &mut rendezvous)?;
        return Ok(None);
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
    let launch = format!(
        "launcher: {} ranks, one process each ({}), rendezvous {}:{}",
        world, env.source, env.master_addr, env.master_port
    );
    let mut draft = finish_run(
        request,
        predictor,
        fingerprint(
            &Seen::default(),
            topology,
            world,
            world,
            rendezvous.hosts.clone(),
        ),
        launch.clone(),
        rows.clone(),
        Vec::new(),
    );
    draft.complete = false;
    progress.begin_run(&draft);
    let mut gaps = Gaps::default();
    let mut seen = Seen::default();
    let mut other_gpus: Vec<GpuInfo> = Vec::new();
    let mut outcomes = Vec::new();
    let mut ranks_up = true;
    for job in jobs {
        if progress.stop_requested() {
            break;
        }
        let id_hex = nccl::new_unique_id_hex()?;
        let spec_of = |rank: usize, local_rank: usize| {
            spec_for(
                request,
                &job,
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
        // A rank that stopped answering ends the run; what was measured stays.
        if let Err(e) = rendezvous.broadcast(Some(&message)) {
            gaps.push(
                StopReason::RankLost,
                format!("before {}: {e}", job_label(&job)),
            );
            ranks_up = false;
            break;
        }
        let outcome = run_job(
            exe,
            &job,
            &spec_of(0, local_rank),
            request.timeout,
            progress,
        )?;
        seen.absorb(&outcome);
        let mine = serde_json::to_vec(&JobReport {
            rank: 0,
            ok: outcome.exit_ok,
            summary: outcome.exit.clone(),
            gpus: Vec::new(),
        })
        .map_err(|e| Error::runtime(e.to_string()))?;
        let reports = match rendezvous.gather(&mine) {
            Ok(reports) => reports.unwrap_or_default(),
            Err(e) => {
                gaps.push(
                    StopReason::RankLost,
                    format!("during {}: {e}", job_label(&job)),
                );
                gaps_of(&job, &outcome, request.timeout, &mut gaps);
                outcomes.push((job, outcome));
                ranks_up = false;
                break;
            }
        };
        let failures = read_reports(&reports, &mut other_gpus);
        if !failures.is_empty() {
            progress.note(&format!("{}: {}", job_label(&job), failures.join("; ")));
        }
        gaps_of(&job, &outcome, request.timeout, &mut gaps);
        outcomes.push((job, outcome));
    }
    end_jobs(&mut rendezvous, ranks_up, &mut gaps)?;
    let (nccl_rows, tuner_log) = collect_nccl_rows(request, &outcomes, world);
    rows.extend(nccl_rows);
    progress.finish();
    seen.gpus.extend(other_gpus);
    let mut hosts = rendezvous.hosts.clone();
    hosts.dedup();
    let machine = fingerprint(&seen, topology, world, world, hosts);
    let mut run = finish_run(request, predictor, machine, launch, rows, tuner_log);
    close_run(&mut run, &gaps);
    Ok(Some(run))
}

/// The end of rank 0's jobs: tell the ranks still up that the run is over; a lost rank or a signal is a gap.
fn end_jobs(rendezvous: &mut Rendezvous, ranks_up: bool, gaps: &mut Gaps) -> Result<()> {
    if ranks_up {
        let end =
            serde_json::to_vec(&JobMessage::End).map_err(|e| Error::runtime(e.to_string()))?;
        if let Err(e) = rendezvous.broadcast(Some(&end)) {
            gaps.push(StopReason::RankLost, format!("at the end: {e}"));
        }
    }
    if let Some(signal) = crate::measure::stop_requested() {
        gaps.push(StopReason::Interrupted, crate::measure::signal_name(signal));
    }
    Ok(())
}

/// A rank other than 0: run each job rank 0 broadcasts and report back, until rank 0 says the run is over.
fn follow_rank0(
    exe: &Path,
    env: &LauncherEnv,
    request: &VerifyRequest,
    count: usize,
    rendezvous: &mut Rendezvous,
) -> Result<()> {
    loop {
        let message = rendezvous.broadcast(None)?;
        let message: JobMessage = serde_json::from_slice(&message)
            .map_err(|e| Error::runtime(format!("rank {}: bad job from rank 0: {e}", env.rank)))?;
        let JobMessage::Run { mut spec } = message else {
            return Ok(());
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

/// The other ranks' reports on one job (rank 0's own first, skipped): their failures as lines, and the GPUs not
/// seen yet into `other_gpus`.
fn read_reports(reports: &[Vec<u8>], other_gpus: &mut Vec<GpuInfo>) -> Vec<String> {
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
    failures
}

/// The child side of every rank: the job's ranks say which rank this process
/// is; a spec received from rank 0 carries rank 0's values, so fix them here.
pub(crate) fn localise_spec(spec: &mut ChildSpec, env: &LauncherEnv, device_count: usize) {
    if let ChildRanks::Rank {
        rank, local_rank, ..
    } = &mut spec.ranks
    {
        *rank = env.rank;
        *local_rank = env.local_rank.unwrap_or(env.rank % device_count.max(1));
    }
}

/// Default name of the result file.
pub(crate) fn default_result_path() -> PathBuf {
    PathBuf::from(format!("planner-verify-{}.json", now_unix()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::TunerDecision;
    use crate::model::{Algo, Proto};
    use crate::predict::SymmetricPrediction;
    use crate::verify::score::score;

    const MIB: u64 = 1 << 20;

    /// Stands in for `planner __nccl-child`: reads its job and environment as
    /// the real child gets them, reports two sizes (1 and 2 MiB) and, in a
    /// choices pass, writes the log NCCL and the plugin would write. Medians
    /// (µs) at 1 / 2 MiB: pinned Ring/LL 50 / 60, auto 30 / 40, tuned 25 / 20,
    /// symm 15 / 35. It refuses (exit 3) a non-tuned child that could load a
    /// tuner plugin, and (exit 4) one with multicast on.
    const FAKE_CHILD: &str = r#"#!/bin/sh
spec="$PLANNER_NCCL_CHILD_SPEC"
[ "$NCCL_NVLS_ENABLE" = 0 ] || exit 4
mode=free
case "$spec" in *'"kind":"choices"'*) mode=choices;; *'"kind":"pinned"'*) mode=pinned;; esac
variant=auto
case "$spec" in *'"symmetric":true'*) variant=symm;; esac
if [ -n "$PLANNER_TUNER_PLAN" ]; then variant=tuned; elif [ "$NCCL_TUNER_PLUGIN" != none ]; then exit 3; fi
[ $mode = pinned ] && variant=pinned
echo '@@planner-child {"event":"init","nccl_version":"2.28.3","cuda_version":"13.0","world_size":2,"gpus":[]}'
size() { echo "@@planner-child {\"event\":\"size\",\"bytes\":$1,\"status\":\"ok\",\"iters\":20,\"repeats\":1,\"times_us\":[$2],\"wrong\":0}"; }
case $variant in auto) t1=30; t2=40;; tuned) t1=25; t2=20;; symm) t1=15; t2=35;; *) t1=50; t2=60;; esac
p='h:1:1 [0] NCCL INFO'
if [ $mode = choices ]; then
  case $variant in
    auto) printf '%s\n' "$p AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}" \
                        "$p AllReduce: 2097152 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}" > "$NCCL_DEBUG_FILE";;
    tuned) printf '%s\n' "$p Successfully loaded external tuner plugin $NCCL_TUNER_PLUGIN" \
                         "$p planner-tuner: plan $PLANNER_TUNER_PLAN applies: 1 of 1 rules for nRanks 2 nNodes 1 (from verify v.json, made with NCCL 2.28.3, running NCCL 2.28.3)" \
                         "$p planner-tuner: AllReduce 1048576 bytes nRanks 2 nNodes 1 -> kept (no rule)" \
                         "$p AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}" \
                         "$p planner-tuner: AllReduce 2097152 bytes nRanks 2 nNodes 1 -> Ring/LL channels - (rule 0)" \
                         "$p AllReduce: 2097152 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}" > "$NCCL_DEBUG_FILE";;
    symm) printf '%s\n' "$p AllReduce [Symmetric]: 1048576 Bytes -> Kernel AllReduce_RSxLD_AGxST nchannels 8 nthreads 512 nWorks 1" \
                        "$p AllReduce: 2097152 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}" > "$NCCL_DEBUG_FILE";;
  esac
  size 1048576 ""; size 2097152 ""
else
  size 1048576 $t1; size 2097152 $t2
fi
echo '@@planner-child {"event":"done"}'
"#;

    fn fake_child(dir: &Path) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let exe = dir.join("fake-planner");
        std::fs::write(&exe, FAKE_CHILD).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        exe
    }

    fn request(backends: Vec<Backend>, tuner: Option<TunerSetup>) -> VerifyRequest {
        VerifyRequest {
            collective: Coll::AllReduce,
            dtype: Dtype::F32,
            sizes: vec![MIB, 2 * MIB],
            pairs: PairSelection::List(vec![ring_ll()]),
            pairs_text: "Ring/LL".into(),
            backends,
            plan: IterPlan::default(),
            graph: false,
            timeout: Duration::from_secs(20),
            gpus: None,
            tuner,
        }
    }

    fn ring_ll() -> Pair {
        Pair::new(Algo::Ring, Proto::Ll)
    }

    fn tuner() -> TunerSetup {
        TunerSetup {
            plan: PathBuf::from("/tmp/plan.json"),
            plan_hash: "0123456789abcdef".into(),
            rules: 1,
            plugin: PathBuf::from("/opt/p/libnccl_tuner_planner.so"),
        }
    }

    /// The symmetric model's word, by hand: the kernel NCCL ran at 1 MiB
    /// (16 µs), its classic path at 2 MiB (33 µs).
    struct HandModel;
    impl Predictor for HandModel {
        fn label(&self) -> String {
            "hand".into()
        }
        fn predict_us(&self, _: Coll, _: Pair, bytes: u64) -> Option<f64> {
            Some(bytes as f64 / 20_000.0)
        }
        fn pick(&self, _: Coll, _: u64) -> Option<Pair> {
            Some(ring_ll())
        }
        fn predict_symmetric(&self, _: Coll, _: Dtype, bytes: u64) -> Option<SymmetricPrediction> {
            Some(if bytes == MIB {
                SymmetricPrediction {
                    kernel: "AllReduce_RSxLD_AGxST".into(),
                    time_us: 16.0,
                }
            } else {
                SymmetricPrediction {
                    kernel: "classic Ring/Simple".into(),
                    time_us: 33.0,
                }
            })
        }
    }

    #[test]
    fn jobs_per_backend_and_tuner() {
        let pairs = vec![(ring_ll(), vec![MIB, 2 * MIB])];
        let labels = |r: &VerifyRequest| -> Vec<String> {
            nccl_jobs(r, &pairs).iter().map(job_label).collect()
        };
        assert_eq!(
            labels(&request(vec![Backend::Nccl], None)),
            [
                "nccl Ring/LL",
                "nccl auto",
                "nccl auto (reading its TUNING log)"
            ]
        );
        assert_eq!(
            labels(&request(vec![Backend::Nccl], Some(tuner()))),
            [
                "nccl Ring/LL",
                "nccl auto",
                "nccl auto (reading its TUNING log)",
                "nccl tuned",
                "nccl tuned (reading its TUNING log)"
            ]
        );
        // nccl-symm alone runs no pinned pair, and no NVLS pair is refused for it
        let symm = request(vec![Backend::NcclSymm], None);
        assert_eq!(
            labels(&symm),
            ["nccl-symm", "nccl-symm (reading its TUNING log)"]
        );
        let nvls = vec![(Pair::new(Algo::Nvls, Proto::Simple), vec![MIB])];
        assert!(refused_rows(&symm, &nvls).is_empty());
        assert_eq!(
            refused_rows(&request(vec![Backend::Nccl], None), &nvls).len(),
            1
        );
        // the specs: only the tuned job sees the plan; only the symm job registers windows
        let req = request(vec![Backend::Nccl, Backend::NcclSymm], Some(tuner()));
        for job in nccl_jobs(&req, &pairs) {
            let spec = spec_for(&req, &job, ChildRanks::Local { gpus: 2 });
            assert_eq!(spec.symmetric, job.variant == Variant::Symmetric);
            match job.variant {
                Variant::Tuned => assert_eq!(
                    spec.tuner,
                    TunerSetting::Plan {
                        plugin: tuner().plugin,
                        plan: tuner().plan
                    }
                ),
                _ => assert_eq!(spec.tuner, TunerSetting::Off),
            }
        }
    }

    #[test]
    fn a_fake_child_gives_tuned_and_symm_rows_with_what_nccl_ran() {
        let dir = std::env::temp_dir().join(format!("planner-run-fake-{}", std::process::id()));
        let exe = fake_child(&dir);
        let req = request(vec![Backend::Nccl, Backend::NcclSymm], Some(tuner()));
        let jobs = nccl_jobs(&req, &[(ring_ll(), req.sizes.clone())]);
        let mut seen = Seen::default();
        let (rows, tuner_log) = run_local_jobs(
            &exe,
            &req,
            jobs,
            2,
            &mut seen,
            &mut Gaps::default(),
            &Silent,
        )
        .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(seen.init.as_ref().unwrap().nccl_version, "2.28.3");
        // 2 sizes x (pinned, auto, tuned, symm), every one measured
        assert_eq!(rows.len(), 8);
        assert!(
            rows.iter().all(|r| r.status == RowStatus::Ok),
            "{:?}",
            rows.iter().map(|r| &r.note).collect::<Vec<_>>()
        );
        let find = |label: &str, bytes: u64| {
            rows.iter()
                .find(|r| r.pair_label() == label && r.bytes == bytes)
                .unwrap_or_else(|| panic!("no {label} row at {bytes}"))
        };
        assert_eq!(find("Ring/LL", MIB).median_us, Some(50.0));
        // auto: NCCL's own pick from its TUNING lines
        let auto = find("auto", 2 * MIB);
        assert!(auto.is_auto() && auto.median_us == Some(40.0));
        assert_eq!(
            auto.nccl_choice.unwrap().pair,
            Pair::new(Algo::Ring, Proto::Simple)
        );
        // tuned: what NCCL ran with the plugin, and what the plugin decided
        let tuned = find("tuned", 2 * MIB);
        assert!(tuned.tuned && !tuned.is_auto() && tuned.median_us == Some(20.0));
        assert_eq!(tuned.nccl_choice.unwrap().pair, ring_ll());
        assert_eq!(
            tuned.tuner_decision,
            Some(TunerDecision::Steered {
                pair: ring_ll(),
                channels: None,
                rule: 0
            })
        );
        assert_eq!(
            find("tuned", MIB).tuner_decision,
            Some(TunerDecision::Kept {
                why: "no rule".into()
            })
        );
        // symm: the kernel at 1 MiB, NCCL's classic pair at 2 MiB
        let symm = find("symm", MIB);
        assert_eq!(symm.backend, Backend::NcclSymm);
        assert_eq!(
            symm.symmetric.as_ref().unwrap().kernel,
            "AllReduce_RSxLD_AGxST"
        );
        assert_eq!(symm.symmetric.as_ref().unwrap().channels, 8);
        let classic = find("symm", 2 * MIB);
        assert_eq!(classic.symmetric, None);
        assert_eq!(
            classic.nccl_choice.unwrap().pair,
            Pair::new(Algo::Ring, Proto::Simple)
        );
        assert!(tuner_log
            .iter()
            .any(|l| l.starts_with("Successfully loaded external tuner plugin /opt/p/")));
        assert!(tuner_log
            .iter()
            .any(|l| l.contains("applies: 1 of 1 rules")));

        // The run: predictions recorded, the plan's path and hash, and the file round trip.
        let machine = fingerprint(&seen, &TopologyRecord::default(), 2, 1, vec!["h".into()]);
        let run = finish_run(
            &req,
            &HandModel,
            machine,
            "one process".into(),
            rows,
            tuner_log,
        );
        let record = run.options.tuner.as_ref().unwrap();
        assert_eq!(record.plan_path, "/tmp/plan.json");
        assert_eq!(record.plan_hash, "0123456789abcdef");
        let symm = run
            .rows
            .iter()
            .find(|r| r.backend == Backend::NcclSymm && r.bytes == MIB)
            .unwrap();
        assert_eq!(symm.predicted_us, Some(16.0));
        assert_eq!(
            symm.predicted_kernel.as_deref(),
            Some("AllReduce_RSxLD_AGxST")
        );
        // auto and tuned have no prediction; the pinned pair has one
        assert!(run
            .rows
            .iter()
            .filter(|r| r.pair.is_none() && r.backend == Backend::Nccl)
            .all(|r| r.predicted_us.is_none()));
        let back = VerifyRun::from_json(&run.to_json().unwrap(), "fake.json").unwrap();
        assert_eq!(back, run);

        // Scoring: tuned / auto = 25/30 and 20/40, symm / auto = 15/30 and 35/40.
        let scored = score(&run, &HandModel);
        let tuned = scored
            .comparisons
            .iter()
            .find(|c| c.label == "tuned")
            .unwrap();
        assert_eq!(tuned.sizes.len(), 2);
        let expected = (25.0f64 / 30.0 * 0.5).sqrt();
        assert!((tuned.geomean_ratio.unwrap() - expected).abs() < 1e-12);
        assert_eq!(tuned.sizes_1_16mib, 2);
        assert_eq!(tuned.worst_bytes, Some(MIB));
        assert_eq!(tuned.best_bytes, Some(2 * MIB));
        assert_eq!(tuned.sizes[1].other_ran.as_deref(), Some("Ring/LL"));
        assert_eq!(tuned.sizes[1].auto_ran.as_deref(), Some("Ring/Simple"));
        let symm = scored
            .comparisons
            .iter()
            .find(|c| c.label == "symm")
            .unwrap();
        assert_eq!(symm.worst_ratio, Some(35.0 / 40.0));
        assert_eq!(
            symm.sizes[1].other_ran.as_deref(),
            Some("classic Ring/Simple")
        );
        // the symm rows are scored predicted vs measured: (16-15)/15, (33-35)/35
        let symm_rows: Vec<_> = scored
            .rows
            .iter()
            .filter(|r| r.row.backend == Backend::NcclSymm)
            .collect();
        assert!((symm_rows[0].error_pct.unwrap() - 100.0 / 15.0).abs() < 1e-9);
        assert!((symm_rows[1].error_pct.unwrap() + 200.0 / 35.0).abs() < 1e-9);
        let summary = scored
            .summaries
            .iter()
            .find(|s| s.backend == Backend::NcclSymm)
            .unwrap();
        assert_eq!(summary.regimes[1].rows, 2); // both in 64 KiB - 16 MiB
        assert_eq!(summary.hit_rate, None); // nothing to pick among
                                            // NCCL's choice per size is the auto row's, not the tuned row's
        let verdict = scored
            .sizes
            .iter()
            .find(|v| v.backend == Backend::Nccl && v.bytes == 2 * MIB)
            .unwrap();
        assert_eq!(
            verdict.nccl_choice.unwrap().pair,
            Pair::new(Algo::Ring, Proto::Simple)
        );
    }
}
