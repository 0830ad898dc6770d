//! `planner doctor`: flags, and the glue between the doctor stage and its report.

use crate::doctor::expected::ExpectedAllReduce;
use crate::doctor::fake::FakeDoctor;
use crate::doctor::judge::NcclExpectation;
use crate::doctor::live::LiveDoctor;
use crate::doctor::rates::Rates;
use crate::doctor::run::{run_doctor, DoctorBackend, DoctorProgress, DoctorRequest};
use crate::doctor::DoctorRun;
use crate::error::{Error, Result};
use crate::report::doctor as report;
use crate::units::parse_size;
use crate::verify::rendezvous::LauncherEnv;
use std::io::Write;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub(crate) struct DoctorArgs {
    /// Re-render a saved doctor result file (no GPU needed)
    #[arg(long, value_name = "FILE", conflicts_with_all = ["out", "size", "repeats", "timeout", "nccl_sizes", "no_nccl", "no_peer"])]
    pub(crate) load: Option<String>,
    /// Write the result file here, rewritten after every test (an interrupted run keeps what it measured)
    #[arg(short = 'o', long, value_name = "FILE")]
    pub(crate) out: Option<String>,
    /// Print the result as JSON (docs/json.md, `doctor`) instead of tables
    #[arg(long)]
    pub(crate) json: bool,
    /// Bytes per link-test copy
    #[arg(long, default_value = "1G", value_name = "SIZE")]
    pub(crate) size: String,
    /// Timed copies per link test (the figure is their median)
    #[arg(long, default_value_t = 5)]
    pub(crate) repeats: u32,
    /// Seconds one link test or one NCCL size may take before it counts as hung
    #[arg(long, default_value_t = 30, value_name = "S")]
    pub(crate) timeout: u64,
    /// Sizes of the NCCL all-reduce sweep, comma separated
    #[arg(long, default_value = "1M,16M,128M,1G", value_name = "LIST")]
    pub(crate) nccl_sizes: String,
    /// Skip the NCCL sweep
    #[arg(long)]
    pub(crate) no_nccl: bool,
    /// Skip the tests between GPUs (host <-> GPU only)
    #[arg(long)]
    pub(crate) no_peer: bool,
}

struct Stderr {
    out: Option<String>,
    /// The first failure to write the result file: the run goes on (its report is still printed), then exits
    /// with it (fsio's code: 1 for a failing disk).
    save_error: std::cell::RefCell<Option<Error>>,
}

impl DoctorProgress for Stderr {
    fn line(&self, text: &str) {
        eprintln!("doctor: {text}");
    }
    fn saved(&self, run: &DoctorRun) {
        if let Some(path) = &self.out {
            if let Err(e) = run.save(path) {
                let mut first = self.save_error.borrow_mut();
                if first.is_none() {
                    eprintln!("doctor: cannot write the result file (the run goes on): {e}");
                    *first = Some(e);
                }
            }
        }
    }
}

fn request_of(args: &DoctorArgs) -> Result<DoctorRequest> {
    let bytes = parse_size(&args.size)?;
    if !(1 << 20..=16 << 30).contains(&bytes) {
        return Err(Error::bad_input(format!(
            "invalid --size {}: give 1M..16G (nvbandwidth uses 512M; 1G is the default)",
            args.size
        )));
    }
    if args.repeats == 0 || args.repeats > 1000 {
        return Err(Error::bad_input(format!(
            "invalid --repeats {}: give 1..1000",
            args.repeats
        )));
    }
    if args.timeout == 0 {
        return Err(Error::bad_input(
            "invalid --timeout 0: give seconds, at least 1",
        ));
    }
    let mut nccl_sizes = Vec::new();
    for part in args
        .nccl_sizes
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let size = parse_size(part).map_err(|e| {
            Error::bad_input(format!("invalid --nccl-sizes {}: {e}", args.nccl_sizes))
        })?;
        if size < 4 {
            return Err(Error::bad_input(format!(
                "invalid --nccl-sizes {}: {part} is less than one f32",
                args.nccl_sizes
            )));
        }
        nccl_sizes.push(size);
    }
    Ok(DoctorRequest {
        bytes,
        repeats: args.repeats,
        timeout: Duration::from_secs(args.timeout),
        nccl_sizes,
        no_peer: args.no_peer,
        no_links: false,
        no_nccl: args.no_nccl,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    })
}

