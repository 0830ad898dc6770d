//! One `planner doctor` run: NVML health, the link tests one by one under a watchdog, then the NCCL sweep; the
//! result file rewritten after every test, so a stopped, hung or failed run keeps what it measured.
//!
//! The link tests run on a worker thread that owns the GPUs (CUDA state never crosses threads); the run waits
//! for each test at most `timeout`. A test that does not finish is a hung copy: it is marked `hung`, the tests
//! after it are not run (the GPU cannot be trusted, nor its copy cancelled), and the worker is abandoned.

use super::{
    utc_text, DoctorMachine, DoctorOptions, DoctorRun, LinkResult, LinkTest, NcclPoint, TestKind,
    TestStatus, DOCTOR_FORMAT, DOCTOR_VERSION,
};
use crate::error::Result;
use crate::probe::health::GpuHealth;
use std::sync::mpsc;
use std::time::Duration;

/// Runs link tests; lives on the worker thread.
pub(crate) trait LinkTester {
    /// Run one test (every failure is a result, not an error).
    fn run(&mut self, test: &LinkTest) -> LinkResult;
    /// GPU `gpu`'s PCIe generation and width now (right after a host copy: the link under load).
    fn pcie_now(&mut self, gpu: u32) -> Option<(u32, u32)>;
}

/// Makes the tester on the worker thread.
pub(crate) type TesterFactory = Box<dyn FnOnce() -> Result<Box<dyn LinkTester>> + Send>;

/// What the NCCL sweep found.
#[derive(Debug, Clone, Default)]
pub(crate) struct NcclSweep {
    pub(crate) points: Vec<NcclPoint>,
    pub(crate) ranks: usize,
    pub(crate) nccl_version: Option<String>,
    pub(crate) cuda_version: Option<String>,
    pub(crate) launch: String,
    pub(crate) hosts: Vec<String>,
    /// Why the sweep stopped early, if it did.
    pub(crate) stopped: Option<String>,
}

/// A doctor backend: the live machine or the fake one.
pub(crate) trait DoctorBackend {
    /// "live" or "fake (SCENARIO)".
    fn describe(&self) -> String;
    /// Every GPU's health; Err (exit 1, one line) when there is no GPU.
    fn health(&self) -> Result<Vec<GpuHealth>>;
    /// (driver version, CUDA version the driver supports).
    fn driver(&self) -> (Option<String>, Option<i32>);
    fn tester(&self, gpus: &[GpuHealth]) -> TesterFactory;
    /// The all-reduce sweep at `sizes` (NCCL's free choice). None: not run here (`why`).
    fn nccl_sweep(
        &self,
        sizes: &[u64],
        timeout: Duration,
        progress: &dyn DoctorProgress,
    ) -> Result<NcclSweep>;
}

/// Progress lines (stderr) and the result file as the run goes.
pub(crate) trait DoctorProgress {
    fn line(&self, text: &str);
    /// The run so far (to save).
    fn saved(&self, _run: &DoctorRun) {}
}

/// What the user asked for.
#[derive(Debug, Clone)]
pub(crate) struct DoctorRequest {
    pub(crate) bytes: u64,
    pub(crate) repeats: u32,
    pub(crate) timeout: Duration,
    pub(crate) nccl_sizes: Vec<u64>,
    /// Skip the link tests between GPUs (host tests only).
    pub(crate) no_peer: bool,
    /// No link tests at all (another rank of this node runs them).
    pub(crate) no_links: bool,
    pub(crate) no_nccl: bool,
    pub(crate) command: String,
}

