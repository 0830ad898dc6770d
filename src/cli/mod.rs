//! Command-line front end. Handlers stay thin: parse flags, call the stages,
//! hand the result to `report`.

pub mod audit;
pub mod calibrate;
pub mod channels;
pub mod diff;
pub mod explain;
pub mod run;
pub mod source;
pub mod topo;
pub mod tune;
pub mod verify;

use crate::error::Result;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "planner",
    version,
    about = "Which collective algorithm and protocol should this machine run, why, and is that true"
)]
pub struct Cli {
    #[command(flatten)]
    pub source: source::SourceArgs,
    #[command(flatten)]
    pub graph: source::GraphArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// What the machine is: link matrix (nvidia-smi topo -m style) and NCCL's paths
    Topo(topo::TopoArgs),
    /// List the built-in topologies
    Fixtures(topo::FixturesArgs),
    /// NCCL's algorithm/protocol choice for a size, ranked with reasons; sweeps, plots, NCCL's own tables
    Explain(explain::ExplainArgs),
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
}

pub fn run(mut cli: Cli) -> Result<()> {
    // NCCL's environment is read here, once, and handed on as data. `audit` uses the log's instead, `explain`
    // announces it after its --algo/--proto flags; the internal commands take theirs from the parent.
    match &cli.command {
        Command::Fixtures(_) | Command::NcclChild | Command::RendezvousCheck(_) => {}
        command => {
            cli.source.nccl_env = crate::nccl_env::NcclEnv::from_process()?;
            if !matches!(command, Command::Audit(_) | Command::Explain(_)) {
                cli.source.nccl_env.announce();
            }
        }
    }
    match cli.command {
        Command::Topo(args) => topo::run_topo(&cli.source, &args),
        Command::Fixtures(args) => topo::run_fixtures(&args),
        Command::Explain(args) => explain::run(&cli.source, &cli.graph, args),
        Command::Audit(args) => audit::run(&cli.source, &cli.graph, args),
        Command::Calibrate(args) => calibrate::run(args, &cli.source),
        Command::Channels(args) => channels::run(&cli.source, &cli.graph, &args),
        Command::Verify(args) => verify::run(*args, &cli.source),
        Command::NcclChild => verify::nccl_child(),
        Command::RendezvousCheck(args) => verify::rendezvous_check(args),
        Command::Run(args) => run::run(args, &cli.source),
        Command::Tune(args) => tune::run(args, &cli.source),
        Command::Diff(args) => diff::run(&cli.source, &cli.graph, args),
    }
}
