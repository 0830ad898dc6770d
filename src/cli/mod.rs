//! Command-line front end. Handlers stay thin: parse flags, call the stages,
//! hand the result to `report`. Each command takes only the flags it acts on
//! (the topology flags are flattened into the commands that read a topology).

pub(crate) mod audit;
pub mod calibrate;
pub(crate) mod channels;
pub(crate) mod check;
pub(crate) mod diff;
pub(crate) mod doctor;
pub(crate) mod expect;
pub(crate) mod env;
pub(crate) mod explain;
pub(crate) mod run;
pub mod source;
pub(crate) mod topo;
pub(crate) mod tune;
pub(crate) mod verify;

use crate::error::{Error, Result};
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "planner",
    version,
    about = "Which collective algorithm and protocol should this machine run, why, and is that true"
)]
pub struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// What the machine is: link matrix (nvidia-smi topo -m style) and NCCL's paths
    Topo(topo::TopoArgs),
    /// List the built-in topologies
    Fixtures(topo::FixturesArgs),
    /// NCCL's algorithm/protocol choice for a size, ranked with reasons; sweeps, plots, NCCL's own tables
    Explain(Box<explain::ExplainArgs>),
    /// What nccl-tests should print on this machine per collective and size: planner's expected model, with a band
    Expect(Box<expect::ExpectArgs>),
    /// Is this what the machine should deliver? nccl-tests / NCCL Inspector / verify files against the expected band, with causes
    Check(check::CheckArgs),
    /// Compare an NCCL_DEBUG=INFO log with the planner's model, cell by cell
    Audit(audit::AuditArgs),
    /// Fit the cost model to measurements of this machine (verify results, nccl-tests, NCCL Inspector); --cv checks it
    Calibrate(calibrate::CalibrateArgs),
    /// NCCL's channels: ring/tree graphs (pattern, channels, bandwidth, path types), rings and trees per rank, graph XML
    Channels(channels::ChannelsArgs),
    /// Predicted vs measured for every algorithm/protocol pair, with NCCL as the reference
    Verify(Box<verify::VerifyArgs>),
    /// (internal) one NCCL job of `verify`, started by verify itself
    #[command(name = "__nccl-child", hide = true)]
    NcclChild,
    /// (internal) join a launcher rendezvous and pass an id from rank 0
    #[command(name = "__rendezvous-check", hide = true)]
    RendezvousCheck(verify::RendezvousCheckArgs),
    /// Run one plan with planner's own kernels on the local GPUs: time, algbw, busbw, #wrong
    Run(run::RunArgs),
    /// A plan for the NCCL tuner plugin from measurements or a calibration; --show prints one
    Tune(tune::TuneArgs),
    /// What changed: two NCCL versions on this machine (--nccl-version A --against B), or two verify result files
    Diff(diff::DiffArgs),
    /// Is this machine healthy: NVML per GPU, link tests (nvbandwidth's), a short NCCL sweep, each beside its expectation
    Doctor(doctor::DoctorArgs),
    /// Shell exports that make NCCL load planner's tuner plugin with a plan: eval "$(planner env --plan plan.json)"
    Env(env::EnvArgs),
}

pub fn run(mut cli: Cli) -> Result<()> {
    // NCCL's environment is read here, once, and handed on as data (in each command's topology flags). `audit` uses
    // the log's instead, `explain` announces it after its --algo/--proto flags; the internal commands take theirs
    // from the parent.
    let announce = !matches!(cli.command, Command::Explain(_));
    if let Some(source) = cli.command.source_mut() {
        source.nccl_env = crate::nccl_env::NcclEnv::from_process()?;
        if announce {
            source.nccl_env.announce();
        }
    }
    match cli.command {
        Command::Topo(args) => topo::run_topo(&args),
        Command::Fixtures(args) => topo::run_fixtures(&args),
        Command::Explain(args) => explain::run(*args),
        Command::Expect(args) => expect::run(*args),
        Command::Check(args) => check::run(args),
        Command::Audit(args) => audit::run(args),
        Command::Calibrate(args) => calibrate::run(args),
        Command::Channels(args) => channels::run(&args),
        Command::Verify(args) => verify::run(*args),
        Command::NcclChild => verify::nccl_child(),
        Command::RendezvousCheck(args) => verify::rendezvous_check(args),
        Command::Run(args) => run::run(args),
        Command::Tune(args) => tune::run(args),
        Command::Diff(args) => diff::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Env(args) => env::run(&args),
    }
}