/// No driver, or a driver that shows no GPU: one line, exit 1.
fn require_gpu() -> Result<()> {
    let no_gpu = |why: &str| {
        Error::runtime(format!(
            "no GPU: {why}; `planner doctor` needs one (`planner doctor --load FILE` re-reads a saved run anywhere)"
        ))
    };
    crate::gpu::libs::require_driver().map_err(|e| no_gpu(e.message()))?;
    match cudarc::driver::CudaContext::device_count() {
        Ok(0) => Err(no_gpu("the CUDA driver reports 0 devices")),
        Ok(_) => Ok(()),
        Err(e) => Err(no_gpu(&format!("cuDeviceGetCount failed: {e:?}"))),
    }
}

/// GPUs of this node (1 when the driver cannot say).
fn gpus_per_node() -> usize {
    cudarc::driver::CudaContext::device_count()
        .ok()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n > 0)
        .unwrap_or(1)
}

pub(crate) fn run(args: DoctorArgs) -> Result<()> {
    let rates = Rates::built_in()?;
    let (run, hung, report_here, save_error) = match &args.load {
        Some(path) => (DoctorRun::load(path)?, false, true, None),
        None => {
            let mut request = request_of(&args)?;
            let fake = crate::measure::FakeBackend::from_env()?;
            let launcher = if fake.is_some() {
                None
            } else {
                LauncherEnv::from_env()?
            };
            let backend: Box<dyn DoctorBackend> = match fake {
                Some(_) => Box::new(FakeDoctor::from_env(rates.clone())?),
                None => {
                    require_gpu()?;
                    Box::new(LiveDoctor {
                        launcher: launcher.clone(),
                    })
                }
            };
            // Under a launcher the link tests run once per node (local rank 0); every rank joins the NCCL sweep,
            // and rank 0 reports.
            let report_here = launcher.as_ref().is_none_or(|l| l.rank == 0);
            if let Some(l) = &launcher {
                request.no_links = l.local_rank.unwrap_or(l.rank) != 0;
            }
            // A result file that cannot be written is refused before the run (a missing directory: 2).
            if let Some(path) = args.out.as_ref().filter(|_| report_here) {
                crate::fsio::check_output_path(path)?;
            }
            crate::measure::install_stop_handler();
            let progress = Stderr {
                out: args.out.clone().filter(|_| report_here),
                save_error: std::cell::RefCell::new(None),
            };
            // The expected model of this machine, for the NCCL sweep (live only: the fake machine has no fixture).
            let expected = if fake.is_none() && !request.no_nccl {
                let nodes = launcher
                    .as_ref()
                    .map(|l| l.world_size.div_ceil(gpus_per_node()))
                    .unwrap_or(1);
                let version = crate::nccl::library_version().ok();
                match ExpectedAllReduce::of_live_machine(nodes, version.as_deref()) {
                    Ok(e) => e,
                    Err(e) => {
                        eprintln!("doctor: no expected model for the NCCL sweep ({e})");
                        None
                    }
                }
            } else {
                None
            };
            let expectation = expected.as_ref().map(|e| e as &dyn NcclExpectation);
            let (run, hung) =
                run_doctor(backend.as_ref(), &request, &rates, expectation, &progress)?;
            let save_error = progress.save_error.take();
            if save_error.is_none() {
                if let Some(path) = args.out.as_ref().filter(|_| report_here) {
                    eprintln!("doctor: result file {path}");
                }
            }
            (run, hung, report_here, save_error)
        }
    };
    let code = run.verdict.as_ref().map(|v| v.exit_code()).unwrap_or(0);
    if report_here {
        let text = if args.json {
            report::render_json(&run)?
        } else {
            crate::report::text(&report::render_text(&run)).into_owned()
        };
        let mut stdout = std::io::stdout();
        let _ = writeln!(stdout, "{}", text.trim_end());
        let _ = stdout.flush();
    }
    if let Some(e) = save_error {
        if hung {
            eprintln!("planner: error: {e}");
            let _ = std::io::stderr().flush();
            // SAFETY: as below: _exit skips the CUDA driver's teardown, which would wait on the hung copy forever.
            unsafe { libc::_exit(e.exit_code()) };
        }
        return Err(e);
    }
    if hung {
        let _ = std::io::stderr().flush();
        // SAFETY: _exit ends the process at once without running atexit handlers: the CUDA driver's teardown
        // would wait on the hung copy forever. Everything worth keeping is written and flushed above.
        unsafe { libc::_exit(code.max(1)) };
    }
    // Stopped by Ctrl-C (or SIGTERM) with what it measured kept and reported: exit as the signal would, 128 + its
    // number, as verify does.
    if let Some(signal) = crate::measure::stop_requested() {
        let _ = std::io::stderr().flush();
        std::process::exit(128 + signal);
    }
    if code != 0 {
        std::process::exit(code);
    }
    Ok(())
}