/// Every test of `gpus`: per GPU the host tests, per ordered pair the one-way peer tests, per unordered pair
/// the two-way ones.
pub(crate) fn plan_tests(gpus: &[GpuHealth], request: &DoctorRequest) -> Vec<LinkTest> {
    let test = |test, gpu, peer| LinkTest {
        test,
        gpu,
        peer,
        bytes: request.bytes,
        repeats: request.repeats,
    };
    let mut tests = Vec::new();
    if request.no_links {
        return tests;
    }
    for g in gpus {
        for kind in TestKind::HOST {
            tests.push(test(kind, g.index, None));
        }
    }
    if request.no_peer {
        return tests;
    }
    for kind in TestKind::PEER {
        for a in gpus {
            for b in gpus {
                let wanted = if kind.is_bidirectional() {
                    a.index < b.index
                } else {
                    a.index != b.index
                };
                if wanted {
                    tests.push(test(kind, a.index, Some(b.index)));
                }
            }
        }
    }
    tests
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

struct Reply {
    result: LinkResult,
    pcie: Option<(u32, u32)>,
}

/// Run the doctor on `backend`. Returns the judged run and whether the worker was abandoned on a hung copy
/// (then the caller should exit without tearing CUDA down).
pub(crate) fn run_doctor(
    backend: &dyn DoctorBackend,
    request: &DoctorRequest,
    rates: &super::rates::Rates,
    expectation: Option<&dyn super::judge::NcclExpectation>,
    progress: &dyn DoctorProgress,
) -> Result<(DoctorRun, bool)> {
    progress.line("reading each GPU's health from NVML");
    let gpus = backend.health()?;
    let mut run = new_run(backend, request, &gpus);
    progress.saved(&run);

    let tests = plan_tests(&gpus, request);
    let hung = run_link_tests(backend, request, rates, progress, &gpus, &tests, &mut run)?;

    let stopped_early = run.stopped.is_some() || crate::measure::stop_requested().is_some();
    if !request.no_nccl && !hung && !stopped_early {
        run_nccl_sweep(backend, request, progress, &mut run);
    }
    if hung && run.stopped.is_none() {
        run.stopped = Some("a copy hung: the tests after it and the NCCL sweep did not run".into());
    }
    if let (None, Some(signal)) = (&run.stopped, crate::measure::stop_requested()) {
        run.stopped = Some(format!(
            "stopped by {}",
            crate::measure::signal_name(signal)
        ));
    }
    run.complete = run.stopped.is_none() && run.links.len() == tests.len();
    super::judge::judge_with(&mut run, rates, expectation);
    progress.saved(&run);
    Ok((run, hung))
}

/// The run before any test: the machine (its GPUs' health, the driver) and the options.
fn new_run(backend: &dyn DoctorBackend, request: &DoctorRequest, gpus: &[GpuHealth]) -> DoctorRun {
    let (driver_version, cuda_driver_version) = backend.driver();
    let created = now_unix();
    DoctorRun {
        format: DOCTOR_FORMAT.into(),
        version: DOCTOR_VERSION,
        planner_version: env!("CARGO_PKG_VERSION").into(),
        created_unix: created,
        created_utc: utc_text(created),
        machine: DoctorMachine {
            hosts: vec![crate::measure::hostname()],
            backend: backend.describe(),
            gpus: gpus.to_vec(),
            driver_version,
            cuda_driver_version,
            nccl_version: None,
            cuda_version: None,
            nccl_ranks: gpus.len(),
            launch: "one process".into(),
        },
        options: DoctorOptions {
            bytes: request.bytes,
            repeats: request.repeats,
            timeout_s: request.timeout.as_secs(),
            nccl_sizes: if request.no_nccl {
                Vec::new()
            } else {
                request.nccl_sizes.clone()
            },
            command: request.command.clone(),
        },
        links: Vec::new(),
        nccl: Vec::new(),
        complete: false,
        stopped: None,
        verdict: None,
    }
}

/// Starts the worker thread that owns the GPUs: it makes the tester, then runs each test it is sent and replies
/// (with the PCIe link under load after a successful host-to-device copy). When the tester cannot be made, every
/// test fails with the reason.
fn spawn_worker(
    factory: TesterFactory,
    worker_in: mpsc::Receiver<LinkTest>,
    worker_out: mpsc::Sender<Reply>,
) -> Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("doctor-links".into())
        .spawn(move || {
            let mut tester = match factory() {
                Ok(t) => t,
                Err(e) => {
                    // Every test fails with the reason.
                    for test in worker_in {
                        let r = LinkResult::new(test, TestStatus::Failed, Some(e.to_string()));
                        if worker_out
                            .send(Reply {
                                result: r,
                                pcie: None,
                            })
                            .is_err()
                        {
                            return;
                        }
                    }
                    return;
                }
            };
            for test in worker_in {
                let result = tester.run(&test);
                let pcie = (test.test == TestKind::HostToDeviceMemcpyCe
                    && result.status == TestStatus::Ok)
                    .then(|| tester.pcie_now(test.gpu))
                    .flatten();
                if worker_out.send(Reply { result, pcie }).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| {
            crate::error::Error::runtime(format!("cannot start the link-test thread: {e}"))
        })
}

/// Runs `tests` one by one on the worker under the watchdog, judging and saving the run after each. Returns
/// whether a copy hung (then the worker is abandoned, not joined).
fn run_link_tests(
    backend: &dyn DoctorBackend,
    request: &DoctorRequest,
    rates: &super::rates::Rates,
    progress: &dyn DoctorProgress,
    gpus: &[GpuHealth],
    tests: &[LinkTest],
    run: &mut DoctorRun,
) -> Result<bool> {
    let (to_worker, worker_in) = mpsc::channel::<LinkTest>();
    let (worker_out, from_worker) = mpsc::channel::<Reply>();
    let worker = spawn_worker(backend.tester(gpus), worker_in, worker_out)?;

    let mut hung = false;
    let mut failed_gpus: Vec<u32> = Vec::new();
    let total = tests.len();
    for (n, test) in tests.iter().enumerate() {
        let label = format!("[{}/{total}] {} {}", n + 1, test.test.name(), test.route());
        let skip = |why: String| LinkResult::new(*test, TestStatus::NotRun, Some(why));
        if hung {
            run.links.push(skip("not run: an earlier copy hung".into()));
            continue;
        }
        if let Some(signal) = crate::measure::stop_requested() {
            run.stopped = Some(format!(
                "stopped by {} after {n} of {total} link tests",
                crate::measure::signal_name(signal)
            ));
            break;
        }
        if let Some(g) = [Some(test.gpu), test.peer]
            .into_iter()
            .flatten()
            .find(|g| failed_gpus.contains(g))
        {
            run.links
                .push(skip(format!("not run: GPU {g} failed an earlier test")));
            continue;
        }
        if to_worker.send(*test).is_err() {
            run.links
                .push(skip("not run: the link-test thread ended".into()));
            continue;
        }
        // The first test also opens the GPUs (and the first SM test compiles its kernel): a minute more.
        let first = n == 0 || (test.test.is_sm() && !run.links.iter().any(|r| r.test.test.is_sm()));
        let wait = request.timeout
            + if first {
                Duration::from_secs(60)
            } else {
                Duration::ZERO
            };
        match from_worker.recv_timeout(wait) {
            Ok(reply) => {
                if reply.result.status == TestStatus::Failed {
                    failed_gpus.push(test.gpu);
                }
                record_reply(run, test, reply, &label, progress);
            }
            Err(_) => {
                hung = true;
                record_hung(run, test, wait, &label, progress);
            }
        }
        super::judge::judge(run, rates);
        progress.saved(run);
    }
    drop(to_worker);
    if !hung {
        // The tester frees its GPUs before NCCL's children start.
        let _ = worker.join();
    }
    Ok(hung)
}

/// One test's reply: the PCIe link under load onto its GPU, a progress line, the result into the run.
fn record_reply(
    run: &mut DoctorRun,
    test: &LinkTest,
    reply: Reply,
    label: &str,
    progress: &dyn DoctorProgress,
) {
    let result = reply.result;
    if let Some((gen, width)) = reply.pcie {
        if let Some(g) = run.machine.gpus.iter_mut().find(|g| g.index == test.gpu) {
            g.pcie.under_load_gen = Some(gen);
            g.pcie.under_load_width = Some(width);
        }
    }
    let shown = match result.measured_gbs() {
        Some(m) => format!("{m:.1} GB/s"),
        None => format!(
            "{:?}{}",
            result.status,
            result
                .note
                .as_ref()
                .map(|n| format!(": {n}"))
                .unwrap_or_default()
        ),
    };
    progress.line(&format!("{label}: {shown}"));
    run.links.push(result);
}

/// A test that did not complete within `wait`: a hung copy.
fn record_hung(
    run: &mut DoctorRun,
    test: &LinkTest,
    wait: Duration,
    label: &str,
    progress: &dyn DoctorProgress,
) {
    progress.line(&format!(
        "{label}: no completion within {} s: the copy hung; stopping the GPU tests",
        wait.as_secs()
    ));
    run.links.push(LinkResult::new(
        *test,
        TestStatus::Hung,
        Some(format!(
            "the watchdog gave up after {} s; the copy was not cancelled (a GPU copy cannot be)",
            wait.as_secs()
        )),
    ));
}

/// The NCCL all-reduce sweep: its points and what it learnt of the machine into the run, or every size "not
/// run" with the reason.
fn run_nccl_sweep(
    backend: &dyn DoctorBackend,
    request: &DoctorRequest,
    progress: &dyn DoctorProgress,
    run: &mut DoctorRun,
) {
    progress.line(&format!(
        "NCCL all-reduce sweep ({} sizes, NCCL's own choice of algorithm)",
        request.nccl_sizes.len()
    ));
    match backend.nccl_sweep(&request.nccl_sizes, request.timeout, progress) {
        Ok(sweep) => {
            run.nccl = sweep.points;
            run.machine.nccl_ranks = sweep.ranks.max(1);
            run.machine.nccl_version = sweep.nccl_version;
            run.machine.cuda_version = sweep.cuda_version;
            if !sweep.launch.is_empty() {
                run.machine.launch = sweep.launch;
            }
            if !sweep.hosts.is_empty() {
                run.machine.hosts = sweep.hosts;
            }
            if sweep.stopped.is_some() {
                run.stopped = sweep.stopped;
            }
        }
        Err(e) => {
            progress.line(&format!("NCCL sweep not run: {e}"));
            run.nccl = request
                .nccl_sizes
                .iter()
                .map(|&bytes| NcclPoint {
                    bytes,
                    status: "not run".into(),
                    note: Some(e.to_string()),
                    times_us: Vec::new(),
                    nccl_choice: None,
                    figure: None,
                })
                .collect();
        }
    }
}