/// The one message `run` and `verify` give on a machine without a GPU: no usable CUDA driver, or a driver that
/// shows no device.
pub(crate) fn require_gpu(command: &str) -> Result<()> {
    let no_gpu = |why: &str| {
        Error::runtime(format!(
            "no GPU: {why}; `planner {command}` needs one (`planner explain` models without one, `planner verify --load FILE` reads saved results)"
        ))
    };
    crate::gpu::libs::require_driver().map_err(|e| no_gpu(e.message()))?;
    match cudarc::driver::CudaContext::device_count() {
        Ok(0) => Err(no_gpu("the CUDA driver reports 0 devices")),
        Ok(_) => Ok(()),
        Err(e) => Err(no_gpu(&format!("cuDeviceGetCount failed: {e:?}"))),
    }
}

/// A command-line error as one line: clap's first line (the error itself, naming the flags), without its usage
/// block; the hint says where the flags are listed.
pub fn one_line_usage_error(err: &clap::Error, args: &[String]) -> String {
    let rendered = err.render().to_string();
    // The first paragraph is the error (a conflict lists the other flags on lines of their own).
    let paragraph: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty())
        .collect();
    let joined = paragraph.join(" ");
    let first = joined.strip_prefix("error: ").unwrap_or(&joined);
    let first = if first.is_empty() {
        "invalid command line"
    } else {
        first
    };
    // clap's "to pass '--x' as a value, use '-- --x'" misleads where a command does not take the flag.
    let tips: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("tip: "))
        .filter(|t| !t.starts_with("to pass"))
        .collect();
    let first = if tips.is_empty() {
        first.to_string()
    } else {
        format!("{first}; {}", tips.join("; "))
    };
    let command = args
        .iter()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .filter(|a| Cli::command_names().contains(&a.as_str()));
    match command {
        Some(c) => format!("{first} (see `planner {c} --help`)"),
        None => format!("{first} (see `planner --help`)"),
    }
}

impl Command {
    /// The topology flags of a command that reads a topology from them (not `audit`: the log's environment rules).
    fn source_mut(&mut self) -> Option<&mut source::SourceArgs> {
        match self {
            Command::Topo(a) => Some(&mut a.source),
            Command::Explain(a) => Some(&mut a.source),
            Command::Expect(a) => Some(&mut a.source),
            Command::Calibrate(a) => Some(&mut a.source),
            Command::Channels(a) => Some(&mut a.source),
            Command::Verify(a) => Some(&mut a.source),
            Command::Run(a) => Some(&mut a.source),
            Command::Tune(a) => Some(&mut a.source),
            Command::Diff(a) => Some(&mut a.source),
            // check compares with NCCL's defaults and the files' own environment, not this shell's.
            Command::Audit(_)
            | Command::Check(_)
            | Command::Fixtures(_)
            | Command::Doctor(_)
            | Command::Env(_)
            | Command::NcclChild
            | Command::RendezvousCheck(_) => None,
        }
    }
}

impl Cli {
    fn command_names() -> Vec<&'static str> {
        vec![
            "topo",
            "fixtures",
            "explain",
            "audit",
            "check",
            "calibrate",
            "channels",
            "verify",
            "run",
            "tune",
            "diff",
            "doctor",
            "env",
        ]
    }
}
