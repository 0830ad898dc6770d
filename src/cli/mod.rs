//! Command-line front end. Handlers stay thin: parse flags, call the stages,
//! hand the result to `report`.

pub mod source;
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
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// What the machine is: link matrix (nvidia-smi topo -m style) and NCCL's paths
    Topo(TopoArgs),
    /// List the built-in topologies
    Fixtures(FixturesArgs),
    /// Predicted vs measured for every algorithm/protocol pair, with NCCL as the reference
    Verify(Box<verify::VerifyArgs>),
    /// (internal) one NCCL job of `verify`, started by verify itself
    #[command(name = "__nccl-child", hide = true)]
    NcclChild,
    /// (internal) join a launcher rendezvous and pass an id from rank 0
    #[command(name = "__rendezvous-check", hide = true)]
    RendezvousCheck(verify::RendezvousCheckArgs),
}

#[derive(Debug, clap::Args)]
pub struct TopoArgs {
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct FixturesArgs {
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
}

pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Topo(_args) => {
            let cluster = cli.source.load()?;
            println!(
                "{}: {} GPUs x {} node(s)",
                cluster.node.source,
                cluster.gpus_per_node(),
                cluster.n_nodes
            );
            Ok(())
        }
        Command::Fixtures(_args) => {
            for f in crate::topo::fixtures::FIXTURES {
                println!("{:24} {}", f.name, f.description);
            }
            Ok(())
        }
        Command::Verify(args) => verify::run(*args, &cli.source),
        Command::NcclChild => verify::nccl_child(),
        Command::RendezvousCheck(args) => verify::rendezvous_check(args),
    }
}
